"""Status you can trust, on memory:// and virtual time: a runner holding leases shows with
its owner, units and expiry; the total stays fixed while the application writes; no
``run`` is suggested while one runs; ``--watch`` and Ctrl-C's line; the store's list of
migrations.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import shardex
from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.commands.migrations import interrupted, watch
from shardex.migrate import Resharder, status_document
from shardex.migrate.registry import migrations
from shardex.migrate.status import resume_first
from shardex.stores.base import Store

FAST: dict[str, Any] = {"unit_lease": 4.0, "routing_ttl": 0.5}


async def _status(observer: Resharder, gone: str | None = None) -> dict[str, Any]:
    routing = await observer.routing()
    return status_document(routing, await observer.units(routing), index="orders",
                           store="memory://", lease=observer.lease,
                           now=observer.store.clock.wall(), max_age=900.0, gone=gone)


async def _put_pending(store: Store, entries: int) -> None:
    """Put ``entries`` orders of PENDING in index ``orders`` (one key), sorted by number."""
    async with ShardedIndex(store, "orders", Routing(), routing_lease=1.0) as app:
        for i in range(entries):
            await app.put("PENDING", f"o-{i:04d}", sort=f"{i:04d}")


@pytest.mark.shardex_virtual
async def test_a_runner_holding_leases_shows_and_the_total_stays_fixed(
        shardex_store: Store) -> None:
    async with ShardedIndex(shardex_store, "orders", Routing(), routing_lease=2.0,
                            routing_ttl=0.5) as app:
        for i in range(300):
            await app.put("PENDING", f"o-{i:04d}", sort=f"{i:04d}")
        async with Resharder(shardex_store, "orders", rate=40.0, worker="runner-a",
                             seed=1, **FAST) as runner, \
                Resharder(shardex_store, "orders", worker="observer", **FAST) as observer:
            await runner.start({"PENDING": ShardPolicy(8)}, margin=0.5)
            first = await _status(observer)
            assert first["total"] is not None
            assert first["total"] > 200
            assert first["runners"] == []
            assert any(" run " in step for step in first["next_steps"])
            running = asyncio.ensure_future(runner.run())
            seen: list[dict[str, Any]] = []
            stopped: list[dict[str, Any]] = []
            for i in range(40):
                await asyncio.sleep(1.0)
                await app.put("PENDING", f"late-{i}", sort=f"z{i:03d}")  # the app goes on
                seen.append(await _status(observer))
                if seen[-1]["runners"] and not stopped:
                    # as the runner's own Ctrl-C line reads it: its lease is no other runner
                    stopped.append(await _status(observer, gone="runner-a"))
            held = [doc for doc in seen if doc["runners"]]
            assert held, [doc["state"] for doc in seen]
            doc = held[-1]
            (only,) = doc["runners"]
            assert only["owner"] == "runner-a"
            assert only["units"]
            assert only["expires_at"].endswith("Z")
            assert not any(" run " in step for step in doc["next_steps"]), doc["next_steps"]
            assert any("status" in step and "--watch" in step for step in doc["next_steps"])
            assert stopped[0]["runners"] == []
            assert any(" run " in step for step in stopped[0]["next_steps"])
            assert {d["total"] for d in seen} == {first["total"]}
            moved = [d["moved"] for d in seen]
            assert moved == sorted(moved)
            assert moved[-1] > 0
            result = await running
            assert result.state == "verified"
            last = await _status(observer)
            assert (last["total"], last["remaining"], last["runners"]) == \
                (first["total"], 0, [])
            # entries the application wrote on the old layout during read-both move too
            assert last["total"] <= last["moved"] <= last["total"] + 40
            listed = await migrations(shardex_store, ["orders"])
            assert [(m.index, m.kind, m.id) for m in listed] == \
                [("orders", "reshard", doc["reshard_id"])]
            assert listed[0].state == "verified (forward)"
            await runner.cutover()
            await runner.complete()
            assert [m.state for m in await migrations(shardex_store, ["orders"])] == ["stable"]


@pytest.mark.shardex_virtual
async def test_watch_shows_the_document_until_no_migration_is_under_way() -> None:
    docs = iter([{"reshard_id": "r1", "state": "write-new"},
                 {"reshard_id": "r1", "state": "verified"},
                 {"reshard_id": None, "state": "stable"}])
    shown: list[str] = []
    slept: list[float] = []

    async def read() -> dict[str, Any]:
        return next(docs)

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    last = await watch(read, lambda doc: shown.append(doc["state"]), every=2.0, sleep=sleep)
    assert (shown, slept, last["state"]) == (["write-new", "verified", "stable"],
                                             [2.0, 2.0], "stable")
    adoption = iter([{"adoption_id": "a1", "state": "dual-write"}] * 5)
    once: list[str] = []
    await watch(lambda: asyncio.sleep(0, next(adoption)), lambda d: once.append(d["state"]),
                every=1.0, sleep=sleep, rounds=3)
    assert once == ["dual-write"] * 3


def test_a_watched_status_in_json_is_one_document_a_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    """'status --watch --json' printed indented documents back to back, which neither a
    JSON parser nor a line reader takes; once, it stays one indented document."""
    import json

    from shardex.commands.migrations import status_printer

    docs = [{"schema": "shardex.reshard.status/1", "state": s} for s in ("write-new", "stable")]
    show = status_printer(True, lambda doc: [], watched=True)
    for doc in docs:
        show(doc)
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line) for line in lines] == docs
    status_printer(True, lambda doc: [])(docs[0])
    assert json.loads(capsys.readouterr().out) == docs[0]


def test_ctrl_c_says_the_state_that_it_is_safe_and_what_to_run_next() -> None:
    doc = {"index": "orders", "reshard_id": "r1", "state": "write-new",
           "next_steps": ["shardex reshard run --store s --index orders"]}
    line = interrupted(doc, "reshard")
    assert "\n" not in line
    assert line.startswith("interrupted: reshard r1 of index 'orders' is in write-new")
    assert "safe" in line
    assert line.endswith("to go on: shardex reshard run --store s --index orders")
    none = interrupted({"index": "orders", "reshard_id": None, "state": "stable"}, "reshard")
    assert "no reshard under way" in none
    # another runner holds units: watching it is the step, and if it stopped (killed),
    # its lease lapses and a run takes them over: the line says when (it said only to
    # watch a runner that had died: a probe)
    held = {**doc, "next_steps": ["shardex reshard status --store s --index orders --watch"],
            "runners": [{"owner": "vm:7:a", "units": [3], "expires_at": "2026-12-04T21:00:30Z"}]}
    assert interrupted(held, "reshard").endswith(
        "to go on: shardex reshard status --store s --index orders --watch (vm:7:a holds "
        "units until 2026-12-04T21:00:30Z unless it renews them; if it has stopped, "
        "'shardex reshard run' takes them over then)")
    # a runner waiting between steps holds no unit: its mark lapses as a lease does
    waiting = {**held, "runners": [{"owner": "vm:7:a", "units": [],
                                    "expires_at": "2026-12-04T21:00:30Z",
                                    "waiting": "waiting until 2026-12-04T21:01:00Z for x"}]}
    assert interrupted(waiting, "reshard").endswith(
        "(vm:7:a waits to go on, marked until 2026-12-04T21:00:30Z unless it renews the "
        "mark; if it has stopped, 'shardex reshard run' goes on after that)")


def test_ctrl_c_of_an_adoption_names_an_adoption() -> None:
    """`adopt run` stopped by Ctrl-C said "interrupted: adopt a1 of index ...", "no adopt
    under way" and "the adopt's state could not be read": the verb where the line names
    the thing."""
    from shardex.commands.migrations import unread

    doc = {"index": "orders", "adoption_id": "a1", "state": "dual-write",
           "next_steps": ["shardex adopt run --store s --index orders"]}
    assert interrupted(doc, "adopt").startswith(
        "interrupted: adoption a1 of index 'orders' is in dual-write; safe to stop")
    assert interrupted({"index": "orders", "adoption_id": None}, "adopt") == (
        "interrupted: index 'orders' has no adoption under way; nothing to resume")
    assert unread("adopt", "why").startswith(
        "interrupted: the adoption's state could not be read (why); safe to stop")
    assert unread("adopt", "why").endswith("to see where it stands: shardex adopt status")


@pytest.mark.parametrize("kind", ["reshard", "adopt"])
def test_resume_leads_the_next_steps_of_a_paused_migration_that_has_entries_to_move(
        kind: str) -> None:
    where = "--store memory://x --index orders"

    def doc(paused: bool | None, *verbs: str) -> dict[str, Any]:
        return {"store": "memory://x", "index": "orders",
                "controls": None if paused is None else {"paused": paused},
                "next_steps": [f"shardex {kind} {verb} {where}" for verb in verbs]}

    resume = f"shardex {kind} resume {where}"
    assert resume_first(doc(True, "run", "rollback"), kind)["next_steps"] == [
        resume, f"shardex {kind} run {where}", f"shardex {kind} rollback {where}"]
    assert resume_first(doc(True, "status --watch"), kind)["next_steps"][0] == resume
    # a paused runner holds no unit but keeps its budget slice: watch it, start no other
    held = {**doc(True, "run", "rollback"), "controls": {"paused": True, "budget": {
        "slices": [{"owner": "vm:1:a", "share": 0.0, "expires": 1.0}]}}}
    assert resume_first(held, kind)["next_steps"] == [
        resume, f"shardex {kind} status {where} --watch", f"shardex {kind} rollback {where}"]
    # nothing left to move (verified: cut over or roll back), running, or no controls
    for unchanged in (doc(True, "cutover", "rollback"), doc(False, "run", "rollback"),
                      doc(None, "run")):
        assert resume not in resume_first(dict(unchanged), kind)["next_steps"]



def test_a_runner_takes_a_max_age_of_zero_as_cutover_does() -> None:
    """'cutover --max-age 0' takes 0 (every report stale), while 'adopt status --max-age
    0' was refused naming the Python argument: 'max_age must be a number > 0' (a probe);
    both commands make their runner with it."""
    Resharder("memory://", "orders", max_age=0)
    with pytest.raises(shardex.InvalidInput, match="max_age must be a number of seconds >= 0"):
        Resharder("memory://", "orders", max_age=-1)


@pytest.mark.shardex_virtual
async def test_status_says_what_a_moved_count_short_of_the_total_means(
        shardex_store: Store) -> None:
    """A runner SIGKILLed between its moves and its checkpoint leaves moves no record
    counts: once nothing remains, status said 'moved 34 of 40 (fixed at the plan),
    remaining 0', which reads as 6 entries lost (a probe; parity and the count were
    whole). It now says what the difference can be."""
    from shardex.commands.reshard import _status_lines

    async with ShardedIndex(shardex_store, "orders", Routing(), routing_lease=2.0,
                            routing_ttl=0.5) as app:
        for i in range(40):
            await app.put("PENDING", f"o-{i:04d}", sort=f"{i:04d}")
        async with Resharder(shardex_store, "orders", worker="a", **FAST) as runner:
            await runner.start({"PENDING": ShardPolicy(4)}, margin=0.5)
            await runner.run(until="verified")
            doc = await _status(runner)
    assert (doc["total"], doc["moved"], doc["remaining"]) == (40, 40, 0)
    whole = [line for line in _status_lines(doc) if "fixed at the plan" in line]
    assert whole == ["  moved 40 of 40 (fixed at the plan), remaining 0"]
    short = [line for line in _status_lines({**doc, "moved": 34}) if "fixed at" in line]
    assert short == ["  moved 34 of 40 (fixed at the plan), remaining 0; the other 6 were "
                     "moved by a runner that stopped before it recorded them, or deleted or "
                     "moved by the application first (parity reads what is there)"]


def test_status_counts_entries_found_gone_or_in_place_and_names_the_tier() -> None:
    """Seen on Cosmos DB, a tier move beside an application deleting entries, stopped by
    SIGTERM: 'moved 471 of 600 (fixed at the plan), remaining 128' (one entry, deleted
    by the application before the mover reached it, said nowhere), and the value's line
    read '1 shard(s), hash -> 8 shard(s), hash' where start had said '... hash on tier
    'hot''."""
    from shardex.commands.reshard import _status_lines

    value = {"from": {"shards": 1, "strategy": "hash"},
             "to": {"shards": 8, "strategy": "hash", "tier": "hot"},
             "total": 600, "moved": 471, "remaining": 128, "entries": 600}
    doc = {"reshard_id": "r1", "index": "orders", "store": "cosmos://db1/c1",
           "direction": "forward", "state": "write-new", "routing_version": 3,
           "values": {"PENDING": value}, "total": 600, "moved": 471, "remaining": 128,
           "units": {"total": 1, "done": 0, "leased": 0}, "ready_at": "2026-12-05T14:32:25Z",
           "runners": [], "parity": None, "controls": None, "budget": None,
           "retire_after": None, "next_steps": []}
    lines = _status_lines(doc)
    assert "  PENDING: 1 shard(s), hash -> 8 shard(s), hash on tier 'hot': moved 471, " \
        "remaining 128" in lines, lines
    assert "  moved 471 of 600 (fixed at the plan), remaining 128; 1 needed no move (moved " \
        "by a runner that stopped before it recorded them, or deleted or moved by the " \
        "application first)" in lines, lines
    # seen next: 'moved 1,038 of 600 (fixed at the plan)', the writer's puts in read-both
    more = _status_lines({**doc, "moved": 1038, "remaining": 0})
    assert "  moved 1,038 of 600 (fixed at the plan), remaining 0; 438 more than planned: " \
        "the application wrote them on the old layout after the plan, before writers " \
        "followed the new one" in more, more
    plain = {**value, "to": {"shards": 8, "strategy": "hash"}}
    assert "  PENDING: 1 shard(s), hash -> 8 shard(s), hash: moved 471, remaining 128" in \
        _status_lines({**doc, "values": {"PENDING": plain}})


