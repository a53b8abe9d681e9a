"""An adoption's layouts: an application's plain index -> the sharded index, as ``Layouts``.

The layout left is the plain index: one key a value, the raw value itself, read from
``source`` (``shardex.adopted.source_store``). It is handed out tagged (``PLAIN`` +
value; a shard key never starts with ``#``) so the parity check reads it beside the
shard keys and tells the two apart. The layout moved toward is the index's own shard
keys. Every item sits on both at once (a layout change of the ``copy`` kind), so the
work is not moving entries off source keys but copying each item of the base table
once: Scan segments (``scan``), each item given its place in the new index
(``copy_to``, ``copy``), paced per target key by the mover.

- ``GsiAdoptionLayouts``: a plain GSI adopted into a shardex GSI on the same table; a
  copy sets the item's shard attribute, only if the raw value is still the one scanned
  and the shard attribute still the one scanned (absent or stale); an item whose raw
  value the application removed has its shard attribute removed (``clear``), only if
  the value is still absent and the attribute still the one scanned.
- ``TableAdoptionLayouts``: an application's index table adopted into a shardex index
  table; a copy is ``ShardedIndex.put`` at version 1, skipped when the item already has
  a version (the application, dual-writing, put or deleted it first), and taken out again
  when the base item no longer holds the value copied (deleted or changed meanwhile).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from shardex.clock import Clock
from shardex.errors import ConditionFailed
from shardex.index import ShardedIndex
from shardex.migrate.layouts import OnIndex
from shardex.model.entries import Position, QueryPage, ScanItem, ScanPage
from shardex.routing import Routing, Turns
from shardex.stores.base import Store
from shardex.stores.dynamodb.adopt import GsiAdoptionTools, TableAdoptionTools
from shardex.write import in_place

__all__ = ["AdoptionLayouts", "GsiAdoptionLayouts", "PLAIN", "TableAdoptionLayouts",
           "adoption_layouts"]

PLAIN = "#plain#"


class AdoptionLayouts(OnIndex):
    """The plain index on ``source`` -> the shard keys of ``index``, copied by Scan.

    ``index`` is the mover's own index (its retry policy leaves throttles to the mover);
    ``source`` is opened and closed by the caller.
    """

    def __init__(self, index: ShardedIndex, source: Store,
                 tools: GsiAdoptionTools | TableAdoptionTools, *, clock: Clock,
                 rng: random.Random) -> None:
        super().__init__(index, clock=clock, rng=rng)
        self.source = source
        self.tools = tools
        self._turns = Turns(rng)

    @property
    def consistent(self) -> bool:
        return self.source.capabilities.consistent_reads

    def source_keys(self, routing: Routing, value: str) -> list[str]:
        return [PLAIN + value]

    async def page(self, key: str, after: Position | None, limit: int) -> QueryPage:
        if key.startswith(PLAIN):
            return await self._query(self.source, key[len(PLAIN):], after, limit)
        return await self._query(self.index.store, key, after, limit)

    async def scan(self, segment: int, segments: int, cursor: Mapping[str, Any] | None,
                   limit: int) -> ScanPage:
        return await self.tools.scan(segment, segments, cursor, limit)

    def copy_to(self, item: ScanItem, value: str) -> str | None:
        return self.routing.shard_key(value, item[0], rng=self._rng, turns=self._turns)


class GsiAdoptionLayouts(AdoptionLayouts):
    """A plain GSI adopted into a shardex GSI of the same table: a copy is the item's
    shard attribute, set by one conditional UpdateItem."""

    tools: GsiAdoptionTools

    def __init__(self, index: ShardedIndex, source: Store, tools: GsiAdoptionTools, *,
                 clock: Clock, rng: random.Random) -> None:
        super().__init__(index, source, tools, clock=clock, rng=rng)
        self._cost = 2.0  # write units of one update, base table and GSI (learned)

    def copy_to(self, item: ScanItem, value: str) -> str | None:
        shard = item[2]
        if shard is not None and in_place(self.routing, value, shard, item[0]):
            return None
        return super().copy_to(item, value)

    async def copy(self, item: ScanItem, value: str, key: str) -> bool:
        try:
            units = await self.tools.set_shard(item[0], value, item[2], key)
        except ConditionFailed:
            return False
        if units > 0:
            self._cost = 0.8 * self._cost + 0.2 * units
        return True

    clears = True

    async def clear(self, item: ScanItem) -> bool:
        """Remove the shard attribute left on an item whose raw value the application
        removed, or changed to one shardex cannot index (the shard attribute is
        shardex's own; the value, the application's)."""
        if item[2] is None:
            return False
        try:
            await self.tools.clear_shard(item[0], item[2], item[1])
        except ConditionFailed:
            return False  # changed since the scan: the next pass sees it as it is
        return True

    def copy_cost(self) -> float:
        return self._cost


class TableAdoptionLayouts(AdoptionLayouts):
    """An application's index table adopted into a shardex index table: a copy is an
    entry put at version 1 (``index`` sees throttles itself, to pace by them), then the
    base item read again.

    The application deletes an item (or changes its value) and then calls
    ``index.delete`` (``index.put``): between the Scan page that read the item and the
    copy, that call found nothing in the index to change, and the copy would bring the
    item back under a value it left. So once the copy landed, the item's raw value is
    read (strongly consistent): if it is no longer the one copied, the copy is taken
    out by a delete at version 2, which leaves alone any write the application made
    since (numbered 2 or more).
    """

    tools: TableAdoptionTools

    async def copy(self, item: ScanItem, value: str, key: str) -> bool:
        item_id, _, sort, attrs = item
        if not await self.index.put(value, item_id, sort=sort or "", attrs=attrs, version=1):
            return False
        if await self.tools.value(item_id) == value:
            return True
        await self.index.delete(value, item_id, version=2)
        return False

    def copy_cost(self) -> float:
        return 2.0  # one put of the index table's row and its placement (write units)


def adoption_layouts(index: ShardedIndex, source: Store,
                     tools: GsiAdoptionTools | TableAdoptionTools, *, clock: Clock,
                     rng: random.Random) -> AdoptionLayouts:
    """The layouts of an adoption whose source ``tools`` scan: a GSI's or a table's."""
    if isinstance(tools, GsiAdoptionTools):
        return GsiAdoptionLayouts(index, source, tools, clock=clock, rng=rng)
    return TableAdoptionLayouts(index, source, tools, clock=clock, rng=rng)
