"""Adopting a plain, hot GSI on DynamoDB Local: the whole way with a live writer, the CLI
with a backfill worker killed by SIGKILL, rollback from each state, and bad input.

These run on real time (a real server): leases and margins are a fraction of a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shardex import ShardedIndex, ShardPolicy
from shardex.adopt import Adopter
from shardex.cli import main
from shardex.errors import ReshardRefused
from shardex.migrate.registry import migrations
from tests import dynamodb_local as local
from tests.adopt_app import (
    NAME,
    Writer,
    app_client,
    check_listings,
    gsis,
    orders_table,
    store_uri,
)

pytestmark = pytest.mark.dynamodb
ROOT = Path(__file__).resolve().parent.parent
FAST: dict[str, Any] = {"routing_lease": 1.0, "unit_lease": 1.0, "settle": 0.2}


@pytest.fixture(autouse=True)
def endpoint() -> str:
    return local.require_endpoint()


def test_adopting_with_a_live_writer_keeps_every_listing_complete() -> None:
    table, truth = orders_table(600)
    uri = store_uri(table)

    async def scenario() -> None:
        async with Adopter(uri, NAME, source="status-index", attribute="status", segments=4,
                           workers=2, rate=400, **FAST) as adopter:
            client = await app_client(table)
            writer = Writer(table, truth, client)
            writer.start()  # the application, before its change: status alone
            plan = await adopter.start({"PENDING": ShardPolicy(16), "SHIPPED": ShardPolicy(4)},
                                       margin=0.2)
            assert plan.created
            assert plan.stored
            assert "status-shard-index" in gsis(table)
            async with ShardedIndex(uri, NAME, routing_ttl=0.1) as index:
                try:
                    async with writer.quiet():
                        await check_listings(index, truth)  # from the old GSI
                        writer.adopt(index)  # the one-line change is deployed
                    assert (await adopter.run()).finished
                    async with writer.quiet():
                        await check_listings(index, truth)
                        report = await adopter.verify()
                    assert report.clean, report
                    assert report.entries == len(truth)
                    await adopter.cutover()
                    async with writer.quiet():
                        await check_listings(index, truth)  # from the new GSI
                    done = await adopter.complete(drop=True)
                    assert done.adoption is not None
                    assert done.adoption.dropped
                    (listed,) = await migrations(adopter.store, [NAME])
                    assert (listed.state, listed.ended_at is not None) == ("complete", True)
                    assert "status-index" not in gsis(table)
                    async with writer.quiet():
                        await check_listings(index, truth)
                finally:
                    try:
                        await writer.stop()  # raises what the writer met
                    finally:
                        await client.close()
                assert writer.writes > 50
                key = index.key_attributes("PENDING", "o-000001")
                assert set(key) == {"status_shard"}
                assert key["status_shard"].startswith("PENDING#")

    asyncio.run(scenario())


def cli(capsys: pytest.CaptureFixture[str], *args: str, code: int = 0) -> str:
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    captured = capsys.readouterr()
    assert exited.value.code == code, captured.out + captured.err
    if code:
        assert captured.err.startswith("error: "), captured.err
        assert captured.err.count("\n") == 1, captured.err
        return captured.err
    return captured.out


def ok(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    with contextlib.suppress(SystemExit):
        main(list(args))
    captured = capsys.readouterr()
    assert "error:" not in captured.err, captured.err
    return captured.out


async def listing(uri: str, truth: dict[str, str]) -> None:
    async with ShardedIndex(uri, NAME) as index:
        await check_listings(index, truth)


def test_the_cli_from_start_to_end_with_a_worker_killed_by_sigkill(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    table, truth = orders_table(400)
    uri = store_uri(table)
    where = ("--store", uri, "--index", NAME)
    out = ok(capsys, "adopt", "start", *where, "--from-gsi", "status-index", "--from-attribute",
             "status", "--set", "PENDING=16", "--set", "SHIPPED=4", "--margin", "0.2",
             "--lease", "1", "--dry-run")
    assert "dry run" in out
    plan = tmp_path / "plan.json"  # a plan document (shardex plan --json) names the policies
    plan.write_text(json.dumps({"routing": {"default": {"shards": 1}, "overrides": {
        "PENDING": {"shards": 16}, "SHIPPED": {"shards": 2}}}}))
    planned = json.loads(ok(capsys, "adopt", "start", *where, "--from-gsi", "status-index",
                            "--from-attribute", "status", "--file", str(plan), "--set",
                            "SHIPPED=4", "--dry-run", "--json"))
    assert {v: p["shards"] for v, p in planned["values"].items()} == {"PENDING": 16,
                                                                     "SHIPPED": 4}
    assert "status-shard-index" not in gsis(table)
    ok(capsys, "adopt", "start", *where, "--from-gsi", "status-index", "--from-attribute",
       "status", "--set", "PENDING=16", "--set", "SHIPPED=4", "--margin", "0.2", "--lease", "1")
    assert gsis(table)["status-shard-index"] == ["status_shard", "created_at"]
    assert "next step possible from 20" in ok(capsys, "adopt", "status", *where)
    # reshard status said 'no reshard under way (routing version 3, stable)' and no step
    said = ok(capsys, "reshard", "status", *where)
    assert re.search(r"no reshard under way; adoption \w+ is \(dual-write, routing version "
                     r"\d+\): a reshard may start once it ends", said), said
    assert f"next: shardex adopt status --store {shlex.quote(uri)}" in said, said
    doc = json.loads(ok(capsys, "reshard", "status", *where, "--json"))
    assert (doc["reshard_id"], doc["adoption"]["stage"]) == (None, "dual-write")
    assert doc["next_steps"][0].startswith("shardex adopt status ")
    asyncio.run(listing(uri, truth))
    err = cli(capsys, "adopt", "cutover", *where, code=1)
    assert "backfill has not finished" in err
    # the controls name an adoption (they said "adopt a1 paused")
    assert re.match(rf"index '{NAME}': adoption \w+ paused: ",
                    ok(capsys, "adopt", "pause", *where)), "pause"
    assert re.match(rf"index '{NAME}': adoption \w+ resumed: ",
                    ok(capsys, "adopt", "resume", *where)), "resume"
    env = {**os.environ, "COVERAGE_PROCESS_START": ""}
    command = [sys.executable, "-m", "shardex", "adopt", "run", *where, "--segments", "4",
               "--unit-lease", "1", "--rate", "60", "--every", "0"]
    first = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        assert first.stdout is not None
        for line in first.stdout:
            if line.startswith("backfill: scanned") and "scanned 0," not in line:
                break
        first.send_signal(signal.SIGKILL)
    finally:
        first.wait(timeout=30)
        if first.stdout is not None:
            first.stdout.close()
    assert first.returncode == -signal.SIGKILL
    doc = json.loads(ok(capsys, "adopt", "status", *where, "--json"))
    assert doc["schema"] == "shardex.adopt.status/1"
    assert doc["state"] == "dual-write"
    assert 0 < doc["progress"]["items_scanned"] < len(truth)
    first_total = doc["progress"]["items_total"]
    assert first_total is not None
    second = subprocess.run([*command[:-4], "--unit-lease", "1", "--rate", "2000"], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "backfill done" in second.stdout
    doc = json.loads(ok(capsys, "adopt", "status", *where, "--json"))
    assert doc["progress"]["segments_done"] == 4
    assert doc["progress"]["items_scanned"] >= len(truth)
    assert doc["progress"]["items_total"] == first_total  # fixed when the backfill was planned
    assert doc["runners"] == []
    assert doc["next_steps"][0].startswith("shardex adopt verify")
    err = cli(capsys, "adopt", "cutover", *where, code=1)
    assert "no parity report" in err
    verified = json.loads(ok(capsys, "adopt", "verify", *where, "--settle", "0.2", "--json"))
    assert verified["schema"] == "shardex.adopt.verify/1"
    assert verified["clean"]
    assert verified["entries"] == len(truth)
    ok(capsys, "adopt", "cutover", *where)
    asyncio.run(listing(uri, truth))
    # a verify in read-new named cutover, which is refused there
    again = " ".join(ok(capsys, "adopt", "verify", *where, "--settle", "0.2").split())
    assert "no gaps; next: shardex adopt complete --store" in again, again
    out = ok(capsys, "adopt", "complete", *where, "--drop-old-index")
    assert "next: shardex reshard start" in out
    assert "status-index" not in gsis(table)
    doc = json.loads(ok(capsys, "adopt", "status", *where, "--json"))
    assert doc["state"] == "complete"
    assert doc["dropped"]
    assert doc["next_steps"] == []
    asyncio.run(listing(uri, truth))
    err = cli(capsys, "adopt", "rollback", *where, code=1)
    assert "complete" in err

def test_an_application_opening_the_index_during_start_does_not_refuse_it() -> None:
    """An application's first open stores the index's first routing record; a start
    whose compare-and-set met it was refused ('nothing was started') after it had created
    the new GSI and the metadata table. It reads the record again and starts."""
    table, _ = orders_table(50)
    uri = store_uri(table)

    async def scenario() -> None:
        async with Adopter(uri, NAME, source="status-index", attribute="status", segments=2,
                           **FAST) as adopter:
            original = adopter.store_next
            raced: list[bool] = []

            async def store_next(routing: Any) -> bool:
                if not raced:
                    raced.append(True)
                    async with ShardedIndex(uri, NAME):  # the application, opening
                        pass
                return await original(routing)

            adopter.store_next = store_next  # type: ignore[method-assign]
            await adopter.start({"PENDING": ShardPolicy(4)}, margin=0.1)
            assert raced
            adoption = (await adopter.routing()).adoption
            assert adoption is not None
            assert adoption.stage == "dual-write"

    asyncio.run(scenario())


def test_a_run_a_rollback_cuts_short_says_so_not_that_the_backfill_is_done() -> None:
    """'adopt run' stopped by another process's rollback printed 'backfill done: 17 items
    scanned', exit 0, and named verify, which the rolled-back adoption refuses."""
    table, _ = orders_table(300)
    uri = store_uri(table)

    async def scenario() -> None:
        async with Adopter(uri, NAME, source="status-index", attribute="status", segments=2,
                           rate=20.0, **FAST) as runner, \
                Adopter(uri, NAME, source="status-index", attribute="status",
                        **FAST) as operator:
            await runner.start({"PENDING": ShardPolicy(8)}, margin=0.1)
            running = asyncio.ensure_future(runner.run())
            for _ in range(300):  # until it has scanned some (a minute at most)
                adoption = (await operator.routing()).adoption
                if (await operator.backfilled(adoption)).scanned >= 10:
                    break
                await asyncio.sleep(0.2)
            await operator.rollback()
            with pytest.raises(ReshardRefused, match=r"the adoption \w+ was rolled back "
                               r"while this run backfilled \([\d,]+ items scanned\): it "
                               r"stopped"):
                await running

    asyncio.run(scenario())



