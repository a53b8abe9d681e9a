"""DynamoDB store against DynamoDB Local: what the conformance suite does not show.

Started by scripts/test (``SHARDEX_DYNAMODB_ENDPOINT``); skipped without it, except
in CI, where a missing server fails these tests.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Coroutine
from decimal import Decimal
from typing import Any, TypeVar

import pytest

import shardex
from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.cli import main
from shardex.model.entries import StoredEntry
from shardex.stores.dynamodb import DynamoDBStore
from tests import dynamodb_local as local

pytestmark = pytest.mark.dynamodb
T = TypeVar("T")
SHARDED = Routing(overrides={"PENDING": ShardPolicy(shards=4)})


@pytest.fixture(autouse=True)
def endpoint() -> str:
    return local.require_endpoint()


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


# -- failing fast at open -------------------------------------------------------------

def test_missing_tables_and_indexes_fail_at_open_naming_them(endpoint: str) -> None:
    async def body() -> None:
        with pytest.raises(shardex.NotFound, match=r"'no-such-table' does not exist.*"
                                                   r"shardex dynamodb create-table no-such"):
            await DynamoDBStore("no-such-table", region=local.REGION,
                                endpoint_url=endpoint).open()
        base = local.create_gsi_tables(meta=False)
        options = {**local.GSI, "region": local.REGION, "endpoint_url": endpoint}
        with pytest.raises(shardex.NotFound, match=rf"'{base}-shardex' does not exist.*"
                                                   rf"create-meta-table {base}"):
            await DynamoDBStore(base, **options).open()
        with pytest.raises(shardex.NotFound, match=r"no global secondary index 'by_other'.*"
                                                   r"by_shard"):
            await DynamoDBStore(base, **{**options, "gsi": "by_other"}).open()
        with pytest.raises(shardex.StoreError, match="shard_key S HASH"):
            await DynamoDBStore(base, **{**options, "key_attribute": "other"}).open()
        with pytest.raises(shardex.StoreError, match="not a shardex index table"):
            await DynamoDBStore(base, region=local.REGION, endpoint_url=endpoint).open()

    run(body())


def test_an_unreachable_endpoint_is_unavailable_naming_it() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"

    async def body() -> None:
        with pytest.raises(shardex.Unavailable, match=f"cannot reach DynamoDB at {url}"):
            await DynamoDBStore("orders", region=local.REGION, endpoint_url=url).open()

    run(body())


def test_refused_credentials_are_named(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    table = local.create_index_table()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "not-a-valid-key!")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")

    async def body() -> None:
        with pytest.raises(shardex.StoreError, match="refused the AWS credentials "
                                                     r"\(UnrecognizedClientException"):
            await DynamoDBStore(table, region=local.REGION, endpoint_url=endpoint).open()

    run(body())


# -- order, attributes, versions ------------------------------------------------------

@pytest.mark.parametrize("make", [local.table_store, local.gsi_store], ids=["table", "gsi"])
def test_dynamodb_orders_ties_and_prefixes_as_shardex_does(make: Any) -> None:
    rows = [("a b", "1"), ("a", "2"), ("a", "10"), ("", "z"), ("a\x01", "0"), ("ab", "3"),
            ("é", "x"), ("\U0001f600", "y"), ("\uffff", "w"), ("a", "1#2")]

    async def body() -> None:
        async with ShardedIndex(make(), "ix", Routing()) as index:
            for sort, item_id in rows:
                await index.put("V", item_id, sort=sort)
            got = [(e.sort, e.item_id) for e in (await index.query("V", limit=100)).items]
            assert got == sorted(rows)
            pages: list[tuple[str, str]] = []
            cursor = None
            while True:
                page = await index.query("V", limit=3, order="desc", cursor=cursor)
                pages += [(e.sort, e.item_id) for e in page.items]
                if (cursor := page.cursor) is None:
                    break
            assert pages == sorted(rows, reverse=True)
            # a cursor still works when the entry it stopped at is gone
            first = await index.query("V", limit=4)
            assert first.cursor is not None
            assert await index.delete("V", first.items[-1].item_id)
            rest = await index.query("V", limit=100, cursor=first.cursor)
            assert [(e.sort, e.item_id) for e in rest.items] == sorted(rows)[4:]

    run(body())


@pytest.mark.parametrize("make", [local.table_store, local.gsi_store], ids=["table", "gsi"])
def test_attrs_round_trip_through_dynamodb_numbers(make: Any) -> None:
    attrs = {"total": 12.5, "qty": 3, "big": 10**25, "neg": -0.001, "name": "é", "ok": True,
             "gone": None, "lines": [{"sku": "a", "n": 2}, 1.5], "price": Decimal("9.99")}

    async def body() -> None:
        async with ShardedIndex(make(), "ix", SHARDED) as index:
            await index.put("PENDING", "o-1", sort="s", attrs=attrs)
            [entry] = (await index.query("PENDING")).items
            assert entry.attrs == {**attrs, "price": 9.99}
            assert type(entry.attrs["qty"]) is int
            assert type(entry.attrs["total"]) is float
            located = await index.get("o-1")
            assert located is not None
            assert located.attrs == entry.attrs
            with pytest.raises(shardex.InvalidInput, match="empty set cannot be stored"):
                await index.put("PENDING", "o-2", attrs={"tags": set()})

    run(body())


def test_a_stale_writer_on_another_client_cannot_resurrect_or_duplicate(endpoint: str) -> None:
    async def body() -> None:
        first = local.table_store()
        second = DynamoDBStore(first.table, region=local.REGION, endpoint_url=endpoint)
        async with ShardedIndex(first, "ix", SHARDED) as a, ShardedIndex(second, "ix") as b:
            await a.put("PENDING", "o-1", sort="1")
            assert await b.get("o-1") is not None       # b's store now knows version 1
            await a.move("o-1", old="PENDING", new="SHIPPED")  # version 2, elsewhere
            assert await b.put("PENDING", "o-1", sort="3")     # b re-plans from version 2
            assert await a.delete("PENDING", "o-1", version=9)
            assert not await b.put("PENDING", "o-1", sort="4", version=8)
            counts = [await a.count(v) for v in ("PENDING", "SHIPPED")]
            assert counts == [0, 0]
            placement = await second.locate("ix", "o-1")
            assert placement is not None
            assert (placement.version, placement.entry) == (9, None)

    run(body())


# -- paging ---------------------------------------------------------------------------

def test_every_1mb_page_is_followed_where_a_naive_fan_out_loses_entries(endpoint: str) -> None:
    """Shards over 1 MB: one Query per shard (the naive fan-out) drops entries; shardex not."""
    blob = "x" * 40_000
    items = 120

    async def body() -> None:
        store = local.table_store()
        async with ShardedIndex(store, "ix", SHARDED) as index:
            for start in range(0, items, 30):
                await asyncio.gather(*(index.put("PENDING", f"o-{i:03d}", sort=f"{i:03d}",
                                                 attrs={"blob": blob})
                                       for i in range(start, start + 30)))
            naive = 0
            for shard in range(4):
                response = await store.client.call(
                    "Query", TableName=store.table, KeyConditionExpression="pk = :k",
                    ExpressionAttributeValues={":k": {"S": f"PENDING#{shard}"}})
                naive += len(response["Items"])
            assert naive < items  # each shard holds ~1.2 MB: its first page stops at 1 MB
            store.reset_stats()
            first = await index.query("PENDING", limit=10)
            stats = store.stats("ix")
            assert [e.item_id for e in first.items] == [f"o-{i:03d}" for i in range(10)]
            # a page of 10 reads each shard once, not to its end
            assert max(stats.by_key[f"PENDING#{k}"].read_requests for k in range(4)) == 1
            listing: list[str] = []
            cursor = None
            while True:
                page = await index.query("PENDING", limit=50, cursor=cursor)
                listing += [e.item_id for e in page.items]
                if (cursor := page.cursor) is None:
                    break
            assert listing == [f"o-{i:03d}" for i in range(items)]
            assert await index.count("PENDING") == items
            assert len({e.item_id async for e in index.scan("PENDING")}) == items

    run(body())


# -- consumed capacity ------------------------------------------------------------------

@pytest.mark.parametrize("make", [local.table_store, local.gsi_store], ids=["table", "gsi"])
def test_consumed_capacity_is_counted_per_shard_key(make: Any) -> None:
    async def body() -> None:
        store = make()
        async with ShardedIndex(store, "ix", SHARDED) as index:
            store.reset_stats()
            await index.put("PENDING", "o-1", sort="s", attrs={"pad": "x" * 3000})
            shard_key = (await index.get("o-1")).shard_key  # type: ignore[union-attr]
            await index.query("PENDING", limit=10)
            stats = store.stats("ix")
            written = stats.by_key[shard_key]
            assert written.write_requests == 1
            assert written.write_units >= 1
            assert stats.by_key[shard_key].read_units > 0
            assert stats.by_key["#placement#"].read_requests == 2  # the put's locate, get
            assert stats.totals.write_requests == 1
            assert stats.totals.write_units == pytest.approx(
                sum(k.write_units for k in stats.by_key.values()))
            assert stats.shard_keys() == sorted(f"PENDING#{k}" for k in range(4))
            assert store.stats("other").totals.requests == 0

    run(body())


# -- adopting an application's client ------------------------------------------------

def test_an_applications_boto3_client_or_session_drives_the_store(endpoint: str) -> None:
    import boto3

    client = boto3.client("dynamodb", region_name=local.REGION, endpoint_url=endpoint)
    session = boto3.Session(region_name=local.REGION)

    async def body() -> None:
        for store in (DynamoDBStore(local.create_index_table(), client=client),
                      DynamoDBStore(local.create_index_table(), session=session,
                                    endpoint_url=endpoint)):
            assert type(store.client).__name__ == "ThreadedClient"
            async with ShardedIndex(store, "ix", SHARDED) as index:
                await asyncio.gather(*(index.put("PENDING", f"o-{i}", sort=f"{i:02d}")
                                       for i in range(12)))
                assert await index.move("o-3", old="PENDING", new="SHIPPED")
                page = await index.query("PENDING", limit=5)
                assert [e.item_id for e in page.items] == ["o-0", "o-1", "o-2", "o-4", "o-5"]
                assert await index.count("PENDING") == 11
        client.describe_table(TableName=store.table)  # the application's client stays open

    run(body())


def test_an_applications_boto3_client_carries_as_many_requests_as_its_pool(
        endpoint: str) -> None:
    """A boto3 client's calls ran in asyncio's default executor, min(32, cores + 4)
    threads (6 on two cores), while the fan-out sent as many as the client's pool (here
    24): a first page over 24 shard keys was read 6 requests at a time."""
    import threading

    import boto3
    import botocore.config

    client = boto3.client("dynamodb", region_name=local.REGION, endpoint_url=endpoint,
                          config=botocore.config.Config(max_pool_connections=24))
    lock, sending, most = threading.Lock(), [0], [0]

    def sent(**_: object) -> None:  # in the worker thread, as each Query leaves
        with lock:
            sending[0] += 1
            most[0] = max(most[0], sending[0])
        time.sleep(0.2)  # every request in flight at once overlaps this (a loaded machine too)
        with lock:
            sending[0] -= 1

    routing = Routing(overrides={"PENDING": ShardPolicy(shards=24)})

    async def body() -> None:
        store = DynamoDBStore(local.create_index_table(), client=client)
        assert store.connections == 24
        async with ShardedIndex(store, "ix", routing, hedge=None) as index:
            await asyncio.gather(*(index.put("PENDING", f"o-{i:02d}", sort=f"{i:02d}")
                                   for i in range(48)))
            client.meta.events.register("before-send.dynamodb.Query", sent)
            page = await index.query("PENDING", limit=30)
        assert [e.item_id for e in page.items] == [f"o-{i:02d}" for i in range(30)]

    run(body())
    assert most[0] == 24

    async def again() -> None:  # a store closed and opened again makes its threads anew
        store = DynamoDBStore(local.create_index_table(), client=client)
        for item in ("o-1", "o-2"):
            async with ShardedIndex(store, "ix", routing, hedge=None) as index:
                await index.put("PENDING", item)
                assert item in [e.item_id for e in (await index.query("PENDING")).items]

    client.meta.events.unregister("before-send.dynamodb.Query", sent)
    run(again())


def test_an_applications_aiobotocore_client_is_used_and_left_open(endpoint: str) -> None:
    from aiobotocore.session import get_session

    async def body() -> None:
        async with get_session().create_client("dynamodb", region_name=local.REGION,
                                               endpoint_url=endpoint) as client:
            store = DynamoDBStore(local.create_index_table(), client=client)
            assert type(store.client).__name__ == "AioClient"
            async with ShardedIndex(store, "ix", SHARDED) as index:
                await index.put("PENDING", "o-1")
            assert (await client.describe_table(TableName=store.table))["Table"]

    run(body())


# -- one index per table -----------------------------------------------------------------

def test_an_index_table_holds_one_index(endpoint: str) -> None:
    async def body() -> None:
        store = local.table_store()
        async with ShardedIndex(store, "orders", SHARDED) as first:
            await first.put("PENDING", "o-1")
            # a StoreInUse (an InvalidInput, as before), refused by what the store holds
            with pytest.raises(shardex.StoreInUse, match=r"already holds the index 'orders'"
                                                         r".*cannot also hold 'returns'"):
                async with ShardedIndex(store, "returns", SHARDED):
                    pass
        again = DynamoDBStore(store.table, region=local.REGION, endpoint_url=endpoint)
        with pytest.raises(shardex.InvalidInput, match=r"'orders'.*'returns'"):
            async with ShardedIndex(again, "returns"):
                pass
        async with ShardedIndex(again, "orders") as reopened:
            assert await reopened.count("PENDING") == 1

    run(body())
    # the command line exits 1 for it: the arguments are fine, the table holds another index
    assert issubclass(shardex.StoreInUse, shardex.InvalidInput)
    # a table no index owns yet: nothing recorded
    assert _exit_code("migrations", "list", "--store", local.table_store().uri, "--index",
                      "returns") == 0
    store = local.table_store()
    run(_owned_by_orders(store))
    assert _exit_code("migrations", "list", "--store", store.uri, "--index", "returns") == 1
    # with the index it holds beside it: that one's list, and a line for the other (the
    # whole command had failed: a probe)
    assert _exit_code("migrations", "list", "--store", store.uri, "--index", "orders",
                      "--index", "returns", "--json") == 0
    assert _exit_code("migrations", "list", "--store", store.uri, "--index", "orders",
                      "--index", "returns") == 0
    # the store alone: the index its owner record names; a table no index owns lists none
    assert _exit_code("migrations", "list", "--store", store.uri) == 0
    assert _exit_code("migrations", "list", "--store", local.table_store().uri) == 0


def test_migrations_list_names_an_index_the_table_does_not_hold(
        endpoint: str, capsys: pytest.CaptureFixture[str]) -> None:
    store = local.table_store()
    run(_owned_by_orders(store))
    main(["migrations", "list", "--store", store.uri, "--index", "orders", "--index", "returns",
          "--json"])
    listed = json.loads(capsys.readouterr().out)
    assert listed["migrations"] == []
    assert list(listed["refused"]) == ["returns"]
    assert "already holds the index 'orders'" in listed["refused"]["returns"]
    main(["migrations", "list", "--store", store.uri, "--index", "orders", "--index", "returns"])
    out = capsys.readouterr().out
    assert "no migrations recorded for orders" in out, out
    assert "returns: not listed: " in out, out


def _exit_code(*args: str) -> int:
    try:
        main(list(args))
    except SystemExit as exited:
        return int(exited.code or 0)
    return 0


async def _owned_by_orders(store: DynamoDBStore) -> None:
    async with ShardedIndex(store, "orders", SHARDED) as index:
        await index.put("PENDING", "o-1")


def test_a_gsi_serves_one_index(endpoint: str) -> None:
    async def body() -> None:
        store = local.gsi_store()
        async with ShardedIndex(store, "orders", SHARDED) as first:
            await first.put("PENDING", "o-1")
        other = DynamoDBStore(store.table, region=local.REGION, endpoint_url=endpoint,
                              **local.GSI)
        with pytest.raises(shardex.StoreInUse, match=r"'by_shard'.*already serves the index "
                                                     r"'orders'.*'returns'"):
            async with ShardedIndex(other, "returns", SHARDED):
                pass

    run(body())


# -- GSI mode with the application's own items --------------------------------------------

def test_gsi_mode_indexes_items_the_application_writes(endpoint: str) -> None:
    import boto3

    async def body() -> None:
        store = local.gsi_store()
        table = boto3.resource("dynamodb", region_name=local.REGION,
                               endpoint_url=endpoint).Table(store.table)
        async with ShardedIndex(store, "orders", SHARDED) as index:
            for i in range(8):
                keys = index.key_attributes("PENDING", f"o-{i}", sort=f"2026-12-0{i}")
                assert set(keys) == {"shard_key", "shard_sort"}
                assert keys["shard_key"] == index.routing.shard_key("PENDING", f"o-{i}")
                table.put_item(Item={"id": f"o-{i}", "total": Decimal(i), **keys})
            page = await index.query("PENDING", limit=100)
            assert page.consistent is False
            assert [(e.item_id, e.sort, e.attrs, e.version) for e in page.items] == [
                (f"o-{i}", f"2026-12-0{i}", {"total": i}, 0) for i in range(8)]
            # shardex moves an item the application wrote, leaving its attributes alone
            assert await index.move("o-1", old="PENDING", new="SHIPPED")
            table.update_item(Key={"id": "o-1"}, UpdateExpression="SET #t = :t",
                              ExpressionAttributeNames={"#t": "total"},
                              ExpressionAttributeValues={":t": 99})
            assert await index.move("o-1", old="SHIPPED", new="DELIVERED")
            item = table.get_item(Key={"id": "o-1"}, ConsistentRead=True)["Item"]
            assert (item["total"], item["shardex_version"]) == (99, 2)
            assert item["shard_key"] == "DELIVERED"
            # attrs that locate read are not written back over the application's newer ones
            located = await store.locate("orders", "o-2")
            assert located is not None
            assert located.entry is not None
            table.update_item(Key={"id": "o-2"}, UpdateExpression="SET #t = :t",
                              ExpressionAttributeNames={"#t": "total"},
                              ExpressionAttributeValues={":t": 77})
            moved = StoredEntry(shard_key="SHIPPED", sort="late", item_id="o-2",
                                attrs={**located.entry.attrs, "note": "moved"}, version=1)
            await store.place("orders", "o-2", moved, version=1, expected=located)
            item = table.get_item(Key={"id": "o-2"}, ConsistentRead=True)["Item"]
            assert (item["total"], item["note"], item["shard_key"]) == (77, "moved", "SHIPPED")
            # a delete takes the item out of the sparse GSI and keeps a tombstone
            assert await index.delete("DELIVERED", "o-1")
            item = table.get_item(Key={"id": "o-1"}, ConsistentRead=True)["Item"]
            assert "shard_key" not in item
            assert "shard_sort" not in item
            assert item["shardex_version"] == 3
            assert item["total"] == 99
            assert await index.count("DELIVERED") == 0
            assert not await index.put("DELIVERED", "o-1", version=3)
            with pytest.raises(shardex.InvalidInput, match="shardex's own attributes"):
                await index.put("PENDING", "o-9", attrs={"shard_key": "x"})

    run(body())
