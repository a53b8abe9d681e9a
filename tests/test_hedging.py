"""Hedged shard reads: the policy's decisions, and every copy counted where capacity is."""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Iterator
from typing import Any

import pytest

import shardex
from shardex import HedgePolicy, Routing, ShardPolicy
from shardex.hedging import Hedger
from shardex.sim.clock import run_virtual
from shardex.stores.memory import MemoryStore
from shardex.stores.metered import Hedge, Usage
from shardex.stores.stats import KeyStats

FOUR = Routing(overrides={"PENDING": ShardPolicy(shards=4)})


class ScriptedStore(MemoryStore):
    """A memory store whose request latencies come from a script, then from ``rest``."""

    def __init__(self, script: Iterator[float], rest: float = 0.001, **options: Any) -> None:
        super().__init__(**options)
        self.script = script
        self.rest = rest

    async def _arrive(self, rec: Any, nbytes: int) -> float:
        rec.request()
        await self.clock.sleep(next(self.script, self.rest))
        return self.clock.now()


async def _filled(store: MemoryStore, routing: Routing, n: int,
                  **options: Any) -> shardex.ShardedIndex:
    index = shardex.ShardedIndex(store, "orders", routing, seed=1, **options)
    await index.open()
    for i in range(n):
        await index.put("PENDING", f"o-{i:03d}", sort=f"{i:03d}", attrs={"pad": "x" * 500})
    return index


@pytest.mark.parametrize("bad", [
    {"delay": 0}, {"delay": -1.0}, {"delay": math.nan}, {"delay": math.inf}, {"delay": True},
    {"delay": "0.01"}, {"quantile": 1.0}, {"quantile": 0}, {"quantile": "0.9"},
    {"budget": 0}, {"budget": -0.1}, {"budget": math.nan}, {"max_hedges": 0},
    {"max_hedges": 1.5}, {"window": 19}, {"window": True},
])
def test_a_bad_policy_is_refused_naming_the_field(bad: dict[str, Any]) -> None:
    (field,) = bad
    with pytest.raises(shardex.InvalidInput, match=f"HedgePolicy.{field}"):
        HedgePolicy(**bad)


def test_the_adaptive_delay_follows_recent_latency_per_size_class() -> None:
    hedger = Hedger(HedgePolicy())
    assert hedger.quantile == pytest.approx(0.96)  # 1 - 0.8 * budget
    rng = random.Random(3)
    for _ in range(19):
        hedger.observe(10, rng.uniform(0.001, 0.002))
    assert hedger.delay(10) is None  # too few samples: no hedging yet
    hedger.observe(10, 0.0015)
    assert hedger.delay(10) is not None
    for _ in range(500):
        hedger.observe(10, rng.uniform(0.0, 0.100))
    assert hedger.delay(10) == pytest.approx(0.096, abs=0.008)
    assert hedger.delay(12) == hedger.delay(10)  # 8 to 15 entries: one class
    assert hedger.delay(1000) is None  # a big page is another class, not yet seen
    fixed = Hedger(HedgePolicy(delay=0.2))
    assert fixed.delay(1) == fixed.delay(1000) == 0.2


def test_the_budget_pays_for_at_most_its_share_of_reads() -> None:
    hedger = Hedger(HedgePolicy(budget=0.05))
    spent = 0
    for _ in range(1000):
        hedger.earn()
        spent += hedger.spend()  # a read that would like a copy every time
    assert spent == 50
    for _ in range(1000):
        hedger.earn()  # a quiet spell saves up ten copies at most
    assert sum(hedger.spend() for _ in range(20)) == 10


