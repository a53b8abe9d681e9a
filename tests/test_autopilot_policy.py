"""The autopilot's pure policy: its properties drawn by Hypothesis, and a few examples."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import shardex
from shardex.autopilot import (
    Autopilot,
    AutopilotPolicy,
    Decision,
    FileHeat,
    HeatWindow,
    KeyHeat,
    KeyView,
    MigrationView,
    PlannerSizer,
    TableFacts,
    decide,
    load_policy,
)
from shardex.autopilot.runner import Runner
from shardex.errors import InvalidInput, InvalidPolicy
from shardex.sim.profiles import profile

CEILING = 1000.0
TABLE = TableFacts(write_ceiling=CEILING, write_limit=40_000.0)


def share(policy: AutopilotPolicy, capacity: float) -> float:
    """A budget of ``admit_share`` of ``capacity``, within the table's write limit."""
    return policy.admit_share * min(capacity, TABLE.write_limit)


def planner(headroom: float) -> object:
    """A sizer as the planner sizes on a table split for heat: the per-key rule."""
    def size(key: str, peak: float, tier: str | None) -> int:
        return max(1, math.ceil(round(peak * headroom / CEILING, 9)))
    return size


@st.composite
def policies(draw: st.DrawFn) -> AutopilotPolicy:
    up = draw(st.floats(0.5, 1.0))
    down = draw(st.floats(0.05, up - 0.05))
    t_up = draw(st.floats(1.0, 120.0))
    low = draw(st.integers(1, 4))
    return AutopilotPolicy(
        up=up, down=down, t_up=t_up, t_down=draw(st.floats(t_up, 3600.0)),
        min_interval=draw(st.floats(0.0, 900.0)), max_migrations=draw(st.integers(1, 3)),
        min_shards=low, max_shards=draw(st.integers(low, 128)),
        tier=draw(st.sampled_from([None, "dedicated"])), lead=draw(st.floats(0.0, 120.0)))


@st.composite
def keys(draw: st.DrawFn, policy: AutopilotPolicy, now: float) -> tuple[KeyHeat, KeyView]:
    shards = draw(st.integers(1, 64))
    capacity = shards * CEILING
    floor = draw(st.floats(0.0, 2.5 * capacity))
    peak_up = floor + draw(st.floats(0.0, capacity))
    peak_down = peak_up + draw(st.floats(0.0, capacity))
    heat = KeyHeat(seconds=draw(st.floats(0.0, 2 * policy.t_down)), floor_up=floor,
                   peak_up=peak_up, peak_down=peak_down, slope=draw(st.floats(-50.0, 50.0)),
                   last=draw(st.floats(floor, peak_up)), read_peak=0.0)
    migration = None
    if draw(st.booleans()):
        to_n = draw(st.integers(1, 64))
        migration = MigrationView(shards, to_n, draw(st.sampled_from(
            ["survey", "read-both", "write-new", "verified", "read-new", "retired"])),
            started_at=now - 10, writers_follow_at=draw(st.sampled_from([None, now - 1,
                                                                          now + 5])))
    last = draw(st.sampled_from([None, now - draw(st.floats(0.0, 4000.0))]))
    budget = draw(st.sampled_from([None, 0.9 * capacity, 7.2 * capacity]))  # 7.2: N x 8's
    since = None if budget is None else draw(st.sampled_from(
        [None, now - draw(st.floats(0.0, 2 * policy.t_down))]))
    tier = draw(st.sampled_from([None, None, "dedicated"]))
    return heat, KeyView(shards=shards, tier=tier, migration=migration, last_change=last,
                         budget=budget, budget_since=since, flaps=draw(st.integers(0, 3)))


@st.composite
def situations(draw: st.DrawFn) -> tuple[AutopilotPolicy, dict[str, KeyHeat],
                                          dict[str, KeyView], float, float]:
    policy = draw(policies())
    now = draw(st.floats(10_000.0, 100_000.0))
    heats, views = {}, {}
    for i in range(draw(st.integers(1, 6))):
        heat, view = draw(keys(policy, now))
        heats[f"k{i}"], views[f"k{i}"] = heat, view
    return policy, heats, views, now, draw(st.floats(1.0, 2.0))


