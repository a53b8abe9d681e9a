"""Core benchmark: the fan-out read path's overhead, and what sharding buys the demo.

Run: .venv/bin/python benchmarks/bench_core.py [--quick]

1. Wall time of ``ShardedIndex.query`` against the same shard queries issued directly
   on the store and merged by hand with ``heapq.merge`` (the library's overhead), on
   the memory store under virtual time, so wall time is CPU time of the code paths; the
   store's capacity is set out of the way (the ``unlimited`` profile): this measures
   code, not throttling. The first page is measured hedged (the default: each shard
   read carries a timer for its copies) and with ``hedge=None`` (as the by-hand one).
2. CPU per first page (``query(limit=100)`` over 16 shard keys) against the raw client
   making the same requests, on DynamoDB Local (aiobotocore: the Query calls shardex was
   seen to make for one such page, concurrently, merged with ``heapq.merge``, items as
   botocore returns them) and on Azurite (azure-data-tables: the same ``query_entities``
   pages, the page's 100 rows made the entries shardex's page holds, attributes' JSON
   decoded): this process's CPU time (``time.process_time``), blocks of each alternating.
   Run under ``scripts/dynamodb-local run scripts/azurite run``; a store whose endpoint
   is not set is left out (``--skip-stores`` leaves both out).
3. CPU per put (a new item) and per move (PENDING -> SHIPPED) against the raw client
   (``--writes`` items, blocks alternating): the very requests shardex made for the same
   writes (recorded on a second table, then sent by hand to the measured one: on
   DynamoDB Local the GetItem and TransactWriteItems with aiobotocore, on Azurite the
   SDK's calls with each row's ETag as this table answered it), so the ratio is
   shardex's own overhead; and "plain", the one request (two for a move across
   partitions) of an index without placements, so the gap splits into the share the
   extra requests of a fenced write cost and the share that is shardex's code.
4. The demo's accepted writes/s, sharded over unsharded, for the same seed and load, on
   the demo's table (``DEMO_TABLE``), and the share of the sharded run's writes a new
   on-demand table would accept (rate engine).
Every figure is measured in this run; ratios compare numbers from this run only.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import itertools
import json
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from operator import itemgetter
from typing import Any

import shardex
from shardex.model.entries import Position, StoredEntry
from shardex.scenarios.demo_runs import run_demo
from shardex.scenarios.orders import DEMO_TABLE, OrdersLoad, new_table_outcome
from shardex.sim.clock import run_virtual
from shardex.stores.memory import MemoryStore


async def _fill(store: MemoryStore, shards: int, entries: int) -> shardex.ShardedIndex:
    routing = shardex.Routing(overrides={"PENDING": shardex.ShardPolicy(shards=shards)})
    index = shardex.ShardedIndex(store, "bench", routing, seed=1)
    await index.open()
    for start in range(0, entries, 500):
        await asyncio.gather(*(index.put("PENDING", f"o-{i:07d}", sort=f"{i:07d}",
                                         attrs={"total": i})
                               for i in range(start, min(entries, start + 500))))
    return index


async def _raw_page(store: MemoryStore, keys: list[str], limit: int,
                    after: Position | None = None) -> list[StoredEntry]:
    """What a hand-written fan-out does: one query per shard, then a heap merge."""
    pages = await asyncio.gather(*(store.query("bench", k, after=after, descending=False,
                                               limit=limit + 1) for k in keys))
    merged = heapq.merge(*(p.entries for p in pages), key=lambda e: e.position)
    return [e for _, e in zip(range(limit), merged, strict=False)]


async def _raw_listing(store: MemoryStore, keys: list[str], limit: int) -> int:
    """Every entry, a page at a time, each page fanned out and merged by hand."""
    count, after = 0, None
    while True:
        page = await _raw_page(store, keys, limit, after)
        count += len(page)
        if len(page) < limit:
            return count
        after = page[-1].position


async def _listing(index: shardex.ShardedIndex, limit: int) -> int:
    count, cursor = 0, None
    while True:
        page = await index.query("PENDING", limit=limit, cursor=cursor)
        count += len(page.items)
        if (cursor := page.cursor) is None:
            return count


def measure_query_overhead(shards: int, entries: int,
                           repeats: int) -> list[tuple[str, float, float]]:
    async def body() -> list[tuple[str, float, float]]:
        store = MemoryStore(seed=1, profile="unlimited")
        index = await _fill(store, shards, entries)
        keys = index.routing.read_keys("PENDING")
        # the same index without hedging: the by-hand fan-out does not hedge either
        unhedged = shardex.ShardedIndex(store, "bench", index.routing, seed=1, hedge=None)
        await unhedged.open()
        out = []
        cases: list[tuple[str, int, Callable[[], Awaitable[object]],
                          Callable[[], Awaitable[object]]]] = [
            ("first page of 100", repeats * 10, lambda: index.query("PENDING", limit=100),
             lambda: _raw_page(store, keys, 100)),
            ("first page of 100, hedge=None", repeats * 10,
             lambda: unhedged.query("PENDING", limit=100), lambda: _raw_page(store, keys, 100)),
            (f"full listing of {entries:,} (pages of 1000)", repeats,
             lambda: _listing(index, 1000), lambda: _raw_listing(store, keys, 1000)),
        ]
        for label, repeats_here, ours, raw in cases:
            best_ours = best_raw = float("inf")
            for _ in range(3):  # best of three, alternating, against noise
                start = time.perf_counter()
                for _ in range(repeats_here):
                    await ours()
                best_ours = min(best_ours, time.perf_counter() - start)
                start = time.perf_counter()
                for _ in range(repeats_here):
                    await raw()
                best_raw = min(best_raw, time.perf_counter() - start)
            out.append((label, best_ours / repeats_here, best_raw / repeats_here))
        await index.close()
        await unhedged.close()
        return out

    return run_virtual(body())


FIRST_SHARDS = 16
_first = itemgetter(0)
FIRST_ROUTING = shardex.Routing(overrides={"PENDING": shardex.ShardPolicy(shards=FIRST_SHARDS)})


async def _cpu_pair(ours: Callable[[], Awaitable[object]], raw: Callable[[], Awaitable[object]],
                    pages: int) -> tuple[float, float]:
    """CPU seconds per call of each, over ``pages`` calls in alternating blocks of ten."""
    for call in (ours, raw):  # warm-up
        for _ in range(5):
            await call()
    spent = [0.0, 0.0]
    for _ in range(max(1, pages // 10)):
        for i, call in enumerate((ours, raw)):
            began = time.process_time()
            for _ in range(10):
                await call()
            spent[i] += time.process_time() - began
    done = max(1, pages // 10) * 10
    return spent[0] / done, spent[1] / done


async def _first_pages(index: shardex.ShardedIndex, raw: Callable[[], Awaitable[object]],
                       pages: int) -> tuple[float, float, float]:
    """CPU per first page, shardex's and the raw client's, and the share of shardex's
    shard requests that were hedged copies (requests the raw client does not make)."""
    index.store.reset_stats()
    ours, theirs = await _cpu_pair(lambda: index.query("PENDING", limit=100), raw, pages)
    totals = index.store.stats("bench").totals
    return ours, theirs, totals.hedges_sent / max(1, totals.read_requests)


async def _fill_first(index: shardex.ShardedIndex, entries: int) -> None:
    for start in range(0, entries, 50):
        await asyncio.gather(*(index.put("PENDING", f"o-{i:06d}", sort=f"{i:06d}",
                                         attrs={"total": i, "customer": f"c-{i % 97}"})
                               for i in range(start, min(entries, start + 50))))


async def first_page_on_dynamodb(endpoint: str, region: str, entries: int,
                                 pages: int) -> tuple[float, float, float]:
    """CPU per first page of 100: shardex, and the raw aiobotocore client's same Query calls."""
    from aiobotocore.config import AioConfig
    from aiobotocore.session import get_session

    from bench_dynamodb import Recording
    from shardex.stores.dynamodb import DynamoDBStore
    from shardex.stores.dynamodb.admin import create_index_table, delete_table
    from shardex.stores.dynamodb.client import adapt_client

    connection = {"region": region, "endpoint_url": endpoint}
    table = f"bench-core-{uuid.uuid4().hex[:8]}"
    await create_index_table(table, **connection)
    recorder = Recording(adapt_client(**connection))
    config = AioConfig(retries={"total_max_attempts": 1, "mode": "standard"})
    try:
        async with get_session().create_client("dynamodb", region_name=region,
                                               endpoint_url=endpoint, config=config) as client, \
                shardex.ShardedIndex(DynamoDBStore(table, client=recorder), "bench",
                                     FIRST_ROUTING) as index:
            await _fill_first(index, entries)
            recorder.recording = True
            await index.query("PENDING", limit=100)
            recorder.recording = False
            queries = [dict(q) for q in recorder.queries]

            async def shard(params: dict[str, Any]) -> list[tuple[str, ...]]:
                response = await client.query(**params)
                return [(item["sk"]["S"], item["id"]["S"]) for item in response["Items"]]

            async def raw() -> list[tuple[str, ...]]:
                found = await asyncio.gather(*(shard(q) for q in queries))
                return list(heapq.merge(*found))[:100]

            assert len(await raw()) == 100
            return await _first_pages(index, raw, pages)
    finally:
        await delete_table(table, **connection)


