"""The embedded simulated partitioned store, ``memory://``: DynamoDB's ceilings on virtual time.

Entries, placements and records live in process. Every request waits a sampled latency
on the store's clock, then applies atomically at that instant: capacity is checked
against per-partition token buckets (``shardex.sim.capacity``), conditions are
checked, and the store changes or raises. Under ``run_virtual`` hours of traffic pass
in seconds, and the counters and per-second timelines show where it throttled.
"""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Hashable, Mapping
from typing import Any
from urllib.parse import urlencode

from shardex.errors import ConditionFailed, InvalidInput, InvalidURI, Throttled, Unavailable
from shardex.hashing import h64, jump_hash
from shardex.sim.capacity import (
    QUERY_PAGE_BYTES,
    PartitionCapacity,
    PartitionLimits,
    TokenBucket,
    entry_bytes,
    number_bytes,
    read_units,
    utf8_len,
    value_bytes,
    write_units,
)
from shardex.sim.clock import Clock, LoopClock
from shardex.sim.latency import LatencyModel
from shardex.stores.base import (
    Capabilities,
    Placement,
    Position,
    QueryPage,
    Record,
    Store,
    StoredEntry,
    check_place,
)
from shardex.stores.positions import SortedPositions
from shardex.stores.stats import (
    AMBIGUOUS,
    RREQ,
    RT,
    RU,
    UNAVAILABLE,
    WREQ,
    WT,
    WU,
    KeyStats,
    StoreStats,
    is_reserved,
    key_stats,
)
from shardex.stores.uri import StoreURI

__all__ = ["KeyStats", "MemoryStore", "PLACEMENT_PREFIX", "RECORD_PREFIX", "StoreStats",
           "is_reserved"]

PLACEMENT_PREFIX = "#placement#"
RECORD_PREFIX = "#record#"
_MAX_PAGE = 1000
_PROBABILITY = (0.0, 1.0, "a probability from 0 to 1")
# option -> (type, default, lowest, highest, what a valid value is)
_OPTIONS: dict[str, tuple[type, Any, float, float, str]] = {
    "partitions": (int, 0, 0, math.inf, "an integer >= 0"),
    "write_ceiling": (float, 1000.0, 1e-9, math.inf, "> 0 units/s"),
    "read_ceiling": (float, 3000.0, 1e-9, math.inf, "> 0 units/s"),
    "burst_seconds": (float, 300.0, 1.0, math.inf, ">= 1 second"),
    "initial_burst_seconds": (float, 1.0, 0.0, math.inf, ">= 0 seconds"),
    "transaction_cost": (float, 2.0, 1.0, math.inf, ">= 1"),
    "consistent": (bool, True, 0, 1, "true or false"),
    "latency_median_ms": (float, 4.0, 1e-9, math.inf, "> 0 ms"),
    "latency_p99_ms": (float, 25.0, 1e-9, math.inf, "> 0 ms"),
    "latency_per_kb_ms": (float, 0.01, 0.0, math.inf, ">= 0 ms"),
    "max_page_bytes": (int, QUERY_PAGE_BYTES, 1, math.inf, "an integer >= 1"),
    "throttle_rate": (float, 0.0, *_PROBABILITY),
    "unavailable_rate": (float, 0.0, *_PROBABILITY),
    "ambiguous_rate": (float, 0.0, *_PROBABILITY),
    "seed": (int, None, -math.inf, math.inf, "an integer or None"),
}
def _check_option(name: str, value: Any) -> Any:
    """Return ``value`` if it suits the option ``name``; raise InvalidInput naming it."""
    kind, _, low, high, what = _OPTIONS[name]
    if name == "seed" and value is None:
        return value
    if kind is bool:
        ok = isinstance(value, bool)
    else:
        ok = not isinstance(value, bool) and isinstance(value, int if kind is int else int | float)
        ok = ok and low <= value <= high and math.isfinite(value)
    if not ok:
        raise InvalidInput(f"memory:// option {name} must be {what}, got {value!r}")
    return value


