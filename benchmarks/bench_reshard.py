"""Reshard benchmark: the mover's throughput against raw writes, and the cost of union reads.

Run: .venv/bin/python benchmarks/bench_reshard.py [--quick]
     scripts/dynamodb-local run .venv/bin/python benchmarks/bench_reshard.py --dynamodb

1. Moving N entries (``Mover``: survey read, a placement read and a conditional re-place
   per entry, checkpoints) against writing the same N entries raw (``put``), on the same
   store, with the same number of writes in flight (8, each sent as one ends), the
   mover's rate set far above
   what the store takes so that only the work itself counts. On memory:// the figures
   are virtual seconds (the simulated latency) and the CPU seconds of the code paths; on
   DynamoDB Local, wall seconds.
2. A full listing of a value while a reshard holds readers on both layouts (4 -> 16
   keys, half moved, read in two phases) against the same entries stable on the larger
   layout: requests, read units and time (``bench_union.measure``, pages of 1,000).
Every figure is measured in this run; ratios compare numbers from this run only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

import shardex
from bench_union import measure, print_figures, require_dynamodb, runner  # one union bench
from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.clock import LoopClock
from shardex.reshard import Resharder, states
from shardex.stores.base import Store

T = TypeVar("T")
_BATCH = 8


async def _store(dynamodb: bool) -> Store:
    if not dynamodb:
        return shardex.open_store("memory://", seed=1, write_ceiling=1e7, read_ceiling=1e7)
    from shardex.stores.dynamodb.admin import create_index_table

    table = f"bench-reshard-{uuid.uuid4().hex[:8]}"
    connection = {"endpoint_url": os.environ["SHARDEX_DYNAMODB_ENDPOINT"],
                  "region": os.environ.get("AWS_DEFAULT_REGION", "us-east-1")}
    await create_index_table(table, **connection)
    return shardex.open_store(f"dynamodb://{table}", **connection)


async def _timed(call: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """(store clock seconds, CPU seconds) of one awaited call."""
    clock = LoopClock()
    start, cpu = clock.now(), time.process_time()
    await call()
    return clock.now() - start, time.process_time() - cpu


async def _puts(index: ShardedIndex, value: str, items: range) -> None:
    """Put ``items``, ``_BATCH`` at once, each sent as one ends (as the mover moves)."""
    window = asyncio.Semaphore(_BATCH)

    async def put(i: int) -> None:
        async with window:
            await index.put(value, f"o-{i:07d}", sort=f"{i:07d}", attrs={"total": i})

    await asyncio.gather(*(put(i) for i in items))


def measure_mover(entries: int, dynamodb: bool) -> dict[str, tuple[float, float]]:
    """Seconds (clock, CPU) to write ``entries`` raw, and to move as many with the mover."""
    async def body() -> dict[str, tuple[float, float]]:
        store = await _store(dynamodb)
        routing = Routing(overrides={"RAW": ShardPolicy(16), "MOVED": ShardPolicy(1)})
        async with ShardedIndex(store, "bench", routing, routing_lease=1.0) as index:
            raw = await _timed(lambda: _puts(index, "RAW", range(entries)))
            await _puts(index, "MOVED", range(entries, 2 * entries))
            async with Resharder(store, "bench", rate=1e6, unit_lease=30.0, seed=1,
                                 split_every=entries) as runner:
                await runner.start({"MOVED": ShardPolicy(16)}, margin=0.0)
                await runner.run(until="write-new")
                routing = await runner.routing()
                await runner._sleep_until(states.ready_at(routing, runner.lease), routing,
                                          "the bench")
                moved = await _timed(lambda: runner._move(routing))
        return {"raw": raw, "moved": moved}

    return runner(dynamodb)(body())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer entries")
    parser.add_argument("--dynamodb", action="store_true",
                        help="run on DynamoDB Local (SHARDEX_DYNAMODB_ENDPOINT)")
    args = parser.parse_args()
    require_dynamodb(parser, args.dynamodb)
    entries = 500 if args.quick or args.dynamodb else 4000
    where = "DynamoDB Local (wall s)" if args.dynamodb else "memory:// (virtual s)"
    mover = measure_mover(entries, args.dynamodb)
    (raw_s, raw_cpu), (moved_s, moved_cpu) = mover["raw"], mover["moved"]
    print(f"1. moving {entries:,} entries against writing them raw, on {where}, "
          f"{_BATCH} writes in flight")
    print(f"   raw puts: {entries / raw_s:,.0f} entries/s ({raw_cpu / entries * 1e6:,.0f} µs "
          f"CPU each); mover: {entries / moved_s:,.0f} entries/s ({moved_cpu / entries * 1e6:,.0f}"
          f" µs CPU each)")
    print(f"   mover throughput / raw write throughput: {raw_s / moved_s:.2f}; CPU per entry, "
          f"mover / raw: {moved_cpu / raw_cpu:.2f}")
    figures = runner(args.dynamodb)(measure(args.dynamodb, 5.0, entries, limits=(1000,)))
    print(f"2. a full listing of {entries:,} entries, union (read-both) against stable")
    print_figures(where, figures, indent="   ")

if __name__ == "__main__":
    main()
