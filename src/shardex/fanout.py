"""Concurrent fan-out reads over a value's shard keys, and their merge.

Each shard is read lazily, page by page, only as far as the merge needs: a page of
``limit`` asks each of N shards for its share (``_share``: a count no shard exceeds
among the page's first entries, but rarely), a shard is asked again only when the merge
has used up what it returned, together with every shard the page will likely use up,
and each further request of a shard is four times the size of its last (up to the store's
page). Requests are bounded by a semaphore, retried on throttling with
backoff and jitter, hedged (``shardex.hedging``), and a shard that still fails fails
the whole read with ``IncompleteRead``: nothing partial is returned as if it were whole.

**Pages of one listing do not read an entry twice.** A page ends inside what its
shards returned: the entries read beyond it, and where each shard's read stopped, are
kept in memory as the page's *continuation*, under the page's cursor position. The
next page with that cursor resumes each shard where it stopped and starts from the
entries kept, so a full listing reads each entry once and each shard with growing
requests, as a hand-rolled gather does. The cursor itself holds only the position in
the merged order (``shardex.cursor``), so it stays valid anywhere; a continuation is
only a saving, and is not used (the page is read from the cursor's position on every
shard, as before) when the layout changed since (a reshard: other shard keys), when
it is older than ``CONTINUATION_TTL`` seconds, in another process, or after the
cursor was used once already. A shard written through this store since its entries
were kept is read again from the cursor's position, so a page never misses or
resurrects this process's own writes; writes of other processes may show up to
``CONTINUATION_TTL`` seconds late (the staleness a DynamoDB GSI allows anyway).

Why this route, of those that remove the over-read, by measurement on DynamoDB Local
(``benchmarks/bench_reads.py``: 20,000 entries of 1 KB on 16 shards, pages of 1,000,
against a gather that reads every shard to its end and sorts): re-reading every shard
from the cursor's position, as pages did before, cost 1.43x the gather's read units
and about 1.7x its time, as each page asked every shard for its share plus three standard
deviations and dropped what lay past the page. Sizing requests more tightly cannot
fix that: every shard must still be read past the page's end to know where it ends
(16 shards x a few entries each is already several % of a page), and every shard
that comes up short costs the page another round trip. A continuation reads each
entry once (1.00x units) and, with the refills of a page batched into one round trip,
took 1.04x the gather's time when first measured, 1.10x-1.48x in later runs (the
client is CPU-bound parsing the pages, on cores it shares with DynamoDB Local); growing
a shard's requests four-fold rather than two-fold (fewer round trips, and no more
units: what a request reads past the page is kept) took it to 0.88x-1.00x. Reading a
page ahead in the background was not needed for that, and would read a page nobody
asks for whenever a listing stops early.

**While a reshard moves entries** from one layout's keys to another's, shards are read
in two phases (``first`` then ``keys``): every position is read on the keys entries
move away from before it is read on the keys they move to, so an entry moved in between
is found on one of them (and, found on both, returned once). A read of both at once
could read its new key before it arrived and its old key after it left. Such a page
neither resumes nor keeps a continuation: what a shard returned may have moved since.
"""

from __future__ import annotations

import asyncio
import heapq
import random
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, TypeVar

from shardex.admission import AdaptiveGate
from shardex.clock import Clock
from shardex.errors import IncompleteRead
from shardex.hedging import Copy, HedgePolicy, Hedger, call_hedged
from shardex.retry import RetryPolicy, call_with_retry
from shardex.stores.base import Malformed, Position, QueryPage, Store, StoredEntry
from shardex.stores.metered import FanOutRead, Hedge, HedgeOutcome, Usage

__all__ = ["CONTINUATION_TTL", "FanOut", "MergedPage"]

T = TypeVar("T")
_MIN_FIRST_PAGE = 4
_SHORT = 0.003  # how often a page may need a second round trip to some shard
CONTINUATION_TTL = 5.0
_MAX_CONTINUATIONS = 64
_MAX_KEPT_ENTRIES = 200_000


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

    key: str
    after: Position | None
    page_size: int
    buffer: list[StoredEntry] = field(default_factory=list)
    exhausted: bool = False

    def accept(self, page: QueryPage, max_page: int) -> None:
        self.buffer.extend(page.entries)
        self.after = page.resume
        self.exhausted = page.resume is None
        self.page_size = min(max_page, self.page_size * 4)

    def restart(self, after: Position | None, page_size: int) -> None:
        """Forget what was read: read again from ``after`` (the shard changed since)."""
        self.after = after
        self.buffer.clear()
        self.exhausted = False
        self.page_size = page_size

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
            del self.buffer[_safe(self, bound, descending):]
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


