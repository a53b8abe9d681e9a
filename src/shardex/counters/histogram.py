"""A bounded latency histogram: fixed log-spaced buckets, O(1) memory, quantile estimates.

Buckets are shared bounds in seconds (by default ten a decade from 10 microseconds to
1,000 seconds), plus one below and one above. A quantile is estimated as the geometric
middle of the bucket that holds it, clamped to the smallest and largest latency seen,
so it is within a factor ``sqrt(ratio)`` of the true sample quantile, ``ratio`` being
the bounds' step (``10 ** 0.1``: about 12%).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence

from shardex.errors import InvalidInput

__all__ = ["DEFAULT_BOUNDS", "LatencyHistogram", "log_bounds"]


def log_bounds(low: float, high: float, per_decade: int) -> tuple[float, ...]:
    """Return bucket bounds from ``low`` to ``high`` seconds, ``per_decade`` a decade."""
    if not 0 < low < high < math.inf or per_decade < 1:
        raise InvalidInput(f"histogram bounds need 0 < low < high and per_decade >= 1, got "
                           f"{low!r}, {high!r}, {per_decade!r}")
    steps = round(math.log10(high / low) * per_decade)
    return tuple(low * 10 ** (i / per_decade) for i in range(steps + 1))


DEFAULT_BOUNDS = log_bounds(1e-5, 1e3, 10)


class LatencyHistogram:
    """Counts of latencies (seconds) in fixed buckets; ``quantile(q)`` estimates from them."""

    __slots__ = ("_bounds", "count", "counts", "high", "low", "total")

    def __init__(self, bounds: Sequence[float] = DEFAULT_BOUNDS) -> None:
        self._bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.count = 0
        self.total = 0.0
        self.low = math.inf
        self.high = -math.inf

    @property
    def ratio(self) -> float:
        """The largest ratio between a bucket's upper and lower bound."""
        b = self._bounds
        return max(b[i + 1] / b[i] for i in range(len(b) - 1)) if len(b) > 1 else math.inf

    def record(self, seconds: float) -> None:
        """Count one latency of ``seconds`` (negative values count as 0)."""
        seconds = max(0.0, seconds)
        self.counts[bisect_left(self._bounds, seconds)] += 1
        self.count += 1
        self.total += seconds
        if seconds < self.low:
            self.low = seconds
        if seconds > self.high:
            self.high = seconds

    def merge(self, other: LatencyHistogram) -> None:
        """Add the counts of ``other`` (built on the same bounds) to this histogram."""
        if other._bounds is not self._bounds and tuple(other._bounds) != tuple(self._bounds):
            raise InvalidInput("cannot merge latency histograms with different bounds")
        self.counts = [a + b for a, b in zip(self.counts, other.counts, strict=True)]
        self.count += other.count
        self.total += other.total
        self.low = min(self.low, other.low)
        self.high = max(self.high, other.high)

    def quantile(self, q: float) -> float | None:
        """Estimate the ``q``-quantile (0 <= q <= 1) in seconds; None when empty.

        The sample quantile is the value of rank ``max(1, ceil(q * count))``; the estimate
        lies in the same bucket (and is exact for the smallest and the largest).
        """
        if not 0.0 <= q <= 1.0:
            raise InvalidInput(f"quantile q must be between 0 and 1, got {q!r}")
        if not self.count:
            return None
        rank = max(1, math.ceil(q * self.count))
        if rank == self.count:
            return self.high  # the extremes are kept exactly
        if rank == 1:
            return self.low
        seen = 0
        bounds = self._bounds
        for i, n in enumerate(self.counts):
            seen += n
            if seen >= rank:
                lower = bounds[i - 1] if i > 0 else self.low
                upper = bounds[i] if i < len(bounds) else self.high
                middle = math.sqrt(lower * upper) if lower > 0 else upper
                return min(max(middle, self.low), self.high)
        return self.high  # pragma: no cover - the counts sum to count
