"""A corpus of bad input, driven as a user drives shardex: every case gets a typed error.

Through the API each case raises a ``ShardexError`` subclass (never TypeError,
KeyError, ValueError alone, RecursionError or a driver's exception); through the CLI it
prints one line, ``error: ...``, exits non-zero, and shows no traceback. The memory store
refuses what DynamoDB refuses, with the same error class, and the same cases run on
DynamoDB Local. Corrupted stored data (a routing record, an item's version, an owner
record) is reported naming what is damaged.
"""

from __future__ import annotations

import asyncio
import gc
import json
import threading
from collections.abc import Awaitable, Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import shardex
from shardex import InvalidInput, MalformedItem, Routing, ShardexError, ShardPolicy
from shardex.cli import main
from shardex.sim.clock import run_virtual
from shardex.stores.memory import MemoryStore
from tests import dynamodb_local as local
from tests.conftest import BACKENDS

DEEP = "[" * 100_000 + "]" * 100_000
Case = Callable[[shardex.ShardedIndex], Awaitable[Any]]

# values DynamoDB cannot store, refused alike by every store
UNSTORABLE: dict[str, Any] = {
    "an object": object(),
    "NaN": float("nan"),
    "infinity": float("inf"),
    "a set of numbers and text": {1, "a"},
    "an empty set": set(),
    "a lone surrogate": "\ud800",
    "a number past 38 digits": Decimal("1" * 39),
    "1e200": 1e200,
    "nesting past 32 levels": json.loads("[" * 40 + "]" * 40),
    # an index table's item holds attrs in a map: DynamoDB refuses a list 31 deep in it,
    # which memory:// took
    "a list 31 deep": json.loads("[" * 31 + "]" * 31),
    "a 500 KB value": "x" * 500_000,
}

API_CASES: dict[str, Case] = {
    **{f"put attrs holding {name}": (lambda ix, v=value: ix.put("P", "o-1", attrs={"a": v}))
       for name, value in UNSTORABLE.items()},
    "attrs named with a lone surrogate": lambda ix: ix.put("P", "o-1", attrs={"\ud800": 1}),
    "attrs named by a number": lambda ix: ix.put("P", "o-1", attrs={1: 1}),
    "attrs that are a list": lambda ix: ix.put("P", "o-1", attrs=[1]),  # type: ignore[arg-type]
    "move attrs holding NaN": lambda ix: ix.move("o-1", old="P", new="Q",
                                                 attrs={"a": float("nan")}),
    "a value with the separator": lambda ix: ix.put("P#1", "o-1"),
    "an empty value": lambda ix: ix.put("", "o-1"),
    "a value that is not text": lambda ix: ix.put(7, "o-1"),  # type: ignore[arg-type]
    "an item id with NUL": lambda ix: ix.put("P", "o\x00"),
    "an item id that is a lone surrogate": lambda ix: ix.put("P", "\udfff"),
    "a sort that is bytes": lambda ix: ix.put("P", "o-1", sort=b"x"),  # type: ignore[arg-type]
    "a sort of 600 bytes": lambda ix: ix.put("P", "o-1", sort="s" * 600),
    "a version of 1.5": lambda ix: ix.put("P", "o-1", version=1.5),  # type: ignore[arg-type]
    "a version of True": lambda ix: ix.put("P", "o-1", version=True),
    "a version of 0": lambda ix: ix.delete("P", "o-1", version=0),
    "a version of 10**5000": lambda ix: ix.put("P", "o-1", version=10**5000),
    "a version of 10**38": lambda ix: ix.move("o-1", old="P", new="Q", version=10**38),
    "update_routing(None)": lambda ix: ix.update_routing(None),  # type: ignore[arg-type]
    "a query limit of 0": lambda ix: ix.query("P", limit=0),
    "a query order of 'up'": lambda ix: ix.query("P", order="up"),  # type: ignore[arg-type]
    "a count of None": lambda ix: ix.count(None),  # type: ignore[arg-type]
}

PLAIN = {"format": "shardex.routing/1", "version": 1, "default": {"shards": 1}}
MIGRATION = {"id": "a1", "direction": "rollback", "kind": "copy", "values": [],
             "started_at": 0, "changed_at": 0, "margin": 0}
