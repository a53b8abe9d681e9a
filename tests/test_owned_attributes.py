"""shardex writes only what it owns: an application's attributes survive every write.

GSI mode on DynamoDB Local: an item the application wrote (with a raw boto3 client)
keeps every attribute shardex does not own exactly as DynamoDB returned it after the
application's write, through ``put``, ``move``, the mover's relocate and the adoption's
backfill, whatever its type (S, N of 38 digits, B, BOOL, NULL, SS, NS, BS, L, M, empty
strings). A client wrapper records the names each write of shardex sets or removes:
shardex's own, and those a caller passed in ``attrs``, nothing else. Azure Table
Storage: every EDM type as the Azure SDK hands it to an application survives put, move
and relocate, and writes back to Azure as the same typed property.
"""

from __future__ import annotations

import asyncio
import datetime
import decimal
import math
import os
import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from shardex import Entry, InvalidInput, Routing, ShardedIndex, ShardPolicy, Store
from shardex.adopt import Adopter
from shardex.model.entries import StoredEntry
from shardex.reshard import Resharder
from shardex.stores.azure.codec import entry_from_row, entry_rows
from shardex.stores.dynamodb import DynamoDBStore
from shardex.stores.dynamodb.client import DynamoDBClient
from shardex.stores.uri import StoreURI
from tests import azurite
from tests import dynamodb_local as local

GSI_OWN = {"shard_key", "shard_sort", "shardex_version", "shardex_token", "shardex_history"}
OWN = {"id", *GSI_OWN}
FAST: dict[str, Any] = {"unit_lease": 1.0, "settle": 0.2}
PROPERTY = settings(max_examples=15, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))
# one example of many items: a reshard or an adoption a run (no shrinking: each try costs one)
BATCH = settings(max_examples=1, deadline=None, database=None, phases=[Phase.generate],
                 suppress_health_check=list(HealthCheck))

# -- DynamoDB attribute values as a raw client writes them ------------------------------

texts = st.text(max_size=6)
binaries = st.binary(max_size=6)


def _dynamodb_number(sign: int, digits: int, exponent: int) -> decimal.Decimal:
    return decimal.Decimal((sign, tuple(int(d) for d in str(digits)), exponent))


# 1 to 38 significant digits, magnitudes from 1E-130 to 9.99...E+125
numbers = st.one_of(
    st.integers(-10**6, 10**6).map(decimal.Decimal),
    st.builds(_dynamodb_number, st.integers(0, 1), st.integers(1, 10**38 - 1),
              st.integers(-167, 88)).filter(lambda d: -130 <= d.adjusted() <= 125),
)
scalars = st.one_of(
    texts.map(lambda t: {"S": t}),
    numbers.map(lambda n: {"N": str(n)}),
    binaries.map(lambda b: {"B": b}),
    st.booleans().map(lambda b: {"BOOL": b}),
    st.just({"NULL": True}),
    st.sets(texts, min_size=1, max_size=4).map(lambda s: {"SS": sorted(s)}),
    st.sets(numbers, min_size=1, max_size=4).map(lambda s: {"NS": [str(n) for n in s]}),
    st.sets(binaries, min_size=1, max_size=4).map(lambda s: {"BS": sorted(s)}),
)
names = st.text(alphabet="abcdefgxyz_", min_size=1, max_size=5)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3).map(lambda items: {"L": items}),
    st.dictionaries(names, inner, max_size=3).map(lambda m: {"M": m})), max_leaves=6)
application_items = st.dictionaries(names.filter(lambda n: n not in OWN and n != "status"),
                                    values, min_size=1, max_size=6)


def names_written(expression: str, aliases: dict[str, str]) -> set[str]:
    """The attribute names an UpdateExpression sets, removes, adds to or deletes from."""
    found = set()
    for clause, body in re.findall(r"\b(SET|REMOVE|ADD|DELETE)\s+(.*?)(?=\s+(?:SET|REMOVE|ADD"
                                   r"|DELETE)\s|$)", expression):
        for action in body.split(","):
            target = action.split("=")[0] if clause == "SET" else action.split()[0]
            found.add(aliases.get(target.strip(), target.strip()))
    return found


