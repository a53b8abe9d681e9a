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

An adoption's units are Scan segments of its source instead (``Unit.kind``), whose items
the mover copies (``shardex.migrate.segments``); in ``retired`` it sweeps the keys only
the layout being left has (``shardex.migrate.sweep``). Those two parts of ``Mover`` are
its bases, ``SegmentCopying`` and ``Sweeping``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial

from shardex.clock import GOODBYE, Clock, settled, taken, within
from shardex.errors import (
    ConditionFailed,
    InvalidInput,
    MalformedItem,
    OutcomeUnknown,
    ShardexError,
    Unavailable,
)
from shardex.migrate.budget import Budget
from shardex.migrate.layouts import Layouts, target_of
from shardex.migrate.pace import IN_FLIGHT, Pace, paced, page_entries, pages, read_page
from shardex.migrate.segments import SegmentCopying
from shardex.migrate.states import MOVING
from shardex.migrate.sweep import Sweeping
from shardex.migrate.units import (
    DEFAULT_SPLIT,
    Survey,
    Unit,
    allocate,
    busy_sources,
    units_of,
)
from shardex.migrate.work import POLL, Idle, WorkRecords, work_units
from shardex.model.entries import Position, QueryPage, StoredEntry
from shardex.retry import RetryPolicy
from shardex.routing import Routing
from shardex.transition import Transition

__all__ = ["MOVER_RETRY", "Mover", "first_refused"]

log = logging.getLogger("shardex")
# the mover sees every throttle itself (to adapt its rate); it retries the rest
MOVER_RETRY = RetryPolicy(attempts=6, base=0.05, cap=1.0, deadline=None,
                          retry_on=(Unavailable,))
_FOLLOW = 0.5  # seconds between a unit's looks at the rate in force
_PLANNING = "planning the moves: reading each source key once"  # as status says it


def _counted(unit: Unit, outcomes: Sequence[str]) -> Unit:
    """``unit`` with ``outcomes`` (of ``Mover._move``) added to its counts."""
    return replace(unit, moved=unit.moved + outcomes.count("moved"),
                   skipped=unit.skipped + outcomes.count("skipped"),
                   unresolved=unit.unresolved + outcomes.count("unresolved"))


def migration_of(routing: Routing) -> Transition | None:
    """The migration ``routing`` is in: its reshard's, or its adoption's."""
    if routing.reshard is not None:
        return routing.reshard
    return None if routing.adoption is None else routing.adoption.migration


def first_refused(refused: Mapping[tuple[str, str], str]) -> tuple[str, str, str, str]:
    """The first of a mover's ``refused`` entries (not empty): its item id, its value, why,
    and how many more there are, said (`` and 3 more``, or nothing)."""
    (value, item_id), why = next(iter(refused.items()))
    more = f" and {len(refused) - 1:,} more" if len(refused) > 1 else ""
    return item_id, value, why, more