async def first_page_on_azure(endpoint: str, entries: int,
                              pages: int) -> tuple[float, float, float]:
    """CPU per first page of 100: shardex, and the raw azure-data-tables client's same pages."""
    from azure.data.tables.aio import TableClient

    from bench_azure import Recording
    from shardex.stores.azure import AzureTablesStore
    from shardex.stores.azure.admin import create_table, delete_table
    from shardex.stores.azure.client import connection_settings

    name = f"benchcore{uuid.uuid4().hex[:10]}"
    await create_table(name, endpoint=endpoint)
    url, credential = connection_settings(endpoint)
    recorder = Recording(AzureTablesStore(name, endpoint=endpoint).client)
    try:
        async with TableClient(url, name, credential=credential, retry_total=0) as table, \
                shardex.ShardedIndex(AzureTablesStore(name, client=recorder), "bench",
                                     FIRST_ROUTING) as index:
            await _fill_first(index, entries)
            recorder.recording = True
            await index.query("PENDING", limit=100)
            recorder.recording = False
            queries = [dict(q) for q in recorder.queries]

            async def shard(query: dict[str, Any]) -> list[tuple[str, Any]]:
                pager = table.query_entities(query["filter"], parameters=query["parameters"],
                                             results_per_page=query["top"]).by_page()
                page = await pager.__anext__()
                return [(row["RowKey"], row) async for row in page]

            async def raw() -> list[StoredEntry]:
                # the page a caller gets: the first 100 rows made entries (their JSON
                # attributes decoded), as shardex's page hands them
                found = await asyncio.gather(*(shard(q) for q in queries))
                return [StoredEntry(row["k"], row["s"], row["id"], json.loads(row["a0"]),
                                    int(row["v"]))
                        for _, row in itertools.islice(heapq.merge(*found, key=_first), 100)]

            assert len(await raw()) == 100
            return await _first_pages(index, raw, pages)
    finally:
        await delete_table(name, endpoint=endpoint)


