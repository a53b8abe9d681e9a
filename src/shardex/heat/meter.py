"""MeteredStore: a Store wrapper that counts heat per shard key and per logical key.

Every request is delegated unchanged to the inner store (errors re-raised as they
are) and counted in windows of ``window`` seconds on the injected clock: requests,
capacity units (``QueryPage.units``, the return value of ``place``), throttles and
latency (a bounded histogram). Counters are kept per shard key, per logical key (the
shard key without its ``#k`` suffix) and, for the store's own keys (placements,
records), per reserved bucket (``#placement``, ``#record``), never as logical keys.

Memory is bounded: the last ``windows`` windows are kept for the timeline (peaks are
folded in as each window closes), and at most ``max_keys`` shard keys and as many
logical keys are tracked. A key idle for all retained windows gives its place up when
the table is full (its counts join ``#other``); when none is idle, new keys count under
``#other`` and a Space-Saving summary ranks them by units.

A ``place`` counts as one write request on every key it touched, and its units are
split over them in proportion to their items' write units: the shard key written, the
shard key left (known from the item's last ``locate`` through this wrapper, as
ShardedIndex always does just before) and the placement record (one unit); the totals
count it once, with all its units. For the memory store this is its own accounting.
Snapshots taken outside the event loop use the time of the last request.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, TypeVar

from shardex.errors import InvalidInput, InvalidKey, InvalidURI, Throttled
from shardex.heat.histogram import DEFAULT_BOUNDS, LatencyHistogram
from shardex.heat.snapshot import HeatSnapshot, HotView, KeyMeter
from shardex.heat.spacesaving import SpaceSaving
from shardex.keys import parse_shard_key
from shardex.plan import Ceiling
from shardex.sim.capacity import entry_bytes, write_units
from shardex.sim.clock import Clock, LoopClock
from shardex.stores.base import Placement, Position, QueryPage, Record, Store, StoredEntry
from shardex.stores.uri import StoreURI

__all__ = ["MeteredStore", "OTHER"]

T = TypeVar("T")

OTHER = "#other"
PLACEMENT = "#placement"
RECORD = "#record"
_RECENT = 4096  # items whose last located entry is remembered, for place attribution
# window counter slots
_REQ, _RU, _WU, _THR = range(4)


@dataclass(slots=True)
class _Tally:
    """Cumulative counters of one key; peaks are per window, folded in as windows close."""

    value: str
    requests: int = 0
    reads: int = 0
    writes: int = 0
    read_units: float = 0.0
    write_units: float = 0.0
    read_throttles: int = 0
    write_throttles: int = 0
    peak: float = 0.0
    peak_read: float = 0.0
    peak_write: float = 0.0
    last_window: int = 0
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)

    def absorb(self, other: _Tally) -> None:
        self.requests += other.requests
        self.reads += other.reads
        self.writes += other.writes
        self.read_units += other.read_units
        self.write_units += other.write_units
        self.read_throttles += other.read_throttles
        self.write_throttles += other.write_throttles
        self.peak = max(self.peak, other.peak)
        self.peak_read = max(self.peak_read, other.peak_read)
        self.peak_write = max(self.peak_write, other.peak_write)
        self.last_window = max(self.last_window, other.last_window)
        self.latency.merge(other.latency)

    def fold(self, counts: list[float]) -> None:
        """Raise the peaks to a closed window's counts."""
        self.peak = max(self.peak, counts[_RU] + counts[_WU])
        self.peak_read = max(self.peak_read, counts[_RU])
        self.peak_write = max(self.peak_write, counts[_WU])


@dataclass(slots=True)
class _Window:
    index: int
    shard_keys: dict[str, list[float]] = field(default_factory=dict)
    values: dict[str, list[float]] = field(default_factory=dict)
    total: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0, 0.0])


class _Table:
    """The tallies of one level (shard keys or logical keys), capped at ``limit`` keys."""

    def __init__(self, limit: int, bounds: Sequence[float]) -> None:
        self.limit = limit
        self.bounds = bounds
        self.tallies: dict[str, _Tally] = {}
        self.other: _Tally | None = None
        self.overflow = SpaceSaving(limit)
        self._swept = -1  # the window idle keys were last looked for in

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


