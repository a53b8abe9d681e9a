"""Several runners of one migration: what a reshard's movers and its sweep of the retired
keys take with 1, 2 and 4 runners at once, against one runner's and what the rate allows.

Run: .venv/bin/python benchmarks/bench_runners.py [--entries N] [--keys K] [--rate R]
     [--mover-rate R]

On memory:// under virtual time (latency median 4 ms, p99 25 ms: the store's default),
every runner a ``Resharder.run`` of the same migration, one budget shared through the
index's records (``shardex.migrate.budget``).

1. The movers: a value's entries resharded from 4 to 8 hashed keys (400 a key; the four
   old keys drain into the four new ones) and from 64 to 128 (100 a key),
   ``--mover-rate`` write units a second a key, by one runner with 1 and 4 workers and
   by 4 runners with 1 worker and 2 with 2: the time from ``run`` to ``verified`` (the
   moves, the waits for clients, the parity check).
2. The sweep: a value's entries moved onto K keys of a tier of their own (a store of its
   own) and the move rolled back: every entry goes back to the index's store and leaves
   a copy on the tier, which the ``retired`` step's sweep removes. The sweep is run by 1,
   2 and 4 runners at once, with 1 and 4 workers each. Printed for each: the sweep's
   time, its ratio to what the rate allows (each removal one write on the tier's store,
   2 units, each key drained at ``--rate`` units a second, as many keys at once as the
   runners' workers: a runner's slice of the budget is the whole rate on a key no other
   runner writes), its ratio to one runner's with the same workers, the write units the
   sweep's removals were paced at (each removal sent once: the number for one runner),
   and the tier's read units against one runner's (each key listed once).

Every figure is measured in this run; ratios compare numbers from this run only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from dataclasses import dataclass

from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.migrate.budget import Sharing
from shardex.migrate.tiered import TierLayouts
from shardex.model.entries import StoredEntry
from shardex.reshard import Resharder
from shardex.sim.clock import run_virtual
from shardex.stores.memory import MemoryStore

_REMOVAL = 2.0  # write units of a removal: one transaction on the tier's store


@dataclass(frozen=True, slots=True)
class Swept:
    seconds: float
    units: float  # the write units the removals were paced at, summed
    reads: float  # the tier store's read units during the sweep


async def _sweep(entries: int, keys: int, rate: float, runners: int, workers: int) -> Swept:
    main, tier = MemoryStore(seed=3), MemoryStore(seed=4)
    tiers = {"dedicated": tier}
    async with ShardedIndex(main, "orders", Routing(), routing_lease=1.0, routing_ttl=0.5,
                            tiers=tiers) as app:
        for i in range(entries):
            await app.put("BIG", f"b-{i:05d}", sort=f"{i:05d}")
    async with contextlib.AsyncExitStack() as stack:
        each = [await stack.enter_async_context(Resharder(
            main, "orders", tiers=tiers, rate=rate, workers=workers, unit_lease=2.0,
            seed=10 + i, worker=f"runner-{i}", sharing=Sharing(poll=0.5)))
            for i in range(runners)]
        first = each[0]
        await first.start({"BIG": ShardPolicy(keys, tier="dedicated")}, margin=0.2)
        await first.run(until="verified")
        await first.begin_rollback()
        await first.run(until="retired")  # moved back: the copies wait for the sweep
        units = 0.0
        removed = TierLayouts.move

        async def counted(self: TierLayouts, entry: StoredEntry, **kw: object) -> str | None:
            nonlocal units
            cost = self.removal(entry, str(kw["source"]))
            units += self.cost(entry) if cost is None else cost
            return await removed(self, entry, **kw)  # type: ignore[arg-type]

        TierLayouts.move = counted  # type: ignore[method-assign]
        try:
            reads = tier.stats("orders").totals.read_units
            began = main.clock.now()
            results = await asyncio.gather(*(r.run(until="done") for r in each))
            took = main.clock.now() - began
        finally:
            TierLayouts.move = removed  # type: ignore[method-assign]
        assert all(r.state == "done" for r in results), results
        assert sum(r.cleared for r in results) == entries, results
        return Swept(took, units, tier.stats("orders").totals.read_units - reads)


async def _move(rate: float, runners: int, workers: int, old: int = 4, new: int = 8,
                per_key: int = 400) -> tuple[int, float]:
    """The entries moved (of ``per_key`` a key) and the seconds from ``run`` to
    ``verified``."""
    store = MemoryStore(seed=2)
    async with ShardedIndex(store, "orders", Routing(overrides={"P": ShardPolicy(old)}),
                            routing_lease=1.0) as app:
        for i in range(per_key * old):
            await app.put("P", f"o-{i:05d}", sort=f"{i:05d}")
    async with contextlib.AsyncExitStack() as stack:
        each = [await stack.enter_async_context(Resharder(
            store, "orders", rate=rate, workers=workers, unit_lease=2.0, seed=i,
            worker=f"runner-{i}", sharing=Sharing(poll=0.5))) for i in range(runners)]
        plan = await each[0].start({"P": ShardPolicy(new)}, margin=0.2)
        began = store.clock.now()
        results = await asyncio.gather(*(r.run(until="verified") for r in each))
        assert all(r.state == "verified" for r in results), results
        return plan.to_move, store.clock.now() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=800)
    parser.add_argument("--keys", type=int, default=4)
    parser.add_argument("--rate", type=float, default=250.0, help="the sweep's")
    parser.add_argument("--mover-rate", type=float, default=100.0, help="the movers'")
    args = parser.parse_args()
    for old, new, per_key in ((4, 8, 400), (64, 128, 100)):
        print(f"1. a reshard's movers, {old} -> {new} keys, --rate {args.mover_rate:g} "
              "(memory://, virtual time), run to verified")
        first: float | None = None
        for runners, workers in ((1, 1), (1, 4), (4, 1), (2, 2)):
            moved, took = run_virtual(_move(args.mover_rate, runners, workers, old, new,
                                            per_key))
            first = first or took
            print(f"  {runners} runner(s), {workers} worker(s) each: {moved:,} moved in "
                  f"{took:5.1f} s = {took / first:.2f}x one runner's with one worker")
    print(f"2. the sweep of {args.entries:,} copies on {args.keys} retired keys of a tier, "
          f"--rate {args.rate:g} (memory://, virtual time)")
    for workers in (1, 4):
        alone: Swept | None = None
        for runners in (1, 2, 4):
            swept = run_virtual(_sweep(args.entries, args.keys, args.rate, runners, workers))
            alone = alone or swept
            at_once = min(args.keys, workers * runners)
            allowed = args.entries * _REMOVAL / args.rate / at_once
            print(f"  {runners} runner(s), {workers} worker(s) each: {swept.seconds:5.1f} s = "
                  f"{swept.seconds / allowed:.2f}x what the rate allows "
                  f"({allowed:.1f} s, {at_once} key(s) at once), "
                  f"{swept.seconds / alone.seconds:.2f}x one runner's; "
                  f"removals paced at {swept.units:,.0f} units "
                  f"({swept.units / alone.units:.2f}x one runner's), tier read units "
                  f"{swept.reads:,.0f} ({swept.reads / alone.reads:.2f}x)")


if __name__ == "__main__":
    main()
