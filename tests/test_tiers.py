"""Tiers: a value's entries and placements in its tier's store, and the bad-input cases."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from shardex import (
    CapabilityMissing,
    ConditionFailed,
    InvalidInput,
    InvalidRouting,
    NotFound,
    Routing,
    ShardedIndex,
    ShardPolicy,
    SyncShardedIndex,
)
from shardex.errors import InvalidPolicy
from shardex.sim.clock import VirtualTimeLoop, run_virtual
from shardex.stores.memory import MemoryStore
from tests import dynamodb_local as local

DEDICATED = Routing(overrides={"BIG": ShardPolicy(shards=4, tier="dedicated")})


def test_a_policy_names_its_tier_in_the_routing_document() -> None:
    doc = DEDICATED.to_dict()
    assert doc["overrides"]["BIG"] == {"shards": 4, "strategy": "hash", "tier": "dedicated"}
    assert Routing.from_json(DEDICATED.to_json()) == DEDICATED
    # a policy without a tier has the document it always had
    assert ShardPolicy(shards=2).to_dict() == {"shards": 2, "strategy": "hash"}
    old = {"format": "shardex.routing/1", "version": 3, "default": {"shards": 1},
           "overrides": {"A": {"shards": 8, "strategy": "random"}}, "previous": None}
    assert Routing.from_dict(old).policy("A") == ShardPolicy(shards=8, strategy="random")
    assert DEDICATED.tiers() == {"dedicated"}
    assert DEDICATED.tier("BIG") == "dedicated"
    assert DEDICATED.tier("small") is None


@pytest.mark.parametrize("tier", ["", "has space", "#x", "-lead", 7, "x" * 65])
def test_a_bad_tier_name_is_refused_naming_the_field(tier: Any) -> None:
    with pytest.raises(InvalidPolicy, match="tier must be a tier name"):
        ShardPolicy(shards=2, tier=tier)
    doc = {"format": "shardex.routing/1", "version": 1, "default": {"shards": 1},
           "overrides": {"A": {"shards": 2, "tier": tier}}}
    with pytest.raises(InvalidRouting, match=r"routing\.overrides\['A'\].*tier"):
        Routing.from_json(json.dumps(doc))


def test_reads_and_writes_of_a_tiered_value_go_to_its_store() -> None:
    async def body() -> None:
        main, dedicated = MemoryStore(), MemoryStore()
        async with ShardedIndex(main, "ix", DEDICATED, tiers={"dedicated": dedicated}) as index:
            for i in range(40):
                await index.put("BIG", f"b{i}", sort=f"{i:03d}")
                await index.put("small", f"s{i}")
            await index.move("b1", old="BIG", new="BIG", sort="zzz")
            assert await index.delete("BIG", "b2")
            assert await index.count("BIG") == 39
            page = await index.query("BIG", limit=100)
            assert [e.item_id for e in page.items][-1] == "b1"
            assert len([e async for e in index.scan("BIG")]) == 39
            found = await index.get("b3")
            assert found is not None
            assert found.value == "BIG"
            assert (await index.get("s3") or found).value == "small"
            assert index.tiers == {"dedicated": dedicated}
        # entries and placements of BIG in the tier, everything else in the main store
        assert set(dedicated.shard_keys("ix")) == {f"BIG#{k}" for k in range(4)}
        assert set(main.shard_keys("ix")) == {"small"}
        placement = await dedicated.locate("ix", "b3")
        assert placement is not None
        assert placement.entry is not None
        # the main store arbitrates: it holds the tier's write as a confirmation, no entry
        confirmed = await main.locate("ix", "b3")
        assert confirmed is not None
        assert confirmed.entry is None
        assert (confirmed.version, confirmed.token) == (placement.version, placement.token)
        # the routing record stays in the main store
        assert await main.get_record("ix", "routing") is not None
        assert await dedicated.get_record("ix", "routing") is None
    run_virtual(body())


def test_a_tier_is_any_store_uri_and_the_sync_facade_passes_it() -> None:
    with SyncShardedIndex(MemoryStore(), "ix", DEDICATED, tiers={"dedicated": "memory://"},
                          loop_factory=VirtualTimeLoop) as index:
        index.put("BIG", "a")
        assert index.count("BIG") == 1
        tier = index.index.tiers["dedicated"]
        assert tier.stats("ix").by_key["BIG#" + str(_shard("a", 4))].write_requests == 1


def _shard(item_id: str, shards: int) -> int:
    from shardex.hashing import shard_of
    return shard_of(item_id, shards)


def test_an_item_never_has_entries_on_two_tiers() -> None:
    async def body() -> None:
        async with ShardedIndex(MemoryStore(), "ix", DEDICATED,
                                tiers={"dedicated": MemoryStore()}) as index:
            await index.put("small", "x")
            with pytest.raises(CapabilityMissing, match=r"under 'small' on the index's own"):
                await index.put("BIG", "x")
            with pytest.raises(CapabilityMissing, match="different tiers"):
                await index.move("x", old="small", new="BIG")
            assert await _value_of(index, "x") == "small"
            assert await index.count("BIG") == 0
            # once deleted there, it may be put on the other tier
            assert await index.delete("small", "x")
            await index.put("BIG", "x")
            assert await _value_of(index, "x") == "BIG"
            with pytest.raises(CapabilityMissing, match="on tier 'dedicated'"):
                await index.put("small", "x")
    run_virtual(body())


def test_a_move_from_a_value_the_item_is_not_under_fails_on_any_tier() -> None:
    """As on one store, a move whose item is not under ``old`` raises ConditionFailed;
    across tiers it raised CapabilityMissing, as if the move were possible elsewhere."""
    async def body() -> None:
        async with ShardedIndex(MemoryStore(), "ix", DEDICATED,
                                tiers={"dedicated": MemoryStore()}) as index:
            await index.put("small", "x")
            with pytest.raises(ConditionFailed, match=r"the move of 'x' from 'BIG' to 'BIG' "
                                                      r"cannot apply: the item has its entry "
                                                      r"under 'small' on the index's own"):
                await index.move("x", old="BIG", new="BIG")
            await index.put("BIG", "y")
            with pytest.raises(ConditionFailed, match="under 'BIG' on tier 'dedicated'"):
                await index.move("y", old="small", new="small")
            assert await _value_of(index, "x") == "small"
            assert await _value_of(index, "y") == "BIG"
    run_virtual(body())


async def _value_of(index: ShardedIndex, item_id: str) -> str | None:
    entry = await index.get(item_id)
    return None if entry is None else entry.value


@pytest.mark.parametrize(("tiers", "match"), [
    ({"bad name": "memory://"}, r"tiers: tier name must be"),
    ({"dedicated": 42}, r"tiers\['dedicated'\] must be a Store or a store URI"),
    ({"dedicated": "nosuch://x"}, r"tiers\['dedicated'\]"),
    ({"dedicated": "memory://?partitions=-1"}, r"tiers\['dedicated'\]"),
    (["dedicated"], "tiers must be a mapping"),
])
def test_bad_tiers_are_refused_naming_the_field(tiers: Any, match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        ShardedIndex(MemoryStore(), "ix", tiers=tiers)


def test_a_tier_that_is_the_index_store_is_refused() -> None:
    store = MemoryStore()
    with pytest.raises(InvalidInput, match=r"tiers\['dedicated'\] is the index's own store"):
        ShardedIndex(store, "ix", tiers={"dedicated": store})


@pytest.mark.parametrize(("main", "tiers", "match"), [
    ("dynamodb://orders?endpoint_url=http://127.0.0.1:8000",
     {"d": "dynamodb://orders?endpoint_url=HTTP://127.0.0.1:8000/"},
     r"tiers\['d'\] is the index's own store \(dynamodb://orders"),
    ("dynamodb://orders", {"a": "dynamodb://heavy", "b": "dynamodb://heavy?read_timeout=9"},
     r"tiers\['b'\] and tiers\['a'\] are one store \(dynamodb://heavy"),
], ids=["own table by another spelling", "two tiers on one table"])
def test_a_tier_holding_the_data_of_another_is_refused(main: str, tiers: dict[str, str],
                                                      match: str) -> None:
    """Refused only when it was the same object: the index's own table by its URI was
    taken, and a rollback's sweep then removed its entries as copies on the tier."""
    with pytest.raises(InvalidInput, match=match):
        ShardedIndex(main, "ix", tiers=tiers)
    ShardedIndex(main, "ix", tiers={"d": "dynamodb://other"})  # another table: a tier


