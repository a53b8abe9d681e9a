"""What a reshard shows an operator: ``shardex.metrics`` gauges the runner reports to
(virtual time), and the progress bar of ``reshard run`` on a terminal.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from io import StringIO
from itertools import pairwise
from typing import Any

import pytest
from rich.console import Console

from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.commands.reshard_progress import Reporter
from shardex.metrics import MetricsRecorder
from shardex.migrate import mover
from shardex.reshard import Progress, Resharder
from shardex.sim.clock import run_virtual
from shardex.stores.memory import MemoryStore


def test_the_runner_reports_state_progress_parity_and_versions() -> None:
    async def main() -> None:
        store = MemoryStore(seed=3)
        recorder = MetricsRecorder().attach(store)
        seen: list[dict[str, object]] = []
        async with ShardedIndex(store, "orders", Routing(), routing_lease=3.0) as app:
            for i in range(120):
                await app.put("PENDING", f"o-{i}", sort=f"{i:04d}")
            version = app.routing.version

            def watch(_: object) -> None:
                seen.append(recorder.reshard("orders").to_dict())

            async with Resharder(store, "orders", seed=1, unit_lease=2.0, rate=50.0,
                                 recorder=recorder, progress=watch) as rs:
                await rs.start({"PENDING": ShardPolicy(8)}, margin=0.5)
                gauges = recorder.reshard("orders").to_dict()
                assert gauges["state"] == "read-both"
                assert gauges["from_version"] == version
                assert gauges["to_version"] == version + 1
                await rs.run()
                gauges = recorder.reshard("orders").to_dict()
                assert gauges["state"] == "verified"
                assert gauges["total"] == gauges["moved"] > 90  # 7/8 of 120 move
                assert gauges["progress"] == 1.0
                assert gauges["mismatches"] == 0
                assert any(0 < g["moved"] < g["total"] for g in seen)  # type: ignore[operator]
                result = await rs.rollback()
                gauges = recorder.reshard("orders").to_dict()
                assert gauges["state"] == "rolled-back"
                assert gauges["to_version"] == result.routing.version
        scrape = {f.name: f for f in recorder.snapshot()}
        state = scrape["shardex_reshard_state"].samples
        assert [s.labels["state"] for s in state] == ["rolled-back"]

    run_virtual(main())


def test_the_progress_bar_counts_moves_and_keeps_the_count_through_other_steps() -> None:
    out = Console(file=StringIO(), force_terminal=True, width=140)
    with Reporter(out) as report:
        bar = report._bar
        assert bar is not None
        # before the mover nothing is counted: the bar has no total yet
        report(Progress("read-both", "forward", 0, None, None, "waiting 3 s for clients"))
        bar.refresh()
        report(Progress("write-new", "forward", 40, 60, 20.0, "moving entries"))
        bar.refresh()
        report(Progress("write-new", "forward", 100, 0, 20.0, "moved"))
        report(Progress("write-new", "forward", 0, None, None, "checking parity"))
        bar.refresh()
        assert (bar.tasks[0].completed, bar.tasks[0].total) == (100, 100)
    shown = out.file.getvalue()  # type: ignore[attr-defined]
    assert "40/100 moved" in shown
    assert "20 entries/s" in shown
    assert "write-new: checking parity" in shown
    assert "100/100 moved" in shown


def test_remaining_is_the_total_less_what_moved_while_nothing_races_the_mover() -> None:
    # 4 -> 6 keys: most entries stay where they are; they are not in the total,
    # and the mover's passing over them must not count against what remains
    reports = run_virtual(_reshard_reports(240, 4, 6, unit_lease=2.0))
    counted = [r for r in reports if r.total is not None and r.remaining is not None]
    assert counted
    total = counted[-1].total
    assert total is not None
    assert 0 < total < 240
    for report in counted:
        assert report.total == total
        assert report.remaining == total - report.moved, report
    assert any(0 < r.moved < total for r in counted)
    # its end read "write-new (forward): moved; moved 160, remaining 0"
    done = [r for r in reports if r.remaining == 0]
    assert done[0].note == "the mover is done", [r.note for r in done]


async def _reshard_reports(entries: int, shards: int, to: int, *, unit_lease: float
                           ) -> list[Progress]:
    """What a runner at rate 20 reports resharding P's ``entries`` from ``shards`` keys
    to ``to``, from its start to verified."""
    store = MemoryStore(seed=3)
    reports: list[Progress] = []
    async with ShardedIndex(store, "orders", Routing(overrides={"P": ShardPolicy(shards)}),
                            routing_lease=3.0) as app:
        for i in range(entries):
            await app.put("P", f"o-{i}", sort=f"{i:04d}")
        async with Resharder(store, "orders", seed=1, unit_lease=unit_lease, rate=20.0,
                             progress=reports.append) as rs:
            await rs.start({"P": ShardPolicy(to)}, margin=0.5)
            await rs.run()
    return reports


def test_a_wait_says_what_it_waits_for_every_say_every_seconds() -> None:
    """run --every set only the moving lines: the waiting lines came every 5 s."""
    async def said(every: float | None) -> list[str]:
        lines: list[str] = []
        async with Resharder(MemoryStore(seed=3), "orders", seed=1) as runner:
            if every is not None:
                runner.say_every = every
            wall = runner._clock.wall()
            await runner.wait_until(wall + 7.0, lines.append, "clients")
        return lines

    assert run_virtual(said(None)) == ["waiting 7 s for clients", "waiting 2 s for clients"]
    assert run_virtual(said(2.0)) == [f"waiting {s} s for clients" for s in (7, 5, 3, 1)]
    assert len(run_virtual(said(0.0))) == 7  # --every 0: every second


def test_the_rate_shown_while_moving_is_over_the_checkpoints_not_between_them() -> None:
    """The moved count comes from the units' checkpoints, a page or a third of the unit
    lease apart, and the rate was taken between two reports 2 s apart: while the mover
    moved a steady 9 entries a second it read 27, 0, 0, 27, 0, 0 (and `run` printed
    "0 entries/s" lines, by hand on Azurite). It is now taken over the last 30 s (at
    least a third of a unit lease), and is no rate at all before that."""
    reports = run_virtual(_reshard_reports(600, 2, 8, unit_lease=30.0))
    moving = [r for r in reports if r.note == "moving entries"]
    rates = [r.rate for r in moving if r.rate is not None]
    assert len(rates) > len(moving) // 2, [(r.moved, r.rate) for r in moving]
    assert min(rates) > 0.0, [(r.moved, r.rate) for r in moving]
    assert max(rates) < 2.5 * min(rates), [(r.moved, r.rate) for r in moving]


def test_a_unit_of_dear_moves_reads_a_page_every_quarter_lease(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages are sized for moves as dear as the last page's: entries of 4 KB at a rate of
    20 (10 units a move) come 15 to a page, a quarter of a 30 s lease, where a page sized
    for moves of 2 units held 75 of them, 37.5 s of moves (half of them in place: 19 s),
    the read-ahead and the page's checkpoint that far apart."""
    reads: list[tuple[float, int]] = []
    read_page = mover.read_page

    def timed(layouts: Any, key: str, after: Any, limit: int, pace: Any) -> Any:
        reads.append((asyncio.get_running_loop().time(), limit))
        return read_page(layouts, key, after, limit, pace)

    monkeypatch.setattr(mover, "read_page", timed)
    run_virtual(_reshard_dear(400, 4200))
    assert len(reads) >= 10, reads
    assert {limit for _, limit in reads[1:]} == {15}, reads
    assert max(b - a for (a, _), (b, _) in pairwise(reads[1:])) <= 30.0 / 4 * 1.5, reads


