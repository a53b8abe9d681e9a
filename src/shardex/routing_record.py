"""The routing record of an index: loaded from its store, cached with a TTL, changed by CAS.

The routing of index ``NAME`` is one record, ``routing``, in the namespace ``NAME`` of
the index's store, holding the routing document (``Routing.to_dict``) and a revision.
Every client caches it for ``ttl`` seconds, so a change made elsewhere (a reshard step)
is seen within that time; a change is a compare-and-set on the revision, so two writers
cannot both think they won. ``ShardedIndex`` and the ``shardex routing`` command read and
write it through ``RoutingRecord``.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from shardex.clock import Clock, LoopClock
from shardex.errors import ConditionFailed, InvalidInput, InvalidRouting, RoutingConflict
from shardex.retry import RetryPolicy, call_with_retry
from shardex.routing import Routing
from shardex.stores.base import Store

__all__ = ["ROUTING_RECORD", "RoutingRecord"]

T = TypeVar("T")
log = logging.getLogger("shardex")

ROUTING_RECORD = "routing"


@dataclass(frozen=True, slots=True)
class _Loaded:
    routing: Routing
    revision: int | None  # None: no record is stored yet
    at: float


class RoutingRecord:
    """The routing record of index ``index`` in ``store``.

    ``given`` seeds the record when the store has none; once a record exists it is the
    truth (a differing ``given`` is logged, or refused with RoutingConflict when
    ``strict``). Store calls are retried with ``retry`` on ``clock``; a write that races
    another client's is re-read up to ``max_conflicts`` times.
    """

    def __init__(self, store: Store, index: str, *, given: Routing | None = None,
                 strict: bool = False, ttl: float = 5.0, clock: Clock | None = None,
                 retry: RetryPolicy | None = None, rng: random.Random | None = None,
                 max_conflicts: int = 16) -> None:
        if ttl < 0:
            raise InvalidInput(f"routing_ttl must not be negative, got {ttl}")
        self.store = store
        self.index = index
        self._given = given
        self._strict = strict
        self._ttl = ttl
        self._clock: Clock = clock or LoopClock()
        self._retry = retry or RetryPolicy()
        self._rng = rng or random.Random()
        self._max_conflicts = max_conflicts
        self._loaded: _Loaded | None = None
        self._refreshing: asyncio.Future[Routing] | None = None

    def _retrying(self, call: Callable[[], Awaitable[T]]) -> Coroutine[Any, Any, T]:
        return call_with_retry(call, self._retry, clock=self._clock, rng=self._rng)

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
    def revision(self) -> int | None:
        """The stored record's revision as last loaded (None: none stored)."""
        return None if self._loaded is None else self._loaded.revision

    def forget(self) -> None:
        """Drop the cached routing (the index closed)."""
        self._loaded = None

    async def read(self) -> tuple[Routing | None, int | None]:
        """Read the stored record once, without caching or seeding: (routing, revision)."""
        record = await self._retrying(lambda: self.store.get_record(self.index, ROUTING_RECORD))
        if record is None:
            return None, None
        try:
            return Routing.from_dict(dict(record.body)), record.revision
        except InvalidRouting as exc:
            raise InvalidRouting(
                f"routing record of index {self.index!r} in {self.store.uri}: {exc}") from exc

    async def load(self) -> Routing:
        """Read the record (creating it from ``given`` if there is none) and cache it."""
        for _ in range(self._max_conflicts):
            stored, revision = await self.read()
            if stored is not None:
                self._check_given(stored)
                self._loaded = _Loaded(stored, revision, self._clock.now())
                return stored
            if self._given is None:
                self._loaded = _Loaded(Routing(), None, self._clock.now())
                return self._loaded.routing
            given, document = self._given, self._given.to_dict()
            try:
                revision = await self._retrying(partial(
                    self.store.put_record, self.index, ROUTING_RECORD, document, expected=None))
            except ConditionFailed:
                continue  # another client created the record first: load theirs
            self._loaded = _Loaded(given, revision, self._clock.now())
            return given
        raise ConditionFailed(f"could not load the routing record of index {self.index!r}")

    def _check_given(self, stored: Routing) -> None:
        given = self._given
        if given is None or (given.default, given.overrides, given.previous) == (
                stored.default, stored.overrides, stored.previous):
            return
        message = (f"index {self.index!r}: the routing given differs from the stored routing "
                   f"version {stored.version}; the stored routing is used. Change a live "
                   "index's layout through a reshard, not by editing the routing in code.")
        if self._strict:
            raise RoutingConflict(message)
        log.warning(message)

    async def current(self) -> Routing:
        """The cached routing, re-read first if it is older than the TTL.

        One refresh runs at a time; concurrent callers wait for it.
        """
        loaded = self._loaded
        if loaded is None:
            return self.routing  # raises: not loaded
        if self._clock.now() - loaded.at < self._ttl:
            return loaded.routing
        if self._refreshing is None:
            self._refreshing = asyncio.ensure_future(self.load())
        refreshing = self._refreshing
        try:
            await asyncio.shield(refreshing)
        finally:
            if self._refreshing is refreshing:
                self._refreshing = None
        return self.routing

    async def update(self, routing: Routing) -> None:
        """Store ``routing`` as the next version (compare-and-set on the revision).

        ``routing.version`` must be the cached version plus one. Raises ConditionFailed
        if another writer changed the routing first (the cache is then re-read).
        """
        current = self.routing
        if routing.version != current.version + 1:
            raise InvalidRouting(
                f"new routing version must be {current.version + 1}, got {routing.version}")
        try:
            revision = await self._retrying(lambda: self.store.put_record(
                self.index, ROUTING_RECORD, routing.to_dict(), expected=self.revision))
        except ConditionFailed:
            # Either another writer got there first, or an earlier try that looked
            # failed did land: only the record itself can tell.
            stored, found = await self.read()
            if stored != routing or found is None:
                await self.load()
                raise ConditionFailed(
                    f"index {self.index!r}: another writer changed the routing first "
                    f"(now version {self.routing.version})") from None
            revision = found
        self._loaded = _Loaded(routing, revision, self._clock.now())
