"""CloudTrail data events and Contributor Insights reports as heat sources."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from shardex.capacity import read_units, write_units
from shardex.cli import cli, main
from shardex.errors import InvalidInput, InvalidLog
from shardex.heat.report import diagnose
from shardex.heat.sources import Options, detect_format
from shardex.routing import Routing
from tests import heat_sources as hs

TABLE = "orders-index"


def entry(value: str, item: str) -> dict[str, str]:
    return {"pk": value, "sk": f"2026-11-30\u0000{item}"}


def placement(item: str) -> dict[str, str]:
    return {"pk": f"#placement#{item}", "sk": "#"}


def sharded_trail(path: Path, *, per_shard: int = 600, shards: int = 4,
                  seconds: int = 3) -> Path:
    """shardex's index-table writes: each a TransactWriteItems of an entry and its placement."""
    records = []
    for s in range(seconds):
        for i in range(per_shard * shards):
            item = f"o-{s}-{i}"
            records.append(hs.transact_put(TABLE, [entry(f"PENDING#{i % shards}", item),
                                                   placement(item)], hs.BASE + s))
        for i in range(50):
            records.append(hs.put_item(TABLE, entry("SHIPPED", f"s-{s}-{i}"), hs.BASE + s))
        records.append(hs.query(TABLE, hs.BASE + s, index="by_status"))
        records.append(hs.event("GetObject", {"bucketName": "b", "key": "k"}, hs.BASE + s,
                                source="s3.amazonaws.com"))
    return hs.write_trail(path, records)


def test_a_sharded_index_in_cloudtrail_reads_n_4_to_8(tmp_path: Path) -> None:
    path = sharded_trail(tmp_path / "111122223333_CloudTrail_eu-west-1_20261130T0500Z.json.gz")
    assert detect_format(str(path)) == "cloudtrail"
    result = diagnose([path], per_shard=True)
    pending = result.profile.top[0]
    # 600 transactions a second on each of 4 shards, 2 units each (a transactional write)
    assert (pending.key, pending.shards, pending.partitions) == ("PENDING", 4, 4)
    assert pending.peak_write_units_per_s == 4 * 600 * 2 * write_units(1024)
    assert pending.peak_to_ceiling == pytest.approx(1.2)
    assert [p.key for p in pending.parts] == [f"PENDING#{k}" for k in range(4)]
    change = result.recommendation.changes[0]
    assert (change.key, change.current, change.shards) == ("PENDING", 4, 8)
    assert str(change) == "PENDING: N=4 \u2192 8"
    notes = " ".join(result.profile.notes)
    assert "never a global secondary index's key attributes" in notes
    assert "3 Query/Scan requests name no key" in notes
    assert "on an index" in notes
    assert "7,200 requests" in notes
    assert "#placement#" in notes
    doc = result.to_dict()
    assert doc["source"]["formats"] == ["cloudtrail"]
    assert doc["source"]["time_units"] == ["ISO 8601"]
    routing = Routing.from_dict(doc["routing"])
    assert routing.overrides["PENDING"].shards == 8


def test_the_documented_shapes_each_count(tmp_path: Path) -> None:
    at = hs.BASE
    records = [
        hs.put_item("Music", {"Artist": "A"}, at),
        hs.event("UpdateItem", {"tableName": "Music", "key": {"Artist": "A"},
                                "updateExpression": "SET #Y = :y"}, at,
                 error="ConditionalCheckFailedException"),
        hs.get_item("Music", {"Artist": "A"}, at),
        hs.get_item("Music", {"Artist": "A"}, at, consistent=True),
        hs.transact_put("Music", [{"Artist": "B"}, {"Artist": "C"}], at),
        hs.batch_write("Music", [{"Artist": "B"}, {"Artist": "D"}], at),
        hs.batch_get("Music", [{"Artist": {"S": "D"}}, {"Artist": "E"}], at),
        hs.put_item("Music", {"Artist": "A"}, at,
                    error="ProvisionedThroughputExceededException"),
        hs.transact_put("Music", [{"Artist": "E"}], at, error="TransactionCanceledException",
                        message="Transaction cancelled [ThrottlingError]"),
        hs.event("ExecuteStatement", {"statement": "SELECT * FROM Music WHERE Artist = 'A'"},
                 at),
        hs.event("DescribeTable", {"tableName": "Music"}, at),
    ]
    path = hs.write_trail(tmp_path / "trail.json", records, pretty=True)
    assert detect_format(str(path)) == "cloudtrail"
    result = diagnose([path], top=10)
    keys = {k.key: k for k in result.profile.top}
    w, r = float(write_units(1024)), read_units(1024)
    a = keys["A"]
    assert (a.writes, a.reads, a.throttles) == (3, 2, 1)
    assert a.write_units == 3 * w
    assert a.read_units == r / 2 + r
    assert keys["B"].write_units == 2 * w + w  # in a transaction, then a batch
    assert (keys["D"].writes, keys["D"].reads) == (1, 1)
    assert (keys["E"].reads, keys["E"].throttles) == (1, 1)
    assert "1 PartiQL statements are not counted" in " ".join(result.profile.notes)


