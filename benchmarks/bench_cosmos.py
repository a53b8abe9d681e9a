"""shardex on Cosmos DB against the SDK's own cross-partition query and a hand-written gather.

One value, ``PENDING``, spread over N=16 shard keys (16 logical partitions) in one
container, read in ``(sort, item id)`` order, measured in one run against one endpoint
(the @vercel/cosmosdb-server that scripts/cosmos starts, by default):

- first page: ``index.query("PENDING", limit=100)`` against (a) the SDK's cross-partition
  ``ORDER BY`` query over the same container (``query_items`` without a partition key, the
  asyncio client's cross-partition mode, ``max_item_count=100``), first page; and (b) a
  hand-written gather: the 16 partitions' first pages of 100 fetched concurrently and
  merged with ``heapq.merge``;
- full listing: every page of each of the three, to the end;
- put: ``index.put`` of a new item (placement read, entry upsert, placement create, the
  patch that commits the entry) against one plain ``upsert_item``.

Blocks of each pair alternate so drift in the server affects both alike. Run it with:

    scripts/cosmos run .venv/bin/python benchmarks/bench_cosmos.py

It prints wall time per operation and the ratios shardex / other; nothing is asserted.
On this server every partition lives in one process, so a cross-partition query costs
what one partition's does; on the service it fans out over physical partitions.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import os
import uuid
from typing import Any

from azure.cosmos.aio import CosmosClient

from bench_azure import pair  # the same alternating blocks, one way of timing
from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.stores.cosmos import CosmosStore, codec
from shardex.stores.cosmos.admin import create_container, delete_container
from shardex.stores.cosmos.client import client_options, close_client, connection_settings

SHARDS = 16
DATABASE = "bench"
ROUTING = Routing(overrides={"PENDING": ShardPolicy(shards=SHARDS)})
ATTRS = {"total": 12.5, "customer": "c-1"}


async def pages(pager: Any, first_only: bool) -> list[list[dict[str, Any]]]:
    out = []
    async for page in pager:
        out.append([doc async for doc in page])
        if first_only:
            break
    return out


async def bench(args: argparse.Namespace) -> None:
    name = f"bench{uuid.uuid4().hex[:10]}"
    endpoint, credential = connection_settings(args.endpoint)
    await create_container(DATABASE, name, endpoint=endpoint)
    client = CosmosClient(endpoint, credential=credential, **client_options(5.0, 30.0))
    results: dict[str, tuple[float, float, int]] = {}
    try:
        container = client.get_database_client(DATABASE).get_container_client(name)
        store = CosmosStore(DATABASE, name, endpoint=endpoint, charges="estimated")
        async with ShardedIndex(store, "bench", ROUTING) as index:
            for start in range(0, args.entries, 50):  # 50 puts at a time
                await asyncio.gather(*(
                    index.put("PENDING", f"o-{i:06d}", sort=f"{i * 7919 % args.entries:06d}",
                              attrs=ATTRS)
                    for i in range(start, min(args.entries, start + 50))))
            partitions = [codec.entry_partition("bench", f"PENDING#{k}")
                          for k in range(SHARDS)]
            where = " OR ".join(f"c.pk = @p{k}" for k in range(SHARDS))
            parameters = [{"name": f"@p{k}", "value": p} for k, p in enumerate(partitions)]

            async def shardex_listing(limit: int, first_only: bool) -> int:
                seen, cursor = 0, None
                while True:
                    page = await index.query("PENDING", limit=limit, cursor=cursor)
                    seen += len(page.items)
                    if first_only or (cursor := page.cursor) is None:
                        return seen

            async def sdk_listing(limit: int, first_only: bool) -> int:
                pager = container.query_items(
                    f"SELECT * FROM c WHERE {where} ORDER BY c.id", parameters=parameters,
                    max_item_count=limit).by_page()
                return sum(len(page) for page in await pages(pager, first_only))

            async def one_partition(partition: str, limit: int,
                                    first_only: bool) -> list[str]:
                pager = container.query_items(
                    "SELECT * FROM c WHERE c.pk = @pk ORDER BY c.id",
                    parameters=[{"name": "@pk", "value": partition}], partition_key=partition,
                    max_item_count=limit).by_page()
                return [doc["id"] for page in await pages(pager, first_only) for doc in page]

            async def gather_listing(limit: int, first_only: bool) -> int:
                shards = await asyncio.gather(*(one_partition(p, limit, first_only)
                                                for p in partitions))
                merged = list(heapq.merge(*shards))
                return len(merged[:limit] if first_only else merged)

            limit = args.limit
            for label, first in (("first page", True), ("full listing", False)):
                want = limit if first else args.entries
                for got in (await shardex_listing(limit, first), await sdk_listing(limit, first),
                            await gather_listing(limit, first)):
                    assert got == want, (label, got, want)
                count = args.pages if first else args.listings

                async def ours(_: int, first: bool = first) -> None:
                    await shardex_listing(limit, first)

                async def sdk(_: int, first: bool = first) -> None:
                    await sdk_listing(limit, first)

                async def hand(_: int, first: bool = first) -> None:
                    await gather_listing(limit, first)

                results[f"{label} vs SDK query"] = await pair(ours, sdk, count, args.warmup)
                results[f"{label} vs gather"] = await pair(ours, hand, count, args.warmup)

            async def shardex_put(i: int) -> None:
                await index.put("PENDING", f"p-{i:07d}", sort=f"{i:07d}", attrs=ATTRS)

            async def plain_upsert(i: int) -> None:
                await container.upsert_item({"id": f"u-{i:07d}", "pk": "plain", **ATTRS})

            results["put vs one upsert"] = await pair(shardex_put, plain_upsert, args.puts,
                                                      args.warmup)
    finally:
        await close_client(client)
        await delete_container(DATABASE, name, endpoint=endpoint)

    print(f"shardex on Cosmos DB, {endpoint}, one value on {SHARDS} shard keys, "
          f"{args.entries} entries, pages of {limit}")
    for what, (ours_s, theirs_s, done) in results.items():
        print(f"  {what:<26} shardex {1000 * ours_s:8.2f} ms/op   other "
              f"{1000 * theirs_s:8.2f} ms/op   ratio {ours_s / theirs_s:5.2f}x   "
              f"({done} ops each)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", default=os.environ.get("SHARDEX_COSMOS_ENDPOINT"))
    parser.add_argument("--entries", type=int, default=1600)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--listings", type=int, default=10)
    parser.add_argument("--puts", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=5)
    asyncio.run(bench(parser.parse_args()))


if __name__ == "__main__":
    main()
