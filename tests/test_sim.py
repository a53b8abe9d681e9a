"""The simulation: its pure models (units, sizes, token buckets, latency), and the ceilings,
burst and latency they give ``memory://`` under load, on virtual time."""

from __future__ import annotations

import asyncio
import math
import random
import statistics
import threading

import pytest

import shardex.sim
from shardex.capacity import (
    entry_bytes,
    item_bytes,
    number_bytes,
    read_units,
    value_bytes,
    write_units,
)
from shardex.errors import InvalidInput, Throttled
from shardex.model.entries import StoredEntry
from shardex.sim import LatencyModel, TokenBucket, profile
from shardex.sim.clock import run_virtual
from shardex.stores.memory import MemoryStore
from shardex.stores.stats import StoreStats
from tests.test_memory_store import CLOCK, NS, entry, read_all, store

# -- units ------------------------------------------------------------------------------


@pytest.mark.parametrize(("nbytes", "units"), [
    (0, 1), (1, 1), (1024, 1), (1025, 2), (2048, 2), (2049, 3), (400 * 1024, 400),
])
def test_write_units_one_per_started_kb(nbytes: int, units: int) -> None:
    assert write_units(nbytes) == units


@pytest.mark.parametrize(("nbytes", "strong", "eventual"), [
    (0, 1.0, 0.5), (1, 1.0, 0.5), (4096, 1.0, 0.5), (4097, 2.0, 1.0), (8192, 2.0, 1.0),
    (8193, 3.0, 1.5), (1_048_576, 256.0, 128.0),
])
def test_read_units_one_per_started_4kb_halved_when_eventual(nbytes: int, strong: float,
                                                             eventual: float) -> None:
    assert read_units(nbytes, True) == strong
    assert read_units(nbytes, consistent=False) == eventual


# -- sizes ------------------------------------------------------------------------------

def test_number_bytes_is_about_half_the_digits_plus_one() -> None:
    assert number_bytes(7) == 2
    assert number_bytes(-7) == 2
    assert number_bytes(12) == 2
    assert number_bytes(12345) == 4
    assert number_bytes(1.25) == 3


def test_value_bytes_per_type() -> None:
    assert value_bytes("abc") == 3
    assert value_bytes("hé") == 3  # UTF-8, not characters
    assert value_bytes(None) == 1
    assert value_bytes(True) == 1
    assert value_bytes(b"\x00\x01") == 2
    assert value_bytes([1, "ab"]) == 3 + (2 + 1) + (2 + 1)
    assert value_bytes({"a": "bc"}) == 3 + (1 + 2 + 1)
    assert value_bytes({"a": [None]}) == 3 + (1 + (3 + 1 + 1) + 1)


def test_entry_bytes_counts_names_and_values() -> None:
    entry = StoredEntry("PENDING#3", "2026", "o-1", {"total": 12, "note": "hé"}, version=1)
    pk = 2 + 9
    sk = 2 + 4 + 1 + 3
    item = 2 + 3
    version = 1 + 2
    attrs = (5 + 2) + (4 + 3)
    assert entry_bytes(entry) == pk + sk + item + version + attrs
    assert item_bytes({"total": 12, "note": "hé"}) == attrs


def test_entry_bytes_grows_with_attrs_of_any_type() -> None:
    base = StoredEntry("K", "s", "i")
    bigger = StoredEntry("K", "s", "i", {"tags": ["a", "b"], "ok": False, "x": None})
    assert entry_bytes(bigger) == entry_bytes(base) + (4 + 3 + 2 + 2) + (2 + 1) + (1 + 1)


# -- token bucket -----------------------------------------------------------------------

def test_token_bucket_takes_only_what_it_holds() -> None:
    bucket = TokenBucket(rate=10.0, capacity=50.0, tokens=5.0, updated=0.0)
    assert not bucket.try_take(6, 0.0)
    assert bucket.tokens == 5.0  # a refusal takes nothing
    assert bucket.try_take(5, 0.0)
    assert bucket.tokens == pytest.approx(0.0)
    assert not bucket.try_take(1, 0.05)
    assert bucket.try_take(1, 0.1)  # 0.1 s at 10/s refilled exactly one unit


