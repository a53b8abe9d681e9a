"""Closing an index while calls run: they end first, with their true outcomes.

Closed beneath them, writes in flight failed with the closed client's words ("the
routing of index 'ix' is not loaded yet", "the DynamoDB client is not open", or
OutcomeUnknown where the store was reachable all along) and reads with IncompleteRead;
the sync facade closed by one thread left another thread's call waiting for good.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

import shardex
from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.sim.clock import run_virtual
from shardex.stores.memory import MemoryStore


def test_close_lets_the_writes_and_reads_under_way_end_and_refuses_new_ones() -> None:
    async def main() -> None:
        store = MemoryStore(seed=1)
        index = ShardedIndex(store, "ix", Routing(overrides={"A": ShardPolicy(4)}),
                             hedge=None)
        await index.open()
        writes = [asyncio.ensure_future(index.put("A", f"i-{i:03d}", sort=f"{i:03d}"))
                  for i in range(40)]
        await asyncio.sleep(0.002)  # each has sent a request: none has landed
        reads = [asyncio.ensure_future(index.query("A", limit=100)),
                 asyncio.ensure_future(index.count("A")),
                 asyncio.ensure_future(index.get("i-001"))]
        await asyncio.sleep(0)
        closing = asyncio.ensure_future(index.close())
        await asyncio.sleep(0)
        with pytest.raises(shardex.InvalidInput, match="index 'ix' is closing"):
            await index.put("A", "late")
        assert await asyncio.gather(*writes) == [True] * 40
        page, count, _ = await asyncio.gather(*reads)
        assert isinstance(page, shardex.Page)
        assert isinstance(count, int)
        await closing
        with pytest.raises(shardex.InvalidInput, match="is not open"):
            await index.put("A", "after")
        async with ShardedIndex(store, "ix", hedge=None) as again:
            assert await again.count("A") == 40

    run_virtual(main())


def test_the_sync_facade_closed_by_one_thread_ends_another_threads_calls() -> None:
    index = shardex.SyncShardedIndex("memory://?seed=1", "s")
    index.open()
    started, ended = threading.Event(), []

    def write() -> None:
        try:
            for i in range(100_000):
                index.put("P", f"w{i}")
                if i == 5:
                    started.set()
        except shardex.ShardexError as exc:
            ended.append(exc)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    assert started.wait(30)
    index.close()
    writer.join(30)
    assert not writer.is_alive()  # it waited for good on the stopped loop
    (error,) = ended
    assert "not open" in str(error) or "closed" in str(error), error


def test_an_index_used_from_another_event_loop_says_so() -> None:
    """Opened under one asyncio.run and used under another: DynamoDB's client said
    'cannot reach DynamoDB ... Event loop is closed', Azure's a StoreError, and memory://
    went on with its routing refresher dead."""
    index = ShardedIndex("memory://?seed=1", "ix")

    async def first() -> None:
        await index.open()
        assert await index.put("A", "i-1")

    async def second() -> None:
        with pytest.raises(shardex.InvalidInput, match="was opened in another event loop"):
            await index.put("A", "i-2")
        with pytest.raises(shardex.InvalidInput, match="was opened in another event loop"):
            await index.query("A")

    asyncio.run(first())
    asyncio.run(second())


def test_a_scan_continued_after_close_is_refused() -> None:
    """A scan started inside 'async with index:' and continued after it went on yielding
    what it had buffered on memory:// (400 of 400) and raised IncompleteRead naming the
    store on DynamoDB (the closed client): it is refused naming the index, as every call
    after close is."""
    async def main() -> None:
        async with ShardedIndex(MemoryStore(seed=1), "ix",
                                Routing(overrides={"A": ShardPolicy(4)})) as index:
            for i in range(40):
                await index.put("A", f"i-{i:03d}", sort=f"{i:03d}")
            scan = index.scan("A")
            await scan.__anext__()
        with pytest.raises(shardex.InvalidInput, match="index 'ix' was closed while a scan "
                                                       "of 'A' ran"):
            await scan.__anext__()

    run_virtual(main())
