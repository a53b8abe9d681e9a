"""The windowed heat meter: heat per shard key and logical key, in windows, from a store's events.

``HeatMeter(store)`` subscribes to the store's meter (``shardex.stores.metered``) and
counts every Usage event in windows of ``window`` seconds on the store's clock:
requests, capacity units, throttles and latency (a bounded histogram), and every Hedge
event (hedged read copies sent, won and cancelled, with the cancelled copies' units).
Counts are kept per shard key, per logical key (the shard key without its ``#k``
suffix) and, for the store's own keys (placements, records, the owner check), per
reserved bucket (``#placement``, ``#record``, ``#owner``), never as logical keys. A
request that touched several keys (a placement) counts once on each, with the units the
store reported there, and once on the totals with all its units.
``ShardedIndex(..., meter=True)`` builds one, and ``index.heat()`` reads it.

Memory is bounded: the last ``windows`` windows are kept for the timeline (peaks are
folded in as each window closes), and at most ``max_keys`` shard keys and as many
logical keys are tracked. A key idle for all retained windows gives its place up when
the table is full (its counts join ``#other``); when none is idle, new keys count under
``#other`` and a Space-Saving summary ranks them by units, and at the end of a window
one whose units in it surely pass the smallest peak of a tracked key takes that key's
place (``_Table.promote``). Snapshots taken outside the
event loop use the time of the last request.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from itertools import pairwise

from shardex.capacity import CEILINGS, Ceiling
from shardex.clock import Clock
from shardex.counters.histogram import DEFAULT_BOUNDS, LatencyHistogram
from shardex.counters.spacesaving import SpaceSaving
from shardex.errors import InvalidInput, InvalidKey
from shardex.heatmeter.view import HeatSnapshot, HotView, KeyMeter
from shardex.keys import SEPARATOR, is_reserved, parse_shard_key
from shardex.stores.base import Store
from shardex.stores.metered import Counts, Hedge, Share, Usage

__all__ = ["HeatMeter", "OTHER", "ceiling_of"]

OTHER = "#other"
_CANDIDATES = 16  # keys under OTHER a window that may take a place at its end


@dataclass(slots=True)
class _Tally:
    """Cumulative counts of one key; peaks are per window, folded in as windows close."""

    value: str
    counts: Counts = field(default_factory=Counts)
    peak: float = 0.0
    peak_read: float = 0.0
    peak_write: float = 0.0
    last_window: int = 0
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)

    def absorb(self, other: _Tally) -> None:
        self.counts.absorb(other.counts)
        self.peak = max(self.peak, other.peak)
        self.peak_read = max(self.peak_read, other.peak_read)
        self.peak_write = max(self.peak_write, other.peak_write)
        self.last_window = max(self.last_window, other.last_window)
        self.latency.merge(other.latency)

    def fold(self, window: Counts) -> None:
        """Raise the peaks to a closed window's counts."""
        self.peak = max(self.peak, window.units)
        self.peak_read = max(self.peak_read, window.read_units)
        self.peak_write = max(self.peak_write, window.write_units)


@dataclass(slots=True)
class _Window:
    index: int
    shard_keys: dict[str, Counts] = field(default_factory=dict)
    values: dict[str, Counts] = field(default_factory=dict)
    reserved: dict[str, Counts] = field(default_factory=dict)
    total: Counts = field(default_factory=Counts)


