"""The sweep of a reshard's retired keys: what is still on the keys only the layout being
left has (a rolled-back tier move's copies, an entry the mover missed), moved or removed
at the migration's rate and under its controls, each key by the one runner that claims
it."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from typing import Any

import pytest

from shardex import ShardedIndex
from shardex.clock import LoopClock
from shardex.migrate.budget import Sharing
from shardex.migrate.control import change_control
from shardex.migrate.tiered import TierLayouts
from shardex.model.entries import StoredEntry
from shardex.reshard import Resharder, RunResult
from shardex.sim.clock import run_virtual
from shardex.stores.memory import MemoryStore
from tests.test_reshard import MARGIN, listing
from tests.test_tier_move import P, app_of, resharder


def test_two_runners_sweeping_at_once_name_no_row_that_is_gone() -> None:
    """Two runners swept the same retired keys (a rollback's, and a run that followed it):
    a row the other one swept between this one's listing and its move was named "a row of
    'b-0011' on retired key '#dedicated#BIG#1' has no placement: remove it with the
    store's own tools", ten of them, rows that no longer existed (by hand on DynamoDB
    Local). A row is named only if it is still there."""
    async def main() -> None:
        main_store, dedicated = MemoryStore(seed=3), MemoryStore(seed=4)
        tiers = {"dedicated": dedicated}
        async with app_of(main_store, tiers) as app, resharder(main_store, tiers) as first, \
                resharder(main_store, tiers, seed=6) as second:
            await _at_the_sweep(first, app, 6)
            routing = await first.routing()
            moving = second.layouts.move

            async def raced(entry: Any, **options: Any) -> bool:
                assert await first.layouts.move(entry, **options)  # the other runner, first
                return await moving(entry, **options)

            second.layouts.move = raced  # type: ignore[method-assign]
            await first._moving.refresh_routing()
            swept = await second._sweep(routing)
            assert (swept.moved, swept.cleared, swept.ghosts) == (0, 0, [])

    run_virtual(main())


def test_a_rollback_between_tiers_counts_the_copies_its_sweep_removes_as_removed() -> None:
    """Seen on Cosmos DB: a tier move rolled back from verified ended 'the sweep moved
    2,928 entries left on retired keys', which reads as the rollback's mover having
    missed every entry; it had moved them all back, and the sweep removed the copies it
    leaves on the tier until then. The result and the run's line count those apart."""
    async def main() -> RunResult:
        main_store, hot = MemoryStore(seed=3), MemoryStore(seed=4)
        tiers = {"hot": hot}
        async with app_of(main_store, tiers) as app:
            for i in range(30):
                await app.put("PENDING", f"o-{i:03d}", sort=f"{i:03d}")
            async with resharder(main_store, tiers) as rs:
                await rs.start({"PENDING": P(4, tier="hot")}, margin=MARGIN)
                assert (await rs.run(until="verified")).swept == 0
                result = await rs.rollback()
            assert len(await listing(app, "PENDING")) == 30
        return result

    result = run_virtual(main())
    assert (result.state, result.swept, result.cleared) == ("done", 0, 30)
    text = _finished_text(result)
    assert "the sweep removed 30 copies the rollback left on the tier it left" in text, text
    assert "the sweep moved" not in text


def _finished_text(result: RunResult) -> str:
    """What ``reshard run`` prints as it ends with ``result``."""
    import io

    import click
    from rich.console import Console

    from shardex.commands.reshard_progress import finished

    printed = io.StringIO()
    with click.Context(click.Command("run")):  # as in the command
        finished(Console(file=printed, width=300), result, "memory://", "orders")
    return printed.getvalue()


async def _at_the_sweep(rs: Resharder, app: ShardedIndex, entries: int, keys: int = 2) -> str:
    """BIG's ``entries`` moved onto ``keys`` keys of tier ``dedicated`` and rolled back up
    to ``retired``: every entry back in the index's store, each one's copy left on the
    tier for the sweep to remove. The migration's id."""
    for i in range(entries):
        await app.put("BIG", f"b-{i:04d}", sort=f"{i:04d}")
    await rs.start({"BIG": P(keys, tier="dedicated")}, margin=MARGIN)
    await rs.run(until="verified")
    run = rs.run
    rs.run = lambda until="done": run(until="verified")  # type: ignore[method-assign]
    await rs.rollback()
    rs.run = run  # type: ignore[method-assign]
    assert (await rs.run(until="retired")).state == "retired"
    meta = (await rs.routing()).reshard
    assert meta is not None
    return meta.id


