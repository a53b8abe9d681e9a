"""Listings against the gather that reads every shard at once, under request latency; the tail.

Run it (every part; DynamoDB Local and Azurite started and stopped around it):

    scripts/dynamodb-local run scripts/azurite run \\
        .venv/bin/python benchmarks/bench_reads.py --latency 0,20,50

``--latency`` gives each request that many more milliseconds: on memory:// as its
latency (virtual time), and on DynamoDB Local and Azurite through a proxy that holds
each request that long (``latency_proxy.py``, a process of its own).

1. **memory://, virtual time**: 20,000 entries of ~1 KB on 16 shard keys, every request
   taking exactly the latency (plus 0.01 ms a KB). Time is only round trips and
   transfer here, so the ratios show how many round trips a listing waits for against
   the gather; units are the store's. A model, free of the CPU noise of a shared machine.
2. **Peers, on DynamoDB Local** (GSI mode, eventually consistent reads): 20,000 PENDING
   orders of about 1 KB on 16 shard keys. Each approach lists every PENDING order, and
   reads the first 100 by ``created_at``; time and CPU are the median of ``--runs``
   rounds (each round runs every approach once, so a busy machine weighs on all alike),
   CPU is this process's (``time.process_time``: the client's, not the server's or the
   proxy's), the read units are what DynamoDB reported (``ReturnConsumedCapacity``) for
   the shard queries, and every listing is checked against the ids loaded:

   - *one page per shard*: the common JavaScript fan-out (``Promise.all`` of one Query
     per shard key, ``flatMap``, sort), which ignores ``LastEvaluatedKey``;
   - *sequential loop*: each shard key in turn, followed to its end, then sorted;
   - *gather and sort*: every shard key concurrently, each followed to its end, sorted,
     items decoded as shardex decodes them: the correct hand-rolled baseline the ratios
     are taken against;
   - *gather, raw items*: the same requests with the raw aiobotocore client, items left
     as botocore returns them (nothing decoded): the raw client's own CPU;
   - *shardex scan* (arrival order) and *shardex query* + cursor (ordered, pages of
     1,000 and of 100).
3. **Azurite**: ``--azure-orders`` entries on 16 shard keys, listed by shardex (pages of
   1,000) against the raw azure-data-tables client making the same queries (every shard's
   RowKey range, concurrently, all pages, ``query_entities``), each row made into the entry
   a caller of shardex gets (sort, id, version, its attributes' JSON decoded), sorted:
   time and CPU per entry. "ids only" is the same reads keeping each row's id alone.
4. **Tail, on memory://** under virtual time, latency median 4 ms and p99 40 ms: the
   first page of 100 over N shard keys (N in 1, 8, 16, 64, 256), p50/p99 over
   ``--reads`` reads (ten times as many for N=1, fewer for 8 and 256), with hedging
   off and with the default adaptive hedging. "x 1 key" is against N=1 unhedged (one
   key: what a reader waited before sharding), "x hedged" against N=1 hedged (one key
   read by the same hedged client); "extra" is hedged copies per shard read;
   "model" is the p99 the latency model itself allows, computed: the slowest of N
   requests, each given one copy at the hedging quantile's delay when hedged, with no
   budget or queue in the way (the best one copy per slow request can do). Last, per
   N, what the model allows within the hedging budget: the best p99 against one hedged
   key when copies go, at a delay, to requests still out, and the extra requests a
   1.2x p99 takes.

Ratios compare figures of this run only; nothing here is asserted in a test.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import json
import math
import os
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from operator import itemgetter
from statistics import NormalDist
from typing import Any

from latency_proxy import proxied
from shardex import HedgePolicy, RetryPolicy, Routing, ShardedIndex, ShardPolicy
from shardex.capacity import entry_bytes
from shardex.fanout.merge import share
from shardex.hedging import Hedger
from shardex.model.entries import StoredEntry
from shardex.sim.clock import run_virtual
from shardex.sim.latency import LatencyModel
from shardex.stores.dynamodb.codec import from_attributes
from shardex.stores.memory import MemoryStore

Row = tuple[str, str, dict[str, Any]]  # encoded sort, item id, attributes
GSI: dict[str, Any] = {"gsi": "by_status", "key_attribute": "status_shard",
                       "sort_attribute": "status_sort", "id_attribute": "order_id"}
PAGE = 1000
FIRST = 100
SMALL_PAGE = 100


@dataclass
class Outcome:
    """One approach's figures: median seconds, read units, CPU seconds and what it returned."""

    seconds: float
    units: float
    found: int
    complete: bool
    ordered: bool
    cpu: float = 0.0