def test_token_bucket_refills_continuously_up_to_capacity() -> None:
    bucket = TokenBucket(rate=10.0, capacity=50.0, tokens=0.0, updated=0.0)
    assert bucket.available(0.25) == pytest.approx(2.5)
    assert bucket.available(3.0) == pytest.approx(30.0)
    assert bucket.available(100.0) == 50.0
    assert bucket.available(50.0) == 50.0  # time running backwards is ignored
    assert bucket.has(50, 100.0)
    assert not bucket.has(50.5, 100.0)
    bucket.take(20, 100.0)
    assert bucket.tokens == pytest.approx(30.0)


@pytest.mark.parametrize("kwargs", [
    {"rate": -1.0, "capacity": 1.0, "tokens": 0.0},
    {"rate": 1.0, "capacity": 1.0, "tokens": 2.0},
    {"rate": math.nan, "capacity": 1.0, "tokens": 0.0},
    {"rate": 1.0, "capacity": math.inf, "tokens": 0.0},
    {"rate": "1", "capacity": 1.0, "tokens": 0.0},
])
def test_token_bucket_refuses_bad_parameters(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidInput):
        TokenBucket(**kwargs)  # type: ignore[arg-type]


# -- profiles ---------------------------------------------------------------------------

def test_profiles_carry_each_stores_documented_figures() -> None:
    on_demand = profile()
    assert (on_demand.write_ceiling, on_demand.read_ceiling) == (1000.0, 3000.0)
    assert (on_demand.warm_write, on_demand.warm_read) == (4000.0, 12_000.0)
    assert (on_demand.quota_write, on_demand.quota_read) == (40_000.0, 40_000.0)
    assert on_demand.initial_partitions == 4  # 4,000 write units: four partitions' worth
    assert on_demand.transaction_cost == 2.0
    gsi = profile("dynamodb-gsi")
    assert (gsi.layout, gsi.transaction_cost, gsi.consistent) == ("gsi", 1.0, False)
    assert profile("dynamodb-provisioned").capacity == "provisioned"
    azure = profile("azure-tables")
    assert (azure.unit, azure.write_ceiling, azure.warm_write) == ("entity", 2000.0, 20_000.0)
    assert azure.write_cost(50_000) == 1.0
    assert profile(warm_write=50_000).initial_partitions == 50
    assert profile(partitions=0).initial_partitions == 0


@pytest.mark.parametrize(("settings", "names"), [
    ({"write_ceiling": 0}, "write_ceiling"),
    ({"read_ceiling": -3}, "read_ceiling"),
    ({"burst_seconds": 0.5}, "burst_seconds"),
    ({"initial_burst_seconds": -1}, "initial_burst_seconds"),
    ({"burst_seconds": 2, "initial_burst_seconds": 3}, "initial_burst_seconds"),
    ({"split_heat": 1.5}, "split_heat"),
    ({"warm_write": math.inf}, "warm_write"),
    ({"capacity": "serverless"}, "capacity"),
    ({"partitions": -1}, "partitions"),
    ({"capacity": "provisioned", "provisioned_write": 50_000}, "quota_write"),
    ({"colour": "red"}, "colour"),
])
def test_profiles_refuse_settings_out_of_range(settings: dict[str, object], names: str) -> None:
    with pytest.raises(InvalidInput, match=names):
        profile(**settings)  # type: ignore[arg-type]


def test_an_unknown_profile_is_refused_by_name() -> None:
    with pytest.raises(InvalidInput, match=r"unknown profile 'dynamo'.*dynamodb-on-demand"):
        profile("dynamo")


# -- latency model --------------------------------------------------------------------

def test_latency_quantiles_hit_the_median_and_p99() -> None:
    model = LatencyModel(median_ms=4.0, p99_ms=25.0, per_kb_ms=0.01)
    assert model.quantile(0.5) == pytest.approx(0.004)
    assert model.quantile(0.99) == pytest.approx(0.025)
    assert model.sigma == pytest.approx(math.log(25 / 4) / 2.3263, rel=1e-4)
    assert model.quantile(0.5, nbytes=10 * 1024) == pytest.approx(0.004 + 0.0001)


