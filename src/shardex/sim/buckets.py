"""The token bucket: capacity that refills at a rate and keeps unused units up to a bound.

Pure arithmetic, no I/O and no clock of its own: every call takes ``now`` (seconds). A
provisioned table's burst (up to 300 seconds of unused capacity, ``shardex.sim.table``)
and a partition's share of it (``shardex.sim.partitions``) are token buckets. A
request that finds too few tokens is throttled and takes none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shardex.errors import InvalidInput

__all__ = ["TokenBucket"]

# Float refills land a hair below a whole number of units; without the slack a bucket
# refilled for exactly one unit's worth of time would still refuse that unit.
_EPSILON = 1e-9


def _require(name: str, value: float, *, minimum: float = 0.0) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(f"{name} must be a number, got {type(value).__name__}: {value!r}")
    if not math.isfinite(value) or value < minimum:
        raise InvalidInput(f"{name} must be a finite number >= {minimum:g}, got {value!r}")


@dataclass(slots=True)
class TokenBucket:
    """Tokens that refill continuously at ``rate`` units a second up to ``capacity``.

    ``tokens`` is the content at time ``updated`` (seconds). Time that runs backwards
    is ignored. A request takes its units only when the bucket holds that many.
    """

    rate: float
    capacity: float
    tokens: float
    updated: float = 0.0

    def __post_init__(self) -> None:
        try:  # one comparison chain on the hot path; the detail only when it fails
            if 0.0 <= self.rate < math.inf and 0.0 <= self.tokens <= self.capacity < math.inf:
                return
        except TypeError:
            pass
        _require("rate", self.rate)
        _require("capacity", self.capacity)
        _require("tokens", self.tokens)
        if self.tokens > self.capacity:
            raise InvalidInput(
                f"tokens ({self.tokens:g}) must not exceed capacity ({self.capacity:g})"
            )

    def available(self, now: float) -> float:
        """Refill up to ``now`` and return the tokens held."""
        if now > self.updated:
            self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
            self.updated = now
        return self.tokens

    def has(self, units: float, now: float) -> bool:
        """Return whether ``units`` could be taken at ``now``, taking nothing."""
        return self.available(now) + _EPSILON >= units

    def take(self, units: float, now: float) -> None:
        """Take ``units`` unconditionally; call after ``has`` said they are there."""
        self.available(now)
        self.tokens -= units

    def room(self, now: float, span: float) -> float:
        """Units that may be taken over the ``span`` seconds from ``now``: what the bucket
        holds at ``now`` plus what it refills meanwhile (the rate engine's second), less
        what ``consume`` took of that span already."""
        if self.updated >= now + span > now:
            return self.tokens
        return min(self.capacity, self.available(now)) + self.rate * span

    def consume(self, units: float, now: float, span: float) -> None:
        """Take ``units`` spread over the ``span`` seconds from ``now`` (``room`` said they
        are there). The span's refill is added once, however many calls share it; the
        bucket is capped again when the next span opens."""
        end = now + span
        if self.updated < end or span <= 0:
            self.tokens = min(self.capacity, self.available(now)) + self.rate * span
            self.updated = end
        self.tokens = max(0.0, self.tokens - units)

    def try_take(self, units: float, now: float) -> bool:
        """Take ``units`` if the bucket holds them at ``now``; a refusal takes nothing."""
        if self.available(now) + _EPSILON >= units:
            self.tokens -= units
            return True
        return False
