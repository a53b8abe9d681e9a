"""The logging recipe (examples/access_log.py) runs against DynamoDB Local, and its log
is what ``shardex diagnose`` reads: the GSI's own keys, units and request counts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from shardex.cli import cli
from tests import dynamodb_local as local

pytestmark = pytest.mark.dynamodb
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "access_log.py"


def test_the_recipe_logs_a_gsi_s_keys_for_diagnose(tmp_path: Path) -> None:
    endpoint = local.require_endpoint()
    log = tmp_path / "access.jsonl"
    env = {**os.environ, local.ENDPOINT_VARIABLE: endpoint}
    done = subprocess.run([sys.executable, str(EXAMPLE), str(log)], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert {r["target"].split("/")[1] for r in rows} == {"by_status"}
    result = CliRunner().invoke(cli, ["diagnose", str(log), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["source"]["time_units"] == ["epoch milliseconds"]
    top = {entry["key"]: entry for entry in report["top"]}
    assert set(top) == {"PENDING", "SHIPPED", "DELIVERED"}
    assert top["PENDING"]["requests"] == 90 + 5  # 90 orders written PENDING, 5 queries
    assert top["SHIPPED"]["requests"] == 30
    assert top["DELIVERED"]["units"] == 2 * 15  # a GSI key change: a delete and a put
