"""What the heat meter reports: per-key counters, peaks, latency, and the hot keys view.

Plain frozen data, exported as JSON. Rates are units a second over the meter's
windows; a key's *peak* is its busiest window since metering began (or the last
reset), and its ratio to a ceiling compares that peak with one partition's ceiling:
reads with the read ceiling, writes with the write ceiling, the larger of the two.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from shardex.capacity import CEILINGS, Ceiling, resolve_ceiling
from shardex.counters.spacesaving import Counted
from shardex.errors import InvalidInput, brief

__all__ = ["HeatSnapshot", "HotKey", "HotView", "KeyMeter"]


@dataclass(frozen=True, slots=True)
class KeyMeter:
    """The counters of one key (a shard key, a logical key, a reserved bucket, or all).

    ``requests`` counts every request, throttled or failed ones included; units are
    the capacity units the store reported consumed (0 for requests that report none,
    such as a placement lookup). Latencies are histogram estimates in milliseconds.
    Hedged reads: ``hedges_sent`` extra copies sent (each also a request), ``hedges_won``
    of them answered first, ``hedges_cancelled`` copies no one waited for, which
    consumed ``cancelled_units`` (also in ``read_units``).
    """

    requests: int = 0
    reads: int = 0
    writes: int = 0
    read_units: float = 0.0
    write_units: float = 0.0
    read_throttles: int = 0
    write_throttles: int = 0
    peak_units_per_s: float = 0.0
    peak_read_units_per_s: float = 0.0
    peak_write_units_per_s: float = 0.0
    hedges_sent: int = 0
    hedges_won: int = 0
    hedges_cancelled: int = 0
    cancelled_units: float = 0.0
    latency_p50_ms: float | None = None
    latency_p99_ms: float | None = None
    latency_max_ms: float | None = None

    @property
    def units(self) -> float:
        """Read and write units together."""
        return self.read_units + self.write_units

    @property
    def throttles(self) -> int:
        """Read and write throttles together."""
        return self.read_throttles + self.write_throttles

    def peak_to(self, ceiling: Ceiling) -> float:
        """The peak as a multiple of one partition's ceiling (the larger of read and write;
        on a ceiling reads and writes share, its busiest second of both together)."""
        return ceiling.peak_ratio(self.peak_units_per_s, self.peak_write_units_per_s,
                                  self.peak_read_units_per_s)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class HotKey:
    """One logical key in the hot view: its peak, how close it comes to a ceiling, where.

    ``peak_to_ceiling`` is the logical key's peak over one partition's ceiling: the
    number of partitions its load needs. ``hottest_shard_to_ceiling`` is the same for
    its busiest shard key, which is what throttles (> 1: over the ceiling).
    """

    value: str
    shards: int
    requests: int
    units: float
    throttles: int
    peak_units_per_s: float
    peak_write_units_per_s: float
    peak_read_units_per_s: float
    peak_to_ceiling: float
    hottest_shard_key: str
    hottest_shard_to_ceiling: float
    latency_p50_ms: float | None
    latency_p99_ms: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class HotView:
    """The hottest logical keys by peak units a second, against one partition's ceiling."""

    keys: list[HotKey]
    ceiling: Ceiling
    at: float
    window: float

    def __iter__(self) -> Iterator[HotKey]:
        return iter(self.keys)

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, index: int) -> HotKey:
        return self.keys[index]

    def get(self, value: str) -> HotKey | None:
        """Return the entry of logical key ``value``, or None if it is not in the view."""
        return next((k for k in self.keys if k.value == value), None)

    def to_dict(self) -> dict[str, Any]:
        return {"at": self.at, "window_s": self.window,
                "ceiling": {"name": self.ceiling.name, "write_units": self.ceiling.write_units,
                            "read_units": self.ceiling.read_units},
                "hot": [k.to_dict() for k in self.keys]}

    def to_json(self, *, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)