def test_a_runner_whose_units_another_holds_says_it_waits_for_them() -> None:
    """Every unit left is leased by another runner (one killed with SIGTERM holds its lease
    till it lapses): the run says it waits, for whom and until when. It said 'moving
    entries, 0 entries/s' all along (a probe on DynamoDB Local)."""
    from shardex.sim.clock import run_virtual
    from shardex.stores.memory import MemoryStore

    async def main() -> None:
        store = MemoryStore(seed=1)
        await _put_pending(store, 200)
        notes: list[str] = []
        async with Resharder(store, "orders", worker="slow", rate=10.0, seed=1,
                             **FAST) as slow, \
                Resharder(store, "orders", worker="other", seed=2,
                          progress=lambda p: notes.append(p.note), **FAST) as other:
            await slow.start({"PENDING": ShardPolicy(4)}, margin=0.5)
            running = asyncio.ensure_future(slow.run(until="verified"))
            await asyncio.sleep(8.0)
            second = asyncio.ensure_future(other.run(until="verified"))
            await asyncio.sleep(12.0)
            waits = [n for n in notes if n.startswith("waiting")]
            assert waits, notes
            assert "leased by slow (until" in waits[-1], waits[-1]
            assert "moving entries" not in notes[notes.index(waits[0]):], notes
            for task in (running, second):
                task.cancel()
            await asyncio.gather(running, second, return_exceptions=True)

    run_virtual(main())


