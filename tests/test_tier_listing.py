"""A value moving between tiers lists as one two-phase listing (``shardex.tierreads``):
its pages resume and read ahead, T's rows are held in shared batches (each retried on its
own under throttling), and a write of this process to either store shows on the next
page."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

import shardex
from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.clock import LoopClock
from shardex.index import store_routing
from shardex.model.entries import StoredEntry
from shardex.retry import RetryPolicy, call_with_retry
from shardex.routing import begin_transition
from shardex.sim.clock import run_virtual
from shardex.stores.base import Store
from shardex.tierreads import CrossReads

pytestmark = pytest.mark.filterwarnings("error")

ENTRIES = 2000


def _stores(count: int, *, fixed: bool = True) -> list[Store]:
    """Stores whose requests take 20 ms each (``fixed``), or the default latency spread."""
    options: dict[str, Any] = {"seed": 1, "profile": "unlimited"}
    if fixed:
        options.update(latency_median_ms=20.0, latency_p99_ms=20.0, latency_per_kb_ms=0.0)
    return [shardex.open_store("memory://", **options) for _ in range(count)]


async def _puts(index: ShardedIndex, items: range, entries: int = ENTRIES) -> None:
    for start in range(0, len(items), 50):
        await asyncio.gather(*(index.put("P", f"o-{i:05d}", sort=f"{i * 7919 % entries:05d}")
                               for i in items[start:start + 50]))


@contextlib.asynccontextmanager
async def _moving(stores: list[Store], entries: int = ENTRIES) -> AsyncIterator[ShardedIndex]:
    """Value P of a new index, moving from 4 keys on ``stores[0]`` to 16 on ``stores[1]``
    (write-new), half its entries in each."""
    async with ShardedIndex(stores[0], "moving", Routing(overrides={"P": ShardPolicy(4)}),
                            routing_lease=60.0, hedge=None, tiers={"own": stores[1]}) as moving:
        await _puts(moving, range(0, entries, 2), entries)
        await store_routing(moving, dataclasses.replace(begin_transition(
            moving.routing, {"P": ShardPolicy(16, tier="own")}), state="write-new"))
        await moving.refresh_routing()
        await _puts(moving, range(1, entries, 2), entries)
        assert moving.routing.reads_both("P")
        yield moving


async def _cost(index: ShardedIndex, stores: list[Store], how: str, *, entries: int = ENTRIES,
                limit: int = 100) -> tuple[int, float]:
    """List P in full ``how``; the read requests it sent ``stores`` and its seconds."""
    for store in stores:
        store.reset_stats()
    clock = LoopClock()
    start, seen = clock.now(), []
    if how == "scan":
        seen = [e.item_id async for e in index.scan("P")]
    elif how == "pages":
        seen = [e.item_id async for page in index.pages("P", limit=limit) for e in page.items]
    else:
        cursor = None
        while True:
            page = await index.query("P", limit=limit, cursor=cursor)
            seen += [e.item_id for e in page.items]
            if (cursor := page.cursor) is None:
                break
    assert sorted(seen) == [f"o-{i:05d}" for i in range(entries)]
    requests = sum(store.stats(index.name).totals.read_requests for store in stores)
    return requests, clock.now() - start


def test_a_long_listing_mid_tier_move_costs_near_a_stable_listing() -> None:
    """2,000 entries in pages of 100 (``query`` page by page, ``pages``) and ``scan``: at
    most 3x the requests and 4x the time of the same entries stable on 16 keys (the
    first page's four round trips: S, T, then the placements in S and in T). Before, each
    page read S then T afresh, and the scan held T's rows 64 at a time one batch after
    another: 27x the requests and 80x the time in pages, 34x the time in a scan."""

    async def body() -> list[tuple[tuple[int, float], tuple[int, float]]]:
        stores = _stores(3)
        stable = ShardedIndex(stores[2], "stable", Routing(overrides={"P": ShardPolicy(16)}),
                              routing_lease=60.0, hedge=None)
        async with stable:
            await _puts(stable, range(ENTRIES))
            async with _moving(stores) as moving:
                return [(await _cost(stable, stores[2:], how),
                         await _cost(moving, stores[:2], how))
                        for how in ("query", "pages", "scan")]

    for (requests, seconds), (crossing, crossing_seconds) in run_virtual(body()):
        assert crossing <= 3 * requests, (crossing, requests)
        assert crossing_seconds <= 4 * seconds, (crossing_seconds, seconds)


def test_a_short_listing_holds_the_rows_of_t_s_requests_sent_together_in_one_batch() -> None:
    """600 entries, one page of 1,000, requests of spread latencies: at most 2x the
    requests of the same entries stable on 16 keys. The 16 shards of T land at different
    instants; holding each one's rows alone took 52 requests (two batches each), and
    one point read in each store a row, before ``locate_many``, over 20x."""
    entries = 600

    async def body() -> tuple[tuple[int, float], tuple[int, float]]:
        stores = _stores(3, fixed=False)
        stable = ShardedIndex(stores[2], "stable", Routing(overrides={"P": ShardPolicy(16)}),
                              hedge=None)
        async with stable:
            await _puts(stable, range(entries), entries)
            async with _moving(stores, entries) as moving:
                return (await _cost(stable, stores[2:], "query", entries=entries, limit=1000),
                        await _cost(moving, stores[:2], "query", entries=entries, limit=1000))

    (stable, _), (crossing, _) = run_virtual(body())
    assert crossing <= 2 * stable, (crossing, stable)


def test_a_write_of_this_process_shows_on_the_next_page_of_a_moving_value() -> None:
    """A page resumes the streams the last one read ahead, in S and in T; an entry this
    process writes to T meanwhile is read again, not left out by what T's stream had
    read before the write (the continuation hears T's writes, not only S's)."""

    async def body() -> None:
        stores = _stores(2)
        async with _moving(stores) as moving:
            first = await moving.query("P", limit=100)
            second = await moving.query("P", limit=100, cursor=first.cursor)
            last = second.items[-1].sort
            # between the second page and the third, in T (write-new): just past the page
            await moving.put("P", "late", sort=last + "5")
            third = await moving.query("P", limit=100, cursor=second.cursor)
            assert "late" in [e.item_id for e in third.items]
            assert stores[1].stats("moving").totals.write_requests > 0

    run_virtual(body())


def test_a_hold_under_throttling_reads_each_batch_again_alone() -> None:
    """1,000 rows held while one request in five is throttled: each batch of 100 is
    retried on its own. Retried whole, a read of ten batches failed nine times in ten
    and read all ten again each time (and gave up, after the policy's tries, as an
    IncompleteRead of the listing)."""
    async def body() -> tuple[int, list[int]]:
        stores = [shardex.open_store("memory://", seed=1, profile="unlimited",
                                     throttle_rate=0.2) for _ in range(2)]
        retry, clock, rng = RetryPolicy(), LoopClock(), random.Random(3)
        async with stores[0], stores[1]:
            rows = [StoredEntry("P#0", f"{i:05d}", f"o-{i:05d}", {}) for i in range(1000)]
            for row in rows:
                await call_with_retry(lambda row=row: stores[1].place(
                    "moving", row.item_id, row, version=1, expected=None), retry,
                    clock=clock, rng=rng)
            for store in stores:
                store.reset_stats()
            cross = CrossReads("P", stores[0], stores[1], "moving", retry=retry, clock=clock,
                               rng=rng)
            held = await cross.held(rows)
            return len(held), [store.stats("moving").totals.read_requests for store in stores]

    held, requests = run_virtual(body())
    assert held == 1000
    # ten batches in each store, each one more time in five
    assert all(r <= 20 for r in requests), requests