def print_first_pages(args: argparse.Namespace) -> None:
    print(f"CPU per first page of 100 over {FIRST_SHARDS} shard keys against the raw client's "
          "same requests (this process's CPU time)")
    print(f"  {'store':28} {'shardex':>10} {'raw':>10} {'ratio':>7} {'hedged copies':>14}")
    runs: list[tuple[str, Callable[[], Awaitable[tuple[float, float, float]]]]] = []
    if args.endpoint_url:
        runs.append(("DynamoDB Local (aiobotocore)", lambda: first_page_on_dynamodb(
            args.endpoint_url, args.region, args.first_entries, args.first_pages)))
    if args.azure_endpoint:
        runs.append(("Azurite (azure-data-tables)", lambda: first_page_on_azure(
            args.azure_endpoint, args.first_entries, args.first_pages)))
    for label, run in runs:
        ours, raw, copies = asyncio.run(run())
        print(f"  {label:28} {ours * 1000:8.2f}ms {raw * 1000:8.2f}ms {ours / raw:7.2f} "
              f"{100 * copies:13.1f}%")
    if not runs:
        print("  (no store endpoint set: run under scripts/dynamodb-local run scripts/azurite run)")


# -- CPU per put and move against the raw client ----------------------------------------

WRITE_ROUTING = shardex.Routing(overrides={
    "PENDING": shardex.ShardPolicy(shards=FIRST_SHARDS), "SHIPPED": shardex.ShardPolicy(shards=4)})