@dataclass(frozen=True, slots=True)
class HeatSnapshot:
    """A metered store's counters at one instant.

    - ``shard_keys`` and ``values`` (logical keys) map each key to its KeyMeter;
      ``reserved`` holds the store's own keys (``#placement``, ``#record``), never
      counted as logical keys; ``other`` aggregates keys past the meter's key cap, and
      ``overflow`` ranks those keys by units with Space-Saving error bounds.
    - ``timeline``: logical key -> [(window start in seconds, units/s)] over the
      retained windows in which it had traffic; ``windows`` lists those windows' starts;
      ``shard_timeline`` is the same per shard key, ``reserved_timeline`` per reserved
      bucket.
    - ``shard_values``: shard key -> its logical key.
    - ``ceiling``: the metered store's partition ceiling; ``shard_ceilings`` the ceiling
      of each shard key on a store of another kind (a tier's, ``HeatMeter.watch``).
    """

    at: float
    window: float
    windows: list[float]
    shard_keys: Mapping[str, KeyMeter]
    values: Mapping[str, KeyMeter]
    reserved: Mapping[str, KeyMeter]
    totals: KeyMeter
    other: KeyMeter | None = None
    overflow: list[Counted] = field(default_factory=list)
    timeline: Mapping[str, list[tuple[float, float]]] = field(default_factory=dict)
    shard_values: Mapping[str, str] = field(default_factory=dict)
    shard_timeline: Mapping[str, list[tuple[float, float]]] = field(default_factory=dict)
    reserved_timeline: Mapping[str, list[tuple[float, float]]] = field(default_factory=dict)
    ceiling: Ceiling = CEILINGS["dynamodb"]
    shard_ceilings: Mapping[str, Ceiling] = field(default_factory=dict)

    def hot(self, top: int = 10, *, ceiling: str | float | Ceiling | None = None) -> HotView:
        """Return the ``top`` logical keys by peak units a second, with their ceiling ratio.

        ``top`` is an int >= 1; ``ceiling`` as ``resolve_ceiling`` takes it, or None: each
        shard key against the ceiling of its store (``ceiling``, ``shard_ceilings``), a
        logical key against its hottest shard key's. Raises InvalidInput naming a bad one.
        """
        if isinstance(top, bool) or not isinstance(top, int) or top < 1:
            raise InvalidInput(f"top must be an integer >= 1, got {brief(top)}")
        bound = self.ceiling if ceiling is None else resolve_ceiling(ceiling)
        own = {} if ceiling is not None else self.shard_ceilings
        busiest: dict[str, tuple[float, str, int]] = {}
        for shard_key, meter in self.shard_keys.items():
            value = self.shard_values.get(shard_key, shard_key)
            ratio = meter.peak_to(own.get(shard_key, bound))
            best, best_key, count = busiest.get(value, (-1.0, shard_key, 0))
            if ratio > best or (ratio == best and shard_key < best_key):
                best, best_key = ratio, shard_key
            busiest[value] = (best, best_key, count + 1)
        ranked = sorted(self.values.items(), key=lambda kv: (-kv[1].peak_units_per_s, kv[0]))
        keys = []
        for value, meter in ranked[:top]:
            best, best_key, count = busiest.get(value, (meter.peak_to(bound), value, 1))
            # a value is on one store (on two only while a reshard moves it): its hottest's
            value_bound = own.get(best_key, bound)
            keys.append(HotKey(
                value=value, shards=count, requests=meter.requests, units=meter.units,
                throttles=meter.throttles, peak_units_per_s=meter.peak_units_per_s,
                peak_write_units_per_s=meter.peak_write_units_per_s,
                peak_read_units_per_s=meter.peak_read_units_per_s,
                peak_to_ceiling=meter.peak_to(value_bound), hottest_shard_key=best_key,
                hottest_shard_to_ceiling=best, latency_p50_ms=meter.latency_p50_ms,
                latency_p99_ms=meter.latency_p99_ms))
        return HotView(keys=keys, ceiling=bound, at=self.at, window=self.window)

    def to_dict(self) -> dict[str, Any]:
        return {
            "at": self.at, "window_s": self.window, "windows": list(self.windows),
            "totals": self.totals.to_dict(),
            "values": {k: m.to_dict() for k, m in sorted(self.values.items())},
            "shard_keys": {k: m.to_dict() for k, m in sorted(self.shard_keys.items())},
            "reserved": {k: m.to_dict() for k, m in sorted(self.reserved.items())},
            "other": None if self.other is None else self.other.to_dict(),
            "overflow": [{"key": c.key, "units": c.count, "error": c.error}
                         for c in self.overflow],
            "timeline": {k: [[start, rate] for start, rate in line]
                         for k, line in sorted(self.timeline.items())},
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        """The snapshot as JSON text."""
        return json.dumps(self.to_dict(), indent=indent)
