"""Admission budgets: pure decisions, the async gate on virtual time, bad input, the bound."""

from __future__ import annotations

import asyncio
import contextlib
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import shardex
from shardex.admission import (
    Admission,
    AdmissionPolicy,
    Budget,
    LocalBudgets,
    SharedBudgets,
    moving_window,
)
from shardex.admission.policy import Priority
from shardex.clock import LoopClock
from shardex.errors import (
    AdmissionRejected,
    CapabilityMissing,
    InvalidInput,
    InvalidKey,
    InvalidPolicy,
    InvalidURI,
    ShardexError,
)
from shardex.sim.clock import run_virtual

# -- pure decisions ----------------------------------------------------------------------


def test_a_fresh_budget_admits_its_burst_then_paces_at_its_rate() -> None:
    budget = Budget(rate=10, burst=5)
    tat, now = 0.0, 0.0
    for _ in range(5):
        grant = budget.take(tat, now, 1, "normal")
        assert grant.admitted
        assert grant.retry_after == 0.0
        tat = grant.tat
    refused = budget.take(tat, now, 1, "normal")
    assert not refused.admitted
    assert refused.retry_after == pytest.approx(0.1)
    assert refused.tat == tat
    later = budget.take(tat, now + 0.1, 1, "normal")
    assert later.admitted


def test_a_request_larger_than_the_burst_is_never_admitted() -> None:
    grant = Budget(rate=100, burst=10).take(0.0, 0.0, 11, "high")
    assert not grant.admitted
    assert grant.retry_after is None


def test_burst_defaults_to_one_second_of_rate() -> None:
    assert Budget(rate=250).burst_units == 250
    assert Budget(rate=250, burst=0.5).burst_units == 0.5


def test_a_burst_of_zero_is_refused() -> None:
    """Taken before: a budget of 1,000 units a second that admitted no request at all
    (every one asks for more than 0 units: 'never fits')."""
    with pytest.raises(InvalidPolicy, match=r"Budget.burst must be a finite number > 0, "
                                            r"got 0"):
        Budget(rate=1000, burst=0)


def test_a_low_priority_leaves_its_reserve_to_higher_ones() -> None:
    budget = Budget(rate=1, burst=10, reserve={"low": 0.5, "normal": 0.2})
    assert (budget.usable("low"), budget.usable("normal"), budget.usable("high")) == (5, 8, 10)
    tat = budget.take(0.0, 0.0, 5, "low").tat
    low = budget.take(tat, 0.0, 1, "low")
    assert not low.admitted
    assert low.retry_after == pytest.approx(1.0)
    normal = budget.take(tat, 0.0, 3, "normal")
    assert normal.admitted
    assert not budget.take(normal.tat, 0.0, 1, "normal").admitted
    assert budget.take(normal.tat, 0.0, 2, "high").admitted


def test_costs_follow_counts_and_read_cost() -> None:
    assert Budget(rate=1).cost(4, "write") == 4
    assert Budget(rate=1, read_cost=1 / 3).cost(3, "read") == pytest.approx(1)
    assert Budget(rate=1, counts="requests").cost(8, "write") == 1
    assert Budget(rate=1, counts="requests", read_cost=0).cost(8, "read") == 0


def test_decide_waits_up_to_max_wait_in_wait_mode_and_never_in_reject_mode() -> None:
    waiting = Budget(rate=1, mode="wait", max_wait=2.0)
    assert waiting.decide(0.5, waited=0.0) == 0.5
    assert waiting.decide(0.5, waited=1.5) == 0.5
    assert waiting.decide(0.5, waited=1.6) is None
    assert waiting.decide(None, waited=0.0) is None
    assert Budget(rate=1, mode="reject").decide(0.01, waited=0.0) is None


