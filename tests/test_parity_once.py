"""One runner checks parity for all: the others wait for its report, listed as waiting
in status, and one of them checks at once if it stops."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from shardex import ShardPolicy
from shardex.migrate import Resharder
from shardex.stores.base import Store
from tests.test_migrate_status import _full, _put_pending


def test_runners_check_parity_once_between_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every runner whose units were done checked parity: with four processes, four
    checks at once, each reading every entry twice. One runner checks; the others wait
    for its report (status lists them waiting for it), and take the check over if its
    runner stops."""
    from shardex.clock import LoopClock
    from shardex.migrate import runner as runner_module
    from shardex.migrate.budget import Sharing
    from shardex.sim.clock import run_virtual
    from shardex.stores.memory import MemoryStore

    checking, checks = runner_module.check, []

    async def counted(*args: Any, **kwargs: Any) -> Any:
        checks.append(LoopClock().now())
        await LoopClock().sleep(10.0)
        return await checking(*args, **kwargs)

    monkeypatch.setattr(runner_module, "check", counted)

    async def main() -> list[dict[str, Any]]:
        store = MemoryStore(seed=1)
        await _put_pending(store, 200)
        async with contextlib.AsyncExitStack() as stack:
            each = [await stack.enter_async_context(Resharder(
                store, "orders", worker=name, seed=i, unit_lease=2.0, rate=50.0,
                sharing=Sharing(poll=0.5))) for i, name in enumerate("abcd")]
            observer = await stack.enter_async_context(Resharder(
                store, "orders", worker="observer", unit_lease=2.0))
            await each[0].start({"PENDING": ShardPolicy(4)}, margin=0.2)
            migration = (await each[0].routing()).reshard.id  # type: ignore[union-attr]
            running = asyncio.ensure_future(asyncio.gather(*(r.run() for r in each)))
            seen = []
            while not running.done():
                await asyncio.sleep(1.0)
                seen.append(await _full(observer, migration))
            results = await running
            assert [r.state for r in results] == ["verified"] * 4
            # each says what the check found, whichever runner made it
            assert all(r.parity is not None and r.parity.clean for r in results), results
            return seen

    seen = run_virtual(main())
    assert len(checks) == 1, checks
    waiting = [r["waiting"] for d in seen for r in d["runners"]
               if (r["waiting"] or "").endswith("parity check")]
    assert waiting, [d["runners"] for d in seen]
    assert all(w.startswith("waiting for ") for w in waiting), waiting


def test_a_runner_stopped_mid_check_leaves_the_check_to_the_others(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner checking parity is stopped (Ctrl-C) mid-check: it gives its claim up,
    and a waiting runner checks at once and goes on to verified."""
    from shardex.clock import LoopClock
    from shardex.migrate import runner as runner_module
    from shardex.migrate.budget import Sharing
    from shardex.sim.clock import run_virtual
    from shardex.stores.memory import MemoryStore

    checking, checks = runner_module.check, []
    began = asyncio.Event()

    async def slow(*args: Any, **kwargs: Any) -> Any:
        checks.append(LoopClock().now())
        began.set()
        await LoopClock().sleep(30.0)
        return await checking(*args, **kwargs)

    monkeypatch.setattr(runner_module, "check", slow)

    async def main() -> None:
        store = MemoryStore(seed=1)
        await _put_pending(store, 100)
        async with Resharder(store, "orders", worker="a", seed=1, unit_lease=30.0,
                             sharing=Sharing(poll=0.5)) as first, \
                Resharder(store, "orders", worker="b", seed=2, unit_lease=30.0,
                          sharing=Sharing(poll=0.5)) as second:
            await first.start({"PENDING": ShardPolicy(4)}, margin=0.2)
            runs = {r.worker: asyncio.ensure_future(r.run()) for r in (first, second)}
            await began.wait()
            checker = await _checker(store, first)
            runs.pop(checker).cancel()
            stopped = LoopClock().now()
            (other,) = runs.values()
            assert (await other).state == "verified"
            assert len(checks) == 2
            assert checks[1] - stopped < 2.0, (checks, stopped)  # not the 30 s lease

    run_virtual(main())


async def _checker(store: Store, runner: Resharder) -> str:
    """The runner whose claim holds the parity check of the routing as it stands."""
    routing = await runner.routing()
    assert routing.reshard is not None
    record = await store.get_record(
        "orders", f"reshard/{routing.reshard.id}/{routing.reshard.generation:04d}/job/"
                  f"check-{routing.version:06d}")
    assert record is not None
    owner: str = record.body["owner"]
    return owner
