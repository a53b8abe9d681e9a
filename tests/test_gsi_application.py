"""GSI mode under a live application (DynamoDB Local): its own writes race shardex's.

The application writes its items with boto3, re-filing them with ``key_attributes``;
shardex's ``move``/``delete`` run at the same time, either at a fixed interleaving (the
application's write lands between shardex's read of the item and its write, through a
client hook) or at random. Checked after each trial: no acknowledged application write
undone, no item missing from its listing, no shard attribute that disagrees with the
item's status. Also: a PynamoDB model keeps shardex's attributes through ``save()``, and
an application-owned sort attribute orders listings, ties included, and is never written.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import shardex
from shardex import Routing, ShardPolicy
from shardex.stores.dynamodb import DynamoDBStore
from shardex.stores.dynamodb.client import DynamoDBClient
from tests import dynamodb_local as local

pytestmark = pytest.mark.dynamodb
STATUSES = ["PENDING", "SHIPPED", "CANCELLED"]
ROUTING = Routing(overrides={s: ShardPolicy(shards=3) for s in STATUSES})


@pytest.fixture(autouse=True)
def endpoint() -> str:
    return local.require_endpoint()


class Hooked(DynamoDBClient):
    """Runs ``before_update`` once, just before shardex's next UpdateItem is sent."""

    def __init__(self, inner: DynamoDBClient) -> None:
        self.inner = inner
        self.endpoint = inner.endpoint
        self.before_update: Callable[[], Awaitable[None]] | None = None

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()

    async def call(self, operation: str, **params: Any) -> dict[str, Any]:
        if operation == "UpdateItem" and self.before_update is not None:
            hook, self.before_update = self.before_update, None
            await hook()
        return await self.inner.call(operation, **params)


class App:
    """The application: writes its own items with boto3, as it would in production."""

    def __init__(self, store: DynamoDBStore, index: shardex.ShardedIndex) -> None:
        import boto3

        self.table = boto3.resource("dynamodb", endpoint_url=local.require_endpoint(),
                                    region_name=local.REGION).Table(store.table)
        self.index = index

    def file(self, item_id: str, status: str, sort: str = "2026-11-30") -> None:
        """Create or re-file the item under ``status`` (an UpdateItem, its own write)."""
        keys = self.index.key_attributes(status, item_id, sort=sort)
        names = {"#st": "status", **{f"#{i}": k for i, k in enumerate(keys)}}
        values = {":st": status, **{f":{i}": v for i, v in enumerate(keys.values())}}
        sets = ", ".join(["#st = :st", *(f"#{i} = :{i}" for i in range(len(keys)))])
        self.table.update_item(Key={"id": item_id}, UpdateExpression=f"SET {sets}",
                               ExpressionAttributeNames=names,
                               ExpressionAttributeValues=values)

    def get(self, item_id: str) -> dict[str, Any]:
        item: dict[str, Any] = self.table.get_item(Key={"id": item_id},
                                                   ConsistentRead=True)["Item"]
        return item


async def check_item(app: App, index: shardex.ShardedIndex, item_id: str,
                     status: str) -> None:
    """The item carries ``status``, agrees with its shard attribute, and is listed there."""
    item = app.get(item_id)
    assert item["status"] == status, "an acknowledged application write was undone"
    assert "shard_key" in item, "the application's re-filed item lost its key attributes"
    assert item["shard_key"].partition("#")[0] == status, \
        "the shard attribute disagrees with the item's status"
    for value in STATUSES:
        listed = [e.item_id async for e in index.scan(value)]
        assert (item_id in listed) == (value == status), f"{item_id} listed wrong in {value}"


def setup() -> tuple[DynamoDBStore, Hooked]:
    store = local.gsi_store()
    hooked = Hooked(store.client)
    store._client = hooked
    return store, hooked


def test_a_move_racing_the_applications_refile_fails_and_undoes_nothing() -> None:
    async def body() -> None:
        store, hooked = setup()
        async with shardex.ShardedIndex(store, "orders", ROUTING) as index:
            app = App(store, index)
            app.file("o-1", "PENDING")

            async def app_cancels() -> None:
                await asyncio.to_thread(app.file, "o-1", "CANCELLED")

            hooked.before_update = app_cancels
            with pytest.raises(shardex.ConditionFailed, match="under 'CANCELLED'"):
                await index.move("o-1", old="PENDING", new="SHIPPED",
                                 attrs={"status": "SHIPPED"})
            await check_item(app, index, "o-1", "CANCELLED")

    asyncio.run(body())


def test_a_delete_racing_the_applications_refile_keeps_the_item_filed() -> None:
    async def body() -> None:
        store, hooked = setup()
        async with shardex.ShardedIndex(store, "orders", ROUTING) as index:
            app = App(store, index)
            app.file("o-1", "PENDING")

            async def app_refiles() -> None:
                await asyncio.to_thread(app.file, "o-1", "SHIPPED")

            hooked.before_update = app_refiles
            assert await index.delete("PENDING", "o-1") is False
            await check_item(app, index, "o-1", "SHIPPED")

    asyncio.run(body())


