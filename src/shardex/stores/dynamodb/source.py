"""A plain index of the application's, read as a store: keyed by the raw value.

``SourceTableLayout`` reads an index table the application keeps itself (below);
``SourceGsiLayout`` a plain GSI:

An index adopted from a plain one reads a value from it while the adoption reads the
old index (``shardex.adopted``), instead of its own shard keys: one Query of
``attribute = V`` on the old GSI, ordered by the application's own sort attribute (the
new GSI's), runs of equal sort values read whole and ordered by item id as in
``sort_owner=application``.
Its entries look like the new GSI's: ``shard_key`` is the plain value, ``attrs`` are the
projected attributes less the id, the sort, shardex's own and the new shard attribute
(the raw ``attribute`` stays in them, as the new GSI projects it). The version attribute
need not be projected (an entry without it is at version 0). Read-only: a write raises
CapabilityMissing. It shares the index store's client and never closes it.
"""

from __future__ import annotations

from typing import Any

from shardex.errors import (
    CapabilityMissing,
    MalformedItem,
    NotFound,
    StoreError,
    Unavailable,
)
from shardex.model.entries import Placement, Position, StoredEntry, beyond, up_to
from shardex.stores.base import Capabilities
from shardex.stores.dynamodb.client import DynamoDBClient
from shardex.stores.dynamodb.codec import from_attributes
from shardex.stores.dynamodb.gsi import GsiLayout
from shardex.stores.dynamodb.layout import Describe, Layout, Page, Requester, key_schema
from shardex.stores.metered import Recorder

__all__ = ["BorrowedClient", "SourceGsiLayout", "SourceTableLayout", "index_schema"]


class BorrowedClient(DynamoDBClient):
    """Another store's client, used as is: opening and closing it are left to its owner."""

    def __init__(self, client: DynamoDBClient) -> None:
        self._client = client
        self.endpoint = client.endpoint

    async def call(self, operation: str, **params: Any) -> dict[str, Any]:
        return await self._client.call(operation, **params)


def index_schema(table: dict[str, Any] | Any, name: str) -> list[tuple[str, str, str]] | None:
    """``(attribute, HASH|RANGE, type)`` of GSI ``name`` of a table description, or None."""
    types = {a["AttributeName"]: a["AttributeType"]
             for a in table.get("AttributeDefinitions", [])}
    for index in table.get("GlobalSecondaryIndexes") or []:
        if index["IndexName"] == name:
            return [(k["AttributeName"], k["KeyType"], types.get(k["AttributeName"], "?"))
                    for k in index.get("KeySchema", [])]
    return None


class SourceGsiLayout(GsiLayout):
    """The plain GSI ``gsi`` of ``target``'s table, keyed by ``attribute``: read-only."""

    def __init__(self, request: Requester, target: GsiLayout, gsi: str, attribute: str) -> None:
        super().__init__(request, target.table, gsi=gsi, key_attribute=attribute,
                         sort_attribute=target.sort_attribute,
                         id_attribute=target.id_attribute,
                         version_attribute=target.version_attribute,
                         token_attribute=target.token_attribute,
                         history_attribute=target.history_attribute,
                         sort_owner="application", meta_table=target.records_table)
        # the index's owner record is the new GSI's: the old one is read for that index
        self.owner_scope = target.owner_scope
        self._own = frozenset({target.key_attribute, target.sort_attribute,
                               target.id_attribute, target.version_attribute,
                               target.token_attribute, target.history_attribute})

    async def check(self, describe: Describe) -> None:
        table = await describe(self.table)
        if key_schema(table) != [(self.id_attribute, "HASH", "S")]:
            raise StoreError(f"table {self.table!r} is not keyed by {self.id_attribute} alone")
        schema = index_schema(dict(table), self.gsi)
        if schema is None:
            raise NotFound(f"table {self.table!r} has no global secondary index {self.gsi!r}: "
                           "the index being adopted is gone; roll the adoption back or "
                           "complete it")
        wanted = [(self.key_attribute, "HASH", "S"), (self.sort_attribute, "RANGE", "S")]
        if schema != wanted:
            found = ", ".join(f"{a} {t} {k}" for a, k, t in schema)
            raise StoreError(f"{self.target} has the key {found}, not {self.key_attribute} S "
                             f"HASH and {self.sort_attribute} S RANGE")
        for index in table.get("GlobalSecondaryIndexes") or []:
            if index["IndexName"] == self.gsi and index.get("IndexStatus", "ACTIVE") not in (
                    "ACTIVE", "UPDATING"):
                raise Unavailable(f"{self.target} is {index.get('IndexStatus')}")

    async def place(self, namespace: str, item_id: str, entry: StoredEntry | None, *,
                    version: int, expected: Placement | None, token: str,
                    rec: Recorder) -> None:
        raise CapabilityMissing(f"{self.target} is the index being adopted, read-only for "
                                "shardex")