def test_several_tables_and_composite_keys_need_a_choice(tmp_path: Path) -> None:
    records = [hs.put_item("Music", {"Artist": "A", "SongTitle": "x"}, hs.BASE),
               hs.put_item("Music", {"Artist": "A", "SongTitle": "y"}, hs.BASE),
               hs.put_item("Users", {"id": "u-1"}, hs.BASE)]
    path = hs.write_trail(tmp_path / "trail.json", records)
    with pytest.raises(InvalidInput, match=r"several tables: Music \(2 requests\), Users"):
        diagnose([path])
    with pytest.raises(InvalidInput, match="no requests to table 'Orders'"):
        diagnose([path], options=Options(table="Orders"))
    with pytest.raises(InvalidInput, match="'Artist', 'SongTitle': name the partition key"):
        diagnose([path], options=Options(table="Music"))
    with pytest.raises(InvalidInput, match="no attribute 'title'"):
        diagnose([path], options=Options(table="Music", key_attribute="title"))
    music = diagnose([path], options=Options(table="Music", key_attribute="Artist"))
    assert music.profile.top[0].key == "A"
    assert music.profile.top[0].writes == 2
    users = diagnose([path], options=Options(table="Users"))
    assert users.profile.top[0].key == "u-1"


def test_item_bytes_set_the_units(tmp_path: Path) -> None:
    path = hs.write_trail(tmp_path / "trail.json", [hs.put_item("T", {"id": "a"}, hs.BASE)])
    found = diagnose([path], options=Options(item_bytes=5000)).profile.top[0]
    assert found.write_units == write_units(5000) == 5


def test_a_broken_cloudtrail_record_is_named(tmp_path: Path) -> None:
    good = hs.put_item("T", {"id": "a"}, hs.BASE)
    late = {**hs.put_item("T", {"id": "b"}, hs.BASE), "eventTime": "not a time"}
    path = hs.write_trail(tmp_path / "trail.json", [good, good, late])
    with pytest.raises(InvalidLog) as caught:
        diagnose([path])
    assert str(caught.value).startswith(f"{path} column 'timestamp': record 3: timestamp "
                                        "'not a time' is neither ISO 8601")
    skipped = diagnose([path], skip_bad=True).to_dict()
    assert (skipped["rows"], skipped["skipped_rows"]) == (2, 1)
    path.write_text(json.dumps({"Records": [good, 7]}))
    with pytest.raises(InvalidLog, match="record 2 is not an object"):
        diagnose([path])
    path.write_text(json.dumps({"Records": [hs.event("GetObject", {}, hs.BASE,
                                                      source="s3.amazonaws.com")]}))
    with pytest.raises(InvalidInput, match="no DynamoDB data events"):
        diagnose([path])


# -- Contributor Insights -------------------------------------------------------------------

def accessed(minutes: int = 5) -> dict[str, Any]:
    """PENDING consumes 90,000 units a minute (1,500/s), SHIPPED 30,000 (500/s)."""
    series = {"PENDING": [(hs.BASE + 60 * m, 90_000.0) for m in range(minutes)],
              "SHIPPED": [(hs.BASE + 60 * m, 30_000.0) for m in range(minutes)],
              "DELIVERED": [(hs.BASE + 60 * m, 600.0) for m in range(0, minutes, 2)]}
    return hs.insights_report(series)


def test_an_insights_report_gives_per_period_rates(tmp_path: Path) -> None:
    path = hs.write_report(tmp_path / "DynamoDBContributorInsights-PKC-by_status.json",
                           accessed())
    assert detect_format(str(path)) == "insights"
    result = diagnose([path])
    keys = {k.key: k for k in result.profile.top}
    assert keys["PENDING"].peak_units_per_s == 1500.0
    assert keys["PENDING"].active_seconds == 300
    assert result.profile.resolution == 60
    assert result.recommendation.shards == {"PENDING": 3}  # 1,500 x 1.5 over 1,000
    notes = " ".join(result.profile.notes)
    assert "accessed rule (Sum) on 'pk'" in notes
    assert "per 60 s" in notes
    assert "means over 60 s buckets" in notes
    assert result.to_dict()["source"]["resolution_s"] == 60


