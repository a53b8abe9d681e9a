"""How a migration's movers read and send their writes: paced per key, adapting to throttles.

``Pace`` wraps the pure ``AdaptiveRate`` (AIMD: a throttle halves the rate, each second
without one raises it back toward its ceiling); ``read_page`` reads one page of a key at
a read pace (a mover's of ``page_entries`` entries), ``pages`` every page of a key;
``paced`` is the one place where a mover or a backfill sends a write: at its key's pace
and within the migration's shared budget (``shardex.migrate.budget``), a throttle
slowing both and trying again, an unavailable store tried again after a backoff; a
mover keeps up to ``IN_FLIGHT`` of a unit's writes in flight at once.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Protocol, TypeVar

from shardex.admission import AdaptiveRate, RateState
from shardex.clock import Clock
from shardex.errors import Throttled, Unavailable
from shardex.migrate.budget import Budget, SpendWindow
from shardex.migrate.layouts import PATIENT, Layouts
from shardex.model.entries import Position, QueryPage

__all__ = ["ATTEMPTS", "IN_FLIGHT", "Pace", "paced", "page_entries", "pages", "read_page"]

T = TypeVar("T")
ATTEMPTS = 6  # tries of a write the store keeps refusing as unavailable
IN_FLIGHT = 8  # moves of one unit in flight at once
_WINDOW = 1.0  # seconds: a rate holds in every one of them
_FIRST_PAGE = 10


def page_entries(rate: float, lease: float, cost: float | None = 2.0) -> int:
    """Entries a page holds: it takes about a quarter of the lease at the rate, each
    write costing ``cost`` units. None: not known yet (the process's first page), which
    holds at most ``_FIRST_PAGE`` entries, so that a first page of dear ones does not
    take most of the lease."""
    size = max(1, min(100, int(rate * lease / 4 / max(cost or 2.0, 1.0))))
    return size if cost is not None else min(size, _FIRST_PAGE)


class Pace:
    """Paces one unit's requests at ``rate`` units a second, adapting to throttles (AIMD)."""

    def __init__(self, rate: float, clock: Clock) -> None:
        self._clock = clock
        self._policy = _policy(rate)
        self._state = RateState(rate=rate)
        self._sent = SpendWindow(_WINDOW)  # the sends that count this second

    @property
    def rate(self) -> float:
        return self._state.rate or 0.0

    def follow(self, rate: float) -> None:
        """Pace at ``rate`` from now on (the rate in force changed: an operator's throttle,
        a cut): where AIMD has the pace now, scaled to it, so a lower rate holds at once
        and a higher one is taken up at once."""
        ceiling = self._policy.ceiling
        if rate == ceiling or rate <= 0:
            return
        self._policy = _policy(rate)
        self._state = replace(self._state, rate=min(rate, self.rate * rate / ceiling))

    async def wait(self, cost: float) -> None:
        """Wait until a send of ``cost`` units keeps the pace, and count it sent now."""
        await ready([self], cost, self._clock)
        self.take(cost)

    def due(self, cost: float) -> float:
        """Seconds until a send of ``cost`` units keeps the pace (0: now); counts nothing."""
        now = self._clock.now()
        delay = self._policy.delay(self._state, now)
        # spacing alone lets two sends fall in one second: hold every second to the rate
        return max(delay, self._sent.wait(now, cost, self.rate))

    def take(self, cost: float) -> None:
        """Count a send of ``cost`` units now (``due`` said it keeps the pace)."""
        now = self._clock.now()
        _, self._state = self._policy.send(self._state, now, max(cost, 0.01))
        self._sent.add(now, cost)

    def throttled(self) -> None:
        self._state = self._policy.throttled(self._state, self._clock.now())

    def succeeded(self) -> None:
        self._state = self._policy.succeeded(self._state, self._clock.now())


async def ready(paces: list[Pace], cost: float, clock: Clock) -> None:
    """Wait until a send of ``cost`` units keeps every one of ``paces`` at one instant."""
    while (delay := max((pace.due(cost) for pace in paces), default=0.0)) > 0:
        await clock.sleep(delay)


def _policy(rate: float) -> AdaptiveRate:
    return AdaptiveRate(increase=max(rate / 20, 0.1), decrease=0.5,
                        floor=min(rate, max(0.1, rate / 100)), ceiling=rate, cooldown=0.5)


async def read_page(layouts: Layouts, key: str, after: Position | None, limit: int,
                    pace: Pace) -> QueryPage:
    """One page of ``key`` beyond ``after``, paced at ``pace`` in read units."""
    page = await layouts.page(key, after, limit)
    await pace.wait(page.units)
    return page


class PageReader(Protocol):
    """Reads one page of a key beyond ``after`` (a ``Layouts.page`` or ``Store.query``)."""

    def __call__(self, *, after: Position | None) -> Awaitable[QueryPage]: ...


async def pages(read: PageReader, pace: Pace) -> AsyncIterator[QueryPage]:
    """Every page of one key from its start, ``read(after=...)`` each, paced at ``pace``."""
    after: Position | None = None
    while True:
        page = await read(after=after)
        await pace.wait(page.units)
        yield page
        if page.resume is None:
            return
        after = page.resume


async def paced(pace: Pace | None, cost: float, write: Callable[[], Awaitable[T]], *,
                clock: Clock, rng: random.Random, attempts: int = ATTEMPTS,
                budget: Budget | None = None, key: str = "", fills: str | None = None,
                keys: Sequence[Pace | None] = ()) -> T:
    """``write()`` at ``pace`` and within ``budget`` (the migration's one budget, shared by
    every process, under its live controls) on shard key ``key``, costing ``cost`` units,
    and on the key it lands on, ``fills`` (a move's target); ``keys``, without a budget,
    the paces of the keys it writes, each counting all this process writes to its key: a
    throttle slows them all and tries again; Unavailable is tried again after a backoff
    and raised after ``attempts`` failures. Other errors are the caller's."""
    failures = 0
    paces: list[Pace] = []
    for each in (pace, *keys):
        if each is not None and all(each is not p for p in paces):
            paces.append(each)
    while True:
        # every limit counts the send at the instant it goes: one counted earlier, then
        # held by another's wait, went in a later second than it was counted in (a move
        # the budget granted, held by its source key's pace, took its target key to 1.06x
        # the rate in a second); and a pace counts nothing while it waits (a pause, the
        # budget's window): what it had spaced out went at once after (a unit's batch
        # queued in a pause reached the key a fan-in fills at 1.8x the rate on resume)
        if budget is not None:
            await budget.spend({key: cost} if fills is None else {key: cost, fills: cost},
                               hold=lambda: max((p.due(cost) for p in paces), default=0.0))
        # ready already, but for a send through Redis: another move of the same key may
        # have taken the pace while the budget's take was on its way
        await ready(paces, cost, clock)
        for each in paces:
            each.take(cost)
        try:
            result = await write()
        except Throttled:
            for each in paces:
                each.throttled()
            if budget is not None:
                await budget.throttled()
            continue
        except Unavailable:
            failures += 1
            if failures >= attempts:
                raise
            await clock.sleep(PATIENT.backoff(failures, rng))
            continue
        for each in paces:
            each.succeeded()
        return result