def _count_sweeps(monkeypatch: pytest.MonkeyPatch, clock: Any) -> dict[tuple[str, int], float]:
    """Count, per shard key and second, the write units of each of the sweep's moves and
    removals by the second it is sent, once on each key it writes (a removal's, the one
    write on its own store)."""
    sent: dict[tuple[str, int], float] = {}
    move = TierLayouts.move

    async def counted(self: TierLayouts, entry: StoredEntry, **kw: Any) -> str | None:
        second = int(clock.now())
        removal = self.removal(entry, kw["source"])
        landed = await move(self, entry, **kw)
        for key in {kw["source"], landed} - {None}:
            sent[key, second] = sent.get((key, second), 0.0) + (
                self.cost(entry) if removal is None else removal)
        return landed

    monkeypatch.setattr(TierLayouts, "move", counted)
    return sent


@pytest.mark.parametrize("runners", [1, 2])
def test_the_sweep_keeps_to_the_migration_s_rate(runners: int,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A tier move rolled back leaves a copy of each entry on the tier, which the sweep
    removes: as many writes as the move made. The sweep paced itself at the runner's own
    --rate, whatever the migration's controls said (a ``throttle --rate 10`` left it at
    500), and each runner sweeping on its own: two of them put twice the rate on a key."""
    async def main() -> None:
        main_store, dedicated = MemoryStore(seed=3), MemoryStore(seed=4)
        tiers = {"dedicated": dedicated}
        async with app_of(main_store, tiers) as app, \
                resharder(main_store, tiers, sharing=Sharing(poll=0.5)) as rs, \
                resharder(main_store, tiers, sharing=Sharing(poll=0.5), seed=7,
                          worker="second") as other:
            migration = await _at_the_sweep(rs, app, 200)
            clock = LoopClock()
            await change_control(main_store, "orders", migration,
                                 lambda c: replace(c, rate=10.0), clock=clock)
            sent = _count_sweeps(monkeypatch, clock)
            results = await asyncio.gather(*(r.run(until="done") for r in (rs, other)[:runners]))
            assert [r.state for r in results] == ["done"] * runners
            assert sum(r.cleared for r in results) == 200
            assert await _left_on(dedicated) == 0
            assert max(sent.values()) <= 10.0 + 1e-6, \
                sorted(sent.items(), key=lambda kv: -kv[1])[:4]

    run_virtual(main())


@pytest.mark.parametrize("workers", [1, 4])
def test_the_sweep_keeps_every_key_busy_at_the_rate(workers: int,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A rolled-back tier move's copies on four keys of the tier: the sweep removed them one
    at a time, one key after another, each paced as a whole tier move (4 units, where a
    removal is one write on the tier's store, 2) and charged to the key the value's
    entries are on too: 800 copies at 250 write units a second took 18.2 s with one
    worker and 18.4 s with four, where the rate allows 6.4 s and 1.6 s. Now each retired
    key drains at the rate, ``--workers`` keys at once (6.9 s and 2.0 s), and no key
    takes more than the rate in any second."""
    rate, entries, keys = 250.0, 800, 4

    async def main() -> float:
        main_store, dedicated = MemoryStore(seed=3), MemoryStore(seed=4)
        tiers = {"dedicated": dedicated}
        async with app_of(main_store, tiers) as app, \
                resharder(main_store, tiers, rate=rate, workers=workers) as rs:
            await _at_the_sweep(rs, app, entries, keys)
            clock = LoopClock()
            sent = _count_sweeps(monkeypatch, clock)
            began = clock.now()
            result = await rs.run(until="done")
            took = clock.now() - began
            assert (result.state, result.cleared) == ("done", entries)
            assert await _left_on(dedicated) == 0
            assert max(sent.values()) <= rate + 1e-6, \
                sorted(sent.items(), key=lambda kv: -kv[1])[:4]
            return took

    took = run_virtual(main())
    cost = 2.0  # one write on the tier's store, a transaction: what a removal costs
    least = entries * cost / rate / min(workers, keys)
    assert least <= took <= least * 1.1 + 0.5, (took, least)  # + claims, first page


