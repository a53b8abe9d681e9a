"""Wide fan-outs: as many requests at once as the store's client carries, copies paid in full."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import shardex
from shardex import HedgePolicy, Routing, ShardPolicy
from shardex.capacity import entry_bytes
from shardex.hedging import Hedger
from shardex.model.entries import StoredEntry
from shardex.stores.metered import Usage
from tests.conftest import _REQUIRE, BACKENDS
from tests.test_index_reads import WatchedStore


class PooledStore(WatchedStore):
    """A memory store whose client, it says, carries ``pool`` requests at once."""

    def __init__(self, pool: int | None, **options: Any) -> None:
        super().__init__(**options)
        self.pool = pool

    @property
    def connections(self) -> int | None:
        return self.pool


async def _wide(store: WatchedStore, shards: int, **options: Any) -> shardex.ShardedIndex:
    routing = Routing(overrides={"PENDING": ShardPolicy(shards=shards)})
    index = shardex.ShardedIndex(store, "orders", routing, seed=1, **options)
    await index.open()
    for i in range(4 * shards):
        entry = StoredEntry(routing.shard_key("PENDING", f"o-{i:05d}"), f"{i:05d}",
                            f"o-{i:05d}", {}, version=1)
        store._state("orders", entry.shard_key, 0.0).add(entry, entry_bytes(entry))
    return index


@pytest.mark.shardex_virtual
@pytest.mark.parametrize(("pool", "asked", "bound"), [
    (None, None, 512), (40, None, 40), (40, 8, 8), (None, 8, 8)])
async def test_a_fan_out_sends_what_the_store_carries_at_once(pool: int | None,
                                                              asked: int | None,
                                                              bound: int) -> None:
    store = PooledStore(pool, seed=3, profile="unlimited")
    index = await _wide(store, 512, max_concurrency=asked, hedge=None)
    page = await index.query("PENDING", limit=100)
    assert [e.item_id for e in page.items] == [f"o-{i:05d}" for i in range(100)]
    assert len(store.queries) == 512
    assert store.max_in_flight == bound  # one wave on memory://, else the pool's
    await index.close()


@pytest.mark.shardex_virtual
async def test_a_wide_fan_out_is_not_read_in_waves() -> None:
    loop = asyncio.get_running_loop()
    took = {}
    for shards in (16, 1024):
        store = PooledStore(None, seed=3, profile="unlimited", latency_median_ms=4.0,
                            latency_p99_ms=4.0)
        index = await _wide(store, shards, hedge=None)
        began = loop.time()
        await index.query("PENDING", limit=100)
        took[shards] = loop.time() - began
        await index.close()
    assert took[1024] < 1.1 * took[16]  # one round trip either way, not 16


def test_copies_are_paid_by_the_reads_in_flight_not_capped_at_ten() -> None:
    hedger = Hedger(HedgePolicy(budget=0.05))
    for _ in range(1024):  # a fan-out of 1,024 sends every read at once
        hedger.earn(10)
    paid = sum(hedger.spend(10) for _ in range(100))
    assert 45 <= paid <= 62  # 5% of 1,024 (and the 10 a quiet spell may save), not 10
    for _ in range(1024):
        hedger.done(10)
    for _ in range(400):  # answered: the cap falls back to what a quiet spell saves
        hedger.earn(10)
        hedger.done(10)
    assert sum(hedger.spend(10) for _ in range(100)) == 10


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=getattr(pytest.mark, str(BACKENDS[name].server)))
    for name in ("dynamodb-table", "azure-tables", "cosmos")])
def test_the_pool_a_uri_sets_bounds_a_fan_out_on_the_real_server(name: str) -> None:
    """``max_connections`` sizes the pool of the client a store builds: a CLI user whose
    values fan out wider than the default pool (DynamoDB's 64) reads them in one wave
    by raising it in the URI (``dynamodb://TABLE?max_connections=1024``); below the
    fan-out, the pool is what it sends at once."""
    backend = BACKENDS[name]
    assert backend.server is not None
    _REQUIRE[backend.server]()
    routing = Routing(overrides={"PENDING": ShardPolicy(shards=24)})

    async def widest(store: shardex.Store) -> int:
        """The most of the first page's shard reads ``store`` had in flight at once."""
        reads: list[tuple[float, float]] = []
        async with shardex.ShardedIndex(store, "orders", routing, hedge=None) as index:
            await asyncio.gather(*(index.put("PENDING", f"o-{i:03d}", sort=f"{i:03d}")
                                   for i in range(72)))
            store.meter.subscribe(lambda u: reads.append((u.start, u.end))
                                  if isinstance(u, Usage) and not u.write
                                  and u.key.startswith("PENDING#") else None)
            page = await index.query("PENDING", limit=50)
        assert [e.item_id for e in page.items] == [f"o-{i:03d}" for i in range(50)]
        assert len(reads) == 24
        return max(sum(start <= at < end for start, end in reads) for at, _ in reads)

    store = backend.store(max_connections=8)
    assert store.connections == 8
    assert asyncio.run(widest(store)) == 8
    assert asyncio.run(widest(backend.store(max_connections=24))) == 24
    assert backend.store().connections == (64 if name.startswith("dynamodb") else 100)
    if name.startswith("dynamodb"):  # the URI it prints keeps it
        assert "max_connections=8" in store.uri
        assert "max_connections" not in backend.store().uri


@pytest.mark.parametrize("uri", ["dynamodb://orders?region=us-east-1&max_connections=0",
                                 "azure-tables://orders?max_connections=4097",
                                 "cosmos://orders/entries?max_connections=-1"])
def test_a_pool_out_of_range_is_refused(uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING",
                       "DefaultEndpointsProtocol=http;AccountName=a;AccountKey=a2V5;"
                       "TableEndpoint=http://127.0.0.1:1/a;")
    monkeypatch.setenv("COSMOS_ENDPOINT", "http://127.0.0.1:1")
    monkeypatch.setenv("COSMOS_KEY", "a2V5")
    with pytest.raises(shardex.InvalidInput, match="max_connections must be a whole number "
                                                 r"from 1 to 4096, got -?[0-9]+$"):
        shardex.open_store(uri)
    with pytest.raises(shardex.InvalidURI, match="max_connections='many' is not a valid int"):
        shardex.open_store(uri.split("max_connections=")[0] + "max_connections=many")


@pytest.mark.shardex_virtual
async def test_the_pooled_latency_model_prices_what_a_pooled_fan_out_takes() -> None:
    """``LatencyModel.pooled_quantile``, the planner's figure for a fan-out wider than the
    client's pool, against first pages read through a pool of 64 at N = 256 on the
    same latency model (memory://, virtual time, unhedged)."""
    loop = asyncio.get_running_loop()
    store = PooledStore(64, seed=5, profile="unlimited", latency_median_ms=4.0,
                        latency_p99_ms=25.0)
    index = await _wide(store, 256, hedge=None)
    took = []
    for _ in range(41):
        began = loop.time()
        await index.query("PENDING", limit=100)
        took.append(loop.time() - began)
    await index.close()
    model = shardex.sim.latency.LatencyModel(4.0, 25.0)
    modelled = model.pooled_quantile(256, 64, 0.5)
    assert sorted(took)[20] == pytest.approx(modelled, rel=0.1)
    # far above every key at once, far below waves of 64 waited for in turn
    assert 1.2 * model.fanout_quantile(256, 0.5) < modelled < 2 * 4 * model.fanout_quantile(
        64, 0.5)
    assert model.pooled_quantile(64, 64, 0.5) == model.fanout_quantile(64, 0.5)
    assert model.pooled_quantile(1024, 64, 0.99) == model.pooled_quantile(1024, 64, 0.99)
    assert model.pooled_quantile(512, 64, 0.5) > modelled
    with pytest.raises(shardex.InvalidInput, match="pool must be an integer >= 1, got 0"):
        model.pooled_quantile(8, 0, 0.5)
