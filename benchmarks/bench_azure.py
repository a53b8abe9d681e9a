"""shardex's overhead on Azure Tables: ``put`` and ``query`` against raw azure-data-tables calls.

Measured in one run against one endpoint (Azurite by default):

- put: ``index.put`` of a new item (a point read of the placement, a transaction of the
  entry's two rows, the placement insert, the transaction that commits the rows)
  against (a) the same four requests written by hand with the SDK: shardex's own
  overhead; and (b) one plain ``upsert_entity`` of one row: what the cross-partition
  protocol costs over an index that keeps no placement and cannot move exactly;
- query: ``index.query(limit=100)`` over 8 shards against the same 8 ``query_entities``
  pages (the sizes shardex was seen to ask for), run concurrently and merged with
  ``heapq.merge``.

Blocks of each pair alternate so drift in the server affects both alike. Run it with:

    scripts/azurite run .venv/bin/python benchmarks/bench_azure.py

It prints wall time per operation and the ratios shardex / raw; nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import heapq
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import UpdateMode
from azure.data.tables.aio import TableClient

from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.model.entries import StoredEntry, new_token
from shardex.stores.azure import AzureTablesStore, codec, keys
from shardex.stores.azure.admin import create_table, delete_table
from shardex.stores.azure.client import TablesClient, connection_settings

SHARDS = 8
ROUTING = Routing(overrides={"PENDING": ShardPolicy(shards=SHARDS)})
ATTRS = {"total": 12.5, "customer": "c-1"}


class Recording(TablesClient):
    """The store's adapter, noting the queries while ``recording``."""

    def __init__(self, inner: TablesClient) -> None:
        self.inner, self.endpoint, self.table = inner, inner.endpoint, inner.table
        self.recording = False
        self.queries: list[dict[str, Any]] = []

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()

    async def call(self, operation: str, **params: Any) -> Any:
        if self.recording and operation == "query":
            self.queries.append(params)
        return await self.inner.call(operation, **params)


async def by_hand_put(table: TableClient, item_id: str, shard_key: str, sort: str) -> None:
    """What one put of a new item does, by hand with the SDK."""
    token = new_token()
    placement = keys.placement_partition("bench", item_id)
    with contextlib.suppress(ResourceNotFoundError):  # absent, as expected
        await table.get_entity(placement, codec.PLACEMENT_ROW)
    entry = StoredEntry(shard_key, sort, item_id, ATTRS)
    rows = codec.entry_rows(keys.entry_partition("bench", shard_key), entry, token)
    results = await table.submit_transaction([("upsert", row) for row in rows])
    await table.create_entity(codec.placement_entity(placement, item_id, 1, entry, token, ("",)))
    await table.submit_transaction([
        ("update", {"PartitionKey": row["PartitionKey"], "RowKey": row["RowKey"], "st": "c"},
         {"mode": UpdateMode.MERGE, "etag": result["etag"],
          "match_condition": MatchConditions.IfNotModified})
        for row, result in zip(rows, results, strict=True)])


async def timed(block: Callable[[int], Awaitable[None]], start: int, count: int) -> float:
    began = time.perf_counter()
    for i in range(start, start + count):
        await block(i)
    return time.perf_counter() - began


async def pair(ours: Callable[[int], Awaitable[None]], theirs: Callable[[int], Awaitable[None]],
               count: int, warmup: int) -> tuple[float, float, int]:
    await timed(ours, 10**6, warmup)
    await timed(theirs, 10**6, warmup)
    spent = [0.0, 0.0]
    block = max(1, count // 10)
    for start in range(0, count, block):
        spent[0] += await timed(ours, start, block)
        spent[1] += await timed(theirs, start, block)
    done = (count + block - 1) // block * block
    return spent[0] / done, spent[1] / done, done


async def bench(args: argparse.Namespace) -> None:
    name = f"bench{uuid.uuid4().hex[:10]}"
    await create_table(name, endpoint=args.endpoint)
    endpoint, credential = connection_settings(args.endpoint)
    recorder = Recording(AzureTablesStore(name, endpoint=args.endpoint).client)
    results: dict[str, tuple[float, float, int]] = {}
    try:
        async with TableClient(endpoint, name, credential=credential, retry_total=0) as table, \
                ShardedIndex(AzureTablesStore(name, client=recorder), "bench", ROUTING) as index:
            async def shardex_put(i: int) -> None:
                await index.put("PENDING", f"s-{i:06d}", sort=f"{i:06d}", attrs=ATTRS)

            async def hand_put(i: int) -> None:
                item_id = f"r-{i:06d}"
                await by_hand_put(table, item_id, index.routing.shard_key("PENDING", item_id),
                                  f"{i:06d}")

            async def plain_upsert(i: int) -> None:
                await table.upsert_entity({"PartitionKey": "plain", "RowKey": f"{i:06d}",
                                           **ATTRS}, mode=UpdateMode.REPLACE)

            async def shardex_query(i: int) -> None:
                assert len((await index.query("PENDING", limit=args.limit)).items) == args.limit

            tops: dict[str, int] = {}

            async def hand_query(i: int) -> None:
                if not tops:  # the pages shardex asks for in one such query
                    recorder.recording = True
                    await shardex_query(i)
                    recorder.recording = False
                    for query in recorder.queries:
                        partition = query["parameters"]["p"]
                        tops[partition] = tops.get(partition, 0) + query["top"]
                    assert len(recorder.queries) == SHARDS, "shardex refilled a shard"
                pages = await asyncio.gather(*(shard(p, n) for p, n in tops.items()))
                assert len(list(heapq.merge(*pages))[:args.limit]) == args.limit

            async def shard(partition: str, top: int) -> list[str]:
                pager = table.query_entities(
                    "PartitionKey eq @p and RowKey gt 'A' and RowKey lt 'B'",
                    parameters={"p": partition}, results_per_page=top).by_page()
                page = await pager.__anext__()
                return [entity["RowKey"] async for entity in page]

            results["put (by hand)"] = await pair(shardex_put, hand_put, args.puts, args.warmup)
            results["put (one upsert)"] = await pair(
                lambda i: shardex_put(i + 2 * 10**6), plain_upsert, args.puts, args.warmup)
            results["query"] = await pair(shardex_query, hand_query, args.queries, args.warmup)
    finally:
        await delete_table(name, endpoint=args.endpoint)

    print(f"shardex on Azure Tables against raw azure-data-tables, {endpoint}, {SHARDS} shards, "
          f"query limit {args.limit}")
    for what, (ours, theirs, done) in results.items():
        print(f"  {what:<17} shardex {1000 * ours:7.2f} ms/op   raw {1000 * theirs:7.2f} ms/op"
              f"   ratio {ours / theirs:.2f}x   ({done} ops each)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", default=os.environ.get("SHARDEX_AZURITE_ENDPOINT"))
    parser.add_argument("--puts", type=int, default=300)
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=20)
    asyncio.run(bench(parser.parse_args()))


if __name__ == "__main__":
    main()
