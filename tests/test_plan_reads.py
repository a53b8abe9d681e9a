"""A key hot with reads: ``plan`` sizes its N on its reads too, ``simulate DIAGNOSIS`` offers
its reads against the read ceiling, and ``plan --verify`` offers what the plan sized.

The probe's finding, reproduced first: a key read at 6,000 units a second (twice a
partition's 3,000) and written at 100; its diagnosis says N=3, its simulation throttles it
at N=1, and ``plan --from`` said N=1, "keeps up": it sized N on the writes alone.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from shardex.cli import cli, main
from shardex.documents import DIAGNOSE_SCHEMA
from shardex.errors import InvalidInput
from shardex.plan import plan_shards
from shardex.routing import Routing, ShardPolicy
from shardex.scenarios.simulate import simulate
from shardex.scenarios.verify import verify_plan
from shardex.scenarios.workload import load_workload
from shardex.sim import profile

WARM = ("--table", "warm_write=40000", "--table", "warm_read=40000")
STORE = "memory://?warm_write=40000&warm_read=40000"


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), terminal_width=200)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == 0, result.output
    return result.stdout


def read_hot_log(path: Path) -> Path:
    """60 s: R read at 6,000 units a second and written at 100, W written at 300."""
    rows = ["timestamp,key,op,units"]
    for t in range(60):
        second = 1796014800 + t
        rows += [f"{second},R,read,6000", f"{second},R,write,100", f"{second},W,write,300"]
    path.write_text("\n".join(rows) + "\n")
    return path


def diagnosed(tmp_path: Path) -> Path:
    path = tmp_path / "diag.json"
    path.write_text(invoke("diagnose", str(read_hot_log(tmp_path / "log.csv")), "--json"))
    return path


# -- the probe's repro, end to end ------------------------------------------------------------

def test_a_read_hot_key_is_planned_on_its_reads_and_the_simulation_agrees(
        tmp_path: Path) -> None:
    """diagnose: R's reads are 2x a partition, N=3; plan --from said N=1, 'keeps up', binds
    none; simulate of the diagnosis on that layout accepted 16.4% of R."""
    diagnosis = diagnosed(tmp_path)
    top = {row["key"]: row for row in json.loads(diagnosis.read_text())["top"]}
    assert top["R"]["peak_read_units_per_s"] == 6000.0
    assert top["R"]["peak_to_ceiling"] == 2.0
    plan = json.loads(invoke("plan", "--from", str(diagnosis), *WARM, "--json"))
    r = plan["values"]["R"]
    assert r["read_units_per_s"] == 6000.0
    assert r["read_shards"] == 3  # 6,000 x 1.5 over 3,000
    assert r["shards"] >= 3
    assert plan["values"]["W"]["read_units_per_s"] == 0.0
    assert plan["binds"] == "partition"
    layout = tmp_path / "plan.json"
    layout.write_text(json.dumps(plan))
    run = json.loads(invoke("simulate", str(diagnosis), "--layout", str(layout), "--store",
                            STORE, "--duration", "120", "--json"))
    assert run["values"]["R"]["shards"] == r["shards"]
    assert run["values"]["R"]["accepted_ratio"] >= 0.999
    assert run["verdict"]["ok"] == plan["verdict"]["keeps_up"]
    verified = json.loads(invoke("plan", "--from", str(diagnosis), *WARM, "--verify",
                                 "--verify-seconds", "120", "--json"))["verify"]
    assert verified["agrees"]
    assert verified["values"]["R"]["accepted_ratio"] >= 0.999


def test_the_text_says_which_n_its_reads_set(tmp_path: Path) -> None:
    """N=3 by the read rule; at the p99 of placements two of R's 3 shard keys share a
    partition (7% of placements on 40 partitions), so N grows as it does for writes."""
    diagnosis = str(diagnosed(tmp_path))
    n = json.loads(invoke("plan", "--from", diagnosis, *WARM, "--json"))["values"]["R"]["shards"]
    text = " ".join(invoke("plan", "--from", diagnosis, *WARM).split())
    assert "peaks are the write units/s" in text
    assert "and its read units/s as measured; ceiling dynamodb (1000 write and 3000 read " \
        "units/s a partition)" in text
    assert f"R: N={n} set by its reads (6,000 read units/s x 1.5 headroom over 3,000 a " \
        "partition): 3 by that rule, " in text
    assert "its writes alone need 1" in text
    assert "W: N=1 set by its reads" not in text
    assert "the values read 6,000 units/s and 0 read units/s locate the items, 9,000 with " \
        "the headroom (of 40,000)" in text
    assert "partitions: the table has 40 partitions, 3,000 read units/s each" in text


# -- plan_shards(read_peaks=...) --------------------------------------------------------------

def test_read_peaks_set_n_when_they_need_more_than_the_writes() -> None:
    plan = plan_shards({"R": 100.0, "W": 300.0}, read_peaks={"R": 6000.0}, item_bytes=1024,
                       amplification=1.0, item_writes=0.0, partitions=0)
    r, w = plan.values["R"], plan.values["W"]
    assert (r.shards, r.read_shards, r.read_units_per_s) == (3, 3, 6000.0)
    assert (w.shards, w.read_shards, w.read_units_per_s) == (1, None, None)  # not measured
    assert r.to_dict()["read_units_per_s"] == 6000.0
    assert r.to_dict()["read_shards"] == 3
    assert plan.routing().overrides == {"R": ShardPolicy(shards=3)}
    # the writes' N stands when it is the larger
    more = plan_shards({"R": 2000.0}, read_peaks={"R": 3000.0}, amplification=1.0,
                       item_writes=0.0, partitions=0)
    assert more.values["R"].shards == 3
    assert more.values["R"].read_shards == 2


def test_without_read_peaks_nothing_is_measured() -> None:
    plan = plan_shards({"R": 100.0})
    assert plan.values["R"].read_units_per_s is None
    assert plan.values["R"].read_shards is None
    doc = plan.to_dict()["values"]["R"]
    assert doc["read_units_per_s"] is None
    assert doc["read_shards"] is None


def test_the_values_reads_count_against_the_tables_read_limit() -> None:
    """A new on-demand table serves 12,000 read units at once: 13,000 of reads pass it."""
    plan = plan_shards({"R": 10.0}, read_peaks={"R": 13_000.0}, amplification=1.0,
                       item_writes=0.0, partitions=0)
    assert plan.table is not None
    assert plan.verdict is not None
    assert plan.table.entry_read_units_per_s == 13_000.0
    assert plan.table.read_binds
    assert not plan.verdict.keeps_up
    assert plan.verdict.summary == (
        "throttles: the values' reads and the reads that locate items (13,000 units/s) are "
        "past the table's 12,000")
    assert plan.verdict.setting == {"warm_read": 19_500.0}  # the reads' own setting alone
    assert plan.to_dict()["table"]["entry_read_units_per_s"] == 13_000.0
    assert plan.to_dict()["table"]["required_read_units_per_s"] == 19_500.0


def test_reads_that_crowd_a_partition_are_no_reason_to_warm_the_writes() -> None:
    """A new table's 4 partitions: R's 5 shard keys of 2,000 read units share them. The
    verdict names the partitions' reads, and proposed warm_write=5,000 'with R=5': a
    write setting, for the reads, on a table whose 5 partitions they crowd as well. The
    read setting that starts a table of partitions enough spreads them."""
    plan = plan_shards({"R": 10.0}, read_peaks={"R": 10_000.0}, amplification=1.0,
                       item_writes=0.0)
    assert plan.verdict is not None
    assert not plan.verdict.keeps_up
    assert plan.verdict.summary.startswith("throttles: its 4 partitions take the reads of the "
                                           "shard keys hashed onto them")
    assert plan.verdict.setting == {"warm_read": 24_000.0}
    assert "warm_write" not in " ".join(plan.verdict.reasons)
    assert "pre-warming to warm_read=24,000 avoids it, with R=38" in plan.verdict.reasons


@pytest.mark.parametrize(("reads", "message"), [
    ({"R": -1.0}, "read peak of 'R' must be a finite number >= 0"),
    ({"R": math.nan}, "read peak of 'R' must be a finite number >= 0"),
    ({"R": math.inf}, "read peak of 'R' must be a finite number >= 0"),
    ({"R": True}, "read peak of 'R' must be a finite number >= 0"),
    ({"R": "6000"}, "read peak of 'R' must be a finite number >= 0"),
    ({"X": 10.0}, "read peak given for 'X', which has no peak"),
    ({"R": 1e12}, "R: a read peak of 1e+12 read units/s"),
])
def test_bad_read_peaks_are_refused(reads: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidInput, match=message.replace("(", r"\(").replace("+", r"\+")):
        plan_shards({"R": 100.0}, read_peaks=reads)  # type: ignore[arg-type]


# -- simulate DIAGNOSIS: reads against the read ceiling ----------------------------------------

def test_a_diagnosis_offers_its_reads_as_reads(tmp_path: Path) -> None:
    """R was offered 6,100 write units a second against a partition's 1,000: '16.4%
    accepted', 6x over where its diagnosis says 2x."""
    load = load_workload(diagnosed(tmp_path))
    r = load.values["R"]
    assert r.write_units is not None
    assert r.write_units.peak() == 100.0
    assert r.read_units is not None
    assert r.read_units.peak() == 6000.0
    table = profile("dynamodb-on-demand", warm_write=40_000.0, warm_read=40_000.0,
                    partitions=0)
    one = simulate(load, Routing(), table).to_dict()["values"]["R"]
    assert one["offered_writes_per_s"] == 100.0
    assert one["accepted_writes_per_s"] == 100.0
    assert one["offered_read_units_per_s"] == 6000.0
    assert one["read_units_per_s"] == pytest.approx(3000.0)  # one partition's read ceiling
    assert one["accepted_ratio"] == pytest.approx(0.5)
    three = simulate(load, Routing(overrides={"R": ShardPolicy(shards=3)}), table)
    assert three.ok
    assert three.to_dict()["values"]["R"]["read_units_per_s"] == pytest.approx(6000.0)


