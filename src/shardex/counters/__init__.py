"""Bounded counters: pure data structures with O(1) or O(k) memory, no I/O.

- ``histogram``: ``LatencyHistogram``, fixed log-spaced buckets and quantile estimates;
- ``spacesaving``: ``SpaceSaving``, the heaviest keys of an unbounded stream with
  error bounds.

Both the live heat meter (``shardex.heatmeter.meter``) and the log readers
(``shardex.heat``) count with them.
"""

from __future__ import annotations

from shardex.counters.histogram import DEFAULT_BOUNDS, LatencyHistogram, log_bounds
from shardex.counters.spacesaving import Counted, SpaceSaving

__all__ = ["Counted", "DEFAULT_BOUNDS", "LatencyHistogram", "SpaceSaving", "log_bounds"]
