"""Flap damping: a key that grows back within ``t_down`` of its last shrink waits longer
before its next shrink, by one rule (``flaps_after``, ``shrink_wait``) in the pure policy,
a decide loop, the simulation and the loop's state record."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

import shardex
from shardex.autopilot import (
    AutopilotPolicy,
    AutopilotRecords,
    HeatWindow,
    KeyView,
    PlannerSizer,
    State,
    TableFacts,
    decide,
    flaps_after,
    shrink_wait,
)
from shardex.autopilot.migration import MigrationCosts
from shardex.autopilot.records import KeyState
from shardex.autopilot.runner import Runner
from shardex.errors import MalformedItem
from shardex.scenarios.autopilot import run_mode
from shardex.scenarios.day import DayLoad
from shardex.scenarios.workload import Schedule, ValueLoad, Workload
from shardex.sim.profiles import profile
from tests.test_autopilot_loop import (
    INDEX,
    Load,
    pilot,
    routed,
    running,
    stable_at,
    wait_for,
)
from tests.test_autopilot_loop import POLICY as LOOP_POLICY

DYNAMODB = profile("dynamodb-on-demand", partitions=0, write_ceiling=1000.0,
                   read_ceiling=3000.0)


def planner_size() -> PlannerSizer:
    return PlannerSizer(DYNAMODB, namespace="orders")


def test_a_grow_back_within_t_down_of_a_shrink_is_a_flap_and_doubles_the_wait() -> None:
    policy = AutopilotPolicy()  # t_down 900 s
    assert flaps_after(policy, "shrink", 1000.0, 0, None) == (0, 1000.0)
    # a grow ends the shrink's watch (shrunk_at None): a grow after a grow is no flap
    assert flaps_after(policy, "grow", 1300.0, 0, 1000.0) == (1, None)
    assert flaps_after(policy, "isolate", 1899.0, 1, 1000.0) == (2, None)
    assert flaps_after(policy, "grow", 1300.0, 3, 1000.0) == (3, None)  # the cap
    assert flaps_after(policy, "grow", 1900.0, 2, 1000.0) == (0, None)  # t_down later
    assert flaps_after(policy, "grow", 1300.0, 2, None) == (0, None)
    assert flaps_after(policy, "shrink", 5000.0, 2, 1000.0) == (2, 5000.0)
    # counted from the shrink's end: one that took 1,000 s into a key of many entries
    # (a probe: the grow back then started 1,815 s after its start, and was no flap)
    assert flaps_after(policy, "grow", 2815.0, 0, 1000.0, ended=2000.0) == (1, None)
    assert flaps_after(policy, "grow", 2915.0, 0, 1000.0, ended=2000.0) == (0, None)
    assert flaps_after(policy, "grow", 1300.0, 0, 1000.0, ended=400.0) == (1, None)
    assert [shrink_wait(policy, k) for k in range(4)] == [900.0, 1800.0, 3600.0, 7200.0]
    window, t = HeatWindow(policy), 0.0
    while t < 2 * policy.t_down:  # a key at N=4 gone quiet
        t += policy.tick
        window.add(t, 100.0, span=policy.tick)
    heat = {"K": window.summary()}
    size = planner_size()

    def one(flaps: int, since: float) -> tuple[str, str, object]:
        view = KeyView(4, last_change=t - since, flaps=flaps)
        decision, = decide(policy, TableFacts(1000.0), heat, {"K": view}, t, size)
        return decision.action, decision.reason, decision.inputs["flaps"]

    assert one(0, 2000.0)[0] == one(1, 2000.0)[0] == "shrink"
    action, reason, flaps = one(2, 2000.0)
    assert (action, flaps) == ("none", 2)
    assert "a shrink waits 3600 s after a change, t_down damped x4: it grew back within " \
           "t_down of its last shrink 2 time(s) running" in reason
    assert one(2, 3600.0)[0] == "shrink"
    assert "damped" not in one(0, 600.0)[1]


def reshards(load: Callable[[float], float], *, damped: bool = True,
             hours: float = 6.0) -> tuple[list[tuple[str, int, float]], float]:
    """The default policy and the planner's sizing on DynamoDB against ``load`` (write
    units a second at t), each migration applied at once (the kindest case for
    flapping), as the autopilot probe runs it: its (action, N, t) and the seconds the
    load ran over capacity. ``damped=False``: the key's flaps left at 0."""
    policy = AutopilotPolicy()
    size, facts = planner_size(), TableFacts(1000.0)
    window, n, last, flaps, shrunk_at = HeatWindow(policy), 1, None, 0, None
    out, over, t = [], 0.0, 0.0
    while t < hours * 3600:
        t += policy.tick
        units = load(t)
        over += policy.tick if units > n * 1000.0 else 0.0
        window.add(t, units, span=policy.tick)
        view = KeyView(n, last_change=last, flaps=flaps)
        for d in decide(policy, facts, {"K": window.summary()}, {"K": view}, t, size):
            if d.migrates:
                out.append((d.action, d.to_n, t))
                n, last = d.to_n, t
                if damped:
                    flaps, shrunk_at = flaps_after(policy, d.action, t, flaps, shrunk_at)
    return out, over


