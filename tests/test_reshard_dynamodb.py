"""Reshards on DynamoDB Local: the stateful machine in both modes (smaller than on
memory://), the CLI from start to end with the steps it refuses, and two ``reshard run``
processes of which one is killed with SIGKILL while it moves entries.

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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.cli import main
from shardex.reshard import Resharder
from shardex.stores.dynamodb import DynamoDBStore
from tests import dynamodb_local as local
from tests.reshard_machine import machine
from tests.servers import shardex_error as failing

pytestmark = pytest.mark.dynamodb
ROOT = Path(__file__).resolve().parent.parent
TIMINGS: dict[str, Any] = {"lease": 1.0, "margin": 0.2, "ttls": (0.1, 0.3, 0.6),
                           "unit_lease": 1.0, "crash_within": 3.0, "settle": 0.2}


@pytest.fixture(autouse=True)
def endpoint() -> str:
    return local.require_endpoint()


@pytest.mark.parametrize("make", [local.table_store, local.gsi_store], ids=["table", "gsi"])
def test_the_stateful_machine_on_dynamodb_local(make: Any) -> None:
    run_state_machine_as_test(
        machine(lambda seed: make(), asyncio.new_event_loop, **TIMINGS),
        settings=settings(max_examples=2, stateful_step_count=10, deadline=None,
                          suppress_health_check=list(HealthCheck), database=None))


ONE = ShardPolicy()
# python -c FOREGROUND ARGS: shardex ARGS with Ctrl-C (SIGINT) at Python's default
FOREGROUND = ("import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
              "runpy.run_module('shardex', run_name='__main__', alter_sys=True)")


def fill(uri: str, entries: int, *, lease: float, pending: ShardPolicy = ONE) -> None:
    """Create the index's routing record (with a short lease) and ``entries`` PENDING entries.

    Fifty puts at a time: all 600 at once on one shard key took 6,943 requests and 12 s of
    CPU on an idle DynamoDB Local (1,501 and 3 s in fifties), many times more on a busy
    machine, where requests time out and their read-backs and retries pile up.
    """
    async def put() -> None:
        async with ShardedIndex(uri, "orders", Routing(overrides={"PENDING": pending}),
                                routing_lease=lease) as index:
            for start in range(0, entries, 50):
                await asyncio.gather(*(index.put("PENDING", f"o-{i:05d}", sort=f"{i:05d}")
                                       for i in range(start, min(entries, start + 50))))

    asyncio.run(put())


def ok(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    main(list(args))
    return capsys.readouterr().out


def test_a_run_refused_at_once_says_so_in_one_line_before_any_metrics_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The metrics page is announced once the reshard is open: a table that does not
    exist fails ``reshard run --metrics-port`` in one line, as without it."""
    uri = DynamoDBStore(local.unique_name("missing"), region=local.REGION,
                        endpoint_url=local.require_endpoint()).uri
    assert "does not exist" in failing(capsys, "reshard", "run", "--store", uri, "--index",
                                       "orders", "--metrics-port", "0")


def test_start_says_how_long_the_move_takes_with_run_s_one_worker(
        capsys: pytest.CaptureFixture[str]) -> None:
    """8 -> 2 shard keys: one worker (``run``'s default) drains one source key after
    another (the six the new layout drops); the estimate was all six at once: it says
    both (in whole seconds, 1 at least)."""
    uri = local.table_store().uri
    fill(uri, 200, lease=0.5, pending=ShardPolicy(8))
    out = ok(capsys, "reshard", "start", "--store", uri, "--index", "orders", "--set",
             "PENDING=2", "--dry-run")
    moving = re.search(r"about (\d+) s or more with one worker, run's default; "
                       r"(\d+) s with --workers 6\)", " ".join(out.split()))
    assert moving is not None, out
    assert int(moving[1]) > int(moving[2]) >= 1


