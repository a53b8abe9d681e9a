"""``ReshardBase``, the base of ``Resharder``: what its steps stand on.

Its two indexes on the store (the control index, whose routing the steps read and store,
and the mover's own, which sees throttles itself) and the ``Layouts`` over the mover's;
the reshard's work records and the ``Mover`` working them; the routing stored by
compare-and-set and the waits on the clock; and what the runner reports as it goes
(``Progress``, the ``reshard(name)`` gauges). The steps themselves (start, run, parity,
cutover, complete, rollback) are ``Resharder``'s (``shardex.migrate.runner``).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from types import TracebackType
from typing import Self, TypeVar

from shardex.clock import Clock
from shardex.index import ShardedIndex
from shardex.migrate import states
from shardex.migrate.base import MigrationRunner, check_numbers
from shardex.migrate.budget import Budget, Sharing
from shardex.migrate.layouts import PATIENT, IndexLayouts, Layouts
from shardex.migrate.mover import MOVER_RETRY, Mover
from shardex.migrate.reporting import Progress, Recorder
from shardex.migrate.sweep import SWEEP_JOB, retired_keys
from shardex.migrate.tiered import TierLayouts
from shardex.migrate.units import DEFAULT_RATE, DEFAULT_SPLIT, Unit, tally
from shardex.migrate.work import Claim, WorkRecords
from shardex.retry import call_with_retry
from shardex.routing import Routing
from shardex.stores.base import Store

__all__ = ["DEFAULT_MAX_AGE", "DEFAULT_UNIT_LEASE", "ReshardBase"]

T = TypeVar("T")
DEFAULT_MAX_AGE = 900.0
DEFAULT_UNIT_LEASE = 30.0


class ReshardBase(MigrationRunner):
    """A reshard runner's indexes, work records, mover, routing writes and reports: the
    base of ``Resharder``, whose docstring says what its arguments mean. Use ``async
    with``."""

    def __init__(self, store: Store | str, name: str, *, rate: float = DEFAULT_RATE,
                 read_rate: float | None = None, workers: int = 1,
                 unit_lease: float = DEFAULT_UNIT_LEASE, max_age: float = DEFAULT_MAX_AGE,
                 settle: float | None = None, worker: str | None = None,
                 clock: Clock | None = None, seed: int | None = None,
                 routing_ttl: float = 5.0, split_every: int = DEFAULT_SPLIT,
                 progress: Callable[[Progress], None] | None = None,
                 recorder: Recorder | None = None,
                 layouts: Callable[[ShardedIndex, Clock, random.Random], Layouts] | None = None,
                 tiers: Mapping[str, Store | str] | None = None,
                 sharing: Sharing | None = None) -> None:
        check_numbers(settle=1.0 if settle is None else settle + 1)
        super().__init__(store, name, rate=rate, read_rate=read_rate, workers=workers,
                         unit_lease=unit_lease, max_age=max_age, worker=worker, clock=clock,
                         seed=seed, sharing=sharing, split_every=split_every)
        self._settle = settle
        self._split = split_every
        self._progress = progress
        self._gauges = None if recorder is None else recorder.reshard(name)
        self._shown: tuple[Routing, Sequence[Unit] | None] | None = None  # the last report
        # the runner's first change creates the record: its status and controls do not
        self._control = ShardedIndex(self.store, name, routing_ttl=routing_ttl, clock=clock,
                                     seed=seed, tiers=tiers, create_record=False)
        self._moving = ShardedIndex(self.store, name, routing_ttl=routing_ttl, clock=clock,
                                    seed=seed, retry=MOVER_RETRY,
                                    tiers=self._control.tiers or None, create_record=False)
        kind = TierLayouts if tiers else IndexLayouts
        make = layouts or (lambda index, clock, rng: kind(index, clock=clock, rng=rng))
        self.layouts = make(self._moving, self._clock, self._rng)
        # write units the movers of this runner spent per source key and clock second,
        # and per key they moved entries to
        self.mover_units: dict[str, dict[int, float]] = {}
        self.mover_landed: dict[str, dict[int, float]] = {}
        self.mover_refused: dict[tuple[str, str], str] = {}  # entries their new place refused

    async def __aenter__(self) -> Self:
        await self._control.open()
        try:
            # the mover's index sees throttles itself; its routing reads must not fail on one
            await self._patiently(self._moving.open)
        except BaseException:
            await self._control.close()
            raise
        return self

    async def _patiently(self, call: Callable[[], Awaitable[T]]) -> T:
        return await call_with_retry(call, PATIENT, clock=self._clock, rng=self._rng)

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self._moving.close()
        await self._control.close()

    # -- reading -----------------------------------------------------------------------

    @property
    def lease(self) -> float:
        """The routing's lease in seconds."""
        return self._control.routing_lease

    async def control(self) -> ShardedIndex:
        return self._control

    def _records(self, routing: Routing) -> WorkRecords:
        assert routing.reshard is not None
        return self._records_of(routing.reshard.id)

    def _records_of(self, migration_id: str) -> WorkRecords:
        return WorkRecords(self.store, self.name, migration_id, clock=self._clock,
                           rng=self._rng)

    def _mover(self, routing: Routing, budget: Budget | None = None) -> Mover:
        assert routing.reshard is not None
        return Mover(self.layouts, self._records(routing), clock=self._clock, rate=self.rate,
                     read_rate=self.read_rate, workers=self.workers,
                     unit_lease=self.unit_lease, worker=self.worker,
                     split_every=self._split, seed=self._rng.randrange(2**32),
                     spent=self.mover_units, landed=self.mover_landed,
                     refused=self.mover_refused, budget=budget,
                     present=partial(self.present, routing.reshard.id))

    async def sweeps(self, routing: Routing) -> tuple[int, list[Claim]] | None:
        """In ``retired``, the keys the sweep sweeps and the claims of those begun (None
        in other states)."""
        if routing.reshard is None or routing.state != "retired":
            return None
        claims = await self._records(routing).claims(routing.reshard.generation, SWEEP_JOB)
        return len(retired_keys(self.layouts, routing)), list(claims.values())

    async def units(self, routing: Routing) -> list[Unit]:
        """Every work unit of the reshard in ``routing``, of every generation."""
        if routing.reshard is None:
            return []
        return [unit for unit, _ in (await self._records(routing).units()).values()]

    async def _mover_done(self, routing: Routing) -> bool:
        meta = routing.reshard
        if meta is None or routing.state not in states.MOVING:
            return False
        return await self._records(routing).all_done(meta.generation)

    # -- writing the routing ---------------------------------------------------------

    async def _store(self, routing: Routing) -> bool:
        """Store ``routing`` if the record is still one version before it; False if not."""
        before = self._control.routing.reshard
        if not await self.store_next(routing):
            return False
        if self._gauges is not None and routing.reshard is None and before is not None:
            # the reshard ended: in the target layout, or back where it began
            self._gauges.update(state="rolled-back" if before.direction == "rollback"
                                else "stable", to_version=routing.version)
        self._gauge(routing)
        return True

    async def _sleep_until(self, until: float, routing: Routing, note: str, *,
                           running: bool = False) -> None:
        """Wait until ``until``, reported as ``note``; a ``running`` runner (``run``'s
        steps) is marked as waiting meanwhile (``wait_until``)."""
        migration = routing.reshard.id if running and routing.reshard is not None else None
        await self.wait_until(until, lambda line: self._report(routing, None, line), note,
                              migration)

    def _gauge(self, routing: Routing, moved: int | None = None,
               total: int | None = None) -> None:
        """Report ``routing``'s state, versions and parity (and what moved) to the gauges."""
        meta = routing.reshard
        if self._gauges is None or meta is None:
            return
        previous = routing.previous
        self._gauges.update(
            state=states.state_of(routing), to_version=routing.version,
            from_version=None if previous is None else previous.version,
            mismatches=None if meta.parity is None else meta.parity.gaps,
            moved=moved, total=total)

    def _report(self, routing: Routing, units: Sequence[Unit] | None, note: str = "",
                rate: float | None = None) -> None:
        meta = routing.reshard
        if meta is None or (self._progress is None and self._gauges is None):
            return
        self._shown = (routing, units)
        total = moved = remaining = None
        if units is not None:
            # the total is fixed when the direction's first plan is made: it never moves
            total, moved, remaining = tally(list(units), meta.direction)
        self._gauge(routing, moved, total)
        if self._progress is not None:
            self._progress(Progress(states.state_of(routing), meta.direction, moved or 0,
                                    remaining, rate, note, total))

    def _quiet(self) -> float:
        """How long this runner's stores have left a request unanswered (``Meter.quiet``)."""
        now = self._clock.now()
        return max(store.meter.quiet(now)
                   for store in (self.store, *self._control.tiers.values()))

    def _say_quiet(self, note: str) -> None:
        if self._shown is not None:  # as the last report, with the note
            self._report(*self._shown, note)
