"""``shardex diagnose`` judges one input alike however it is read: a file, ``--stream``, stdin.

Each refusal is one line on stderr, ``error: ...``, naming the file (``<stdin>``) and the
line at fault, with exit code 2; what one mode accepts, the others accept too.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from shardex.cli import main
from shardex.commands import diagnose as command
from shardex.heat.aggregate import MAX_AMOUNT
from tests import heat_samples as samples
from tests.heat_samples import BASE

MODES = ["file", "stream", "stdin"]
Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Run:
    """Run ``shardex diagnose`` on ``path`` read in ``mode``: (exit code, stdout, stderr)."""
    monkeypatch.setattr(command, "_clock", lambda: 0.0)  # the live view never refreshes

    def diagnose(mode: str, path: Path, *args: str) -> tuple[int, str, str]:
        given = {"file": [str(path)], "stream": ["--stream", str(path)], "stdin": ["-"]}[mode]
        if mode == "stdin":
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(path.read_bytes())))
        code = 0
        try:
            main(["diagnose", *given, *args])
        except SystemExit as done:
            code = int(done.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    return diagnose


def name_in(mode: str, path: Path) -> str:
    return "<stdin>" if mode == "stdin" else str(path)


def refused(result: tuple[int, str, str], start: str) -> str:
    """The one error line of a refused run, checked to start with ``start``."""
    code, out, err = result
    assert (code, out) == (2, ""), err
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    assert err.startswith(f"error: {start}"), err
    return err.strip()


def document(out: str) -> dict[str, object]:
    """The final report of ``--json``: one indented document, or a stream's last line."""
    found = json.loads(out if out.startswith("{\n") else out.splitlines()[-1])
    assert isinstance(found, dict)
    return found


def write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, str):
        text = text.encode("utf-8")
    path.write_bytes(text)
    return path


CSV_HEADER = "timestamp,key,op,units\n"


# -- D5: units a float cannot sum --------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("as_json", [False, True])
def test_units_past_the_bound_are_a_malformed_row(tmp_path: Path, run: Run, mode: str,
                                                  as_json: bool) -> None:
    row = "2026-11-30T05:00:00Z,PENDING,write,1e308\n"
    path = write(tmp_path / "huge.csv", CSV_HEADER + row + row)
    err = refused(run(mode, path, *(["--json"] if as_json else [])),
                  f"{name_in(mode, path)}:2 column 'units': ")
    assert f"must be a number >= 0 and below {MAX_AMOUNT:g}" in err


@pytest.mark.parametrize("mode", MODES)
def test_bytes_past_the_bound_are_a_malformed_row(tmp_path: Path, run: Run, mode: str) -> None:
    line = json.dumps({"timestamp": BASE, "key": "PENDING", "op": "write", "bytes": 1e300})
    path = write(tmp_path / "huge.jsonl", f"{line}\n{line}\n")
    err = refused(run(mode, path), f"{name_in(mode, path)}:1 column 'bytes': ")
    assert f"below {MAX_AMOUNT:g}" in err


@pytest.mark.parametrize("mode", MODES)
def test_large_but_real_units_still_count(tmp_path: Path, run: Run, mode: str) -> None:
    row = f"{BASE},PENDING,write,{MAX_AMOUNT / 10:.0f}\n"
    path = write(tmp_path / "big.csv", CSV_HEADER + row * 3)
    code, out, err = run(mode, path, "--json")
    assert code == 0, err
    report = document(out)
    assert report["totals"]["units"] == pytest.approx(3 * MAX_AMOUNT / 10)
    assert report["top"][0]["share"] == 1.0
    assert report["recommendation"]["shards"] == {"PENDING": 4096}


