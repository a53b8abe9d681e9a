"""Hedged shard reads: the policy's decisions, and every copy counted where capacity is."""

from __future__ import annotations

import asyncio
import gc
import math
import random
from collections.abc import Awaitable, Iterator
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

    def _send(self, rec: Any, nbytes: int) -> Awaitable[None]:
        rec.request()
        return self.clock.sleep(next(self.script, self.rest))


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
    {"max_hedges": 1.5}, {"window": 19}, {"window": True}, {"spacing": 0},
    {"spacing": math.inf}, {"spacing": False},
])
def test_a_bad_policy_is_refused_naming_the_field(bad: dict[str, Any]) -> None:
    (field,) = bad
    with pytest.raises(shardex.InvalidInput, match=f"HedgePolicy.{field}"):
        HedgePolicy(**bad)


def test_the_adaptive_delay_follows_recent_latency_per_size_class() -> None:
    hedger = Hedger(HedgePolicy())
    assert hedger.quantile == pytest.approx(0.965)  # 1 - 0.7 * budget
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


def test_a_wide_fan_out_answering_in_order_of_latency_does_not_bias_the_delay() -> None:
    # 1,024 shard reads sent at once answer fastest first: a window of the last 512
    # samples held the slowest half of the last read, whose p96.5 is the whole's p98.25,
    # so copies came late and few (2.4% of reads instead of 4.3% at N=1,024)
    hedger = Hedger(HedgePolicy())
    latencies = [i / 1024 for i in range(1, 1025)]  # p96.5 is 0.965
    for _ in range(3):
        for _ in latencies:
            hedger.earn(100)
        for seconds in latencies:  # in the order they answer
            hedger.observe(100, seconds)
            hedger.done(100)
    assert hedger.delay(100) == pytest.approx(0.965, abs=0.002)


def test_the_budget_pays_for_at_most_its_share_of_reads() -> None:
    hedger = Hedger(HedgePolicy(budget=0.05))
    spent = 0
    for _ in range(1000):
        hedger.earn(20)
        spent += hedger.spend(20)  # a read that would like a copy every time
        hedger.done(20)
    assert spent == 50
    for _ in range(1000):
        hedger.earn(20)  # a quiet spell saves up ten copies at most
        hedger.done(20)
    assert sum(hedger.spend(20) for _ in range(20)) == 10


def test_a_copy_costs_what_it_asks_for_so_copies_add_at_most_the_budget_to_units() -> None:
    hedger = Hedger(HedgePolicy(budget=0.05))
    asked = copied = 0
    for i in range(4000):  # a listing's mix: many small reads, a few store pages
        size = 1000 if i % 8 == 0 else 16
        hedger.earn(size)
        asked += size
        if size == 1000 and hedger.spend(size):  # only the big ones ever slow
            copied += size
        hedger.done(size)
    assert 0.04 * asked < copied <= 0.05 * asked + 10 * 1000
    # counted in copies, 5% of 4,000 reads would have paid 200 copies of 1,000 entries:
    # 36% more entries read


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


def test_further_copies_follow_at_the_spacing_while_every_copy_is_out() -> None:
    async def body() -> None:
        # three slow copies: at 0, at the 10 ms delay, then 5 ms apart; the fourth is quick
        store = ScriptedStore(iter([]), seed=1)
        hedge = HedgePolicy(delay=0.01, budget=3.0, max_hedges=3, spacing=0.5)
        index = await _filled(store, Routing(), 5, hedge=hedge)
        store.reset_stats()
        store.script = iter([1.0, 1.0, 1.0])
        loop = asyncio.get_running_loop()
        began = loop.time()
        await index.query("PENDING")
        assert loop.time() - began == pytest.approx(0.021, abs=0.002)  # sent at 20 ms
        await asyncio.sleep(2)
        key = store.stats("orders").by_key["PENDING"]
        assert (key.read_requests, key.hedges_sent, key.hedges_won, key.hedges_cancelled) == \
            (4, 3, 1, 3)
        # one quick answer ends it: no copy is sent after the first answer
        store.reset_stats()
        store.script = iter([0.012, 1.0])
        await index.query("PENDING")
        await asyncio.sleep(2)
        key = store.stats("orders").by_key["PENDING"]
        assert (key.read_requests, key.hedges_sent) == (2, 1)
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


