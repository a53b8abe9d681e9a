"""``MemoryStore``: the request cycle of the simulated store.

Every request waits a sampled latency on the store's clock, then applies atomically at
that instant: injected faults are drawn, capacity is taken from per-partition token
buckets (``shardex.sim.buckets``), conditions are checked, and the store changes or
raises. What each request consumed is reported on the ``Recorder`` the public method
hands in, exactly per key and with its partition, so ``stats()`` and the heat meter see
where it throttled.
"""

from __future__ import annotations

import asyncio
import copy
import random
from collections.abc import Mapping
from contextlib import suppress
from typing import Any

from shardex.capacity import (
    entry_bytes,
    number_bytes,
    read_units,
    utf8_len,
    value_bytes,
    write_units,
)
from shardex.clock import Clock
from shardex.errors import ConditionFailed, InvalidInput, Throttled, Unavailable
from shardex.keys import placement_key, record_key
from shardex.sim.buckets import PartitionLimits, TokenBucket
from shardex.sim.latency import LatencyModel
from shardex.stores.base import (
    Capabilities,
    Placement,
    Position,
    Record,
    Store,
    StoredEntry,
    history_after,
)
from shardex.stores.memory.options import OPTIONS, check_option, memory_uri, options_from_uri
from shardex.stores.memory.state import (
    AppliedWrite,
    Item,
    KeyState,
    Partitions,
    describe,
    placement_bytes,
    same_placement,
)
from shardex.stores.metered import Recorder
from shardex.stores.uri import StoreURI

__all__ = ["MemoryStore"]