def _row(name: str, got: Outcome, base: Outcome, want: int, cpu: bool = True) -> str:
    missing = "" if got.complete else f"  INCOMPLETE: {100 * (1 - got.found / want):.0f}% missing"
    line = (f"    {name:34} {1000 * got.seconds:7.0f}ms {got.seconds / base.seconds:5.2f}x "
            f"{got.units:9,.0f} {got.units / base.units:5.2f}x")
    if cpu:
        line += (f" {1e6 * got.cpu / max(1, got.found):6.1f}us {got.cpu / base.cpu:5.2f}x")
    return line + f"  {got.found:,}{missing}"


# -- part 1: memory://, the round trips a listing waits for ----------------------------------


def on_memory(latency_ms: float, entries: int, shards: int) -> dict[str, Outcome]:
    """Gather, listings and scan of ``entries`` entries on memory:// at a fixed latency."""
    async def body() -> dict[str, Outcome]:
        fixed = max(latency_ms, 1e-6)
        store = MemoryStore(seed=5, profile="unlimited", latency_median_ms=fixed,
                            latency_p99_ms=fixed)
        routing = Routing(overrides={"PENDING": ShardPolicy(shards=shards)})
        async with ShardedIndex(store, "reads", routing, hedge=None, seed=1) as index:
            per_key: Counter[str] = Counter()
            for i in range(entries):
                entry = StoredEntry(routing.shard_key("PENDING", f"o-{i:07d}"), f"{i:07d}",
                                    f"o-{i:07d}", {"pad": "x" * 960})
                store._state("reads", entry.shard_key, 0.0).add(entry, entry_bytes(entry))
                per_key[entry.shard_key] += 1
            keys = index.routing.read_keys("PENDING")
            loop = asyncio.get_running_loop()

            async def whole(key: str) -> list[StoredEntry]:
                found, after = [], None
                while True:
                    page = await store.query("reads", key, after=after, descending=False,
                                             limit=PAGE)
                    found += page.entries
                    if (after := page.resume) is None:
                        return found

            async def gather() -> list[str]:
                shards_read = await asyncio.gather(*(whole(key) for key in keys))
                return [e.item_id for e in sorted((e for s in shards_read for e in s),
                                                  key=lambda e: e.position)]

            async def listing(limit: int) -> list[str]:
                ids: list[str] = []
                cursor = None
                while True:
                    page = await index.query("PENDING", limit=limit, cursor=cursor)
                    ids += [e.item_id for e in page.items]
                    if (cursor := page.cursor) is None:
                        return ids

            async def pages(limit: int) -> list[str]:
                return [e.item_id async for page in index.pages("PENDING", limit=limit)
                        for e in page.items]

            async def scan() -> list[str]:
                return sorted([e.item_id async for e in index.scan("PENDING")])

            truth = [f"o-{i:07d}" for i in range(entries)]
            out: dict[str, Outcome] = {}
            for name, read in (("gather and sort (baseline)", gather),
                               (f"shardex query, pages of {PAGE:,}", lambda: listing(PAGE)),
                               (f"shardex query, pages of {SMALL_PAGE}",
                                lambda: listing(SMALL_PAGE)),
                               (f"shardex pages(), pages of {PAGE:,}", lambda: pages(PAGE)),
                               (f"shardex pages(), pages of {SMALL_PAGE}",
                                lambda: pages(SMALL_PAGE)),
                               ("shardex scan (arrival order)", scan)):
                store.reset_stats()
                began = loop.time()
                ids = await read()
                took = loop.time() - began
                units = store.stats("reads").totals.read_units
                out[name] = Outcome(took, units, len(ids), ids == truth, ids == truth)
            gather = out["gather and sort (baseline)"]
            for limit in (PAGE, SMALL_PAGE):
                extra = _first_page_round_trips(per_key, limit, store.capabilities.max_page)
                out[f"  floor, pages of {limit:,}"] = dataclasses.replace(
                    gather, seconds=gather.seconds + extra * latency_ms / 1000)
        return out

    return run_virtual(body())