def test_skip_bad_counts_a_row_past_the_bound_under_units(tmp_path: Path, run: Run) -> None:
    path = write(tmp_path / "huge.csv",
                 CSV_HEADER + f"{BASE},PENDING,write,1e308\n{BASE},PENDING,write,5\n")
    code, out, err = run("file", path, "--json", "--skip-bad")
    assert code == 0, err
    report = json.loads(out)
    assert (report["rows"], report["totals"]["units"]) == (1, 5.0)
    assert report["evidence"]["skipped_by_column"] == {"units": 1}


@pytest.mark.parametrize("statistic", ["Sum", "Count"])
def test_an_insights_datapoint_past_the_bound_is_refused(tmp_path: Path, run: Run,
                                                         statistic: str) -> None:
    points = [{"Timestamp": f"2026-11-30T05:0{i}:00Z", "ApproximateValue": 1e308}
              for i in range(2)]
    path = write(tmp_path / "report.json", json.dumps({
        "AggregationStatistic": statistic, "KeyLabels": ["pk"],
        "Contributors": [{"Keys": ["PENDING"], "Datapoints": points}]}))
    err = refused(run("file", path, "--json"), f"{path} column ")
    assert "Contributors[0].Datapoints[0].ApproximateValue" in err
    assert f"below {MAX_AMOUNT:g}" in err


# -- D6: a hot key that no routing override can name --------------------------------------


def hot(key: str) -> str:
    """A log in which ``key`` takes 3,000 write units a second: it needs 5 shards."""
    return CSV_HEADER + "".join(f"{BASE + t},{key},write,100\n"
                                for t in range(10) for _ in range(30))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("key", "why"), [
    ("X#Y", "contains the separator '#'"),
    ("K" * 1100, "1100 bytes of UTF-8; at most 1024"),
], ids=["separator", "too-long"])
def test_a_hot_key_that_cannot_be_a_logical_key_gets_no_override(
        tmp_path: Path, run: Run, mode: str, key: str, why: str) -> None:
    path = write(tmp_path / "hot.csv", hot(key))
    code, out, err = run(mode, path, "--json")
    assert code == 0, err
    report = document(out)
    recommendation = report["recommendation"]
    assert recommendation["shards"] == {key: 5}
    assert report["routing"]["overrides"] == {}
    assert list(recommendation["unroutable"]) == [key]
    assert why in recommendation["unroutable"][key]
    assert "gets no routing override" in recommendation["why"]
    code, out, err = run(mode, path)
    assert code == 0, err
    table = " ".join(out.split())
    assert f"{key}:N=1→5" in "".join(out.split())  # a long key is folded over lines
    assert "gets no routing override" in table
    assert why in table


