"""The read path under faults and load: complete or raise, lazy, bounded, hedged."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

import shardex
from shardex import HedgePolicy, RetryPolicy, Routing, ShardPolicy
from shardex.errors import Throttled
from shardex.index import store_routing
from shardex.model.entries import Position, QueryPage
from shardex.routing import begin_transition
from shardex.sim.clock import run_virtual
from shardex.stores.memory import MemoryStore


class WatchedStore(MemoryStore):
    """A memory store that counts queries and entries read, and can fail chosen shards."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.failing: set[str] = set()
        self.queries: dict[str, int] = {}
        self.entries_read = 0
        self.in_flight = 0
        self.max_in_flight = 0

    async def query(self, namespace: str, shard_key: str, *, after: Position | None,
                    descending: bool, limit: int, until: Position | None = None,
                    malformed: Any = "raise") -> QueryPage:
        self.queries[shard_key] = self.queries.get(shard_key, 0) + 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if shard_key in self.failing:
                await asyncio.sleep(0.002)
                raise Throttled(f"{shard_key} throttled", key=shard_key, reason="test")
            page = await super().query(namespace, shard_key, after=after,
                                       descending=descending, limit=limit, until=until,
                                       malformed=malformed)
        finally:
            self.in_flight -= 1
        self.entries_read += len(page.entries)
        return page

    async def count(self, namespace: str, shard_key: str) -> int:
        if shard_key in self.failing:
            raise Throttled(f"{shard_key} throttled", key=shard_key, reason="test")
        return await super().count(namespace, shard_key)


SIXTEEN = Routing(overrides={"PENDING": ShardPolicy(shards=16)})
FAST_GIVE_UP = RetryPolicy(attempts=4, base=0.01, cap=0.05, deadline=1.0)


async def filled(store: WatchedStore, n: int, **options: Any) -> shardex.ShardedIndex:
    index = shardex.ShardedIndex(store, "orders", SIXTEEN, seed=1, **options)
    await index.open()
    for start in range(0, n, 200):
        await asyncio.gather(*(index.put("PENDING", f"o-{i:05d}", sort=f"{i:05d}")
                               for i in range(start, min(n, start + 200))))
    store.queries.clear()
    store.entries_read = 0
    return index


def test_a_page_reads_each_shard_only_as_far_as_the_merge_needs() -> None:
    async def body() -> None:
        store = WatchedStore(seed=3)
        index = await filled(store, 3200)
        page = await index.query("PENDING", limit=100)
        assert [e.sort for e in page.items] == [f"{i:05d}" for i in range(100)]
        # 3,200 entries over 16 shards; a page of 100 must not read them all.
        assert store.entries_read < 400
        assert max(store.queries.values()) <= 3
        await index.close()

    run_virtual(body())


def test_a_failed_shard_fails_the_read_and_names_the_shard() -> None:
    async def body() -> None:
        store = WatchedStore(seed=3)
        index = await filled(store, 300, retry=FAST_GIVE_UP)
        store.failing = {"PENDING#3", "PENDING#11"}
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(shardex.IncompleteRead) as caught:
            await index.query("PENDING", limit=50)
        assert set(caught.value.failed) == {"PENDING#3", "PENDING#11"}
        assert "PENDING#3" in str(caught.value)
        assert "PENDING#11" in str(caught.value)
        assert isinstance(caught.value.__cause__, Throttled)
        assert store.queries["PENDING#3"] == FAST_GIVE_UP.attempts
        assert loop.time() - started <= FAST_GIVE_UP.deadline + 0.1
        with pytest.raises(shardex.IncompleteRead):
            await index.count("PENDING")
        seen: list[str] = []

        async def drain() -> None:
            async for entry in index.scan("PENDING"):
                seen.append(entry.item_id)

        with pytest.raises(shardex.IncompleteRead, match="PENDING#11"):
            await drain()
        # The healthy shards' entries were all delivered before the error.
        healthy = {f"o-{i:05d}" for i in range(300)
                   if index.routing.shard_key("PENDING", f"o-{i:05d}") not in store.failing}
        assert set(seen) == healthy
        await index.close()

    run_virtual(body())


def test_throttled_shards_are_retried_until_they_answer() -> None:
    async def body() -> None:
        store = WatchedStore(seed=3, throttle_rate=0.4)
        index = shardex.ShardedIndex(store, "orders", SIXTEEN, seed=2,
                                     retry=RetryPolicy(attempts=30, deadline=None))
        async with index:
            for i in range(200):
                await index.put("PENDING", f"o-{i:04d}", sort=f"{i:04d}")
            items: list[str] = []
            cursor = None
            while True:
                page = await index.query("PENDING", limit=17, cursor=cursor)
                items += [e.item_id for e in page.items]
                if (cursor := page.cursor) is None:
                    break
            assert items == [f"o-{i:04d}" for i in range(200)]
        assert store.stats().totals.read_throttles > 20

    run_virtual(body())


def test_writes_that_stay_throttled_raise_throttled_and_change_nothing() -> None:
    async def body() -> None:
        store = WatchedStore(seed=3, write_ceiling=1.0)
        index = shardex.ShardedIndex(store, "orders", seed=2, retry=FAST_GIVE_UP)
        async with index:
            with pytest.raises(shardex.Throttled,
                               match=r"throttled: .*TableWriteKeyRangeThroughputExceeded"):
                await index.put("PENDING", "o-1", sort="a")
            assert await index.get("o-1") is None

    run_virtual(body())


def test_fan_out_respects_the_concurrency_bound() -> None:
    async def body() -> None:
        store = WatchedStore(seed=3)
        index = await filled(store, 320, max_concurrency=3)
        store.max_in_flight = 0
        await index.query("PENDING", limit=200)
        assert store.max_in_flight == 3
        assert len(store.queries) == 16
        await index.close()

    run_virtual(body())