async def _reshard_dear(entries: int, nbytes: int,
                        report: Callable[[Progress], None] | None = None) -> None:
    """Reshard P's ``entries`` of about ``nbytes`` each from 2 keys to 4 at a rate of 20,
    with a unit lease of 30 s."""
    store = MemoryStore(seed=3)
    async with ShardedIndex(store, "orders", Routing(overrides={"P": ShardPolicy(2)}),
                            routing_lease=3.0) as app:
        for i in range(entries):
            await app.put("P", f"o-{i:04d}", sort=f"{i:04d}", attrs={"blob": "x" * nbytes})
        async with Resharder(store, "orders", seed=1, unit_lease=30.0, rate=20.0,
                             progress=report) as rs:
            await rs.start({"P": ShardPolicy(4)}, margin=0.5)
            await rs.run(until="verified")


def test_the_moved_count_grows_within_a_page_of_dear_moves() -> None:
    """Entries of 4 KB at a rate of 20 (10 units a move): a page sized for moves of 2
    units takes most of a lease to move. The unit's lease renewals record what moved so
    far, so the count grows every third of a lease; it stood at 0 for the first 24 s of
    moving, and at 55 for 18 s (by hand on DynamoDB Local: "moved 0 of 157" for 25 s
    while entries moved)."""
    seen: list[tuple[float, int]] = []

    def report(progress: Progress) -> None:
        if progress.note == "moving entries":
            seen.append((asyncio.get_running_loop().time(), progress.moved))

    run_virtual(_reshard_dear(160, 4200, report))
    changes = [seen[0][0]] + [at for (_, before), (at, moved) in pairwise(seen)
                              if moved != before]
    gaps = [b - a for a, b in pairwise(changes)]
    assert len(changes) > 3, seen
    assert max(gaps) <= 30.0 / 3 + 2.5, (gaps, seen)
