"""Adaptive client send rate per shard key: back off when the store throttles, creep back up.

AIMD, as botocore's adaptive retry mode does for a whole client, but per shard key: a
client sends to a key unpaced until the store first throttles it, then paces its
requests at a rate that is cut by a factor on each throttle (at most once per
``cooldown``) and raised by a constant every second without one. A fleet of such
clients converges on the partition's ceiling instead of burning retries on it.

Pure: ``AdaptiveRate`` decides from a ``RateState`` and ``now``. ``AdaptiveGate`` is
the thin async part, keeping one state per shard key and waiting on an injected clock.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from typing import TypeVar

from shardex.admission.policy import check_number
from shardex.clock import Clock, LoopClock
from shardex.errors import InvalidInput, Throttled

__all__ = ["AdaptiveGate", "AdaptiveRate", "Gates", "RateState", "gates", "send_rates"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RateState:
    """One shard key's sending state, as a client sees it.

    ``rate`` is the paced send rate in units a second (None: unpaced, no throttle seen
    yet); ``next_send`` the earliest time the next request may go; ``sent_rate`` the
    measured send rate at ``measured_at``; ``cut_at`` and ``raised_at`` when the rate
    was last lowered and raised.
    """

    rate: float | None = None
    next_send: float = -math.inf
    sent_rate: float = 0.0
    measured_at: float = -math.inf
    cut_at: float = -math.inf
    raised_at: float = -math.inf


@dataclass(frozen=True, slots=True)
class AdaptiveRate:
    """How a client adapts its send rate to one shard key (AIMD).

    - ``increase``: units a second added to the rate per second without a throttle.
    - ``decrease``: the factor (0 < f < 1) a throttle multiplies the rate by; the first
      throttle multiplies the measured send rate.
    - ``floor``/``ceiling``: the rate never leaves [floor, ceiling] once paced.
    - ``cooldown``: seconds after a cut in which throttles do not cut again: they are
      answers to requests sent before the cut.
    - ``smoothing``: seconds, the time constant of the measured send rate.

    Bad fields raise InvalidPolicy naming the field.
    """

    increase: float = 20.0
    decrease: float = 0.7
    floor: float = 1.0
    ceiling: float = math.inf
    cooldown: float = 0.2
    smoothing: float = 1.0

    def __post_init__(self) -> None:
        check_number("AdaptiveRate.increase", self.increase, minimum=0.0)
        check_number("AdaptiveRate.decrease", self.decrease, minimum=0.0, open_low=True,
                     maximum=1.0, open_high=True)
        check_number("AdaptiveRate.floor", self.floor, minimum=0.0, open_low=True)
        if self.ceiling != math.inf:
            check_number("AdaptiveRate.ceiling", self.ceiling, minimum=self.floor)
        check_number("AdaptiveRate.cooldown", self.cooldown, minimum=0.0)
        check_number("AdaptiveRate.smoothing", self.smoothing, minimum=0.0, open_low=True)

    def measured(self, state: RateState, now: float) -> float:
        """The send rate measured up to ``now``, in units a second."""
        if state.measured_at == -math.inf:
            return 0.0
        return state.sent_rate * math.exp(-max(0.0, now - state.measured_at) / self.smoothing)

    def delay(self, state: RateState, now: float) -> float:
        """Seconds until the next request may go: ``send``'s wait, no state made."""
        return 0.0 if state.rate is None else max(state.next_send, now) - now

    def send(self, state: RateState, now: float, cost: float) -> tuple[float, RateState]:
        """Schedule a request of ``cost`` units: return the seconds to wait and the new state."""
        sent = self.measured(state, now) + cost / self.smoothing
        if state.rate is None:
            return 0.0, replace(state, sent_rate=sent, measured_at=now)
        slot = max(state.next_send, now)
        return slot - now, replace(state, next_send=slot + cost / state.rate, sent_rate=sent,
                                   measured_at=now)

    def throttled(self, state: RateState, now: float) -> RateState:
        """The state after the store throttled a request at ``now``."""
        if now - state.cut_at < self.cooldown:
            return state
        base = self.measured(state, now) if state.rate is None else state.rate
        rate = min(self.ceiling, max(self.floor, base * self.decrease))
        return replace(state, rate=rate, cut_at=now, raised_at=now)

    def succeeded(self, state: RateState, now: float) -> RateState:
        """The state after a request went through at ``now``."""
        if state.rate is None:
            return state
        rate = min(self.ceiling, state.rate + self.increase * max(0.0, now - state.raised_at))
        return replace(state, rate=rate, raised_at=max(now, state.raised_at))