@pytest.mark.parametrize("where", ["dual-write", "backfilled", "verified", "read-new",
                                   "retained"])
def test_rollback_from_each_state_leaves_reads_complete(where: str) -> None:
    table, truth = orders_table(300)
    uri = store_uri(table)

    async def scenario() -> None:
        async with Adopter(uri, NAME, source="status-index", attribute="status", segments=2,
                           **FAST) as adopter:
            await adopter.start({"PENDING": ShardPolicy(8)}, margin=0.1)
            if where != "dual-write":
                await adopter.run()
            if where in ("verified", "read-new", "retained"):
                assert (await adopter.verify()).clean
            if where in ("read-new", "retained"):
                await adopter.cutover()
            if where == "retained":
                kept = await adopter.complete(retain=3600)
                assert kept.adoption is not None
                assert kept.adoption.state == "read-new"
            # an item moved behind the new GSI's back: only the old GSI is right after
            local.sync_client().update_item(
                TableName=table, Key={"order_id": {"S": "o-000000"}},
                UpdateExpression="SET #s = :s", ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={":s": {"S": "DELIVERED"}})
            truth["o-000000"] = "DELIVERED"
            back = await adopter.rollback()
            assert back.adoption is not None
            assert back.adoption.stage == "rolled-back"
            await listing(uri, truth)
            # listed with its end (ended_at was null), and as rolled back once another
            # adoption began (it read 'ended', a state no doc names)
            (listed,) = await migrations(adopter.store, [NAME])
            assert (listed.kind, listed.state) == ("adoption", "rolled-back")
            assert listed.ended_at is not None
            with pytest.raises(ReshardRefused, match="already rolled back"):
                await adopter.rollback()
            with pytest.raises(ReshardRefused):
                await adopter.cutover()
            if where == "dual-write":
                await adopter.start({"PENDING": ShardPolicy(4)}, margin=0.1)
                first, again = await migrations(adopter.store, [NAME])
                assert (first.state, again.state) == ("rolled-back", "dual-write")
        assert "status-index" in gsis(table)

    asyncio.run(scenario())