def test_runners_share_the_sweep_and_do_not_repeat_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every runner in ``retired`` swept every retired key: with the budget shared, each
    spent it on removals another had made, so more runners took longer (one worker
    each: 6.9 s alone, 11.8 s with two, the tier read twice as much; with four workers
    each, 2.1 s alone and 16.7 s with four runners). Each retired key is now swept by the
    one runner that claims it, the others sweeping the rest and waiting for the keys
    others hold: every removal is sent once and the tier read once, whatever the
    runners, and more runners take less time (each runner's slice of the budget is the
    whole rate on the keys it alone sweeps: with a share of every key, two runners had
    taken 1.36x one runner's time and four 1.54x)."""
    entries = 800

    def sweep(runners: int) -> tuple[float, float, float]:
        async def main() -> tuple[float, float, float]:
            main_store, dedicated = MemoryStore(seed=3), MemoryStore(seed=4)
            tiers = {"dedicated": dedicated}
            async with contextlib.AsyncExitStack() as stack:
                app = await stack.enter_async_context(app_of(main_store, tiers))
                each = [await stack.enter_async_context(resharder(
                    main_store, tiers, rate=250.0, workers=1, seed=10 + i, worker=f"w{i}",
                    sharing=Sharing(poll=0.5))) for i in range(runners)]
                await _at_the_sweep(each[0], app, entries, 4)
                read = dedicated.stats("orders").totals.read_units
                sent = _count_sweeps(monkeypatch, main_store.clock)
                began = main_store.clock.now()
                results = await asyncio.gather(*(r.run(until="done") for r in each))
                took = main_store.clock.now() - began
                assert [r.state for r in results] == ["done"] * runners
                assert sum(r.cleared for r in results) == entries
                # each says how many of the four keys it swept, together all four once
                assert sum(r.swept_keys[0] for r in results) == 4
                assert {r.swept_keys[1] for r in results} == {4}
                assert [g for r in results for g in r.ghosts] == []
                # each ends with the last parity report, whichever runner checked
                assert all(r.parity is not None and r.parity.clean for r in results)
                assert await _left_on(dedicated) == 0
                return took, dedicated.stats("orders").totals.read_units - read, \
                    sum(sent.values())

        return run_virtual(main())

    alone, read, units = sweep(1)
    assert units == entries * 2.0  # one write on the tier's store a removal
    for runners in (2, 4):
        took, reads, spent = sweep(runners)
        assert spent == units, (runners, spent, units)
        assert reads <= read * 1.05, (runners, reads, read)
        assert took <= alone * 0.8, (runners, took, alone)


@pytest.mark.shardex_virtual
async def test_a_job_claim_is_one_runner_s_till_it_is_done_or_its_lease_lapses() -> None:
    from shardex.errors import MalformedItem
    from shardex.migrate.work import Claim, WorkRecords

    store, clock = MemoryStore(seed=1), LoopClock()
    records = WorkRecords(store, "orders", "r1", clock=clock)
    claim, held = await records.claim(2, "sweep-00000", "a", 2.0)
    assert (claim.owner, held) == ("a", 1)
    assert (await records.claim(2, "sweep-00000", "b", 2.0))[1] is None  # a's
    assert (await records.claim(2, "sweep-00000", "a", 2.0))[1] == 2  # renewed
    await clock.sleep(2.5)
    claim, held = await records.claim(2, "sweep-00000", "b", 2.0)  # a's lapsed: b's
    assert (claim.owner, held) == ("b", 3)
    await records.finish(2, "sweep-00000", "a")  # not a's any more: b marks it
    assert not (await records.claim(2, "sweep-00000", "c", 2.0, seen=True))[0].done
    await records.finish(2, "sweep-00000", "b")
    claim, held = await records.claim(2, "sweep-00000", "c", 2.0)
    assert (claim.done, held) == (True, None)
    # the migration ended and its records were cleaned up: a runner that saw the job
    # claimed takes it as done, and writes no record that outlives the migration
    assert await records.cleanup() == 1
    assert (await records.claim(2, "sweep-00000", "c", 2.0, seen=True)) == (Claim(done=True),
                                                                          None)
    assert await store.list_records("orders", "reshard/") == {}
    await store.put_record("orders", "reshard/r1/0002/job/sweep-00001", {"done": "yes"},
                           expected=None)
    with pytest.raises(MalformedItem, match=r"'reshard/r1/0002/job/sweep-00001' of index "
                       r"'orders' in memory://\?seed=1 is not a migration job's claim"):
        await records.claim(2, "sweep-00001", "a", 2.0)


@pytest.mark.shardex_virtual
async def test_a_held_claim_outlasts_a_store_that_does_not_answer_a_renewal(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A renewal the store does not answer is tried again at the next: the first error
    had ended the renewals, silently, and another runner took the job over while its
    holder still worked on it."""
    from shardex.errors import Unavailable
    from shardex.migrate.work import WorkRecords

    store, clock = MemoryStore(seed=1), LoopClock()
    records = WorkRecords(store, "orders", "r1", clock=clock)
    assert (await records.claim(2, "sweep-00000", "a", 2.0))[1] is not None
    claim = WorkRecords.claim
    calls = 0

    async def unanswered_once(self: WorkRecords, *args: Any, **kw: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise Unavailable("the store does not answer")
        return await claim(self, *args, **kw)

    monkeypatch.setattr(WorkRecords, "claim", unanswered_once)
    async with records.holding(2, "sweep-00000", "a", 2.0):
        await clock.sleep(5.0)  # two and a half leases
        monkeypatch.setattr(WorkRecords, "claim", claim)
        assert (await records.claim(2, "sweep-00000", "b", 2.0))[1] is None  # still a's
    assert calls > 1


@pytest.mark.shardex_virtual
async def test_a_claim_taken_over_stops_its_holders_work(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A holder that stood still past its lease, another runner having taken the job over
    meanwhile, stops the job as its renewal finds the other's claim (TakenOver): it went
    on to the job's end beside the new holder, both spending the budget on it. The new
    holder's claim stays its own."""
    from shardex.migrate.work import TakenOver, WorkRecords

    store, clock = MemoryStore(seed=1), LoopClock()
    records = WorkRecords(store, "orders", "r1", clock=clock)
    assert (await records.claim(2, "sweep-00000", "a", 2.0))[1] is not None
    claim = WorkRecords.claim

    async def standing_still(self: WorkRecords, generation: int, job: str, owner: str,
                             *args: Any, **kw: Any) -> Any:
        if owner == "a":
            await clock.sleep(3.0)  # a's renewal is held past its lease
        return await claim(self, generation, job, owner, *args, **kw)

    worked = 0.0

    async def holder() -> None:
        nonlocal worked
        async with records.holding(2, "sweep-00000", "a", 2.0):
            await clock.sleep(2.5)  # a's lease has lapsed: b takes the job
            assert (await claim(records, 2, "sweep-00000", "b", 2.0))[1] is not None
            while clock.now() < 30.0:  # a works on, a second at a time
                await clock.sleep(1.0)
                worked = clock.now()

    monkeypatch.setattr(WorkRecords, "claim", standing_still)
    with pytest.raises(TakenOver, match=r"sweep-00000 .*taken over by b"):
        await holder()
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
    assert 3.0 < worked < 4.0  # stopped by a's first renewal after b's claim (3.7 s)
    held, mine = await claim(records, 2, "sweep-00000", "c", 2.0)
    assert (held.owner, mine) == ("b", None)


def test_a_sweep_taken_over_stops_and_waits_for_the_new_holder() -> None:
    """Another runner takes a key's sweep over while this one's renewal was held (it stood
    still past its lease): this runner stops sweeping the key, removes nothing there
    while the other's claim runs, then, the other gone, takes the key again and ends
    the sweep; every copy is removed once, and the run counts each."""
    from shardex.migrate.sweep import _sweep_job
    from shardex.migrate.work import Claim, WorkRecords

    async def main() -> None:
        main_store, dedicated = MemoryStore(seed=3), MemoryStore(seed=4)
        tiers = {"dedicated": dedicated}
        clock = LoopClock()
        claim, move = WorkRecords.claim, TierLayouts.move
        taken: dict[str, float] = {}  # the job taken over, till when the other holds it
        removed: list[tuple[str, float]] = []

        async def renewed(self: WorkRecords, generation: int, job: str, owner: str,
                          lease: float, *, seen: bool = False) -> Any:
            if seen and job.startswith("sweep-") and not taken:
                # the other runner's claim, written as this one's renewal was held
                key = self._job(generation, job)
                record = await self._get(key)
                assert record is not None
                taken[job] = clock.wall() + 3.0
                await self._put(key, Claim(owner="b", expires=taken[job]).to_body(),
                                record.revision)
            return await claim(self, generation, job, owner, lease, seen=seen)

        async def counted(self: TierLayouts, entry: StoredEntry, **kw: Any) -> str | None:
            removed.append((kw["source"], clock.wall()))
            return await move(self, entry, **kw)

        with pytest.MonkeyPatch.context() as patch:
            async with app_of(main_store, tiers) as app, \
                    resharder(main_store, tiers, rate=40.0) as rs:
                await _at_the_sweep(rs, app, 120)
                patch.setattr(WorkRecords, "claim", renewed)
                patch.setattr(TierLayouts, "move", counted)
                result = await rs.run(until="done")
        assert (result.state, result.cleared) == ("done", 120)
        assert await _left_on(dedicated) == 0
        (job, until), = taken.items()
        key, = {source for source, _ in removed if _sweep_job(source) == job}
        during = [at for source, at in removed if source == key and until - 2.5 < at < until]
        assert during == []  # stopped while the other held the key
        assert len(removed) == 120  # each copy removed once

    run_virtual(main())


def test_a_paused_sweep_waits_for_resume() -> None:
    """Paused, the sweep went on removing (it never looked at the controls); it waits now,
    and the run says why it stands, as a paused mover does. Status lists the sweeping
    runner and suggests no other `run` (it listed none, suggested `run --until done`, and
    said "nothing moves in retired", as `pause` did, while the sweep moved)."""
    from shardex.commands.controls import _migration
    from shardex.commands.reshard import _status_lines
    from shardex.migrate.budget import migration_status
    from shardex.migrate.status import status_document, with_controls

    async def status(rs: Resharder, migration: str) -> dict[str, Any]:
        routing = await rs.routing()
        doc = status_document(routing, await rs.units(routing), index="orders",
                              store="memory://", lease=rs.lease,
                              now=rs.store.clock.wall(), max_age=900.0,
                              sweeps=await rs.sweeps(routing))
        return with_controls(doc, await migration_status(rs.store, "orders", migration,
                                                         clock=LoopClock()), "reshard")

    async def main() -> None:
        main_store, dedicated = MemoryStore(seed=3), MemoryStore(seed=4)
        tiers = {"dedicated": dedicated}
        notes: list[str] = []
        async with app_of(main_store, tiers) as app, \
                resharder(main_store, tiers, sharing=Sharing(poll=0.5),
                          progress=lambda p: notes.append(p.note)) as rs:
            migration = await _at_the_sweep(rs, app, 60)
            clock = LoopClock()
            await change_control(main_store, "orders", migration, lambda c: replace(
                c, paused=True, paused_by="ops@host"), clock=clock)
            assert await _left_on(dedicated) == 60
            running = asyncio.ensure_future(rs.run(until="done"))
            await clock.sleep(10.0)
            assert not running.done()
            assert await _left_on(dedicated) == 60
            assert "paused by ops@host; resume to go on" in notes, notes[-5:]
            doc = await status(rs, migration)
            assert [(r["owner"], r["waiting"]) for r in doc["runners"]] == [
                (rs.worker, "sweeping the retired keys")], doc["runners"]
            assert not any(" run " in step for step in doc["next_steps"]), doc["next_steps"]
            # how far the sweep is: status had said nothing of it, however long it took
            assert doc["sweep"] == {"keys": 2, "swept": 0, "sweeping": 1}, doc["sweep"]
            assert "  sweep: 0 of 2 retired keys swept, 1 being swept" in _status_lines(doc)
            assert await _migration(main_store, "orders", "reshard") == (migration, None)
            await change_control(main_store, "orders", migration,
                                 lambda c: replace(c, paused=False, rate=8.0), clock=clock)
            await clock.sleep(2.0)
            lines = _status_lines(await status(rs, migration))
            assert any(line.startswith("  controls: moving at up to 8 write units a second")
                       for line in lines), lines
            await clock.sleep(8.0)  # a key's 30 removals at 2 units, 8 units a second
            assert (await status(rs, migration))["sweep"] == {"keys": 2, "swept": 1,
                                                              "sweeping": 1}
            result = await running
            assert (result.state, result.cleared) == ("done", 60)

    run_virtual(main())


def test_a_throttled_sweep_slows_down_and_finishes() -> None:
    """The store the sweep removes copies from throttles one request in three (83
    throttles in this sweep): the sweep slows down and tries again, and ends with every
    copy removed."""
    async def main() -> None:
        main_store = MemoryStore(seed=3)
        dedicated = MemoryStore(seed=4, throttle_rate=0.3)
        tiers = {"dedicated": dedicated}
        async with app_of(main_store, tiers) as app, resharder(main_store, tiers) as rs:
            await _at_the_sweep(rs, app, 60)
            result = await rs.run(until="done")
            assert (result.state, result.cleared) == ("done", 60)
            assert await _left_on(dedicated) == 0

    run_virtual(main())


async def _left_on(store: MemoryStore) -> int:
    """How many entries of index ``orders`` ``store`` holds."""
    left = 0
    for key in store.shard_keys("orders"):
        page = await store.query("orders", key, after=None, descending=False, limit=1000)
        left += len(page.entries)
    return left


@pytest.mark.parametrize(("keys", "said"), [((2, 4), True), ((4, 4), False), ((0, 0), False)])
def test_a_runner_s_last_lines_say_when_others_swept_some_keys(keys: tuple[int, int],
                                                               said: bool) -> None:
    """Each runner's last lines count its own sweep: beside other runners, 502 of 1,000
    copies read as the whole sweep's count. It says how many retired keys it swept."""
    from shardex import Routing

    text = _finished_text(RunResult(state="done", why="the reshard is done",
                                    routing=Routing(), cleared=502, swept_keys=keys))
    assert "the sweep removed 502 copies" in text
    line = f"this runner swept {keys[0]} of the {keys[1]} retired keys: other runners swept"
    assert (line in text) == said, text


@pytest.mark.parametrize("answers", [True, False])
def test_a_runner_that_sweeps_after_the_end_leaves_no_record(
        answers: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A runner that saw ``retired`` reaches the sweep after another ended the migration
    (and deleted its records): the claims it writes as it sweeps nothing outlived it, in
    the index's records, until the next migration began. If the store does not answer
    then, the run still ends as the reshard did (a later start cleans them up)."""
    if not answers:
        from shardex.errors import Unavailable
        from shardex.migrate.work import WorkRecords

        cleanup = WorkRecords.cleanup

        async def unanswered(self: WorkRecords, **kw: Any) -> int:
            if kw.get("only"):  # the late runner's, not the ending runner's
                raise Unavailable("the store does not answer")
            return await cleanup(self, **kw)

        monkeypatch.setattr(WorkRecords, "cleanup", unanswered)

    async def main() -> None:
        main_store, dedicated = MemoryStore(seed=3), MemoryStore(seed=4)
        tiers = {"dedicated": dedicated}
        async with contextlib.AsyncExitStack() as stack:
            app = await stack.enter_async_context(app_of(main_store, tiers))
            first, late = [await stack.enter_async_context(resharder(
                main_store, tiers, rate=250.0, seed=10 + i, worker=f"w{i}",
                sharing=Sharing(poll=0.5))) for i in range(2)]
            migration = await _at_the_sweep(first, app, 40)
            ended = asyncio.Event()
            sweep = late._sweep

            async def after_the_end(routing: Any) -> Any:
                await ended.wait()  # the other runner ended it meanwhile
                return await sweep(routing)

            late._sweep = after_the_end  # type: ignore[method-assign]
            slow = asyncio.ensure_future(late.run(until="done"))
            await asyncio.sleep(1.0)
            assert (await first.run(until="done")).state == "done"
            ended.set()
            assert (await slow).state == "done"
            left = await main_store.list_records("orders", f"reshard/{migration}/")
            assert not left or not answers, sorted(left)

    run_virtual(main())