WRITE_ATTRS = {"total": 12, "customer": "c-1"}


class _Taped:
    """A store client adapter that keeps each call's operation, parameters and answer
    (mixed into the store's adapter class, which the store checks for)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.endpoint = inner, inner.endpoint
        self.table = getattr(inner, "table", "")
        self.tape: list[tuple[str, dict[str, Any], Any]] = []

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()

    async def call(self, operation: str, **params: Any) -> Any:
        answer = await self.inner.call(operation, **params)
        self.tape.append((operation, params, answer))
        return answer


async def _taped_writes(index: shardex.ShardedIndex, taped: _Taped, items: list[str]
                        ) -> tuple[list[list[tuple[str, dict[str, Any], Any]]], ...]:
    """Each item's put and then its move, made by ``index``: the requests each sent."""
    puts, moves = [], []
    for i, item in enumerate(items):
        taped.tape = []
        await index.put("PENDING", item, sort=f"{i:06d}", attrs=WRITE_ATTRS)
        puts.append(taped.tape)
        taped.tape = []
        await index.move(item, old="PENDING", new="SHIPPED", sort=f"{i:06d}+")
        moves.append(taped.tape)
    return puts, moves


async def _cpu_blocks(calls: Sequence[Callable[[int], Awaitable[object]]],
                      count: int) -> list[float]:
    """CPU seconds per call of each of ``calls``, each called with ``0..count-1``, in
    alternating blocks of ten (so drift in the machine or the server affects all alike)."""
    spent = [0.0] * len(calls)
    for start in range(0, count, 10):
        for i, call in enumerate(calls):
            began = time.process_time()
            for n in range(start, min(count, start + 10)):
                await call(n)
            spent[i] += time.process_time() - began
    return [each / count for each in spent]


