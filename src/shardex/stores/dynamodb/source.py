"""The plain GSI an index is adopted from, read as a store: keyed by the raw value.

While an adoption reads the old index (``Adoption.reads_source``), ``ShardedIndex`` reads
a value from this store instead of its own shard keys: one Query of ``attribute = V`` on
the old GSI, ordered by the application's own sort attribute (the new GSI's), runs of
equal sort values read whole and ordered by item id as in ``sort_owner=application``.
Its entries look like the new GSI's: ``shard_key`` is the plain value, ``attrs`` are the
projected attributes less the id, the sort, shardex's own and the new shard attribute
(the raw ``attribute`` stays in them, as the new GSI projects it). The version attribute
need not be projected (an entry without it is at version 0). Read-only: a write raises
CapabilityMissing. It shares the index store's client and never closes it.
"""

from __future__ import annotations

from typing import Any

from shardex.adoption import Adoption
from shardex.errors import CapabilityMissing, InvalidInput, NotFound, StoreError, Unavailable
from shardex.stores.base import Placement, StoredEntry
from shardex.stores.dynamodb.client import DynamoDBClient
from shardex.stores.dynamodb.gsi import GsiLayout
from shardex.stores.dynamodb.layout import Describe, Requester, key_schema
from shardex.stores.metered import Recorder

__all__ = ["BorrowedClient", "SourceGsiLayout", "index_schema"]


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
    """The old plain GSI ``adoption.source`` on ``adoption.attribute``, read-only."""

    def __init__(self, request: Requester, target: GsiLayout, adoption: Adoption) -> None:
        if adoption.kind != "gsi":
            raise InvalidInput(f"adoption {adoption.id} reads an index table, not a GSI")
        super().__init__(request, target.table, gsi=adoption.source,
                         key_attribute=adoption.attribute,
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