def test_latency_samples_follow_the_model() -> None:
    model = LatencyModel(median_ms=4.0, p99_ms=25.0)
    rng = random.Random(42)
    samples = sorted(model.sample(rng) for _ in range(40_000))
    assert statistics.median(samples) == pytest.approx(0.004, rel=0.03)
    assert samples[int(0.99 * len(samples))] == pytest.approx(0.025, rel=0.08)
    assert min(samples) > 0


def test_latency_sample_adds_transfer_time_per_kb() -> None:
    model = LatencyModel(median_ms=2.0, p99_ms=2.0, per_kb_ms=1.0)  # sigma 0: exact
    assert model.sample(random.Random(1)) == pytest.approx(0.002)
    assert model.sample(random.Random(1), nbytes=4096) == pytest.approx(0.006)
    assert model.transfer(2048) == pytest.approx(0.002)


def test_latency_is_reproducible_with_a_seed() -> None:
    model = LatencyModel()
    first = [model.sample(random.Random(9)) for _ in range(3)]
    assert first == [model.sample(random.Random(9)) for _ in range(3)]


def test_fanout_quantile_grows_with_the_fanout() -> None:
    model = LatencyModel(median_ms=4.0, p99_ms=25.0)
    assert model.fanout_quantile(1, 0.5) == pytest.approx(model.quantile(0.5))
    widths = [1, 2, 4, 8, 16, 64, 256, 10**6]
    medians = [model.fanout_quantile(n, 0.5) for n in widths]
    assert medians == sorted(medians)
    assert len(set(medians)) == len(medians)
    assert model.fanout_quantile(8, 0.99) > model.fanout_quantile(8, 0.5)
    assert math.isfinite(model.fanout_quantile(10**18, 0.99))


def test_fanout_quantile_matches_the_max_of_samples() -> None:
    model = LatencyModel(median_ms=4.0, p99_ms=25.0)
    rng = random.Random(5)
    maxima = [max(model.sample(rng) for _ in range(8)) for _ in range(20_000)]
    assert statistics.median(maxima) == pytest.approx(model.fanout_quantile(8, 0.5), rel=0.04)


@pytest.mark.parametrize(("kwargs", "word"), [
    ({"median_ms": 0.0}, "median_ms"),
    ({"median_ms": -1.0}, "median_ms"),
    ({"median_ms": 10.0, "p99_ms": 5.0}, "p99_ms"),
    ({"per_kb_ms": -0.1}, "per_kb_ms"),
    ({"median_ms": math.inf}, "median_ms"),
    ({"p99_ms": "25"}, "p99_ms"),
])
def test_latency_model_refuses_bad_parameters(kwargs: dict[str, float], word: str) -> None:
    with pytest.raises(InvalidInput, match=word):
        LatencyModel(**kwargs)


@pytest.mark.parametrize("q", [0.0, 1.0, -0.5, 2.0])
def test_latency_quantile_refuses_q_outside_the_open_interval(q: float) -> None:
    with pytest.raises(InvalidInput, match="strictly between 0 and 1"):
        LatencyModel().quantile(q)


@pytest.mark.parametrize("n", [0, -1, 2.5, True])
def test_fanout_quantile_refuses_a_bad_width(n: int) -> None:
    with pytest.raises(InvalidInput, match="fan-out width"):
        LatencyModel().fanout_quantile(n, 0.5)


# -- the package ------------------------------------------------------------------------

def test_sim_all_is_sorted_and_complete() -> None:
    assert shardex.sim.__all__ == sorted(shardex.sim.__all__)
    for name in shardex.sim.__all__:
        assert hasattr(shardex.sim, name), name
    from shardex.sim import buckets, latency
    for module in (buckets, latency):
        assert module.__all__ == sorted(module.__all__)
        assert set(module.__all__) <= set(shardex.sim.__all__)


# -- the store under load -------------------------------------------------------------

async def offer(s: MemoryStore, key: str, rate: float, seconds: float,
                tag: str) -> tuple[int, int]:
    """Offer ``rate`` new-item places a second on ``key``; return (accepted, throttled)."""
    accepted = throttled = 0

    async def one(i: int) -> None:
        nonlocal accepted, throttled
        item = f"{tag}-{i}"
        try:
            await s.place(NS, item, entry(key, f"{i:08d}", item), version=1, expected=None)
            accepted += 1
        except Throttled:
            throttled += 1

    tasks = []
    for i in range(round(rate * seconds)):
        tasks.append(asyncio.ensure_future(one(i)))
        await CLOCK.sleep(1 / rate)
    await asyncio.gather(*tasks)
    return accepted, throttled


