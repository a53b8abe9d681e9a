"""Index-table mode of the DynamoDB store: shardex writes the entries, in its own table.

Layout of the table (``pk`` S HASH, ``sk`` S RANGE):

==========================  ==================  ==========================================
``pk``                      ``sk``              other attributes
==========================  ==================  ==========================================
shard key (``PENDING#3``)   sort NUL item id    ``id``, ``v`` (entry version), ``attrs`` (M)
``#placement#<item id>``    ``#``               ``v``; the entry's ``key``, ``sort``, ``ev``
                                                and ``attrs`` unless a tombstone
``#record#<index>``         record key          ``body`` (JSON text), ``revision``
``#owner``                  ``#``               ``index``: the one index the table holds
==========================  ==================  ==========================================

A logical key never starts with ``#``, so the reserved partition keys cannot collide
with a shard key. ``place`` is one TransactWriteItems: the placement put, conditional
on its version, the old entry's delete and the new entry's put, so a move is atomic
and a late write never lands over a newer one.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from shardex.errors import CapabilityMissing, ConditionFailed, StoreError
from shardex.stores.base import Capabilities, Placement, Position, QueryPage, StoredEntry
from shardex.stores.dynamodb_codec import (
    PLACEMENT_PREFIX,
    decode_position,
    encode_position,
    entry_from_item,
    entry_item,
    entry_key,
    item_units,
    placement_from_item,
    placement_item,
    placement_key,
)

__all__ = ["Layout", "Requester", "TableLayout", "units_of"]

_MAX_PAGE = 1000


class Requester(Protocol):
    """The store's request path: calls DynamoDB, maps errors, meters the units.

    ``meter`` lists the keys to count the request on, with their weights for
    sharing a write's units (a read counts on its first key).
    """

    def __call__(self, namespace: str, operation: str, params: dict[str, Any], *,
                 target: str, key: str | None, meter: Sequence[tuple[str, float]],
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
    async def locate(self, namespace: str, item_id: str) -> Placement | None: ...

    @abc.abstractmethod
    async def place(self, namespace: str, item_id: str, entry: StoredEntry | None, *,
                    version: int, expected: int | None, known: Placement | None) -> float:
        """Write the placement; ``known`` is the placement at ``expected`` if it is known."""

    @abc.abstractmethod
    async def query(self, namespace: str, shard_key: str, *, after: Position | None,
                    descending: bool, limit: int) -> QueryPage: ...

    @abc.abstractmethod
    async def count(self, namespace: str, shard_key: str) -> int: ...

    @abc.abstractmethod
    def key_attributes(self, shard_key: str, sort: str, item_id: str) -> dict[str, Any]: ...

    async def _count_pages(self, namespace: str, shard_key: str,
                           params: dict[str, Any]) -> int:
        """Sum ``Count`` over every page of a ``Select=COUNT`` Query."""
        params["Select"] = "COUNT"
        total = 0
        while True:
            response = await self._request(namespace, "Query", params, target=self.target,
                                            key=shard_key, meter=[(shard_key, 1.0)],
                                            write=False)
            total += int(response.get("Count", 0))
            last = response.get("LastEvaluatedKey")
            if last is None:
                return total
            params["ExclusiveStartKey"] = last


class TableLayout(Layout):
    """Index-table mode: entries, placements, records and the owner in one table."""

    capabilities = Capabilities(atomic_place=True, consistent_reads=True, max_page=_MAX_PAGE)
    owner_scope = "#"

    def __init__(self, request: Requester, table: str) -> None:
        super().__init__(request, table)
        self.records_table = table

    async def check(self, describe: Describe) -> None:
        table = await describe(self.table)
        schema = key_schema(table)
        if schema != [("pk", "HASH", "S"), ("sk", "RANGE", "S")]:
            found = ", ".join(f"{a} {t} {k}" for a, k, t in schema)
            raise StoreError(
                f"table {self.table!r} is not a shardex index table: its key is {found}, "
                "not pk S HASH, sk S RANGE; create one with: shardex dynamodb create-table "
                f"{self.table}, or use GSI mode (?gsi=...) for a table you own")

    async def locate(self, namespace: str, item_id: str) -> Placement | None:
        pkey = placement_key(item_id)
        response = await self._request(
            namespace, "GetItem", {"TableName": self.table, "Key": pkey, "ConsistentRead": True,
                                   "ReturnConsumedCapacity": "TOTAL"},
            target=self.target, key=pkey["pk"]["S"], meter=[(PLACEMENT_PREFIX, 1.0)],
            write=False)
        item = response.get("Item")
        return None if item is None else placement_from_item(item_id, item)

    async def place(self, namespace: str, item_id: str, entry: StoredEntry | None, *,
                    version: int, expected: int | None, known: Placement | None) -> float:
        old: StoredEntry | None = None
        if expected is not None:
            if known is None or known.version != expected:
                known = await self.locate(namespace, item_id)
            found = None if known is None else known.version
            if found != expected:
                raise ConditionFailed(
                    f"place of item {item_id!r} in {namespace!r} expected version {expected}, "
                    f"found {'never placed' if found is None else found}")
            old = known.entry if known is not None else None
        new_placement = placement_item(item_id, version, entry)
        put: dict[str, Any] = {"TableName": self.table, "Item": new_placement,
                               "ExpressionAttributeNames": {"#v": "v"}}
        if expected is None:
            put["ConditionExpression"] = "attribute_not_exists(#v)"
        else:
            put["ConditionExpression"] = "#v = :expected"
            put["ExpressionAttributeValues"] = {":expected": {"N": str(expected)}}
        actions: list[dict[str, Any]] = [{"Put": put}]
        meter: list[tuple[str, float]] = [(PLACEMENT_PREFIX, float(item_units(new_placement)))]
        new_item = entry_item(entry) if entry is not None else None
        if old is not None and (entry is None or entry_key(old) != entry_key(entry)):
            # a stale idea of where the old entry is cancels the whole transaction
            actions.append({"Delete": {"TableName": self.table, "Key": entry_key(old),
                                       "ConditionExpression": "attribute_exists(pk)"}})
            meter.append((old.shard_key, float(item_units(entry_item(old)))))
        if entry is not None and new_item is not None:
            actions.append({"Put": {"TableName": self.table, "Item": new_item}})
            meter.append((entry.shard_key, float(item_units(new_item))))
        response = await self._request(
            namespace, "TransactWriteItems",
            {"TransactItems": actions, "ReturnConsumedCapacity": "TOTAL"},
            target=self.target, key=entry.shard_key if entry is not None else None,
            meter=meter, write=True)
        return units_of(response)

    async def query(self, namespace: str, shard_key: str, *, after: Position | None,
                    descending: bool, limit: int) -> QueryPage:
        params: dict[str, Any] = {
            "TableName": self.table, "KeyConditionExpression": "pk = :k",
            "ExpressionAttributeValues": {":k": {"S": shard_key}},
            "ScanIndexForward": not descending, "Limit": limit, "ConsistentRead": True,
            "ReturnConsumedCapacity": "TOTAL"}
        if after is not None:
            params["ExclusiveStartKey"] = {"pk": {"S": shard_key},
                                           "sk": {"S": encode_position(*after)}}
        response = await self._request(namespace, "Query", params, target=self.target,
                                        key=shard_key, meter=[(shard_key, 1.0)], write=False)
        entries = [entry_from_item(item) for item in response.get("Items", [])]
        last = response.get("LastEvaluatedKey")
        resume = None if last is None else decode_position(last["sk"]["S"])
        return QueryPage(entries, resume, units_of(response))

    async def count(self, namespace: str, shard_key: str) -> int:
        return await self._count_pages(namespace, shard_key, {
            "TableName": self.table, "KeyConditionExpression": "pk = :k",
            "ExpressionAttributeValues": {":k": {"S": shard_key}},
            "ConsistentRead": True, "ReturnConsumedCapacity": "TOTAL"})

    def key_attributes(self, shard_key: str, sort: str, item_id: str) -> dict[str, Any]:
        raise CapabilityMissing(
            f"table {self.table!r} is in index-table mode: shardex writes the entries itself, "
            "so there are no key attributes to add to an application's items; use GSI mode "
            "(dynamodb://TABLE?gsi=...) to index the application's own items")