def test_a_throttled_read_is_a_cause_of_the_verdict(tmp_path: Path) -> None:
    table = profile("dynamodb-on-demand", warm_write=40_000.0, warm_read=40_000.0,
                    partitions=0)
    sim = simulate(load_workload(diagnosed(tmp_path)), Routing(), table)
    assert not sim.ok
    assert sim.verdict().startswith("throttled: R (N=1) accepted 50.0% of its read units")


def test_a_sustained_run_splits_the_mean_in_the_peaks_proportion(tmp_path: Path) -> None:
    path = tmp_path / "diag.json"
    path.write_text(json.dumps({"schema": DIAGNOSE_SCHEMA, "totals": {"seconds": 10}, "top": [
        {"key": "R", "peak_units_per_s": 4000.0, "peak_write_units_per_s": 1000.0,
         "peak_read_units_per_s": 3000.0, "sustained_units_per_s": 2000.0}]}))
    r = load_workload(path, rate="sustained").values["R"]
    assert r.write_units is not None
    assert r.write_units.peak() == 500.0
    assert r.read_units is not None
    assert r.read_units.peak() == 1500.0


def test_a_row_without_the_split_is_offered_as_writes_as_before(tmp_path: Path) -> None:
    path = tmp_path / "diag.json"
    path.write_text(json.dumps({"schema": DIAGNOSE_SCHEMA, "totals": {"seconds": 10}, "top": [
        {"key": "R", "peak_units_per_s": 4000.0, "peak_write_units_per_s": 1000.0}]}))
    r = load_workload(path).values["R"]
    assert r.write_units is not None
    assert r.write_units.peak() == 4000.0
    assert r.read_units is None