def test_one_hot_key_is_accepted_at_its_ceiling_and_the_rest_throttled() -> None:
    ceiling, seconds = 100.0, 30.0

    async def main() -> tuple[int, int, StoreStats]:
        s = store(write_ceiling=ceiling, transaction_cost=1.0, partitions=0)
        accepted, throttled = await offer(s, "HOT", 5 * ceiling, seconds, "o")
        return accepted, throttled, s.stats(NS)

    accepted, throttled, stats = run_virtual(main())
    # one unit per place on the key: the ceiling in each of the 30 seconds, no more
    assert accepted == pytest.approx(ceiling * seconds, rel=0.01)
    assert accepted + throttled == 5 * ceiling * seconds
    hot = stats.by_key["HOT"]
    assert hot.write_units == accepted
    assert hot.write_throttles == throttled
    assert hot.write_requests == accepted + throttled
    per_second = stats.timeline["HOT"]
    for second in range(29):
        assert per_second[second] == pytest.approx(ceiling, rel=0.05)
    assert sum(stats.throttle_timeline["HOT"].values()) == throttled


def test_eight_keys_below_the_ceiling_are_never_throttled() -> None:
    ceiling, seconds = 100.0, 30.0

    async def main() -> list[tuple[int, int]]:
        s = store(write_ceiling=ceiling, transaction_cost=1.0, partitions=0)
        return await asyncio.gather(*(offer(s, f"K#{k}", 0.6 * ceiling, seconds, f"k{k}")
                                      for k in range(8)))

    for accepted, throttled in run_virtual(main()):
        assert (accepted, throttled) == (round(0.6 * ceiling * seconds), 0)


def test_keys_on_one_physical_partition_share_its_ceiling() -> None:
    ceiling, seconds = 100.0, 20.0

    def colliding(s: MemoryStore) -> tuple[str, str]:
        keys = [f"V{i}" for i in range(100)]
        for a in keys:
            for b in keys:
                if a < b and s.partition_of(NS, a) == s.partition_of(NS, b):
                    return a, b
        raise AssertionError("no two keys share a partition")

    async def main(partitions: int) -> tuple[int, StoreStats, str]:
        s = store(write_ceiling=ceiling, transaction_cost=1.0, partitions=partitions)
        a, b = colliding(s) if partitions else ("V0", "V1")
        results = await asyncio.gather(offer(s, a, 0.6 * ceiling, seconds, "a"),
                                       offer(s, b, 0.6 * ceiling, seconds, "b"))
        return sum(t for _, t in results), s.stats(NS), s.partition_of(NS, a)

    throttled, _, _ = run_virtual(main(0))
    assert throttled == 0
    throttled, stats, partition = run_virtual(main(4))
    assert throttled > 0
    assert partition.startswith("p")
    assert set(stats.by_partition) <= {"p0", "p1", "p2", "p3"}
    # the shared partition accepted its ceiling each second, its keys and placements together
    assert stats.by_partition[partition].write_units == pytest.approx(ceiling * seconds,
                                                                      rel=0.01)


def test_a_transaction_needs_the_units_of_all_its_keys_on_one_partition() -> None:
    async def main() -> None:
        s = store(write_ceiling=10.0, transaction_cost=1.0, partitions=1)
        big = entry("K", "a", "o-1", blob="z" * 9500)
        assert 9 * 1024 < entry_bytes(big) <= 10 * 1024  # ten units, the whole bucket
        with pytest.raises(Throttled, match=r"partition p0\) throttled: TransactionCanceled"
                           r"Exception \(ThrottlingError\): TableWriteKeyRangeThroughput"
                           r"Exceeded, over the partition's write ceiling of 10 units"):
            await s.place(NS, "o-1", big, version=1, expected=None)  # and one for the placement
        assert s.stats(NS).totals.write_units == 0
        await CLOCK.sleep(0.5)
        with pytest.raises(Throttled):  # the same second: the units never fit it
            await s.place(NS, "o-1", big, version=1, expected=None)
        await CLOCK.sleep(1.0)
        with pytest.raises(Throttled):  # nor any other: 11 units, 10 a second, no burst
            await s.place(NS, "o-1", big, version=1, expected=None)
    run_virtual(main())


