"""From diagnosis to policy: a popular entity's isolation and the admission for the rest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from shardex import Routing, ShardedIndex
from shardex.admission import AdmissionPolicy, Budget
from shardex.capacity import resolve_ceiling
from shardex.cli import cli
from shardex.heat.report import DEDICATED_TIER, diagnose, rest_budget
from shardex.sim.clock import run_virtual
from shardex.stores.memory import MemoryStore
from tests import heat_samples as samples


def _report(tmp_path: Path) -> tuple[Path, dict[str, object]]:
    log = samples.write_log(tmp_path / "log.csv", samples.popular_entity())
    done = CliRunner().invoke(cli, ["diagnose", str(log), "--json"])
    assert done.exit_code == 0, done.output
    path = tmp_path / "diagnosis.json"
    path.write_text(done.stdout, encoding="utf-8")
    return path, json.loads(done.stdout)


def test_a_popular_entity_is_isolated_on_a_tier_and_the_rest_get_a_budget(
        tmp_path: Path) -> None:
    _, report = _report(tmp_path)
    assert report["classification"] == "popular_entity"
    assert report["isolation"] == {"key": "tenant-42", "tier": DEDICATED_TIER, "shards": 4}
    routing = Routing.from_dict(report["routing"])
    assert routing.policy("tenant-42").tier == DEDICATED_TIER
    assert routing.policy("tenant-42").shards == 4
    admission = AdmissionPolicy.from_dict(report["admission"])
    assert admission.budget("tenant-42") is None  # its own tier is sized for it
    rest = admission.budget("tenant-7")
    assert rest is not None
    assert rest.rate == pytest.approx(1000 / 1.5 / 2, rel=1e-4)
    assert rest.read_cost == pytest.approx(1000 / 3000, rel=1e-3)


def test_other_classifications_recommend_no_isolation(tmp_path: Path) -> None:
    log = samples.write_log(tmp_path / "log.csv", samples.low_cardinality())
    report = diagnose([log]).to_dict()
    assert "isolation" not in report
    assert "admission" not in report


def test_the_documents_drive_an_index_and_a_reshard_as_they_are(tmp_path: Path) -> None:
    path, report = _report(tmp_path)

    async def body() -> None:
        routing = Routing.from_dict(report["routing"])
        admission = AdmissionPolicy.from_dict(report["admission"])
        async with ShardedIndex(MemoryStore(), "ix", routing, admission=admission,
                                tiers={DEDICATED_TIER: MemoryStore()}) as index:
            await index.put("tenant-42", "a")
            await index.put("tenant-7", "b")
            assert index.tiers[DEDICATED_TIER].shard_keys("ix") == \
                [routing.shard_key("tenant-42", "a")]

    run_virtual(body())
    # reshard start takes the diagnosis file as it is (a dry run: nothing changes)
    done = CliRunner().invoke(cli, ["reshard", "start", "--store", "memory://", "--index",
                                    "ix", "--file", str(path), "--tier",
                                    f"{DEDICATED_TIER}=memory://", "--dry-run", "--json"])
    assert done.exit_code == 0, done.output
    plan = json.loads(done.stdout)
    assert plan["values"]["tenant-42"]["to"]["tier"] == DEDICATED_TIER


def test_the_rest_budget_follows_the_ceiling_and_headroom() -> None:
    policy = rest_budget(resolve_ceiling("azure-tables"), 2.0, ["big"])
    assert isinstance(policy.default, Budget)
    assert policy.overrides == {"big": None}
