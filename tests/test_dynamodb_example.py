"""The DynamoDB example runs as documented against DynamoDB Local, so it cannot rot."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import dynamodb_local as local

pytestmark = pytest.mark.dynamodb
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "orders_dynamodb.py"


def test_orders_example_lists_pending_like_a_scan_of_the_base_table() -> None:
    endpoint = local.require_endpoint()
    env = {**os.environ, "SHARDEX_DYNAMODB_ENDPOINT": endpoint}
    done = subprocess.run([sys.executable, str(EXAMPLE), "--orders", "300", "--page-size", "40"],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 4
    assert "300 orders written by the application" in lines[0]
    assert "over 8 shard keys" in lines[1]
    assert "the listing matches it" in lines[2]
    assert "consistent=False" in lines[2]
