"""Shared admission budgets on a real redis-server (started by scripts/test).

These run on the real clock, as the budgets' moving windows follow the wall clock:
each uses windows long enough that no test waits for one to move.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from shardex.admission import Admission, AdmissionPolicy, Budget, SharedBudgets
from shardex.errors import AdmissionRejected, MissingDependency, Unavailable
from tests import redis_server

pytestmark = pytest.mark.redis

ROOT = Path(__file__).resolve().parent.parent
# 100 units in any 100 s: nothing leaves the window while a test runs.
LONG = Budget(rate=1, burst=100, mode="reject")


def _admission(budget: Budget) -> Admission:
    shared = SharedBudgets(redis_server.require_url(), prefix=redis_server.unique_prefix())
    return Admission(AdmissionPolicy(default=budget), budgets=shared)


async def _fire(admission: Admission, count: int, **request: object) -> int:
    admitted = 0
    for _ in range(count):
        try:
            await admission.admit("tenant-1", **request)  # type: ignore[arg-type]
            admitted += 1
        except AdmissionRejected:
            pass
    return admitted


def test_a_shared_budget_admits_its_window_then_refuses_with_a_retry_after() -> None:
    async def main() -> None:
        async with _admission(LONG) as admission:
            assert await _fire(admission, 100) == 100
            with pytest.raises(AdmissionRejected) as caught:
                await admission.admit("tenant-1")
            assert caught.value.retry_after is not None
            assert 0 < caught.value.retry_after <= 100
            assert await _fire(admission, 5) == 0
            await admission.admit("tenant-2")  # another key, another budget
            assert admission.counts()["tenant-1"].rejected == 6

    asyncio.run(main())


def test_priorities_share_a_shared_budget() -> None:
    async def main() -> None:
        budget = Budget(rate=1, burst=100, mode="reject", reserve={"low": 0.5, "normal": 0.2})
        async with _admission(budget) as admission:
            assert await _fire(admission, 80, priority="low") == 50
            assert await _fire(admission, 80, priority="normal") == 30
            assert await _fire(admission, 80, priority="high") == 20

    asyncio.run(main())


def test_costs_are_whole_units_and_an_oversized_request_is_refused_for_good() -> None:
    async def main() -> None:
        async with _admission(Budget(rate=1, burst=10, mode="reject")) as admission:
            assert await _fire(admission, 20, units=0.4) == 10  # 0.4 counts as 1
            with pytest.raises(AdmissionRejected) as caught:
                await admission.admit("other", units=11)
            assert caught.value.retry_after is None

    asyncio.run(main())


def test_reset_forgets_the_fleets_usage() -> None:
    async def main() -> None:
        async with _admission(Budget(rate=1, burst=10, mode="reject")) as admission:
            assert await _fire(admission, 20) == 10
            assert isinstance(admission.budgets, SharedBudgets)
            await admission.budgets.reset()
            assert await _fire(admission, 20) == 10

    asyncio.run(main())


def test_two_processes_never_admit_more_than_the_budget_between_them() -> None:
    prefix = redis_server.unique_prefix()
    url = redis_server.require_url()
    workers = [subprocess.Popen([sys.executable, "-m", "tests.admission_worker", url, prefix,
                                 str(index), "150", "8"], cwd=ROOT, stdout=subprocess.PIPE,
                                text=True)
               for index in range(2)]
    outcomes = []
    for worker in workers:
        out, _ = worker.communicate(timeout=60)
        assert worker.returncode == 0
        outcomes.append(json.loads(out))
    assert [o["admitted"] + o["rejected"] for o in outcomes] == [150, 150]
    # The workers' budget admits 100 units in any 100 s, and the run takes seconds.
    assert sum(o["admitted"] for o in outcomes) == 100


def test_an_unreachable_redis_is_unavailable() -> None:
    redis_server.require_url()
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    async def main() -> None:
        shared = SharedBudgets(f"redis://127.0.0.1:{port}/0")
        async with Admission(AdmissionPolicy(default=LONG), budgets=shared) as admission:
            with pytest.raises(Unavailable, match=f"127.0.0.1:{port}"):
                await admission.admit("k")

    asyncio.run(main())


def test_a_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    monkeypatch.setitem(sys.modules, "redis.asyncio", None)
    with pytest.raises(MissingDependency, match=r"shardex\[redis\]"):
        asyncio.run(SharedBudgets("redis://127.0.0.1:6379/0").open())
