"""The Cosmos DB store on the server: the CLI, bad input, keys, charges and a tier."""

from __future__ import annotations

import asyncio
import json

import pytest

from shardex import InvalidKey, NotFound, Routing, ShardedIndex, ShardPolicy
from shardex.model.entries import StoredEntry
from shardex.stores.cosmos import CosmosStore
from tests import cosmos_server, listed_indexes
from tests.servers import shardex_error as failing
from tests.servers import shardex_stdout as shardex
from tests.servers import sockets_left_by_cancelled_listings

pytestmark = pytest.mark.cosmos


@pytest.fixture(autouse=True)
def endpoint() -> str:
    return cosmos_server.require_endpoint()


def test_create_container_makes_a_container_the_store_opens(
        endpoint: str, capsys: pytest.CaptureFixture[str]) -> None:
    name = cosmos_server.unique_container()
    out = shardex("cosmos", "create-container", "shardex", name, "--endpoint", endpoint)
    uri = f"cosmos://shardex/{name}?endpoint={endpoint}"
    assert f"store URI: {uri}" in out

    async def use() -> int:
        async with ShardedIndex(uri, "ix", Routing()) as index:
            await index.put("PENDING", "o-1")
            return await index.count("PENDING")

    assert asyncio.run(use()) == 1
    assert "already exists" in failing(capsys, "cosmos", "create-container", "shardex", name,
                                       "--endpoint", endpoint)
    report = json.loads(shardex("cosmos", "repair", "shardex", name, "--index", "ix",
                                "--endpoint", endpoint, "--json"))
    assert report["schema"] == "shardex.cosmos-repair/1"
    assert (report["checked"], report["errors"]) == (0, [])
    assert "checked 0 entries" in shardex("cosmos", "repair", "shardex", name, "--index", "ix",
                                          "--endpoint", endpoint)
    assert "separator" in failing(capsys, "cosmos", "repair", "shardex", name, "--index",
                                  "a#b", code=2)
    # a key shardex never writes found nothing and reported 'checked 0'
    assert "not a shard number" in failing(capsys, "cosmos", "repair", "shardex", name,
                                           "--index", "ix", "--shard-key", "PEN#DING#3",
                                           "--endpoint", endpoint, code=2)
    shown = json.loads(shardex("routing", "show", "--store", f"cosmos://shardex/{name}",
                               "--endpoint-url", endpoint, "--index", "ix", "--json"))
    # named as given, as status names it (it had the endpoint added)
    assert (shown["store"], shown["revision"]) == (f"cosmos://shardex/{name}", 1)


