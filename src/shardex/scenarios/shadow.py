"""A shadow run: one migration on the real index and runner, listings checked throughout.

The rate engine counts what a migration costs; it cannot tell whether a listing read
while it runs is complete. A shadow run can: a ``ShardedIndex`` on ``memory://`` on
virtual time holds a scaled population of the key's entries (``entries``), an
application keeps putting and deleting entries (``write_rate`` a second), a reader with
its own routing cache lists the whole key every ``list_every`` seconds, and the runner
(``autopilot.runner.Runner``, the one the autopilot drives) takes the key from ``old``
to ``new`` through every state (start, run, verify, cutover, complete), each listing
checked against the ground truth (``shardex.scenarios.truth``). The routing's lease and
the reshard's margin are scaled down with the population (the states' safety does not
depend on their length, only on clients acting within them). ``new`` None lists the
layout ``old`` alone (a run with no migration).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from shardex.autopilot.runner import DEFAULT_WORKERS, Runner
from shardex.clock import LoopClock
from shardex.errors import ShardexError
from shardex.index import Entry, ShardedIndex
from shardex.reshard import Progress
from shardex.routing import Routing, ShardPolicy
from shardex.scenarios.truth import Tracker
from shardex.sim.clock import run_virtual
from shardex.stores.memory import MemoryStore
from shardex.transition import Parity

__all__ = ["ShadowResult", "shadow"]

_INDEX = "shadow"


@dataclass(slots=True)
class ShadowResult:
    """What a shadow run saw: listings checked and what was wrong with them, the states
    the runner went through, its parity report, and the writes made meanwhile."""

    value: str
    from_n: int
    to_n: int | None
    entries: int
    writes: int = 0
    failed_writes: int = 0
    listings: int = 0
    problems: list[str] = field(default_factory=list)
    states: list[str] = field(default_factory=list)
    parity: Parity | None = None
    seconds: float = 0.0
    final_n: int | None = None

    @property
    def complete(self) -> bool:
        """Every listing matched the ground truth, parity (if any) found no gap, and the
        key ended in the layout asked for."""
        return (not self.problems and self.listings > 0
                and (self.parity is None or self.parity.clean)
                and self.final_n == (self.to_n if self.to_n is not None else self.from_n))

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "from_n": self.from_n, "to_n": self.to_n,
                "entries": self.entries, "writes": self.writes,
                "failed_writes": self.failed_writes, "listings": self.listings,
                "problems": self.problems[:5], "states": self.states,
                "parity_gaps": None if self.parity is None else self.parity.gaps,
                "virtual_seconds": round(self.seconds, 2), "complete": self.complete}


def shadow(value: str, old: ShardPolicy, new: ShardPolicy | None, *, entries: int = 200,
           write_rate: float = 20.0, seed: int = 1, lease: float = 1.0, margin: float = 0.5,
           list_every: float = 0.25, mover_rate: float = 200.0) -> ShadowResult:
    """Run one shadow migration of ``value`` from ``old`` to ``new`` on virtual time."""
    return run_virtual(_shadow(value, old, new, entries=entries, write_rate=write_rate,
                               seed=seed, lease=lease, margin=margin, list_every=list_every,
                               mover_rate=mover_rate))


def _routing(value: str, policy: ShardPolicy) -> Routing:
    return Routing(overrides={value: policy}) if policy != ShardPolicy() else Routing()


async def _shadow(value: str, old: ShardPolicy, new: ShardPolicy | None, *, entries: int,
                  write_rate: float, seed: int, lease: float, margin: float,
                  list_every: float, mover_rate: float) -> ShadowResult:
    clock = LoopClock()
    rng = random.Random(seed)
    store = MemoryStore(profile="unlimited", seed=seed)
    result = ShadowResult(value, old.shards, None if new is None else new.shards, entries)
    truth = Tracker()
    live: list[str] = []
    counter = 0
    done = asyncio.Event()

    def sort_of(i: int) -> str:
        return f"{i:09d}"

    index = ShardedIndex(store, _INDEX, routing=_routing(value, old), routing_ttl=lease / 2,
                         routing_lease=lease, clock=clock, seed=seed)
    reader = ShardedIndex(store, _INDEX, routing_ttl=lease / 2, clock=clock, seed=seed + 1)

    async def written(write: Awaitable[object]) -> bool:
        """Whether a write applied (a failure says it did not: the index's contract)."""
        result.writes += 1
        try:
            await write
        except ShardexError:
            result.failed_writes += 1
            return False
        return True

    async def put() -> None:
        nonlocal counter
        counter += 1
        item = f"o-{counter:07d}"
        truth.entering(item, (sort_of(counter), item), clock.now())
        ok = await written(index.put(value, item, sort=sort_of(counter)))
        truth.entered(item, clock.now(), ok=ok)
        if ok:
            live.append(item)

    async def delete() -> None:
        if not live:
            return
        item = live.pop(rng.randrange(len(live)))
        truth.leaving(item, clock.now())
        ok = await written(index.delete(value, item))
        truth.left(item, clock.now(), ok=ok)

    async def application() -> None:
        pending: set[asyncio.Task[None]] = set()
        while not done.is_set():
            await clock.sleep(1 / write_rate)
            for call in (put, delete) if rng.random() < 0.5 else (put,):
                task = asyncio.ensure_future(call())
                pending.add(task)
                task.add_done_callback(pending.discard)
        await asyncio.gather(*pending)

    async def listing() -> None:
        start = clock.now()
        found: list[Entry] = []
        cursor = None
        try:
            while True:
                page = await reader.query(value, limit=100, cursor=cursor)
                found += page.items
                if (cursor := page.cursor) is None:
                    break
        except ShardexError as exc:
            result.problems.append(f"listing failed: {exc}")
            return
        result.listings += 1
        result.problems += truth.check(found, start, clock.now(), complete=True)

    async def lister() -> None:
        while not done.is_set():
            await clock.sleep(list_every)
            await listing()

    def seen(progress: Progress) -> None:
        if not result.states or result.states[-1] != progress.state:
            result.states.append(progress.state)

    began = clock.now()
    async with index:
        await reader.open()
        for _ in range(entries):
            await put()
        tasks = [asyncio.ensure_future(application()), asyncio.ensure_future(lister())]
        if new is None:
            await clock.sleep(10 * lease)
        else:
            async with Runner(store, _INDEX, rate=mover_rate, routing_ttl=lease / 2,
                              unit_lease=2.0, seed=seed, clock=clock, progress=seen,
                              workers=DEFAULT_WORKERS) as runner:
                await runner.start({value: new}, margin=margin)
                run = await runner.run(until="done")
                result.parity = run.parity
            await clock.sleep(2 * lease)  # listings go on once the reshard is done
        done.set()
        await asyncio.gather(*tasks)
        await listing()
        routing = await reader.refresh_routing()
        result.final_n = routing.policy(value).shards
        await reader.close()
    result.seconds = clock.now() - began
    return result