def test_partitions_place_every_key_by_jump_hash() -> None:
    s = store(partitions=1)
    assert {s.partition_of(NS, k) for k in ("A", "B", "#placement#x")} == {"p0"}
    s = store(partitions=8)
    assert len({s.partition_of(NS, f"K{i}") for i in range(200)}) == 8
    assert store(partitions=0).partition_of(NS, "PENDING") == "PENDING"
    assert store().partition_of(NS, "PENDING") in {"p0", "p1", "p2", "p3"}


def test_a_throttled_transaction_changes_nothing_and_takes_nothing() -> None:
    async def main() -> None:
        s = store(write_ceiling=10.0, transaction_cost=1.0, partitions=0)
        blob = "b" * 4500  # five units
        await s.place(NS, "o-1", entry("OLD", "a", "o-1"), version=1, expected=None)
        await s.place(NS, "x-1", entry("FULL", "1", "x-1", blob=blob), version=1,
                      expected=None)
        await s.place(NS, "x-2", entry("FULL", "2", "x-2", blob=blob), version=1,
                      expected=None)
        before = s.stats(NS)
        with pytest.raises(Throttled) as caught:
            await s.place(NS, "o-1", entry("FULL", "3", "o-1"), version=2,
                          expected=await s.locate(NS, "o-1"))
        assert caught.value.key == "FULL"
        assert caught.value.reason == "TableWriteKeyRangeThroughputExceeded"
        assert str(caught.value) == (
            "FULL (partition FULL) throttled: TransactionCanceledException (ThrottlingError): "
            "TableWriteKeyRangeThroughputExceeded, over the partition's write ceiling of 10 "
            "units a second")
        placement = await s.locate(NS, "o-1")
        assert placement is not None
        assert placement.version == 1
        assert [e.item_id for e in await read_all(s, "OLD")] == ["o-1"]
        after = s.stats(NS)
        assert after.by_key["FULL"].write_throttles == 1
        assert after.by_key["FULL"].write_units == before.by_key["FULL"].write_units
        assert after.by_key["OLD"].write_units == before.by_key["OLD"].write_units
        assert after.by_key["OLD"].write_requests == before.by_key["OLD"].write_requests + 1
        assert after.by_key["#placement#"].write_units == (
            before.by_key["#placement#"].write_units)
        await CLOCK.sleep(1.0)  # the partition refills; the same move now goes through
        await s.place(NS, "o-1", entry("FULL", "3", "o-1"), version=2,
                      expected=await s.locate(NS, "o-1"))
        assert await s.count(NS, "OLD") == 0
    run_virtual(main())


def test_reads_throttle_at_the_read_ceiling() -> None:
    async def main() -> None:
        s = store(read_ceiling=5.0)
        await s.place(NS, "o-1", entry("K", "a", "o-1"), version=1, expected=None)
        results = await asyncio.gather(
            *(s.query(NS, "K", after=None, descending=False, limit=10) for _ in range(8)),
            return_exceptions=True)
        throttles = [r for r in results if isinstance(r, Throttled)]
        assert len(throttles) == 3
        assert throttles[0].reason == "TableReadKeyRangeThroughputExceeded"
        assert "ProvisionedThroughputExceededException: TableReadKeyRangeThroughputExceeded, " \
               "over the partition's read ceiling of 5 units a second" in str(throttles[0])
        stats = s.stats(NS).by_key["K"]
        assert (stats.read_requests, stats.read_units, stats.read_throttles) == (8, 5.0, 3)
    run_virtual(main())


def test_throttle_message_names_the_physical_partition() -> None:
    async def main() -> None:
        s = store(write_ceiling=1.0, transaction_cost=1.0, partitions=3)
        await s.place(NS, "o-1", entry("PENDING", "a", "o-1"), version=1, expected=None)
        with pytest.raises(Throttled, match=r"\(partition p\d\) throttled: .*write ceiling "
                                            r"of 1 units"):
            await asyncio.gather(*(
                s.place(NS, f"o{i}", entry("PENDING", "b", f"o{i}"), version=1, expected=None)
                for i in range(2, 5)))
    run_virtual(main())


# -- latency of the store's requests ---------------------------------------------------