@pytest.mark.parametrize("held", ["from the first Scan", "from the wait"])
def test_a_backfill_says_when_the_store_does_not_answer(monkeypatch: pytest.MonkeyPatch,
                                                        held: str) -> None:
    """The store takes every request and answers none, from the backfill's first Scan on
    (or from when the run says it waits for the clients): the run says so, from the
    store's meter, more and more rarely. Its probe read the work records once no page
    had landed, from the backfill's start: a store silent before (the plan, the records,
    the budget) was said by no one."""
    import shardex.migrate.adopter as adopter_module
    from shardex.stores.dynamodb.client import DynamoDBClient

    monkeypatch.setattr(adopter_module, "_QUIET", 0.2)  # 2 s in use; real time here
    table, _ = orders_table(60)
    said: list[str] = []

    class Holding(DynamoDBClient):
        def __init__(self, client: DynamoDBClient) -> None:
            self.client, self.endpoint = client, client.endpoint
            self.holding, self.held = False, asyncio.Event()

        async def call(self, operation: str, **params: Any) -> dict[str, Any]:
            self.holding = self.holding or (operation == "Scan" and "Scan" in held)
            if self.holding:
                self.held.set()
                await asyncio.Event().wait()  # accepted, never answered
            return await self.client.call(operation, **params)

    holding: Any = None  # the store's client, held, once the run has begun

    def progress(line: str) -> None:
        said.append(line)
        if line.startswith("waiting") and "wait" in held:
            holding.holding = True

    async def scenario() -> None:
        nonlocal holding
        async with Adopter(store_uri(table), NAME, source="status-index", attribute="status",
                           segments=1, progress=progress, **FAST) as adopter:
            await adopter.start({"PENDING": ShardPolicy(4)}, margin=0.1)
            store: Any = adopter.store
            holding = store._client = Holding(store._client)
            running = asyncio.ensure_future(adopter.run())
            try:
                await asyncio.wait_for(holding.held.wait(), 10.0)
                heard = len(said)
                await asyncio.sleep(1.8)  # notes after 0.2, 0.4, 0.8 and 1.6 s
            finally:
                holding.holding = False  # what is out stays out
                running.cancel()  # Ctrl-C
                await asyncio.wait({running}, timeout=30.0)
                store._client = holding.client
        notes = [note for note in said[heard:] if "no answer" in note]
        assert len(notes) in (3, 4), said  # the fourth at 1.6 s: a busy machine may lag
        assert all(re.fullmatch(r"backfill: no answer from the store for \d s", note)
                   for note in notes), notes

    asyncio.run(scenario())