def _first_page_round_trips(per_key: Counter[str], limit: int, max_page: int) -> int:
    """Round trips a listing in pages of ``limit`` waits for beyond the gather's, at least.

    Its first page asks each shard only for its share of the page (``share``), so that a
    caller who reads one page pays for one; each shard's rest then takes requests of at
    most ``max_page`` one after another, as the gather's do. Whatever it reads ahead,
    the listing is this many round trips behind (one whenever the share does not cover
    what a shard's last store page would have been short of).
    """
    first = share(limit, len(per_key), max_page)
    listed = max(1 + math.ceil(max(0, n - first) / max_page) for n in per_key.values())
    gathered = max(math.ceil(n / max_page) for n in per_key.values())
    return listed - gathered


def print_memory(args: argparse.Namespace) -> None:
    print(f"memory:// (virtual time): {args.orders:,} entries of ~1 KB on {args.shards} shard "
          f"keys, every request taking the latency given (plus 0.01 ms a KB); \"floor\": "
          f"the gather plus the round trips any listing whose first page reads only its "
          f"share of each shard waits for beyond it")
    for latency in args.latency:
        rows = on_memory(latency, args.orders, args.shards)
        base = rows["gather and sort (baseline)"]
        print(f"  latency {latency:g} ms: list everything")
        print(f"    {'approach':34} {'time':>9} {'x':>6} {'units':>9} {'x':>6}  entries")
        for name, got in rows.items():
            print(_row(name, got, base, args.orders, cpu=False))


# -- part 2: the peers on DynamoDB Local -------------------------------------------------------


class Peers:
    """The hand-rolled approaches, on one aiobotocore client, counting consumed capacity."""

    def __init__(self, client: Any, table: str, keys: list[str]) -> None:
        self.client = client
        self.table = table
        self.keys = keys
        self.units = 0.0

    async def page(self, key: str, start: dict[str, Any] | None, limit: int | None = None,
                   decode: bool = True) -> tuple[list[Row], Any]:
        params: dict[str, Any] = {
            "TableName": self.table, "IndexName": GSI["gsi"],
            "KeyConditionExpression": "#k = :k", "ExpressionAttributeNames": {"#k": GSI[
                "key_attribute"]},
            "ExpressionAttributeValues": {":k": {"S": key}}, "ReturnConsumedCapacity": "TOTAL"}
        if start is not None:
            params["ExclusiveStartKey"] = start
        if limit is not None:
            params["Limit"] = limit
        response = await self.client.query(**params)
        self.units += float(response["ConsumedCapacity"]["CapacityUnits"])
        # decoded as shardex decodes them, so the figures compare the ways of reading
        rows = [(item[GSI["sort_attribute"]]["S"], item[GSI["id_attribute"]]["S"],
                 from_attributes(item) if decode else item) for item in response["Items"]]
        return rows, response.get("LastEvaluatedKey")

    async def whole(self, key: str, decode: bool = True) -> list[Row]:
        rows, last = await self.page(key, None, decode=decode)
        while last is not None:
            more, last = await self.page(key, last, decode=decode)
            rows += more
        return rows

    async def one_page_each(self) -> list[Row]:
        pages = await asyncio.gather(*(self.page(key, None) for key in self.keys))
        return sorted((row for rows, _ in pages for row in rows), key=itemgetter(0))

    async def sequential(self) -> list[Row]:
        rows: list[Row] = []
        for key in self.keys:
            rows += await self.whole(key)
        return sorted(rows, key=itemgetter(0))

    async def gather(self, decode: bool = True) -> list[Row]:
        shards = await asyncio.gather(*(self.whole(key, decode) for key in self.keys))
        return sorted((row for rows in shards for row in rows), key=itemgetter(0))


def _shard_units(index: ShardedIndex) -> float:
    stats = index.store.stats()
    return sum(stats.by_key[k].read_units for k in stats.shard_keys())


async def _load(client: Any, table: str, index: ShardedIndex, orders: int,
                size: int) -> set[str]:
    """Write ``orders`` PENDING orders of about ``size`` bytes, as an application would."""
    ids = [f"ORD-{i:07d}" for i in range(orders)]
    filler = "x" * max(0, size - 160)

    routing = index.routing  # one copy: a long load on a busy machine outlives its lease

    def item(i: int, order_id: str) -> dict[str, Any]:
        created = f"2026-11-30T05:{i // 6000 % 60:02d}:{i // 100 % 60:02d}.{i % 100:02d}Z"
        keys = index.store.key_attributes(routing.shard_key("PENDING", order_id), created,
                                          order_id)
        return {"order_id": {"S": order_id}, "status": {"S": "PENDING"},
                "total": {"N": str(1000 + i % 9000)}, "customer": {"S": f"C-{i % 977}"},
                "note": {"S": filler}, **{k: {"S": v} for k, v in keys.items()}}

    async def batch(chunk: list[tuple[int, str]]) -> None:
        pending = [{"PutRequest": {"Item": item(i, order_id)}} for i, order_id in chunk]
        while pending:
            answer = await client.batch_write_item(RequestItems={table: pending})
            pending = answer.get("UnprocessedItems", {}).get(table, [])

    chunks = [list(enumerate(ids))[s:s + 25] for s in range(0, orders, 25)]
    for start in range(0, len(chunks), 16):
        await asyncio.gather(*(batch(c) for c in chunks[start:start + 16]))
    return set(ids)


