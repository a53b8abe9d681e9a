"""shardex's overhead on DynamoDB: ``put`` and ``query`` against the same raw aiobotocore calls.

Measured in one run against one endpoint (DynamoDB Local by default):

- put: ``index.put`` (a GetItem of the placement, then one TransactWriteItems) against
  the same GetItem and TransactWriteItems written by hand;
- query: ``index.query(limit=100)`` over 8 shards against the same 8 Query calls (with
  the Limits shardex was seen to use), run concurrently and merged with ``heapq.merge``.

Blocks of the two alternate so drift in the server affects both alike. Run it with:

    scripts/dynamodb-local run .venv/bin/python benchmarks/bench_dynamodb.py

It prints wall time per operation and the ratio shardex / raw; nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from aiobotocore.config import AioConfig
from aiobotocore.session import get_session

from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.stores.dynamodb import DynamoDBStore
from shardex.stores.dynamodb.admin import create_index_table, delete_table
from shardex.stores.dynamodb.client import DynamoDBClient, adapt_client

SHARDS = 8
ROUTING = Routing(overrides={"PENDING": ShardPolicy(shards=SHARDS)})


class Recording(DynamoDBClient):
    """The store's aiobotocore adapter, noting the Query calls while ``recording``."""

    def __init__(self, inner: DynamoDBClient) -> None:
        self.inner = inner
        self.endpoint = inner.endpoint
        self.recording = False
        self.queries: list[dict[str, Any]] = []

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()

    async def call(self, operation: str, **params: Any) -> dict[str, Any]:
        if self.recording and operation == "Query":
            self.queries.append(params)
        return await self.inner.call(operation, **params)


async def raw_put(client: Any, table: str, item_id: str, shard_key: str, sort: str,
                  attrs: dict[str, Any]) -> None:
    """What one put does, by hand: read the placement, then one transaction."""
    await client.get_item(TableName=table, ConsistentRead=True,
                          Key={"pk": {"S": f"#placement#{item_id}"}, "sk": {"S": "#"}})
    await client.transact_write_items(TransactItems=[
        {"Put": {"TableName": table, "ConditionExpression": "attribute_not_exists(#v)",
                 "ExpressionAttributeNames": {"#v": "v"},
                 "Item": {"pk": {"S": f"#placement#{item_id}"}, "sk": {"S": "#"},
                          "v": {"N": "1"}, "key": {"S": shard_key}, "sort": {"S": sort},
                          "ev": {"N": "1"}, "attrs": {"M": attrs}}}},
        {"Put": {"TableName": table,
                 "Item": {"pk": {"S": shard_key}, "sk": {"S": f"{sort}\x00{item_id}"},
                          "id": {"S": item_id}, "v": {"N": "1"}, "attrs": {"M": attrs}}}},
    ])


async def raw_query(client: Any, table: str, limits: dict[str, int],
                    limit: int) -> list[tuple[str, ...]]:
    """What one query does, by hand: the same Query per shard, merged by (sort, item id)."""
    async def shard(shard_key: str, per_shard: int) -> list[tuple[str, ...]]:
        response = await client.query(
            TableName=table, KeyConditionExpression="pk = :k", ConsistentRead=True,
            ExpressionAttributeValues={":k": {"S": shard_key}}, Limit=per_shard)
        return [tuple(item["sk"]["S"].split("\x00", 1)) for item in response["Items"]]

    pages = await asyncio.gather(*(shard(k, n) for k, n in limits.items()))
    return list(heapq.merge(*pages))[:limit]


async def timed(block: Callable[[int], Awaitable[None]], start: int, count: int) -> float:
    began = time.perf_counter()
    for i in range(start, start + count):
        await block(i)
    return time.perf_counter() - began


async def bench(args: argparse.Namespace) -> None:
    connection = {"region": args.region, "endpoint_url": args.endpoint_url}
    table = f"bench-{uuid.uuid4().hex[:8]}"
    await create_index_table(table, **connection)
    config = AioConfig(retries={"total_max_attempts": 1, "mode": "standard"})
    recorder = Recording(adapt_client(**connection))
    try:
        async with get_session().create_client("dynamodb", region_name=args.region,
                                               endpoint_url=args.endpoint_url,
                                               config=config) as client, \
                ShardedIndex(DynamoDBStore(table, client=recorder), "bench", ROUTING) as index:
            attrs = {"total": {"N": "12.5"}, "customer": {"S": "c-1"}}

            async def shardex_put(i: int) -> None:
                await index.put("PENDING", f"s-{i:06d}", sort=f"{i:06d}",
                                attrs={"total": 12.5, "customer": "c-1"})

            async def by_hand_put(i: int) -> None:
                item_id = f"r-{i:06d}"
                await raw_put(client, table, item_id,
                              index.routing.shard_key("PENDING", item_id), f"{i:06d}", attrs)

            async def shardex_query(i: int) -> None:
                assert len((await index.query("PENDING", limit=args.limit)).items) == args.limit

            limits: dict[str, int] = {}

            async def by_hand_query(i: int) -> None:
                if not limits:  # the Query calls shardex makes for one such page
                    recorder.recording = True
                    await shardex_query(i)
                    recorder.recording = False
                    for query in recorder.queries:
                        shard_key = query["ExpressionAttributeValues"][":k"]["S"]
                        limits[shard_key] = limits.get(shard_key, 0) + query["Limit"]
                    assert len(recorder.queries) == SHARDS, "shardex refilled a shard"
                assert len(await raw_query(client, table, limits, args.limit)) == args.limit

            results: dict[str, dict[str, float]] = {}
            for name, ours, theirs, count in (
                    ("put", shardex_put, by_hand_put, args.puts),
                    ("query", shardex_query, by_hand_query, args.queries)):
                await timed(ours, 10**6, args.warmup)
                await timed(theirs, 10**6, args.warmup)
                spent = {"shardex": 0.0, "raw": 0.0}
                block = max(1, count // 10)
                for start in range(0, count, block):
                    spent["shardex"] += await timed(ours, start, block)
                    spent["raw"] += await timed(theirs, start, block)
                done = (count + block - 1) // block * block
                results[name] = {who: seconds / done for who, seconds in spent.items()}
                results[name]["count"] = done
    finally:
        await delete_table(table, **connection)

    print(f"shardex overhead against raw aiobotocore, {args.endpoint_url or 'AWS'}, "
          f"{SHARDS} shards, query limit {args.limit}")
    for name, figures in results.items():
        ratio = figures["shardex"] / figures["raw"]
        print(f"  {name:<5}  shardex {1000 * figures['shardex']:7.2f} ms/op   "
              f"raw {1000 * figures['raw']:7.2f} ms/op   ratio {ratio:.2f}x   "
              f"({int(figures['count'])} ops each)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint-url", default=os.environ.get("SHARDEX_DYNAMODB_ENDPOINT"))
    parser.add_argument("--region", default=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    parser.add_argument("--puts", type=int, default=400)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=20)
    asyncio.run(bench(parser.parse_args()))


if __name__ == "__main__":
    main()