def test_a_square_wave_around_t_down_is_damped() -> None:
    """1,200/200 write units a second, a period of 1,800 s (each half t_down long): each
    low half shrank the key, the load came back at once and ran at 120% of its capacity
    until min_interval let it grow: 24 reshards in 6 h (a pair each period) and 3,320 s
    over capacity. Damped, each grow back is a flap and the next shrink waits t_down x 2,
    4, 8 after it: 9 reshards (the shrinks 2, 3 and 5 periods apart), 1,215 s over."""
    def square(t: float) -> float:
        return 1200.0 if t % 1800 < 900 else 200.0

    before, over_before = reshards(square, damped=False)
    assert len(before) == 24
    assert over_before == 3320.0
    after, over = reshards(square)
    assert after == [("grow", 4, 15.0), ("shrink", 1, 1795.0), ("grow", 4, 2095.0),
                     ("shrink", 1, 5395.0), ("grow", 4, 5695.0), ("shrink", 1, 10795.0),
                     ("grow", 4, 11095.0), ("shrink", 1, 19795.0), ("grow", 4, 20095.0)]
    assert over == 1215.0


@pytest.mark.parametrize("load", [
    pytest.param(lambda t: 200.0 + min(2800.0, max(0.0, t - 3600) * 5)
                 if t < 4 * 3600 else 200.0, id="ramp up, hold, drop"),
    pytest.param(lambda t: 700 + 600 * math.sin(2 * math.pi * t / 7200), id="sine 2 h"),
    pytest.param(lambda t: 1200.0 if t % 3600 < 1800 else 200.0, id="square 1 h"),
    pytest.param(lambda t: 1200.0 if t % 600 < 300 else 200.0, id="square 10 min"),
])
def test_a_load_that_does_not_grow_back_within_t_down_is_not_damped(
        load: Callable[[float], float]) -> None:
    """A ramp and its end, a slow wave, a wave whose lows outlast t_down (the grow comes
    915 s after the shrink) or a fast one the grown layout rides: as before."""
    found, _ = reshards(load)
    assert found == reshards(load, damped=False)[0]
    assert found


def test_the_simulation_damps_a_square_wave() -> None:
    """The same square wave on the rate-level simulator (300/50 puts and as many deletes
    a second, 2 units each; migrations take minutes): 24 reshards in 6 h before, 9 now,
    and a third of the throttled writes, with the autopilot's runner moving every source
    key at once (with one worker, as ``reshard run``'s default, each shrink back to one
    key moves a quarter as fast, the grow after it waits: 415,000 of 587,000)."""
    steps = tuple((float(t), 300.0 if t % 1800 == 0 else 50.0) for t in range(0, 6 * 3600, 900))
    values = {"K": ValueLoad("K", write=Schedule(steps), delete=Schedule(steps),
                             item_bytes=400)}
    load = DayLoad(Workload(6 * 3600, values), entries={"K": 5000.0})
    table = profile("dynamodb-on-demand", partitions=0, warm_write=40_000.0)
    run = run_mode(load, "autopilot", table, AutopilotPolicy())
    started = [(m.new.shards, m.started) for m in run.migrations()]
    assert started == [(4, 15.0), (1, 1800.0), (4, 2360.0), (1, 5400.0), (4, 5960.0),
                       (1, 10800.0), (4, 11360.0), (1, 19800.0), (4, 20360.0)]
    assert run.keys["K"].flaps == 3
    assert run.totals()["throttled"] < 250_000  # 587,000 undamped
    alone = run_mode(load, "autopilot", table, AutopilotPolicy(),
                     costs=MigrationCosts(move_units=2.0, row_read_units=0.098, workers=1))
    assert 400_000 < alone.totals()["throttled"] < 450_000


def test_the_state_record_keeps_flaps_and_reads_older_records() -> None:
    state = State().with_key("PENDING", last_change=4.0, flaps=2, shrunk_at=3.0)
    body = state.to_body()
    assert body["keys"]["PENDING"]["flaps"] == 2
    assert State.from_body(body, "x") == state
    older = {"reshard": None, "migrating": [], "keys": {"PENDING": {
        "last_change": 4.0, "budget": None, "budget_since": None}}}
    key = State.from_body(older, "x").key("PENDING")
    assert (key.flaps, key.shrunk_at, key.last_change) == (0, None, 4.0)
    for field, damaged in (("flaps", "2"), ("flaps", -1), ("flaps", 4), ("flaps", True),
                           ("flaps", 1.5), ("flaps", None), ("shrunk_at", "soon")):
        bad = {**body, "keys": {"PENDING": {**body["keys"]["PENDING"], field: damaged}}}
        with pytest.raises(MalformedItem, match=r"autopilot/state.*not an autopilot record"):
            State.from_body(bad, "autopilot/state")