def test_the_cli_from_start_to_end_and_the_steps_it_refuses(
        capsys: pytest.CaptureFixture[str]) -> None:
    uri = local.table_store().uri
    fill(uri, 60, lease=0.5)
    where = ["--store", uri, "--index", "orders"]

    def routing() -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(ok(capsys, "routing", "show", *where, "--json"))
        return doc["routing"]

    stable = routing()
    assert "strategy must be one of" in failing(capsys, "reshard", "start", *where, "--set",
                                                "PENDING=8:modulo", code=2)
    assert "between 1 and 4096" in failing(capsys, "reshard", "start", *where, "--set",
                                           "PENDING=5000", code=2)
    assert "no reshard under way" in failing(capsys, "reshard", "cutover", *where)
    out = ok(capsys, "reshard", "start", *where, "--set", "PENDING=8", "--margin", "0.1",
             "--dry-run")
    assert "PENDING: 1 shard(s), hash -> 8 shard(s), hash: 60 entries, 60 to move" in out
    assert "dry run: nothing was changed" in out
    assert routing() == stable
    out = ok(capsys, "reshard", "start", *where, "--set", "PENDING=8", "--margin", "0.1")
    assert "next: shardex reshard run" in out
    started = routing()
    assert started["state"] == "read-both"
    for args, words in [
        (["start", *where, "--set", "PENDING=16"], "is under way (state read-both"),
        (["cutover", *where], "not verified"),
        (["verify", *where], "nothing has moved yet"),
        (["complete", *where], "complete comes after"),
    ]:
        assert words in failing(capsys, "reshard", *args)
        assert routing() == started  # nothing changed
    out = ok(capsys, "reshard", "run", *where, "--unit-lease", "1")
    assert "reshard stopped at verified" in out
    assert "parity: 60 entries checked, no gaps" in out
    status = json.loads(ok(capsys, "reshard", "status", *where, "--json"))
    assert status["schema"] == "shardex.reshard.status/1"
    assert status["state"] == "verified"
    assert status["values"]["PENDING"] == {
        "from": {"shards": 1, "strategy": "hash"}, "to": {"shards": 8, "strategy": "hash"},
        "total": 60, "moved": 60, "remaining": 0, "entries": 60}
    assert (status["total"], status["moved"], status["remaining"]) == (60, 60, 0)
    assert status["runners"] == []
    assert status["parity"]["missing"] == status["parity"]["extra"] == 0
    assert status["next_steps"][0].startswith("shardex reshard cutover --store")
    verified = routing()
    assert "older than --max-age 0 s" in failing(capsys, "reshard", "cutover", *where,
                                                 "--max-age", "0")
    assert routing() == verified
    assert "readers read the new layout alone" in ok(capsys, "reshard", "cutover", *where)
    out = ok(capsys, "reshard", "complete", *where, "--retain", "0")
    # it said "reshard stopped at done: no reshard is under way: the routing is stable"
    done = routing()
    assert re.search(rf"^reshard r\w+ done: the new layout alone is in use \(routing version "
                     rf"{done['version']}, stable\)$", out, re.M), out
    assert done["previous"] is None  # stable: the document of a routing before states
    assert done["overrides"] == {"PENDING": {"shards": 8, "strategy": "hash"}}
    assert "no reshard is under way" in failing(capsys, "reshard", "rollback", *where)
    # another reshard, rolled back from read-new; and one refused once retired
    ok(capsys, "reshard", "start", *where, "--set", "PENDING=3:random", "--margin", "0.1")
    ok(capsys, "reshard", "run", *where, "--unit-lease", "1", "--until", "read-new")
    assert re.search(r"^reshard r\w+ done: rolled back: the layout it left is in use "
                     r"\(routing version \d+, stable\)$",
                     ok(capsys, "reshard", "rollback", *where), re.M)
    assert routing()["overrides"] == {"PENDING": {"shards": 8, "strategy": "hash"}}
    ok(capsys, "reshard", "start", *where, "--set", "PENDING=2", "--margin", "0.1")
    ok(capsys, "reshard", "run", *where, "--unit-lease", "1", "--until", "retired")
    retired = routing()
    assert retired["state"] == "retired"
    assert "retired the old layout" in failing(capsys, "reshard", "rollback", *where)
    assert routing() == retired
    ok(capsys, "reshard", "run", *where, "--until", "done")

    async def count() -> int:
        async with ShardedIndex(uri, "orders") as index:
            return await index.count("PENDING")

    assert asyncio.run(count()) == 60