def test_a_run_another_process_rolls_back_says_its_mover_stopped_not_that_it_is_done() -> None:
    """A forward run whose reshard another process rolled back said 'the mover is done;
    moved 128, remaining 1,102' before it carried on with the rollback (on DynamoDB
    Local)."""
    from shardex.sim.clock import run_virtual
    from shardex.stores.memory import MemoryStore

    async def main() -> None:
        store = MemoryStore(seed=1)
        await _put_pending(store, 200)
        notes: list[tuple[str, str, int | None]] = []
        moving = asyncio.Event()

        def progress(p: Any) -> None:
            notes.append((p.direction, p.note, p.remaining))
            if p.note == "moving entries":
                moving.set()

        async with Resharder(store, "orders", worker="mover", rate=10.0, seed=1,
                             progress=progress, **FAST) as mover, \
                Resharder(store, "orders", worker="operator", seed=2, **FAST) as operator:
            await mover.start({"PENDING": ShardPolicy(4)}, margin=0.5)
            running = asyncio.ensure_future(mover.run(until="done"))
            await moving.wait()
            await asyncio.sleep(5.0)
            rolling = asyncio.ensure_future(operator.rollback())
            await asyncio.gather(running, rolling)
        forward = [(note, left) for direction, note, left in notes if direction == "forward"]
        assert ("the mover stopped: the reshard is rolling back", forward[-1][1]) in forward
        assert not any(note == "the mover is done" for note, _ in forward), forward

    run_virtual(main())