class Mover(Sweeping, SegmentCopying):
    """Moves the entries of one reshard generation, with ``workers`` concurrent workers.

    ``layouts`` reads and moves entries (for an index: ``IndexLayouts`` over an index
    opened with ``MOVER_RETRY``, so throttles reach the mover); ``records`` holds the
    units; ``worker`` names this process in leases of ``unit_lease`` seconds.
    ``progress`` is called after each checkpoint. ``spent`` accumulates the write units
    (estimated from entry sizes) the mover spent on each source key, per second of the
    clock: what it added to the key it drains; ``landed`` the same on each key it moved
    entries to. With a ``budget`` (``shardex.migrate.budget``), the writes on each source
    key also keep within the migration's budget, shared with every other process, and
    follow its controls (pause, rate). ``present(doing)``, while it plans, marks its
    runner where status finds it (``MigrationRunner.present``): it holds no unit then.
    """

    def __init__(self, layouts: Layouts, records: WorkRecords, *, clock: Clock,
                 rate: float, read_rate: float, workers: int, unit_lease: float,
                 worker: str, split_every: int = DEFAULT_SPLIT, seed: int | None = None,
                 progress: Callable[[], None] | None = None,
                 spent: dict[str, dict[int, float]] | None = None,
                 landed: dict[str, dict[int, float]] | None = None,
                 refused: dict[tuple[str, str], str] | None = None,
                 budget: Budget | None = None,
                 present: Callable[[str], contextlib.AbstractAsyncContextManager[None]]
                 | None = None) -> None:
        self.layouts = layouts
        self.budget = budget
        self._present = present
        self.records = records
        self._clock = clock
        self._rate = rate
        self._read_rate = read_rate
        self._workers = workers
        self._lease = unit_lease
        self._move_cost: float | None = None  # units a move took, the last page's mean
        self._worker = worker
        self._split = split_every
        self._rng = random.Random(seed)
        self._progress = progress
        self.spent: dict[str, dict[int, float]] = {} if spent is None else spent
        self.landed: dict[str, dict[int, float]] = {} if landed is None else landed
        # (value, item id) -> why its new place refused the entry (a store's refusal of
        # a move; an adopted item's value that is no logical key)
        self.refused: dict[tuple[str, str], str] = {} if refused is None else refused
        self._busy: set[str] = set()  # source keys this process works on now
        self._idle = Idle()  # its idle workers look again when one of them ends a unit
        self._paces: dict[str, Pace] = {}  # the pace per target key, without a budget
        self.scanned = 0  # items this process scanned and copied, for progress
        self.copied = 0

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
                        moves = not self.layouts.placed(target, value, source, entry.item_id)
                        survey.add(entry.position, moves,
                                   self.layouts.cost(entry) if moves else 0.0)
                survey.close()
                surveys[value].append(survey)
        return surveys

    def units(self, routing: Routing, surveys: dict[str, list[Survey]]) -> list[Unit]:
        """The work units of ``routing``'s generation from ``surveys``."""
        meta = routing.reshard
        assert meta is not None
        units: list[Unit] = []
        for value, found in surveys.items():
            drains, fills = self.layouts.flow(routing, value)
            units += units_of(value, found, generation=meta.generation,
                              direction=meta.direction,
                              rate=allocate(self._rate, sources=drains, targets=fills),
                              first=len(units))
        return units

    async def plan(self, generation: int,
                   make: Callable[[], Awaitable[tuple[list[Unit], int | None]]]) -> None:
        """Make ``generation``'s plan with ``make()`` (its units, and the total they set out
        to move or scan: None, the entries the units are to move) unless it exists; wait
        while another process makes it."""
        async with contextlib.AsyncExitStack() as stack:
            marked = False
            while True:
                found = await self.records.plan(generation)
                if found is not None and found[0].planned:
                    return
                if self._present is not None and not marked:  # it holds no unit meanwhile
                    await stack.enter_async_context(self._present(_PLANNING))
                    marked = True
                if await self.records.claim_plan(generation, self._worker, self._lease * 4):
                    units, total = await make()
                    if await self.records.publish(generation, units, self._worker,
                                                  total=total):
                        return
                    continue
                await self._clock.sleep(POLL)

    async def _surveyed(self, routing: Routing) -> tuple[list[Unit], int | None]:
        meta = routing.reshard
        assert meta is not None
        return self.units(routing, await self.survey(routing, meta.values)), None

    # -- moving --------------------------------------------------------------------

    async def run(self, routing: Routing, *, plan: Callable[
            [], Awaitable[tuple[list[Unit], int | None]]] | None = None) -> None:
        """Plan if needed (a reshard's by a survey of its source keys, or by ``plan``),
        then work units until every unit of the generation is done.

        Returns early if the routing leaves the generation (a rollback, another pass).
        """
        meta = migration_of(routing)
        assert meta is not None
        await self.plan(meta.generation, plan or partial(self._surveyed, routing))
        await asyncio.gather(*(self._work(routing, meta) for _ in range(self._workers)))

    def _current(self, routing: Routing) -> bool:
        """True while the index's routing is still this generation, in a moving state."""
        now = self.layouts.routing
        meta, latest = migration_of(routing), migration_of(now)
        return (meta is not None and latest is not None and latest.id == meta.id
                and latest.generation == meta.generation
                and (now.state in MOVING if now.adoption is None or now.reshard is not None
                     else now.adoption.state == "write-new"))

    async def _work(self, routing: Routing, meta: Transition) -> None:

        def eligible(unit: Unit, units: list[Unit], now: float) -> bool:
            # one range of a source key at a time, so the key's rate is never exceeded
            return unit.source not in busy_sources(units, now) | self._busy

        async def process(key: str, unit: Unit, revision: int) -> None:
            self._busy.add(unit.source)
            try:
                async with contextlib.AsyncExitStack() as stack:
                    if self.budget is not None:  # a segment's copies land on any key
                        await stack.enter_async_context(self.budget.working(
                            None if unit.kind == "segment" else
                            {unit.source, *self.layouts.fills(routing, unit.value)}))
                    if unit.kind == "segment":
                        await self._scan_segment(routing, key, unit, revision)
                    else:
                        await self._process(routing, key, unit, revision)
            finally:
                self._busy.discard(unit.source)

        await work_units(lambda: self.records.units(meta.generation), process,
                         records=self.records, worker=self._worker, lease=self._lease,
                         clock=self._clock, rng=self._rng, eligible=eligible,
                         alone=lambda unit: self._alone(meta.generation, unit),
                         going=lambda: self._current(routing), poll=POLL, idle=self._idle)

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
        """Move the entries of ``unit`` page by page, ``IN_FLIGHT`` moves in flight at once,
        each sent as one ends (in batches that waited for their slowest, a unit on a
        store whose latency bound it kept three of eight in flight on average), the next
        page read while one's entries move; checkpoint after each page, and stop if the
        lease goes."""
        rate = self._unit_rate(routing, unit)
        pace = Pace(rate, self._clock)
        reads = Pace(self._read_rate, self._clock)
        page_size = page_entries(rate, self._lease, self._move_cost)
        window = asyncio.Semaphore(IN_FLIGHT)
        followed = -math.inf  # when the unit last looked at the rate in force
        ended: list[str] = []  # the outcomes of the page's moves that ended so far

        async def move(entry: StoredEntry, cost: float) -> str:
            nonlocal followed
            async with window:
                if self._clock.now() - followed >= _FOLLOW:  # a throttle, a cut
                    followed = self._clock.now()
                    pace.follow(self._unit_rate(routing, unit))
                outcome = await self._move(unit, entry, cost, pace)
            ended.append(outcome)
            return outcome

        def read(after: Position | None) -> asyncio.Future[QueryPage]:
            return asyncio.ensure_future(read_page(self.layouts, unit.source, after,
                                                   page_size, reads))

        reading: asyncio.Future[QueryPage] | None = None
        try:
            while self._current(routing):
                page = await (reading or read(unit.after))
                reading = None
                entries = [e for e in page.entries if unit.contains(e.position)]
                finished = page.resume is None or len(entries) < len(page.entries)
                costs = [self.layouts.cost(e) for e in entries]
                if entries:  # the next page sized for moves as dear as this one's
                    self._move_cost = sum(costs) / len(entries)
                    page_size = page_entries(rate, self._lease, self._move_cost)
                if not finished:  # the next page is read while this one's entries move
                    reading = read(page.resume)
                # the page's moves hold the lease (renewed as the unit stood before them)
                held = await self._holding(key, unit, revision, asyncio.gather(
                    *(move(e, cost) for e, cost in zip(entries, costs, strict=True))), ended)
                if held is None:
                    return  # the lease was taken over: the other worker goes on
                outcomes, (unit, revision) = held
                unit = _counted(unit, outcomes)
                ended.clear()
                if finished:
                    unit = replace(unit, done=True)
                elif page.resume is not None:
                    unit = replace(unit, after=page.resume)
                saved = await self.records.checkpoint(key, unit, revision, lease=self._lease)
                if saved is None or unit.done:
                    return
                unit, revision = saved
                if self._progress is not None:
                    self._progress()
        except asyncio.CancelledError:
            # stopped (Ctrl-C, a bounded step): count what moved since the last checkpoint,
            # so status counts it; the unit goes on from there, where those are found in
            # place and counted by no one (nor moves cut short in flight)
            with contextlib.suppress(ShardexError):  # a store that does not answer: it lapses
                await within(self._clock, GOODBYE, self.records.checkpoint(
                    key, _counted(unit, ended), revision, lease=self._lease),
                    "the checkpoint on stopping")
            raise
        finally:
            if reading is not None:  # read ahead, not needed: the unit ends here
                reading.cancel()
                await asyncio.gather(reading, return_exceptions=True)

    async def _holding(self, key: str, unit: Unit, revision: int,
                       work: asyncio.Future[list[str]], ended: Sequence[str] = ()
                       ) -> tuple[list[str], tuple[Unit, int]] | None:
        """``work``'s outcomes, the unit's lease renewed every third of a lease while it
        waits (paused, held, a budget slice too small for a second, moves dearer than the
        page was sized for): a paused mover keeps its units and status lists it, where
        the leases had lapsed and another process took them over. A renewal records the
        outcomes of the page's moves ``ended`` so far beside the unit's, so the moved
        count grows within a page (it stood still for a page of dear moves, 24 s of a
        lease of 30); the unit returned is as given, its lease renewed. None if the lease
        was lost meanwhile (``work`` is let finish: its moves are conditional, each done
        once)."""
        try:
            while True:
                if await settled(work, self._clock, self._lease / 3):
                    return work.result(), (unit, revision)
                saved = await self.records.checkpoint(key, _counted(unit, list(ended)),
                                                      revision, lease=self._lease)
                if saved is None:
                    await work
                    return None
                renewed, revision = saved
                unit = replace(renewed, moved=unit.moved, skipped=unit.skipped,
                               unresolved=unit.unresolved)
        except BaseException:
            # stopped (Ctrl-C, a bounded step) or failed: cancel the moves as gather's
            # caller would, and take their end, so asyncio reports no unread exception
            work.add_done_callback(taken)
            work.cancel()
            raise

    def _unit_rate(self, routing: Routing, unit: Unit) -> float:
        """The pace of ``unit``: the rate in force now (the migration's controls; this
        process's ``rate`` without a budget or while paused), shared out over the keys
        entries leave and land on (``allocate``, ``Layouts.flow``), not the rate of the process that
        planned the unit (a rollback planned at 5 and resumed at 1,000 crawled at 5)."""
        drains, fills = self.layouts.flow(routing, unit.value)
        return allocate(self._in_force(), sources=drains, targets=fills)

    def _in_force(self) -> float:
        """The rate in force on a key: this process's ``rate`` without a budget; with
        one, after a cut the rate it grows back from, and paused or held the one it
        resumes at (the budget holds the sends meanwhile)."""
        if self.budget is None:
            return self._rate
        return self.budget.rate or self.budget.controls.set_rate

    def _pace(self, key: str) -> Pace | None:
        """The pace of the copies or moves onto ``key`` (made once a key, not once a
        write); None with the shared budget, which paces each key for every process at
        once."""
        if self.budget is not None:
            return None
        pace = self._paces.get(key)
        if pace is None:
            pace = self._paces[key] = Pace(self._rate, self._clock)
        return pace

    async def _move(self, unit: Unit, entry: StoredEntry, cost: float, pace: Pace) -> str:
        """Move one entry, which costs ``cost`` (``Layouts.cost``): "moved", "skipped" (gone
        or changed when reached), "unresolved", or "in place" (the target layout keeps it
        where it is: not among the unit's ``to_move``, so not counted against what
        remains)."""
        if self.layouts.placed(self.layouts.routing.writing, unit.value, entry.shard_key,
                               entry.item_id):
            return "in place"
        # the key it lands on takes the rate at most too, from every source draining into
        # it (a fan-in: each source's share is its even part, and moves land unevenly),
        # and a key both drained and filled (a strategy's change) takes both within it
        target = self.layouts.destination(unit.value, entry.item_id)
        try:
            moved = await paced(pace, cost, lambda: self.layouts.move(
                entry, value=unit.value, source=unit.source,
                reshard=self.records.migration_id, generation=unit.generation, to=target),
                clock=self._clock, rng=self._rng, budget=self.budget, key=unit.source,
                fills=target, keys=(self._pace(unit.source),
                                    None if target is None else self._pace(target)))
        except (Unavailable, OutcomeUnknown, ConditionFailed, MalformedItem) as exc:
            # a hot or damaged item: the parity check names it, another pass retries
            log.warning("reshard: %s", exc)
            return "unresolved"
        except InvalidInput as exc:
            # the store of its new place refuses the entry (a tier's store holds other value
            # types, or shorter keys): it stays where it is, the parity check names it, and
            # the rest moves on
            log.warning("reshard: item %r of %r cannot move: %s", entry.item_id, unit.value,
                        exc)
            self.refused[(unit.value, entry.item_id)] = str(exc)
            return "unresolved"
        if moved is not None:
            self._tally(unit.source, moved, cost)
        return "moved" if moved is not None else "skipped"

    def _tally(self, source: str, landed: str, cost: float) -> None:
        """Count a move's ``cost`` in ``spent`` on ``source`` and ``landed`` on ``landed``."""
        now = int(self._clock.now())
        for key, spent in ((source, self.spent), (landed, self.landed)):
            second = spent.setdefault(key, {})
            second[now] = second.get(now, 0.0) + cost