def _buffered(live: Sequence[_ShardStream], descending: bool) -> Position | None:
    """The smallest last-buffered position among shards not yet exhausted (None: all are)."""
    unread = [s.buffer[-1].position for s in live if not s.exhausted]
    return None if not unread else (max(unread) if descending else min(unread))


def _safe(stream: _ShardStream, bound: Position | None, descending: bool) -> int:
    """How many of the stream's buffered entries lie at or before ``bound``."""
    if bound is None:
        return len(stream.buffer)
    rank = _Desc if descending else _Asc
    return bisect_right(stream.buffer, rank(bound), key=lambda e: rank(e.position))


def _run(buffer: list[StoredEntry], safe: int,
         tag: int) -> Iterator[tuple[Position, int, StoredEntry]]:
    for entry in islice(buffer, safe):
        yield entry.position, tag, entry


def _merge_safe(live: list[_ShardStream], out: list[StoredEntry], limit: int,
                descending: bool, bound: Position | None) -> int:
    """Move the buffered entries that are safe to order from ``live`` onto ``out``.

    An entry is safe when no shard still to be read can hold one before it: up to
    ``bound`` (None: every shard is read to its end), which the caller works out from
    how far each shard not yet exhausted has been read (``_buffered``, ``_coverage``).
    The safe runs are merged lazily, so a page takes only what it returns from buffers
    that may hold many pages. Once ``out`` holds ``limit`` entries, only copies of its
    last entry (mid-reshard duplicates) are still taken, so they are not mistaken for
    more. Returns how many entries were consumed.
    """
    runs = [_run(s.buffer, _safe(s, bound, descending), i) for i, s in enumerate(live)]
    consumed = [0] * len(live)
    for position, tag, entry in heapq.merge(*runs, reverse=descending):
        if out and out[-1].position == position:
            if entry.version > out[-1].version:
                out[-1] = entry
        elif len(out) >= limit:
            break
        else:
            out.append(entry)
        consumed[tag] += 1
    for stream, taken in zip(live, consumed, strict=True):
        del stream.buffer[:taken]
    return sum(consumed)


def _share(limit: int, shards: int, max_page: int) -> int:
    """What to ask each of ``shards`` shards for, first, to fill a page of ``limit``.

    A shard's count among the page's ``limit + 1`` first entries (the one past the end
    says whether there is more) is binomial. The share is the smallest count that
    every shard stays below with probability 1 - ``_SHORT``, so that one round trip
    per shard almost always fills the page: a second one doubles a page's latency.
    """
    wanted = limit + 1
    if shards == 1:
        return max(1, min(wanted, max_page))
    p = 1.0 / shards
    ratio = p / (1.0 - p)
    pmf = (1.0 - p) ** wanted  # P(count == 0)
    below = 0.0
    share = 0
    while share < wanted and shards * (1.0 - below - pmf) > _SHORT:
        below += pmf
        pmf *= (wanted - share) / (share + 1) * ratio
        share += 1
    return min(wanted, max_page, max(_MIN_FIRST_PAGE, share + 1))


@dataclass(slots=True)
class _Continuation:
    """Where each shard's read of a listing stopped, and what was read beyond the page."""

    keys: tuple[str, ...]
    streams: list[_ShardStream]
    made: float
    kept: int
    written: set[str] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class MergedPage:
    """Entries of one merged page, and whether any entry lies beyond them."""

    entries: list[StoredEntry]
    more: bool


_Where = tuple[str, bool, Position]  # value, descending, the cursor's position