class _KeyState:
    """One key of one namespace: its entries in order, its partition, its counters.

    The counter lists and timelines are shared with the store's stats tables, so a
    request updates them without a lookup; for a store without fixed partitions the
    key's partition counters are the very same list as its own.
    """

    __slots__ = ("buckets", "counts", "entries", "nbytes", "pcounts", "pname", "positions",
                 "sizes", "throttles", "timeline")

    def __init__(self, buckets: PartitionCapacity, pname: str, counts: list[float],
                 pcounts: list[float], timeline: dict[int, float],
                 throttles: dict[int, float]) -> None:
        self.buckets = buckets
        self.pname = pname
        self.counts = counts
        self.pcounts = pcounts
        self.timeline = timeline
        self.throttles = throttles
        self.positions = SortedPositions()
        self.entries: dict[Position, StoredEntry] = {}
        self.sizes: dict[Position, int] = {}
        self.nbytes = 0


class _Item(TokenBucket):
    """One item of one namespace: its placement and the placement's size.

    The item is itself the write bucket of its placement key's partition when every
    key is its own partition (unused otherwise), and keeps that partition's read bucket
    once it is read: with one placement key per item, one object per item matters.
    """

    __slots__ = ("placement", "read", "size")

    def __init__(self, rate: float, capacity: float, tokens: float, updated: float) -> None:
        super().__init__(rate, capacity, tokens, updated)
        self.placement: Placement | None = None
        self.size = 0
        self.read: TokenBucket | None = None


