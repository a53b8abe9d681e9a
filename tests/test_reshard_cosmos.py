"""Reshards on the Cosmos DB server: live writes, a ``reshard run`` process SIGKILLed
mid-move, and the stateful reshard machine (small).

An entry and its item's placement live in different logical partitions, so a move is
several requests with one commit point, as on Azure Tables (``docs/cosmos.md``); the
mover's move is an ordinary write through that protocol. A ``shardex reshard run``
process is killed with SIGKILL while it holds a unit and moves entries, and another
finishes the work (after the dead one's unit leases run out), while this process keeps
writing and paging: every listing stays complete.
Real time (a real server): leases and margins are fractions of a second.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import signal
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

import shardex
from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.cli import main
from shardex.reshard import Resharder
from tests import cosmos_server
from tests.reshard_machine import machine
from tests.test_reshard import Model, assert_complete, expected, listing, live_write, populate

pytestmark = pytest.mark.cosmos
ROOT = Path(__file__).resolve().parent.parent
PROGRESS = re.compile(r"moved ([\d,]+), remaining ([\d,]+)")
# the live writer writes at most 50 times a second while the runners move: a busy loop
# took 11 s of the test's 13 s of CPU, the runners' work a small part of it
PACE = 0.02


@pytest.fixture(autouse=True)
def endpoint() -> str:
    return cosmos_server.require_endpoint()


async def _worker(uri: str, rate: int) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "shardex", "reshard", "run", "--store", uri, "--index", "orders",
        "--unit-lease", "1", "--rate", str(rate), "--every", "0", cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "COLUMNS": "200"})


async def _kill_once_it_moves(victim: asyncio.subprocess.Process) -> None:
    """SIGKILL ``victim`` once it reports entries moved and plenty still to move."""
    assert victim.stdout is not None
    async for raw in victim.stdout:
        moved = PROGRESS.search(raw.decode())
        if moved and int(moved[1].replace(",", "")) > 0 \
                and int(moved[2].replace(",", "")) > 20:
            victim.send_signal(signal.SIGKILL)
            await victim.wait()
            return
    raise AssertionError("the first worker never reported entries moved")


def test_a_runner_sigkilled_mid_move_under_live_writes_loses_nothing(
        capsys: pytest.CaptureFixture[str]) -> None:
    store = cosmos_server.container_store()
    uri = store.uri

    async def run() -> tuple[str, int | None]:
        rng = random.Random(5)
        model: Model = {}
        async with ShardedIndex(store, "orders",
                                Routing(overrides={"PENDING": ShardPolicy(2)}),
                                routing_lease=1.0, routing_ttl=0.1, seed=1) as writer, \
                ShardedIndex(store, "orders", routing_ttl=0.3, seed=2) as reader:
            await populate(writer, model, {"PENDING": 64, "SHIPPED": 8})
            async with Resharder(store, "orders", routing_ttl=0.1, seed=3) as rs:
                plan = await rs.start({"PENDING": ShardPolicy(8)}, margin=0.2)
                assert plan.to_move > 40
            # the victim, slow, is killed once it has moved some; the survivor finishes
            victim = await _worker(uri, 20)
            processes = [victim]
            killer = asyncio.ensure_future(_kill_once_it_moves(victim))
            finished: asyncio.Future[tuple[bytes, bytes]] | None = None
            n = checked = 0
            try:
                while finished is None or not finished.done():
                    if finished is None and killer.done():
                        await killer
                        processes.append(await _worker(uri, 100))
                        finished = asyncio.ensure_future(processes[-1].communicate())
                    n += 1
                    await live_write(writer, model, rng, n, 30, ["PENDING", "SHIPPED"])
                    await asyncio.sleep(PACE)  # an application's pace, not a busy loop
                    if n % 4 == 0:
                        value = "PENDING" if n % 8 else "SHIPPED"
                        assert await listing(reader, value, rng.randint(5, 40)) == \
                            expected(model, value)
                        checked += 1
            finally:
                for process in processes:
                    if process.returncode is None:
                        process.kill()
                        await process.wait()
            survivor = processes[-1]
            out = (await finished)[0].decode()
            assert victim.returncode == -signal.SIGKILL
            assert checked > 3
            await reader.refresh_routing()
            await assert_complete(reader, model, ["PENDING", "SHIPPED"])
            return out, survivor.returncode

    out, code = asyncio.run(run())
    assert code == 0, out
    assert "reshard stopped at verified" in out
    main(["reshard", "status", "--store", uri, "--index", "orders", "--json"])
    status = json.loads(capsys.readouterr().out)
    assert status["units"]["done"] == status["units"]["total"]
    assert status["values"]["PENDING"]["remaining"] == 0


def test_the_stateful_machine_on_cosmos() -> None:
    run_state_machine_as_test(
        machine(lambda seed: cosmos_server.container_store(), asyncio.new_event_loop,
                lease=1.0, margin=0.2, ttls=(0.1, 0.3, 0.6), unit_lease=1.0, crash_within=3.0),
        settings=settings(max_examples=2, stateful_step_count=8, deadline=None,
                          suppress_health_check=list(HealthCheck), database=None))


def test_a_layout_whose_shard_keys_do_not_fit_is_refused_before_it_starts() -> None:
    """A value of 1,019 bytes fits one or two shard keys of index 'orders' on Cosmos DB
    (a partition key holds 2,048 bytes, and each of its bytes takes two encoded), not
    sixteen ('#15'). Such a reshard was started, and from read-both on every read of the
    value failed, and so did its run and its rollback: the index was wedged (a probe on
    this server, with 1,021 bytes in index 'ix'). Now start refuses it, naming the
    limit, and the value reads as before."""
    value = "\x01" * 1019

    async def main() -> None:
        uri = cosmos_server.container_store().uri
        async with ShardedIndex(uri, "orders") as index:
            for i in range(5):
                assert await index.put(value, f"o-{i}")
            async with Resharder(uri, "orders", seed=1) as rs:
                with pytest.raises(shardex.InvalidKey, match=r"cannot have 16 shards.*2048"):
                    await rs.start({value: ShardPolicy(16)}, margin=0.1)
                assert (await rs.routing()).state == "stable"
                assert (await rs.start({value: ShardPolicy(2)}, dry_run=True)).to_move == 5
            await index.refresh_routing()
            assert len((await index.query(value, limit=10)).items) == 5

    asyncio.run(main())
