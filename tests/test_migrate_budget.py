"""The migration's shared rate budget: pure slices, windows and AIMD, then processes on
virtual time sharing one budget through the store."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.admission import SharedBudgets
from shardex.clock import LoopClock
from shardex.commands.controls import controls_lines
from shardex.errors import MalformedItem
from shardex.migrate.budget import (
    Budget,
    BudgetPolicy,
    BudgetState,
    Sharing,
    Slice,
    SpendWindow,
    cut,
    effective_rate,
    fits,
    held_until,
    lease,
    migration_status,
    release,
    window_wait,
)
from shardex.migrate.control import (
    Control,
    Controls,
    FileSignal,
    change_control,
    control_document,
    describe,
    record_key,
)
from shardex.migrate.pace import Pace
from shardex.reshard import Resharder
from shardex.sim.clock import run_virtual
from shardex.stores.base import Store
from shardex.stores.memory import MemoryStore
from tests import redis_server
from tests.helpers import count_moves

POLICY = BudgetPolicy()


# -- pure: the sliding window -------------------------------------------------------------

@given(st.lists(st.tuples(st.floats(0.0, 0.5), st.floats(0.1, 5.0)), min_size=1,
                max_size=60), st.floats(5.0, 40.0))
def test_a_window_never_holds_more_than_its_limit(steps: list[tuple[float, float]],
                                                  limit: float) -> None:
    spent: list[tuple[float, float]] = []
    now = 0.0
    for gap, cost in steps:
        now += gap
        while (wait := window_wait(spent, now, cost, limit, 1.0)) > 0:
            now += wait  # as Budget.spend does: wait, then ask again
        spent.append((now, cost))
    for start, _ in spent:  # the windows that begin at a write are the fullest
        held = sum(c for t, c in spent if start <= t < start + 1.0)
        assert held <= limit + 1e-6


def test_a_window_waits_for_the_oldest_write_to_leave_and_nothing_while_limit_is_zero() -> None:
    spent = [(0.0, 4.0), (0.5, 4.0)]
    assert window_wait(spent, 0.6, 4.0, 10.0, 1.0) == pytest.approx(0.4)
    assert window_wait(spent, 1.2, 4.0, 10.0, 1.0) == 0.0
    assert window_wait([], 0.0, 1.0, 0.0, 1.0) == math.inf
    assert window_wait([], 0.0, 50.0, 10.0, 1.0) == 0.0  # larger than the limit: alone


@given(st.lists(st.floats(1.01, 20.0), min_size=2, max_size=40), st.floats(0.05, 1.0))
def test_writes_dearer_than_the_limit_are_spaced_out_to_it(factors: list[float],
                                                          limit: float) -> None:
    """A rate below one write's cost: each write goes alone and holds its key for
    ``cost / limit`` seconds (going alone once a window, a probe saw 2 units a second
    on a key throttled to 0.5)."""
    spent: list[tuple[float, float]] = []
    now = 0.0
    for cost in (limit * factor for factor in factors):
        while (wait := window_wait(spent, now, cost, limit, 1.0)) > 0:
            now += wait
        spent.append((now, cost))
    for (t, c), (later, _) in itertools.pairwise(spent):
        assert later - t >= max(1.0, c / limit) - 1e-6
    assert window_wait([(0.0, 2.0)], 1.5, 2.0, 0.5, 1.0) == pytest.approx(2.5)


@given(st.lists(st.tuples(st.floats(0.0, 0.2), st.floats(0.1, 30.0)), min_size=1,
                max_size=40), st.booleans(), st.floats(0.0, 1.5), st.floats(0.1, 30.0),
       st.sampled_from([0.5, 5.0, 40.0]))
def test_a_window_walked_in_the_order_it_came_waits_what_its_sort_says(
        steps: list[tuple[float, float]], set_back: bool, later: float, cost: float,
        limit: float) -> None:
    """``SpendWindow.wait`` walks its spends as they came while none is dearer than the
    limit and none came before the one before it (a pace asks again and again while it
    waits): the wait its rule gives, by spends sorted until when they count."""
    window, spent, now = SpendWindow(1.0), [], 0.0
    for i, (gap, units) in enumerate(steps):
        now += -0.3 if set_back and i == len(steps) // 2 else gap  # a wall clock set back
        window.add(now, units)
        spent.append((now, units))
    now += later
    total = sum(units for at, units in spent if held_until(at, units, limit, 1.0) > now)
    expected = 0.0
    if total + cost > limit + 1e-9:
        for until, units in sorted((held_until(at, units, limit, 1.0), units)
                                   for at, units in spent if held_until(
                                       at, units, limit, 1.0) > now):
            total -= units
            if total + cost <= limit + 1e-9 or total <= 1e-9:
                expected = max(1e-9, until - now)
                break
    assert window.wait(now, cost, limit) == pytest.approx(expected, abs=1e-9)


# -- pure: AIMD -----------------------------------------------------------------------------

def test_a_throttle_halves_the_rate_once_per_cooldown_and_it_grows_back_to_the_set_rate() -> None:
    state = cut(BudgetState(), 100.0, 10.0, POLICY)
    assert state is not None
    assert effective_rate(state, 100.0, 10.0, POLICY) == pytest.approx(50.0)
    assert cut(state, 100.0, 10.5, POLICY) is None  # within the cooldown
    again = cut(state, 100.0, 11.0, POLICY)
    assert again is not None
    assert effective_rate(again, 100.0, 11.0, POLICY) == pytest.approx(27.5)
    assert effective_rate(again, 100.0, 11.0 + 100, POLICY) == 100.0
    assert effective_rate(again, 40.0, 10_000.0, POLICY) == 40.0  # a lower set rate caps it


@given(st.lists(st.floats(0.0, 30.0), max_size=30))
def test_cuts_never_go_below_the_floor_nor_above_the_set_rate(gaps: list[float]) -> None:
    state, now = BudgetState(), 0.0
    for gap in gaps:
        now += gap
        state = cut(state, 200.0, now, POLICY) or state
        assert 200.0 * POLICY.floor - 1e-9 <= effective_rate(state, 200.0, now, POLICY) <= 200.0


# -- pure: slices ---------------------------------------------------------------------------

@st.composite
def schedules(draw: st.DrawFn) -> list[tuple[float, int, str]]:
    """Events (time, process, what): renew, release or spend, in time order."""
    events, now = [], 0.0
    for _ in range(draw(st.integers(1, 100))):
        now += draw(st.floats(0.0, 0.7))
        events.append((now, draw(st.integers(0, 5)),
                       draw(st.sampled_from(["renew", "spend", "spend", "spend", "release"]))))
    return events


def _most_in_a_window(spent: list[tuple[float, float]], window: float) -> float:
    """The most units of ``spent`` ((time, units), in time order) in any ``window``
    seconds: ``[t, t + window)`` from each spend's time ``t``."""
    most, held, first = 0.0, 0.0, 0
    for last, (_, units) in enumerate(spent):
        held += units
        while spent[first][0] <= spent[last][0] - window:
            held -= spent[first][1]
            first += 1
        most = max(most, held)
    return most


@given(schedules(), st.floats(10.0, 300.0), st.lists(st.floats(1.0, 5.0), min_size=6,
                                                       max_size=6))