@pytest.mark.parametrize(("main", "tier"), [
    ("dynamodb://orders?endpoint_url=http://127.0.0.1:8000&region=us-east-1",
     "dynamodb://orders?endpoint_url=http://127.0.0.1:8000"),
    ("dynamodb://orders?region=us-east-1",
     "dynamodb://orders?endpoint_url=https://dynamodb.us-east-1.amazonaws.com"),
    ("dynamodb://orders", "dynamodb://orders?region=us-east-1"),
], ids=["region from the environment", "the region's endpoint by its URL",
        "both regions from the environment"])
def test_the_own_table_by_a_region_resolved_elsewhere_is_refused_as_a_tier(
        main: str, tier: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The region compared as written in each URI ('' where the environment gives it):
    the index's own table was taken as a tier, and a move onto it and its rollback
    deleted every entry of the value. The region the client resolves, and the endpoint
    a region names, are compared."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_REGION", raising=False)
    with pytest.raises(InvalidInput, match=r"tiers\['d'\] is the index's own store"):
        ShardedIndex(main, "ix", tiers={"d": tier})
    ShardedIndex(main, "ix", tiers={"d": "dynamodb://orders?region=eu-west-1"})


def test_a_routing_naming_an_unknown_tier_is_refused() -> None:
    # the routing's ShardPolicy names it: '(policy field 'tier')' read, beside an
    # autopilot's --policy file, as if the file were at fault
    with pytest.raises(InvalidRouting, match=r"tier\(s\) 'dedicated' \(a ShardPolicy's tier, "
                                             r"'@NAME'\).*tiers given: 'other'"):
        ShardedIndex(MemoryStore(), "ix", DEDICATED, tiers={"other": MemoryStore()})

    async def body() -> None:
        store = MemoryStore()
        async with ShardedIndex(store, "ix", DEDICATED, tiers={"dedicated": MemoryStore()}):
            pass
        # the stored routing names a tier this client was not given: refused at open
        index = ShardedIndex(store, "ix")
        # the CLI shows this message too (reshard status on a tiered index): it named the
        # Python argument alone
        with pytest.raises(InvalidRouting, match=r"'dedicated'.*pass tiers=\{name: store or "
                                                 r"URI\}, on the command line --tier "
                                                 r"dedicated=URI \(tiers given: none\)"):
            await index.open()
        with pytest.raises(InvalidInput, match="not open"):
            await index.put("BIG", "a")
    run_virtual(body())


