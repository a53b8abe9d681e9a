"""How the cost of a read grows with the shard count N and with the entries of a value.

Run: .venv/bin/python benchmarks/bench_read_scale.py [--quick]

On memory:// under virtual time (latency median 4 ms, p99 25 ms: the store's default),
entries of about 1 KB, hedging off so the figures are the reads' own, three reads of
one logical key:

- *first page*: ``query(limit=100)``;
- *full listing*: ``query(limit=1000)`` and its cursors to the end;
- *count*: ``count()`` (a Select=COUNT query per shard, paged by 1 MB).

For each: store requests, read units (strongly consistent: 1 per started 4 KB) and
virtual time. Table 1 varies N from 1 to 1,024 at 100,000 entries; table 2 varies the
entries from 1,000 to 1,000,000 at N = 16. Entries are put straight into the simulated
store's state (the write path is not what is measured, and a million writes through it
would take minutes); every listing is checked against what was loaded.

Table 3, wide fan-outs: the first page of 100 at N = 16, 256 and 1,024 (20,000 entries),
p50 and p99 of its latency over ``--reads`` reads with the default hedging (ten times as
many at N = 16: the slowest of 16 requests is spread wider than the slowest of 1,024, and
N = 16's p50 is every ratio's denominator; 100 to 300 reads put it at 14.0 to 15.0 ms,
1,000 and 3,000 at 15.6, the model's 15.5), the ratio to N = 16's, the extra requests
the copies cost, this process's CPU per shard read (the simulated store's data kept from
the garbage collector; "store": the part of it the store's own requests take, sent by
hand), and what the latency model allows: the p50 and p99 of the slowest of N requests,
each given copies at the hedging delay as the default policy sends them, with no
budget or queue in the way. Once with the index's default concurrency (the store's pool:
none on memory://, every request at once) and once bounded to 64 at a time (the pool of
the DynamoDB clients shardex builds, as every fan-out was before). Last, from the model,
the extra requests the default delay's copies cost, and the least extra requests at which
N = 256 and 1,024 have a p50 of 1.5x N = 16's (copies at an earlier delay, at every N),
and the least ratio any policy of copies on a delay (first copy, number of copies,
spacing) reaches within the hedging budget: the model's answer to "can 1.5x be had
within 5% extra requests".

Table 4 (``--against REV``, and with the full run): the CPU per shard read of a first page
here against the code of commit REV (default ``FILED_AT``, where the issue of wide
fan-outs measured "today's"), each in a process of its own, alternating, the same
measure for both (``_CPU_RUN``: the store's data kept from the collector, default
hedging and none); the median of ``--rounds`` runs each.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from bench_reads import copy_times, model_extra, slowest
from shardex import HedgePolicy, Routing, ShardedIndex, ShardPolicy
from shardex.capacity import entry_bytes
from shardex.fanout.merge import share
from shardex.hedging import Hedger
from shardex.model.entries import StoredEntry
from shardex.sim.clock import run_virtual
from shardex.sim.latency import LatencyModel
from shardex.stores.memory import MemoryStore

PAD = "x" * 960


@dataclass
class Cost:
    requests: int
    units: float
    seconds: float


def _load(store: MemoryStore, index: ShardedIndex, entries: int) -> None:
    """Put ``entries`` entries of PENDING straight into the store's state."""
    routing = index.routing
    for i in range(entries):
        item_id = f"o-{i:07d}"
        entry = StoredEntry(routing.shard_key("PENDING", item_id), f"{i:07d}", item_id,
                            {"pad": PAD})
        store._state("scale", entry.shard_key, 0.0).add(entry, entry_bytes(entry))


