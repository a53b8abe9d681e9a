"""Shard keys rolled up under their logical key, throttles as evidence, timestamp units."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardex.capacity import CEILINGS
from shardex.errors import InvalidLog
from shardex.heat.logs import read_logs
from shardex.heat.report import diagnose, diagnose_stream
from tests.heat_samples import BASE, write_log

FORMATS = ["csv", "jsonl", "parquet"]


def sharded(*, shards: int = 4, per_shard: int = 12, units: float = 100.0,
            seconds: int = 10, skew: int = 0) -> list[dict[str, Any]]:
    """PENDING written over ``shards`` shard keys; shard 0 gets ``skew`` more writes."""
    rows: list[dict[str, Any]] = []
    for s in range(seconds):
        for k in range(shards):
            for i in range(per_shard + (skew if k == 0 else 0)):
                rows.append({"timestamp": BASE + s + i / 100, "key": f"PENDING#{k}",
                             "op": "write", "units": units})
        rows.append({"timestamp": BASE + s, "key": "SHIPPED", "op": "write", "units": 300})
    return rows


@pytest.mark.parametrize("fmt", FORMATS)
def test_shard_keys_roll_up_and_the_recommendation_grows_n(tmp_path: Path, fmt: str) -> None:
    path = write_log(tmp_path / f"log.{fmt}", sharded())
    result = diagnose([path], per_shard=True)
    pending = result.profile.top[0]
    assert (pending.key, pending.shards, pending.partitions) == ("PENDING", 4, 4)
    assert pending.peak_write_units_per_s == 4 * 1200.0
    assert pending.hottest_write_units_per_s == 1200.0
    assert pending.peak_to_ceiling == 1.2  # each shard key is its own partition
    assert [p.key for p in pending.parts] == [f"PENDING#{k}" for k in range(4)]
    assert result.recommendation.shards == {"PENDING": 8}  # 4 x 1,200 x 1.5 over 1,000
    assert result.recommendation.changes[0].current == 4
    assert "PENDING (N=4 \u2192 8)" in result.recommendation.why
    top = result.to_dict()["top"][0]
    assert top["shards"] == 4
    assert len(top["shard_keys"]) == 4
    assert result.profile.distinct_keys == 2


def test_a_skewed_shard_counts_at_its_own_rate() -> None:
    rows = sharded(per_shard=5, skew=7)  # shard 0 at 1,200 units/s, the others at 500
    lines = [f"{r['timestamp']},{r['key']},{r['op']},{r['units']}" for r in rows]
    result = diagnose_stream(["timestamp,key,op,units", *lines])
    pending = result.profile.top[0]
    assert pending.peak_write_units_per_s == 2700.0
    assert pending.hottest_write_units_per_s == 1200.0
    # spread evenly 2,700 would need 5; the busiest shard scaled to 4 shards needs 8
    assert result.recommendation.shards["PENDING"] == 8


@pytest.mark.parametrize(("keys", "logical"), [
    (["PENDING#0"], {"PENDING": 2}),            # only shard 0 seen: still at least 2 shards
    (["PENDING", "PENDING#2"], {"PENDING": 3}),  # a plain key beside shard 2 (mid-reshard)
    (["PENDING#07"], {"PENDING#07": 1}),          # a leading zero: not a shard number
    (["PENDING#4096"], {"PENDING#4096": 1}),      # beyond the most shards a policy allows
    (["a#b#1"], {"a#b#1": 1}),                    # a logical key never holds the separator
    (["PENDING#x"], {"PENDING#x": 1}),
])
def test_what_counts_as_a_shard_key(tmp_path: Path, keys: list[str],
                                    logical: dict[str, int]) -> None:
    rows = [{"timestamp": BASE, "key": k, "op": "write", "units": 1} for k in keys]
    path = write_log(tmp_path / "log.csv", rows)
    with read_logs([path]) as logs:
        found = {k.key: k.shards for k in logs.profile(ceiling=CEILINGS["dynamodb"]).top}
    assert found == logical
    streamed = diagnose_stream(path.read_text().splitlines()).profile.top
    assert {k.key: k.shards for k in streamed} == logical


def test_reserved_keys_are_counted_apart(tmp_path: Path) -> None:
    """shardex's own records are left out of the ranking; an application's own key that
    starts with '#' (a channel, '#general') is a key like any other, hot if it is."""
    rows = [{"timestamp": BASE, "key": k, "op": "write", "units": 2}
            for k in ("PENDING#1", "#placement#o-1", "#placement#o-2", "#record#routing",
                      "#owner")]
    rows += [{"timestamp": BASE + s, "key": k, "op": "write", "units": 100}
             for s in range(10) for _ in range(30) for k in ("#general", "#placement")]
    path = write_log(tmp_path / "log.jsonl", rows)
    for result in (diagnose([path]), diagnose_stream(path.read_text().splitlines())):
        assert [k.key for k in result.profile.top] == ["#general", "#placement", "PENDING"]
        assert result.profile.top[0].peak_units_per_s == 3000
        assert result.profile.total_units == 60_002.0
        assert "4 requests, 8 units over 4 partition keys" in " ".join(result.profile.notes)


# -- throttles as evidence -------------------------------------------------------------------

def throttled(*, count: int, of: int, seconds: int = 10) -> list[dict[str, Any]]:
    """A key at 450 units/s, below the ceiling, ``count`` of every ``of`` requests throttled."""
    rows = []
    for s in range(seconds):
        for i in range(45):
            rows.append({"timestamp": BASE + s + i / 50, "key": "PENDING", "op": "write",
                         "units": 10, "throttled": int(i % of < count)})
        rows.append({"timestamp": BASE + s, "key": "SHIPPED", "op": "write", "units": 10,
                     "throttled": 0})
    return rows


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_throttled_key_below_the_ceiling_gets_shards(tmp_path: Path, fmt: str) -> None:
    path = write_log(tmp_path / f"log.{fmt}", throttled(count=1, of=3))
    for result in (diagnose([path]), diagnose_stream(path.read_text().splitlines())):
        pending = result.profile.top[0]
        assert pending.throttles == 150
        assert pending.peak_to_ceiling == 0.45
        # 450 offered, 300 accepted at most: 450 x 1.5 / 300 -> 3 (2.25 rounded up)
        assert result.recommendation.shards == {"PENDING": 3}
        assert result.recommendation.changes[0].reason == "throttles"
        assert "throttled on 150 of 450 requests (33.3%)" in result.recommendation.why


def test_a_throttled_key_whose_partitions_took_all_it_offered_is_sized_on_them(
        tmp_path: Path) -> None:
    """A key on 4 shard keys whose throttled requests cost nothing (retried until taken,
    as CloudTrail counts them), so its accepted peak is its offered one: N was doubled
    (8) where the documented N now x offered x headroom / accepted gives 6."""
    rows = [{"timestamp": BASE + s + i / 50, "key": f"PENDING#{i % 4}", "op": "write",
             "units": 0 if i % 3 == 0 else 10, "throttled": int(i % 3 == 0)}
            for s in range(10) for i in range(45)]
    rows += [{"timestamp": BASE + s, "key": "SHIPPED", "op": "write", "units": 10,
              "throttled": 0} for s in range(10)]
    result = diagnose([write_log(tmp_path / "log.csv", rows)])
    pending = result.profile.top[0]
    assert pending.peak_units_per_s == pending.peak_accepted_units_per_s == 300.0
    assert result.recommendation.shards == {"PENDING": 6}  # 4 x 300 x 1.5 / 300
    assert result.recommendation.changes[0].reason == "throttles"


def test_a_few_throttles_are_not_evidence(tmp_path: Path) -> None:
    rows = throttled(count=1, of=1000)  # 10 throttles of 450 requests: 2.2%
    rows = [dict(r, throttled=0) if r["timestamp"] > BASE + 4 else r for r in rows]
    path = write_log(tmp_path / "log.csv", rows)
    assert diagnose([path]).recommendation.strategy == "none"


# -- timestamps ------------------------------------------------------------------------------

@pytest.mark.parametrize(("scale", "unit"), [(1, "epoch seconds"),
                                             (1_000, "epoch milliseconds"),
                                             (1_000_000, "epoch microseconds"),
                                             (1_000_000_000, "epoch nanoseconds")])
@pytest.mark.parametrize("fmt", FORMATS)
def test_epoch_units_are_told_by_size_and_stated(tmp_path: Path, scale: int, unit: str,
                                                 fmt: str) -> None:
    rows = [{"timestamp": (BASE + s) * scale + i * scale // 100 if scale > 1 else
             BASE + s + i / 100, "key": "PENDING", "op": "write", "units": 100}
            for s in range(3) for i in range(20)]
    path = write_log(tmp_path / f"log.{fmt}", rows)
    result = diagnose([path])
    assert result.profile.top[0].peak_units_per_s == 2000.0  # not 1000x too low
    assert (result.profile.first_second, result.profile.seconds) == (BASE, 3)
    assert result.to_dict()["source"]["time_units"] == [unit]
    if fmt != "parquet":
        streamed = diagnose_stream(path.read_text().splitlines())
        assert streamed.profile.time_kinds == (unit,)
        assert streamed.profile.top[0].peak_units_per_s == 2000.0


@pytest.mark.parametrize(("stamp", "message"), [
    (-5, "out of range"), (1e21, "out of range"), ("10000-01-01T00:00:00Z", "out of range"),
    ("nan", "neither ISO 8601"), (BASE * 1000, "epoch milliseconds, but this file's"),
])
def test_odd_timestamps_are_named(tmp_path: Path, stamp: object, message: str) -> None:
    rows = [{"timestamp": BASE + i, "key": "A", "op": "write", "units": 1} for i in range(3)]
    rows[2] = {**rows[2], "timestamp": stamp}
    path = write_log(tmp_path / "log.csv", rows)
    with pytest.raises(InvalidLog, match=message) as caught:
        diagnose([path])
    assert (caught.value.line, caught.value.column) == (4, "timestamp")
    with pytest.raises(InvalidLog, match=message):
        diagnose_stream(path.read_text().splitlines())


@settings(max_examples=25, deadline=None)
@given(stamps=st.lists(st.one_of(
    st.integers(min_value=0, max_value=10**19), st.floats(min_value=0, max_value=1e11),
    st.datetimes(timezones=st.just(__import__("datetime").UTC)).map(lambda d: d.isoformat())),
    min_size=1, max_size=6))
def test_the_plot_never_fails_on_odd_times(tmp_path_factory: pytest.TempPathFactory,
                                           stamps: list[object]) -> None:
    from shardex.heat.plot import plot_heatmap

    folder = tmp_path_factory.mktemp("odd")
    rows = [{"timestamp": t, "key": f"k{i % 3}", "op": "write", "units": 5}
            for i, t in enumerate(stamps)]
    path = write_log(folder / "log.csv", rows)
    try:
        result = diagnose([path], timeline_bins=40, skip_bad=True)
    except InvalidLog:
        return  # a file of mixed kinds with nothing valid left is refused by name
    png = plot_heatmap(result, folder / "heat.png")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_throttles_spread_over_every_key_are_not_a_key_s_own(tmp_path: Path) -> None:
    """A table-wide limit throttles every key alike: more shards for one would not help."""
    rows = [{"timestamp": BASE + s + i / 100, "key": f"k{i % 8}", "op": "write", "units": 10,
             "throttled": int(i // 8 % 10 == 0)} for s in range(30) for i in range(80)]
    path = write_log(tmp_path / "log.csv", rows)
    result = diagnose([path])
    assert result.profile.throttles == 240
    assert all(k.throttles == 30 for k in result.profile.top)
    assert result.recommendation.strategy == "none"


def single_table_design() -> list[dict[str, Any]]:
    """USER#1 .. USER#4 and USER#1000 .. USER#1029: a single-table design's user ids, not
    a shardex layout's shards 0..N-1; USER#1 .. USER#3 each at 900 write units/s."""
    keys = [("USER#1", 900), ("USER#2", 900), ("USER#3", 900), ("USER#4", 50)]
    keys += [(f"USER#{1000 + i}", 5) for i in range(30)]
    return [{"timestamp": BASE + t, "key": key, "op": "write", "units": units}
            for t in range(30) for key, units in keys]


