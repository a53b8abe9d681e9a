"""The reads of a tiered index: a value on its tier's fan-out, a moving value on two.

While a reshard moves a value between two stores (``shardex.write.crossing``), an item of
it may have a placement in the store it leaves (S) and in the store it goes to (T);
``shardex.write.truth`` says which holds. A listing of the value is one listing in two
phases (``FanOut.page``, its second phase on T's store): every position is read on S's
keys, then on T's, and it resumes its continuations and reads ahead as any listing
does. Every row found in T is held against both placements of its item as it lands
(in batches, ``Store.locate_many``): it stays if its item's truth is that entry, at that
position, and is dropped otherwise (a stale or unconfirmed copy, a deleted item). So a
listing misses no entry present throughout, wherever the writes and the mover put it,
and returns no entry the truth had deleted. Outside the union states a value is on one
store only.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any

from shardex.clock import Clock
from shardex.fanout import FanOut, MergedPage
from shardex.fanout.merge import Reader
from shardex.keys import parse_shard_key
from shardex.model.entries import Placement, Position, QueryPage, StoredEntry
from shardex.retry import RetryPolicy, call_with_retry
from shardex.routing import Routing
from shardex.stores.base import Store, gather_or_cancel
from shardex.tiers import TierStores
from shardex.write import arbitrated, holder, truth

__all__ = ["CrossReads", "TierReads"]

_POINT_BATCH = 100  # placements retried together where a store reads them one by one


class CrossReads:
    """One value's reads while a reshard moves it between two stores: ``source`` (S, the
    store it came from) and ``target`` (T). ``retry`` paces throttled point reads."""

    def __init__(self, value: str, source: Store, target: Store, namespace: str, *,
                 retry: RetryPolicy, clock: Clock, rng: random.Random) -> None:
        self.value = value
        self._source = source
        self._target = target
        self._namespace = namespace
        self._retry = retry
        self._clock = clock
        self._rng = rng
        self._holds = _Holds(self.held, clock)

    async def _locate(self, store: Store, item_ids: list[str]) -> dict[str, Placement | None]:
        """The placements of ``item_ids`` in ``store``, a batch a request, each batch
        retried on its own: a throttled batch is read again alone, not with the rest
        (retried whole, a read of ten batches with one request in five throttled failed
        nine times in ten). The first batch that fails for good stops the others."""
        namespace, size = self._namespace, store.batch_locate or _POINT_BATCH

        def batch(ids: list[str]) -> Awaitable[dict[str, Placement | None]]:
            return call_with_retry(lambda: store.locate_many(namespace, ids), self._retry,
                                   clock=self._clock, rng=self._rng)

        parts = await gather_or_cancel(batch(item_ids[at:at + size])
                                       for at in range(0, len(item_ids), size))
        return {item_id: placement for part in parts for item_id, placement in part.items()}

    async def held(self, rows: Sequence[StoredEntry]) -> list[StoredEntry]:
        """The truth of each item of ``rows`` read in T: its live entry, wherever it is.

        Every item's placement in S is read (one batched read, ``Store.locate_many``)
        before any in T (another): a write to T is placed in T, then confirmed in S, so
        T read after S shows every write S's tombstone confirms.
        """
        if not rows:
            return []
        ids = list(dict.fromkeys(row.item_id for row in rows))
        source = await self._locate(self._source, ids)
        target = await self._locate(self._target, ids)
        out = []
        for item_id in ids:
            placement, _ = truth(source[item_id], target[item_id])
            if placement is not None and placement.entry is not None \
                    and _value_of(placement.entry) == self.value:
                out.append(placement.entry)
        return out

    def reader(self, target: FanOut) -> Reader:
        """How a listing reads T's keys (``FanOut.page``'s ``second``): each page of rows
        read in T, held against both placements of its items (``held``) when it lands.

        A row stays where its item's truth is that very entry's position (the truth
        itself stands in for it, the newer version); a stale, unconfirmed or deleted
        row is dropped. T is read up to ``until`` (how far S had been read when the
        request was sent) and no further (``Store.query``'s ``until``).
        Dropping a row whose item's truth lies elsewhere loses no entry present
        throughout the listing: at that entry's position S was read first; if S's read
        missed it, the mover had confirmed it in S before, so T's later read found its
        copy there, and the copy's hold, later still, finds it confirmed.
        """
        value, holds = self.value, self._holds

        async def read(key: str, after: Position | None, descending: bool, limit: int,
                       until: Position | None, hedged: bool) -> QueryPage:
            sent = holds.sent()
            try:
                page = await target.read(key, after, descending, limit, hedged, until)
            except BaseException:
                holds.gone(sent)
                raise
            rows = page.entries
            if not rows:
                holds.gone(sent)
            truth = await holds.hold(sent, rows) if rows else {}
            kept = []
            for row in rows:
                live = truth.get(row.item_id)
                if live is not None and live.position == row.position \
                        and _value_of(live) == value:
                    kept.append(live)
            return QueryPage(kept, page.resume, page.units, page.skipped)

        return read

    async def page(self, source: FanOut, source_keys: Sequence[str], target: FanOut,
                   target_keys: Sequence[str], *, after: Position | None, descending: bool,
                   limit: int, layout: object, to_end: bool) -> MergedPage:
        """The next ``limit`` entries beyond ``after``, and whether any lies beyond them.

        One listing of two phases (``FanOut.page``): S's keys, then T's, each position
        read in T by a request sent after S's read of it landed, T's rows held. It keeps
        its continuation and reads ahead as any listing does (in S's fan-out, which
        hears T's writes too).
        """
        source.watch(self._target)
        return await source.page(self.value, target_keys, first=source_keys, after=after,
                                 descending=descending, limit=limit,
                                 layout=("tiers", layout), to_end=to_end,
                                 second=self.reader(target))

    def stream(self, source: FanOut, source_keys: Sequence[str], target: FanOut,
               target_keys: Sequence[str], layout: object) -> AsyncIterator[StoredEntry]:
        """Every entry of the value in ``(sort, item_id)`` order: the listing ``page``
        reads, in the store's pages."""
        source.watch(self._target)
        return source.listing(self.value, target_keys, first=source_keys,
                              layout=("tiers", layout), second=self.reader(target))


class _Holds:
    """Holds the rows of T's requests sent together in one batched read (``held``).

    A request's rows wait, once landed, for every request of T sent no later than a
    quarter of a round trip after the earliest one waiting (as ``FanOut`` counts requests
    sent together) to land or fail: requests sent together land together, and one batch
    reads 100 placements where each shard's rows are a few. Each request is held after
    it landed, so every row's placements are still read after the row.
    """

    def __init__(self, held: Callable[[Sequence[StoredEntry]],
                                      Coroutine[Any, Any, list[StoredEntry]]],
                 clock: Clock) -> None:
        self._held = held
        self._clock = clock
        self._flying: dict[object, float] = {}  # a request in flight -> when it was sent
        self._queued: list[tuple[Sequence[StoredEntry], asyncio.Future[dict[str, StoredEntry]],
                                 float]] = []  # rows, their waiter, how far they wait
        self._scheduled = False
        self._holding: set[asyncio.Future[list[StoredEntry]]] = set()

    def sent(self) -> object:
        """Note a request of T sent now; pass what this returns to ``hold`` or ``gone``."""
        token = object()
        self._flying[token] = self._clock.now()
        return token

    def gone(self, token: object) -> None:
        """The request ``token`` holds nothing (it failed, was cancelled or found none)."""
        del self._flying[token]
        self._check()

    def hold(self, token: object, rows: Sequence[StoredEntry]
             ) -> asyncio.Future[dict[str, StoredEntry]]:
        """The truth of each item of ``rows`` (the landed request ``token``'s), by item id."""
        sent = self._flying.pop(token)
        waiter: asyncio.Future[dict[str, StoredEntry]] = \
            asyncio.get_running_loop().create_future()
        self._queued.append((rows, waiter, sent + (self._clock.now() - sent) / 4))
        self._check()
        return waiter

    def _check(self) -> None:
        if not self._queued or self._scheduled:
            return
        cut = min(until for _, _, until in self._queued)
        if any(sent <= cut for sent in self._flying.values()):
            return  # one sent together with the rows waiting lands later
        self._scheduled = True  # and whatever lands in this turn of the loop joins them
        asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        queued, self._queued, self._scheduled = self._queued, [], False
        task: asyncio.Future[list[StoredEntry]] = asyncio.get_running_loop().create_task(
            self._held([row for rows, _, _ in queued for row in rows]))
        self._holding.add(task)

        def settle(done: asyncio.Future[list[StoredEntry]]) -> None:
            self._holding.discard(done)
            failed = None if done.cancelled() else done.exception()
            for _, waiter, _ in queued:
                if waiter.done():
                    continue  # its landing was cancelled meanwhile
                if done.cancelled():
                    waiter.cancel()
                elif failed is not None:
                    waiter.set_exception(failed)
                else:
                    waiter.set_result({e.item_id: e for e in done.result()})

        task.add_done_callback(settle)
        waiters = [waiter for _, waiter, _ in queued]

        def dropped(_: asyncio.Future[dict[str, StoredEntry]]) -> None:
            # every landing waiting for it was cancelled (a restart, a closed index)
            if not task.done() and all(w.done() for w in waiters):
                task.cancel()

        for waiter in waiters:
            waiter.add_done_callback(dropped)


class TierReads:
    """The reads of a tiered index: a value on its tier's fan-out, a moving value on two.

    ``fanouts`` holds each tier's fan-out; ``crossing(routing, value)`` is the value's
    ``CrossReads`` while a reshard moves it between tiers (None otherwise).
    """

    def __init__(self, tiers: TierStores, fanouts: Mapping[str | None, FanOut],
                 crossing: Callable[[Routing, str], CrossReads | None]) -> None:
        self._tiers = tiers
        self._fanouts = fanouts
        self._crossing = crossing

    def _cross(self, routing: Routing, value: str
               ) -> tuple[CrossReads, FanOut, list[str], FanOut, list[str]] | None:
        """A moving value's reader: S's fan-out and keys, then T's."""
        crossing = self._crossing(routing, value)
        tiers = self._tiers.crossing(routing, value)
        if crossing is None or tiers is None or routing.previous is None:
            return None
        keys = {p.tier: p.shard_keys(value)
                for p in (routing.previous.policy(value), routing.policy(value))}
        origin, other = tiers
        return (crossing, self._fanouts[origin], keys[origin], self._fanouts[other],
                keys[other])

    def held(self, routing: Routing | None, found: Mapping[str | None, Placement | None]
             ) -> Placement | None:
        """The live placement that holds of an item's placement in each tier (``found``).

        An item has one, but while a reshard moves a value between tiers it may have one
        in both stores: ``shardex.write.holder`` says which holds.
        """
        if routing is None:
            return arbitrated(found)
        held = holder(found, routing)
        return None if held is None else held[1]

    def _on(self, routing: Routing, value: str) -> FanOut:
        return self._fanouts[self._tiers.tier_of(routing, value)]

    async def page(self, routing: Routing, value: str, *, after: Position | None,
                   descending: bool, limit: int,
                   to_end: bool = False) -> MergedPage:
        """The next ``limit`` entries of ``value`` beyond ``after``, and whether more lie
        beyond; ``to_end``: the caller reads every page (``FanOut.page``)."""
        cross = self._cross(routing, value)
        if cross is not None:
            crossing, *phases = cross
            return await crossing.page(*phases, after=after,  # type: ignore[arg-type]
                                       descending=descending, limit=limit,
                                       layout=routing.version, to_end=to_end)
        first, then = routing.read_phases(value)
        return await self._on(routing, value).page(value, then, first=first, after=after,
                                                   descending=descending, limit=limit,
                                                   layout=routing.version, to_end=to_end)

    def stream(self, routing: Routing, value: str) -> AsyncIterator[StoredEntry]:
        """Every entry of ``value``: in arrival order on one layout; mid-reshard, in
        ``(sort, item_id)`` order by the resumed two-phase listing (``FanOut.listing``),
        an item found twice once."""
        cross = self._cross(routing, value)
        if cross is not None:
            return cross[0].stream(*cross[1:], layout=routing.version)
        first, then = routing.read_phases(value)
        fanout = self._on(routing, value)
        if routing.reads_both(value):
            return fanout.listing(value, then, first=first, layout=routing.version)
        return fanout.stream(value, then)

    async def count(self, routing: Routing, value: str) -> int:
        """How many entries ``value`` has (mid-reshard: an item found twice counted once,
        by listing it)."""
        if routing.reads_both(value):
            return sum([1 async for _ in self.stream(routing, value)])
        return await self._on(routing, value).count(value, routing.read_phases(value)[1])


def _value_of(entry: StoredEntry) -> str:
    return parse_shard_key(entry.shard_key)[0]