ADOPTION = {"source": {"kind": "gsi", "name": "old", "attribute": "s"}, "state": "done",
            "migration": MIGRATION}
FLAT_ADOPTION = {"id": "a1", "kind": "gsi", "source": "old", "attribute": "s",
                 "state": "dual-write", "started_at": 0, "changed_at": 0, "margin": 0}
RESHARDING = {**PLAIN, "version": 2, "previous": {"version": 1, "default": {"shards": 1}},
              "reshard": {**MIGRATION, "direction": "forward", "kind": "reshard"},
              "state": "write-new"}

CONSTRUCTION: dict[str, Callable[[], Any]] = {
    "max_concurrency '5'": lambda: shardex.ShardedIndex("memory://", "ix",
                                                         max_concurrency="5"),  # type: ignore[arg-type]
    "max_concurrency 0": lambda: shardex.ShardedIndex("memory://", "ix", max_concurrency=0),
    "max_conflicts 2.5": lambda: shardex.ShardedIndex("memory://", "ix",
                                                       max_conflicts=2.5),  # type: ignore[arg-type]
    "routing_ttl '5'": lambda: shardex.ShardedIndex("memory://", "ix",
                                                     routing_ttl="5"),  # type: ignore[arg-type]
    "routing_lease NaN": lambda: shardex.ShardedIndex("memory://", "ix",
                                                       routing_lease=float("nan")),
    "routing_lease 0": lambda: shardex.ShardedIndex("memory://", "ix", routing_lease=0),
    "routing_lease 10**400": lambda: shardex.ShardedIndex("memory://", "ix",
                                                           routing_lease=10**400),
    "routing_ttl 10**400": lambda: shardex.ShardedIndex("memory://", "ix",
                                                         routing_ttl=10**400),
    "a store that is a number": lambda: shardex.ShardedIndex(5, "ix"),  # type: ignore[arg-type]
    "a clock that is a number": lambda: shardex.ShardedIndex("memory://", "ix",
                                                             clock=5),  # type: ignore[arg-type]
    "Routing.from_dict with a key that is a number": lambda: Routing.from_dict({1: 2, "a": 3}),
    "Routing.from_json with a started_at of 401 digits": lambda: Routing.from_json(
        json.dumps(RESHARDING).replace('"started_at": 0', '"started_at": 1' + "0" * 400)),
    "Routing.from_json with an adoption state that is a list": lambda: Routing.from_json(
        json.dumps({**PLAIN, "adoption": {**FLAT_ADOPTION, "state": []}})),
    "an adoption rolled back in write-new": lambda: Routing.from_dict(
        {**PLAIN, "adoption": {**ADOPTION, "state": "write-new"}}),
    "Routing().policy of a list": lambda: Routing().policy([]),  # type: ignore[arg-type]
    "retry of a dict": lambda: shardex.ShardedIndex("memory://", "ix",
                                                     retry={"attempts": 3}),  # type: ignore[arg-type]
    "seed '1'": lambda: shardex.ShardedIndex("memory://", "ix", seed="1"),  # type: ignore[arg-type]
    "routing of a dict": lambda: shardex.ShardedIndex("memory://", "ix", {}),  # type: ignore[arg-type]
    "index name with '#'": lambda: shardex.ShardedIndex("memory://", "a#b"),
    "memory://[": lambda: shardex.open_store("memory://["),
    "memory://?seed=x": lambda: shardex.open_store("memory://?seed=x"),
    "no scheme": lambda: shardex.open_store("orders"),
    "a URI of bytes": lambda: shardex.open_store(b"memory://"),  # type: ignore[arg-type]
    "Routing.from_json nested 100,000 deep": lambda: Routing.from_json(DEEP),
    "Routing.from_json of a list": lambda: Routing.from_json("[1]"),
    "Routing.from_json with shards '8'": lambda: Routing.from_json(json.dumps({
        "format": "shardex.routing/1", "version": 1,
        "default": {"shards": "8"}})),
    "a policy of 0 shards": lambda: ShardPolicy(shards=0),
    "a sort-less key_attributes on GSI": lambda: None,  # covered on DynamoDB Local below
}


