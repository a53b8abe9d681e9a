"""Counters of a DynamoDB store: requests, consumed capacity and throttles per key.

Units are what DynamoDB reported (``ReturnConsumedCapacity``). A transaction reports
one total; it is shared over the keys it touched in proportion to each item's size
(DynamoDB's own rule, so the shares are exact when the items are). Placement keys
count together under ``"#placement#"``, records as ``"#record#<key>"``, as in the
memory store; DynamoDB does not say which physical partition holds a key, so
``by_partition`` repeats ``by_key``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from shardex.stores.stats import RREQ, RT, RU, WREQ, WT, WU, KeyStats, StoreStats, key_stats

__all__ = ["Meter"]


class Meter:
    """Counts requests per namespace and key; ``snapshot`` returns a StoreStats."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._counts: dict[tuple[str, str], list[float]] = {}
        self._timeline: dict[tuple[str, str], dict[int, float]] = {}
        self._throttles: dict[tuple[str, str], dict[int, float]] = {}
        self._totals: dict[str, list[float]] = {}
        self._first: float | None = None
        self._last = 0.0

    def _second(self) -> int:
        now = self._last = self._clock()
        if self._first is None:
            self._first = now
        return int(now - self._first)

    def _slot(self, namespace: str, key: str) -> list[float]:
        counts = self._counts.get((namespace, key))
        if counts is None:
            counts = self._counts[(namespace, key)] = [0, 0, 0.0, 0.0, 0, 0]
        return counts

    def _total(self, namespace: str, request: int, slot: int, amount: float) -> None:
        totals = self._totals.get(namespace)
        if totals is None:
            totals = self._totals[namespace] = [0, 0, 0.0, 0.0, 0, 0]
        totals[request] += 1
        totals[slot] += amount

    def read(self, namespace: str, key: str, units: float) -> None:
        """Count one read request of ``key`` that consumed ``units``."""
        self._second()
        counts = self._slot(namespace, key)
        counts[RREQ] += 1
        counts[RU] += units
        self._total(namespace, RREQ, RU, units)

    def write(self, namespace: str, shares: Sequence[tuple[str, float]], units: float) -> None:
        """Count one write request that consumed ``units``, shared by weight over keys.

        Each key counts the request; the namespace's totals count it once.
        """
        second = self._second()
        self._total(namespace, WREQ, WU, units)
        total = sum(weight for _, weight in shares) or 1.0
        for key, weight in shares:
            counts = self._slot(namespace, key)
            counts[WREQ] += 1
            part = units * weight / total
            counts[WU] += part
            if part:
                line = self._timeline.setdefault((namespace, key), {})
                line[second] = line.get(second, 0.0) + part

    def throttled(self, namespace: str, key: str, *, write: bool) -> None:
        """Count one throttled request of ``key`` (a request and a throttle, 0 units)."""
        second = self._second()
        counts = self._slot(namespace, key)
        counts[WREQ if write else RREQ] += 1
        counts[WT if write else RT] += 1
        self._total(namespace, WREQ if write else RREQ, WT if write else RT, 1)
        if write:
            line = self._throttles.setdefault((namespace, key), {})
            line[second] = line.get(second, 0.0) + 1

    def reset(self) -> None:
        """Zero every counter; seconds count again from the next request."""
        self._counts.clear()
        self._timeline.clear()
        self._throttles.clear()
        self._totals.clear()
        self._first = None

    def snapshot(self, namespace: str | None = None) -> StoreStats:
        """Return the counters of ``namespace`` (an index), or of all summed."""
        by_key: dict[str, KeyStats] = {}
        for (ns, key), counts in self._counts.items():
            if namespace is None or ns == namespace:
                stats = key_stats(counts)
                by_key[key] = by_key[key] + stats if key in by_key else stats

        def lines(table: dict[tuple[str, str], dict[int, float]]) -> dict[str, dict[int, float]]:
            out: dict[str, dict[int, float]] = {}
            for (ns, key), line in table.items():
                if namespace is None or ns == namespace:
                    merged = out.setdefault(key, {})
                    for second, amount in line.items():
                        merged[second] = merged.get(second, 0.0) + amount
            return out

        totals = KeyStats()
        for ns, counts in self._totals.items():
            if namespace is None or ns == namespace:
                totals = totals + key_stats(counts)
        return StoreStats(by_key=by_key, by_partition=dict(by_key),
                          timeline=lines(self._timeline), throttle_timeline=lines(self._throttles),
                          totals=totals,
                          elapsed=0.0 if self._first is None else self._last - self._first)