def _add(slots: list[float], *, write: bool, units: float, throttled: bool) -> None:
    """Count one request in a window's slots."""
    slots[_REQ] += 1
    slots[_WU if write else _RU] += units
    slots[_THR] += throttled


def _tally_request(tally: _Tally, latency: float, *, write: bool, units: float,
                   throttled: bool) -> None:
    tally.requests += 1
    if write:
        tally.writes += 1
        tally.write_units += units
        tally.write_throttles += throttled
    else:
        tally.reads += 1
        tally.read_units += units
        tally.read_throttles += throttled
    tally.latency.record(latency)


def _bucket(key: str) -> str:
    """The reserved bucket of a store's own key: ``#placement#o-1`` -> ``#placement``."""
    return "#" + key[1:].partition("#")[0]


class MeteredStore(Store):
    """Wraps ``store`` and counts its traffic per shard key and logical key (see module).

    ``window``: seconds per window (> 0); ``windows``: windows kept for the timeline
    (>= 1); ``max_keys``: shard keys, and logical keys, tracked at most (>= 1);
    ``clock``: where time is read (``LoopClock()``: virtual under ``run_virtual``);
    ``latency_bounds``: histogram bucket bounds in seconds (increasing). Opening and
    closing pass through to the inner store. Raises InvalidInput for a bad option.
    """

    scheme = "metered"

    def __init__(self, store: Store, *, window: float = 1.0, windows: int = 60,
                 max_keys: int = 10_000, clock: Clock | None = None,
                 latency_bounds: Sequence[float] = DEFAULT_BOUNDS) -> None:
        super().__init__()
        if not isinstance(store, Store):
            raise InvalidInput(f"MeteredStore wraps a shardex Store, got {type(store).__name__}")
        if isinstance(window, bool) or not isinstance(window, int | float) or not window > 0:
            raise InvalidInput(f"meter window must be a number of seconds > 0, got {window!r}")
        for name, number in (("windows", windows), ("max_keys", max_keys)):
            if isinstance(number, bool) or not isinstance(number, int) or number < 1:
                raise InvalidInput(f"meter {name} must be an integer >= 1, got {number!r}")
        bounds = tuple(float(b) for b in latency_bounds)
        if not bounds or any(b <= 0 for b in bounds) or \
                any(a >= b for a, b in pairwise(bounds)):
            raise InvalidInput("latency_bounds must be positive and strictly increasing")
        self._inner = store
        self.capabilities = store.capabilities
        self._window = float(window)
        self._keep = windows
        self._bounds = bounds
        self._max_keys = max_keys
        self._clock: Clock = clock if clock is not None else LoopClock()
        self._recent: OrderedDict[tuple[str, str], StoredEntry | None] = OrderedDict()
        self._seen = 0.0
        self.reset()

    @classmethod
    def from_uri(cls, uri: StoreURI, **options: Any) -> Store:
        raise InvalidURI("a metered store wraps another store: MeteredStore(open_store(uri))")

    @property
    def inner(self) -> Store:
        """The store being metered."""
        return self._inner

    @property
    def uri(self) -> str:
        return self._inner.uri

    @property
    def window(self) -> float:
        """Seconds per window."""
        return self._window

    def reset(self) -> None:
        """Forget every count; metering starts again from the next request."""
        self._shards = _Table(self._max_keys, self._bounds)
        self._values = _Table(self._max_keys, self._bounds)
        self._reserved: dict[str, _Tally] = {}
        self._totals = _Tally("", latency=LatencyHistogram(self._bounds))
        self._ring: deque[_Window] = deque()

    async def _connect(self) -> None:
        await self._inner.open()

    async def _disconnect(self) -> None:
        await self._inner.close()

    # -- counting ---------------------------------------------------------------------

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

    def _time(self) -> float:
        with suppress(RuntimeError):  # no running loop: a snapshot from synchronous code
            self._seen = self._clock.now()
        return self._seen

    def _count_total(self, now: float, latency: float, *, write: bool, units: float,
                     throttled: bool) -> None:
        """Count one request on the store's totals."""
        self._seen = max(self._seen, now)
        _add(self._current(now).total, write=write, units=units, throttled=throttled)
        _tally_request(self._totals, latency, write=write, units=units, throttled=throttled)

    def _count(self, key: str, now: float, latency: float, *, write: bool, units: float,
               throttled: bool, total: bool = True) -> None:
        """Count one request on ``key``'s tallies (and on the totals unless ``total`` is off)."""
        if total:
            self._count_total(now, latency, write=write, units=units, throttled=throttled)
        window = self._current(now)
        oldest = window.index - self._keep + 1
        tallies: list[_Tally] = []
        if key.startswith("#"):
            bucket = _bucket(key)
            tally = self._reserved.get(bucket)
            if tally is None:
                tally = self._reserved[bucket] = _Tally(bucket,
                                                        latency=LatencyHistogram(self._bounds))
            tallies.append(tally)
        else:
            try:
                value = parse_shard_key(key)[0]
            except InvalidKey:
                value = key  # not a shardex shard key: it is its own logical key
            for table, name, counts in ((self._shards, key, window.shard_keys),
                                        (self._values, value, window.values)):
                under, tally = table.tally(name, value, window.index, oldest)
                tally.last_window = window.index
                if under == OTHER:
                    table.overflow.add(name, units)
                slots = counts.get(under)
                if slots is None:
                    slots = counts[under] = [0.0, 0.0, 0.0, 0.0]
                _add(slots, write=write, units=units, throttled=throttled)
                tallies.append(tally)
        for tally in tallies:
            _tally_request(tally, latency, write=write, units=units, throttled=throttled)

    async def _metered(self, key: str, call: Callable[[], Awaitable[T]], *, write: bool,
                       units: Callable[[T], float] | None = None,
                       done: Callable[[float, float, T], None] | None = None) -> T:
        """Await ``call`` and count it under ``key`` (``done`` counts a success itself)."""
        clock = self._clock
        start = clock.now()
        try:
            result = await call()
        except Throttled as exc:
            now = clock.now()
            self._count(exc.key or key, now, now - start, write=write, units=0.0,
                        throttled=True)
            raise
        except BaseException:
            now = clock.now()
            self._count(key, now, now - start, write=write, units=0.0, throttled=False)
            raise
        now = clock.now()
        if done is not None:
            done(now, now - start, result)
        else:
            self._count(key, now, now - start, write=write,
                        units=0.0 if units is None else units(result), throttled=False)
        return result

    def _remember(self, namespace: str, item_id: str, entry: StoredEntry | None) -> None:
        recent = self._recent
        recent[(namespace, item_id)] = entry
        recent.move_to_end((namespace, item_id))
        if len(recent) > _RECENT:
            recent.popitem(last=False)

    # -- the Store protocol -------------------------------------------------------------

    async def locate(self, namespace: str, item_id: str) -> Placement | None:
        placement = await self._metered(
            f"{PLACEMENT}#{item_id}", lambda: self._inner.locate(namespace, item_id),
            write=False)
        self._remember(namespace, item_id, None if placement is None else placement.entry)
        return placement

    async def place(self, namespace: str, item_id: str, entry: StoredEntry | None, *,
                    version: int, expected: int | None) -> float:
        old = self._recent.pop((namespace, item_id), None)
        shares: dict[str, float] = {f"{PLACEMENT}#{item_id}": 1.0}
        if old is not None:
            shares[old.shard_key] = float(write_units(entry_bytes(old)))
        if entry is not None:
            weight = float(write_units(entry_bytes(entry)))
            if old is not None and old.shard_key == entry.shard_key:
                # one row overwritten in place, or one deleted and one put on the same key
                weight = max(weight, shares[old.shard_key]) if old.position == entry.position \
                    else weight + shares[old.shard_key]
            shares[entry.shard_key] = weight
        primary = entry.shard_key if entry is not None else (
            old.shard_key if old is not None else f"{PLACEMENT}#{item_id}")
        def done(now: float, latency: float, units: float) -> None:
            whole = sum(shares.values())
            self._count_total(now, latency, write=True, units=units, throttled=False)
            for key, weight in shares.items():
                # one write request on every partition touched; the totals count it once
                self._count(key, now, latency, write=True, units=units * weight / whole,
                            throttled=False, total=False)

        return await self._metered(
            primary, lambda: self._inner.place(namespace, item_id, entry, version=version,
                                               expected=expected),
            write=True, done=done)

    async def query(self, namespace: str, shard_key: str, *, after: Position | None,
                    descending: bool, limit: int) -> QueryPage:
        return await self._metered(
            shard_key, lambda: self._inner.query(namespace, shard_key, after=after,
                                                 descending=descending, limit=limit),
            write=False, units=lambda page: page.units)

    async def count(self, namespace: str, shard_key: str) -> int:
        return await self._metered(shard_key, lambda: self._inner.count(namespace, shard_key),
                                   write=False)

    async def get_record(self, namespace: str, key: str) -> Record | None:
        return await self._metered(f"{RECORD}#{key}",
                                   lambda: self._inner.get_record(namespace, key), write=False)

    async def put_record(self, namespace: str, key: str, body: Mapping[str, Any], *,
                         expected: int | None) -> int:
        return await self._metered(
            f"{RECORD}#{key}",
            lambda: self._inner.put_record(namespace, key, body, expected=expected),
            write=True)

    def key_attributes(self, shard_key: str, sort: str, item_id: str) -> dict[str, Any]:
        """The inner store's key attributes (GSI mode); not a request, so not counted."""
        return self._inner.key_attributes(shard_key, sort, item_id)

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

        def meter(tally: _Tally, live: list[float] | None) -> KeyMeter:
            peak, peak_read, peak_write = tally.peak, tally.peak_read, tally.peak_write
            if live is not None:
                peak = max(peak, live[_RU] + live[_WU])
                peak_read = max(peak_read, live[_RU])
                peak_write = max(peak_write, live[_WU])
            hist = tally.latency
            p50, p99 = hist.quantile(0.5), hist.quantile(0.99)
            return KeyMeter(
                requests=tally.requests, reads=tally.reads, writes=tally.writes,
                read_units=tally.read_units, write_units=tally.write_units,
                read_throttles=tally.read_throttles, write_throttles=tally.write_throttles,
                peak_units_per_s=peak * per_s, peak_read_units_per_s=peak_read * per_s,
                peak_write_units_per_s=peak_write * per_s,
                latency_p50_ms=None if p50 is None else 1000.0 * p50,
                latency_p99_ms=None if p99 is None else 1000.0 * p99,
                latency_max_ms=1000.0 * hist.high if hist.count else None)

        def level(table: _Table, live: Mapping[str, list[float]]) -> dict[str, KeyMeter]:
            return {key: meter(t, live.get(key)) for key, t in table.tallies.items()}

        live_shards = open_window.shard_keys if open_window is not None else {}
        live_values = open_window.values if open_window is not None else {}
        other = self._values.other or self._shards.other
        timeline: dict[str, list[tuple[float, float]]] = {}
        for w in ring:
            start = w.index * self._window
            for value, slots in w.values.items():
                timeline.setdefault(value, []).append((start, (slots[_RU] + slots[_WU]) * per_s))
        return HeatSnapshot(
            at=now, window=self._window, windows=[w.index * self._window for w in ring],
            shard_keys=level(self._shards, live_shards),
            values=level(self._values, live_values),
            reserved={k: meter(t, None) for k, t in sorted(self._reserved.items())},
            totals=meter(self._totals, open_window.total if open_window is not None else None),
            other=None if other is None else meter(other, live_values.get(OTHER)),
            overflow=self._values.overflow.top(20), timeline=timeline,
            shard_values={k: t.value for k, t in self._shards.tallies.items()})

    def hot(self, top: int = 10, *, ceiling: str | float | Ceiling = "dynamodb") -> HotView:
        """Return the ``top`` logical keys by peak units a second, against ``ceiling``."""
        return self.snapshot().hot(top, ceiling=ceiling)
