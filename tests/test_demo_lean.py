"""What keeps ``shardex demo`` fast: no garbage cycles a write, and a clock without a
system call a read.

A failed write used to leave a reference cycle (its error's traceback holds the write
machine's frames, whose locals hold the error), and the collector spent a quarter of the
unsharded run walking the survivors; ``LoopClock`` read the loop through
``asyncio.get_running_loop``, a ``getpid`` system call each time.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from shardex.clock import LoopClock, running_loop
from shardex.scenarios.demo_runs import _run_layout, start_demo
from shardex.scenarios.orders import DEMO_TABLE, OrdersLoad, demo_layouts, run_orders
from shardex.sim.clock import run_virtual


def test_an_unsharded_run_frees_its_failed_writes_without_the_collector() -> None:
    load = OrdersLoad(duration=0.3)
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        run = run_virtual(run_orders(load, demo_layouts(load)["unsharded"], layout="unsharded",
                                     seed=1, store_options=DEMO_TABLE))
        assert run.failed_writes > 500  # the hot key refused writes past their retries
        gc.collect()
        # what is left for the collector is the store and loop the run dropped, not a
        # traceback and its frames for each failed write
        left = [type(o).__name__ for o in gc.garbage]
        assert left  # the store, at least
        assert "traceback" not in left
        assert "frame" not in left
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def test_the_clock_reads_the_loop_running_now_in_this_thread() -> None:
    clock = LoopClock()
    with pytest.raises(RuntimeError):
        clock.now()

    async def virtual() -> tuple[float, asyncio.AbstractEventLoop]:
        await clock.sleep(5.0)
        return clock.now(), running_loop()

    at, first = run_virtual(virtual(), start=100.0)
    assert at == 105.0
    with pytest.raises(RuntimeError):  # that loop stopped: no loop runs here
        clock.now()

    async def real() -> asyncio.AbstractEventLoop:
        before = clock.now()
        assert before <= asyncio.get_running_loop().time()  # the real loop's monotonic time
        return running_loop()

    second = asyncio.run(real())
    assert second is not first
    seen: list[float] = []

    def other_thread() -> None:
        seen.append(run_virtual(_now_after(clock, 2.0), start=7.0))

    async def meanwhile() -> None:
        thread = threading.Thread(target=other_thread)
        thread.start()
        while thread.is_alive():
            assert clock.now() >= 50.0  # this thread's loop, whatever the other reads
            await asyncio.sleep(0.001)
        thread.join()

    run_virtual(meanwhile(), start=50.0)
    assert seen == [9.0]


async def _now_after(clock: LoopClock, seconds: float) -> float:
    await clock.sleep(seconds)
    return clock.now()


def test_the_demo_runs_apart_as_they_run_here() -> None:
    # start_demo runs each layout in a process of its own (forked when this process has
    # one thread, spawned otherwise): the figures are the ones the same runs give here
    load = OrdersLoad(duration=0.2)
    apart = start_demo(load, seed=3)()
    here = [_run_layout((load, routing, name, 3, DEMO_TABLE))
            for name, routing in demo_layouts(load).items()]
    assert [r.summary() for r in apart] == [r.summary() for r in here]
    assert [r.layout for r in apart] == ["unsharded", "sharded"]
    assert apart[0].failed_writes > 0
    assert apart[1].failed_writes == 0


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux: /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue  # ended meanwhile
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_runs_of_a_demo_stopped_before_it_waits_for_them_end_with_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An interrupt (Ctrl-C, or SIGTERM, which the command turns into one) that lands
    after the runs started and before the demo waits for them (a loaded host: its header
    is printed meanwhile) left them running for the whole simulation, and the demo's
    exit waited for them: the test below failed 3 runs in 8 on one loaded core."""
    import multiprocessing

    import shardex.commands.output as output
    from shardex.cli import main

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    before = set(multiprocessing.active_children())
    monkeypatch.setattr(output, "console", interrupted)
    with pytest.raises((KeyboardInterrupt, SystemExit)):
        main(["demo", "--json"])
    runs = [p for p in multiprocessing.active_children() if p not in before]
    deadline = time.monotonic() + 10
    while any(p.is_alive() for p in runs) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in runs if p.is_alive()]


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads processes from /proc")
def test_the_runs_of_a_demo_killed_by_sigterm_end_with_it() -> None:
    """SIGTERM ends the demo's process at once, leaving no time to stop its runs. Before:
    the two forked runs went on for the whole simulation (about 30 s of CPU), for no one."""
    demo = subprocess.Popen([sys.executable, "-m", "shardex", "demo", "--json"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runs: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while len(runs) < 2 and time.monotonic() < deadline and demo.poll() is None:
            runs = _children(demo.pid)
            time.sleep(0.05)
        assert len(runs) >= 2, runs
        demo.send_signal(signal.SIGTERM)
        demo.wait(timeout=30)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in runs) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in runs if _alive(pid)]
    finally:
        demo.kill()
        demo.wait()
        for pid in runs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
