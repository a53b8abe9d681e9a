"""``MemoryStore``: the simulated store's requests on entries, placements and records.

Every request goes through the request cycle (``shardex.stores.memory.cycle``): it waits
a sampled latency on the store's clock, then applies atomically at that instant:
injected faults are drawn, capacity is taken from the simulated table, conditions are
checked, and the store changes or raises. What each request consumed is reported on the
``Recorder`` the public method hands in, exactly per key and with its partition, so
``stats()`` and the heat meter see where it throttled and why.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import replace
from typing import Any

from shardex.capacity import (
    QUERY_PAGE_ITEMS,
    entry_bytes,
    number_bytes,
    utf8_len,
    value_bytes,
)
from shardex.clock import Clock
from shardex.errors import ConditionFailed, InvalidInput, StoreError, Throttled, Unavailable
from shardex.keys import is_reserved, placement_key, record_key
from shardex.model.entries import Placement, Position, Record, StoredEntry
from shardex.model.values import dynamodb_attrs
from shardex.sim.partitions import Partition, Slot
from shardex.sim.profiles import DEFAULT_PROFILE
from shardex.sim.table import Resource, check, refuse, take
from shardex.stores.memory.cycle import RequestCycle
from shardex.stores.memory.options import (
    CAPACITY_OPTIONS,
    OPTIONS,
    check_option,
    memory_uri,
    options_from_uri,
    resolve_profile,
)
from shardex.stores.memory.state import (
    AppliedWrite,
    Item,
    KeyState,
    Sent,
    copied,
    describe,
    plan_place,
    same_placement,
)
from shardex.stores.metered import Recorder
from shardex.stores.uri import StoreURI

__all__ = ["MemoryStore"]

# (key, resource, partition, units, key h64) of each key a write touches
_Touched = tuple[str, Resource, Partition, float, int]


class MemoryStore(RequestCycle):
    """The embedded simulated partitioned store: DynamoDB's capacity model on a clock.

    ``profile`` (default ``dynamodb-on-demand``: a new on-demand table) names the capacity
    model, ``shardex.sim.profiles.PROFILES``; every setting of a profile is also an option
    that overrides it (``write_ceiling``, ``warm_write``, ``partitions``,
    ``split_delay_seconds``, ... : see ``shardex.sim.profiles.Profile``). The store's own
    options:

    =====================  ========  =======================================================
    option                 default   meaning
    =====================  ========  =======================================================
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

    Options are keyword arguments or ``memory://?name=value``; keywords win. ``clock``
    (keyword only) is where the store reads time and sleeps: ``LoopClock()`` by default,
    virtual under ``run_virtual``. A bad option raises InvalidInput naming it
    (InvalidURI when it came from the URI).

    Where things live: placements on their own partition key ``#placement#<item id>``
    and records on ``#record#<key>``, in the table; entries in the table too, or, with
    the ``gsi`` layout, in the GSI, whose throttled partition throttles the base write
    (back-pressure). A ``place`` is a transaction (``transaction_cost`` times the units)
    in the ``table`` layout, an item update (once) in the ``gsi`` layout. A throttle's
    ``Throttled.reason`` is DynamoDB's ThrottlingReason
    (``TableWriteKeyRangeThroughputExceeded``, ...), and its message names the exception
    DynamoDB raises. A failed condition still consumes the units of what it read (the
    placement, the record). The store keeps the StoredEntry objects it is given and
    returns them (``keeps_entries``): do not mutate their ``attrs``.
    """

    scheme = "memory"
    batch_locate = 100  # as DynamoDB's BatchGetItem
    keeps_entries = True

    def __init__(self, *, profile: str = DEFAULT_PROFILE, clock: Clock | None = None,
                 **options: Any) -> None:
        unknown = sorted(set(options) - set(OPTIONS) - set(CAPACITY_OPTIONS))
        if unknown:
            raise InvalidInput(f"memory:// does not know the option(s) {', '.join(unknown)}")
        self._profile_name = check_option("profile", profile)
        self._settings = {name: check_option(name, options.get(name, spec[1]))
                          for name, spec in OPTIONS.items()}
        self._capacity = {name: check_option(name, options[name])
                          for name in CAPACITY_OPTIONS if name in options}
        super().__init__(resolve_profile(profile, self._capacity), self._settings,
                         clock=clock)
        self._table = Resource(self.profile)
        self._entries = (Resource(self.profile, index=True) if self.profile.layout == "gsi"
                         else self._table)
        self._gsi = self.profile.layout == "gsi"
        self._consistent = self.profile.consistent
        self._max_page_bytes = self._settings["max_page_bytes"]
        self._states: dict[tuple[str, str], KeyState] = {}
        self._items: dict[str, dict[str, Item]] = {}
        self._records: dict[tuple[str, str], tuple[Record, int]] = {}
        self._applied: list[AppliedWrite] | None = None
        self._record_slots: dict[tuple[str, str], tuple[Slot, int]] = {}
        # the size of each entry being placed: a throttled place is sent again many times
        self._sizes: dict[int, tuple[StoredEntry, int]] = {}

    @classmethod
    def from_uri(cls, uri: StoreURI, **options: Any) -> MemoryStore:
        """Build the store from ``memory://?option=value``; keyword ``options`` override."""
        store: MemoryStore = options_from_uri(uri, options, cls)
        return store

    @classmethod
    def check_uri(cls, uri: StoreURI) -> None:
        cls.from_uri(uri)  # a simulated table: nothing to connect, no credentials

    @property
    def uri(self) -> str:
        """``memory://`` with the profile, the capacity options given, and the store
        options that differ from their defaults."""
        return memory_uri(self._profile_name, self._capacity, self._settings)

    @property
    def resources(self) -> tuple[Resource, ...]:
        """The simulated table, and its GSI in the ``gsi`` layout."""
        return (self._table,) if self._entries is self._table else (self._table,
                                                                     self._entries)

    def watch_applied(self) -> list[AppliedWrite]:
        """Log every place that applies from now on, and return the log (for tests).

        Each ``AppliedWrite`` names the write's token, so a test can check every
        reported outcome against what really applied, ambiguous failures included.
        """
        if self._applied is None:
            self._applied = []
        return self._applied

    def partition_of(self, namespace: str, key: str) -> str:
        """The name of the physical partition that holds ``key`` of ``namespace`` (the
        key's own name when it is its own partition: ``partitions=0``, unsplit)."""
        partitions = (self._table if is_reserved(key) else self._entries).partitions
        slot, h = partitions.slot(namespace, key)
        return slot.find(h, "").name or key

    async def indexes(self) -> list[str]:
        """Every index with entries, placements or records here, in name order."""
        return sorted({ns for ns, _ in self._records} | {ns for ns, items in self._items.items()
                                                          if items}
                      | {ns for (ns, _), state in self._states.items() if state.entries})

    def shard_keys(self, namespace: str) -> list[str]:
        """Return the shard keys of ``namespace`` that hold entries, sorted."""
        return sorted(key for (ns, key), state in self._states.items()
                      if ns == namespace and state.entries)

    # -- where keys live ------------------------------------------------------------

    def _state(self, namespace: str, key: str, now: float) -> KeyState:
        state = self._states.get((namespace, key))
        if state is None:
            slot, h = self._entries.partitions.slot(namespace, key, now)
            state = self._states[(namespace, key)] = KeyState(slot, h)
        return state

    def _item(self, namespace: str, item_id: str, now: float) -> Item:
        items = self._items.get(namespace)
        if items is None:
            items = self._items[namespace] = {}
        item = items.get(item_id)
        if item is None:
            slot, h = self._table.partitions.slot(namespace, placement_key(item_id), now,
                                                  tracked=False)
            item = items[item_id] = Item(slot, h)
        return item

    def _record_slot(self, namespace: str, rkey: str, now: float) -> tuple[Slot, int]:
        found = self._record_slots.get((namespace, rkey))
        if found is None:
            found = self._record_slots[(namespace, rkey)] = self._table.partitions.slot(
                namespace, rkey, now, tracked=False)
        return found

    # -- entries --------------------------------------------------------------------

    async def _locate(self, namespace: str, item_id: str, rec: Recorder) -> Placement | None:
        """A strongly consistent read of the item's placement key."""
        await self._send(rec, 0)
        now = self.clock.now()
        key = placement_key(item_id)
        if self._faulty:
            self._inject(rec, namespace, key, write=False)
        item = self._item(namespace, item_id, now)
        self._take(rec, self._table, key, item.slot, item.h, "",
                   self.profile.read_cost(item.size, 1, True), now, write=False)
        return item.placement

    async def _locate_many(self, namespace: str, item_ids: list[str], rec: Recorder
                           ) -> tuple[dict[str, Placement | None], list[str]]:
        """One BatchGetItem: each placement read strongly on its own partition; refused
        ones are left unread, and a request refused whole throttles."""
        await self._send(rec, 0)
        now = self.clock.now()
        if self._faulty:
            self._inject(rec, namespace, placement_key(item_ids[0]), write=False)
        found: dict[str, Placement | None] = {}
        unread: list[str] = []
        first: Throttled | None = None
        nbytes = 0
        for item_id in item_ids:
            item = self._item(namespace, item_id, now)
            try:  # as _locate takes it, a refusal leaving the placement unread
                self._take(rec, self._table, placement_key(item_id), item.slot, item.h, "",
                           self.profile.read_cost(item.size, 1, True), now, write=False)
            except Throttled as exc:
                first = first or exc
                unread.append(item_id)
                continue
            found[item_id] = item.placement
            nbytes += item.size
        if first is not None and not found:
            raise first
        await self.clock.sleep(self._latency.transfer(nbytes))
        return found, unread

    def _check_entry(self, item_id: str, entry: Any) -> int:
        """``Store._check_entry``, its size kept for ``_size``: each entry sized once."""
        return self._keep_size(entry, super()._check_entry(item_id, entry))

    def _size(self, entry: StoredEntry) -> int:
        """``entry_bytes(entry)``, kept while the same entry object is placed again."""
        known = self._sizes.get(id(entry))
        if known is not None and known[0] is entry:
            return known[1]
        return self._keep_size(entry, entry_bytes(entry))

    def _keep_size(self, entry: StoredEntry, size: int) -> int:
        if len(self._sizes) >= 16384:
            self._sizes.clear()
        self._sizes[id(entry)] = (entry, size)
        return size

    async def _place(self, namespace: str, item_id: str, entry: StoredEntry | None,
                     version: int, expected: Placement | None, token: str,
                     rec: Recorder) -> Throttled | None:
        """Move the item's entry to ``entry`` in one transaction (one item update in GSI mode).

        Throttled, returned (nothing taken, nothing changed), when a partition or table
        touched lacks write units for its share (times ``transaction_cost``); ConditionFailed
        when the placement is not ``expected`` (the placement's units are consumed).
        With a local secondary index, StoreError when the entry's key would hold more
        than ``partition_bytes``.
        """
        size = self._size(entry) if entry is not None else 0
        await self._send(rec, size)
        now = self.clock.now()
        if self._faulty:
            self._inject(rec, namespace, entry.shard_key if entry else placement_key(item_id),
                         write=True)
        table, entries = self._table, self._entries
        second = int(now)
        item = self._item(namespace, item_id, now)
        current = item.placement
        plan = item.tried
        if plan is None or plan.current is not current or plan.entry is not entry \
                or plan.version != version or plan.token != token:
            # a throttled place is sent again as it was: its plan holds while the item's
            # placement is the one it was planned on
            plan = item.tried = plan_place(
                self.profile, lambda key: self._state(namespace, key, now), item_id, item,
                current, entry, version, token, size)
        pkey, punits, new_psize = plan.pkey, plan.punits, plan.psize
        old, old_state, new_state = plan.old, plan.old_state, plan.new_state
        old_size, same_key = plan.old_size, plan.same_key
        ppart = table.partitions.at(item.slot, item.h, "", second)
        old_part = new_part = None
        if old is not None and old_state is not None:
            old_part = entries.partitions.at(old_state.slot, old_state.h, old.sort, second)
        if entry is not None and new_state is not None:
            new_part = entries.partitions.at(new_state.slot, new_state.h, entry.sort, second)
            if self.profile.lsi and new_state.nbytes + size - (old_size if same_key else 0) \
                    > self.profile.partition_bytes:
                raise StoreError(
                    f"{entry.shard_key}: ItemCollectionSizeLimitExceededException: with a local "
                    f"secondary index an item collection holds at most "
                    f"{self.profile.partition_bytes:g} bytes; not applied")
        generations = (table.partitions.generation, entries.partitions.generation)
        sent = item.sent
        if sent is None or sent.plan is not plan or sent.parts[0][1] is not ppart \
                or sent.old_part is not old_part or sent.new_part is not new_part \
                or sent.generations != generations:
            # a throttled place sent again finds its keys on the same partitions (no split
            # since: their names hold too) and touches them as it did
            touched: list[_Touched] = [(pkey, table, ppart, punits, item.h)]
            if old_part is not None and old is not None and old_state is not None \
                    and not same_key:
                touched.append((old.shard_key, entries, old_part, plan.old_units,
                                old_state.h))
            if new_part is not None and entry is not None and new_state is not None:
                touched.append((entry.shard_key, entries, new_part, plan.units, new_state.h))
            sent = item.sent = Sent(
                plan, old_part, new_part, generations, touched,
                [(res, part, units, h) for _, res, part, units, h in touched],
                [(key, 0.0, part.name) for key, _, part, _, _ in touched])
        touched, parts = sent.touched, sent.parts

        refusal = check(parts, write=True, strong=True, now=now)
        if refusal is not None:
            refuse(parts, write=True)
            rec.charges(sent.refused)
            at = [(key, units) for key, res, part, units, _ in touched
                  if res is refusal.resource
                  and (refusal.partition is None or part is refusal.partition)]
            # returned, not raised: a hot key's writers are refused thousands of times a
            # second, and each raise would build a traceback of the write's frames
            return self._throttled(refusal, at[-1][0], sum(units for _, units in at), now,
                                   transaction=not self._gsi)

        if current is not expected and not same_placement(current, expected):
            take(parts[:1], write=True, strong=True, now=now)
            rec.charge(pkey, punits, ppart.name)
            raise ConditionFailed(
                f"place of item {item_id!r} in {namespace!r} expected {describe(expected)}, "
                f"found {describe(current)}")

        take(parts, write=True, strong=True, now=now)
        rec.charges([(key, units, part.name) for key, _, part, units, _ in touched])
        if entry is not None and (attrs := dynamodb_attrs(entry.attrs)) is not entry.attrs:
            entry = replace(entry, attrs=attrs)  # kept as DynamoDB reads it back
        ppart.bytes += new_psize - item.size
        if old is not None and old_state is not None and old_part is not None:
            old_state.remove(old.position)
            old_part.bytes -= old_size
        if entry is not None and new_state is not None and new_part is not None:
            new_state.add(entry, size)
            new_part.bytes += size
            entries.partitions.track(new_state.h).write(entry.sort)
        item.placement = Placement(item_id, version, entry, token, plan.history)
        item.size, item.tried, item.sent = new_psize, None, None
        if self._applied is not None:
            self._applied.append(AppliedWrite(namespace, item_id, token, version, entry, now))
        if self._ambiguous_rate:
            self._ambiguous(entry.shard_key if entry else pkey)
        return None

    async def _query(self, namespace: str, shard_key: str, after: Position | None,
                     until: Position | None, descending: bool, limit: int,
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
                self._page(rec, namespace, shard_key, after, until, descending, limit,
                           self.clock.now())
            raise
        entries, resume, nbytes = self._page(rec, namespace, shard_key, after, until,
                                             descending, limit, now)
        await self.clock.sleep(self._latency.transfer(nbytes))
        return entries, resume

    def _page(self, rec: Recorder, namespace: str, shard_key: str, after: Position | None,
              until: Position | None, descending: bool, limit: int,
              now: float) -> tuple[list[StoredEntry], Position | None, int]:
        """Read one page at ``now`` and take its units: entries, resume, bytes read."""
        if self._faulty:
            self._inject(rec, namespace, shard_key, write=False)
        entries: list[StoredEntry] = []
        nbytes = 0
        resume: Position | None = None
        state = self._state(namespace, shard_key, now)
        most, max_bytes, sizes = min(limit, QUERY_PAGE_ITEMS), self._max_page_bytes, state.sizes
        last: Position | None = None
        for pos in state.beyond(after, descending, until):
            size = sizes[pos]
            if len(entries) == most or (entries and nbytes + size > max_bytes):
                resume = last
                break
            entries.append(state.entries[pos])
            nbytes += size
            last = pos
        consistent = self._consistent
        sort = entries[0].sort if entries else after[0] if after is not None else ""
        self._take(rec, self._entries, shard_key, state.slot, state.h, sort,
                   self.profile.read_cost(nbytes, len(entries), consistent), now,
                   write=False, strong=consistent)
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
            consistent = self._consistent
            self._take(rec, self._entries, shard_key, state.slot, state.h, "",
                       self.profile.read_cost(page, len(state.entries), consistent), now,
                       write=False, strong=consistent)
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
        slot, h = self._record_slot(namespace, rkey, now)
        self._take(rec, self._table, rkey, slot, h, "",
                   self.profile.read_cost(current[1] if current else 0, 1, True), now,
                   write=False)
        if current is None:
            return None
        return Record(copied(dict(current[0].body)), current[0].revision)

    async def _put_record(self, namespace: str, key: str, body: Mapping[str, Any],
                          revision: int, expected: int | None, rec: Recorder) -> None:
        """Write the record if its revision is ``expected``; a conflict still takes units."""
        rkey = record_key(key)
        stored = copied(dict(body))
        size = 2 + utf8_len(rkey) + 1 + number_bytes(revision) + 4 + value_bytes(stored)
        now = await self._arrive(rec, size)
        if self._faulty:
            self._inject(rec, namespace, rkey, write=True)
        current = self._records.get((namespace, key))
        units = self.profile.write_cost(max(size, current[1] if current else 0))
        slot, h = self._record_slot(namespace, rkey, now)
        self._take(rec, self._table, rkey, slot, h, "", units, now, write=True)
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
        slot, h = self._record_slot(namespace, rkey, now)
        self._take(rec, self._table, rkey, slot, h, "", self.profile.read_cost(
            sum(size for _, size in found.values()), len(found), True), now, write=False)
        return {key: Record(copied(dict(record.body)), record.revision)
                for key, (record, _) in found.items()}

    async def _delete_record(self, namespace: str, key: str, expected: int,
                             rec: Recorder) -> None:
        """Delete the record if its revision is ``expected``; a conflict still takes units."""
        now = await self._arrive(rec, 0)
        rkey = record_key(key)
        if self._faulty:
            self._inject(rec, namespace, rkey, write=True)
        current = self._records.get((namespace, key))
        slot, h = self._record_slot(namespace, rkey, now)
        self._take(rec, self._table, rkey, slot, h, "",
                   self.profile.write_cost(current[1] if current else 0), now, write=True)
        found = current[0].revision if current is not None else None
        if found != expected:
            raise ConditionFailed(
                f"delete of record {key!r} of {namespace!r} expected revision {expected}, "
                f"found {'absent' if found is None else found}")
        del self._records[(namespace, key)]
        if self._ambiguous_rate:
            self._ambiguous(rkey)