def test_wrong_library_inputs_get_the_error_their_fault_names() -> None:
    """A probe's: run_virtual of a non-coroutine raised asyncio's ValueError; a URI's own
    unknown profile or bad table name raised InvalidInput, not InvalidURI; HedgePolicy
    stated rules it did not hold (quantile (0, 1], window >= 1); stats(5) answered."""
    for main_ in (None, 1, lambda: 1):
        with pytest.raises(InvalidInput, match="run_virtual runs a coroutine"):
            run_virtual(main_)  # type: ignore[arg-type]
    for uri in ("memory://?profile=nosuch", "azure-tables://t"):
        with pytest.raises(shardex.InvalidURI):
            shardex.open_store(uri)
    with pytest.raises(InvalidInput) as caught:
        shardex.open_store("memory://", profile="nosuch")  # the caller's keyword
    assert not isinstance(caught.value, shardex.InvalidURI)
    from shardex.hedging import HedgePolicy

    for settings, rule in (({"quantile": 1.0}, r"quantile must be a number in \(0, 1\)"),
                           ({"quantile": 1.5}, r"quantile must be a number in \(0, 1\)"),
                           ({"window": 5}, "window must be an integer from 20 to 65,536"),
                           ({"window": 0}, "window must be an integer from 20 to 65,536")):
        with pytest.raises(InvalidInput, match=rule):
            HedgePolicy(**settings)
    with pytest.raises(InvalidInput, match="its name as text"):
        MemoryStore(seed=1).stats(5)  # type: ignore[arg-type]


def expect_typed(outcome: Callable[[], Any], case: str) -> None:
    try:
        outcome()
    except ShardexError:
        return
    except Exception as exc:
        raise AssertionError(f"{case}: untyped {type(exc).__name__}: {exc}") from exc


@pytest.mark.parametrize("case", sorted(CONSTRUCTION))
def test_construction_refuses_with_a_typed_error(case: str) -> None:
    made = CONSTRUCTION[case]
    if case.startswith("a sort-less"):
        return
    with pytest.raises(ShardexError):
        made()


@pytest.mark.parametrize("case", sorted(API_CASES))
def test_api_refuses_with_a_typed_error_before_any_write(case: str) -> None:
    async def main_() -> None:
        store = MemoryStore(seed=1)
        async with shardex.ShardedIndex(store, "ix") as index:
            with pytest.raises(ShardexError) as caught:
                await API_CASES[case](index)
            assert isinstance(caught.value, InvalidInput), caught.value
            assert store.stats().totals.write_requests <= 1  # the routing record only

    run_virtual(main_())


def test_memory_refuses_what_dynamodb_refuses_with_the_same_error(
        request: pytest.FixtureRequest) -> None:
    local.require_endpoint()

    async def refusals(store: shardex.Store) -> list[str]:
        names = []
        async with shardex.ShardedIndex(store, "ix") as index:
            for name, value in UNSTORABLE.items():
                try:
                    await index.put("P", f"o-{len(names)}", attrs={"a": value})
                except InvalidInput:
                    names.append(name)
        return names

    on_memory = run_virtual(refusals(MemoryStore(seed=1)))
    on_dynamodb = asyncio.run(refusals(BACKENDS["dynamodb-table"].store()))
    assert on_memory == on_dynamodb == list(UNSTORABLE)


STORED_AS = {"tuple": (1, 2), "set": {"x", "y"}, "numbers": {1, 2.5},
             "bytearray": bytearray(b"zz"), "decimal": Decimal("1.10"), "whole float": 2.0,
             "minus zero": -0.0, "nested": {"k": [(1.25, Decimal("3"))]}, "text": "t",
             "int": 10**30, "none": None, "bool": True, "bytes": b"\x00",
             "a list 30 deep": json.loads("[" * 30 + "]" * 30)}