class AdaptiveGate:
    """Paces a client's requests per shard key with an ``AdaptiveRate`` on ``clock``.

    ``await gate.call(shard_key, lambda: store.place(...), cost=units)`` waits for the
    key's next slot, sends, and feeds the outcome back: a Throttled error lowers the
    key's rate (and is raised on, for the caller's retry), anything else that returns
    raises it. Other errors leave the rate as it is.
    """

    def __init__(self, policy: AdaptiveRate | None = None, *, clock: Clock | None = None) -> None:
        self.policy = policy or AdaptiveRate()
        self._clock = clock or LoopClock()
        self._states: dict[str, RateState] = {}

    async def send(self, shard_key: str, cost: float = 1.0) -> float:
        """Wait for ``shard_key``'s next slot for ``cost`` units; return the seconds waited."""
        if isinstance(cost, bool) or not isinstance(cost, int | float) \
                or not math.isfinite(cost) or cost <= 0:
            raise InvalidInput(f"cost must be a finite number > 0, got {cost!r}")
        delay, self._states[shard_key] = self.policy.send(
            self._states.get(shard_key, RateState()), self._clock.now(), cost)
        if delay > 0:
            await self._clock.sleep(delay)
        return delay

    def record(self, shard_key: str, *, throttled: bool) -> None:
        """Feed back the outcome of a request to ``shard_key``."""
        state = self._states.get(shard_key, RateState())
        now = self._clock.now()
        self._states[shard_key] = (self.policy.throttled(state, now) if throttled
                                   else self.policy.succeeded(state, now))

    async def call(self, shard_key: str, call: Callable[[], Awaitable[T]], *,
                   cost: float = 1.0) -> T:
        """Send ``call()`` in ``shard_key``'s next slot and learn from its outcome."""
        await self.send(shard_key, cost)
        try:
            result = await call()
        except Throttled:
            self.record(shard_key, throttled=True)
            raise
        self.record(shard_key, throttled=False)
        return result

    def rate(self, shard_key: str) -> float | None:
        """The paced rate of ``shard_key`` in units a second (None: not paced)."""
        state = self._states.get(shard_key)
        return None if state is None else state.rate

    def rates(self) -> dict[str, float | None]:
        """The paced rate of every shard key this gate has sent to."""
        return {key: state.rate for key, state in self._states.items()}


# per tier of an index: its write gate and its read gate
Gates = dict[str | None, tuple[AdaptiveGate, AdaptiveGate]]


def gates(adaptive: bool | AdaptiveRate, tiers: Iterable[str | None], clock: Clock) -> Gates:
    """An index's gates for ``adaptive=`` (True: ``AdaptiveRate()``; False: none).

    One write and one read gate per tier: shard keys of two stores are two partitions
    even when spelt alike. Raises InvalidInput for anything but a bool or AdaptiveRate.
    """
    if adaptive is True:
        adaptive = AdaptiveRate()
    elif adaptive is not False and not isinstance(adaptive, AdaptiveRate):
        raise InvalidInput(f"adaptive must be True, False or a shardex.admission.AdaptiveRate, "
                           f"got {adaptive!r}")
    if adaptive is False:
        return {}
    return {tier: (AdaptiveGate(adaptive, clock=clock), AdaptiveGate(adaptive, clock=clock))
            for tier in tiers}


def send_rates(of: Gates) -> dict[str, float | None]:
    """The paced write rate of each shard key of ``of`` (a tier's keys as ``tier:key``)."""
    return {key if tier is None else f"{tier}:{key}": rate
            for tier, (writes, _) in of.items() for key, rate in writes.rates().items()}