class _Table:
    """The tallies of one level (shard keys or logical keys), capped at ``limit`` keys."""

    def __init__(self, limit: int, bounds: Sequence[float]) -> None:
        self.limit = limit
        self.bounds = bounds
        self.tallies: dict[str, _Tally] = {}
        self.other: _Tally | None = None
        self.overflow = SpaceSaving(limit)
        # the keys under OTHER in the open window, by units: the candidates for a place
        self.recent = SpaceSaving(_CANDIDATES)
        self.recent_window = -1
        self._swept = -1  # the window idle keys were last looked for in

    def overflowed(self, key: str, units: float, window: int) -> None:
        """Count ``units`` of ``key``, which counts under OTHER, in ``window``."""
        self.overflow.add(key, units)
        if window != self.recent_window:
            self.recent, self.recent_window = SpaceSaving(_CANDIDATES), window
        self.recent.add(key, units)

    def promote(self, window: int, value_of: Callable[[str], str]) -> None:
        """At the end of ``window``: a key under OTHER whose units in it surely pass the
        smallest peak of a tracked key takes that key's place (whose counts join OTHER),
        its peak that window's. New keys had counted under OTHER for as long as every
        tracked key stayed busy: 10,000 tenants written every 30 s hid a key at 3,000
        units a second from ``hot`` (a probe)."""
        if self.recent_window != window or not len(self.recent):
            return
        # a key that found a place since (an idle key made room) keeps its own tally
        candidates = [c for c in self.recent.top() if c.lower > 0 and c.key not in self.tallies]
        self.recent, self.recent_window = SpaceSaving(_CANDIDATES), -1
        if not candidates or len(self.tallies) < self.limit:
            return
        by_peak = heapq.nsmallest(len(candidates), self.tallies.items(),
                                  key=lambda kv: (kv[1].peak, kv[0]))
        for candidate, (weakest, tally) in zip(candidates, by_peak, strict=False):
            if candidate.lower <= tally.peak:
                break
            if self.other is None:
                self.other = _Tally(OTHER, latency=LatencyHistogram(self.bounds))
            self.other.absorb(self.tallies.pop(weakest))
            made = self.tallies[candidate.key] = _Tally(
                value_of(candidate.key), last_window=window,
                latency=LatencyHistogram(self.bounds))
            made.peak = candidate.lower

    def tally(self, key: str, value: str, window: int, oldest: int) -> tuple[str, _Tally]:
        """Return the name the key counts under (itself or OTHER) and its tally."""
        found = self.tallies.get(key)
        if found is not None:
            return key, found
        if len(self.tallies) >= self.limit and self._swept != window:
            self._swept = window  # at most one sweep a window: O(keys) each time
            self._evict_idle(oldest)
        if len(self.tallies) < self.limit:
            made = self.tallies[key] = _Tally(value, last_window=window,
                                              latency=LatencyHistogram(self.bounds))
            return key, made
        if self.other is None:
            self.other = _Tally(OTHER, latency=LatencyHistogram(self.bounds))
        return OTHER, self.other

    def _evict_idle(self, oldest: int) -> None:
        idle = [k for k, t in self.tallies.items() if t.last_window < oldest]
        if not idle:
            return
        if self.other is None:
            self.other = _Tally(OTHER, latency=LatencyHistogram(self.bounds))
        for key in idle:
            self.other.absorb(self.tallies.pop(key))


def ceiling_of(store: Store) -> Ceiling:
    """The partition ceiling of ``store``'s kind (``CEILINGS``): DynamoDB's for a store of
    no kind there (``memory://`` models DynamoDB)."""
    return CEILINGS.get(store.scheme, CEILINGS["dynamodb"])


def _value_of(key: str) -> str:
    """The logical key of shard key ``key`` (a key of another shape is its own)."""
    try:
        return parse_shard_key(key)[0]
    except InvalidKey:
        return key


def _bucket(key: str) -> str:
    """The reserved bucket of a store's own key: ``#placement#o-1`` -> ``#placement``."""
    return SEPARATOR + key[1:].partition(SEPARATOR)[0]