def test_bad_input_gets_one_line_errors(endpoint: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    async def open_it() -> None:
        async with CosmosStore("shardex", "nosuchcontainer", endpoint=endpoint):
            pass

    with pytest.raises(NotFound, match="shardex cosmos create-container shardex "
                                       "nosuchcontainer --endpoint"):
        asyncio.run(open_it())
    line = failing(capsys, "routing", "show", "--store",
                   f"cosmos://shardex/nosuchcontainer?endpoint={endpoint}", "--index", "ix")
    assert line.startswith("error: container shardex/nosuchcontainer does not exist")
    line = failing(capsys, "routing", "show", "--store", "cosmos://shardex", "--index", "ix",
                   code=2)
    assert "needs a database and a container" in line
    failing(capsys, "routing", "show", "--store", "cosmos://key:secret@shardex/c",
            "--index", "ix", code=2)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COSMOS_KEY", "not a key!")
        line = failing(capsys, "routing", "show", "--store",
                       f"cosmos://shardex/c?endpoint={endpoint}", "--index", "ix", code=2)
    assert "COSMOS_KEY is not a Cosmos DB account key" in line

    async def too_long() -> None:
        async with cosmos_server.container_store() as store:
            await store.place("ix", "o" * 600, StoredEntry("K", "s" * 600, "o" * 600), version=1,
                              expected=None)

    with pytest.raises(InvalidKey, match="does not fit a Cosmos DB id"):
        asyncio.run(too_long())

    async def put_too_long() -> int:
        store = cosmos_server.container_store()
        async with store, ShardedIndex(store, "ix", routing=Routing()) as index:
            store.reset_stats()
            with pytest.raises(InvalidKey, match="does not fit a Cosmos DB id"):
                await index.put("K", "o" * 512, sort="s" * 510)
            return store.stats().totals.requests

    # refused before any request: it was after the put's placement read
    assert asyncio.run(put_too_long()) == 0

    # a container partitioned by another path: the step it named (create-container of
    # the same name) could only say that one exists
    from shardex.stores.cosmos import admin

    other = cosmos_server.unique_container()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(admin, "PARTITION_KEY_PATH", "/id")
        asyncio.run(admin.create_container("shardex", other, endpoint=endpoint))
    line = failing(capsys, "cosmos", "repair", "shardex", other, "--index", "ix",
                   "--endpoint", endpoint, code=2)
    assert f"container shardex/{other} is partitioned by ['/id']; shardex needs ['/pk']: " \
        "create a container of another name with shardex cosmos create-container shardex " \
        "NAME" in line, line


def test_clients_creating_containers_at_once_in_a_new_database_all_succeed() -> None:
    """The SDK creates a missing database by a read and then a create: a client whose
    read missed the database that another one created in between got a 409 and failed
    ("the item already exists") though neither container existed. It goes on in the
    database that now exists."""
    from shardex.stores.cosmos.admin import create_container

    url = cosmos_server.require_endpoint()
    database = f"db{cosmos_server.unique_container()[-12:]}"
    names = [cosmos_server.unique_container() for _ in range(6)]

    async def together() -> list[str]:
        return list(await asyncio.gather(*(create_container(database, name, endpoint=url)
                                           for name in names)))

    assert asyncio.run(together()) == [url] * len(names)


def test_request_charges_are_the_reported_ones_or_the_documented_estimate() -> None:
    async def charges(mode: str) -> tuple[float, str, float]:
        store = cosmos_server.container_store(charges=mode)
        async with store:
            store.reset_stats()
            written = await store.place("ix", "o-1", StoredEntry("K", "a", "o-1", {"n": 1}),
                                        version=1, expected=None)
            await store.locate("ix", "o-1")
            tally = store.request_charges()
            return written, tally.source, store.stats("ix").totals.read_units

    # this server reports 1 RU for every request; the estimate is the documented charge
    # by document size: a write of a document under 1 KB 4.95 RU, a point read 1 RU
    assert asyncio.run(charges("reported")) == (3.0, "reported", 1.0)
    assert asyncio.run(charges("estimated")) == (pytest.approx(3 * 4.95), "estimated", 1.0)


def test_a_dedicated_container_takes_its_tier_values_entries() -> None:
    async def main_() -> None:
        main_store, dedicated = cosmos_server.container_store(), \
            cosmos_server.container_store()
        routing = Routing(overrides={"BIG": ShardPolicy(shards=4, tier="dedicated")})
        async with ShardedIndex(main_store, "ix", routing,
                                tiers={"dedicated": dedicated}) as index:
            for i in range(8):
                await index.put("BIG", f"b{i}")
                await index.put("small", f"s{i}")
            assert await index.move("b1", old="BIG", new="BIG", sort="z")
            assert await index.delete("BIG", "b2")
            assert await index.count("BIG") == 7
            assert await index.count("small") == 8
            confirmed = await main_store.locate("ix", "b1")  # the tier's write, confirmed
            assert confirmed is not None
            assert confirmed.entry is None
            assert await dedicated.locate("ix", "s1") is None
            assert [e.item_id for e in (await index.query("BIG")).items][-1] == "b1"
            assert {e.shard_key async for e in index.scan("BIG")} <= \
                {f"BIG#{k}" for k in range(4)}

    asyncio.run(main_())


def test_reads_cancelled_in_flight_leave_no_socket_behind(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Reads cancelled after their requests went out (a hedge that lost, a listing
    stopped early; here each shard's first request) make aiohttp drop their TLS
    connections. Closed gracefully, each waited for the server's close_notify past the
    store's close and the loop's end, and its socket stayed open until the garbage
    collector met it (a ResourceWarning): one run in three of a cancelled listing left
    some. The dropped connections are aborted: once ``asyncio.run`` returns, nothing is
    left open."""
    assert sockets_left_by_cancelled_listings(
        monkeypatch, cosmos_server.container_store, runs=3) == []


def test_a_container_lists_its_indexes_and_migrations_list_needs_no_index(
        endpoint: str) -> None:
    # as on Azure: a skip scan of the partition keys, a query across partitions an index
    store = cosmos_server.container_store()
    uri = f"cosmos://{store.database}/{store.container}?endpoint={endpoint}"

    async def foreign(partition: str) -> None:
        async with CosmosStore(store.database, store.container, endpoint=endpoint) as other:
            await other.client.call("upsert", doc={"id": "r", "pk": partition})

    listed_indexes.check_every_index_listed(uri, store, foreign)


def test_a_document_is_held_to_cosmos_dbs_size_not_azures() -> None:
    """Attributes DynamoDB and memory:// hold (300,000 double quotes, 150,000 control
    characters) were refused as "an Azure Table entity" past Azure's 1 MiB, though the
    document is some 1.2 MB of Cosmos DB's 2 MB. A document past 2 MB as the service
    counts it (UTF-8 JSON) is refused before any request, naming Cosmos DB's limit."""
    from shardex import InvalidInput

    async def main() -> None:
        store = cosmos_server.container_store()
        async with ShardedIndex(store, "ix", hedge=None) as index:
            for i, value in enumerate(('"' * 300_000, "\x01" * 150_000)):
                assert await index.put("V", f"i{i}", attrs={"v": value})
                assert (await index.get(f"i{i}")).attrs == {"v": value}
            store.reset_stats()
            with pytest.raises(InvalidInput, match=r"as a Cosmos DB document; a document "
                                                   r"holds at most 2,097,152 \(2 MB\)"):
                await index.put("V", "big", attrs={"v": "\x01" * 390_000})
            assert store.stats("ix").totals.write_requests == 0
            assert await index.get("big") is None

    asyncio.run(main())
