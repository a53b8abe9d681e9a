"""What adopting a plain GSI asks of DynamoDB: checks, UpdateTable, a segmented Scan, updates.

``GsiAdoptionTools`` works on a GSI-mode store's table and client (the store need not
be open: the new GSI may not exist yet):

- ``check_source``/``check_target``: the old GSI is keyed by the raw attribute (HASH)
  and the store's sort attribute (RANGE); a GSI already named as the new one has the
  store's key schema. Bad input raises InvalidInput or NotFound naming what is wrong.
- ``create_target``: UpdateTable adding the new GSI with the old one's projection (and
  its provisioned throughput on a provisioned table); ``wait_index`` polls DescribeTable
  with backoff on the injected clock until it is ACTIVE (or gone), reporting progress.
- ``scan``: one page of one segment of a parallel, strongly consistent Scan.
- ``set_shard``: one UpdateItem of the shard attribute, only if the raw attribute is
  still the value read and the shard attribute is still absent or the stale value read.

Every driver error is mapped with ``map_error`` (Throttled, ConditionFailed, ...).
DescribeTable is tried again after a server error or a throttle, on the tools' clock, as
a store's open tries it (``describe_table``). No Recorder sends these requests, so no
Usage reports them; each counts on the store's meter all the same (``mapped_call``),
which is how a run knows the store has stopped answering (``Meter.quiet``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from shardex.clock import Clock, LoopClock
from shardex.errors import InvalidInput, NotFound, Unavailable
from shardex.model.entries import ScanPage
from shardex.stores.dynamodb.client import (
    DynamoDBClient,
    describe_table,
    mapped_call,
)
from shardex.stores.dynamodb.codec import from_attributes
from shardex.stores.dynamodb.gsi import GsiLayout
from shardex.stores.dynamodb.layout import key_schema, units_of
from shardex.stores.dynamodb.source import index_schema
from shardex.stores.metered import Meter

__all__ = ["GsiAdoptionTools", "TableAdoptionTools"]

_POLL_FIRST, _POLL_MAX = 1.0, 30.0


class _Calls:
    """The tools' requests, through ``client``, each counted on ``meter`` (the store's:
    it tells whether the store answers, though no Recorder sends them), DescribeTable's
    backoff on ``clock`` (the store's)."""

    def __init__(self, client: DynamoDBClient, clock: Clock | None, meter: Meter | None
                 ) -> None:
        self.client = client
        self.clock: Clock = clock or LoopClock()
        self.meter = meter

    async def _call(self, operation: str, target: str, **params: Any) -> dict[str, Any]:
        return await mapped_call(self.client, operation, target, meter=self.meter,
                                 clock=self.clock, **params)

    async def _describe(self, table: str) -> dict[str, Any]:
        return await describe_table(self.client, table, clock=self.clock, meter=self.meter)


class GsiAdoptionTools(_Calls):
    """DynamoDB calls of an adoption into the GSI of ``layout``, through ``client``
    (DescribeTable's backoff on ``clock``: the store's; each counted on ``meter``)."""

    def __init__(self, client: DynamoDBClient, layout: GsiLayout, attribute: str, *,
                 clock: Clock | None = None, meter: Meter | None = None) -> None:
        super().__init__(client, clock, meter)
        self.layout = layout
        self.table = layout.table
        self.attribute = attribute

    async def describe(self) -> dict[str, Any]:
        """The base table's description (NotFound naming it if it does not exist)."""
        return await self._describe(self.table)

    def check_source(self, table: Mapping[str, Any], gsi: str) -> dict[str, Any]:
        """The old GSI ``gsi``'s description; refused unless keyed as adoption needs."""
        layout = self.layout
        schema = index_schema(table, gsi)
        if schema is None:
            known = ", ".join(sorted(i["IndexName"] for i in
                                     table.get("GlobalSecondaryIndexes") or [])) or "none"
            raise NotFound(f"--from-gsi: table {self.table!r} has no global secondary index "
                           f"{gsi!r} (it has: {known})")
        if gsi == layout.gsi:
            raise InvalidInput(f"--from-gsi {gsi!r} is the GSI of --store: the new GSI needs "
                               "a name of its own (gsi=... in the store URI)")
        found = ", ".join(f"{a} {t} {k}" for a, k, t in schema)
        if schema[0] != (self.attribute, "HASH", "S"):
            raise InvalidInput(f"--from-gsi {gsi!r} is keyed by {found}, not by --from-attribute "
                               f"{self.attribute!r} (S HASH)")
        if schema[1:] != [(layout.sort_attribute, "RANGE", "S")]:
            raise InvalidInput(f"--from-gsi {gsi!r} has the key {found}; the new GSI sorts by "
                               f"the store's sort_attribute {layout.sort_attribute!r}, so the "
                               "old one must have it as its RANGE key (S)")
        if self.attribute in (layout.key_attribute, layout.id_attribute):
            raise InvalidInput(f"--from-attribute {self.attribute!r} is the store's "
                               "key_attribute or id_attribute; the shard attribute needs a "
                               "name of its own")
        description: dict[str, Any] = next(i for i in table["GlobalSecondaryIndexes"]
                                           if i["IndexName"] == gsi)
        return description

    def check_target(self, table: Mapping[str, Any]) -> bool:
        """True if the new GSI exists (with the key schema needed), False if it does not."""
        layout = self.layout
        schema = index_schema(table, layout.gsi)
        if schema is None:
            return False
        wanted = [(layout.key_attribute, "HASH", "S"), (layout.sort_attribute, "RANGE", "S")]
        if schema != wanted:
            found = ", ".join(f"{a} {t} {k}" for a, k, t in schema)
            raise InvalidInput(
                f"the new GSI {layout.gsi!r} exists with the key {found}, not "
                f"{layout.key_attribute} S HASH, {layout.sort_attribute} S RANGE: name "
                "another GSI in --store (gsi=...)")
        return True

    async def create_target(self, table: Mapping[str, Any], source: Mapping[str, Any]) -> None:
        """Add the new GSI with the projection (and throughput) of ``source``."""
        layout = self.layout
        definitions = {a["AttributeName"]: a["AttributeType"]
                       for a in table.get("AttributeDefinitions", [])}
        definitions.setdefault(layout.key_attribute, "S")
        projection = {k: v for k, v in (source.get("Projection") or {}).items()
                      if k in ("ProjectionType", "NonKeyAttributes")}
        if projection.get("ProjectionType") == "INCLUDE":
            extra = {layout.version_attribute, self.attribute}
            projection["NonKeyAttributes"] = sorted(set(projection.get(
                "NonKeyAttributes") or []) | extra)
        create: dict[str, Any] = {
            "IndexName": layout.gsi, "Projection": projection or {"ProjectionType": "ALL"},
            "KeySchema": [{"AttributeName": layout.key_attribute, "KeyType": "HASH"},
                          {"AttributeName": layout.sort_attribute, "KeyType": "RANGE"}]}
        billing = (table.get("BillingModeSummary") or {}).get("BillingMode", "PROVISIONED")
        throughput = source.get("ProvisionedThroughput") or {}
        if billing == "PROVISIONED" and throughput.get("WriteCapacityUnits"):
            create["ProvisionedThroughput"] = {
                "ReadCapacityUnits": throughput["ReadCapacityUnits"],
                "WriteCapacityUnits": throughput["WriteCapacityUnits"]}
        await self._call(
            "UpdateTable", f"table {self.table!r}", TableName=self.table,
            AttributeDefinitions=[{"AttributeName": n, "AttributeType": t}
                                  for n, t in sorted(definitions.items())],
            GlobalSecondaryIndexUpdates=[{"Create": create}])

    async def drop(self, gsi: str) -> None:
        """Delete GSI ``gsi`` of the base table (UpdateTable)."""
        await self._call("UpdateTable", f"index {gsi!r} of table {self.table!r}",
                         TableName=self.table,
                         GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": gsi}}])

    async def wait_index(self, gsi: str, *, clock: Clock, within: float,
                         progress: Callable[[str], None] | None = None,
                         gone: bool = False) -> None:
        """Poll until GSI ``gsi`` is ACTIVE (``gone``: absent), with backoff on ``clock``.

        ``progress`` gets a line per poll (status, backfill, items indexed so far).
        Raises Unavailable after ``within`` seconds.
        """
        deadline = clock.now() + within
        delay = _POLL_FIRST
        while True:
            table = await self.describe()
            index = next((i for i in table.get("GlobalSecondaryIndexes") or []
                          if i["IndexName"] == gsi), None)
            if gone and index is None:
                return
            if index is None:
                raise NotFound(f"index {gsi!r} of table {self.table!r} disappeared while "
                               "being built")
            status = str(index.get("IndexStatus", "ACTIVE"))
            if not gone and status == "ACTIVE" and not index.get("Backfilling"):
                return
            if progress is not None:
                filling = " (backfilling)" if index.get("Backfilling") else ""
                progress(f"index {gsi!r} is {status}{filling}: {index.get('ItemCount', 0):,} "
                         f"items, {index.get('IndexSizeBytes', 0):,} bytes so far")
            if clock.now() >= deadline:
                raise Unavailable(f"index {gsi!r} of table {self.table!r} is still {status} "
                                  f"after {within:g} s; run the command again to keep waiting")
            await clock.sleep(min(delay, max(0.0, deadline - clock.now())) or delay)
            delay = min(delay * 1.5, _POLL_MAX)

    async def scan(self, segment: int, segments: int, start: Mapping[str, Any] | None,
                   limit: int) -> ScanPage:
        """One page of Scan segment ``segment`` of ``segments`` from ``start``.

        Returns the items as (id, raw value, shard attribute, has the sort attribute),
        the key to continue from (None: the segment is done) and the read units.
        """
        layout = self.layout
        params: dict[str, Any] = {
            "TableName": self.table, "Segment": segment, "TotalSegments": segments,
            "Limit": limit, "ConsistentRead": True, "ReturnConsumedCapacity": "TOTAL",
            "ProjectionExpression": "#i, #a, #k, #s",
            "ExpressionAttributeNames": {"#i": layout.id_attribute, "#a": self.attribute,
                                         "#k": layout.key_attribute,
                                         "#s": layout.sort_attribute}}
        if start is not None:
            params["ExclusiveStartKey"] = dict(start)
        response = await self._call("Scan", f"table {self.table!r}", **params)
        items = [(item[layout.id_attribute]["S"], _text(item.get(self.attribute)),
                  _text(item.get(layout.key_attribute)), layout.sort_attribute in item)
                 for item in response.get("Items", [])]
        return items, response.get("LastEvaluatedKey"), units_of(response)

    async def set_shard(self, item_id: str, value: str, stale: str | None,
                        shard_key: str) -> float:
        """Set the shard attribute of ``item_id`` to ``shard_key``; the write units spent.

        Conditional: the raw attribute is still ``value`` and the shard attribute still
        ``stale`` (absent if None). Raises ConditionFailed when the item changed.
        """
        layout = self.layout
        values: dict[str, Any] = {":v": {"S": value}, ":k": {"S": shard_key}}
        condition = "#a = :v AND "
        if stale is None:
            condition += "attribute_not_exists(#k)"
        else:
            condition += "#k = :old"
            values[":old"] = {"S": stale}
        response = await self._call(
            "UpdateItem", f"item {item_id!r} of table {self.table!r}", TableName=self.table,
            Key={layout.id_attribute: {"S": item_id}}, UpdateExpression="SET #k = :k",
            ConditionExpression=condition,
            ExpressionAttributeNames={"#a": self.attribute, "#k": layout.key_attribute},
            ExpressionAttributeValues=values, ReturnConsumedCapacity="TOTAL")
        return units_of(response)

    async def clear_shard(self, item_id: str, stale: str, raw: str | None = None) -> float:
        """Remove the shard attribute ``stale`` of ``item_id``, whose raw attribute is gone
        (the application removed it and not the shard attribute shardex owns), or is
        ``raw``, a value shardex cannot index; the write units spent. Conditional: the raw
        attribute still as it was and the shard attribute still ``stale``. Raises
        ConditionFailed when the item changed."""
        layout = self.layout
        values = {":old": {"S": stale}}
        if raw is not None:
            values[":raw"] = {"S": raw}
        response = await self._call(
            "UpdateItem", f"item {item_id!r} of table {self.table!r}", TableName=self.table,
            Key={layout.id_attribute: {"S": item_id}}, UpdateExpression="REMOVE #k",
            ConditionExpression=("attribute_not_exists(#a)" if raw is None else "#a = :raw")
            + " AND #k = :old",
            ExpressionAttributeNames={"#a": self.attribute, "#k": layout.key_attribute},
            ExpressionAttributeValues=values, ReturnConsumedCapacity="TOTAL")
        return units_of(response)

    async def item(self, item_id: str) -> tuple[str | None, str | None, bool] | None:
        """The raw value, shard attribute and whether the sort attribute is set, or None."""
        layout = self.layout
        response = await self._call(
            "GetItem", f"item {item_id!r} of table {self.table!r}", TableName=self.table,
            Key={layout.id_attribute: {"S": item_id}}, ConsistentRead=True,
            ProjectionExpression="#a, #k, #s",
            ExpressionAttributeNames={"#a": self.attribute, "#k": layout.key_attribute,
                                      "#s": layout.sort_attribute})
        item = response.get("Item")
        if item is None:
            return None
        return (_text(item.get(self.attribute)), _text(item.get(layout.key_attribute)),
                layout.sort_attribute in item)


class TableAdoptionTools(_Calls):
    """DynamoDB calls of an adoption of the index table ``source`` (keyed by ``attribute``)
    into a shardex index table: copies from the base table ``base`` (DescribeTable's
    backoff on ``clock``: the store's; each counted on ``meter``).
    """

    def __init__(self, client: DynamoDBClient, *, source: str, attribute: str, base: str,
                 id_attribute: str, sort_attribute: str, clock: Clock | None = None,
                 meter: Meter | None = None) -> None:
        super().__init__(client, clock, meter)
        self.source = source
        self.attribute = attribute
        self.table = base
        self.id_attribute = id_attribute
        self.sort_attribute = sort_attribute

    async def describe(self, table: str | None = None) -> dict[str, Any]:
        """A table's description (default: the base table's); NotFound naming it."""
        return await self._describe(table or self.table)

    async def check(self) -> None:
        """The old index table is keyed by the raw attribute, the base table by the id."""
        for table, attribute, option in ((self.source, self.attribute, "--from-attribute"),
                                         (self.table, self.id_attribute, "--id-attribute")):
            try:
                schema = key_schema(await self.describe(table))
            except NotFound:
                raise NotFound(f"table {table!r} does not exist at "
                               f"{self.client.endpoint}") from None
            if not schema or schema[0] != (attribute, "HASH", "S"):
                found = ", ".join(f"{a} {t} {k}" for a, k, t in schema)
                raise InvalidInput(f"table {table!r} is keyed by {found}, not by {option} "
                                   f"{attribute!r} (S HASH)")

    async def scan(self, segment: int, segments: int, start: Mapping[str, Any] | None,
                   limit: int) -> ScanPage:
        """One page of a Scan segment of the base table: (id, value, sort, other attrs)."""
        params: dict[str, Any] = {
            "TableName": self.table, "Segment": segment, "TotalSegments": segments,
            "Limit": limit, "ConsistentRead": True, "ReturnConsumedCapacity": "TOTAL"}
        if start is not None:
            params["ExclusiveStartKey"] = dict(start)
        response = await self._call("Scan", f"table {self.table!r}", **params)
        own = {self.id_attribute, self.attribute, self.sort_attribute}
        items = [(item[self.id_attribute]["S"], _text(item.get(self.attribute)),
                  _text(item.get(self.sort_attribute)),
                  from_attributes({k: v for k, v in item.items() if k not in own}))
                 for item in response.get("Items", [])]
        return items, response.get("LastEvaluatedKey"), units_of(response)

    async def value(self, item_id: str) -> str | None:
        """The raw value of the base table's item ``item_id`` (strongly consistent);
        None if the item or its value is gone."""
        response = await self._call(
            "GetItem", f"item {item_id!r} of table {self.table!r}", TableName=self.table,
            Key={self.id_attribute: {"S": item_id}}, ConsistentRead=True,
            ProjectionExpression="#a", ExpressionAttributeNames={"#a": self.attribute})
        item = response.get("Item")
        return None if item is None else _text(item.get(self.attribute))

    async def drop(self, *, clock: Clock, within: float) -> None:
        """Delete the old index table and wait until it is gone."""
        with contextlib.suppress(NotFound):
            await self._call("DeleteTable", f"table {self.source!r}", TableName=self.source)
        deadline = clock.now() + within
        delay = _POLL_FIRST
        while True:
            try:
                await self.describe(self.source)
            except NotFound:
                return
            if clock.now() >= deadline:
                raise Unavailable(f"table {self.source!r} is still being deleted after "
                                  f"{within:g} s")
            await clock.sleep(delay)
            delay = min(delay * 1.5, _POLL_MAX)


def _text(value: Any) -> str | None:
    """A string attribute's text; None when absent or not a string (not indexable)."""
    if isinstance(value, Mapping) and isinstance(value.get("S"), str):
        text: str = value["S"]
        return text
    return None
