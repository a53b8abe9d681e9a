"""GSI mode of the DynamoDB store: the application owns the items, DynamoDB the index.

The base table is the application's, keyed by ``id_attribute`` (HASH only). Its
global secondary index has ``key_attribute`` (the shard key, ``PENDING#3``) as HASH
and ``sort_attribute`` as RANGE. shardex owns the key attribute, the version, token and
history attributes and, unless the application owns it, the sort attribute:

- ``sort_owner=shardex`` (the default): the sort attribute holds ``sort + NUL + item
  id``, the order-preserving encoding of index-table mode, so the GSI's order is total
  and equals shardex's ``(sort, item_id)`` order; an application that writes its own
  items gets both attributes from ``index.key_attributes``.
- ``sort_owner=application``: the sort attribute is the application's own (such as
  ``created_at``), which shardex reads as the entry's sort and never writes. DynamoDB
  orders items with equal sort values in no documented order (DynamoDB Local: by a hash
  of the item id), so a query reads a run of equal sort values whole and orders it by
  item id itself: positions are still ``(sort, item_id)`` and cursors work as anywhere.

Writes (``place``) are one UpdateItem on the base item, conditioned on exactly what
``locate`` found (``Placement.located``): the key, sort, version and token attributes
each equal to their located value or absent as located, and each application
attribute shardex writes equal to its located value. So an application's own write in
between (a re-filed key attribute, a changed status) fails shardex's write as
ConditionFailed, and shardex plans again from the item as it now is: it never undoes an
acknowledged application write, and never strips the key attributes of an item the
application re-filed. A put or move sets the key (and shardex's sort) attribute, the
version, the write's token and the history; a delete REMOVEs the key attribute (and
shardex's sort attribute), so the item leaves the sparse GSI, and keeps the version as
the tombstone. Besides its own, a write names only the attrs the caller passed, and of
those only the ones that differ from the item as located (``same_attribute``: numbers by
value, sets in any order). Decoding loses nothing (``codec.from_attribute``), so a move's
or a relocate's attrs, which are the item's own, are never written back: every attribute
of the application's stays exactly as it wrote it.

``locate`` is a strongly consistent GetItem. An item that carries a key attribute but
no version (the application wrote it) is at version 0. A version, token or history
attribute that is not in shardex's shape is refused with MalformedItem naming the item
and attribute. An item whose version attribute disappeared since shardex saw it (an
ORM's ``save()`` rewrote the item without it) is logged as a warning: versions then
start again at 0 and a late write is no longer refused.

``query`` and ``count`` are Queries on the GSI, which DynamoDB keeps eventually
consistent: ``capabilities.consistent_reads`` is False and every Page says
``consistent=False``. An entry's attrs are the attributes the GSI projects, less the
id attribute and shardex's own.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import replace
from itertools import groupby
from typing import Any

from shardex.errors import (
    InvalidInput,
    InvalidKey,
    MalformedItem,
    NotFound,
    StoreError,
    Unavailable,
)
from shardex.keys import MAX_ITEM_ID_BYTES, is_reserved, placement_key, validate_item_id
from shardex.model.entries import Placement, Position, StoredEntry, history_after, up_to
from shardex.stores.base import Capabilities
from shardex.stores.dynamodb.codec import (
    SEP,
    encode_position,
    from_attribute,
    read_history,
    read_token,
    read_version,
    same_attribute,
    to_attribute,
)
from shardex.stores.dynamodb.layout import Describe, Layout, Page, Requester, key_schema
from shardex.stores.metered import Recorder

__all__ = ["GsiLayout", "SORT_OWNERS"]

log = logging.getLogger("shardex")
_MAX_PAGE = 1000
_REMEMBERED = 4096
_ID_CHARS = MAX_ITEM_ID_BYTES // 4  # an id this short is short enough in any encoding
SORT_OWNERS = ("shardex", "application")


class GsiLayout(Layout):
    """GSI mode: entries are attributes of the application's base items."""

    def __init__(self, request: Requester, table: str, *, gsi: str, key_attribute: str,
                 sort_attribute: str, id_attribute: str, version_attribute: str,
                 token_attribute: str, history_attribute: str, sort_owner: str | None,
                 meta_table: str) -> None:
        super().__init__(request, table)
        names = {"key_attribute": key_attribute, "sort_attribute": sort_attribute,
                 "id_attribute": id_attribute, "version_attribute": version_attribute,
                 "token_attribute": token_attribute, "history_attribute": history_attribute}
        for option, name in names.items():
            if not isinstance(name, str) or not name:
                raise InvalidInput(f"dynamodb:// GSI mode needs {option}, got {name!r}")
        if len(set(names.values())) != len(names):
            raise InvalidInput(f"dynamodb:// GSI mode needs distinct attribute names, "
                               f"got {names}")
        # not given: shardex's, unless an adoption says the application's (see
        # ``application_sort``)
        self.sort_owner_given = sort_owner is not None
        sort_owner = sort_owner or "shardex"
        if sort_owner not in SORT_OWNERS:
            raise InvalidInput(f"dynamodb:// sort_owner must be one of "
                               f"{', '.join(SORT_OWNERS)}, got {sort_owner!r}")
        self.gsi = gsi
        self.key_attribute = key_attribute
        self.sort_attribute = sort_attribute
        self.id_attribute = id_attribute
        self.version_attribute = version_attribute
        self.token_attribute = token_attribute
        self.history_attribute = history_attribute
        self.writes_sort = sort_owner == "shardex"
        self.records_table = meta_table
        self.owner_scope = f"{table}/{gsi}"
        self.capabilities = Capabilities(consistent_reads=False, max_page=_MAX_PAGE,
                                         foreign_writes=True, writes_sort=self.writes_sort)
        self._own = frozenset(names.values())
        self._versions: OrderedDict[str, int] = OrderedDict()  # last version seen, per item

    @property
    def target(self) -> str:
        return f"index {self.gsi!r} of table {self.table!r}"

    def application_sort(self) -> bool:
        """Treat the sort attribute as the application's; False if told it is shardex's.

        An adopted GSI sorts by the old GSI's RANGE key, the application's own attribute:
        a store whose URI does not say ``sort_owner`` follows the adoption.
        """
        if self.writes_sort and self.sort_owner_given:
            return False
        self.writes_sort = False
        self.capabilities = replace(self.capabilities, writes_sort=False)
        return True

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
                           f"(it has: {known}); to adopt a plain index into it, "
                           "'shardex adopt start' creates it")
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
        self._check_projection(index.get("Projection") or {})
        status = index.get("IndexStatus", "ACTIVE")
        if status != "ACTIVE":
            raise Unavailable(f"{self.target} is {status}, not ACTIVE yet; try again when "
                              "DynamoDB has finished building it")
        meta = await describe(self.records_table)
        if key_schema(meta) != [("pk", "HASH", "S"), ("sk", "RANGE", "S")]:
            found = ", ".join(f"{a} {t} {k}" for a, k, t in key_schema(meta))
            raise StoreError(
                f"metadata table {self.records_table!r} has the key {found}, not pk S HASH, "
                f"sk S RANGE; create it with: shardex dynamodb create-meta-table {self.table}")

    def _check_projection(self, projection: Mapping[str, Any]) -> None:
        kind = projection.get("ProjectionType", "ALL")
        included = set(projection.get("NonKeyAttributes") or [])
        if kind == "ALL" or (kind == "INCLUDE" and self.version_attribute in included):
            return
        shown = kind if kind != "INCLUDE" else f"INCLUDE {', '.join(sorted(included))}"
        raise StoreError(
            f"{self.target} projects {shown}; shardex reads entries from it, with their "
            f"version ({self.version_attribute}) and attributes: project ALL, or INCLUDE "
            f"{self.version_attribute} and the attributes your entries carry")

    # -- reading items ---------------------------------------------------------------

    def _key(self, item_id: str) -> dict[str, Any]:
        return {self.id_attribute: {"S": item_id}}

    def _text(self, item: Mapping[str, Any], name: str, item_id: str) -> str | None:
        value = item.get(name)
        if value is None:
            return None
        text = value.get("S") if isinstance(value, Mapping) else None
        if not isinstance(text, str):
            raise MalformedItem(f"item {item_id!r} of table {self.table!r}: attribute {name!r} "
                                f"is {value!r}, not text")
        return text

    def _entries(self, items: list[Mapping[str, Any]], rec: Recorder) -> list[StoredEntry]:
        """The entries of a page's items; a malformed one goes to ``rec.malformed``."""
        entries = []
        for item in items:
            try:
                entry = self._entry(item)
            except MalformedItem as exc:
                found = item.get(self.id_attribute)
                rec.malformed(exc, str(found.get("S", found) if isinstance(found, Mapping)
                                       else found))
                continue
            if entry is not None:
                entries.append(entry)
        return entries

    def _entry(self, item: Mapping[str, Any]) -> StoredEntry | None:
        item_id = self._text(item, self.id_attribute, "?") or "?"
        if len(item_id) > _ID_CHARS or "\x00" in item_id:
            try:
                validate_item_id(item_id)
            except InvalidKey as exc:
                raise MalformedItem(f"item of table {self.table!r}: attribute "
                                    f"{self.id_attribute!r}: {exc}: shardex cannot address "
                                    "it (get, put, move, delete)") from None
        shard_key = self._text(item, self.key_attribute, item_id)
        encoded = self._text(item, self.sort_attribute, item_id)
        if shard_key is None or encoded is None:
            return None  # not in the GSI: a tombstone, or never indexed
        if is_reserved(shard_key):
            # the store holds the application's value as it is: whether it is a shard
            # key of a logical key is the index's to read (``shardex.keys``)
            raise MalformedItem(f"{self._where(item_id)} {self.key_attribute!r}: "
                                f"{shard_key!r} starts with '#', which no shard key does")
        sort = encoded
        if self.writes_sort:
            sort, sep, rest = encoded.partition(SEP)
            if not sep:
                # DynamoDB orders it by its bytes, where no (sort, item id) position
                # lies: listed as one, it came out of order, or skipped, or twice
                raise MalformedItem(f"{self._where(item_id)} {self.sort_attribute!r} is "
                                    f"{encoded!r}, without shardex's encoding (sort NUL "
                                    f"item id): another writer set it; where the "
                                    f"application owns the attribute, open the store with "
                                    f"sort_owner=application")
            if rest != item_id:
                raise MalformedItem(f"{self._where(item_id)} {self.sort_attribute!r} encodes "
                                    f"the item id {rest!r}, not {item_id!r}")
        own = self._own
        attrs = {k: from_attribute(v) for k, v in item.items() if k not in own}
        version = item.get(self.version_attribute)
        text = version.get("N") if isinstance(version, Mapping) else None
        if isinstance(text, str) and text.isascii() and text.isdigit():
            number = int(text)  # the common case, without building an error's wording
        else:
            number = 0 if version is None else read_version(
                version, f"{self._where(item_id)} {self.version_attribute!r}")
        return StoredEntry(shard_key=shard_key, sort=sort, item_id=item_id, attrs=attrs,
                           version=number)

    def _where(self, item_id: str) -> str:
        return f"item {item_id!r} of table {self.table!r}: attribute"

    async def locate(self, item_id: str, rec: Recorder) -> Placement | None:
        response = await self._request(
            rec, "GetItem", {"TableName": self.table, "Key": self._key(item_id),
                             "ConsistentRead": True, "ReturnConsumedCapacity": "TOTAL"},
            target=f"table {self.table!r}", weights=[(placement_key(item_id), 1.0)],
            write=False)
        item = response.get("Item")
        return None if item is None else self._placement(item_id, item)

    async def locate_many(self, item_ids: list[str], rec: Recorder
                          ) -> tuple[dict[str, Placement | None], list[str]]:
        name = self.id_attribute
        items, unread = await self._batch_get(rec, item_ids, self.table,
                                              [self._key(i) for i in item_ids],
                                              lambda item: str(item[name]["S"]))
        return {item_id: None if item is None else self._placement(item_id, item)
                for item_id, item in items.items()}, unread

    def _placement(self, item_id: str, item: Mapping[str, Any]) -> Placement:
        """The placement the base item ``item`` holds (its entry None when not indexed)."""
        entry = self._entry(item)
        where = f"item {item_id!r} of table {self.table!r}: attribute"
        raw = {name: item.get(name) for name in
               (self.version_attribute, self.token_attribute, self.history_attribute)}
        version = 0 if raw[self.version_attribute] is None else read_version(
            raw[self.version_attribute], f"{where} {self.version_attribute!r}")
        token = None if raw[self.token_attribute] is None else read_token(
            raw[self.token_attribute], f"{where} {self.token_attribute!r}")
        history = () if raw[self.history_attribute] is None else read_history(
            raw[self.history_attribute], f"{where} {self.history_attribute!r}")
        self._watch_version(item_id, item, version)
        return Placement(item_id, version, entry, token, history,
                         tuple(sorted(item.items())))

    def _watch_version(self, item_id: str, item: Mapping[str, Any], version: int) -> None:
        seen = self._versions.pop(item_id, 0)
        if version == 0 and seen > 0 and self.version_attribute not in item:
            log.warning(
                "item %r of table %r lost its version attribute %r (it was %d): something "
                "rewrote the item without it, as an ORM's save() does with attributes its "
                "model does not declare; late writes can no longer be told by their version. "
                "Declare %s, %s and %s in the model (see docs/dynamodb.md)", item_id,
                self.table, self.version_attribute, seen, self.version_attribute,
                self.token_attribute, self.history_attribute)
        if version > 0:
            self._versions[item_id] = version
            if len(self._versions) > _REMEMBERED:
                self._versions.popitem(last=False)

    # -- writing items ---------------------------------------------------------------

    async def place(self, namespace: str, item_id: str, entry: StoredEntry | None, *,
                    version: int, expected: Placement | None, token: str,
                    rec: Recorder) -> None:
        located: dict[str, Any] | None = None if expected is None else dict(expected.located)
        names: dict[str, str] = {"#v": self.version_attribute, "#t": self.token_attribute,
                                 "#h": self.history_attribute}
        values: dict[str, Any] = {
            ":v": {"N": str(version)}, ":t": {"S": token},
            ":h": {"L": [{"S": earlier} for earlier in history_after(expected)]}}
        conditions: list[str] = []

        def unchanged(alias: str, name: str) -> None:
            names[alias] = name
            if located is not None and name in located:
                values[f":{alias[1:]}0"] = located[name]
                conditions.append(f"{alias} = :{alias[1:]}0")
            else:
                conditions.append(f"attribute_not_exists({alias})")

        if expected is None or located is None:
            unchanged("#i", self.id_attribute)
        else:
            unchanged("#k", self.key_attribute)
            unchanged("#s", self.sort_attribute)
            # the version and token as the placement states them
            if expected.version == 0 and self.version_attribute not in located:
                conditions.append("attribute_not_exists(#v)")
            else:
                values[":v0"] = {"N": str(expected.version)}
                conditions.append("#v = :v0")
            if expected.token is None:
                conditions.append("attribute_not_exists(#t)")
            else:
                values[":t0"] = {"S": expected.token}
                conditions.append("#t = :t0")
        sets = ["#v = :v", "#t = :t", "#h = :h"]
        if entry is None:
            names.setdefault("#k", self.key_attribute)
            removes = ["#k"]
            if self.writes_sort:
                names.setdefault("#s", self.sort_attribute)
                removes.append("#s")
            update = f"SET {', '.join(sets)} REMOVE {', '.join(removes)}"
            shard_key = expected.entry.shard_key if expected is not None and \
                expected.entry is not None else placement_key(item_id)
        else:
            names.setdefault("#k", self.key_attribute)
            sets.append("#k = :k")
            values[":k"] = {"S": entry.shard_key}
            if self.writes_sort:
                names.setdefault("#s", self.sort_attribute)
                sets.append("#s = :s")
                values[":s"] = {"S": encode_position(entry.sort, item_id)}
            elif located is None or self.sort_attribute not in located:
                raise InvalidInput(
                    f"item {item_id!r} of table {self.table!r} has no {self.sort_attribute!r}: "
                    "the sort attribute is the application's own (sort_owner=application), "
                    "so the application writes it before shardex can index the item")
            for i, (name, value) in enumerate(sorted(entry.attrs.items())):
                if name in self._own:
                    raise InvalidInput(f"attrs name {name!r} is one of shardex's own attributes "
                                       f"in {self.target}: {', '.join(sorted(self._own))}")
                new = to_attribute(value, f"attrs[{name!r}]")
                if located is not None and same_attribute(located.get(name), new):
                    # as located (a move's or a relocate's own attrs): the application's
                    # attribute stays exactly as it wrote it, and is never written back
                    continue
                unchanged(f"#a{i}", name)
                values[f":a{i}"] = new
                sets.append(f"#a{i} = :a{i}")
            update = "SET " + ", ".join(sets)
            shard_key = entry.shard_key
        await self._request(
            rec, "UpdateItem",
            {"TableName": self.table, "Key": self._key(item_id), "UpdateExpression": update,
             "ConditionExpression": " AND ".join(conditions), "ExpressionAttributeNames": names,
             "ExpressionAttributeValues": values, "ReturnConsumedCapacity": "TOTAL"},
            target=f"table {self.table!r}", weights=[(shard_key, 1.0)], write=True)
        if version > 0:
            self._versions[item_id] = version

    # -- reading the GSI ---------------------------------------------------------------

    def _gsi_query(self, shard_key: str) -> dict[str, Any]:
        return {"TableName": self.table, "IndexName": self.gsi,
                "KeyConditionExpression": "#k = :k",
                "ExpressionAttributeNames": {"#k": self.key_attribute},
                "ExpressionAttributeValues": {":k": {"S": shard_key}},
                "ReturnConsumedCapacity": "TOTAL"}

    async def query(self, shard_key: str, *, after: Position | None, until: Position | None,
                    descending: bool, limit: int, rec: Recorder) -> Page:
        if not self.writes_sort:
            # the sort is the application's, its ties unordered by id: cut at the bound
            return up_to(*await self._query_plain(shard_key, after, descending, limit, rec),
                         until, descending)
        params = self._gsi_query(shard_key)
        params.update(ScanIndexForward=not descending, Limit=limit)
        if until is not None:  # read nothing beyond it
            params["KeyConditionExpression"] += f" AND #s {'>=' if descending else '<='} :u"
            params["ExpressionAttributeNames"]["#s"] = self.sort_attribute
            params["ExpressionAttributeValues"][":u"] = {"S": encode_position(*until)}
        if after is not None:
            # The sort attribute encodes the item id, so it alone orders the GSI; the base
            # key in the start key only has to be valid, and DynamoDB refuses an empty one.
            params["ExclusiveStartKey"] = {
                self.id_attribute: {"S": after[1] or "\x00"},
                self.key_attribute: {"S": shard_key},
                self.sort_attribute: {"S": encode_position(*after)}}
        response = await self._request(rec, "Query", params, target=self.target,
                                       weights=[(shard_key, 1.0)], write=False)
        entries = self._entries(response.get("Items", []), rec)
        last = response.get("LastEvaluatedKey")
        resume = None
        if last is not None:
            item_id = last[self.id_attribute]["S"]
            encoded = last[self.sort_attribute]["S"]
            resume = (encoded.partition(SEP)[0], item_id)
        return entries, resume

    async def _query_plain(self, shard_key: str, after: Position | None, descending: bool,
                           limit: int, rec: Recorder) -> Page:
        """A page when the sort attribute is the application's: runs of ties read whole.

        DynamoDB does not order items with equal sort values by their id, so a page never
        ends inside such a run: the run that a page boundary would cut is dropped from the
        page and read whole, on its own, by the next call.
        """
        if after is not None:
            ties = [e for e in await self._run(shard_key, after[0], descending, rec)
                    if (e.item_id < after[1] if descending else e.item_id > after[1])]
            if ties:
                return ties[:limit], ties[min(limit, len(ties)) - 1].position
        params = self._gsi_query(shard_key)
        params.update(ScanIndexForward=not descending, Limit=limit)
        if after is not None:
            params["KeyConditionExpression"] += f" AND #s {'<' if descending else '>'} :s"
            params["ExpressionAttributeNames"]["#s"] = self.sort_attribute
            params["ExpressionAttributeValues"][":s"] = {"S": after[0]}
        response = await self._request(rec, "Query", params, target=self.target,
                                       weights=[(shard_key, 1.0)], write=False)
        found = self._entries(response.get("Items", []), rec)
        runs = [sorted(run, key=lambda e: e.item_id, reverse=descending)
                for _, run in groupby(found, key=lambda e: e.sort)]
        last = response.get("LastEvaluatedKey")
        if last is None:
            return [e for run in runs for e in run], None
        if len(runs) > 1:
            kept = [e for run in runs[:-1] for e in run]
            return kept, kept[-1].position
        # one run fills the whole page: read all of it
        sort = runs[0][0].sort if runs else last[self.sort_attribute]["S"]
        run = await self._run(shard_key, sort, descending, rec)
        if not run:
            return [], None
        return run[:limit], run[min(limit, len(run)) - 1].position

    async def _run(self, shard_key: str, sort: str, descending: bool,
                   rec: Recorder) -> list[StoredEntry]:
        """Every entry of ``shard_key`` whose sort is ``sort``, ordered by item id."""
        params = self._gsi_query(shard_key)
        params["KeyConditionExpression"] += " AND #s = :s"
        params["ExpressionAttributeNames"]["#s"] = self.sort_attribute
        params["ExpressionAttributeValues"][":s"] = {"S": sort}
        entries: list[StoredEntry] = []
        while True:
            response = await self._request(rec, "Query", params, target=self.target,
                                           weights=[(shard_key, 1.0)], write=False)
            entries += self._entries(response.get("Items", []), rec)
            last = response.get("LastEvaluatedKey")
            if last is None:
                return sorted(entries, key=lambda e: e.item_id, reverse=descending)
            params["ExclusiveStartKey"] = last

    async def count(self, shard_key: str, rec: Recorder) -> int:
        return await self._count_pages(shard_key, self._gsi_query(shard_key), rec)

    def key_attributes(self, shard_key: str, sort: str | None,
                       item_id: str) -> dict[str, Any]:
        if not self.writes_sort:
            if sort is not None:
                raise InvalidInput(
                    f"sort {sort!r}: {self.sort_attribute!r} is the application's own sort "
                    "attribute (sort_owner=application), which shardex never computes; only "
                    f"{self.key_attribute!r} is returned")
            return {self.key_attribute: shard_key}
        if sort is None:
            raise InvalidInput(
                f"key_attributes of {item_id!r}: pass sort= (the entry's sort value, '' for "
                f"none): {self.sort_attribute!r} is shardex's, and an item re-filed without "
                "its sort loses its place in every ordered listing")
        return {self.key_attribute: shard_key,
                self.sort_attribute: encode_position(sort, item_id)}
