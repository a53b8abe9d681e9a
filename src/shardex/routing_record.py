"""The routing record of an index: loaded from its store, held as a lease, changed by CAS.

The routing of index ``NAME`` is one record, ``routing``, in the namespace ``NAME`` of
the index's store, holding the routing document (``Routing.to_dict``), the routing's
*lease* in seconds (``"lease"``, ``DEFAULT_LEASE`` unless the record says otherwise)
and a revision. A change is a compare-and-set on the revision, so two writers cannot
both think they won. ``ShardedIndex`` and the ``shardex routing`` command read and write
it through ``RoutingRecord``.

**The lease.** A client reads the record at open and then every ``ttl`` seconds in the
background (and on use, when its copy is older than ``ttl``). A client whose last
successful read was *sent* more than ``lease`` seconds ago stops: reads, writes and
``key_attributes`` raise ``RoutingStale`` until a read succeeds again. So a routing
change acknowledged at time ``w`` is known to every client that acts after
``w + lease``: a client acting at ``t`` holds a copy read at some ``r > t - lease``,
and if ``t >= w + lease`` then ``r > w``, and that strongly consistent read saw the
change. A runner that changes a layout in steps (a reshard: read-both, write-new,
read-new, ...) therefore waits ``lease + margin`` after each step is acknowledged
before it takes the next, and no client ever acts on a state two steps behind; the
margin covers a request that was already in flight when the lease ran out (the
store's request timeout) and the drift between clocks' rates (monotonic clocks,
measured locally: no agreement on wall time is needed).

The routing an index was built with (``given``, else ``Routing()``) seeds the record
when the store has none, at open: every client then acts on a record, and so under the
one lease the runners wait out. (A client that found no record and held the implicit
routing under a lease of its own could outlast the first record a runner made: with its
lease longer than the record's, or its refresh interval, it placed writes on a layout
the runner had already moved readers away from.) Once a record exists it is the truth.
A differing ``given`` is logged, or refused with RoutingConflict when ``strict``, once,
at open: later refreshes follow the record silently, as a reshard elsewhere changes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from shardex.clock import Clock, LoopClock
from shardex.errors import (
    ConditionFailed,
    DamagedRouting,
    InvalidInput,
    InvalidRouting,
    MalformedItem,
    RoutingConflict,
    RoutingStale,
    ShardexError,
    brief,
)
from shardex.model.entries import new_token
from shardex.retry import RetryPolicy, call_with_retry
from shardex.routing import Routing
from shardex.stores.base import Store

__all__ = ["DEFAULT_LEASE", "MAX_LEASE", "ROUTING_RECORD", "RoutingRecord", "is_lease"]

T = TypeVar("T")
log = logging.getLogger("shardex")

ROUTING_RECORD = "routing"
DEFAULT_LEASE = 15.0
MAX_LEASE = 86_400.0  # a day: past it a stale client would act on an old layout for days
LEASE_FIELD = "lease"
# the token of the update that wrote the record: "did my update land?" is decided by it
TOKEN_FIELD = "token"


@dataclass(frozen=True, slots=True)
class _Loaded:
    routing: Routing
    revision: int | None  # None: no record is stored yet
    at: float  # when the read that loaded it was sent
    lease: float


def _lease(value: Any, where: str) -> float:
    if not is_lease(value):
        raise InvalidRouting(f"{where}: lease must be a number of seconds > 0 and at most "
                             f"{MAX_LEASE:,g}, got {brief(value)}")
    return float(value)


def is_lease(value: Any) -> bool:
    """True if ``value`` is a routing lease: seconds above 0, at most ``MAX_LEASE``."""
    return not isinstance(value, bool) and isinstance(value, int | float) \
        and 0 < value <= MAX_LEASE


class RoutingRecord:
    """The routing record of index ``index`` in ``store``, held as a lease.

    ``given`` seeds the record when the store has none (with ``lease`` seconds;
    ``Routing()``, every value on one shard key, when not given); once a record exists it
    is the truth (a differing ``given`` is logged at open, or refused with
    RoutingConflict when ``strict``). ``create=False`` stores no record: with none in the
    store the routing is ``Routing()``, held no longer than ``DEFAULT_LEASE`` (for tools
    that only look, and runners, whose first change creates the record). Store calls are
    retried with ``retry`` on ``clock``; a write that races another client's is re-read
    up to ``max_conflicts`` times.
    """

    def __init__(self, store: Store, index: str, *, given: Routing | None = None,
                 strict: bool = False, ttl: float = 5.0, lease: float = DEFAULT_LEASE,
                 clock: Clock | None = None, retry: RetryPolicy | None = None,
                 rng: random.Random | None = None, max_conflicts: int = 16,
                 create: bool = True) -> None:
        if isinstance(ttl, bool) or not isinstance(ttl, int | float) \
                or not 0 <= ttl <= MAX_LEASE:
            raise InvalidInput(f"routing_ttl must be a number of seconds from 0 to "
                               f"{MAX_LEASE:,g}, got {brief(ttl)}")
        try:
            self._default_lease = _lease(lease, "routing")
        except InvalidRouting as exc:
            raise InvalidInput(str(exc)) from None
        self.store = store
        self.index = index
        self._given = given
        self._create = create
        self._strict = strict
        self._ttl = float(ttl)
        self._clock: Clock = clock or LoopClock()
        self._retry = retry or RetryPolicy()
        self._rng = rng or random.Random()
        self._max_conflicts = max_conflicts
        self._loaded: _Loaded | None = None
        self._refreshing: asyncio.Future[Routing] | None = None
        self._stumbled: asyncio.Future[BaseException] | None = None  # its first failed try
        self._failure: BaseException | None = None  # why the last refresh failed

    def _retrying(self, call: Callable[[], Awaitable[T]],
                  stumbled: asyncio.Future[BaseException] | None = None
                  ) -> Coroutine[Any, Any, T]:
        """``call`` under the retry policy; ``stumbled`` is given the error of the first
        try that fails (a refresh's callers stop waiting for it then)."""
        if stumbled is None:
            return call_with_retry(call, self._retry, clock=self._clock, rng=self._rng)

        async def tried() -> T:
            try:
                return await call()
            except Exception as exc:
                if not stumbled.done():
                    stumbled.set_result(exc)
                raise

        return call_with_retry(tried, self._retry, clock=self._clock, rng=self._rng)

    @property
    def loaded(self) -> bool:
        return self._loaded is not None

    @property
    def routing(self) -> Routing:
        """The routing as last loaded; InvalidInput before the first ``load``."""
        if self._loaded is None:
            raise InvalidInput(f"the routing of index {self.index!r} is not loaded yet")
        return self._loaded.routing

    @property
    def loaded_at(self) -> float:
        """When the read that loaded the cached routing was sent (the clock's ``now``).

        A read that started from ``routing`` and ends before ``loaded_at + lease`` saw
        the stored routing at most one version past it (``shardex.reshard`` says why).
        """
        if self._loaded is None:
            raise InvalidInput(f"the routing of index {self.index!r} is not loaded yet")
        return self._loaded.at

    @property
    def revision(self) -> int | None:
        """The stored record's revision as last loaded (None: none stored)."""
        return None if self._loaded is None else self._loaded.revision

    @property
    def lease(self) -> float:
        """The routing's lease in seconds, as last loaded (the default before)."""
        return self._default_lease if self._loaded is None else self._loaded.lease

    @property
    def interval(self) -> float:
        """Seconds between background refreshes: the TTL, at most a third of the lease."""
        return min(self._ttl, self.lease / 3)

    def forget(self) -> None:
        """Drop the cached routing (the index closed)."""
        self._loaded = None
        self._failure = None

    async def stop(self) -> None:
        """Cancel a refresh still in flight and wait for it (the index closes)."""
        refreshing, self._refreshing = self._refreshing, None
        if refreshing is not None and not refreshing.done():
            refreshing.cancel()
            with contextlib.suppress(asyncio.CancelledError, ShardexError):
                await refreshing

    async def read(self, stumbled: asyncio.Future[BaseException] | None = None
                   ) -> tuple[Routing | None, int | None, float]:
        """Read the stored record once, without caching: (routing, revision, lease).

        A record that does not validate raises DamagedRouting (an InvalidRouting and a
        MalformedItem) naming the record and the field at fault, whatever its shape.
        ``stumbled`` is given the error of the first try that fails.
        """
        where = f"routing record of index {self.index!r} in {self.store.uri}"
        try:
            record = await self._retrying(
                lambda: self.store.get_record(self.index, ROUTING_RECORD), stumbled)
        except MalformedItem as exc:  # not a document at all (not JSON)
            raise DamagedRouting(str(exc)) from exc
        if record is None:
            return None, None, self._default_lease
        try:
            body = dict(record.body)
            lease = _lease(body.pop(LEASE_FIELD, self._default_lease), "routing")
            body.pop(TOKEN_FIELD, None)
            return Routing.from_dict(body), record.revision, lease
        except InvalidRouting as exc:
            raise DamagedRouting(f"{where}: {exc}") from exc
        except (TypeError, ValueError, KeyError, AttributeError, RecursionError,
                OverflowError) as exc:
            raise DamagedRouting(f"{where}: not a routing document ({type(exc).__name__}: "
                                 f"{str(exc)[:200]})") from None

    async def load(self, *, check_given: bool = False,
                   stumbled: asyncio.Future[BaseException] | None = None) -> Routing:
        """Read the record (creating it from ``given`` if there is none) and cache it.

        ``check_given`` compares the stored routing with ``given`` (at open); ``stumbled``
        is given the error of the first try that fails.
        """
        for _ in range(self._max_conflicts):
            sent = self._clock.now()
            stored, revision, lease = await self.read(stumbled)
            if stored is not None:
                if check_given:
                    self._check_given(stored)
                self._loaded = _Loaded(stored, revision, sent, lease)
                return stored
            if not self._create:
                # the implicit routing, held no longer than a runner's first record (the
                # default lease) is waited out
                self._loaded = _Loaded(Routing(), None, sent, min(lease, DEFAULT_LEASE))
                return self._loaded.routing
            given = self._given or Routing()
            document = self._document(given, lease)
            try:
                revision = await self._retrying(partial(
                    self.store.put_record, self.index, ROUTING_RECORD, document, expected=None),
                    stumbled)
            except ConditionFailed:
                continue  # another client created the record first: load theirs
            self._loaded = _Loaded(given, revision, sent, lease)
            return given
        raise ConditionFailed(f"could not load the routing record of index {self.index!r}")

    @staticmethod
    def _document(routing: Routing, lease: float, token: str | None = None) -> dict[str, Any]:
        document = {**routing.to_dict(), LEASE_FIELD: lease}
        if token is not None:
            document[TOKEN_FIELD] = token
        return document

    def _check_given(self, stored: Routing) -> None:
        given = self._given
        if given is None or (given.default, given.overrides, given.previous) == (
                stored.default, stored.overrides, stored.previous):
            return
        what = "refused (strict_routing)" if self._strict else "the stored routing is used"
        message = (f"index {self.index!r}: the routing given differs from the stored routing "
                   f"version {stored.version}; {what}. Change a live "
                   "index's layout through a reshard, not by editing the routing in code.")
        if self._strict:
            raise RoutingConflict(message)
        log.warning(message)

    def check_fresh(self, now: float | None = None) -> Routing:
        """Return the cached routing if its lease holds; RoutingStale otherwise.

        Synchronous: no request is made (``key_attributes`` is served from here).
        ``now`` is the clock's time when the caller read it itself (from another thread).
        """
        loaded = self._loaded
        if loaded is None:
            return self.routing  # raises: not loaded
        age = (self._clock.now() if now is None else now) - loaded.at
        if age >= loaded.lease:
            why = "" if self._failure is None else (
                f"; the last refresh failed: {type(self._failure).__name__}: {self._failure}")
            raise RoutingStale(
                f"index {self.index!r}: the routing was last read {age:.1f} s ago, longer "
                f"than its {loaded.lease:g} s lease, so the layout may have changed since; "
                f"nothing is read or written until a refresh succeeds{why}")
        return loaded.routing

    def served(self) -> Routing | None:
        """The cached routing when ``current`` would serve it without a read (younger than
        the TTL and the lease), else None: then await ``current``."""
        loaded = self._loaded
        if loaded is None:
            return None
        age = self._clock.now() - loaded.at
        return loaded.routing if age < self._ttl and age < loaded.lease else None

    async def current(self) -> Routing:
        """The routing to act on now: re-read first if older than the TTL.

        One refresh runs at a time; concurrent callers wait for it. If it fails, the
        cached routing serves while its lease holds; after that RoutingStale is raised.
        Within the lease callers wait for the refresh until one of its tries fails, not
        for its retries (which go on): a call made within the lease is not held past it.
        """
        loaded = self._loaded
        if loaded is None:
            return self.routing  # raises: not loaded
        age = self._clock.now() - loaded.at
        if age < self._ttl and age < loaded.lease:
            return loaded.routing
        refreshing, stumbled = self._running()
        if age < loaded.lease:
            await asyncio.wait((refreshing, stumbled), return_when=asyncio.FIRST_COMPLETED)
        if refreshing.done() or age >= loaded.lease:
            try:
                return await self._joined(refreshing)
            except ShardexError as exc:
                error: BaseException = exc
        else:
            error = stumbled.result()
        self._failure = error
        try:
            return self.check_fresh()
        except RoutingStale as stale:
            raise stale from error

    async def refresh(self) -> Routing:
        """Re-read the record now, joining a refresh already running."""
        return await self._joined(self._running()[0])

    def _running(self) -> tuple[asyncio.Future[Routing], asyncio.Future[BaseException]]:
        """The refresh in flight (started if none is) and what is given the error of its
        first try that fails."""
        if self._refreshing is None or self._refreshing.done():
            self._stumbled = asyncio.get_running_loop().create_future()
            self._refreshing = asyncio.ensure_future(self.load(stumbled=self._stumbled))
            self._refreshing.add_done_callback(self._ended)
        assert self._stumbled is not None
        return self._refreshing, self._stumbled

    def _ended(self, refreshing: asyncio.Future[Routing]) -> None:
        """Keep how a refresh ended that its callers may have stopped waiting for: why it
        failed, or that the last one did not."""
        if refreshing.cancelled():
            return
        error = refreshing.exception()
        if error is None or isinstance(error, ShardexError):
            self._failure = error
        else:
            log.error("index %r: refreshing the routing failed", self.index, exc_info=error)

    async def _joined(self, refreshing: asyncio.Future[Routing]) -> Routing:
        try:
            routing = await asyncio.shield(refreshing)
        finally:
            # a caller cancelled mid-read leaves the read to the next caller (or ``stop``)
            if self._refreshing is refreshing and refreshing.done():
                self._refreshing = None
        return routing  # its outcome is kept by ``_ended``, called before this resumes

    async def keep_fresh(self) -> None:
        """Refresh every ``interval`` seconds until cancelled (an open index runs this).

        A failed refresh is logged (once per kind of failure) and tried again at the
        next interval; the cached routing serves until its lease runs out.
        """
        if self._ttl <= 0:
            return  # every use refreshes
        while True:
            await self._clock.sleep(self.interval)
            before = self._failure
            try:
                await self.refresh()
            except ShardexError as exc:
                if type(exc) is not type(before):
                    log.warning("index %r: refreshing the routing failed: %s", self.index, exc)

    async def update(self, routing: Routing) -> None:
        """Store ``routing`` as the next version (compare-and-set on the revision).

        ``routing.version`` must be the cached version plus one; the lease is kept.
        Raises ConditionFailed if another writer changed the routing first (the cache
        is then re-read).
        """
        current = self.routing
        if routing.version != current.version + 1:
            raise InvalidRouting(
                f"new routing version must be {current.version + 1}, got {routing.version}")
        lease, token, expected = self.lease, new_token(), self.revision
        sent = self._clock.now()
        try:
            revision = await self._retrying(lambda: self.store.put_record(
                self.index, ROUTING_RECORD, self._document(routing, lease, token),
                expected=expected))
        except ConditionFailed:
            # Either another writer got there first, or an earlier try that looked
            # failed did land: the token in the record tells, never equal content.
            record = await self._retrying(
                lambda: self.store.get_record(self.index, ROUTING_RECORD))
            if record is None or record.body.get(TOKEN_FIELD) != token:
                await self.load()
                raise ConditionFailed(
                    f"index {self.index!r}: another writer changed the routing first "
                    f"(now version {self.routing.version})") from None
            revision = record.revision
        self._loaded = _Loaded(routing, revision, sent, lease)


async def stop(task: asyncio.Task[None] | None) -> None:
    """Cancel a background task (``keep_fresh``) and wait until it has stopped."""
    if task is None or task.done():
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