def test_a_routable_key_keeps_its_override_beside_an_unroutable_one(tmp_path: Path,
                                                                    run: Run) -> None:
    path = write(tmp_path / "hot.csv", hot("X#Y") + hot("PENDING")[len(CSV_HEADER):])
    code, out, err = run("file", path, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["recommendation"]["shards"] == {"PENDING": 5, "X#Y": 5}
    assert list(report["routing"]["overrides"]) == ["PENDING"]
    assert list(report["recommendation"]["unroutable"]) == ["X#Y"]


def test_a_popular_entity_that_cannot_be_a_logical_key_is_not_isolated(
        tmp_path: Path, run: Run) -> None:
    rows = [{**r, "key": "tenant#x42"} if r["key"] == "tenant-42" else r
            for r in samples.popular_entity()]
    path = samples.write_log(tmp_path / "tenants.csv", rows)
    code, out, err = run("file", path, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["recommendation"]["strategy"] == "dedicated_heavy_key"
    assert report["recommendation"]["shards"] == {"tenant#x42": 4}
    assert report["isolation"] is None
    assert report["routing"]["overrides"] == {}
    assert "tenant#x42" not in report["admission"]["overrides"]


def test_a_routable_report_keeps_its_shape(tmp_path: Path, run: Run) -> None:
    path = write(tmp_path / "hot.csv", hot("PENDING"))
    code, out, err = run("file", path, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert "unroutable" not in report["recommendation"]
    assert report["routing"]["overrides"]["PENDING"]["shards"] == 5


# -- D9, D10 and the head of a stream: refused as the file reader refuses them ------------------


@pytest.mark.parametrize("mode", MODES)
def test_a_lone_surrogate_is_not_a_valid_json_object(tmp_path: Path, run: Run,
                                                     mode: str) -> None:
    good = json.dumps({"timestamp": BASE, "key": "A\ud83d\ude00", "op": "write", "units": 1})
    bad = json.dumps({"timestamp": BASE, "key": "A\ud800B", "op": "write", "units": 1})
    path = write(tmp_path / "surr.jsonl", f"{good}\n{bad}\n")
    refused(run(mode, path), f"{name_in(mode, path)}:2: is not a valid JSON object")


@pytest.mark.parametrize("mode", MODES)
def test_a_lone_surrogate_anywhere_in_the_line_is_refused(tmp_path: Path, run: Run,
                                                          mode: str) -> None:
    bad = json.dumps({"timestamp": BASE, "key": "A", "op": "write", "units": 1, "x": "\udc00"})
    path = write(tmp_path / "surr.jsonl", bad + "\n")
    refused(run(mode, path), f"{name_in(mode, path)}:1: is not a valid JSON object")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("header", "column", "message"), [
    ("timestamp,key,op,units,units", "units", "header names column 'units' twice"),
    ("timestamp,key,op,,units", None, "header names column '' with an empty name"),
    ("timestamp,key,OP,units,op", "op", "header names column 'op' twice"),
], ids=["twice", "empty", "case"])
def test_a_csv_header_is_checked_alike(tmp_path: Path, run: Run, mode: str, header: str,
                                       column: str | None, message: str) -> None:
    path = write(tmp_path / "dup.csv", f"{header}\n2026-11-30T05:00:00Z,PENDING,write,1,2000\n")
    at = f"{name_in(mode, path)}:1" + (f" column {column!r}" if column else "")
    err = refused(run(mode, path, "--json"), f"{at}: ")
    assert message in err


@pytest.mark.parametrize("mode", MODES)
def test_a_byte_order_mark_before_json_lines_is_read(tmp_path: Path, run: Run,
                                                     mode: str) -> None:
    line = json.dumps({"timestamp": BASE, "key": "A", "op": "write", "units": 1})
    path = write(tmp_path / "bom.jsonl", f"\ufeff{line}\n{line}\n")
    code, out, err = run(mode, path, "--json")
    assert code == 0, err
    assert document(out)["rows"] == 2


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("content", "message"), [
    (b"", "is empty: not a log"),
    (b"\n  \n", "is empty: not a log"),
    (CSV_HEADER.encode() + b"2026-11-30T05:00:00Z,PEN\x00DING,write,1\n", "is binary"),
], ids=["empty", "blank", "nul"])
def test_input_that_is_no_log_is_refused(tmp_path: Path, run: Run, mode: str, content: bytes,
                                         message: str) -> None:
    path = write(tmp_path / "odd.csv", content)
    refused(run(mode, path), f"{name_in(mode, path)}: {message}")


@pytest.mark.parametrize("mode", MODES)
def test_a_nul_past_the_head_is_read_as_text(tmp_path: Path, run: Run, mode: str) -> None:
    rows = f"{BASE},PENDING,write,1\n" * 3000
    path = write(tmp_path / "late.csv", f"{CSV_HEADER}{rows}{BASE},PEN\x00DING,write,1\n")
    code, out, err = run(mode, path, "--json")
    assert code == 0, err
    assert document(out)["rows"] == 3001


def test_a_format_given_reads_an_empty_csv_as_one_without_a_header(tmp_path: Path,
                                                                    run: Run) -> None:
    path = write(tmp_path / "empty.csv", b"")
    for mode in MODES:
        refused(run(mode, path, "--format", "csv"),
                f"{name_in(mode, path)}:1: is empty: a CSV log starts with a header line")


# -- D13: the edges of the time range the docs state ---------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("stamp", "kind", "epoch"), [
    ("9999-12-31T23:59:59.5Z", "ISO 8601", 253_402_300_799),
    ("9999-12-31T23:59:59.999999Z", "ISO 8601", 253_402_300_799),
    ("0001-01-01T00:00:00Z", "ISO 8601", -62_135_596_800),
    ("99999999999999999999", "epoch nanoseconds", 100_000_000_000),
    ("99999999999999999", "epoch microseconds", 100_000_000_000),
    ("99999999999", "epoch seconds", 99_999_999_999),
])
def test_the_last_times_of_the_range_are_read(tmp_path: Path, run: Run, mode: str, stamp: str,
                                              kind: str, epoch: int) -> None:
    path = write(tmp_path / "edge.csv", f"{CSV_HEADER}{stamp},PENDING,write,1\n")
    code, out, err = run(mode, path, "--json")
    assert code == 0, err
    report = document(out)
    assert report["source"]["time_units"] == [kind]
    assert report["totals"]["first_second"] == epoch


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("stamp", ["10000-01-01T00:00:00Z", "100000000000000000000",
                                   "-1", "0000-12-31T23:59:59Z"])