class Recording(DynamoDBClient):
    """A real client that records the attribute names each write to the base table names."""

    def __init__(self, inner: DynamoDBClient, table: str, own: set[str]) -> None:
        self.inner = inner
        self.endpoint = inner.endpoint
        self.written: list[set[str]] = []
        self.table = table
        self.own = own

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()

    async def call(self, operation: str, **params: Any) -> dict[str, Any]:
        if params.get("TableName") == self.table:
            if operation == "UpdateItem":
                self.written.append(names_written(params["UpdateExpression"],
                                                  params.get("ExpressionAttributeNames", {})))
            elif operation in ("PutItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"):
                self.written.append({f"{operation} of the whole item"})
        return await self.inner.call(operation, **params)

    def foreign(self) -> set[str]:
        """Every name written, over all writes, that is not shardex's own."""
        return set().union(set(), *self.written) - self.own


def gsi_store() -> tuple[DynamoDBStore, Recording]:
    first = local.gsi_store()
    recording = Recording(first.client, first.table, GSI_OWN)
    return DynamoDBStore(first.table, client=recording, **local.GSI), recording


class AppTable:
    """The application's table, as a raw boto3 client writes and reads it."""

    def __init__(self, table: str, key: str, own: set[str]) -> None:
        self.table, self.key, self.own = table, key, own

    def write(self, items: dict[str, dict[str, Any]], **common: Any) -> dict[str, Any]:
        """Put each item (id -> attributes, plus ``common``); return them as DynamoDB
        holds them (it normalises numbers: ``1E+2`` reads back as ``100``)."""
        for item_id, attributes in items.items():
            local.sync_client().put_item(TableName=self.table, Item={
                self.key: {"S": item_id}, **common, **attributes})
        return {item_id: self.read(item_id) for item_id in items}

    def read(self, item_id: str) -> dict[str, Any]:
        """The item's attributes that are not shardex's (nor its id)."""
        item = local.sync_client().get_item(TableName=self.table,
                                            Key={self.key: {"S": item_id}},
                                            ConsistentRead=True)["Item"]
        return {name: value for name, value in item.items() if name not in self.own}


def canonical(value: Any) -> Any:
    """An attribute value with its sets in one order (DynamoDB keeps a set's order its own)."""
    ((kind, data),) = value.items()
    if kind in ("SS", "NS", "BS"):
        return {kind: sorted(data)}
    if kind == "M":
        return {kind: {k: canonical(v) for k, v in data.items()}}
    if kind == "L":
        return {kind: [canonical(v) for v in data]}
    return value


def changed(found: dict[str, Any], written: dict[str, Any]) -> list[str]:
    """The names of the attributes that differ from (or are missing in) ``written``."""
    return sorted(name for name in written.keys() | found.keys()
                  if name not in found or name not in written
                  or canonical(found[name]) != canonical(written[name]))


async def reshard_pending(store: Store, attrs: dict[str, dict[str, Any]],
                          before: Callable[[], None] = lambda: None) -> list[Entry]:
    """Put each item (id -> attrs) under PENDING, reshard PENDING to 4 shards (the mover
    relocates 3/4 of them), and return the entries of the items, read by id."""
    async with ShardedIndex(store, "orders", Routing(), routing_lease=0.5,
                            routing_ttl=0.1) as index:
        for item_id, item_attrs in attrs.items():
            await index.put("PENDING", item_id, sort=item_id, attrs=item_attrs)
        before()
        async with Resharder(store, "orders", **FAST) as runner:
            await runner.start({"PENDING": ShardPolicy(4)}, margin=0.1)
            result = await runner.run()
        assert result.parity is not None
        assert result.parity.clean
        entries = [await index.get(item_id) for item_id in attrs]
    found = [e for e in entries if e is not None]
    assert len(found) == len(attrs)
    assert sum(e.shard_key != "PENDING" for e in found) >= len(attrs) // 2
    return found


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    made = asyncio.new_event_loop()
    yield made
    made.close()


@pytest.fixture(scope="module")
def gsi_index(loop: asyncio.AbstractEventLoop) -> Iterator[tuple[ShardedIndex, Recording]]:
    local.require_endpoint()
    store, recording = gsi_store()
    index = ShardedIndex(store, "orders", Routing(overrides={"SHIPPED": ShardPolicy(4)}))
    loop.run_until_complete(index.open())
    yield index, recording
    loop.run_until_complete(index.close())


