"""``shardex diagnose`` driven as a user drives it."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from shardex.cli import cli, main
from shardex.errors import InvalidLog
from tests import heat_samples as samples


@pytest.fixture(autouse=True)
def _still_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Time stands still: a read of stdin prints its one final report, however long the
    host takes to read it (a slow host crossed the live view's refresh and printed two)."""
    import shardex.commands.diagnose as command

    monkeypatch.setattr(command, "_clock", lambda: 0.0)


def invoke(*args: str, stdin: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["diagnose", *args], input=stdin, terminal_width=200)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout


def test_table_names_the_hot_keys_the_reason_and_the_plan(tmp_path: Path) -> None:
    path = samples.write_log(tmp_path / "orders.csv", samples.low_cardinality())
    code, out = invoke(str(path))
    assert code == 0, out
    lines = out.splitlines()
    pending = next(line for line in lines if "PENDING" in line and "│" in line)
    cells = [c.strip() for c in pending.split("│")]
    assert cells[1:-1] == ["PENDING", "64.6%", "2,010", "2,010.0", "2.00", "0", "1 → 3"]
    assert "classification: low_cardinality" in out
    assert "recommendation: calculated_suffix\n  PENDING: N=1 → 3\n  SHIPPED: N=1 → 2\n" in out
    assert "timestamps: epoch seconds" in out


def test_json_report(tmp_path: Path) -> None:
    path = samples.write_log(tmp_path / "tenants.parquet", samples.popular_entity())
    code, out = invoke(str(path), "--json", "--top", "3")
    assert code == 0
    report = json.loads(out)
    assert report["classification"] == "popular_entity"
    assert report["top"][0]["key"] == "tenant-42"
    assert len(report["top"]) == 3
    assert report["recommendation"]["strategy"] == "dedicated_heavy_key"
    assert report["rows"] == 1500
    assert report["skipped_rows"] == 0


def test_skip_bad_reports_what_it_skipped(tmp_path: Path) -> None:
    rows = samples.low_cardinality(seconds=5)
    rows[3] = {**rows[3], "op": "erase"}
    rows[7] = {**rows[7], "units": -4}
    path = samples.write_log(tmp_path / "orders.jsonl", rows)
    code, out = invoke(str(path), "--skip-bad", "--json")
    assert code == 0
    report = json.loads(out)
    assert (report["rows"], report["skipped_rows"]) == (len(rows) - 2, 2)
    assert report["evidence"]["skipped_by_column"] == {"op": 1, "units": 1}
    code, out = invoke(str(path), "--skip-bad")
    assert "2 malformed rows skipped (op: 1, units: 1)" in " ".join(out.split())


def test_plot_draws_a_heat_map(tmp_path: Path) -> None:
    path = samples.write_log(tmp_path / "days.csv", samples.sequential())
    png = tmp_path / "heat.png"
    code, out = invoke(str(path), "--plot", str(png))
    assert code == 0, out
    assert "classification: sequential" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_stdin_and_stream_use_space_saving(tmp_path: Path) -> None:
    path = samples.write_log(tmp_path / "orders.csv", samples.low_cardinality())
    code, out = invoke("-", "--json", stdin=path.read_text())
    assert code == 0, out
    streamed = json.loads(out)
    code, out = invoke(str(path), "--json")
    exact = json.loads(out)
    assert streamed["top"] == exact["top"]
    assert streamed["evidence"]["space_saving"]["counters"] == 1000
    jsonl = samples.write_log(tmp_path / "orders.jsonl", samples.low_cardinality())
    code, out = invoke(str(jsonl), "--stream", "--counters", "2", "--json")
    assert code == 0
    assert json.loads(out)["evidence"]["distinct_keys_exact"] is False


def test_ceiling_option(tmp_path: Path) -> None:
    path = samples.write_log(tmp_path / "orders.csv", samples.low_cardinality())
    code, out = invoke(str(path), "--ceiling", "azure-tables", "--json")
    assert code == 0
    report = json.loads(out)
    # its writes fill a partition's 2,000 entities a second, and its reads come on top:
    # Azure's partitions serve both from one budget
    assert report["top"][0]["peak_to_ceiling"] == 1.005
    assert report["recommendation"]["shards"] == {"PENDING": 2}


