"""Shared fixtures: the backends every conformance test runs on.

``memory`` always runs, on virtual time. Real servers are started by scripts/test,
which exports their endpoints; in CI (CI=true) a backend whose server is missing
fails instead of being skipped.

Property tests draw the same examples on every run (hypothesis ``derandomize``), so a
run's verdict is the code's, not the draw's; ``SHARDEX_HYPOTHESIS=explore`` draws new
ones (and more of them) to look for failures the fixed draw does not reach. Neither has a
per-example deadline: the verdict must not depend on how busy the machine is (the suite's
speed is watched as a whole, and benchmarks time the code).
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import os
import sys
import time
import warnings
import weakref
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import settings

import shardex
from shardex.commands import connection
from shardex.sim.clock import run_virtual
from shardex.stores.base import Store
from tests import azurite, cosmos_server, dynamodb_local

settings.register_profile("fixed", derandomize=True, deadline=None)
settings.register_profile("explore", derandomize=False, max_examples=500, deadline=None)
settings.load_profile("explore" if os.environ.get("SHARDEX_HYPOTHESIS") == "explore"
                      else "fixed")

T = TypeVar("T")


# Seconds each long test took in a full run (``cpu wall nodeid`` lines, as
# SHARDEX_TEST_CPU_LOG writes them; refresh with
# ``SHARDEX_TEST_CPU_LOG=/tmp/t.log scripts/test; grep -v ' server:' /tmp/t.log | sort -rn -k2 |
# awk '$2 >= 1'``; the servers' lines name no test).
DURATIONS = Path(__file__).with_name("durations.txt")


def _recorded_walls() -> dict[str, float]:
    walls: dict[str, float] = {}
    if DURATIONS.exists():
        for line in DURATIONS.read_text().splitlines():
            fields = line.split(maxsplit=2)
            if len(fields) == 3 and not line.startswith("#"):
                walls[fields[2].split("@", 1)[0]] = float(fields[1])
    return walls


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Keep an ``xdist_group`` on one worker under pytest 9; hand out the longest first.

    pytest-xdist (``--dist loadgroup``) names a test's group by appending ``@group`` to
    ``item._nodeid``, which pytest 9 no longer reads (the id is the structured
    ``item._id``); without this the Spark tests spread over workers and each starts its
    own JVM. Runs after xdist's hook, on the workers, where the suffix was just set.

    Workers take tests in collection order: a long test taken last leaves one worker
    busy after the others have finished, so under xdist the tests are sorted by the
    seconds tests/durations.txt records, longest first. Every worker sorts alike (ties
    keep collection order), as xdist requires. Without xdist the order stays pytest's,
    which groups the tests that share a module fixture.
    """
    for item in items:
        suffixed = item.__dict__.get("_nodeid")
        if isinstance(suffixed, str) and "@" in suffixed and "@" not in item.nodeid \
                and hasattr(item, "_id"):
            item._id = type(item._id).parse(suffixed)
    if "PYTEST_XDIST_WORKER" in os.environ:
        walls = _recorded_walls()
        items.sort(key=lambda item: -walls.get(item.nodeid.split("@", 1)[0], 0.0))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Spare the garbage collector the objects collection made: they live to the end.

    Collection imports every test module and, through them, the drivers, plotting and
    Spark's Python side: some hundred thousand objects that are never garbage, which each
    full collection would traverse again. Frozen (``gc.freeze``), collections look only at
    what the tests make; and a collection waits for 10,000 new objects rather than 700
    (the tests make many, most short-lived and freed by reference counting). Together
    they took the garbage collector's CPU in a sample of the tests from 1.9 s to 0.7 s of
    16 s. A failed test's teardown still collects everything the tests made (below).
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)


_CPU_LOG = os.environ.get("SHARDEX_TEST_CPU_LOG")
# NAME=PID of each server scripts/test started (exported with SHARDEX_TEST_CPU_LOG)
_SERVERS = dict(entry.split("=", 1)
                for entry in os.environ.get("SHARDEX_TEST_SERVER_PIDS", "").split())


