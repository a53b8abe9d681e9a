"""The two layouts a reshard moves between, as its mover, parity check and sweep use them.

``Layouts`` is all the runner needs of where entries are: the keys a value's entries
are drained from (the layout being left) and the keys they go to, a page of one key, an
item's placement (the truth the parity check holds every row against), whether an entry
is where a layout puts it, what moving one costs, and the move itself. ``IndexLayouts``
is a shardex index's: both layouts are shard keys in the index's own store, and a move
is ``ShardedIndex.relocate``. Its work is cut into ranges of the source keys (``move``,
``cost``). An adoption's (``shardex.migrate.adopting``: an application's plain index ->
the sharded index) reads the plain index as one tagged key a value and works Scan
segments of the source instead (``scan``, ``copy_to``, ``copy``, ``copy_cost``); the
mover, leases, pacing and parity classification stay the same. A layouts answers
CapabilityMissing for the kind of work it has not.
"""

from __future__ import annotations

import abc
import random
from collections.abc import Mapping, Sequence
from typing import Any

from shardex.capacity import entry_bytes, write_units
from shardex.clock import Clock
from shardex.errors import CapabilityMissing
from shardex.index import ShardedIndex
from shardex.keys import encode_shard_key
from shardex.model.entries import (
    Placement,
    Position,
    QueryPage,
    ScanItem,
    ScanPage,
    StoredEntry,
)
from shardex.retry import RetryPolicy, call_with_retry
from shardex.routing import Routing, Turns
from shardex.stores.base import Store
from shardex.transition import Gap
from shardex.write import in_place

__all__ = ["IndexLayouts", "Layouts", "OnIndex", "PATIENT", "target_of"]

# reads and record calls are few and must not fail a reshard for a passing throttle
PATIENT = RetryPolicy(attempts=12, base=0.05, cap=2.0, deadline=None)


def target_of(routing: Routing) -> Routing:
    """The layout a reshard moves toward, as a stable routing."""
    return Routing(default=routing.default, overrides=routing.overrides, version=routing.version)


