"""``ShardReads``, the base of ``FanOut``: the reads of single shards, in no merged order.

One shard read (``read``) is sent under the fan-out's concurrency bound, hedged
(``shardex.hedging``) and retried on throttling, its copies reported on the store's
meter; ``stream`` yields every entry of some shards in arrival order and ``count`` sums
their counts. The ordered, merged pages built on these reads are ``FanOut``'s.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Sequence
from typing import Any

from shardex.admission import AdaptiveGate
from shardex.clock import Clock
from shardex.errors import IncompleteRead
from shardex.hedging import Copy, HedgePolicy, Hedger, call_hedged
from shardex.model.entries import Position, QueryPage, StoredEntry
from shardex.retry import RetryPolicy, call_with_retry
from shardex.stores.base import Malformed, Store
from shardex.stores.metered import FanOutRead, Hedge, HedgeOutcome

__all__ = ["ShardReads"]

_UNBOUNDED = 1 << 30  # a semaphore no fan-out fills


class ShardReads:
    """The shard reads of one index's values, under one concurrency bound: the base of
    ``FanOut``, whose docstring says what its arguments mean."""

    def __init__(self, store: Store, namespace: str, *, retry: RetryPolicy,
                 hedge: HedgePolicy | None, max_concurrency: int | None, clock: Clock,
                 rng: random.Random, gate: AdaptiveGate | None = None,
                 malformed: Malformed = "raise") -> None:
        self._store = store
        self._malformed = malformed  # what a shard read does with a malformed item
        self._gate = gate
        self._namespace = namespace
        self._retry = retry
        self._hedger = None if hedge is None else Hedger(hedge)
        bounds = [b for b in (max_concurrency, store.connections) if b is not None]
        self.max_concurrency = min(bounds) if bounds else None
        self._limiter = asyncio.Semaphore(self.max_concurrency or _UNBOUNDED)
        self._clock = clock
        self._rng = rng
        self._max_page = store.capabilities.max_page
        self._abandoned: set[asyncio.Future[Any]] = set()

    # -- requests --------------------------------------------------------------------

    async def _send(self, key: str, after: Position | None, descending: bool, limit: int,
                    copy: Copy | None, until: Position | None) -> QueryPage:
        """One copy of one shard read: under the concurrency bound, timed for hedging."""
        limiter = self._limiter
        await limiter.acquire()
        held = True

        def release() -> None:
            nonlocal held
            if held:
                held = False
                limiter.release()

        try:
            if copy is not None:
                copy.left(release)
            began = self._clock.now()
            store, namespace, malformed = self._store, self._namespace, self._malformed

            def query() -> Awaitable[QueryPage]:
                return store.query(namespace, key, after=after, descending=descending,
                                   limit=limit, until=until, malformed=malformed)

            page = await (query() if self._gate is None else self._gate.call(key, query))
            if self._hedger is not None:
                self._hedger.observe(limit, self._clock.now() - began)
            return page
        finally:
            release()

    async def _query(self, key: str, after: Position | None, descending: bool,
                     limit: int, hedged: bool = True, until: Position | None = None
                     ) -> QueryPage:
        """One shard read (up to ``until``, if given): bounded, hedged (unless ``hedged``
        is False), and retried on throttling."""
        hedger = self._hedger if hedged else None
        if hedger is None:
            return await call_with_retry(
                lambda: self._send(key, after, descending, limit, None, until),
                self._retry, clock=self._clock, rng=self._rng, paced=self._gate is not None)
        report = _Copies(self, key)
        return await call_with_retry(
            lambda: call_hedged(
                lambda copy: self._send(key, after, descending, limit, copy, until),
                hedger, limit, clock=self._clock, report=report),
            self._retry, clock=self._clock, rng=self._rng, paced=self._gate is not None)

    async def read(self, key: str, after: Position | None, descending: bool, limit: int,
                   hedged: bool, until: Position | None = None) -> QueryPage:
        """One shard read of ``limit`` entries at most, as a page's (a ``second`` reader's),
        up to ``until`` if given."""
        return await self._query(key, after, descending, min(limit, self._max_page), hedged,
                                 until)

    def _fanned_out(self, value: str, width: int, kind: str) -> None:
        self._store.meter.emit(FanOutRead(self._namespace, value, width, kind,
                                          self._store.clock.now()))

    def _hedge_event(self, key: str, outcome: HedgeOutcome, units: float = 0.0) -> None:
        self._store.meter.emit(Hedge(self._namespace, key, outcome, units,
                                     self._store.clock.now()))

    def _abandon(self, key: str, copy: asyncio.Future[Any]) -> None:
        self._abandoned.add(copy)

        def finished(done: asyncio.Future[Any]) -> None:
            self._abandoned.discard(done)
            units = 0.0
            if not done.cancelled() and done.exception() is None:
                units = done.result().units
            self._hedge_event(key, "cancelled", units)

        copy.add_done_callback(finished)

    # -- arrival order and counts ------------------------------------------------------

    async def stream(self, value: str, keys: Sequence[str]) -> AsyncIterator[StoredEntry]:
        """Yield every entry of the shards ``keys`` in arrival order.

        The shards are read concurrently; if any fails for good, the entries of the
        others are still yielded and IncompleteRead is raised at the end. Entries moving
        between the shards meanwhile may be missed: a value mid-reshard is read by
        ``listing``.
        """
        failed: dict[str, BaseException] = {}
        self._fanned_out(value, len(keys), "scan")
        async for entry in self._stream(keys, failed):
            yield entry
        if failed:
            raise IncompleteRead(value, failed) from next(iter(failed.values()))

    async def _stream(self, keys: Sequence[str], failed: dict[str, BaseException]
                      ) -> AsyncIterator[StoredEntry]:
        """Every entry of the shards ``keys``, read concurrently; failures go to ``failed``."""
        if not keys:
            return
        queue: asyncio.Queue[tuple[str, list[StoredEntry] | BaseException | None]] = \
            asyncio.Queue(maxsize=2 * len(keys))

        async def pump(key: str) -> None:
            after: Position | None = None
            try:
                while True:
                    page = await self._query(key, after, False, self._max_page)
                    if page.entries:
                        await queue.put((key, page.entries))
                    if page.resume is None:
                        break
                    after = page.resume
            except Exception as exc:
                await queue.put((key, exc))
                return
            await queue.put((key, None))

        tasks = [asyncio.ensure_future(pump(key)) for key in keys]
        try:
            running = len(tasks)
            while running:
                key, item = await queue.get()
                if item is None:
                    running -= 1
                elif isinstance(item, BaseException):
                    running -= 1
                    if not isinstance(item, self._retry.retry_on):
                        raise item
                    failed[key] = item
                else:
                    for entry in item:
                        yield entry
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def count(self, value: str, keys: Sequence[str]) -> int:
        """Sum the entry counts of the shards ``keys`` (all must answer).

        Not hedged: one count may read a shard page by page, and a copy would read it all
        again.
        """
        async def counted(key: str) -> int:
            async def once() -> int:
                async with self._limiter:
                    return await self._store.count(self._namespace, key)
            return await call_with_retry(once, self._retry, clock=self._clock, rng=self._rng)

        self._fanned_out(value, len(keys), "count")
        counts = await asyncio.gather(*map(counted, keys), return_exceptions=True)
        failed: dict[str, BaseException] = {}
        for key, result in zip(keys, counts, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, self._retry.retry_on):
                    raise result
                failed[key] = result
        if failed:
            raise IncompleteRead(value, failed) from next(iter(failed.values()))
        return sum(counts)  # type: ignore[arg-type]


class _Copies:
    """Reports the copies of one hedged shard read as ``Hedge`` events on the store's meter."""

    __slots__ = ("_fanout", "_key")

    def __init__(self, fanout: ShardReads, key: str) -> None:
        self._fanout = fanout
        self._key = key

    def sent(self) -> None:
        self._fanout._hedge_event(self._key, "sent")

    def won(self) -> None:
        self._fanout._hedge_event(self._key, "won")

    def abandoned(self, copy: asyncio.Future[Any]) -> None:
        self._fanout._abandon(self._key, copy)