def test_processes_spending_their_slices_never_exceed_the_rate_in_any_second(
        events: list[tuple[float, int, str]], rate: float, costs: list[float]) -> None:
    """Whatever the order of renewals (or none: a lease lapses) and releases, the units
    spent on a key in any one-second window, over every process, stay within the rate."""
    policy = BudgetPolicy(grain=5.0)
    state = BudgetState()
    shares: dict[int, tuple[float, float]] = {}  # process: (share, expires)
    spent: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for now, p, what in events:
        if what == "renew":
            state, share = lease(state, f"p{p}", rate, now, policy)
            shares[p] = (share, state.slices[f"p{p}"].expires)
        elif what == "release" and p in shares:
            state = release(state, f"p{p}", now, policy)
            shares[p] = (0.0, 0.0)
        elif what == "spend" and p in shares:
            share, expires = shares[p]
            limit = share if now < expires else 0.0
            if window_wait(spent[p], now, costs[p], limit, policy.window) == 0.0:
                spent[p].append((now, costs[p]))
    assert _most_in_a_window(sorted(w for ws in spent.values() for w in ws),
                             policy.window) <= rate + 1e-6


_KEYS = ("a", "b", "c")
# built once: a strategy built at each draw took most of the property's time (4 s a run)
_PROCESS, _KEY = st.integers(0, 3), st.sampled_from(_KEYS)
_WHAT = st.sampled_from(["renew", "spend", "spend", "spend", "release"])
_LEASED = st.none() | st.frozensets(_KEY)


@st.composite
def keyed_schedules(draw: st.DrawFn) -> list[tuple[float, int, str, frozenset[str] | None]]:
    """Events as ``schedules``, each renewal with the keys it leases (None: every key),
    each spend with the key it spends on."""
    events, now = [], 0.0
    for _ in range(draw(st.integers(1, 100))):
        now += draw(st.floats(0.0, 0.3))
        p, what = draw(_PROCESS), draw(_WHAT)
        keys = draw(_LEASED)
        events.append((now, p, what, keys if what == "renew" else
                       frozenset([draw(_KEY)])))
    return events


@given(keyed_schedules(), st.floats(10.0, 40.0), st.lists(st.floats(2.0, 8.0), min_size=4,
                                                           max_size=4))
def test_slices_of_some_keys_never_exceed_the_rate_on_any_key_in_any_second(
        events: list[tuple[float, int, str, frozenset[str] | None]], rate: float,
        costs: list[float]) -> None:
    """As above, with each renewal leasing some keys or every key: on every key, the units
    spent in any one-second window over every process stay within the rate.

    A write may cost more than the grain (the smallest share, 5 units here) and than its
    process's share: it does not go then (``fits``), and its process records what it
    needs (``BudgetState.needing``), which its next renewal leases. Sent alone, beyond
    the share, it had put the difference over the rate in its second (the explore
    profile found 3 + 8 units at a rate of 10 with shares of 5).
    """
    policy = BudgetPolicy(grain=5.0)
    state = BudgetState()
    slices: dict[int, tuple[dict[str, float] | float, float]] = {}  # process: shares, expires
    spent: dict[tuple[int, str], list[tuple[float, float]]] = defaultdict(list)
    for now, p, what, keys in events:
        if what == "renew":
            state, share = lease(state, f"p{p}", rate, now, policy, keys)
            mine = state.slices[f"p{p}"]
            assert mine.keys is None or share == max(mine.keys.values(), default=0.0)
            slices[p] = (share if mine.keys is None else dict(mine.keys), mine.expires)
            state = BudgetState.from_body(state.to_body(), "r")  # as the store keeps it
        elif what == "release" and p in slices:
            state = release(state, f"p{p}", now, policy)
            slices[p] = (0.0, 0.0)
        elif what == "spend" and p in slices:
            (key,), (shares, expires) = keys, slices[p]
            share = shares if isinstance(shares, float) else shares.get(key, 0.0)
            limit = share if now < expires else 0.0
            if not fits(costs[p], limit, rate):
                if costs[p] > policy.grain:  # any seat holds the others
                    state = state.needing(f"p{p}", (costs[p], now), now, policy.term) or state
            elif window_wait(spent[p, key], now, costs[p], limit, policy.window) == 0.0:
                spent[p, key].append((now, costs[p]))
    for key in _KEYS:
        every = sorted(w for (_, k), ws in spent.items() if k == key for w in ws)
        assert _most_in_a_window(every, policy.window) <= rate + 1e-6, key


def test_a_process_needing_more_than_its_share_takes_a_seat_and_gives_it_back() -> None:
    """A write dearer than a process's share is not sent beyond it: the process records
    what it needs, the grain in force grows to it (fewer, larger shares), the needy
    process is seated first, and once its need lapses the shares are even again."""
    state, now, shares = BudgetState(), 0.0, {}

    def round_of_renewals() -> None:
        nonlocal state, now
        for p in "abcd":
            state, shares[p] = lease(state, p, 10.0, now, POLICY, {"K"})
            now += 0.25

    for _ in range(4):
        round_of_renewals()
    assert shares == {p: pytest.approx(2.5) for p in "abcd"}
    assert not fits(8.0, 2.5, 10.0)
    state = state.needing("d", (8.0, now), now, POLICY.term) or state
    assert state.grain(now, POLICY) == 8.0
    for _ in range(3):  # the others come down as they renew; d waits for their claims
        round_of_renewals()
        assert sum(state.slices[p].claim(now, POLICY.linger, "K") for p in "abcd") <= 10.0
    assert shares == {"a": 0.0, "b": 0.0, "c": 0.0, "d": pytest.approx(10.0)}
    assert fits(8.0, shares["d"], 10.0)
    assert BudgetState.from_body(state.to_body(), "r").needs == state.needs
    now += POLICY.term  # d wanted nothing more: its need lapses
    for _ in range(4):
        round_of_renewals()
    assert state.grain(now, POLICY) == POLICY.grain
    assert shares == {p: pytest.approx(2.5) for p in "abcd"}
    # a write dearer than the rate itself goes alone, with the whole rate
    assert fits(12.0, 10.0, 10.0)
    assert not fits(12.0, 5.0, 10.0)


def test_a_process_giving_its_slice_up_takes_its_need_with_it() -> None:
    """A process that leaves (its run ended, or it is idle) needs nothing more: its need
    goes with its slice, and the grain in force is the policy's again (status had gone
    on saying the runner waited for a larger share after the run had ended)."""
    state = BudgetState()
    state, _ = lease(state, "a", 10.0, 0.0, POLICY, {"K"})
    state = state.needing("a", (8.0, 0.0), 0.0, POLICY.term) or state
    assert state.grain(0.5, POLICY) == 8.0
    state = release(state, "a", 0.5, POLICY)
    assert "a" not in state.needs
    assert state.grain(0.5, POLICY) == POLICY.grain