class Layouts(abc.ABC):
    """Where a reshard's entries are, and how one moves."""

    @property
    @abc.abstractmethod
    def routing(self) -> Routing:
        """The routing the mover's writes follow now (its own cached copy)."""

    @property
    @abc.abstractmethod
    def consistent(self) -> bool:
        """True if a page sees every write acknowledged before it (False: settle first)."""

    @abc.abstractmethod
    def source_keys(self, routing: Routing, value: str) -> list[str]:
        """The keys of ``value`` in the layout ``routing`` leaves."""

    @abc.abstractmethod
    def target_keys(self, routing: Routing, value: str) -> list[str]:
        """The keys of ``value`` in the layout ``routing`` moves toward."""

    @abc.abstractmethod
    def placed(self, layout: Routing, value: str, key: str, item_id: str) -> bool:
        """True if an entry of ``value`` on ``key`` is where ``layout``'s writes put it."""

    def destination(self, value: str, item_id: str) -> str | None:
        """The key a move of ``item_id`` lands on now, named as source keys are
        (``source_keys``), to pace what a key takes before the move is sent: where the
        layout picks a write's key (random, round robin), picked here, for ``move``'s
        ``to``. None: not known before the move."""
        return None

    def flow(self, routing: Routing, value: str) -> tuple[int, int]:
        """How many of ``value``'s source keys entries may leave, and how many target keys
        they may land on, for a source key's share of the rate (``allocate``): every
        source key, and the target keys the layout left lacks (every one, if it lacks
        none). Counting fewer keys to fill than take entries is the safe side: it cuts the
        sources' share the more."""
        return len(self.source_keys(routing, value)), len(self.fills(routing, value))

    def fills(self, routing: Routing, value: str) -> set[str]:
        """The keys ``value``'s moves are expected to land on: the target keys the layout
        left lacks (every one, if it lacks none). The movers' budget slices hold a share
        on these (``Budget.working``); a move landing elsewhere takes a share first."""
        targets = self.target_keys(routing, value)
        return set(targets).difference(self.source_keys(routing, value)) or set(targets)

    def kept(self, routing: Routing, value: str) -> tuple[int, int]:
        """How many of ``value``'s source keys entries are moved onto too, and on how many
        keys a move may land (``ValuePlan.kept``): none by default."""
        return 0, len(self.target_keys(routing, value))

    @abc.abstractmethod
    async def page(self, key: str, after: Position | None, limit: int) -> QueryPage:
        """Up to ``limit`` entries of ``key`` beyond ``after``, in order."""

    @abc.abstractmethod
    async def locate(self, item_id: str) -> Placement | None:
        """The item's placement (where its entry is), or None."""

    def _cannot(self, work: str) -> CapabilityMissing:
        return CapabilityMissing(f"{type(self).__name__} has no {work}: its migration's "
                                 "work units are of the other kind")

    # -- work of the range kind: entries moved off a source key ---------------------

    def cost(self, entry: StoredEntry) -> float:
        """The write units moving ``entry`` takes from the key it leaves."""
        raise self._cannot("ranges of source keys")

    def removal(self, entry: StoredEntry, key: str) -> float | None:
        """The write units a sweep of retired key ``key`` spends removing ``entry`` there,
        where the sweep removes what it finds on ``key`` (a copy a rollback left) and
        writes no other key; None where it moves entries (``move``, ``cost``)."""
        return None

    async def move(self, entry: StoredEntry, *, value: str, source: str, reshard: str,
                   generation: int, to: str | None = None) -> str | None:
        """Move ``entry`` off ``source`` to where writes go now: the key it went to, or None.

        Conditional: it applies only while the entry is still on ``source``, in the
        reshard generation given, and an application write racing it wins. ``to``: the
        key ``destination`` picked, where the layout lets the mover pick.
        """
        raise self._cannot("ranges of source keys")

    # -- work of the segment kind: items of a Scan copied into the target layout ----

    async def scan(self, segment: int, segments: int, cursor: Mapping[str, Any] | None,
                   limit: int) -> ScanPage:
        """One page of Scan segment ``segment`` of ``segments`` of the source, from
        ``cursor`` (None: the segment's beginning)."""
        raise self._cannot("Scan segments")

    def copy_to(self, item: ScanItem, value: str) -> str | None:
        """The target key ``item`` (of valid raw value ``value``) is copied onto, or None
        if it is where the target layout puts it already."""
        raise self._cannot("Scan segments")

    async def copy(self, item: ScanItem, value: str, key: str) -> bool:
        """Copy ``item`` onto target key ``key``, only if unchanged since it was scanned:
        False if an application write came first (it wrote the copy itself)."""
        raise self._cannot("Scan segments")

    # whether a scanned item with no raw value may hold something to take out (``clear``)
    clears = False

    async def clear(self, item: ScanItem) -> bool:
        """Take out what the target layout holds of ``item`` (``item[2]``, its target key
        as scanned), scanned with no raw value (the application removed it): True if
        anything was. Only where ``clears``."""
        raise self._cannot("clearing a stale target key")

    def copy_cost(self) -> float:
        """The write units one copy takes (an estimate, learned as copies land)."""
        raise self._cannot("Scan segments")

    async def mend(self, routing: Routing, gaps: Sequence[Gap]) -> None:
        """Take out what a parity check found ``extra`` that the mover never visits, of
        ``gaps`` (its examples). Nothing here: a tiered index's (``TierLayouts``) are rows
        a writer that stopped between its two steps left in the store a value moves to."""
        return


