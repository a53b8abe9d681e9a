"""The autopilot on DynamoDB Local, its heat from the real Prometheus, two writers writing.

Two application processes (``tests.fleet_app writer``) write one index table; Prometheus
(scripts/prometheus: 1 s scrapes) scrapes them; ``shardex autopilot --source
prometheus://...`` reads their summed heat. A policy file makes the windows and
cooldowns short and takes a partition's ceiling as 4 write units a second, so the
writers' PENDING load is hot. In turn: a dry run proposes a grow and changes nothing;
the autopilot starts the grow and is SIGKILLed while the mover runs; a second one,
waiting all along, takes over once the lease expires, resumes the migration and
completes it with parity zero; the load ends and, after the cooldown, it shrinks PENDING
back to one shard key. The autopilots start paused (``autopilot pause``), so they are up
and reading heat while the dry run speaks, and act once resumed; ``autopilot log
--json`` holds all of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
import uuid
from contextlib import ExitStack
from pathlib import Path

import pytest

import shardex
from shardex.autopilot.records import AutopilotRecords, Lease
from shardex.cli import main
from shardex.clock import LoopClock
from shardex.web.promql import PromQL
from tests import dynamodb_local, prometheus_server
from tests.servers import shardex_error
from tests.test_fleet_heat import Child as FleetChild
from tests.test_fleet_heat import address

pytestmark = [pytest.mark.dynamodb, pytest.mark.prometheus]

WRITE_RATE, WRITE_SECONDS = 20, 24  # operations a second per writer, for so long
POLICY = """
tick = 1
t_up = 3
t_down = 5
trend = 3
lead = 3
min_interval = 3
retain = 1
max_shards = 8
[values.SHIPPED]
max_shards = 1
[values.DELIVERED]
max_shards = 1
"""


STARTED = [time.monotonic()]


class Child(FleetChild):
    """A process of the test's; what it printed is kept for a failure's message."""

    def __init__(self, *args: str) -> None:
        super().__init__(*args)
        self.printed: list[str] = []
        self.matched: set[str] = set()

    def has(self, containing: str) -> bool:
        """Whether a line with ``containing`` came (reading what is there, not waiting)."""
        with contextlib.suppress(AssertionError):
            self.line(containing=containing, timeout=0.01)
            return True
        return False

    def line(self, *, err: bool = False, containing: str = "", timeout: float = 60.0) -> str:
        """The first line with ``containing`` not matched before: among the lines read
        while others were looked for (``has`` reads through them), then the new ones."""
        for earlier in self.printed:
            earlier = earlier.rstrip("\n")
            if containing in earlier and earlier not in self.matched:
                self.matched.add(earlier)
                return earlier
        deadline = time.monotonic() + timeout
        while True:
            try:
                found = super().line(err=err, timeout=max(0.01, deadline - time.monotonic()))
            except AssertionError:
                raise AssertionError(f"no line with {containing!r} in {timeout:g} s; it "
                                     "printed:\n" + "".join(self.printed[-40:])
                                     + "stderr: " + "".join(self.err_text)) from None
            self.printed.append(found + "\n")
            if containing in found and found not in self.matched:
                self.matched.add(found)
                print(f"{time.monotonic() - STARTED[0]:6.1f} s: {found[:150]}")
                return found


def routing_of(uri: str, name: str) -> shardex.Routing:
    async def read() -> shardex.Routing:
        async with shardex.ShardedIndex(uri, name) as index:
            return await index.refresh_routing()

    return asyncio.run(read())


def lease_of(uri: str, name: str) -> Lease:
    """The autopilot's leader lease of index ``name`` as stored now."""
    async def read() -> Lease:
        store = shardex.open_store(uri)
        await store.open()
        try:
            return (await AutopilotRecords(store, name, clock=LoopClock()).lease())[0]
        finally:
            await store.close()

    return asyncio.run(read())


def seeded(uri: str, name: str, entries: int) -> None:
    """The routing record (a 1 s lease: the migration's steps are short) and PENDING
    entries to move."""
    async def put() -> None:
        async with shardex.ShardedIndex(uri, name, routing=shardex.Routing(),
                                        routing_lease=1.0) as index:
            await asyncio.gather(*(index.put("PENDING", f"seed-{i:03d}", sort=f"{i:03d}")
                                   for i in range(entries)))

    asyncio.run(put())


