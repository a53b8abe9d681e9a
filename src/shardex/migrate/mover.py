"""The mover: surveys the source keys into work units and moves their entries, paced.

The mover works through ``Layouts`` (``shardex.migrate.layouts``). For a shardex index
each move is ``ShardedIndex.relocate``: the write loop re-places the entry on the key the
layout writes follow, at its own version, conditioned on its placement as located, so
an application write racing it wins or is planned again on top, a delete is never
undone, and an item is never under two keys or none (where the store's ``place`` is
atomic: a transaction in DynamoDB index-table mode, one UpdateItem of the shard
attribute in GSI mode). A move whose outcome stays unknown is left to the parity check,
which sends the mover round again.

Pacing: each unit spends at most its allocated rate (``units.allocate``) in write units
a second, estimated per entry from its size, and adapts it by AIMD (``AdaptiveRate``):
a throttle halves it, each second without one raises it back toward the allocation.
Reads of a source key are paced at ``read_rate`` read units a second.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial

from shardex.clock import Clock
from shardex.errors import (
    ConditionFailed,
    MalformedItem,
    OutcomeUnknown,
    Unavailable,
)
from shardex.migrate.budget import Budget
from shardex.migrate.layouts import Layouts, target_of
from shardex.migrate.pace import Pace, paced, pages, read_page
from shardex.migrate.states import MOVING
from shardex.migrate.units import DEFAULT_SPLIT, Survey, Unit, busy_sources, units_of
from shardex.migrate.work import WorkRecords, work_units
from shardex.model.entries import StoredEntry
from shardex.retry import RetryPolicy
from shardex.routing import Routing

__all__ = ["MOVER_RETRY", "Mover"]

log = logging.getLogger("shardex")
# the mover sees every throttle itself (to adapt its rate); it retries the rest
MOVER_RETRY = RetryPolicy(attempts=6, base=0.05, cap=1.0, deadline=None,
                          retry_on=(Unavailable,))
_BATCH = 8  # moves of one unit in flight at once
_POLL = 1.0  # seconds between looks at units leased by others


class Mover:
    """Moves the entries of one reshard generation, with ``workers`` concurrent workers.

    ``layouts`` reads and moves entries (for an index: ``IndexLayouts`` over an index
    opened with ``MOVER_RETRY``, so throttles reach the mover); ``records`` holds the
    units; ``worker`` names this process in leases of ``unit_lease`` seconds.
    ``progress`` is called after each checkpoint. ``spent`` accumulates the write units
    (estimated from entry sizes) the mover spent on each source key, per second of the
    clock: what it added to the key it drains; ``landed`` the same on each key it moved
    entries to. With a ``budget`` (``shardex.migrate.budget``), the writes on each source
    key also keep within the migration's budget, shared with every other process, and
    follow its controls (pause, rate).
    """

    def __init__(self, layouts: Layouts, records: WorkRecords, *, clock: Clock,
                 rate: float, read_rate: float, workers: int, unit_lease: float,
                 worker: str, split_every: int = DEFAULT_SPLIT, seed: int | None = None,
                 progress: Callable[[], None] | None = None,
                 spent: dict[str, dict[int, float]] | None = None,
                 landed: dict[str, dict[int, float]] | None = None,
                 budget: Budget | None = None) -> None:
        self.layouts = layouts
        self.budget = budget
        self.records = records
        self._clock = clock
        self._rate = rate
        self._read_rate = read_rate
        self._workers = workers
        self._lease = unit_lease
        self._worker = worker
        self._split = split_every
        self._rng = random.Random(seed)
        self._progress = progress
        self.spent: dict[str, dict[int, float]] = {} if spent is None else spent
        self.landed: dict[str, dict[int, float]] = {} if landed is None else landed
        self._busy: set[str] = set()  # source keys this process works on now

    # -- the survey ---------------------------------------------------------------

    async def survey(self, routing: Routing, values: Sequence[str]) -> dict[str, list[Survey]]:
        """Read every source key of ``values`` once: counts and ranges, per value."""
        target = target_of(routing)
        surveys: dict[str, list[Survey]] = {}
        for value in values:
            surveys[value] = []
            for source in self.layouts.source_keys(routing, value):
                survey = Survey(source, self._split)
                read = partial(self.layouts.page, source, limit=1000)
                async for page in pages(read, Pace(self._read_rate, self._clock)):
                    for entry in page.entries:
                        survey.add(entry.position, not self.layouts.placed(
                            target, value, source, entry.item_id))
                survey.close()
                surveys[value].append(survey)
        return surveys

    def units(self, routing: Routing, surveys: dict[str, list[Survey]]) -> list[Unit]:
        """The work units of ``routing``'s generation from ``surveys``."""
        meta = routing.reshard
        assert meta is not None
        units: list[Unit] = []
        for value, found in surveys.items():
            units += units_of(value, found, generation=meta.generation,
                              direction=meta.direction, rate=self._rate,
                              targets=len(self.layouts.target_keys(routing, value)),
                              first=len(units))
        return units

    async def plan(self, routing: Routing) -> None:
        """Make the generation's plan unless it exists; wait while another process makes it."""
        meta = routing.reshard
        assert meta is not None
        while True:
            found = await self.records.plan(meta.generation)
            if found is not None and found[0].planned:
                return
            if await self.records.claim_plan(meta.generation, self._worker, self._lease * 4):
                units = self.units(routing, await self.survey(routing, meta.values))
                if await self.records.publish(meta.generation, units, self._worker):
                    return
                continue
            await self._clock.sleep(_POLL)

    # -- moving --------------------------------------------------------------------

    async def run(self, routing: Routing) -> None:
        """Plan if needed, then work units until every unit of the generation is done.

        Returns early if the routing leaves the generation (a rollback, another pass).
        """
        await self.plan(routing)
        await asyncio.gather(*(self._work(routing) for _ in range(self._workers)))

    def _current(self, routing: Routing) -> bool:
        """True while the index's routing is still this generation, in a moving state."""
        now = self.layouts.routing
        return (now.reshard is not None and routing.reshard is not None
                and now.reshard.id == routing.reshard.id
                and now.reshard.generation == routing.reshard.generation
                and now.state in MOVING)

    async def _work(self, routing: Routing) -> None:
        meta = routing.reshard
        assert meta is not None

        def eligible(unit: Unit, units: list[Unit], now: float) -> bool:
            # one range of a source key at a time, so the key's rate is never exceeded
            return unit.source not in busy_sources(units, now) | self._busy

        async def process(key: str, unit: Unit, revision: int) -> None:
            self._busy.add(unit.source)
            try:
                await self._process(routing, key, unit, revision)
            finally:
                self._busy.discard(unit.source)

        await work_units(lambda: self.records.units(meta.generation), process,
                         records=self.records, worker=self._worker, lease=self._lease,
                         clock=self._clock, rng=self._rng, eligible=eligible,
                         alone=lambda unit: self._alone(meta.generation, unit),
                         going=lambda: self._current(routing), poll=_POLL)

    async def _alone(self, generation: int, unit: Unit) -> bool:
        """True if ``unit`` is the one range of its key under lease (lowest number wins).

        Two workers may lease two ranges of one key at the same instant; the one holding
        the higher-numbered range gives its lease back and looks again.
        """
        units = [u for u, _ in (await self.records.units(generation)).values()]
        now = self._clock.wall()
        rivals = [u for u in units if u.source == unit.source and u.number != unit.number
                  and u.leased_at(now)]
        return all(u.number > unit.number for u in rivals)

    async def _process(self, routing: Routing, key: str, unit: Unit, revision: int) -> None:
        """Move the entries of ``unit``, checkpointing after each page; stop if the lease goes."""
        pace = Pace(unit.rate, self._clock)
        reads = Pace(self._read_rate, self._clock)
        # a page takes about a quarter of the lease at the unit's rate (2 units a move)
        page_size = max(1, min(100, int(unit.rate * self._lease / 8)))
        saved_at = self._clock.wall()
        while self._current(routing):
            page = await read_page(self.layouts, unit.source, unit.after, page_size, reads)
            entries = [e for e in page.entries if unit.contains(e.position)]
            finished = page.resume is None or len(entries) < len(page.entries)
            for i in range(0, len(entries), _BATCH):
                batch = entries[i:i + _BATCH]
                outcomes = await asyncio.gather(*(self._move(unit, e, pace) for e in batch))
                unit = replace(unit, after=batch[-1].position,
                               moved=unit.moved + outcomes.count("moved"),
                               skipped=unit.skipped + outcomes.count("skipped"),
                               unresolved=unit.unresolved + outcomes.count("unresolved"))
                if self._clock.wall() - saved_at >= self._lease / 3:
                    saved = await self.records.checkpoint(key, unit, revision, lease=self._lease)
                    if saved is None:
                        return  # the lease was taken over: the other worker goes on
                    (unit, revision), saved_at = saved, self._clock.wall()
            if finished:
                unit = replace(unit, done=True)
            elif page.resume is not None:
                unit = replace(unit, after=page.resume)
            saved = await self.records.checkpoint(key, unit, revision, lease=self._lease)
            if saved is None or unit.done:
                return
            (unit, revision), saved_at = saved, self._clock.wall()
            if self._progress is not None:
                self._progress()

    async def _move(self, unit: Unit, entry: StoredEntry, pace: Pace) -> str:
        """Move one entry: "moved", "skipped" (nothing to do) or "unresolved"."""
        if self.layouts.placed(self.layouts.routing.writing, unit.value, entry.shard_key,
                               entry.item_id):
            return "skipped"
        cost = self.layouts.cost(entry)
        try:
            moved = await paced(pace, cost, lambda: self.layouts.move(
                entry, value=unit.value, source=unit.source,
                reshard=self.records.reshard_id, generation=unit.generation),
                clock=self._clock, rng=self._rng, budget=self.budget, key=unit.source)
        except (Unavailable, OutcomeUnknown, ConditionFailed, MalformedItem) as exc:
            # a hot or damaged item: the parity check names it, another pass retries
            log.warning("reshard: %s", exc)
            return "unresolved"
        if moved is not None:
            now = int(self._clock.now())
            for key, spent in ((unit.source, self.spent), (moved, self.landed)):
                second = spent.setdefault(key, {})
                second[now] = second.get(now, 0.0) + cost
        return "moved" if moved is not None else "skipped"