class OnIndex(Layouts):
    """Layouts that move toward the shard keys of a shardex index: its routing, its
    target keys, where an item belongs, and reads of its keys and placements, each
    retried under ``PATIENT``. ``index`` is the mover's own index (its retry policy
    leaves throttles to the mover).
    """

    def __init__(self, index: ShardedIndex, *, clock: Clock, rng: random.Random) -> None:
        self.index = index
        self._clock = clock
        self._rng = rng
        self._turns = Turns(rng)

    @property
    def routing(self) -> Routing:
        return self.index.routing

    def target_keys(self, routing: Routing, value: str) -> list[str]:
        return routing.policy(value).shard_keys(value)

    def placed(self, layout: Routing, value: str, key: str, item_id: str) -> bool:
        return in_place(layout, value, key, item_id)

    def destination(self, value: str, item_id: str) -> str | None:
        # hashed where the layout writes follow hashes; otherwise any of its keys is in
        # place, and the moves are dealt out in turn (the move told to land there): a
        # target left to chance at the write took 1.5x the rate in a second as every
        # source drained into it, and one picked at random held the move back a fifth
        writing = self.routing.writing
        policy = writing.policy(value)
        if policy.strategy == "hash":
            return writing.shard_key(value, item_id)
        return encode_shard_key(value, self._turns.take(value, policy.shards), policy.shards)

    async def _query(self, store: Store, key: str, after: Position | None,
                     limit: int) -> QueryPage:
        name = self.index.name
        return await call_with_retry(
            lambda: store.query(name, key, after=after, descending=False, limit=limit),
            PATIENT, clock=self._clock, rng=self._rng)

    async def locate(self, item_id: str) -> Placement | None:
        store, name = self.index.store, self.index.name
        return await call_with_retry(lambda: store.locate(name, item_id), PATIENT,
                                     clock=self._clock, rng=self._rng)


class IndexLayouts(OnIndex):
    """A shardex index's layouts: shard keys in its store, moved by ``relocate``."""

    def __init__(self, index: ShardedIndex, *, clock: Clock, rng: random.Random) -> None:
        super().__init__(index, clock=clock, rng=rng)
        capabilities = index.store.capabilities
        self._transaction = 1 if capabilities.foreign_writes else 2

    @property
    def consistent(self) -> bool:
        return self.index.store.capabilities.consistent_reads

    def source_keys(self, routing: Routing, value: str) -> list[str]:
        assert routing.previous is not None
        return routing.previous.policy(value).shard_keys(value)

    def flow(self, routing: Routing, value: str) -> tuple[int, int]:
        """As ``Layouts.flow``, on one store: where both layouts hash, jump hash keeps
        every entry of a key both layouts have (shrinking, entries leave only the keys the
        new layout drops; growing, they land only on the keys the old one lacks); into
        random or round-robin keys, an entry on any of them is in place: only the keys
        dropped drain. (From those to hash, every key drains, and the keys both layouts
        have fill too: their pace holds both, ``Mover._move``.)"""
        drains, fills = super().flow(routing, value)
        one_store, refiled = self._change(routing, value)
        if one_store and not refiled:
            kept = set(self.target_keys(routing, value))
            drains = sum(key not in kept for key in self.source_keys(routing, value)) \
                or drains
        return drains, fills

    def kept(self, routing: Routing, value: str) -> tuple[int, int]:
        """How many source keys of ``value`` are filled too, and on how many keys a move
        may land: from random or round-robin keys into hashed ones on one store, the keys
        both layouts have, of every key of the new layout; else none (``flow``)."""
        targets = self.target_keys(routing, value)
        if self._change(routing, value) != (True, True):
            return 0, len(targets)
        return len(set(targets).intersection(self.source_keys(routing, value))), len(targets)

    @staticmethod
    def _change(routing: Routing, value: str) -> tuple[bool, bool]:
        """Whether ``value`` stays on one store, and whether its entries go from random
        or round-robin keys into hashed ones (every key drains, the kept ones fill)."""
        assert routing.previous is not None
        old, new = routing.previous.policy(value), routing.policy(value)
        return old.tier == new.tier, new.strategy == "hash" and old.strategy != "hash"

    async def page(self, key: str, after: Position | None, limit: int) -> QueryPage:
        return await self._query(self.index.store, key, after, limit)

    def cost(self, entry: StoredEntry) -> float:
        # an index-table move is a transaction: twice the units of the row it removes
        return float(write_units(entry_bytes(entry)) * self._transaction)

    async def move(self, entry: StoredEntry, *, value: str, source: str, reshard: str,
                   generation: int, to: str | None = None) -> str | None:
        return await self.index.relocate(entry.item_id, value=value, source=source,
                                         reshard=reshard, generation=generation, to=to)