def test_a_runner_waiting_for_its_clients_is_listed_and_not_run_again() -> None:
    """`adopt run` waits for every client to write the shard attribute before its
    backfill: meanwhile status listed no runner and suggested `shardex adopt run` (as a
    reshard's did, by hand on Azurite). The waiting runner is listed with what it waits
    for, and once it is stopped (Ctrl-C) it is not."""
    from shardex.commands.adopt import _status
    from shardex.migrate.budget import Sharing

    table, _ = orders_table(20)
    uri = store_uri(table)
    async def scenario() -> None:
        waiting = asyncio.Event()

        def progress(line: str) -> None:
            if line.startswith("waiting"):
                waiting.set()

        async with Adopter(uri, NAME, source="status-index", attribute="status",
                           segments=1, worker="w1", progress=progress,
                           sharing=Sharing(poll=0.2), **FAST) as adopter:
            await adopter.start({"PENDING": ShardPolicy(4)}, margin=3.0)
            running = asyncio.ensure_future(adopter.run())
            try:
                await asyncio.wait_for(waiting.wait(), 10.0)
                await asyncio.sleep(0.5)
                doc = await _status(uri, NAME, 900.0)
            finally:
                running.cancel()  # Ctrl-C
                await asyncio.wait({running}, timeout=30.0)
            (runner,) = doc["runners"]
            assert (runner["owner"], runner["units"]) == ("w1", [])
            assert runner["waiting"].startswith("waiting until 20"), runner
            assert "every client to write the shard attribute" in runner["waiting"]
            assert not any(" run " in step for step in doc["next_steps"]), doc["next_steps"]
            assert doc["controls"]["rate"] == 250.0
            after = await _status(uri, NAME, 900.0)
            assert after["runners"] == []
            assert after["next_steps"][0].startswith("shardex adopt run ")

    asyncio.run(scenario())


