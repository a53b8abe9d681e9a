"""The Azure example runs as documented against Azurite, so it cannot rot."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import azurite

pytestmark = pytest.mark.azure
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "orders_azure.py"


def test_orders_example_lists_pending_as_written() -> None:
    endpoint = azurite.require_endpoint()
    env = {**os.environ, "SHARDEX_AZURITE_ENDPOINT": endpoint}
    done = subprocess.run([sys.executable, str(EXAMPLE), "--orders", "120", "--page-size", "25"],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 4
    assert "120 orders written under PENDING, over 8 shard keys" in lines[0]
    assert "the listing matches the writes" in lines[2]
    assert "repair: 0 rows" in lines[3]
