"""The sweep of a retired key: what a reshard left on a key the layout in use lacks.

In ``retired`` no reader reads the keys only the layout being left has. What is still
on them is moved where writes go (an entry the mover missed: one the application put
there late), or removed (a copy a rolled-back move between tiers left on the tier it
left, ``TierLayouts.move``: moved back already), and a row whose item's placement names
another key is named for the operator (``Swept.ghosts``) if a second listing of the key
still holds it: another runner sweeping the same key at once moves rows between this
one's listing and its move. Each write is the mover's paced move (``Mover.sweep``): at
the rate in force, within the migration's budget, paused while the migration is.
``Sweeping`` is that part of the ``Mover``: the sweep of every retired key, each by the
one runner that claims it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial

from shardex.clock import Clock
from shardex.migrate.budget import Budget
from shardex.migrate.layouts import Layouts
from shardex.migrate.pace import IN_FLIGHT, Pace, paced, pages
from shardex.migrate.work import POLL, TakenOver, WorkRecords
from shardex.model.entries import StoredEntry
from shardex.routing import Routing
from shardex.stores.base import gather_or_cancel
from shardex.transition import Transition

__all__ = ["SWEEP_JOB", "Sweeping", "Swept", "retired_keys", "sweep_key"]

SWEEP_JOB = "sweep-"  # the names of the sweep's jobs start so (``WorkRecords.claims``)


def _sweep_job(key: str) -> str:
    """The name of the sweep of retired key ``key`` in the migration's records: the same
    in every runner, whatever keys it sweeps beside it, in characters every store keeps."""
    return f"{SWEEP_JOB}{hashlib.sha256(key.encode()).hexdigest()[:20]}"


@dataclass
class Swept:
    """What sweeps did: entries ``moved``, left-behind copies ``cleared``, the rows no
    placement names (``ghosts``: retired key, item id), and the retired ``keys`` swept
    of ``retired`` (the others swept by other runners)."""

    moved: int = 0
    cleared: int = 0
    ghosts: list[tuple[str, str]] = field(default_factory=list)
    keys: int = 0
    retired: int = 0

    def add(self, other: Swept) -> None:
        self.moved += other.moved
        self.cleared += other.cleared
        self.ghosts += other.ghosts
        self.keys += other.keys
        self.retired = max(self.retired, other.retired)


def retired_keys(layouts: Layouts, routing: Routing) -> list[tuple[str, str]]:
    """(value, key) of each key the ``retired`` sweep sweeps, in order: each value's keys
    the layout being left has and the one in use lacks."""
    meta = routing.reshard
    assert meta is not None
    retired = []
    for value in meta.values:
        kept = set(layouts.target_keys(routing, value))
        retired += [(value, key) for key in layouts.source_keys(routing, value)
                    if key not in kept]
    return sorted(retired)


async def sweep_key(layouts: Layouts, key: str, move: Callable[[StoredEntry], Awaitable[
        str | None]], *, read_rate: float, clock: Clock, in_flight: int = 1,
                    swept: Swept | None = None) -> Swept:
    """Sweep retired key ``key``: ``move(entry)`` each entry on it (the mover's paced
    move: the key it landed on, or None if the entry was gone or changed), up to
    ``in_flight`` at once, reading at most ``read_rate`` read units a second. Counted
    in ``swept`` as it goes (a new one by default), which keeps them if it is stopped."""
    swept = Swept() if swept is None else swept
    window = asyncio.Semaphore(in_flight)

    async def sweep(entry: StoredEntry) -> None:
        async with window:
            landed = await move(entry)
            if landed is not None:
                # a sweep reads only keys the layout in use lacks: landing on the key
                # itself is a left-behind row removed
                if landed == key:
                    swept.cleared += 1
                else:
                    swept.moved += 1
                return
            placement = await layouts.locate(entry.item_id)
        if placement is None or placement.entry is None \
                or placement.entry.shard_key != key:
            swept.ghosts.append((key, entry.item_id))

    listing = partial(layouts.page, key, limit=100)
    async for page in pages(listing, Pace(read_rate, clock)):
        await gather_or_cancel(sweep(entry) for entry in page.entries)
    if swept.ghosts:
        left = {e.item_id async for page in pages(listing, Pace(read_rate, clock))
                for e in page.entries}
        swept.ghosts = [(k, item) for k, item in swept.ghosts if item in left]
    return swept


class Sweeping:
    """The ``Mover``'s sweep of the retired keys (``sweep``), a part of it: what it uses
    of the rest of the mover is declared here."""

    layouts: Layouts
    records: WorkRecords
    budget: Budget | None
    _clock: Clock
    _rng: random.Random
    _read_rate: float
    _workers: int
    _worker: str
    _lease: float
    _in_force: Callable[[], float]
    _pace: Callable[[str], Pace | None]
    _tally: Callable[[str, str, float], None]

    async def sweep(self, routing: Routing) -> Swept:
        """Sweep every key only the layout being left has (``sweep_key``, above),
        ``workers`` keys at once, each with up to ``IN_FLIGHT`` writes in flight, each write
        paced as a move is: at the rate in force (the migration's controls: paused, it
        waits; throttled, it slows), on the key it leaves and the key it lands on,
        within the budget every process shares. Each key is swept by the one runner that
        claims it (``WorkRecords.claim``), the others sweeping the rest and waiting for
        it: every runner swept every key, spending the budget on removals another had
        made (four runners took 8x one's time). A rolled-back tier move's sweep removes
        a copy for each entry the move made: it kept to this process's ``rate`` alone,
        whatever the controls said, and two runners sweeping put twice that on a key;
        one write at a time, one key after another, each removal paced as a tier move
        and charged to a target key it does not write, it took 2.8x what the rate allows
        with one worker and 11x with a worker a key (now 1.1x and 1.3x)."""
        meta = routing.reshard
        assert meta is not None
        workers = asyncio.Semaphore(self._workers)

        async def sweep(job: str, value: str, key: str) -> Swept:
            seen = False
            found = Swept()  # what this runner's sweeps of the key did
            while True:
                async with workers:
                    claim, revision = await self.records.claim(
                        meta.generation, job, self._worker, self._lease, seen=seen)
                    if revision is not None:
                        try:
                            await self._sweep_claimed(meta, job, value, key, found)
                        except TakenOver:
                            # another runner sweeps it now: wait for it, as below; the
                            # rows this one found no placement for it finds again
                            found.ghosts = []
                        else:
                            found.keys = 1
                            return found
                if claim.done:
                    return found
                seen = True
                await self._clock.sleep(POLL)  # another runner's: done, or its lease lapses

        retired = retired_keys(self.layouts, routing)
        swept = Swept(retired=len(retired))
        # a key's sweep that fails stops the others, which give their claims up
        for found in await gather_or_cancel(sweep(_sweep_job(key), value, key)
                                            for value, key in retired):
            swept.add(found)
        return swept

    async def _sweep_claimed(self, meta: Transition, job: str, value: str, key: str,
                             swept: Swept) -> None:
        """Sweep ``key`` under this runner's claim on ``job`` (``WorkRecords.holding``),
        counting in ``swept``; TakenOver if another runner took the claim over."""
        async with self.records.holding(meta.generation, job, self._worker, self._lease), \
                contextlib.AsyncExitStack() as stack:
            # a slice of the budget while it sweeps: a runner waiting for another's key
            # gives its slice up, and the one sweeping takes the whole rate
            if self.budget is not None:
                await stack.enter_async_context(self.budget.working({key}))
            pace = Pace(self._in_force(), self._clock)
            await sweep_key(
                self.layouts, key, partial(self._sweep_move, meta, value, key, pace),
                read_rate=self._read_rate, clock=self._clock, in_flight=IN_FLIGHT,
                swept=swept)

    async def _sweep_move(self, meta: Transition, value: str, key: str, pace: Pace,
                          entry: StoredEntry) -> str | None:
        """Move (or remove) ``entry`` of retired key ``key``, paced: the key it landed on,
        or None if it was gone or changed."""
        pace.follow(self._in_force())
        removal = self.layouts.removal(entry, key)
        # a removal writes ``key`` alone: charged to a target too, the keys swept at once
        # all waited on the one key the value's entries are on
        target = None if removal is not None else self.layouts.destination(value,
                                                                           entry.item_id)
        cost = self.layouts.cost(entry) if removal is None else removal
        landed = await paced(pace, cost, lambda: self.layouts.move(
            entry, value=value, source=key, reshard=meta.id, generation=meta.generation,
            to=target), clock=self._clock, rng=self._rng, budget=self.budget, key=key,
            fills=target, keys=(self._pace(key), None if target is None else self._pace(target)))
        if landed is not None:
            self._tally(key, landed, cost)
        return landed
