"""Where admission budgets keep their usage: in this process, or shared by a fleet.

``BudgetState`` is the interface ``Admission`` calls. ``LocalBudgets`` keeps each key's
token bucket in process on an injected clock (exact, and virtual under ``run_virtual``).
``SharedBudgets`` keeps them in Redis through the ``limits`` library's moving-window
storage, so every process of a fleet draws on the same budget.
"""

from __future__ import annotations

import abc
import asyncio
import math
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from shardex.admission.policy import Budget, Priority
from shardex.clock import Clock
from shardex.errors import (
    CapabilityMissing,
    InvalidPolicy,
    InvalidURI,
    MissingDependency,
    Unavailable,
)
from shardex.sim.clock import VirtualTimeLoop
from shardex.stores.uri import split_url

if TYPE_CHECKING:
    from limits.aio.storage import RedisStorage
    from redis.asyncio import ConnectionPool

__all__ = ["BudgetState", "LocalBudgets", "SharedBudgets", "moving_window"]

# The soonest a refused request asks a shared budget again: the window's own answer
# can be a few microseconds in the past by the time it arrives.
_MIN_RETRY = 0.001


class BudgetState(abc.ABC):
    """The state of every key's budget, behind one call: take units, or say when.

    Use as ``async with state:`` or call ``open``/``close``.
    """

    @property
    def shared(self) -> bool:
        """True when other processes draw on the same budgets."""
        return False

    def check(self, budget: Budget) -> None:  # noqa: B027 - optional hook
        """Raise InvalidPolicy if this state cannot keep ``budget`` as it is defined."""

    @abc.abstractmethod
    async def take(self, key: str, cost: float, budget: Budget, priority: Priority) -> float | None:
        """Take ``cost`` units of ``key``'s budget if ``priority`` may; return 0.0 then.

        Otherwise take nothing and return the seconds until the same request could be
        admitted, or None if it never can. Raises Unavailable if the state cannot be
        reached.
        """

    async def open(self) -> None:  # noqa: B027 - optional hook
        """Connect, where there is anything to connect to."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""

    async def __aenter__(self) -> BudgetState:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


class LocalBudgets(BudgetState):
    """Token buckets in this process, on ``clock``: the default state of ``Admission``.

    Exact (``Budget.take``), and on virtual time under ``run_virtual``. Keys whose bucket
    has refilled are forgotten from time to time, so memory follows the active keys.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._tat: dict[str, float] = {}
        self._sweep_at = 1024

    async def take(self, key: str, cost: float, budget: Budget, priority: Priority) -> float | None:
        now = self._clock.now()
        grant = budget.take(self._tat.get(key, now), now, cost, priority)
        if grant.admitted:
            self._tat[key] = grant.tat
            if len(self._tat) >= self._sweep_at:
                self._sweep(now)
        return grant.retry_after

    def _sweep(self, now: float) -> None:
        # A bucket whose tat has passed is full: the same as one never used.
        self._tat = {key: tat for key, tat in self._tat.items() if tat > now}
        self._sweep_at = max(1024, 2 * len(self._tat))


def moving_window(budget: Budget, priority: Priority) -> tuple[int, int]:
    """Return ``(limit, seconds)``: the moving window that keeps ``budget`` for ``priority``.

    At most ``limit`` units in any ``seconds`` seconds, ``seconds`` being the largest
    whole number of seconds in ``burst / rate`` and ``limit`` the units of ``rate`` in
    it (less the priority's reserve): so over any T seconds at most ``rate * T +
    burst`` units. Raises InvalidPolicy for a budget whose burst is under one second
    of its rate (``limits`` counts whole seconds) or whose window holds no whole unit.
    """
    seconds = math.floor(budget.burst_units / budget.rate + 1e-9)
    if seconds < 1:
        raise InvalidPolicy(
            f"Budget.burst ({budget.burst_units:g}) must be at least one second of Budget.rate "
            f"({budget.rate:g}) for a shared budget: its moving window counts whole seconds")
    full = budget.rate * seconds
    limit = math.floor(full * (1.0 - budget.reserve.get(priority, 0.0)) + 1e-9)
    if math.floor(full + 1e-9) < 1:
        raise InvalidPolicy(f"Budget.rate ({budget.rate:g}) must admit at least one whole unit "
                            f"in its {seconds} s window for a shared budget")
    return limit, seconds