class SourceTableLayout(Layout):
    """The application's own index table ``table`` keyed by the raw value: read-only.

    Rows of value ``V`` have ``attribute = V`` as their HASH key, the item id in
    ``id_attribute`` and the sort in ``sort_attribute`` (absent: '').
    Their RANGE key is the application's, in no order shardex knows, so a query reads
    every row of ``V`` (strongly consistent) and pages them in ``(sort, item_id)`` order
    itself: a transitional read path, as costly per page as the value is large.
    """

    def __init__(self, request: Requester, target: Layout, table: str, *, attribute: str,
                 id_attribute: str, sort_attribute: str) -> None:
        super().__init__(request, table)
        self.attribute = attribute
        self.id_attribute = id_attribute
        self.sort_attribute = sort_attribute
        self.capabilities = Capabilities(consistent_reads=True, max_page=1000,
                                         foreign_writes=True, writes_sort=False)
        self.owner_scope = target.owner_scope
        self.records_table = target.records_table
        self._own = frozenset({self.attribute, self.id_attribute, self.sort_attribute})

    async def check(self, describe: Describe) -> None:
        table = await describe(self.table)
        schema = key_schema(table)
        if not schema or schema[0] != (self.attribute, "HASH", "S"):
            found = ", ".join(f"{a} {t} {k}" for a, k, t in schema)
            raise StoreError(f"table {self.table!r} has the key {found}, not {self.attribute} "
                             "S HASH")

    async def _rows(self, shard_key: str, rec: Recorder) -> list[StoredEntry]:
        params: dict[str, Any] = {
            "TableName": self.table, "KeyConditionExpression": "#a = :v",
            "ExpressionAttributeNames": {"#a": self.attribute},
            "ExpressionAttributeValues": {":v": {"S": shard_key}}, "ConsistentRead": True,
            "ReturnConsumedCapacity": "TOTAL"}
        rows: list[StoredEntry] = []
        while True:
            response = await self._request(rec, "Query", params, target=self.target,
                                           weights=[(shard_key, 1.0)], write=False)
            for item in response.get("Items", []):
                item_id = item.get(self.id_attribute, {}).get("S")
                if not isinstance(item_id, str):
                    rec.malformed(MalformedItem(
                        f"a row of {shard_key!r} in table {self.table!r} has no text "
                        f"{self.id_attribute!r}: {item!r}"[:300]), str(item_id))
                    continue
                sort = item.get(self.sort_attribute, {}).get("S", "")
                rows.append(StoredEntry(shard_key, sort, item_id, from_attributes(
                    {k: v for k, v in item.items() if k not in self._own}), version=0))
            last = response.get("LastEvaluatedKey")
            if last is None:
                return rows
            params["ExclusiveStartKey"] = last

    async def query(self, shard_key: str, *, after: Position | None, until: Position | None,
                    descending: bool, limit: int, rec: Recorder) -> Page:
        rows = sorted(await self._rows(shard_key, rec), key=lambda e: e.position,
                      reverse=descending)
        if after is not None:
            rows = [e for e in rows if beyond(e.position, after, descending)]
        page = rows[:limit]
        return up_to(page, page[-1].position if len(rows) > limit else None, until, descending)

    async def count(self, shard_key: str, rec: Recorder) -> int:
        return await self._count_pages(shard_key, {
            "TableName": self.table, "KeyConditionExpression": "#a = :v",
            "ExpressionAttributeNames": {"#a": self.attribute},
            "ExpressionAttributeValues": {":v": {"S": shard_key}}, "ConsistentRead": True,
            "ReturnConsumedCapacity": "TOTAL"}, rec)

    async def locate(self, item_id: str, rec: Recorder) -> Placement | None:
        raise self._no_placements()

    async def locate_many(self, item_ids: list[str], rec: Recorder
                          ) -> tuple[dict[str, Placement | None], list[str]]:
        raise self._no_placements()

    def _no_placements(self) -> CapabilityMissing:
        return CapabilityMissing(f"{self.target} is the index being adopted: it keeps no "
                                 "placements, and is read-only for shardex")

    async def place(self, namespace: str, item_id: str, entry: StoredEntry | None, *,
                    version: int, expected: Placement | None, token: str,
                    rec: Recorder) -> None:
        raise CapabilityMissing(f"{self.target} is the index being adopted, read-only for "
                                "shardex")

    def key_attributes(self, shard_key: str, sort: str | None,
                       item_id: str) -> dict[str, Any]:
        raise CapabilityMissing(f"{self.target} is the index being adopted")
