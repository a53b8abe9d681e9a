"""Access logs: every format reads the same, every malformed row is named by file, line, column."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from shardex.capacity import CEILINGS, read_units, write_units
from shardex.errors import InvalidInput, InvalidLog
from shardex.heat.logs import log_format, read_logs
from shardex.heat.report import diagnose_stream
from tests.heat_samples import BASE, write_log

DYNAMODB = CEILINGS["dynamodb"]
FORMATS = ["csv", "jsonl", "parquet"]


def good(i: int, **change: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"timestamp": BASE + i, "key": f"k{i % 3}", "op": "write",
                           "units": 1, "throttled": 0}
    row.update(change)
    return {k: v for k, v in row.items() if v is not _DROP}


_DROP = object()


def line_of(fmt: str, index: int) -> int:
    """The line (CSV, JSON Lines) or row (Parquet) of data row ``index`` (0-based)."""
    return index + 2 if fmt == "csv" else index + 1


def totals(path: Path, **options: Any) -> dict[str, Any]:
    with read_logs([path], **options) as logs:
        profile = logs.profile(ceiling=DYNAMODB, top=100)
        return {"rows": logs.rows, "skipped": logs.skipped_rows,
                "by_column": dict(logs.skipped_by_column),
                "keys": {k.key: k for k in profile.top}, "profile": profile}


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_reads_the_same_heat(tmp_path: Path, fmt: str) -> None:
    rows = [good(0, key="A", units=3), good(0, key="A", units=4, op="read"),
            good(1, key="A", units=5, throttled=1), good(2, key="B", units=2.5)]
    found = totals(write_log(tmp_path / f"log.{fmt}", rows))
    assert found["rows"] == 4
    assert found["skipped"] == 0
    a = found["keys"]["A"]
    assert (a.units, a.write_units, a.read_units) == (12.0, 8.0, 4.0)
    assert (a.reads, a.writes, a.throttles, a.active_seconds) == (1, 2, 1, 2)
    assert a.peak_units_per_s == 7.0
    assert a.sustained_units_per_s == 6.0
    assert a.peak_to_ceiling == pytest.approx(5 / 1000)
    profile = found["profile"]
    assert (profile.distinct_keys, profile.seconds, profile.total_units) == (2, 3, 14.5)
    assert profile.share(a) == pytest.approx(12 / 14.5)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("nbytes", "op"), [(0, "write"), (1024, "write"), (1025, "write"),
                                            (5000, "write"), (0, "read"), (4096, "read"),
                                            (4097, "read"), (20000, "read")])
def test_bytes_follow_dynamodb_rounding(tmp_path: Path, fmt: str, nbytes: int, op: str) -> None:
    rows = [{"timestamp": BASE, "key": "A", "op": op, "bytes": nbytes}]
    path = write_log(tmp_path / f"log.{fmt}", rows)
    expected = float(write_units(nbytes)) if op == "write" else read_units(nbytes)
    assert totals(path)["keys"]["A"].units == expected
    if op == "read":
        assert totals(path, eventual=True)["keys"]["A"].units == read_units(nbytes, False)


@pytest.mark.parametrize("fmt", FORMATS)
def test_iso_timestamps_and_epoch_seconds_agree(tmp_path: Path, fmt: str) -> None:
    iso = [good(0, timestamp="2026-11-30T05:00:00Z"), good(1, timestamp="2026-11-30 05:00:01"),
           good(2, timestamp="2026-11-30T06:00:02+01:00")]
    epoch = [good(0, timestamp=BASE + 0.0), good(1, timestamp=BASE + 1.9),
             good(2, timestamp=BASE + 2.0)]
    for rows in (iso, epoch):
        profile = totals(write_log(tmp_path / f"log.{fmt}", rows))["profile"]
        assert (profile.first_second, profile.last_second) == (BASE, BASE + 2)


def test_a_parquet_date_column_is_refused_as_a_timestamp(tmp_path: Path) -> None:
    """A DATE column put a whole day's rows into one second (1,200 units/s and N=2 for
    a day's 1,200 units) with 'resolution_s: 1' and no word."""
    import datetime as dt

    import pyarrow as pa
    import pyarrow.parquet as pq

    day = dt.date(2026, 11, 30)
    pq.write_table(pa.table({"timestamp": [day, day], "key": ["A", "A"],
                             "op": ["write", "write"], "units": [600, 600]}),
                   tmp_path / "log.parquet")
    with pytest.raises(InvalidLog, match="has type DATE: a timestamp gives its time of day"):
        totals(tmp_path / "log.parquet")


