"""Concurrent fan-out reads over a value's shard keys, and their merge.

Each shard is read lazily, page by page, only as far as the merge needs: the first
page asks each shard for about twice its fair share of the page, later pages double,
and a shard is asked again only when the merge has used up what it returned. Requests
are bounded by a semaphore, retried on throttling with backoff and jitter, optionally
hedged, and a shard that still fails fails the whole read with ``IncompleteRead``:
nothing partial is returned as if it were whole.

While a reshard moves entries from one layout's keys to another's, shards are read in
two phases (``first`` then ``keys``): every position is read on the keys entries move
away from before it is read on the keys they move to, so an entry moved in between is
found on one of them (and, found on both, returned once). A read of both at once could
read its new key before it arrived and its old key after it left.
"""

from __future__ import annotations

import asyncio
import math
import random
from bisect import bisect_right
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TypeVar

from shardex.admission import AdaptiveGate
from shardex.clock import Clock
from shardex.errors import IncompleteRead
from shardex.retry import HedgePolicy, RetryPolicy, call_hedged, call_with_retry
from shardex.stores.base import Position, QueryPage, Store, StoredEntry

__all__ = ["FanOut", "MergedPage"]

T = TypeVar("T")
_MIN_FIRST_PAGE = 4


class _Asc:
    """A sort key that orders positions from the smallest up."""

    __slots__ = ("position",)

    def __init__(self, position: Position) -> None:
        self.position = position

    def __lt__(self, other: _Asc) -> bool:
        return self.position < other.position


class _Desc(_Asc):
    """A sort key that orders positions from the largest down."""

    __slots__ = ()

    def __lt__(self, other: _Asc) -> bool:
        return self.position > other.position


@dataclass(slots=True)
class _ShardStream:
    """One shard key read forward from a position, page by page."""

    index: int
    key: str
    after: Position | None
    page_size: int
    buffer: list[StoredEntry] = field(default_factory=list)
    exhausted: bool = False

    def accept(self, page: QueryPage, max_page: int) -> None:
        self.buffer.extend(page.entries)
        self.after = page.resume
        self.exhausted = page.resume is None
        self.page_size = min(max_page, self.page_size * 2)

    def covers(self, bound: Position, descending: bool) -> bool:
        """True if this shard has been read up to ``bound`` (or to its end)."""
        if self.exhausted or self.after is None:
            return self.exhausted
        return self.after <= bound if descending else self.after >= bound

    def clip(self, bound: Position, descending: bool) -> None:
        """Forget what was read beyond ``bound``: it is read again, later, from ``bound``."""
        beyond = self.after is not None and (self.after < bound if descending
                                             else self.after > bound)
        if self.exhausted or beyond:
            rank = _Desc if descending else _Asc
            del self.buffer[bisect_right(self.buffer, rank(bound),
                                         key=lambda e: rank(e.position)):]
            self.after, self.exhausted = bound, False


def _coverage(streams: Sequence[_ShardStream], descending: bool) -> Position | None:
    """The position up to which every stream not yet exhausted has been read (None: all).

    Every stream not exhausted has been read once by then, so it has a position.
    """
    read = [s.after for s in streams if not s.exhausted]
    assert None not in read
    positions = [p for p in read if p is not None]
    if not positions:
        return None
    return max(positions) if descending else min(positions)


def _merge_safe(live: list[_ShardStream], out: list[StoredEntry], limit: int,
                descending: bool, bound: Position | None) -> int:
    """Move the buffered entries that are safe to order from ``live`` onto ``out``.

    An entry is safe when no shard still to be read can hold one before it: up to
    ``bound``, the position every shard not yet exhausted has been read to. Safe
    entries are merged in one sort (C speed) instead of one heap step each. Once ``out``
    holds ``limit`` entries, only copies of its last entry (mid-reshard duplicates) are
    still taken, so they are not mistaken for more. Returns how many entries were consumed.
    """
    rank = _Desc if descending else _Asc
    batch: list[tuple[Position, StoredEntry, _ShardStream]] = []
    for stream in live:
        safe = len(stream.buffer) if bound is None else bisect_right(
            stream.buffer, rank(bound), key=lambda e: rank(e.position))
        batch += [(e.position, e, stream) for e in stream.buffer[:safe]]
    batch.sort(key=itemgetter(0), reverse=descending)
    consumed: dict[int, int] = {}
    for position, entry, stream in batch:
        if out and out[-1].position == position:
            if entry.version > out[-1].version:
                out[-1] = entry
        elif len(out) >= limit:
            break
        else:
            out.append(entry)
        consumed[stream.index] = consumed.get(stream.index, 0) + 1
    for stream in live:
        del stream.buffer[:consumed.get(stream.index, 0)]
    return sum(consumed.values())