_MAX_PAGE = 1000


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
    ``#record#<key>``; both count against capacity like any other key. A failed
    condition still consumes the units of what it read (the placement, the record).
    """

    scheme = "memory"

    def __init__(self, *, partitions: int = 0, write_ceiling: float = 1000.0,
                 read_ceiling: float = 3000.0, burst_seconds: float = 300.0,
                 initial_burst_seconds: float = 1.0, transaction_cost: float = 2.0,
                 consistent: bool = True, latency_median_ms: float = 4.0,
                 latency_p99_ms: float = 25.0, latency_per_kb_ms: float = 0.01,
                 max_page_bytes: int = 1_048_576, throttle_rate: float = 0.0,
                 unavailable_rate: float = 0.0, ambiguous_rate: float = 0.0,
                 seed: int | None = None, clock: Clock | None = None) -> None:
        given = locals()
        self._settings = {name: check_option(name, given[name]) for name in OPTIONS}
        super().__init__(capabilities=Capabilities(consistent_reads=consistent,
                                                   max_page=_MAX_PAGE), clock=clock)
        limits = PartitionLimits(float(write_ceiling), float(read_ceiling),
                                 float(burst_seconds), float(initial_burst_seconds))
        try:
            self._latency = LatencyModel(latency_median_ms, latency_p99_ms, latency_per_kb_ms)
        except InvalidInput as exc:
            raise InvalidInput(f"memory:// options latency_*_ms: {exc}") from exc
        self._limits = limits
        self._partitions = Partitions(partitions, limits)
        self._cost = float(transaction_cost)
        self._consistent = consistent
        self._max_page_bytes = max_page_bytes
        self._throttle_rate = float(throttle_rate)
        self._unavailable_rate = float(unavailable_rate)
        self._ambiguous_rate = float(ambiguous_rate)
        self._faulty = bool(throttle_rate or unavailable_rate)
        self._rng = random.Random(seed)
        self._states: dict[tuple[str, str], KeyState] = {}
        self._items: dict[str, dict[str, Item]] = {}
        self._records: dict[tuple[str, str], tuple[Record, int]] = {}
        self._applied: list[AppliedWrite] | None = None

    @classmethod
    def from_uri(cls, uri: StoreURI, **options: Any) -> MemoryStore:
        """Build the store from ``memory://?option=value``; keyword ``options`` override."""
        store: MemoryStore = options_from_uri(uri, options, cls)
        return store

    @property
    def uri(self) -> str:
        """``memory://`` with the options that differ from their defaults."""
        return memory_uri(self._settings)

    def watch_applied(self) -> list[AppliedWrite]:
        """Log every place that applies from now on, and return the log (for tests).

        Each ``AppliedWrite`` names the write's token, so a test can check every
        reported outcome against what really applied, ambiguous failures included.
        """
        if self._applied is None:
            self._applied = []
        return self._applied

    def partition_of(self, namespace: str, key: str) -> str:
        """Return the name of the physical partition that holds ``key`` of ``namespace``."""
        return self._partitions.of(namespace, key)[1]

    def shard_keys(self, namespace: str) -> list[str]:
        """Return the shard keys of ``namespace`` that hold entries, sorted."""
        return sorted(key for (ns, key), state in self._states.items()
                      if ns == namespace and state.entries)

    # -- the request cycle ----------------------------------------------------------

    def _state(self, namespace: str, key: str, now: float) -> KeyState:
        state = self._states.get((namespace, key))
        if state is None:
            pid, pname = self._partitions.of(namespace, key)
            state = self._states[(namespace, key)] = KeyState(
                self._partitions.buckets(pid, now), pname if self._partitions.count else None)
        return state

    def _item(self, namespace: str, item_id: str, now: float) -> Item:
        items = self._items.get(namespace)
        if items is None:
            items = self._items[namespace] = {}
        item = items.get(item_id)
        if item is None:
            write = self._limits.write_bucket(now)
            item = items[item_id] = Item(write.rate, write.capacity, write.tokens, now)
        return item

    async def _arrive(self, rec: Recorder, nbytes: int) -> float:
        """Send a request: wait one sampled latency; return the instant it applies at."""
        rec.request()
        clock = self.clock
        await clock.sleep(self._latency.sample(self._rng, nbytes))
        return clock.now()

    def _inject(self, rec: Recorder, namespace: str, key: str, *, write: bool) -> None:
        """Raise the injected Unavailable or Throttled, each with its probability."""
        if self._unavailable_rate and self._rng.random() < self._unavailable_rate:
            raise Unavailable(f"{key}: the store did not answer (injected); not applied")
        if self._throttle_rate and self._rng.random() < self._throttle_rate:
            rec.charge(key, 0.0, self._partitions.counted_as(namespace, key))
            raise Throttled(f"{self._where(namespace, key)} throttled (injected fault)",
                            key=key, reason="injected")

    def _ambiguous(self, key: str) -> None:
        if self._ambiguous_rate and self._rng.random() < self._ambiguous_rate:
            raise Unavailable(f"{key}: the request timed out (injected); "
                              "the write may have been applied")

    def _where(self, namespace: str, key: str) -> str:
        return f"{key} (partition {self.partition_of(namespace, key)})"

    def _throttled(self, namespace: str, key: str, write: bool) -> Throttled:
        kind, ceiling = (("write", self._limits.write_ceiling) if write
                         else ("read", self._limits.read_ceiling))
        return Throttled(f"{self._where(namespace, key)} throttled: {kind} capacity "
                         f"{ceiling:g} units/s exceeded", key=key,
                         reason=f"{kind} capacity exceeded")

    def _take(self, rec: Recorder, namespace: str, key: str, units: float, now: float, *,
              write: bool) -> None:
        """Take ``units`` from the partition of ``key`` (not a placement key), or raise."""
        state = self._state(namespace, key, now)
        buckets = state.buckets
        if not (buckets.write if write else buckets.read).try_take(units, now):
            rec.charge(key, 0.0, state.partition)
            raise self._throttled(namespace, key, write)
        rec.charge(key, units, state.partition)

    # -- entries --------------------------------------------------------------------

    async def _locate(self, namespace: str, item_id: str, rec: Recorder) -> Placement | None:
        """A strongly consistent read of the item's placement key."""
        now = await self._arrive(rec, 0)
        key = placement_key(item_id)
        if self._faulty:
            self._inject(rec, namespace, key, write=False)
        item = self._item(namespace, item_id, now)
        units = read_units(item.size, True)
        partition = self._partitions.counted_as(namespace, key)
        bucket = self._partitions.placement_bucket(namespace, item_id, item, now, write=False)
        if not bucket.try_take(units, now):
            rec.charge(key, 0.0, partition)
            raise self._throttled(namespace, key, False)
        rec.charge(key, units, partition)
        return item.placement

    async def _place(self, namespace: str, item_id: str, entry: StoredEntry | None,
                     version: int, expected: Placement | None, token: str,
                     rec: Recorder) -> None:
        """Move the item's entry to ``entry`` in one transaction.

        Throttled (nothing taken, nothing changed) when a partition touched lacks write
        units for its share times ``transaction_cost``; ConditionFailed when the
        placement is not ``expected`` (the placement's units are consumed).
        """
        size = entry_bytes(entry) if entry is not None else 0
        now = await self._arrive(rec, size)
        pkey = placement_key(item_id)
        if self._faulty:
            self._inject(rec, namespace, entry.shard_key if entry else pkey, write=True)
        cost = self._cost
        item = self._item(namespace, item_id, now)
        current = item.placement
        history = history_after(current)
        new_psize = placement_bytes(item_id, version, entry, token, history)
        pbucket = self._partitions.placement_bucket(namespace, item_id, item, now, write=True)
        punits = write_units(max(item.size, new_psize)) * cost
        ppart = self._partitions.counted_as(namespace, pkey)
        # (key, partition counted, write bucket, units) of every partition key touched
        touched: list[tuple[str, str | None, TokenBucket, float]] = [
            (pkey, ppart, pbucket, punits)]
        old = current.entry if current is not None else None
        same_key = old is not None and entry is not None and old.shard_key == entry.shard_key
        old_state = new_state = None
        old_size = 0
        if old is not None:
            old_state = self._state(namespace, old.shard_key, now)
            old_size = old_state.sizes[old.position]
            if not same_key:
                touched.append((old.shard_key, old_state.partition, old_state.buckets.write,
                                write_units(old_size) * cost))
        if entry is not None:
            if old is not None and old_state is not None and same_key:
                # one key, one request: a delete and a put, or one overwrite of the row
                new_state = old_state
                units = (write_units(max(size, old_size)) if old.position == entry.position
                         else write_units(old_size) + write_units(size)) * cost
            else:
                new_state = self._state(namespace, entry.shard_key, now)
                units = write_units(size) * cost
            touched.append((entry.shard_key, new_state.partition, new_state.buckets.write,
                            units))

        for key, _, bucket, units in touched:
            # keys on one partition (partitions=P) must fit its bucket together
            if not bucket.has(sum(t[3] for t in touched if t[2] is bucket)
                              if self._partitions.count else units, now):
                rec.charges([(other, 0.0, partition) for other, partition, _, _ in touched])
                raise self._throttled(namespace, key, True)

        if current is not expected and not same_placement(current, expected):
            pbucket.take(punits, now)
            rec.charge(pkey, punits, ppart)
            raise ConditionFailed(
                f"place of item {item_id!r} in {namespace!r} expected {describe(expected)}, "
                f"found {describe(current)}")

        for _, _, bucket, units in touched:
            bucket.take(units, now)
        rec.charges([(key, units, partition) for key, partition, _, units in touched])
        if old is not None and old_state is not None:
            old_state.remove(old.position)
        if entry is not None and new_state is not None:
            new_state.add(entry, size)
        item.placement = Placement(item_id, version, entry, token, history)
        item.size = new_psize
        if self._applied is not None:
            self._applied.append(AppliedWrite(namespace, item_id, token, version, entry, now))
        if self._ambiguous_rate:
            self._ambiguous(entry.shard_key if entry else pkey)

    async def _query(self, namespace: str, shard_key: str, after: Position | None,
                     descending: bool, limit: int,
                     rec: Recorder) -> tuple[list[StoredEntry], Position | None]:
        """One page: at most ``min(limit, 1000)`` entries and ``max_page_bytes`` bytes.

        At least one entry if any remain. Read units are charged over the bytes read;
        the latency is one sample before the read plus the transfer time after it. A
        query the caller stops waiting for (a hedged copy no one needs, a cancelled
        read) is still answered and charged, as DynamoDB charges it: its page is read
        at the instant it is given up.
        """
        try:
            now = await self._arrive(rec, 0)
        except asyncio.CancelledError:
            with suppress(Throttled, Unavailable):
                self._page(rec, namespace, shard_key, after, descending, limit,
                           self.clock.now())
            raise
        entries, resume, nbytes = self._page(rec, namespace, shard_key, after, descending,
                                             limit, now)
        await self.clock.sleep(self._latency.transfer(nbytes))
        return entries, resume

    def _page(self, rec: Recorder, namespace: str, shard_key: str, after: Position | None,
              descending: bool, limit: int,
              now: float) -> tuple[list[StoredEntry], Position | None, int]:
        """Read one page at ``now`` and take its units: entries, resume, bytes read."""
        if self._faulty:
            self._inject(rec, namespace, shard_key, write=False)
        entries: list[StoredEntry] = []
        nbytes = 0
        resume: Position | None = None
        state = self._state(namespace, shard_key, now)
        most, max_bytes, sizes = min(limit, _MAX_PAGE), self._max_page_bytes, state.sizes
        last: Position | None = None
        for pos in state.beyond(after, descending):
            size = sizes[pos]
            if len(entries) == most or (entries and nbytes + size > max_bytes):
                resume = last
                break
            entries.append(state.entries[pos])
            nbytes += size
            last = pos
        self._take(rec, namespace, shard_key, read_units(nbytes, self._consistent), now,
                   write=False)
        return entries, resume, nbytes

    async def _count(self, namespace: str, shard_key: str, rec: Recorder) -> int:
        """A Select=COUNT query: one request per ``max_page_bytes`` page, any may throttle.

        The count is taken at the last page's instant.
        """
        remaining: int | None = None
        while True:
            now = await self._arrive(rec, 0)
            if self._faulty:
                self._inject(rec, namespace, shard_key, write=False)
            state = self._state(namespace, shard_key, now)
            if remaining is None:
                remaining = state.nbytes
            page = min(remaining, self._max_page_bytes)
            self._take(rec, namespace, shard_key, read_units(page, self._consistent), now,
                       write=False)
            remaining -= page
            if remaining <= 0:
                return len(state.entries)

    # -- records ----------------------------------------------------------------------

    async def _get_record(self, namespace: str, key: str, rec: Recorder) -> Record | None:
        """A copy of the record (a strongly consistent read), or None."""
        now = await self._arrive(rec, 0)
        rkey = record_key(key)
        if self._faulty:
            self._inject(rec, namespace, rkey, write=False)
        current = self._records.get((namespace, key))
        self._take(rec, namespace, rkey, read_units(current[1] if current else 0, True), now,
                   write=False)
        if current is None:
            return None
        return Record(copy.deepcopy(dict(current[0].body)), current[0].revision)

    async def _put_record(self, namespace: str, key: str, body: Mapping[str, Any],
                          revision: int, expected: int | None, rec: Recorder) -> None:
        """Write the record if its revision is ``expected``; a conflict still takes units."""
        rkey = record_key(key)
        stored = copy.deepcopy(dict(body))
        size = 2 + utf8_len(rkey) + 1 + number_bytes(revision) + 4 + value_bytes(stored)
        now = await self._arrive(rec, size)
        if self._faulty:
            self._inject(rec, namespace, rkey, write=True)
        current = self._records.get((namespace, key))
        units = float(write_units(max(size, current[1] if current else 0)))
        self._take(rec, namespace, rkey, units, now, write=True)
        found = current[0].revision if current is not None else None
        if found != expected:
            raise ConditionFailed(
                f"record {key!r} of {namespace!r} expected revision "
                f"{'absent' if expected is None else expected}, found "
                f"{'absent' if found is None else found}")
        self._records[(namespace, key)] = (Record(stored, revision), size)
        if self._ambiguous_rate:
            self._ambiguous(rkey)

    async def _list_records(self, namespace: str, prefix: str,
                            rec: Recorder) -> dict[str, Record]:
        """One query over the namespace's records, charged over the bytes it read."""
        now = await self._arrive(rec, 0)
        rkey = record_key(prefix)
        if self._faulty:
            self._inject(rec, namespace, rkey, write=False)
        found = {key: (record, size) for (ns, key), (record, size) in self._records.items()
                 if ns == namespace and key.startswith(prefix)}
        self._take(rec, namespace, rkey, read_units(sum(size for _, size in found.values()),
                                                    True), now, write=False)
        return {key: Record(copy.deepcopy(dict(record.body)), record.revision)
                for key, (record, _) in found.items()}

    async def _delete_record(self, namespace: str, key: str, expected: int,
                             rec: Recorder) -> None:
        """Delete the record if its revision is ``expected``; a conflict still takes units."""
        now = await self._arrive(rec, 0)
        rkey = record_key(key)
        if self._faulty:
            self._inject(rec, namespace, rkey, write=True)
        current = self._records.get((namespace, key))
        self._take(rec, namespace, rkey, float(write_units(current[1] if current else 0)), now,
                   write=True)
        found = current[0].revision if current is not None else None
        if found != expected:
            raise ConditionFailed(
                f"delete of record {key!r} of {namespace!r} expected revision {expected}, "
                f"found {'absent' if found is None else found}")
        del self._records[(namespace, key)]
        if self._ambiguous_rate:
            self._ambiguous(rkey)