class _Report:
    def __init__(self) -> None:
        self.events: list[str] = []

    def sent(self) -> None:
        self.events.append("sent")

    def won(self) -> None:
        self.events.append("won")

    def abandoned(self, copy: asyncio.Future[Any]) -> None:
        self.events.append("abandoned")


def _sender(script: list[tuple[float, BaseException | None]],
            tasks: list[asyncio.Task[Any]]) -> Any:
    """A ``send`` whose n-th copy answers after script[n][0] s, or raises script[n][1]."""
    from shardex.hedging import Copy

    async def send(copy: Copy | None) -> int:
        n = len(tasks)
        tasks.append(asyncio.current_task())  # type: ignore[arg-type]
        if copy is not None:
            copy.left()
        seconds, error = script[n]
        await asyncio.sleep(seconds)
        if error is not None:
            raise error
        return n

    return send


def test_a_cancelled_read_cancels_every_copy_in_flight() -> None:
    from shardex.clock import LoopClock
    from shardex.hedging import call_hedged

    async def body() -> None:
        tasks: list[asyncio.Task[Any]] = []
        hedger = Hedger(HedgePolicy(delay=0.01, budget=5.0))
        report = _Report()
        read = asyncio.ensure_future(call_hedged(_sender([(1.0, None)] * 4, tasks), hedger, 10,
                                                 clock=LoopClock(), report=report))
        await asyncio.sleep(0.5)  # the first copy and three hedges are out
        read.cancel()
        with pytest.raises(asyncio.CancelledError):
            await read
        await asyncio.sleep(0)
        assert len(tasks) == 4
        assert all(t.cancelled() for t in tasks)
        assert report.events == ["sent"] * 3

    run_virtual(body())


def test_when_every_copy_fails_the_first_failure_is_raised() -> None:
    from shardex.clock import LoopClock
    from shardex.hedging import call_hedged

    async def body() -> None:
        tasks: list[asyncio.Task[Any]] = []
        hedger = Hedger(HedgePolicy(delay=0.01, budget=1.0, max_hedges=1))
        script: list[tuple[float, BaseException | None]] = [
            (0.015, shardex.Throttled("first")), (0.02, shardex.Throttled("second"))]
        with pytest.raises(shardex.Throttled, match="first"):  # the first to fail, at 15 ms
            await call_hedged(_sender(script, tasks), hedger, 10, clock=LoopClock(),
                              report=_Report())
        # a copy that fails while another is out does not end the read
        tasks.clear()
        hedger = Hedger(HedgePolicy(delay=0.01, budget=1.0, max_hedges=1))
        script = [(0.5, None), (0.001, shardex.Throttled("copy"))]
        assert await call_hedged(_sender(script, tasks), hedger, 10, clock=LoopClock(),
                                 report=_Report()) == 0

    run_virtual(body())


def test_hedged_reads_and_a_closed_index_leave_nothing_to_the_garbage_collector() -> None:
    # a read's copies call back into it and a timer task's traceback holds it, and the
    # index's tier reads call back into the index: each cycle, left in place, kept a run's
    # whole store (a million objects in the demo) until a collection walked it
    async def body() -> None:
        store = ScriptedStore(iter([]), seed=1)
        index = await _filled(store, Routing(), 5, hedge=HedgePolicy(delay=0.01, budget=3.0))
        store.script = iter([0.015, 0.05, 0.001, 1.0])  # a hedge that loses, then one that wins
        await index.query("PENDING")
        await index.query("PENDING")
        await asyncio.sleep(2)
        await index.close()

    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        run_virtual(body())
        gc.collect()
        left = {type(o).__qualname__ for o in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()
    assert not left & {"_Hedged", "Copy", "ShardedIndex", "MemoryStore", "FanOut", "Task"}, left
