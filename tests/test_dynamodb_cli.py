"""``shardex dynamodb`` and ``shardex routing``, driven as a user drives them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from shardex import Routing, ShardedIndex, ShardPolicy
from tests import dynamodb_local as local
from tests.servers import shardex_error as failing
from tests.servers import shardex_stdout as shardex

pytestmark = pytest.mark.dynamodb


@pytest.fixture(autouse=True)
def endpoint() -> str:
    return local.require_endpoint()


def test_create_table_makes_an_index_table_the_store_opens(
        endpoint: str, capsys: pytest.CaptureFixture[str]) -> None:
    name = local.unique_name()
    out = shardex("dynamodb", "create-table", name, "--region", local.REGION,
                  "--endpoint-url", endpoint)
    uri = f"dynamodb://{name}?region={local.REGION}&endpoint_url={endpoint}"
    assert f"store URI: {uri}" in out

    async def use() -> int:
        async with ShardedIndex(uri, "ix", Routing()) as index:
            await index.put("PENDING", "o-1")
            return await index.count("PENDING")

    assert asyncio.run(use()) == 1
    assert "already exists" in failing(capsys, "dynamodb", "create-table", name, "--region",
                                       local.REGION, "--endpoint-url", endpoint)


def test_create_table_provisioned_and_its_checks(endpoint: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    name = local.unique_name()
    shardex("dynamodb", "create-table", name, "--region", local.REGION, "--endpoint-url",
            endpoint, "--billing", "provisioned", "--read-units", "7", "--write-units", "3")
    table = local.sync_client().describe_table(TableName=name)["Table"]
    throughput = table["ProvisionedThroughput"]
    assert (throughput["ReadCapacityUnits"], throughput["WriteCapacityUnits"]) == (7, 3)
    error = failing(capsys, "dynamodb", "create-table", local.unique_name(), "--region",
                    local.REGION, "--endpoint-url", endpoint, "--billing", "provisioned")
    assert "provisioned billing needs read_units >= 1" in error
    error = failing(capsys, "dynamodb", "create-table", local.unique_name(), "--region",
                    local.REGION, "--endpoint-url", endpoint, "--read-units", "5")
    assert "on-demand tables take none" in error


def test_create_meta_table_lets_a_gsi_store_open(endpoint: str) -> None:
    base = local.create_gsi_tables(meta=False)
    out = shardex("dynamodb", "create-meta-table", base, "--region", local.REGION,
                  "--endpoint-url", endpoint)
    assert f"created metadata table {base}-shardex" in out
    uri = (f"dynamodb://{base}?region={local.REGION}&endpoint_url={endpoint}&gsi=by_shard"
           "&key_attribute=shard_key&sort_attribute=shard_sort&id_attribute=id")

    async def use() -> list[str]:
        async with ShardedIndex(uri, "orders",
                                Routing(overrides={"PENDING": ShardPolicy(shards=2)})) as index:
            await index.put("PENDING", "o-1", sort="s")
            return [e.item_id for e in (await index.query("PENDING")).items]

    assert asyncio.run(use()) == ["o-1"]


@pytest.mark.parametrize("make", [local.table_store, local.gsi_store], ids=["table", "gsi"])
def test_routing_show_and_set(make: type, capsys: pytest.CaptureFixture[str]) -> None:
    store = make()
    uri = store.uri
    out = shardex("routing", "show", "--store", uri, "--index", "orders")
    assert "has no routing record" in out
    # a --remove of a value with no override created the record anyway (the one set)
    error = failing(capsys, "routing", "set", "--store", uri, "--index", "orders",
                    "--remove", "PENDING")
    assert "Invalid value for '--remove': 'PENDING' has no override to remove (index " \
        "'orders' shards it by the default); nothing was written" in error, error
    assert "has no routing record" in shardex("routing", "show", "--store", uri,
                                              "--index", "orders")
    out = shardex("routing", "set", "--store", uri, "--index", "orders",
                  "--override", "PENDING=8", "--override", "SHIPPED=4:random")
    assert "routing version 1 -> 2" in out
    assert "PENDING: 1 -> 8 shard(s), hash" in out
    out = shardex("routing", "show", "--store", uri, "--index", "orders")
    assert "routing version 2 (record revision 1, lease 15 s)" in out
    assert "PENDING: 8 shard(s), hash: PENDING#0, PENDING#1, PENDING#2, ..., PENDING#7" in out
    assert "SHIPPED: 4 shard(s), random: SHIPPED#0, SHIPPED#1, SHIPPED#2, SHIPPED#3" in out
    doc = json.loads(shardex("routing", "show", "--store", uri, "--index", "orders", "--json"))
    assert doc["revision"] == 1
    assert doc["routing"]["version"] == 2
    assert doc["layout"]["overrides"]["PENDING"]["shard_keys"] == [
        f"PENDING#{k}" for k in range(8)]

    async def put() -> None:
        async with ShardedIndex(uri, "orders") as index:
            await index.put("PENDING", "o-1")

    asyncio.run(put())
    # once a record exists, clients cache it: its layout changes only through a reshard
    error = failing(capsys, "routing", "set", "--store", uri, "--index", "orders",
                    "--override", "PENDING=16")
    assert "already has a routing record" in error
    assert "shardex reshard start" in error
    assert "--set PENDING=16:hash" in error
    error = failing(capsys, "routing", "set", "--store", uri, "--index", "orders",
                    "--remove", "SHIPPED", "--override", "CANCELLED=2:round_robin")
    assert "--set CANCELLED=2:round_robin --set SHIPPED=1:hash" in error
    error = failing(capsys, "routing", "set", "--store", uri, "--index", "orders",
                    "--default", "2")
    assert "--default 2:hash --value VALUE" in error
    assert "nothing to change" in failing(capsys, "routing", "set", "--store", uri, "--index",
                                          "orders", "--override", "PENDING=8")
    doc = json.loads(shardex("routing", "show", "--store", uri, "--index", "orders", "--json"))
    assert doc["routing"]["version"] == 2  # nothing changed


def test_routing_set_from_a_file_and_its_errors(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    uri = local.table_store().uri
    layout = tmp_path / "routing.json"
    layout.write_text(json.dumps({"default": {"shards": 1},
                                  "overrides": {"PENDING": {"shards": 4}}}))
    out = shardex("routing", "set", "--store", uri, "--index", "orders", "--file", str(layout))
    assert "PENDING: 1 -> 4 shard(s)" in out
    layout.write_text(json.dumps({"default": {"shards": 0}}))
    assert "shards must be between 1 and 4096" in failing(
        capsys, "routing", "set", "--store", uri, "--index", "orders", "--file", str(layout))
    layout.write_text(json.dumps({"default": {"shards": 1},
                                  "overrides": {"PENDING": {"shards": 8}}}))
    assert f"shardex reshard start --store {uri!r} --index orders --file {layout}" in failing(
        capsys, "routing", "set", "--store", uri, "--index", "orders", "--file", str(layout))
    assert "expected VALUE=N[:strategy]" in failing(
        capsys, "routing", "set", "--store", uri, "--index", "orders", "--override", "PENDING")
    assert "nothing to change" in failing(capsys, "routing", "set", "--store", uri,
                                          "--index", "orders")
    assert "cannot also hold 'returns'" in failing(capsys, "routing", "show", "--store", uri,
                                                   "--index", "returns")


def test_create_table_uses_the_endpoint_the_environment_names(
        endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """AWS_ENDPOINT_URL_DYNAMODB (what scripts/dynamodb-local exports) with no option."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
    monkeypatch.setenv("AWS_DEFAULT_REGION", local.REGION)
    name = local.unique_name()
    out = shardex("dynamodb", "create-table", name)
    assert f"at {endpoint} (from AWS_ENDPOINT_URL_DYNAMODB)" in out
    assert f"store URI: dynamodb://{name}" in out
    assert name in local.table_names()
    monkeypatch.delenv("AWS_ENDPOINT_URL_DYNAMODB")
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    shardex("routing", "set", "--store", f"dynamodb://{name}", "--index", "ix",
            "--override", "PENDING=4")
    shown = json.loads(shardex("routing", "show", "--store", f"dynamodb://{name}",
                               "--index", "ix", "--json"))
    assert shown["schema"] == "shardex.routing-record/1"
    assert shown["routing"]["overrides"]["PENDING"]["shards"] == 4