def process_cpu(pid: int) -> float:
    """CPU seconds process ``pid`` and the children it waited for have used (Linux
    /proc), 0.0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            # the fields after the command name, which may hold spaces, in parentheses
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return sum(int(tick) for tick in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _servers_cpu() -> dict[str, float]:
    return {name: process_cpu(int(pid)) for name, pid in _SERVERS.items()}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """With ``SHARDEX_TEST_CPU_LOG=PATH``, append each test's CPU and wall seconds to PATH.

    The suite is CPU-bound on a shared machine, where wall times say more about the
    neighbours than about the test: a line per test (``cpu wall nodeid``, setup and
    teardown included, children the test waited for counted) shows where the CPU goes.
    Each xdist worker appends its own lines. The servers' CPU over the same span goes to
    ``PATH.servers`` (``name=cpu ... at=END worker=gwN nodeid``): a test's own only when
    one worker runs (``SHARDEX_TEST_WORKERS=0``); with more, it is the sum of what ran
    beside it.
    """
    if not _CPU_LOG:
        yield
        return
    before, started, servers = os.times(), time.perf_counter(), _servers_cpu()
    yield
    after = os.times()
    cpu = sum(after[:4]) - sum(before[:4])
    with open(_CPU_LOG, "a") as log:
        log.write(f"{cpu:.3f} {time.perf_counter() - started:.3f} {item.nodeid}\n")
    if servers:  # with when the test ended and on which worker: the run's tail shows
        spent = " ".join(f"{name}={cpu - servers[name]:.2f}"
                         for name, cpu in _servers_cpu().items())
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(f"{_CPU_LOG}.servers", "a") as log:
            log.write(f"{spent} at={time.time():.1f} worker={worker} {item.nodeid}\n")


_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Iterator[pytest.TestReport]:
    """Mark a test whose setup or call failed, for its teardown below."""
    report: pytest.TestReport = yield
    if report.failed:
        item.stash[_FAILED] = True
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """After a failed test, collect its garbage as its teardown starts.

    A test that fails midway skips its own cleanup: a client it opened is closed only
    when the garbage collector meets it, whose ``ResourceWarning`` (an error here) would
    otherwise fail whichever test of this worker runs then. Collected now, the warning
    stays with the test that leaked (pytest gathers unraisable warnings at the end of the
    teardown). pytest keeps the failure's traceback, and so the test's frames, in
    ``sys.last_traceback`` until the next test runs: let go of it first. Only after a
    failure: a collection per test costs CPU.
    """
    if item.stash.get(_FAILED, False):
        for name in ("last_type", "last_value", "last_traceback", "last_exc"):
            if hasattr(sys, name):
                delattr(sys, name)
        gc.collect()


# Every asyncio stream writer a test makes (redis connections, the test proxies), to find
# one left open once its loop has ended: the garbage collector would meet it during some
# later test of the same worker, whose teardown would then fail on its ResourceWarning
# ("loop is closed", raised in StreamWriter.__del__) in the leaker's place.
_writers: weakref.WeakSet[asyncio.StreamWriter] = weakref.WeakSet()
_writer_init = asyncio.StreamWriter.__init__


def _tracked_writer_init(self: asyncio.StreamWriter, *args: Any, **kwargs: Any) -> None:
    _writer_init(self, *args, **kwargs)
    _writers.add(self)


asyncio.StreamWriter.__init__ = _tracked_writer_init  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def _streams_closed() -> Iterator[None]:
    """Fail the test that leaves a stream open on a loop that has ended, naming it."""
    yield
    left = _drop_streams_left()
    if left:
        pytest.fail(f"{len(left)} asyncio stream(s) left open after their loop ended: "
                    + "; ".join(left[:4]))


@pytest.fixture(autouse=True)
def _no_waiting_notes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A command run in a test's process says the store has not answered after a minute,
    not 2 s (``connection.QUIET``): on a loaded machine a server's answer can take 2 s, and
    the note would land among the output and the one error line the test reads (a
    ``--json`` document read with it did not parse). ``test_store_silence.py`` tests the
    note at its own setting."""
    monkeypatch.setattr(connection, "QUIET", 60.0)