def test_bad_input_is_one_line_and_changes_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    table, _ = orders_table(10)
    client = local.sync_client()
    client.update_table(
        TableName=table,
        AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"}
                              for a in ("order_id", "status", "created_at", "customer")],
        GlobalSecondaryIndexUpdates=[{"Create": {
            "IndexName": "customer-index", "Projection": {"ProjectionType": "ALL"},
            "KeySchema": [{"AttributeName": "customer", "KeyType": "HASH"}]}}])
    before = gsis(table)
    start = ("adopt", "start", "--index", NAME, "--from-attribute", "status", "--set",
             "PENDING=16", "--margin", "0.1")
    err = cli(capsys, *start, "--store", store_uri(table), "--from-gsi", "nope-index", code=1)
    assert "no global secondary index 'nope-index'" in err
    err = cli(capsys, *start, "--store", store_uri(table), "--from-gsi", "customer-index",
              code=2)
    assert "not by --from-attribute 'status'" in err
    err = cli(capsys, *start, "--store", store_uri(table, "customer-index"), "--from-gsi",
              "status-index", code=2)
    assert "exists with the key customer" in err
    err = cli(capsys, *start, "--store", store_uri(table) + "&sort_owner=shardex", "--from-gsi",
              "status-index", code=2)
    assert "sort_owner=application" in err
    err = cli(capsys, "adopt", "cutover", "--store", store_uri(table, "customer-index"),
              "--index", NAME, code=1)
    assert gsis(table) == before
    tables = local.table_names()
    assert f"{table}-shardex" not in tables
    err = cli(capsys, "adopt", "status", "--store", "memory://", "--index", NAME, code=2)
    assert "GSI mode" in err


def test_a_missing_new_gsi_is_waited_for_with_progress() -> None:
    table, truth = orders_table(50)
    lines: list[str] = []

    async def scenario() -> None:
        async with Adopter(store_uri(table), NAME, source="status-index", attribute="status",
                           progress=lines.append, **FAST) as adopter:
            plan = await adopter.start({}, margin=0, dry_run=True)
            assert not plan.stored
            assert not plan.exists
            assert plan.items == 50
            assert "status-shard-index" not in gsis(table)
            await adopter.start({}, margin=0)
            status = await adopter.status()
            assert status["state"] == "dual-write"
            assert status["reads"] == "source"
            assert status["next_steps"][0].startswith("shardex adopt run")
        await listing(store_uri(table), truth)

    asyncio.run(scenario())
    assert any("creating the GSI 'status-shard-index'" in line for line in lines)


def _old_segment(number: int, *, done: bool, scanned: int) -> dict[str, Any]:
    """A segment record as adoptions stored them before there was one kind of work record."""
    return {"number": number, "total": 2, "start": None, "done": done, "scanned": scanned,
            "updated": scanned, "raced": 0, "unresolved": 0,
            "values": {"PENDING": scanned} if scanned else {},
            "started_at": 1.0, "saved_at": 2.0 if done else None,
            "owner": None if done else "gone:1:abc", "expires": 5.0}