def test_parquet_native_timestamp_and_boolean_columns(tmp_path: Path) -> None:
    import datetime as dt

    import pyarrow as pa
    import pyarrow.parquet as pq

    moment = dt.datetime(2026, 11, 30, 5, 0, tzinfo=dt.UTC)
    pq.write_table(pa.table({"timestamp": [moment, moment + dt.timedelta(seconds=1)],
                             "key": ["A", "A"], "op": ["write", "WRITE"], "units": [2, 3],
                             "throttled": [True, False]}), tmp_path / "log.parquet")
    found = totals(tmp_path / "log.parquet")
    assert found["keys"]["A"].throttles == 1
    assert found["profile"].first_second == BASE


@pytest.mark.parametrize(("key", "kind"), [([[1, 2]], "INTEGER[]"),
                                           ([{"a": 1}], "STRUCT(a INTEGER)"),
                                           ([{"x": 1}], "MAP(VARCHAR, INTEGER)")],
                         ids=["list", "struct", "map"])
def test_a_parquet_key_column_of_lists_or_structures_is_refused(
        tmp_path: Path, key: list[Any], kind: str) -> None:
    """As a JSON Lines row's array or object key is: a key is text (or a number); the
    whole column was read as text ('[1, 2]') before."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    column = pa.array(key, type=pa.map_(pa.string(), pa.int32())) if kind.startswith("MAP") \
        else pa.array(key, type=pa.list_(pa.int32()) if kind.endswith("]")
                      else pa.struct([("a", pa.int32())]))
    path = tmp_path / "log.parquet"
    pq.write_table(pa.table({"timestamp": [BASE], "key": column, "op": ["write"],
                             "units": [1]}), path)
    words = f"column 'key': has type {kind}: a key is text"
    with pytest.raises(InvalidLog, match=re.escape(words)):
        read_logs([path]).close()


# -- malformed rows ------------------------------------------------------------------------

Fault = Callable[[int], dict[str, Any]]
FAULTS: list[tuple[str, Fault, str, str]] = [
    ("timestamp", lambda i: good(i, timestamp="yesterday"), "timestamp",
     "neither ISO 8601 nor epoch seconds"),
    ("timestamp missing", lambda i: good(i, timestamp=None), "timestamp",
     "timestamp is missing or empty"),
    ("op missing", lambda i: good(i, op=None), "op", "op is missing or empty"),
    ("op", lambda i: good(i, op="delete"), "op", "'delete' is not 'read' or 'write'"),
    ("units negative", lambda i: good(i, units=-1), "units", "must be a number >= 0"),
    ("units text", lambda i: good(i, units="abc"), "units", "'abc' must be a number >= 0"),
    ("bytes negative", lambda i: good(i, units=None, bytes=-5), "bytes", "must be a number"),
    ("bytes text", lambda i: good(i, units=None, bytes="1kb"), "bytes", "'1kb'"),
    ("key empty", lambda i: good(i, key=""), "key", "key is missing or empty"),
    ("throttled", lambda i: good(i, throttled=2), "throttled", "must be 0 or 1"),
    ("both", lambda i: good(i, bytes=100), "bytes", "both units and bytes"),
    ("neither", lambda i: good(i, units=None), "units", "neither units nor bytes"),
    ("mixed", lambda i: good(i, timestamp="2026-11-30T05:00:00Z"), "timestamp",
     "a file must use one kind"),
]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("name", "fault", "column", "message"), FAULTS,
                         ids=[f[0] for f in FAULTS])
def test_a_malformed_row_names_file_line_and_column(
        tmp_path: Path, fmt: str, name: str, fault: Fault, column: str, message: str) -> None:
    rows = [good(i) for i in range(6)]
    rows[4] = fault(4)
    path = write_log(tmp_path / f"log.{fmt}", rows, columns=["timestamp", "key", "op", "units",
                                                             "bytes", "throttled"], text=True)
    with pytest.raises(InvalidLog) as caught:
        read_logs([path]).close()
    error = caught.value
    assert (error.path, error.line, error.column) == (str(path), line_of(fmt, 4), column)
    assert message in str(error)
    assert str(error).startswith(f"{path}:{line_of(fmt, 4)} column {column!r}: ")
    skipped = totals(path, skip_bad=True)
    assert (skipped["rows"], skipped["skipped"], skipped["by_column"]) == (5, 1, {column: 1})


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
@pytest.mark.parametrize(("name", "fault", "column", "message"), FAULTS,
                         ids=[f[0] for f in FAULTS])
def test_the_stream_reader_applies_the_same_rules(
        tmp_path: Path, fmt: str, name: str, fault: Fault, column: str, message: str) -> None:
    rows = [good(i) for i in range(6)]
    rows[4] = fault(4)
    path = write_log(tmp_path / f"log.{fmt}", rows, columns=["timestamp", "key", "op", "units",
                                                             "bytes", "throttled"])
    lines = path.read_text().splitlines(keepends=True)
    with pytest.raises(InvalidLog) as caught:
        diagnose_stream(lines, fmt=fmt, name=str(path))
    error = caught.value
    assert (error.line, error.column) == (line_of(fmt, 4), column)
    assert message in str(error)
    skipped = diagnose_stream(lines, fmt=fmt, name=str(path), skip_bad=True).to_dict()
    assert (skipped["rows"], skipped["skipped_rows"]) == (5, 1)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("missing", ["timestamp", "key", "op"])
def test_a_missing_required_column_is_named(tmp_path: Path, fmt: str, missing: str) -> None:
    rows = [{k: v for k, v in good(i).items() if k != missing} for i in range(3)]
    path = write_log(tmp_path / f"log.{fmt}", rows)
    with pytest.raises(InvalidLog) as caught:
        read_logs([path]).close()
    assert caught.value.column == missing
    if fmt == "jsonl":  # JSON Lines has no header: the first row lacks the field
        assert caught.value.line == 1
    else:
        assert f"no {missing!r} column" in str(caught.value)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_file_without_units_or_bytes_is_refused(tmp_path: Path, fmt: str) -> None:
    rows = [{"timestamp": BASE, "key": "A", "op": "write"}]
    with pytest.raises(InvalidLog, match="neither a 'units' nor a 'bytes' column") as caught:
        read_logs([write_log(tmp_path / f"log.{fmt}", rows)]).close()
    assert caught.value.column == "units"


def test_csv_lines_count_blank_lines_and_quoted_newlines(tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    path.write_text("timestamp,key,op,units\n"
                    f"{BASE},A,write,1\n"
                    "\n"
                    f'{BASE},"two\nlines",write,1\n'
                    f"{BASE},B,write,1\n"
                    f"{BASE},C,erase,1\n")
    with pytest.raises(InvalidLog) as caught:
        read_logs([path]).close()
    assert (caught.value.line, caught.value.column) == (7, "op")


def test_csv_rows_with_the_wrong_number_of_fields(tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    path.write_text("timestamp,key,op,units\n"
                    f"{BASE},A,write,1\n"
                    f'{BASE},"x\ny",write,1\n'
                    f"{BASE},B,write\n"
                    f"{BASE},C,write,1,extra\n"
                    f"{BASE},D,erase,1\n")
    with pytest.raises(InvalidLog, match="malformed CSV row") as caught:
        read_logs([path]).close()
    assert caught.value.line == 5
    found = totals(path, skip_bad=True)
    assert (found["rows"], found["skipped"]) == (2, 3)
    assert found["by_column"] == {"row": 2, "op": 1}


def test_jsonl_lines_that_are_not_objects(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text(f'{{"timestamp": {BASE}, "key": "A", "op": "write", "units": 1}}\n'
                    "\n"
                    "[1, 2]\n"
                    "{not json\n")
    with pytest.raises(InvalidLog, match="not a valid JSON object") as caught:
        read_logs([path]).close()
    assert (caught.value.line, caught.value.column) == (3, None)
    found = totals(path, skip_bad=True)
    assert (found["rows"], found["skipped"], found["by_column"]) == (1, 2, {"row": 2})


def test_several_files_add_up_and_each_is_named(tmp_path: Path) -> None:
    first = write_log(tmp_path / "a.csv", [good(0, key="A", units=2)])
    second = write_log(tmp_path / "b.jsonl", [good(0, key="A", units=3)])
    with read_logs([first, second]) as logs:
        profile = logs.profile(ceiling=DYNAMODB)
    assert profile.top[0].peak_units_per_s == 5.0
    assert profile.rows == 2
    bad = write_log(tmp_path / "c.parquet", [good(0), good(1, op="x")])
    with pytest.raises(InvalidLog, match=r"c\.parquet:2 column 'op'"):
        read_logs([first, bad]).close()


def test_formats_come_from_content_or_are_forced(tmp_path: Path) -> None:
    import gzip

    found = {}
    for fmt in FORMATS:
        path = write_log(tmp_path / f"log.{fmt}", [good(0)])
        hidden = path.rename(tmp_path / f"{fmt}.log")
        found[fmt] = log_format(hidden)
        packed = tmp_path / f"{fmt}.log.gz"
        if fmt != "parquet":
            packed.write_bytes(gzip.compress(hidden.read_bytes()))
            assert log_format(packed) == fmt
            assert totals(packed)["rows"] == 1
        assert totals(hidden)["rows"] == 1
    assert found == {fmt: fmt for fmt in FORMATS}
    with pytest.raises(InvalidInput, match="unknown log format"):
        log_format("a.csv", "xml")
    with pytest.raises(InvalidLog, match="no such file"):
        read_logs([tmp_path / "missing.csv"])
    with pytest.raises(InvalidLog, match="cannot read as jsonl"):
        read_logs([write_log(tmp_path / "x.parquet", [good(0)])], fmt="jsonl")


@pytest.mark.parametrize(("content", "message"), [
    (b"", "is empty"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "is binary"),
    (b"timestamp,key\n\xff\xfe,A\n", "is not UTF-8"),
    (b'[{"timestamp": 1}]', "JSON array"),
    (b"\x1f\x8b\x08\x00broken", "not a valid gzip file"),
])
def test_files_that_are_no_log_are_named(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "odd.log"
    path.write_bytes(content)
    with pytest.raises(InvalidLog, match=message) as caught:
        read_logs([path]).close()
    assert caught.value.path == str(path)


def test_a_directory_stands_for_its_files(tmp_path: Path) -> None:
    folder = tmp_path / "AWSLogs" / "2026" / "11"
    folder.mkdir(parents=True)
    write_log(folder / "a.csv", [good(0, key="A", units=2)])
    write_log(folder / "b.jsonl", [good(0, key="A", units=3)])
    (folder / ".hidden").write_text("not a log")
    with read_logs([tmp_path / "AWSLogs"]) as logs:
        assert logs.profile(ceiling=DYNAMODB).top[0].units == 5.0
        assert len(logs.paths) == 2
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidLog, match="no files"):
        read_logs([tmp_path / "empty"])


def test_gzip_csv(tmp_path: Path) -> None:
    import gzip

    plain = write_log(tmp_path / "log.csv", [good(0), good(1, op="bad")])
    packed = tmp_path / "log.csv.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    with pytest.raises(InvalidLog) as caught:
        read_logs([packed]).close()
    assert (caught.value.line, caught.value.column) == (3, "op")


def stream_totals(rows: list[Mapping[str, Any]], fmt: str, tmp_path: Path) -> dict[str, Any]:
    lines = write_log(tmp_path / f"s.{fmt}", rows).read_text().splitlines(keepends=True)
    return diagnose_stream(lines, fmt=fmt).to_dict()


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_stream_and_exact_readers_agree_when_counters_suffice(tmp_path: Path, fmt: str) -> None:
    rows = [good(i // 4, key=f"k{i % 5}", units=i % 7, op="read" if i % 3 else "write")
            for i in range(200)]
    from shardex.heat.report import diagnose

    exact = diagnose([write_log(tmp_path / f"e.{fmt}", rows)]).to_dict()
    streamed = stream_totals(rows, fmt, tmp_path)
    assert exact["top"] == streamed["top"]
    assert exact["rows"] == streamed["rows"] == 200


def test_the_stream_reader_refuses_rows_with_the_wrong_number_of_fields() -> None:
    text = ("timestamp,key,op,units\n"
            f"{BASE},A,write,1\n"
            "\n"
            f'{BASE},"x\ny",write,1\n'
            f"{BASE},B,write,1,extra\n")
    lines = text.splitlines(keepends=True)  # as a file yields them: one physical line each
    with pytest.raises(InvalidLog, match="has 5 fields, the header 4") as caught:
        diagnose_stream(lines, fmt="csv", name="s.csv")
    assert (caught.value.line, caught.value.column) == (6, None)
    report = diagnose_stream(lines, fmt="csv", skip_bad=True).to_dict()
    assert (report["rows"], report["skipped_rows"]) == (2, 1)
    assert report["evidence"]["skipped_by_column"] == {"row": 1}


def test_a_header_without_a_column_is_quoted_as_read(tmp_path: Path) -> None:
    """The header was shown trimmed and lower-cased ('PENDING' as 'pending', a JSON Lines
    file read as CSV as cells no line holds); it is quoted as read, and a JSON object
    on the first line says which format it likely is (a probe)."""
    jsonl = tmp_path / "a.log"
    jsonl.write_text('{"timestamp":"2026-11-30T05:00:00Z","key":"PENDING","op":"write",'
                     '"units":2}\n')
    with pytest.raises(InvalidLog) as caught:
        read_logs([jsonl], fmt="csv")
    assert "'key:\"PENDING\"'" in str(caught.value)
    assert "is it JSON Lines (--format jsonl)?" in str(caught.value)
    csv = tmp_path / "b.csv"
    csv.write_text("Ts,Key,op,units\n1,P,write,1\n")
    with pytest.raises(InvalidLog, match=r"has no 'timestamp' column \(its header: 'Ts', "
                                         r"'Key', 'op', 'units'\)$"):
        read_logs([csv])
