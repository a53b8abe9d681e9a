"""Migration benchmark on DynamoDB Local: one rate budget across processes, and the backfill.

Run: scripts/dynamodb-local run .venv/bin/python benchmarks/bench_migrate.py
     [--rate R] [--seconds S] [--items N] [--mover-rate R] [--mover-kb K] [--sections 1,2,3]

1. One budget, 1, 2 and 4 processes: each process (a real one, spawned) runs movers that
   write entries to the four shard keys of ``PENDING`` as fast as the migration's budget
   lets them, the budget shared through the index's records in DynamoDB Local (leased
   slices, ``shardex.migrate.budget``); every write is stamped with the wall clock when it
   is sent (the budget granted it) and when it lands. Printed per process count: the
   highest write units any shard key took in any wall-clock second against ``--rate``
   (the target: <= 1.05x), by the second sent (what the budget holds) and by the second
   landed (the send's second shifted by each request's own time: a slow request lands
   with the next second's), and the mean over the steady seconds (after the first
   three, in which the slices settle).
   Then a reshard's own movers, 1, 2 and 4 processes of ``Resharder.run`` (2 workers
   each) on one budget, growing 4 -> 6 keys: the four old keys drain into the two new
   ones alone (jump hash), a fan-in; every move counted when it is sent, on the key it
   leaves and the key it lands on: the highest units any key took in a second against
   ``--rate``. With ``--mover-kb K`` each entry carries K KB of attributes: a move of
   several KB at a low rate may cost more than a runner's share of a key, and waits for
   a share that holds it (``shardex.migrate.budget``).
2. The adoption backfill (``adopt run``: leased Scan segments, conditional updates,
   checkpoints) against a hand-written Scan + UpdateItem, both with 4 segments at once
   and the new GSI built on both tables first, as ``bench_adopt.py`` measures them:
   items a second and their ratio.
3. Union reads against a stable listing: a full listing of a value mid-reshard (4 -> 16
   keys, half moved) against the same entries stable on 16 keys, in pages of 1,000 and
   100, requests, read units and time, listed by query and its cursor and by pages()
   (``bench_union.py --dynamodb`` measures it so).

Every figure is measured in this run; ratios compare numbers from this run only.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_adopt import adopted_backfill, raw_backfill
from benchmarks.bench_union import LISTED_BY, WALL_RUNS, measure, print_figures, runner
from tests import dynamodb_local as local
from tests.adopt_app import orders_table
from tests.helpers import count_moves

from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.clock import LoopClock
from shardex.migrate.budget import Sharing
from shardex.reshard import Resharder
from shardex.stores import open_store

KEYS = 4
WORKERS = 16  # writes in flight per process


Write = tuple[float, float, str, float]  # (wall time sent, landed, shard key, units)


def _process(uri: str, owner: str, rate: float, seconds: float, start_at: float,
             queue: multiprocessing.Queue[list[Write]]) -> None:
    queue.put(asyncio.run(_move(uri, owner, rate, seconds, start_at)))


async def _move(uri: str, owner: str, rate: float, seconds: float,
                start_at: float) -> list[Write]:
    """Write PENDING entries within the shared budget; each one's ``Write``."""
    clock = LoopClock()
    done: list[Write] = []
    store = open_store(uri)
    async with ShardedIndex(store, "orders", routing_ttl=60.0) as index:
        await asyncio.sleep(max(0.0, start_at - time.time()))
        async with Sharing().budget(store, "orders", "bench", rate=rate, owner=owner,
                                    clock=clock) as budget:
            end = time.time() + seconds

            async def worker(w: int) -> None:
                n = 0
                while time.time() < end:
                    item = f"{owner}-{w}-{n}"
                    n += 1
                    key = index.routing.shard_key("PENDING", item)
                    await budget.spend({key: 1.0})
                    sent = time.time()
                    await index.put("PENDING", item, sort=f"{n:08d}")
                    done.append((sent, time.time(), key, 1.0))

            await asyncio.gather(*(worker(w) for w in range(WORKERS)))
    return done