def test_a_recommended_change_beyond_top_carries_its_reads(tmp_path: Path) -> None:
    """A key the recommendation names beyond --top: its reads are in its change too."""
    rows = ["timestamp,key,op,units", "1796014800,B,read,6000"]
    rows += [f"{1796014800 + t},A,write,900" for t in range(10)]  # the heavier in units
    log = tmp_path / "log.csv"
    log.write_text("\n".join(rows) + "\n")
    doc = json.loads(invoke("diagnose", str(log), "--top", "1", "--json"))
    change = next(c for c in doc["recommendation"]["changes"] if c["key"] == "B")
    assert change["peak_read_units_per_s"] == 6000.0
    path = tmp_path / "diag.json"
    path.write_text(json.dumps(doc))
    plan = json.loads(invoke("plan", "--from", str(path), *WARM, "--json"))
    assert plan["values"]["B"]["read_units_per_s"] == 6000.0
    assert plan["values"]["B"]["shards"] >= 3


# -- plan --verify offers the plan's reads ------------------------------------------------------

def test_verify_offers_the_reads_the_plan_sized() -> None:
    plan = plan_shards({"R": 100.0, "W": 300.0}, read_peaks={"R": 6000.0}, amplification=1.0,
                       item_writes=0.0, table=profile("dynamodb-on-demand",
                                                      warm_write=40_000.0,
                                                      warm_read=40_000.0))
    assert plan.verdict is not None
    assert plan.verdict.keeps_up
    verified = verify_plan(plan, seconds=60)
    reads = next(t for t in verified["tables"]
                 if (t["resource"], t["direction"]) == ("table", "read"))
    assert reads["peak_asked_per_s"] == pytest.approx(6000.0)
    # R's reads come nearer their ceiling than any partition's writes: their p99 placement
    write, read = plan.partitions
    assert (write.direction, read.direction) == ("write", "read")
    assert read.busiest.worst / read.ceiling > write.busiest.worst / write.ceiling
    assert verified["namespace"] == read.busiest.worst_namespace
    assert verified["values"]["R"]["accepted_ratio"] >= 0.999
    assert verified["agrees"]


