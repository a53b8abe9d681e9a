"""Concurrent fan-out reads over a value's shard keys, and their merge.

Each shard is read lazily, page by page, only as far as the merge needs: the first
page asks each shard for about twice its fair share of the page, later pages double,
and a shard is asked again only when the merge has used up what it returned. Requests
are bounded by a semaphore, retried on throttling with backoff and jitter, optionally
hedged, and a shard that still fails fails the whole read with ``IncompleteRead``:
nothing partial is returned as if it were whole.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import random
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from shardex.errors import IncompleteRead
from shardex.retry import HedgePolicy, RetryPolicy, call_hedged, call_with_retry
from shardex.sim.clock import Clock
from shardex.stores.base import Position, QueryPage, Store, StoredEntry

__all__ = ["FanOut", "MergedPage"]

T = TypeVar("T")
_MIN_FIRST_PAGE = 4


class _Desc:
    """A heap key that orders positions from the largest down."""

    __slots__ = ("position",)

    def __init__(self, position: Position) -> None:
        self.position = position

    def __lt__(self, other: _Desc) -> bool:
        return self.position > other.position


@dataclass(slots=True)
class _ShardStream:
    """One shard key read forward from a position, page by page."""

    index: int
    key: str
    after: Position | None
    page_size: int
    buffer: deque[StoredEntry] = field(default_factory=deque)
    exhausted: bool = False

    def accept(self, page: QueryPage, max_page: int) -> None:
        self.buffer.extend(page.entries)
        self.after = page.resume
        self.exhausted = page.resume is None
        self.page_size = min(max_page, self.page_size * 2)


@dataclass(frozen=True, slots=True)
class MergedPage:
    """Entries of one merged page, and whether any entry lies beyond them."""

    entries: list[StoredEntry]
    more: bool


class FanOut:
    """Reads the shards of one index's values concurrently, under one concurrency bound."""

    def __init__(self, store: Store, namespace: str, *, retry: RetryPolicy,
                 hedge: HedgePolicy | None, max_concurrency: int, clock: Clock,
                 rng: random.Random) -> None:
        self._store = store
        self._namespace = namespace
        self._retry = retry
        self._hedge = hedge
        self._limiter = asyncio.Semaphore(max_concurrency)
        self._clock = clock
        self._rng = rng
        self._max_page = store.capabilities.max_page

    async def _bounded(self, call: Callable[[], Awaitable[T]]) -> T:
        async with self._limiter:
            return await call()

    async def _read(self, call: Callable[[], Awaitable[T]]) -> T:
        """One read request: bounded, hedged, and retried on throttling."""
        return await call_with_retry(
            lambda: call_hedged(lambda: self._bounded(call), self._hedge, clock=self._clock),
            self._retry, clock=self._clock, rng=self._rng,
        )

    async def _query(self, key: str, after: Position | None, descending: bool,
                     limit: int) -> QueryPage:
        return await self._read(lambda: self._store.query(
            self._namespace, key, after=after, descending=descending, limit=limit))

    async def _each(self, value: str, calls: Sequence[tuple[str, Callable[[], Awaitable[T]]]]
                    ) -> list[T]:
        """Run one call per shard concurrently; raise IncompleteRead if any shard failed."""
        results = await asyncio.gather(*(call() for _, call in calls), return_exceptions=True)
        failed: dict[str, BaseException] = {}
        for (key, _), result in zip(calls, results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, self._retry.retry_on):
                    raise result
                failed[key] = result
        if failed:
            first = next(iter(failed.values()))
            raise IncompleteRead(value, failed) from first
        return results  # type: ignore[return-value]

    async def page(self, value: str, keys: Sequence[str], *, after: Position | None,
                   descending: bool, limit: int) -> MergedPage:
        """Merge the shards ``keys`` into the next ``limit`` entries beyond ``after``.

        Entries come in ``(sort, item_id)`` order (descending if asked); an entry found
        on two shards (mid-reshard) is returned once, its newest version. ``more`` is
        exact: True only if an entry lies beyond the page.
        """
        share = math.ceil(2 * (limit + 1) / len(keys)) + 1
        first = min(limit + 1, self._max_page, max(_MIN_FIRST_PAGE, share))
        streams = [_ShardStream(i, key, after, first) for i, key in enumerate(keys)]
        heap: list[tuple[Any, int, _ShardStream]] = []
        order = _Desc if descending else tuple

        def push(stream: _ShardStream) -> None:
            heapq.heappush(heap, (order(stream.buffer[0].position), stream.index, stream))

        out: list[StoredEntry] = []
        pending = list(streams)
        while True:
            if pending:
                await self._fill(value, pending, descending, limit - len(out) + 1)
                for stream in pending:
                    if stream.buffer:
                        push(stream)
                pending = [s for s in pending if not s.buffer and not s.exhausted]
                if pending:
                    continue
            if not heap:
                break
            head = heap[0][2].buffer[0]
            # A full page still takes in a copy of its last entry found on another
            # shard (mid-reshard), so that copy is not mistaken for more entries.
            if len(out) >= limit and head.position != out[-1].position:
                break
            stream = heapq.heappop(heap)[2]
            entry = stream.buffer.popleft()
            if out and out[-1].position == entry.position:
                if entry.version > out[-1].version:
                    out[-1] = entry
            else:
                out.append(entry)
            if stream.buffer:
                push(stream)
            elif not stream.exhausted:
                pending.append(stream)
        return MergedPage(entries=out, more=bool(heap))

    async def _fill(self, value: str, streams: Sequence[_ShardStream], descending: bool,
                    remaining: int) -> None:
        def fetch(stream: _ShardStream) -> Callable[[], Awaitable[QueryPage]]:
            size = max(1, min(stream.page_size, remaining))
            return lambda: self._query(stream.key, stream.after, descending, size)

        pages = await self._each(value, [(s.key, fetch(s)) for s in streams])
        for stream, page in zip(streams, pages, strict=True):
            stream.accept(page, self._max_page)

    async def stream(self, value: str, keys: Sequence[str], *,
                     dedupe: bool) -> AsyncIterator[StoredEntry]:
        """Yield every entry of the shards ``keys`` in arrival order.

        All shards are read concurrently; if any fails for good, the entries of the
        others are still yielded and IncompleteRead is raised at the end. With
        ``dedupe`` (mid-reshard) an item found on two shards is yielded once.
        """
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
        failed: dict[str, BaseException] = {}
        seen: set[str] = set()
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
                        if dedupe:
                            if entry.item_id in seen:
                                continue
                            seen.add(entry.item_id)
                        yield entry
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if failed:
            raise IncompleteRead(value, failed) from next(iter(failed.values()))

    async def count(self, value: str, keys: Sequence[str]) -> int:
        """Sum the entry counts of the shards ``keys`` (all must answer)."""
        def counter(key: str) -> Callable[[], Awaitable[int]]:
            return lambda: self._read(lambda: self._store.count(self._namespace, key))

        return sum(await self._each(value, [(key, counter(key)) for key in keys]))