@pytest.mark.dynamodb
def test_a_tier_store_that_does_not_exist_fails_at_open_naming_the_tier() -> None:
    endpoint = local.require_endpoint()

    async def body() -> None:
        main = local.table_store()
        missing = f"dynamodb://no-such-tier-table?region={local.REGION}&endpoint_url={endpoint}"
        index = ShardedIndex(main, "ix", DEDICATED, tiers={"dedicated": missing})
        with pytest.raises(NotFound, match=r"tiers\['dedicated'\].*'no-such-tier-table' does "
                                           r"not exist"):
            await index.open()
        # nothing is left open: the main store opens and closes again cleanly
        async with ShardedIndex(main, "ix") as plain:
            await plain.put("small", "a")

    asyncio.run(body())


@pytest.mark.dynamodb
def test_a_dedicated_dynamodb_table_takes_its_values_entries() -> None:
    local.require_endpoint()

    async def body() -> None:
        main, dedicated = local.table_store(), local.table_store()
        async with ShardedIndex(main, "ix", DEDICATED, tiers={"dedicated": dedicated}) as index:
            for i in range(10):
                await index.put("BIG", f"b{i}")
                await index.put("small", f"s{i}")
            assert await index.count("BIG") == 10
            assert await index.count("small") == 10
            confirmed = await main.locate("ix", "b1")  # the tier's write, confirmed
            assert confirmed is not None
            assert confirmed.entry is None
            assert await dedicated.locate("ix", "s1") is None
            assert sorted(e.item_id for e in (await index.query("BIG")).items) == \
                sorted(f"b{i}" for i in range(10))

    asyncio.run(body())


def test_a_bad_tier_uri_keeps_its_error_type() -> None:
    from shardex import InvalidURI

    with pytest.raises(InvalidURI, match=r"tiers\['dedicated'\]"):
        ShardedIndex(MemoryStore(), "ix", tiers={"dedicated": "no-scheme"})