@pytest.mark.dynamodb
@PROPERTY
@given(attributes=application_items, status=texts)
def test_put_and_move_write_only_shardex_attributes_in_gsi_mode(
        gsi_index: tuple[ShardedIndex, Recording], loop: asyncio.AbstractEventLoop,
        attributes: dict[str, Any], status: str) -> None:
    index, recording = gsi_index
    app = AppTable(recording.table, "id", OWN)
    item_id = f"o-{uuid.uuid4().hex[:12]}"
    written = app.write({item_id: attributes})[item_id]

    async def writes() -> None:
        recording.written.clear()
        await index.put("PENDING", item_id, sort="2026")
        assert changed(app.read(item_id), written) == []
        await index.move(item_id, old="PENDING", new="SHIPPED")
        assert changed(app.read(item_id), written) == []
        entry = await index.get(item_id)
        assert entry is not None
        assert set(entry.attrs) == set(written)
        assert recording.foreign() == set()
        # a caller's own attrs are written, and only they
        await index.move(item_id, old="SHIPPED", new="PENDING", attrs={"status": status})
        assert recording.foreign() == {"status"}
        after = app.read(item_id)
        assert after.pop("status") == {"S": status}
        assert changed(after, written) == []

    loop.run_until_complete(writes())


@pytest.mark.dynamodb
@BATCH
@given(items=st.lists(application_items, min_size=8, max_size=8))
def test_the_movers_relocate_writes_only_shardex_attributes_in_gsi_mode(
        items: list[dict[str, Any]]) -> None:
    local.require_endpoint()
    store, recording = gsi_store()
    app = AppTable(store.table, "id", OWN)
    written = app.write({f"o-{i}": attributes for i, attributes in enumerate(items)})

    nothing: dict[str, Any] = {}  # put with no attrs: the application's are on its items
    asyncio.run(reshard_pending(store, dict.fromkeys(written, nothing),
                                recording.written.clear))
    assert recording.written  # the mover wrote
    assert recording.foreign() == set()
    for item_id, attributes in written.items():
        assert changed(app.read(item_id), attributes) == []


@pytest.mark.dynamodb
@BATCH
@given(items=st.lists(application_items, min_size=8, max_size=8))
def test_the_adoptions_backfill_writes_only_the_shard_attribute(
        items: list[dict[str, Any]]) -> None:
    from tests.adopt_app import NAME, orders_table, store_uri

    local.require_endpoint()
    table, _ = orders_table(0)
    own = {"order_id", "status_shard", *GSI_OWN}
    app = AppTable(table, "order_id", own)
    written = app.write({f"o-{i}": attributes for i, attributes in enumerate(items)},
                        status={"S": "PENDING"}, created_at={"S": "2026-12-01"})

    async def main() -> None:
        inner = DynamoDBStore(table, region=local.REGION, endpoint_url=local.require_endpoint())
        recording = Recording(inner.client, table, own)
        store = DynamoDBStore.from_uri(StoreURI.parse(store_uri(table)), client=recording)
        async with Adopter(store, NAME, source="status-index", attribute="status",
                           segments=2, rate=400, routing_lease=1.0, **FAST) as adopter:
            await adopter.start({"PENDING": ShardPolicy(4)}, margin=0.1)
            assert (await adopter.run()).finished
        assert len(recording.written) == len(written)
        assert recording.foreign() == set()
        for item_id, attributes in written.items():
            assert changed(app.read(item_id), attributes) == []

    asyncio.run(main())


# -- Azure Table Storage: the EDM types as the Azure SDK hands them to an application ----

def edm_values() -> st.SearchStrategy[Any]:
    from azure.data.tables import EdmType, EntityProperty

    return st.one_of(
        st.integers(-2**31, 2**31 - 1),
        st.integers(-2**63, 2**63 - 1).map(lambda v: EntityProperty(v, EdmType.INT64)),
        st.floats(),
        st.uuids(),
        st.datetimes(min_value=datetime.datetime(1601, 1, 2),
                     timezones=st.just(datetime.UTC)),
        st.binary(max_size=8),
        st.booleans(),
        st.text(max_size=8),
    )


names = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,6}", fullmatch=True).filter(
    lambda n: n not in ("PartitionKey", "RowKey", "Timestamp"))


def typed(value: Any) -> tuple[Any, ...]:
    """What identifies a value as Azure holds it: its Python type, value and wire text."""
    service = getattr(value, "tables_service_value", None)
    if isinstance(value, datetime.datetime):
        return ("datetime", value, service or None)
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    if isinstance(value, tuple):  # EntityProperty
        return ("EntityProperty", value[0], str(value[1]))
    return (type(value).__name__, value)


def same_edm(found: dict[str, Any], given: dict[str, Any]) -> list[str]:
    """The names whose values differ in type, value or wire text."""
    return sorted(name for name in found.keys() | given.keys()
                  if name not in found or name not in given
                  or typed(found[name]) != typed(given[name]))


