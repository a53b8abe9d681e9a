"""``store.stats()``: requests, units and throttles per key, per partition and per second.

``StatsCounter`` is the subscriber every store has on its meter (see
``shardex.stores.metered``); ``StoreStats`` and ``KeyStats`` are the frozen snapshots
it returns. Placement keys count together under ``"#placement#"``; records count as
``"#record#<key>"`` and the owner check as ``"#owner"``. A share without a partition
counts on the key's own name in ``by_partition`` (the key is its own partition, or the
store does not say which holds it). Seconds count from the first request after the
counter was made or reset.
"""

from __future__ import annotations

from dataclasses import dataclass

from shardex.keys import PLACEMENT_PREFIX, is_reserved
from shardex.stores.metered import Counts, Share, Usage

__all__ = ["KeyStats", "StatsCounter", "StoreStats"]


@dataclass(frozen=True, slots=True)
class KeyStats:
    """Requests, units consumed and throttles of one key, one partition, or a whole store.

    A throttled request counts as a request and a throttle, with 0 units. ``requests``
    is ``read_requests + write_requests``.
    """

    requests: int = 0
    read_units: float = 0.0
    write_units: float = 0.0
    read_throttles: int = 0
    write_throttles: int = 0
    read_requests: int = 0
    write_requests: int = 0

    @classmethod
    def of(cls, counts: Counts) -> KeyStats:
        """Freeze a counter record."""
        return cls(counts.requests, counts.read_units, counts.write_units,
                   counts.read_throttles, counts.write_throttles, counts.read_requests,
                   counts.write_requests)

    @property
    def throttles(self) -> int:
        """Read and write throttles together."""
        return self.read_throttles + self.write_throttles

    def __add__(self, other: KeyStats) -> KeyStats:
        return KeyStats(self.requests + other.requests, self.read_units + other.read_units,
                        self.write_units + other.write_units,
                        self.read_throttles + other.read_throttles,
                        self.write_throttles + other.write_throttles,
                        self.read_requests + other.read_requests,
                        self.write_requests + other.write_requests)


@dataclass(frozen=True, slots=True)
class StoreStats:
    """A snapshot of a store's counters (one namespace, or all of them summed).

    - ``by_key``: shard key -> KeyStats. Reserved keys are included: all placement keys
      count together under ``"#placement#"``, records as ``"#record#<key>"``;
      ``shard_keys()`` lists the others.
    - ``by_partition``: physical partition -> KeyStats; ``"p7"`` when the memory store
      has a fixed number of partitions, else the key itself (as in ``by_key``).
    - ``timeline``: shard key -> second -> accepted write units in that second;
      ``throttle_timeline``: shard key -> second -> throttled writes.
    - ``totals``: each request once; ``unavailable``: requests that failed before they
      applied (not in ``totals``); ``ambiguous``: writes applied that reported failure
      anyway; ``elapsed``: seconds from the first request to the last.
    """

    by_key: dict[str, KeyStats]
    by_partition: dict[str, KeyStats]
    timeline: dict[str, dict[int, float]]
    throttle_timeline: dict[str, dict[int, float]]
    totals: KeyStats
    unavailable: int = 0
    ambiguous: int = 0
    elapsed: float = 0.0

    @staticmethod
    def reserved(key: str) -> bool:
        """Return whether ``key`` is a placement or record key rather than a shard key."""
        return is_reserved(key)

    def shard_keys(self) -> list[str]:
        """Return the keys of ``by_key`` that are not reserved, sorted."""
        return sorted(k for k in self.by_key if not is_reserved(k))


_Line = dict[int, float]


class StatsCounter:
    """Counts a store's Usage events per namespace, key, partition and second."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Zero every counter and timeline; seconds count again from the next request."""
        self._keys: dict[tuple[str, str], Counts] = {}
        self._partitions: dict[tuple[str, str], Counts] = {}
        self._timeline: dict[tuple[str, str], _Line] = {}
        self._throttles: dict[tuple[str, str], _Line] = {}
        self._totals: dict[str, Counts] = {}
        self._unavailable: dict[str, int] = {}
        self._ambiguous: dict[str, int] = {}
        self._first: float | None = None
        self._last = 0.0

    def __call__(self, usage: object) -> None:
        if type(usage) is not Usage:
            return
        ns = usage.namespace
        if self._first is None:
            self._first = usage.start
        if usage.end > self._last:
            self._last = usage.end
        outcome = usage.outcome
        if outcome == "unavailable":
            self._unavailable[ns] = self._unavailable.get(ns, 0) + 1
            return
        shares = usage.shares
        if not shares:
            if outcome == "cancelled":
                return  # given up before the store applied anything
            shares = (Share(usage.key, 0.0),)
        elif outcome == "ambiguous":
            self._ambiguous[ns] = self._ambiguous.get(ns, 0) + 1
        write = usage.write
        throttled = outcome == "throttled"
        totals = self._totals.get(ns)
        if totals is None:
            totals = self._totals[ns] = Counts()
        totals.count(write, usage.units, throttled)
        second = int(usage.end - self._first)
        for share in shares:
            key, units, partition = share.key, share.units, share.partition
            hit = throttled and key == usage.key
            if key.startswith(PLACEMENT_PREFIX):
                key = PLACEMENT_PREFIX
            name = (ns, key)
            counts = self._keys.get(name)
            if counts is None:
                counts = self._keys[name] = Counts()
            counts.count(write, units, hit)
            if partition is None:
                # the key is its own partition: one record serves both tables
                if name not in self._partitions:
                    self._partitions[name] = counts
            else:
                place = (ns, partition)
                pcounts = self._partitions.get(place)
                if pcounts is None:
                    pcounts = self._partitions[place] = Counts()
                pcounts.count(write, units, hit)
            if write and (units or hit):
                table = self._throttles if hit else self._timeline
                line = table.get(name)
                if line is None:
                    line = table[name] = {}
                line[second] = line.get(second, 0.0) + (1.0 if hit else units)

    def snapshot(self, namespace: str | None = None) -> StoreStats:
        """Return the counters of ``namespace`` (an index), or of all summed."""
        def pick(table: dict[tuple[str, str], Counts]) -> dict[str, KeyStats]:
            out: dict[str, KeyStats] = {}
            for (ns, name), counts in table.items():
                if counts.requests and (namespace is None or ns == namespace):
                    stats = KeyStats.of(counts)
                    out[name] = out[name] + stats if name in out else stats
            return out

        def lines(table: dict[tuple[str, str], _Line]) -> dict[str, _Line]:
            out: dict[str, _Line] = {}
            for (ns, name), line in table.items():
                if line and (namespace is None or ns == namespace):
                    merged = out.setdefault(name, {})
                    for second, amount in line.items():
                        merged[second] = merged.get(second, 0.0) + amount
            return out

        def chosen(table: dict[str, int]) -> int:
            return sum(n for ns, n in table.items() if namespace is None or ns == namespace)

        totals = Counts()
        for ns, counts in self._totals.items():
            if namespace is None or ns == namespace:
                totals.absorb(counts)
        return StoreStats(
            by_key=pick(self._keys), by_partition=pick(self._partitions),
            timeline=lines(self._timeline), throttle_timeline=lines(self._throttles),
            totals=KeyStats.of(totals), unavailable=chosen(self._unavailable),
            ambiguous=chosen(self._ambiguous),
            elapsed=0.0 if self._first is None else max(0.0, self._last - self._first))