class MemoryStore(Store):
    """The embedded simulated partitioned store: ceilings, burst, throttling and latency.

    Options (keyword arguments, or ``memory://?name=value``; keywords win):

    =====================  ========  =======================================================
    option                 default   meaning
    =====================  ========  =======================================================
    partitions             0         physical partitions; 0: every partition key is its
                                     own (a table split for heat); P > 0: a key goes to
                                     ``jump_hash(h64(namespace + NUL + key), P)``, so
                                     keys may share one (a young table)
    write_ceiling          1000.0    write units/s per physical partition
    read_ceiling           3000.0    read units/s per physical partition
    burst_seconds          300.0     seconds of unused capacity kept as burst (>= 1)
    initial_burst_seconds  1.0       seconds of capacity a new partition starts with
    transaction_cost       2.0       unit multiplier of ``place`` (a transaction)
    consistent             true      strongly consistent queries (false: half the units)
    latency_median_ms      4.0       median request latency, ms
    latency_p99_ms         25.0      99th-percentile request latency, ms
    latency_per_kb_ms      0.01      transfer time, ms per KB moved
    max_page_bytes         1048576   bytes one query page reads at most (1 MB)
    throttle_rate          0.0       probability a request is throttled anyway
                                     (``Throttled.reason == "injected"``)
    unavailable_rate       0.0       probability a request fails with Unavailable
                                     before it applies
    ambiguous_rate         0.0       probability a write applies, then raises
                                     Unavailable anyway (an ambiguous timeout)
    seed                   None      seeds the one RNG of latency and faults
    =====================  ========  =======================================================

    ``clock`` (keyword only) is where the store reads time and sleeps: ``LoopClock()``
    by default, virtual under ``run_virtual``. A bad option raises InvalidInput naming
    it (InvalidURI when it came from the URI).

    The store keeps the StoredEntry objects it is given: do not mutate their ``attrs``.
    Placements live on their own partition key ``#placement#<item id>``, records on
    ``#record#<key>``; both count against capacity like any other key.
    """

    scheme = "memory"

    def __init__(self, *, partitions: int = 0, write_ceiling: float = 1000.0,
                 read_ceiling: float = 3000.0, burst_seconds: float = 300.0,
                 initial_burst_seconds: float = 1.0, transaction_cost: float = 2.0,
                 consistent: bool = True, latency_median_ms: float = 4.0,
                 latency_p99_ms: float = 25.0, latency_per_kb_ms: float = 0.01,
                 max_page_bytes: int = QUERY_PAGE_BYTES, throttle_rate: float = 0.0,
                 unavailable_rate: float = 0.0, ambiguous_rate: float = 0.0,
                 seed: int | None = None, clock: Clock | None = None) -> None:
        super().__init__()
        given = locals()
        self._settings = {name: _check_option(name, given[name]) for name in _OPTIONS}
        self._limits = PartitionLimits(float(write_ceiling), float(read_ceiling),
                                       float(burst_seconds), float(initial_burst_seconds))
        try:
            self._latency = LatencyModel(latency_median_ms, latency_p99_ms, latency_per_kb_ms)
        except InvalidInput as exc:
            raise InvalidInput(f"memory:// options latency_*_ms: {exc}") from exc
        self._partitions = partitions
        self._partition_names = [f"p{i}" for i in range(partitions)]
        self._cost = float(transaction_cost)
        self._consistent = consistent
        self._max_page_bytes = max_page_bytes
        self._throttle_rate = float(throttle_rate)
        self._unavailable_rate = float(unavailable_rate)
        self._ambiguous_rate = float(ambiguous_rate)
        self._faulty = bool(throttle_rate or unavailable_rate)
        self._rng = random.Random(seed)
        self._clock: Clock = clock if clock is not None else LoopClock()
        self.capabilities = Capabilities(atomic_place=True, consistent_reads=consistent,
                                         max_page=_MAX_PAGE)
        self._states: dict[tuple[str, str], _KeyState] = {}
        self._items: dict[str, dict[str, _Item]] = {}
        self._records: dict[tuple[str, str], tuple[Record, int]] = {}
        self._buckets: dict[Hashable, PartitionCapacity] = {}
        self._by_key: dict[tuple[str, str], list[float]] = {}
        self._by_partition: dict[tuple[str, str], list[float]] = {}
        self._timeline: dict[tuple[str, str], dict[int, float]] = {}
        self._throttle_timeline: dict[tuple[str, str], dict[int, float]] = {}
        self._totals: dict[str, list[float]] = {}
        self._first: float | None = None
        self._last = 0.0

    @classmethod
    def from_uri(cls, uri: StoreURI, **options: Any) -> MemoryStore:
        """Build the store from ``memory://?option=value``; keyword ``options`` override."""
        unknown = sorted(set(options) - set(_OPTIONS) - {"clock"})
        if unknown:
            raise InvalidInput(f"memory:// does not know the option(s) {', '.join(unknown)}; "
                               f"known: clock, {', '.join(sorted(_OPTIONS))}")
        if uri.location or uri.path:
            raise InvalidURI(f"memory:// takes options only, no location or path: {uri.raw!r}")
        from_uri = uri.take({name: spec[0] for name, spec in _OPTIONS.items()})
        for name, value in options.items():
            if name != "clock":
                _check_option(name, value)
        try:
            for name, value in from_uri.items():
                if name not in options:
                    _check_option(name, value)
            return cls(**{**from_uri, **options})
        except InvalidInput as exc:
            if not from_uri:
                raise
            # a URI option out of range, or URI options that do not fit together
            raise InvalidURI(f"{uri.raw or 'memory://'}: {exc}") from exc

    @property
    def uri(self) -> str:
        """``memory://`` with the options that differ from their defaults."""
        changed = sorted((name, str(value).lower() if isinstance(value, bool) else str(value))
                         for name, value in self._settings.items()
                         if value != _OPTIONS[name][1])
        return "memory://" + (f"?{urlencode(changed)}" if changed else "")

    # -- partitions and counters ----------------------------------------------------

    def partition_of(self, namespace: str, key: str) -> str:
        """Return the name of the physical partition that holds ``key`` of ``namespace``."""
        return self._partition(namespace, key)[1]

    def _partition(self, namespace: str, key: str) -> tuple[Hashable, str]:
        if not self._partitions:
            return (namespace, key), key
        pid = jump_hash(h64(f"{namespace}\x00{key}"), self._partitions)
        return pid, self._partition_names[pid]

    def _partition_buckets(self, pid: Hashable, now: float) -> PartitionCapacity:
        buckets = self._buckets.get(pid)
        if buckets is None:
            buckets = self._buckets[pid] = self._limits.new_partition(now)
        return buckets

    def _counts(self, table: dict[tuple[str, str], list[float]], namespace: str,
                name: str) -> list[float]:
        counts = table.get((namespace, name))
        if counts is None:
            counts = table[(namespace, name)] = [0, 0, 0.0, 0.0, 0, 0]
            if table is self._by_key and not self._partitions:
                self._by_partition[(namespace, name)] = counts
        return counts

    def _state(self, namespace: str, key: str, now: float) -> _KeyState:
        """Return the state of ``key``; all placement keys share the state of the prefix."""
        state = self._states.get((namespace, key))
        if state is None:
            placements = key == PLACEMENT_PREFIX
            pid, pname = self._partition(namespace, key)
            counts = self._counts(self._by_key, namespace, key)
            state = self._states[(namespace, key)] = _KeyState(
                self._partition_buckets(pid, now), pname, counts,
                counts if not self._partitions or placements
                else self._counts(self._by_partition, namespace, pname),
                self._timeline.setdefault((namespace, key), {}),
                self._throttle_timeline.setdefault((namespace, key), {}))
        return state

    def _item(self, namespace: str, item_id: str, now: float) -> _Item:
        items = self._items.get(namespace)
        if items is None:
            items = self._items[namespace] = {}
        item = items.get(item_id)
        if item is None:
            write = self._limits.write_bucket(now)
            item = items[item_id] = _Item(write.rate, write.capacity, write.tokens, now)
        return item

    def _meter(self, namespace: str, key: str, now: float) -> tuple[_KeyState, list[float]]:
        """The state that counts ``key`` (one for all placement keys); its partition counters."""
        if not key.startswith(PLACEMENT_PREFIX):
            state = self._state(namespace, key, now)
            return state, state.pcounts
        state = self._state(namespace, PLACEMENT_PREFIX, now)
        if not self._partitions:
            return state, state.counts
        return state, self._counts(self._by_partition, namespace, self.partition_of(namespace, key))

    def _placement_bucket(self, namespace: str, item_id: str, item: _Item, now: float, *,
                          write: bool) -> TokenBucket:
        """The write or read bucket of the partition of the item's placement key."""
        if self._partitions:
            buckets = self._partition_buckets(
                self._partition(namespace, PLACEMENT_PREFIX + item_id)[0], now)
            return buckets.write if write else buckets.read
        if write:
            return item
        if item.read is None:
            item.read = self._limits.read_bucket(now)
        return item.read

    def _count(self, state: _KeyState, pcounts: list[float], now: float, slot: int,
               amount: float) -> None:
        """Count one request on a key and its partition, adding ``amount`` to ``slot``."""
        request = RREQ if slot in (RU, RT) else WREQ
        counts = state.counts
        counts[request] += 1
        counts[slot] += amount
        if pcounts is not counts:
            pcounts[request] += 1
            pcounts[slot] += amount
        if request == WREQ and amount:
            line = state.timeline if slot == WU else state.throttles
            if self._first is None:
                self._first = now
            second = int(now - self._first)
            line[second] = line.get(second, 0.0) + amount

    def _total(self, namespace: str, slot: int, amount: float = 1.0) -> None:
        totals = self._totals.get(namespace)
        if totals is None:
            totals = self._totals[namespace] = [0, 0, 0.0, 0.0, 0, 0, 0, 0]
        if slot < UNAVAILABLE:
            totals[RREQ if slot in (RU, RT) else WREQ] += 1
        totals[slot] += amount

    def reset_stats(self) -> None:
        """Zero every counter and timeline; seconds count again from the next request."""
        for table in (self._by_key, self._by_partition, self._totals):
            for counts in table.values():
                counts[:] = [0] * len(counts)
        for lines in (self._timeline, self._throttle_timeline):
            for line in lines.values():
                line.clear()
        self._first = None

    def stats(self, namespace: str | None = None) -> StoreStats:
        """Return a snapshot of the counters of ``namespace`` (an index), or of all summed."""
        def pick(table: dict[tuple[str, str], list[float]]) -> dict[str, KeyStats]:
            out: dict[str, KeyStats] = {}
            for (ns, name), counts in table.items():
                if (counts[RREQ] or counts[WREQ]) and (namespace is None or ns == namespace):
                    out[name] = out[name] + key_stats(counts) if name in out else (
                        key_stats(counts))
            return out

        def lines(table: dict[tuple[str, str], dict[int, float]]) -> dict[str, dict[int, float]]:
            out: dict[str, dict[int, float]] = {}
            for (ns, name), line in table.items():
                if line and (namespace is None or ns == namespace):
                    merged = out.setdefault(name, {})
                    for second, amount in line.items():
                        merged[second] = merged.get(second, 0.0) + amount
            return out

        totals = [0.0] * 8
        for ns, counts in self._totals.items():
            if namespace is None or ns == namespace:
                totals = [a + b for a, b in zip(totals, counts, strict=True)]
        return StoreStats(
            by_key=pick(self._by_key), by_partition=pick(self._by_partition),
            timeline=lines(self._timeline), throttle_timeline=lines(self._throttle_timeline),
            totals=key_stats(totals), unavailable=int(totals[UNAVAILABLE]),
            ambiguous=int(totals[AMBIGUOUS]),
            elapsed=0.0 if self._first is None else max(0.0, self._last - self._first))

    def shard_keys(self, namespace: str) -> list[str]:
        """Return the shard keys of ``namespace`` that hold entries, sorted."""
        return sorted(key for (ns, key), state in self._states.items()
                      if ns == namespace and state.entries)

    # -- the request cycle ----------------------------------------------------------

    async def _arrive(self, nbytes: int) -> float:
        """Wait one sampled latency; return the instant the request applies at."""
        clock = self._clock
        if self._first is None:
            self._first = clock.now()
        await clock.sleep(self._latency.sample(self._rng, nbytes))
        now = self._last = clock.now()
        return now

    def _inject(self, namespace: str, key: str, now: float, *, write: bool) -> None:
        """Raise the injected Unavailable or Throttled, each with its probability."""
        if self._unavailable_rate and self._rng.random() < self._unavailable_rate:
            self._total(namespace, UNAVAILABLE)
            raise Unavailable(f"{key}: the store did not answer (injected); not applied")
        if self._throttle_rate and self._rng.random() < self._throttle_rate:
            slot = WT if write else RT
            self._count(*self._meter(namespace, key, now), now, slot, 1)
            self._total(namespace, slot)
            raise Throttled(f"{self._where(namespace, key)} throttled (injected fault)",
                            key=key, reason="injected")

    def _ambiguous(self, namespace: str, key: str) -> None:
        if self._ambiguous_rate and self._rng.random() < self._ambiguous_rate:
            self._total(namespace, AMBIGUOUS)
            raise Unavailable(f"{key}: the request timed out (injected); "
                              "the write may have been applied")

    def _where(self, namespace: str, key: str) -> str:
        return f"{key} (partition {self.partition_of(namespace, key)})"

    def _throttled(self, namespace: str, key: str, write: bool) -> Throttled:
        self._total(namespace, WT if write else RT)
        kind, ceiling = (("write", self._limits.write_ceiling) if write
                         else ("read", self._limits.read_ceiling))
        return Throttled(f"{self._where(namespace, key)} throttled: {kind} capacity "
                         f"{ceiling:g} units/s exceeded", key=key,
                         reason=f"{kind} capacity exceeded")

    def _take(self, namespace: str, key: str, units: float, now: float, *, write: bool) -> None:
        """Take ``units`` from the partition of ``key`` (not a placement key), or raise."""
        state = self._state(namespace, key, now)
        buckets = state.buckets
        if not (buckets.write if write else buckets.read).try_take(units, now):
            self._count(state, state.pcounts, now, WT if write else RT, 1)
            raise self._throttled(namespace, key, write)
        self._count(state, state.pcounts, now, WU if write else RU, units)
        self._total(namespace, WU if write else RU, units)

    # -- entries --------------------------------------------------------------------

    async def locate(self, namespace: str, item_id: str) -> Placement | None:
        """Return the item's placement (a strongly consistent read of its placement key)."""
        now = await self._arrive(0)
        key = PLACEMENT_PREFIX + item_id
        if self._faulty:
            self._inject(namespace, key, now, write=False)
        item = self._item(namespace, item_id, now)
        units = read_units(item.size, True)
        state, pcounts = self._meter(namespace, key, now)
        if not self._placement_bucket(namespace, item_id, item, now, write=False).try_take(
                units, now):
            self._count(state, pcounts, now, RT, 1)
            raise self._throttled(namespace, key, False)
        self._count(state, pcounts, now, RU, units)
        self._total(namespace, RU, units)
        return item.placement

    async def place(self, namespace: str, item_id: str, entry: StoredEntry | None, *,
                    version: int, expected: int | None) -> float:
        """Move the item's entry to ``entry`` in one transaction; return the write units.

        Raises Throttled (nothing taken, nothing changed) when a partition touched lacks
        write units for its share times ``transaction_cost``; ConditionFailed when the
        placement version is not ``expected`` (the placement's units are consumed);
        InvalidInput unless ``version > (expected or 0)``.
        """
        check_place(item_id, entry, version, expected)
        size = entry_bytes(entry) if entry is not None else 0
        now = await self._arrive(size)
        pkey = PLACEMENT_PREFIX + item_id
        if self._faulty:
            self._inject(namespace, entry.shard_key if entry else pkey, now, write=True)
        cost = self._cost
        item = self._item(namespace, item_id, now)
        current = item.placement
        new_psize = _placement_bytes(item_id, version, entry)
        pstate, pcounts = self._meter(namespace, pkey, now)
        pbucket = self._placement_bucket(namespace, item_id, item, now, write=True)
        punits = write_units(max(item.size, new_psize)) * cost
        # (state, partition counters, write bucket, units, key) of every partition key touched
        touched = [(pstate, pcounts, pbucket, punits, pkey)]
        old = current.entry if current is not None else None
        same_key = old is not None and entry is not None and old.shard_key == entry.shard_key
        old_state = new_state = None
        old_size = 0
        if old is not None:
            old_state = self._state(namespace, old.shard_key, now)
            old_size = old_state.sizes[old.position]
            if not same_key:
                touched.append((old_state, old_state.pcounts, old_state.buckets.write,
                                write_units(old_size) * cost, old.shard_key))
        if entry is not None:
            if old is not None and old_state is not None and same_key:
                # one key, one request: a delete and a put, or one overwrite of the row
                new_state = old_state
                units = (write_units(max(size, old_size)) if old.position == entry.position
                         else write_units(old_size) + write_units(size)) * cost
            else:
                new_state = self._state(namespace, entry.shard_key, now)
                units = write_units(size) * cost
            touched.append((new_state, new_state.pcounts, new_state.buckets.write, units,
                            entry.shard_key))

        for state, counts, bucket, units, key in touched:
            # keys on one partition (partitions=P) must fit its bucket together
            if not bucket.has(sum(t[3] for t in touched if t[2] is bucket)
                              if self._partitions else units, now):
                for other in touched:
                    if other[4] != key:
                        self._count(other[0], other[1], now, WU, 0.0)
                self._count(state, counts, now, WT, 1)
                raise self._throttled(namespace, key, True)

        found = current.version if current is not None else None
        if found != expected:
            pbucket.take(punits, now)
            self._count(pstate, pcounts, now, WU, punits)
            self._total(namespace, WU, punits)
            never = "never placed"
            raise ConditionFailed(
                f"place of item {item_id!r} in {namespace!r} expected version "
                f"{never if expected is None else expected}, found "
                f"{never if found is None else found}")

        total = 0.0
        for state, counts, bucket, units, _ in touched:
            bucket.take(units, now)
            self._count(state, counts, now, WU, units)
            total += units
        self._total(namespace, WU, total)
        if old is not None and old_state is not None:
            pos = old.position
            del old_state.entries[pos]
            old_state.nbytes -= old_state.sizes.pop(pos)
            old_state.positions.remove(pos)
        if entry is not None and new_state is not None:
            pos = entry.position
            new_state.positions.add(pos)
            new_state.entries[pos] = entry
            new_state.sizes[pos] = size
            new_state.nbytes += size
        item.placement = Placement(item_id, version, entry)
        item.size = new_psize
        if self._ambiguous_rate:
            self._ambiguous(namespace, entry.shard_key if entry else pkey)
        return total

    async def query(self, namespace: str, shard_key: str, *, after: Position | None,
                    descending: bool, limit: int) -> QueryPage:
        """Return one page of ``shard_key`` strictly beyond ``after``; see ``Store.query``.

        A page holds at most ``min(limit, 1000)`` entries and ``max_page_bytes`` bytes
        (at least one entry if any remain). Read units are charged over the bytes read;
        the latency is one sample before the read plus the transfer time after it.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidInput(f"query limit must be an integer >= 1, got {limit!r}")
        if after is not None and not (isinstance(after, tuple) and len(after) == 2
                                      and all(isinstance(part, str) for part in after)):
            raise InvalidInput(f"query after must be a (sort, item_id) pair or None, "
                               f"got {after!r}")
        if is_reserved(shard_key):
            raise InvalidInput(f"shard key {shard_key!r} is reserved: it starts with '#'")
        now = await self._arrive(0)
        if self._faulty:
            self._inject(namespace, shard_key, now, write=False)
        entries: list[StoredEntry] = []
        nbytes = 0
        resume: Position | None = None
        state = self._state(namespace, shard_key, now)
        most, max_bytes, sizes = min(limit, _MAX_PAGE), self._max_page_bytes, state.sizes
        last: Position | None = None
        for pos in state.positions.beyond(after, descending):
            size = sizes[pos]
            if len(entries) == most or (entries and nbytes + size > max_bytes):
                resume = last
                break
            entries.append(state.entries[pos])
            nbytes += size
            last = pos
        units = read_units(nbytes, self._consistent)
        self._take(namespace, shard_key, units, now, write=False)
        await self._clock.sleep(self._latency.transfer(nbytes))
        return QueryPage(entries, resume, units)

    async def count(self, namespace: str, shard_key: str) -> int:
        """Return how many entries ``shard_key`` holds.

        Charged as a Select=COUNT query that reads every entry, one request per
        ``max_page_bytes`` page; any page may throttle. The count is taken at the
        last page's instant.
        """
        if is_reserved(shard_key):
            raise InvalidInput(f"shard key {shard_key!r} is reserved: it starts with '#'")
        remaining: int | None = None
        while True:
            now = await self._arrive(0)
            if self._faulty:
                self._inject(namespace, shard_key, now, write=False)
            state = self._state(namespace, shard_key, now)
            if remaining is None:
                remaining = state.nbytes
            page = min(remaining, self._max_page_bytes)
            self._take(namespace, shard_key, read_units(page, self._consistent), now,
                       write=False)
            remaining -= page
            if remaining <= 0:
                return len(state.entries)

    # -- records ----------------------------------------------------------------------

    async def get_record(self, namespace: str, key: str) -> Record | None:
        """Return a copy of the record ``key`` (a strongly consistent read), or None."""
        now = await self._arrive(0)
        rkey = RECORD_PREFIX + key
        if self._faulty:
            self._inject(namespace, rkey, now, write=False)
        current = self._records.get((namespace, key))
        self._take(namespace, rkey, read_units(current[1] if current else 0, True), now,
                   write=False)
        if current is None:
            return None
        return Record(copy.deepcopy(dict(current[0].body)), current[0].revision)

    async def put_record(self, namespace: str, key: str, body: Mapping[str, Any], *,
                         expected: int | None) -> int:
        """Write the record if its revision is ``expected``; return ``(expected or 0) + 1``.

        Raises ConditionFailed (the units are still consumed) when the revision differs.
        """
        if expected is not None and (isinstance(expected, bool) or not isinstance(expected, int)
                                     or expected < 1):
            raise InvalidInput(f"expected revision must be an integer >= 1 or None, "
                               f"got {expected!r}")
        rkey = RECORD_PREFIX + key
        revision = (expected or 0) + 1
        stored = copy.deepcopy(dict(body))
        size = 2 + utf8_len(rkey) + 1 + number_bytes(revision) + 4 + value_bytes(stored)
        now = await self._arrive(size)
        if self._faulty:
            self._inject(namespace, rkey, now, write=True)
        current = self._records.get((namespace, key))
        self._take(namespace, rkey, float(write_units(max(size, current[1] if current else 0))),
                   now, write=True)
        found = current[0].revision if current is not None else None
        if found != expected:
            raise ConditionFailed(
                f"record {key!r} of {namespace!r} expected revision "
                f"{'absent' if expected is None else expected}, found "
                f"{'absent' if found is None else found}")
        self._records[(namespace, key)] = (Record(stored, revision), size)
        if self._ambiguous_rate:
            self._ambiguous(namespace, rkey)
        return revision


def _placement_bytes(item_id: str, version: int, entry: StoredEntry | None) -> int:
    """Size of a placement record: ``pk``, ``v``, and the entry's shard key and sort."""
    size = 2 + len(PLACEMENT_PREFIX) + utf8_len(item_id) + 1 + number_bytes(version)
    if entry is not None:
        size += 2 + utf8_len(entry.shard_key) + 2 + utf8_len(entry.sort)
    return size