def budget_run(uri: str, processes: int, rate: float, seconds: float
               ) -> tuple[float, float, float]:
    """The highest per-second units on any key by the second they were sent in and by the
    second they landed in, and the steady mean (by landing), over ``processes``."""
    context = multiprocessing.get_context("spawn")
    queue: multiprocessing.Queue[list[Write]] = context.Queue()
    start_at = time.time() + 3.0  # every process imported and connected by then
    workers = [context.Process(target=_process, args=(uri, f"p{p}", rate, seconds, start_at,
                                                      queue)) for p in range(processes)]
    for process in workers:
        process.start()
    writes = [w for _ in workers for w in queue.get(timeout=seconds + 120)]
    for process in workers:
        process.join()
    per_second: dict[tuple[str, int], float] = defaultdict(float)
    by_send: dict[tuple[str, int], float] = defaultdict(float)
    for sent, at, key, units in writes:
        per_second[key, int(at)] += units
        by_send[key, int(sent)] += units
    first = int(start_at)
    last = max(second for _, second in per_second)
    steady = [u for (_, second), u in per_second.items() if first + 3 <= second < last]
    return max(by_send.values()), max(per_second.values()), sum(steady) / max(1, len(steady))


FAN = (4, 6)  # shard keys before and after: four old keys drain into two new ones
FAN_ENTRIES = 2_400


def _mover_process(uri: str, owner: str, rate: float,
                   queue: multiprocessing.Queue[dict[tuple[str, int], float]]) -> None:
    """Run the reshard under way to verified; put the units each key took in each wall
    second, each move counted when sent, on its source key and the key it lands on."""
    with pytest.MonkeyPatch.context() as patch:
        sent = count_moves(patch, now=time.time)
        asyncio.run(_reshard(uri, owner, rate))
    queue.put(sent)


async def _reshard(uri: str, owner: str, rate: float) -> None:
    async with Resharder(uri, "orders", rate=rate, workers=2, worker=owner, sharing=Sharing(),
                         routing_ttl=1.0) as runner:
        await runner.run(until="verified")


def mover_run(processes: int, rate: float, kb: float = 0.0,
              entries: int = FAN_ENTRIES) -> tuple[float, int]:
    """The highest units any shard key took in a wall second, by send, over ``processes``
    running one reshard (``FAN``) of ``entries`` entries of ``kb`` KB of attributes each,
    and the moves recorded."""
    uri = local.table_store().uri
    attrs = {"blob": "x" * int(kb * 1024)} if kb else None

    async def prepare() -> None:
        async with ShardedIndex(uri, "orders", Routing(overrides={"PENDING": ShardPolicy(
                FAN[0])}), routing_lease=1.0) as index:
            for start in range(0, entries, 50):
                await asyncio.gather(*(index.put("PENDING", f"o-{i:05d}", sort=f"{i:05d}",
                                                 attrs=attrs)
                                       for i in range(start, min(entries, start + 50))))
        async with Resharder(uri, "orders", routing_ttl=1.0) as runner:
            await runner.start({"PENDING": ShardPolicy(FAN[1])}, margin=0.5)

    async def moved() -> int:
        async with Resharder(uri, "orders", routing_ttl=1.0) as runner:
            return sum(unit.moved for unit in await runner.units(await runner.routing()))

    asyncio.run(prepare())
    context = multiprocessing.get_context("spawn")
    queue: multiprocessing.Queue[dict[tuple[str, int], float]] = context.Queue()
    workers = [context.Process(target=_mover_process, args=(uri, f"m{p}", rate, queue))
               for p in range(processes)]
    for process in workers:
        process.start()
    by_send: dict[tuple[str, int], float] = defaultdict(float)
    for _ in workers:
        for second, units in queue.get(timeout=600).items():
            by_send[second] += units
    for process in workers:
        process.join()
    return max(by_send.values()), asyncio.run(moved())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=12.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--items", type=int, default=5_000)
    parser.add_argument("--mover-rate", type=float, default=60.0,
                        help="the rate of the reshard's movers (section 1's second part)")
    parser.add_argument("--mover-kb", type=float, default=0.0,
                        help="KB of attributes on each entry the reshard's movers move")
    parser.add_argument("--union", type=int, default=2_000,
                        help="entries of the union listing (section 3)")
    parser.add_argument("--sections", default="1,2,3", help="which sections to run")
    args = parser.parse_args()
    for name in ("rate", "seconds", "items", "union", "mover_rate"):
        if not getattr(args, name) > 0:
            parser.error(f"--{name} must be above 0, got {getattr(args, name)!r}")
    if not 0 <= args.mover_kb <= 300:
        parser.error(f"--mover-kb must be from 0 to 300, got {args.mover_kb!r}")
    sections = set(args.sections.split(","))
    if not sections or not sections <= {"1", "2", "3"}:
        parser.error(f"--sections: some of 1, 2, 3, comma-separated; got {args.sections!r}")
    if not os.environ.get("SHARDEX_DYNAMODB_ENDPOINT"):
        parser.error("needs SHARDEX_DYNAMODB_ENDPOINT: run it under scripts/dynamodb-local run")
    local.require_endpoint()

    if "1" in sections:
        budget_section(args)
    if "2" in sections:
        backfill_section(args.items)
    if "3" in sections:
        print(f"3. union reads against a stable listing of the same {args.union:,} entries")
        for how in LISTED_BY:
            print_figures(f"DynamoDB Local (wall), by {how}", runner(True)(
                measure(True, 0.0, args.union, repeat=WALL_RUNS, how=how)), indent="   ")


