"""The autopilot's simulation: a flash sale, noise alone, the migration model, the CLI.

The whole day (both sales, the viral tenant, the day's fan-out against static N) takes
about 25 s of CPU: it runs with SHARDEX_LONG=1, and ``shardex simulate --autopilot``
prints it (docs/autopilot.md quotes it).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from shardex.autopilot import AutopilotPolicy
from shardex.autopilot.migration import MigrationCosts, MigrationModel, moved_share
from shardex.cli import cli, main
from shardex.commands.simulate_autopilot import report
from shardex.routing import ShardPolicy
from shardex.scenarios.autopilot import run_mode
from shardex.scenarios.autopilot_report import simulate_autopilot
from shardex.scenarios.day import DayLoad, day, ramps_of
from shardex.scenarios.workload import Schedule, ValueLoad, Workload, load_workload
from shardex.sim.profiles import profile
from shardex.sim.spread import Quiet

TABLE = profile("dynamodb-on-demand", partitions=0, warm_write=40_000.0)
STEADY = Path(__file__).parent.parent / "examples" / "autopilot_steady.toml"
STEP = Path(__file__).parent.parent / "examples" / "autopilot_step.toml"
SALE = day(3 * 3600, start=9 * 3600 + 1800)  # 09:30 to 12:30: the first flash sale


@pytest.fixture(scope="module")
def sale() -> dict:
    return simulate_autopilot(SALE, TABLE, AutopilotPolicy(), seed=2,
                              modes=("autopilot", "none")).to_dict()


def test_a_flash_sale_is_cured_without_throttles_or_failures(sale: dict) -> None:
    auto, none = sale["runs"]
    assert [auto["mode"], none["mode"]] == ["autopilot", "none"]
    (ramp,) = auto["ramps"]
    assert ramp["name"] == "flash sale 1"
    assert ramp["throttled_share"] <= 0.01
    assert ramp["writes_failed"] == 0
    assert 0 < ramp["admission_refused_share"] < 0.05  # the bridge holds writes back
    assert ramp["reshards"] <= 2
    assert auto["listings_complete"] is True
    assert auto["listings_checked"] > 50
    assert all(shadow["parity_gaps"] == 0 for shadow in auto["shadows"])
    grow, shrink = auto["migrations"]
    assert grow["key"] == shrink["key"] == "shop-a"
    assert grow["from_n"] == 1 < grow["to_n"]
    assert shrink["to_n"] < shrink["from_n"]
    assert [s["state"] for s in grow["states"]] == [
        "read-both", "write-new", "verified", "read-new", "retired", "done"]
    assert shrink["started_s"] > grow["states"][-1]["at_s"]
    # with no sharding the same sale throttles and fails most of its writes
    (lost,) = none["ramps"]
    assert lost["throttled_share"] > 0.5
    assert lost["writes_failed"] > 1_000_000
    assert lost["time_to_cure_s"] is None
    assert all(check["ok"] for check in sale["checks"]), sale["checks"]
    for action in auto["actions"]:
        assert action["reason"]
        assert set(action) >= {"t", "key", "action", "from_n", "to_n", "reason"}


def test_noise_alone_moves_nothing() -> None:
    workload = load_workload(STEADY)
    load = DayLoad(Workload(7200, workload.values, table=workload.table), noise=0.3)
    run = run_mode(load, "autopilot", TABLE, AutopilotPolicy(), seed=5)
    assert run.actions == []
    assert run.totals()["throttled"] == 0


def test_grouped_keys_and_folding_change_nothing() -> None:
    """One key of each class stands for the class, quiet keys go to the table level:
    the same figures as every shard key on the engine."""
    ramp = Schedule(((0.0, 100.0), (120.0, 2000.0)))
    values = {"hot": ValueLoad("hot", write=ramp, delete=Schedule(((0.0, 100.0),)),
                               read=Schedule(((0.0, 5.0),)), item_bytes=400),
              "cold": ValueLoad("cold", write=Schedule(((0.0, 50.0),)), item_bytes=400)}
    load = DayLoad(Workload(700, values), entries={"hot": 5_000.0, "cold": 1000.0})
    policy = AutopilotPolicy(min_interval=60.0, t_down=120.0)
    fast = run_mode(load, "autopilot", TABLE, policy)
    exact = run_mode(load, "autopilot", TABLE, policy, every_key=True)
    assert [(d.t, d.action, d.to_n) for d in fast.actions] == \
        [(d.t, d.action, d.to_n) for d in exact.actions]
    assert any(d.action == "grow" for d in fast.actions)
    for name, figure in fast.totals().items():
        assert figure == pytest.approx(exact.totals()[name], rel=1e-6, abs=1e-6), name


def test_a_migration_goes_through_the_runners_states_at_their_pace() -> None:
    costs = MigrationCosts(move_units=2.0, row_read_units=0.1, lease=15.0, margin=40.0,
                           retain=60.0)
    model = MigrationModel("k", ShardPolicy(), ShardPolicy(shards=8), 100.0, 10_000.0, costs)
    t = 100.0
    while not model.done:
        t += 1
        moving, _ = model.work(t)
        model.tick(t, 10_000.0, moving)
    at = dict(model.states)
    # the survey reads 10,000 rows of 0.1 units at 750 a second: 2 s
    assert at["read-both"] == pytest.approx(102.0, abs=1)
    assert at["write-new"] - at["read-both"] == pytest.approx(55.0, abs=1)  # lease + margin
    # every entry moves off the unsuffixed key, 125 a second (250 units, 2 a move)
    assert model.mover_rate() == pytest.approx(125.0)
    # then the parity check: 10,000 rows at 0.1 units, each placement read 16 at a time
    assert at["verified"] - at["write-new"] == pytest.approx(55 + 80 + 4, abs=2)
    assert at["retired"] - at["read-new"] == pytest.approx(60.0, abs=1)  # retention
    assert model.writers_follow_at() == at["write-new"] + costs.ttl
    assert moved_share(ShardPolicy(shards=4), ShardPolicy(shards=8)) == 0.5
    assert moved_share(ShardPolicy(shards=8), ShardPolicy(shards=6)) == 0.25


def test_ramps_of_a_workload_file() -> None:
    load = ValueLoad("v", write=Schedule(((0.0, 100.0), (60.0, 500.0), (120.0, 100.0)),
                                         bursts=((200.0, 10.0, 1000.0),)))
    ramps = ramps_of(Workload(300, {"v": load}))
    assert [(r.start, r.end) for r in ramps] == [(60, 120), (200, 210)]
    # a run cut short inside a step or a burst (--duration) ends its ramp with it
    assert [(r.start, r.end) for r in ramps_of(Workload(100, {"v": load}))] == [(60, 100)]
    assert [(r.start, r.end) for r in ramps_of(Workload(205, {"v": load}))] == [
        (60, 120), (200, 205)]


def test_simulate_autopilot_cut_short_inside_a_ramp_reports_it(tmp_path: Path) -> None:
    """``--duration`` ending a run while a burst runs (an IndexError's traceback before)."""
    workload = tmp_path / "burst.toml"
    workload.write_text('duration = 200\n[table]\nprofile = "dynamodb-on-demand"\n'
                        'partitions = 0\nwarm_write = 40000\n[values.hot]\nwrite = 100\n'
                        'bursts = [{at = 150, seconds = 100, write = 3000}]\n')
    result = CliRunner().invoke(cli, ["simulate", "--autopilot", str(workload), "--json"])
    assert result.exit_code == 0, result.output
    ramp = json.loads(result.stdout)["runs"][0]["ramps"][0]
    assert (ramp["start_s"], ramp["end_s"]) == (150, 200)


def test_cli_simulate_autopilot_json() -> None:
    result = CliRunner().invoke(cli, ["simulate", "--autopilot", str(STEADY), "--duration",
                                      "600", "--noise", "0.3", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["schema"] == "shardex.simulate.autopilot/1"
    assert [run["mode"] for run in doc["runs"]] == ["autopilot", "static", "none"]
    for run in doc["runs"]:
        assert {"throttled_share", "admission_refused_share", "writes_failed",
                "listings_complete", "actions", "max_reshards_per_key",
                "fanout_n_read_weighted", "time_to_cure_s"} <= set(run)
    assert doc["runs"][0]["actions"] == []


def test_a_step_grown_past_the_table_s_limit_fails_no_write() -> None:
    """A step to 8,000 units/s grows to N=95 (the trend across the step projects a
    climb); once writers followed it the budget rose to 0.9 of 95 partitions, past the
    table's 40,000 units, and what admission held drained into the table's throttling:
    228,432 writes failed where static N failed none (found from outside)."""
    result = CliRunner().invoke(cli, ["simulate", "--autopilot", str(STEP), "--duration",
                                      "900", "--json"])
    assert result.exit_code == 0, result.output
    auto, static, _ = json.loads(result.stdout)["runs"]
    assert (auto["mode"], static["mode"]) == ("autopilot", "static")
    assert auto["writes_failed"] == static["writes_failed"] == 0
    assert auto["listings_complete"] is True


def fails(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Run the command as a user does; its exit code and its one error line."""
    with pytest.raises(SystemExit) as done:
        main(list(args))
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: ")
    code = done.value.code
    return int(code) if isinstance(code, int) else 1, lines[0]


@pytest.mark.parametrize(("args", "words"), [
    (["simulate"], "Missing argument 'WORKLOAD'"),
    (["simulate", "--autopilot", "--plot", "x.png"], "--plot"),
    (["simulate", str(STEADY), "--noise", "0.1"], "--autopilot"),
    (["demo", "--autopilot", "--rate", "5"], "--autopilot takes"),
])
def test_cli_refusals(capsys: pytest.CaptureFixture[str], args: list[str], words: str) -> None:
    code, line = fails(capsys, *args)
    assert code == 2
    assert words in line


def test_cli_bad_policy(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text("up = 2\n")
    code, line = fails(capsys, "simulate", "--autopilot", str(STEADY), "--duration", "60",
                       "--policy", str(policy))
    assert code == 2
    assert "policy.toml: autopilot thresholds need 0 < down < up <= 1" in line


@pytest.mark.skipif(not os.environ.get("SHARDEX_LONG"), reason="the whole day: SHARDEX_LONG=1")
def test_the_whole_day() -> None:
    doc = simulate_autopilot(day(), TABLE, AutopilotPolicy()).to_dict()
    assert all(check["ok"] for check in doc["checks"]), doc["checks"]
    steady = load_workload(STEADY)
    run = run_mode(DayLoad(steady, noise=0.3), "autopilot", TABLE, AutopilotPolicy())
    assert run.actions == []


def test_a_shadow_run_sees_a_listing_that_misses_an_entry(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The shadow's check bites: a reader that drops an entry of its pages is caught."""
    from shardex.index import ShardedIndex
    from shardex.scenarios.shadow import shadow

    clean = shadow("shop", ShardPolicy(), ShardPolicy(shards=4), entries=50, seed=4)
    assert clean.complete
    assert clean.listings > 10
    query = ShardedIndex.query

    async def lossy(self: ShardedIndex, value: str, **options: object) -> object:
        page = await query(self, value, **options)  # type: ignore[arg-type]
        if page.items and page.cursor is None:
            page.items.pop()
        return page

    monkeypatch.setattr(ShardedIndex, "query", lossy)
    broken = shadow("shop", ShardPolicy(), ShardPolicy(shards=4), entries=50, seed=4)
    assert not broken.complete
    assert any("missing" in problem for problem in broken.problems)


def test_a_move_is_an_entry_write_at_each_end() -> None:
    from shardex.scenarios.workload import Move

    values = {"PENDING": ValueLoad("PENDING", write=Schedule(((0.0, 100.0),))),
              "SHIPPED": ValueLoad("SHIPPED")}
    moves = (Move("PENDING", "SHIPPED", Schedule(((0.0, 40.0),))),)
    load = DayLoad(Workload(30, values, moves), entries={"PENDING": 1000.0})
    run = run_mode(load, "none", TABLE, AutopilotPolicy())
    pending, shipped = run.keys["PENDING"], run.keys["SHIPPED"]
    assert sum(pending.offered) == pytest.approx(30 * 140)
    assert sum(shipped.offered) == pytest.approx(30 * 40)
    assert pending.entries == pytest.approx(1000 + 30 * 60)
    assert shipped.entries == pytest.approx(30 * 40)


def test_leaving_quiet_partitions_as_they_are_changes_no_figure_of_a_sale() -> None:
    """On a table of 100 partitions (placement records spread over them all), the first
    sale's autopilot reshards a key mid-run (1 -> 80 shard keys), its new shard keys
    landing on partitions the rate engine had left quiet: every figure is the one of a
    run that rolls them and takes their units each second (``shardex.sim.spread.Quiet``),
    to the bit."""
    table = profile("dynamodb-on-demand", partitions=100, warm_write=40_000.0)
    sale = day(1400, start=9 * 3600 + 2400)  # 09:40 to 10:03

    def run() -> dict:
        return _without_cpu(simulate_autopilot(sale, table, AutopilotPolicy(), seed=2,
                                               modes=("autopilot",)).to_dict())

    leaving = run()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Quiet, "calm", lambda self, *_: setattr(self, "parts", set()))
        taking = run()
    assert [m["from_n"] for m in leaving["runs"][0]["migrations"]] == [1]
    assert leaving == taking


def _without_cpu(doc: object) -> object:
    """``doc`` without its ``cpu_s`` figures (this process's CPU, which differs)."""
    if isinstance(doc, dict):
        return {k: _without_cpu(v) for k, v in doc.items() if k != "cpu_s"}
    if isinstance(doc, list):
        return [_without_cpu(v) for v in doc]
    return doc


def _over_the_table(tmp_path: Path, warm_write: float | None = None) -> Path:
    """3,000 entry writes a second, 8,000 for a minute, on a new on-demand table: each
    write asks 2 units for its entry and 2 for its placement record, so the minute asks
    32,000 write units a second (and the autopilot's mover more) of a table that serves
    4,000, within the per-table quota: a warm_write raises it."""
    path = tmp_path / "over.toml"
    path.write_text('duration = 700\n[table]\nprofile = "dynamodb-on-demand"\n'
                    + (f"warm_write = {warm_write}\n" if warm_write else "")
                    + "[values.PENDING]\nwrite = 3000\nread = 10\npage = 100\n"
                      "item_bytes = 200\nbursts = [{at = 600, seconds = 60, write = 5000}]\n")
    return path


def test_a_table_limit_that_throttles_whatever_n_is_said_with_its_setting(
        tmp_path: Path) -> None:
    """Past the table's own write limit the runs throttle whatever N they chose: the
    report says which limit binds, in how many seconds of which runs, what the load asks
    of it at first attempt (its retries aside: they ask again of whatever refused them)
    and the setting that sets it; given a fifth more, the table's limit binds in no run."""
    over = _over_the_table(tmp_path)
    result = CliRunner().invoke(cli, ["simulate", "--autopilot", str(over), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    refused = {run["mode"]: t["seconds_refused"] for run in doc["runs"]
               for t in run["tables"] if t["direction"] == "write"}
    peak = max(t["peak_asked_per_s"] for run in doc["runs"] for t in run["tables"]
               if t["direction"] == "write")
    assert refused["autopilot"] > 0  # N=19
    assert refused["static"] > 0  # N=34
    assert refused["none"] == 0  # N=1: its partition refuses first
    # the entries and placements, and the mover's writes; not the retries, which asked
    # more than twice that
    assert 32_000 <= peak < 34_000
    (cause,) = [c for c in doc["causes"] if "write limit" in c]
    assert cause.startswith(
        f"the table's write limit binds in {refused['autopilot']:,} s (autopilot) and "
        f"{refused['static']:,} s (static) of 700: it served 4,000 units a second ")
    assert f"the load asks up to {peak:,.0f} at first attempt; warm_write sets what it " \
        "serves" in cause
    console = Console(record=True, width=100)
    report(console, doc)  # the text the command prints of this document
    assert f"cause: {cause}" in " ".join(console.export_text().split())
    cured = CliRunner().invoke(cli, ["simulate", "--autopilot", "--json",
                                     str(_over_the_table(tmp_path, math.ceil(1.2 * peak)))])
    doc = json.loads(cured.stdout)
    assert not [c for c in doc["causes"] if "write limit" in c], doc["causes"]
    assert all(t["seconds_refused"] == 0 for run in doc["runs"] for t in run["tables"]
               if t["direction"] == "write")


def test_a_load_its_table_serves_has_no_table_cause() -> None:
    result = CliRunner().invoke(cli, ["simulate", "--autopilot", str(STEADY), "--duration",
                                      "300", "--json"])
    doc = json.loads(result.stdout)
    assert doc["causes"] == []
    assert all(t["seconds_refused"] == 0 for run in doc["runs"] for t in run["tables"])


def test_a_limit_asked_past_that_refused_nothing_says_what_kept_the_load_from_it(
        tmp_path: Path) -> None:
    """A GSI table of 4,000 write units a second asked 5,200 and more: the placement
    records crowd the table's partitions, which refuse them before the table does, and
    the autopilot's admission holds writes back; its reads are never held by admission."""
    path = tmp_path / "gsi.toml"
    path.write_text('duration = 300\n[table]\nprofile = "dynamodb-on-demand"\nlayout = "gsi"\n'
                    "[values.V0]\nwrite = 3000\nread = 10\npage = 100\n"
                    "[values.V1]\nwrite = 200\nread = 10\npage = 100\n"
                    "bursts = [{at = 150, seconds = 30, write = 2000}]\n")
    result = CliRunner().invoke(cli, ["simulate", "--autopilot", str(path), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["runs"][0]["writes_refused_by_admission"] > 0
    writes = [c for c in doc["causes"] if "'s writes ask up to" in c]
    assert [c.split("'s")[0] for c in writes] == ["the table", "the index"]
    for cause in writes:
        assert "(autopilot, static and none), past the 4,000 it served, though its " \
            "partitions refused them and admission held them back first; warm_write sets " \
            "what it serves" in cause
    assert not [c for c in doc["causes"] if "read" in c.split(" ask")[0]
                and "admission" in c]


def test_a_cosmos_containers_one_budget_is_said_once_for_reads_and_writes(
        tmp_path: Path) -> None:
    """On Cosmos DB reads and writes draw on one budget: each run records one use of it a
    resource (``both``), and a budget asked past says what kept the load from it (it had
    said nothing of that, taking the budget's held writes for writes held by reads)."""
    path = tmp_path / "cosmos.toml"
    path.write_text('duration = 60\n[table]\nprofile = "cosmos"\nprovisioned_write = 40000\n'
                    "[values.A]\nwrite = 1500\nread = 300\npage = 100\nshards = 8\n")
    result = CliRunner().invoke(cli, ["simulate", "--autopilot", str(path), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert {t["direction"] for run in doc["runs"] for t in run["tables"]} == {"both"}
    (cause,) = doc["causes"]
    assert cause.startswith("the table's reads and writes ask up to ")
    assert "past the 40,000 it served, though its partitions refused them first; " \
        "provisioned_write sets what it serves" in cause


def test_a_raised_budget_says_when_it_is_lifted(tmp_path: Path) -> None:
    """A grow's budget read 'the budget rises to 12,000 units/s ... until the migration
    ends', where it lasted until the load had stayed low for t_down after it (the
    migration done at 489 s, the budget lifted at 1,280 s)."""
    workload = tmp_path / "ap.toml"
    workload.write_text(
        'duration = 2400\n[table]\nprofile = "dynamodb-on-demand"\npartitions = 0\n'
        "warm_write = 40000\n[values.A]\nwrite = [[0, 200], [300, 1500], [900, 200]]\n"
        "delete = [[0, 200], [300, 1500], [900, 200]]\nread = 2\npage = 50\n"
        "[values.B]\nwrite = 100\ndelete = 100\nshards = 2\n")
    result = CliRunner().invoke(cli, ["simulate", "--autopilot", str(workload), "--json"])
    assert result.exit_code == 0, result.output
    run = json.loads(result.output)["runs"][0]
    rises = [a["reason"] for a in run["actions"] if "the budget rises" in a["reason"]]
    assert rises, [a["reason"] for a in run["actions"]]
    for reason in rises:
        assert "until the migration ends" not in reason
        assert "once the migration has ended it is lifted when the load has stayed below" \
            in reason, reason


def test_static_n_is_the_planners_n_for_the_peak() -> None:
    """Static N rounded the peak up to the live sizer's 2% grid first: 6,000 units/s
    read as 6,082 and N=10 where the planner (plan --peak A=3000, 2 units a write) says 9."""
    from shardex.autopilot.sizing import PlannerSizer
    from shardex.plan import plan_shards

    table = profile("dynamodb-on-demand", partitions=0, warm_write=40_000)
    sizer = PlannerSizer(table)
    planned = plan_shards({"A": 3000.0}, table=table).values["A"].shards
    assert sizer("A", 6000.0, None, exact=True) == planned == 9
    assert sizer("A", 6000.0, None) == 10  # the live sizer's grid, shared between ticks