def test_a_paused_run_shows_no_rate_and_no_eta() -> None:
    """Paused, run said 'paused by ...; moved 401, remaining 1,338, 17 entries/s, ETA 81 s',
    the ETA growing while nothing moved (on DynamoDB Local)."""
    from dataclasses import replace

    from shardex.clock import LoopClock
    from shardex.migrate.budget import Sharing
    from shardex.migrate.control import change_control
    from shardex.sim.clock import run_virtual
    from shardex.stores.memory import MemoryStore

    async def main() -> None:
        store = MemoryStore(seed=1)
        await _put_pending(store, 300)
        notes: list[tuple[str, float | None, float | None]] = []
        moving = asyncio.Event()

        def progress(p: Any) -> None:
            notes.append((p.note, p.rate, p.eta))
            if p.note == "moving entries" and p.rate:
                moving.set()

        async with Resharder(store, "orders", rate=10.0, seed=1, progress=progress,
                             sharing=Sharing(poll=0.5), **FAST) as runner:
            await runner.start({"PENDING": ShardPolicy(4)}, margin=0.5)
            running = asyncio.ensure_future(runner.run(until="verified"))
            await moving.wait()
            migration = (await runner.routing()).reshard
            assert migration is not None
            clock = LoopClock()
            await change_control(store, "orders", migration.id, lambda c: replace(
                c, paused=True, paused_by="ops@host"), clock=clock)
            paused_from = len(notes)
            await clock.sleep(30.0)
            held = [n for n in notes[paused_from:] if n[0].startswith("paused")]
            assert held, notes[paused_from:]
            assert all(rate is None and eta is None for _, rate, eta in held), held
            await change_control(store, "orders", migration.id, lambda c: replace(
                c, paused=False), clock=clock)
            await running

    run_virtual(main())