def run(policy: AutopilotPolicy, heats: dict[str, KeyHeat], views: dict[str, KeyView],
        now: float, headroom: float) -> list[Decision]:
    return decide(policy, TABLE, heats, views, now, planner(headroom))  # type: ignore[arg-type]


@settings(deadline=None)  # pure and fast; a loaded machine must not fail it
@given(situations())
def test_no_action_in_the_dead_band(case: tuple) -> None:
    policy, heats, views, _now, _headroom = case
    for decision in run(*case):
        heat, view = heats[decision.key], views[decision.key]
        capacity = view.shards * CEILING
        below_up = heat.seconds < policy.t_up or heat.floor_up <= policy.up * capacity
        above_down = heat.seconds < policy.t_down or heat.peak_down >= policy.down * capacity
        if below_up and above_down:
            assert not decision.migrates, decision


@settings(deadline=None)  # pure and fast; a loaded machine must not fail it
@given(situations())
def test_hysteresis_both_ways(case: tuple) -> None:
    """A grow needs the load above ``up`` for ``t_up``; a shrink the peak below ``down``
    for ``t_down``, and leaves that peak below ``up`` of the smaller layout."""
    policy, heats, views, _now, _ = case
    for decision in run(*case):
        heat, view = heats[decision.key], views[decision.key]
        capacity = view.shards * CEILING
        if decision.action == "grow":
            assert heat.seconds >= policy.t_up
            assert heat.floor_up > policy.up * capacity
            assert decision.to_n > decision.from_n
            # the grown layout sits inside the dead band at the load that grew it, unless
            # the ceiling on N holds it back
            assert heat.floor_up < policy.up * decision.to_n * CEILING \
                or decision.to_n == policy.bounds(decision.key)[1]
        if decision.action == "shrink":
            assert heat.seconds >= policy.t_down
            assert heat.peak_down < policy.down * capacity
            assert decision.to_n < decision.from_n
            assert heat.peak_down < policy.up * decision.to_n * CEILING
            assert heat.peak_up >= policy.settled * heat.peak_down


@settings(deadline=None)  # pure and fast; a loaded machine must not fail it
@given(situations())
def test_interval_per_key(case: tuple) -> None:
    """No migration within ``min_interval`` of a key's last change, no shrink within
    ``t_down``, doubled for each of its flaps."""
    policy, _heats, views, now, _ = case
    for decision in run(*case):
        last = views[decision.key].last_change
        if decision.migrates and last is not None:
            assert now - last >= policy.min_interval
            if decision.action == "shrink":
                assert now - last >= policy.t_down * 2 ** views[decision.key].flaps


@settings(deadline=None)  # pure and fast; a loaded machine must not fail it
@given(situations())
def test_concurrency_cap_and_no_migration_over_another(case: tuple) -> None:
    policy, _heats, views, _now, _ = case
    decisions = run(*case)
    under_way = sum(1 for view in views.values() if view.migration is not None)
    started = [d for d in decisions if d.migrates]
    assert under_way + len(started) <= max(policy.max_migrations, under_way)
    for decision in started:
        assert views[decision.key].migration is None


@settings(deadline=None)  # pure and fast; a loaded machine must not fail it
@given(situations())
def test_floors_ceilings_reasons_and_inputs(case: tuple) -> None:
    policy, _heats, views, now, _ = case
    decisions = run(*case)
    for decision in decisions:
        assert decision.reason
        assert decision.inputs
        assert decision.t == now
        if decision.migrates:
            floor, top = policy.bounds(decision.key)
            assert floor <= decision.to_n <= top
        if decision.action == "isolate":
            assert decision.tier == policy.tier is not None
            assert views[decision.key].tier != policy.tier
    # one decision a key besides admission (a key without migration may lift a budget too)
    for key in views:
        assert sum(1 for d in decisions if d.key == key and d.action != "admit") <= 1
        assert any(d.key == key for d in decisions)