def test_the_policy_names_a_budget_per_key_with_a_default() -> None:
    default, heavy = Budget(rate=100), Budget(rate=10)
    policy = AdmissionPolicy(default=default, overrides={"tenant-1": heavy, "vip": None})
    assert policy.budget("tenant-1") is heavy
    assert policy.budget("tenant-2") is default
    assert policy.budget("vip") is None
    assert AdmissionPolicy().budget("anything") is None
    assert policy.budgets() == [default, heavy]


def test_policy_documents_round_trip() -> None:
    policy = AdmissionPolicy(
        default=Budget(rate=100, burst=300, mode="reject", reserve={"low": 0.3}),
        overrides={"tenant-1": Budget(rate=10, counts="requests", read_cost=0.5), "vip": None})
    doc = policy.to_dict()
    assert doc["format"] == "shardex.admission/1"
    again = AdmissionPolicy.from_dict(doc)
    assert again == policy
    assert hash(again) == hash(policy)


def test_a_budget_does_not_follow_changes_to_the_callers_dict() -> None:
    reserve: dict[Priority, float] = {"low": 0.5}
    budget = Budget(rate=1, reserve=reserve)
    reserve["low"] = 0.9
    assert budget.reserve["low"] == 0.5


# -- bad input -----------------------------------------------------------------------------

@pytest.mark.parametrize(("fields", "named"), [
    ({"rate": 0}, "Budget.rate"),
    ({"rate": -5}, "Budget.rate"),
    ({"rate": math.inf}, "Budget.rate"),
    ({"rate": "10"}, "Budget.rate"),
    ({"rate": True}, "Budget.rate"),
    ({"rate": 1, "burst": -1}, "Budget.burst"),
    ({"rate": 1, "burst": math.nan}, "Budget.burst"),
    ({"rate": 1, "max_wait": -0.1}, "Budget.max_wait"),
    ({"rate": 1, "mode": "queue"}, "Budget.mode"),
    ({"rate": 1, "counts": "bytes"}, "Budget.counts"),
    ({"rate": 1, "read_cost": -1}, "Budget.read_cost"),
    ({"rate": 1, "reserve": {"high": 0.1}}, "Budget.reserve key"),
    ({"rate": 1, "reserve": {"low": 1.0}}, "Budget.reserve['low']"),
    ({"rate": 1, "reserve": {"low": 0.1, "normal": 0.2}}, "Budget.reserve['low']"),
    ({"rate": 1, "reserve": [0.1]}, "Budget.reserve"),
])
def test_bad_budgets_are_refused_naming_the_field(fields: dict[str, Any], named: str) -> None:
    with pytest.raises(InvalidPolicy, match=named.replace("[", r"\[").replace("]", r"\]")):
        Budget(**fields)


def test_bad_policies_and_documents_are_refused_naming_the_field() -> None:
    with pytest.raises(InvalidPolicy, match="overrides"):
        AdmissionPolicy(overrides={"a#b": Budget(rate=1)})
    with pytest.raises(InvalidPolicy, match=r"overrides\['t'\]"):
        AdmissionPolicy(overrides={"t": 5})  # type: ignore[dict-item]
    with pytest.raises(InvalidPolicy, match="default"):
        AdmissionPolicy(default=10)  # type: ignore[arg-type]
    with pytest.raises(InvalidPolicy, match=r"^admission.default: Budget.rate"):
        AdmissionPolicy.from_dict({"format": "shardex.admission/1",
                                   "default": {"rate": -1}}, "admission")
    with pytest.raises(InvalidPolicy, match=r"overrides\['t'\].*unknown field.*'speed'"):
        AdmissionPolicy.from_dict({"format": "shardex.admission/1",
                                   "overrides": {"t": {"rate": 1, "speed": 2}}})
    with pytest.raises(InvalidPolicy, match=r"missing field.*'rate'"):
        Budget.from_dict({})
    with pytest.raises(InvalidPolicy, match="format"):
        AdmissionPolicy.from_dict({"format": "shardex.routing/1"})