def _hanging_store() -> type[Any]:
    from shardex.stores.memory import MemoryStore

    class Hanging(MemoryStore):
        hung = False

        def _send(self, rec: Any, nbytes: int) -> Any:
            if self.hung:
                rec.request()
                return asyncio.Event().wait()  # accepted, never answered
            return super()._send(rec, nbytes)

    return Hanging


def test_a_run_says_when_the_store_stops_answering_in_any_step() -> None:
    """The store stops answering as the parity check begins, after the moves: the run
    says so there too (only its moves' progress reads had said it; the check waited in
    silence for the store's timeouts)."""
    from shardex.sim.clock import run_virtual

    async def main() -> None:
        store = _hanging_store()(seed=1)
        await _put_pending(store, 100)
        notes: list[tuple[float, str]] = []
        loop = asyncio.get_running_loop()
        checking = asyncio.Event()

        def progress(p: Any) -> None:
            notes.append((loop.time(), p.note))
            if p.note == "checking parity":
                store.hung = True
                checking.set()

        async with Resharder(store, "orders", worker="a", rate=1000.0, seed=1,
                             progress=progress, **FAST) as runner:
            await runner.start({"PENDING": ShardPolicy(4)}, margin=0.5)
            running = asyncio.ensure_future(runner.run(until="verified"))
            try:
                await checking.wait()
                hung_at = loop.time()
                await asyncio.sleep(20.0)
            finally:
                running.cancel()
                await asyncio.gather(running, return_exceptions=True)
                store.hung = False
        said = [(at - hung_at, note) for at, note in notes if at > hung_at]
        assert [note for _, note in said] == [
            f"no answer from the store for {s} s" for s in (2, 4, 8, 16)], said

    run_virtual(main())


def test_a_run_says_when_the_store_stops_answering() -> None:
    """The store stops answering mid-run (it accepts requests and never replies): the run
    says so, more and more rarely, rather than falling silent, and Ctrl-C ends it within
    seconds. On DynamoDB Local behind a proxy that stopped answering, reshard run printed
    nothing for about 12 minutes (30 s read timeouts, tried again), and SIGINT did not
    end it within 6 minutes."""
    from shardex.sim.clock import run_virtual

    Hanging = _hanging_store()

    async def main() -> None:
        store = Hanging(seed=1)
        await _put_pending(store, 400)
        notes: list[str] = []
        async with Resharder(store, "orders", worker="a", rate=10.0, seed=1,
                             progress=lambda p: notes.append(p.note), **FAST) as runner:
            await runner.start({"PENDING": ShardPolicy(4)}, margin=0.5)
            running = asyncio.ensure_future(runner.run(until="verified"))
            loop = asyncio.get_running_loop()
            try:
                await asyncio.sleep(6.0)
                assert notes[-1:] == ["moving entries"], notes
                store.hung = True
                heard = len(notes)
                await asyncio.sleep(9.0)
                said = notes[heard:]
                began = loop.time()
                running.cancel()  # Ctrl-C
                await asyncio.wait({running}, timeout=120.0)
                stopping = loop.time() - began
            finally:
                store.hung = False  # what is out stays out; what is sent now answers
                running.cancel()
                await asyncio.gather(running, return_exceptions=True)
        # after a report's interval, then twice as long, and so on (up to a minute apart)
        assert said == [f"no answer from the store for {s} s" for s in (2, 4, 8)], said
        # stopped, it gives its units back and checkpoints if the store answers in time;
        # it waited for the store's answer as long as the store took (minutes)
        assert stopping <= 6.0, stopping

    run_virtual(main())