def test_routing_takes_region_and_endpoint_options(endpoint: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL", "AWS_DEFAULT_REGION",
                     "AWS_REGION"):
        monkeypatch.delenv(variable, raising=False)
    name = local.unique_name()
    local.sync_client().create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                   {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                              {"AttributeName": "sk", "AttributeType": "S"}])
    out = shardex("routing", "show", "--store", f"dynamodb://{name}", "--index", "ix",
                  "--region", local.REGION, "--endpoint-url", endpoint)
    assert "has no routing record" in out


def test_dynamodb_local_start_prints_only_the_export_line(endpoint: str) -> None:
    """`eval "$(scripts/dynamodb-local start)"` must see nothing but the export line."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    pidfile = root / ".cache" / "dynamodb-local.pid"
    if pidfile.exists():
        pytest.skip("a DynamoDB Local started by scripts/dynamodb-local start is running")
    started = subprocess.run(["bash", str(root / "scripts" / "dynamodb-local"), "start"],
                             capture_output=True, text=True, timeout=120, check=False)
    try:
        assert started.returncode == 0, started.stderr
        lines = started.stdout.splitlines()
        assert len(lines) == 1
        assert lines[0].startswith("export SHARDEX_DYNAMODB_ENDPOINT=")
        assert "AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:" in lines[0]
    finally:
        subprocess.run(["bash", str(root / "scripts" / "dynamodb-local"), "stop"],
                       capture_output=True, timeout=60, check=False)
    assert not pidfile.exists()


def test_routing_show_names_a_value_s_tier(capsys: pytest.CaptureFixture[str]) -> None:
    """The text view said nothing of a tier (the store that holds the value's entries),
    where routing set and show --json name it (a probe)."""
    uri, tier = local.table_store().uri, local.table_store().uri
    shardex("routing", "set", "--store", uri, "--index", "events", "--override",
            "HEAVY=4@dedicated", "--tier", f"dedicated={tier}")
    out = shardex("routing", "show", "--store", uri, "--index", "events")
    assert "HEAVY: 4 shard(s), hash, on tier 'dedicated': HEAVY#0, HEAVY#1, HEAVY#2, " \
           "HEAVY#3" in out