def test_a_move_racing_an_unrelated_application_write_keeps_both() -> None:
    async def body() -> None:
        store, hooked = setup()
        async with shardex.ShardedIndex(store, "orders", ROUTING) as index:
            app = App(store, index)
            app.file("o-1", "PENDING")

            async def app_changes_total() -> None:
                await asyncio.to_thread(app.table.update_item, Key={"id": "o-1"},
                                        UpdateExpression="SET #n = :t",
                                        ExpressionAttributeNames={"#n": "total"},
                                        ExpressionAttributeValues={":t": 42})

            hooked.before_update = app_changes_total
            assert await index.move("o-1", old="PENDING", new="SHIPPED",
                                    attrs={"status": "SHIPPED"})
            assert app.get("o-1")["total"] == 42
            await check_item(app, index, "o-1", "SHIPPED")

    asyncio.run(body())


RACES = 30


def test_random_races_with_the_application_never_undo_its_writes() -> None:
    counts = {"shardex won": 0, "application first": 0}

    async def body() -> None:
        store = local.gsi_store()
        rng = random.Random(4)
        async with shardex.ShardedIndex(store, "orders", ROUTING) as index:
            app = App(store, index)
            for trial in range(RACES):
                item = f"o-{trial}"
                app.file(item, "PENDING")
                target = rng.choice(["SHIPPED", "CANCELLED"])
                delay = rng.uniform(0, 0.02)

                async def application(i: str = item, t: str = target,
                                      d: float = delay) -> None:
                    await asyncio.sleep(d)
                    await asyncio.to_thread(app.file, i, t)

                if trial % 2:
                    shardex_write: Awaitable[Any] = index.move(
                        item, old="PENDING", new="SHIPPED", attrs={"status": "SHIPPED"})
                else:
                    shardex_write = index.delete("PENDING", item)
                result, _ = await asyncio.gather(shardex_write, application(),
                                                 return_exceptions=True)
                assert result is True or result is False or \
                    isinstance(result, shardex.ConditionFailed), result
                counts["shardex won" if result is True else "application first"] += 1
                await check_item(app, index, item, target)

    asyncio.run(body())
    assert sum(counts.values()) == RACES


# -- an ORM that keeps shardex's attributes --------------------------------------------------

def test_a_pynamodb_model_keeps_shardex_attributes_through_save(
        caplog: pytest.LogCaptureFixture) -> None:
    from pynamodb.attributes import ListAttribute, NumberAttribute, UnicodeAttribute
    from pynamodb.models import Model

    store = local.gsi_store()

    class Order(Model):
        """An application's model: its own attributes and the ones shardex owns."""

        class Meta:
            table_name = store.table
            host = local.require_endpoint()
            region = local.REGION

        id = UnicodeAttribute(hash_key=True)
        status = UnicodeAttribute(null=True)
        total = NumberAttribute(null=True)
        shard_key = UnicodeAttribute(null=True)
        shard_sort = UnicodeAttribute(null=True)
        shardex_version = NumberAttribute(null=True)
        shardex_token = UnicodeAttribute(null=True)
        shardex_history = ListAttribute(of=UnicodeAttribute, null=True)  # type: ignore[var-annotated]

    class Bare(Model):
        """A model that declares only the application's attributes."""

        class Meta:
            table_name = store.table
            host = local.require_endpoint()
            region = local.REGION

        id = UnicodeAttribute(hash_key=True)
        status = UnicodeAttribute(null=True)
        total = NumberAttribute(null=True)
        shard_key = UnicodeAttribute(null=True)
        shard_sort = UnicodeAttribute(null=True)

    async def body() -> None:
        async with shardex.ShardedIndex(store, "orders", ROUTING) as index:
            assert await index.put("PENDING", "o-1", sort="a", attrs={"status": "PENDING"},
                                   version=3)
            before = await store.locate("orders", "o-1")
            order = await asyncio.to_thread(Order.get, "o-1", consistent_read=True)
            order.total = 12
            await asyncio.to_thread(order.save)
            after = await store.locate("orders", "o-1")
            assert after is not None
            assert before is not None
            assert (after.version, after.token, after.history) == (
                before.version, before.token, before.history)
            assert after.entry is not None
            assert (after.entry.shard_key, after.entry.sort) == (
                before.entry.shard_key if before.entry else None, "a")
            assert not await index.put("PENDING", "o-1", version=2)  # still ordered
            assert [e.item_id for e in (await index.query("PENDING")).items] == ["o-1"]
            # a model without them drops them on save(): shardex warns
            bare = await asyncio.to_thread(Bare.get, "o-1", consistent_read=True)
            bare.total = 13
            await asyncio.to_thread(bare.save)
            with caplog.at_level(logging.WARNING, logger="shardex"):
                dropped = await store.locate("orders", "o-1")
            assert dropped is not None
            assert dropped.version == 0
            assert "lost its version attribute 'shardex_version'" in caplog.text

    asyncio.run(body())