def test_an_insights_throttle_report_is_evidence(tmp_path: Path) -> None:
    """A GSI key throttled on many requests, its consumed units below the ceiling."""
    gsi = {"PENDING": [(hs.BASE + 60 * m, 30_000.0) for m in range(5)],   # 500 units/s
           "SHIPPED": [(hs.BASE + 60 * m, 6_000.0) for m in range(5)]}
    throttled = {"PENDING": [(hs.BASE + 60 * m, 4_982.0) for m in range(5)]}
    a = hs.write_report(tmp_path / "DynamoDBContributorInsights-PKC-orders-by_status.json",
                        hs.insights_report(gsi))
    t = hs.write_report(tmp_path / "DynamoDBContributorInsights-PKT-orders-by_status.json",
                        hs.insights_report(throttled))
    below = diagnose([a])
    assert below.recommendation.strategy == "none"
    result = diagnose([a, t])
    pending = result.profile.top[0]
    assert (pending.throttles, pending.peak_to_ceiling) == (24_910, 0.5)
    assert result.recommendation.shards == {"PENDING": 2}
    assert result.recommendation.changes[0].reason == "throttles"
    assert "was throttled on 24,910" in result.recommendation.why
    assert "nothing needs shards" not in result.recommendation.why
    forced = diagnose([a], options=Options(insights_rule="throttled"))
    assert forced.profile.top[0].throttles == 150_000


def test_insights_timestamps_and_period(tmp_path: Path) -> None:
    single = hs.insights_report({"K": [(hs.BASE, 6_000.0)]}, epoch=True)
    path = hs.write_report(tmp_path / "report.json", single)
    assumed = diagnose([path])
    assert assumed.profile.resolution == 60
    assert "assumed" in " ".join(assumed.profile.notes)
    given = diagnose([path], options=Options(period=300))
    assert given.profile.top[0].peak_units_per_s == 20.0
    counted = hs.insights_report({"K": [(hs.BASE, 120.0), (hs.BASE + 60, 60.0)]},
                                 statistic="Count")
    k = diagnose([hs.write_report(tmp_path / "count.json", counted)]).profile.top[0]
    assert (k.writes, k.units) == (180, 180.0)


@pytest.mark.parametrize(("doc", "message"), [
    ({"KeyLabels": ["pk"]}, 'no "Contributors" list'),
    ({"Contributors": [{"Keys": [], "Datapoints": []}]}, r"Contributors\[0\].Keys"),
    ({"Contributors": [{"Keys": ["a"], "Datapoints": [{"Timestamp": "2026-11-30T05:00:00Z",
                                                       "ApproximateValue": -1}]}]},
     "ApproximateValue -1 must be a number >= 0"),
    ({"Contributors": [{"Keys": ["a"], "Datapoints": [{"Timestamp": "soon",
                                                       "ApproximateValue": 1}]}]},
     r"Contributors\[0\].Datapoints\[0\]: timestamp 'soon' is neither"),
    ({"AggregationStatistic": "Average", "Contributors": []}, "neither Sum nor Count"),
])
def test_a_broken_insights_report_is_named(tmp_path: Path, doc: dict[str, Any],
                                           message: str) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InvalidLog, match=message):
        diagnose([path], options=Options(fmt="insights"))


# -- the command ----------------------------------------------------------------------------

def test_the_command_reads_cloudtrail_and_names_what_it_cannot_see(tmp_path: Path) -> None:
    folder = tmp_path / "AWSLogs" / "111122223333" / "CloudTrail" / "eu-west-1" / "2026" / "11"
    folder.mkdir(parents=True)
    sharded_trail(folder / "a.json.gz", seconds=2)
    plain = tmp_path / "b.json"
    plain.write_bytes(gzip.decompress((folder / "a.json.gz").read_bytes()))
    result = CliRunner().invoke(cli, ["diagnose", str(tmp_path / "AWSLogs"), "--per-shard"],
                                terminal_width=200)
    assert result.exit_code == 0, result.output
    out = " ".join(result.stdout.split())
    assert "note: CloudTrail: table orders-index, partition key attribute 'pk'" in out
    assert "PENDING: N=4 → 8" in out
    assert "└ PENDING#3" in out
    assert "timestamps: ISO 8601" in out
    result = CliRunner().invoke(cli, ["diagnose", str(plain), "--format", "cloudtrail",
                                      "--json"])
    assert json.loads(result.stdout)["recommendation"]["shards"] == {"PENDING": 8}


def test_the_command_refuses_a_stream_of_cloudtrail(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["diagnose", "-", "--format", "cloudtrail"])
    assert done.value.code == 2
    assert "--stream reads csv or jsonl" in capsys.readouterr().err