def test_the_first_times_past_the_range_are_refused(tmp_path: Path, run: Run, mode: str,
                                                    stamp: str) -> None:
    path = write(tmp_path / "edge.csv", f"{CSV_HEADER}{stamp},PENDING,write,1\n")
    refused(run(mode, path), f"{name_in(mode, path)}:2 column 'timestamp': ")


@pytest.mark.parametrize("given", [[], ["--format", "csv"]], ids=["detected", "csv"])
def test_a_directory_streamed_is_refused_as_a_directory(tmp_path: Path, run: Run,
                                                        given: list[str]) -> None:
    """It was called "no such file" (exit 2), or with --format "Is a directory" (exit 1)."""
    (tmp_path / "logs").mkdir()
    samples.write_log(tmp_path / "logs" / "a.csv", samples.low_cardinality(seconds=2))
    code, _, err = run("stream", tmp_path / "logs", *given)
    assert code == 2
    assert err == (f"error: {tmp_path / 'logs'}: is a directory; --stream reads one file "
                   f"(shardex diagnose {tmp_path / 'logs'} reads every file under it)\n")


# -- nothing left to diagnose: refused, never "nothing needs shards" ------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("as_json", [False, True])
def test_a_log_of_no_rows_is_refused(tmp_path: Path, run: Run, mode: str, as_json: bool) -> None:
    path = write(tmp_path / "empty.csv", CSV_HEADER)
    flags = ["--json"] if as_json else []
    err = refused(run(mode, path, *flags), f"{name_in(mode, path)}: no rows to diagnose")
    assert "holds no rows" in err


@pytest.mark.parametrize("mode", MODES)
def test_a_log_whose_every_row_is_skipped_is_refused(tmp_path: Path, run: Run,
                                                     mode: str) -> None:
    path = write(tmp_path / "bad.csv", CSV_HEADER + f"{BASE},A,delete,2\n{BASE},A,delete,2\n")
    err = refused(run(mode, path, "--skip-bad"), f"{name_in(mode, path)}: no rows to diagnose")
    assert "all 2 rows were malformed and skipped (--skip-bad; op: 2)" in err


def test_a_contributor_insights_report_of_no_contributors_is_refused(tmp_path: Path,
                                                                      run: Run) -> None:
    path = write(tmp_path / "report.json", json.dumps(
        {"KeyLabels": ["pk"], "AggregationStatistic": "Sum", "Contributors": []}))
    refused(run("file", path), f"{path}: no rows to diagnose")


# -- the text rounds the figures the JSON rounds: a small one keeps its decimals ------------


