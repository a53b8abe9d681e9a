"""Union reads against a stable listing: requests and time of a full listing mid-reshard.

Run: .venv/bin/python benchmarks/bench_union.py [--entries N,...] [--latency 0,5,20]
     scripts/dynamodb-local run .venv/bin/python benchmarks/bench_union.py --dynamodb \
         [--entries 2000,20000]

A value resharded from 4 to 16 hashed shard keys, half of its entries moved (write-new:
readers read both layouts, in two phases, ``shardex.fanout``), is listed in full in
pages of 1,000 and of 100, and so is a value holding the same entries stable on the
larger layout (16 keys); on DynamoDB Local each is listed both ways a caller lists in
full, by ``query`` and its cursor (a caller that may stop after any page) and by
``pages()``, which says it reads to the end, for each number of entries given (a short
listing pays the union's one extra round trip on its first page; a long one amortizes
it). Each listing is read three times on memory:// (virtual time: every run alike) and
31 times on DynamoDB Local (one listing takes some 100 ms of wall time, which one run
cannot tell from the machine's noise) after five untimed listings of each (the server's
JIT), stable and union alternating, each first in every other round (the second of a pair
read a server the first had just warmed: union / stable 0.79-1.07 that way, 1.05-1.16
alike), garbage collected before each listing; the figures are the median time, requests
and read units of one listing. On memory:// every request takes
the latency given (virtual time, so time is round trips only); on DynamoDB Local, wall
seconds. Ratios compare figures of this run only. The issue's bound: union / stable at
most 2x the requests and 1.1x the time. "This process's CPU" is the CPU the client spent
on a listing (median), union / stable: on DynamoDB Local the listing's time is mostly
the client's CPU and the server's, so it says how much of the time ratio is the client's
work and how much its waiting.
It also lists a value moving between tiers (4 keys on the index's store -> 16
on a store of its own, half its entries there) against the stable listing: with no
transaction across the two stores, each row read in the new store is held against both
stores' placements of its item (``shardex.tierreads``), read in batches
(``Store.locate_many``: 100 a request on memory://, as DynamoDB's BatchGetItem), S's
before T's. Its read units are one a placement (DynamoDB charges each item a batch reads
as a point read). It is one two-phase listing (S's keys, then T's), resumed and read
ahead as the union listing is, T's rows held as they land: a first page takes 4 round
trips where the stable listing takes 1 (S's keys, T's, then the placements of T's rows
in S, then in T: a write to T is confirmed in S after it lands in T, so T's are read
after S's), and each request of T waits for its rows' two before its stream reads on.
"Floor" is the least time ratio any listing that keeps a first page to its share and
reads each position on the second phase after the first can reach (``floor``), in round
trips: memory:// time is round trips only, so the time ratio meets it when a listing
waits for no round trip it could have overlapped.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import math
import os
import statistics
import time
import uuid
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import shardex
from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.clock import LoopClock
from shardex.fanout.merge import share
from shardex.index import store_routing
from shardex.routing import begin_transition
from shardex.sim.clock import run_virtual
from shardex.stores.base import Store

T = TypeVar("T")
_IN_FLIGHT = 32
_RUNS = 3
WALL_RUNS = 31  # on DynamoDB Local
WARM_RUNS = 5  # on DynamoDB Local, before the timed runs of each page size: untimed


def _warm_runs(dynamodb: bool) -> int:
    return WARM_RUNS if dynamodb else 0
# how a full listing is read: query and its cursor, page after page (a caller that may
# stop after any page), and pages(), which says it reads to the end (ShardedIndex.pages)
LISTED_BY = ("query", "pages()")


@dataclass(frozen=True)
class Listed:
    """One full listing: requests, read units, seconds, and the CPU seconds this process
    spent on it (medians of the runs)."""

    requests: float
    units: float
    seconds: float
    cpu: float = 0.0


async def _store(dynamodb: bool, latency_ms: float) -> Store:
    if not dynamodb:
        fixed = max(latency_ms, 1e-6)
        return shardex.open_store("memory://", seed=1, profile="unlimited",
                                  latency_median_ms=fixed, latency_p99_ms=fixed,
                                  latency_per_kb_ms=0.0)
    from shardex.stores.dynamodb.admin import create_index_table

    table = f"bench-union-{uuid.uuid4().hex[:8]}"
    connection = {"endpoint_url": os.environ["SHARDEX_DYNAMODB_ENDPOINT"],
                  "region": os.environ.get("AWS_DEFAULT_REGION", "us-east-1")}
    await create_index_table(table, **connection)
    return shardex.open_store(f"dynamodb://{table}", **connection)


async def _puts(index: ShardedIndex, items: range) -> None:
    for start in range(0, len(items), _IN_FLIGHT):
        await asyncio.gather(*(index.put("P", f"o-{i:07d}", sort=f"{i * 7919 % items.stop:07d}")
                               for i in items[start:start + _IN_FLIGHT]))


async def _list(index: ShardedIndex, stores: Store | Sequence[Store], limit: int,
                entries: int, how: str = "query") -> Listed:
    """List value P of ``index`` in full (``how``: by ``query`` and its cursor, page after
    page, or by ``pages()``, which says it reads to the end); the requests and units it
    sent ``stores``."""
    stores = [stores] if isinstance(stores, Store) else list(stores)
    for store in stores:
        store.reset_stats()
    gc.collect()  # what the last listing left is not collected during this one
    clock = LoopClock()
    start, cpu = clock.now(), time.process_time()
    count, cursor = 0, None
    if how == "pages()":
        async for page in index.pages("P", limit=limit):
            count += len(page.items)
    else:
        while True:
            page = await index.query("P", limit=limit, cursor=cursor)
            count += len(page.items)
            if (cursor := page.cursor) is None:
                break
    seconds, cpu = clock.now() - start, time.process_time() - cpu
    assert count == entries, f"listed {count} of {entries}"
    totals = [store.stats(index.name).totals for store in stores]
    return Listed(sum(t.read_requests for t in totals), sum(t.read_units for t in totals),
                  seconds, cpu)


def _medians(listed: Sequence[Listed]) -> Listed:
    return Listed(*(statistics.median(getattr(r, f.name) for r in listed)
                    for f in dataclasses.fields(Listed)))


async def measure_crossing(latency_ms: float, entries: int, limit: int, *,
                           dynamodb: bool = False, repeat: int = 1) -> dict[str, Listed]:
    """A value moving between tiers (4 keys on the index's store -> 16 keys on a store of
    its own, half its entries there), listed in full, against the same entries stable on
    16 keys (medians of ``repeat`` listings each, alternating). On memory:// run it under
    virtual time, on DynamoDB Local (three tables) on the wall clock (``runner``)."""
    stores = [await _store(dynamodb, latency_ms) for _ in range(3)]
    for store in stores:
        await store.open()
    stable = ShardedIndex(stores[0], "stable", Routing(overrides={"P": ShardPolicy(16)}),
                          routing_lease=60.0, hedge=None)
    moving = ShardedIndex(stores[1], "moving", Routing(overrides={"P": ShardPolicy(4)}),
                          routing_lease=60.0, hedge=None, tiers={"own": stores[2]})
    async with stable, moving:
        await _puts(stable, range(entries))
        await _puts(moving, range(0, entries, 2))
        await store_routing(moving, dataclasses.replace(begin_transition(
            moving.routing, {"P": ShardPolicy(16, tier="own")}), state="write-new"))
        await moving.refresh_routing()
        await _puts(moving, range(1, entries, 2))  # written to the tier's store
        assert moving.routing.reads_both("P")
        runs: dict[str, list[Listed]] = {"stable": [], "crossing": []}
        for _ in range(repeat):
            runs["stable"].append(await _list(stable, stores[0], limit, entries))
            runs["crossing"].append(await _list(moving, stores[1:], limit, entries))
        out = {name: _medians(listed) for name, listed in runs.items()}
    for store in stores:
        await store.close()
    return out


async def measure(dynamodb: bool, latency_ms: float, entries: int,
                  limits: tuple[int, ...] = (1000, 100),
                  repeat: int = _RUNS, how: str = "query") -> dict[int, dict[str, Listed]]:
    """Per page size: the stable and union listings' figures (medians of ``repeat`` runs),
    each listed ``how`` (``_list``).

    On DynamoDB Local (``dynamodb``: SHARDEX_DYNAMODB_ENDPOINT set) a table for each
    index; on memory:// every request takes ``latency_ms`` (run it under virtual time,
    ``runner``).
    """
    # one store (a table of its own on DynamoDB) for each index
    stores = {"stable": await _store(dynamodb, latency_ms),
              "union": await _store(dynamodb, latency_ms)}
    for store in stores.values():
        await store.open()
    sixteen = Routing(overrides={"P": ShardPolicy(16)})
    stable = ShardedIndex(stores["stable"], "stable", sixteen, routing_lease=60.0, hedge=None)
    union = ShardedIndex(stores["union"], "union", Routing(overrides={"P": ShardPolicy(4)}),
                         routing_lease=60.0, hedge=None)
    async with stable, union:
        await _puts(stable, range(entries))
        # half the entries on the 4 keys, then the layout moves to 16 keys: the other
        # half is written there, as the mover would have put it
        await _puts(union, range(0, entries, 2))
        await store_routing(union, dataclasses.replace(
            begin_transition(union.routing, {"P": ShardPolicy(16)}), state="write-new"))
        await union.refresh_routing()
        await _puts(union, range(1, entries, 2))
        assert union.routing.reads_both("P")
        phases = union.routing.read_phases("P")
        counts = {"stable": [await stores["stable"].count("stable", k)
                             for k in stable.routing.read_keys("P")],
                  "first": [await stores["union"].count("union", k) for k in phases[0]]}
        out: dict[int, dict[str, Listed]] = {}
        pair = (("stable", stable), ("union", union))
        for limit in limits:
            runs: dict[str, list[Listed]] = {"stable": [], "union": []}
            for _ in range(_warm_runs(dynamodb)):  # the server's JIT and caches, untimed
                for name, index in pair:
                    await _list(index, stores[name], limit, entries, how)
            for round_ in range(repeat):
                # each goes first in every other round: neither gains from its place
                for name, index in pair[::-1] if round_ % 2 else pair:
                    runs[name].append(await _list(index, stores[name], limit, entries, how))
            out[limit] = {name: _medians(listed) for name, listed in runs.items()}
            max_page = stores["union"].capabilities.max_page
            out[limit]["floor"] = Listed(0, 0, floor(counts, limit, max_page))
    for store in stores.values():
        await store.close()
    return out


def floor(counts: dict[str, list[int]], limit: int, max_page: int) -> float:
    """The least union / stable time any listing in pages of ``limit`` can take, in round
    trips, when each first page asks each shard only for its share (``share``) and the
    union reads each position on its second phase after its first (``shardex.fanout``).

    Stable: the share, then the rest of its largest shard in store pages. Union: its
    first phase likewise (fewer keys hold more entries each), and one round trip of the
    second phase after the first page's first phase (that page's own: a first page
    does not read further) and one after the first phase's last landing.
    """
    def trips(keys: list[int]) -> int:
        first = share(limit, len(keys), max_page)
        return 1 + max(math.ceil(max(0, n - first) / max_page) for n in keys)

    first = trips(counts["first"])
    return (first + (2 if first > 1 else 1)) / trips(counts["stable"])


def runner(dynamodb: bool) -> Callable[[Coroutine[Any, Any, T]], T]:
    """How to run a measurement: wall time on DynamoDB Local, virtual time on memory://."""
    return asyncio.run if dynamodb else run_virtual


