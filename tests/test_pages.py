"""``index.pages``: a listing read to its end takes the gather's round trips, not one more."""

from __future__ import annotations

import asyncio
import math
from collections import Counter

import pytest

import shardex
from shardex import Routing, ShardPolicy
from shardex.errors import InvalidInput
from shardex.fanout.listing import MAX_KEPT_ENTRIES, first_size
from shardex.fanout.merge import share
from shardex.sim.clock import VirtualTimeLoop
from tests.test_index_reads import SIXTEEN, WatchedStore, filled
from tests.test_read_ahead import FIXED, WANT, _add, _loaded, _pages

TWO = Routing(overrides={"PENDING": ShardPolicy(shards=2)})


async def _all(index: shardex.ShardedIndex, limit: int, **options: object
               ) -> tuple[list[str], float]:
    """Every item ``pages`` yields, and how long the listing took."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    items = [e.item_id async for page in index.pages("PENDING", limit=limit, **options)
             for e in page.items]  # type: ignore[arg-type]
    return items, loop.time() - began


@pytest.mark.shardex_virtual
async def test_pages_read_a_listing_in_the_round_trips_of_a_gather() -> None:
    store = WatchedStore(seed=3, **FIXED)
    index = shardex.ShardedIndex(store, "orders", TWO, seed=1, hedge=None)
    await index.open()
    want = WANT[:3000]
    per_key = Counter(index.routing.shard_key("PENDING", item_id) for item_id in want)
    for item_id in want:  # about 1,500 a shard: a gather reads each in store pages at once
        _add(store, index, item_id, item_id[2:])
    gathered = max(math.ceil(n / 1000) for n in per_key.values())
    assert gathered == 2
    for limit in (1000, 100):
        items, took = await _all(index, limit)
        assert items == want
        assert took == pytest.approx(gathered * 0.02)
        assert store.entries_read == 3000  # each entry read once: a gather's units
        assert store.queries == {k: math.ceil(n / 1000) for k, n in per_key.items()}
        store.entries_read, store.queries = 0, {}
    # page by page, the first page asks each shard only for its share: one round trip
    # more wherever the share does not cover what a shard's last store page is short of
    first = share(100, 2, 1000)
    listed = max(1 + math.ceil((n - first) / 1000) for n in per_key.values())
    assert listed == gathered + 1
    loop = asyncio.get_running_loop()
    began = loop.time()
    items, _ = await _pages(index, 100)
    assert items == want
    assert loop.time() - began == pytest.approx(listed * 0.02)
    await index.close()


@pytest.mark.shardex_virtual
async def test_the_first_requests_of_pages_stay_within_the_read_ahead_bound() -> None:
    store = WatchedStore(seed=3, **FIXED)
    index = await _loaded(store)
    await _all(index, 100)
    # 250 entries a shard: one store page each, one round trip for the whole listing
    assert max(store.queries.values()) == 1
    assert store.entries_read == 4000
    assert first_size(17, 16, 1000, MAX_KEPT_ENTRIES) == 1000
    # 1,024 shard keys: the first requests and the next ones fit the bound
    assert first_size(share(100, 1024, 1000), 1024, 1000, MAX_KEPT_ENTRIES) == 97
    assert first_size(5, 16, 1000, 0) == 5  # no room: the share, as a first page asks
    await index.close()


@pytest.mark.shardex_virtual
async def test_pages_list_exactly_across_writes_and_resume_from_a_cursor() -> None:
    store = WatchedStore(seed=3, **FIXED)
    reader = await filled(store, 600, hedge=None)
    got: list[str] = []
    cursor = None
    async with shardex.ShardedIndex(store, "orders", seed=9, hedge=None) as other:
        async for page in reader.pages("PENDING", limit=100, order="desc"):
            got += [e.item_id for e in page.items]
            if len(got) == 200:  # another process deletes one ahead and adds one
                await other.delete("PENDING", "o-00150")
                await other.put("PENDING", "o-00150b", sort="00150b")
                await asyncio.sleep(shardex.fanout.CONTINUATION_TTL + 1)
            if len(got) == 300:
                cursor = page.cursor
                break
    want = sorted([*WANT[:150], "o-00150b", *WANT[151:600]], reverse=True)
    assert got == want[:300]
    rest = [e.item_id async for page in reader.pages("PENDING", limit=70, order="desc",
                                                     cursor=cursor) for e in page.items]
    assert got + rest == want
    first = await reader.query("PENDING", limit=50)
    assert [e.item_id async for page in reader.pages("PENDING", cursor=first.cursor)
            for e in page.items] == sorted(want)[50:]
    await reader.close()


@pytest.mark.shardex_virtual
async def test_pages_check_their_arguments_as_query_does() -> None:
    store = WatchedStore(seed=3, **FIXED)
    async with shardex.ShardedIndex(store, "orders", SIXTEEN, seed=1) as index:
        for bad in ({"limit": 0}, {"order": "up"}, {"cursor": "nonsense"}):
            with pytest.raises(InvalidInput):
                async for _ in index.pages("PENDING", **bad):  # type: ignore[arg-type]
                    pass


def test_the_sync_facade_iterates_pages() -> None:
    with shardex.SyncShardedIndex("memory://?seed=1", "orders", SIXTEEN,
                                  loop_factory=VirtualTimeLoop) as index:
        for i in range(25):
            index.put("PENDING", f"o-{i:05d}", sort=f"{i:05d}")
        pages = list(index.pages("PENDING", limit=10))
    assert [len(p) for p in pages] == [10, 10, 5]
    assert [e.item_id for p in pages for e in p.items] == WANT[:25]
    assert pages[-1].cursor is None


@pytest.mark.shardex_virtual
async def test_pages_stopped_early_free_what_they_read_ahead_at_once() -> None:
    """What an abandoned listing buffered counts against the bound every listing reads
    ahead within, until it expires. Before: after the caller stopped, 1,900 entries
    stayed kept for 5 s."""
    store = WatchedStore(seed=3, **FIXED)
    index = shardex.ShardedIndex(store, "orders", TWO, seed=1, hedge=None)
    await index.open()
    for item_id in WANT[:4000]:
        _add(store, index, item_id, item_id[2:])
    fanout = index._reader()
    for stop in ("aclose", "collected"):
        pages = index.pages("PENDING", limit=100)
        seen = [e.item_id for e in (await anext(pages)).items]
        assert seen == WANT[:100]
        assert fanout._listings.kept > 1000  # read ahead: a store page a shard
        if stop == "aclose":
            await pages.aclose()
        else:
            del pages  # as a loop broken out of leaves it: the loop's hook closes it
            for _ in range(3):  # the hook's call, then the task that closes it
                await asyncio.sleep(0)
        assert (fanout._listings.kept, len(fanout._listings)) == (0, 0), stop
    await index.close()