def test_processes_on_different_keys_each_take_the_whole_rate_and_share_a_common_key() -> None:
    """Two processes draining a source key each into one key they both fill: the whole
    rate on each one's own key, half on the one they share (a slice of every key had
    given each half the rate on its own key too)."""
    state, now, shares = BudgetState(), 0.0, {}
    for _ in range(6):
        for p, keys in (("p0", {"s0", "t"}), ("p1", {"s1", "t"})):
            state, _ = lease(state, p, 100.0, now, POLICY, keys)
            shares[p] = state.slices[p].keys
            now += 0.5
    assert shares == {"p0": {"s0": 100.0, "t": 50.0}, "p1": {"s1": 100.0, "t": 50.0}}
    state, share = lease(state, "p2", 100.0, now, POLICY)  # every key: what is left
    assert share == 0.0
    for gone in ("p0", "p2"):
        state = release(state, gone, now, POLICY)
    assert lease(state, "p1", 100.0, now, POLICY, {"t"})[1] == 50.0  # p0's lingers
    assert lease(state, "p1", 100.0, now + POLICY.linger + 0.01, POLICY, {"t"})[1] == 100.0


def test_a_key_a_process_leaves_stays_claimed_while_what_it_spent_there_counts() -> None:
    """A process that takes its slice off a key (its next unit writes others) may have
    spent its share there in the last second: another gets the key only after that."""
    state, _ = lease(BudgetState(), "p0", 100.0, 0.0, POLICY, {"a"})
    state, _ = lease(state, "p0", 100.0, 0.5, POLICY, {"b"})
    assert lease(state, "p1", 100.0, 0.6, POLICY, {"a"})[1] == 0.0
    assert lease(state, "p1", 100.0, 0.5 + POLICY.linger + 0.01, POLICY, {"a"})[1] == 100.0
    state, _ = lease(state, "p0", 100.0, 0.6, POLICY)  # every key, from some keys
    assert state.slices["p0"].keys is None
    assert not state.slices["p0"].priors.get("b")


def test_the_budget_record_stays_a_few_kilobytes() -> None:
    """Every process rewrites the record each second (on DynamoDB, a write unit a KB):
    eight runners of a reshard from 512 keys to 1,024, each unit naming its source key
    and the 512 it fills, joining one after another (their shares on the keys they fill
    shrink, the larger ones still claimed a while), keep it under 4 KB: keys in runs,
    shares to a thousandth of a unit, times to the millisecond (a share had taken 18
    digits, and eight slices of 32 keys each 10 KB)."""
    import json

    from shardex.migrate.budget import MOST_KEYS

    fills = {f"PENDING_PAYMENT#{k}" for k in range(512, 1024)}
    state, now = BudgetState(), 1_764_979_200.123456
    for turn in range(3):
        for p in range(8):
            keys = {f"PENDING_PAYMENT#{p * 3 + turn}", *fills}
            assert len(keys) <= MOST_KEYS
            state, _ = lease(state, f"vm-{p}:{1000 + p}:a1b2c3", 250.0, now, POLICY, keys)
            now += 0.13
    assert any(s.priors for s in state.slices.values())
    body = json.dumps(state.to_body(), separators=(",", ":"))
    assert len(body) < 4 * 1024, len(body)
    assert BudgetState.from_body(json.loads(body), "r") == state


@given(st.dictionaries(st.sampled_from(["P#", "#hot#P#", "Q#1", "R", "P#0", "P#01"])
                       .flatmap(lambda stem: st.integers(0, 40).map(lambda n: f"{stem}{n}")),
                       st.integers(0, 5).map(lambda n: n * 12.5), max_size=60),
       st.floats(0.0, 3.0))
def test_a_slice_s_keys_come_back_from_the_record_as_they_were(
        keys: dict[str, float], now: float) -> None:
    state = BudgetState(slices={"a": Slice(max(keys.values(), default=0.0), now + 3.0,
                                           keys=keys,
                                           priors={k: (v, now) for k, v in keys.items()})})
    assert BudgetState.from_body(state.to_body(), "r") == state


@pytest.mark.shardex_virtual
async def test_a_unit_writing_more_keys_than_a_slice_names_takes_a_share_of_every_key(
        shardex_store: Store) -> None:
    from shardex.migrate.budget import MOST_KEYS

    keys = {f"P#{k}" for k in range(MOST_KEYS)}
    async with Sharing().budget(shardex_store, "orders", "r1", rate=50.0, owner="w1",
                                clock=LoopClock()) as budget, budget.working(keys):
        assert budget.state.slices["w1"].keys == dict.fromkeys(keys, 50.0)
        async with budget.working({f"Q#{k}" for k in range(2)}):
            await budget.spend({"Q#0": 1.0})  # keys more than a slice names
            assert budget.state.slices["w1"].keys is None
            assert budget.share == 50.0


@pytest.mark.parametrize("processes", [1, 2, 3, 8])
def test_renewing_processes_converge_on_equal_shares(processes: int) -> None:
    state, now = BudgetState(), 0.0
    shares: dict[str, float] = {}
    for _ in range(6):  # rounds of renewals, a second apart
        for p in range(processes):
            state, shares[f"p{p}"] = lease(state, f"p{p}", 100.0, now, POLICY)
            now += 1.0 / processes
    # to a thousandth of a unit, rounded down (the record keeps them so)
    assert shares == {f"p{p}": pytest.approx(100.0 / processes, abs=1e-3)
                      for p in range(processes)}


def test_more_processes_than_grains_leave_the_extra_ones_waiting() -> None:
    policy = BudgetPolicy(grain=10.0)
    state, now, shares = BudgetState(), 0.0, {}
    for _ in range(5):
        for p in range(4):
            state, shares[p] = lease(state, f"p{p}", 25.0, now, policy)
            now += 0.25
    assert shares == {0: pytest.approx(12.5), 1: pytest.approx(12.5), 2: 0.0, 3: 0.0}


def test_a_damaged_budget_record_is_named() -> None:
    with pytest.raises(MalformedItem, match="budget record"):
        BudgetState.from_body({"cut_rate": None, "slices": {"a": ["x"]}}, "record 'b'")
    state = BudgetState(cut_rate=3.0, cut_at=1.0, slices={})
    assert BudgetState.from_body(state.to_body(), "r") == state
    for runs in ([["P#", 0, "9", 1.0]], [["P#", 0, 10**9, 1.0]], [[7, 0, 3, 1.0]], [["P#"]]):
        with pytest.raises(MalformedItem, match="budget record"):
            BudgetState.from_body({"cut_rate": None, "cut_at": 0.0, "slices": {
                "a": [1.0, 2.0, 0.0, 0.0]}, "keyed": {"a": {
                    "keys": {"keys": {}, "runs": runs}, "prior": [0.0, 0.0],
                    "priors": {"keys": {}, "runs": []}}}}, "record 'b'")


# -- processes on virtual time sharing one budget through the store -------------------------

