"""The tenants scenario: the three modes on one seeded schedule, its JSON, table and plot."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from shardex.cli import cli
from shardex.errors import InvalidInput
from shardex.routing import ShardPolicy
from shardex.scenarios import tenants
from shardex.scenarios.tenants import (
    TENANTS_SCHEMA,
    TenantsLoad,
    layouts,
    run_tenants_demo,
    tenant_budget,
)

# a short burst keeps the test quick; the figures are the benchmark's to print
SHORT = TenantsLoad(tenants=60, partitions=6, warmup_s=2, burst_s=8, cooldown_s=2)
FIELDS = {"mode", "neighbour_write_p99_ms", "neighbour_throttled_ratio", "heavy_offered_per_s",
          "heavy_accepted_per_s", "admission_rejected", "throttled_requests"}


def test_the_modes_meet_the_same_schedule_and_protect_the_neighbours_in_turn() -> None:
    none, admission, isolation = (run.summary() for run in run_tenants_demo(SHORT, seed=2))
    assert [none["mode"], admission["mode"], isolation["mode"]] == \
        ["none", "admission", "isolation"]
    assert none["heavy_offered_per_s"] == admission["heavy_offered_per_s"] == \
        isolation["heavy_offered_per_s"]
    assert none["neighbours"] > 0
    assert none["admission_rejected"] == 0
    assert admission["admission_rejected"] > 0
    assert none["neighbour_throttled_ratio"] > admission["neighbour_throttled_ratio"]
    # isolated on its tier, the heavy tenant is served in full and refused nothing
    assert isolation["heavy_accepted_per_s"] > admission["heavy_accepted_per_s"]
    assert isolation["admission_rejected"] == 0
    assert isolation["dedicated_shards"] >= 2


def test_the_layouts_follow_the_load() -> None:
    routing, admission = layouts(SHORT, "isolation")
    assert routing.policy(SHORT.heavy_tenant).tier == "dedicated"
    assert admission is not None
    assert admission.budget(SHORT.heavy_tenant) is None
    assert admission.budget("tenant-001") == tenant_budget(SHORT)
    assert layouts(SHORT, "none") == (routing.__class__(), None)
    assert isinstance(routing.policy(SHORT.heavy_tenant), ShardPolicy)


def test_a_bad_load_is_refused() -> None:
    with pytest.raises(InvalidInput, match="burst_factor"):
        TenantsLoad(burst_factor=0)
    with pytest.raises(InvalidInput, match="heavy"):
        TenantsLoad(tenants=10, heavy=10)


def test_the_cli_prints_the_schema_a_table_and_a_plot(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # the two invocations print the same runs two ways: simulated once (3.7 s of CPU)
    monkeypatch.setattr(tenants, "run_tenants_demo", functools.cache(tenants.run_tenants_demo))
    runner = CliRunner()
    done = runner.invoke(cli, ["demo", "--scenario", "tenants", "--json", "--burst", "3"])
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)
    assert doc["schema"] == TENANTS_SCHEMA
    assert [run["mode"] for run in doc["runs"]] == ["none", "admission", "isolation"]
    for run in doc["runs"]:
        assert set(run) >= FIELDS
    plot = tmp_path / "tenants.png"
    shown = runner.invoke(cli, ["demo", "--scenario", "tenants", "--burst", "3",
                                "--plot", str(plot)])
    assert shown.exit_code == 0, shown.output
    assert "neighbours' throttled share" in shown.stdout
    assert plot.stat().st_size > 10_000


def test_options_of_the_other_scenario_are_usage_errors() -> None:
    done = CliRunner().invoke(cli, ["demo", "--scenario", "tenants", "--reshard"])
    assert done.exit_code == 2
    assert "--reshard, --rate and --duration belong to the orders scenario" in done.output
    done = CliRunner().invoke(cli, ["demo", "--burst", "3"])
    assert done.exit_code == 2
