"""The autopilot reading heat from a JSON Lines file (``--source file:PATH``), on virtual
time: a bad line skips only itself, and a key the file stops listing (or lists only in
the past) counts as no load instead of keeping its last heat for ever.

A dry run's loop is ticked by hand against memory://; its partition ceiling is 10 write
units a second, so 1,000 is hot.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import shardex
from shardex.autopilot import (
    Autopilot,
    AutopilotPolicy,
    BadHeatLines,
    FileHeat,
    PlannerSizer,
    TableFacts,
)
from shardex.autopilot.runner import Runner
from shardex.clock import LoopClock
from shardex.sim.profiles import profile

INDEX = "orders"
POLICY = AutopilotPolicy(t_up=5, t_down=30, tick=1, trend=5, lead=5, min_interval=10,
                         retain=5, max_shards=16)


def line(t: float, key: str, write_units: float, **more: Any) -> str:
    return json.dumps({"t": t, "key": key, "write_units": write_units, **more}) + "\n"


def pilot(store: shardex.Store, path: Path) -> Autopilot:
    table = profile("dynamodb-on-demand", write_ceiling=10.0, partitions=0)
    return Autopilot(Runner(store, INDEX, rate=100, worker="w"), policy=POLICY,
                     source=FileHeat(path), facts=TableFacts(10.0),
                     size=PlannerSizer(table, namespace=INDEX), dry_run=True)


async def routed(store: shardex.Store) -> None:
    async with shardex.ShardedIndex(store, INDEX, routing=shardex.Routing()) as index:
        await index.put("PENDING", "o-1", sort="0")


async def ticked(path: Path, seconds: int, step: Callable[[int, float], str]
                 ) -> list[dict[str, float]]:
    """Each second for ``seconds``, append ``step(second, now)`` to ``path`` (a step may
    rotate the file first) and tick a dry run's loop that reads it: each tick's last heat
    of every key."""
    store = shardex.open_store("memory://")
    await routed(store)
    clock = LoopClock()
    autopilot = pilot(store, path)
    lasts = []
    async with autopilot:
        for second in range(seconds):
            text = step(second, clock.wall())
            with path.open("a") as out:
                out.write(text)
            await autopilot.tick()
            lasts.append({key: window.summary().last
                          for key, window in autopilot.windows.items()})
            await clock.sleep(1.0)
    return lasts


def test_a_bad_line_skips_itself_not_the_good_lines_after_it(tmp_path: Path) -> None:
    """The read advanced past the whole chunk and raised at the bad line: the good lines
    after it in the same read were never counted."""
    path = tmp_path / "heat.jsonl"

    async def main() -> None:
        store = shardex.open_store("memory://")
        await routed(store)
        now = LoopClock().wall()
        path.write_text(line(now, "PENDING", 5.0) + "not json\n" + line(now, "SHIPPED", 7.0)
                        + '{"t": 1}\n' + line(now, "HELD", 2.0))
        with pytest.raises(BadHeatLines) as raised:
            await FileHeat(path).read(now)
        assert [s.key for s in raised.value.samples] == ["PENDING", "SHIPPED", "HELD"]
        assert f"{path}:2: not a heat sample" in str(raised.value)
        assert "(and 1 more bad line(s) in this read)" in str(raised.value)

        autopilot = pilot(store, path)
        async with autopilot:
            await autopilot.tick()
            assert {k: w.summary().last for k, w in autopilot.windows.items()} == {
                "PENDING": 5.0, "SHIPPED": 7.0, "HELD": 2.0}
            entries = await autopilot.records.log()
        fails = [e.reason for e in entries if e.action == "heat" and e.outcome == "fail"]
        assert len(fails) == 1, fails
        assert f"{path}:2:" in fails[0]
        assert "3 good sample(s) of this read taken" in fails[0]

    shardex.run_virtual(main())


def test_a_sample_stamped_where_no_heat_of_now_is_a_bad_line(tmp_path: Path) -> None:
    """t in milliseconds made the first tick propose a grow 'above 80% of capacity for
    3 s' from one sample; a t of 1e20 hid a real sample beside it, and a thousandth of the
    seconds (1970) read as no load, all without a word; a span of 1e308 was taken."""
    path = tmp_path / "heat.jsonl"

    async def main() -> None:
        store = shardex.open_store("memory://")
        await routed(store)
        now = LoopClock().wall()
        path.write_text(line(now * 1000, "PENDING", 5000.0) + line(1e20, "SHIPPED", 1.0)
                        + line(now / 1000, "HELD", 9000.0)
                        + line(now, "LATE", 1.0, span=1e308) + line(now, "REAL", 5000.0))
        with pytest.raises(BadHeatLines) as raised:
            await FileHeat(path).read(now)
        assert [s.key for s in raised.value.samples] == ["REAL"]
        said = str(raised.value)
        assert f"{path}:1: not a heat sample (t {now * 1000:.6g} is " in said
        assert "ahead of now: t is wall seconds since the epoch (milliseconds?))" in said
        assert "(and 3 more bad line(s) in this read)" in said
        for bad, words in ((line(now / 1000, "HELD", 1.0), "s before now: t is wall seconds"),
                           (line(now, "LATE", 1.0, span=1e308), r"span 1e\+308 is over a day")):
            path.write_text(bad)
            with pytest.raises(BadHeatLines, match=words):
                await FileHeat(path).read(now)

        path.write_text(line(now * 1000, "PENDING", 5000.0))
        autopilot = pilot(store, path)
        async with autopilot:
            decisions = await autopilot.tick()
        assert not [d for d in decisions if d.action == "grow"], decisions

    shardex.run_virtual(main())


def test_samples_of_the_past_are_not_todays_heat(tmp_path: Path) -> None:
    """An hour-old hot minute in the file was measured against its own last sample: the
    first tick proposed a grow for a key with no load now."""
    path = tmp_path / "heat.jsonl"

    async def main() -> None:
        store = shardex.open_store("memory://")
        await routed(store)
        now = LoopClock().wall()
        path.write_text("".join(line(now - 3600 + i, "PENDING", 1000.0) for i in range(60)))
        autopilot = pilot(store, path)
        async with autopilot:
            decisions = await autopilot.tick()
        heat = autopilot.windows["PENDING"].summary()
        assert (heat.peak_up, heat.last) == (0.0, 0.0)
        assert not [d for d in decisions if d.key == "PENDING" and d.action == "grow"], \
            decisions

    shardex.run_virtual(main())


def test_a_key_the_file_stops_listing_cools_after_two_spans(tmp_path: Path) -> None:
    """The file's last heat of a key was kept for ever (the source is not complete, so
    the loop never zero-filled it); now it counts as no load once its last sample is two
    spans (at least two ticks) old, while a key still listed keeps its heat."""
    path = tmp_path / "heat.jsonl"
    path.write_text("")

    def step(second: int, now: float) -> str:
        return line(now, "SHIPPED", 3.0, span=2) \
            + (line(now, "PENDING", 8.0, span=2) if second < 4 else "")

    lasts = [(last["PENDING"], last["SHIPPED"])
             for last in shardex.run_virtual(ticked(path, 12, step))]
    # listed up to second 3; cold once that sample is over two spans (4 s) old
    assert [p for p, _ in lasts[:7]] == [8.0] * 7, lasts
    assert [p for p, _ in lasts[8:]] == [0.0] * 4, lasts
    assert all(s == 3.0 for _, s in lasts), lasts


@pytest.mark.parametrize("rotation", ["copytruncate", "moved"])
def test_a_rotated_file_is_read_from_its_start(tmp_path: Path, rotation: str) -> None:
    """A file emptied in place (logrotate's copytruncate) or moved aside and created anew
    was read on from the old file's offset: nothing, or from the middle of a line once it
    grew past it, so a key at twice its capacity read as no load and was shrunk. Every
    sample the tool appends after the rotation is read."""
    path = tmp_path / "heat.jsonl"

    def step(second: int, now: float) -> str:
        if second == 0:  # the last minute, before the loop's first read
            return "".join(line(now - 60 + i, "PENDING", 900.0) for i in range(60)) \
                + line(now, "PENDING", 900.0)
        if second == 10:
            if rotation == "moved":
                path.rename(tmp_path / "heat.jsonl.1")
            path.write_text("")
        return line(now, "PENDING", 20.0 if second >= 10 else 900.0)

    lasts = [last["PENDING"] for last in shardex.run_virtual(ticked(path, 40, step))]
    assert lasts[:10] == [900.0] * 10, lasts
    assert lasts[10:] == [20.0] * 30, lasts


def test_a_file_that_grows_again_past_the_old_offset_is_read_from_its_start(
        tmp_path: Path) -> None:
    """Emptied in place, then grown past what was read before the next read: the read
    took the new file from the old offset, the middle of a line."""
    path = tmp_path / "heat.jsonl"
    now = LoopClock().wall()
    path.write_text("".join(line(now - 10 + i, "PENDING", 900.0) for i in range(10)))
    source = FileHeat(path)

    async def main() -> None:
        assert len(await source.read(now)) == 10
        path.write_text("".join(line(now - 30 + i, "SHIPPED", 5.0) for i in range(30)))
        again = await source.read(now)
        assert [(s.key, s.write_units) for s in again] == [("SHIPPED", 5.0)] * 30

    shardex.run_virtual(main())