def test_ctrl_c_says_so_in_one_line_when_the_state_cannot_be_read() -> None:
    """After Ctrl-C, run reads the migration's state to say where it stopped; on a store
    that does not answer that read waited as long as the store's timeouts and tries."""
    import click

    from shardex.commands.migrations import on_interrupt
    from shardex.sim.clock import run_virtual

    def work() -> None:
        raise KeyboardInterrupt

    async def hung() -> dict[str, Any]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    lines: list[str] = []
    with pytest.raises(click.exceptions.Abort):
        on_interrupt(work, hung, "reshard", run=run_virtual, say=lines.append)
    assert lines == ["interrupted: the reshard's state could not be read (the store did not "
                     "answer within 10 s); safe to stop: every step and checkpoint stored is "
                     "kept, and the units this process held lapse with their lease; to see "
                     "where it stands: shardex reshard status"], lines


def test_a_runner_waiting_between_steps_is_a_runner_and_its_rate_is_in_force() -> None:
    """A runner waiting for every client to act on a change (read-both's wait before
    writers write the new keys, then write-new's) is a runner: status lists it with what
    it waits for and until when, its --rate is the migration's, and no `run` is
    suggested. For the whole of both waits status had listed no runner, said "no rate
    yet: the first runner's --rate sets it" and suggested `shardex reshard run` (by hand
    on Azurite: 110 s of a wrong next step). Once it moves, and once it is done, it shows
    as before."""
    from shardex.commands.reshard import _status_lines
    from shardex.migrate.budget import Sharing
    from shardex.sim.clock import run_virtual
    from shardex.stores.memory import MemoryStore

    async def main() -> None:
        store = MemoryStore(seed=1)
        await _put_pending(store, 100)
        async with Resharder(store, "orders", worker="a", rate=20.0, seed=1, unit_lease=2.0,
                             sharing=Sharing(poll=0.5)) as runner, \
                Resharder(store, "orders", worker="observer", unit_lease=2.0) as observer:
            migration, seen = await _watched(runner, observer, margin=15.0)
            moving = next(i for i, d in enumerate(seen) if any(r["units"] for r in d["runners"]))
            waiting = seen[:moving]  # both waits, then the moves (in write-new)
            assert len(waiting) > 20, [d["state"] for d in seen]
            assert {d["state"] for d in waiting} == {"read-both", "write-new"}
            for doc in waiting[:-1]:  # the last may be read as the wait ends
                (only,) = doc["runners"]
                assert (only["owner"], only["units"]) == ("a", []), doc["runners"]
                assert only["waiting"].startswith("waiting until 20"), only
                assert "for every client to act on the last change" in only["waiting"]
                assert not any(" run " in step for step in doc["next_steps"]), doc
                assert doc["next_steps"][0].endswith(" --watch"), doc["next_steps"]
                assert doc["controls"]["rate"] == 20.0, doc["controls"]
                lines = _status_lines(doc)
                assert f"  runner a: {only['waiting']}" in lines, lines
                assert not any("no rate yet" in line for line in lines), lines
            # its own Ctrl-C line reads the status without it: run goes on from there
            stopped = await _full(observer, migration, gone="a")
            assert stopped["runners"] == []
            last = await _full(observer, migration)
            assert (last["runners"], last["controls"]["budget"]["waits"]) == ([], [])
            # verified: every unit done, nothing moves (it read "moving at up to 20")
            (controls,) = [line for line in _status_lines(last) if "controls:" in line]
            assert controls == "  controls: up to 20 write units a second per shard key; " \
                "nothing moves in verified (set by a)", controls
            moving = [line for d in seen for line in _status_lines(d)
                      if "moving at up to 20" in line and d["state"] == "write-new"
                      and d["units"]["done"] < d["units"]["total"]]
            assert moving, "no status said it moved while it moved"

    run_virtual(main())


def test_a_runner_waiting_out_the_retention_is_watched_not_completed_beside() -> None:
    """In read-new, a runner waiting out the retention window (then the lease and the
    margin) to complete: status listed it waiting but suggested 'complete' first, which
    races it. Watching it comes first; rollback stays a choice."""
    from shardex.migrate.budget import Sharing
    from shardex.sim.clock import run_virtual
    from shardex.stores.memory import MemoryStore

    async def main() -> None:
        store = MemoryStore(seed=1)
        await _put_pending(store, 40)
        async with Resharder(store, "orders", worker="a", seed=1, unit_lease=2.0,
                             max_age=900.0, sharing=Sharing(poll=0.5)) as runner, \
                Resharder(store, "orders", worker="observer", unit_lease=2.0) as observer:
            await runner.start({"PENDING": ShardPolicy(4)}, margin=0.5)
            await runner.run(until="read-new")
            routing = await runner.routing()
            assert routing.reshard is not None
            await runner.complete(retain=60.0)
            running = asyncio.ensure_future(runner.run(until="done"))
            await asyncio.sleep(20.0)
            doc = await _full(observer, routing.reshard.id)
            (only,) = doc["runners"]
            assert "the retention window to pass" in only["waiting"], only
            assert doc["next_steps"][0].endswith(" --watch"), doc["next_steps"]
            assert not any(" complete " in step for step in doc["next_steps"][:1])
            assert any(" rollback " in step for step in doc["next_steps"])
            assert (await running).state == "done"

    run_virtual(main())