def measure(shards: int, entries: int) -> dict[str, Cost]:
    async def body() -> dict[str, Cost]:
        store = MemoryStore(seed=5, profile="unlimited")
        routing = Routing(overrides={"PENDING": ShardPolicy(shards=shards)})
        costs: dict[str, Cost] = {}
        async with ShardedIndex(store, "scale", routing, hedge=None, seed=1) as index:
            _load(store, index, entries)
            loop = asyncio.get_running_loop()

            async def cost(name: str, read: object) -> object:
                store.reset_stats()
                began = loop.time()
                result = await read  # type: ignore[misc]
                totals = store.stats("scale").totals
                costs[name] = Cost(totals.read_requests, totals.read_units, loop.time() - began)
                return result

            page = await cost("first page", index.query("PENDING", limit=100))
            assert [e.item_id for e in page.items] == \
                [f"o-{i:07d}" for i in range(min(100, entries))]  # type: ignore[attr-defined]

            async def listing() -> int:
                count, cursor, last = 0, None, ""
                while True:
                    got = await index.query("PENDING", limit=1000, cursor=cursor)
                    assert all(e.sort > last for e in got.items[:1])
                    count += len(got.items)
                    last = got.items[-1].sort if got.items else last
                    if (cursor := got.cursor) is None:
                        return count

            assert await cost("full listing", listing()) == entries
            assert await cost("count", index.count("PENDING")) == entries
        return costs

    return run_virtual(body())


def _row(label: str, costs: dict[str, Cost]) -> str:
    cells = []
    for name in ("first page", "full listing", "count"):
        c = costs[name]
        cells.append(f"{c.requests:>7,} {c.units:>9,.0f} {_time(c.seconds):>8}")
    return f"  {label:>10} " + "   ".join(cells)


def _time(seconds: float) -> str:
    return f"{1000 * seconds:.0f}ms" if seconds < 10 else f"{seconds:.1f}s"


def _header(label: str) -> str:
    names = "".join(f"{name:^29}" for name in ("first page (100)", "full listing (1000s)",
                                                "count"))
    sub = "   ".join(f"{'requests':>7} {'units':>9} {'time':>8}" for _ in range(3))
    return f"  {'':>10} {names}\n  {label:>10} {sub}"


@dataclass
class Wide:
    p50: float
    p99: float
    extra: float
    cpu_per_shard: float
    store_cpu_per_shard: float  # the store's own: the same requests sent by hand