async def writes_on_dynamodb(endpoint: str, region: str, count: int) -> dict[str, float]:
    """CPU per put and move: shardex, the raw aiobotocore client making the very requests
    shardex made for the same writes (recorded on a second table and sent to the first),
    and the one request a hand-written index without placements would send."""
    from aiobotocore.config import AioConfig
    from aiobotocore.session import get_session

    from shardex.stores.dynamodb import DynamoDBStore
    from shardex.stores.dynamodb.admin import create_index_table, delete_table
    from shardex.stores.dynamodb.client import DynamoDBClient, adapt_client

    connection = {"region": region, "endpoint_url": endpoint}
    table, shadow = (f"bench-core-{uuid.uuid4().hex[:8]}" for _ in range(2))
    for name in (table, shadow):
        await create_index_table(name, **connection)
    class Taped(_Taped, DynamoDBClient):
        pass

    taped = Taped(adapt_client(**connection))
    config = AioConfig(retries={"total_max_attempts": 1, "mode": "standard"})
    items = [f"o-{i:06d}" for i in range(count)]
    try:
        async with get_session().create_client("dynamodb", region_name=region,
                                               endpoint_url=endpoint, config=config) as client, \
                shardex.ShardedIndex(DynamoDBStore(shadow, client=taped), "bench",
                                     WRITE_ROUTING) as recorder, \
                shardex.ShardedIndex(DynamoDBStore(table, **connection), "bench",
                                     WRITE_ROUTING) as index:
            puts, moves = await _taped_writes(recorder, taped, [f"r{i[1:]}" for i in items])
            # the same requests for the raw client, on the measured table (a request token
            # of their own: DynamoDB refuses one token for two different requests)
            text = json.dumps([[[(op, params) for op, params, _ in calls] for calls in writes]
                               for writes in (puts, moves)]).replace(shadow, table)
            for old in {p["ClientRequestToken"] for _, p, _ in
                        (c for calls in puts + moves for c in calls) if "ClientRequestToken" in p}:
                text = text.replace(old, uuid.uuid4().hex)
            raw_puts, raw_moves = json.loads(text)
            methods = {"GetItem": client.get_item,
                       "TransactWriteItems": client.transact_write_items}

            async def replay(calls: list[Any]) -> None:
                for operation, params in calls:
                    await methods[operation](**params)

            async def one_put(i: int) -> None:  # the entry row alone, no placement
                await client.put_item(TableName=table, Item={
                    "pk": {"S": "plain"}, "sk": {"S": f"{i:06d}\x00p-{i:06d}"},
                    "id": {"S": f"p-{i:06d}"}, "attrs": {"M": {
                        "total": {"N": "12"}, "customer": {"S": "c-1"}}}})

            async def one_move(i: int) -> None:  # the two rows, in one transaction
                await client.transact_write_items(TransactItems=[
                    {"Delete": {"TableName": table, "Key": {
                        "pk": {"S": "plain"}, "sk": {"S": f"{i:06d}\x00p-{i:06d}"}}}},
                    {"Put": {"TableName": table, "Item": {
                        "pk": {"S": "plain2"}, "sk": {"S": f"{i:06d}\x00p-{i:06d}"},
                        "id": {"S": f"p-{i:06d}"}, "attrs": {"M": {
                            "total": {"N": "12"}, "customer": {"S": "c-1"}}}}}}])

            return await _write_figures(
                index, items, lambda i: replay(raw_puts[i]), lambda i: replay(raw_moves[i]),
                one_put, one_move, count)
    finally:
        for name in (table, shadow):
            await delete_table(name, **connection)


