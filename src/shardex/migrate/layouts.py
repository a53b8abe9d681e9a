"""The two layouts a reshard moves between, as its mover, parity check and sweep use them.

``Layouts`` is all the runner needs of where entries are: the keys a value's entries
are drained from (the layout being left) and the keys they go to, a page of one key, an
item's placement (the truth the parity check holds every row against), whether an entry
is where a layout puts it, what moving one costs, and the move itself. ``IndexLayouts``
is a shardex index's: both layouts are shard keys in the index's own store, and a move
is ``ShardedIndex.relocate``. Another source, such as an application's plain DynamoDB GSI
being adopted, is another ``Layouts``: its source keys read its own way, its move a write
of the shard attribute; the state machine, leases, pacing and parity stay the same.
"""

from __future__ import annotations

import abc
import random

from shardex.capacity import entry_bytes, write_units
from shardex.clock import Clock
from shardex.index import ShardedIndex
from shardex.model.entries import Placement, Position, QueryPage, StoredEntry
from shardex.retry import RetryPolicy, call_with_retry
from shardex.routing import Routing
from shardex.write import in_place

__all__ = ["IndexLayouts", "Layouts", "PATIENT", "target_of"]

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

    @abc.abstractmethod
    async def page(self, key: str, after: Position | None, limit: int) -> QueryPage:
        """Up to ``limit`` entries of ``key`` beyond ``after``, in order."""

    @abc.abstractmethod
    async def locate(self, item_id: str) -> Placement | None:
        """The item's placement (where its entry is), or None."""

    @abc.abstractmethod
    def cost(self, entry: StoredEntry) -> float:
        """The write units moving ``entry`` takes from the key it leaves."""

    @abc.abstractmethod
    async def move(self, entry: StoredEntry, *, value: str, source: str, reshard: str,
                   generation: int) -> str | None:
        """Move ``entry`` off ``source`` to where writes go now: the key it went to, or None.

        Conditional: it applies only while the entry is still on ``source``, in the
        reshard generation given, and an application write racing it wins.
        """


class IndexLayouts(Layouts):
    """A shardex index's layouts: shard keys in its store, moved by ``relocate``.

    ``index`` is the mover's own index (its retry policy leaves throttles to the mover).
    """

    def __init__(self, index: ShardedIndex, *, clock: Clock, rng: random.Random) -> None:
        self.index = index
        self._clock = clock
        self._rng = rng
        capabilities = index.store.capabilities
        self._transaction = 1 if capabilities.foreign_writes else 2

    @property
    def routing(self) -> Routing:
        return self.index.routing

    @property
    def consistent(self) -> bool:
        return self.index.store.capabilities.consistent_reads

    def source_keys(self, routing: Routing, value: str) -> list[str]:
        assert routing.previous is not None
        return routing.previous.policy(value).shard_keys(value)

    def target_keys(self, routing: Routing, value: str) -> list[str]:
        return routing.policy(value).shard_keys(value)

    def placed(self, layout: Routing, value: str, key: str, item_id: str) -> bool:
        return in_place(layout, value, key, item_id)

    async def page(self, key: str, after: Position | None, limit: int) -> QueryPage:
        store, name = self.index.store, self.index.name
        return await call_with_retry(
            lambda: store.query(name, key, after=after, descending=False, limit=limit),
            PATIENT, clock=self._clock, rng=self._rng)

    async def locate(self, item_id: str) -> Placement | None:
        store, name = self.index.store, self.index.name
        return await call_with_retry(lambda: store.locate(name, item_id), PATIENT,
                                     clock=self._clock, rng=self._rng)

    def cost(self, entry: StoredEntry) -> float:
        # an index-table move is a transaction: twice the units of the row it removes
        return float(write_units(entry_bytes(entry)) * self._transaction)

    async def move(self, entry: StoredEntry, *, value: str, source: str, reshard: str,
                   generation: int) -> str | None:
        return await self.index.relocate(entry.item_id, value=value, source=source,
                                         reshard=reshard, generation=generation)