def test_memory_reads_attributes_back_as_dynamodb_does(
        request: pytest.FixtureRequest) -> None:
    """memory:// gave back a tuple, a set, a bytearray, Decimal('1.10') and -0.0 where
    DynamoDB gives a list, a frozenset, bytes, 1.1 and 0: code tried on the simulated
    store met other types in production."""
    local.require_endpoint()

    async def read_back(store: shardex.Store) -> dict[str, Any]:
        async with shardex.ShardedIndex(store, "ix") as index:
            await index.put("P", "o-1", attrs=STORED_AS)
            entry = await index.get("o-1")
            listed = (await index.query("P")).items[0]
        assert entry is not None
        assert listed.attrs == entry.attrs
        return dict(entry.attrs)

    def typed(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: typed(v) for k, v in value.items()}
        if isinstance(value, list | tuple | frozenset | set):
            inner = sorted(map(repr, map(typed, value))) if isinstance(value, frozenset | set) \
                else [typed(v) for v in value]
            return (type(value).__name__, inner)
        return (type(value).__name__, repr(value))

    on_memory = run_virtual(read_back(MemoryStore(seed=1)))
    on_dynamodb = asyncio.run(read_back(BACKENDS["dynamodb-table"].store()))
    assert typed(on_memory) == typed(on_dynamodb)
    assert on_memory["tuple"] == [1, 2]
    assert on_memory["decimal"] == 1.1


def test_a_lease_shorter_than_a_write_takes_fails_the_write_it_does_not_hang() -> None:
    # each try was held past the lease and planned again under a fresh read, forever
    async def main_() -> None:
        store = MemoryStore(seed=1)
        async with shardex.ShardedIndex(store, "ix", routing_lease=1e-6) as index:
            with pytest.raises(shardex.RoutingStale, match="held past the routing's lease"):
                await asyncio.wait_for(index.put("P", "o-1"), 60)
            assert store.stats().totals.write_requests <= 1  # the routing record only

    run_virtual(main_())


def test_a_second_open_does_nothing_and_nothing_reads_after_close() -> None:
    # a second open started a second routing refresher, which read on after close
    async def main_() -> None:
        store = MemoryStore(seed=1)
        index = shardex.ShardedIndex(store, "ix")
        await index.open()
        async with index:
            pass
        reads = store.stats().totals.read_requests
        await asyncio.sleep(60)
        assert store.stats().totals.read_requests == reads

    run_virtual(main_())


def test_a_closed_sync_index_is_refused_by_name() -> None:
    index = shardex.SyncShardedIndex("memory://", "ix")
    index.open()
    index.close()
    with pytest.raises(InvalidInput, match="closed"):
        index.put("P", "o-1")
    with pytest.raises(InvalidInput, match="closed"):
        index.count("P")


def test_a_sync_index_that_fails_to_open_leaves_no_thread() -> None:
    """A failed __enter__ (here a strict routing that differs from the stored one) left
    the facade's loop thread running for good."""
    store = shardex.open_store("memory://")
    with shardex.SyncShardedIndex(store, "ix", shardex.Routing(
            overrides={"A": shardex.ShardPolicy(4)})) as index:
        index.put("A", "o-1")
    before = threading.active_count()
    with pytest.raises(shardex.RoutingConflict), shardex.SyncShardedIndex(
            store, "ix", shardex.Routing(overrides={"A": shardex.ShardPolicy(8)}),
            strict_routing=True):
        pass
    assert threading.active_count() == before


def test_closing_a_sync_index_closes_its_half_read_listings(
        caplog: pytest.LogCaptureFixture) -> None:
    """Closed with a scan half read, the facade stopped its loop under the scan's fan-out
    ('Task was destroyed but it is pending! ... FanOut._stream.<locals>.pump()')."""
    store = shardex.open_store("memory://")
    with shardex.SyncShardedIndex(store, "ix", shardex.Routing(
            overrides={"A": shardex.ShardPolicy(4)})) as index:
        for i in range(30):
            index.put("A", f"o-{i:02d}", sort=f"{i:02d}")
        listing = index.scan("A")
        assert next(listing).item_id.startswith("o-")
    with pytest.raises(InvalidInput, match="closed"):
        next(listing)
    del listing
    gc.collect()  # a finalizer that raised would fail the test (unraisable exception)
    assert not [r for r in caplog.records if "Task was destroyed" in r.getMessage()]


# -- corrupted stored data -------------------------------------------------------------