def test_complete_waiting_out_the_retention_says_from_when() -> None:
    """In read-new after ``complete --retain`` and no runner: status suggested 'complete'
    with no word that it changes nothing before the window ends (complete said it only
    when run). The step names when it becomes possible; once past, it reads as before."""
    from shardex.sim.clock import run_virtual
    from shardex.stores.memory import MemoryStore

    async def main() -> None:
        store = MemoryStore(seed=1)
        await _put_pending(store, 40)
        async with Resharder(store, "orders", worker="a", seed=1, unit_lease=2.0) as runner:
            await runner.start({"PENDING": ShardPolicy(4)}, margin=0.5)
            await runner.run(until="read-new")
            await runner.complete(retain=60.0)
            doc = await _status(runner)
            assert doc["retire_after"] is not None
            complete = [s for s in doc["next_steps"] if " complete " in s]
            assert complete == [complete[0]]
            assert f"(from {doc['retire_after']}, when the retention ends)" in complete[0]
            await asyncio.sleep(61.0)
            after = await _status(runner)
            assert any(s.endswith(" complete --store memory:// --index orders")
                       for s in after["next_steps"]), after["next_steps"]

    run_virtual(main())


@pytest.mark.parametrize("step", ["check", "plan"])
def test_a_runner_holding_no_unit_is_a_runner(step: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A runner checking parity (it reads every entry twice: minutes on a large index),
    or planning a rollback's moves (it reads every source key once), holds no unit:
    status said "no runner runs" and suggested `run` meanwhile. It lists the runner,
    with what it does, and suggests watching it."""
    from shardex.clock import LoopClock
    from shardex.commands.reshard import _status_lines
    from shardex.migrate import mover as mover_module
    from shardex.migrate import runner as runner_module
    from shardex.migrate.budget import Sharing
    from shardex.sim.clock import run_virtual
    from shardex.stores.memory import MemoryStore

    owner, name = (runner_module, "check") if step == "check" else (mover_module.Mover,
                                                                    "survey")
    slowed = getattr(owner, name)

    async def slow(*args: Any, **kwargs: Any) -> Any:
        await LoopClock().sleep(30.0)
        return await slowed(*args, **kwargs)

    async def main() -> list[dict[str, Any]]:
        store = MemoryStore(seed=1)
        await _put_pending(store, 50)
        async with Resharder(store, "orders", worker="a", seed=1, unit_lease=2.0,
                             sharing=Sharing(poll=0.5)) as runner, \
                Resharder(store, "orders", worker="observer", unit_lease=2.0) as observer:
            if step == "check":
                monkeypatch.setattr(owner, name, slow)
                return (await _watched(runner, observer, margin=0.2))[1]
            migration, _ = await _watched(runner, observer, margin=0.2)
            monkeypatch.setattr(owner, name, slow)
            rolling = asyncio.ensure_future(runner.rollback())
            seen: list[dict[str, Any]] = []
            while not rolling.done():
                await asyncio.sleep(1.0)
                seen.append(await _full(observer, migration))
            assert (await rolling).state == "done"
            return seen

    seen = run_virtual(main())
    doing = "checking parity" if step == "check" else \
        "planning the moves: reading each source key once"
    # in write-new with every unit done (the check), or before any unit (the plan), but
    # for its waits before it moves
    busy = [d for d in seen if d["state"] == "write-new"
            and d["units"]["done"] == d["units"]["total"]
            and bool(d["units"]["total"]) == (step == "check")
            and not any((r["waiting"] or "").startswith("waiting until") for r in d["runners"])]
    assert len(busy) > 20, [(d["state"], d["units"]) for d in seen]
    for doc in busy[:-1]:  # the last may be read as it ends
        assert [(r["owner"], r["waiting"]) for r in doc["runners"]] == [("a", doing)], \
            doc["runners"]
        assert not any(" run " in step for step in doc["next_steps"]), doc
        assert not any("no runner runs" in line for line in _status_lines(doc))


async def _full(observer: Resharder, migration: str, gone: str | None = None
                ) -> dict[str, Any]:
    """The status document of ``migration`` with its controls, as ``observer`` reads it
    (``gone``: a runner whose Ctrl-C line reads it, left out)."""
    from shardex.clock import LoopClock
    from shardex.migrate.budget import migration_status
    from shardex.migrate.status import with_controls

    controls = await migration_status(observer.store, "orders", migration, clock=LoopClock())
    return with_controls(await _status(observer, gone), controls, "reshard", gone=gone)


async def _watched(runner: Resharder, observer: Resharder, *, margin: float
                   ) -> tuple[str, list[dict[str, Any]]]:
    """PENDING resharded to 4 keys by ``runner`` up to verified, its status read by
    ``observer`` every second meanwhile: the migration's id and the documents read."""
    await runner.start({"PENDING": ShardPolicy(4)}, margin=margin)
    routing = await runner.routing()
    assert routing.reshard is not None
    running = asyncio.ensure_future(runner.run())
    seen: list[dict[str, Any]] = []
    while not running.done():
        await asyncio.sleep(1.0)
        seen.append(await _full(observer, routing.reshard.id))
    assert (await running).state == "verified"
    return routing.reshard.id, seen


@pytest.mark.shardex_virtual
async def test_a_control_says_nothing_moves_once_every_unit_is_moved() -> None:
    """In write-new with every unit done (the parity check is next), status said nothing
    moves, and pause, throttle and resume said "moving at up to 20": they read the state
    alone. They read the units too now, as status does."""
    from shardex.commands.controls import _migration
    from shardex.migrate.control import Control, describe
    from shardex.stores.memory import MemoryStore

    store = MemoryStore(seed=1)
    await _put_pending(store, 40)
    async with Resharder(store, "orders", rate=20.0, worker="a", seed=1, **FAST) as rs:
        await rs.start({"PENDING": ShardPolicy(4)}, margin=0.5)
        await rs.run(until="write-new")
        migration, still = await _migration(store, "orders", "reshard")
        assert still is None  # the mover moves
        await rs._move(await rs.routing())  # the mover alone: a run checks parity next
        routing = await rs.routing()
        assert routing.state == "write-new"
        assert all(unit.done for unit in await rs.units(routing))
        found, still = await _migration(store, "orders", "reshard")
        assert found == migration
        said = describe(Control(rate=20.0), None, f"nothing moves in {still}")
        assert said == "up to 20 write units a second per shard key; nothing moves in " \
            "write-new (every unit is moved)", said


def test_complete_that_loses_a_race_says_another_process_completed_the_reshard(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Of two 'reshard complete' at once, the one whose write found the reshard ended
    said run's 'reshard stopped at done: no reshard is under way: the routing is stable'
    (on DynamoDB Local). Its runner's result is made up here: the race is the store's."""
    import shardex.commands.reshard as command
    from shardex.cli import main
    from shardex.migrate.reporting import RunResult

    lost = RunResult("done", "no reshard is under way: the routing is stable",
                     Routing(version=7))
    monkeypatch.setattr(command, "lasting", lambda *args, **kwargs: None)
    monkeypatch.setattr(command, "_run", lambda *args, **kwargs: lost)
    main(["reshard", "complete", "--store", "memory://", "--index", "orders"])
    said = " ".join(capsys.readouterr().out.split())
    assert said == "index 'orders': the reshard had already ended, completed by another " \
        "process (routing version 7, stable)", said


@pytest.mark.parametrize("error", [shardex.RoutingStale("the routing of index 'orders' is "
                                                        "stale: not refreshed for 31 s"),
                                   shardex.Unavailable("the store did not answer")])
def test_a_run_whose_store_went_away_says_what_stopping_leaves(error: Exception) -> None:
    """A run whose store stopped answering ended with the routing's staleness alone, not
    what state it left or what to do (a Ctrl-C's line says both)."""
    from shardex.commands.migrations import on_interrupt

    def work() -> None:
        raise error

    async def status() -> dict[str, Any]:
        raise AssertionError("a store that does not answer is not read again")

    with pytest.raises(shardex.ShardexError) as stopped:
        on_interrupt(work, status, "reshard")
    said = str(stopped.value)
    assert said.startswith(str(error) + "; safe to stop: every step and checkpoint stored is "
                           "kept, and the units this process held lapse with their lease; "), said
    assert said.endswith("to see where it stands: shardex reshard status"), said