def test_read_peaks_are_given_on_the_command_line_too() -> None:
    """Only a diagnosis carried read peaks to the command line; --read-peak gives them
    (a value read and not written is planned on its reads, at 0 writes)."""
    doc = json.loads(invoke("plan", "--peak", "W=300", "--read-peak", "R=6000", "--table",
                            "warm_write=40000", "--table", "warm_read=40000", "--json"))
    reads = doc["values"]["R"]
    assert (reads["peak_writes_per_s"], reads["read_units_per_s"]) == (0.0, 6000.0)
    assert reads["shards"] >= 3  # 6,000 x 1.5 over 3,000 read units a partition
    assert doc["values"]["W"]["read_units_per_s"] is None
    assert doc["verdict"]["keeps_up"]
    result = CliRunner().invoke(cli, ["plan", "--read-peak", "R=1", "--read-peak", "R=2"])
    assert result.exit_code == 2
    assert "given twice for 'R'" in result.output


def test_an_item_size_given_to_a_plan_of_a_diagnosis_is_refused(tmp_path: Path) -> None:
    """It was taken and ignored: a listing of a diagnosis's values was priced on 1,024-byte
    entries whatever --item-bytes said; --read-item-bytes sizes them."""
    diagnosis = str(diagnosed(tmp_path))
    result = CliRunner().invoke(cli, ["plan", "--from", diagnosis, "--item-bytes", "200",
                                      "--listing-items", "10000"])
    assert result.exit_code == 2
    assert "Invalid value for --item-bytes: a diagnosis measured its units, the entries' " \
        "size included (--read-item-bytes sizes a listing's entries)" in result.output
    sized = json.loads(invoke("plan", "--from", diagnosis, "--read-item-bytes", "200",
                              "--listing-items", "10000", "--json"))
    whole = json.loads(invoke("plan", "--from", diagnosis, "--listing-items", "10000",
                              "--json"))
    assert sized["values"]["W"]["listing_read_units"] \
        < whole["values"]["W"]["listing_read_units"]