@dataclass(frozen=True, slots=True)
class MergedPage:
    """Entries of one merged page, and whether any entry lies beyond them."""

    entries: list[StoredEntry]
    more: bool


class FanOut:
    """Reads the shards of one index's values concurrently, under one concurrency bound."""

    def __init__(self, store: Store, namespace: str, *, retry: RetryPolicy,
                 hedge: HedgePolicy | None, max_concurrency: int, clock: Clock,
                 rng: random.Random, gate: AdaptiveGate | None = None) -> None:
        self._store = store
        self._gate = gate
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
            self._retry, clock=self._clock, rng=self._rng, paced=self._gate is not None,
        )

    async def _query(self, key: str, after: Position | None, descending: bool,
                     limit: int) -> QueryPage:
        def query() -> Awaitable[QueryPage]:
            return self._store.query(self._namespace, key, after=after, descending=descending,
                                     limit=limit)

        gate = self._gate
        if gate is None:
            return await self._read(query)
        return await self._read(lambda: gate.call(key, query))

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
                   descending: bool, limit: int, first: Sequence[str] = ()) -> MergedPage:
        """Merge the shards ``first`` and ``keys`` into the next ``limit`` entries beyond ``after``.

        Entries come in ``(sort, item_id)`` order (descending if asked); an entry found
        on two shards (mid-reshard) is returned once, its newest version. ``more`` is
        exact: True only if an entry lies beyond the page. Each position is read on the
        shards ``first`` before it is read on ``keys`` (a key may be in both).
        """
        # A shard's share of a page is about binomial: ask for the mean plus three
        # standard deviations, so one round trip per shard usually suffices. Each phase
        # holds the whole page between its shards.
        def size(shards: int) -> int:
            mean = (limit + 1) / max(1, shards)
            share = math.ceil(mean + 3 * math.sqrt(mean)) + 2
            return min(limit + 1, self._max_page, max(_MIN_FIRST_PAGE, share))

        streams = [_ShardStream(i, key, after, size(len(first) if i < len(first) else len(keys)))
                   for i, key in enumerate([*first, *keys])]
        lead, rest = streams[:len(first)], streams[len(first):]
        out: list[StoredEntry] = []
        while True:
            waiting = [s for s in lead if not s.buffer and not s.exhausted]
            if waiting:
                await self._fill(value, waiting, descending, max(1, limit - len(out) + 1))
                continue
            held = None if not lead else _coverage(lead, descending)
            waiting = [s for s in rest if not s.buffer and not s.exhausted
                       and (held is None or not s.covers(held, descending))]
            if waiting:
                await self._fill(value, waiting, descending, max(1, limit - len(out) + 1))
                if held is not None:
                    for stream in waiting:
                        stream.clip(held, descending)
                continue
            live = [s for s in streams if s.buffer]
            if not live:
                break
            taken = _merge_safe(live, out, limit, descending, _coverage(streams, descending))
            if len(out) >= limit and (taken == 0 or not any(
                    not s.buffer and not s.exhausted for s in streams)):
                break
        return MergedPage(entries=out, more=any(s.buffer for s in streams))

    async def _fill(self, value: str, streams: Sequence[_ShardStream], descending: bool,
                    remaining: int) -> None:
        def fetch(stream: _ShardStream) -> Callable[[], Awaitable[QueryPage]]:
            size = max(1, min(stream.page_size, remaining))
            return lambda: self._query(stream.key, stream.after, descending, size)

        pages = await self._each(value, [(s.key, fetch(s)) for s in streams])
        for stream, page in zip(streams, pages, strict=True):
            stream.accept(page, self._max_page)

    async def stream(self, value: str, keys: Sequence[str], *, dedupe: bool,
                     first: Sequence[str] = ()) -> AsyncIterator[StoredEntry]:
        """Yield every entry of the shards ``first``, then of ``keys``, in arrival order.

        The shards of each phase are read concurrently; if any fails for good, the
        entries of the others are still yielded and IncompleteRead is raised at the end.
        With ``dedupe`` (mid-reshard) an item found on two shards is yielded once.
        """
        failed: dict[str, BaseException] = {}
        seen: set[str] = set()
        for phase in (first, keys):
            async for entry in self._stream(phase, failed):
                if dedupe:
                    if entry.item_id in seen:
                        continue
                    seen.add(entry.item_id)
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
        """Sum the entry counts of the shards ``keys`` (all must answer)."""
        def counter(key: str) -> Callable[[], Awaitable[int]]:
            return lambda: self._read(lambda: self._store.count(self._namespace, key))

        return sum(await self._each(value, [(key, counter(key)) for key in keys]))