def require_dynamodb(parser: argparse.ArgumentParser, dynamodb: bool) -> None:
    """Stop with a usage error if ``--dynamodb`` is given outside scripts/dynamodb-local."""
    if dynamodb and not os.environ.get("SHARDEX_DYNAMODB_ENDPOINT"):
        parser.error("--dynamodb needs SHARDEX_DYNAMODB_ENDPOINT: run it under "
                     "scripts/dynamodb-local run")


def print_figures(where: str, figures: dict[int, dict[str, Listed]], indent: str = "  "
                  ) -> None:
    """Print each page size's stable and union figures and their ratios."""
    for limit, rows in figures.items():
        stable, union = rows["stable"], rows["union"]
        print(f"{indent}{where}, pages of {limit:,}: stable (16 keys) "
              f"{stable.requests:,.0f} requests {stable.units:,.1f} units "
              f"{stable.seconds * 1000:,.1f} ms; union (4 + 16 keys) "
              f"{union.requests:,.0f} requests {union.units:,.1f} units "
              f"{union.seconds * 1000:,.1f} ms")
        print(f"{indent}  union / stable: requests {union.requests / stable.requests:.2f}, "
              f"read units {union.units / stable.units:.2f}, "
              f"time {union.seconds / max(stable.seconds, 1e-9):.2f} "
              f"(floor in round trips: {rows['floor'].seconds:.2f}), this process's CPU "
              f"{union.cpu / max(stable.cpu, 1e-9):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", default=None,
                        help="entries of the value, comma-separated (default 8,000 on "
                             "memory://, 2,000 on DynamoDB Local)")
    parser.add_argument("--latency", default="5,20,50",
                        help="memory:// request latencies in ms, comma-separated")
    parser.add_argument("--dynamodb", action="store_true",
                        help="run on DynamoDB Local (SHARDEX_DYNAMODB_ENDPOINT)")
    args = parser.parse_args()
    require_dynamodb(parser, args.dynamodb)
    try:
        latencies = [float(x) for x in args.latency.split(",") if x.strip()]
    except ValueError:
        parser.error(f"--latency: expected milliseconds separated by commas, "
                     f"got {args.latency!r}")
    try:
        sizes = [int(x) for x in (args.entries or "").split(",") if x.strip()] or \
            [2000 if args.dynamodb else 8000]
    except ValueError:
        parser.error(f"--entries: expected counts separated by commas, got {args.entries!r}")
    if min(sizes) < 1:
        parser.error(f"--entries must be at least 1, got {min(sizes)}")
    for entries in sizes:
        print(f"A full listing of {entries:,} entries mid-reshard (4 -> 16 keys, half moved) "
              f"against the same entries stable on 16 keys")
        if args.dynamodb:
            for how in LISTED_BY:
                print_figures(f"DynamoDB Local (wall), by {how}", runner(True)(
                    measure(True, 0.0, entries, repeat=WALL_RUNS, how=how)))
            for limit in (1000, 100):
                print_crossing("DynamoDB Local (wall, three tables)", limit, runner(True)(
                    measure_crossing(0.0, entries, limit, dynamodb=True, repeat=WALL_RUNS)))
            continue
        for latency in latencies:
            print_figures(f"memory:// at {latency:g} ms (virtual)",
                          runner(False)(measure(False, latency, entries)))
        for latency in latencies:
            for limit in (1000, 100):
                print_crossing(f"memory:// at {latency:g} ms", limit,
                               runner(False)(measure_crossing(latency, entries, limit)))


def print_crossing(where: str, limit: int, rows: dict[str, Listed]) -> None:
    """Print a tier move's listing against the stable one (``measure_crossing``)."""
    stable, crossing = rows["stable"], rows["crossing"]
    print(f"  a tier move (4 keys -> 16 keys on another store), {where}, pages of "
          f"{limit:,}: {crossing.requests:,.0f} requests {crossing.units:,.0f} units "
          f"{crossing.seconds * 1000:,.1f} ms; / stable: requests "
          f"{crossing.requests / stable.requests:.1f}, read units "
          f"{crossing.units / stable.units:.1f}, time "
          f"{crossing.seconds / max(stable.seconds, 1e-9):.2f} (a first page takes 4 "
          f"round trips where stable takes 1)")


if __name__ == "__main__":
    main()
