"""Migrations driven from a program: start, step with a bounded budget, read, roll back,
complete. The autopilot's loop uses this; an operator's commands use the runners.

``Migrations(store, name)`` drives the migrations of one index through a ``Resharder``
(its options pass through). ``start`` begins one migration of a batch of values to their
policies (one migration per index at a time: a second is refused until the first ends;
a batch moves every value named in one); ``step(budget)`` drives it for at most
``budget`` seconds of the event loop's clock and returns where it got, leaving it
resumable by any process (a unit cut short gives its lease back); ``state`` reads the
state and progress from the routing and the work records; ``rollback`` records the
rollback, which ``step`` then drives; ``complete`` cuts over and retires the old layout.
Each returns a ``MigrationState``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from shardex.migrate import states
from shardex.migrate.runner import DEFAULT_MARGIN, Resharder
from shardex.migrate.units import tally
from shardex.migrate.work import Runner, runners
from shardex.routing import ShardPolicy
from shardex.stores.base import Store
from shardex.transition import Parity

__all__ = ["MigrationState", "Migrations"]


@dataclass(frozen=True, slots=True)
class MigrationState:
    """Where an index's migration is: ``id`` None when none is under way (``state`` is
    then ``stable``). ``total`` is fixed when the plan is made; ``moved`` and
    ``remaining`` come from the work records; ``ready_at`` (wall seconds) is when the
    next change of conduct may be stored; ``runners`` hold leases now."""

    index: str
    id: str | None
    state: str
    direction: str | None
    values: tuple[str, ...]
    total: int | None
    moved: int
    remaining: int | None
    parity: Parity | None
    ready_at: float | None
    runners: tuple[Runner, ...]

    @property
    def active(self) -> bool:
        """True while a migration is under way."""
        return self.id is not None


class Migrations:
    """Start, step, read, roll back and complete migrations of index ``name``.

    ``options`` are ``Resharder``'s (``rate``, ``workers``, ``unit_lease``, ``clock``,
    ``seed``, ``tiers``, ...). Use ``async with``.
    """

    def __init__(self, store: Store | str, name: str, **options: Any) -> None:
        self.runner = Resharder(store, name, **options)

    async def __aenter__(self) -> Migrations:
        await self.runner.__aenter__()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.runner.__aexit__(exc_type, exc, tb)

    async def state(self) -> MigrationState:
        """The index's migration now, from its routing and work records."""
        routing = await self.runner.routing()
        meta = routing.reshard
        if meta is None:
            return MigrationState(self.runner.name, None, states.state_of(routing), None, (),
                                  None, 0, None, None, None, ())
        units = await self.runner.units(routing)
        total, moved, remaining = tally(units, meta.direction)
        now = self.runner.store.clock.wall()
        return MigrationState(
            self.runner.name, meta.id, states.state_of(routing), meta.direction, meta.values,
            total, moved, remaining, meta.parity, states.ready_at(routing, self.runner.lease),
            tuple(runners([u for u in units if u.generation == meta.generation], now)))

    async def start(self, changes: Mapping[str, ShardPolicy | None], *,
                    default: ShardPolicy | None = None,
                    margin: float = DEFAULT_MARGIN) -> MigrationState:
        """Begin a migration of the values in ``changes`` to their policies (None: back to
        the default), in one; ReshardRefused while another is under way."""
        await self.runner.start(changes, default=default, margin=margin)
        return await self.state()

    async def step(self, budget: float, *, until: states.Until | None = None
                   ) -> MigrationState:
        """Drive the migration toward ``until`` (default: ``verified`` forward, ``done`` for
        a rollback) for at most ``budget`` seconds; its state when it stops."""
        return await self._bounded(self.runner.run(until=until), budget)

    async def rollback(self) -> MigrationState:
        """Record the rollback of the migration (``step`` drives it back)."""
        await self.runner.begin_rollback()
        return await self.state()

    async def complete(self, budget: float, *, retain: float = 0.0) -> MigrationState:
        """Cut readers over to the new layout (a fresh, clean parity report needed) and
        retire the old one once ``retain`` seconds have passed, within ``budget`` s."""
        async def finish() -> None:
            if (await self.runner.routing()).state == "verified":
                await self.runner.cutover()
            await self.runner.complete(retain=retain)

        return await self._bounded(finish(), budget)

    async def _bounded(self, work: Awaitable[Any], budget: float) -> MigrationState:
        try:
            async with asyncio.timeout(budget):
                await work
        except TimeoutError:
            pass  # the budget ran out: every step so far is stored, the rest resumes later
        return await self.state()