async def writes_on_azure(endpoint: str, count: int) -> dict[str, float]:
    """CPU per put and move: shardex, the raw azure-data-tables client making the very
    requests shardex made for the same writes (recorded on a second table, their ETags
    taken from the answers of this one), and what an index without placements sends."""
    from azure.core import MatchConditions
    from azure.core.exceptions import ResourceNotFoundError
    from azure.data.tables import UpdateMode
    from azure.data.tables.aio import TableClient

    from shardex.stores.azure import AzureTablesStore
    from shardex.stores.azure.admin import create_table, delete_table
    from shardex.stores.azure.client import TablesClient, connection_settings

    table, shadow = (f"benchcore{uuid.uuid4().hex[:10]}" for _ in range(2))
    for name in (table, shadow):
        await create_table(name, endpoint=endpoint)
    url, credential = connection_settings(endpoint)
    class Taped(_Taped, TablesClient):
        pass

    taped = Taped(AzureTablesStore(shadow, endpoint=endpoint).client)
    items = [f"o-{i:06d}" for i in range(count)]
    try:
        async with TableClient(url, table, credential=credential, retry_total=0) as sdk, \
                shardex.ShardedIndex(AzureTablesStore(shadow, client=taped), "bench",
                                     WRITE_ROUTING) as recorder, \
                shardex.ShardedIndex(AzureTablesStore(table, endpoint=endpoint), "bench",
                                     WRITE_ROUTING) as index:
            puts, moves = await _taped_writes(recorder, taped, [f"r{i[1:]}" for i in items])
            merge, replace = UpdateMode.MERGE, UpdateMode.REPLACE
            if_match = MatchConditions.IfNotModified

            def options(etag: str | None, **more: Any) -> dict[str, Any]:
                return more if etag is None else {"etag": etag, "match_condition": if_match,
                                                  **more}

            async def replay(calls: list[tuple[str, dict[str, Any], Any]]) -> None:
                # each row's ETag as this table answered it, sent where shardex sent one
                etags: dict[tuple[str, str], str] = {}

                def row(entity: dict[str, Any]) -> tuple[str, str]:
                    return entity["PartitionKey"], entity["RowKey"]

                for operation, params, _ in calls:
                    if operation == "get":
                        key = (params["partition"], params["row"])
                        try:
                            found = await sdk.get_entity(*key, select=params.get("select"))
                        except ResourceNotFoundError:
                            continue
                        etags[key] = found.metadata["etag"]
                    elif operation == "create":
                        entity = params["entity"]
                        etags[row(entity)] = (await sdk.create_entity(entity))["etag"]
                    elif operation == "update":
                        entity = params["entity"]
                        etags[row(entity)] = (await sdk.update_entity(entity, **options(
                            params.get("etag") and etags[row(entity)],
                            mode=merge if params.get("merge", True) else replace)))["etag"]
                    elif operation == "delete":
                        key = (params["partition"], params["row"])
                        await sdk.delete_entity(*key, **options(params.get("etag")
                                                                and etags[key]))
                    else:
                        batch = params["operations"]
                        results = await sdk.submit_transaction([
                            ("update" if kind == "merge" else kind, entity,
                             options(etag and etags[row(entity)],
                                     **({"mode": merge} if kind == "merge" else {})))
                            for kind, entity, etag in batch])
                        for (_, entity, _), result in zip(batch, results, strict=True):
                            if result.get("etag"):
                                etags[row(entity)] = result["etag"]

            async def one_put(i: int) -> None:  # the entry row alone, no placement
                await sdk.upsert_entity({"PartitionKey": "plain", "RowKey": f"{i:06d}!p-{i:06d}",
                                         "id": f"p-{i:06d}", **WRITE_ATTRS}, mode=replace)

            async def one_move(i: int) -> None:  # two partitions: a delete and an upsert
                await sdk.delete_entity("plain", f"{i:06d}!p-{i:06d}")
                await sdk.upsert_entity({"PartitionKey": "plain2",
                                         "RowKey": f"{i:06d}!p-{i:06d}", "id": f"p-{i:06d}",
                                         **WRITE_ATTRS}, mode=replace)

            return await _write_figures(
                index, items, lambda i: replay(puts[i]), lambda i: replay(moves[i]),
                one_put, one_move, count)
    finally:
        for name in (table, shadow):
            await delete_table(name, endpoint=endpoint)


async def _write_figures(index: shardex.ShardedIndex, items: list[str],
                         raw_put: Callable[[int], Awaitable[None]],
                         raw_move: Callable[[int], Awaitable[None]],
                         one_put: Callable[[int], Awaitable[None]],
                         one_move: Callable[[int], Awaitable[None]],
                         count: int) -> dict[str, float]:
    """CPU per put and per move of shardex against the raw client's same requests, then
    against the one request (or two) that an index without placements sends."""
    async def put(i: int) -> None:
        await index.put("PENDING", items[i], sort=f"{i:06d}", attrs=WRITE_ATTRS)

    async def move(i: int) -> None:
        await index.move(items[i], old="PENDING", new="SHIPPED", sort=f"{i:06d}+")

    figures = dict(zip(("put", "put raw", "put one"),
                       await _cpu_blocks((put, raw_put, one_put), count), strict=True))
    figures.update(zip(("move", "move raw", "move one"),
                       await _cpu_blocks((move, raw_move, one_move), count), strict=True))
    return figures


