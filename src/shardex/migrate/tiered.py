"""The layouts of a reshard over a tiered index: shard keys in several stores.

``TierLayouts`` is ``IndexLayouts`` for an index with tiers (``ShardedIndex(...,
tiers=...)``): a value's keys are read in the store of the tier its layout names, and a
value that moves between tiers (``ShardPolicy(tier=...)`` differs between the layouts)
is moved by ``ShardedIndex.relocate``, which copies each entry to the new tier's store
and then confirms the move in the old one (``shardex.write.crossing``): write the target,
then remove the source, with the old store's placement as the truth.

The same shard key can name a key of each store (``BIG#3`` before and after a move that
keeps N), so the keys this layout hands the mover, the parity check and the sweep name
their tier: a key of a tier's store is ``#tier#key`` (a shard key never starts with
``#``), a key of the index's own store is the key itself. Rows and placements come back
with their keys named the same way, so the parity check holds a row found in the store
being left against an entry now in the other as ``extra``/``missing``, as it would for
two keys of one store.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Sequence
from dataclasses import replace

from shardex.capacity import entry_bytes, write_units
from shardex.clock import Clock
from shardex.errors import ConditionFailed, ShardexError
from shardex.index import ShardedIndex
from shardex.keys import parse_shard_key
from shardex.migrate.layouts import PATIENT, IndexLayouts
from shardex.model.entries import Placement, Position, QueryPage, StoredEntry
from shardex.retry import call_with_retry
from shardex.routing import Routing
from shardex.stores.base import Store
from shardex.transition import Gap
from shardex.write import holder, in_place
from shardex.write.topology import moved, moving

__all__ = ["TierLayouts", "crossing_refusal", "tagged", "untagged"]


def tagged(tier: str | None, key: str) -> str:
    """``key`` of the store of ``tier``, as the reshard's layouts name it."""
    return key if tier is None else f"#{tier}#{key}"


def untagged(key: str) -> tuple[str | None, str]:
    """(tier, shard key) of a key named by ``tagged``."""
    if not key.startswith("#"):
        return None, key
    tier, _, raw = key[1:].partition("#")
    return tier, raw


def crossing_refusal(routing: Routing) -> str | None:
    """Why the reshard in ``routing`` cannot move its values between tiers (None: it can).

    Every value it moves between tiers moves between the same two, the same way: the
    store they leave serializes the writes of their items (``shardex.write.crossing``), and an
    item that changes value between two of them must meet one arbiter, not two.
    """
    old = routing.previous
    meta = routing.reshard
    if old is None or meta is None:
        return None
    pairs = {(old.policy(v).tier, routing.policy(v).tier) for v in meta.values
             if old.policy(v).tier != routing.policy(v).tier}
    if len(pairs) <= 1:
        return None
    named = ", ".join(f"{a or 'the index store'} -> {b or 'the index store'}"
                      for a, b in sorted(pairs, key=str))
    return (f"one reshard moves values between one pair of tiers, one way ({named}); "
            "start one reshard per direction")


