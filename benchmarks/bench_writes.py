"""Write benchmark: the write path's overhead, and the units a write costs in the steady
state and while a reshard runs (what fencing adds).

Run: .venv/bin/python benchmarks/bench_writes.py [--quick]

1. CPU time of ``ShardedIndex.put`` (a new item, and an overwrite) against what a
   hand-written conditional write does on the same store: locate the item's placement,
   then place it conditioned on it. The memory store runs under virtual time with its
   capacity out of the way (the ``unlimited`` profile), so the figures are the CPU time
   of the code paths (process time: other processes on the machine do not count): the
   library's overhead.
2. Units and requests a put costs, per acknowledged write, from the store's meter (the
   writer's own requests, the mover's left out): in the steady state (no reshard), and
   while a reshard 1 -> 8 moves the value the puts write, with every put sent at once,
   with every other put paused past the routing's lease between its routing check and
   its request (the writes fencing re-places), and with puts queued by adaptive pacing
   after a burst of throttles. With each, the acknowledged puts that a read right after
   the put missed, and that the listing misses once the reshard is done.
Every figure is measured in this run; ratios compare numbers from this run only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import random
import time
from collections.abc import Iterator
from typing import Any

import shardex
from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.model.entries import Placement, StoredEntry
from shardex.reshard import Resharder
from shardex.retry import RetryPolicy
from shardex.sim.clock import run_virtual
from shardex.stores.memory import MemoryStore
from shardex.stores.metered import Recorder, Usage

LEASE = 3.0


class _Pausing(MemoryStore):
    """A memory store whose writes of chosen items wait before they are sent, and that
    throttles every new item's write until ``hot_until``."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.pauses: dict[str, float] = {}
        self.hot_until = -1.0

    async def _place(self, namespace: str, item_id: str, entry: StoredEntry | None,
                     version: int, expected: Placement | None, token: str,
                     rec: Recorder) -> None:
        if self.clock.now() < self.hot_until and item_id.startswith("new-"):
            raise shardex.Throttled("P throttled (scripted burst)", key="P", reason="burst")
        pause = self.pauses.pop(item_id, 0.0)
        if pause:
            await self.clock.sleep(pause)
        await super()._place(namespace, item_id, entry, version, expected, token, rec)


def measure_overhead(writes: int) -> list[tuple[str, float, float]]:
    async def body() -> list[tuple[str, float, float]]:
        store = MemoryStore(seed=1, profile="unlimited")
        index = ShardedIndex(store, "bench", Routing(overrides={"P": ShardPolicy(8)}), seed=1)
        await index.open()
        routing = index.routing
        rng = random.Random(1)

        async def ours(n: int, tag: str) -> None:
            await index.put("P", f"{tag}-{n}", sort=f"{n:07d}", attrs={"n": n})

        async def raw(n: int, tag: str) -> None:
            item = f"{tag}-{n}"
            held = await store.locate("bench", item)
            key = routing.shard_key("P", item, rng=rng)
            version = 1 if held is None else held.version + 1
            await store.place("bench", item, StoredEntry(key, f"{n:07d}", item, {"n": n},
                                                         version),
                              version=version, expected=held)

        out = []
        for label, tag in (("put of a new item", "new"), ("put over an entry", "old")):
            best_ours = best_raw = float("inf")
            for attempt in range(3):  # best of three, alternating, against noise
                mine, theirs = f"{tag}{attempt if tag == 'new' else ''}", \
                    f"r{tag}{attempt if tag == 'new' else ''}"
                start = time.process_time()
                for n in range(writes):
                    await ours(n, mine)
                best_ours = min(best_ours, time.process_time() - start)
                start = time.process_time()
                for n in range(writes):
                    await raw(n, theirs)
                best_raw = min(best_raw, time.process_time() - start)
            out.append((label, best_ours / writes, best_raw / writes))
        await index.close()
        return out

    return run_virtual(body())