def budget_section(args: argparse.Namespace) -> None:
    print(f"1. one budget of {args.rate:g} write units a second per shard key, shared by "
          f"1, 2 and 4 processes ({WORKERS} writers each, {KEYS} shard keys, "
          f"{args.seconds:g} s each)")
    for processes in (1, 2, 4):
        store = local.table_store()

        async def prepare(store_uri: str = store.uri) -> None:
            async with ShardedIndex(store_uri, "orders",
                                    Routing(overrides={"PENDING": ShardPolicy(KEYS)})):
                pass

        asyncio.run(prepare())
        sent, landed, steady = budget_run(store.uri, processes, args.rate, args.seconds)
        print(f"   {processes} process(es): highest on a key in a second, by send "
              f"{sent:5.1f} units/s = {sent / args.rate:.3f}x --rate (target <= 1.05x), by "
              f"landing {landed:5.1f} = {landed / args.rate:.3f}x; steady mean "
              f"{steady:5.1f} = {steady / args.rate:.2f}x")
    print("   (the budget holds the send; by landing dates each write by its answer, so "
          "requests the server held a moment count in the next second)")
    # entries of several KB move slowly at a low rate: fewer of them
    entries = FAN_ENTRIES if not args.mover_kb else max(200, int(FAN_ENTRIES / 4 / args.mover_kb))
    size = f", {args.mover_kb:g} KB each" if args.mover_kb else ""
    print(f"   a reshard's movers, {FAN[0]} -> {FAN[1]} keys ({entries:,} entries{size}; the "
          f"old keys drain into the new ones alone), 2 workers a process, --rate "
          f"{args.mover_rate:g}")
    for processes in (1, 2, 4):
        highest, moved = mover_run(processes, args.mover_rate, args.mover_kb, entries)
        print(f"   {processes} process(es): {moved:,} moves; highest on a key in a second, by "
              f"send {highest:5.1f} units/s = {highest / args.mover_rate:.3f}x --rate "
              "(target <= 1.05x)")


def backfill_section(items: int) -> None:
    print(f"2. backfilling {items:,} items, 4 Scan segments at once, 8 updates in flight "
          "per segment")
    raw_table, _ = orders_table(items)
    raw = asyncio.run(raw_backfill(raw_table, 4))
    table, _ = orders_table(items)
    adopted, updated = asyncio.run(adopted_backfill(table, 4))
    print(f"   hand-written Scan + UpdateItem: {items / raw:7.0f} items/s")
    print(f"   adopt run (leased segments):    {items / adopted:7.0f} items/s "
          f"({updated:,} updated) = {raw / adopted:.2f}x the hand-written throughput")


if __name__ == "__main__":
    main()