Read = Callable[[], Awaitable[tuple[list[str], float]]]


async def _medians(runs: int, reads: list[Read]) -> list[tuple[float, float, float, list[str]]]:
    """Median seconds, units and CPU seconds of each read over ``runs`` rounds, its result.

    One warm-up round first; each round runs every read once, so drift in a shared
    machine weighs on all of them alike.
    """
    times: list[list[float]] = [[] for _ in reads]
    units: list[list[float]] = [[] for _ in reads]
    cpus: list[list[float]] = [[] for _ in reads]
    found: list[list[str]] = [[] for _ in reads]
    for round_ in range(runs + 1):
        for i, read in enumerate(reads):
            began, cpu = time.perf_counter(), time.process_time()
            found[i], used = await read()
            if round_:
                times[i].append(time.perf_counter() - began)
                cpus[i].append(time.process_time() - cpu)
                units[i].append(used)
    return [(statistics.median(t), statistics.median(u), statistics.median(c), f)
            for t, u, c, f in zip(times, units, cpus, found, strict=True)]


async def _listing(index: ShardedIndex, limit: int) -> list[str]:
    ids: list[str] = []
    cursor = None
    while True:
        page = await index.query("PENDING", limit=limit, cursor=cursor)
        ids += [e.item_id for e in page.items]
        if (cursor := page.cursor) is None:
            return ids


async def _paged(index: ShardedIndex, limit: int) -> list[str]:
    return [e.item_id async for page in index.pages("PENDING", limit=limit)
            for e in page.items]


async def peers_on_dynamodb(args: argparse.Namespace
                            ) -> dict[float, dict[str, dict[str, Outcome]]]:
    from aiobotocore.config import AioConfig
    from aiobotocore.session import get_session

    from shardex.stores.dynamodb import DynamoDBStore
    from shardex.stores.dynamodb.admin import create_gsi_table, create_meta_table, delete_table

    connection: dict[str, Any] = {"region": args.region, "endpoint_url": args.endpoint_url}
    table = f"bench-reads-{uuid.uuid4().hex[:8]}"
    await create_gsi_table(table, **GSI, **connection)
    await create_meta_table(table, **connection)
    config = AioConfig(retries={"total_max_attempts": 1, "mode": "standard"},
                       max_pool_connections=64)
    routing = Routing(overrides={"PENDING": ShardPolicy(shards=args.shards)})
    results: dict[float, dict[str, dict[str, Outcome]]] = {}
    try:
        session = get_session()
        async with session.create_client("dynamodb", region_name=args.region,
                                         endpoint_url=args.endpoint_url,
                                         config=config) as client, \
                ShardedIndex(DynamoDBStore(table, **GSI, **connection), "orders_by_status",
                             routing) as index:
            truth = sorted(await _load(client, table, index, args.orders, args.item_bytes))
        for latency in args.latency:
            with proxied(args.endpoint_url, latency / 1000) as url:
                results[latency] = await _peers(args, session, config, table, routing, url,
                                                truth)
    finally:
        await delete_table(table, **connection)
        await delete_table(f"{table}-shardex", **connection)
    return results