async def _mover(store: Store, owner: str, rate: float, seconds: float,
                 loads: dict[tuple[str, int], float], keys: list[str], *,
                 throttle_after: float | None = None,
                 costs: tuple[float, ...] = (1.0, 2.0, 3.0),
                 sent: list[tuple[str, float]] | None = None) -> None:
    """A mover process: one worker per key, each writing as fast as the budget lets
    (each write costing one of ``costs``; ``sent`` gets (owner, cost) of each)."""
    clock = LoopClock()
    controls = Controls(store, "orders", "r1", rate=rate, clock=clock, owner=owner)
    rng = random.Random(owner)
    async with Budget(store, "orders", "r1", controls=controls, owner=owner, clock=clock,
                      rng=rng) as budget:
        end = clock.wall() + seconds

        async def worker(key: str, throttle_at: float | None) -> None:
            while clock.wall() < end:
                cost = rng.choice(costs)
                await budget.spend({key: cost})
                second = int(clock.wall())
                loads[key, second] = loads.get((key, second), 0.0) + cost
                if sent is not None:
                    sent.append((owner, cost))
                if throttle_at is not None and clock.wall() >= throttle_at:
                    throttle_at = None
                    await budget.throttled()
                await asyncio.sleep(rng.uniform(0.0, 0.01))  # the write itself

        throttle_at = None if throttle_after is None else clock.wall() + throttle_after
        await asyncio.gather(*(worker(key, throttle_at) for key in keys))


def _per_second(loads: dict[tuple[str, int], float], key: str) -> dict[int, float]:
    return {second: units for (k, second), units in loads.items() if k == key}


@pytest.mark.shardex_virtual
@pytest.mark.parametrize("processes", [1, 2, 4, 8])
async def test_the_load_on_any_shard_key_stays_within_the_rate_whatever_the_processes(
        shardex_store: Store, processes: int) -> None:
    loads: dict[tuple[str, int], float] = {}
    keys = ["PENDING#0", "PENDING#1"]
    await asyncio.gather(*(_mover(shardex_store, f"w{p}", 100.0, 20.0, loads, keys)
                           for p in range(processes)))
    for key in keys:
        per_second = _per_second(loads, key)
        assert max(per_second.values()) <= 100.0 * 1.05, per_second
        steady = sorted(per_second.items())[5:-2]  # after the shares settle
        assert sum(u for _, u in steady) / len(steady) >= 80.0, per_second


@pytest.mark.parametrize("processes", [2, 4])
def test_writes_dearer_than_a_process_s_share_keep_the_key_within_the_rate(
        processes: int) -> None:
    """At a rate of 10 units a second, processes each with 15 writes to send, a third of
    them costing 8 units (entries of several KB), put no more than the rate on the key
    in any second and all finish: a dear write waits for a share that holds it rather
    than going beyond its share (which had put 16 and 20 units on the key in a second),
    and the process seated for its dear writes keeps the seat while it writes them and
    the cheaper ones between, then the next waiting has it."""
    def run(processes: int) -> tuple[dict[int, float], dict[str, float]]:
        async def main() -> tuple[dict[int, float], dict[str, float]]:
            store, clock = MemoryStore(seed=1), LoopClock()
            loads: dict[int, float] = defaultdict(float)
            finished: dict[str, float] = {}

            async def process(owner: str) -> None:
                async with Sharing().budget(store, "orders", "r1", rate=10.0, owner=owner,
                                            clock=clock) as budget:
                    began = clock.wall()
                    for cost in (1.0, 2.0, 8.0) * 5:
                        await budget.spend({"K": cost})
                        loads[int(clock.wall() - began)] += cost
                        await clock.sleep(0.01)  # the write itself
                    finished[owner] = clock.wall() - began

            await asyncio.gather(*(process(f"w{p}") for p in range(processes)))
            return loads, finished

        return run_virtual(main())

    loads, finished = run(processes)
    assert max(loads.values()) <= 10.0 * 1.05, loads
    assert len(finished) == processes
    # one after the other, each as fast as alone (7.0 s for its 55 units), the seat
    # handed over in a second or two (the claims of the one done end): 15.7 s and 33.0 s
    # (the seat had lapsed between dear writes, each waiting its turn again: 17.6 s and
    # 43.8 s)
    alone = max(run(1)[1].values())
    assert max(finished.values()) <= processes * alone + 2.5 * (processes - 1), finished


@pytest.mark.shardex_virtual(store="memory://?seed=1")
async def test_more_processes_than_seats_keep_the_rate_in_use(shardex_store: Store) -> None:
    """Eight processes at a rate of 10 (five seats of 2 units), writes of 1 and 2 units:
    the unseated wait for a seat as they come free, the seated keep theirs, and the key
    takes about the rate. A process without a seat had recorded a need of its 2 units,
    seated first in turn: the seats went round and the key took 4.2 units a second
    where it had taken 8.8."""
    loads: dict[tuple[str, int], float] = {}
    await asyncio.gather(*(_mover(shardex_store, f"w{p}", 10.0, 30.0, loads, ["PENDING#0"],
                                  costs=(1.0, 2.0)) for p in range(8)))
    per_second = _per_second(loads, "PENDING#0")
    assert max(per_second.values()) <= 10.0 * 1.05, per_second
    steady = [units for _, units in sorted(per_second.items())[5:-2]]
    assert sum(steady) / len(steady) >= 8.0, per_second


@pytest.mark.shardex_virtual
async def test_a_throttle_seen_by_one_process_halves_every_process_s_rate(
        shardex_store: Store) -> None:
    loads: dict[tuple[str, int], float] = {}
    await asyncio.gather(*(_mover(shardex_store, f"w{p}", 100.0, 12.0, loads, ["K"],
                                  throttle_after=None if p else 5.0)
                           for p in range(4)))
    per_second = dict(sorted(_per_second(loads, "K").items()))
    seconds = sorted(per_second)
    began = seconds[0]
    assert per_second[began + 4] >= 80.0
    # the cut (about 5 s in) holds every process near half, then grows back 5 units a second
    assert per_second[began + 7] <= 60.0, per_second
    assert per_second[began + 11] > per_second[began + 7], per_second
    record = await shardex_store.get_record("orders", record_key("r1", "budget"))
    assert record is not None
    assert record.body["cut_rate"] == pytest.approx(50.0, rel=0.1)


@pytest.mark.shardex_virtual
async def test_pause_throttle_and_resume_reach_every_running_process_within_seconds(
        shardex_store: Store) -> None:
    loads: dict[tuple[str, int], float] = {}
    clock = LoopClock()
    began = int(clock.wall())

    async def operator() -> None:
        await asyncio.sleep(5)
        await change_control(shardex_store, "orders", "r1",
                             lambda c: type(c)(paused=True, rate=c.rate), clock=clock)
        await asyncio.sleep(5)
        await change_control(shardex_store, "orders", "r1",
                             lambda c: type(c)(paused=c.paused, rate=40.0), clock=clock)
        await asyncio.sleep(2)
        await change_control(shardex_store, "orders", "r1",
                             lambda c: type(c)(paused=False, rate=c.rate), clock=clock)

    await asyncio.gather(operator(), *(_mover(shardex_store, f"w{p}", 100.0, 20.0, loads,
                                              ["K"]) for p in range(3)))
    per_second = _per_second(loads, "K")
    load = [per_second.get(began + s, 0.0) for s in range(21)]
    assert min(load[3:5]) >= 80.0, load  # moving at 100 once the shares settle
    assert max(load[8:12]) == 0.0, load  # paused within 3 s, and held through the change
    assert all(30.0 <= u <= 42.0 for u in load[15:19]), load  # resumed at the new rate


