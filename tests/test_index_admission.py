"""The index's admission and adaptive pacing, on virtual time: what reaches the store."""

from __future__ import annotations

from typing import Any

import pytest

import shardex
from shardex import AdmissionRejected, InvalidInput, ShardedIndex, SyncShardedIndex
from shardex.admission import AdaptiveRate, Admission, AdmissionPolicy, Budget
from shardex.clock import LoopClock
from shardex.errors import InvalidPolicy, Throttled
from shardex.retry import RetryPolicy
from shardex.sim.clock import VirtualTimeLoop, run_virtual
from shardex.stores.memory import MemoryStore


def _writes(store: MemoryStore, key: str) -> int:
    stats = store.stats("ix").by_key.get(key)
    return 0 if stats is None else stats.write_requests


def test_writes_over_a_reject_budget_are_refused_before_the_store() -> None:
    async def body() -> None:
        store = MemoryStore()
        policy = AdmissionPolicy(overrides={"HOT": Budget(rate=10, burst=5, mode="reject")})
        async with ShardedIndex(store, "ix", admission=policy) as index:
            refused: list[AdmissionRejected] = []
            for i in range(8):
                try:
                    await index.put("HOT", f"i{i}")
                except AdmissionRejected as exc:
                    refused.append(exc)
            await index.put("COLD", "c1")  # no budget: never limited
            # a burst of 5, and a few writes' latency worth of refill at 10 a second
            assert 2 <= len(refused) <= 3
            assert refused[0].key == "HOT"
            assert refused[0].retry_after is not None
            assert 0 < refused[0].retry_after <= 0.1 + 1e-9
            admitted = 8 - len(refused)
            assert _writes(store, "HOT") == admitted
            async with ShardedIndex(store, "ix") as plain:  # reads are budgeted too
                assert await plain.count("HOT") == admitted
            assert index.admission is not None
            counts = index.admission.counts()
            assert (counts["HOT"].admitted, counts["HOT"].rejected) == (admitted, len(refused))
            assert "COLD" not in counts or counts["COLD"].rejected == 0
    run_virtual(body())


def test_waits_run_on_the_index_clock_and_pace_writes_at_the_budget() -> None:
    async def body() -> None:
        clock = LoopClock()
        policy = AdmissionPolicy(default=Budget(rate=20, burst=1, max_wait=10))
        async with ShardedIndex(MemoryStore(), "ix", admission=policy) as index:
            start = clock.now()
            for i in range(41):
                await index.put("V", f"i{i}")
            # the first goes at once, the next 40 at 20 a second: 2 virtual seconds
            assert clock.now() - start == pytest.approx(2.0, abs=0.2)
    run_virtual(body())


def test_write_units_are_charged_from_the_entry_size() -> None:
    async def body() -> None:
        policy = AdmissionPolicy(default=Budget(rate=100, burst=100, mode="reject"))
        async with ShardedIndex(MemoryStore(), "ix", admission=policy) as index:
            await index.put("V", "big", attrs={"blob": "x" * 5000})  # 5 write units (1 KB each)
            assert index.admission is not None
            assert index.admission.counts()["V"].admitted_units == 5
    run_virtual(body())


def test_a_page_is_charged_one_unit_per_shard_key_read_and_priorities_are_served() -> None:
    async def body() -> None:
        routing = shardex.Routing(overrides={"V": shardex.ShardPolicy(shards=4)})
        budget = Budget(rate=1, burst=8, mode="reject", reserve={"low": 0.5})
        async with ShardedIndex(MemoryStore(), "ix", routing,
                                admission=AdmissionPolicy(default=budget)) as index:
            await index.query("V", priority="low")  # 4 units: half the bucket left
            with pytest.raises(AdmissionRejected) as refused:
                await index.query("V", priority="low")
            assert refused.value.priority == "low"
            await index.query("V", priority="high")  # the reserve serves high
            with pytest.raises(AdmissionRejected):
                await index.count("V", priority="high")
            assert index.admission is not None
            assert index.admission.counts()["V"].admitted_units == 8
    run_virtual(body())


