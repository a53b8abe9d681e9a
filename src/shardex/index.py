"""ShardedIndex: the public object that writes and reads the entries of an index.

Writes follow the routing: each entry of a logical key goes to one of its shard keys,
and the store records where (the item's *placement*), so ``move`` and ``delete`` find
the entry whatever the strategy. Every write has a token and is a compare-and-set on
the placement as located: a write that raced another is re-planned, a try that failed
ambiguously is resolved by its token before anything else, and a late write carrying
an older ``version`` never overwrites a newer entry or brings back a deleted one. What
to write, and every next step, is decided by the pure write machine of ``shardex.write``,
carried out by its driver: a write returns, or raises an error that means it did not
apply, or raises OutcomeUnknown; and no write reported ok is hidden by a reshard,
however long it waited or paused before it landed (``shardex.write`` says how). Reads
(``shardex.reads``, the base class) fan out over every shard key the routing names in
its state and merge; they are complete or they raise. The routing itself is a
``RoutingRecord`` (``shardex.routing_record``), held as a lease.

Admission (``admission=``, ``shardex.admission``): every write is admitted for its
logical key's budget before it reaches the store, charged the write units of what it
writes, and every page, scan or count one unit per shard key it reads; ``priority=``
on each call says whose requests a short budget serves first. ``adaptive=`` paces the
requests to each shard key (AIMD) and lets the pacing stand in for the retry loop's
backoff on throttles. Tiers (``tiers=``, ``shardex.tiers``): a value whose policy names
a tier is written and read in that tier's store.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import replace
from types import TracebackType
from typing import Any, Literal, TypeVar

from shardex.admission import AdaptiveRate, Admission, AdmissionPolicy, Priority
from shardex.admission.adaptive import gates, send_rates
from shardex.admission.policy import PRIORITIES
from shardex.adopted import follow as follow_adoption
from shardex.capacity import Ceiling, entry_bytes, write_units
from shardex.clock import Clock, LoopClock
from shardex.cursor import CursorCodec
from shardex.errors import (
    InvalidInput,
    InvalidRouting,
    ReshardRefused,
    Throttled,
    Unavailable,
    brief,
)
from shardex.fanout import FanOut
from shardex.heatmeter.meter import HeatMeter
from shardex.heatmeter.view import HotView
from shardex.hedging import HedgePolicy
from shardex.keys import (
    validate_item_id,
    validate_sort,
    validate_value,
)
from shardex.model.entries import MAX_VERSION, StoredEntry, is_token, new_token
from shardex.model.values import ValueRules, check_attrs, owned_attrs
from shardex.reads import Entry, IndexReads, Page
from shardex.retry import RetryPolicy, call_with_retry
from shardex.routing import Routing, Turns
from shardex.routing_record import DEFAULT_LEASE, MAX_LEASE, RoutingRecord, is_lease, stop
from shardex.stores import open_store
from shardex.stores.base import Malformed, Store, check_malformed
from shardex.tierreads import CrossReads, TierReads
from shardex.tiers import TierStores
from shardex.write import Delete, Job, Move, Put, Relocate, WriteEngine, WriteRequest
from shardex.write.decide import refiles, target_key

__all__ = ["Entry", "Page", "ShardedIndex"]

T = TypeVar("T")
log = logging.getLogger("shardex")

_ADAPTIVE = HedgePolicy()


class ShardedIndex(IndexReads):
    """A sharded index named ``name`` on ``store`` (a Store or a store URI).

    ``routing`` (``Routing()`` when not given: every value on one shard key) seeds the
    index's routing record when the store has none, at open (with a lease of
    ``routing_lease`` seconds); ``create_record=False`` stores none (tools that only
    look; ``shardex.routing_record``). Once a record exists it is the truth (a differing
    ``routing`` is logged at open, or refused there with RoutingConflict when
    ``strict_routing``). An open index re-reads it every ``routing_ttl`` seconds in the
    background, so a reshard started elsewhere is seen, and refuses to read or write
    with RoutingStale when it has not read it successfully for longer than the lease
    (``shardex.routing_record`` says why). Use ``async with index:``.
    ``meter=True`` subscribes a ``HeatMeter`` to the store's events (or pass one built
    on the same store) for ``index.heat()``. ``max_concurrency`` bounds the shard reads in
    flight at once; None (the default) sends as many as the store's client carries at
    once (``Store.connections``: its connection pool, 64 in the DynamoDB clients shardex
    builds, 100 for Azure; no bound on memory://), so a fan-out of 1,024 shard keys is
    not read in waves of 64. ``seed`` seeds the index's one random
    generator (backoff jitter, random shards, round-robin offsets). Shard reads are
    hedged by default (``HedgePolicy()``: adaptive delay, at most 5% extra requests);
    ``hedge=None`` turns hedging off. ``cursor_secret`` (non-empty bytes) makes cursors
    unforgeable.

    ``admission`` (an ``AdmissionPolicy``, kept in this process on the index's clock, or
    an ``Admission`` the caller opens, e.g. on ``SharedBudgets``) admits each request
    before it reaches the store; ``adaptive`` (True or an ``AdaptiveRate``) paces the
    requests to each shard key. ``tiers`` maps tier names to the Store or store URI of
    each tier a policy may name (``ShardPolicy(tier=...)``); the index opens and closes
    them with its own store. Bad arguments raise InvalidInput naming the field, a
    routing that names a tier not given InvalidRouting.

    ``malformed``: what a listing (query, scan) does with an item the store holds that
    is not in an entry's shape (in DynamoDB GSI mode, an item the application wrote with
    a version attribute that is not a number, say): ``"raise"`` (the default) raises
    MalformedItem naming the item and the shard key; ``"skip"`` leaves it out and
    reports it, on ``Page.skipped``, in the log, and on the store's meter
    (``store.stats().skipped``, the metrics' ``shardex_skipped_items``).
    """

    def __init__(self, store: Store | str, name: str, routing: Routing | None = None, *,
                 retry: RetryPolicy | None = None, hedge: HedgePolicy | None = _ADAPTIVE,
                 max_concurrency: int | None = None, routing_ttl: float = 5.0,
                 routing_lease: float = DEFAULT_LEASE,
                 cursor_secret: bytes | None = None, strict_routing: bool = False,
                 max_conflicts: int = 16, clock: Clock | None = None,
                 seed: int | None = None, meter: bool | HeatMeter = False,
                 admission: AdmissionPolicy | Admission | None = None,
                 adaptive: bool | AdaptiveRate = False,
                 tiers: Mapping[str, Store | str] | None = None,
                 malformed: Malformed = "raise", create_record: bool = True) -> None:
        if isinstance(store, str):
            store = open_store(store)
        elif not isinstance(store, Store):
            raise InvalidInput(f"store must be a shardex Store or a store URI, got "
                               f"{brief(store)}")
        if clock is not None and not all(callable(getattr(clock, method, None))
                                         for method in ("now", "wall", "sleep")):
            raise InvalidInput(f"clock must be a shardex Clock (now, wall and sleep), got "
                               f"{brief(clock)}")
        self._store = store
        self._malformed = check_malformed(malformed)
        try:
            self.name = validate_value(name)
        except InvalidInput as exc:
            raise InvalidInput(f"index name: {exc}") from exc
        if routing is not None and not isinstance(routing, Routing):
            raise InvalidRouting(f"routing must be a shardex.Routing, got {type(routing).__name__}")
        for option, number in (("max_concurrency", max_concurrency),
                               ("max_conflicts", max_conflicts)):
            if (number is not None or option != "max_concurrency") and (
                    isinstance(number, bool) or not isinstance(number, int) or number < 1):
                raise InvalidInput(f"{option} must be an integer >= 1, got {number!r}")
        for option, kind in (("retry", RetryPolicy), ("hedge", HedgePolicy)):
            given = retry if option == "retry" else hedge
            if given is not None and not isinstance(given, kind):
                raise InvalidInput(f"{option} must be a shardex.{kind.__name__} or None, "
                                   f"got {given!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise InvalidInput(f"seed must be an integer or None, got {seed!r}")
        if not is_lease(routing_lease):
            raise InvalidInput(f"routing_lease must be a number of seconds above 0, at most "
                               f"{MAX_LEASE:,g}, got {brief(routing_lease)}")
        if meter is True:
            meter = HeatMeter(self._store, clock=clock)
        elif meter is not False and not (isinstance(meter, HeatMeter)
                                         and meter.store is self._store):
            raise InvalidInput("meter must be True, False or a HeatMeter on the index's store")
        self._meter = meter or None
        self._retry = retry or RetryPolicy()
        self._clock: Clock = clock or LoopClock()
        self._tiers = TierStores(self._store, tiers)
        for tier, each in self._tiers:
            each.check_namespace(self.name)  # a name no key of a store has room for
            if tier is not None and self._meter is not None:
                self._meter.watch(each, tier)  # a value on a tier is heat of the index too
        self._keeps_entries = any(store.keeps_entries for _, store in self._tiers)
        self._max_conflicts = max_conflicts
        if routing is not None:
            self._tiers.check(routing)
        self._admission, self._owns_admission = Admission.given(admission, self._clock)
        self._gates = gates(adaptive, (tier for tier, _ in self._tiers), self._clock)
        self._rng = random.Random(seed)
        self._turns = Turns(self._rng)
        # the routing record is read whatever the writes' policy leaves to the caller
        record_retry = replace(self._retry, retry_on=tuple(
            {*self._retry.retry_on, Throttled, Unavailable}))
        self._record = RoutingRecord(self._store, self.name, given=routing,
                                     strict=strict_routing, ttl=routing_ttl,
                                     lease=routing_lease, clock=self._clock,
                                     retry=record_retry, rng=self._rng,
                                     max_conflicts=max_conflicts, create=create_record)
        self._engine = WriteEngine(
            dict(self._tiers), self.name, record=self._record, topology=self._tiers.topology(),
            retry=self._retry, clock=self._clock, rng=self._rng, max_conflicts=max_conflicts,
            gates={tier: gate for tier, (gate, _) in self._gates.items()})
        self._fanouts: dict[str | None, FanOut] = {}
        self._tier_reads: TierReads | None = None
        self._refresher: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._codec = CursorCodec(self.name, cursor_secret)
        self._hedge = hedge
        self._max_concurrency = max_concurrency
        self._fanout: FanOut | None = None
        # the calls under way (writes, and reads other than scans), which close() lets end
        self._calls = 0
        self._drained: asyncio.Event | None = None
        self._closing = False
        # readers of the index an adoption moves from, by its kind and name
        self._sources: dict[tuple[str, str], tuple[Store, FanOut]] = {}
        self._sources_lock = asyncio.Lock()

    @property
    def store(self) -> Store:
        return self._store

    @property
    def tiers(self) -> dict[str, Store]:
        """The store of each tier, by name."""
        return {name: store for name, store in self._tiers if name is not None}

    @property
    def admission(self) -> Admission | None:
        """The admission gate (``admission.counts()`` says what it did), or None."""
        return self._admission

    def send_rates(self) -> dict[str, float | None]:
        """The adaptive send rate of each shard key written (``adaptive=``), units a second.

        None for a key not paced (never throttled); empty without ``adaptive``.
        Keys of a tier are prefixed ``tier:``.
        """
        return send_rates(self._gates)

    @property
    def meter(self) -> HeatMeter | None:
        """The heat meter (``meter=True``), or None."""
        return self._meter

    def heat(self, top: int = 10, *, ceiling: str | float | Ceiling | None = None) -> HotView:
        """Return the ``top`` logical keys by peak units a second, against ``ceiling``: by
        default each shard key against its store's partition ceiling (DynamoDB's, Azure
        Table Storage's, Cosmos DB's; a tier's store for a value on a tier).

        Needs metering (``meter=True``); raises InvalidInput otherwise.
        ``index.meter.snapshot()`` has every counter.
        """
        if self._meter is None:
            raise InvalidInput(f"index {self.name!r} is not metered: build it with meter=True")
        return self._meter.hot(top, ceiling=ceiling)

    # -- lifecycle -------------------------------------------------------------------

    async def open(self) -> None:
        """Open the store and load (or create) the index's routing record (nothing, if open).

        A throttled or unavailable probe of the store is tried again under the index's
        retry policy, as every other request is.
        """
        if self._fanout is not None:
            return  # open already: a second open would leave a second refresher running
        await call_with_retry(self._store.open, self._retry, clock=self._clock, rng=self._rng)
        opened: list[Callable[[], Awaitable[None]]] = [self._store.close]
        try:
            await self._tiers.open()
            opened.append(self._tiers.close)
            if self._admission is not None and self._owns_admission:
                await self._admission.open()
                opened.append(self._admission.close)
            for tier, tier_store in self._tiers:
                self._fanouts[tier] = FanOut(
                    tier_store, self.name, retry=self._retry, hedge=self._hedge,
                    max_concurrency=self._max_concurrency, clock=self._clock, rng=self._rng,
                    gate=self._gates[tier][1] if self._gates else None,
                    malformed=self._malformed)
            self._fanout = self._fanouts[None]
            self._tier_reads = TierReads(self._tiers, self._fanouts, self._crossing)
            routing = await self._record.load(check_given=True)
            self._tiers.check(routing)
            if routing.adoption is not None:
                follow_adoption(self._store, routing.adoption)
        except BaseException:
            for close in reversed(opened):
                await close()
            self._fanout, self._fanouts, self._tier_reads = None, {}, None
            raise
        self._refresher = asyncio.ensure_future(self._record.keep_fresh())
        self._loop = asyncio.get_running_loop()
        log.info("index %r open on %s, routing version %d", self.name, self._store.uri,
                 self._record.routing.version)

    async def close(self) -> None:
        """Close the index once the calls under way have ended (each with its true
        outcome: closed beneath them, they failed with the closed client's errors, or
        ended OutcomeUnknown); a call made meanwhile is refused."""
        if self._fanout is None or self._closing:
            return
        self._closing = True
        try:
            if self._calls:
                self._drained = asyncio.Event()
                await self._drained.wait()
        finally:
            self._drained = None
            self._closing = False
        if self._fanout is not None:
            self._fanout = None
            refresher, self._refresher = self._refresher, None
            await stop(refresher)
            sources, self._sources = self._sources, {}
            for source, _ in sources.values():
                await source.close()
            await self._record.stop()
            self._record.forget()
            try:
                for tier_fanout in self._fanouts.values():
                    await tier_fanout.close()
            finally:
                # the tier reads call back into this index: dropped, no cycle outlives it
                # (a run's whole store would wait for the garbage collector)
                self._fanouts, self._tier_reads = {}, None
                if self._admission is not None and self._owns_admission:
                    await self._admission.close()
                await self._tiers.close()
                await self._store.close()

    async def __aenter__(self) -> ShardedIndex:
        await self.open()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    def _open(self) -> bool:
        return self._fanout is not None

    def _reader(self) -> FanOut:
        if self._fanout is None:
            raise InvalidInput(f"index {self.name!r} is not open; use 'async with index:'")
        return self._fanout

    def _retrying(self, call: Callable[[], Awaitable[T]]) -> Coroutine[Any, Any, T]:
        # a plain function: one coroutine frame fewer on every request
        return call_with_retry(call, self._retry, clock=self._clock, rng=self._rng)

    # -- routing ---------------------------------------------------------------------

    @property
    def routing(self) -> Routing:
        """The routing this client last loaded (see ``refresh_routing``)."""
        self._reader()
        return self._record.routing

    @property
    def routing_lease(self) -> float:
        """The routing's lease in seconds, as the routing record says."""
        return self._record.lease

    async def refresh_routing(self) -> Routing:
        """Re-read the routing record now and return it."""
        self._reader()
        return await self._record.refresh()

    async def _routing_now(self) -> Routing:
        self._reader()
        return await self._record.current()

    async def update_routing(self, routing: Routing) -> None:
        """Refused: a stored layout changes only through the reshard states.

        Every client caches the routing, and storing another layout under them would
        hide the entries they keep writing to the old one (and those already there).
        Raises ReshardRefused, changing nothing: run ``shardex reshard start`` (or
        ``shardex.reshard.Resharder``), which moves entries through states that keep
        every one readable.
        """
        self._reader()
        if not isinstance(routing, Routing):
            raise InvalidRouting(f"routing must be a shardex.Routing, got {brief(routing)}")
        raise ReshardRefused(
            f"index {self.name!r}: a stored routing changes only through the reshard states, "
            "which keep every entry readable while clients cached the old layout; storing "
            f"routing version {routing.version} here would hide entries. Change the layout "
            "with 'shardex reshard start' (shardex.reshard.Resharder in Python)")

    def _fresh_key(self, routing: Routing, value: str, item_id: str) -> str:
        return routing.shard_key(value, item_id, rng=self._rng, turns=self._turns)

    def key_attributes(self, value: str, item_id: str, sort: str | None = None, *,
                       current: str | None = None) -> dict[str, Any]:
        """Return the attributes that index an application's own item under ``value``.

        For stores that index the application's items (DynamoDB GSI mode): add them to
        the item the application writes, e.g. ``{"status_shard": "PENDING#3",
        "status_sort": ...}``. ``sort`` is required (``''`` for none) where shardex writes
        the sort attribute, so an item is never re-filed with a blank sort; where the
        sort attribute is the application's own (``sort_owner=application``), pass none:
        only the shard key attribute is returned. ``current`` is the item's shard key
        attribute as the application read it (None: none, or not read): while a reshard
        reads both layouts, an item already on a key of either keeps it, as shardex's own
        writes keep it (re-filed on the other layout, a concurrent listing could miss
        it). Synchronous and no request: the shard
        key follows the routing the index keeps fresh in the background, and
        RoutingStale is raised when that copy is older than the routing's lease. Raises
        CapabilityMissing on stores that write their own entries, InvalidKey for a
        value, item id or sort that cannot be stored.
        """
        value, item_id = validate_value(value), validate_item_id(item_id)
        if sort is not None:
            sort = validate_sort(sort)
        self._reader()
        try:
            routing = self._record.check_fresh()
        except RuntimeError as exc:
            # called from another thread (an application's worker): the loop the index
            # runs on keeps the time its clock reads
            if self._loop is None or not isinstance(self._clock, LoopClock):
                raise InvalidInput("key_attributes reads the index's clock: call it from the "
                                   "event loop the index runs on") from exc
            routing = self._record.check_fresh(self._loop.time())
        if routing.adoption is not None:
            follow_adoption(self._store, routing.adoption)
        if current is not None and type(current) is not str:
            raise InvalidInput(f"current must be the item's shard key attribute (text) or "
                               f"None, got {brief(current)}")
        shard_key = target_key(routing, value, self._fresh_key(routing, value, item_id),
                               current, refile=refiles(routing, self._record.lease,
                                                       self._clock.wall()))
        return self._store.key_attributes(shard_key, sort, item_id)

    # -- writes ----------------------------------------------------------------------

    def _check_sort(self, sort: str | None, item_id: str) -> str | None:
        """``sort`` as a plain str, checked (None as it is)."""
        if sort is None:
            return None
        sort = validate_sort(sort)
        if not self._store.capabilities.writes_sort:
            raise InvalidInput(f"sort {sort!r}: the sort attribute of {self._store.uri} is the "
                               "application's own, which shardex reads and never writes; "
                               "leave sort out (the application sets it)")
        if not self._tiers.names:  # with tiers, the store it lands in says, as it writes
            self._store.check_position(sort, item_id)
        return sort

    # -- tiers and admission ---------------------------------------------------------

    def _crossing(self, routing: Routing, value: str) -> CrossReads | None:
        """The value's reads while a reshard moves it between tiers, or None."""
        tiers = self._tiers.crossing(routing, value)
        if tiers is None:
            return None
        origin, other = tiers
        return CrossReads(value, self._tiers.store(origin), self._tiers.store(other),
                          self.name, retry=self._retry, clock=self._clock, rng=self._rng)

    async def _admit(self, value: str, units: float, op: Literal["read", "write"],
                     priority: Priority) -> None:
        if priority not in PRIORITIES:
            raise InvalidInput(f"priority must be one of {', '.join(PRIORITIES)}, "
                               f"got {priority!r}")
        if self._admission is not None:
            await self._admission.admit(value, units=units, op=op, priority=priority)

    def _job(self, value: str, item_id: str, plan: Callable[[Routing], WriteRequest],
             what: str, token: str | None, other: str | None = None) -> Job:
        """One logical write, as the write engine takes it (``token`` None: a new one)."""
        if token is None:
            token = new_token()
        elif not is_token(token):
            raise InvalidInput(f"token must be 1 to 36 of A-Z, a-z, 0-9 and '-', got {token!r}")
        return Job(item_id, value, other, plan,
                   lambda routing, of: self._fresh_key(routing, of, item_id), what, token)

    async def _write(self, job: Job, *, units: float, priority: Priority) -> bool:
        """Admit, then carry out one logical write (``shardex.write``)."""
        self._begin()
        try:
            await self._admit(job.value, units, "write", priority)
            return (await self._engine.write(job)).result
        finally:
            self._ended()

    async def put(self, value: str, item_id: str, *, sort: str | None = None,
                  attrs: Mapping[str, Any] | None = None, version: int | None = None,
                  priority: Priority = "normal", token: str | None = None) -> bool:
        """Write the entry of ``item_id`` under ``value`` (replacing any entry it had).

        ``sort`` None keeps the sort the item's entry has ('' for a new entry).
        ``version``, when given, orders writes: the write is skipped (returns False) if
        the item already carries this version or a newer one, even if it was deleted.
        Returns True when the entry was written. Every error means the write did not
        apply, except OutcomeUnknown (it may have; see the README's Writes section).
        Raises InvalidKey for a value, item id or sort that cannot be stored,
        InvalidInput for attrs the store cannot hold, Throttled when retries are
        exhausted, RoutingStale when the routing could not be refreshed within its lease,
        AdmissionRejected when admission refused it (``priority``: ``low``, ``normal`` or
        ``high``), CapabilityMissing when the item has its entry on another tier.
        ``token`` (1 to 36 of ``A-Z a-z 0-9 -``, unique to this write) is the write's
        identity, which the item's placement carries once it applied (default: a new one).
        """
        value, item_id = validate_value(value), validate_item_id(item_id)
        sort = self._check_sort(sort, item_id)
        fields = _attrs(attrs, self._store.capabilities.values)
        _check_version(version)
        units = write_units(entry_bytes(StoredEntry(value, sort or "", item_id, fields)))
        return await self._write(self._job(
            value, item_id, lambda routing: Put(value, item_id, sort, fields, version,
                                                self._fresh_key(routing, value, item_id)),
            f"put of {item_id!r} under {value!r}", token), units=units, priority=priority)

    async def move(self, item_id: str, *, old: str, new: str, sort: str | None = None,
                   attrs: Mapping[str, Any] | None = None, version: int | None = None,
                   priority: Priority = "normal", token: str | None = None) -> bool:
        """Move the entry of ``item_id`` from ``old`` to ``new`` in one atomic write.

        ``sort`` and ``attrs`` default to the entry's own. Raises ConditionFailed if the
        item has no entry under ``old`` (another client's move got there first, say),
        CapabilityMissing if ``old`` and ``new`` are on different tiers; admission
        charges ``new``. See ``put`` for ``version``, ``token`` and the other errors.
        """
        item_id, old, new = validate_item_id(item_id), validate_value(old), validate_value(new)
        sort = self._check_sort(sort, item_id)
        fields = None if attrs is None else _attrs(attrs, self._store.capabilities.values)
        _check_version(version)
        units = write_units(entry_bytes(StoredEntry(new, sort or "", item_id, fields or {})))
        return await self._write(self._job(
            new, item_id, lambda routing: Move(item_id, old, new, sort, fields, version,
                                               self._fresh_key(routing, new, item_id)),
            f"move of {item_id!r} from {old!r} to {new!r}", token, other=old),
            units=units, priority=priority)

    async def delete(self, value: str, item_id: str, *, version: int | None = None,
                     priority: Priority = "normal", token: str | None = None) -> bool:
        """Delete the entry of ``item_id`` under ``value``; False if it has none there.

        Of two clients deleting the same entry at once, one gets True and the other
        False. See ``put`` for ``version``, ``token`` and the errors.
        """
        value, item_id = validate_value(value), validate_item_id(item_id)
        _check_version(version)
        return await self._write(self._job(
            value, item_id, lambda routing: Delete(value, item_id, version),
            f"delete of {item_id!r} under {value!r}", token), units=1.0, priority=priority)

    async def relocate(self, item_id: str, *, value: str, source: str, reshard: str,
                       generation: int, to: str | None = None) -> str | None:
        """Move the entry of ``item_id`` under ``value`` from ``source`` to where writes go now.

        A reshard's mover calls it, for generation ``generation`` of reshard ``reshard``:
        the entry keeps its version and is re-placed only while the routing is in that
        generation and a state where entries move, the entry still on the shard key
        ``source`` and not already where the layout writes follow would put it,
        conditioned on its placement as located, so an application write racing it wins
        or is planned again on top. ``to`` is the key to land on where that layout lets
        a write pick among its keys (random, round robin: the mover picks, to pace the
        key before it sends); ignored where the layout hashes, or not one of its keys.
        Returns the shard key it moved the entry to, None if there was nothing to move;
        errors as ``put``.
        """
        item_id, value = validate_item_id(item_id), validate_value(value)
        self._reader()

        def landing(routing: Routing) -> str:
            policy = routing.writing.policy(value)
            if to is not None and policy.strategy != "hash" and policy.has_key(value, to):
                return to
            return self._fresh_key(routing, value, item_id)

        done = await self._engine.write(self._job(
            value, item_id, lambda routing: Relocate(
                item_id, value, source, landing(routing), reshard, generation),
            f"move of {item_id!r} off {source!r}", None))
        return done.shard_key if done.result else None

def _check_version(version: int | None) -> None:
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)
                                or not 1 <= version <= MAX_VERSION):
        raise InvalidInput(f"version must be an integer from 1 to 10**38 - 1, "
                           f"got {brief(version)}")


def _attrs(attrs: Mapping[str, Any] | None, rules: ValueRules) -> dict[str, Any]:
    if attrs is None:
        return {}
    if not isinstance(attrs, Mapping):
        raise InvalidInput(f"attrs must be a mapping, got {type(attrs).__name__}")
    check_attrs(attrs, rules=rules)
    return owned_attrs(attrs)  # the write's own: the caller may change its dict meanwhile


async def store_routing(index: ShardedIndex, routing: Routing) -> None:
    """Store ``routing`` as ``index``'s next routing version (compare-and-set).

    Not for applications (``ShardedIndex.update_routing`` refuses): the step of a
    migration's runner (``shardex.reshard``, ``shardex.adopt``), which decides each
    routing it stores from the states, or of ``shardex routing set`` on an index that
    has no routing record yet. ``routing.version`` must be the stored version plus one;
    ConditionFailed if another writer changed the routing first.
    """
    index._reader()
    await index._record.update(routing)