@pytest.mark.shardex_virtual
async def test_a_pause_made_before_any_runner_ran_still_names_who_paused(
        shardex_store: Store) -> None:
    """The first runner records its rate in the control record: where an operator paused
    the migration before it ran, the record still names the operator (the page and
    ``status`` said "paused by" the runner's worker id)."""
    clock = LoopClock()
    await change_control(shardex_store, "orders", "r1", lambda c: replace(
        c, paused=True, changed_at=clock.wall(), changed_by="shardex reshard pause",
        reason="paused by an operator"), clock=clock)
    controls = Controls(shardex_store, "orders", "r1", rate=25.0, clock=clock, owner="w1")
    assert await controls.refresh() == 0.0
    control = controls.control
    assert (control.paused, control.rate) == (True, 25.0)
    assert (control.changed_by, control.reason) == ("shardex reshard pause",
                                                    "paused by an operator")
    assert describe(control, None).startswith("paused by shardex reshard pause")

    # a rate changed while paused keeps the pause's author in the summary
    throttled = replace(control, rate=16.0, changed_by="shardex reshard throttle",
                        paused_by="shardex reshard pause")
    assert describe(throttled, None) == "paused by shardex reshard pause; resume to go on"
    # before any runner or operator: no rate is in force (it read "moving at up to 0")
    assert describe(Control(), None) == "no rate yet: the first runner's --rate sets it"
    document = control_document(Control(), None)
    assert (document["recorded"], document["changed_at"]) == (False, None)
    assert controls_lines({**document, "budget": {"in_force": 0.0, "rate": 0.0,
                                                  "slices": []}}) == [
        "  controls: no rate yet: the first runner's --rate sets it"]
    # paused, it said "budget: 0 of 0 write units ... in force" (a probe): the rate it
    # resumes at is named
    paused = control_document(throttled, 3)
    assert controls_lines({**paused, "budget": {"in_force": 0.0, "rate": 0.0, "slices": [
        {"owner": "w1", "share": 0.0, "expires": 1.0}]}})[1] == (
        "  budget: none in force while paused (16 write units a second per shard key once "
        "resumed); runners' slices: w1 0")
    # runners moving through a budget shared in Redis hold no slice in the store: it
    # read "runners' slices: none" beside two runners that held units (by hand on
    # DynamoDB Local, --budget-redis)
    moving = control_document(replace(throttled, paused=False, paused_by=None), 4)
    shared = {**moving, "budget": {"in_force": 16.0, "rate": 16.0, "slices": []}}
    assert controls_lines(shared, working=True)[1] == (
        "  budget: 16 of 16 write units a second per shard key in force; runners' slices: "
        "none in the store (a budget shared through Redis, --budget-redis, keeps none "
        "there)")
    assert controls_lines(shared)[1].endswith("runners' slices: none")
    # a slice of some keys says on how many, and its least and largest share there
    keyed = {**moving, "budget": {"in_force": 16.0, "rate": 16.0, "slices": [
        {"owner": "w1", "share": 16.0, "least": 4.0, "keys": 5, "expires": 1.0},
        {"owner": "w2", "share": 40 / 3, "least": 40 / 3, "keys": 1, "expires": 1.0},
        {"owner": "w3", "share": 4.0, "least": 4.0, "keys": None, "expires": 1.0}]}}
    assert controls_lines(keyed)[1].endswith(
        "runners' slices: w1 4-16 on 5 keys, w2 13.3 on 1 key, w3 4")
    # a runner whose next write costs more than its share says so, and why shares grew
    needy = {**moving, "budget": {**keyed["budget"], "needs": [
        {"owner": "w3", "units": 12.0, "since": 1.0, "expires": 4.0}]}}
    assert controls_lines(needy)[2:] == [
        "  waiting for a larger share: w3 (writes of 12 units; every share is at least "
        "that meanwhile, fewer runners seated)"]
    # seated with it, the runner holds it while its writes stay that dear
    seated = {**moving, "budget": {**keyed["budget"], "needs": [
        {"owner": "w2", "units": 12.0, "since": 1.0, "expires": 4.0}]}}
    assert controls_lines(seated)[2:] == [
        "  holding a larger share: w2 (writes of 12 units; every share is at least "
        "that meanwhile, fewer runners seated)"]

    # with no change before it, the first runner's rate is the change it names
    fresh = Controls(shardex_store, "orders", "r2", rate=25.0, clock=clock, owner="w1")
    assert await fresh.refresh() == 25.0
    assert (fresh.control.changed_by, fresh.control.reason) == ("w1", "the first runner's rate")


# -- a running mover follows the rate in force -----------------------------------------------

async def _filled(shards: int, entries: int) -> MemoryStore:
    """A store whose index ``orders`` holds ``entries`` of PENDING on ``shards`` keys."""
    store = MemoryStore(seed=1)
    async with ShardedIndex(store, "orders", Routing(overrides={"PENDING": ShardPolicy(
            shards)}), routing_lease=1.0) as index:
        for i in range(entries):
            assert await index.put("PENDING", f"o-{i}")
    return store


async def _reshard_under_controls(shards: int, to: int, rate: float, steps: list[tuple[
        float, Callable[[Control], Control]]], *, workers: int = 4) -> dict[str, dict[int, float]]:
    """PENDING's 800 entries on ``shards`` keys resharded to ``to`` by one runner at
    ``rate`` with ``workers``, its controls changed by ``steps`` ((virtual seconds after
    the start, change)) meanwhile: the write units it put on each key it drained or filled,
    by second (``spent`` and ``landed`` merged)."""
    store = await _filled(shards, 800)
    async with Resharder(store, "orders", rate=rate, workers=workers, unit_lease=2.0,
                         sharing=Sharing(poll=0.5), seed=1) as rs:
        await rs.start({"PENDING": ShardPolicy(to)}, margin=0.2)
        meta = (await rs.routing()).reshard
        assert meta is not None
        running = asyncio.ensure_future(rs.run(until="done"))
        clock = LoopClock()
        began = clock.now()
        for at, change in steps:
            await clock.sleep(max(0.0, began + at - clock.now()))
            await change_control(store, "orders", meta.id, change, clock=clock)
        assert (await running).state == "done"
        loads: dict[str, dict[int, float]] = {}
        for spent in (rs.mover_units, rs.mover_landed):
            for key, seconds in spent.items():
                for second, units in seconds.items():
                    mine = loads.setdefault(key, {})
                    mine[second - int(began)] = mine.get(second - int(began), 0.0) + units
        return loads


def _peak(loads: dict[str, dict[int, float]], after: int) -> float:
    return max(units for seconds in loads.values() for second, units in seconds.items()
               if second >= after)


def test_a_lower_rate_holds_on_the_key_a_fan_in_fills() -> None:
    """Four keys drain into one: each unit's pace is the rate shared over the four, and a
    ``throttle`` to a quarter must lower it too (it held the target key at 4x the new rate
    until the units ended: a probe on DynamoDB Local)."""
    loads = run_virtual(_reshard_under_controls(4, 1, 40.0, [
        (4.0, lambda c: replace(c, rate=10.0))]))
    assert _peak(loads, after=0) <= 40.0 * 1.05
    assert _peak(loads, after=4 + 2) <= 10.0 * 1.05, loads