# -- a sort attribute the application owns ---------------------------------------------------

def test_an_application_sort_attribute_orders_listings_and_is_never_written() -> None:
    import boto3

    base = local.create_gsi_tables()
    store = DynamoDBStore(base, region=local.REGION, endpoint_url=local.require_endpoint(),
                          **{**local.GSI, "sort_attribute": "shard_sort"},
                          sort_owner="application")
    table = boto3.resource("dynamodb", endpoint_url=local.require_endpoint(),
                           region_name=local.REGION).Table(base)
    rng = random.Random(2)
    ids = [f"o-{i:02d}" for i in range(40)]
    # the application's own values may hold what shardex's never do (a NUL): a cursor
    # after one is one shardex wrote, and is taken back
    created = {item: rng.choice(["2026-11-30T05", "2026-11-30T06", "2026-11-30T06\x00b",
                                 "2026-11-30T07"])
               for item in ids}

    async def body() -> None:
        async with shardex.ShardedIndex(store, "orders", ROUTING) as index:
            assert index.key_attributes("PENDING", "o-00") == {
                "shard_key": index.key_attributes("PENDING", "o-00")["shard_key"]}
            with pytest.raises(shardex.InvalidInput, match="application's own"):
                index.key_attributes("PENDING", "o-00", sort="x")
            for item in ids:
                await asyncio.to_thread(table.put_item, Item={
                    "id": item, "shard_sort": created[item], "status": "PENDING",
                    **index.key_attributes("PENDING", item)})
            want = sorted((created[item], item) for item in ids)
            for order in ("asc", "desc"):
                for limit in (1, 3, 7, 100):
                    got: list[tuple[str, str]] = []
                    cursor = None
                    while True:
                        page = await index.query("PENDING", limit=limit, order=order,
                                                 cursor=cursor)
                        got += [(e.sort, e.item_id) for e in page.items]
                        if page.cursor is None:
                            break
                        cursor = page.cursor
                    assert got == (want if order == "asc" else want[::-1]), (order, limit)
            # a page bounded by ``until`` ends there, inside a run of tied sorts too
            key = index.key_attributes("PENDING", "o-00")["shard_key"]
            on_key = [x.position for x in (await store.query(
                "orders", key, after=None, descending=False, limit=100)).entries]
            assert len(on_key) > 4
            for descending in (False, True):
                listed = on_key[::-1] if descending else on_key
                for cut in (1, len(listed) // 2, len(listed) - 2):
                    for limit in (2, 100):
                        page = await store.query("orders", key, after=None, limit=limit,
                                                 until=listed[cut], descending=descending)
                        assert [x.position for x in page.entries] == \
                            listed[:min(cut + 1, limit)]
                        assert page.resume is None or limit <= cut + 1
            # shardex's own writes never touch the application's sort attribute
            assert await index.move("o-00", old="PENDING", new="SHIPPED",
                                    attrs={"status": "SHIPPED"})
            assert await index.delete("SHIPPED", "o-00")
            assert await index.put("PENDING", "o-00")
            item = table.get_item(Key={"id": "o-00"}, ConsistentRead=True)["Item"]
            assert item["shard_sort"] == created["o-00"]
            with pytest.raises(shardex.InvalidInput, match="application's own"):
                await index.put("PENDING", "o-01", sort="2030")
            with pytest.raises(shardex.InvalidInput, match="has no 'shard_sort'"):
                await index.put("PENDING", "o-new")

    asyncio.run(body())


def test_key_attributes_keep_an_item_on_its_key_while_readers_read_both_layouts() -> None:
    """An application that re-files an item it read (``current``: its shard attribute)
    keeps it on its key of either layout while a reshard reads both: a re-file onto the
    other layout could be missed by a listing between its two phases (a probe)."""
    from shardex.reshard import Resharder

    store = local.gsi_store()

    async def body() -> None:
        async with shardex.ShardedIndex(store, "orders", ROUTING, routing_lease=1.0) as index:
            await index.put("PENDING", "o-1", sort="a")
            old = await index.get("o-1")
            assert old is not None
            async with Resharder(store, "orders", seed=1) as resharder:
                await resharder.start({"PENDING": ShardPolicy(16)}, margin=2.0)
                await resharder.run(until="write-new")
            await index.refresh_routing()
            assert index.routing.state == "write-new"
            fresh = index.key_attributes("PENDING", "o-1", sort="a")["shard_key"]
            kept = index.key_attributes("PENDING", "o-1", sort="a",
                                        current=old.shard_key)["shard_key"]
            assert kept == old.shard_key != fresh
            elsewhere = index.key_attributes("PENDING", "o-1", sort="a",
                                             current="SHIPPED#1")["shard_key"]
            assert elsewhere == fresh  # an entry of another value: a new one here
            with pytest.raises(shardex.InvalidInput, match="current"):
                index.key_attributes("PENDING", "o-1", sort="a", current=3)  # type: ignore[arg-type]

    asyncio.run(body())