@pytest.mark.parametrize("mode", ["file", "stream"])
def test_shard_numbers_with_gaps_are_not_sized_as_a_layout(tmp_path: Path, mode: str) -> None:
    rows = single_table_design()
    if mode == "file":
        result = diagnose([write_log(tmp_path / "st.csv", rows)])
    else:
        lines = ["timestamp,key,op,units"] + [
            f"{r['timestamp']},{r['key']},{r['op']},{r['units']}" for r in rows]
        result = diagnose_stream(lines)
    rec = result.recommendation
    # no absurd N = 1030 -> 1391 from 34 keys scaled as 1,030 shards
    assert all(n < 100 for n in rec.shards.values()), rec.shards
    assert "USER" not in rec.shards
    assert rec.strategy != "none" or "nothing needs shards" not in rec.why
    assert "shard numbers with gaps" in rec.why
    assert "34 of 1,030" in rec.why
    doc = result.to_dict()
    assert "USER" not in doc["routing"]["overrides"]


def test_a_small_layout_seen_on_one_of_its_shards_is_still_sized(tmp_path: Path) -> None:
    """The gaps rule starts at N=16: a hot key of a 4-shard layout whose sample caught
    PENDING#3 alone is a layout's shard, over the ceiling, and is sized."""
    rows = [{"timestamp": BASE + t, "key": "PENDING#3", "op": "write", "units": 1500}
            for t in range(10)]
    rec = diagnose([write_log(tmp_path / "one.csv", rows)]).recommendation
    assert rec.shards.get("PENDING", 0) > 4, rec.why
    assert "gaps" not in rec.why