CORRUPT_ROUTING: dict[str, Any] = {
    "an empty body": {},
    "a list of shards": {"format": "shardex.routing/1", "version": 1, "default": [8]},
    "shards as text": {"format": "shardex.routing/1", "version": 1,
                       "default": {"shards": "8"}},
    "a version of 1.5": {"format": "shardex.routing/1", "version": 1.5,
                         "default": {"shards": 1}},
    "overrides as a list": {"format": "shardex.routing/1", "version": 1,
                            "default": {"shards": 1}, "overrides": [1]},
    "an override key with '#'": {"format": "shardex.routing/1", "version": 1,
                                 "default": {"shards": 1}, "overrides": {"a#b": {"shards": 2}}},
    "previous as text": {"format": "shardex.routing/1", "version": 2,
                         "default": {"shards": 1}, "previous": "v1"},
    "another format": {"format": "other/9", "version": 1, "default": {"shards": 1}},
    "a lease of -1": {"format": "shardex.routing/1", "version": 1, "default": {"shards": 1},
                      "lease": -1},
    "a default nested 20 deep": {"format": "shardex.routing/1", "version": 1,
                                 "default": json.loads("[" * 20 + "]" * 20)},
}


@pytest.mark.parametrize("case", sorted(CORRUPT_ROUTING))
def test_a_corrupted_routing_record_is_reported_at_open_and_by_the_cli(
        case: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    async def main_() -> None:
        store = MemoryStore(seed=1)
        await store.put_record("ix", "routing", CORRUPT_ROUTING[case], expected=None)
        with pytest.raises(shardex.InvalidRouting, match="routing record of index 'ix'") \
                as raised:
            async with shardex.ShardedIndex(store, "ix"):
                pass
        # what the store holds, not an argument: the command line exits 1, not 2 (usage)
        assert isinstance(raised.value, MalformedItem)
        assert str(raised.value).count("routing record of index") == 1, raised.value

    run_virtual(main_())


@pytest.mark.dynamodb
def test_corrupted_data_on_dynamodb_is_named_in_the_api_and_the_cli(
        capsys: pytest.CaptureFixture[str]) -> None:
    client = local.sync_client()
    table_store = local.table_store()
    table = table_store.table
    gsi_store = local.gsi_store()
    base = gsi_store.table

    async def main_() -> None:
        async with shardex.ShardedIndex(gsi_store, "orders") as index:
            await index.put("PENDING", "o-1", sort="a")
            with pytest.raises(InvalidInput, match="pass sort="):
                index.key_attributes("PENDING", "o-1")
            for value, words in (({"N": "1.5"}, "not a whole number"),
                                 ({"S": "3"}, "not a whole number")):
                client.update_item(TableName=base, Key={"id": {"S": "o-1"}},
                                   UpdateExpression="SET shardex_version = :v",
                                   ExpressionAttributeValues={":v": value})
                for call in (index.query("PENDING"), index.get("o-1"),
                             index.move("o-1", old="PENDING", new="SHIPPED")):
                    with pytest.raises(MalformedItem, match=f"'o-1'.*shardex_version.*{words}"):
                        await call
            # an item filed with a key attribute and no sort attribute can be re-indexed
            client.put_item(TableName=base, Item={"id": {"S": "o-2"},
                                                  "shard_key": {"S": "PENDING"}})
            assert await index.put("PENDING", "o-2", sort="b")
        # the routing record's body is not JSON
        async with shardex.ShardedIndex(table_store, "orders") as index:
            await index.put("P", "o-1")
        for body in (DEEP, "{not json"):
            client.update_item(TableName=table, Key={"pk": {"S": "#record#orders"},
                                                     "sk": {"S": "routing"}},
                               UpdateExpression="SET body = :b",
                               ExpressionAttributeValues={":b": {"S": body}})
            with pytest.raises(MalformedItem,
                               match=r"record 'routing' of index 'orders'.*damaged"):
                async with shardex.ShardedIndex(table_store, "orders"):
                    pass

    asyncio.run(main_())
    code, err = run_cli(capsys, "routing", "show", "--store", table_store.uri, "--index",
                        "orders")
    assert code == 1
    assert "damaged" in one_line(err)
    # a JSON body that does not validate is what the store holds too: exit 1, not 2
    client.update_item(TableName=table, Key={"pk": {"S": "#record#orders"},
                                             "sk": {"S": "routing"}},
                       UpdateExpression="SET body = :b", ExpressionAttributeValues={":b": {
                           "S": json.dumps({"format": "shardex.routing/1", "version": 1,
                                            "default": {"shards": 0}})}})
    code, err = run_cli(capsys, "routing", "show", "--store", table_store.uri, "--index",
                        "orders")
    assert code == 1
    assert "shards must be between" in one_line(err)
    # an owner record whose index is a number is refused at open
    client.put_item(TableName=f"{base}-shardex", Item={
        "pk": {"S": "#owner"}, "sk": {"S": f"{base}/by_shard"}, "index": {"N": "7"}})

    async def reopen() -> None:
        with pytest.raises(MalformedItem, match=r"owner record.*'index'"):
            await local.gsi_store().__class__(base, region=local.REGION,
                                              endpoint_url=local.require_endpoint(),
                                              **local.GSI).open()

    asyncio.run(reopen())


@pytest.mark.dynamodb
def test_open_checks_the_projection_and_the_metadata_tables_key() -> None:
    client = local.sync_client()
    base = local.unique_name()
    client.create_table(
        TableName=base, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"}
                              for a in ("id", "shard_key", "shard_sort")],
        GlobalSecondaryIndexes=[{
            "IndexName": "by_shard", "Projection": {"ProjectionType": "KEYS_ONLY"},
            "KeySchema": [{"AttributeName": "shard_key", "KeyType": "HASH"},
                          {"AttributeName": "shard_sort", "KeyType": "RANGE"}]}])
    client.create_table(
        TableName=f"{base}-shardex", BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "key", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "key", "AttributeType": "S"}])
    from shardex.stores.dynamodb import DynamoDBStore

    async def body() -> None:
        store = DynamoDBStore(base, region=local.REGION, endpoint_url=local.require_endpoint(),
                              **local.GSI)
        with pytest.raises(shardex.StoreError, match="projects KEYS_ONLY"):
            await store.open()

    asyncio.run(body())