async def _peers(args: argparse.Namespace, session: Any, config: Any, table: str,
                 routing: Routing, url: str, truth: list[str]) -> dict[str, dict[str, Outcome]]:
    """Every approach, against the endpoint ``url`` (DynamoDB Local or its proxy)."""
    from shardex.stores.dynamodb import DynamoDBStore

    results: dict[str, dict[str, Outcome]] = {"list": {}, "first": {}}
    connection: dict[str, Any] = {"region": args.region, "endpoint_url": url}
    async with session.create_client("dynamodb", region_name=args.region, endpoint_url=url,
                                     config=config) as client:
        store = DynamoDBStore(table, **GSI, **connection)
        async with ShardedIndex(store, "orders_by_status", routing) as index:
            peers = Peers(client, table, index.routing.read_keys("PENDING"))

            def by_hand(read: Callable[[], Awaitable[list[Row]]], first: bool) -> Read:
                async def run() -> tuple[list[str], float]:
                    peers.units = 0.0
                    rows = await read()
                    ids = [item_id for _, item_id, _ in rows]
                    return (ids[:FIRST] if first else ids), peers.units
                return run

            def ours(read: Callable[[], Awaitable[list[str]]]) -> Read:
                async def run() -> tuple[list[str], float]:
                    store.reset_stats()
                    return await read(), _shard_units(index)
                return run

            async def scan() -> list[str]:
                return [e.item_id async for e in index.scan("PENDING")]

            async def first_page() -> list[str]:
                return [e.item_id for e in (await index.query("PENDING", limit=FIRST)).items]

            approaches: list[tuple[str, str, Read]] = [
                ("list", "one page per shard (JS fan-out)", by_hand(peers.one_page_each, False)),
                ("list", "sequential per-shard loop", by_hand(peers.sequential, False)),
                ("list", "gather and sort (baseline)", by_hand(peers.gather, False)),
                ("list", "gather, raw items (raw client)",
                 by_hand(lambda: peers.gather(decode=False), False)),
                ("list", "shardex scan (arrival order)", ours(scan)),
                ("list", f"shardex query, pages of {PAGE:,}", ours(lambda: _listing(index, PAGE))),
                ("list", f"shardex query, pages of {SMALL_PAGE}",
                 ours(lambda: _listing(index, SMALL_PAGE))),
                ("list", f"shardex pages(), pages of {PAGE:,}", ours(lambda: _paged(index, PAGE))),
                ("list", f"shardex pages(), pages of {SMALL_PAGE}",
                 ours(lambda: _paged(index, SMALL_PAGE))),
                ("first", "one page per shard (JS fan-out)", by_hand(peers.one_page_each, True)),
                ("first", "gather and sort (baseline)", by_hand(peers.gather, True)),
                ("first", "shardex query", ours(first_page)),
            ]
            # created_at follows the id, so the ids in order are the truth in order
            measured = await _medians(args.runs, [read for _, _, read in approaches])
            for (kind, name, _), (seconds, units, cpu, found) in zip(approaches, measured,
                                                                     strict=True):
                want = truth[:FIRST] if kind == "first" else truth
                results[kind][name] = Outcome(seconds, units, len(found),
                                              complete=sorted(found) == want,
                                              ordered=found == want, cpu=cpu)
    return results


def print_peers(results: dict[float, dict[str, dict[str, Outcome]]],
                args: argparse.Namespace) -> None:
    print(f"peers on DynamoDB Local (GSI mode): {args.orders:,} PENDING orders of "
          f"~{args.item_bytes} B on {args.shards} shard keys; median of {args.runs} runs; "
          "CPU: this process's, per entry returned")
    for latency, by_kind in results.items():
        for kind, title in (("list", "list all PENDING"), ("first", f"first {FIRST} by "
                                                                   "created_at")):
            rows = by_kind[kind]
            base = rows["gather and sort (baseline)"]
            print(f"  +{latency:g} ms a request: {title}")
            print(f"    {'approach':34} {'time':>9} {'x':>6} {'units':>9} {'x':>6} "
                  f"{'CPU':>8} {'x':>6}  entries")
            for name, got in rows.items():
                print(_row(name, got, base, FIRST if kind == "first" else args.orders))


# -- part 3: Azurite ----------------------------------------------------------------------------


async def listing_on_azure(args: argparse.Namespace) -> dict[float, dict[str, Outcome]]:
    """shardex's listing and scan against the raw SDK's queries, at each latency."""
    from shardex.stores.azure import AzureTablesStore
    from shardex.stores.azure.admin import create_table, delete_table

    name = f"benchreads{uuid.uuid4().hex[:10]}"
    await create_table(name, endpoint=args.azure_endpoint)
    routing = Routing(overrides={"PENDING": ShardPolicy(shards=args.shards)})
    truth = [f"o-{i:07d}" for i in range(args.azure_orders)]
    results: dict[float, dict[str, Outcome]] = {}
    try:
        async with ShardedIndex(AzureTablesStore(name, endpoint=args.azure_endpoint),
                                "orders", routing,
                                retry=RetryPolicy(attempts=8, deadline=60.0)) as index:
            # a busy Azurite drops connections now and then: a put that did not apply
            # says so (Unavailable) and the retry policy sends it again
            for start in range(0, len(truth), 16):
                await asyncio.gather(*(index.put("PENDING", item_id, sort=item_id[2:], attrs={
                    "total": 1000 + i, "note": "x" * max(0, args.item_bytes - 200)})
                    for i, item_id in enumerate(truth[start:start + 16], start)))
        for latency in args.latency:
            with proxied(args.azure_endpoint, latency / 1000) as url:
                results[latency] = await _azure_at(args, name, routing, url, truth)
    finally:
        await delete_table(name, endpoint=args.azure_endpoint)
    return results