@pytest.mark.parametrize(("args", "message"), [
    (["missing.csv"], "missing.csv: no such file"),
    (["access.log"], "is binary"),
    (["BAD", "--headroom", "0"], "headroom"),
    (["BAD", "--ceiling", "oracle"], "unknown ceiling"),
    (["BAD"], "column 'op': op 'erase' is not 'read' or 'write'"),
    (["BAD", "--stream"], "column 'op': op 'erase' is not 'read' or 'write'"),
    (["BAD", "--stream", "--plot", "x.png"], "--plot needs files"),
    (["missing.csv", "--stream"], "no such file"),
    # a process substitution (diagnose <(zcat log.gz)) is a pipe: it was "no such file"
    (["PIPE"], "pipe: is a pipe or a device, not a file: pipe it to stdin instead, e.g. "
               "zcat access.log.gz | shardex diagnose -"),
    (["PIPE", "--stream"], "pipe: is a pipe or a device, not a file"),
    (["PIPE", "--stream", "--format", "csv"], "pipe: is a pipe or a device, not a file"),
])
def test_bad_input_exits_2_with_one_clear_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        args: list[str], message: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "access.log").write_bytes(b"\x00\x01\x02 binary")
    rows = samples.low_cardinality(seconds=2)
    rows[5] = {**rows[5], "op": "erase"}
    bad = samples.write_log(tmp_path / "bad.csv", rows)
    os.mkfifo(tmp_path / "pipe")  # never opened: a read of it would wait for a writer
    named = {"BAD": str(bad), "PIPE": str(tmp_path / "pipe")}
    with pytest.raises(SystemExit) as done:
        main(["diagnose", *[named.get(a, a) for a in args]])
    assert done.value.code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert err.startswith("error: ")
    assert message in err
    if "erase" in message:
        assert f"{bad}:7 column 'op'" in err
    assert "Traceback" not in err


def test_forced_format(tmp_path: Path) -> None:
    path = samples.write_log(tmp_path / "orders.jsonl", samples.uniform(rows_count=50))
    renamed = path.rename(tmp_path / "orders.txt")
    code, out = invoke(str(renamed), "--format", "jsonl", "--json")
    assert code == 0
    assert json.loads(out)["rows"] == 50


@pytest.mark.parametrize(("module", "args", "extra"), [
    ("duckdb", [], "shardex[diagnose]"),
    ("matplotlib", ["--plot", "heat.png"], "shardex[plot]"),
])
def test_a_missing_extra_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch, module: str,
                                  args: list[str], extra: str) -> None:
    path = samples.write_log(tmp_path / "orders.csv", samples.low_cardinality(seconds=2))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, module, None)  # import now raises ImportError
    with pytest.raises(SystemExit) as done:
        main(["diagnose", str(path), *args])
    assert done.value.code == 1  # the operation failed; the command was right
    assert f"pip install '{extra}'" in " ".join(capsys.readouterr().err.split())


def test_stdin_names_a_json_array_and_takes_no_file_beside_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On stdin a JSON array read as a CSV without a 'timestamp' column (a file named it),
    and '- FILE' said '--stream reads one file', naming an option not given."""
    path = samples.write_log(tmp_path / "orders.csv", samples.low_cardinality())
    with pytest.raises(InvalidLog, match=r"^<stdin>:1: is a JSON array; shardex reads JSON "
                                         "Lines"):
        invoke("-", stdin='[{"timestamp": 1796014800.0, "key": "P"}]\n')
    with pytest.raises(SystemExit) as done:
        main(["diagnose", "-", str(path)])
    assert done.value.code == 2
    assert capsys.readouterr().err == ("error: '-' (stdin) is read alone: give no file "
                                       "beside it\n")


def test_a_stream_past_its_counters_classifies_on_what_keys_surely_took(
        tmp_path: Path) -> None:
    """Space-Saving's m counters sum to every unit, so a uniform log of 5,000 keys read
    with 10 counters was 'low_cardinality', its top 10 keys 100% of the load. Shares are
    the units each key surely took (less its error bound); how many keys carry 80% is
    unknown past the counters (null). A load the heavy keys do carry stays so."""
    import random

    rng = random.Random(5)
    lines = ["timestamp,key,op,units"]
    for second in range(60):
        lines += [f"{1796014800 + second},u{rng.randint(0, 4999)},write,1"
                  for _ in range(1000)]
    uniform = tmp_path / "uniform.csv"
    uniform.write_text("\n".join(lines) + "\n")
    code, out = invoke("-", "--counters", "10", "--json", stdin=uniform.read_text())
    assert code == 0, out
    doc = json.loads(out)
    assert doc["classification"] == "uniform", doc["evidence"]
    assert doc["evidence"]["keys_for_80pct"] is None
    heavy = ["timestamp,key,op,units"]
    for second in range(60):
        heavy += [f"{1796014800 + second},{key},write,300" for key in ("A", "B", "C")]
        heavy += [f"{1796014800 + second},u{rng.randint(0, 4999)},write,1" for _ in range(50)]
    code, out = invoke("-", "--counters", "10", "--json", stdin="\n".join(heavy) + "\n")
    doc = json.loads(out)
    assert doc["classification"] == "low_cardinality", doc["evidence"]
    assert doc["evidence"]["keys_for_80pct"] == 3