@settings(deadline=None)  # pure and fast; a loaded machine must not fail it
@given(situations())
def test_admission_bridges_and_guards_only(case: tuple) -> None:
    """A budget is set past the watermark or for a grow, raised once writers follow a
    grown layout, lowered to what the layout in force takes (a grow rolled back, or a
    migration to fewer shards), lifted when the load cooled and nothing migrates; never
    else. None passes ``admit_share`` of the table's write limit, nor a raised one twice
    the key's peak."""
    policy, heats, views, now, _ = case
    decisions = run(*case)
    for decision in decisions:
        if decision.action != "admit":
            continue
        view, heat = views[decision.key], heats[decision.key]
        migration = view.migration
        capacity = view.shards * CEILING
        starting = any(d.key == decision.key and d.action in ("grow", "isolate")
                       for d in decisions)
        if decision.budget is None:  # a lift, never while a migration runs
            assert view.budget is not None
            assert migration is None
            assert heat.peak_down < policy.up * capacity
            assert not starting
            assert now - (view.budget_since or -math.inf) >= policy.t_down
        elif view.budget is None:  # a budget set
            if migration is None:
                assert starting or heat.last > policy.admit_at * capacity
                assert decision.budget == pytest.approx(share(policy, capacity))
            else:
                assert migration.grows
                assert decision.budget == pytest.approx(
                    share(policy, migration.from_n * CEILING))
        elif decision.budget < view.budget:  # lowered: the layout it rose for is gone
            if migration is None:
                assert decision.budget == pytest.approx(share(policy, capacity))
            else:  # to fewer shards: that share of the layout writers follow
                assert not migration.grows
                follows = now >= (migration.writers_follow_at or math.inf)
                assert decision.budget == pytest.approx(share(policy, CEILING * (
                    migration.to_n if follows else migration.from_n)))
        else:  # raised: writers follow the grown layout
            assert migration is not None
            assert now >= (migration.writers_follow_at or math.inf)
            assert decision.budget == pytest.approx(
                min(share(policy, migration.to_n * CEILING), 2 * heat.peak_up))
            assert view.budget < decision.budget


def test_a_ramp_grows_to_the_projected_load() -> None:
    policy = AutopilotPolicy(tick=1.0)
    window = HeatWindow(policy)
    # 300 units/s, then a ramp of 95 units/s a second (20x in 60 s)
    for t in range(1, 601):
        window.add(float(t), 300.0)
    for t in range(601, 625):
        window.add(float(t), 300.0 + 95.0 * (t - 600))
    heat = window.summary()
    views = {"shop": KeyView(shards=1)}
    decisions = decide(policy, TABLE, {"shop": heat}, views, 624.0, planner(1.5))
    grow = next(d for d in decisions if d.action == "grow")
    # the load 60 s on is 8,280 units/s; the trend (its window starts before the ramp)
    # projects most of it, the grow makes room for twice it with the planner's headroom
    assert grow.inputs["projected"] > 7000
    assert grow.to_n >= 21
    assert any(d.action == "admit" and d.budget == pytest.approx(900.0) for d in decisions)


def test_noise_in_the_dead_band_never_acts() -> None:
    import random

    policy = AutopilotPolicy()
    rng = random.Random(3)
    windows = {"hot": HeatWindow(policy), "sharded": HeatWindow(policy)}
    views = {"hot": KeyView(shards=1), "sharded": KeyView(shards=4)}
    means = {"hot": 650.0, "sharded": 1800.0}  # 65% of one partition, 45% of four
    acted = []
    for tick in range(1, 17_280):  # a day of 5-second samples, each the mean of 5 seconds
        t = 5.0 * tick
        for key, window in windows.items():
            window.add(t, sum(means[key] * rng.uniform(0.7, 1.3) for _ in range(5)) / 5,
                       span=5.0)
        heats = {key: window.summary() for key, window in windows.items()}
        acted += [d for d in decide(policy, TABLE, heats, views, t, planner(1.5))
                  if d.action != "none"]
    assert acted == []


def test_heat_window_against_brute_force() -> None:
    import random

    policy = AutopilotPolicy(t_up=20.0, t_down=60.0, trend=10.0)
    rng = random.Random(7)
    window = HeatWindow(policy)
    samples: list[tuple[float, float]] = []
    t = 0.0
    for _ in range(500):
        t += rng.choice([1.0, 2.0, 5.0])
        value = rng.uniform(0, 1000)
        window.add(t, value, span=1.0)
        samples.append((t, value))
        heat = window.summary()
        up = [v for s, v in samples if s > t - policy.t_up]
        down = [v for s, v in samples if s > t - policy.t_down]
        assert heat.floor_up == min(up)
        assert heat.peak_up == max(up)
        assert heat.peak_down == max(down)
        assert heat.last == value
        assert heat.seconds == pytest.approx(t - samples[0][0] + 1.0)