def _drop_streams_left() -> list[str]:
    """The streams left open on ended loops, named; they are collected here with their
    ResourceWarnings ignored, so that no later test fails for them."""
    left = [writer for writer in _writers
            if writer._loop.is_closed()  # type: ignore[attr-defined]
            and not writer.transport.is_closing()]
    names = [repr(writer) for writer in left]
    if left:
        _writers.difference_update(left)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            left.clear()
            gc.collect()
    return names


_names = itertools.count()


@dataclass
class Backend:
    """A store kind under test: makes fresh, isolated stores and runs coroutines for them."""

    name: str
    make: Callable[..., Store]
    virtual_time: bool
    server: str | None = None  # the pytest mark of the server it needs (-m deselects it)

    def store(self, **options: Any) -> Store:
        return self.make(**options)

    def index(self, routing: shardex.Routing | None = None, *, store: Store | None = None,
              name: str | None = None, **options: Any) -> shardex.ShardedIndex:
        return shardex.ShardedIndex(store or self.store(), name or f"ix{next(_names)}",
                                    routing, **options)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return run_virtual(coro) if self.virtual_time else asyncio.run(coro)


def _memory(**options: Any) -> Store:
    # The contract suites test behaviour, not capacity (tests/test_sim.py and
    # tests/test_fidelity.py do): like DynamoDB Local, a table that hardly throttles.
    options.setdefault("seed", 7)
    for name, value in (("partitions", 0), ("write_ceiling", 10_000.0),
                        ("read_ceiling", 30_000.0), ("warm_write", 40_000.0)):
        options.setdefault(name, value)
    return shardex.open_store("memory://", **options)


BACKENDS: dict[str, Backend] = {
    "memory": Backend("memory", _memory, virtual_time=True),
    "dynamodb-table": Backend("dynamodb-table", dynamodb_local.table_store, virtual_time=False,
                              server="dynamodb"),
    "dynamodb-gsi": Backend("dynamodb-gsi", dynamodb_local.gsi_store, virtual_time=False,
                            server="dynamodb"),
    "azure-tables": Backend("azure-tables", azurite.table_store, virtual_time=False,
                            server="azure"),
    "cosmos": Backend("cosmos", cosmos_server.container_store, virtual_time=False,
                      server="cosmos"),
}
_REQUIRE = {"dynamodb": dynamodb_local.require_endpoint, "azure": azurite.require_endpoint,
            "cosmos": cosmos_server.require_endpoint}


@pytest.fixture(params=[
    pytest.param(name, marks=() if BACKENDS[name].server is None
                 else getattr(pytest.mark, BACKENDS[name].server))
    for name in sorted(BACKENDS)])
def backend(request: pytest.FixtureRequest) -> Backend:
    chosen = BACKENDS[request.param]
    if chosen.server is not None:
        _REQUIRE[chosen.server]()
    return chosen


@pytest.fixture
def memory() -> Backend:
    return BACKENDS["memory"]


# The JVM's C2 compiler and parallel collector pay off over long jobs; the tests' queries
# are small and many, where C1 alone and the serial collector halve the JVM's CPU
# (85 s -> 43 s for tests/test_heat_spark.py). Kept to the tests: a user's long Spark job
# wants the JVM's defaults.
SPARK_TEST_CONF = {
    "spark.sql.shuffle.partitions": "2",  # small inputs: few partitions
    "spark.sql.codegen.wholeStage": "false",  # no code to compile for each new query shape
    "spark.sql.adaptive.enabled": "false",  # no re-planning of queries this small
    # expressions interpreted, not compiled by Janino for each query: the JVM's CPU for
    # the Spark tests 52 s -> 38 s (Spark's own tests run both modes to the same results)
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local Spark session (one JVM) for every test of this process that asks for it.

    Tests that use it carry ``pytest.mark.xdist_group("spark")`` (and the ``spark`` mark),
    so scripts/test's ``--dist loadgroup`` puts them on one worker: one JVM a run.
    """
    from shardex.heat.spark import local_session

    session = local_session("local[2]", SPARK_TEST_CONF)
    yield session
    if _CPU_LOG:  # the JVM outlives this worker's accounting: its CPU is logged here
        jvm = session.sparkContext._gateway.proc
        with open(_CPU_LOG, "a") as log:
            log.write(f"{process_cpu(jvm.pid):.3f} 0 server:spark\n")
    session.stop()