def test_bad_requests_are_refused_naming_the_argument() -> None:
    async def main() -> None:
        admission = Admission(AdmissionPolicy(default=Budget(rate=10)))
        for kwargs, named in [({"units": 0}, "units"), ({"units": -1}, "units"),
                              ({"units": math.nan}, "units"), ({"op": "scan"}, "op"),
                              ({"priority": "urgent"}, "priority")]:
            with pytest.raises(InvalidInput, match=named):
                await admission.admit("k", **kwargs)
        with pytest.raises(InvalidKey):
            await admission.admit("a#b")
        with pytest.raises(InvalidPolicy):
            Admission("policy")  # type: ignore[arg-type]

    run_virtual(main())


def test_admission_rejected_is_a_shardex_error_carrying_key_and_retry_after() -> None:
    error = AdmissionRejected("tenant-7", retry_after=0.25, op="read", units=3, priority="low")
    assert isinstance(error, ShardexError)
    assert (error.key, error.retry_after, error.op, error.units, error.priority) == (
        "tenant-7", 0.25, "read", 3, "low")
    assert "tenant-7" in str(error)
    assert "0.25" in str(error)
    assert shardex.AdmissionRejected is AdmissionRejected


def test_shared_budgets_refuse_what_a_whole_second_window_cannot_keep() -> None:
    assert moving_window(Budget(rate=100, burst=250), "high") == (200, 2)
    assert moving_window(Budget(rate=100, burst=250, reserve={"low": 0.25}), "low") == (150, 2)
    assert moving_window(Budget(rate=2.5), "high") == (2, 1)
    with pytest.raises(InvalidPolicy, match=r"Budget\.burst"):
        moving_window(Budget(rate=100, burst=50), "high")
    with pytest.raises(InvalidPolicy, match=r"Budget\.rate"):
        moving_window(Budget(rate=0.5, burst=0.9), "high")
    shared = SharedBudgets("redis://127.0.0.1:1/0")
    with pytest.raises(InvalidPolicy, match=r"Budget\.burst"):
        Admission(AdmissionPolicy(overrides={"k": Budget(rate=10, burst=5)}), budgets=shared)
    for url in ("memory://", "http://h:1", "redis://", 42, "redis://[", "redis://h:99999"):
        with pytest.raises(InvalidURI):
            SharedBudgets(url)  # type: ignore[arg-type]
    assert SharedBudgets("redis://:secret@h:6379/0").url == "redis://h:6379/0"


def test_shared_budgets_refuse_virtual_time() -> None:
    with pytest.raises(CapabilityMissing, match="LocalBudgets"):
        run_virtual(SharedBudgets("redis://127.0.0.1:1/0").open())


# -- the gate on virtual time ----------------------------------------------------------


def test_reject_mode_refuses_at_once_with_the_retry_after() -> None:
    async def main() -> tuple[list[float], AdmissionRejected, Any]:
        admission = Admission(AdmissionPolicy(default=Budget(rate=4, burst=2, mode="reject")))
        waits = [await admission.admit("k", units=1) for _ in range(2)]
        with pytest.raises(AdmissionRejected) as caught:
            await admission.admit("k", units=1)
        return waits, caught.value, admission.counts()["k"]

    waits, error, counts = run_virtual(main())
    assert waits == [0.0, 0.0]
    assert error.key == "k"
    assert error.retry_after == pytest.approx(0.25)
    assert (counts.admitted, counts.rejected, counts.waited) == (2, 1, 0)


