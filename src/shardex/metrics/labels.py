"""Bounded labels: only the heaviest keys get a metric label of their own; the rest are ``#other``.

A metrics system keeps one time series per label set, so a label per key of a store with
millions of keys would explode. ``TopKeys`` names at most ``k`` keys. Every key's weight
goes into a Space-Saving summary (``shardex.counters.SpaceSaving``, ``counters`` of
them); a key is named when it is first seen while fewer than ``k`` are named, and
otherwise counts under ``#other``. ``rebalance`` (run when metrics are read, not on each
request) gives a name to a key that is surely heavier than the lightest named one by
a margin: its guaranteed count (count less error) exceeds that key's upper bound times
``1 + MARGIN``. That key loses its name, and the caller folds its counts into
``#other``, so the sum over a metric's series stays the whole. The margin is the
hysteresis: two keys of about the same weight never trade names back and forth.

The weights decay with a half-life (``half_life``, 30 s; applied as the metrics are
read, ``SpaceSaving.scale``), so heavier means heavier lately: ranked by the weight
since the process started, a key hot late in a long process waited minutes for a name
(21 keys named at 780 units a second for 100 s, a new one at 3,000 a second still
counted under ``#other`` 30 s on), and a burst shorter than that never got one. A key
four times as heavy as the lightest named one takes its name within 0.6 half-lives.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from shardex.counters.spacesaving import SpaceSaving
from shardex.errors import InvalidInput

__all__ = ["HALF_LIFE", "MARGIN", "OTHER", "TopKeys"]

# a label no logical key can take (keys hold no '#'), as the heat meter's: a key named
# 'other' was summed with the keys without a label of their own
OTHER = "#other"
MARGIN = 0.25
HALF_LIFE = 30.0  # seconds


class TopKeys:
    """Which keys get a label of their own: at most ``k``, the heaviest (see module).

    ``k`` >= 1; ``counters`` (default ``max(4k, 64)``, at least ``k``) is the size of
    the Space-Saving summary; ``half_life`` (seconds > 0) how fast weights decay, on the
    clock ``now`` (default: monotonic seconds). Raises InvalidInput otherwise.
    """

    __slots__ = ("_half_life", "_k", "_last", "_named", "_now", "_summary")

    def __init__(self, k: int = 20, *, counters: int | None = None,
                 half_life: float = HALF_LIFE,
                 now: Callable[[], float] = time.monotonic) -> None:
        if isinstance(half_life, bool) or not isinstance(half_life, int | float) \
                or not 0 < half_life < math.inf:
            raise InvalidInput(f"the labels' half-life must be seconds > 0, got {half_life!r}")
        self._half_life = float(half_life)
        self._now = now
        self._last = now()
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidInput(f"the keys that get labels must be an integer >= 1, got {k!r}")
        m = max(4 * k, 64) if counters is None else counters
        if isinstance(m, bool) or not isinstance(m, int) or m < k:
            raise InvalidInput(f"the summary needs at least k={k} counters, got {m!r}")
        self._k = k
        self._summary = SpaceSaving(m)
        self._named: set[str] = set()

    @property
    def k(self) -> int:
        return self._k

    @property
    def named(self) -> frozenset[str]:
        """The keys that have a label of their own now."""
        return frozenset(self._named)

    def label(self, key: str, weight: float) -> str:
        """Count ``weight`` for ``key``; return the label it counts under: itself or OTHER."""
        self._summary.add(key, weight)
        if key in self._named:
            return key
        if len(self._named) < self._k:
            self._named.add(key)
            return key
        return OTHER

    def _upper(self, key: str, floor: float) -> float:
        counted = self._summary.get(key)
        # a key the summary evicted weighs at most the smallest counter
        return counted.count if counted is not None else floor

    def rebalance(self) -> list[tuple[str, str]]:
        """Name the keys surely heavier than the lightest named ones.

        Returns ``(named, unnamed)`` pairs: the caller starts ``named``'s series and
        folds ``unnamed``'s into ``#other``.
        """
        now = self._now()
        if now > self._last:  # the weights age first
            self._summary.scale(max(0.5 ** ((now - self._last) / self._half_life),
                                    math.ulp(1.0)))
            self._last = now
        top = self._summary.top()
        floor = top[-1].count if self._summary.full and top else 0.0
        swaps = []
        for candidate in top[:self._k]:
            if candidate.key in self._named:
                continue
            # every key was named at first sight while there was room: the set is full
            weakest = min(self._named, key=lambda key: (self._upper(key, floor), key))
            if candidate.lower <= (1.0 + MARGIN) * self._upper(weakest, floor):
                continue
            self._named.discard(weakest)
            self._named.add(candidate.key)
            swaps.append((candidate.key, weakest))
        return swaps