class FanOut:
    """Reads the shards of one index's values concurrently, under one concurrency bound.

    ``hedge`` None turns hedging off. ``malformed`` says what a shard read does with an
    item the store cannot read as an entry (``Store.query``). Call ``close`` when done:
    it stops the copies still running and the watch on the store's writes.
    """

    def __init__(self, store: Store, namespace: str, *, retry: RetryPolicy,
                 hedge: HedgePolicy | None, max_concurrency: int, clock: Clock,
                 rng: random.Random, gate: AdaptiveGate | None = None,
                 malformed: Malformed = "raise") -> None:
        self._store = store
        self._malformed = malformed  # what a shard read does with a malformed item
        self._gate = gate
        self._namespace = namespace
        self._retry = retry
        self._hedger = None if hedge is None else Hedger(hedge)
        self._limiter = asyncio.Semaphore(max_concurrency)
        self._clock = clock
        self._rng = rng
        self._max_page = store.capabilities.max_page
        self._abandoned: set[asyncio.Future[Any]] = set()
        self._continuations: OrderedDict[_Where, _Continuation] = OrderedDict()
        self._kept = 0
        self._watched: dict[str, set[_Where]] = {}
        store.meter.subscribe(self._written)

    async def close(self) -> None:
        """Stop the hedged copies still running and forget every continuation."""
        self._store.meter.unsubscribe(self._written)
        copies, self._abandoned = list(self._abandoned), set()
        for copy in copies:
            copy.cancel()
        await asyncio.gather(*copies, return_exceptions=True)
        self._continuations.clear()
        self._watched.clear()
        self._kept = 0

    # -- requests --------------------------------------------------------------------

    async def _send(self, key: str, after: Position | None, descending: bool, limit: int,
                    copy: Copy | None) -> QueryPage:
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
                                   limit=limit, malformed=malformed)

            page = await (query() if self._gate is None else self._gate.call(key, query))
            if self._hedger is not None:
                self._hedger.observe(limit, self._clock.now() - began)
            return page
        finally:
            release()

    async def _query(self, key: str, after: Position | None, descending: bool,
                     limit: int) -> QueryPage:
        """One shard read: bounded, hedged, and retried on throttling."""
        hedger = self._hedger
        if hedger is None:
            return await call_with_retry(
                lambda: self._send(key, after, descending, limit, None),
                self._retry, clock=self._clock, rng=self._rng, paced=self._gate is not None)
        report = _Copies(self, key)
        return await call_with_retry(
            lambda: call_hedged(lambda copy: self._send(key, after, descending, limit, copy),
                                hedger, limit, clock=self._clock, report=report),
            self._retry, clock=self._clock, rng=self._rng, paced=self._gate is not None)

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

    # -- ordered pages ---------------------------------------------------------------

    async def page(self, value: str, keys: Sequence[str], *, after: Position | None,
                   descending: bool, limit: int, first: Sequence[str] = (),
                   fresh: bool = False) -> MergedPage:
        """Merge the shards ``first`` and ``keys`` into the next ``limit`` entries beyond ``after``.

        Entries come in ``(sort, item_id)`` order (descending if asked); an entry found
        on two shards (mid-reshard) is returned once, its newest version. ``more`` is
        exact: True only if an entry lies beyond the page. Each position is read on the
        shards ``first`` before it is read on ``keys`` (a key may be in both). ``fresh``
        reads every shard now, neither resuming nor keeping a continuation: a caller that
        orders its reads of two stores (``shardex.tiermove``) needs each read when made.
        """
        if first:
            self._fanned_out(value, len({*first, *keys}), "page")
            return await self._phased(value, first, keys, after=after,
                                      descending=descending, limit=limit)
        self._fanned_out(value, len(keys), "page")
        share = _share(limit, len(keys), self._max_page)
        streams = None if after is None or fresh else self._resume(value, descending, after,
                                                                  keys, share)
        if streams is None:
            streams = [_ShardStream(key, after, share) for key in keys]
        out: list[StoredEntry] = []
        while True:
            waiting = [s for s in streams if not s.buffer and not s.exhausted]
            if waiting:
                # One round trip for every shard this page will likely use up, not one
                # after another as each runs dry.
                low = _share(limit - len(out), len(streams), self._max_page)
                await self._fill(value, [s for s in streams if not s.exhausted and (
                    not s.buffer or len(s.buffer) < low)], descending)
                continue
            live = [s for s in streams if s.buffer]
            if not live:
                break
            taken = _merge_safe(live, out, limit, descending, _buffered(live, descending))
            if len(out) >= limit and (taken == 0 or not any(
                    not s.buffer and not s.exhausted for s in streams)):
                break
        more = any(s.buffer for s in streams)
        if more and not fresh:
            self._keep((value, descending, out[-1].position), tuple(keys), streams)
        return MergedPage(entries=out, more=more)

    async def _phased(self, value: str, first: Sequence[str], keys: Sequence[str], *,
                      after: Position | None, descending: bool, limit: int) -> MergedPage:
        """A page read in two phases: each position on ``first`` before it is on ``keys``.

        A shard of ``keys`` is asked only for positions every shard of ``first`` has been
        read to, and forgets what it returned beyond them, so an entry that moved from a
        ``first`` key to a ``keys`` key is found on one or both.
        """
        lead = [_ShardStream(key, after, _share(limit, len(first), self._max_page))
                for key in first]
        rest = [_ShardStream(key, after, _share(limit, len(keys), self._max_page))
                for key in keys]
        streams = [*lead, *rest]
        out: list[StoredEntry] = []
        while True:
            waiting = [s for s in lead if not s.buffer and not s.exhausted]
            if waiting:
                await self._fill(value, waiting, descending, limit - len(out) + 1)
                continue
            held = None if not lead else _coverage(lead, descending)
            waiting = [s for s in rest if not s.buffer and not s.exhausted
                       and (held is None or not s.covers(held, descending))]
            if waiting:
                await self._fill(value, waiting, descending, limit - len(out) + 1)
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

    async def _fill(self, value: str, streams: Sequence[_ShardStream],
                    descending: bool, remaining: int | None = None) -> None:
        """Read the next page of each of ``streams`` (at most ``remaining`` entries each)."""
        def fetch(stream: _ShardStream) -> Callable[[], Awaitable[QueryPage]]:
            size = stream.page_size if remaining is None else \
                max(1, min(stream.page_size, remaining))
            return lambda: self._query(stream.key, stream.after, descending, size)

        pages = await self._each(value, [(s.key, fetch(s)) for s in streams])
        for stream, page in zip(streams, pages, strict=True):
            stream.accept(page, self._max_page)

    # -- continuations ---------------------------------------------------------------

    def _keep(self, where: _Where, keys: tuple[str, ...], streams: list[_ShardStream]) -> None:
        """Keep the shards' read state under the page's last position, for the next page.

        Shards read to their end are kept too: a write to one must make it read again.
        """
        kept = sum(len(s.buffer) for s in streams)
        self._forget(where)
        self._continuations[where] = _Continuation(keys, streams, self._clock.now(), kept)
        self._kept += kept
        for stream in streams:
            self._watched.setdefault(stream.key, set()).add(where)
        while self._continuations and (len(self._continuations) > _MAX_CONTINUATIONS
                                       or self._kept > _MAX_KEPT_ENTRIES):
            self._forget(next(iter(self._continuations)))

    def _forget(self, where: _Where) -> _Continuation | None:
        found = self._continuations.pop(where, None)
        if found is not None:
            self._kept -= found.kept
            for stream in found.streams:
                watchers = self._watched.get(stream.key)
                if watchers is not None:
                    watchers.discard(where)
                    if not watchers:
                        del self._watched[stream.key]
        return found

    def _resume(self, value: str, descending: bool, after: Position, keys: Sequence[str],
                share: int) -> list[_ShardStream] | None:
        """The streams a page kept for this cursor, if they can still serve; used once."""
        found = self._forget((value, descending, after))
        if found is None or found.keys != tuple(keys) or \
                self._clock.now() - found.made > CONTINUATION_TTL:
            return None
        for stream in found.streams:
            if stream.key in found.written:
                stream.restart(after, share)
            else:
                stream.page_size = max(stream.page_size, share)
        return found.streams

    def _written(self, event: object) -> None:
        """Mark the continuations whose shards this store just wrote (a meter subscriber)."""
        if not self._watched or type(event) is not Usage or not event.write or \
                event.namespace != self._namespace:
            return
        for share in event.shares:
            for where in self._watched.get(share.key, ()):
                self._continuations[where].written.add(share.key)

    # -- arrival order and counts ------------------------------------------------------

    async def stream(self, value: str, keys: Sequence[str], *, dedupe: bool,
                     first: Sequence[str] = ()) -> AsyncIterator[StoredEntry]:
        """Yield every entry of the shards ``first``, then of ``keys``, in arrival order.

        The shards of each phase are read concurrently; if any fails for good, the
        entries of the others are still yielded and IncompleteRead is raised at the end.
        With ``dedupe`` (mid-reshard) an item found on two shards is yielded once.
        """
        failed: dict[str, BaseException] = {}
        seen: set[str] = set()
        self._fanned_out(value, len({*first, *keys}), "scan")
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
        """Sum the entry counts of the shards ``keys`` (all must answer).

        Not hedged: one count may read a shard page by page, and a copy would read it all
        again.
        """
        async def bounded(key: str) -> int:
            async with self._limiter:
                return await self._store.count(self._namespace, key)

        def counter(key: str) -> Callable[[], Awaitable[int]]:
            return lambda: call_with_retry(lambda: bounded(key), self._retry,
                                           clock=self._clock, rng=self._rng)

        self._fanned_out(value, len(keys), "count")
        return sum(await self._each(value, [(key, counter(key)) for key in keys]))


class _Copies:
    """Reports the copies of one hedged shard read as ``Hedge`` events on the store's meter."""

    __slots__ = ("_fanout", "_key")

    def __init__(self, fanout: FanOut, key: str) -> None:
        self._fanout = fanout
        self._key = key

    def sent(self) -> None:
        self._fanout._hedge_event(self._key, "sent")

    def won(self) -> None:
        self._fanout._hedge_event(self._key, "won")

    def abandoned(self, copy: asyncio.Future[Any]) -> None:
        self._fanout._abandon(self._key, copy)
