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

from dataclasses import dataclass, field

from shardex.keys import PLACEMENT_PREFIX, is_reserved
from shardex.stores.metered import Counts, Hedge, Share, Skipped, Usage

__all__ = ["KeyStats", "StatsCounter", "StoreStats"]


@dataclass(frozen=True, slots=True)
class KeyStats:
    """Requests, units consumed and throttles of one key, one partition, or a whole store.

    A throttled request counts as a request and a throttle, with 0 units. ``requests``
    is ``read_requests + write_requests``. Hedged reads: ``hedges_sent`` copies beyond
    the first were sent (each is also a read request, with its units), ``hedges_won``
    of them answered first, and the reader stopped waiting for ``hedges_cancelled``
    copies, which consumed ``cancelled_units`` (included in ``read_units``).
    """

    requests: int = 0
    read_units: float = 0.0
    write_units: float = 0.0
    read_throttles: int = 0
    write_throttles: int = 0
    read_requests: int = 0
    write_requests: int = 0
    hedges_sent: int = 0
    hedges_won: int = 0
    hedges_cancelled: int = 0
    cancelled_units: float = 0.0

    @classmethod
    def of(cls, counts: Counts) -> KeyStats:
        """Freeze a counter record."""
        return cls(counts.requests, counts.read_units, counts.write_units,
                   counts.read_throttles, counts.write_throttles, counts.read_requests,
                   counts.write_requests, counts.hedges_sent, counts.hedges_won,
                   counts.hedges_cancelled, counts.cancelled_units)

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
                        self.write_requests + other.write_requests,
                        self.hedges_sent + other.hedges_sent,
                        self.hedges_won + other.hedges_won,
                        self.hedges_cancelled + other.hedges_cancelled,
                        self.cancelled_units + other.cancelled_units)


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
    - ``throttle_reasons``: throttled requests by the reason the store gave
      (``Throttled.reason``: DynamoDB's ThrottlingReason, ``injected`` for an injected
      fault, ``unknown`` when the store gave none).
    - ``skipped``: shard key -> malformed items listings left out there
      (``malformed="skip"``; each time a read met one: a hedged copy's reads count too).
    """

    by_key: dict[str, KeyStats]
    by_partition: dict[str, KeyStats]
    timeline: dict[str, dict[int, float]]
    throttle_timeline: dict[str, dict[int, float]]
    totals: KeyStats
    unavailable: int = 0
    ambiguous: int = 0
    elapsed: float = 0.0
    throttle_reasons: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def reserved(key: str) -> bool:
        """Return whether ``key`` is a placement or record key rather than a shard key."""
        return is_reserved(key)

    def shard_keys(self) -> list[str]:
        """Return the keys of ``by_key`` that are not reserved, sorted."""
        return sorted(k for k in self.by_key if not is_reserved(k))


_Line = dict[int, float]


class _Key(Counts):
    """What one key of one namespace counts into: its counts, partition and timelines."""

    __slots__ = ("own", "pcounts", "pname", "throttle_line", "timeline")

    def __init__(self, own: bool) -> None:
        super().__init__()
        self.own = own  # the key is its own partition: it counts in by_partition as itself
        self.pname: str | None = None
        self.pcounts: Counts | None = None
        self.timeline: _Line = {}
        self.throttle_line: _Line = {}


class StatsCounter:
    """Counts a store's Usage events per namespace, key, partition and second.

    It runs on every request of every store, so the loop over a request's shares is
    written out flat: one lookup per key, counters updated in place.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Zero every counter and timeline; seconds count again from the next request."""
        self._keys: dict[str, dict[str, _Key]] = {}
        self._partitions: dict[tuple[str, str], Counts] = {}
        self._totals: dict[str, Counts] = {}
        self._unavailable: dict[str, int] = {}
        self._ambiguous: dict[str, int] = {}
        self._hedged: dict[str, dict[str, Counts]] = {}
        self._reasons: dict[str, dict[str, int]] = {}
        self._skipped: dict[str, dict[str, int]] = {}
        self._first: float | None = None
        self._last = 0.0

    def __call__(self, usage: object, _placements: str = PLACEMENT_PREFIX) -> None:
        if type(usage) is not Usage:
            if type(usage) is Hedge:
                self._hedge(usage)
            elif type(usage) is Skipped:
                skipped = self._skipped.setdefault(usage.namespace, {})
                skipped[usage.key] = skipped.get(usage.key, 0) + 1
            return
        ns, target, write, outcome, units, shares, start, end, reason = usage
        first = self._first
        if first is None:
            first = self._first = start
        if end > self._last:
            self._last = end
        if outcome != "ok":
            if outcome == "unavailable":
                self._unavailable[ns] = self._unavailable.get(ns, 0) + 1
                return
            if not shares:
                if outcome == "cancelled":
                    return  # given up before the store applied anything
                shares = (Share(target, 0.0),)
            elif outcome == "ambiguous":
                self._ambiguous[ns] = self._ambiguous.get(ns, 0) + 1
        throttled = outcome == "throttled"
        if throttled:
            reasons = self._reasons.get(ns)
            if reasons is None:
                reasons = self._reasons[ns] = {}
            why = reason or "unknown"
            reasons[why] = reasons.get(why, 0) + 1
        totals = self._totals.get(ns)
        if totals is None:
            totals = self._totals[ns] = Counts()
        keys = self._keys.get(ns)
        if keys is None:
            keys = self._keys[ns] = {}
        if write:
            totals.write_requests += 1
            totals.write_units += units
            totals.write_throttles += throttled
            second = int(end - first)
        else:
            totals.read_requests += 1
            totals.read_units += units
            totals.read_throttles += throttled
        for key, share_units, partition in shares:
            hit = throttled and key == target
            if key.startswith(_placements):
                key = _placements
            line = keys.get(key)
            if line is None:
                line = keys[key] = _Key(partition is None)
            if write:
                line.write_requests += 1
                line.write_units += share_units
                if hit:
                    line.write_throttles += 1
                    throttles = line.throttle_line
                    throttles[second] = throttles.get(second, 0.0) + 1.0
                elif share_units:
                    timeline = line.timeline
                    timeline[second] = timeline.get(second, 0.0) + share_units
            else:
                line.read_requests += 1
                line.read_units += share_units
                if hit:
                    line.read_throttles += 1
            if partition is not None:
                pcounts = line.pcounts
                if line.pname != partition or pcounts is None:
                    place = (ns, partition)
                    pcounts = self._partitions.get(place)
                    if pcounts is None:
                        pcounts = self._partitions[place] = Counts()
                    line.pname, line.pcounts = partition, pcounts
                pcounts.count(write, share_units, hit)

    def _hedge(self, event: Hedge) -> None:
        ns, key = event.namespace, event.key
        totals = self._totals.get(ns)
        if totals is None:
            totals = self._totals[ns] = Counts()
        totals.hedge(event.outcome, event.units)
        # apart from the key's request counts: a copy is sent before any request on a
        # fresh key has ended, and only requests say where the key lives
        hedged = self._hedged.setdefault(ns, {})
        counts = hedged.get(key)
        if counts is None:
            counts = hedged[key] = Counts()
        counts.hedge(event.outcome, event.units)

    def snapshot(self, namespace: str | None = None) -> StoreStats:
        """Return the counters of ``namespace`` (an index), or of all summed."""
        def chosen(ns: str) -> bool:
            return namespace is None or ns == namespace

        by_key: dict[str, KeyStats] = {}
        by_partition: dict[str, KeyStats] = {}
        timeline: dict[str, _Line] = {}
        throttles: dict[str, _Line] = {}

        def add(table: dict[str, KeyStats], name: str, counts: Counts) -> None:
            if counts.requests:
                stats = KeyStats.of(counts)
                table[name] = table[name] + stats if name in table else stats

        def merge(table: dict[str, _Line], name: str, line: _Line) -> None:
            if line:
                merged = table.setdefault(name, {})
                for second, amount in line.items():
                    merged[second] = merged.get(second, 0.0) + amount

        for ns, keys in self._keys.items():
            if chosen(ns):
                for name, line in keys.items():
                    add(by_key, name, line)
                    if line.own:
                        add(by_partition, name, line)
                    merge(timeline, name, line.timeline)
                    merge(throttles, name, line.throttle_line)
        for (ns, name), counts in self._partitions.items():
            if chosen(ns):
                add(by_partition, name, counts)
        for ns, hedged in self._hedged.items():
            if chosen(ns):
                for name, counts in hedged.items():
                    stats = KeyStats.of(counts)
                    by_key[name] = by_key[name] + stats if name in by_key else stats
        totals = Counts()
        for ns, counts in self._totals.items():
            if chosen(ns):
                totals.absorb(counts)
        reasons: dict[str, int] = {}
        for ns, counted in self._reasons.items():
            if chosen(ns):
                for why, n in counted.items():
                    reasons[why] = reasons.get(why, 0) + n
        skipped: dict[str, int] = {}
        for ns, counted in self._skipped.items():
            if chosen(ns):
                for key, n in counted.items():
                    skipped[key] = skipped.get(key, 0) + n
        return StoreStats(
            skipped=dict(sorted(skipped.items())),
            by_key=by_key, by_partition=by_partition, timeline=timeline,
            throttle_timeline=throttles, totals=KeyStats.of(totals),
            unavailable=sum(n for ns, n in self._unavailable.items() if chosen(ns)),
            ambiguous=sum(n for ns, n in self._ambiguous.items() if chosen(ns)),
            elapsed=0.0 if self._first is None else max(0.0, self._last - self._first),
            throttle_reasons=dict(sorted(reasons.items())))
