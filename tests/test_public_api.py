"""The public surface: names of DESIGN.md, a sorted __all__, the synchronous facade."""

from __future__ import annotations
import __future__

import importlib
import pkgutil
import types

import pytest

import shardex
from shardex.sim.clock import VirtualTimeLoop

DESIGN_NAMES = ["open_store", "Routing", "ShardPolicy", "ShardedIndex", "Entry", "Page",
                "SyncShardedIndex", "RetryPolicy", "HedgePolicy", "ShardexError", "Throttled",
                "ConditionFailed", "Unavailable", "InvalidInput", "InvalidCursor",
                "IncompleteRead"]


def test_all_is_sorted_complete_and_importable() -> None:
    assert list(shardex.__all__) == sorted(shardex.__all__)
    for name in shardex.__all__:
        assert hasattr(shardex, name), name
    public = {n for n, v in vars(shardex).items()
              if not n.startswith("_")
              and not isinstance(v, types.ModuleType | __future__._Feature)}
    assert public <= set(shardex.__all__)
    for name in DESIGN_NAMES:
        assert name in shardex.__all__


def test_every_module_declares_a_sorted_all() -> None:
    for info in pkgutil.walk_packages(shardex.__path__, "shardex."):
        if info.name == "shardex.__main__":
            continue  # importing it runs the command
        module = importlib.import_module(info.name)
        names = getattr(module, "__all__", None)
        if names is None:
            assert info.ispkg, f"{info.name} has no __all__"
            continue
        assert list(names) == sorted(names), f"{info.name}.__all__ is not sorted"
        for name in names:
            assert hasattr(module, name), f"{info.name}.{name}"


def test_entries_expose_the_design_fields() -> None:
    entry = shardex.Entry(value="PENDING", item_id="o-1", sort="s", attrs={}, shard_key="PENDING#3",
                          version=1)
    for field in ("value", "item_id", "sort", "attrs", "shard_key"):
        assert hasattr(entry, field)


def test_the_design_example_runs_as_written() -> None:
    async def main() -> None:
        store = shardex.open_store("memory://")
        routing = shardex.Routing(default=shardex.ShardPolicy(shards=1),
                                  overrides={"PENDING": shardex.ShardPolicy(shards=8)})
        index = shardex.ShardedIndex(store, name="orders_by_status", routing=routing)
        async with index:
            await index.put("PENDING", item_id="o-1", sort="2026-11-30T05:00:00Z",
                            attrs={"total": 12})
            await index.move("o-1", old="PENDING", new="SHIPPED", sort="2026-11-30T06:00:00Z")
            assert [e.item_id async for e in index.scan("SHIPPED")] == ["o-1"]
            assert await index.count("SHIPPED") == 1
            await index.delete("SHIPPED", item_id="o-1")
            page = await index.query("PENDING", limit=100, order="asc", cursor=None)
            assert page.items == []
            assert page.cursor is None
            assert await index.count("SHIPPED") == 0

    shardex.run_virtual(main())


def test_sync_facade_does_what_the_async_index_does() -> None:
    routing = shardex.Routing(overrides={"PENDING": shardex.ShardPolicy(shards=4)})
    with shardex.SyncShardedIndex("memory://?seed=1", "orders", routing,
                                  loop_factory=VirtualTimeLoop) as index:
        for i in range(30):
            assert index.put("PENDING", f"o-{i:02d}", sort=f"{i:02d}", attrs={"i": i})
        assert index.move("o-00", old="PENDING", new="SHIPPED")
        assert index.delete("PENDING", "o-01")
        assert index.count("PENDING") == 28
        first = index.query("PENDING", limit=10)
        second = index.query("PENDING", limit=100, cursor=first.cursor)
        assert [e.item_id for e in first.items + second.items] == \
            [f"o-{i:02d}" for i in range(2, 30)]
        assert sorted(e.item_id for e in index.scan("PENDING")) == \
            [f"o-{i:02d}" for i in range(2, 30)]
        entry = index.get("o-00")
        assert entry is not None
        assert entry.value == "SHIPPED"
        assert index.routing.policy("PENDING").shards == 4
        with pytest.raises(shardex.InvalidKey):
            index.put("A#B", "o-1")
        # Leaving a scan early closes it cleanly.
        for _ in index.scan("PENDING"):
            break


def test_sync_facade_has_the_async_index_s_reads_of_its_state() -> None:
    """docs/dynamodb.md's answer to RoutingStale is refresh_routing, which the facade
    lacked (store, routing_lease, heat, meter, send_rates, tiers and admission too): a
    blocking GSI application could not follow it. The facade has every public member of
    ShardedIndex but the two that only refuse or serve a migration."""
    left_out = {"update_routing", "relocate"}  # refuses always; the migrations' own
    public = {n for n in dir(shardex.ShardedIndex) if not n.startswith("_")} - left_out
    assert public <= set(dir(shardex.SyncShardedIndex)), \
        public - set(dir(shardex.SyncShardedIndex))
    with shardex.SyncShardedIndex("memory://", "orders", meter=True,
                                  loop_factory=VirtualTimeLoop) as index:
        index.put("PENDING", "o-1")
        assert index.refresh_routing() == index.routing
        assert index.routing_lease == 15.0
        assert index.store.uri == "memory://"
        assert [key.value for key in index.heat().keys] == ["PENDING"]
        assert index.meter is index.index.meter
        assert index.send_rates() == {}
        assert index.tiers == {}
        assert index.admission is None


def test_sync_facade_not_open_or_closed_says_so_in_its_own_words() -> None:
    """A facade not yet open told its caller to use 'async with index:'."""
    index = shardex.SyncShardedIndex("memory://", "orders")
    for use in (lambda: index.routing, lambda: index.put("A", "o-1"),
                lambda: list(index.scan("A"))):
        with pytest.raises(shardex.InvalidInput, match=r"^SyncShardedIndex 'orders' is not "
                                                       r"open; use 'with index:' \(or "
                                                       r"index.open\(\)\)$"):
            use()
    with index:
        pass
    for use in (lambda: index.routing, lambda: index.refresh_routing()):
        with pytest.raises(shardex.InvalidInput, match="SyncShardedIndex 'orders' is closed"):
            use()


def test_unknown_store_scheme_and_options_are_clear_errors() -> None:
    with pytest.raises(shardex.InvalidURI, match="unknown store scheme 'mongo'"):
        shardex.open_store("mongo://x")
    with pytest.raises(shardex.InvalidURI, match="scheme://"):
        shardex.open_store("memory")
    with pytest.raises(shardex.InvalidURI, match="does not know the option"):
        shardex.open_store("memory://?ceiling=5")
    with pytest.raises(shardex.InvalidURI, match="repeats the option"):
        shardex.open_store("memory://?seed=1&seed=2")
    # urllib reads these without a word: an option named '' and a fragment it drops
    with pytest.raises(shardex.InvalidURI, match="an option with no name"):
        shardex.open_store("memory://?=1")
    for uri in ("memory://#frag", "memory://?seed=1#x", "memory://#",
                "dynamodb://orders?region=eu-west-1#gsi=x"):
        with pytest.raises(shardex.InvalidURI, match="'#' fragment"):
            shardex.open_store(uri)


def test_an_index_must_be_open_to_be_used() -> None:
    async def main() -> None:
        index = shardex.ShardedIndex("memory://", "orders")
        with pytest.raises(shardex.InvalidInput, match="not open"):
            await index.put("PENDING", "o-1")
        with pytest.raises(shardex.InvalidInput, match="index name"):
            shardex.ShardedIndex("memory://", "a#b")

    shardex.run_virtual(main())
