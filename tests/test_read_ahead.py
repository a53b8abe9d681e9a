"""Listings read ahead once the caller continues them: pages stop waiting, within bounds."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

import shardex
from shardex.capacity import entry_bytes
from shardex.errors import IncompleteRead
from shardex.fanout.listing import MAX_KEPT_ENTRIES
from shardex.fanout.merge import GROWTH
from shardex.index import store_routing
from shardex.model.entries import StoredEntry
from tests.test_index_reads import FAST_GIVE_UP, SIXTEEN, WatchedStore, filled

# every request takes 20 ms: the time of a page is its round trips
FIXED = {"latency_median_ms": 20.0, "latency_p99_ms": 20.0, "latency_per_kb_ms": 0.0,
         "profile": "unlimited"}
WANT = [f"o-{i:05d}" for i in range(4000)]


async def _loaded(store: WatchedStore, n: int = 4000, **options: Any) -> shardex.ShardedIndex:
    """An open index whose value PENDING holds ``n`` entries, put straight into the store."""
    options.setdefault("hedge", None)
    index = shardex.ShardedIndex(store, "orders", SIXTEEN, seed=1, **options)
    await index.open()
    for item_id in WANT[:n]:
        _add(store, index, item_id, item_id[2:])
    return index


def _add(store: WatchedStore, index: shardex.ShardedIndex, item_id: str, sort: str) -> None:
    # as another process's write would land: not through this process's store object
    entry = StoredEntry(index.routing.shard_key("PENDING", item_id), sort, item_id, {},
                        version=1)
    store._state("orders", entry.shard_key, 0.0).add(entry, entry_bytes(entry))


async def _pages(index: shardex.ShardedIndex, limit: int, *, cursor: str | None = None,
                 pause: float = 0.0) -> tuple[list[str], list[float]]:
    """Every item from ``cursor`` on, and how long each page call waited."""
    loop = asyncio.get_running_loop()
    items: list[str] = []
    waits: list[float] = []
    while True:
        began = loop.time()
        page = await index.query("PENDING", limit=limit, cursor=cursor)
        waits.append(loop.time() - began)
        items += [e.item_id for e in page.items]
        if (cursor := page.cursor) is None:
            return items, waits
        await asyncio.sleep(pause)


@pytest.mark.shardex_virtual
async def test_a_continued_listing_reads_while_the_caller_works() -> None:
    store = WatchedStore(seed=3, **FIXED)
    index = await _loaded(store)
    # the caller spends 50 ms on each page: longer than a round trip
    items, waits = await _pages(index, 100, pause=0.05)
    assert items == WANT
    assert store.entries_read == 4000  # each entry read once
    assert min(waits[:2]) > 0.019  # the first two pages wait for the store
    assert max(waits[2:]) == 0  # after them, what a page needs has landed meanwhile
    await index.close()


@pytest.mark.shardex_virtual
async def test_a_fast_caller_waits_for_few_round_trips() -> None:
    store = WatchedStore(seed=3, **FIXED)
    index = await _loaded(store)
    _, waits = await _pages(index, 100)
    # 250 entries a shard: asked for 17, then, the caller coming straight back, for the
    # rest in one request: two round trips, not one every time a shard runs dry (nor
    # one for each four-fold growth of the request: 17, 68, 272)
    assert sum(waits) <= 2 * 0.02 + 1e-9
    await index.close()


@pytest.mark.shardex_virtual
async def test_a_first_page_reads_no_further_than_it_needs() -> None:
    store = WatchedStore(seed=3, **FIXED)
    index = await _loaded(store)
    page = await index.query("PENDING", limit=100)
    await asyncio.sleep(1.0)
    assert [e.item_id for e in page.items] == WANT[:100]
    assert sum(store.queries.values()) == 16
    assert store.entries_read == 16 * 17  # each shard's share, nothing ahead
    await index.close()


@pytest.mark.shardex_virtual
async def test_a_write_while_requests_are_read_ahead_is_seen() -> None:
    store = WatchedStore(seed=3, **FIXED)
    reader = await filled(store, 600, hedge=None)
    first = await reader.query("PENDING", limit=100)
    second = await reader.query("PENDING", limit=100, cursor=first.cursor)  # reads ahead now
    await asyncio.sleep(0.01)  # mid-flight
    async with shardex.ShardedIndex(store, "orders", seed=9, hedge=None) as other:
        await other.delete("PENDING", "o-00350")
        await other.put("PENDING", "o-00350b", sort="00350b")
    rest, _ = await _pages(reader, 100, cursor=second.cursor)
    assert rest == [*WANT[200:350], "o-00350b", *WANT[351:600]]
    await reader.close()


@pytest.mark.shardex_virtual
async def test_a_shard_that_fails_ahead_is_asked_again_when_a_page_needs_it() -> None:
    store = WatchedStore(seed=3, **FIXED)
    index = await _loaded(store, retry=FAST_GIVE_UP)
    first = await index.query("PENDING", limit=100)
    broken = index.routing.read_keys("PENDING")[5]
    store.failing.add(broken)
    # served from what the first page read; its shards read ahead from here on, a fast
    # caller's the rest of each shard in one request
    second = await index.query("PENDING", limit=100, cursor=first.cursor)
    await asyncio.sleep(2.0)  # the read ahead of the broken shard gave up meanwhile
    with pytest.raises(IncompleteRead) as caught:
        await _pages(index, 100, cursor=second.cursor)
    assert broken in str(caught.value)
    store.failing.clear()
    rest, _ = await _pages(index, 100, cursor=second.cursor)  # the same cursor still serves
    assert rest == WANT[200:]
    await index.close()


@pytest.mark.shardex_virtual
async def test_closing_the_index_stops_what_is_read_ahead() -> None:
    store = WatchedStore(seed=3, **FIXED)
    index = await _loaded(store)
    page = await index.query("PENDING", limit=100)
    for _ in range(10):  # a caller slower than the store, until a page leaves reads ahead
        await asyncio.sleep(0.05)
        page = await index.query("PENDING", limit=100, cursor=page.cursor)
        await asyncio.sleep(0.005)
        if store.in_flight:
            break
    assert store.in_flight > 0
    await index.close()
    assert store.in_flight == 0
    assert asyncio.all_tasks() == {asyncio.current_task()}


@pytest.mark.shardex_virtual
async def test_a_continuation_is_not_resumed_in_another_layout() -> None:
    store = WatchedStore(seed=3, **FIXED)
    index = await _loaded(store)
    first = await index.query("PENDING", limit=100)
    second = await index.query("PENDING", limit=100, cursor=first.cursor)
    await asyncio.sleep(0.1)  # read ahead well past the next page

    # entries another process's mover puts behind what this one read ahead: no write of
    # this process, so only the routing's version says the layout moved
    _add(store, index, "o-00250a", "00250a")
    third = await index.query("PENDING", limit=100, cursor=second.cursor)
    assert "o-00250a" not in [e.item_id for e in third.items]  # resumed: not seen yet
    routing = index.routing
    await store_routing(index, dataclasses.replace(routing, version=routing.version + 1))
    _add(store, index, "o-00350a", "00350a")
    fourth = await index.query("PENDING", limit=100, cursor=third.cursor)
    assert "o-00350a" in [e.item_id for e in fourth.items]  # read afresh from the cursor
    await index.close()


@pytest.mark.shardex_virtual
async def test_a_slow_caller_is_read_ahead_of_in_proportion() -> None:
    store = WatchedStore(seed=3, **FIXED)
    index = await _loaded(store)
    fanout = index._reader()
    cursor, seen = None, 0
    while True:
        page = await index.query("PENDING", limit=10, cursor=cursor)
        seen += len(page.items)
        await asyncio.sleep(0.2)  # a slow caller: everything read ahead has landed
        for listing in fanout._listings.listings():
            for stream in listing.streams:
                assert len(stream.buffer) <= 2 * max(stream.asked, 1)
            # four times what the caller consumed and the first page read, at most: as
            # much as each shard read again only once dry would hold
            assert not listing.eager
            assert sum(len(s.buffer) for s in listing.streams) <= \
                GROWTH * (seen + 16 * listing.low)
        if (cursor := page.cursor) is None:
            break
    assert seen == 4000
    assert fanout._listings.kept <= MAX_KEPT_ENTRIES
    await index.close()


@pytest.mark.shardex_virtual
async def test_a_request_read_ahead_is_not_hedged() -> None:
    store = WatchedStore(seed=3, **FIXED)
    # every request is slower than the delay, and the budget pays for every copy
    index = await _loaded(store, hedge=shardex.HedgePolicy(delay=0.001, budget=10.0))
    cursor = None
    for _ in range(2):  # both pages wait for the store: their requests are hedged
        page = await index.query("PENDING", limit=100, cursor=cursor)
        cursor = page.cursor
        await asyncio.sleep(0.05)  # slower than a round trip: later pages find it landed
    copies, read = store.stats("orders").totals.hedges_sent, store.entries_read
    assert copies > 0
    items, waits = await _pages(index, 100, cursor=cursor, pause=0.05)
    assert max(waits) == 0  # no page waited: every request was read ahead
    assert len(items) == 3800
    assert store.entries_read > read
    assert store.stats("orders").totals.hedges_sent == copies  # and none got a copy
    await index.close()
