"""One malformed item in a listing: a typed error naming it by default, or skipped and reported.

Items the application (or a hand edit) left in a shape that is not an entry's: in
DynamoDB GSI mode a version attribute that is not a number, a sort attribute that
encodes another item's id, an id shardex cannot address; in index-table mode and on
Azure a damaged entry. By default a query or a scan raises MalformedItem naming the item
and the shard key; ``ShardedIndex(..., malformed="skip")`` leaves them out and reports
each on ``Page.skipped``, in ``store.stats().skipped``, in the Prometheus exporter and in
the log. ``count`` counts what the store holds (DynamoDB's COUNT does not read items).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

import pytest

import shardex
from shardex import MalformedItem, ShardedIndex
from shardex.metrics.prometheus import PrometheusCollector
from shardex.metrics.recorder import MetricsRecorder
from shardex.model.entries import StoredEntry
from shardex.sim.clock import run_virtual
from shardex.stores.base import Store
from tests import azurite
from tests import dynamodb_local as local

GOOD = ["o-1", "o-5"]


def collected(store: Store) -> tuple[MetricsRecorder, Any]:
    """A metrics recorder on ``store`` and the Prometheus registry that exports it."""
    from prometheus_client import CollectorRegistry

    recorder = MetricsRecorder().attach(store)
    registry = CollectorRegistry()
    registry.register(PrometheusCollector(recorder))  # type: ignore[arg-type]
    return recorder, registry


async def check_listings(store: Store, bad: dict[str, str], held: int) -> None:
    """The default raises naming an item and the key; ``skip`` leaves the ``bad`` items
    (id -> words of why) out and reports each; count counts the ``held`` items."""
    async with ShardedIndex(store, "orders", hedge=None) as index:
        with pytest.raises(MalformedItem, match="listed under shard key 'PENDING'") as caught:
            await index.query("PENDING")
        assert caught.value.key == "PENDING"
        assert caught.value.item_id in bad
        with pytest.raises(MalformedItem, match=r"malformed='skip'"):
            [e async for e in index.scan("PENDING")]
    recorder, registry = collected(store)
    store.reset_stats()
    async with ShardedIndex(store, "orders", hedge=None, malformed="skip") as index:
        page = await index.query("PENDING", limit=100)
        assert [e.item_id for e in page.items] == GOOD
        assert {s.item_id: s.key for s in page.skipped} == dict.fromkeys(bad, "PENDING")
        for skipped in page.skipped:
            assert bad[skipped.item_id] in skipped.reason, skipped
        assert sorted([e.item_id async for e in index.scan("PENDING")]) == GOOD
        assert await index.count("PENDING") == held
    assert store.stats().skipped == {"PENDING": 2 * len(bad)}  # the query and the scan
    figures = recorder.figures()["shardex_skipped_items"]
    assert figures == [{"labels": {"index": "orders"}, "value": 2.0 * len(bad)}]
    assert registry.get_sample_value("shardex_skipped_items_total",
                                     {"index": "orders"}) == 2 * len(bad)


def test_the_option_is_checked_and_memory_skips_nothing() -> None:
    with pytest.raises(shardex.InvalidInput, match="malformed must be one of raise, skip"):
        ShardedIndex("memory://", "orders", malformed="drop")  # type: ignore[arg-type]

    async def body() -> None:
        async with ShardedIndex("memory://", "orders", malformed="skip") as index:
            await index.put("PENDING", "o-1")
            page = await index.query("PENDING")
            assert [e.item_id for e in page.items] == ["o-1"]
            assert page.skipped == ()
            with pytest.raises(shardex.InvalidInput, match="malformed must be one of"):
                await index.store.query("orders", "PENDING", after=None, descending=False,
                                        limit=1, malformed="no")  # type: ignore[arg-type]

    run_virtual(body())


@pytest.mark.dynamodb
def test_malformed_items_in_gsi_mode(caplog: pytest.LogCaptureFixture) -> None:
    store = local.gsi_store()
    client = local.sync_client()
    good = {"shard_key": {"S": "PENDING"}}
    bad = {
        "o-2": ({"shardex_version": {"S": "x"}}, "'shardex_version' is {'S': 'x'}"),
        "o-3": ({"shard_sort": {"S": "2026\x00o-9"}}, "encodes the item id 'o-9'"),
        # DynamoDB orders it by its bytes, where no position lies: it was listed out of
        # order, skipped or twice beside encoded ones (a probe)
        "o-6": ({"shard_sort": {"S": "2026"}}, "without shardex's encoding"),
        "o-4\x00x": ({}, "contains a NUL character"),
        "o-" + "4" * 600: ({}, "at most 512 are allowed"),
    }
    def encoded(item_id: str) -> dict[str, Any]:  # the sort attribute as shardex writes it
        return {"shard_sort": {"S": f"2026\x00{item_id}"}}

    for item_id in GOOD:
        client.put_item(TableName=store.table,
                        Item={"id": {"S": item_id}, **good, **encoded(item_id)})
    for item_id, (damage, _) in bad.items():
        client.put_item(TableName=store.table,
                        Item={"id": {"S": item_id}, **good, **encoded(item_id), **damage})
    with caplog.at_level(logging.WARNING, logger="shardex"):
        asyncio.run(check_listings(store, {i: words for i, (_, words) in bad.items()},
                                   held=len(GOOD) + len(bad)))
    assert sum("skipped a malformed item listed under shard key 'PENDING'" in r.message
               for r in caplog.records) == 2 * len(bad)


@pytest.mark.dynamodb
def test_a_key_attribute_no_shard_key_is_the_items_fault_not_the_argument() -> None:
    """In GSI mode the application writes the key attribute too: one that is no shard
    key shardex writes ('PENDING#07') makes get, move and delete of that item raise
    MalformedItem naming it and the key (not InvalidKey, which says the caller's
    argument is wrong), and changes nothing."""
    store = local.gsi_store()
    client = local.sync_client()
    item = {"id": {"S": "o-7"}, "shard_key": {"S": "PENDING#07"},
            "shard_sort": {"S": "2026\x00o-7"}}
    client.put_item(TableName=store.table, Item=item)

    async def body() -> None:
        async with ShardedIndex(store, "orders", hedge=None) as index:
            for call in (lambda: index.get("o-7"),
                         lambda: index.move("o-7", old="PENDING", new="SHIPPED"),
                         lambda: index.delete("PENDING", "o-7")):
                with pytest.raises(MalformedItem, match="item 'o-7': its entry's shard key "
                                   "is not one shardex writes: shard key 'PENDING#07' has "
                                   "a suffix that is not a shard number") as caught:
                    await call()
                assert (caught.value.item_id, caught.value.key) == ("o-7", "PENDING#07")

    asyncio.run(body())
    assert client.get_item(TableName=store.table, Key={"id": {"S": "o-7"}},
                           ConsistentRead=True)["Item"] == item


@pytest.mark.dynamodb
def test_a_damaged_entry_in_index_table_mode() -> None:
    store = local.table_store()

    async def main() -> None:
        async with ShardedIndex(store, "orders") as index:
            for item_id in GOOD:
                await index.put("PENDING", item_id, sort=item_id)
        local.sync_client().put_item(TableName=store.table, Item={
            "pk": {"S": "PENDING"}, "sk": {"S": "o-3\x00o-3"}, "id": {"S": "o-3"},
            "v": {"S": "1"}, "attrs": {"M": {}}})
        await check_listings(store, {"o-3": "attribute 'v' is {'S': '1'}"}, held=3)

    asyncio.run(main())


@pytest.mark.azure
def test_a_damaged_entry_row_on_azure() -> None:
    from azure.data.tables.aio import TableClient

    from shardex.stores.azure import codec, keys

    store = azurite.table_store()

    async def main() -> None:
        async with ShardedIndex(store, "orders") as index:
            for item_id in GOOD:
                await index.put("PENDING", item_id, sort=item_id)
        partition = keys.entry_partition("orders", "PENDING")
        rows = codec.entry_rows(partition, StoredEntry("PENDING", "o-3", "o-3", {}), "t3")
        async with TableClient.from_connection_string(
                os.environ["AZURE_STORAGE_CONNECTION_STRING"], store.table) as table:
            for row in rows:
                await table.upsert_entity({**row, "st": codec.COMMITTED, "v": "x"})
        await check_listings(store, {"o-3": "attribute 'v' is 'x'"}, held=3)

    asyncio.run(main())


@pytest.mark.cosmos
def test_a_foreign_or_damaged_document_on_cosmos() -> None:
    """A document the application put in an index's partition (an id no entry has), or an
    entry document with a field gone, raised InvalidKey ("RowKey ... is not a shardex
    entry row", the caller's fault) or a MalformedItem naming no shard key, and
    ``malformed="skip"`` left neither out: every listing of the value failed. Both are
    the item's fault now, as on Azure: raised naming it and the key, or skipped."""
    from azure.cosmos.aio import CosmosClient

    from shardex.stores.cosmos import codec
    from tests import cosmos_server

    store = cosmos_server.container_store()

    async def main() -> None:
        async with ShardedIndex(store, "orders") as index:
            for item_id in GOOD:
                await index.put("PENDING", item_id, sort=item_id)
        partition = codec.entry_partition("orders", "PENDING")
        damaged = codec.entry_doc(partition, StoredEntry("PENDING", "o-3", "o-3", {}), "t3")
        async with CosmosClient(os.environ["COSMOS_ENDPOINT"], os.environ["COSMOS_KEY"],
                                connection_verify=False) as client:
            container = client.get_database_client(store.database) \
                .get_container_client(store.container)
            await container.upsert_item({"pk": partition, "id": "note", "body": "the app's"})
            await container.upsert_item({**damaged, "st": "c", "k": None})
        # count counts the entry documents the store holds (the damaged one too), as
        # on Azure, not the application's
        await check_listings(store, {"note": "not a shardex entry", "o-3": "'k' is None"},
                             held=3)

    asyncio.run(main())


@pytest.mark.dynamodb
def test_every_skipped_item_is_on_some_page_of_a_listing(
        caplog: pytest.LogCaptureFixture) -> None:
    """Items left out by a request read ahead (which collects for no call), or by a
    request that landed after the page that sent it had returned, were on no page's
    ``skipped``: a listing by query in pages of 4 reported 1 of 3, in pages of 1 and 10
    2 of 3. Each request's skipped items now go to the page that ends after it landed."""
    store = local.gsi_store()
    client = local.sync_client()

    async def fill() -> None:
        async with ShardedIndex(store, "ix", shardex.Routing(
                overrides={"V": shardex.ShardPolicy(2)})) as index:
            for i in range(30):
                await index.put("V", f"i{i:02d}", sort=f"{i:02d}")
            for bad, sort in (("bad1", "05x"), ("bad2", "15x"), ("bad3", "25x")):
                attributes = index.key_attributes("V", bad, sort=sort)
                client.put_item(TableName=store.table, Item={
                    "id": {"S": bad}, **{k: {"S": v} for k, v in attributes.items()},
                    "shardex_version": {"S": "abc"}})

    async def listed(limit: int, how: str) -> tuple[int, list[str]]:
        async with ShardedIndex(store.uri, "ix", malformed="skip") as index:
            got, reported, cursor = 0, [], None
            if how == "pages":
                async for page in index.pages("V", limit=limit):
                    got += len(page.items)
                    reported += [s.item_id for s in page.skipped]
                return got, sorted(reported)
            while True:
                page = await index.query("V", limit=limit, cursor=cursor)
                got += len(page.items)
                reported += [s.item_id for s in page.skipped]
                if (cursor := page.cursor) is None:
                    return got, sorted(reported)

    asyncio.run(fill())
    caplog.set_level(logging.ERROR, logger="shardex")  # each skip's warning, 24 times
    for limit in (1, 4, 10, 100):
        for how in ("query", "pages"):
            assert asyncio.run(listed(limit, how)) == (30, ["bad1", "bad2", "bad3"]), \
                (limit, how)