def measure_units(writes: int, *, reshard: bool, paused: bool = False,
                  hot: bool = False) -> dict[str, float]:
    """Units and requests per acknowledged put of the writer's index (not the mover's),
    and how many acknowledged puts a read right after missed, and the final listing.

    ``paused``: every other put waits one to three leases between its routing check and
    its request; ``hot``: the store throttles every put for two seconds and the writer
    paces them (``adaptive=True``), so they queue."""
    async def body() -> dict[str, float]:
        store = _Pausing(seed=2)
        rng = random.Random(2)
        acked: list[str] = []
        missed: set[str] = set()
        async with ShardedIndex(store, "orders", Routing(), routing_lease=LEASE,
                                routing_ttl=0.5, seed=1, adaptive=hot,
                                retry=RetryPolicy(attempts=200, base=0.05, cap=1.0,
                                                  deadline=None)) as writer, \
                ShardedIndex(store, "orders", routing_ttl=0.5, seed=2) as reader:
            for i in range(40):
                await writer.put("P", f"old-{i}", sort=f"{i:04d}")
            runner = None
            mover = Resharder(store, "orders", seed=5, unit_lease=2.0, rate=300.0)
            if reshard:
                await mover.__aenter__()
                await mover.start({"P": ShardPolicy(8)}, margin=0.5)
                runner = asyncio.ensure_future(_done(mover))
            if hot:
                store.hot_until = store.clock.now() + 2.0
            # the writer's requests alone, not the mover's: counted by the task making them
            counted = _Counted(store)

            async def one(i: int) -> None:
                item = f"new-{i}"
                if paused and i % 2 == 0:
                    store.pauses[item] = rng.uniform(LEASE, 3 * LEASE)
                with counted.mine():
                    ok = await writer.put("P", item, sort=f"{i:04d}")
                if ok:
                    acked.append(item)
                    if item not in await _listed(reader):
                        missed.add(item)

            tasks = []
            for i in range(writes):
                tasks.append(asyncio.ensure_future(one(i)))
                await asyncio.sleep(0.02 if hot else 0.1)
            await asyncio.gather(*tasks)
            if runner is not None:
                await runner
                await mover.__aexit__(None, None, None)
            await asyncio.sleep(2 * LEASE)
            final = await _listed(reader)
        per = {name: value / max(len(acked), 1) for name, value in counted.totals.items()}
        return {**per, "acked": len(acked), "missed": len(missed),
                "lost": sum(1 for item in acked if item not in final)}

    return run_virtual(body())


async def _done(mover: Resharder) -> None:
    """Run the reshard to its end, again after a parity check that kept finding gaps."""
    for _ in range(5):
        try:
            await mover.run(until="done")
            return
        except shardex.ReshardRefused:
            continue


async def _listed(index: ShardedIndex) -> set[str]:
    return {e.item_id async for e in index.scan("P")}


_MINE: contextvars.ContextVar[bool] = contextvars.ContextVar("mine", default=False)


class _Counted:
    """Counts the requests and units of the calls made inside ``mine()`` on ``store``, and
    of the tasks they start (a routing refresh: a context variable follows them)."""

    def __init__(self, store: MemoryStore) -> None:
        self.totals = {"write units": 0.0, "read units": 0.0, "requests": 0.0}
        store.meter.subscribe(self)

    @contextlib.contextmanager
    def mine(self) -> Iterator[None]:
        mark = _MINE.set(True)
        try:
            yield
        finally:
            _MINE.reset(mark)

    def __call__(self, event: Any) -> None:
        if not isinstance(event, Usage) or not _MINE.get():
            return
        self.totals["requests"] += 1
        self.totals["write units" if event.write else "read units"] += event.units


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    writes = 500 if args.quick else 3000
    print(f"write path overhead: memory store (unlimited), {writes:,} puts, virtual time, "
          "CPU time a put (best of 3)")
    print(f"  {'case':28} {'shardex':>10} {'by hand':>10} {'ratio':>7}")
    for label, ours, raw in measure_overhead(writes):
        print(f"  {label:28} {ours * 1e6:8.1f}us {raw * 1e6:8.1f}us {ours / raw:7.2f}")
    n = 40 if args.quick else 120
    print(f"per acknowledged put of the writer ({n} puts, lease {LEASE:g} s); hidden: "
          "acknowledged puts a read right after missed / the final listing misses")
    print(f"  {'case':46} {'write u.':>8} {'read u.':>8} {'requests':>8} {'hidden':>12}")
    for label, options in (("steady state", {"reshard": False}),
                           ("during a reshard 1 -> 8", {"reshard": True}),
                           ("reshard, every other put paused 1-3 leases",
                            {"reshard": True, "paused": True}),
                           ("reshard, puts queued by adaptive pacing",
                            {"reshard": True, "hot": True})):
        got = measure_units(n, **options)
        hidden = f"{got['missed']:.0f}/{got['lost']:.0f} of {got['acked']:.0f}"
        print(f"  {label:46} {got['write units']:8.2f} {got['read units']:8.2f} "
              f"{got['requests']:8.2f} {hidden:>12}")


if __name__ == "__main__":
    main()