def test_a_request_let_through_at_once_counts_no_wait_on_the_real_clock() -> None:
    """On the loop's clock the time a take itself took counted as a wait: the first admit
    on a full bucket, every admit of a key without a budget (which also counted 0 units
    admitted) and every admit in reject mode (Redis: the round trips) said 'waited'."""
    async def main() -> tuple[list[float], dict[str, Any]]:
        policy = AdmissionPolicy(default=Budget(rate=200, burst=400),
                                 overrides={"internal": None,
                                            "tenant-42": Budget(rate=50, mode="reject")})
        async with Admission(policy) as admission:
            waits = [await admission.admit("tenant-7", units=2) for _ in range(5)]
            waits += [await admission.admit("internal", units=1_000_000)]
            waits += [await admission.admit("tenant-42", units=1) for _ in range(10)]
            return waits, admission.counts()

    waits, counts = asyncio.run(main())
    assert waits == [0.0] * 16
    assert {key: (c.admitted, c.waited, c.wait_seconds) for key, c in counts.items()} == {
        "tenant-7": (5, 0, 0.0), "internal": (1, 0, 0.0), "tenant-42": (10, 0, 0.0)}
    assert counts["internal"].admitted_units == 1_000_000  # its units, though uncharged


def test_wait_mode_waits_on_the_clock_then_refuses_past_max_wait() -> None:
    async def main() -> tuple[list[float], float, Any]:
        admission = Admission(AdmissionPolicy(default=Budget(rate=10, burst=1, max_wait=0.35)))
        clock = LoopClock()
        start = clock.now()
        waits = list(await asyncio.gather(*(admission.admit("k") for _ in range(4))))
        with pytest.raises(AdmissionRejected, match="max_wait"):
            await asyncio.gather(*(admission.admit("k") for _ in range(5)))
        return waits, clock.now() - start, admission.counts()["k"]

    waits, elapsed, counts = run_virtual(main())
    assert sorted(waits) == pytest.approx([0.0, 0.1, 0.2, 0.3])
    assert counts.admitted >= 4
    assert counts.rejected >= 1
    assert elapsed < 1.0


def test_a_request_refused_after_its_wait_counts_the_wait() -> None:
    """40 admits on a budget of 10 a second (burst 10, max_wait 1 s): 20 let through, 20
    refused after waiting the whole second. The counts said 10 waited 5.5 s in all where
    the callers lost 25.5 s: the refused ones' waits were left out."""
    async def main() -> tuple[list[float], dict[str, Any]]:
        admission = Admission(AdmissionPolicy(default=Budget(rate=10, burst=10,
                                                             max_wait=1.0)))
        clock = LoopClock()

        async def admit() -> float:
            start = clock.now()
            with contextlib.suppress(AdmissionRejected):
                await admission.admit("k")
            return clock.now() - start

        lost = list(await asyncio.gather(*(admit() for _ in range(40))))
        return lost, admission.counts()

    lost, counts = run_virtual(main())
    k = counts["k"]
    assert (k.admitted, k.rejected) == (20, 20)
    assert k.waited == sum(1 for seconds in lost if seconds > 0)
    assert k.wait_seconds == pytest.approx(sum(lost))


def test_keys_have_budgets_of_their_own_and_unlimited_keys_pass() -> None:
    async def main() -> None:
        admission = Admission(AdmissionPolicy(default=Budget(rate=1, burst=1, mode="reject"),
                                              overrides={"free": None}))
        await admission.admit("a")
        await admission.admit("b")
        for _ in range(100):
            await admission.admit("free", units=1000)
        with pytest.raises(AdmissionRejected):
            await admission.admit("a")

    run_virtual(main())


def test_reads_can_be_left_out_of_a_budget() -> None:
    async def main() -> None:
        admission = Admission(AdmissionPolicy(
            default=Budget(rate=1, burst=1, mode="reject", read_cost=0)))
        for _ in range(10):
            assert await admission.admit("k", units=5, op="read") == 0.0
        await admission.admit("k", op="write")
        with pytest.raises(AdmissionRejected):
            await admission.admit("k", op="write")

    run_virtual(main())


