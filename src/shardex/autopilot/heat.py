"""A logical key's heat over the policy's sliding windows, kept as samples arrive.

Pure bookkeeping: no I/O, no clock. A sample is the mean write and read units a second
of one key over ``span`` seconds ending at ``t`` (a scrape interval of a Prometheus
rate, a tick of the meter or of the simulation). ``HeatWindow.summary`` gives the
``KeyHeat`` the policy reads: the least and highest write sample over ``t_up``, the
highest over ``t_down``, the trend (least squares) over ``trend`` seconds. Each sample
costs O(1) amortized (monotonic queues), so a day of one-second samples per key is cheap.
"""

from __future__ import annotations

import math
from collections import deque

from shardex.autopilot.policy import KeyHeat
from shardex.autopilot.settings import AutopilotPolicy
from shardex.errors import InvalidInput

__all__ = ["HeatWindow"]


class _Extreme:
    """The highest (or least) sample of a sliding window: a monotonic queue."""

    __slots__ = ("_items", "_sign")

    def __init__(self, highest: bool) -> None:
        self._items: deque[tuple[float, float]] = deque()
        self._sign = 1.0 if highest else -1.0

    def add(self, t: float, value: float) -> None:
        signed = self._sign * value
        items = self._items
        while items and items[-1][1] <= signed:
            items.pop()
        items.append((t, signed))

    def get(self, since: float) -> float:
        """The extreme of the samples at times after ``since`` (0 when none)."""
        items = self._items
        while items and items[0][0] <= since:
            items.popleft()
        return self._sign * items[0][1] if items else 0.0


class HeatWindow:
    """One key's samples over the windows of ``policy`` (``t_up``, ``t_down``, ``trend``)."""

    def __init__(self, policy: AutopilotPolicy) -> None:
        self.policy = policy
        self._start: float | None = None
        self._last_t = -math.inf
        self._last = 0.0
        self._peak_down = _Extreme(True)
        self._peak_up = _Extreme(True)
        self._floor_up = _Extreme(False)
        self._read_up = _Extreme(True)
        self._trend: deque[tuple[float, float]] = deque()

    def add(self, t: float, write_units: float, read_units: float = 0.0, *,
            span: float = 1.0) -> None:
        """Record the mean units a second over the ``span`` seconds ending at ``t``.

        Samples come in time order; InvalidInput for one out of order or not finite.
        """
        if not (math.isfinite(t) and math.isfinite(write_units) and math.isfinite(read_units)
                and math.isfinite(span)) or span <= 0 or write_units < 0 or read_units < 0:
            raise InvalidInput(f"a heat sample needs finite t, units >= 0 and span > 0, got "
                               f"t={t!r} write={write_units!r} read={read_units!r} "
                               f"span={span!r}")
        if t <= self._last_t:
            raise InvalidInput(f"heat samples must come in time order: {t:g} after "
                               f"{self._last_t:g}")
        if self._start is None:
            self._start = t - span
        self._last_t, self._last = t, write_units
        for extreme in (self._peak_down, self._peak_up, self._floor_up):
            extreme.add(t, write_units)
        self._read_up.add(t, read_units)
        self._trend.append((t, write_units))

    def summary(self) -> KeyHeat:
        """The heat as of the latest sample (an empty window: all zero)."""
        if self._start is None:
            return KeyHeat(0.0, 0.0, 0.0, 0.0)
        policy, now = self.policy, self._last_t
        trend = self._trend
        while trend and trend[0][0] <= now - policy.trend:
            trend.popleft()
        return KeyHeat(seconds=now - self._start,
                       floor_up=self._floor_up.get(now - policy.t_up),
                       peak_up=self._peak_up.get(now - policy.t_up),
                       peak_down=self._peak_down.get(now - policy.t_down),
                       slope=_slope(trend), last=self._last,
                       read_peak=self._read_up.get(now - policy.t_up))


def _slope(points: deque[tuple[float, float]]) -> float:
    """Least-squares slope of ``points`` (0 with fewer than two)."""
    n = len(points)
    if n < 2:
        return 0.0
    t0 = points[0][0]
    mean_t = sum(t - t0 for t, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    sxx = sum((t - t0 - mean_t) ** 2 for t, _ in points)
    if sxx <= 0:
        return 0.0
    return sum((t - t0 - mean_t) * (y - mean_y) for t, y in points) / sxx
