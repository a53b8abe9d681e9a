"""What every migration runner shares: its options, the routing record, its waits.

``MigrationRunner`` holds the options a reshard's and an adoption's runner both take
(rate, read rate, workers, unit lease, parity age, the worker's name, the clock) and
checks them once; it reads the stored routing strongly consistently, stores the next
one by compare-and-set on the version it read (``store_next``: False when another
process got there first) and waits on the injected clock, saying what it waits for.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import socket
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from shardex.clock import Clock, LoopClock, alongside
from shardex.errors import ConditionFailed, InvalidInput, ReshardRefused
from shardex.index import ShardedIndex, store_routing
from shardex.migrate.budget import Budget, Presence, Sharing
from shardex.migrate.status import iso
from shardex.routing import Routing
from shardex.stores import open_store
from shardex.stores.base import Store
from shardex.tiers import identity

__all__ = ["MigrationRunner", "check_counts", "check_numbers", "check_seconds",
           "default_worker"]

_HAIR = 1e-6  # seconds: a due time this close is reached


def default_worker() -> str:
    """A name for this process in leases: host, process id and a random tag."""
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def check_numbers(**numbers: Any) -> None:
    """InvalidInput naming the first option that is not a finite number > 0."""
    for option, number in numbers.items():
        if isinstance(number, bool) or not isinstance(number, int | float) \
                or not 0 < number < float("inf"):
            raise InvalidInput(f"{option} must be a number > 0, got {number!r}")


def check_counts(**counts: Any) -> None:
    """InvalidInput naming the first option that is not an integer >= 1."""
    for option, count in counts.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise InvalidInput(f"{option} must be an integer >= 1, got {count!r}")


def check_seconds(option: str, value: Any) -> float:
    """``value`` as seconds >= 0; InvalidInput naming ``option`` if it is not."""
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not 0 <= value < float("inf"):
        raise InvalidInput(f"{option} must be a number of seconds >= 0, got {value!r}")
    return float(value)


class MigrationRunner:
    """The options and routing steps of a runner of index ``name`` on ``store``.

    ``rate`` caps the write units a second the runner's writes put on any one key,
    ``read_rate`` (default three times ``rate``) the read units a second it reads one
    key or segment with; ``workers`` units are worked at once in this process, each
    leased for ``unit_lease`` seconds; ``max_age`` bounds the age of the parity report a
    cutover relies on. ``worker`` names this process in leases (default: host, pid and
    a tag). ``clock`` and ``seed`` make it run on virtual time, reproducibly.
    ``sharing`` (``shardex.migrate.budget.Sharing``) makes ``rate`` the migration's one
    budget, shared with every other runner's movers, under live controls (pause, rate).
    """

    verb = "reshard"  # the command group that drives this runner's migrations

    def __init__(self, store: Store | str, name: str, *, rate: float, read_rate: float | None,
                 workers: int, unit_lease: float, max_age: float, worker: str | None,
                 clock: Clock | None, seed: int | None, sharing: Sharing | None = None,
                 **counts: int) -> None:
        check_numbers(rate=rate, unit_lease=unit_lease, read_rate=read_rate or 1.0)
        # 0 is a bound too: every report is stale (cutover --max-age 0 takes it so)
        check_seconds("max_age", max_age)
        check_counts(workers=workers, **counts)
        self.store = open_store(store) if isinstance(store, str) else store
        self.name = name
        self.rate = float(rate)
        self.read_rate = float(read_rate or 3 * rate)
        self.workers = workers
        self.unit_lease = float(unit_lease)
        self.max_age = float(max_age)
        self.worker = worker or default_worker()
        self._clock: Clock = clock or LoopClock()
        self._rng = random.Random(seed)
        self._seed = seed
        self.sharing = sharing
        self.say_every = 5.0  # seconds between a wait's progress lines (run's --every)
        self._followed: set[tuple[str, float]] = set()  # (migration, rate) said it follows

    async def budget(self, stack: contextlib.AsyncExitStack, migration: str,
                     say: Callable[[str], None]) -> Budget | None:
        """The migration's one budget under its live controls, entered on ``stack``
        (None without ``sharing``: each process keeps to ``rate`` alone). A migration
        whose rate is not this runner's (another runner's, or an operator's) is followed,
        and ``say`` is told so."""
        if self.sharing is None:
            return None
        budget: Budget = await stack.enter_async_context(self.sharing.budget(
            self.store, self.name, migration, rate=self.rate, owner=self.worker,
            clock=self._clock, rng=self._rng))
        control = budget.controls.control
        if control.rate is not None and abs(control.rate - self.rate) > 1e-9 \
                and (migration, control.rate) not in self._followed:
            self._followed.add((migration, control.rate))  # once a run: the move, the sweep
            who = f" (its controls last changed by {control.changed_by})" \
                if control.changed_by else ""
            say(f"following the migration's rate, {control.rate:g} write units a second per "
                f"shard key{who}, not this run's --rate {self.rate:g}: change it with "
                f"'shardex {self.verb} throttle --rate R'")
        return budget

    async def control(self) -> ShardedIndex:
        """The index whose routing record the runner reads and stores (opened)."""
        raise NotImplementedError

    @property
    def lease(self) -> float:
        """The routing's lease in seconds."""
        raise NotImplementedError

    async def routing(self) -> Routing:
        """The stored routing, read now (strongly consistent). Raises ReshardRefused if
        this runner was given another store for a tier than the reshard began with
        (``Transition.tiers``): the entries it moved there would be hidden from every
        client of the first."""
        index = await self.control()
        routing = await index.refresh_routing()
        meta = routing.reshard
        if meta is None:
            return routing
        for tier, began in meta.tiers:
            store = index.tiers.get(tier)
            if store is None:
                continue
            given = identity(store)
            if given is not None and given != began:
                raise ReshardRefused(
                    f"index {self.name!r}: reshard {meta.id} began with tier {tier!r} on "
                    f"{began}, and this runner was given {store.uri} for it (entries moved "
                    "there would be hidden from every client of the first): give the tier's "
                    "store as at start")
        return routing

    async def store_next(self, routing: Routing) -> bool:
        """Store ``routing`` if the record is still one version before it; False if not."""
        index = await self.control()
        if index.routing.version != routing.version - 1:
            return False
        try:
            await store_routing(index, routing)
        except ConditionFailed:
            return False
        return True

    def _presence(self, migration: str | None) -> Presence | None:
        """This runner's mark in ``migration``'s budget record (None without ``sharing``)."""
        if self.sharing is None or migration is None:
            return None
        return self.sharing.presence(self.store, self.name, migration, rate=self.rate,
                                     owner=self.worker, clock=self._clock,
                                     term=self.unit_lease, rng=self._rng)

    @contextlib.asynccontextmanager
    async def present(self, migration: str, doing: str) -> AsyncIterator[None]:
        """Mark this runner of ``migration`` in its budget record while the body runs,
        ``doing`` saying what (renewed every third of ``unit_lease``), so that status
        lists it as a runner and suggests no other ``run``: a runner sweeping the retired
        keys holds no unit, and status listed none and suggested ``run`` meanwhile."""
        present = self._presence(migration)
        if present is None:
            yield
            return
        await present.mark(doing)

        async def renew() -> None:
            while True:
                await self._clock.sleep(self.unit_lease / 3)
                await present.mark(doing)

        try:
            async with alongside(renew()):
                yield
        finally:
            await present.leave()

    async def wait_until(self, until: float, say: Callable[[str], None], note: str,
                         migration: str | None = None) -> None:
        """Sleep on the clock until wall time ``until``, saying what for every
        ``say_every`` s (0: every second).

        A runner of ``migration`` (given, with ``sharing``) is marked in its budget record
        as it waits, renewed every third of ``unit_lease`` (the lease its units would
        have), so that status lists it; the mark goes when the wait ends.
        """
        every = self.say_every if self.say_every > 0 else 1.0
        present = self._presence(migration)
        why = f"waiting until {iso(until)} for {note}"
        next_say = next_mark = -math.inf
        try:
            while (left := until - self._clock.wall()) > 0:
                now = self._clock.now()
                # a sleep to a due time may end a hair short of it (floats); the mark
                # comes first, so that what the wait says is what status shows
                if present is not None and now >= next_mark - _HAIR:
                    await present.mark(why)
                    next_mark = now + self.unit_lease / 3
                if now >= next_say - _HAIR:
                    say(f"waiting {left:.0f} s for {note}")
                    next_say = now + every
                due = next_say if present is None else min(next_say, next_mark)
                await self._clock.sleep(min(left, max(due - now, _HAIR)))
        finally:
            if present is not None:
                await present.leave()