def test_an_adoption_with_work_records_in_the_old_shape_resumes_from_them() -> None:
    """``adopt/ID/plan`` and ``adopt/ID/segment/NNNN`` records (an adoption under way when
    shardex was upgraded) are what the backfill resumes: a segment done there is not
    scanned again, the one left is (its lease long expired), and no plan of the new shape
    is made beside them."""
    table, truth = orders_table(200)
    uri = store_uri(table)

    async def scenario() -> None:
        async with Adopter(uri, NAME, source="status-index", attribute="status", segments=4,
                           **FAST) as adopter:
            plan = await adopter.start({"PENDING": ShardPolicy(4)}, margin=0.1)
            assert plan.routing.adoption is not None
            old, store = f"adopt/{plan.routing.adoption.id}/", adopter.store
            await store.put_record(NAME, old + "plan", {
                "planned": True, "units": 2, "owner": None, "expires": 0.0, "total": 200},
                expected=None)
            for number, done in ((0, True), (1, False)):
                await store.put_record(NAME, f"{old}segment/{number:04d}",
                                       _old_segment(number, done=done, scanned=77 * done),
                                       expected=None)
            done = await adopter.run()
            assert (done.segments, done.done) == (2, 2)
            status = await adopter.status()
            assert await store.list_records(NAME, "reshard/") == {}

        client = local.sync_client()
        first = {item["order_id"]["S"] for item in client.scan(
            TableName=table, Segment=0, TotalSegments=2, ConsistentRead=True)["Items"]}
        shards = {item["order_id"]["S"]: "status_shard" in item
                  for item in client.scan(TableName=table, ConsistentRead=True)["Items"]}
        # segment 0 was done by its record: its items were left alone; segment 1's not
        assert not any(shards[i] for i in first)
        assert all(shards[i] for i in truth if i not in first)
        assert done.scanned == 77 + len(truth) - len(first)
        assert status["progress"]["segments"] == 2
        assert status["progress"]["items_total"] == 200
        assert status["values"]["PENDING"]["items"] >= 77

    asyncio.run(scenario())


