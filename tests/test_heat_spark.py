"""diagnose on Spark (local mode) gives the DuckDB engine's report for the same logs.

One Spark session serves the whole file (``spark``, a session fixture of
tests/conftest.py, shared with the command-line fuzz test's ``diagnose`` case); they ask
for one worker (``xdist_group``; scripts/test passes ``--dist loadgroup``), so one JVM
starts a run. The logs are
generated here, in every format the readers take, with shard keys, shardex's own
records, throttles, malformed rows, CloudTrail files and a Contributor Insights
report; each is diagnosed by both engines and the two ``shardex.diagnose/1``
documents must be equal, field for field.
"""

from __future__ import annotations

import json
import random
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from shardex.cli import cli
from shardex.errors import InvalidInput, InvalidLog, MissingDependency
from shardex.heat.report import diagnose
from shardex.heat.sources import Options
from tests import heat_samples as samples
from tests import heat_sources as trails

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]
BASE = samples.BASE


def both(paths: list[Path], spark: Any, **options: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The DuckDB and the Spark document of the same logs."""
    duck = diagnose(paths, per_shard=True, **options).to_dict()
    lit = diagnose(paths, per_shard=True, engine="spark", spark=spark, **options).to_dict()
    return duck, lit


def sharded(seed: int) -> list[dict[str, Any]]:
    """A sharded index's log: PENDING over shard keys #0-#3 (#2 the hottest) and a plain
    PENDING row, SHIPPED unsharded, throttles, shardex's own records, tenants."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for s in range(40):
        for i in range(rng.randrange(30, 60)):
            shard = rng.choices((0, 1, 2, 3), (1, 1, 3, 1))[0]
            rows.append({"timestamp": BASE + s + i / 64, "key": f"PENDING#{shard}",
                         "op": "write", "bytes": rng.randrange(200, 9000),
                         "throttled": rng.random() < 0.05})
        rows.append({"timestamp": BASE + s + 0.5, "key": "SHIPPED", "op": "read",
                     "bytes": rng.randrange(100, 20_000), "throttled": False})
        rows.append({"timestamp": BASE + s + 0.7, "key": f"#placement#o-{s}", "op": "write",
                     "bytes": 300, "throttled": False})
        rows.append({"timestamp": BASE + s + 0.9, "key": f"tenant-{rng.randrange(30)}",
                     "op": rng.choice(("read", "write")), "bytes": rng.randrange(1, 5000),
                     "throttled": False})
    rows.append({"timestamp": BASE + 3.25, "key": "PENDING", "op": "write", "bytes": 10,
                 "throttled": False})
    return rows


def iso_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with ISO 8601 timestamps (milliseconds, a zone now and then)."""
    def stamp(t: float, i: int) -> str:
        text = datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
        return text + ("Z" if i % 3 else "+00:00")

    return [{**r, "timestamp": stamp(r["timestamp"], i)} for i, r in enumerate(rows)]


def test_every_reader_gives_the_same_report(tmp_path: Path, spark: Any) -> None:
    """CSV (epoch seconds), JSON Lines (ISO 8601), Parquet (typed, booleans, shard keys,
    shardex's own records), read together: one report, equal through both engines."""
    logs = tmp_path / "logs"
    logs.mkdir()
    samples.write_log(logs / "orders.csv", samples.low_cardinality(seconds=20))
    samples.write_log(logs / "tenants.jsonl", iso_rows(samples.popular_entity(seconds=10)))
    samples.write_log(logs / "sharded.parquet", sharded(7))
    duck, lit = both([logs], spark)
    assert lit == duck
    assert duck["source"]["formats"] == ["csv", "parquet", "jsonl"]
    assert any("shardex's own records" in n for n in duck["source"]["notes"])
    assert {"PENDING", "tenant-42"} <= {k["key"] for k in duck["top"]}


def test_cloudtrail_and_insights_give_the_same_report(tmp_path: Path, spark: Any) -> None:
    """CloudTrail files (gzipped, batches and transactions, throttles, a Query, two
    tables) and a Contributor Insights report with a 60 s period."""
    records = []
    for s in range(30):
        for i in range(8):
            records.append(trails.put_item("orders", {"pk": {"S": f"o-{s}-{i}"}}, BASE + s))
        records.append(trails.put_item("orders", {"pk": {"S": "HOT"}}, BASE + s,
                                       error="ProvisionedThroughputExceededException"
                                       if s % 4 == 0 else None))
        records.append(trails.transact_put("orders", [{"pk": {"S": "HOT"}}] * 3, BASE + s))
        records.append(trails.batch_write("orders", [{"pk": {"S": "HOT"}}] * 5, BASE + s))
        records.append(trails.get_item("orders", {"pk": {"S": "HOT"}}, BASE + s))
        records.append(trails.query("orders", BASE + s))
        records.append(trails.put_item("audit", {"id": {"S": "x"}}, BASE + s))
    trail = tmp_path / "trail"
    trail.mkdir()
    trails.write_trail(trail / "one.json.gz", records[:150])
    trails.write_trail(trail / "two.json", records[150:], pretty=True)
    report = trails.write_report(tmp_path / "insights.json", trails.insights_report({
        "PENDING": [(BASE + 60 * m, 90_000.0) for m in range(10)],
        "SHIPPED": [(BASE + 60 * m, 6_000.0) for m in range(10)]}))
    duck, lit = both([report, trail], spark, options=Options(table="orders"))
    assert lit == duck
    assert duck["source"]["formats"] == ["insights", "cloudtrail"]
    assert duck["source"]["resolution_s"] == 60
    hot = next(k for k in duck["top"] if k["key"] == "HOT")
    assert hot["throttles"] > 0


@pytest.mark.parametrize(("points", "message"), [
    ([0, 1, 60], r"'A': this datapoint is 1 s after"),
    ([0, 0, 60], r"'A': this datapoint is at the time of Datapoints\[0\]")],
    ids=["step", "duplicate"])
def test_an_insights_report_without_a_period_is_refused_alike(
        tmp_path: Path, spark: Any, points: list[int], message: str) -> None:
    path = trails.write_report(tmp_path / "report.json", trails.insights_report(
        {"A": [(BASE + t, 6_000.0) for t in points],
         "B": [(BASE + 60 * m, 60.0) for m in range(3)]}))
    for engine in ("duckdb", "spark"):
        with pytest.raises(InvalidLog, match=r"report\.json column 'Contributors\[0\]"
                                             r"\.Datapoints\[1\]\.Timestamp': contributor "
                                             + message):
            diagnose([path], engine=engine, spark=spark)


def test_malformed_rows_are_counted_alike_or_named(tmp_path: Path, spark: Any) -> None:
    """``shardex diagnose --engine spark --skip-bad`` prints DuckDB's document; without
    --skip-bad the first malformed row is named by file, column and value."""
    bad = tmp_path / "bad.csv"
    bad.write_text("timestamp,key,op,units,throttled\n"
                   f"{BASE},A,write,5,0\n{BASE},A,delete,5,0\n{BASE + 1},B,read,-1,0\n"
                   f"{BASE * 1000},C,write,1,0\n{BASE + 2},D,write,1,maybe\n"
                   f"{BASE + 3},\"E\nF\",write,2,1\n{BASE + 3},G,write\n")
    result = CliRunner().invoke(cli, ["diagnose", str(bad), "--engine", "spark", "--json",
                                      "--skip-bad", "--per-shard"])
    assert result.exit_code == 0, result.output
    lit = json.loads(result.stdout)
    assert lit == diagnose([bad], skip_bad=True, per_shard=True).to_dict()
    assert lit["skipped_rows"] == 5
    with pytest.raises(InvalidLog, match=r"bad\.csv column 'op': op 'delete' is not"):
        diagnose([bad], engine="spark", spark=spark)


def test_spark_submit_job_writes_the_document(tmp_path: Path, spark: Any,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from shardex.heat.spark import job

    path = samples.write_log(tmp_path / "days.parquet", samples.sequential(days=3))
    out = tmp_path / "out" / "diagnosis.json"
    assert job.main(["--input", str(path), "--output", out.as_uri(), "--top", "3",
                     "--JOB_ID", "j-1"], spark=spark) == 0
    assert json.loads(out.read_text()) == diagnose([path], top=3).to_dict()
    assert json.loads(out.read_text())["classification"] == "sequential"
    assert "ignoring argument '--JOB_ID'" in capsys.readouterr().err  # and its value
    assert job.main(["s3a://bucket/logs/", "--output", out.as_uri()], spark=spark) == 2
    assert "give --format to read a URI with Spark" in capsys.readouterr().err


def test_refusals_before_spark_starts(tmp_path: Path) -> None:
    path = samples.write_log(tmp_path / "orders.csv", samples.low_cardinality(seconds=2))
    for args, said in (
            (["--engine", "spark", "--stream"], "not --engine spark"),
            (["--spark-conf", "spark.x=1"], "--spark-conf goes with --engine spark"),
            (["--engine", "spark", "--spark-conf", "x"], "is not spark.KEY=VALUE")):
        result = CliRunner().invoke(cli, ["diagnose", str(path), *args])
        assert result.exit_code != 0
        assert isinstance(result.exception, InvalidInput)
        assert said in str(result.exception)
    with pytest.raises(InvalidInput, match="unknown engine 'presto'"):
        diagnose([path], engine="presto")


def test_missing_pyspark_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from shardex.heat.spark.session import pyspark

    monkeypatch.setitem(sys.modules, "pyspark", None)
    with pytest.raises(MissingDependency, match=r"pip install 'shardex\[spark\]'"):
        pyspark()


def test_json_lines_rows_naming_a_field_twice_or_keyed_by_an_object_are_malformed(
        tmp_path: Path, spark: Any) -> None:
    """Spark took a row naming 'units' twice (one of the two values) and an object as a
    key (as its JSON text), where the other readers count both as malformed rows."""
    path = tmp_path / "odd.jsonl"
    path.write_text("\n".join([
        json.dumps({"timestamp": BASE, "key": "A", "op": "write", "units": 5}),
        f'{{"timestamp": {BASE}, "key": "A", "op": "write", "units": 1, "units": 5}}',
        json.dumps({"timestamp": BASE + 1, "key": {"a": 1}, "op": "write", "units": 2}),
        json.dumps({"timestamp": BASE + 1, "key": ["B"], "op": "write", "units": 2}),
        json.dumps({"timestamp": BASE + 2, "key": "{not an object}", "op": "write",
                    "units": 3})]) + "\n")
    lit = diagnose([path], engine="spark", spark=spark, skip_bad=True).to_dict()
    assert lit == diagnose([path], skip_bad=True).to_dict()
    assert lit["skipped_rows"] == 3
    with pytest.raises(InvalidLog, match=r"odd\.jsonl"):
        diagnose([path], engine="spark", spark=spark)


def test_a_time_with_no_time_of_day_or_a_day_long_offset_is_refused_alike(
        tmp_path: Path, spark: Any) -> None:
    """Both engines' casts took a date alone (a day's rows in one second: peaks of the
    whole day's units) and an offset of +25:00; each is named, by either engine (one
    expression in both), and a time with its offset is read as before."""
    for i, stamp in enumerate(("2026-11-30", "2026-11-30T05:00:00+25:00")):
        bad = tmp_path / f"bad{i}.csv"
        bad.write_text(f"timestamp,key,op,units\n{stamp},A,write,600\n{stamp},A,write,600\n")
        for engine in ("duckdb", "spark") if i == 0 else ("duckdb",):
            with pytest.raises(InvalidLog, match=rf"bad{i}\.csv(:2)? column 'timestamp': "
                                                 rf"timestamp {re.escape(repr(stamp))} is "
                                                 "neither ISO 8601"):
                diagnose([bad], engine=engine, spark=spark)
    good = tmp_path / "good.csv"
    good.write_text("timestamp,key,op,units\n2026-11-30T05:00:00+05:30,A,write,600\n"
                    "2026-11-30 05:00:01-05:00,A,write,600\n")
    assert diagnose([good], engine="spark", spark=spark).to_dict() \
        == diagnose([good]).to_dict()