class SharedBudgets(BudgetState):
    """Budgets kept in Redis, shared by every process that names the same URL and prefix.

    ``url`` is ``redis://[:password@]host:port[/db]`` (or ``rediss://``). The ``limits``
    library's moving-window storage does the counting atomically in Redis (a Lua
    script), through the redis-py asyncio client: ``pip install 'shardex[redis]'``.

    Each budget becomes a moving window (``moving_window``): a whole number of seconds,
    whole units (a request's cost is rounded up). The window follows the processes' wall
    clocks, as ``limits`` does, so the fleet's clocks must agree, and it cannot follow
    a virtual clock: simulations use ``LocalBudgets``. A request refused by the window
    is told the soonest any of it frees, and asks again then.
    """

    def __init__(self, url: str, *, prefix: str = "shardex") -> None:
        parts = split_url(url, "shared budget URL") if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("redis", "rediss") or not parts.hostname:
            raise InvalidURI(
                f"shared budgets need a redis://host:port[/db] or rediss:// URL, got {url!r}")
        self._url = url
        self.prefix = prefix
        self._pool: ConnectionPool | None = None
        self._storage: RedisStorage | None = None
        self._errors: tuple[type[BaseException], ...] = ()

    @property
    def shared(self) -> bool:
        return True

    @property
    def url(self) -> str:
        """The Redis URL, without its password."""
        parts = urlsplit(self._url)
        netloc = parts.netloc.rpartition("@")[2]
        return urlunsplit(parts._replace(netloc=netloc))

    def check(self, budget: Budget) -> None:
        moving_window(budget, "high")

    async def open(self) -> None:
        """Connect; CapabilityMissing under ``run_virtual``, MissingDependency without redis."""
        if self._storage is not None:
            return
        if isinstance(asyncio.get_running_loop(), VirtualTimeLoop):
            raise CapabilityMissing("shared budgets follow the wall clock and cannot run on "
                                    "virtual time (run_virtual): use LocalBudgets there")
        try:
            import redis.asyncio
            from limits.aio.storage import RedisStorage
        except ImportError as exc:
            raise MissingDependency(exc.name or "redis", "redis") from exc
        self._pool = redis.asyncio.ConnectionPool.from_url(self._url)
        # Our own pool, handed to limits, so that close() can release its connections.
        pool: dict[str, Any] = {"connection_pool": self._pool}
        self._storage = RedisStorage(f"async+{self._url}", implementation="redispy",
                                     key_prefix=self.prefix, **pool)
        self._errors = (redis.RedisError, OSError)

    async def close(self) -> None:
        pool, self._pool, self._storage = self._pool, None, None
        if pool is not None:
            await pool.aclose()

    async def take(self, key: str, cost: float, budget: Budget, priority: Priority) -> float | None:
        return await self._window(key, cost, budget, priority, take=True)

    async def room(self, key: str, cost: float, budget: Budget, priority: Priority
                   ) -> float | None:
        """Seconds until ``key``'s window holds ``cost`` more units, taking none (0.0: it
        does now; None: never, a cost past the window): so that a write of several keys
        takes each only once all have room, and each is counted in the second it goes."""
        return await self._window(key, cost, budget, priority, take=False)

    async def _window(self, key: str, cost: float, budget: Budget, priority: Priority, *,
                      take: bool) -> float | None:
        """``take``'s answer, taking ``cost`` when there is room if ``take``, else none."""
        if self._storage is None:
            await self.open()
        assert self._storage is not None
        limit, seconds = moving_window(budget, priority)
        units = math.ceil(cost - 1e-9)
        if units > limit:
            return None
        # The window's length is part of the key: a budget changed across the fleet
        # starts a new window instead of misreading the old one.
        name = f"{key}/{seconds}"
        try:
            if take and await self._storage.acquire_entry(name, limit, seconds, units):
                return 0.0
            oldest, count = await self._storage.get_moving_window(name, limit, seconds)
        except self._errors as exc:
            raise Unavailable(f"shared admission budgets at {self.url}: {exc}") from exc
        if not take and count + units <= limit:
            return 0.0
        return max(_MIN_RETRY, oldest + seconds - time.time())

    async def reset(self) -> None:
        """Forget every budget's usage under this prefix (all of the fleet's)."""
        if self._storage is None:
            await self.open()
        assert self._storage is not None
        try:
            await self._storage.reset()
        except self._errors as exc:
            raise Unavailable(f"shared admission budgets at {self.url}: {exc}") from exc

    def __repr__(self) -> str:
        return f"SharedBudgets({self.url!r}, prefix={self.prefix!r})"