class Sdk:
    """The application's own client of a scratch table: typed entities, read as the SDK reads."""

    def __init__(self) -> None:
        from azure.data.tables import TableServiceClient

        azurite.require_endpoint()
        service = TableServiceClient.from_connection_string(
            os.environ["AZURE_STORAGE_CONNECTION_STRING"])
        self.table = service.create_table(azurite.unique_table())

    def round_trip(self, key: str, properties: dict[str, Any]) -> dict[str, Any]:
        """Write ``properties`` as an entity, and return them as the SDK reads them back."""
        self.table.upsert_entity({"PartitionKey": "p", "RowKey": key, **properties})
        entity = self.table.get_entity("p", key)
        return {name: entity[name] for name in properties}


@pytest.fixture(scope="module")
def sdk() -> Sdk:
    return Sdk()


@pytest.fixture(scope="module")
def azure_index(loop: asyncio.AbstractEventLoop) -> Iterator[ShardedIndex]:
    opened = ShardedIndex(azurite.table_store(), "orders",
                          Routing(overrides={"SHIPPED": ShardPolicy(4)}))
    loop.run_until_complete(opened.open())
    yield opened
    loop.run_until_complete(opened.close())


@pytest.mark.azure
@settings(PROPERTY, max_examples=10)
@given(data=st.data())
def test_every_edm_type_survives_put_and_move(azure_index: ShardedIndex, sdk: Sdk,
                                              loop: asyncio.AbstractEventLoop,
                                              data: st.DataObject) -> None:
    properties = data.draw(st.dictionaries(names, edm_values(), min_size=1, max_size=6))
    item_id = f"o-{uuid.uuid4().hex[:12]}"
    attrs = sdk.round_trip(f"{item_id}-in", properties)

    index = azure_index

    async def writes() -> dict[str, Any]:
        await index.put("PENDING", item_id, sort="2026", attrs=attrs)
        await index.move(item_id, old="PENDING", new="SHIPPED")
        entry = await index.get(item_id)
        assert entry is not None
        [listed] = [e async for e in index.scan("SHIPPED") if e.item_id == item_id]
        assert same_edm(listed.attrs, attrs) == []
        return dict(entry.attrs)

    back = loop.run_until_complete(writes())
    assert same_edm(back, attrs) == []
    assert same_edm(sdk.round_trip(f"{item_id}-out", back), attrs) == []


@pytest.mark.azure
@BATCH
@given(data=st.data())
def test_every_edm_type_survives_the_movers_relocate(sdk: Sdk, data: st.DataObject) -> None:
    items = [sdk.round_trip(f"r-{i}", data.draw(st.dictionaries(
        names, edm_values(), min_size=1, max_size=6))) for i in range(8)]
    entries = asyncio.run(reshard_pending(azurite.table_store(), {
        f"o-{i}": attrs for i, attrs in enumerate(items)}))
    for entry, attrs in zip(entries, items, strict=True):
        assert same_edm(dict(entry.attrs), attrs) == []
        assert same_edm(sdk.round_trip(f"{entry.item_id}-out", dict(entry.attrs)), attrs) == []


@pytest.mark.azure
def test_edm_values_round_trip_the_codec_and_bad_ones_are_refused() -> None:
    from azure.data.tables import EdmType, EntityProperty

    attrs = {"nested": {"when": datetime.datetime(2026, 1, 2, 3, 4, 5, 6),
                        "ids": [uuid.UUID(int=7), EntityProperty(2**40, EdmType.INT64)]},
             "tags": frozenset({"a", "b"}), "inf": -math.inf, "$x": {"$d": "1"}}
    [row, _] = entry_rows("p", StoredEntry("K", "s", "o-1", attrs), "t0")
    back = entry_from_row(row, "the row").attrs
    assert back == attrs
    assert type(back["nested"]["ids"][1]) is EntityProperty

    async def main() -> None:
        async with ShardedIndex(azurite.table_store(), "orders") as app:
            for bad, words in [(EntityProperty(2**31, EdmType.INT32), "does not fit Edm.Int32"),
                               (EntityProperty("7", EdmType.INT64), "not the int"),
                               (EntityProperty(True, EdmType.INT64), "not the int"),
                               (object(), "cannot be stored in Azure Table Storage")]:
                with pytest.raises(InvalidInput, match=words):
                    await app.put("P", "o-1", attrs={"a": bad})

    asyncio.run(main())

