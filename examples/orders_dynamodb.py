"""Orders by status on DynamoDB, in GSI mode: the hot PENDING key spread over 8 shards.

The application owns an ``orders`` table keyed by ``order_id``; a GSI ``status_shard``
indexes it by ``status_shard`` (``PENDING#3``) and ``status_sort``. New orders are
written by the application itself, with the key attributes shardex computes; status
transitions go through shardex (one conditional UpdateItem each). Then PENDING is
listed page by page and the listing is checked against a Scan of the base table.

Run it against DynamoDB Local with one command (from the repository root):

    scripts/dynamodb-local run .venv/bin/python examples/orders_dynamodb.py

or against any endpoint: ``--endpoint-url URL --region R`` (or the AWS environment).
It creates its tables (a fresh name each run) and deletes them at the end unless
``--keep``. Exit status 1 if the listing and the Scan disagree.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import uuid
from collections import Counter
from typing import Any

import shardex
from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.stores.dynamodb import DynamoDBStore
from shardex.stores.dynamodb.admin import create_gsi_table, create_meta_table, delete_table

ROUTING = Routing(overrides={"PENDING": ShardPolicy(shards=8),
                             "SHIPPED": ShardPolicy(shards=4)})
# where an order ends up: most stay PENDING (the hot key), as in a busy shop
FATE = {"PENDING": 0.70, "SHIPPED": 0.20, "DELIVERED": 0.07, "CANCELLED": 0.03}
GSI = {"gsi": "status_shard", "key_attribute": "status_shard",
       "sort_attribute": "status_sort", "id_attribute": "order_id"}


async def write_orders(index: ShardedIndex, store: DynamoDBStore, orders: int,
                       rng: random.Random) -> dict[str, str]:
    """Write ``orders`` orders as the application would, then move some on; return statuses."""
    status: dict[str, str] = {}

    async def new_order(i: int) -> None:
        order_id = f"o-{i:05d}"
        placed = f"2026-11-30T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z"
        keys = index.key_attributes("PENDING", order_id, sort=placed)
        # the application's own write: its item, plus the two key attributes
        await store.client.call("PutItem", TableName=store.table, Item={
            "order_id": {"S": order_id}, "status": {"S": "PENDING"},
            "customer": {"S": f"c-{rng.randrange(50)}"},
            "total": {"N": str(rng.randrange(500, 50_000) / 100)},
            **{name: {"S": value} for name, value in keys.items()}})
        status[order_id] = "PENDING"

    for start in range(0, orders, 50):
        await asyncio.gather(*(new_order(i) for i in range(start, min(orders, start + 50))))

    async def transition(order_id: str) -> None:
        fate = rng.choices(list(FATE), weights=list(FATE.values()))[0]
        if fate == "PENDING":
            return
        if fate == "DELIVERED":
            await index.move(order_id, old="PENDING", new="SHIPPED", attrs={"status": "SHIPPED"})
            status[order_id] = "SHIPPED"
        old = status[order_id]
        await index.move(order_id, old=old, new=fate, attrs={"status": fate})
        status[order_id] = fate

    ids = sorted(status)
    for start in range(0, len(ids), 50):
        await asyncio.gather(*(transition(order_id) for order_id in ids[start:start + 50]))
    return status


async def list_pending(index: ShardedIndex, page_size: int
                       ) -> tuple[list[shardex.Entry], int, bool]:
    """Every PENDING entry, page by page with the cursor; the pages; were reads consistent."""
    listing: list[shardex.Entry] = []
    cursor, pages, consistent = None, 0, True
    while True:
        page = await index.query("PENDING", limit=page_size, cursor=cursor)
        listing += page.items
        pages += 1
        consistent = consistent and page.consistent
        if (cursor := page.cursor) is None:
            return listing, pages, consistent


async def scan_pending(store: DynamoDBStore) -> list[tuple[str, str]]:
    """(placed_at, order_id) of every base item the GSI files under a PENDING shard.

    ``status_sort`` holds the sort value, a NUL and the order id (shardex's encoding).
    """
    found: list[tuple[str, str]] = []
    params: dict[str, Any] = {"TableName": store.table}
    while True:
        response = await store.client.call("Scan", **params)
        for item in response["Items"]:
            if item.get("status_shard", {}).get("S", "").startswith("PENDING"):
                assert item["status"]["S"] == "PENDING", item
                placed_at = item["status_sort"]["S"].partition("\x00")[0]
                found.append((placed_at, item["order_id"]["S"]))
        if "LastEvaluatedKey" not in response:
            return sorted(found)
        params["ExclusiveStartKey"] = response["LastEvaluatedKey"]


async def run(args: argparse.Namespace) -> bool:
    connection = {"region": args.region, "endpoint_url": args.endpoint_url}
    table = args.table or f"orders-{uuid.uuid4().hex[:8]}"
    await create_gsi_table(table, **GSI, **connection)
    await create_meta_table(table, **connection)
    try:
        store = DynamoDBStore(table, **GSI, **connection)
        async with ShardedIndex(store, "orders_by_status", ROUTING) as index:
            status = await write_orders(index, store, args.orders, random.Random(args.seed))
            expected = sorted(order_id for order_id, s in status.items() if s == "PENDING")
            # the GSI is eventually consistent: on DynamoDB proper, give it a moment
            for _ in range(10):
                listing, pages, consistent = await list_pending(index, args.page_size)
                scanned = await scan_pending(store)
                listed = [(e.sort, e.item_id) for e in listing]
                matches = (listed == scanned and sorted(e.item_id for e in listing) == expected)
                if matches:
                    break
                await asyncio.sleep(1)
            per_shard = Counter(e.shard_key for e in listing)
            stats = store.stats("orders_by_status")
            fates = Counter(status.values())
            print(f"table {table}: {args.orders} orders written by the application, "
                  f"{sum(n for s, n in fates.items() if s != 'PENDING')} moved on by shardex "
                  f"({', '.join(f'{s} {n}' for s, n in sorted(fates.items()))})")
            print(f"PENDING listed in {pages} pages of up to {args.page_size}: {len(listing)} "
                  f"entries over {len(per_shard)} shard keys "
                  f"({', '.join(f'{k} {n}' for k, n in sorted(per_shard.items()))})")
            print(f"Scan of the base table finds {len(scanned)} PENDING orders: the listing "
                  f"{'matches' if matches else 'DOES NOT match'} it, in (placed_at, order_id) "
                  f"order; pages say consistent={consistent} (GSI reads are eventually "
                  "consistent)")
            print(f"capacity: {stats.totals.write_units:g} write units, "
                  f"{stats.totals.read_units:g} read units, "
                  f"{stats.totals.throttles} throttles")
            return matches
    finally:
        if not args.keep:
            await delete_table(table, **connection)
            await delete_table(f"{table}-shardex", **connection)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint-url", default=os.environ.get("SHARDEX_DYNAMODB_ENDPOINT"),
                        help="DynamoDB endpoint (default: $SHARDEX_DYNAMODB_ENDPOINT).")
    parser.add_argument("--region", default=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    parser.add_argument("--table", help="Name of the orders table (default: a fresh one).")
    parser.add_argument("--orders", type=int, default=600)
    parser.add_argument("--page-size", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="Keep the tables at the end.")
    args = parser.parse_args(argv)
    try:
        return 0 if asyncio.run(run(args)) else 1
    except shardex.ShardexError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
