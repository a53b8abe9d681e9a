"""Listings page by page: each entry read once, continuations kept only while they are true."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import shardex
from shardex import Routing, ShardPolicy
from shardex.fanout import CONTINUATION_TTL
from shardex.fanout.merge import share
from shardex.sim.clock import run_virtual
from tests.test_index_reads import WatchedStore

SIXTEEN = Routing(overrides={"PENDING": ShardPolicy(shards=16)})


async def _filled(store: WatchedStore, n: int, **options: Any) -> shardex.ShardedIndex:
    index = shardex.ShardedIndex(store, "orders", SIXTEEN, seed=1, hedge=None, **options)
    await index.open()
    for start in range(0, n, 200):
        await asyncio.gather(*(index.put("PENDING", f"o-{i:05d}", sort=f"{i:05d}")
                               for i in range(start, min(n, start + 200))))
    store.queries.clear()
    store.entries_read = 0
    return index


async def _listing(index: shardex.ShardedIndex, limit: int, order: str = "asc",
                   pause: float = 0.0) -> list[str]:
    items: list[str] = []
    cursor = None
    while True:
        page = await index.query("PENDING", limit=limit, order=order,  # type: ignore[arg-type]
                                 cursor=cursor)
        items += [e.item_id for e in page.items]
        if (cursor := page.cursor) is None:
            return items
        await asyncio.sleep(pause)


@pytest.mark.parametrize(("limit", "order"), [(1000, "asc"), (97, "desc"), (7, "asc")])
def test_a_full_listing_reads_each_entry_once(limit: int, order: str) -> None:
    async def body() -> None:
        store = WatchedStore(seed=3, read_ceiling=1e6)
        index = await _filled(store, 4000, max_concurrency=64)
        items = await _listing(index, limit, order)
        want = [f"o-{i:05d}" for i in range(4000)]
        assert items == (want if order == "asc" else want[::-1])
        assert store.entries_read == 4000
        # each shard is read with growing requests: a handful each, not one per page
        assert max(store.queries.values()) <= 4 + 250 // limit
        await index.close()

    run_virtual(body())


def test_a_listing_paused_past_the_ttl_reads_again_from_the_cursor() -> None:
    async def body() -> None:
        store = WatchedStore(seed=3, read_ceiling=1e6)
        index = await _filled(store, 1600)
        items = await _listing(index, 100, pause=CONTINUATION_TTL + 0.1)
        assert items == [f"o-{i:05d}" for i in range(1600)]
        assert store.entries_read > 1600 * 1.2  # every page read each shard again
        await index.close()

    run_virtual(body())


def test_a_cursor_used_twice_gives_the_same_page() -> None:
    async def body() -> None:
        store = WatchedStore(seed=3)
        index = await _filled(store, 400)
        first = await index.query("PENDING", limit=50)
        again = [await index.query("PENDING", limit=50, cursor=first.cursor) for _ in range(3)]
        assert [e.item_id for e in again[0].items] == [f"o-{i:05d}" for i in range(50, 100)]
        assert again[0].items == again[1].items == again[2].items
        assert again[0].cursor == again[1].cursor == again[2].cursor
        await index.close()

    run_virtual(body())


def test_a_page_continued_from_what_was_read_ahead_says_it_may_miss_a_write() -> None:
    """A page served from a kept continuation holds entries its shards read before it was
    asked for: another process's write acknowledged meanwhile may be missing (another
    client's deletes of the next page's items were listed on Azure and Cosmos DB), yet
    the page said ``consistent=True``. It says False; a page read afresh (the first, a
    cursor used again, one past the TTL) says True on a store of strong reads."""
    async def body() -> None:
        store = WatchedStore(seed=3)
        index = await _filled(store, 400)
        first = await index.query("PENDING", limit=50)
        assert first.consistent
        continued = await index.query("PENDING", limit=50, cursor=first.cursor)
        assert not continued.consistent
        again = await index.query("PENDING", limit=50, cursor=first.cursor)
        assert again.consistent
        assert again.items == continued.items
        later = await index.query("PENDING", limit=50, cursor=continued.cursor)
        await asyncio.sleep(CONTINUATION_TTL + 0.1)
        assert (await index.query("PENDING", limit=50, cursor=later.cursor)).consistent
        # pages that end where none of the query's did: a listing's page ending where
        # another's did keeps no continuation (test_two_listings_never_share_one)
        pages = [page async for page in index.pages("PENDING", limit=70)]
        assert [p.consistent for p in pages] == [True, False, False, False, False, False]
        await index.close()

    run_virtual(body())


def test_a_write_through_the_same_store_is_seen_by_the_next_page() -> None:
    async def body() -> None:
        store = WatchedStore(seed=3)
        reader = await _filled(store, 300)
        page = await reader.query("PENDING", limit=100)
        # another index object of this process, on the same store, deletes ahead
        other = shardex.ShardedIndex(store, "orders", seed=9, hedge=None)
        async with other:
            await other.delete("PENDING", "o-00150")
        rest = await _listing_from(reader, page.cursor)
        assert "o-00150" not in rest
        assert rest == [f"o-{i:05d}" for i in range(100, 300) if i != 150]
        await reader.close()

    run_virtual(body())


async def _listing_from(index: shardex.ShardedIndex, cursor: str | None) -> list[str]:
    items: list[str] = []
    while cursor is not None:
        page = await index.query("PENDING", limit=100, cursor=cursor)
        items += [e.item_id for e in page.items]
        cursor = page.cursor
    return items


def test_continuations_are_bounded() -> None:
    async def body() -> None:
        store = WatchedStore(seed=3)
        index = await _filled(store, 200)
        for _ in range(100):  # listings abandoned after their first page
            await index.query("PENDING", limit=2)
            await index.query("PENDING", limit=2, order="desc")
        fanout = index._reader()
        kept = fanout._listings
        assert len(kept) <= 64
        assert kept.kept == sum(listing.kept for listing in kept.listings())
        await index.close()
        assert not len(kept)
        assert kept.written not in store.meter.subscribers

    run_virtual(body())


@pytest.mark.parametrize(("limit", "shards", "expected"), [
    (100, 1, 101), (100, 16, 17), (100, 64, 9), (1000, 16, 92), (5, 8, 5), (10_000, 1, 1000),
])
def test_the_first_share_makes_a_second_round_trip_rare(limit: int, shards: int,
                                                        expected: int) -> None:
    assert share(limit, shards, 1000) == expected


def test_two_listings_never_share_one_continuation() -> None:
    """Two listings whose pages ended at the same position shared one continuation: the
    second kept replaced the first, whose next page then resumed the other's streams,
    which had read before an entry present throughout its own life was written (by
    another process: 3 of 300 left out in a tier move on DynamoDB Local,
    tests/test_tier_listing_dynamodb.py). Neither is kept, nor a third there within the
    TTL; a position used once only keeps as before."""
    from shardex.fanout.listing import Continuations, Listing

    def listing() -> Listing:
        return Listing(((), ("P#0",)), [])

    where = ("P", False, ("s", "i"), 1)
    kept = Continuations("ix")
    first, second, third = listing(), listing(), listing()
    kept.keep(where, first, now=0.0)
    kept.keep(where, second, now=1.0)
    assert kept.resume(where, ((), ("P#0",)), (1, 1), now=1.5) is None
    kept.keep(where, third, now=2.0)
    assert kept.resume(where, ((), ("P#0",)), (1, 1), now=2.5) is None
    later = listing()
    kept.keep(where, later, now=2.0 + CONTINUATION_TTL + 1.0)
    assert kept.resume(where, ((), ("P#0",)), (1, 1),
                       now=2.5 + CONTINUATION_TTL + 1.0) is later