def print_writes(args: argparse.Namespace) -> None:
    print(f"CPU per write against the raw client (this process's CPU time, {args.writes} "
          "new items put, then moved PENDING -> SHIPPED; raw: the very requests shardex "
          "made, sent by hand; plain: an index without placements)")
    print(f"  {'store':28} {'op':5} {'shardex':>9} {'raw':>9} {'ratio':>6} {'plain':>9} "
          f"{'gap: requests / overhead':>26}")
    runs: list[tuple[str, Callable[[], Awaitable[dict[str, float]]]]] = []
    if args.endpoint_url:
        runs.append(("DynamoDB Local (aiobotocore)", lambda: writes_on_dynamodb(
            args.endpoint_url, args.region, args.writes)))
    if args.azure_endpoint:
        runs.append(("Azurite (azure-data-tables)", lambda: writes_on_azure(
            args.azure_endpoint, args.writes)))
    for label, run in runs:
        got = asyncio.run(run())
        for op in ("put", "move"):
            ours, raw, one = got[op], got[f"{op} raw"], got[f"{op} one"]
            gap = max(ours - one, 1e-12)
            split = f"{100 * (raw - one) / gap:.0f}% / {100 * (ours - raw) / gap:.0f}%"
            print(f"  {label:28} {op:5} {ours * 1000:7.3f}ms {raw * 1000:7.3f}ms "
                  f"{ours / raw:6.2f} {one * 1000:7.3f}ms {split:>26}")
    if not runs:
        print("  (no store endpoint set: run under scripts/dynamodb-local run scripts/azurite run)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--endpoint-url", default=os.environ.get("SHARDEX_DYNAMODB_ENDPOINT"))
    parser.add_argument("--azure-endpoint", default=os.environ.get("SHARDEX_AZURITE_ENDPOINT"))
    parser.add_argument("--region", default=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    parser.add_argument("--first-entries", type=int, default=1600)
    parser.add_argument("--first-pages", type=int, default=200)
    parser.add_argument("--writes", type=int, default=200, help="items put, then moved")
    parser.add_argument("--skip-stores", action="store_true")
    parser.add_argument("--skip-demo", action="store_true")
    args = parser.parse_args()
    if not args.skip_stores:
        print_writes(args)
        print_first_pages(args)
    entries, repeats = (4000, 2) if args.quick else (20_000, 5)
    print(f"fan-out read overhead: memory store, 16 shards, {entries:,} entries, "
          "virtual time (wall time = CPU time)")
    print(f"  {'case':44} {'shardex':>10} {'by hand':>10} {'ratio':>7}")
    for label, ours, raw in measure_query_overhead(16, entries, repeats):
        print(f"  {label:44} {ours * 1000:8.2f}ms {raw * 1000:8.2f}ms {ours / raw:7.2f}")
    if args.skip_demo:
        return
    load = OrdersLoad(duration=4.0 if args.quick else 10.0)
    start = time.perf_counter()
    runs = run_demo(load, seed=1)
    took = time.perf_counter() - start
    unsharded, sharded = (r.summary() for r in runs)
    print(f"demo ({load.duration:g} virtual s per layout, {took:.1f}s wall for both, table "
          f"{dict(DEMO_TABLE)}):")
    for run in (unsharded, sharded):
        print(f"  {run['layout']:10} accepted {run['accepted_writes_per_s']:8,.0f} writes/s of "
              f"{run['offered_writes_per_s']:,.0f} offered, throttled "
              f"{100 * run['throttled_ratio']:.1f}%")
    ratio = sharded["accepted_writes_per_s"] / unsharded["accepted_writes_per_s"]
    print(f"  accepted-write ratio sharded/unsharded: {ratio:.2f}")
    check = new_table_outcome(load, runs[-1].routing)
    print(f"  sharded, rate engine: {check.asked_write_units_per_s:,.0f} write units/s asked; "
          f"accepted {100 * check.demo_table:.1f}% on the demo's table, "
          f"{100 * check.new_table:.1f}% on a new on-demand table, "
          f"{100 * check.warm_unsplit:.1f}% warmed but not split")


if __name__ == "__main__":
    main()
