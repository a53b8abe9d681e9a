"""The store contract: the one small async interface every backend implements.

A store knows nothing of sharding. It keeps *entries* under partition keys (shard keys,
opaque to it) ordered by ``(sort, item_id)``, knows where each item's entry is (its
*placement*, which carries a write version), and keeps small *records* (the routing
document, a reshard's checkpoints and leases) with compare-and-set writes. Every driver
error is mapped at the store's boundary to a class of ``shardex.errors`` with the
driver's exception chained.

An item has at most one entry per index, as an item has one value of an indexed
attribute: placing it again moves it. Every ``place`` carries a write *token* and is
conditioned on the placement exactly as the writer located it; the placement it leaves
records the token and the tokens before it (``HISTORY_LENGTH`` of them), so a writer
whose request failed ambiguously finds out from the placement whether it applied.

``Store``'s public methods are the contract, written once: each checks its arguments
(raising InvalidInput before any request), opens a ``Recorder`` on the store's meter
(``shardex.stores.metered``) and calls the backend's hook (``_locate``,
``_locate_many`` where the store reads placements in batches, ``_place``,
``_query``, ``_count``, ``_get_record``, ``_put_record``, ``_list_records``,
``_delete_record``). A backend implements the hooks only, and reports through the
recorder what each request consumed; ``stats()`` and every other meter read those
events. What a store can do (``Capabilities``) is fixed when it is built.
"""

from __future__ import annotations

import abc
import asyncio
import random
from collections.abc import Awaitable, Hashable, Iterable, Mapping
from types import TracebackType
from typing import Any, ClassVar, TypeVar

from shardex.capacity import entry_bytes, placement_bytes
from shardex.clock import Clock, LoopClock
from shardex.errors import CapabilityMissing, InvalidInput, ShardexError, Throttled, brief
from shardex.keys import is_reserved, placement_key, record_key
from shardex.model.entries import (
    MAX_VERSION,
    Placement,
    Position,
    QueryPage,
    Record,
    StoredEntry,
    beyond,
    is_token,
    new_token,
)
from shardex.model.values import check_attrs, check_document
from shardex.stores.capabilities import Capabilities
from shardex.stores.checks import (
    MALFORMED,
    Malformed,
    check_malformed,
    check_position,
    check_revision,
    check_shard_key,
    check_text,
)
from shardex.stores.metered import Meter, Recorder
from shardex.stores.stats import StatsCounter, StoreStats
from shardex.stores.uri import StoreURI

__all__ = ["Capabilities", "MALFORMED", "Malformed", "Store", "check_malformed",
           "gather_or_cancel"]

# keys a batched read leaves unread (DynamoDB's UnprocessedKeys) are asked for again,
# at most this many tries in all, after a backoff of half to all of base * 2**try seconds
# (capped): jittered, and at least half, so the tries span time enough for capacity to come
_UNREAD_TRIES, _UNREAD_BASE, _UNREAD_CAP = 8, 0.025, 1.0
_JITTER = random.Random()
# the depth an entry's attrs start at in the store's item (check_value refuses a list or
# map at MAX_DEPTH): DynamoDB refuses a list 31 deep in an index table's 'attrs' map
ENTRY_ATTRS_DEPTH = 2
T = TypeVar("T")

async def gather_or_cancel(awaitables: Iterable[Awaitable[T]]) -> list[T]:
    """``asyncio.gather`` of ``awaitables``, except that the first to raise (or the caller
    cancelled) cancels the others and waits for them to end before raising: none is left
    running (sending, retrying, queued for a connection) behind the caller's back."""
    tasks = [asyncio.ensure_future(awaitable) for awaitable in awaitables]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