def test_a_hedged_read_counts_its_copies_and_their_units() -> None:
    async def body() -> None:
        # the first query is slow; its copy, sent 10 ms later, answers first
        store = ScriptedStore(iter([0.0] * 40 + [1.0]), seed=1)
        routing = Routing()
        index = await _filled(store, routing, 20, hedge=HedgePolicy(delay=0.01, budget=1.0),
                              meter=True)
        seen: list[Any] = []
        store.meter.subscribe(seen.append)
        store.reset_stats()
        loop = asyncio.get_running_loop()
        began = loop.time()
        store.script = iter([1.0])
        page = await index.query("PENDING", limit=50)
        assert len(page.items) == 20
        assert loop.time() - began == pytest.approx(0.011, abs=0.002)  # the copy's answer
        await asyncio.sleep(2)  # the slow copy finishes: the store charged it in full
        key = store.stats("orders").by_key["PENDING"]
        units = [e.units for e in seen if type(e) is Usage and e.key == "PENDING"]
        assert len(units) == 2
        assert units[0] == units[1] > 1  # 20 entries of ~0.5 KB: more than one unit each
        assert (key.read_requests, key.hedges_sent, key.hedges_won, key.hedges_cancelled) == \
            (2, 1, 1, 1)
        assert key.read_units == 2 * units[0]
        assert key.cancelled_units == units[0]
        assert [e.outcome for e in seen if type(e) is Hedge] == ["sent", "won", "cancelled"]
        heat = index.meter.snapshot()  # type: ignore[union-attr]
        for meter in (heat.values["PENDING"], heat.shard_keys["PENDING"]):
            assert (meter.hedges_sent, meter.hedges_won, meter.hedges_cancelled) == (1, 1, 1)
            assert meter.cancelled_units == units[0]
        await index.close()

    run_virtual(body())


def test_a_hedge_that_loses_is_counted_too() -> None:
    async def body() -> None:
        # the first copy answers at 15 ms, its hedge (sent at 10 ms) would at 60 ms
        store = ScriptedStore(iter([]), seed=1)
        index = await _filled(store, Routing(), 5, hedge=HedgePolicy(delay=0.01, budget=1.0))
        store.reset_stats()
        store.script = iter([0.015, 0.05])
        await index.query("PENDING")
        await asyncio.sleep(1)
        key = store.stats("orders").by_key["PENDING"]
        assert (key.read_requests, key.hedges_sent, key.hedges_won, key.hedges_cancelled) == \
            (2, 1, 0, 1)
        assert key.cancelled_units == key.read_units / 2
        await index.close()

    run_virtual(body())


def test_the_store_charges_a_query_given_up_in_flight() -> None:
    async def body() -> None:
        store = MemoryStore(seed=1, latency_median_ms=50, latency_p99_ms=60)
        async with shardex.ShardedIndex(store, "orders", hedge=None) as index:
            for i in range(10):
                await index.put("PENDING", f"o-{i}", sort=f"{i}", attrs={"pad": "x" * 900})
            store.reset_stats()
            read = asyncio.ensure_future(index.query("PENDING"))
            await asyncio.sleep(0.01)
            read.cancel()
            with pytest.raises(asyncio.CancelledError):
                await read
            key = store.stats("orders").by_key["PENDING"]
            assert key.read_requests == 1
            assert key.read_units == 3.0  # ten entries of ~1 KB: 3 started 4 KB blocks

    run_virtual(body())


def test_adaptive_hedging_is_on_by_default_and_keeps_to_its_budget() -> None:
    def run(**options: Any) -> tuple[float, KeyStats]:
        async def body() -> tuple[float, KeyStats]:
            store = MemoryStore(seed=5, latency_median_ms=4, latency_p99_ms=40,
                                write_ceiling=1e6)
            index = await _filled(store, Routing(overrides={"PENDING": ShardPolicy(shards=16)}),
                                  400, **options)
            loop = asyncio.get_running_loop()
            took = []
            store.reset_stats()
            for _ in range(400):
                began = loop.time()
                await index.query("PENDING", limit=20)
                took.append(loop.time() - began)
            totals = store.stats("orders").totals
            await index.close()
            return sorted(took)[395], totals

        return run_virtual(body())

    hedged, totals = run()
    plain, plain_totals = run(hedge=None)
    assert plain_totals.hedges_sent == 0
    assert 0 < totals.hedges_sent <= 0.05 * (totals.read_requests - totals.hedges_sent)
    assert totals.hedges_won > 0
    assert hedged < 0.7 * plain


def test_hedge_must_be_a_policy_or_none() -> None:
    with pytest.raises(shardex.InvalidInput, match="hedge must be"):
        shardex.ShardedIndex("memory://", "orders", hedge=0.05)  # type: ignore[arg-type]