def test_the_documented_json_shapes_are_what_the_commands_print(tmp_path: Path) -> None:
    import re

    from shardex.plan import plan_shards

    docs = (Path(__file__).parent.parent / "docs" / "json.md").read_text()
    examples = [json.loads(block) for block in re.findall(r"```json\n(.*?)```", docs, re.S)]
    by_schema = {doc["schema"]: doc for doc in examples}
    path = sharded_trail(tmp_path / "trail.json", seconds=1)
    printed = {"shardex.diagnose/1": diagnose([path]).to_dict(),
               "shardex.plan/1": plan_shards({"PENDING": 6000}, item_bytes=1500).to_dict()}
    for schema, doc in printed.items():
        assert set(by_schema[schema]) == set(doc)
        Routing.from_dict(by_schema[schema]["routing"])
    assert by_schema["shardex.plan/1"] == printed["shardex.plan/1"]


def test_a_stream_of_a_whole_document_is_refused_by_name(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trail = hs.write_trail(tmp_path / "trail.json", [hs.put_item("T", {"id": "a"}, hs.BASE)])
    with pytest.raises(SystemExit) as done:
        main(["diagnose", str(trail), "--stream"])
    assert done.value.code == 2
    assert "is cloudtrail, which is read whole" in capsys.readouterr().err
    result = CliRunner().invoke(cli, ["diagnose", "-"], input=trail.read_text())
    assert isinstance(result.exception, InvalidInput)
    assert "read whole" in str(result.exception)


def test_an_insights_step_that_is_no_period_is_refused(tmp_path: Path) -> None:
    """A datapoint 1 s after another made every datapoint a 1 s bucket: 60,000 u/s, not 1,000."""
    jitter = hs.insights_report({"A": [(hs.BASE, 60_000.0), (hs.BASE + 1, 60.0),
                                       (hs.BASE + 60, 60_000.0)]})
    path = hs.write_report(tmp_path / "jitter.json", jitter)
    with pytest.raises(InvalidLog, match=r"jitter\.json column 'Contributors\[0\]"
                                         r"\.Datapoints\[1\]\.Timestamp': .*'A'.*1 s after"):
        diagnose([path])
    given = diagnose([path], options=Options(period=60))  # the period said: read as it says
    assert given.profile.top[0].peak_units_per_s == (60_000 + 60) / 60
    off = hs.insights_report({"A": [(hs.BASE, 6.0), (hs.BASE + 60, 6.0),
                                    (hs.BASE + 150, 6.0)]})
    with pytest.raises(InvalidLog, match=r"Datapoints\[2\].*'A'.*90 s after"):
        diagnose([hs.write_report(tmp_path / "off.json", off)])


def test_two_insights_datapoints_of_one_contributor_at_one_time_are_refused(
        tmp_path: Path) -> None:
    """They were summed, doubling the peak."""
    dup = hs.insights_report({"A": [(hs.BASE, 60_000.0), (hs.BASE, 60_000.0),
                                    (hs.BASE + 60, 60_000.0)]})
    path = hs.write_report(tmp_path / "dupts.json", dup)
    for options in (Options(), Options(period=60)):
        with pytest.raises(InvalidLog, match=r"dupts\.json column 'Contributors\[0\]"
                                             r"\.Datapoints\[1\]\.Timestamp': .*'A'.*"
                                             r"Datapoints\[0\]"):
            diagnose([path], options=options)


def test_contributors_sharing_a_partition_key_are_summed(tmp_path: Path) -> None:
    """A -SKC- rule's contributors (one partition key, two sort keys) share timestamps."""
    report = hs.insights_report({"A": [(hs.BASE, 60.0), (hs.BASE + 60, 60.0)]},
                                labels=("pk", "sk"))
    report["Contributors"].append({**report["Contributors"][0], "Keys": ["A", "sort-1"]})
    result = diagnose([hs.write_report(tmp_path / "skc.json", report)])
    assert result.profile.top[0].peak_units_per_s == 2.0


@pytest.mark.parametrize("queries", [0, 3])
def test_cloudtrail_never_takes_a_key_for_unread_beside_queries_it_cannot_see(
        tmp_path: Path, queries: int) -> None:
    """It said "the hot ones are never read in this sample" while its own note counted
    Query requests whose keys CloudTrail does not record."""
    records = []
    for s in range(5):
        records.extend(hs.put_item("orders", {"pk": {"S": "HOT"}}, hs.BASE + s)
                       for _ in range(1600))
        records.extend(hs.put_item("orders", {"pk": {"S": f"k{i}"}}, hs.BASE + s)
                       for i in range(3))
        records.extend(hs.query("orders", hs.BASE + s) for _ in range(queries))
    result = diagnose([hs.write_trail(tmp_path / "trail.json", records)])
    rec = result.recommendation
    assert rec.shards == {"HOT": 3}
    if not queries:
        assert rec.strategy == "random_suffix"
        return
    assert rec.strategy == "calculated_suffix"
    assert "never read" not in rec.why
    assert "15 Query/Scan requests name no key in CloudTrail, so reads of the hot keys " \
           "could not be attributed" in rec.why
