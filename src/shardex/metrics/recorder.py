"""The metrics of the one metering path: a store-meter subscriber with bounded labels.

``MetricsRecorder`` subscribes to the meters of the stores it is attached to
(``shardex.stores.metered``: each request a ``Usage``, each hedged copy a ``Hedge``,
each fan-out read a ``FanOutRead``) and keeps, per index (the event's namespace):

- every request once, by op (``read``/``write``) and outcome, with its units, its
  throttles by reason and a latency histogram: the figures of ``store.stats().totals``;
- per logical key and per shard key, by op: requests, units, throttles by reason, a
  latency histogram, counted per key a request touched as ``store.stats().by_key``
  does. Only the ``top`` heaviest keys of each level get a label of their own
  (``TopKeys``); the others sum under ``other``. The store's own keys count at the
  shard-key level under ``#placement``, ``#record`` and ``#owner``, never as logical keys;
- the width of each fan-out read (shard keys read at once), and hedged copies by fate;
- malformed items listings left out (``Skipped``, with ``malformed="skip"``);
- reshard progress, as a reshard runner reports it (``reshard(index)``).

``snapshot()`` returns every figure as metric families (plain data): the Prometheus
collector, the OpenTelemetry exporter and ``shardex serve`` read them. The recorder
is updated on the event loop and read from exporters' threads, so both hold one lock.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from shardex.errors import InvalidInput, InvalidKey
from shardex.keys import SEPARATOR, is_reserved, parse_shard_key
from shardex.metrics.labels import HALF_LIFE, OTHER, TopKeys
from shardex.metrics.reshard import ReshardProgress
from shardex.stores.base import Store
from shardex.stores.metered import FanOutRead, Hedge, Share, Skipped, Usage

__all__ = ["Family", "LATENCY_BUCKETS", "MetricsRecorder", "Sample", "WIDTH_BUCKETS"]

# seconds: from a DynamoDB request at its fastest to a retried one at its slowest
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                   10.0)
# shard keys read at once: a fan-out doubles with each reshard, up to the policy's 4096
WIDTH_BUCKETS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 4096.0)
_MAX_REASONS = 16  # throttle reasons kept apart per index; past them, "other"
Kind = Literal["counter", "gauge", "histogram"]


class Listener(Protocol):
    """What an exporter with histograms of its own hears (``MetricsRecorder.listen``)."""

    def request(self, index: str, value: str | None, write: bool, seconds: float) -> None:
        """A request (``value`` None), then each logical key it touched, by its label."""

    def fanout(self, index: str, width: int) -> None:
        """A fan-out read of ``width`` shard keys."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One series of a family: its labels and value; a histogram's ``value`` is its sum,
    ``count`` its observations and ``buckets`` the cumulative ``(upper bound, count)``
    pairs, the last one ``(inf, count)``."""

    labels: Mapping[str, str]
    value: float
    count: int = 0
    buckets: tuple[tuple[float, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Family:
    """A metric: its name (no ``_total`` suffix), kind, help text, unit and series."""

    name: str
    kind: Kind
    help: str
    samples: tuple[Sample, ...]
    unit: str = ""


class _Histogram:
    __slots__ = ("bounds", "count", "counts", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.count = 0
        self.total = 0.0

    def record(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.count += 1
        self.total += value

    def absorb(self, other: _Histogram) -> None:
        self.counts = [a + b for a, b in zip(self.counts, other.counts, strict=True)]
        self.count += other.count
        self.total += other.total

    def cumulative(self) -> tuple[tuple[float, int], ...]:
        out, seen = [], 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts, strict=True):
            seen += n
            out.append((bound, seen))
        return tuple(out)


class _Op:
    """One op (read or write) of one label: requests, units, throttles, latency."""

    __slots__ = ("latency", "requests", "throttles", "units")

    def __init__(self) -> None:
        self.requests = 0
        self.units = 0.0
        self.throttles: dict[str, int] = {}
        self.latency = _Histogram(LATENCY_BUCKETS)

    def count(self, units: float, reason: str | None, latency: float) -> None:
        self.requests += 1
        self.units += units
        if reason is not None:
            self.throttles[reason] = self.throttles.get(reason, 0) + 1
        self.latency.record(latency)

    def absorb(self, other: _Op) -> None:
        self.requests += other.requests
        self.units += other.units
        for reason, n in other.throttles.items():
            self.throttles[reason] = self.throttles.get(reason, 0) + n
        self.latency.absorb(other.latency)


@dataclass(slots=True)
class _Series:
    read: _Op = field(default_factory=_Op)
    write: _Op = field(default_factory=_Op)

    def absorb(self, other: _Series) -> None:
        self.read.absorb(other.read)
        self.write.absorb(other.write)


class _Level:
    """The labelled series of one level (logical keys or shard keys) of one index."""

    def __init__(self, top: int, half_life: float, now: Callable[[], float]) -> None:
        self.keys = TopKeys(top, half_life=half_life, now=now)
        self.series: dict[str, _Series] = {}

    def get(self, key: str, weight: float, *, fixed: bool = False) -> tuple[str, _Series]:
        label = key if fixed else self.keys.label(key, weight)
        series = self.series.get(label)
        if series is None:
            series = self.series[label] = _Series()
        return label, series

    def rebalance(self) -> None:
        for named, unnamed in self.keys.rebalance():
            gone = self.series.pop(unnamed, None)
            if gone is not None:
                self.get(OTHER, 0.0, fixed=True)[1].absorb(gone)
            self.series[named] = _Series()


class _Index:
    def __init__(self, top: int, half_life: float, now: Callable[[], float]) -> None:
        self.values = _Level(top, half_life, now)
        self.shard_keys = _Level(top, half_life, now)
        self.totals = _Series()
        self.requests: dict[tuple[str, str], int] = {}  # (op, outcome) -> requests
        self.fanout = _Histogram(WIDTH_BUCKETS)
        self.hedges = {"sent": 0, "won": 0, "cancelled": 0}
        self.cancelled_units = 0.0
        self.skipped = 0


def _op(write: bool) -> str:
    return "write" if write else "read"


class MetricsRecorder:
    """Counts the events of the stores it is attached to, per index, in bounded labels.

    ``top``: keys of each level (logical, shard) that get a label of their own (>= 1),
    the heaviest lately: their weights decay with ``half_life`` seconds (``TopKeys``)
    on the clock of the events counted (the newest request's end: the store's clock,
    virtual in a simulation), or ``now`` when given. ``attach(store)`` starts counting a
    store's events, ``detach(store)`` stops.
    """

    def __init__(self, *, top: int = 20, half_life: float = HALF_LIFE,
                 now: Callable[[], float] | None = None) -> None:
        self._seen = 0.0
        self._now = now if now is not None else (lambda: self._seen)
        TopKeys(top, half_life=half_life, now=self._now)  # checks them
        self._top = top
        self._half_life = half_life
        self._lock = threading.Lock()
        self._indexes: dict[str, _Index] = {}
        self._reasons: dict[str, str] = {}
        self._reshards: dict[str, ReshardProgress] = {}
        self._listeners: tuple[Listener, ...] = ()

    @property
    def top(self) -> int:
        return self._top

    def attach(self, store: Store) -> MetricsRecorder:
        """Count every event of ``store`` from now on; returns the recorder."""
        if not isinstance(store, Store):
            raise InvalidInput(f"metrics record a shardex Store, got {type(store).__name__}")
        store.meter.subscribe(self)
        return self

    def detach(self, store: Store) -> None:
        """Stop counting ``store``'s events (the counts so far stay)."""
        store.meter.unsubscribe(self)

    def listen(self, listener: Listener) -> None:
        """Tell ``listener`` of every request and fan-out read as it is counted, with the
        labels the recorder counts it under: an exporter's own histograms, in the same
        bounded labels."""
        self._listeners += (listener,)

    def reshard(self, index: str) -> ReshardProgress:
        """The reshard progress gauges of ``index``, for a reshard runner to update."""
        with self._lock:
            found = self._reshards.get(index)
            if found is None:
                found = self._reshards[index] = ReshardProgress(index, self._lock)
            return found

    # -- counting ----------------------------------------------------------------------

    def _index(self, name: str) -> _Index:
        found = self._indexes.get(name)
        if found is None:
            found = self._indexes[name] = _Index(self._top, self._half_life, self._now)
        return found

    def _reason(self, reason: str | None) -> str:
        """A bounded reason label: the store's reason up to a colon (no message text)."""
        text = (reason or "unknown").partition(":")[0].strip()[:80] or "unknown"
        known = self._reasons.get(text)
        if known is None:
            known = self._reasons[text] = text if len(self._reasons) < _MAX_REASONS else OTHER
        return known

    def __call__(self, event: object) -> None:
        kind = type(event)
        with self._lock:
            if kind is Usage:
                self._usage(event)  # type: ignore[arg-type]
            elif kind is Hedge:
                hedge: Hedge = event  # type: ignore[assignment]
                index = self._index(hedge.namespace)
                index.hedges[hedge.outcome] += 1
                if hedge.outcome == "cancelled":
                    index.cancelled_units += hedge.units
            elif kind is Skipped:
                self._index(event.namespace).skipped += 1  # type: ignore[attr-defined]
            elif kind is FanOutRead:
                read: FanOutRead = event  # type: ignore[assignment]
                self._index(read.namespace).fanout.record(float(read.width))
                for listener in self._listeners:
                    listener.fanout(read.namespace, read.width)

    def _usage(self, usage: Usage) -> None:
        if usage.end > self._seen:
            self._seen = usage.end
        index = self._index(usage.namespace)
        op, outcome, shares = _op(usage.write), usage.outcome, usage.shares
        # as store.stats() counts: unavailable apart, nothing for a request given up
        # before the store applied anything
        if outcome == "cancelled" and not shares:
            return
        index.requests[op, outcome] = index.requests.get((op, outcome), 0) + 1
        if outcome == "unavailable":
            return
        throttled = outcome == "throttled"
        reason = self._reason(usage.reason) if throttled else None
        latency = usage.end - usage.start
        getattr(index.totals, op).count(usage.units, reason, latency)
        listeners = self._listeners
        for listener in listeners:
            listener.request(usage.namespace, None, usage.write, latency)
        for key, units, _ in shares or (Share(usage.key, 0.0),):
            hit = reason if throttled and key == usage.key else None
            weight = max(units, 1.0)  # a throttled request consumed nothing, yet it is heat
            if is_reserved(key):
                _, series = index.shard_keys.get(SEPARATOR + key[1:].partition(SEPARATOR)[0],
                                                 weight, fixed=True)
                getattr(series, op).count(units, hit, latency)
                continue
            try:
                value = parse_shard_key(key)[0]
            except InvalidKey:
                value = key  # not a shardex shard key: its own logical key
            _, series = index.shard_keys.get(key, weight)
            getattr(series, op).count(units, hit, latency)
            label, series = index.values.get(value, weight)
            getattr(series, op).count(units, hit, latency)
            for listener in listeners:
                listener.request(usage.namespace, label, usage.write, latency)

    # -- reading -----------------------------------------------------------------------

    def label_of(self, index: str, key: str) -> str:
        """The label a logical key counts under in ``index`` now: itself or ``other``."""
        with self._lock:
            found = self._indexes.get(index)
            return key if found is not None and key in found.values.keys.named else OTHER

    def snapshot(self) -> tuple[Family, ...]:
        """Every metric now, as families of samples (see module); rebalances the labels."""
        with self._lock:
            for index in self._indexes.values():
                index.values.rebalance()
                index.shard_keys.rebalance()
            return tuple(self._families())

    def _families(self) -> Iterator[Family]:
        indexes = sorted(self._indexes.items())
        yield Family("shardex_requests", "counter", "Store requests, each once, by outcome.",
                     tuple(Sample({"index": name, "op": op, "outcome": outcome}, float(n))
                           for name, index in indexes
                           for (op, outcome), n in sorted(index.requests.items())))
        levels: list[tuple[str, str, Callable[[_Index], Mapping[str, _Series]]]] = [
            ("", "", lambda index: {"": index.totals}),
            ("key_", "value", lambda index: index.values.series),
            ("shard_key_", "shard_key", lambda index: index.shard_keys.series)]
        for prefix, label, series_of in levels:
            rows = [({"index": name, **({label: key} if label else {}), "op": op},
                     getattr(series, op))
                    for name, index in indexes
                    for key, series in sorted(series_of(index).items())
                    for op in ("read", "write")]
            rows = [(labels, op) for labels, op in rows if op.requests]
            what = {"": "per index", "key_": "per logical key",
                    "shard_key_": "per shard key"}[prefix]
            if prefix:
                yield Family(f"shardex_{prefix}requests", "counter",
                             f"Store requests {what} (each key a request touched).",
                             tuple(Sample(labels, float(op.requests)) for labels, op in rows))
            yield Family(f"shardex_{prefix}units", "counter",
                         f"Capacity units consumed {what}.",
                         tuple(Sample(labels, op.units) for labels, op in rows))
            yield Family(f"shardex_{prefix}throttles", "counter",
                         f"Throttled requests {what}, by the reason the store gave.",
                         tuple(Sample({**labels, "reason": reason}, float(n))
                               for labels, op in rows
                               for reason, n in sorted(op.throttles.items())))
            yield Family(f"shardex_{prefix}request_seconds", "histogram",
                         f"Request latency {what}.",
                         tuple(Sample(labels, op.latency.total, op.latency.count,
                                      op.latency.cumulative()) for labels, op in rows),
                         unit="seconds")
        yield Family("shardex_fanout_width", "histogram",
                     "Shard keys one fan-out read (a page, a scan, a count) reads.",
                     tuple(Sample({"index": name}, index.fanout.total, index.fanout.count,
                                  index.fanout.cumulative())
                           for name, index in indexes if index.fanout.count))
        yield Family("shardex_hedges", "counter",
                     "Hedged read copies: sent beyond the first, won, cancelled.",
                     tuple(Sample({"index": name, "outcome": outcome}, float(n))
                           for name, index in indexes
                           for outcome, n in index.hedges.items() if any(index.hedges.values())))
        yield Family("shardex_hedge_cancelled_units", "counter",
                     "Read units of hedged copies no one waited for.",
                     tuple(Sample({"index": name}, index.cancelled_units)
                           for name, index in indexes if index.hedges["cancelled"]))
        yield Family("shardex_skipped_items", "counter",
                     "Malformed items listings left out (malformed='skip').",
                     tuple(Sample({"index": name}, float(index.skipped))
                           for name, index in indexes if index.skipped))
        yield from ReshardProgress.families(sorted(self._reshards.items()))

    def figures(self) -> dict[str, Any]:
        """The snapshot as JSON-ready data: family name -> its samples."""
        return {family.name: [{"labels": dict(s.labels), "value": s.value,
                               **({"count": s.count} if family.kind == "histogram" else {})}
                              for s in family.samples]
                for family in self.snapshot()}