def test_the_autopilot_grows_resumes_after_sigkill_and_shrinks_on_dynamodb_local(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url, folder = prometheus_server.require()
    endpoint = dynamodb_local.require_endpoint()
    table = dynamodb_local.create_index_table()
    uri = f"dynamodb://{table}?region={dynamodb_local.REGION}&endpoint_url={endpoint}"
    name = f"orders_{uuid.uuid4().hex[:8]}"
    where = ["--store", uri, "--index", name]
    seeded(uri, name, 30)
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    fleet = prometheus_server.unique_fleet()
    source = (f"prometheus://{address(url)}?window=3s&match="
              + f'fleet="{fleet}"'.replace('"', "%22").replace("=", "%3D"))
    pilot = ["-m", "shardex", "autopilot", *where, "--source", source, "--policy",
             str(policy), "--ceiling", "4", "--margin", "0.5", "--lease", "6",
             "--rate", "1000", "--workers", "2", "--unit-lease", "1"]
    api = PromQL(url)
    wait_for = prometheus_server.wait_for
    # paused from the start: the autopilots start (and read heat) while nothing may act
    main(["autopilot", "pause", *where, "--reason", "until the dry run has spoken"])
    with prometheus_server.scraped(folder, fleet) as targets, ExitStack() as stack:
        # every process starts at once: each takes seconds to import its drivers
        writers = [Child("-m", "tests.fleet_app", "writer", uri, name, f"w{i}",
                         str(WRITE_RATE), str(WRITE_SECONDS)) for i in range(2)]
        dry, pilots = Child(*pilot, "--dry-run"), [Child(*pilot), Child(*pilot)]
        for child in (*writers, dry, *pilots):
            stack.callback(child.close)
        for child in writers:
            targets.add(address(child.json()["metrics"]))
        wait_for("the first scrapes", lambda: prometheus_server.targets_up(
            api, fleet, targets.addresses) or None)
        for child in writers:
            child.send("go\n")
        began = STARTED[0] = time.monotonic()

        # a dry run proposes the grow, records it, and changes nothing; the paused leader
        # acts on nothing either
        wait_for("a leader to see the pause", lambda: next(
            (p for p in pilots if p.has("control pause ok")), None), timeout=60)
        proposed = dry.line(containing="decision grow proposed PENDING", timeout=60)
        assert "N=1->" in proposed
        dry.proc.send_signal(signal.SIGTERM)
        # SIGTERM stops it in order and says so, with the exit the README gives (it
        # exited 0 without a word)
        assert dry.proc.wait(timeout=10) == 128 + signal.SIGTERM
        assert "safe to stop: its dry run changed nothing" in dry.line(
            err=True, containing="interrupted: the autopilot of index", timeout=10)
        assert routing_of(uri, name).version == 1

        # resumed, the leader grows PENDING; SIGKILLed while the mover runs (the leader
        # is whichever holds the lease now: on a busy machine it may have changed hands)
        main(["autopilot", "resume", *where])
        first = wait_for("the leader to start the grow", lambda: next(
            (p for p in pilots if p.has("action start ok")), None), timeout=30)
        second = pilots[1] if first is pilots[0] else pilots[0]
        wait_for("the migration to reach write-new", lambda: True if routing_of(
            uri, name).state == "write-new" else None, timeout=20, every=0.2)
        first.proc.kill()
        first.proc.wait(timeout=10)
        held = lease_of(uri, name)

        # the other one, waiting all along, takes over once the lease runs out, resumes
        # the migration and completes it
        second.line(containing="leader lead ok", timeout=60)
        taken = lease_of(uri, name)
        if taken.term > held.term:  # (on a busy machine it may have taken it before)
            assert taken.since >= held.expires  # the lease (6 s) ran out first
        # resuming moves what the first left: on a machine loaded by other jobs that took
        # more than 30 s (the waits here only bound a failure; they cost nothing otherwise)
        verified = second.line(containing="action verify ok", timeout=90)
        assert "parity: 0 gap(s)" in verified
        second.line(containing="action complete ok", timeout=60)
        grown = routing_of(uri, name)
        assert grown.state == "stable"
        assert grown.policy("PENDING").shards > 1

        # the load ends; after the cooldown a shrink takes PENDING back to one key
        for child in writers:
            child.json(timeout=WRITE_SECONDS + 30)
        second.line(containing="decision shrink started PENDING", timeout=60)
        # the shrink moves every entry back (559 in one run): on a loaded machine it took
        # more than 30 s from its start to verified
        assert "parity: 0 gap(s)" in second.line(containing="action verify ok", timeout=90)
        second.line(containing="action end ok", timeout=60)
        assert routing_of(uri, name).policy("PENDING").shards == 1
        second.proc.send_signal(signal.SIGTERM)
        assert second.proc.wait(timeout=10) == 128 + signal.SIGTERM
        took = time.monotonic() - began
    capsys.readouterr()
    main(["autopilot", "log", *where, "--json", "--limit", "1000"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "shardex.autopilot.log/1"
    assert doc["leader"] is None  # a clean stop gives the lease up
    assert lease_of(uri, name).expires == 0
    assert doc["paused"] is False
    entries = doc["entries"]
    starts = [e for e in entries if e["action"] == "start" and e["outcome"] == "ok"]
    assert len(starts) == 2  # the grow (resumed, not started again) and the shrink
    assert starts[0]["worker"] != starts[1]["worker"]
    assert [e["action"] for e in entries if e["kind"] == "control"][:2] == ["pause", "resume"]
    assert [e["action"] for e in entries if e["kind"] == "decision"
            and e["action"] in ("grow", "shrink") and not e["dry_run"]] == ["grow", "shrink"]
    verifies = [e for e in entries if e["action"] == "verify" and e["outcome"] == "ok"]
    assert all(v["details"]["parity"][k] == 0 for v in verifies
               for k in ("missing", "extra", "misplaced", "mismatched"))
    assert [e["outcome"] for e in entries if e["dry_run"] and e["action"] == "grow"] == [
        "proposed"]
    print(f"autopilot on DynamoDB Local: {took:.1f} s from the load's start")


def test_pause_of_a_mistyped_index_writes_nothing_and_a_lapsed_leader_is_no_leader(
        capsys: pytest.CaptureFixture[str]) -> None:
    """'autopilot pause --index typo' on a fresh table claimed the table for 'typo' (the
    index that should have been there could not open on it); 'log --json' named a leader
    whose lease had lapsed (a clean stop gives it up) while the text said 'no leader'."""
    endpoint = dynamodb_local.require_endpoint()
    table = dynamodb_local.create_index_table()
    uri = f"dynamodb://{table}?region={dynamodb_local.REGION}&endpoint_url={endpoint}"
    err = shardex_error(capsys, "autopilot", "pause", "--store", uri, "--index", "typo", code=2)
    assert err.startswith("error: Invalid value for '--index': no index 'typo' in "), err
    assert "nothing was written" in err
    # log read it as an autopilot with no leader, exit 0
    err = shardex_error(capsys, "autopilot", "log", "--store", uri, "--index", "typo", code=2)
    assert err.startswith("error: Invalid value for '--index': no index 'typo' in "), err
    # run took the leader lease of 'typo' (its dry run wrote a log record), exit 0, and
    # the table was 'typo''s
    for dry in ([], ["--dry-run"]):
        err = shardex_error(capsys, "autopilot", "run", "--store", uri, "--index", "typo",
                            "--source", "meter", "--duration", "2", *dry, code=2)
        assert err.startswith("error: Invalid value for '--index': no index 'typo' in "), err
        assert "nothing was written" in err
    name = f"orders_{uuid.uuid4().hex[:8]}"
    seeded(uri, name, 1)  # the table is free: the right index opens on it

    async def held_then_released() -> None:
        records = AutopilotRecords(shardex.open_store(uri), name, clock=LoopClock())
        async with records.store:
            assert (await records.hold("w-1", 60.0))[0]
            await records.release("w-1")

    asyncio.run(held_then_released())
    assert lease_of(uri, name).owner == "w-1"  # the record keeps the last owner
    main(["autopilot", "log", "--store", uri, "--index", name, "--json"])
    assert json.loads(capsys.readouterr().out)["leader"] is None
    main(["autopilot", "log", "--store", uri, "--index", name])
    assert "no leader" in capsys.readouterr().out
