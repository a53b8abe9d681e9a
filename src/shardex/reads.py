"""The read half of ShardedIndex: get, query, scan and count, and what reads return.

Reads fan out over every shard key the routing names in its state (both layouts while a
reshard moves entries) and merge; they are complete or they raise. A read that outlives
the lease of the routing it started from checks that the stored routing moved at most
one step meanwhile (``shardex.reshard`` explains why one step is safe): a page or count
is read again otherwise, a scan raises RoutingStale. While the routing records an
adoption that reads the application's old index (``shardex.adoption``), a value is read
from that index instead, through the read-only store ``shardex.adopted.source_store`` gives.
``IndexReads`` is the base class ``ShardedIndex`` inherits these from.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, TypeVar

from shardex.admission import Priority
from shardex.adopted import source_store
from shardex.clock import Clock
from shardex.cursor import Cursor, CursorCodec
from shardex.errors import InvalidInput, RoutingStale
from shardex.fanout import FanOut
from shardex.hedging import HedgePolicy
from shardex.keys import stored_value, validate_item_id, validate_value
from shardex.model.entries import Position, StoredEntry
from shardex.model.values import owned_attrs
from shardex.retry import RetryPolicy
from shardex.routing import Routing
from shardex.routing_record import RoutingRecord
from shardex.stores.base import Malformed, Store
from shardex.stores.metered import Skipped, collect_skipped
from shardex.tierreads import TierReads
from shardex.tiers import TierStores

__all__ = ["Entry", "IndexReads", "MAX_QUERY_LIMIT", "Order", "Page"]

T = TypeVar("T")

MAX_QUERY_LIMIT = 10_000
# reads begun again, at most, when the layout moved two steps while each ran
_MAX_REREADS = 3
Order = Literal["asc", "desc"]


class Entry(NamedTuple):
    """One entry of an index, as reads return it (an immutable named tuple)."""

    value: str
    item_id: str
    sort: str
    attrs: Mapping[str, Any]
    shard_key: str
    version: int


@dataclass(frozen=True, slots=True)
class Page:
    """A page of a query: ``items`` in order, and ``cursor`` for the next page (None: last).

    ``consistent`` is False when a write acknowledged just before the read may be missing
    from it: the store's reads are eventually consistent (a DynamoDB GSI), or the page
    continued a listing this process had read ahead (``docs/reads.md``: a write of
    another process shows up to ``CONTINUATION_TTL`` late there).
    ``skipped``: the malformed items the page's reads left out (an index built with
    ``malformed="skip"``), each with its shard key and why; empty otherwise.
    """

    items: list[Entry]
    cursor: str | None
    consistent: bool = True
    skipped: tuple[Skipped, ...] = ()

    def __len__(self) -> int:
        return len(self.items)


class IndexReads:
    """The reads of a ``ShardedIndex`` (its base class: the index sets these attributes)."""

    name: str
    _store: Store
    _tiers: TierStores
    _record: RoutingRecord
    _codec: CursorCodec
    _retry: RetryPolicy
    _hedge: HedgePolicy | None
    _max_concurrency: int | None
    _malformed: Malformed
    _keeps_entries: bool  # a store of the index hands out the entries it keeps
    _clock: Clock
    _rng: random.Random
    _tier_reads: TierReads | None
    _fanouts: dict[str | None, FanOut]
    _sources: dict[tuple[str, str], tuple[Store, FanOut]]
    _sources_lock: asyncio.Lock
    _calls: int
    _drained: asyncio.Event | None
    _closing: bool
    _loop: asyncio.AbstractEventLoop | None

    def _begin(self) -> None:
        """A call begins (a write, or a read other than a scan): refused while the index
        closes or is closed, or from an event loop other than the one it was opened in
        (its clients' connections belong to that one: a call from another failed as
        "cannot reach DynamoDB ... Event loop is closed"); ``close`` waits for the calls
        under way to end."""
        if self._closing:
            raise InvalidInput(f"index {self.name!r} is closing; use it before 'close' "
                               "(or inside 'async with index:')")
        self._reader()
        if self._loop is not None and asyncio.get_running_loop() is not self._loop:
            raise InvalidInput(f"index {self.name!r} was opened in another event loop (each "
                               "asyncio.run is one): open it in the loop that uses it, or "
                               "use SyncShardedIndex from plain code")
        self._calls += 1

    def _ended(self) -> None:
        self._calls -= 1
        if not self._calls and self._drained is not None:
            self._drained.set()

    def _reader(self) -> FanOut:
        raise NotImplementedError

    def _open(self) -> bool:
        raise NotImplementedError

    async def _routing_now(self) -> Routing:
        raise NotImplementedError

    def _retrying(self, call: Callable[[], Awaitable[T]]) -> Coroutine[Any, Any, T]:
        raise NotImplementedError

    async def _admit(self, value: str, units: float, op: Literal["read", "write"],
                     priority: Priority) -> None:
        raise NotImplementedError

    async def _adopted(self, routing: Routing) -> FanOut | None:
        """The reader of the application's old index while an adoption reads it (None: the
        index's own keys, on their tiers, in phases mid-reshard); keyed by the raw value."""
        adoption = routing.adoption
        if adoption is None or not adoption.reads_source:
            return None
        where = (adoption.kind, adoption.source)
        async with self._sources_lock:
            found = self._sources.get(where)
            if found is None:
                source = source_store(self._store, adoption)
                await source.open()
                found = self._sources[where] = (source, FanOut(
                    source, self.name, retry=self._retry, hedge=self._hedge,
                    max_concurrency=self._max_concurrency, clock=self._clock, rng=self._rng,
                    malformed=self._malformed))
        return found[1]

    async def _read_routing(self) -> tuple[Routing, float]:
        """The routing a read starts from, and when it was read from the store."""
        routing = await self._routing_now()
        return routing, self._record.loaded_at

    async def _changed(self, routing: Routing, since: float) -> bool:
        """True if a read from ``routing`` may have overlapped more than one step of a reshard.

        A read that ends within the lease of the copy it started from (read at
        ``since``) cannot have: a reshard waits the lease and a margin after each change
        of what clients do, and its mover too. A longer read is trusted only if the
        stored routing, read again now (strongly consistently), is still ``routing``.
        """
        if self._clock.now() - since < self._record.lease:
            return False
        latest = await self._record.refresh()
        return latest.version != routing.version

    def _stale(self, value: str, routing: Routing) -> RoutingStale:
        return RoutingStale(
            f"index {self.name!r}: the routing changed (from version {routing.version}) "
            f"while a read of {value!r} ran for longer than the routing's lease, so the "
            "read may have missed entries a reshard moved; read it again")

    async def get(self, item_id: str) -> Entry | None:
        """Return the entry of ``item_id``, or None if it has none."""
        item_id = validate_item_id(item_id)
        self._begin()
        try:
            reads = self._reads()
            # an index without tiers has one placement to read, whatever the routing says
            routing = await self._routing_now() if self._tiers.names else None
            placement = reads.held(routing, await self._tiers.locate(self.name, item_id,
                                                                     self._retrying))
        finally:
            self._ended()
        if placement is None or placement.entry is None:
            return None
        return self._entry(stored_value(placement.entry.shard_key, item_id), placement.entry)

    def _reads(self) -> TierReads:
        self._reader()
        assert self._tier_reads is not None
        return self._tier_reads

    async def query(self, value: str, *, limit: int = 100, order: Order = "asc",
                    cursor: str | None = None, priority: Priority = "normal") -> Page:
        """Return the next ``limit`` entries of ``value`` in (sort, item_id) order.

        Pass ``page.cursor`` back to continue; it stays valid if the value's shard
        layout changes between pages. Raises InvalidCursor for a damaged cursor and
        IncompleteRead if a shard could not be read: never a partial page; admission
        charges one unit per shard key read (see ``put`` for ``priority``). A first page
        asks each shard only for its share of it; a caller who reads every page reads
        them sooner with ``pages``.
        """
        value = _check_page(value, limit, order)
        after = None if cursor is None else \
            self._codec.decode(cursor, value=value, order=order).after
        return await self._page(value, limit, order, after, priority, to_end=False)

    async def pages(self, value: str, *, limit: int = 100, order: Order = "asc",
                    cursor: str | None = None,
                    priority: Priority = "normal") -> AsyncGenerator[Page, None]:
        """Yield every page of ``value`` in (sort, item_id) order, from ``cursor`` on.

        The pages ``query`` returns, page after page, read to the end: knowing that,
        the first page asks each shard for a store page (1,000 entries or 1 MB) instead
        of its share of one page, and every shard reads ahead from then on, so the
        listing takes the round trips of a gather that reads every shard at once, at
        the same read units. Stopping early wastes what was read ahead: up to a store
        page a shard key (closed, ``aclose()`` or collected, the listing frees what it
        kept at once). Each page's ``cursor`` resumes the listing anywhere (with
        ``query`` or ``pages``). Raises as ``query`` does.
        """
        value = _check_page(value, limit, order)
        after = None if cursor is None else \
            self._codec.decode(cursor, value=value, order=order).after
        while True:
            page = await self._page(value, limit, order, after, priority, to_end=True)
            if page.cursor is None:
                yield page
                return
            after = page.items[-1].sort, page.items[-1].item_id
            try:
                yield page
            except GeneratorExit:
                for fanout in [*self._fanouts.values(), *(f for _, f in self._sources.values())]:
                    fanout.abandon(value, order == "desc", after)
                raise

    async def _page(self, value: str, limit: int, order: Order, after: Position | None,
                    priority: Priority, *, to_end: bool) -> Page:
        """The next ``limit`` entries of ``value`` beyond ``after`` (``query``, ``pages``)."""
        self._begin()
        try:
            return await self._page_read(value, limit, order, after, priority, to_end=to_end)
        finally:
            self._ended()

    async def _page_read(self, value: str, limit: int, order: Order, after: Position | None,
                         priority: Priority, *, to_end: bool) -> Page:
        reads = self._reads()
        with collect_skipped() as skipped:
            for attempt in range(_MAX_REREADS):
                routing, since = await self._read_routing()
                if attempt == 0:
                    await self._admit(value, _keys_read(routing, value), "read", priority)
                source = await self._adopted(routing)
                if source is not None:
                    merged = await source.page(value, [value], after=after,
                                               descending=order == "desc", limit=limit,
                                               layout=routing.version, to_end=to_end)
                else:
                    merged = await reads.page(routing, value, after=after,
                                              descending=order == "desc", limit=limit,
                                              to_end=to_end)
                entries, more = merged.entries, merged.more
                if not await self._changed(routing, since):
                    break
            else:
                raise self._stale(value, routing)
        items = [self._entry(value, e) for e in entries]
        token = None
        if more and entries:
            token = self._codec.encode(Cursor(value=value, order=order,
                                              after=entries[-1].position))
        # a page resumed from a kept continuation holds what its shards read before it
        # was asked for: what another process acknowledged meanwhile may be missing
        return Page(items=items, cursor=token,
                    consistent=self._store.capabilities.consistent_reads and not merged.kept,
                    skipped=tuple({(s.key, s.item_id): s for s in skipped}.values()))

    async def scan(self, value: str, *,
                   priority: Priority = "normal") -> AsyncGenerator[Entry, None]:
        """Yield every entry of ``value`` in arrival order (all shards concurrently).

        Mid-reshard (both layouts read) the entries come in ``(sort, item_id)`` order: the
        scan lists the value in the store's pages, as a query would, so an entry moving
        between the layouts meanwhile is yielded once and never missed.

        If a shard fails for good, IncompleteRead is raised after the other shards'
        entries have been yielded; RoutingStale is raised at the end if the layout moved
        more than one step while the scan ran (a scan longer than the routing's lease).
        """
        value = validate_value(value)
        reads = self._reads()
        routing, since = await self._read_routing()
        await self._admit(value, _keys_read(routing, value), "read", priority)
        source = await self._adopted(routing)
        entries = reads.stream(routing, value) if source is None else \
            source.stream(value, [value])
        async for entry in entries:
            if self._closing or not self._open():
                # its streams were read with the clients close took away: what it yields
                # now would be what was buffered, then the closed client's errors
                raise InvalidInput(f"index {self.name!r} was closed while a scan of "
                                   f"{value!r} ran; finish the scan inside 'async with "
                                   "index:'")
            yield self._entry(value, entry)
        if await self._changed(routing, since):
            raise self._stale(value, routing)

    async def count(self, value: str, *, priority: Priority = "normal") -> int:
        """Return how many entries ``value`` has, over all its shards.

        Mid-reshard the count lists the value (as ``scan`` does) and counts each entry
        once: it costs the read units of every entry, not a count per shard key.
        """
        value = validate_value(value)
        self._begin()
        try:
            return await self._count(value, priority)
        finally:
            self._ended()

    async def _count(self, value: str, priority: Priority) -> int:
        reads = self._reads()
        for attempt in range(_MAX_REREADS):
            routing, since = await self._read_routing()
            if attempt == 0:
                await self._admit(value, _keys_read(routing, value), "read", priority)
            source = await self._adopted(routing)
            count = await (reads.count(routing, value) if source is None
                           else source.count(value, [value]))
            if not await self._changed(routing, since):
                return count
        raise self._stale(value, routing)

    def _entry(self, value: str, stored: StoredEntry) -> Entry:
        attrs = owned_attrs(stored.attrs) if self._keeps_entries else stored.attrs
        return Entry(value, stored.item_id, stored.sort, attrs, stored.shard_key,
                     stored.version)


def _check_page(value: str, limit: int, order: Order) -> str:
    """``value`` as a plain str, once the page's arguments are checked."""
    value = validate_value(value)
    if isinstance(limit, bool) or not isinstance(limit, int) or \
            not 1 <= limit <= MAX_QUERY_LIMIT:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_QUERY_LIMIT}, "
                           f"got {limit!r}")
    if order not in ("asc", "desc"):
        raise InvalidInput(f"order must be 'asc' or 'desc', got {order!r}")
    return value


def _keys_read(routing: Routing, value: str) -> int:
    """How many shard keys a read of ``value`` reads: what admission charges it."""
    first, then = routing.read_phases(value)
    return len(first) + len(then)