def test_a_higher_rate_is_taken_up_by_the_running_units() -> None:
    """One key fans out to four at 10 units a second, then ``throttle --rate 40``: the
    running unit speeds up within a few seconds (it kept the rate it started with)."""
    loads = run_virtual(_reshard_under_controls(1, 4, 10.0, [
        (4.0, lambda c: replace(c, rate=40.0))], workers=1))
    assert _peak(loads, after=0) <= 40.0 * 1.05
    before = max(u for s in loads.values() for t, u in s.items() if t < 4)
    assert before <= 10.0 * 1.05
    assert _peak(loads, after=4 + 3) >= 30.0, loads


def test_a_unit_started_while_paused_is_paced_at_the_migration_s_rate() -> None:
    """The migration's rate is 40 and it is paused when a runner given --rate 400 starts;
    after ``resume``, its units drain four keys into one at 40 on the one, not at 400
    shared out (they were paced at the process's own rate while the controls said 0)."""
    loads = run_virtual(_reshard_under_controls(4, 1, 400.0, [
        (0.0, lambda c: replace(c, rate=40.0, paused=True)),
        (3.0, lambda c: replace(c, paused=False))]))
    assert _peak(loads, after=0) <= 40.0 * 1.05, loads


def test_a_paused_mover_keeps_its_unit_past_its_lease_and_says_why_it_stands() -> None:
    """Paused for five unit leases, a running mover holds its unit (status lists it with
    its lease) and no other process takes it over; resumed, it finishes. The leases had
    lapsed while the moves waited on the budget, and the run's output said nothing of
    the pause (a probe on DynamoDB Local: status said no runners, and a second process
    took the unit over)."""
    async def main() -> None:
        store = await _filled(1, 300)
        clock = LoopClock()
        options = {"rate": 20.0, "unit_lease": 2.0, "sharing": Sharing(poll=0.5)}
        notes: list[str] = []
        async with Resharder(store, "orders", worker="a", seed=1,
                             progress=lambda p: notes.append(p.note), **options) as rs:
            await rs.start({"PENDING": ShardPolicy(4)}, margin=0.2)
            routing = await rs.routing()
            assert routing.reshard is not None
            migration = routing.reshard.id
            running = asyncio.ensure_future(rs.run(until="done"))
            await clock.sleep(4.0)
            await change_control(store, "orders", migration,
                                 lambda c: replace(c, paused=True, paused_by="ops@host"),
                                 clock=clock)
            async with Resharder(store, "orders", worker="b", seed=2, **options) as other:
                rival = asyncio.ensure_future(other.run(until="done"))
                for _ in range(5):
                    await clock.sleep(2.0)
                    units = await rs.units(routing)
                    assert [u.owner for u in units if u.leased_at(store.clock.wall())] \
                        == ["a"], units
                await change_control(store, "orders", migration,
                                     lambda c: replace(c, paused=False), clock=clock)
                assert (await running).state == "done"
                assert (await rival).state == "done"
            # the run says why it stands still (it had said "moving entries", 0 a second)
            paused = "paused by ops@host; resume to go on"
            assert notes.index("moving entries") < notes.index(paused) \
                < len(notes) - 1 - notes[::-1].index("moving entries"), notes
        async with ShardedIndex(store, "orders") as index:
            assert await index.count("PENDING") == 300

    run_virtual(main())


def test_a_run_whose_rate_is_not_the_migration_s_says_which_one_it_follows() -> None:
    """The migration's rate is the first runner's (or an operator's): a later `run --rate
    20` follows it and said nothing, so a backfill asked for at 20 ran at 50 without a
    word (by hand on DynamoDB Local). It now says the rate it follows, who set it, and
    how to change it; a run at the migration's own rate says nothing of it."""
    async def main() -> None:
        store = await _filled(1, 100)
        clock = LoopClock()
        notes: list[str] = []
        options = {"unit_lease": 2.0, "sharing": Sharing(poll=0.5)}
        async with Resharder(store, "orders", worker="a", seed=1, rate=50.0, **options) as rs:
            await rs.start({"PENDING": ShardPolicy(4)}, margin=0.2)
            routing = await rs.routing()
            assert routing.reshard is not None
            migration = routing.reshard.id
            await change_control(store, "orders", migration,
                                 lambda c: replace(c, rate=50.0, changed_by="ops@host"),
                                 clock=clock)
        async with Resharder(store, "orders", worker="b", seed=2, rate=20.0,
                             progress=lambda p: notes.append(p.note), **options) as other:
            assert (await other.run(until="done")).state == "done"
        said = [n for n in notes if "rate" in n]
        assert said == ["following the migration's rate, 50 write units a second per shard "
                        "key (its controls last changed by ops@host), not this run's --rate 20: "
                        "change it with "
                        "'shardex reshard throttle --rate R'"], notes
        notes.clear()
        async with Resharder(store, "orders", worker="c", seed=3, rate=50.0,
                             progress=lambda p: notes.append(p.note), **options) as same:
            await same.start({"PENDING": ShardPolicy(2)}, margin=0.2)
            routing = await same.routing()
            assert routing.reshard is not None
            await change_control(store, "orders", routing.reshard.id,
                                 lambda c: replace(c, rate=50.0, changed_by="ops@host"),
                                 clock=clock)
            assert (await same.run(until="done")).state == "done"
        assert not [n for n in notes if "rate" in n], notes

    run_virtual(main())