# -- the command line ---------------------------------------------------------------------

def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(list(args))
    code = done.value.code
    return int(code) if isinstance(code, int) else 1, capsys.readouterr().err


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


def cli_cases(tmp: Path) -> dict[str, tuple[list[str], str]]:
    deep = tmp / "deep.json"
    deep.write_text(DEEP)
    minus = tmp / "minus.json"
    minus.write_text(json.dumps({"version": -1, "default": {"shards": 2}}))
    texts = tmp / "text.json"
    texts.write_text(json.dumps({"default": {"shards": "2"}}))
    garbage = tmp / "garbage.json"
    garbage.write_bytes(b"\xff\xfe\x00garbage")
    store = ["--store", "memory://", "--index", "ix"]
    return {
        "plan with a peak of 1e200": (["plan", "--peak", "A=1e200", "--headroom", "100"],
                                      "over the limit"),
        "plan with a peak of nan": (["plan", "--peak", "A=nan"], "finite"),
        "routing set --file nested 100,000 deep": (
            ["routing", "set", *store, "--file", str(deep)], "nested too deeply"),
        "routing set --file with version -1": (
            ["routing", "set", *store, "--file", str(minus)], "version is -1"),
        "routing set --file with shards as text": (
            ["routing", "set", *store, "--file", str(texts)], "shards must be an integer"),
        "routing set --file of binary": (["routing", "set", *store, "--file", str(garbage)],
                                         "--file"),
        "routing show of memory://[": (["routing", "show", "--store", "memory://[",
                                        "--index", "ix"], "cannot be parsed"),
        "routing show of an index named a#b": (["routing", "show", "--store", "memory://",
                                                "--index", "a#b"], ""),
        "routing set --override P=0": (["routing", "set", *store, "--override", "P=0"], ""),
        "routing set --override '#=2'": (["routing", "set", *store, "--override", "#=2"], ""),
    }


def test_every_bad_cli_input_is_one_line_with_a_non_zero_exit(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for case, (args, words) in cli_cases(tmp_path).items():
        code, err = run_cli(capsys, *args)
        assert code in (1, 2), case
        assert words in one_line(err), (case, err)