async def _azure_at(args: argparse.Namespace, name: str, routing: Routing, url: str,
                    truth: list[str]) -> dict[str, Outcome]:
    """The raw SDK's queries, shardex's listing and scan, against ``url`` (Azurite or proxy)."""
    from azure.data.tables.aio import TableClient

    from shardex.stores.azure import AzureTablesStore, keys
    from shardex.stores.azure.client import connection_settings

    endpoint, credential = connection_settings(url)
    async with TableClient(endpoint, name, credential=credential, retry_total=0) as table, \
            ShardedIndex(AzureTablesStore(name, endpoint=url), "orders", routing) as index:
        low, high = keys.position_bounds(None, descending=False)
        partitions = [keys.entry_partition("orders", key)
                      for key in index.routing.read_keys("PENDING")]

        async def whole(partition: str, decode: bool) -> list[tuple[str, Any]]:
            pages = table.query_entities(
                "PartitionKey eq @p and RowKey gt @lo and RowKey lt @hi",
                parameters={"p": partition, "lo": low, "hi": high},
                results_per_page=PAGE).by_page()
            if not decode:
                return [(row["RowKey"], row["id"]) async for page in pages async for row in page]
            # the entry a caller of shardex gets: its sort, id, version and attributes
            return [(row["RowKey"], StoredEntry(row["k"], row["s"], row["id"],
                                                json.loads(row["a0"]), int(row["v"])))
                    async for page in pages async for row in page]

        def raw(decode: bool) -> Read:
            async def read() -> tuple[list[str], float]:
                shards = await asyncio.gather(*(whole(p, decode) for p in partitions))
                rows = sorted((r for s in shards for r in s), key=itemgetter(0))
                return [e.item_id if decode else e for _, e in rows], 0.0
            return read

        async def ours() -> tuple[list[str], float]:
            return await _listing(index, PAGE), 0.0

        async def paged() -> tuple[list[str], float]:
            return await _paged(index, PAGE), 0.0

        async def scan() -> tuple[list[str], float]:
            return sorted([e.item_id async for e in index.scan("PENDING")]), 0.0

        measured = await _medians(args.runs, [raw(True), raw(False), ours, paged, scan])
    return {label: Outcome(seconds, 1.0, len(found), sorted(found) == truth, found == truth,
                           cpu=cpu)
            for label, (seconds, _, cpu, found) in zip(
                ("raw SDK, every shard's pages (baseline)", "raw SDK, ids only, no entries",
                 f"shardex query, pages of {PAGE:,}",
                 f"shardex pages(), pages of {PAGE:,}", "shardex scan (arrival order)"),
                measured, strict=True)}


def print_azure(results: dict[float, dict[str, Outcome]], args: argparse.Namespace) -> None:
    print(f"Azurite: {args.azure_orders:,} entries of ~{args.item_bytes} B on {args.shards} "
          f"shard keys, listed whole; median of {args.runs} runs; CPU per entry returned")
    for latency, rows in results.items():
        base = next(iter(rows.values()))
        print(f"  +{latency:g} ms a request")
        print(f"    {'approach':40} {'time':>9} {'x':>6} {'CPU':>8} {'x':>6}  entries")
        for name, got in rows.items():
            missing = "" if got.complete else "  INCOMPLETE"
            print(f"    {name:40} {1000 * got.seconds:7.0f}ms {got.seconds / base.seconds:5.2f}x "
                  f"{1e6 * got.cpu / max(1, got.found):6.1f}us {got.cpu / base.cpu:5.2f}x  "
                  f"{got.found:,}{missing}")


# -- part 4: the tail on memory:// -----------------------------------------------------------

MEDIAN_MS, P99_MS = 4.0, 40.0
_MODEL = LatencyModel(MEDIAN_MS, P99_MS, 0.0)  # the store's latency, for the model's figures


