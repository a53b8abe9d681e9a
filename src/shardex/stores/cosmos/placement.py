"""The Cosmos DB store's part of the cross-partition write (``shardex.stores.crosspart``).

A transactional batch covers one logical partition, and an item's placement and its
entry live in different ones, so a write is ``crosspart``'s protocol on Cosmos DB's
terms: one document an entry (Cosmos DB reads in either order, so there are no mirror
rows), a ``patch`` to flip a status, the placement document ``P`` of the item's own
logical partition. Every request goes through the store's request path, which meters
the request units it cost. ``crosspart``'s docstring has the steps of a write, the
readers' check, repair and the argument why reads stay exact.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import Any

from shardex.keys import placement_key
from shardex.model.entries import Placement, StoredEntry
from shardex.stores.cosmos import codec
from shardex.stores.crosspart import COMMITTED, MOVING, Placer, RepairReport
from shardex.stores.metered import Recorder

__all__ = ["Call", "DocumentRows", "Placer", "RepairReport"]

# The store's request path: ``await call(rec, key, operation, write, **params)`` sends
# one request, maps its errors, meters its request units on ``key`` and returns its value.
Call = Callable[..., Awaitable[Any]]
_COMMIT = [{"op": "set", "path": "/st", "value": COMMITTED}]


class DocumentRows:
    """The Cosmos DB format and requests of the cross-partition write (``crosspart.Rows``)."""

    item_field = "i"
    log = logging.getLogger("shardex.cosmos")

    def __init__(self, call: Call) -> None:
        self._call = call

    async def locate(self, rec: Recorder, namespace: str, item_id: str) -> Placement | None:
        doc = await self._call(rec, placement_key(item_id), "get", False,
                               partition=codec.placement_partition(namespace, item_id),
                               id=codec.PLACEMENT_ID)
        return None if doc is None else codec.placement_from_doc(item_id, doc)

    async def locate_many(self, rec: Recorder, namespace: str, item_ids: Sequence[str]
                          ) -> dict[str, Placement | None]:
        """Every item's placement document in one ReadMany (None: never placed)."""
        ids = {codec.placement_partition(namespace, item_id): item_id for item_id in item_ids}
        docs = await self._call(rec, placement_key(item_ids[0]), "read_many", False,
                                items=[(codec.PLACEMENT_ID, partition) for partition in ids])
        found: dict[str, Placement | None] = dict.fromkeys(item_ids)
        for doc in docs:
            item_id = ids[doc["pk"]]
            found[item_id] = codec.placement_from_doc(item_id, doc)
        return found

    def new_rows(self, namespace: str, entry: StoredEntry, token: str) -> list[dict[str, Any]]:
        return [codec.entry_doc(codec.entry_partition(namespace, entry.shard_key), entry,
                                token)]

    def old_rows(self, namespace: str, entry: StoredEntry, token: str) -> list[dict[str, Any]]:
        return [{"pk": codec.entry_partition(namespace, entry.shard_key),
                 "id": codec.entry_id(entry.sort, entry.item_id, token)}]

    def key(self, row: Mapping[str, Any]) -> tuple[str, str]:
        return row["pk"], row["id"]

    def group(self, row: Mapping[str, Any]) -> Hashable | None:
        """A document alone."""
        return self.key(row)

    def placement(self, namespace: str, item_id: str, version: int, entry: StoredEntry | None,
                  token: str, history: tuple[str, ...]) -> dict[str, Any]:
        return codec.placement_doc(codec.placement_partition(namespace, item_id), item_id,
                                   version, entry, token, history)

    async def write_pending(self, rec: Recorder, shard_key: str,
                            rows: list[dict[str, Any]]) -> list[str | None]:
        return [(await self._call(rec, shard_key, "upsert", True, doc=doc))["_etag"]
                for doc in rows]

    async def mark_moving(self, rec: Recorder, shard_key: str, rows: list[dict[str, Any]],
                          token: str) -> None:
        for doc in rows:
            await self._call(rec, shard_key, "patch", True, partition=doc["pk"], id=doc["id"],
                             operations=[{"op": "set", "path": "/st", "value": MOVING},
                                         {"op": "set", "path": "/mv", "value": token}])

    async def commit_rows(self, rec: Recorder, shard_key: str, rows: Sequence[Mapping[str, Any]],
                          etags: Sequence[str | None]) -> None:
        for doc, etag in zip(rows, etags, strict=True):
            await self._call(rec, shard_key, "patch", True, partition=doc["pk"], id=doc["id"],
                             operations=_COMMIT, etag=etag)

    async def delete_rows(self, rec: Recorder, shard_key: str, rows: Sequence[Mapping[str, Any]],
                          etags: Sequence[str | None]) -> None:
        for doc, etag in zip(rows, etags, strict=True):
            await self._call(rec, shard_key, "delete", True, partition=doc["pk"], id=doc["id"],
                             etag=etag)

    async def create_placement(self, rec: Recorder, item_id: str,
                               placement: dict[str, Any]) -> None:
        await self._call(rec, placement_key(item_id), "create", True, doc=placement)

    async def replace_placement(self, rec: Recorder, item_id: str, placement: dict[str, Any],
                                etag: str | None) -> None:
        await self._call(rec, placement_key(item_id), "replace", True, doc=placement,
                         etag=etag)