def test_heat_window_refuses_bad_samples() -> None:
    window = HeatWindow(AutopilotPolicy())
    window.add(5.0, 1.0)
    with pytest.raises(InvalidInput, match="time order"):
        window.add(5.0, 1.0)
    with pytest.raises(InvalidInput, match="finite"):
        window.add(6.0, math.nan)


@pytest.mark.parametrize(("settings", "match"), [
    ({"up": 0.3, "down": 0.5}, "down < up"),
    ({"t_up": 60.0, "t_down": 30.0}, "at least t_up"),
    ({"max_migrations": 0}, "max_migrations"),
    ({"min_shards": 8, "max_shards": 4}, "min_shards <= max_shards"),
    ({"tier": "no such"}, "tier"),
    ({"limits": {"A#1": (1, 2)}}, "limits"),
    ({"limits": {"A": (4, 2)}}, "floor <= ceiling"),
    ({"lead": -1.0}, "lead"),
    # a month at most for a window, a wait or a tick; the planner's headroom bound
    ({"t_down": 1e308}, r"t_down is in seconds, at most 2,592,000 \(30 days\), got 1e\+308"),
    ({"veto": 31 * 86_400.0}, "veto is in seconds"),
    # it read 'got 2.592e+06', as the bound itself reads
    ({"min_interval": 2_592_001.0}, r"min_interval is in seconds, at most 2,592,000 "
                                    r"\(30 days\), got 2,592,001$"),
    # each named alone with its value (the three were named together, none given)
    ({"admit_at": 2.0}, r"^autopilot admit_at must be in \(0, 1\], got 2$"),
    ({"isolate_share": 0.0}, r"^autopilot isolate_share must be in \(0, 1\], got 0$"),
    ({"headroom": 1e308}, "headroom .* 1 to 100, got 1e"),
])
def test_bad_policies_are_refused(settings: dict, match: str) -> None:
    with pytest.raises(InvalidPolicy, match=match):
        AutopilotPolicy(**settings)