class Store(abc.ABC):
    """The async contract of a backend. ``namespace`` is the index name.

    Use as ``async with store:`` or call ``open``/``close``; opening is counted, so
    several indexes may share one store and the last ``close`` releases it. ``clock``
    is where requests are timed (``LoopClock()``: virtual under ``run_virtual``);
    ``meter`` is the event hub every request is reported on.
    """

    scheme: ClassVar[str]
    # the most placements one request of ``locate_many`` reads; None: the store has no
    # batched read, and ``locate_many`` sends one ``locate`` an item
    batch_locate: ClassVar[int | None] = None
    # True if the entries it returns are the very objects it was given (memory://), so
    # that readers hand out copies of their attrs: a caller's change stays its own
    keeps_entries: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "place" in cls.__dict__ and "try_place" not in cls.__dict__:
            # a store that wraps place (to hold or count its writes) is tried through it
            cls.try_place = Store._through_place  # type: ignore[method-assign]

    def __init__(self, *, capabilities: Capabilities, clock: Clock | None = None) -> None:
        if not isinstance(capabilities, Capabilities):
            raise InvalidInput(f"capabilities must be a Capabilities, got {capabilities!r}")
        self.capabilities = capabilities
        self.clock: Clock = clock if clock is not None else LoopClock()
        self.meter = Meter()
        self._stats = StatsCounter()
        self.meter.subscribe(self._stats)
        self._opened = 0
        # entries ``place`` checked, by identity: a write's retries send the same frozen
        # entry again, checked once (held here, so an id is not reused while remembered)
        self._checked: dict[int, StoredEntry] = {}

    @classmethod
    @abc.abstractmethod
    def from_uri(cls, uri: StoreURI, **options: Any) -> Store:
        """Build the store from a parsed URI; keyword options override the URI's."""

    @classmethod  # noqa: B027 (not abstract: a store of one's own may check nothing)
    def check_uri(cls, uri: StoreURI) -> None:
        """Refuse a URI ``from_uri`` would refuse for its own parts (its location, an
        option it does not know or whose value is not of its type), as ``from_uri`` does,
        without building a client: no driver, credentials or connection needed (for
        commands that read a store's URI without opening it, ``plan``). Every store of
        shardex's checks; this default, for a store of one's own, checks nothing."""

    async def open(self) -> None:
        """Connect (the first time) and check that what the store needs exists."""
        if self._opened == 0:
            # the connection's checks (DescribeTable, say) are requests the store may not
            # answer: the meter counts them for ``quiet``, though no Usage reports them
            with self.meter.asked(self.clock):
                await self._connect()
        self._opened += 1

    async def close(self) -> None:
        """Release the connection when the last user closes."""
        if self._opened == 0:
            return
        self._opened -= 1
        if self._opened == 0:
            await self._disconnect()

    async def __aenter__(self) -> Store:
        await self.open()
        return self

    @property
    def connections(self) -> int | None:
        """How many requests the store's client carries at once (its connection pool).

        None when nothing bounds it (the simulated store). A fan-out sends no more at
        once: more would only queue in the client, or open connections it would not keep.
        """
        return None

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def _connect(self) -> None:  # noqa: B027 - optional hook
        """Open connections; override in stores that have any."""

    async def _disconnect(self) -> None:  # noqa: B027 - optional hook
        """Close connections; override in stores that have any."""

    @property
    def uri(self) -> str:
        """A URI that names this store, without secrets."""
        return f"{self.scheme}://"

    @property
    def holds(self) -> Hashable:
        """What names the data this store reads and writes: two stores with the same
        ``holds`` are one (a table named twice, by two URIs or two objects). The object
        itself here (a simulated store's data is its own); a store of a service names
        its endpoint and table."""
        return self

    def _recorder(self, namespace: Any, key: str, write: bool, skip: bool = False) -> Recorder:
        if type(namespace) is not str or not namespace:
            check_text("namespace", namespace)
        return Recorder(self.meter, self.clock, namespace, key, write, skip)

    # -- counters ----------------------------------------------------------------------

    def stats(self, namespace: str | None = None) -> StoreStats:
        """Return requests, units and throttles per key, partition and second (see stats)
        of index ``namespace`` (None: every index of the store)."""
        if namespace is not None and type(namespace) is not str:
            raise InvalidInput(f"stats of an index: its name as text, or None for every "
                               f"index, got {brief(namespace)}")
        return self._stats.snapshot(namespace)

    def reset_stats(self) -> None:
        """Zero every counter and timeline of ``stats()``; other meters keep theirs."""
        self._stats.reset()

    # -- entries -------------------------------------------------------------------

    async def locate(self, namespace: str, item_id: str) -> Placement | None:
        """Return the item's placement (possibly a tombstone), or None if never placed.

        A strongly consistent read: it sees every ``place`` acknowledged before it.
        """
        if type(item_id) is not str or not item_id:
            check_text("item id", item_id)
        with self._recorder(namespace, placement_key(item_id), False) as rec:
            return await self._locate(namespace, item_id, rec)

    async def locate_many(self, namespace: str, item_ids: Iterable[str]
                          ) -> dict[str, Placement | None]:
        """Return the placement of each of ``item_ids`` (None: never placed), by item id.

        Each is read as ``locate`` reads it (strongly consistent), none before the call
        began; the reads are not one snapshot. Ids given twice are read once; none sends
        no request. Requests of ``batch_locate`` ids each (DynamoDB: BatchGetItem, 100)
        go out at once, bounded by ``connections``; ids a request left unread (throttled
        there, or over the response's size) are asked for again after a backoff, and
        Throttled is raised if some remain after a few tries. A request refused whole
        raises as ``locate`` does, and the first error raised stops every other request
        of the call. A store with no batched read (``batch_locate`` None: Azure Table
        Storage) sends one ``locate`` an item, bounded the same way.
        """
        if isinstance(item_ids, str | bytes) or not isinstance(item_ids, Iterable):
            raise InvalidInput(f"item ids must be an iterable of item ids, got {item_ids!r}")
        ids = list(dict.fromkeys(item_ids))
        for item_id in ids:
            if type(item_id) is not str or not item_id:
                check_text("item id", item_id)
        if type(namespace) is not str or not namespace:
            check_text("namespace", namespace)
        size = self.batch_locate
        gate = asyncio.Semaphore(self.connections or len(ids) or 1)

        async def one(part: list[str]) -> dict[str, Placement | None]:
            async with gate:
                if size is None:
                    return {part[0]: await self.locate(namespace, part[0])}
                return await self._read_batch(namespace, part)

        step = size or 1
        # the caller retries the whole read: batches left going would send (their
        # retries, those waiting for a connection) behind its back
        parts = await gather_or_cancel(one(ids[at:at + step])
                                       for at in range(0, len(ids), step))
        found: dict[str, Placement | None] = {}
        for part in parts:
            found.update(part)
        return found

    async def _read_batch(self, namespace: str, ids: list[str]) -> dict[str, Placement | None]:
        """One batch of ``locate_many``: its request, then its unread ids again.

        A first request refused whole raises, as ``locate`` would; once some were read,
        a later one refused whole leaves its ids unread for the next try.
        """
        found: dict[str, Placement | None] = {}
        for attempt in range(_UNREAD_TRIES):
            after = None
            try:
                with self._recorder(namespace, placement_key(ids[0]), False) as rec:
                    read, ids = await self._locate_many(namespace, ids, rec)
            except Throttled as exc:
                if not found or attempt + 1 == _UNREAD_TRIES:
                    raise
                read, after = {}, exc.retry_after
            found.update(read)
            if not ids:
                return found
            if attempt + 1 < _UNREAD_TRIES:
                wait = min(_UNREAD_CAP, _UNREAD_BASE * 2.0 ** attempt)
                await self.clock.sleep(max(_JITTER.uniform(wait / 2, wait), after or 0.0))
        raise Throttled(f"{self.uri}: {len(ids)} placements of {namespace!r} left unread "
                        f"after {_UNREAD_TRIES} tries of a batched read (first: item "
                        f"{ids[0]!r})", key=placement_key(ids[0]), reason="UnprocessedKeys")

    async def place(self, namespace: str, item_id: str, entry: StoredEntry | None, *,
                    version: int, expected: Placement | None,
                    token: str | None = None) -> float:
        """Atomically replace the item's entry with ``entry`` (None deletes it).

        ``expected`` is the item's placement exactly as ``locate`` returned it (None:
        never placed). The write applies only if the placement is still that one (the
        same version and token; in GSI mode also the same key, sort, version and token
        attributes, or their absence); otherwise ConditionFailed is raised and nothing
        changes. The old entry is removed, ``entry`` written, and the placement recorded
        at ``version`` (a tombstone when ``entry`` is None, which a stale first write
        cannot pass) with ``token`` (a fresh one when None) and, as its history, the
        tokens before it. ``version`` is the caller's ordering number, at least 1: a
        mover re-places an entry at its version, even over a row numbered higher that
        took no effect (a write's row in one store that the store it crosses from never
        confirmed, ``shardex.write.crossing``).

        The same place sent again after it applied (the same token, expected and entry)
        changes nothing more: it raises ConditionFailed, or returns as a success where
        the store recognises the token (DynamoDB's ClientRequestToken). Either way the
        write applied once. Returns the write units consumed. Raises InvalidInput, before
        any request, for an entry of another item, on a reserved or empty shard key,
        with attributes DynamoDB cannot store or over ``max_item_bytes``, a bad token, or
        a ``version`` below 1.
        """
        # the base's own: a store that overrides place is tried through it
        # (``__init_subclass__``), and calls this one
        outcome = await Store.try_place(self, namespace, item_id, entry, version=version,
                                        expected=expected, token=token)
        if isinstance(outcome, ShardexError):
            raise outcome
        return outcome

    async def try_place(self, namespace: str, item_id: str, entry: StoredEntry | None, *,
                        version: int, expected: Placement | None,
                        token: str | None = None) -> float | ShardexError:
        """``place``, its refusal returned rather than raised: the write units consumed,
        or the error ``place`` raises for a write the store did not apply (Throttled,
        ConditionFailed, any other ShardexError) where the store's ``_place`` returns it.

        For the write engine, which tries a throttled place again and again (thousands
        of times a second on a hot key): an error returned builds no traceback. A
        caller's mistake still raises InvalidInput, and a store may raise any refusal.
        """
        if type(item_id) is not str or not item_id:
            check_text("item id", item_id)
        if entry is not None and (self._checked.get(id(entry)) is not entry
                                  or entry.item_id != item_id):
            self._check_entry(item_id, entry)
            if len(self._checked) >= 16384:  # above the writes a busy client has in flight
                self._checked.clear()
            self._checked[id(entry)] = entry
        if expected is not None and (type(expected) is not Placement
                                     or expected.item_id != item_id):
            raise InvalidInput(f"expected placement of item {item_id!r} must be the Placement "
                               f"that locate returned, or None, got {expected!r}")
        if type(version) is not int or not 1 <= version <= MAX_VERSION:
            raise InvalidInput(f"version {brief(version)} of item {item_id!r} must be an "
                               f"integer >= 1 and below 10**38")
        if token is None:
            token = new_token()
        elif not is_token(token):
            raise InvalidInput(f"write token of item {item_id!r} must be 1 to 36 of A-Z, a-z, "
                               f"0-9 and '-', got {token!r}")
        key = entry.shard_key if entry is not None else placement_key(item_id)
        with self._recorder(namespace, key, True) as rec:
            refused = await self._place(namespace, item_id, entry, version, expected, token,
                                        rec)
            if refused is not None:
                rec.refused(refused)
                return refused
        return rec.written

    async def _through_place(self, namespace: str, item_id: str, entry: StoredEntry | None,
                             *, version: int, expected: Placement | None,
                             token: str | None = None) -> float | ShardexError:
        """``try_place`` of a store that overrides ``place``: its refusal caught."""
        try:
            return await self.place(namespace, item_id, entry, version=version,
                                    expected=expected, token=token)
        except InvalidInput:
            raise
        except ShardexError as exc:
            return exc

    def _check_entry(self, item_id: str, entry: Any) -> int:
        """Raise InvalidInput for an entry ``place`` refuses; return its size in bytes."""
        if type(entry) is not StoredEntry or entry.item_id != item_id \
                or type(entry.shard_key) is not str or not entry.shard_key \
                or is_reserved(entry.shard_key):
            raise InvalidInput(f"entry {entry!r} cannot be placed as item {item_id!r}: its item "
                               "id must match, its shard key be non-empty, not start with '#'")
        if type(entry.sort) is not str:
            raise InvalidInput(f"entry sort of item {item_id!r} must be text, got {entry.sort!r}")
        if not isinstance(entry.attrs, Mapping):
            raise InvalidInput(f"entry attrs of item {item_id!r} must be a mapping, "
                               f"got {type(entry.attrs).__name__}")
        check_attrs(entry.attrs, f"item {item_id!r} attrs", ENTRY_ATTRS_DEPTH,
                    rules=self.capabilities.values)
        size = entry_bytes(entry)
        stored, most = placement_bytes(entry, size), self.capabilities.max_item_bytes
        if stored > most:
            raise InvalidInput(f"item {item_id!r}: its entry is {size:,} bytes, {stored:,} as "
                               f"the placement record that holds it (with its versions and "
                               f"write tokens at their longest); the store holds items of at "
                               f"most {most:,} bytes")
        return size

    async def query(self, namespace: str, shard_key: str, *, after: Position | None,
                    descending: bool, limit: int, until: Position | None = None,
                    malformed: Malformed = "raise") -> QueryPage:
        """Return up to ``limit`` entries of ``shard_key`` strictly beyond ``after``.

        Entries come in ``(sort, item_id)`` order, descending if asked, up to ``until``
        (inclusive) if given: the store reads nothing beyond it (a listing's second
        phase, ``shardex.fanout``, reads only as far as its first has been read). A page
        may hold fewer than ``limit`` entries while ``resume`` is still set (a size-capped
        page, at most 1 MB); ``resume`` is None only when nothing lies beyond the page (up
        to ``until``). An empty range (``until`` not beyond ``after``) is an empty page
        without a request. An
        item the store holds that is not in the shape of an entry (something other
        than shardex wrote it) raises MalformedItem naming it and ``shard_key``, or with
        ``malformed="skip"`` is left out and reported in the page's ``skipped`` and on
        the meter (``Recorder.malformed``).
        """
        if type(limit) is not int or limit < 1:
            raise InvalidInput(f"query limit must be an integer >= 1, got {limit!r}")
        check_malformed(malformed)
        check_position("after", after)
        check_position("until", until)
        check_shard_key(shard_key)
        descending = bool(descending)
        if after is not None and until is not None and not beyond(until, after, descending):
            check_text("namespace", namespace)
            return QueryPage([], None)
        with self._recorder(namespace, shard_key, False, malformed == "skip") as rec:
            entries, resume = await self._query(namespace, shard_key, after, until,
                                                descending, limit, rec)
        return QueryPage(entries, resume, rec.read, tuple(rec.skipped))

    async def count(self, namespace: str, shard_key: str) -> int:
        """Return how many entries ``shard_key`` holds (every page of it is read)."""
        check_shard_key(shard_key)
        with self._recorder(namespace, shard_key, False) as rec:
            return await self._count(namespace, shard_key, rec)

    def check_shard_key(self, namespace: str, shard_key: str) -> None:
        """Raise InvalidKey if this store cannot hold entries of ``shard_key`` in index
        ``namespace`` (encoded, it passes the store's key limit). Not a request: a reshard
        asks before it routes writes and reads to the keys of a new layout."""
        check_shard_key(shard_key)
        self._check_shard_key(namespace, shard_key)

    def _check_shard_key(self, namespace: str, shard_key: str) -> None:  # noqa: B027
        """The store's own limit on a shard key's encoding (none by default)."""

    def check_namespace(self, namespace: str) -> None:  # noqa: B027
        """Raise InvalidKey if an index named ``namespace`` cannot live in this store (its
        name leaves no room in the store's keys for its records and placements). Not a
        request: an index asks as it is built. None by default."""

    def check_position(self, sort: str, item_id: str) -> None:
        """Raise InvalidKey if this store cannot hold an entry of ``item_id`` at ``sort``
        (encoded, its key passes the store's limit). Not a request: a write of a given
        sort asks before its first (it was refused after the placement read it begins
        with)."""
        check_text("sort value", sort, empty=True)
        check_text("item id", item_id)
        self._check_position(sort, item_id)

    def _check_position(self, sort: str, item_id: str) -> None:  # noqa: B027
        """The store's own limit on an entry's position key (none by default)."""

    def key_attributes(self, shard_key: str, sort: str | None,
                       item_id: str) -> dict[str, Any]:
        """Return the attributes an application adds to its own item to index it.

        Only stores that index the application's items (DynamoDB GSI mode) have them;
        the others raise CapabilityMissing. ``sort`` is required (text, '' for none)
        where shardex writes the sort attribute, and must be None where the sort
        attribute is the application's own (``capabilities.writes_sort`` False): only
        the shard key attribute is returned then. Not a request: nothing is metered.
        """
        check_shard_key(shard_key)
        if sort is not None:
            check_text("sort value", sort, empty=True)
        check_text("item id", item_id)
        return self._key_attributes(shard_key, sort, item_id)

    # -- records ---------------------------------------------------------------------

    async def get_record(self, namespace: str, key: str) -> Record | None:
        """Return the record ``key`` of ``namespace`` (strongly consistent), or None."""
        check_text("record key", key)
        with self._recorder(namespace, record_key(key), False) as rec:
            return await self._get_record(namespace, key, rec)

    async def put_record(self, namespace: str, key: str, body: Mapping[str, Any], *,
                         expected: int | None) -> int:
        """Write a record if its revision is ``expected`` (None: absent); return the new one.

        The new revision is ``(expected or 0) + 1``. Raises ConditionFailed, changing
        nothing, when another writer got there first; InvalidInput for a body that is
        not a JSON-like mapping or a bad ``expected``.
        """
        check_text("record key", key)
        check_revision("expected", expected, optional=True)
        if not isinstance(body, Mapping):
            raise InvalidInput(f"record {key!r} body must be a mapping, got {body!r}")
        check_document(body, f"record {key!r} of {namespace!r}",
                       self.capabilities.max_item_bytes)
        revision = (expected or 0) + 1
        with self._recorder(namespace, record_key(key), True) as rec:
            await self._put_record(namespace, key, body, revision, expected, rec)
        return revision

    async def indexes(self) -> list[str] | None:
        """The indexes this store holds, in name order, if it can tell without reading
        them all; None if it cannot (this default: a store that keeps no list of them).

        A DynamoDB table holds one index, which its owner record names (none yet: []); an
        Azure table and a Cosmos DB container tell theirs by a skip scan of their
        partition keys, a request an index; ``memory://`` by its own maps.
        """
        return None

    async def list_records(self, namespace: str, prefix: str = "") -> dict[str, Record]:
        """Return every record of ``namespace`` whose key starts with ``prefix``, by key.

        Strongly consistent; all pages are read (records are small and few: a reshard's
        checkpoints and leases).
        """
        check_text("record prefix", prefix, empty=True)
        with self._recorder(namespace, record_key(prefix), False) as rec:
            records = await self._list_records(namespace, prefix, rec)
        return dict(sorted(records.items()))

    async def delete_record(self, namespace: str, key: str, *, expected: int) -> None:
        """Delete the record ``key`` if its revision is ``expected`` (compare-and-set).

        Raises ConditionFailed, deleting nothing, when the record is absent or at
        another revision.
        """
        check_text("record key", key)
        check_revision("expected", expected, optional=False)
        with self._recorder(namespace, record_key(key), True) as rec:
            await self._delete_record(namespace, key, expected, rec)

    # -- the hooks a backend implements ------------------------------------------------

    @abc.abstractmethod
    async def _locate(self, namespace: str, item_id: str, rec: Recorder) -> Placement | None:
        """See ``locate``; arguments are checked."""

    async def _locate_many(self, namespace: str, item_ids: list[str], rec: Recorder
                           ) -> tuple[dict[str, Placement | None], list[str]]:
        """See ``locate_many``: one request of at most ``batch_locate`` distinct ids;
        return the placements it read (None: never placed) and the ids it left unread.

        Only stores that set ``batch_locate`` implement it.
        """
        raise CapabilityMissing(f"store {self.uri} has no batched read of placements")

    @abc.abstractmethod
    async def _place(self, namespace: str, item_id: str, entry: StoredEntry | None,
                     version: int, expected: Placement | None, token: str,
                     rec: Recorder) -> ShardexError | None:
        """See ``place``; arguments are checked. Report the units on ``rec``. A refusal
        is raised, or returned (``try_place``), which builds no traceback.

        The new placement's history is ``history_after(expected)``.
        """

    @abc.abstractmethod
    async def _query(self, namespace: str, shard_key: str, after: Position | None,
                     until: Position | None, descending: bool, limit: int,
                     rec: Recorder) -> tuple[list[StoredEntry], Position | None]:
        """See ``query``: return the page's entries and ``resume``; nothing beyond ``until``
        is read (``up_to`` cuts a page read past it, where the store cannot stop there).

        An item of the listing that is not in an entry's shape goes to
        ``rec.malformed(error, item_id)``, which raises or leaves it out.
        """

    @abc.abstractmethod
    async def _count(self, namespace: str, shard_key: str, rec: Recorder) -> int:
        """See ``count``; one ``rec.request()`` per page read."""

    def _key_attributes(self, shard_key: str, sort: str | None,
                        item_id: str) -> dict[str, Any]:
        """See ``key_attributes``; only stores that index the application's items override it."""
        raise CapabilityMissing(f"store {self.uri} writes its own entries: there are no key "
                                "attributes for an application to add to its items")

    @abc.abstractmethod
    async def _get_record(self, namespace: str, key: str, rec: Recorder) -> Record | None:
        """See ``get_record``."""

    @abc.abstractmethod
    async def _put_record(self, namespace: str, key: str, body: Mapping[str, Any],
                          revision: int, expected: int | None, rec: Recorder) -> None:
        """See ``put_record``: store ``body`` at ``revision`` if the record is at ``expected``."""

    @abc.abstractmethod
    async def _list_records(self, namespace: str, prefix: str,
                            rec: Recorder) -> dict[str, Record]:
        """See ``list_records``."""

    @abc.abstractmethod
    async def _delete_record(self, namespace: str, key: str, expected: int,
                             rec: Recorder) -> None:
        """See ``delete_record``."""