class TierLayouts(IndexLayouts):
    """A tiered index's layouts: each value's keys in its tier's store."""

    def __init__(self, index: ShardedIndex, *, clock: Clock, rng: random.Random) -> None:
        super().__init__(index, clock=clock, rng=rng)
        self._stores: dict[str | None, Store] = {None: index.store}
        self._stores.update(index.tiers)

    def source_keys(self, routing: Routing, value: str) -> list[str]:
        assert routing.previous is not None
        policy = routing.previous.policy(value)
        return [tagged(policy.tier, key) for key in policy.shard_keys(value)]

    def target_keys(self, routing: Routing, value: str) -> list[str]:
        policy = routing.policy(value)
        return [tagged(policy.tier, key) for key in policy.shard_keys(value)]

    def destination(self, value: str, item_id: str) -> str | None:
        key = super().destination(value, item_id)
        return None if key is None else tagged(self.routing.writing.policy(value).tier, key)

    def placed(self, layout: Routing, value: str, key: str, item_id: str) -> bool:
        tier, raw = untagged(key)
        return tier == layout.policy(value).tier and in_place(layout, value, raw, item_id)

    async def page(self, key: str, after: Position | None, limit: int) -> QueryPage:
        tier, raw = untagged(key)
        store, name = self._stores[tier], self.index.name
        page = await call_with_retry(
            lambda: store.query(name, raw, after=after, descending=False, limit=limit),
            PATIENT, clock=self._clock, rng=self._rng)
        if self._left_behind(tier, raw) and self.routing.state != "retired":
            # rows a rollback moved back out of this store stay behind while readers may
            # still read both stores (see shardex.tierreads): only an entry still held here
            # is the mover's or the parity check's; the sweep removes the rest
            held = await asyncio.gather(*(self._held_here(tier, e.item_id)
                                          for e in page.entries))
            page = replace(page, entries=[e for e, here in zip(page.entries, held, strict=True)
                                          if here])
        if tier is None:
            return page
        return replace(page, entries=[replace(e, shard_key=key) for e in page.entries])

    def _origins(self) -> dict[str, tuple[str | None, str | None]]:
        """Per value moving between tiers: (origin tier, other tier)."""
        return moving(self.routing)

    async def mend(self, routing: Routing, gaps: Sequence[Gap]) -> None:
        """Take out the rows found ``extra`` in the store a value moves to that the store it
        moves from does not name: a writer stopped between its two steps left them
        (paused, or gone), where the mover never looks (the item is under another value
        in the store it moves from, or deleted there). Each is a move of the item through
        the write engine, which fences the store it moves from first, so that a writer
        still between its steps decides again (``shardex.write.crossing``); a move that
        finds the entry still to move moves it. Readers of both stores do not list these
        rows, readers of the other alone (from ``read-new``) would, and the parity check
        refused the reshard after three passes found one."""
        meta = routing.reshard
        if meta is None:
            return
        for gap in gaps:
            tier, key = untagged(gap.shard_key)
            pair = moved(routing, gap.value)
            if gap.kind != "extra" or pair is None or tier != pair[1]:
                continue
            with contextlib.suppress(ShardexError):
                await self.index.relocate(gap.item_id, value=gap.value, source=key,
                                          reshard=meta.id, generation=meta.generation)

    def _left_behind(self, tier: str | None, key: str) -> bool:
        """True if ``key`` of ``tier``'s store is where a rollback moves entries out of."""
        meta = self.routing.reshard
        if meta is None or meta.direction != "rollback":
            return False
        tiers = self._origins().get(parse_shard_key(key)[0])
        return tiers is not None and tiers[1] == tier

    async def _held_here(self, tier: str | None, item_id: str) -> bool:
        held = await self.locate(item_id)
        return held is not None and held.entry is not None \
            and untagged(held.entry.shard_key)[0] == tier

    async def _locate_in(self, tier: str | None, item_id: str) -> Placement | None:
        store, name = self._stores[tier], self.index.name
        found: Placement | None = await call_with_retry(
            lambda: store.locate(name, item_id), PATIENT, clock=self._clock, rng=self._rng)
        return found

    async def locate(self, item_id: str) -> Placement | None:
        """The item's placement that holds (``shardex.write.holder``: on a value moving
        between tiers, the truth of the two stores' placements), its key tagged."""
        found = {tier: await self._locate_in(tier, item_id) for tier in self._stores}
        held = holder(found, self.routing)
        if held is None:  # no live entry: the own store's placement, as a tombstone
            main = found[None]
            return None if main is None else replace(main, entry=None)
        tier, placement = held
        if placement.entry is None or tier is None:
            return placement
        return replace(placement, entry=replace(
            placement.entry, shard_key=tagged(tier, placement.entry.shard_key)))

    def cost(self, entry: StoredEntry) -> float:
        # a move between tiers is two writes, each a transaction in index-table mode
        return float(write_units(entry_bytes(entry)) * 2 * self._transaction)

    def removal(self, entry: StoredEntry, key: str) -> float | None:
        # a copy a rollback left is removed by one write on its own store (``move``)
        if self.routing.state == "retired" and self._left_behind(*untagged(key)):
            return float(write_units(entry_bytes(entry)) * self._transaction)
        return None

    async def move(self, entry: StoredEntry, *, value: str, source: str, reshard: str,
                   generation: int, to: str | None = None) -> str | None:
        tier, raw = untagged(source)
        if self._left_behind(tier, raw) and self.routing.state == "retired":
            removed = await self._remove_left(tier, entry.item_id, raw)
            return source if removed else None
        # a key picked on the tier writes go to now (the routing may have moved on since)
        picked = None if to is None else untagged(to)
        pick = picked[1] if picked and picked[0] == self.routing.writing.policy(value).tier \
            else None
        landed = await self.index.relocate(entry.item_id, value=value, source=raw,
                                           reshard=reshard, generation=generation, to=pick)
        return None if landed is None else tagged(self.routing.writing.policy(value).tier,
                                                  landed)

    async def _remove_left(self, tier: str | None, item_id: str, key: str) -> bool:
        """Remove a row a rolled-back move left on ``key`` of ``tier``'s store, if stale.

        In ``retired`` readers read the value's own store alone, so the row is no reader's;
        it goes unless it is still the item's truth. Conditioned on the placement found.
        """
        store, name = self._stores[tier], self.index.name
        if await self._held_here(tier, item_id):
            return False
        found: Placement | None = await call_with_retry(
            lambda: store.locate(name, item_id), PATIENT, clock=self._clock, rng=self._rng)
        if found is None or found.entry is None or found.entry.shard_key != key:
            return False
        try:
            await call_with_retry(
                lambda: store.place(name, item_id, None, version=found.version,
                                    expected=found),
                PATIENT, clock=self._clock, rng=self._rng)
        except ConditionFailed:
            return False  # written since: the row is a live write's now, or gone
        return True