def tail_on_memory(shards: int, hedge: HedgePolicy | None, reads: int,
                   entries: int) -> tuple[float, float, float]:
    """p50 and p99 seconds of a first page of 100, and hedge copies per shard read."""
    async def body() -> tuple[float, float, float]:
        store = MemoryStore(seed=11, latency_median_ms=MEDIAN_MS, latency_p99_ms=P99_MS,
                            profile="unlimited")
        routing = Routing(overrides={"PENDING": ShardPolicy(shards=shards)})
        async with ShardedIndex(store, "tail", routing, hedge=hedge, seed=3) as index:
            await _bulk(store, index, entries)
            loop = asyncio.get_running_loop()
            for _ in range(20):  # warm-up: the adaptive delay needs samples
                await index.query("PENDING", limit=FIRST)
            store.reset_stats()
            took = []
            for _ in range(reads):
                began = loop.time()
                await index.query("PENDING", limit=FIRST)
                took.append(loop.time() - began)
            totals = store.stats("tail").totals
        took.sort()
        extra = totals.hedges_sent / max(1, totals.read_requests - totals.hedges_sent)
        return took[len(took) // 2], took[math.ceil(0.99 * len(took)) - 1], extra

    return run_virtual(body())


async def _bulk(store: MemoryStore, index: ShardedIndex, entries: int) -> None:
    """Put ``entries`` entries straight into the store: reads are what is measured."""
    routing = index.routing
    for start in range(0, entries, 500):
        await asyncio.gather(*(
            store.place("tail", f"o-{i:07d}", StoredEntry(
                routing.shard_key("PENDING", f"o-{i:07d}"), f"{i:07d}", f"o-{i:07d}",
                {"total": i}), version=1, expected=None)
            for i in range(start, min(entries, start + 500))))


@functools.cache
def _log_latency(model: LatencyModel) -> NormalDist:
    return NormalDist(math.log(model.median_ms / 1000), model.sigma)


def copy_times(policy: HedgePolicy | None, quantile: float | None = None,
               model: LatencyModel = _MODEL) -> list[float]:
    """When a request of the latency ``model`` still out gets its copies under ``policy``
    (its delay at the model's ``quantile``, by default the policy's own), in seconds."""
    if policy is None:
        return []
    delay = model.quantile(Hedger(policy).quantile if quantile is None else quantile)
    return [delay * (1 + k * policy.spacing) for k in range(policy.max_hedges)]


def _late(t: float, sends: list[float], model: LatencyModel) -> float:
    """P(one request, with copies sent at ``sends`` while all are out, answers after t)."""
    log_latency = _log_latency(model)
    chance = 1.0
    for sent in (0.0, *sends):
        if t > sent:
            chance *= 1.0 - log_latency.cdf(math.log(t - sent))
    return chance


def model_extra(sends: list[float], model: LatencyModel = _MODEL) -> float:
    """Copies per request: each is sent only if the request and its copies are all out."""
    return sum(_late(sent, sends[:k], model) for k, sent in enumerate(sends))


def slowest(shards: int, q: float, sends: list[float], model: LatencyModel = _MODEL) -> float:
    """The ``q`` quantile of the slowest of ``shards`` requests of the latency ``model``,
    in seconds, each request still out at a time of ``sends`` given a copy then (as a
    HedgePolicy sends them, ``copy_times``), with no budget or queue in the way: the best
    those copies can do."""
    low, high = 1e-4, 10.0
    for _ in range(60):
        mid = (low + high) / 2
        if 1 - (1 - _late(mid, sends, model)) ** shards > 1 - q:
            low = mid
        else:
            high = mid
    return high


def model_p99(shards: int, policy: HedgePolicy | None, quantile: float | None = None) -> float:
    """The p99 of the slowest of ``shards`` requests of the tail's latency model, copies
    at the policy's delay (or the model's ``quantile``) and after (``slowest``)."""
    return slowest(shards, 0.99, copy_times(policy, quantile))


def budget_for(shards: int, ratio: float, policy: HedgePolicy) -> tuple[float, float, float]:
    """What the latency model allows at ``shards`` keys against one hedged key.

    Copies go to requests still out at a delay (the only thing a client can go by); the
    earlier the delay, the more copies. Returns the ratio of the slowest of ``shards``
    (p99) to one key under ``policy`` with the first copy at the earliest delay within
    ``policy.budget`` extra requests, and the least extra requests (per request) and
    the delay's quantile at which the ratio is at most ``ratio``.
    """
    yardstick = model_p99(1, policy)
    quantiles = [1 - i / 1000 for i in range(1, 1000)]  # later delays first
    within = [q for q in quantiles if model_extra(copy_times(policy, q)) <= policy.budget]
    best = model_p99(shards, policy, min(within)) / yardstick
    for q in quantiles:
        if model_p99(shards, policy, q) <= ratio * yardstick:
            return best, model_extra(copy_times(policy, q)), q
    return best, math.inf, 0.0


def print_tail(args: argparse.Namespace) -> None:
    adaptive = HedgePolicy()
    quantile = Hedger(adaptive).quantile
    print(f"tail on memory:// (virtual time, latency median {MEDIAN_MS:g} ms, p99 "
          f"{P99_MS:g} ms): first page of {FIRST}; the ratio is against one key unhedged; "
          f"'model' is the p99 the latency model allows with a copy at its "
          f"p{100 * quantile:g} and up to {adaptive.max_hedges - 1} more "
          f"{adaptive.spacing:g} x that delay apart (no budget, no queue)")
    print(f"    {'N':>4} {'hedging':9} {'reads':>6} {'p50':>8} {'p99':>8} {'x 1 key':>8} "
          f"{'x hedged':>8} {'extra':>6} {'model':>8}")
    base = hedged_base = None
    for shards in args.tail_shards:
        # one key is the baseline and cheap to read: many reads, for a steady p99; the
        # goal's widths (16, 64) get the full count, the others fewer, for time
        reads = {1: 10 * args.reads, 16: args.reads, 64: args.reads}.get(
            shards, max(250, args.reads // (2 if shards <= 64 else 8)))
        for label, hedge in (("off", None), ("adaptive", adaptive)):
            p50, p99, extra = tail_on_memory(shards, hedge, reads, max(4000, 40 * shards))
            base = base or p99
            if hedge is not None:
                hedged_base = hedged_base or p99  # one key, hedged: the goal's yardstick
            bound = model_p99(shards, hedge)
            print(f"    {shards:>4} {label:9} {reads:>6} {1000 * p50:6.1f}ms {1000 * p99:6.1f}ms "
                  f"{p99 / base:7.2f}x {p99 / (hedged_base or p99):7.2f}x {100 * extra:5.1f}% "
                  f"{1000 * bound:6.1f}ms")
    for shards in (n for n in args.tail_shards if n > 1):
        best, needed, quantile = budget_for(shards, 1.2, adaptive)
        print(f"    model, N={shards}: with at most {100 * adaptive.budget:g}% extra requests "
              f"(copies at a delay, to requests still out) the p99 is at best {best:.2f}x "
              f"one hedged key's; 1.2x takes {100 * needed:.1f}% extra (first copy at the "
              f"p{100 * quantile:.1f})")


def _latencies(text: str) -> list[float]:
    return [float(part) for part in text.split(",") if part.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=_latencies, default=[0.0],
                        help="milliseconds added to each request, comma-separated (0,20,50)")
    parser.add_argument("--endpoint-url", default=os.environ.get("SHARDEX_DYNAMODB_ENDPOINT"))
    parser.add_argument("--azure-endpoint", default=os.environ.get("SHARDEX_AZURITE_ENDPOINT"))
    parser.add_argument("--region", default=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    parser.add_argument("--orders", type=int, default=20_000)
    parser.add_argument("--azure-orders", type=int, default=5_000)
    parser.add_argument("--item-bytes", type=int, default=1024)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--reads", type=int, default=2000)
    parser.add_argument("--tail-shards", type=int, nargs="+", default=[1, 8, 16, 64, 256])
    for part in ("memory", "dynamodb", "azure", "tail"):
        parser.add_argument(f"--skip-{part}", action="store_true")
    args = parser.parse_args()
    for part, endpoint, script in (("dynamodb", args.endpoint_url, "dynamodb-local"),
                                   ("azure", args.azure_endpoint, "azurite")):
        if not getattr(args, f"skip_{part}") and not endpoint:
            raise SystemExit(f"error: no {part} endpoint: run under scripts/{script} run, "
                             f"pass it, or --skip-{part}")
    if not args.skip_memory:
        print_memory(args)
    if not args.skip_dynamodb:
        print_peers(asyncio.run(peers_on_dynamodb(args)), args)
    if not args.skip_azure:
        print_azure(asyncio.run(listing_on_azure(args)), args)
    if not args.skip_tail:
        print_tail(args)


if __name__ == "__main__":
    main()
