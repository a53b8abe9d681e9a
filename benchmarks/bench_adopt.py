"""Adoption benchmark on DynamoDB Local: 20,000 orders adopted from a plain GSI, live.

Run: scripts/dynamodb-local run .venv/bin/python benchmarks/bench_adopt.py [--items N]

1. The backfill (``adopt run``: leased segments, a strongly consistent Scan, a
   conditional UpdateItem per item, checkpoints), its rate set far above what the
   server takes, against a hand-written backfill of an identical table (the new GSI
   built first, as ``adopt start`` builds it; the same Scan segments, an unconditional
   UpdateItem per item, nothing leased or checkpointed), both with 8 updates in flight
   per segment and 4 segments at once.
2. The whole adoption with a writer creating and moving orders throughout: ``start``
   (the GSI built), ``run``, ``verify``, ``cutover``, ``complete --drop-old-index``; the
   time of each step, the writes made meanwhile, every listing (scan, paged query,
   count of each value) checked against the writer's ground truth.
Every figure is measured in this run; ratios compare numbers from this run only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests import dynamodb_local as local
from tests.adopt_app import (
    NAME,
    Writer,
    app_client,
    check_listings,
    gsis,
    orders_table,
    store_uri,
)

from shardex import ShardedIndex, ShardPolicy
from shardex.adopt import Adopter
from shardex.stores.dynamodb import DynamoDBStore

SETS = {"PENDING": ShardPolicy(16), "SHIPPED": ShardPolicy(4)}
FAST: dict[str, Any] = {"routing_lease": 5.0, "unit_lease": 5.0, "settle": 0.5}


async def raw_backfill(table: str, segments: int, *, conditional: bool = False) -> float:
    """Seconds a hand-written backfill of ``table`` takes: Scan segments, plain updates.

    ``conditional``: each update only if the item still has the status scanned and no
    shard key yet (``adopt run``'s condition; without it, an order the application moved
    between the Scan and the update gets the shard key of its old status).

    The table first gets the GSI the backfilled attribute keys (``status-shard-index``,
    as ``adopt start`` builds it before ``adopt run``), so that each update costs the
    server what it costs the adoption: the item and its new index entry.
    """
    store = DynamoDBStore(table, region=local.REGION, endpoint_url=local.require_endpoint())
    client = store.client
    await client.open()
    await client.call(
        "UpdateTable", TableName=table,
        AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"}
                              for a in ("status_shard", "created_at")],
        GlobalSecondaryIndexUpdates=[{"Create": {
            "IndexName": "status-shard-index", "Projection": {"ProjectionType": "ALL"},
            "KeySchema": [{"AttributeName": "status_shard", "KeyType": "HASH"},
                          {"AttributeName": "created_at", "KeyType": "RANGE"}]}}])
    for _ in range(600):  # DynamoDB Local builds it at once; a minute at most
        described = await client.call("DescribeTable", TableName=table)
        if all(i["IndexStatus"] == "ACTIVE"
               for i in described["Table"]["GlobalSecondaryIndexes"]):
            break
        await asyncio.sleep(0.1)
    else:
        raise SystemExit(f"the new GSI of {table} did not become ACTIVE in a minute")

    async def segment(number: int) -> None:
        start: dict[str, Any] | None = None
        while True:
            params: dict[str, Any] = {"TableName": table, "Segment": number,
                                      "TotalSegments": segments, "Limit": 100,
                                      "ConsistentRead": True}
            if start is not None:
                params["ExclusiveStartKey"] = start
            page = await client.call("Scan", **params)
            items = page.get("Items", [])
            for i in range(0, len(items), 8):
                await asyncio.gather(*(client.call(
                    "UpdateItem", TableName=table, Key={"order_id": item["order_id"]},
                    UpdateExpression="SET status_shard = :k",
                    ExpressionAttributeValues={":k": item["status"], ":v": item["status"]},
                    ConditionExpression="#s = :v AND attribute_not_exists(status_shard)",
                    ExpressionAttributeNames={"#s": "status"})
                    if conditional else client.call(
                    "UpdateItem", TableName=table, Key={"order_id": item["order_id"]},
                    UpdateExpression="SET status_shard = :k",
                    ExpressionAttributeValues={":k": item["status"]})
                    for item in items[i:i + 8]))
            start = page.get("LastEvaluatedKey")
            if start is None:
                return

    began = time.perf_counter()
    try:
        await asyncio.gather(*(segment(n) for n in range(segments)))
    finally:
        await client.close()
    return time.perf_counter() - began


async def adopted_backfill(table: str, segments: int) -> tuple[float, int]:
    """Seconds ``adopt run`` takes on ``table`` (rate unbounded), and the items it updated."""
    async with Adopter(store_uri(table), NAME, source="status-index", attribute="status",
                       rate=1e6, workers=segments, segments=segments, **FAST) as adopter:
        await adopter.start(SETS, margin=0.0)
        await asyncio.sleep(FAST["routing_lease"])  # ready_at: the lease (margin 0)
        began = time.perf_counter()
        done = await adopter.run()
        return time.perf_counter() - began, done.updated


async def live(table: str, truth: dict[str, str]) -> dict[str, Any]:
    """The whole adoption with a live writer; the time of each step and what was checked."""
    steps: dict[str, float] = {}
    listings = 0
    uri = store_uri(table)
    async with Adopter(uri, NAME, source="status-index", attribute="status", workers=4,
                       segments=8, **FAST) as adopter:
        began = time.perf_counter()
        client = await app_client(table)
        writer = Writer(table, truth, client)
        writer.start()  # status alone, during start
        await adopter.start(SETS, margin=0.5)
        steps["start"] = time.perf_counter() - began
        async with ShardedIndex(uri, NAME, routing_ttl=0.1) as index:
            writer.adopt(index)
            try:
                for name, step in (("run", adopter.run), ("verify", adopter.verify),
                                   ("cutover", adopter.cutover),
                                   ("complete", lambda: adopter.complete(drop=True))):
                    began = time.perf_counter()
                    result = await step()
                    steps[name] = time.perf_counter() - began
                    if name == "verify":
                        assert result.clean, result
                        steps["parity entries"] = result.entries
                    async with writer.quiet():
                        await check_listings(index, truth)
                        listings += 3
            finally:
                await writer.stop()
                await client.close()
    assert "status-index" not in gsis(table)
    return {"steps": steps, "listings": listings, "writes": writer.writes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20_000)
    args = parser.parse_args()
    if not os.environ.get("SHARDEX_DYNAMODB_ENDPOINT"):
        parser.error("needs SHARDEX_DYNAMODB_ENDPOINT: run it under scripts/dynamodb-local run")
    local.require_endpoint()
    print(f"1. backfilling {args.items:,} items on DynamoDB Local, 4 segments, 8 updates in "
          "flight each")
    raw_table, _ = orders_table(args.items)
    raw = asyncio.run(raw_backfill(raw_table, 4))
    table, _ = orders_table(args.items)
    adopted, updated = asyncio.run(adopted_backfill(table, 4))
    print(f"   by hand (Scan + plain UpdateItem): {args.items / raw:,.0f} items/s "
          f"({raw:.1f} s)")
    print(f"   adopt run (leased, conditional, checkpointed): {updated / adopted:,.0f} items/s "
          f"({adopted:.1f} s, {updated:,} updated)")
    print(f"   adopt run throughput / by hand: {raw / adopted:.2f}")
    print(f"2. the whole adoption of {args.items:,} items with a live writer (rate 250 "
          "write units/s per shard key)")
    table, truth = orders_table(args.items)
    found = asyncio.run(live(table, truth))
    steps = found["steps"]
    print("   " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in steps.items()
                            if name != "parity entries"))
    print(f"   application writes meanwhile: {found['writes']:,}; listings checked: "
          f"{found['listings']} (each value, scan + paged query + count), all equal to the "
          f"ground truth; parity before cutover: {int(steps['parity entries']):,} entries, "
          "no gaps; the old GSI dropped")


if __name__ == "__main__":
    main()