def test_policy_file(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "policy.toml"
    path.write_text('up = 0.75\nt_down = 600\n[values.PENDING]\nmin_shards = 2\n')
    policy = load_policy(path)
    assert policy.up == 0.75
    assert policy.bounds("PENDING") == (2, 256)
    assert replace(policy, up=0.7).up == 0.7
    path.write_text("upp = 1\n")
    with pytest.raises(InvalidPolicy, match=r"policy.toml: unknown setting\(s\) upp"):
        load_policy(path)
    path.write_text("up = [\n")
    with pytest.raises(InvalidPolicy, match="not valid TOML"):
        load_policy(path)


def test_a_policy_file_with_autopilot_and_values_tables(tmp_path: object) -> None:
    """``[autopilot]`` beside ``[values.NAME]``, both documented forms, had been refused
    as "unknown setting(s) autopilot"; a stray field of a value is named (a probe)."""
    from pathlib import Path

    path = Path(str(tmp_path)) / "policy.toml"
    path.write_text("[autopilot]\nup = 0.75\n[values.P]\nmax_shards = 4\n")
    policy = load_policy(path)
    assert (policy.up, policy.bounds("P")) == (0.75, (1, 4))
    path.write_text("down = 0.2\n[autopilot]\nup = 0.75\n")
    with pytest.raises(InvalidPolicy, match=r"in \[autopilot\] or at the top level, not "
                                            "both: down outside it"):
        load_policy(path)
    path.write_text("[values.Q]\nbogus = 1\n")
    with pytest.raises(InvalidPolicy, match=r"values\.Q may set min_shards and max_shards "
                                            "only, not bogus"):
        load_policy(path)


def test_a_shrink_under_a_lowered_ceiling_keeps_the_peak_below_up() -> None:
    """A key at N=64 whose ceiling was lowered to 16 carries 20,000 units/s: its shrink
    stops at the N that keeps that peak below ``up``, not at the ceiling (16,000 units/s
    of capacity for a peak of 20,000, which it could never grow back from: a probe). A
    key below its floor says so."""
    policy = AutopilotPolicy(limits={"BIG": (1, 16), "PENDING": (2, 64)})
    size = planner(1.0)
    for key, n, units, action, to_n, words in (
            ("BIG", 64, 20_000.0, "shrink", 25, "peak 20,000"),
            ("BIG", 64, 0.0, "shrink", 1, "peak 0"),
            ("PENDING", 1, 0.0, "none", 1, "N=1 is not above its floor N=2: a shrink "
             "stops there"),
            # a hot key past a ceiling lowered under it: the message named its own N as
            # the ceiling ("N=64 is the ceiling" where the ceiling is 16)
            ("BIG", 64, 90_000.0, "none", 64, "its ceiling is N=16 (it is at N=64)"),
            ("BIG", 16, 90_000.0, "none", 16, "its ceiling is N=16")):
        window = HeatWindow(policy)
        t = 0.0
        while t < 2 * policy.t_down:
            t += policy.tick
            window.add(t, units, span=policy.tick)
        decision, = [d for d in decide(policy, TABLE, {key: window.summary()},
                                       {key: KeyView(n)}, t, size)
                     if d.key == key and d.action != "admit"]
        assert (decision.action, decision.to_n) == (action, to_n)
        assert words in decision.reason


@pytest.mark.parametrize("units", [900.0, 3_000.0, 10_000.0])
def test_a_steady_load_does_not_undo_its_own_grow(units: float) -> None:
    """The default policy with the planner's sizing on DynamoDB, a steady load for 4 h:
    one grow, and no shrink. A grow sizes for grow_factor x the load with the planner's
    headroom, a third of the new capacity, under ``down``: every grow was shrunk t_down
    later (900 units/s: 1 -> 3 -> 2; 10,000: 1 -> 31 -> 16; an autopilot probe)."""
    policy = AutopilotPolicy()
    table = profile("dynamodb-on-demand", partitions=0, write_ceiling=1000.0,
                    read_ceiling=3000.0)
    size, facts = PlannerSizer(table, namespace="orders"), TableFacts(1000.0)
    window, n, last_change, changes = HeatWindow(policy), 1, None, []
    t = 0.0
    while t < 4 * 3600:
        t += policy.tick
        window.add(t, units, span=policy.tick)
        for decision in decide(policy, facts, {"K": window.summary()},
                               {"K": KeyView(n, last_change=last_change)}, t, size):
            if decision.migrates:  # applied at once: the kindest case for flapping
                changes.append((decision.action, n, decision.to_n))
                n, last_change = decision.to_n, t
    assert [action for action, _, _ in changes] == ["grow"], changes


@pytest.mark.parametrize("units", [0.0, 2_500.0])
def test_a_budget_raised_for_a_layout_rolled_back_comes_down_to_the_one_in_force(
        units: float) -> None:
    """A grow to N=8 raised the key's budget to 0.9 of 8 partitions; an operator rolled
    the grow back to N=1. The budget comes down to 0.9 of one partition at once, hot
    or cool: it had stayed at 7,200 units/s on one partition of 1,000 for t_down (a
    probe), admission protecting nothing."""
    policy = AutopilotPolicy()
    window = HeatWindow(policy)
    t = 0.0
    while t < 60.0:
        t += policy.tick
        window.add(t, units, span=policy.tick)
    view = KeyView(1, budget=7_200.0, budget_since=t - 30.0, last_change=t - 5.0)
    admits = [d for d in decide(policy, TABLE, {"PENDING": window.summary()},
                                {"PENDING": view}, t, planner(1.5)) if d.action == "admit"]
    assert [d.budget for d in admits] == [pytest.approx(900.0)], admits
    assert "rolled back" in admits[0].reason


def test_a_rollback_of_a_grow_keeps_the_budget_and_brings_it_down_to_the_old_layout() -> None:
    """An operator rolls back a grow to N=8 whose budget rose to 7,200 units/s: while the
    rollback runs the budget stays (writers still on 8 partitions), then comes down to
    one partition's 900 once writers follow N=1. It had been lifted at the rollback's
    start ('a shrink needs no bridge'), the load on one partition unchecked for as long
    as the rollback ran (a probe on DynamoDB Local: 44 s)."""
    policy = AutopilotPolicy()
    window = HeatWindow(policy)
    t = 0.0
    while t < 60.0:
        t += policy.tick
        window.add(t, 2_500.0, span=policy.tick)

    def budget(follow_at: float) -> list[float | None]:
        view = KeyView(8, budget=7_200.0, budget_since=t - 30.0, migration=MigrationView(
            8, 1, "write-new", started_at=t - 10.0, writers_follow_at=follow_at))
        return [d.budget for d in decide(policy, TABLE, {"PENDING": window.summary()},
                                         {"PENDING": view}, t, planner(1.5))
                if d.action == "admit"]

    assert budget(t + 5.0) == []  # kept while writers still write N=8
    assert budget(t - 1.0) == [pytest.approx(900.0)]


def test_a_key_too_new_to_shrink_says_how_far_below_up_it_is() -> None:
    """Seen on Azurite, after a grow to N=6 with the load at 32% of the new capacity:
    '83.0225 s of heat: not yet above 80% of capacity for 6 s', which reads as a key
    about to grow; its heat was long enough to judge a grow (t_up), not yet a shrink."""
    policy = AutopilotPolicy(t_up=6.0, t_down=120.0)
    capacity = 6 * CEILING
    heat = KeyHeat(seconds=83.0225, floor_up=0.32 * capacity, peak_up=0.32 * capacity,
                   peak_down=0.95 * capacity)
    (decision,) = [d for d in decide(policy, TABLE, {"K": heat}, {"K": KeyView(shards=6)},
                                     1000.0, planner(1.5)) if d.action == "none"]
    assert decision.reason == ("the least load over 6 s is 32% of capacity (grow above "
                               "80%); 83 s of heat, where a shrink is judged over 120 s"), \
        decision.reason
    young = KeyHeat(seconds=2.5, floor_up=0.9 * capacity, peak_up=0.9 * capacity,
                    peak_down=0.9 * capacity)
    (decision,) = [d for d in decide(policy, TABLE, {"K": young}, {"K": KeyView(shards=6)},
                                     1000.0, planner(1.5)) if d.action == "none"]
    assert decision.reason == "2 s of heat: a grow is judged over 6 s (its least load " \
        "above 80% of capacity)", decision.reason


def test_the_live_loop_isolates_a_key_past_its_share_of_the_table_s_quota() -> None:
    """The CLI gave the policy no table write limit (infinite), so isolate_share never
    isolated a key: at 1,900 units a second with isolate_share 0.01 the autopilot grew it
    in place. The limit is the store's quota."""
    from shardex.commands.autopilot import _sizing

    facts, sizer = _sizing("dynamodb://orders", None, "ix", 1.5)
    assert facts == TableFacts(write_ceiling=1000.0, write_limit=40_000.0)
    assert _sizing("azure-tables://orders?endpoint=http://127.0.0.1:1/a", None,
                   "ix", 1.5)[0].write_limit == 20_000.0
    policy = AutopilotPolicy(isolate_share=0.01, tier="dedicated", t_up=3.0, t_down=20.0)
    heat = KeyHeat(seconds=10.0, floor_up=1900.0, peak_up=1900.0, peak_down=1900.0,
                   last=1900.0)
    decisions = decide(policy, facts, {"hot": heat}, {"hot": KeyView(shards=1)}, 100.0,
                       sizer)
    assert [(d.key, d.action, d.tier) for d in decisions
            if d.action not in ("none", "admit")] == [("hot", "isolate", "dedicated")]


def following_a_grow_to_95(units: Callable[[float], float]) -> list[Decision]:
    """The admission decisions for a key of ``units(t)`` over a minute of samples whose
    writers follow a grow from N=1 to N=95 (its budget 900 units/s)."""
    policy = AutopilotPolicy()
    window = HeatWindow(policy)
    t = 0.0
    while t < 60.0:
        t += policy.tick
        window.add(t, units(t), span=policy.tick)
    view = KeyView(1, budget=900.0, budget_since=t - 20.0, migration=MigrationView(
        1, 95, "write-new", started_at=t - 10.0, writers_follow_at=t - 1.0))
    return [d for d in decide(policy, TABLE, {"hot": window.summary()}, {"hot": view}, t,
                              planner(1.5)) if d.action == "admit"]


def test_a_step_grown_for_its_projected_climb_drains_at_twice_its_peak() -> None:
    """A step from 200 to 8,000 units/s, whose trend projects a climb: writers follow a
    grow to N=95. The budget rose to 0.9 of 95 partitions (85,500 units/s), and what
    admission had held drained into the table's limit: ``simulate --autopilot`` of the
    step failed 228,432 writes where a static N failed none. It rises to twice the
    key's peak."""
    admits = following_a_grow_to_95(lambda t: 200.0 if t <= 40.0 else 8_000.0)
    assert [d.budget for d in admits] == [pytest.approx(16_000.0)]
    assert "2x the peak of 8,000" in admits[0].reason


def test_no_budget_passes_the_table_s_write_limit() -> None:
    """Writers follow a grow to N=95 on a table of 40,000 units a second: the budget rose
    to 0.9 of 95 partitions, 85,500 units/s, past what the table takes, and what
    admission had held drained into the table's throttling."""
    admits = following_a_grow_to_95(lambda t: 30_000.0)
    assert [d.budget for d in admits] == [pytest.approx(0.9 * 40_000.0)]


@pytest.mark.parametrize(("headroom", "shards"), [(1.0, 2), (1.5, 3), (3.0, 6)])
def test_the_live_loop_plans_with_the_policy_files_headroom(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        headroom: float, shards: int) -> None:
    """The CLI built its planner with the default headroom whatever the policy file said:
    1,800 units a second grew to N=3 with headroom 1.0, 1.5 and 3.0 alike (the simulation
    of the same policy took it). A sizer of another headroom than its policy's is refused."""
    import shardex.autopilot as autopilot
    from shardex.cli import main

    built: list[Any] = []

    def pilot(*args: Any, **kwargs: Any) -> Any:
        built.append(kwargs)
        raise InvalidInput("built")

    monkeypatch.setattr(autopilot, "Autopilot", pilot)
    policy = tmp_path / "policy.toml"
    policy.write_text(f"headroom = {headroom}\n")
    with pytest.raises(SystemExit):
        main(["autopilot", "run", "--store", "memory://", "--index", "orders", "--dry-run",
              "--source", f"file:{tmp_path / 'heat.jsonl'}", "--policy", str(policy)])
    assert "error: built" in capsys.readouterr().err
    assert built[0]["size"]("PENDING", 1800.0, None) == shards
    monkeypatch.undo()
    with pytest.raises(InvalidInput, match=r"headroom 1\.5 where the policy says 3"):
        Autopilot(Runner(shardex.open_store("memory://"), "orders"),
                  policy=AutopilotPolicy(headroom=3.0),
                  source=FileHeat(tmp_path / "heat.jsonl"),
                  facts=TableFacts(1000.0),
                  size=PlannerSizer(profile("dynamodb-on-demand", partitions=0)))


def test_a_prometheus_window_under_two_scrapes_is_refused() -> None:
    """A rate window at or below the server's scrape interval (window=1s against 1 s
    scrapes, or the default 60 s against a fleet scraped every 60 s) gave no heat at
    all, with no word: rate() needs two samples in its window. The command reads the
    targets' intervals and refuses such a window naming the one to give; a server that
    does not answer now is not checked (the loop waits for its heat)."""
    import click

    from shardex.commands.autopilot import _check_window
    from shardex.errors import Unavailable
    from shardex.web.promql import PromQL

    class Server(PromQL):  # its targets as given, or no answer
        def __init__(self, *intervals: str) -> None:
            super().__init__("http://127.0.0.1:9")
            self.intervals = intervals

        def targets(self) -> list[dict[str, Any]]:
            if not self.intervals:
                raise Unavailable("cannot reach Prometheus")
            return [{"scrapeInterval": i} for i in self.intervals] + [{"scrapeInterval": "x"}]

    with pytest.raises(click.BadParameter, match=r"window 1 s holds fewer than two scrapes "
                       r"of 1 s .* give window=4s"):
        _check_window(Server("1s"), 1.0, "prometheus://p")
    with pytest.raises(click.BadParameter, match="scrapes of 60 s"):
        _check_window(Server("15s", "1m"), 60.0, "prometheus://p")
    _check_window(Server("15s"), 60.0, "prometheus://p")
    _check_window(Server("1s"), 2.0, "prometheus://p")
    _check_window(Server(), 1.0, "prometheus://p")  # not answering: not checked