def first_pages(shards: int, reads: int, concurrency: int | None) -> Wide:
    """Latency quantiles of first pages of 100 over ``shards`` keys, default hedging.

    The simulated store's 20,000 entries live in this process (a real store's do not):
    they are moved out of the garbage collector's sight once loaded (``gc.freeze``), so
    that no collection walking them is counted as the reads' CPU (at N = 1,024 it was a
    third of it). The store's own CPU per shard read is measured apart, by sending a
    first page's requests by hand (each shard's share, all at once)."""
    async def body() -> Wide:
        store = MemoryStore(seed=5, profile="unlimited")
        routing = Routing(overrides={"PENDING": ShardPolicy(shards=shards)})
        async with ShardedIndex(store, "scale", routing, seed=1,
                                max_concurrency=concurrency) as index:
            _load(store, index, 20_000)
            gc.collect()
            gc.freeze()
            loop = asyncio.get_running_loop()
            for _ in range(20):  # the adaptive hedging delay needs samples
                await index.query("PENDING", limit=100)
            store.reset_stats()
            took = []
            cpu = time.process_time()
            for _ in range(reads):
                began = loop.time()
                await index.query("PENDING", limit=100)
                took.append(loop.time() - began)
            cpu = time.process_time() - cpu
            totals = store.stats("scale").totals
            keys = index.routing.read_keys("PENDING")
            size = share(100, len(keys), store.capabilities.max_page)
            by_hand = time.process_time()
            for _ in range(reads):
                await asyncio.gather(*(store.query("scale", key, after=None, descending=False,
                                                   limit=size) for key in keys))
            by_hand = time.process_time() - by_hand
        gc.unfreeze()
        took.sort()
        return Wide(took[len(took) // 2], took[math.ceil(0.99 * len(took)) - 1],
                    totals.hedges_sent / max(1, totals.read_requests - totals.hedges_sent),
                    cpu / reads / shards, by_hand / reads / shards)

    return run_virtual(body())


_MODEL = LatencyModel()  # the store's default latency


def model_quantile(shards: int, q: float, policy: HedgePolicy) -> float:
    """The ``q`` quantile of the slowest of ``shards`` requests of the store's latency model,
    hedged as ``policy`` sends copies, no budget, no queue (``bench_reads.slowest``)."""
    return slowest(shards, q, copy_times(policy, model=_MODEL), _MODEL)


def model_extra_of(policy: HedgePolicy) -> float:
    """The copies per request ``policy`` sends on the store's latency model."""
    return model_extra(copy_times(policy, model=_MODEL), _MODEL)


def extra_for(shards: int, ratio: float, policy: HedgePolicy) -> tuple[float, float]:
    """The least extra requests (and the first copy's quantile) at which the model's p50
    of the slowest of ``shards`` is at most ``ratio`` x that of 16 under the same policy.

    Copies go to requests still out at a delay; the earlier the delay, the more copies.
    """
    for step in range(1, 500):
        changed = dataclasses.replace(policy, quantile=1 - step / 1000)  # later first
        if model_quantile(shards, 0.5, changed) <= ratio * model_quantile(16, 0.5, changed):
            return model_extra_of(changed), 1 - step / 1000
    return math.inf, 0.0


def best_within(shards: int, policy: HedgePolicy) -> tuple[float, HedgePolicy]:
    """The least p50 ratio of the slowest of ``shards`` to 16's that any policy sending
    copies on a delay reaches within ``policy.budget`` extra requests on the model, and
    that policy: the first copy at the p93 to p98.7, 1 to 5 copies, spaced 0.05 to 1.2
    x the delay (the baseline, N = 16, on the same policy)."""
    found: tuple[float, HedgePolicy] = (math.inf, policy)
    for step in range(930, 990, 3):
        for copies in (1, 2, 3, 5):
            for spacing in (0.05, 0.1, 0.2, 0.3, 0.5, 0.8, 1.2):
                tried = dataclasses.replace(policy, quantile=step / 1000, max_hedges=copies,
                                            spacing=spacing)
                if model_extra_of(tried) <= policy.budget:
                    ratio = model_quantile(shards, 0.5, tried) / model_quantile(16, 0.5, tried)
                    found = min(found, (ratio, tried), key=lambda pair: pair[0])
    return found


_BASE_READS = 10  # N = 16's reads, per read at N = 256 and 1,024


def print_wide(reads: int) -> None:
    policy = HedgePolicy()
    print(f"first page of 100 against N, 20,000 entries (memory://, virtual time, latency "
          f"median 4 ms, p99 25 ms), default hedging, {reads} reads each "
          f"({_BASE_READS * reads:,} at N=16)")
    print(f"  {'concurrency':>11} {'N':>5} {'p50':>8} {'x':>6} {'p99':>8} {'x':>6} "
          f"{'extra':>6} {'CPU/shard':>10} {'store':>8} {'model p50':>10} {'model p99':>10}")
    for concurrency in (None, 64):
        base = None
        for shards in (16, 256, 1024):
            got = first_pages(shards, reads * (_BASE_READS if shards == 16 else 1), concurrency)
            base = base or got
            label = "store's" if concurrency is None else str(concurrency)
            print(f"  {label:>11} {shards:>5,} {1000 * got.p50:6.1f}ms {got.p50 / base.p50:5.2f}x "
                  f"{1000 * got.p99:6.1f}ms {got.p99 / base.p99:5.2f}x {100 * got.extra:5.1f}% "
                  f"{1e6 * got.cpu_per_shard:8.1f}us {1e6 * got.store_cpu_per_shard:6.1f}us "
                  f"{1000 * model_quantile(shards, 0.5, policy):8.1f}ms "
                  f"{1000 * model_quantile(shards, 0.99, policy):8.1f}ms", flush=True)
    print(f"  the model's copies at the default delay (p{100 * Hedger(policy).quantile:g}) are "
          f"{100 * model_extra_of(policy):.1f}% extra requests (the budget: "
          f"{100 * policy.budget:g}%)")
    for shards in (256, 1024):
        extra, quantile = extra_for(shards, 1.5, policy)
        print(f"  model, N={shards:,}: a p50 of 1.5x N=16's takes {100 * extra:.1f}% extra "
              f"requests (first copy at the p{100 * quantile:.1f})")
    for shards in (256, 1024):
        ratio, best = best_within(shards, policy)
        print(f"  model, N={shards:,}: the least p50 against N=16's of any policy of copies "
              f"on a delay within the {100 * policy.budget:g}% budget is {ratio:.2f}x (first "
              f"copy at the p{100 * (best.quantile or 0):.1f}, {best.max_hedges} copies "
              f"{best.spacing:g} x the delay apart, {100 * model_extra_of(best):.1f}% extra)")


FILED_AT = "dd7d7d9"  # the last commit before the issue of wide fan-outs (stop 18's)

# one measure of CPU per shard read that the code of either commit runs: the 20,000 entries
# loaded by that commit's own benchmark loader, first pages of 100 after 20 to warm up
_CPU_RUN = """
import asyncio, gc, sys, time
sys.path.insert(0, sys.argv[1])
from bench_read_scale import _load
from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.sim.clock import run_virtual
from shardex.stores.memory import MemoryStore
shards, reads, hedged = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"

async def body():
    store = MemoryStore(seed=5, profile="unlimited")
    routing = Routing(overrides={"PENDING": ShardPolicy(shards=shards)})
    async with ShardedIndex(store, "scale", routing, seed=1,
                            **({} if hedged else {"hedge": None})) as index:
        _load(store, index, 20_000)
        gc.collect()
        gc.freeze()
        for _ in range(20):
            await index.query("PENDING", limit=100)
        cpu = time.process_time()
        for _ in range(reads):
            await index.query("PENDING", limit=100)
        print((time.process_time() - cpu) / reads / shards)

run_virtual(body())
"""


def _cpu_per_shard(tree: str, shards: int, reads: int, hedged: bool) -> float:
    """``_CPU_RUN`` on the code of ``tree`` (a checkout's root), in a process of its own."""
    env = {**os.environ, "PYTHONPATH": os.path.join(tree, "src")}
    out = subprocess.run([sys.executable, "-c", _CPU_RUN, os.path.join(tree, "benchmarks"),
                          str(shards), str(reads), "1" if hedged else "0"],
                         env=env, check=True, capture_output=True, text=True).stdout
    return float(out.split()[-1])


def print_against(rev: str, reads: int, rounds: int) -> None:
    """Table 4: CPU per shard read of a first page here against commit ``rev``."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    print(f"CPU per shard read of a first page of 100, 20,000 entries, here against {rev} "
          f"(median of {rounds} runs each, alternating, {reads} reads a run)")
    print(f"  {'N':>5} {'hedging':>8} {rev:>10} {'here':>10} {'x':>6}")
    with tempfile.TemporaryDirectory() as old:
        archive = subprocess.run(["git", "-C", here, "archive", rev, "src", "benchmarks"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", old], input=archive, check=True)
        for shards in (16, 1024):
            for hedged in (True, False):
                then: list[float] = []
                now: list[float] = []
                for _ in range(rounds):
                    then.append(_cpu_per_shard(old, shards, reads, hedged))
                    now.append(_cpu_per_shard(here, shards, reads, hedged))
                a, b = statistics.median(then), statistics.median(now)
                print(f"  {shards:>5,} {'default' if hedged else 'none':>8} {1e6 * a:8.1f}us "
                      f"{1e6 * b:8.1f}us {b / a:5.2f}x", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--reads", type=int, default=300, help="first pages per N, table 3")
    parser.add_argument("--wide-only", action="store_true", help="table 3 alone")
    parser.add_argument("--against", metavar="REV", default=None,
                        help=f"table 4 alone, against commit REV (the full run: {FILED_AT})")
    parser.add_argument("--rounds", type=int, default=3, help="runs per figure, table 4")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.against:
        print_against(args.against, 100, args.rounds)
        print(f"({time.perf_counter() - started:.0f} s wall)")
        return
    if args.wide_only:
        print_wide(args.reads)
        print(f"({time.perf_counter() - started:.0f} s wall)")
        return
    fixed = 20_000 if args.quick else 100_000
    print(f"read cost against N, {fixed:,} entries of ~1 KB (memory://, virtual time)")
    print(_header("N"))
    for shards in (1, 4, 16, 64, 256, 1024):
        print(_row(f"{shards:,}", measure(shards, fixed)), flush=True)
    print("read cost against entries per value, N = 16")
    print(_header("entries"))
    sizes = (1_000, 10_000, 100_000) if args.quick else (1_000, 10_000, 100_000, 1_000_000)
    for entries in sizes:
        print(_row(f"{entries:,}", measure(16, entries)), flush=True)
    print_wide(100 if args.quick else args.reads)
    print_against(FILED_AT, 100, 1 if args.quick else args.rounds)
    print(f"({time.perf_counter() - started:.0f} s wall)")


if __name__ == "__main__":
    main()