def test_a_runner_with_nothing_to_work_leaves_the_rate_to_the_one_that_works(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runners of a reshard whose one source key the first works: the second has no
    unit, gives its slice up, and the first goes on at the whole rate. The idle one had
    kept an equal share, and the key was drained at half the rate (a probe on DynamoDB
    Local); the load stays within the rate all along (by the second each move is sent)."""
    sent = count_moves(monkeypatch)

    async def main() -> None:
        store = await _filled(1, 400)
        clock = LoopClock()
        options = {"rate": 20.0, "unit_lease": 2.0, "sharing": Sharing(poll=0.5)}
        async with Resharder(store, "orders", worker="a", seed=1, **options) as rs, \
                Resharder(store, "orders", worker="b", seed=2, **options) as other:
            await rs.start({"PENDING": ShardPolicy(4)}, margin=0.2)
            running = asyncio.ensure_future(rs.run(until="done"))
            await clock.sleep(4.0)
            began = int(clock.now())
            rival = asyncio.ensure_future(other.run(until="done"))
            assert (await running).state == "done"
            assert (await rival).state == "done"
        drained = {s - began: u for s, u in rs.mover_units["PENDING"].items()}
        assert not other.mover_units
        assert max(sent.values()) <= 20.0 * 1.05
        steady = [drained.get(s, 0.0) for s in range(3, 12)]
        assert sum(steady) / len(steady) >= 16.0, drained

    run_virtual(main())


def test_runners_moving_different_source_keys_each_take_the_rate_on_theirs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Four runners of one worker each reshard four keys to eight: each drains its own
    source key, and the four fill the new keys together. With a slice of every key each
    runner drained its key at a quarter of the rate, and the four took 1.23x one runner's
    time (``benchmarks/bench_runners.py``); with a slice of the keys its unit writes, each
    takes the whole rate on its source key and its part of the shared ones. The load on
    every key stays within the rate, by the second each move is sent."""
    sent = count_moves(monkeypatch)

    async def reshard(runners: int) -> float:
        return await _runners_to_verified(
            await _filled(4, 1600), runners, ShardPolicy(8), margin=0.2, rate=100.0,
            unit_lease=2.0, sharing=Sharing(poll=0.5))

    alone = run_virtual(reshard(1))
    sent.clear()
    four = run_virtual(reshard(4))
    assert max(sent.values()) <= 100.0 * 1.05, sent
    assert four <= alone * 0.75, (four, alone)


async def _runners_to_verified(store: MemoryStore, runners: int, policy: ShardPolicy, *,
                               margin: float, **options: Any) -> float:
    """Reshard PENDING of ``store`` to ``policy`` with ``runners`` runners at once (each a
    ``Resharder`` of ``options``), to verified; the virtual seconds it took."""
    async with contextlib.AsyncExitStack() as stack:
        each = [await stack.enter_async_context(Resharder(
            store, "orders", seed=i, worker=f"r{i}", **options)) for i in range(runners)]
        await each[0].start({"PENDING": policy}, margin=margin)
        began = store.clock.now()
        for result in await asyncio.gather(*(r.run(until="verified") for r in each)):
            assert result.state == "verified"
        return store.clock.now() - began


def test_runners_of_moves_dearer_than_their_shares_go_no_slower_than_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runners each drain a key of entries of 4 KB (a move costs 10 units on each key
    it writes) into the two keys they both fill, at a rate of 10.5: a runner's share of a
    shared key, 5.25, holds no move. The needy runner is seated and keeps its seat while
    its moves stay that dear, so the two take about one runner's time (handing the seat
    over after each move, 2.2x), and no key takes more than the rate in any second."""
    sent = count_moves(monkeypatch)

    async def reshard(runners: int) -> float:
        store = MemoryStore(seed=1)
        async with ShardedIndex(store, "orders", Routing(overrides={"PENDING": ShardPolicy(
                2)}), routing_lease=1.0) as index:
            for i in range(120):
                assert await index.put("PENDING", f"o-{i:05d}", sort=f"{i:05d}",
                                       attrs={"blob": "x" * 4200})
        return await _runners_to_verified(store, runners, ShardPolicy(4), margin=0.5,
                                          rate=10.5, workers=1, sharing=Sharing())

    alone = run_virtual(reshard(1))
    assert max(sent.values()) <= 10.5 * 1.05, sent
    sent.clear()
    two = run_virtual(reshard(2))
    assert max(sent.values()) <= 10.5 * 1.05, sent
    assert two <= alone * 1.25, (two, alone)


def test_status_names_a_runner_held_by_an_outside_signal(tmp_path: Path) -> None:
    """A runner held by its throttle file is named in status, with the reason, while the
    hold lasts, and no longer once it ends. Status had said "moving at up to 20" with the
    held runner's slice at 0 as the only hint: the hold is the runner's own signal (a
    probe on DynamoDB Local)."""
    hold = tmp_path / "hold"
    hold.touch()

    async def main() -> None:
        store = await _filled(1, 300)
        clock = LoopClock()
        sharing = Sharing(poll=0.5, signals=(FileSignal(str(hold)),))
        async with Resharder(store, "orders", worker="a", seed=1, rate=20.0,
                             unit_lease=2.0, sharing=sharing) as rs:
            await rs.start({"PENDING": ShardPolicy(4)}, margin=0.2)
            routing = await rs.routing()
            assert routing.reshard is not None
            migration = routing.reshard.id
            running = asyncio.ensure_future(rs.run(until="done"))
            await clock.sleep(3.0)
            status = await migration_status(store, "orders", migration, clock=clock)
            assert [(h["owner"], h["reason"]) for h in status["budget"]["holds"]] == [
                ("a", f"throttle file {hold} exists")], status
            assert f"  held: a: throttle file {hold} exists" in controls_lines(status)
            hold.unlink()
            await clock.sleep(3.0)
            status = await migration_status(store, "orders", migration, clock=clock)
            assert status["budget"]["holds"] == [], status
            assert not any(line.startswith("  held:") for line in controls_lines(status))
            assert (await running).state == "done"

    run_virtual(main())


@pytest.mark.redis
@pytest.mark.parametrize(("rate", "cost"), [(1.5, 2.0), (0.5, 1.0)])
def test_a_redis_budget_takes_writes_dearer_than_a_second_of_its_rate(
        rate: float, cost: float) -> None:
    """Through Redis, whose moving windows count whole units a whole second: a move of 2
    units at a rate of 1.5, or of 1 at 0.5, had waited for good (its window never held
    it). It is now taken a window's worth at a time (real time: about a second)."""
    url = redis_server.require_url()

    async def main() -> None:
        store = MemoryStore(seed=1)
        clock = LoopClock()
        controls = Controls(store, "orders", "r1", rate=rate, clock=clock, owner="a")
        shared = SharedBudgets(url, prefix=redis_server.unique_prefix())
        async with Budget(store, "orders", "r1", controls=controls, owner="a", clock=clock,
                          redis=shared) as budget:
            began = clock.wall()
            async with asyncio.timeout(10.0):
                await budget.spend({"PENDING": cost})
                await budget.spend({"PENDING": cost})
            # the second waited for the first to leave its window: the rate holds
            assert clock.wall() - began >= cost / rate - 0.1

    asyncio.run(main())


@pytest.mark.redis
def test_a_redis_budget_records_its_runner_s_outside_hold_while_it_lasts(tmp_path: Path) -> None:
    """Through Redis nothing is leased in the store, but a held runner's reason is: status
    reads it there, and it goes when the hold ends (real time, no waits)."""
    url = redis_server.require_url()
    hold = tmp_path / "hold"
    hold.touch()

    async def main() -> None:
        store = MemoryStore(seed=1)
        clock = LoopClock()
        controls = Controls(store, "orders", "r1", rate=10.0, clock=clock, owner="a",
                            signals=[FileSignal(str(hold))])
        shared = SharedBudgets(url, prefix=redis_server.unique_prefix())

        async def holds() -> list[tuple[str, str]]:
            status = await migration_status(store, "orders", "r1", clock=clock)
            return [(h["owner"], h["reason"]) for h in status["budget"]["holds"]]

        async with Budget(store, "orders", "r1", controls=controls, owner="a", clock=clock,
                          redis=shared) as budget:
            assert await holds() == [("a", f"throttle file {hold} exists")]
            hold.unlink()
            await budget.renew()
            assert await holds() == []
            hold.touch()
            await budget.renew()
        assert await holds() == []  # given up with the budget

    asyncio.run(main())