def test_the_state_record_keeps_what_a_later_release_wrote_into_it() -> None:
    """A leader of the last release wrote the state without the fields a later one added:
    flaps, shrunk_at and vetoed_at read as 0 and none, and the next shrink was not damped.
    A leader of this release, taking over from a later one (a rolling upgrade, or back),
    keeps the fields it does not know, the state's and each key's, as it found them."""
    later = {"reshard": None, "migrating": [], "quiet_until": 99.0, "keys": {"PENDING": {
        "last_change": 4.0, "budget": None, "budget_since": None, "flaps": 1,
        "shrunk_at": None, "vetoed_at": None, "trend": [1, 2]}}}
    state = State.from_body(later, "x").with_key("PENDING", flaps=2, shrunk_at=3.0)
    body = state.to_body()
    assert body["quiet_until"] == 99.0
    assert body["keys"]["PENDING"]["trend"] == [1, 2]
    assert (body["keys"]["PENDING"]["flaps"], body["keys"]["PENDING"]["shrunk_at"]) == (2, 3.0)
    assert State.from_body(body, "x") == state
    # a key this release adds has no fields of a later one
    assert "trend" not in state.with_key("SHIPPED", flaps=1).to_body()["keys"]["SHIPPED"]


@pytest.mark.shardex_virtual
async def test_the_loop_counts_a_flap_in_its_state_and_damps_the_next_shrink() -> None:
    """A leader takes over a key that flapped twice, its last shrink 10 s ago (the state
    record of the last leader): its grow is a third flap, and the shrink after the load
    ends waits t_down x 8 (240 s) after the grow ended, not t_down (30 s)."""
    store = shardex.open_store("memory://")
    await routed(store)
    autopilot = pilot(store, worker="one")
    records = autopilot.records
    shrunk_at = autopilot._clock.wall() - 10.0
    await records.save_state(State().with_key("PENDING", flaps=2, shrunk_at=shrunk_at), None)
    with Load(store, 14) as load:
        async with running(autopilot):
            await wait_for("the grow to end", lambda: _ended(records))
            load.on = False
            # the tick logs the end before it saves the state that holds it (the store's
            # latency is drawn at random here): the state is read once it has
            grown = await wait_for("the state to hold the grow's end",
                                   lambda: _changed(records))
            assert (grown.flaps, grown.shrunk_at) == (3, None)
            memory = await wait_for("the shrink to start", lambda: _shrunk(records, grown),
                                    most=900)
    log = await records.log()
    shrink = next(e for e in log if e.action == "shrink")
    assert shrink.t - grown.last_change >= 8 * LOOP_POLICY.t_down
    # the decision that held it is in the log (it was folded into the 'migration under
    # way' one before it: the same action, N and outcome, whatever the reason: a probe)
    assert any("t_down damped x8" in e.reason for e in log if e.kind == "decision")
    assert memory.flaps == 3
    assert memory.shrunk_at == pytest.approx(shrink.t, abs=LOOP_POLICY.tick)  # its tick


async def _ended(records: AutopilotRecords) -> bool:
    return any(e.action == "end" for e in await records.log())


async def _changed(records: AutopilotRecords) -> KeyState | None:
    """The key's state once it holds the time of its last change."""
    memory = (await records.state())[0].key("PENDING")
    return memory if memory.last_change is not None else None


async def _shrunk(records: AutopilotRecords, before: KeyState) -> KeyState | None:
    """The key's state once the leader recorded a shrink's start."""
    memory = (await records.state())[0].key("PENDING")
    return memory if memory.shrunk_at != before.shrunk_at else None


@pytest.mark.shardex_virtual
async def test_a_leader_that_takes_up_an_unrecorded_grow_counts_its_flap() -> None:
    """The last leader started a grow 10 s after a shrink and stopped before recording
    either the grow or its flap: the next leader, taking the grow up from the routing,
    counts the flap as the start would have."""
    store = shardex.open_store("memory://")
    await routed(store)
    leader = pilot(store, worker="next")
    shrunk_at = leader._clock.wall() - 10.0  # t_down is 30 s
    await leader.records.save_state(State().with_key("PENDING", flaps=1, shrunk_at=shrunk_at),
                                    None)
    async with Runner(store, INDEX, worker="killed") as runner:
        await runner.start({"PENDING": shardex.ShardPolicy(4)}, margin=0.5,
                           reshard_id="autopilot-0123456789ab")
    with Load(store, 4):
        async with running(leader):
            await wait_for("the migration to end", lambda: stable_at(store, 4))
    memory = (await leader.records.state())[0].key("PENDING")
    assert (memory.flaps, memory.shrunk_at) == (2, None)


def test_the_autopilot_command_moves_as_the_model_does() -> None:
    """``autopilot run``'s ``--workers`` default is the model's: every source key at once
    (the simulator's figures assume it; ``reshard run`` keeps one)."""
    from shardex.autopilot.runner import DEFAULT_WORKERS
    from shardex.cli import cli

    run = cli.commands["autopilot"].commands["run"]  # type: ignore[attr-defined]
    workers = next(p for p in run.params if p.name == "workers")
    assert workers.default == DEFAULT_WORKERS == MigrationCosts(1.0, 1.0).workers == 16
