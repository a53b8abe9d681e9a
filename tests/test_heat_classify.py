"""Classification and recommendation, on generated logs in every format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from shardex.capacity import CEILINGS, resolve_ceiling
from shardex.errors import InvalidInput
from shardex.heat.classify import Thresholds, classify, order_key
from shardex.heat.profile import HeatProfile, HotStep, KeyHeat
from shardex.heat.report import diagnose, diagnose_stream, shards_needed
from tests import heat_samples as samples

FORMATS = ["csv", "jsonl", "parquet"]


def run(tmp_path: Path, rows: list[Any], fmt: str, **options: Any) -> dict[str, Any]:
    path = samples.write_log(tmp_path / f"log.{fmt}", rows)
    return diagnose([path], **options).to_dict()


def test_the_report_has_exactly_the_documented_shape(tmp_path: Path) -> None:
    report = run(tmp_path, samples.low_cardinality(), "csv")
    assert set(report) == {"schema", "source", "ceiling", "headroom", "totals",
                           "classification", "evidence", "top", "recommendation", "routing",
                           "rows", "skipped_rows"}
    assert report["schema"] == "shardex.diagnose/1"
    assert set(report["recommendation"]) == {"strategy", "shards", "changes", "why"}
    for entry in report["top"]:
        assert set(entry) == {"key", "share", "units", "requests", "peak_units_per_s",
                              "peak_write_units_per_s", "peak_read_units_per_s",
                              "sustained_units_per_s", "throttles", "peak_to_ceiling", "shards"}
    assert isinstance(report["rows"], int)
    assert isinstance(report["skipped_rows"], int)


@pytest.mark.parametrize("fmt", FORMATS)
def test_low_cardinality(tmp_path: Path, fmt: str) -> None:
    report = run(tmp_path, samples.low_cardinality(), fmt)
    assert report["classification"] == "low_cardinality"
    evidence = report["evidence"]
    assert evidence["distinct_keys"] == 4
    assert evidence["top_10_share"] == 1.0
    assert evidence["keys_for_80pct"] == 2
    top = {t["key"]: t for t in report["top"]}
    assert top["PENDING"]["peak_units_per_s"] == 2010.0  # 20 writes of 100, a read of 10
    assert top["PENDING"]["peak_to_ceiling"] == 2.0
    assert top["PENDING"]["share"] == round(120_600 / 186_600, 4)
    rec = report["recommendation"]
    # PENDING: 2,000 write units/s x 1.5 over 1,000 -> 3; SHIPPED: 800 x 1.5 -> 2
    assert (rec["strategy"], rec["shards"]) == ("calculated_suffix", {"PENDING": 3, "SHIPPED": 2})


def test_low_cardinality_never_read_gets_a_random_suffix(tmp_path: Path) -> None:
    report = run(tmp_path, samples.low_cardinality(reads=False), "jsonl")
    assert report["classification"] == "low_cardinality"
    assert report["recommendation"]["strategy"] == "random_suffix"
    assert report["recommendation"]["shards"] == {"PENDING": 3, "SHIPPED": 2}


@pytest.mark.parametrize("fmt", FORMATS)
def test_sequential_dates(tmp_path: Path, fmt: str) -> None:
    report = run(tmp_path, samples.sequential(), fmt)
    assert report["classification"] == "sequential"
    evidence = report["evidence"]
    assert evidence["hot_key_sequence"] == ["2026-11-27", "2026-11-28", "2026-11-29",
                                            "2026-11-30"]
    assert evidence["ordering"] == "date"
    assert evidence["forward_steps"] == evidence["steps"] == 3
    rec = report["recommendation"]
    assert rec["strategy"] == "time_bucket_plus_suffix"
    # 30 writes of 100 units in one second: 3,000 units/s x 1.5 -> 5 shards per day
    assert rec["shards"] == {f"2026-11-{d}": 5 for d in range(27, 31)}


def test_sequential_counters_with_a_prefix(tmp_path: Path) -> None:
    report = run(tmp_path, samples.counters(), "csv")
    assert report["classification"] == "sequential"
    assert report["evidence"]["ordering"] == "number"
    assert report["evidence"]["prefix"] == "batch-"
    assert report["evidence"]["hot_key_sequence"][:2] == ["batch-7", "batch-8"]


def test_dates_in_reverse_are_not_sequential(tmp_path: Path) -> None:
    rows = samples.sequential()
    last = max(r["timestamp"] for r in rows)
    first = min(r["timestamp"] for r in rows)
    reversed_rows = [{**r, "timestamp": first + last - r["timestamp"]} for r in rows]
    assert run(tmp_path, reversed_rows, "csv")["classification"] == "low_cardinality"


@pytest.mark.parametrize("fmt", FORMATS)
def test_popular_entity(tmp_path: Path, fmt: str) -> None:
    report = run(tmp_path, samples.popular_entity(), fmt)
    assert report["classification"] == "popular_entity"
    evidence = report["evidence"]
    assert evidence["top_key"] == "tenant-42"
    assert evidence["top_key_share"] == pytest.approx(0.5, abs=0.01)
    assert evidence["distinct_keys"] > 100
    assert evidence["dominance"] >= 4
    rec = report["recommendation"]
    # 25 writes of 100 units in a second: 2,500 x 1.5 over 1,000 -> 4
    assert (rec["strategy"], rec["shards"]) == ("dedicated_heavy_key", {"tenant-42": 4})
    assert "tenant-42" in rec["why"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_uniform(tmp_path: Path, fmt: str) -> None:
    report = run(tmp_path, samples.uniform(), fmt)
    assert report["classification"] == "uniform"
    assert report["evidence"]["top_key_share"] < 0.02
    assert report["recommendation"] == {
        "strategy": "none", "shards": {}, "changes": [], "why": report["recommendation"]["why"]}
    assert report["routing"]["overrides"] == {}
    assert all(t["peak_to_ceiling"] < 0.1 for t in report["top"])


def test_ceiling_and_headroom_change_n(tmp_path: Path) -> None:
    path = samples.write_log(tmp_path / "log.csv", samples.low_cardinality())
    assert diagnose([path], headroom=1.0).recommendation.shards == {"PENDING": 2}
    assert diagnose([path], ceiling="cosmos").recommendation.shards == {}
    assert diagnose([path], ceiling="500").recommendation.shards == {"PENDING": 6,
                                                                     "SHIPPED": 3}
    with pytest.raises(InvalidInput):
        diagnose([path], headroom=0)
    with pytest.raises(InvalidInput):
        diagnose([path], ceiling="oracle")


@pytest.mark.parametrize("kind", ["low_cardinality", "sequential", "popular_entity", "uniform"])
def test_the_stream_reader_classifies_alike(tmp_path: Path, kind: str) -> None:
    rows = getattr(samples, kind)()
    path = samples.write_log(tmp_path / "log.jsonl", rows)
    exact = diagnose([path]).to_dict()
    streamed = diagnose_stream(path.read_text().splitlines(), fmt="jsonl",
                               counters=1000).to_dict()
    assert streamed["classification"] == exact["classification"] == kind
    assert streamed["recommendation"]["shards"] == exact["recommendation"]["shards"]


def test_a_small_summary_still_finds_the_popular_entity(tmp_path: Path) -> None:
    path = samples.write_log(tmp_path / "log.jsonl", samples.popular_entity())
    report = diagnose_stream(path.read_text().splitlines(), fmt="jsonl", counters=20)
    assert report.profile.distinct_exact is False
    assert report.classification.kind == "popular_entity"
    top = report.profile.top[0]
    assert top.key == "tenant-42"
    assert top.units - top.error <= 75_000 <= top.units
    assert report.to_dict()["evidence"]["space_saving"]["counters"] == 20


def test_order_keys() -> None:
    assert order_key("2026-11-30") == ("date", "", "2026-11-30")
    assert order_key("orders#2026-11-30T05") == ("date", "orders#", "2026-11-30T05")
    assert order_key("batch-17") == ("number", "batch-", 17)
    assert order_key("42") == ("number", "", 42)
    assert order_key("PENDING") is None


def heat(key: str, units: float) -> KeyHeat:
    return KeyHeat(key, units, 0.0, units, 0, 1, 0, 1, units, 0.0, units, units, units / 1000)


def profile(shares: dict[str, float], distinct: int,
            sequence: list[str] | None = None) -> HeatProfile:
    top = [heat(k, v) for k, v in sorted(shares.items(), key=lambda kv: -kv[1])]
    steps = [HotStep(i, i, k, 0.9) for i, k in enumerate(sequence or [])]
    return HeatProfile(rows=100, skipped_rows=0, total_units=100.0, requests=100, throttles=0,
                       distinct_keys=distinct, distinct_exact=True, first_second=0,
                       last_second=len(steps), top=top, over=[], sequence=steps,
                       ceiling=CEILINGS["dynamodb"])


def test_classification_thresholds_at_their_edges() -> None:
    at_edge = {f"k{i}": 8.0 for i in range(10)}  # the top 10 carry exactly 80%
    assert classify(profile(at_edge, 30)).kind == "low_cardinality"
    below = {f"k{i}": 7.9 for i in range(10)}
    assert classify(profile(below, 30)).kind == "uniform"
    popular = {"big": 25.0, "next": 6.25}
    assert classify(profile(popular, 20)).kind == "popular_entity"
    assert classify(profile(popular, 19)).kind == "uniform"  # too few keys to be "of many"
    assert classify(profile({"big": 25.0, "next": 6.3}, 20)).kind != "popular_entity"
    steps = ["d-1", "d-2", "d-3"]
    assert classify(profile(at_edge, 30, steps)).kind == "sequential"
    assert classify(profile(at_edge, 30, ["d-1", "d-2"])).kind == "low_cardinality"
    assert classify(profile(at_edge, 30, ["d-1", "d-3", "d-2"])).kind == "low_cardinality"
    assert classify(profile(at_edge, 30, ["d-1", "x-2", "d-3"])).kind == "low_cardinality"
    with pytest.raises(InvalidInput):
        Thresholds(top_share=1.5)


def test_shards_needed_counts_reads_and_writes_against_their_own_ceilings() -> None:
    bound = resolve_ceiling("dynamodb")
    reads = KeyHeat("k", 0, 0, 0, 1, 0, 0, 1, 6000.0, 6000.0, 0.0, 0.0, 2.0)
    assert shards_needed(reads, bound, 1.5) == 3   # 6,000 x 1.5 / 3,000
    huge = KeyHeat("k", 0, 0, 0, 0, 1, 0, 1, 1e9, 0.0, 1e9, 0.0, 1e6)
    assert shards_needed(huge, bound, 1.5) == 4096


@pytest.mark.parametrize("mode", ["file", "stream"])
def test_keys_for_80pct_counts_every_key_whatever_top_lists(tmp_path: Path, mode: str) -> None:
    """--top 3 gave None and --top 30 gave 19: it was counted over the listed keys only."""
    rows = ["timestamp,key,op,units"]
    rows.extend(f"{1796014800 + t},k{i:02},write,{100 - i}" for t in range(3) for i in range(40))
    path = tmp_path / "spread.csv"
    path.write_text("\n".join(rows) + "\n")
    found = set()
    for top in (3, 10, 30):
        if mode == "file":
            result = diagnose([path], top=top)
        else:
            result = diagnose_stream(path.read_text().splitlines(keepends=True), top=top)
        found.add(result.classification.evidence["keys_for_80pct"])
    # units 100 down to 61 a second, 3,220 in all: the 31 heaviest carry 80%
    assert found == {31}


def _diagnosed(tmp_path: Path, rows: list[str], mode: str, ceiling: str) -> Any:
    """``rows`` of a CSV log diagnosed against ``ceiling``, from a file or as a stream."""
    path = tmp_path / "log.csv"
    path.write_text("\n".join(rows) + "\n")
    if mode == "file":
        return diagnose([path], ceiling=ceiling)
    return diagnose_stream(path.read_text().splitlines(), fmt="csv", ceiling=ceiling)


@pytest.mark.parametrize("mode", ["file", "stream"])
def test_a_shard_keys_reads_and_writes_on_one_budget_count_in_the_same_second(
        tmp_path: Path, mode: str) -> None:
    """On one budget a sharded key's busiest shard key was weighed by its read peak plus
    its write peak, which may fall in different seconds: S#0 reading 12,000 RU in one
    second and writing 12,000 in the next was weighed at 24,000 a second, and S (two
    shard keys, 24,000 RU a second in all) was advised N=8 where 4 keep the busiest
    second of each shard key, and of S, with the 1.5x headroom within it."""
    rows = ["timestamp,key,op,units"]
    for t in range(60):
        first, then = ("read", "write") if t % 2 else ("write", "read")
        rows += [f"{1796014800 + t},S#0,{first},12000", f"{1796014800 + t},S#1,{then},12000"]
    found = _diagnosed(tmp_path, rows, mode, "cosmos").to_dict()
    (top,) = found["top"]
    assert top["peak_to_ceiling"] == pytest.approx(1.2)  # the busiest shard key's second
    assert found["recommendation"]["shards"] == {"S": 4}  # 24,000 x 1.5 over 10,000


@pytest.mark.parametrize("mode", ["file", "stream"])
def test_reads_and_writes_on_one_budget_are_weighed_together(tmp_path: Path,
                                                             mode: str) -> None:
    """A Cosmos DB or Azure partition serves reads and writes from one budget: a key
    reading 6,000 RU and writing 6,000 RU a second is at 120% of a Cosmos DB partition's
    10,000, where the diagnosis said 60% (each against the ceiling apart) and left it
    unsharded. DynamoDB's separate ceilings still weigh each on its own."""
    rows = ["timestamp,key,op,units"]
    for t in range(60):
        rows += [f"{1796014800 + t},R,read,6000", f"{1796014800 + t},R,write,6000"]
    cosmos = _diagnosed(tmp_path, rows, mode, "cosmos").to_dict()
    (top,) = cosmos["top"]
    assert top["peak_to_ceiling"] == pytest.approx(1.2)
    assert cosmos["recommendation"]["shards"] == {"R": 2}  # 12,000 x 1.5 over 10,000
    azure = _diagnosed(tmp_path, rows, mode, "azure-tables").to_dict()
    assert azure["top"][0]["peak_to_ceiling"] == pytest.approx(6.0)  # 12,000 of 2,000
    dynamodb = _diagnosed(tmp_path, rows, mode, "dynamodb").to_dict()
    assert dynamodb["top"][0]["peak_to_ceiling"] == pytest.approx(6.0)  # writes: 6,000/1,000
    assert shards_needed(KeyHeat("k", 0, 0, 0, 1, 0, 0, 1, 12_000.0, 6000.0, 6000.0, 0.0,
                                 1.2), CEILINGS["cosmos"], 1.5) == 2