@given(st.floats(0.5, 50.0), st.lists(st.floats(0.1, 4.0), min_size=5, max_size=40))
@settings(deadline=None, max_examples=40)
def test_a_pace_holds_every_second_to_its_rate(rate: float, costs: list[float]) -> None:
    """Sends of one unit's pace, as fast as it lets them: no one-second window holds more
    than the rate, and one dearer than the rate goes alone, for cost / rate seconds."""
    sent: list[tuple[float, float]] = []

    async def main() -> None:
        clock = LoopClock()
        pace = Pace(rate, clock)
        for cost in costs:
            await pace.wait(cost)
            sent.append((clock.now(), cost))

    run_virtual(main())
    for start, _ in sent:
        held = sum(c for t, c in sent if start <= t < start + 1.0 - 1e-9)
        assert held <= max(rate, max(costs)) + 1e-6
    for (t, c), (later, _) in itertools.pairwise(sent):
        if c > rate:
            assert later - t >= c / rate - 1e-6


@pytest.mark.shardex_virtual
async def test_a_process_that_gave_its_slice_up_takes_one_again_before_it_spends(
        shardex_store: Store) -> None:
    """A process idle for a term gives its slice up; a spend after that leases a slice
    first. With its shares per key kept in memory, it had spent on them with no slice
    in the record until its last lease ran out, while another process could take the
    whole rate once what it gave up stopped counting."""
    clock = LoopClock()
    async with Sharing().budget(shardex_store, "orders", "r1", rate=50.0, owner="w1",
                                clock=clock) as budget:
        await budget.spend({"K": 5.0})  # a key no unit declared
        while budget.state.slices["w1"].live(clock.wall()):  # idle: the keeper gives it up
            await clock.sleep(0.05)
        await budget.spend({"K": 5.0})  # at once: its last lease has not run out
        record = await shardex_store.get_record("orders", record_key("r1", "budget"))
        assert record is not None
        mine = BudgetState.from_body(record.body, "r").slices["w1"]
        assert mine.live(clock.wall())
        assert mine.keys == {"K": 50.0}


@pytest.mark.parametrize("offset", [0.0, 0.25, 0.5, 0.75])
def test_a_process_joining_a_key_takes_its_part_as_soon_as_the_claims_in_its_way_end(
        offset: float) -> None:
    """A process that comes to a key another holds in full gets its half once the holder
    has renewed (within a third of a term) and what it gave up stops counting (a window
    and the skew): it renews then, not at its own next third of a term, which had cost
    it up to a second more (2.1 s to 2.9 s, where 1.3 s to 2.1 s will do)."""
    async def main() -> float:
        store, clock = MemoryStore(seed=1), LoopClock()

        def budget(owner: str) -> Budget:
            return Sharing().budget(store, "orders", "r1", rate=100.0, owner=owner,
                                    clock=clock)

        async with budget("a") as a, budget("b") as b:
            async def spend(on: Budget, until: float) -> None:
                async with on.working({"K"}):
                    while clock.wall() < until:
                        await on.spend({"K": 2.0})

            end = clock.wall() + 12.0
            first = asyncio.ensure_future(spend(a, end))
            await clock.sleep(5.0 + offset)
            joined = clock.wall()
            second = asyncio.ensure_future(spend(b, end))
            while b.state.slices["b"].on("K") < 50.0 - 1e-3:
                await clock.sleep(0.01)
            took = clock.wall() - joined
            await asyncio.gather(first, second)
            return took

    took = run_virtual(main())
    assert took <= POLICY.term / 3 + POLICY.linger + 0.1, took


def test_a_process_short_of_its_fair_share_knows_when_the_claims_in_its_way_end() -> None:
    from shardex.migrate.shares import unblocked_at

    state, _ = lease(BudgetState(), "a", 100.0, 0.0, POLICY, {"K"})
    state, _ = lease(state, "b", 100.0, 0.5, POLICY, {"K"})  # a holds K in full
    assert unblocked_at(state, "b", 100.0, 0.5, POLICY) == state.slices["a"].expires \
        + POLICY.linger  # a's renewal is not known: its slice's last window, at worst
    state, _ = lease(state, "a", 100.0, 1.0, POLICY, {"K"})  # a gives half up
    assert unblocked_at(state, "b", 100.0, 1.1, POLICY) == state.slices["a"].priors["K"][1]
    state, _ = lease(state, "b", 100.0, 1.0 + POLICY.linger + 0.01, POLICY, {"K"})
    assert state.slices["b"].on("K") == 50.0
    assert unblocked_at(state, "b", 100.0, 2.5, POLICY) is None  # its fair share


def test_a_shared_budget_that_does_not_answer_stops_the_run_naming_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With a --budget-redis that does not answer, every move was left to the parity
    check as an item's failure: 'moved 0, remaining 0', then 'the parity check found 157
    gaps ... roll back or fix them'. The run stops once the budget has not answered for
    10 s, naming it, and nothing moved."""
    from shardex.errors import ReshardRefused, Unavailable

    async def nothing(self: SharedBudgets) -> None:
        return None

    async def refused(self: SharedBudgets, *args: Any) -> float | None:
        raise Unavailable(f"shared admission budgets at {self.url}: Error 111 connecting")

    monkeypatch.setattr(SharedBudgets, "open", nothing)
    monkeypatch.setattr(SharedBudgets, "close", nothing)
    monkeypatch.setattr(SharedBudgets, "take", refused)
    monkeypatch.setattr(SharedBudgets, "room", refused)

    async def main() -> None:
        store = MemoryStore(seed=1)
        async with ShardedIndex(store, "orders", Routing(), routing_lease=1.0) as app:
            for i in range(30):
                await app.put("PENDING", f"o-{i:03d}", sort=f"{i:03d}")
        async with Resharder(store, "orders", worker="a", seed=1, unit_lease=2.0,
                             sharing=Sharing(redis="redis://127.0.0.1:1/0")) as runner:
            await runner.start({"PENDING": ShardPolicy(4)}, margin=0.5)
            with pytest.raises(ReshardRefused, match=r"shared budget \(shared admission "
                                                     r"budgets at redis://127.0.0.1:1/0: "
                                                     r"Error 111 connecting\) has not "
                                                     r"answered for 10 s"):
                await runner.run()
            assert (await runner.routing()).state == "write-new"
        assert await store.count("orders", "PENDING") == 30

    run_virtual(main())


@pytest.mark.redis
def test_a_redis_budget_counts_each_key_of_a_move_in_the_second_it_goes() -> None:
    """Through Redis each key's window was taken in turn: a move's target key counted at
    once, then held by its source key's wait, went a second after it was counted, beside
    the next move of that key (4 processes: 1.4x the rate on one key in a second). Every
    key of a move is taken once all have room (real time: about two seconds)."""
    url = redis_server.require_url()

    async def main() -> None:
        store = MemoryStore(seed=1)
        clock = LoopClock()
        controls = Controls(store, "orders", "r1", rate=2.0, clock=clock, owner="a")
        shared = SharedBudgets(url, prefix=redis_server.unique_prefix())
        async with Budget(store, "orders", "r1", controls=controls, owner="a", clock=clock,
                          redis=shared) as budget:
            async with asyncio.timeout(10.0):
                await budget.spend({"S": 2.0})  # the source key's second is full
                await budget.spend({"T": 2.0, "S": 2.0})  # goes once S has room
                went = clock.wall()
                await budget.spend({"T": 2.0})
            # T's window holds the move that went: the next waits for it to pass
            assert clock.wall() - went >= 0.9

    asyncio.run(main())