def test_every_request_waits_its_sampled_latency() -> None:
    async def main() -> None:
        s = store(latency_median_ms=3.0, latency_p99_ms=3.0, latency_per_kb_ms=1.0)
        start = CLOCK.now()
        await s.locate(NS, "o-1")
        assert CLOCK.now() - start == pytest.approx(0.003)
        start = CLOCK.now()
        await s.place(NS, "o-1", entry("K", "a", "o-1", blob="x" * 10_240), version=1,
                      expected=None)
        size = entry_bytes(entry("K", "a", "o-1", blob="x" * 10_240))
        assert CLOCK.now() - start == pytest.approx(0.003 + size / 1024 / 1000)
        start = CLOCK.now()
        await s.query(NS, "K", after=None, descending=False, limit=1)
        assert CLOCK.now() - start == pytest.approx(0.003 + size / 1024 / 1000)
    run_virtual(main())


def test_latency_samples_spread_as_configured() -> None:
    async def main() -> list[float]:
        s = store(seed=2)
        out = []
        for _ in range(3000):
            start = CLOCK.now()
            await s.locate(NS, "o")
            out.append(CLOCK.now() - start)
        return sorted(out)

    latencies = run_virtual(main())
    assert latencies[1500] == pytest.approx(0.004, rel=0.1)
    assert latencies[2970] == pytest.approx(0.025, rel=0.3)


def test_wall_time_is_virtual_under_run_virtual_and_moves_with_now() -> None:
    from shardex.clock import LoopClock
    from shardex.sim.clock import VIRTUAL_WALL_START

    async def main() -> tuple[float, float, float]:
        clock = LoopClock()
        before = clock.wall()
        await clock.sleep(90.0)
        return before, clock.wall(), clock.now()

    before, after, now = run_virtual(main())
    assert before == VIRTUAL_WALL_START
    assert after - before == pytest.approx(90.0)
    assert now == pytest.approx(90.0)
    assert run_virtual(main(), wall_start=1000.0)[0] == 1000.0
    import time
    assert abs(LoopClock().wall() - time.time()) < 60  # no loop: the system's clock


def test_a_paced_virtual_loop_stands_still_while_nobody_waits_on_it() -> None:
    """A blocking facade's loop must not race through virtual time between calls."""

    from shardex.sim.clock import VirtualTimeLoop

    loop = VirtualTimeLoop()
    loop.pace()
    try:
        selector = loop._selector  # type: ignore[attr-defined]
        assert loop.held_still()
        # Nobody waits: select blocks for real until woken, and time stays put.
        done = threading.Event()
        worker = threading.Thread(target=lambda: (selector.select(5.0), done.set()))
        worker.start()
        loop._write_to_self()  # type: ignore[attr-defined]
        worker.join()
        assert done.is_set()
        assert loop.time() == 0.0
        loop._read_from_self()  # type: ignore[attr-defined]
        # A call runs: time jumps as on any virtual loop.
        loop._waiting += 1  # type: ignore[attr-defined]  # what submit does for its call
        assert not loop.held_still()
        selector.select(5.0)
        assert loop.time() == 5.0
    finally:
        loop.close()


def test_sync_facade_on_virtual_time_still_runs_its_calls() -> None:
    from shardex.sim.clock import VirtualTimeLoop

    with shardex.SyncShardedIndex("memory://", "paced", loop_factory=VirtualTimeLoop) as index:
        index.put("A", "o-1", sort="s")
        assert [e.item_id for e in index.query("A").items] == ["o-1"]
        assert index.index.routing.version >= 1


def test_sync_facade_on_virtual_time_moves_the_clock_by_its_calls_alone() -> None:
    """Each blocking call moved the virtual clock 45-210 s: the loop ran on through the
    routing's refreshes until the caller's thread woke and left its wait (25 virtual
    hours in 500 puts). Time stops as the call ends, on the loop's thread."""
    from shardex.sim.clock import VirtualTimeLoop

    with shardex.SyncShardedIndex("memory://", "paced", loop_factory=VirtualTimeLoop) as index:
        loop = index._loop
        start = loop.time()
        for n in range(200):
            index.put("A", f"o-{n}")
        assert loop.time() - start < 20.0  # 200 puts of a few virtual ms each
        assert index.count("A") == 200