def test_a_dashboard_keeps_reading_while_a_batch_job_is_held_back() -> None:
    async def main() -> tuple[int, int, int]:
        budget = Budget(rate=100, burst=100, mode="reject", reserve={"low": 0.5})
        admission = Admission(AdmissionPolicy(default=budget))
        clock = LoopClock()
        batch = dashboard = dashboard_refused = 0
        for tick in range(200):  # 2 s: the batch job offers 3x the budget
            for _ in range(3):
                try:
                    await admission.admit("tenant", units=1, priority="low")
                    batch += 1
                except AdmissionRejected:
                    pass
            if tick % 5 == 0:  # the dashboard reads 20 times a second
                try:
                    await admission.admit("tenant", units=1, op="read", priority="high")
                    dashboard += 1
                except AdmissionRejected:
                    dashboard_refused += 1
            await clock.sleep(0.01)
        return batch, dashboard, dashboard_refused

    batch, dashboard, refused = run_virtual(main())
    assert (dashboard, refused) == (40, 0)
    assert batch <= 100 * 2 + 50


def test_the_default_state_forgets_buckets_that_refilled() -> None:
    async def main() -> int:
        clock = LoopClock()
        state = LocalBudgets(clock)
        budget = Budget(rate=1000)
        for key in range(3000):
            await state.take(f"k{key}", 1, budget, "normal")
            await clock.sleep(0.001)
        return len(state._tat)

    assert run_virtual(main()) < 2048


# -- the bound: over any window, admitted <= rate * window + burst ---------------------


def _assert_within_bound(admitted: list[tuple[float, float]], rate: float, burst: float) -> None:
    """Check every window that starts and ends at an admission (the tightest ones)."""
    admitted.sort()
    for i, (start, _) in enumerate(admitted):
        total = 0.0
        for end, units in admitted[i:]:
            total += units
            assert total <= rate * (end - start) + burst + 1e-6, (start, end, total)


budgets = st.builds(
    Budget,
    rate=st.floats(0.5, 2000),
    burst=st.floats(0, 500, exclude_min=True) | st.none(),
    reserve=st.sampled_from([{}, {"low": 0.5}, {"low": 0.4, "normal": 0.1}]),
)
requests = st.lists(st.tuples(st.floats(0, 0.5),                          # gap before it
                              st.floats(0.5, 40),                         # units
                              st.sampled_from(["low", "normal", "high"])),
                    min_size=1, max_size=120)


@given(budget=budgets, schedule=requests)
def test_over_any_window_admitted_units_never_exceed_rate_times_window_plus_burst(
        budget: Budget, schedule: list[tuple[float, float, Priority]]) -> None:
    now, tat = 1000.0, -math.inf
    admitted: list[tuple[float, float]] = []
    for gap, units, priority in schedule:
        now += gap
        grant = budget.take(tat, now, units, priority)
        if grant.admitted:
            tat = grant.tat
            admitted.append((now, units))
    _assert_within_bound(admitted, budget.rate, budget.burst_units)


@settings(max_examples=40, deadline=None)
@given(budget=budgets, schedule=requests, max_wait=st.floats(0, 2))
def test_the_bound_holds_for_concurrent_waiters_on_virtual_time(
        budget: Budget, schedule: list[tuple[float, float, Priority]], max_wait: float) -> None:
    waiting = Budget(rate=budget.rate, burst=budget.burst, reserve=budget.reserve,
                     max_wait=max_wait)

    async def main() -> list[tuple[float, float]]:
        admission = Admission(AdmissionPolicy(default=waiting))
        clock = LoopClock()
        admitted: list[tuple[float, float]] = []

        async def request(delay: float, units: float, priority: Priority) -> None:
            await clock.sleep(delay)
            try:
                await admission.admit("hot", units=units, priority=priority)
            except AdmissionRejected:
                return
            admitted.append((clock.now(), units))

        delays = [sum(gap for gap, _, _ in schedule[:i + 1]) for i in range(len(schedule))]
        await asyncio.gather(*(request(delay, units, priority)
                               for delay, (_, units, priority) in zip(delays, schedule,
                                                                      strict=True)))
        counts = admission.counts().get("hot")
        assert counts is None or counts.admitted == len(admitted)
        return admitted

    _assert_within_bound(run_virtual(main()), waiting.rate, waiting.burst_units)
