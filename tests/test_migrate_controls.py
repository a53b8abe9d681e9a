"""Live controls from another process, on DynamoDB Local: a running ``reshard run`` is
paused, given a new rate and resumed by ``shardex reshard pause|throttle|resume``, and
the load it puts on the key it drains follows; the commands' refusals and documents.

Real time on a real server, bounded: about fifteen seconds in all.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import math
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shardex.stores import open_store
from tests import dynamodb_local as local
from tests.servers import shardex_error as refused
from tests.test_reshard_dynamodb import fill, ok

pytestmark = pytest.mark.dynamodb
ROOT = Path(__file__).resolve().parent.parent
COST = 2.0  # write units of one move in index-table mode (a transaction of a small row)


@pytest.fixture(autouse=True)
def endpoint() -> str:
    return local.require_endpoint()


def _left(uri: str) -> int:
    """Entries still on the source key ``PENDING``."""
    async def count() -> int:
        async with open_store(uri) as store:
            return await store.count("orders", "PENDING")

    return asyncio.run(count())


def _load(uri: str, seconds: float) -> tuple[float, float]:
    """Write units the mover put on ``PENDING`` over about ``seconds`` (moves seen between
    two counts), and the longest span they can have landed in: from the start of the first
    count to the end of the second. The budget holds every one-second window of a key to
    the rate, so over that span the mover may spend at most the rate times its whole
    seconds, rounded up (a burst at a window's start is within it)."""
    began = time.monotonic()
    before = _left(uri)
    time.sleep(seconds)
    after = _left(uri)
    return (before - after) * COST, time.monotonic() - began


def _within(rate: float, load: tuple[float, float]) -> bool:
    """The load spent at most ``rate`` (+5%) in every one-second window of its span."""
    units, span = load
    return 0.0 < units <= rate * math.ceil(span) * 1.05


def test_pause_throttle_and_resume_from_another_process_steer_the_running_mover(
        capsys: pytest.CaptureFixture[str]) -> None:
    uri = local.table_store().uri
    fill(uri, 600, lease=0.5)
    where = ["--store", uri, "--index", "orders"]
    ok(capsys, "reshard", "start", *where, "--set", "PENDING=2", "--margin", "0.1")
    mover = subprocess.Popen(
        [sys.executable, "-m", "shardex", "reshard", "run", *where, "--unit-lease", "1",
         "--rate", "40", "--every", "0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "COLUMNS": "200"})
    try:
        deadline = time.monotonic() + 30
        while _left(uri) == 600:
            assert mover.poll() is None, "the mover stopped before it moved"
            assert time.monotonic() < deadline, "the mover never moved"
            time.sleep(0.2)
        time.sleep(0.5)
        moving = _load(uri, 2.0)
        assert _within(40.0, moving), moving  # a busy server may hold it lower

        out = ok(capsys, "reshard", "pause", *where)
        assert "paused" in out
        assert "resume with: shardex reshard resume" in out
        status = json.loads(ok(capsys, "reshard", "status", *where, "--json"))
        assert status["controls"]["paused"] is True
        # while paused, no runner moves, running or started: resume comes first
        assert status["next_steps"][0].startswith("shardex reshard resume --store")
        time.sleep(2.5)  # picked up within a few seconds
        assert _load(uri, 1.5)[0] == 0.0

        control = json.loads(ok(capsys, "reshard", "throttle", *where, "--rate", "16",
                                "--json"))
        assert control["schema"] == "shardex.migrate.control/1"
        assert control["rate"] == 16.0
        assert control["paused"] is True  # a new rate does not resume
        # who paused it stays named: it read "paused by shardex reshard throttle"; and it
        # names the operator, user@host, not the command alone
        operator = f"{getpass.getuser()}@{socket.gethostname()}"
        assert control["summary"] == f"paused by {operator} (shardex reshard pause); " \
            "resume to go on"
        assert (control["paused_by"], control["changed_by"]) == (
            f"{operator} (shardex reshard pause)", f"{operator} (shardex reshard throttle)")
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", control["changed_at"])
        ok(capsys, "reshard", "resume", *where)
        time.sleep(2.5)
        slower = _load(uri, 2.5)
        assert _within(16.0, slower), slower
        lines = ok(capsys, "reshard", "status", *where)
        assert "controls: moving at up to 16 write units a second" in lines
        assert " resume " not in lines
    finally:
        mover.kill()
        mover.wait()
        if mover.stdout is not None:
            mover.stdout.close()


def test_controls_are_refused_without_a_migration_and_on_memory(
        capsys: pytest.CaptureFixture[str]) -> None:
    uri = local.table_store().uri
    fill(uri, 3, lease=0.5)
    where = ["--store", uri, "--index", "orders"]
    assert "no reshard under way" in refused(capsys, "reshard", "pause", *where)
    assert "no adoption under way" in refused(capsys, "adopt", "resume", *where)
    assert "--rate" in refused(capsys, "reshard", "throttle", *where, "--rate", "0", code=2)
    assert "memory://" in refused(capsys, "reshard", "pause", "--store", "memory://",
                                  "--index", "orders", code=2)
