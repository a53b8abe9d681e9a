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
with a shard key. The placement also holds the write's token ``t`` and the tokens
before it, ``h`` (a list, oldest first). ``place`` is one TransactWriteItems: the
placement put, conditional on the version and token located, the old entry's delete and
the new entry's put, so a move is atomic and a late write never lands over a newer one.

The transaction's ``ClientRequestToken`` is derived from the write's token and the
request itself (``request_token``): the very same request sent again within DynamoDB's
ten minutes (a retry after a timeout) is recognised and not applied twice, and a new
plan of the same write (after a conflict) has a token of its own, so DynamoDB never
answers IdempotentParameterMismatch. (DynamoDB Local 3.x registers a token only when
its transaction succeeds; the derivation does not rely on that.)
"""

from __future__ import annotations

import hashlib
from typing import Any

from shardex.errors import CapabilityMissing, MalformedItem, StoreError
from shardex.keys import placement_key
from shardex.model.entries import Placement, Position, StoredEntry, history_after
from shardex.stores.base import Capabilities
from shardex.stores.dynamodb.codec import (
    decode_position,
    encode_position,
    entry_from_item,
    entry_item,
    entry_key,
    item_units,
    placement_from_item,
    placement_item,
    placement_item_key,
    to_attributes,
    value_size,
)
from shardex.stores.dynamodb.layout import Describe, Layout, Page, Requester, key_schema
from shardex.stores.metered import Recorder

__all__ = ["TableLayout", "request_token"]


def request_token(token: str, actions: list[dict[str, Any]]) -> str:
    """The ClientRequestToken of a transaction: 32 hex digits of the token and the request.

    The request is read as its ``repr``: the same request, built again by the same code
    for a retry, reads the same; two requests that differ read differently.
    """
    return hashlib.blake2b(f"{token}\x00{actions!r}".encode(), digest_size=16).hexdigest()

_MAX_PAGE = 1000


class TableLayout(Layout):
    """Index-table mode: entries, placements, records and the owner in one table."""

    capabilities = Capabilities(consistent_reads=True, max_page=_MAX_PAGE)
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

    async def locate(self, item_id: str, rec: Recorder) -> Placement | None:
        response = await self._request(
            rec, "GetItem", {"TableName": self.table, "Key": placement_item_key(item_id),
                             "ConsistentRead": True, "ReturnConsumedCapacity": "TOTAL"},
            target=self.target, weights=[(placement_key(item_id), 1.0)], write=False)
        item = response.get("Item")
        return None if item is None else placement_from_item(item_id, item)

    async def locate_many(self, item_ids: list[str], rec: Recorder
                          ) -> tuple[dict[str, Placement | None], list[str]]:
        ids = {placement_key(item_id): item_id for item_id in item_ids}
        items, unread = await self._batch_get(
            rec, item_ids, self.table, [placement_item_key(i) for i in item_ids],
            lambda item: ids[item["pk"]["S"]])
        return {item_id: None if item is None else placement_from_item(item_id, item)
                for item_id, item in items.items()}, unread

    async def place(self, namespace: str, item_id: str, entry: StoredEntry | None, *,
                    version: int, expected: Placement | None, token: str,
                    rec: Recorder) -> None:
        old = expected.entry if expected is not None else None
        # the entry's attrs, encoded and measured once for the placement and the entry
        attrs = None if entry is None else {"M": to_attributes(entry.attrs)}
        sized = None if attrs is None else (attrs, value_size(attrs))
        new_placement = placement_item(item_id, version, entry, token, history_after(expected),
                                       attrs)
        put: dict[str, Any] = {"TableName": self.table, "Item": new_placement}
        if expected is None:
            put["ConditionExpression"] = "attribute_not_exists(pk)"
        else:
            put["ExpressionAttributeNames"] = {"#v": "v", "#t": "t"}
            put["ExpressionAttributeValues"] = {":v": {"N": str(expected.version)}}
            if expected.token is None:
                put["ConditionExpression"] = "#v = :v AND attribute_not_exists(#t)"
            else:
                put["ConditionExpression"] = "#v = :v AND #t = :t"
                put["ExpressionAttributeValues"][":t"] = {"S": expected.token}
        actions: list[dict[str, Any]] = [{"Put": put}]
        weights = [(placement_key(item_id), float(item_units(new_placement, sized)))]
        new_item = entry_item(entry, attrs) if entry is not None else None
        if old is not None and (entry is None or entry_key(old) != entry_key(entry)):
            # a stale idea of where the old entry is cancels the whole transaction
            actions.append({"Delete": {"TableName": self.table, "Key": entry_key(old),
                                       "ConditionExpression": "attribute_exists(pk)"}})
            kept = sized is not None and entry is not None and old.attrs is entry.attrs
            weights.append((old.shard_key, float(item_units(entry_item(old, attrs), sized)
                                                  if kept else item_units(entry_item(old)))))
        if entry is not None and new_item is not None:
            actions.append({"Put": {"TableName": self.table, "Item": new_item}})
            weights.append((entry.shard_key, float(item_units(new_item, sized))))
        await self._request(rec, "TransactWriteItems",
                            {"TransactItems": actions, "ReturnConsumedCapacity": "TOTAL",
                             "ClientRequestToken": request_token(token, actions)},
                            target=self.target, weights=weights, write=True)

    async def query(self, shard_key: str, *, after: Position | None, until: Position | None,
                    descending: bool, limit: int, rec: Recorder) -> Page:
        params: dict[str, Any] = {
            "TableName": self.table, "KeyConditionExpression": "pk = :k",
            "ExpressionAttributeValues": {":k": {"S": shard_key}},
            "ScanIndexForward": not descending, "Limit": limit, "ConsistentRead": True,
            "ReturnConsumedCapacity": "TOTAL"}
        if until is not None:  # read nothing beyond it
            params["KeyConditionExpression"] += f" AND sk {'>=' if descending else '<='} :u"
            params["ExpressionAttributeValues"][":u"] = {"S": encode_position(*until)}
        if after is not None:
            params["ExclusiveStartKey"] = {"pk": {"S": shard_key},
                                           "sk": {"S": encode_position(*after)}}
        response = await self._request(rec, "Query", params, target=self.target,
                                       weights=[(shard_key, 1.0)], write=False)
        entries = []
        for item in response.get("Items", []):
            try:
                entries.append(entry_from_item(item))
            except MalformedItem as exc:
                rec.malformed(exc, decode_position(item["sk"]["S"], "?")[1])
        last = response.get("LastEvaluatedKey")
        return entries, None if last is None else decode_position(last["sk"]["S"])

    async def count(self, shard_key: str, rec: Recorder) -> int:
        return await self._count_pages(shard_key, {
            "TableName": self.table, "KeyConditionExpression": "pk = :k",
            "ExpressionAttributeValues": {":k": {"S": shard_key}},
            "ConsistentRead": True, "ReturnConsumedCapacity": "TOTAL"}, rec)

    def key_attributes(self, shard_key: str, sort: str | None,
                       item_id: str) -> dict[str, Any]:
        raise CapabilityMissing(
            f"table {self.table!r} is in index-table mode: shardex writes the entries itself, "
            "so there are no key attributes to add to an application's items; use GSI mode "
            "(dynamodb://TABLE?gsi=...) to index the application's own items")