def test_a_cosmos_plan_takes_reads_and_writes_from_one_budget() -> None:
    """4,950 RU of writes and 6,000 RU of reads a second on a container of 10,000 RU/s:
    the plan said 'keeps up' with N=1 (each direction under a ceiling of its own) and
    its simulation accepted every write; Cosmos DB serves both from one budget."""
    plan = json.loads(invoke("plan", "--mode", "cosmos", "--peak", "A=500", "--read-peak",
                             "A=6000", "--item-writes", "0", "--verify", "--json"))
    assert plan["table"]["shared_units"] is True
    assert plan["table"]["required_units_per_s"] == pytest.approx(10_950 * 1.5)
    assert plan["values"]["A"]["shards"] >= 2
    assert not plan["verdict"]["keeps_up"]
    assert plan["verdict"]["summary"].startswith(
        "throttles: the table's reads and writes (10,950 units/s at the peak) are past what "
        "it serves at once (10,000: provisioned capacity)")
    assert plan["verify"]["verdict"]["ok"] is False  # and the simulation agrees
    (setting,) = plan["verdict"]["setting"].items()
    advised = json.loads(invoke(
        "plan", "--mode", "cosmos", "--peak", "A=500", "--read-peak", "A=6000",
        "--item-writes", "0", "--table", f"{setting[0]}={setting[1]:g}", "--verify",
        "--json"))
    assert advised["verdict"]["keeps_up"]
    assert advised["verify"]["verdict"]["ok"] is True


def test_a_peak_beside_a_diagnosis_is_planned_in_its_units(tmp_path: Path) -> None:
    """--peak NEWKEY=5000 (writes a second) beside --from was planned as 5,000 write units
    (the diagnosis's units at 1x), N=8, where alone it is 10,000 (table mode: 2 units a
    write), N=15; the JSON said the amplification was 'given'."""
    diagnosis = diagnosed(tmp_path)
    alone = json.loads(invoke("plan", "--peak", "NEWKEY=5000", "--json"))
    beside = json.loads(invoke("plan", "--peak", "NEWKEY=5000", "--from", str(diagnosis),
                               "--json"))
    new = beside["values"]["NEWKEY"]
    assert new["write_units_per_s"] == alone["values"]["NEWKEY"]["write_units_per_s"] == 10_000
    assert new["shards"] == alone["values"]["NEWKEY"]["shards"]
    assert beside["amplification_from"] == "measured"
    assert any("--peak NEWKEY=5000 (writes a second of 1 KB entries) planned as 2 write "
               "units each, the table mode's" in note for note in beside["notes"])


@pytest.mark.parametrize(("change", "said"), [
    (lambda top: top.append({**top[0]}), "top[2]: lists R again (top[0] did): a key is one row"),
    (lambda top: top[0].update(shards=-3), "top[0].shards: must be an integer from 1 to 4096, "
                                           "got -3"),
    (lambda top: top[0].update(peak_write_units_per_s=float("nan")),
     "top[0].peak_write_units_per_s must be a finite number of units a second >= 0, got nan"),
])
def test_a_diagnosis_that_says_a_key_twice_or_a_bad_figure_is_refused_naming_the_row(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Any, said: str) -> None:
    """A key listed twice was planned (and simulated) on its later row alone; shards of -3
    were planned, where simulate refused them; a NaN peak was refused naming neither the
    file nor the row."""
    diagnosis = diagnosed(tmp_path)
    doc = json.loads(diagnosis.read_text())
    change(doc["top"])
    diagnosis.write_text(json.dumps(doc))
    for command in (["plan", "--from"], ["simulate"]):
        if command == ["simulate"] and "nan" in said:
            continue  # simulate reads its own figure (peak_units_per_s)
        with pytest.raises(SystemExit) as done:
            main([*command, str(diagnosis)])
        err = " ".join(capsys.readouterr().err.split())
        assert done.value.code == 2, err
        assert f"{diagnosis}: {said}" in err, err