def test_a_shared_admission_is_used_as_given() -> None:
    async def body() -> None:
        store = MemoryStore()
        admission = Admission(AdmissionPolicy(default=Budget(rate=1, burst=3, mode="reject")))
        async with admission:
            one = ShardedIndex(store, "ix", admission=admission)
            two = ShardedIndex(store, "ix", admission=admission)
            async with one, two:
                await one.put("V", "a")
                await two.put("V", "b")
                await one.put("V", "c")
                with pytest.raises(AdmissionRejected):
                    await two.put("V", "d")
            assert one.admission is admission
    run_virtual(body())


@pytest.mark.parametrize(("options", "field"), [
    ({"admission": {"default": {"rate": 1}}}, "admission"),
    ({"adaptive": "yes"}, "adaptive"),
    ({"adaptive": 2.0}, "adaptive"),
])
def test_bad_admission_options_name_the_field(options: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput, match=field):
        ShardedIndex(MemoryStore(), "ix", **options)


@pytest.mark.parametrize(("build", "field"), [
    (lambda: Budget(rate=0), "Budget.rate"),
    (lambda: Budget(rate=-5), "Budget.rate"),
    (lambda: Budget(rate=1, max_wait=-0.1), "Budget.max_wait"),
    (lambda: AdaptiveRate(increase=-1), "AdaptiveRate.increase"),
    (lambda: AdmissionPolicy.from_dict({"format": "shardex.admission/1",
                                        "default": {"rate": 0}}), "admission.default"),
])
def test_bad_budgets_are_typed_errors_naming_the_field(build: Any, field: str) -> None:
    with pytest.raises(InvalidPolicy, match=field.replace(".", r"\.")):
        build()


def test_a_bad_priority_is_refused_before_anything_is_sent() -> None:
    async def body() -> None:
        store = MemoryStore()
        async with ShardedIndex(store, "ix") as index:
            with pytest.raises(InvalidInput, match="priority"):
                await index.put("V", "a", priority="urgent")  # type: ignore[arg-type]
            with pytest.raises(InvalidInput, match="priority"):
                await index.query("V", priority="")  # type: ignore[arg-type]
            assert _writes(store, "V") == 0
    run_virtual(body())


def test_the_adaptive_gate_cuts_wasted_requests_on_a_throttled_key() -> None:
    """64 writers on one key of a 200 units/s partition, with and without the gate."""

    async def run(adaptive: bool) -> tuple[int, int, int]:
        store = MemoryStore(write_ceiling=200, seed=3)
        retry = RetryPolicy(attempts=30, base=0.02, cap=0.5, deadline=None)
        async with ShardedIndex(store, "ix", retry=retry, adaptive=adaptive, seed=1) as index:
            clock = LoopClock()
            done = 0

            async def writer(w: int) -> None:
                nonlocal done
                i = 0
                while clock.now() < 20:
                    try:
                        await index.put("HOT", f"w{w}-{i}")
                        done += 1
                    except Throttled:
                        pass
                    i += 1

            import asyncio
            await asyncio.gather(*(writer(w) for w in range(64)))
            if adaptive:
                rate = index.send_rates()["HOT"]
                assert rate is not None
                assert rate < 200
        stats = store.stats("ix").by_key["HOT"]
        return stats.write_requests, stats.write_throttles, done

    plain = run_virtual(run(False))
    paced = run_virtual(run(True))
    assert paced[1] < plain[1] / 4  # far fewer throttled requests
    assert paced[2] >= 0.8 * plain[2]  # and about as many writes accepted


def test_the_sync_facade_passes_admission_and_priority_through() -> None:
    # a paced virtual loop follows the wall clock: a budget that refills in hours does not
    # refill between the calls, however slow the machine
    policy = AdmissionPolicy(default=Budget(rate=0.0001, burst=2, mode="reject"))
    with SyncShardedIndex(MemoryStore(), "ix", admission=policy,
                          loop_factory=VirtualTimeLoop) as index:
        index.put("V", "a", priority="high")
        index.put("V", "b")
        with pytest.raises(AdmissionRejected):
            index.put("V", "c", priority="low")
