"""A Contributor Insights report mixes reads and writes: the diagnosis says so and never
takes a hot key for never read (so it never picks ``random_suffix`` on that ground)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from shardex.cli import cli
from shardex.heat import diagnose
from tests import heat_samples as samples
from tests import heat_sources as hs


def low_cardinality_report(tmp_path: Path) -> Path:
    """Four statuses, PENDING at 1,500 units/s and SHIPPED at 800: few keys, two hot."""
    series = {key: [(hs.BASE + 60 * m, per_s * 60) for m in range(5)]
              for key, per_s in (("PENDING", 1500.0), ("SHIPPED", 800.0),
                                 ("DELIVERED", 50.0), ("CANCELLED", 10.0))}
    return hs.write_report(tmp_path / "DynamoDBContributorInsights-PKC-orders-by_status.json",
                           hs.insights_report(series))


def test_a_report_that_mixes_reads_and_writes_is_not_taken_for_never_read(
        tmp_path: Path) -> None:
    result = diagnose([low_cardinality_report(tmp_path)])
    assert not result.profile.reads_told_apart
    assert result.classification.kind == "low_cardinality"
    rec = result.recommendation
    assert rec.strategy == "calculated_suffix"
    assert rec.shards == {"PENDING": 3, "SHIPPED": 2}
    assert "never read" not in rec.why
    assert "counts reads and writes together" in rec.why
    assert "cannot tell whether the hot keys are read" in rec.why
    assert result.recommendation.routing().overrides["PENDING"].strategy == "hash"
    notes = " ".join(result.profile.notes)
    assert "reads and writes together: the report cannot tell them apart" in notes


def test_the_command_says_it_too(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["diagnose", str(low_cardinality_report(tmp_path)),
                                      "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["recommendation"]["strategy"] == "calculated_suffix"
    assert "never read" not in result.stdout
    assert any("cannot tell them apart" in note for note in doc["source"]["notes"])


def test_an_access_log_that_tells_them_apart_still_finds_never_read(tmp_path: Path) -> None:
    """The same shape from an access log without reads: random_suffix stays right there."""
    path = tmp_path / "access.jsonl"
    path.write_text("".join(json.dumps(row) + "\n"
                            for row in samples.low_cardinality(reads=False)))
    result = diagnose([path])
    assert result.profile.reads_told_apart
    assert result.recommendation.strategy == "random_suffix"
