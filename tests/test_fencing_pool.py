"""Routing reads on a client whose pool is full (memory://, virtual time).

A store's client carries at most its pool's worth of requests at once; the rest queue in
the client. A routing read queued behind hundreds of data requests would come back older
than a short lease (its age counts from when it was asked for), so every write would read
the routing again and again, and hold its places past their fence (each then planned and
located again). Here the routing reads stay a few per lease period, each put sends one
locate and one place, and every put's outcome is true: ok for each, each applied once.
Before the write engine kept a connection for the routing read: 2,646 requests for the
600 puts (1,200 now), over 7.0 s of virtual time (3.4 s now).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from shardex import ShardedIndex
from shardex.model.entries import Record
from shardex.stores.memory import MemoryStore
from shardex.stores.metered import Recorder

PUTS = 600
POOL = 16
LEASE = 0.5


class Pooled(MemoryStore):
    """A memory store whose client carries at most ``pool`` requests at once (FIFO, as a
    connection pool queues them); counts the routing record's reads."""

    def __init__(self, pool: int, **options: Any) -> None:
        super().__init__(**options)
        self._pool = asyncio.Semaphore(pool)
        self._connections = pool
        self.record_reads = 0

    @property
    def connections(self) -> int | None:
        return self._connections

    async def _send(self, rec: Recorder, nbytes: int) -> None:  # type: ignore[override]
        async with self._pool:
            await super()._send(rec, nbytes)

    async def _get_record(self, namespace: str, key: str, rec: Recorder) -> Record | None:
        self.record_reads += 1
        return await super()._get_record(namespace, key, rec)


@pytest.mark.shardex_virtual
async def test_routing_reads_do_not_queue_behind_a_full_pool() -> None:
    store = Pooled(POOL, latency_median_ms=40.0, latency_p99_ms=80.0, seed=3)
    applied = store.watch_applied()
    async with store, ShardedIndex(store, "orders", routing_lease=LEASE, seed=1) as index:
        started, reads = store.clock.now(), store.record_reads
        requests = store.stats().totals.requests
        results = await asyncio.gather(*(
            index.put("PENDING", f"o-{i}", token=f"t-{i}") for i in range(PUTS)))
        took, reads = store.clock.now() - started, store.record_reads - reads
        data = store.stats().totals.requests - requests - reads
        assert results == [True] * PUTS
        assert sorted(a.token for a in applied) == sorted(f"t-{i}" for i in range(PUTS))
        assert await index.count("PENDING") == PUTS
    # one locate and one place a put: no put was held past its fence and planned again
    assert data <= 2 * PUTS + PUTS // 100, (data, reads, took)
    # a refresh each third of the lease, and a few more: not one per write
    assert reads <= 3 * (took / LEASE) + 4, (reads, took)


async def _puts(index: ShardedIndex, prefix: str) -> list[bool]:
    return list(await asyncio.gather(*(
        index.put("PENDING", f"{prefix}-{i}", token=f"{prefix}-t-{i}")
        for i in range(PUTS // 2))))


@pytest.mark.shardex_virtual
async def test_two_indexes_on_one_client_share_its_pool() -> None:
    """Two indexes writing through one store client, each engine keeping its own bound
    of the pool but one: their data requests queue in the client, but a routing read
    waits at most about one round trip there, so the routing reads of both stay a few per
    lease period and no put is held past its fence and planned again."""
    store = Pooled(POOL, latency_median_ms=40.0, latency_p99_ms=80.0, seed=3)
    async with store, \
            ShardedIndex(store, "orders", routing_lease=LEASE, seed=1) as orders, \
            ShardedIndex(store, "tickets", routing_lease=LEASE, seed=2) as tickets:
        started, reads = store.clock.now(), store.record_reads
        requests = store.stats().totals.requests
        done = await asyncio.gather(_puts(orders, "o"), _puts(tickets, "t"))
        took, reads = store.clock.now() - started, store.record_reads - reads
        data = store.stats().totals.requests - requests - reads
        assert done == [[True] * (PUTS // 2)] * 2
    assert data <= 2 * PUTS + PUTS // 100, (data, reads, took)
    assert reads <= 2 * (3 * (took / LEASE) + 4), (reads, took)
