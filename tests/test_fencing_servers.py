"""Fencing on real servers: a writer process stopped with SIGSTOP between its routing check
and its request, for longer than a whole reshard, hides none of its writes (DynamoDB
Local in both modes, Azurite).

Real time (a real server): the routing's lease is a second, the margin a fraction.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.reshard import Resharder
from tests import azurite
from tests import dynamodb_local as local

ROOT = Path(__file__).resolve().parent.parent
WRITES = 8
STORES = [pytest.param(local.table_store, marks=pytest.mark.dynamodb, id="dynamodb-table"),
          pytest.param(local.gsi_store, marks=pytest.mark.dynamodb, id="dynamodb-gsi"),
          pytest.param(azurite.table_store, marks=pytest.mark.azure, id="azure-tables")]


async def _listed(uri: str) -> set[str]:
    async with ShardedIndex(uri, "orders") as index:
        return {e.item_id async for e in index.scan("PENDING")}


@pytest.mark.parametrize("make", STORES)
def test_a_writer_stopped_with_sigstop_across_a_whole_reshard_hides_nothing(make: Any) -> None:
    """Measured before fencing: 8 of 8 writes reported ok were never listed again."""
    uri = make().uri

    async def fill() -> None:
        async with ShardedIndex(uri, "orders", Routing(), routing_lease=1.0) as index:
            await asyncio.gather(*(index.put("PENDING", f"old-{i}", sort=f"old-{i}")
                                   for i in range(20)))

    asyncio.run(fill())
    writer = subprocess.Popen([sys.executable, "-m", "tests.paused_writer", uri, str(WRITES)],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=dict(os.environ))
    try:
        assert writer.stdout is not None
        first = writer.stdout.readline()
        assert "sending" in first, first + (writer.stderr.read() if writer.stderr else "")
        os.kill(writer.pid, signal.SIGSTOP)  # planned, not yet sent

        async def reshard() -> None:
            async with Resharder(uri, "orders", unit_lease=1.0, routing_ttl=0.2) as rs:
                await rs.start({"PENDING": ShardPolicy(4)}, margin=0.3)
                assert (await rs.run(until="done")).state == "done"

        asyncio.run(reshard())  # the whole reshard while the writer is stopped
        os.kill(writer.pid, signal.SIGCONT)
        out, err = writer.communicate(timeout=60)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    outcomes = [json.loads(line) for line in (first + out).splitlines()
                if line.startswith('{"item"')]
    assert len(outcomes) == WRITES, err
    acked = {o["item"] for o in outcomes if o["outcome"] == "ok"}
    listed = asyncio.run(_listed(uri))
    hidden = sorted(acked - listed)
    assert acked, outcomes  # the writes went through once the writer went on
    assert hidden == [], f"{len(hidden)} of {len(acked)} acknowledged writes hidden"
    assert {f"old-{i}" for i in range(20)} <= listed