class HeatMeter:
    """Counts a store's traffic per shard key and logical key in windows (see module).

    ``window``: seconds per window (> 0); ``windows``: windows kept for the timeline
    (>= 1); ``max_keys``: shard keys, and logical keys, tracked at most (>= 1);
    ``clock``: where snapshots read time (the store's clock by default);
    ``latency_bounds``: histogram bucket bounds in seconds (increasing). It counts from
    the moment it is built until ``close()``. Raises InvalidInput for a bad option.
    """

    def __init__(self, store: Store, *, window: float = 1.0, windows: int = 60,
                 max_keys: int = 10_000, clock: Clock | None = None,
                 latency_bounds: Sequence[float] = DEFAULT_BOUNDS) -> None:
        if not isinstance(store, Store):
            raise InvalidInput(f"HeatMeter meters a shardex Store, got {type(store).__name__}")
        if isinstance(window, bool) or not isinstance(window, int | float) or not window > 0:
            raise InvalidInput(f"meter window must be a number of seconds > 0, got {window!r}")
        for name, number in (("windows", windows), ("max_keys", max_keys)):
            if isinstance(number, bool) or not isinstance(number, int) or number < 1:
                raise InvalidInput(f"meter {name} must be an integer >= 1, got {number!r}")
        bounds = tuple(float(b) for b in latency_bounds)
        if not bounds or any(b <= 0 for b in bounds) or \
                any(a >= b for a, b in pairwise(bounds)):
            raise InvalidInput("latency_bounds must be positive and strictly increasing")
        self.store = store
        self._window = float(window)
        self._keep = windows
        self._bounds = bounds
        self._max_keys = max_keys
        self._clock: Clock = clock if clock is not None else store.clock
        self._seen = 0.0
        self.ceiling = ceiling_of(store)
        self._watched: dict[str, tuple[Store, Callable[[object], None], Ceiling]] = {}
        self.reset()
        store.meter.subscribe(self)

    def watch(self, store: Store, tier: str) -> None:
        """Count ``store``'s traffic too, a tier's of the metered index: its shard keys as
        ``TIER:KEY`` (``tier:PENDING#0``, apart from the metered store's own keys of that
        name), under the same logical keys, judged against ``store``'s ceiling."""
        if not isinstance(store, Store):
            raise InvalidInput(f"HeatMeter meters a shardex Store, got {type(store).__name__}")
        if store is self.store or tier in self._watched:
            return
        prefix = f"{tier}:"

        def count(event: object) -> None:
            self._event(event, prefix)

        self._watched[tier] = (store, count, ceiling_of(store))
        store.meter.subscribe(count)

    def close(self) -> None:
        """Stop counting (the counts so far stay readable)."""
        self.store.meter.unsubscribe(self)
        for store, count, _ in self._watched.values():
            store.meter.unsubscribe(count)

    @property
    def window(self) -> float:
        """Seconds per window."""
        return self._window

    def reset(self) -> None:
        """Forget every count; metering starts again from the next request."""
        self._shards = _Table(self._max_keys, self._bounds)
        self._values = _Table(self._max_keys, self._bounds)
        self._reserved: dict[str, _Tally] = {}
        self._tiered: dict[str, str] = {}  # shard key of a watched store -> its prefix
        self._totals = _Tally("", latency=LatencyHistogram(self._bounds))
        self._ring: deque[_Window] = deque()

    # -- counting ---------------------------------------------------------------------

    def __call__(self, event: object) -> None:
        self._event(event, "")

    def _event(self, event: object, prefix: str) -> None:
        """Count one event of a store, its shard keys named ``prefix + key``."""
        if type(event) is not Usage:
            if type(event) is Hedge:
                self._hedge(event, prefix)
            return
        now, latency, write = event.end, event.end - event.start, event.write
        throttled = event.outcome == "throttled"
        self._seen = max(self._seen, now)
        window = self._current(now)
        window.total.count(write, event.units, throttled)
        self._totals.counts.count(write, event.units, throttled)
        self._totals.latency.record(latency)
        for share in event.shares or (Share(event.key, 0.0),):
            self._count(share.key, window, latency, write, share.units,
                        throttled and share.key == event.key, prefix)

    def _hedge(self, event: Hedge, prefix: str) -> None:
        """Count a hedged copy's fate on its shard key's and logical key's tallies."""
        self._seen = max(self._seen, event.at)
        window = self._current(event.at)
        self._totals.counts.hedge(event.outcome, event.units)
        key = event.key
        if is_reserved(key):
            return
        try:
            value = parse_shard_key(key)[0]
        except InvalidKey:
            value = key
        oldest = window.index - self._keep + 1
        for table, name in ((self._shards, prefix + key), (self._values, value)):
            _, tally = table.tally(name, value, window.index, oldest)
            tally.counts.hedge(event.outcome, event.units)

    def _current(self, now: float) -> _Window:
        """Return the window of ``now``, closing (folding the peaks of) older ones."""
        index = int(now // self._window)
        ring = self._ring
        if ring and ring[-1].index >= index:
            return ring[-1]  # time never runs backwards by more than a window in practice
        if ring:
            self._close(ring[-1])
        ring.append(_Window(index))
        while ring[0].index <= index - self._keep:
            ring.popleft()
        return ring[-1]

    def _close(self, window: _Window) -> None:
        self._totals.fold(window.total)
        for table, counts in ((self._shards, window.shard_keys), (self._values, window.values)):
            for key, slots in counts.items():
                tally = table.other if key == OTHER else table.tallies.get(key)
                if tally is not None:
                    tally.fold(slots)
        for bucket, slots in window.reserved.items():
            self._reserved[bucket].fold(slots)
        self._shards.promote(window.index, _value_of)
        self._values.promote(window.index, lambda key: key)

    def _time(self) -> float:
        with suppress(RuntimeError):  # no running loop: a snapshot from synchronous code
            self._seen = self._clock.now()
        return self._seen

    def _count(self, key: str, window: _Window, latency: float, write: bool, units: float,
               throttled: bool, prefix: str = "") -> None:
        """Count one request on ``key``'s tallies and its window's slots."""
        tallies: list[_Tally] = []
        if is_reserved(key):
            bucket = _bucket(key)
            tally = self._reserved.get(bucket)
            if tally is None:
                tally = self._reserved[bucket] = _Tally(bucket,
                                                        latency=LatencyHistogram(self._bounds))
            slots = window.reserved.get(bucket)
            if slots is None:
                slots = window.reserved[bucket] = Counts()
            slots.count(write, units, throttled)
            tallies.append(tally)
        else:
            try:
                value = parse_shard_key(key)[0]
            except InvalidKey:
                value = key  # not a shardex shard key: it is its own logical key
            oldest = window.index - self._keep + 1
            shard = key
            if prefix:
                shard = prefix + key
                self._tiered[shard] = prefix
            for table, name, counts in ((self._shards, shard, window.shard_keys),
                                        (self._values, value, window.values)):
                under, tally = table.tally(name, value, window.index, oldest)
                tally.last_window = window.index
                if under == OTHER:
                    table.overflowed(name, units, window.index)
                slots = counts.get(under)
                if slots is None:
                    slots = counts[under] = Counts()
                slots.count(write, units, throttled)
                tallies.append(tally)
        for tally in tallies:
            tally.counts.count(write, units, throttled)
            tally.latency.record(latency)

    # -- reports ------------------------------------------------------------------------

    def snapshot(self) -> HeatSnapshot:
        """Return every counter now, with peaks that include the window still open."""
        now = self._time()
        ring = list(self._ring)
        open_window = ring[-1] if ring and ring[-1].index == int(now // self._window) else None
        if ring and open_window is None:
            self._current(now)  # close the last window so its peaks count
            ring = list(self._ring)
            open_window = ring[-1]
        per_s = 1.0 / self._window

        def meter(tally: _Tally, live: Counts | None) -> KeyMeter:
            peak, peak_read, peak_write = tally.peak, tally.peak_read, tally.peak_write
            if live is not None:
                peak = max(peak, live.units)
                peak_read = max(peak_read, live.read_units)
                peak_write = max(peak_write, live.write_units)
            hist, counts = tally.latency, tally.counts
            p50, p99 = hist.quantile(0.5), hist.quantile(0.99)
            return KeyMeter(
                requests=counts.requests, reads=counts.read_requests,
                writes=counts.write_requests, read_units=counts.read_units,
                write_units=counts.write_units, read_throttles=counts.read_throttles,
                write_throttles=counts.write_throttles,
                peak_units_per_s=peak * per_s, peak_read_units_per_s=peak_read * per_s,
                peak_write_units_per_s=peak_write * per_s,
                hedges_sent=counts.hedges_sent, hedges_won=counts.hedges_won,
                hedges_cancelled=counts.hedges_cancelled,
                cancelled_units=counts.cancelled_units,
                latency_p50_ms=None if p50 is None else 1000.0 * p50,
                latency_p99_ms=None if p99 is None else 1000.0 * p99,
                latency_max_ms=1000.0 * hist.high if hist.count else None)

        def level(table: _Table, live: Mapping[str, Counts]) -> dict[str, KeyMeter]:
            return {key: meter(t, live.get(key)) for key, t in table.tallies.items()}

        live_shards = open_window.shard_keys if open_window is not None else {}
        live_values = open_window.values if open_window is not None else {}
        other = self._values.other or self._shards.other
        timeline: dict[str, list[tuple[float, float]]] = {}
        shard_timeline: dict[str, list[tuple[float, float]]] = {}
        reserved_timeline: dict[str, list[tuple[float, float]]] = {}
        for w in ring:
            start = w.index * self._window
            for line, slotted in ((timeline, w.values), (shard_timeline, w.shard_keys),
                                  (reserved_timeline, w.reserved)):
                for key, slots in slotted.items():
                    line.setdefault(key, []).append((start, slots.units * per_s))
        return HeatSnapshot(
            at=now, window=self._window, windows=[w.index * self._window for w in ring],
            shard_keys=level(self._shards, live_shards),
            values=level(self._values, live_values),
            reserved={k: meter(t, open_window.reserved.get(k) if open_window is not None
                               else None) for k, t in sorted(self._reserved.items())},
            totals=meter(self._totals, open_window.total if open_window is not None else None),
            other=None if other is None else meter(other, live_values.get(OTHER)),
            overflow=self._values.overflow.top(20), timeline=timeline,
            shard_timeline=shard_timeline, reserved_timeline=reserved_timeline,
            shard_values={k: t.value for k, t in self._shards.tallies.items()},
            ceiling=self.ceiling, shard_ceilings=self._shard_ceilings())

    def _shard_ceilings(self) -> dict[str, Ceiling]:
        """The ceiling of each tracked shard key of a watched store, where it differs."""
        ceilings = {f"{tier}:": ceiling for tier, (_, _, ceiling) in self._watched.items()
                    if ceiling != self.ceiling}
        return {key: ceilings[prefix] for key, prefix in self._tiered.items()
                if prefix in ceilings and key in self._shards.tallies}

    def hot(self, top: int = 10, *, ceiling: str | float | Ceiling | None = None) -> HotView:
        """Return the ``top`` logical keys by peak units a second, against ``ceiling`` (the
        ceiling of the store each shard key is on, if None)."""
        return self.snapshot().hot(top, ceiling=ceiling)
