"""The reads of a tiered index: a value on its tier's fan-out, a moving value on two.

While a reshard moves a value between two stores (``shardex.write.crossing``), an item of
it may have a placement in the store it leaves (S) and in the store it goes to (T);
``shardex.write.truth`` says which holds. A read of the value reads S's keys, then T's,
and holds every row found in T against both placements: a stale or unconfirmed copy in T
is replaced by the truth (S's live entry, which a write moved there after S was read) or
dropped. So a read misses no entry wherever the writes and the mover put it, and returns
no entry the truth has deleted. Outside the union states a value is on one store only.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable, Mapping, Sequence

from shardex.clock import Clock
from shardex.fanout import FanOut
from shardex.keys import parse_shard_key
from shardex.model.entries import Placement, Position, StoredEntry
from shardex.retry import RetryPolicy, call_with_retry
from shardex.routing import Routing
from shardex.stores.base import Store
from shardex.tiers import TierStores
from shardex.write import arbitrated, holder, truth

__all__ = ["CrossReads", "TierReads"]


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

    async def _locate(self, store: Store, item_ids: list[str]) -> dict[str, Placement | None]:
        namespace = self._namespace
        found: dict[str, Placement | None] = await call_with_retry(
            lambda: store.locate_many(namespace, item_ids), self._retry, clock=self._clock,
            rng=self._rng)
        return found

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

    async def page(self, source: FanOut, source_keys: Sequence[str], target: FanOut,
                   target_keys: Sequence[str], *, after: Position | None, descending: bool,
                   limit: int) -> tuple[list[StoredEntry], bool]:
        """The next ``limit`` entries beyond ``after``, and whether any lies beyond them."""
        value = self.value
        out: list[StoredEntry] = []
        seen: set[str] = set()
        position = after
        while True:
            need = limit - len(out)
            # S is read before T at every position: no continuation read earlier
            first = await source.page(value, source_keys, after=position,
                                      descending=descending, limit=need, fresh=True)
            then = await target.page(value, target_keys, after=position,
                                     descending=descending, limit=need, fresh=True)
            # a phase with more beyond its page bounds what this round may return
            bounds = [page.entries[-1].position for page in (first, then)
                      if page.more and page.entries]
            bound = (max(bounds) if descending else min(bounds)) if bounds else None
            # Only the first ``need`` positions of S's entries and T's rows can be taken
            # this round: T's rows past them are read again next round, and held now
            # they would cost two point reads each for nothing.
            rows = [e for e in then.entries
                    if bound is None or not _beyond(e.position, bound, descending)]
            cut = sorted((e.position for e in [*first.entries, *rows]
                          if _beyond(e.position, position, descending)
                          and (bound is None or not _beyond(e.position, bound, descending))),
                         reverse=descending)
            clipped = len(cut) > need
            if clipped:
                bound = cut[need - 1]
                rows = [e for e in rows if not _beyond(e.position, bound, descending)]
            if self._source.capabilities.consistent_reads:
                # A row in T at the very position of the entry S's page showed live for
                # its item needs no placement read: S held that entry live when read,
                # so it was the item's truth then (``truth``: a live entry in S holds),
                # as for every entry S's page alone shows; and at one position the two
                # are taken this round, or both left beyond it and read again. (At
                # another position, S's entry might be left beyond this round while a
                # move has since taken it out of S: the row is then the only trace.)
                shown = {(e.item_id, e.position) for e in first.entries}
                rows = [e for e in rows if (e.item_id, e.position) not in shown]
            found = {e.item_id: e for e in [*first.entries, *await self.held(rows)]}
            ready = sorted((e for e in found.values() if e.item_id not in seen
                            and _beyond(e.position, position, descending)
                            and (bound is None or not _beyond(e.position, bound, descending))),
                           key=lambda e: e.position, reverse=descending)
            taken = ready[:need]
            out += taken
            seen.update(e.item_id for e in taken)
            more = first.more or then.more or len(ready) > need or clipped
            if len(out) >= limit or not more or (bound is None and not taken):
                return out, more
            position = bound if bound is not None else taken[-1].position

    async def stream(self, source: FanOut, source_keys: Sequence[str], target: FanOut,
                     target_keys: Sequence[str]) -> AsyncIterator[StoredEntry]:
        """Every entry of the value, S's keys first, T's rows held against the truth."""
        seen: set[str] = set()
        async for entry in source.stream(self.value, source_keys, dedupe=True):
            seen.add(entry.item_id)
            yield entry
        batch: list[StoredEntry] = []
        async for row in target.stream(self.value, target_keys, dedupe=True):
            batch.append(row)
            if len(batch) >= 64:
                for entry in await self._fresh(batch, seen):
                    yield entry
                batch = []
        for entry in await self._fresh(batch, seen):
            yield entry

    async def _fresh(self, rows: list[StoredEntry], seen: set[str]) -> list[StoredEntry]:
        # an item already yielded is not yielded again: its row needs no placement read
        out = [e for e in await self.held([r for r in rows if r.item_id not in seen])
               if e.item_id not in seen]
        seen.update(e.item_id for e in out)
        return out


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
                   to_end: bool = False) -> tuple[list[StoredEntry], bool]:
        """The next ``limit`` entries of ``value`` beyond ``after``, and whether more lie
        beyond; ``to_end``: the caller reads every page (``FanOut.page``)."""
        cross = self._cross(routing, value)
        if cross is not None:
            crossing, *phases = cross
            return await crossing.page(*phases, after=after,  # type: ignore[arg-type]
                                       descending=descending, limit=limit)
        first, then = routing.read_phases(value)
        merged = await self._on(routing, value).page(value, then, first=first, after=after,
                                                     descending=descending, limit=limit,
                                                     layout=routing.version, to_end=to_end)
        return merged.entries, merged.more

    def stream(self, routing: Routing, value: str) -> AsyncIterator[StoredEntry]:
        """Every entry of ``value``: in arrival order on one layout; mid-reshard, in
        ``(sort, item_id)`` order by the resumed two-phase listing (``FanOut.listing``),
        an item found twice once."""
        cross = self._cross(routing, value)
        if cross is not None:
            return cross[0].stream(*cross[1:])
        first, then = routing.read_phases(value)
        fanout = self._on(routing, value)
        if routing.reads_both(value):
            return fanout.listing(value, then, first=first, layout=routing.version)
        return fanout.stream(value, then, dedupe=False)

    async def count(self, routing: Routing, value: str) -> int:
        """How many entries ``value`` has (mid-reshard: an item found twice counted once,
        by listing it)."""
        if routing.reads_both(value):
            return sum([1 async for _ in self.stream(routing, value)])
        return await self._on(routing, value).count(value, routing.read_phases(value)[1])


def _value_of(entry: StoredEntry) -> str:
    return parse_shard_key(entry.shard_key)[0]


def _beyond(position: Position, after: Position | None, descending: bool) -> bool:
    if after is None:
        return True
    return position < after if descending else position > after