def test_small_figures_keep_their_decimals_in_the_text(tmp_path: Path, run: Run) -> None:
    """4.5 units and a peak of 0.5 u/s were printed '4 units' and '0'."""
    path = write(tmp_path / "access.csv", "timestamp,key,op,units,throttled\n"
                 "2026-11-30T05:00:00Z,PENDING,write,2,0\n"
                 "2026-11-30T05:00:00.250Z,PENDING,write,2,1\n"
                 "2026-11-30T05:00:01Z,SHIPPED,read,0.5,0\n")
    code, out, err = run("file", path)
    assert code == 0, err
    assert ", 4.5 units, " in out
    shipped = next(line for line in out.splitlines() if "SHIPPED" in line and "│" in line)
    assert [c.strip() for c in shipped.split("│")][3] == "0.5"


def test_large_figures_stay_whole_with_separators(tmp_path: Path, run: Run) -> None:
    path = samples.write_log(tmp_path / "orders.csv", samples.low_cardinality())
    code, out, err = run("file", path)
    assert code == 0, err
    pending = next(line for line in out.splitlines() if "PENDING" in line and "│" in line)
    assert [c.strip() for c in pending.split("│")][3] == "2,010"
    assert ", 186,600 units, " in out


# -- JSON Lines: a field named twice, an object for a key --------------------------------


JSON_ROW = '{"timestamp": 1796014800, "key": "A", "op": "write", "units": 1}\n'


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("line", "column", "says"), [
    ('{"timestamp": 1796014800, "key": "A", "op": "write", "units": 1, "units": 5}',
     "units", "names field 'units' twice"),
    ('{"timestamp": 1796014800, "key": {"a": 1}, "op": "write", "units": 1}',
     "key", "key {\"a\": 1} is an object, not text"),
    ('{"timestamp": 1796014800, "key": ["A"], "op": "write", "units": 1}',
     "key", "key [\"A\"] is an array, not text")], ids=["twice", "object", "array"])
def test_a_json_row_is_one_value_a_field(tmp_path: Path, run: Run, mode: str, line: str,
                                         column: str, says: str) -> None:
    """The first of two 'units' was taken (the stream took the last), an object as text."""
    path = write(tmp_path / "log.jsonl", JSON_ROW + line + "\n")
    err = refused(run(mode, path), f"{name_in(mode, path)}:2 column '{column}': ")
    assert says in err
    code, out, _ = run(mode, path, "--skip-bad", "--json")
    assert code == 0
    assert document(out)["skipped_rows"] == 1


# -- a stream's count of keys is a lower bound, in the recommendation too ------------------


@pytest.mark.parametrize("mode", ["stream", "stdin"])
def test_a_streamed_count_of_keys_is_said_as_a_lower_bound(tmp_path: Path, run: Run,
                                                           mode: str) -> None:
    """The summary said '51+ keys', the recommendation 'among 51 keys' (there were 2,002)."""
    lines = [CSV_HEADER]
    for t in range(10):
        lines.append(f"{BASE + t},HOT,write,2000\n")
        lines.extend(f"{BASE + t},k{t * 200 + i},write,10\n" for i in range(200))
    path = write(tmp_path / "many.csv", "".join(lines))
    code, out, err = run(mode, path, "--counters", "50")
    assert code == 0, err
    text = " ".join(out.split())
    assert "51+ keys" in text
    assert "HOT alone takes 50.0% of the units among at least 51 keys" in text


# -- one is singular -------------------------------------------------------------------------


def test_one_key_row_unit_and_partition_key_are_singular(tmp_path: Path, run: Run) -> None:
    """'1 rows, 1 keys', '1 requests, 1 units over 1 partition keys'."""
    path = write(tmp_path / "one.csv", CSV_HEADER + f"{BASE},A,write,1\n"
                 f"{BASE},#placement#x,write,1\n")
    code, out, err = run("file", path)
    assert code == 0, err
    text = " ".join(out.split())
    assert text.startswith("2 rows, 1 key, 1 s, 1 unit, 0 throttled;")
    assert "records (#placement#..., #record#...): 1 request, 1 unit over 1 partition key," \
        in text
