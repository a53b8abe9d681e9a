"""GSI mode of the DynamoDB store: the application owns the items, DynamoDB the index.

The base table is the application's, keyed by ``id_attribute`` (HASH only). Its
global secondary index has ``key_attribute`` (the shard key, ``PENDING#3``) as HASH
and ``sort_attribute`` as RANGE. shardex writes the sort attribute in the same
order-preserving encoding as index-table mode, ``sort + NUL + item id``, so the
GSI's order is total and equals shardex's ``(sort, item_id)`` order; an application
that writes its own items gets both attributes from ``index.key_attributes``.

- ``place`` is one UpdateItem on the base item, conditional on ``version_attribute``:
  it sets the key and sort attributes, the version and the attrs that changed; a
  delete REMOVEs the key and sort attributes (the item leaves the sparse GSI) and
  keeps the version as the tombstone. The application's other attributes are left
  alone, and attrs equal to those ``locate`` read are not rewritten, so a move does
  not overwrite the application's concurrent changes with stale copies.
- ``locate`` is a strongly consistent GetItem of the base item. An item that carries
  a key attribute but no version (the application wrote it) is at version 0.
- ``query`` and ``count`` are Queries on the GSI, which DynamoDB keeps eventually
  consistent: ``capabilities.consistent_reads`` is False and every Page says
  ``consistent=False``. An entry's attrs are the attributes the GSI projects, less
  the id, key, sort and version attributes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shardex.errors import InvalidInput, NotFound, StoreError, Unavailable
from shardex.keys import placement_key
from shardex.stores.base import Capabilities, Placement, Position, StoredEntry
from shardex.stores.dynamodb.codec import (
    decode_position,
    encode_position,
    from_attributes,
    to_attribute,
)
from shardex.stores.dynamodb.layout import Describe, Layout, Page, Requester, key_schema
from shardex.stores.metered import Recorder

__all__ = ["GsiLayout"]

_MAX_PAGE = 1000


class GsiLayout(Layout):
    """GSI mode: entries are attributes of the application's base items."""

    capabilities = Capabilities(consistent_reads=False, max_page=_MAX_PAGE)

    def __init__(self, request: Requester, table: str, *, gsi: str, key_attribute: str,
                 sort_attribute: str, id_attribute: str, version_attribute: str,
                 meta_table: str) -> None:
        super().__init__(request, table)
        names = {"key_attribute": key_attribute, "sort_attribute": sort_attribute,
                 "id_attribute": id_attribute, "version_attribute": version_attribute}
        for option, name in names.items():
            if not isinstance(name, str) or not name:
                raise InvalidInput(f"dynamodb:// GSI mode needs {option}, got {name!r}")
        if len(set(names.values())) != len(names):
            raise InvalidInput(f"dynamodb:// GSI mode needs four distinct attribute names, "
                               f"got {names}")
        self.gsi = gsi
        self.key_attribute = key_attribute
        self.sort_attribute = sort_attribute
        self.id_attribute = id_attribute
        self.version_attribute = version_attribute
        self.records_table = meta_table
        self.owner_scope = f"{table}/{gsi}"
        self._own = frozenset(names.values())

    @property
    def target(self) -> str:
        return f"index {self.gsi!r} of table {self.table!r}"

    async def check(self, describe: Describe) -> None:
        table = await describe(self.table)
        if key_schema(table) != [(self.id_attribute, "HASH", "S")]:
            found = ", ".join(f"{a} {t} {k}" for a, k, t in key_schema(table))
            raise StoreError(
                f"table {self.table!r} has the key {found}; GSI mode needs a base table keyed "
                f"by {self.id_attribute} S HASH alone (the id_attribute option)")
        indexes = {i["IndexName"]: i for i in table.get("GlobalSecondaryIndexes") or []}
        index = indexes.get(self.gsi)
        if index is None:
            known = ", ".join(sorted(indexes)) or "none"
            raise NotFound(f"table {self.table!r} has no global secondary index {self.gsi!r} "
                           f"(it has: {known})")
        types = {a["AttributeName"]: a["AttributeType"]
                 for a in table.get("AttributeDefinitions", [])}
        schema = [(k["AttributeName"], k["KeyType"], types.get(k["AttributeName"], "?"))
                  for k in index.get("KeySchema", [])]
        wanted = [(self.key_attribute, "HASH", "S"), (self.sort_attribute, "RANGE", "S")]
        if schema != wanted:
            found = ", ".join(f"{a} {t} {k}" for a, k, t in schema)
            raise StoreError(
                f"{self.target} has the key {found}; shardex needs {self.key_attribute} S HASH "
                f"and {self.sort_attribute} S RANGE (the key_attribute and sort_attribute "
                "options)")
        status = index.get("IndexStatus", "ACTIVE")
        if status != "ACTIVE":
            raise Unavailable(f"{self.target} is {status}, not ACTIVE yet; try again when "
                              "DynamoDB has finished building it")
        await describe(self.records_table)

    def _key(self, item_id: str) -> dict[str, Any]:
        return {self.id_attribute: {"S": item_id}}

    def _entry(self, item: Mapping[str, Any]) -> StoredEntry | None:
        shard_key = item.get(self.key_attribute, {}).get("S")
        encoded = item.get(self.sort_attribute, {}).get("S")
        if shard_key is None or encoded is None:
            return None  # not in the GSI: a tombstone, or never indexed
        item_id = item[self.id_attribute]["S"]
        sort, _ = decode_position(encoded, item_id)
        attrs = from_attributes({k: v for k, v in item.items() if k not in self._own})
        version = item.get(self.version_attribute, {}).get("N")
        return StoredEntry(shard_key=shard_key, sort=sort, item_id=item_id, attrs=attrs,
                           version=int(version) if version is not None else 0)

    async def locate(self, item_id: str, rec: Recorder) -> Placement | None:
        response = await self._request(
            rec, "GetItem", {"TableName": self.table, "Key": self._key(item_id),
                             "ConsistentRead": True, "ReturnConsumedCapacity": "TOTAL"},
            target=f"table {self.table!r}", weights=[(placement_key(item_id), 1.0)],
            write=False)
        item = response.get("Item")
        if item is None:
            return None
        entry = self._entry(item)
        version = item.get(self.version_attribute, {}).get("N")
        if version is None:
            return None if entry is None else Placement(item_id, 0, entry)
        return Placement(item_id, int(version), entry)

    async def place(self, namespace: str, item_id: str, entry: StoredEntry | None, *,
                    version: int, expected: int | None, known: Placement | None,
                    rec: Recorder) -> None:
        names = {"#k": self.key_attribute, "#s": self.sort_attribute,
                 "#v": self.version_attribute}
        values: dict[str, Any] = {":v": {"N": str(version)}}
        if expected is None:
            condition = "attribute_not_exists(#v) AND attribute_not_exists(#k)"
        elif expected == 0:
            condition = "attribute_not_exists(#v) AND attribute_exists(#k)"
        else:
            condition, values[":e"] = "#v = :e", {"N": str(expected)}
        old = known.entry if known is not None and known.version == expected else None
        if entry is None:
            update = "SET #v = :v REMOVE #k, #s"
            shard_key = old.shard_key if old is not None else placement_key(item_id)
        else:
            sets = ["#k = :k", "#s = :s", "#v = :v"]
            values[":k"] = {"S": entry.shard_key}
            values[":s"] = {"S": encode_position(entry.sort, item_id)}
            unchanged = old.attrs if old is not None else {}
            for i, (name, value) in enumerate(sorted(entry.attrs.items())):
                if name in self._own:
                    raise InvalidInput(f"attrs name {name!r} is one of shardex's own attributes "
                                       f"in {self.target}: {', '.join(sorted(self._own))}")
                if name in unchanged and unchanged[name] == value:
                    continue
                names[f"#a{i}"] = name
                values[f":a{i}"] = to_attribute(value, f"attrs[{name!r}]")
                sets.append(f"#a{i} = :a{i}")
            update = "SET " + ", ".join(sets)
            shard_key = entry.shard_key
        await self._request(
            rec, "UpdateItem",
            {"TableName": self.table, "Key": self._key(item_id), "UpdateExpression": update,
             "ConditionExpression": condition, "ExpressionAttributeNames": names,
             "ExpressionAttributeValues": values, "ReturnConsumedCapacity": "TOTAL"},
            target=f"table {self.table!r}", weights=[(shard_key, 1.0)], write=True)

    def _gsi_query(self, shard_key: str) -> dict[str, Any]:
        return {"TableName": self.table, "IndexName": self.gsi,
                "KeyConditionExpression": "#k = :k",
                "ExpressionAttributeNames": {"#k": self.key_attribute},
                "ExpressionAttributeValues": {":k": {"S": shard_key}},
                "ReturnConsumedCapacity": "TOTAL"}

    async def query(self, shard_key: str, *, after: Position | None, descending: bool,
                    limit: int, rec: Recorder) -> Page:
        params = self._gsi_query(shard_key)
        params.update(ScanIndexForward=not descending, Limit=limit)
        if after is not None:
            # The sort attribute encodes the item id, so it alone orders the GSI; the base
            # key in the start key only has to be valid, and DynamoDB refuses an empty one.
            params["ExclusiveStartKey"] = {
                self.id_attribute: {"S": after[1] or "\x00"},
                self.key_attribute: {"S": shard_key},
                self.sort_attribute: {"S": encode_position(*after)}}
        response = await self._request(rec, "Query", params, target=self.target,
                                       weights=[(shard_key, 1.0)], write=False)
        entries = [e for e in map(self._entry, response.get("Items", [])) if e is not None]
        last = response.get("LastEvaluatedKey")
        resume = None
        if last is not None:
            item_id = last[self.id_attribute]["S"]
            resume = (decode_position(last[self.sort_attribute]["S"], item_id)[0], item_id)
        return entries, resume

    async def count(self, shard_key: str, rec: Recorder) -> int:
        return await self._count_pages(shard_key, self._gsi_query(shard_key), rec)

    def key_attributes(self, shard_key: str, sort: str, item_id: str) -> dict[str, Any]:
        return {self.key_attribute: shard_key,
                self.sort_attribute: encode_position(sort, item_id)}