def test_hedging_cuts_the_tail_of_fan_out_reads() -> None:
    def p99(hedge: HedgePolicy | None) -> float:
        async def body() -> float:
            store = WatchedStore(seed=5, latency_median_ms=4, latency_p99_ms=400)
            index = await filled(store, 160, hedge=hedge)
            loop = asyncio.get_running_loop()
            took = []
            for _ in range(200):
                start = loop.time()
                await index.query("PENDING", limit=20)
                took.append(loop.time() - start)
            await index.close()
            return sorted(took)[197]

        return run_virtual(body())

    plain = p99(None)
    assert p99(HedgePolicy(delay=0.02, budget=1.0)) < plain / 2  # a fixed delay, no budget
    assert p99(HedgePolicy()) < plain / 2  # the default: adaptive, 5% extra at most


def test_retry_policy_decisions() -> None:
    rng = random.Random(1)
    policy = RetryPolicy(attempts=4, base=0.1, cap=0.3, deadline=1.0)
    throttled = Throttled("x")
    waits = [policy.decide(k, 0.0, throttled, rng) for k in range(3)]
    assert all(w is not None and 0 <= w <= min(0.3, 0.1 * 2**k) for k, w in enumerate(waits))
    assert policy.decide(3, 0.0, throttled, rng) is None  # attempts used up
    assert policy.decide(0, 0.0, ValueError("bug"), rng) is None  # not retryable
    assert policy.decide(0, 0.99, throttled, random.Random(0)) is None or \
        0.99 + policy.backoff(0, random.Random(0)) < 1.0
    assert policy.decide(0, 1.0, throttled, rng) is None  # past the deadline
    spread = [policy.backoff(5, rng) for _ in range(2000)]
    assert 0.12 < sum(spread) / len(spread) < 0.18  # full jitter: mean cap/2
    for bad in ({"attempts": 0}, {"base": 0}, {"base": 2, "cap": 1}, {"deadline": 0}):
        with pytest.raises(shardex.InvalidInput):
            RetryPolicy(**bad)  # type: ignore[arg-type]
    with pytest.raises(shardex.InvalidInput):
        HedgePolicy(delay=0)


def test_reads_see_a_reshard_started_by_another_client() -> None:
    async def body() -> None:
        store = WatchedStore(seed=3)
        writer = shardex.ShardedIndex(store, "orders", Routing(), seed=1, routing_ttl=1.0)
        reader = shardex.ShardedIndex(store, "orders", seed=2, routing_ttl=1.0)
        async with writer, reader:
            await writer.put("PENDING", "o-1", sort="a")
            assert reader.routing.policy("PENDING").shards == 1
            moving = begin_transition(writer.routing, {"PENDING": ShardPolicy(shards=4)})
            await store_routing(writer, moving)
            await writer.put("PENDING", "o-2", sort="b")  # lands on a new shard key
            await asyncio.sleep(1.5)  # virtual: the reader's routing cache expires
            page = await reader.query("PENDING")
            assert [e.item_id for e in page.items] == ["o-1", "o-2"]
            assert reader.routing.in_transition
            assert await reader.count("PENDING") == 2

    run_virtual(body())


def test_update_routing_is_compare_and_set() -> None:
    async def body() -> None:
        store = WatchedStore(seed=3)
        a = shardex.ShardedIndex(store, "orders", Routing(), seed=1)
        b = shardex.ShardedIndex(store, "orders", seed=2)
        async with a, b:
            await store_routing(a, begin_transition(a.routing, {"PENDING": ShardPolicy(shards=2)}))
            with pytest.raises(shardex.ConditionFailed, match="another writer"):
                await store_routing(b, begin_transition(b.routing,
                                                        {"PENDING": ShardPolicy(shards=8)}))
            assert b.routing.version == 2  # b reloaded the winner's routing
            with pytest.raises(shardex.InvalidRouting, match="version must be 3"):
                await store_routing(b, Routing(version=9))

    run_virtual(body())


def test_a_broken_routing_record_is_a_clear_error() -> None:
    async def body() -> None:
        store = WatchedStore(seed=3)
        await store.put_record("orders", "routing", {"format": "shardex.routing/1",
                                                     "version": 1, "default": {"shards": 0}},
                               expected=None)
        with pytest.raises(shardex.InvalidRouting, match=r"routing record of index 'orders'.*"
                                                         r"shards must be between"):
            async with shardex.ShardedIndex(store, "orders"):
                pass

    run_virtual(body())


def test_a_callers_change_to_attrs_it_gave_or_got_stays_its_own() -> None:
    # memory:// kept the very objects: a change to the dict a put was given, or to the
    # attrs of an entry read, showed in every later read (as on no real store)
    async def main() -> None:
        async with shardex.ShardedIndex(MemoryStore(seed=1), "ix") as index:
            given: dict[str, Any] = {"n": {"l": [1]}, "s": {"a"}, "b": bytearray(b"x")}
            await index.put("P", "o-1", attrs=given)
            given["n"]["l"].append(2)
            given["s"].add("b")
            given["b"][0] = 0
            given["new"] = 1
            got = await index.get("o-1")
            assert got is not None
            got.attrs["x"] = 5
            got.attrs["n"]["l"].append(3)
            (listed,) = (await index.query("P")).items
            assert listed.attrs == {"n": {"l": [1]}, "s": {"a"}, "b": bytearray(b"x")}
            assert (await index.get("o-1")).attrs == listed.attrs  # type: ignore[union-attr]

    run_virtual(main())
