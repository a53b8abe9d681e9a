"""The orders demo's runs: each layout on its own virtual clock, in a process of its own.

``run_demo`` and ``start_demo`` run ``shardex.scenarios.orders.run_orders`` once per layout
of ``demo_layouts``, side by side; ``relaxed_gc`` keeps the garbage collector off a run
(the resharding scenario's too).
"""

from __future__ import annotations

import gc
import os
import signal
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from multiprocessing import active_children, get_all_start_methods, get_context
from typing import Any

from shardex.routing import Routing
from shardex.scenarios.orders import DEMO_TABLE, OrdersLoad, RunResult, demo_layouts, run_orders
from shardex.sim.clock import run_virtual

__all__ = ["DemoRuns", "relaxed_gc", "run_demo", "start_demo"]


def run_demo(load: OrdersLoad | None = None, *, seed: int = 1,
             store_options: Mapping[str, Any] | None = None) -> list[RunResult]:
    """Run the scenario on virtual time, once per layout, with the same seed and load.

    The store is ``memory://`` with ``DEMO_TABLE``'s settings, ``store_options`` over them.
    """
    return start_demo(load, seed=seed, store_options=store_options)()


def start_demo(load: OrdersLoad | None = None, *, seed: int = 1,
               store_options: Mapping[str, Any] | None = None) -> DemoRuns:
    """Start ``run_demo``'s runs now and return them under way (``DemoRuns``: call or
    ``wait`` it once for their results, ``stop`` it to end them).

    Each layout is its own run on its own virtual clock: they run side by side, one
    process each. Started while this process has one thread (before a spinner's), the
    processes are forked, so they start at once rather than import shardex again;
    with other threads running they are spawned, as a fork would copy those threads'
    locks in whatever state they are.
    """
    load = load or OrdersLoad()
    store_options = {**DEMO_TABLE, **(store_options or {})}
    ceiling = float(store_options.get("write_ceiling", 1000.0))
    runs = [(load, routing, name, seed, store_options)
            for name, routing in demo_layouts(load, ceiling=ceiling).items()]
    if (os.cpu_count() or 1) < 2:
        return DemoRuns(None, runs, [])
    method = "fork" if threading.active_count() == 1 \
        and "fork" in get_all_start_methods() else "spawn"
    # a worker ends itself once this process is gone, idle or running
    before = set(active_children())
    pool = ProcessPoolExecutor(len(runs), mp_context=get_context(method),
                               initializer=_end_without, initargs=(os.getpid(),))
    started = DemoRuns(pool, [], [])
    try:
        started.futures = [pool.submit(_run_apart, run) for run in runs]
    except BaseException:
        # stopped while the workers were forked (SIGTERM is an interrupt): the pool's
        # shutdown would wait for a run already going, the whole simulation
        started.workers = [p for p in active_children() if p not in before]
        started.stop()
        raise
    started.workers = [p for p in active_children() if p not in before]
    return started


class DemoRuns:
    """The runs ``start_demo`` started: ``wait`` (or a call) for their results, once;
    ``stop`` ends them at once (their processes killed, not waited for)."""

    def __init__(self, pool: ProcessPoolExecutor | None, runs: list[Any],
                 workers: list[Any]) -> None:
        self.pool = pool
        self.runs = runs  # run here, one after the other, where there is no pool
        self.futures: list[Any] = []
        self.workers = workers

    def wait(self) -> list[RunResult]:
        if self.pool is None:
            return [_run_layout(run) for run in self.runs]
        try:
            results = [future.result() for future in self.futures]
        except BaseException:
            # stopped (Ctrl-C, or SIGTERM to this process alone): the runs end now, not
            # after the whole simulation, which the pool's shutdown would wait for
            self.stop()
            raise
        self.pool.shutdown()
        return results

    __call__ = wait

    def stop(self) -> None:
        for worker in self.workers:
            # SIGKILL: a worker just forked holds the command's SIGTERM handler (an
            # interrupt) until its initializer runs, and one interrupted so may wait at
            # its exit for a queue nobody reads (a suite run: alive 10 s after the stop)
            worker.kill()
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)


def _run_layout(run: tuple[OrdersLoad, Routing, str, int, Mapping[str, Any]]) -> RunResult:
    load, routing, name, seed, store_options = run
    with relaxed_gc():
        return run_virtual(run_orders(load, routing, layout=name, seed=seed,
                                      store_options=store_options))


def _run_apart(run: tuple[OrdersLoad, Routing, str, int, Mapping[str, Any]]) -> RunResult:
    """``_run_layout`` in a worker process that ends after it: what the run leaves (its
    store's many objects) is frozen, not collected, as the process's exit frees it.

    A collection there would walk every object the run made (the collector was off for
    the run) only to free memory that the exit frees anyway: about 1 s of the run's 10.
    """
    load, routing, name, seed, store_options = run
    gc.disable()
    try:
        return run_virtual(run_orders(load, routing, layout=name, seed=seed,
                                      store_options=store_options))
    finally:
        gc.freeze()
        gc.enable()


def _end_without(parent: int) -> None:
    """End this process once ``parent`` is gone (a worker's initializer): a parent killed
    by SIGTERM or SIGKILL had no time to stop its runs, which would spend their CPU (or,
    idle, wait) for no one. A forked worker ends on SIGTERM at once, as a process does,
    not as the command that forked it (``shardex.commands.stopping``)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.25)
        os._exit(1)

    threading.Thread(target=watch, name="shardex-parent-watch", daemon=True).start()


@contextmanager
def relaxed_gc() -> Iterator[None]:
    """Collect no garbage while a run makes and drops its many short-lived objects.

    A run frees what it drops by reference counting alone (``run_orders`` cuts the one
    cycle a failed write would leave), and what it keeps (the store's items, the ground
    truth) stays to the end; the collector would only walk those again and again, a
    tenth of the run's time even with relaxed thresholds. The run is bounded, so
    anything else that does form a cycle waits for the collection after it.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
