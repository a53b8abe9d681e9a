"""shardex.testing: an application's async tests on virtual time, through pytest."""

from __future__ import annotations

import asyncio
import time

import pytest

import shardex
from shardex.stores.base import Store


@pytest.mark.shardex_virtual
async def test_a_marked_async_test_runs_on_virtual_time(shardex_store: Store) -> None:
    started = time.monotonic()
    loop = asyncio.get_running_loop()
    before = loop.time()
    await asyncio.sleep(3600)  # an hour of virtual time
    assert loop.time() - before >= 3600
    async with shardex.ShardedIndex(shardex_store, "orders") as index:
        for i in range(200):
            await index.put("PENDING", f"o-{i}")
        assert await index.count("PENDING") == 200
    assert time.monotonic() - started < 30


@pytest.mark.shardex_virtual(store="memory://?throttle_rate=1.0&seed=1")
async def test_the_marker_sets_the_store(shardex_store: Store) -> None:
    index = shardex.ShardedIndex(shardex_store, "orders", retry=shardex.RetryPolicy(attempts=2))
    with pytest.raises(shardex.Throttled):  # every request: opening reads the routing
        await index.open()


def test_the_virtual_fixture_runs_a_coroutine(virtual: object) -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        start = loop.time()
        await asyncio.sleep(120)
        return loop.time() - start

    assert virtual(main()) >= 120  # type: ignore[operator]