def _worker(uri: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "shardex", "reshard", "run", "--store", uri, "--index",
         "orders", "--unit-lease", "1", "--rate", "120", "--every", "0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "COLUMNS": "200"})


def test_a_worker_killed_mid_move_loses_its_lease_and_the_other_finishes(
        capsys: pytest.CaptureFixture[str]) -> None:
    uri = local.table_store().uri
    fill(uri, 300, lease=0.5, pending=ShardPolicy(4))
    where = ["--store", uri, "--index", "orders"]
    ok(capsys, "reshard", "start", *where, "--set", "PENDING=12", "--margin", "0.1")
    victim = _worker(uri)
    survivor: subprocess.Popen[str] | None = None
    try:
        assert victim.stdout is not None
        said = []
        for line in victim.stdout:  # wait for the victim's own progress: it holds a unit
            said.append(line)
            moved = re.search(r"moved ([\d,]+), remaining ([\d,]+)", line)
            if moved and int(moved[1].replace(",", "")) > 0 \
                    and int(moved[2].replace(",", "")) > 30:
                break
        else:
            raise AssertionError("the first worker never reported entries moved; it said:\n"
                                 + "".join(said[-20:]))
        # the other worker starts now, beside the victim's live lease: started with it,
        # it sometimes took every unit before the victim had moved an entry
        survivor = _worker(uri)
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
        units = json.loads(ok(capsys, "reshard", "status", *where, "--json"))["units"]
        assert units["done"] < units["total"]  # the kill left work behind
        out, _ = survivor.communicate(timeout=300)
    finally:
        for process in (victim, survivor):
            if process is None:
                continue
            if process.poll() is None:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()
    assert survivor.returncode == 0, out
    assert "reshard stopped at verified" in out
    assert "no gaps" in out
    status = json.loads(ok(capsys, "reshard", "status", *where, "--json"))
    assert status["units"]["done"] == status["units"]["total"]
    assert status["values"]["PENDING"]["remaining"] == 0
    assert "no gaps" in ok(capsys, "reshard", "verify", *where)


def test_key_attributes_follow_the_state_in_gsi_mode() -> None:
    async def main() -> None:
        store = local.gsi_store()
        async with ShardedIndex(store, "orders", Routing(), routing_lease=0.5,
                                routing_ttl=0.1) as app:
            for i in range(30):
                await app.put("PENDING", f"o-{i}", sort=f"{i:03d}")
            async with Resharder(store, "orders", unit_lease=1.0, settle=0.2) as runner:
                await runner.start({"PENDING": ShardPolicy(4)}, margin=0.1)
                await app.refresh_routing()
                # read-both: the application still files its items under the old key
                assert app.key_attributes("PENDING", "o-1", sort="s")["shard_key"] == "PENDING"
                result = await runner.run()
                assert result.parity is not None
                assert result.parity.clean
                await app.refresh_routing()
                assert app.key_attributes("PENDING", "o-1", sort="s")["shard_key"] == \
                    app.routing.shard_key("PENDING", "o-1")
                assert app.routing.state == "verified"
                assert await app.count("PENDING") == 30

    asyncio.run(main())


def test_start_takes_the_routing_of_a_plan_as_it_is(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    uri = local.table_store().uri
    fill(uri, 10, lease=0.5)
    plan = tmp_path / "plan.json"
    plan.write_text(ok(capsys, "plan", "--peak", "PENDING=6000", "--json"))
    out = ok(capsys, "reshard", "start", "--store", uri, "--index", "orders", "--file",
             str(plan), "--dry-run")
    assert "PENDING: 1 shard(s), hash -> 18 shard(s), hash: 10 entries" in out


def test_reshard_run_serves_its_progress_as_metrics(capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from prometheus_client import generate_latest

    from shardex.metrics import prometheus

    uri = local.table_store().uri
    fill(uri, 40, lease=0.5)
    where = ["--store", uri, "--index", "orders"]
    ok(capsys, "reshard", "start", *where, "--set", "PENDING=4", "--margin", "0.1")
    served: list[Any] = []
    serve = prometheus.serve_prometheus

    def keep(recorder: Any, **options: Any) -> Any:
        served.append((recorder, serve(recorder, **options)))
        return served[-1][1]

    monkeypatch.setattr(prometheus, "serve_prometheus", keep)
    main(["reshard", "run", *where, "--unit-lease", "1", "--metrics-port", "0"])
    recorder, server = served[0]
    assert f"metrics: {server.url}" in capsys.readouterr().err
    gauges = recorder.reshard("orders").to_dict()
    assert gauges["state"] == "verified"
    assert gauges["moved"] == gauges["total"] > 20  # 3/4 of 40 move
    assert gauges["mismatches"] == 0
    scrape = generate_latest(server.registry).decode()
    assert 'shardex_reshard_state{index="orders",state="verified"} 1.0' in scrape
    assert 'shardex_reshard_progress{index="orders"} 1.0' in scrape


def test_ctrl_c_on_run_names_the_state_and_the_next_step_and_the_store_lists_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    uri = local.table_store().uri
    fill(uri, 300, lease=0.5, pending=ShardPolicy(2))
    where = ["--store", uri, "--index", "orders"]
    planned = json.loads(ok(capsys, "reshard", "start", *where, "--set", "PENDING=8",
                            "--margin", "0.1", "--json"))["to_move"]
    # it runs as a terminal's foreground job does, SIGINT at its default, whatever this
    # process inherited (a shell starts a background job, and every process under it,
    # with SIGINT ignored: a suite started with '&' saw the worker run to its end through
    # its SIGINT)
    with _running([sys.executable, "-c", FOREGROUND, "reshard", "run", *where, "--unit-lease",
                   "2", "--rate", "20", "--every", "0"]) as worker:
        assert worker.stdout is not None
        for line in worker.stdout:
            moved = re.search(r"moved ([\d,]+)", line)
            if moved and int(moved[1].replace(",", "")) > 0:
                break
        else:
            raise AssertionError("the worker never reported entries moved")
        # while it runs, status names it (owner, units, lease expiry) and suggests no run
        for _ in range(20):
            status = json.loads(ok(capsys, "reshard", "status", *where, "--json"))
            if status["runners"]:
                break
        (runner,) = status["runners"]
        assert runner["owner"].count(":") == 2
        assert runner["units"]
        assert runner["expires_at"].endswith("Z")
        assert status["total"] == planned  # fixed at start, whatever has moved since
        assert 0 < status["moved"] < planned
        assert not any(" run " in step for step in status["next_steps"])
        assert "runner " in ok(capsys, "reshard", "status", *where)
        code, lines, err = _stop(worker, signal.SIGINT)
    assert code == 130, err
    assert len(lines) == 1, err
    assert lines[0].startswith("interrupted: reshard ")
    assert "is in write-new" in lines[0]
    assert "safe to stop: every step and checkpoint is stored, and the units this process " \
        "held are given back" in lines[0]
    # as it says: no unit is left leased to the stopped process
    assert json.loads(ok(capsys, "reshard", "status", *where, "--json"))["runners"] == []
    assert lines[0].endswith(f"to go on: shardex reshard run --store {shlex.quote(uri)} "
                             "--index orders")
    listed = json.loads(ok(capsys, "migrations", "list", *where, "--json"))
    assert listed["schema"] == "shardex.migrations.list/1"
    assert [(m["index"], m["kind"], m["state"]) for m in listed["migrations"]] == \
        [("orders", "reshard", "write-new (forward)")]
    assert "orders  reshard" in ok(capsys, "migrations", "list", *where)
    # the store alone: a DynamoDB table holds one index, whose name its owner record keeps
    alone = json.loads(ok(capsys, "migrations", "list", "--store", uri, "--json"))
    assert alone["migrations"] == listed["migrations"], alone


def _interrupted(where: list[str], *args: str) -> tuple[int, list[str]]:
    """``shardex ARGS`` as a foreground job, Ctrl-C once it printed its first line: its exit
    code and what it wrote on stderr, a line each."""
    with _running([sys.executable, "-c", FOREGROUND, *args, *where]) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline(), "it printed nothing"
        code, lines, _ = _stop(proc, signal.SIGINT)
    return code, lines


@contextlib.contextmanager
def _running(command: list[str], **popen: Any) -> Iterator[subprocess.Popen[str]]:
    """``command`` running from the repository, its output piped; killed if still running
    when the block ends."""
    worker = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "COLUMNS": "200"}, **popen)
    try:
        yield worker
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()


def _stop(worker: subprocess.Popen[str], signum: int) -> tuple[int, list[str], str]:
    """Send ``signum`` and wait: the exit code, stderr's lines (blank ones left out), and
    stderr whole."""
    worker.send_signal(signum)
    _, err = worker.communicate(timeout=60)
    return worker.returncode, [line for line in err.splitlines() if line.strip()], err


def test_ctrl_c_on_rollback_and_on_a_watched_status_says_one_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Both exited 130 with nothing on stderr; run said where it stopped and how to go on."""
    uri = local.table_store().uri
    fill(uri, 300, lease=0.5, pending=ShardPolicy(2))
    where = ["--store", uri, "--index", "orders"]
    ok(capsys, "reshard", "start", *where, "--set", "PENDING=8", "--margin", "0.1")
    ok(capsys, "reshard", "run", *where, "--until", "write-new")
    code, lines = _interrupted(where, "reshard", "status", "--watch", "--every", "1")
    assert (code, lines) == (130, ["stopped watching: the reshard goes on as it was"])
    code, lines = _interrupted(where, "reshard", "rollback", "--unit-lease", "2", "--rate",
                               "5")
    assert code == 130, lines
    assert len(lines) == 1, lines
    assert lines[0].startswith("interrupted: reshard "), lines
    assert "safe to stop" in lines[0]
    assert lines[0].endswith(f"to go on: shardex reshard run --store {shlex.quote(uri)} "
                             "--index orders --until done"), lines


@pytest.mark.parametrize("sigint", [signal.SIG_DFL, signal.SIG_IGN], ids=["foreground", "bg"])
def test_sigterm_stops_a_waiting_run_as_ctrl_c_does(capsys: pytest.CaptureFixture[str],
                                                    sigint: Any) -> None:
    """A runner stopped by SIGTERM (a container's stop, a service manager's) died at once:
    its wait's mark stayed until it lapsed, and it said nothing. It stops as on Ctrl-C,
    takes its mark out, says the one line, and exits 143, also where SIGINT is ignored (a
    shell's background job), which asyncio then leaves to Python."""
    uri = local.table_store().uri
    fill(uri, 40, lease=5.0, pending=ShardPolicy(2))
    where = ["--store", uri, "--index", "orders"]
    ok(capsys, "reshard", "start", *where, "--set", "PENDING=4", "--margin", "0.1")
    with _running([sys.executable, "-m", "shardex", "reshard", "run", *where, "--unit-lease",
                   "30"], preexec_fn=lambda: signal.signal(signal.SIGINT, sigint)) as worker:
        assert worker.stdout is not None
        for line in worker.stdout:
            if " waiting " in f" {line}":
                break
        else:
            raise AssertionError("the worker never waited")
        (runner,) = json.loads(ok(capsys, "reshard", "status", *where, "--json"))["runners"]
        assert runner["waiting"]
        code, lines, err = _stop(worker, signal.SIGTERM)
    assert code == 143, err
    assert len(lines) == 1, err
    assert lines[0].startswith("interrupted: reshard "), err
    assert "safe to stop" in lines[0]
    # its mark is out at once, not in 30 s: status names no runner and suggests a run
    status = json.loads(ok(capsys, "reshard", "status", *where, "--json"))
    assert status["runners"] == []
    assert any(" run " in step for step in status["next_steps"]), status["next_steps"]
