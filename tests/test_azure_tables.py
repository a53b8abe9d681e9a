"""The Azure Tables store on Azurite: the CLI, a missing table, keys through the service."""

from __future__ import annotations

import asyncio
import json

import pytest

from shardex import NotFound, Routing, ShardedIndex, ShardPolicy
from shardex.stores.azure import AzureTablesStore
from tests import azurite, listed_indexes
from tests.servers import shardex_error as failing
from tests.servers import shardex_stdout as shardex

pytestmark = pytest.mark.azure


@pytest.fixture(autouse=True)
def endpoint() -> str:
    return azurite.require_endpoint()


def test_create_table_makes_a_table_the_store_opens(endpoint: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    name = azurite.unique_table()
    out = shardex("azure", "create-table", name, "--endpoint", endpoint)
    uri = f"azure-tables://{name}?endpoint={endpoint}"
    assert f"store URI: {uri}" in out

    async def use() -> int:
        async with ShardedIndex(uri, "ix", Routing()) as index:
            await index.put("PENDING", "o-1")
            return await index.count("PENDING")

    assert asyncio.run(use()) == 1
    assert "already exists" in failing(capsys, "azure", "create-table", name,
                                       "--endpoint", endpoint)
    # another account than the service holds: it read 'the entity does not exist'
    other = endpoint.rsplit("/", 1)[0] + "/otheraccount"
    assert "answers that its account does not exist (ResourceNotFound): check the account " \
        "in the endpoint" in failing(capsys, "azure", "create-table", name, "--endpoint", other)
    report = json.loads(shardex("azure", "repair", name, "--index", "ix", "--endpoint", endpoint,
                                "--json"))
    assert report["schema"] == "shardex.azure-repair/1"
    assert (report["checked"], report["errors"]) == (0, [])
    assert "checked 0 rows" in shardex("azure", "repair", name, "--index", "ix",
                                       "--endpoint", endpoint)
    assert "separator" in failing(capsys, "azure", "repair", name, "--index", "a#b")
    assert "not a shard number" in failing(capsys, "azure", "repair", name, "--index", "ix",
                                           "--shard-key", "PEN#DING#3", "--endpoint", endpoint)


def test_a_missing_table_fails_at_open_naming_the_command(endpoint: str,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    async def open_it() -> None:
        async with AzureTablesStore("nosuchtable", endpoint=endpoint):
            pass

    with pytest.raises(NotFound, match="shardex azure create-table nosuchtable --endpoint"):
        asyncio.run(open_it())
    line = failing(capsys, "routing", "show", "--store",
                   f"azure-tables://nosuchtable?endpoint={endpoint}", "--index", "ix")
    assert line.startswith("error: table 'nosuchtable' does not exist")


def test_indexes_share_a_table_under_their_own_keys() -> None:
    store = azurite.table_store()

    async def main_() -> None:
        routing = Routing(overrides={"PENDING": ShardPolicy(shards=4)})
        async with ShardedIndex(store, "a", routing) as a, ShardedIndex(store, "b") as b:
            await a.put("PENDING", "o-1", sort="1")
            await b.put("PENDING", "o-1", sort="2")
            await a.put("PENDING", "o-2", sort="3")
            assert [e.item_id for e in (await a.query("PENDING")).items] == ["o-1", "o-2"]
            assert [e.sort for e in (await b.query("PENDING")).items] == ["2"]
            assert await a.move("o-1", old="PENDING", new="SHIPPED")
            assert await b.count("PENDING") == 1
            assert list(await store.list_records("a")) == ["routing"]

    asyncio.run(main_())


def test_a_table_lists_its_indexes_and_migrations_list_needs_no_index(endpoint: str) -> None:
    # migrations list asked for --index on azure-tables://: a table kept no list of its
    # indexes; a skip scan of its PartitionKeys finds them, a query of one key an index
    store = azurite.table_store()
    uri = f"azure-tables://{store.table}?endpoint={endpoint}"

    async def foreign(partition: str) -> None:
        async with AzureTablesStore(store.table, endpoint=endpoint) as other:
            await other.client.call("upsert", entity={"PartitionKey": partition,
                                                      "RowKey": "r"})

    listed_indexes.check_every_index_listed(uri, store, foreign)


def test_a_mistyped_index_is_refused_not_read_as_a_stable_one(
        endpoint: str, capsys: pytest.CaptureFixture[str]) -> None:
    """'reshard status --index ordres' (a typo) said 'no reshard under way (routing version
    1, stable)', exit 0, and 'reshard start' began a reshard of it (0 entries to move)."""
    store = azurite.table_store()
    uri = f"azure-tables://{store.table}?endpoint={endpoint}"

    async def open_orders() -> None:
        async with ShardedIndex(uri, "orders") as index:
            await index.put("PENDING", "o-1")

    asyncio.run(open_orders())
    assert "no reshard under way" in shardex("reshard", "status", "--store", uri,
                                             "--index", "orders")
    # (run said 'no reshard is under way', exit 0; the steps and controls, exit 1)
    for args in (["reshard", "status"], ["reshard", "start", "--set", "PENDING=2", "--dry-run"],
                 ["reshard", "start", "--set", "PENDING=2"], ["reshard", "run"],
                 ["reshard", "run", "--until", "done"], ["reshard", "verify"],
                 ["reshard", "cutover"], ["reshard", "complete"], ["reshard", "rollback"],
                 ["reshard", "pause"], ["reshard", "resume"],
                 ["reshard", "throttle", "--rate", "5"], ["adopt", "pause"],
                 ["adopt", "throttle", "--rate", "5"]):
        line = failing(capsys, *args, "--store", uri, "--index", "ordres", code=2)
        assert "Invalid value for '--index': no index 'ordres' in " in line, line
        assert "it has no routing record" in line
    assert "no migrations recorded for orders in" in shardex("migrations", "list", "--store", uri)


def test_a_tier_that_is_the_index_table_by_its_uri_is_refused(
        endpoint: str, capsys: pytest.CaptureFixture[str]) -> None:
    """--tier dedicated=URI naming the index's own table was taken: the forward run never
    ended (parity 80 missing, 80 extra) and a rollback's sweep removed the 'copies on the
    tier it left', which were the entries themselves (30 of 30 gone, 'no gaps', exit 0).
    The same table by another spelling is refused before anything is written."""
    store = azurite.table_store()
    uri = f"azure-tables://{store.table}?endpoint={endpoint}"
    same = f"azure-tables://{store.table.upper()}?endpoint={endpoint}/"

    async def open_tenants() -> None:
        routing = Routing(overrides={"tenant-42": ShardPolicy(shards=2)})
        async with ShardedIndex(uri, "events", routing) as index:
            for n in range(5):
                await index.put("tenant-42", f"e{n}")

    asyncio.run(open_tenants())
    line = failing(capsys, "reshard", "start", "--store", uri, "--index", "events",
                   "--set", "tenant-42=4@dedicated", "--tier", f"dedicated={same}", code=2)
    assert "tiers['dedicated'] is the index's own store" in line, line
    assert "no reshard under way" in shardex("reshard", "status", "--store", uri,
                                             "--index", "events")
