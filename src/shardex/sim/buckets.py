"""Token buckets and partitions: how the simulator turns ceilings into throttling.

Pure arithmetic, no I/O and no clock of its own: every call takes ``now`` (seconds).
Every physical partition has a write ceiling and a read ceiling (by default DynamoDB's,
from ``shardex.capacity``), each a token bucket that keeps up to ``burst_seconds``
(300) of unused capacity as burst. A request that finds too few tokens is throttled
and takes none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shardex.capacity import DYNAMODB_BURST_SECONDS, DYNAMODB_READ_CEILING, DYNAMODB_WRITE_CEILING
from shardex.errors import InvalidInput

__all__ = ["PartitionCapacity", "PartitionLimits", "TokenBucket"]

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

    def try_take(self, units: float, now: float) -> bool:
        """Take ``units`` if the bucket holds them at ``now``; a refusal takes nothing."""
        if self.available(now) + _EPSILON >= units:
            self.tokens -= units
            return True
        return False


@dataclass(frozen=True, slots=True)
class PartitionLimits:
    """The ceilings of one physical partition, in units a second, and its burst.

    ``burst_seconds``: how many seconds of unused capacity a partition keeps (at least
    1, so that any item the ceiling allows fits in the bucket). A new partition starts
    with ``initial_burst_seconds`` of capacity (0 up to ``burst_seconds``). Raises
    InvalidInput naming the field that is out of range.
    """

    write_ceiling: float = DYNAMODB_WRITE_CEILING
    read_ceiling: float = DYNAMODB_READ_CEILING
    burst_seconds: float = DYNAMODB_BURST_SECONDS
    initial_burst_seconds: float = 1.0

    def __post_init__(self) -> None:
        for name in ("write_ceiling", "read_ceiling"):
            value = getattr(self, name)
            _require(name, value)
            if value <= 0:
                raise InvalidInput(f"{name} must be > 0 units/s, got {value!r}")
        _require("burst_seconds", self.burst_seconds, minimum=1.0)
        _require("initial_burst_seconds", self.initial_burst_seconds)
        if self.initial_burst_seconds > self.burst_seconds:
            raise InvalidInput(
                f"initial_burst_seconds ({self.initial_burst_seconds:g}) must not exceed "
                f"burst_seconds ({self.burst_seconds:g})"
            )

    def write_bucket(self, now: float) -> TokenBucket:
        """Return the write bucket of a partition first used at ``now``."""
        return TokenBucket(self.write_ceiling, self.write_ceiling * self.burst_seconds,
                           self.write_ceiling * self.initial_burst_seconds, now)

    def read_bucket(self, now: float) -> TokenBucket:
        """Return the read bucket of a partition first used at ``now``."""
        return TokenBucket(self.read_ceiling, self.read_ceiling * self.burst_seconds,
                           self.read_ceiling * self.initial_burst_seconds, now)

    def new_partition(self, now: float) -> PartitionCapacity:
        """Return the buckets of a partition first used at ``now``."""
        return PartitionCapacity(write=self.write_bucket(now), read=self.read_bucket(now))


@dataclass(slots=True)
class PartitionCapacity:
    """The write and read token buckets of one physical partition."""

    write: TokenBucket
    read: TokenBucket
