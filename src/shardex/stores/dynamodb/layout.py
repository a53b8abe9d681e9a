"""What both modes of the DynamoDB store share: the Layout interface and the request path.

A layout says where one mode keeps entries and placements. It sends every request
through the store's ``Requester``, which calls DynamoDB, maps its errors and reports on
the call's Recorder what the request consumed: ``weights`` lists the keys a request
touched, for a write weighted by their items' write units (the one split of a total
over keys is ``shardex.stores.metered.split_units``); a read counts on its first key.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from shardex.keys import placement_key
from shardex.model.entries import Placement, Position, StoredEntry
from shardex.stores.base import Capabilities
from shardex.stores.metered import Recorder

__all__ = ["Describe", "Layout", "Requester", "key_schema", "units_of"]

Page = tuple[list[StoredEntry], Position | None]


class Requester(Protocol):
    """The store's request path: calls DynamoDB, maps errors, reports consumed capacity."""

    def __call__(self, rec: Recorder, operation: str, params: dict[str, Any], *,
                 target: str, weights: Sequence[tuple[str, float]],
                 write: bool) -> Awaitable[dict[str, Any]]: ...


Describe = Callable[[str], Awaitable[Mapping[str, Any]]]


def units_of(response: Mapping[str, Any]) -> float:
    """Return the capacity units a response reports (summed over a transaction's tables)."""
    consumed = response.get("ConsumedCapacity")
    if consumed is None:
        return 0.0
    if isinstance(consumed, list):
        return sum(float(c.get("CapacityUnits") or 0.0) for c in consumed)
    return float(consumed.get("CapacityUnits") or 0.0)


def key_schema(description: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """Return ``(attribute, HASH|RANGE, type)`` for each key attribute of a description."""
    types = {a["AttributeName"]: a["AttributeType"]
             for a in description.get("AttributeDefinitions", [])}
    return [(k["AttributeName"], k["KeyType"], types.get(k["AttributeName"], "?"))
            for k in description.get("KeySchema", [])]


class Layout(abc.ABC):
    """Where one mode of the DynamoDB store keeps entries and placements."""

    capabilities: Capabilities
    owner_scope: str
    records_table: str

    def __init__(self, request: Requester, table: str) -> None:
        self._request = request
        self.table = table

    @property
    def target(self) -> str:
        """The table (or index) entries are read from, for messages."""
        return f"table {self.table!r}"

    @abc.abstractmethod
    async def check(self, describe: Describe) -> None:
        """Raise NotFound or StoreError unless the tables and indexes needed exist."""

    @abc.abstractmethod
    async def locate(self, item_id: str, rec: Recorder) -> Placement | None: ...

    @abc.abstractmethod
    async def locate_many(self, item_ids: list[str], rec: Recorder
                          ) -> tuple[dict[str, Placement | None], list[str]]:
        """One BatchGetItem of at most 100 placements: those read, and those left unread."""

    async def _batch_get(self, rec: Recorder, item_ids: list[str], table: str,
                         keys: Sequence[dict[str, Any]], id_of: Callable[[Mapping[str, Any]], str]
                         ) -> tuple[dict[str, Mapping[str, Any] | None], list[str]]:
        """Read the items ``keys`` (of ``item_ids``) strongly in one BatchGetItem: each
        item read (None: absent) by id, and the ids DynamoDB left unread (throttled, or
        past the response's 16 MB). Its units count on the first placement's key."""
        response = await self._request(
            rec, "BatchGetItem", {"RequestItems": {table: {"Keys": list(keys),
                                                           "ConsistentRead": True}},
                                  "ReturnConsumedCapacity": "TOTAL"},
            target=f"table {table!r}", weights=[(placement_key(item_ids[0]), 1.0)],
            write=False)
        unread = [id_of(key) for key in
                  response.get("UnprocessedKeys", {}).get(table, {}).get("Keys", [])]
        found: dict[str, Mapping[str, Any] | None] = dict.fromkeys(item_ids)
        for item in response.get("Responses", {}).get(table, []):
            found[id_of(item)] = item
        for item_id in unread:
            del found[item_id]
        return found, unread

    @abc.abstractmethod
    async def place(self, namespace: str, item_id: str, entry: StoredEntry | None, *,
                    version: int, expected: Placement | None, token: str,
                    rec: Recorder) -> None:
        """Write the placement, conditioned on ``expected`` exactly as located."""

    @abc.abstractmethod
    async def query(self, shard_key: str, *, after: Position | None, until: Position | None,
                    descending: bool, limit: int, rec: Recorder) -> Page: ...

    @abc.abstractmethod
    async def count(self, shard_key: str, rec: Recorder) -> int: ...

    @abc.abstractmethod
    def key_attributes(self, shard_key: str, sort: str | None,
                       item_id: str) -> dict[str, Any]: ...

    async def _count_pages(self, shard_key: str, params: dict[str, Any],
                           rec: Recorder) -> int:
        """Sum ``Count`` over every page of a ``Select=COUNT`` Query."""
        params["Select"] = "COUNT"
        total = 0
        while True:
            response = await self._request(rec, "Query", params, target=self.target,
                                           weights=[(shard_key, 1.0)], write=False)
            total += int(response.get("Count", 0))
            last = response.get("LastEvaluatedKey")
            if last is None:
                return total
            params["ExclusiveStartKey"] = last