def test_items_written_without_the_shard_attribute_after_the_scan_are_found_and_run_mends_them(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A host still without the change wrote items after the backfill: verify found them
    missing, but 'adopt run' scanned nothing again (its segments were done), so the
    'run, then verify again' the docs and cutover prescribe could never clear them; and
    verify exited 0 with gaps."""
    table, truth = orders_table(40)
    uri = store_uri(table)
    store = ["--store", uri, "--index", NAME]

    async def scenario() -> None:
        async with Adopter(uri, NAME, source="status-index", attribute="status", segments=2,
                           rate=400, **FAST) as adopter:
            await adopter.start({"PENDING": ShardPolicy(4)}, margin=0.2)
            first = await adopter.run()
            assert first.finished
            assert (await adopter.verify()).clean
            await unadopted_writes(table, truth, "PENDING", "o-late-1", "o-late-2")

    asyncio.run(scenario())
    err = cli(capsys, "adopt", "verify", *store, "--settle", "0.2", code=1)
    # the command comes last, unquoted around its own quoted URI
    assert "the parity check found gaps (2 missing); to mend them, run again, then verify " \
        "again: shardex adopt run --store" in err
    with pytest.raises(ReshardRefused, match="the backfill has not finished: run 'shardex "
                                             "adopt run'"):  # its next pass
        asyncio.run(_cutover(uri))
    # the next run scans again, in a pass of its own, and mends them
    out = ok(capsys, "adopt", "run", *store, "--rate", "400")
    # the items it left alone are counted: it read "42 items scanned, 2 updated, 0 changed
    # by the application first, 0 unresolved", 40 unsaid
    assert "backfill done: 42 items scanned, 2 updated, 40 needing nothing (the shard " \
        "attribute set, or no value to index), 0 changed by the application first, 0 " \
        "unresolved; next:" in out, out
    status = json.loads(ok(capsys, "adopt", "status", *store, "--json"))
    assert status["progress"]["items_scanned"] == len(truth), status  # this pass alone
    assert status["progress"]["items_updated"] == 2, status
    assert "no gaps" in ok(capsys, "adopt", "verify", *store, "--settle", "0.2")
    asyncio.run(listing(uri, truth))


async def unadopted_writes(table: str, truth: dict[str, str], status: str,
                           *order_ids: str) -> None:
    """Orders written by a host still without the change: ``status`` alone."""
    client = await app_client(table)
    try:
        writer = Writer(table, truth, client)
        for order_id in order_ids:
            await writer._write(order_id, status)
    finally:
        await client.close()


async def _cutover(uri: str) -> None:
    async with Adopter(uri, NAME, **FAST) as adopter:
        await adopter.cutover()


def test_status_before_start_names_the_missing_index_and_the_step_that_creates_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    """'adopt status' before 'adopt start' said only that the GSI was missing."""
    table, _ = orders_table(5)
    where = ["--store", store_uri(table), "--index", NAME]
    err = cli(capsys, "adopt", "status", *where, code=1)
    assert "has no global secondary index 'status-shard-index' (it has: status-index); to " \
        "adopt a plain index into it, 'shardex adopt start' creates it" in err, err


def test_a_verify_before_the_next_pass_ran_checks_every_value_and_clears_cutover() -> None:
    """After a verify with gaps began another pass, a second verify checked the values
    named by --set alone (that pass had seen none yet) and said 'no gaps'; cutover then
    took that report, made before the pass ran, while a host without the change had
    written an item since: it was missing from the new index's listings (a probe)."""
    table, truth = orders_table(30)
    uri = store_uri(table)

    async def scenario() -> None:
        async with Adopter(uri, NAME, source="status-index", attribute="status", segments=2,
                           rate=400, **FAST) as adopter:
            await adopter.start({"PENDING": ShardPolicy(3)}, margin=0.2)
            assert (await adopter.run()).finished
            await unadopted_writes(table, truth, "DELIVERED", "o-late-1")
            assert not (await adopter.verify()).clean  # 1 missing: another pass begins
            again = await adopter.verify()  # before that pass ran
            assert again.entries >= len(truth) - 1, again  # every value, not PENDING alone
            assert again.missing == 1, again
            assert (await adopter.run()).finished
            await unadopted_writes(table, truth, "DELIVERED", "o-late-2")
            # the clean report must come after the pass: none does yet
            with pytest.raises(ReshardRefused, match="no parity report yet"):
                await adopter.cutover()
            assert (await adopter.verify()).missing == 1  # o-late-2

    asyncio.run(scenario())


def test_a_clean_verify_before_the_backfill_ran_sends_the_operator_to_run(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A table with no item yet verifies clean before any run: the command named cutover
    as the next step, which then refused (the backfill had not run)."""
    table, _ = orders_table(0)
    store = ["--store", store_uri(table), "--index", NAME]
    ok(capsys, "adopt", "start", *store, "--from-gsi", "status-index", "--from-attribute",
       "status", "--set", "PENDING=2", "--lease", "1s", "--margin", "0.2s")
    out = " ".join(ok(capsys, "adopt", "verify", *store, "--settle", "0.2").split())
    assert "no gaps" in out, out
    assert "cutover does not take this report; next: shardex adopt run" in out, out


def test_a_shard_attribute_left_on_an_item_without_its_value_is_removed_by_run() -> None:
    """The application removed an item's status (not its status_shard) while writing
    both: verify reported it extra under its old value and said to run and verify again,
    but run passes over items with no raw value, so the gap stayed for good (a probe).
    The backfill removes the shard attribute it owns there, only if the value is still
    absent and the attribute still the one it scanned."""
    table, truth = orders_table(12)
    uri = store_uri(table)
    client = local.sync_client()

    async def scenario() -> None:
        async with Adopter(uri, NAME, source="status-index", attribute="status", segments=2,
                           rate=400, **FAST) as adopter:
            await adopter.start({"PENDING": ShardPolicy(2)}, margin=0.2)
            assert (await adopter.run()).finished
            gone = sorted(truth)[3]
            client.update_item(TableName=table, Key={"order_id": {"S": gone}},
                               UpdateExpression="REMOVE #s",
                               ExpressionAttributeNames={"#s": "status"})
            del truth[gone]
            report = await adopter.verify()
            assert report.extra == 1, report
            assert (await adopter.run()).finished  # the pass the gap began
            assert (await adopter.verify()).clean
            item = client.get_item(TableName=table, Key={"order_id": {"S": gone}},
                                   ConsistentRead=True)["Item"]
            assert "status_shard" not in item
            assert "status" not in item
            assert item["created_at"]  # the application's own attributes stay

    asyncio.run(scenario())


def test_a_raw_value_no_logical_key_can_be_is_named_and_does_not_block_verify(
        capsys: pytest.CaptureFixture[str]) -> None:
    """An item whose status holds the separator ('ON#HOLD') made every verify fail with
    exit 2 naming neither the item nor a remedy, so the adoption could never be cut over
    (a probe); shardex cannot index such a value in any state."""
    table, truth = orders_table(10)
    local.sync_client().put_item(TableName=table, Item={
        "order_id": {"S": "o-hold"}, "status": {"S": "ON#HOLD"},
        "created_at": {"S": "2026-11-30"}})
    store = ["--store", store_uri(table), "--index", NAME]
    ok(capsys, "adopt", "start", *store, "--from-gsi", "status-index", "--from-attribute",
       "status", "--set", "PENDING=2", "--lease", "1s", "--margin", "0.2s")
    ran = " ".join(ok(capsys, "adopt", "run", *store, "--rate", "400").split())
    # the run counted it 'unresolved' and named it nowhere, which no run would resolve,
    # and status listed 'ON#HOLD: 1 shard(s), hash' as a value of the layout
    assert "1 unresolved (1 of them this run: item 'o-hold', whose value 'ON#HOLD' " \
        "shardex cannot index: " in ran, ran
    shown = " ".join(ok(capsys, "adopt", "status", *store).split())
    assert "ON#HOLD: shardex cannot index it (logical key 'ON#HOLD' contains the " \
        "separator '#'" in shown, shown
    with contextlib.suppress(SystemExit):
        main(["adopt", "verify", *store, "--settle", "0.2"])
    captured = capsys.readouterr()
    said = " ".join((captured.out + captured.err).split())
    assert "error:" not in said, said
    assert "no gaps" in said, said
    assert "not verified: 'ON#HOLD' cannot be a logical key" in said, said
    assert "contains the separator '#'" in said, said
    ok(capsys, "adopt", "cutover", *store)
    asyncio.run(listing(store_uri(table), truth))


def test_an_item_moved_to_a_value_shardex_cannot_index_loses_its_shard_attribute() -> None:
    """The application moved an adopted item to 'ON#HOLD' (no logical key can be it):
    run counted it unresolved and kept its old status_shard, so every verify found it
    extra under its old value, cutover was refused for good, and readers of the new index
    listed it there. Run takes the stale attribute out (the raw value still the one it
    scanned); complete is refused while the last verify has gaps (it completed and
    dropped the old index)."""
    table, truth = orders_table(10)
    uri = store_uri(table)
    client = local.sync_client()

    async def scenario() -> None:
        async with Adopter(uri, NAME, source="status-index", attribute="status", segments=2,
                           rate=400, **FAST) as adopter:
            await adopter.start({"PENDING": ShardPolicy(2)}, margin=0.2)
            assert (await adopter.run()).finished

            def hold(item_id: str) -> None:
                client.update_item(TableName=table, Key={"order_id": {"S": item_id}},
                                   UpdateExpression="SET #s = :v",
                                   ExpressionAttributeNames={"#s": "status"},
                                   ExpressionAttributeValues={":v": {"S": "ON#HOLD"}})
                del truth[item_id]

            held = sorted(truth)[2]
            hold(held)
            assert (await adopter.verify()).extra == 1
            assert (await adopter.run()).finished
            assert (await adopter.verify()).clean
            item = client.get_item(TableName=table, Key={"order_id": {"S": held}},
                                   ConsistentRead=True)["Item"]
            assert "status_shard" not in item
            assert item["status"] == {"S": "ON#HOLD"}
            await adopter.cutover(max_age=900.0)
            hold(sorted(truth)[2])  # in read-new: no run mends it; complete waits
            assert (await adopter.verify()).extra == 1
            with pytest.raises(ReshardRefused, match=r"the last parity report has gaps "
                                                     r"\(1 extra\): complete is refused"):
                await adopter.complete(retain=0.0, drop=True)
            await adopter.rollback()
        await listing(uri, truth)

    asyncio.run(scenario())
