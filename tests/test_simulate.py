"""``shardex simulate``: the rate-level engine against the request-level store, workloads,
layouts, the document it prints, and ``plan --verify``."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shardex.cli import cli, main
from shardex.errors import InvalidInput
from shardex.routing import Routing, ShardPolicy
from shardex.scenarios.replay import replay
from shardex.scenarios.simulate import simulate
from shardex.scenarios.workload import Schedule, load_workload, workload_from_dict
from shardex.sim import profile
from shardex.sim.clock import run_virtual
from shardex.sim.fluid import Flow, FluidEngine, Part
from shardex.sim.spread import Quiet
from tests import heat_samples as samples

EXAMPLE = Path(__file__).parent.parent / "examples" / "orders_workload.toml"
# A table a thousand times smaller than DynamoDB's, so a few thousand requests reach it.
SMALL = {"write_ceiling": 100.0, "read_ceiling": 300.0, "warm_write": 400.0,
         "warm_read": 1200.0, "split_delay_seconds": 10.0}
WORKLOAD = {"duration": 30,
            "values": {"HOT": {"write": 60, "item_bytes": 200}, "WARM": {"write": 30},
                       "COLD": {"write": 15}},
            "moves": [{"from": "HOT", "to": "WARM", "rate": 20}]}


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), terminal_width=200)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout


# -- the two engines agree ----------------------------------------------------------------

@pytest.mark.parametrize(("layout", "table", "tolerance", "item_bytes"), [
    # hot keys and placement records on a young table's 4 partitions, splitting for heat
    ({}, {}, 0.08, None),
    ({"HOT": 4}, {}, 0.08, None),
    # every key its own partition: the table's limit binds; the smallest value offers 450
    # writes, so which few of them meet an empty bucket moves its share by a point
    ({"HOT": 4}, {"warm_write": 200.0, "partitions": 0}, 0.015, None),
    # 2 KB entries: two write units each, in both engines
    ({}, {}, 0.08, 2048),
    ({"HOT": 4}, {"warm_write": 400.0, "partitions": 0}, 0.015, 2048),
])
def test_the_rate_engine_agrees_with_the_request_level_store(
        layout: dict[str, int], table: dict[str, Any], tolerance: float,
        item_bytes: int | None) -> None:
    """The same workload through ``memory://`` request by request (``replay``: ShardedIndex
    puts and moves, no retries) and through ``simulate``: the share of each value's entry
    writes accepted agrees within ``tolerance`` (8 points where placement records land on
    partitions by each item's hash in the store and by expectation in the engine, and
    splits for heat come a second apart; 1.5 points where only the table's limit binds), and
    the total accepted within 6%; at the workload's item sizes (entries padded to them in
    the store), 1 KB and 2 KB."""
    doc = json.loads(json.dumps(WORKLOAD))
    if item_bytes is not None:
        for value in doc["values"].values():
            value["item_bytes"] = item_bytes
    workload = workload_from_dict(doc)
    routing = Routing(overrides={v: ShardPolicy(shards=n) for v, n in layout.items()})
    options = {**SMALL, **table}
    rate = simulate(workload, routing, profile(**options))
    requests = run_virtual(replay(workload, routing, **options))
    for value in workload.values:
        assert rate.values[value].offered == pytest.approx(requests.offered[value], abs=2)
        assert rate.values[value].ratio == pytest.approx(requests.ratio(value), abs=tolerance)
    total_rate = sum(c.accepted for c in rate.values.values())
    total_requests = sum(requests.accepted.values())
    assert total_rate == pytest.approx(total_requests, rel=0.06)
    assert rate.values["HOT"].ratio < 0.9  # the cases throttle: agreement is not trivial
    assert set(rate.throttles) == set(requests.store.stats("index").throttle_reasons)


def test_the_rate_engine_runs_awss_burst_example_too() -> None:
    """Source: AWS re:Post, "How does DynamoDB handle spiky workloads in short intervals"
    (repost.aws/knowledge-center/dynamodb-spiky-workloads-short-intervals): 150 RCU idle
    for 5 minutes, then 200 read units a second, lasts 900 seconds, on the rate engine."""
    engine = FluidEngine(profile("dynamodb-provisioned", provisioned_read=150.0,
                                 initial_burst_seconds=0.0))
    key = engine.key("K")
    flows = [Flow(4.0, False, (Part(0, key, 50.0),))]
    refused = [second for second in range(300, 1300)
               if engine.step(second, flows)[0].refused > 0]
    assert refused[0] - 300 == pytest.approx(900, abs=2)


@pytest.mark.parametrize("steps", ["one step", "reads, then writes beside"])
def test_one_budget_serves_reads_and_writes_in_proportion(steps: str) -> None:
    """On one budget (Cosmos DB's 10,000 RU a physical partition) a second's reads and
    writes are refused alike, as a service admitting them in arrival order does: the
    engine served one kind first, and the other took the refusals (writes accepted 100%
    and reads 66.7% in one step; reads 100% and writes 66.7% stepped apart, as simulate
    steps them)."""
    engine = FluidEngine(profile("cosmos", provisioned_write=40_000.0))
    key = engine.key("K")
    reads = [Flow(6000.0, False, (Part(0, key, 1.0),), strong=False)]
    writes = [Flow(6000.0, True, (Part(0, key, 1.0),))]
    for second in range(3):
        if steps == "one step":
            read, write = engine.step(second, [*reads, *writes])[::-1]
        else:
            read = engine.step(second, reads, beside=writes)[0]
            write = engine.step(second, writes)[0]
        for result in (read, write):
            assert result.accepted == pytest.approx(5000.0)  # 10,000 RU over 12,000 asked
            assert result.reason is not None
    # what one kind leaves unused, the other takes
    engine = FluidEngine(profile("cosmos", provisioned_write=40_000.0))
    key = engine.key("K")
    light = [Flow(2000.0, False, (Part(0, key, 1.0),), strong=False)]
    heavy = [Flow(12_000.0, True, (Part(0, key, 1.0),))]
    read = engine.step(0, light, beside=heavy)[0]
    write = engine.step(0, heavy)[0]
    assert read.accepted + write.accepted == pytest.approx(10_000.0)
    assert read.accepted == pytest.approx(10_000.0 * 2 / 14)
    # DynamoDB's reads and writes are metered apart: beside changes nothing there
    engine = FluidEngine(profile("dynamodb-provisioned", provisioned_write=5000.0,
                                 provisioned_read=5000.0))
    key = engine.key("K")
    assert engine.step(0, [Flow(3000.0, False, (Part(0, key, 1.0),))],
                       beside=[Flow(900.0, True, (Part(0, key, 1.0),))])[0].accepted == 3000.0


def test_the_rate_engine_splits_a_spread_key_after_the_delay_and_a_rising_one_never() -> None:
    for rising, accepted in ((False, 1500.0), (True, 1000.0)):
        engine = FluidEngine(profile(partitions=0, split_delay_seconds=5.0))
        key = engine.key("HOT", rising=rising)
        results = [engine.step(s, [Flow(1500.0, True, (Part(0, key, 1.0),))])[0]
                   for s in range(10)]
        assert [r.accepted for r in results[:5]] == [1000.0] * 5
        assert results[-1].accepted == accepted


def test_gsi_layout_puts_entries_on_the_index_and_reads_them_eventually_consistent() -> None:
    workload = workload_from_dict({"duration": 5, "values": {
        "PENDING": {"write": 2000, "read": 10, "page": 100, "read_item_bytes": 4000}}})
    table = simulate(workload, Routing(), profile(partitions=0))
    gsi = simulate(workload, Routing(), profile("dynamodb-gsi", partitions=0))
    # 2,000 entries a second on one partition of 1,000 units: table layout, 2 units an
    # entry (a transaction); GSI, 1 unit, on the index
    assert table.values["PENDING"].ratio == pytest.approx(0.25)
    assert gsi.values["PENDING"].ratio == pytest.approx(0.5)
    assert {t.resource for t in gsi.tables} == {"table", "index"}
    # a page of 101 entries of 4,000 bytes: 99 read units strongly consistent, half that not
    assert table.read_units["PENDING"] == pytest.approx(5 * 10 * 99)
    assert gsi.read_units["PENDING"] == pytest.approx(table.read_units["PENDING"] / 2)


# -- workloads ----------------------------------------------------------------------------

def test_the_example_workload_loads() -> None:
    workload = load_workload(EXAMPLE)
    assert workload.duration == 3600
    assert workload.values["PENDING"].write.at(10) == 5000
    assert [(m.source, m.target) for m in workload.moves] == [
        ("PENDING", "SHIPPED"), ("PENDING", "CANCELLED"), ("SHIPPED", "DELIVERED")]


def test_steps_and_bursts_shape_a_rate() -> None:
    workload = workload_from_dict({"duration": 100, "values": {"V": {
        "write": [[0, 100], [50, 300]], "bursts": [{"at": 10, "seconds": 5, "write": 1000}]}}})
    write = workload.values["V"].write
    assert [write.at(s) for s in (0, 9, 10, 14, 15, 49, 50, 99)] == [
        100, 100, 1100, 1100, 100, 100, 300, 300]
    assert write.peak() == 1100


def test_a_burst_or_step_past_the_runs_end_is_named(tmp_path: Path) -> None:
    """A burst at 700 s of a 600 s run was dropped without a word: a note names it, and
    the step a --duration cut."""
    path = tmp_path / "late.toml"
    path.write_text("duration = 60\n[values.A]\nwrite = [[0, 100], [40, 200]]\n"
                    "bursts = [{at = 70, seconds = 10, write = 500}]\n"
                    "[values.B]\nwrite = 10\n")
    code, out = invoke("simulate", str(path), "--json")
    assert code == 0, out
    assert json.loads(out)["notes"] == [
        "A's write: a burst at 70 s past the run's 60 s (not run)"]
    code, out = invoke("simulate", str(path), "--duration", "30")
    assert code == 0, out
    assert "note: A's write: a burst at 70 s, a step at 40 s past the run's 30 s (not run)" \
        in " ".join(out.split())
    assert "B's" not in out


@pytest.mark.parametrize(("doc", "message"), [
    ({"values": {}}, "at least one value"),
    ({"values": {"V": {"write": -1}}}, "values.V.write: must be a number"),
    ({"values": {"V": {"write": [[5, 1], [0, 2]]}}}, "in order"),
    ({"values": {"V": {"wrte": 1}}}, "unknown field(s) wrte"),
    ({"values": {"V": {"sort": "random"}}}, "rising or spread"),
    ({"values": {"P#1": {"write": 1}}}, "values.P#1"),
    ({"values": {"V": {}}, "duration": 0}, "duration"),
    ({"values": {"V": {}}, "moves": [{"from": "V", "to": "W", "rate": 1}]}, "moves[0].to"),
    ({"values": {"V": {"bursts": [{"at": 1, "seconds": 0, "write": 5}]}}}, "seconds"),
    ({"values": {"V": {}}, "extra": 1}, "unknown field(s) extra"),
    ({"values": {"V": {}}, "moves": [{"from": "V", "to": "V", "rate": 1}]},
     "moves[0].to: 'V' is its from: a move goes from one value to another"),
    ({"values": {"V": {"item_bytes": 409_601}}}, "values.V.item_bytes: must be an integer "
                                                 "from 1 to 409600"),
    ({"values": {"V": {"read_item_bytes": 10**9}}}, "values.V.read_item_bytes: must be an "
                                                    "integer from 1 to 409600"),
])
def test_a_bad_workload_is_refused_naming_the_field(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        workload_from_dict(doc, origin="w.toml")
    assert message in str(caught.value)
    assert str(caught.value).startswith("w.toml")


# -- the command ----------------------------------------------------------------------------

def test_simulate_prints_a_table_headroom_throttles_and_a_verdict() -> None:
    code, out = invoke("simulate", str(EXAMPLE), "--set", "PENDING=22", "--set", "SHIPPED=7",
                       "--duration", "60", "--per-shard")
    assert code == 0, out
    words = " ".join(out.split())
    assert "simulate:" in words
    assert "60 virtual s on dynamodb-on-demand" in words
    assert "PENDING#21" in words
    assert "table writes: limit 4,000" in words
    assert "throttled operations by reason: TableWriteKeyRangeThroughputExceeded" in words
    assert "verdict: throttled: the table starts with 4 partitions" in words


def test_simulate_json_is_a_simulate_document(tmp_path: Path) -> None:
    code, out = invoke("simulate", str(EXAMPLE), "--set", "PENDING=22", "--set", "SHIPPED=7",
                       "--duration", "30", "--store",
                       "memory://?warm_write=40000&partitions=0", "--json")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["schema"] == "shardex.simulate/1"
    assert doc["profile"]["warm_write"] == 40_000.0
    assert doc["verdict"] == {"ok": True, "summary": doc["verdict"]["summary"], "causes": []}
    pending = doc["values"]["PENDING"]
    assert pending["shards"] == 22
    assert pending["accepted_ratio"] == 1.0
    assert pending["offered_writes_per_s"] == 7100.0
    assert pending["queries_per_s"] == 220.0
    assert pending["fanout_p99_ms"] > pending["fanout_p50_ms"] > 0
    assert len(pending["shard_keys"]) == 22
    assert doc["throttles"] == {}
    write = next(t for t in doc["tables"] if t["direction"] == "write")
    assert write["peak_asked_per_s"] == 34_400.0
    assert write["limit_last_s"] == 40_000.0
    assert write["headroom"] == pytest.approx(1 - 34_400 / 40_000)
    assert doc["routing"]["overrides"]["PENDING"] == {"shards": 22, "strategy": "hash"}
    assert len(doc["timeline"]["values"]["PENDING"]["accepted_writes_per_s"]) == 30


def test_simulate_takes_its_layout_from_plan_json(tmp_path: Path) -> None:
    code, plan = invoke("plan", "--peak", "PENDING=7100", "--peak", "SHIPPED=2300",
                        "--item-bytes", "200", "--json")
    assert code == 0
    layout = tmp_path / "plan.json"
    layout.write_text(plan)
    code, out = invoke("simulate", str(EXAMPLE), "--layout", str(layout), "--duration", "5",
                       "--set", "SHIPPED=9", "--json")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["values"]["PENDING"]["shards"] == json.loads(plan)["values"]["PENDING"]["shards"]
    assert doc["values"]["SHIPPED"]["shards"] == 9  # --set wins


def test_simulate_reads_a_diagnosis(tmp_path: Path) -> None:
    log = samples.write_log(tmp_path / "orders.csv", samples.low_cardinality())
    code, diagnosis = invoke("diagnose", str(log), "--json")
    assert code == 0
    path = tmp_path / "diagnosis.json"
    path.write_text(diagnosis)
    code, out = invoke("simulate", str(path), "--json")
    assert code == 0, out
    doc = json.loads(out)
    top = json.loads(diagnosis)["top"]
    assert set(doc["values"]) == {row["key"] for row in top}
    pending = next(row for row in top if row["key"] == "PENDING")
    # its writes as writes, its reads as read units, each at its own peak
    assert doc["values"]["PENDING"]["offered_writes_per_s"] == pytest.approx(
        pending["peak_write_units_per_s"], rel=1e-3)
    assert doc["values"]["PENDING"]["offered_read_units_per_s"] == pytest.approx(
        pending["peak_read_units_per_s"], rel=1e-3)
    assert doc["duration_s"] == json.loads(diagnosis)["totals"]["seconds"]
    code, out = invoke("simulate", str(path), "--rate", "sustained", "--json")
    sustained = json.loads(out)["values"]["PENDING"]
    assert sustained["offered_writes_per_s"] + sustained["offered_read_units_per_s"] == \
        pytest.approx(pending["sustained_units_per_s"], rel=1e-3)


def test_simulate_skips_the_keys_a_diagnosis_found_unroutable(tmp_path: Path) -> None:
    lines = ["timestamp,key,op,units"] + [
        f"{1796014800 + t},{key},write,{units}" for t in range(10)
        for key, units in (("PENDING", 3000), ("A#B#3", 2000))]
    log = tmp_path / "access.csv"
    log.write_text("\n".join(lines) + "\n")
    code, diagnosis = invoke("diagnose", str(log), "--json")
    assert code == 0, diagnosis
    assert list(json.loads(diagnosis)["recommendation"]["unroutable"]) == ["A#B#3"]
    path = tmp_path / "diagnosis.json"
    path.write_text(diagnosis)
    code, out = invoke("simulate", str(path), "--duration", "5", "--json")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["schema"] == "shardex.simulate/1"
    assert list(doc["values"]) == ["PENDING"]
    assert "A#B#3 is not simulated" in " ".join(doc["notes"])
    code, out = invoke("simulate", str(path), "--duration", "5")
    assert code == 0, out
    assert "note: A#B#3 is not simulated" in " ".join(out.split())


def test_simulate_draws_a_plot(tmp_path: Path) -> None:
    png = tmp_path / "sim.png"
    code, out = invoke("simulate", str(EXAMPLE), "--duration", "20", "--plot", str(png))
    assert code == 0, out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"plot written to {png}" in " ".join(out.split())


@pytest.mark.parametrize(("args", "message"), [
    (["simulate"], "Missing argument 'WORKLOAD'"),
    (["simulate", "w.toml", "--set", "PENDING=x"], "is not an integer"),
    (["simulate", "w.toml", "--set", "PENDING=0"], "shards"),
    (["simulate", "w.toml", "--store", "dynamodb://t"], "memory://?profile"),
    (["simulate", "w.toml", "--store", "memory://?warm_write=-5"], "warm_write"),
    (["simulate", "w.toml", "--store", "memory://?profile=cassandra"], "profile"),
    (["simulate", "w.toml", "--layout", "w.toml"], "not valid JSON"),
    (["simulate", "bad.toml"], "bad.toml: values.V.write"),
    (["simulate", "w.toml", "--duration", "0"], "--duration"),
])
def test_simulate_usage_errors_are_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch, args: list[str],
                                            message: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "w.toml").write_text('[values.PENDING]\nwrite = 10\n')
    (tmp_path / "bad.toml").write_text('[values.V]\nwrite = "fast"\n')
    with pytest.raises(SystemExit) as done:
        main(args)
    assert done.value.code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert err.startswith("error: ")
    assert message in err
    assert "Traceback" not in err


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.one_of(
    st.binary(max_size=200),
    st.lists(st.sampled_from(["[values.V]", "[values.W]", "[table]", "[[moves]]", "write = 5",
                              "write = -1", "write = [[0, 1]]", "read = 2", "page = 0",
                              'sort = "spread"', "duration = 3", "duration = 1e9",
                              'from = "V"', 'to = "W"', "rate = 1", 'profile = "x"',
                              "warm_write = 0", "partitions = 2", "bursts = [{}]", "=", "]"]),
             max_size=12).map(lambda lines: "\n".join(lines).encode())))
def test_no_workload_makes_a_traceback(tmp_path_factory: pytest.TempPathFactory,
                                       capsys: pytest.CaptureFixture[str],
                                       content: bytes) -> None:
    path = tmp_path_factory.mktemp("w") / "w.toml"
    path.write_bytes(content)
    code: object = 0
    try:
        main(["simulate", str(path), "--duration", "3", "--json"])
    except SystemExit as done:
        code = done.code
    err = capsys.readouterr().err
    assert code in (0, 1, 2)
    assert "Traceback" not in err
    if code:
        assert err.startswith("error: ")


# -- plan: the table, and --verify -------------------------------------------------------------

def test_plan_counts_every_write_and_says_which_limit_binds() -> None:
    code, out = invoke("plan", "--peak", "PENDING=7100", "--peak", "SHIPPED=2300",
                       "--item-bytes", "200", "--item-writes", "7400", "--json")
    assert code == 0
    doc = json.loads(out)
    table = doc["table"]
    assert table["entry_units_per_s"] == 2 * (7100 + 2300)  # one unit each, x 2 (transaction)
    assert table["placement_units_per_s"] == 7400 * 2
    assert table["write_units_per_s"] == 18_800 + 14_800
    assert table["limit_write_units_per_s"] == 4000.0  # a new on-demand table
    assert (doc["binds"], table["fits"]) == ("both", False)
    warm = json.loads(invoke("plan", "--peak", "PENDING=6000", "--item-bytes", "200",
                             "--store", "memory://?warm_write=40000", "--json")[1])
    assert (warm["binds"], warm["table"]["limit_write_units_per_s"]) == ("partition", 40_000.0)
    cold = json.loads(invoke("plan", "--peak", "DELIVERED=100", "--json")[1])
    assert cold["binds"] == "none"
    small = json.loads(invoke("plan", "--peak", "V=100", "--store",
                              "memory://?profile=dynamodb-provisioned&provisioned_write=100",
                              "--json")[1])
    assert (small["binds"], small["table"]["limited_by"]) == ("table", "provisioned capacity")
    code, text = invoke("plan", "--peak", "PENDING=7100", "--item-bytes", "200")
    words = " ".join(text.split())
    assert "binds: both" in words
    assert "raise warm_write (warm throughput)" in words


def test_plan_verify_runs_the_recommendation_through_simulate() -> None:
    code, out = invoke("plan", "--peak", "PENDING=7100", "--item-bytes", "200", "--store",
                       "memory://?warm_write=40000&partitions=0", "--verify",
                       "--verify-seconds", "30", "--json")
    assert code == 0, out
    verified = json.loads(out)["verify"]
    assert verified["schema"] == "shardex.simulate/1"
    assert verified["duration_s"] == 30
    assert verified["verdict"]["ok"] is True
    assert verified["values"]["PENDING"]["accepted_ratio"] == 1.0
    code, text = invoke("plan", "--peak", "PENDING=7100", "--verify", "--verify-seconds", "30")
    words = " ".join(text.split())
    assert "verify (simulate, 30 virtual s on dynamodb-on-demand" in words
    assert "verdict: throttled" in words


def test_demo_says_what_a_new_on_demand_table_would_accept() -> None:
    code, out = invoke("demo", "--duration", "1", "--rate", "2000", "--json")
    assert code == 0, out
    table = json.loads(out)["table"]
    assert table["store"] == "memory://?partitions=0&warm_write=40000.0"
    assert table["accepted_on_new_table"] < 0.5
    assert table["accepted_on_demo_table"] == 1.0
    assert table["asked_write_units_per_s"] > 4000
    assert math.isfinite(table["accepted_warm_unsplit"])


def test_a_steady_second_worked_out_once_gives_what_working_it_out_again_gives(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The rate engine shares a steady workload's second once and repeats it while no
    partition splits and no table limit moves: the outcome is the same to the unit."""
    workload = workload_from_dict({"duration": 90, "values": {
        "HOT": {"write": 600, "sort": "spread"}, "WARM": {"write": 300}}})
    options = {**SMALL, "warm_write": 4000.0, "split_delay_seconds": 20.0,
               "peak_window_seconds": 30.0}
    routing = Routing(overrides={"HOT": ShardPolicy(shards=3)})
    fast = simulate(workload, routing, profile(**options)).to_dict()
    original = FluidEngine.__init__

    def uncached(self: FluidEngine, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self._cacheable = False

    monkeypatch.setattr(FluidEngine, "__init__", uncached)
    slow = simulate(workload, routing, profile(**options)).to_dict()
    assert fast["partitions"]["table"]["last"] > fast["partitions"]["table"]["first"]
    assert fast == slow


@pytest.fixture
def shared(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The seconds the rate engine works out afresh (``FluidEngine._share``'s calls)."""
    calls: list[int] = []
    share = FluidEngine._share

    def counted(self: FluidEngine, *args: Any) -> Any:
        calls.append(1)
        return share(self, *args)

    monkeypatch.setattr(FluidEngine, "_share", counted)
    return calls


@pytest.mark.parametrize("partitions", [3, 7, 20_000])
def test_a_spread_far_below_every_ceiling_is_accepted_whole_and_worked_out_once(
        partitions: int, shared: list[int]) -> None:
    """Placement records spread over many partitions, each far below its ceiling, are all
    accepted: nothing refused, no throttle reason (the shares' sum is no exact 1.0 in
    floating point, and 20,000 of them had refused 2e-13 of the reads, each second a
    throttle, each second worked out again)."""
    engine = FluidEngine(profile(partitions=partitions, warm_write=4e7, warm_read=1.2e8))
    reads = [Flow(3.0, False, (Part(0, None, 1.0),))]
    writes = [Flow(3.0, True, (Part(0, engine.key("HOT"), 2.0), Part(0, None, 2.0)))]
    for second in range(5):
        for flows in (reads, writes):
            for result in engine.step(second, flows):
                assert (result.accepted, result.refused, result.reason) == (3.0, 0.0, None)
    assert len(shared) == 2


_RATES = st.sampled_from([0, 5, 40, 300, 900, 2500])
_VALUE = st.fixed_dictionaries({"write": st.one_of(_RATES, st.lists(_RATES, min_size=2,
                                                                   max_size=12).map(
    lambda rates: [[4 * i, r] for i, r in enumerate(rates)])),
    "read": st.sampled_from([0, 3, 60]), "sort": st.sampled_from(["rising", "spread"]),
    "item_bytes": st.sampled_from([200, 1024, 5000])}, optional={
    "bursts": st.just([{"at": 12, "seconds": 6, "write": 3000}])})


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.dictionaries(st.sampled_from(["A", "B", "C"]), _VALUE, min_size=1),
       partitions=st.sampled_from([1, 3, 8, 60, 400]), shards=st.sampled_from([1, 2, 5]),
       gsi=st.booleans(), items=st.sampled_from([None, 50.0, 4000.0]))
def test_leaving_the_quiet_partitions_as_they_are_changes_nothing(
        values: dict[str, Any], partitions: int, shards: int, gsi: bool,
        items: float | None) -> None:
    """The rate engine leaves the partitions only placement records reach, far from hot,
    as they are (``Quiet``): the run's every figure is the one that rolling them and
    taking their units each second gives, to the bit, through rates that change every
    few seconds, bursts, splits and table limits (summed apart, the weights' rounding
    moved a split point that a heat of 44.25 put on a knife's edge)."""
    doc = {"duration": 50, "values": values}
    workload = workload_from_dict(doc)
    if items is not None:
        workload = dataclasses.replace(workload, item_writes=Schedule(((0.0, items),)))
    options = {"partitions": partitions, "warm_write": 4000.0, "warm_read": 12000.0,
               "split_delay_seconds": 8.0, "peak_window_seconds": 20.0}
    table = profile("dynamodb-gsi" if gsi else "dynamodb-on-demand", **options)
    routing = Routing(overrides={"A": ShardPolicy(shards=shards)})
    quiet: list[int] = []
    calm = Quiet.calm

    def counted(self: Quiet, *args: Any) -> None:
        calm(self, *args)
        quiet.append(len(self.parts or ()))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Quiet, "calm", counted)
        leaving = simulate(workload, routing, table).to_dict()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Quiet, "calm", _never_quiet)
        taking = simulate(workload, routing, table).to_dict()
    assert leaving == taking
    if partitions >= 60:
        assert max(quiet, default=0) > 0  # the runs did leave some


def _never_quiet(self: Quiet, *args: Any) -> None:
    self.parts = set()


def test_units_a_steady_second_skipped_on_quiet_partitions_count_when_another_second_looks(
        ) -> None:
    """A remembered second's reads left untaken on quiet partitions are taken once a flow
    worked out afresh in the same second could bring them near hot (it wakes them): it
    gets what is left of their room."""
    engine = FluidEngine(profile(partitions=4, warm_read=1e6))
    steady = [Flow(4000.0, False, (Part(0, None, 1.0),))]  # 1,000 a partition: cold
    for second in range(4):  # quiet from the second step on
        engine.step(second, steady)
    assert engine._quiet.parts
    engine.step(4, steady)
    fresh = [Flow(10000.0, False, (Part(0, None, 1.0),))]
    # each partition's 3,000 read units less the steady 1,000: 2,000 of the 2,500 asked
    assert engine.step(4, fresh)[0].accepted == pytest.approx(8000.0)


def test_writes_their_locates_hold_back_alike_each_second_are_worked_out_once(
        shared: list[int]) -> None:
    """Item writes whose placement reads are throttled the same share each second are the
    same flows each second, which the rate engine shares once (they were new flows every
    second: a plan's verify of a hot table took minutes)."""
    workload = dataclasses.replace(
        workload_from_dict({"duration": 60, "values": {"HOT": {"write": 400}}}),
        item_writes=Schedule(((0.0, 5000.0),)))
    sim = simulate(workload, Routing(), profile(partitions=1, write_ceiling=1e6, warm_read=1e6,
                                                warm_write=1e7))
    assert 0.5 < sim.values["HOT"].ratio < 0.7  # 3,000 of 5,000 placements read a second
    assert len(shared) <= 6


def test_the_rate_engine_remembers_a_few_seconds_not_every_one() -> None:
    """Flows made anew every second (the autopilot's, noise on every rate) are never
    offered again: the engine keeps the last few seconds it worked out, not all of them
    (each holding its flows, where their parts landed and the shares: a day of them grew
    a run by some 17 MB every 1,000 s on 1,000 partitions)."""
    engine = FluidEngine(profile(partitions=50))
    key = engine.key("HOT")
    for second in range(500):
        engine.step(second, [Flow(100.0 + second, True, (Part(0, key, 2.0),
                                                         Part(0, None, 2.0)))])
    assert len(engine._memo) <= 16


def test_a_write_limit_advised_counts_the_writes_throttled_locates_held_back() -> None:
    """The table's write demand counts the writes whose placement reads were throttled:
    they are asked all the same once the reads are served. It counted only the writes
    that got past their reads, so a table whose reads throttled too was told a write
    limit that throttled once its reads were raised (``plan --peak PENDING=500
    --item-writes 30000 --table warm_write=40000 --verify``: 'warm_write of at least
    48,800 avoids it'; with warm_write=48800, 'the workload asks up to 61,000')."""
    workload = dataclasses.replace(
        workload_from_dict({"duration": 60, "values": {"PENDING": {"write": 500}}}),
        item_writes=Schedule(((0.0, 30_000.0),)))
    routing = Routing(overrides={"PENDING": ShardPolicy(shards=2)})
    demand = 2 * 500 + 2 * 30_000  # entry transactions and placement records
    # partitions that take any load: the table's limits alone bind
    table = {"write_ceiling": 1e6, "read_ceiling": 1e6}
    sim = simulate(workload, routing, profile(warm_write=40_000, warm_read=24_000, **table))
    writes = sim.to_dict()["tables"][0]
    assert writes["peak_asked_per_s"] == pytest.approx(demand, rel=1e-6)
    causes = " ".join(" ".join(sim.causes()).split())
    assert f"asks up to {demand:,}; warm_write of at least {demand:,} avoids it" in causes
    assert "asks up to 30,000; warm_read of at least 30,000 avoids it" in causes
    advised = simulate(workload, routing, profile(warm_write=demand, quota_write=demand,
                                                  warm_read=30_000, **table))
    assert [t.refused_seconds for t in advised.tables] == [0, 0]
    assert advised.ok
    # reads that hold no write back change nothing: the asks are what was sent
    assert advised.to_dict()["tables"][0]["peak_asked_per_s"] == pytest.approx(demand)
    partitions = simulate(workload, routing, profile(warm_write=40_000, warm_read=24_000))
    words = " ".join(" ".join(partitions.causes()).split())
    assert f"the table starts with 40 partitions, 40,000 write units a second in all, and " \
           f"the workload asks up to {demand:,}" in words


@pytest.mark.parametrize(("doc", "items", "shards"), [
    ({"values": {"V0": {"write": 8000}}}, 10_000.0, {"V0": 32}),
    ({"values": {"V0": {"write": 50}}}, 10_000.0, {"V0": 8}),
    ({"values": {"V0": {"write": 8000, "read": 300, "delete": 1000}, "V1": {"read": 300}},
      "moves": [{"from": "V0", "to": "V1", "rate": 100}]}, None, {"V0": 32, "V1": 8})])
def test_a_table_given_every_limit_its_verdict_advises_refuses_nothing(
        doc: dict[str, Any], items: float | None, shards: dict[str, int]) -> None:
    """Following every 'SETTING of at least X avoids it' of a verdict at once, no table
    limit binds. Of 265 drawn workloads (one to three values, moves, item writes,
    on-demand and provisioned tables; these three among them), 32 still had a table
    limit binding: the write limit advised left out the writes that the reads'
    throttling held back."""
    workload = workload_from_dict({"duration": 300, **doc})
    if items is not None:
        workload = dataclasses.replace(workload, item_writes=Schedule(((0.0, items),)))
    routing = Routing(overrides={v: ShardPolicy(shards=n) for v, n in shards.items()})
    table = {"provisioned_write": 1000, "provisioned_read": 1000}
    sim = simulate(workload, routing, profile("dynamodb-provisioned", **table))
    advised: dict[str, float] = dict(table)
    for cause in sim.causes():
        found = re.search(r"the table's (write|read) limit binds.*; (\w+) of at least ([\d,]+) "
                          "avoids it", cause)
        if found:
            direction, setting, least = found.groups()
            advised[setting] = advised[f"quota_{direction}"] = int(least.replace(",", ""))
    assert advised["provisioned_write"] > 1000
    assert advised["provisioned_read"] > 1000
    again = simulate(workload, routing, profile("dynamodb-provisioned", **advised))
    assert [t.refused_seconds for t in again.tables] == [0, 0], again.causes()


def test_a_table_of_one_partition_is_singular_and_says_what_set_it() -> None:
    """'the table starts with 1 partitions ... (warm_write sets how many it starts with)',
    of a table whose partitions were given."""
    workload = workload_from_dict({"duration": 30, "values": {"V": {"write": 3000}}})
    sim = simulate(workload, Routing(overrides={"V": ShardPolicy(shards=8)}),
                   profile(partitions=1, warm_write=40_000))
    words = " ".join(" ".join(sim.causes()).split())
    assert "the table starts with 1 partition, 1,000 write units a second in all" in words
    # its partitions were given: warm_write did not set them
    assert "(set by partitions=1; warm_write sets it where partitions is not given)" in words


def test_writes_held_back_past_the_write_limit_are_told_with_the_reads() -> None:
    """A table whose reads refuse the writes' placement reads refuses no write itself:
    only a quarter of the writes get past their reads. Its verdict advised the read
    setting alone, and a table given it then refused writes, which ask 80,000 units a
    second of its 40,000."""
    workload = workload_from_dict({"duration": 60, "values": {"PENDING": {"write": 20_000}}})
    routing = Routing(overrides={"PENDING": ShardPolicy(shards=8)})
    table = {"warm_write": 40_000, "warm_read": 5000, "write_ceiling": 1e6,
             "read_ceiling": 1e6}
    sim = simulate(workload, routing, profile(**table))
    assert sim.tables[0].refused_seconds == 0
    causes = " ".join(" ".join(sim.causes()).split())
    assert "warm_read of at least 20,000 avoids it" in causes
    assert "once its reads are served, the table's writes ask up to 80,000 units a second, " \
           "past the 40,000 it served; warm_write of at least 80,000 avoids it" in causes
    # and each shard key's writes say why they were a quarter accepted
    assert "PENDING#0 (PENDING, N=8) accepted 25.0% of its entry writes; its placement " \
           "reads were throttled" in causes
    advised = simulate(workload, routing, profile(**{**table, "warm_write": 80_000,
                                                      "quota_write": 80_000,
                                                      "warm_read": 20_000}))
    assert advised.ok, advised.causes()


def test_reads_past_the_table_limit_that_partitions_refused_first_are_told() -> None:
    """A table whose hot partitions refuse reads before its own limit does was told
    nothing of that limit: given the write setting it advised (more partitions), its
    read limit bound. The reads ask 32,800 units a second of its 20,000."""
    workload = dataclasses.replace(workload_from_dict({"duration": 300, "values": {
        "V0": {"write": 0, "read": 300}, "V1": {"write": 8000, "read": 300},
        "V2": {"write": 0, "delete": 10}}}), item_writes=Schedule(((0.0, 10_000.0),)))
    routing = Routing(overrides={v: ShardPolicy(shards=2) for v in ("V0", "V1", "V2")})
    table = {"provisioned_write": 20_000, "provisioned_read": 20_000}
    sim = simulate(workload, routing, profile("dynamodb-provisioned", **table))
    assert [t.refused_seconds for t in sim.tables] == [0, 0]
    causes = " ".join(" ".join(sim.causes()).split())
    assert "the table's reads ask up to 32,800 units a second, past the 20,000 it served, " \
           "though its partitions refused them first; provisioned_read of at least 32,800 " \
           "avoids it" in causes
    assert "once its reads are served, the table's writes ask up to 36,020 units a second" \
        in causes
    advised = simulate(workload, routing, profile(
        "dynamodb-provisioned", provisioned_write=36_020, provisioned_read=32_800))
    assert [t.refused_seconds for t in advised.tables] == [0, 0], advised.causes()
    assert [t.over_seconds for t in advised.tables] == [0, 0], advised.causes()


def test_a_table_asked_what_its_partitions_hold_to_a_hair_is_not_told_it_starts_short() -> None:
    """Asked 64,000.000000000015 units a second by flows summed in floating point, a
    table of 64 partitions (64,000 in all) was told it 'starts with 64 partitions, 64,000
    write units a second in all, and the workload asks up to 64,000'."""
    workload = workload_from_dict({"duration": 300, "values": {
        "V0": {"write": 8000}, "V1": {"write": 0, "read": 50},
        "V2": {"write": 8000, "read": 300}}})
    routing = Routing(overrides={"V0": ShardPolicy(shards=1), "V1": ShardPolicy(shards=1),
                                 "V2": ShardPolicy(shards=8)})
    sim = simulate(workload, routing, profile("dynamodb-provisioned", provisioned_write=64_000,
                                              provisioned_read=37_600, quota_write=64_000))
    assert max(sim.tables[0].asked) == pytest.approx(64_000)
    assert not [cause for cause in sim.causes() if "starts with" in cause]


def test_a_table_of_a_partition_a_key_is_not_said_to_grow_from_none(tmp_path: Path) -> None:
    """partitions=0 (every partition key its own) printed 'partitions: table 0 -> 4', a
    growth from no partition."""
    workload = tmp_path / "w.toml"
    workload.write_text("duration = 30\n[table]\npartitions = 0\n[values.A]\nwrite = 100\n"
                        "shards = 4\n")
    code, out = invoke("simulate", str(workload))
    assert code == 0, out
    assert "partitions: table every partition key its own (4 at the end)" in out, out
