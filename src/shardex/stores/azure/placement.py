"""The Azure Tables store's part of the cross-partition write (``shardex.stores.crosspart``).

An entry is a row pair in its shard key's partition, the ascending row and its mirror
(``keys.row_key``), written, marked and deleted together in one entity group
transaction; the placement is the entity ``P`` of the item's own partition. Every request
goes through the store's request path and counts one unit an entity it touches.
``crosspart``'s docstring has the steps of a write, the readers' check, repair and the
argument why reads stay exact.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import Any

from shardex.errors import StoreError
from shardex.keys import placement_key
from shardex.model.entries import Placement, StoredEntry
from shardex.stores.azure import codec, keys
from shardex.stores.azure.client import Row
from shardex.stores.crosspart import COMMITTED, MOVING, Placer, RepairReport
from shardex.stores.metered import Recorder

__all__ = ["Call", "Placer", "RepairReport", "TableRows"]

# The store's request path: ``await call(rec, key, operation, units, write, **params)``
# sends one request, maps its errors and reports ``units`` entities on ``key``.
Call = Callable[..., Awaitable[Any]]

_Operations = list[tuple[str, dict[str, Any], str | None]]


def _keys(row: Mapping[str, Any]) -> dict[str, Any]:
    return {"PartitionKey": row["PartitionKey"], "RowKey": row["RowKey"]}


class TableRows:
    """The Azure Tables format and requests of the cross-partition write (``crosspart.Rows``)."""

    item_field = "id"
    log = logging.getLogger("shardex.azure")

    def __init__(self, call: Call) -> None:
        self._call = call

    async def locate(self, rec: Recorder, namespace: str, item_id: str) -> Placement | None:
        partition = keys.placement_partition(namespace, item_id)
        found: Row | None = await self._call(rec, placement_key(item_id), "get", 1.0, False,
                                             partition=partition, row=codec.PLACEMENT_ROW)
        return None if found is None else codec.placement_from_entity(item_id, *found)

    def new_rows(self, namespace: str, entry: StoredEntry, token: str) -> list[dict[str, Any]]:
        return codec.entry_rows(keys.entry_partition(namespace, entry.shard_key), entry, token)

    def old_rows(self, namespace: str, entry: StoredEntry, token: str) -> list[dict[str, Any]]:
        partition = keys.entry_partition(namespace, entry.shard_key)
        return [{"PartitionKey": partition,
                 "RowKey": keys.row_key(entry.sort, entry.item_id, token, descending=d)}
                for d in (False, True)]

    def key(self, row: Mapping[str, Any]) -> tuple[str, str]:
        return row["PartitionKey"], row["RowKey"]

    def group(self, row: Mapping[str, Any]) -> Hashable | None:
        """A row and its mirror: one partition, token and position."""
        try:
            position = keys.decode_position(row["RowKey"])
        except (KeyError, StoreError, ValueError):
            return None
        return row["PartitionKey"], row.get("t", ""), repr(position)

    def placement(self, namespace: str, item_id: str, version: int, entry: StoredEntry | None,
                  token: str, history: tuple[str, ...]) -> dict[str, Any]:
        return codec.placement_entity(keys.placement_partition(namespace, item_id), item_id,
                                      version, entry, token, history)

    async def _transact(self, rec: Recorder, shard_key: str, operations: _Operations) -> Any:
        return await self._call(rec, shard_key, "transact", float(len(operations)), True,
                                operations=operations)

    async def write_pending(self, rec: Recorder, shard_key: str,
                            rows: list[dict[str, Any]]) -> list[str | None]:
        etags: list[str | None] = await self._transact(
            rec, shard_key, [("upsert", row, None) for row in rows])
        return etags

    async def mark_moving(self, rec: Recorder, shard_key: str, rows: list[dict[str, Any]],
                          token: str) -> None:
        await self._transact(rec, shard_key, [("merge", {**row, "st": MOVING, "mv": token},
                                               None) for row in rows])

    async def commit_rows(self, rec: Recorder, shard_key: str, rows: Sequence[Mapping[str, Any]],
                          etags: Sequence[str | None]) -> None:
        await self._transact(rec, shard_key, [
            ("merge", {**_keys(row), "st": COMMITTED}, etag)
            for row, etag in zip(rows, etags, strict=True)])

    async def delete_rows(self, rec: Recorder, shard_key: str, rows: Sequence[Mapping[str, Any]],
                          etags: Sequence[str | None]) -> None:
        await self._transact(rec, shard_key, [
            ("delete", _keys(row), etag) for row, etag in zip(rows, etags, strict=True)])

    async def create_placement(self, rec: Recorder, item_id: str,
                               placement: dict[str, Any]) -> None:
        await self._call(rec, placement_key(item_id), "create", 1.0, True, entity=placement)

    async def replace_placement(self, rec: Recorder, item_id: str, placement: dict[str, Any],
                                etag: str | None) -> None:
        await self._call(rec, placement_key(item_id), "update", 1.0, True, entity=placement,
                         etag=etag, merge=False)
