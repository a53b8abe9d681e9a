"""A tier move's listing (``shardex.tierreads``) against writes between its two reads.

While value P moves from store S (4 shards) to store T (16), a listing reads each position
on S's keys, then on T's, and holds T's rows against the placements of their items in
both stores. These tests drive writes between S's read and T's (a hook on T's queries,
memory:// on virtual time): an item a write moved out of S meanwhile is not lost, and
copies in T at the positions of S's live entries are listed once.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import shardex
from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.index import store_routing
from shardex.model.entries import StoredEntry
from shardex.routing import begin_transition
from shardex.sim.clock import run_virtual
from shardex.stores.base import Store

pytestmark = pytest.mark.filterwarnings("error")


async def _moving(stores: list[Store]) -> ShardedIndex:
    """Index ``moving`` on S = stores[0], P on 4 shards, in write-new towards 16 on T =
    stores[1]; S holds items s00..s09 at sorts 0100..1000, T t00..t09 at 0001..0010."""
    index = ShardedIndex(stores[0], "moving", Routing(overrides={"P": ShardPolicy(4)}),
                         hedge=None, tiers={"own": stores[1]})
    await index.__aenter__()
    await asyncio.gather(*(index.put("P", f"s{i:02d}", sort=f"{(i + 1) * 100:04d}")
                           for i in range(10)))
    await store_routing(index, dataclasses.replace(begin_transition(
        index.routing, {"P": ShardPolicy(16, tier="own")}), state="write-new"))
    await index.refresh_routing()
    await asyncio.gather(*(index.put("P", f"t{i:02d}", sort=f"{i + 1:04d}")
                           for i in range(10)))
    assert index.routing.reads_both("P")
    return index


def _before_queries(store: Store, action: Callable[[], Awaitable[None]]) -> list[int]:
    """Run ``action`` once, before the next query ``store`` answers (every query waits for
    it); return a list that counts the queries it answered since."""
    send = store._query  # type: ignore[attr-defined]
    done: list[asyncio.Future[None]] = []
    count = [0]

    async def query(*args: Any, **kwargs: Any) -> Any:
        if not done:
            done.append(asyncio.ensure_future(action()))
        await done[0]
        count[0] += 1
        return await send(*args, **kwargs)

    store._query = query  # type: ignore[method-assign]
    return count


async def _all(index: ShardedIndex, limit: int) -> list[tuple[str, str]]:
    out, cursor = [], None
    while True:
        page = await index.query("P", limit=limit, cursor=cursor)
        out += [(e.item_id, e.sort) for e in page.items]
        if (cursor := page.cursor) is None:
            return out


def _placements_read(store: Store) -> list[int]:
    """Count the placements ``store`` reads from now on: [requests, placements]."""
    count = [0, 0]
    for hook in ("_locate", "_locate_many"):
        send = getattr(store, hook)

        async def counted(namespace: str, ids: Any, rec: Any, send: Any = send) -> Any:
            count[0] += 1
            count[1] += 1 if isinstance(ids, str) else len(ids)
            return await send(namespace, ids, rec)

        setattr(store, hook, counted)
    return count


def test_an_item_moved_out_of_s_between_the_two_reads_is_not_lost() -> None:
    """S's read shows s02 live at 0300, beyond the first page (T's page of 5 ends at
    0005); before T is read, the application puts s02 at 0003x, which lands in T and
    takes it out of S. Its row in T lies at another position than the entry S showed,
    so it is held against the placements and returned (a skip by item alone would drop
    the row, and a listing reading S again beyond 0005 would find s02 no more). What S
    read before the write may list s02 at 0300 too, as any listing lists an entry that
    moved while it ran at the positions it was read at; every other item, once."""
    async def body() -> list[tuple[str, str]]:
        stores = [shardex.open_store("memory://", seed=1, profile="unlimited")
                  for _ in range(2)]
        index = await _moving(stores)
        try:
            async def move() -> None:
                await index.put("P", "s02", sort="0003x")

            _before_queries(stores[1], move)
            return await _all(index, 5)
        finally:
            await index.__aexit__(None, None, None)

    listed = run_virtual(body())
    assert ("s02", "0003x") in listed
    assert {sort for item, sort in listed if item == "s02"} <= {"0003x", "0300"}
    others = [item for item, _ in listed if item != "s02"]
    assert len(others) == len({*others}) == 19


def test_copies_at_the_entries_s_showed_are_listed_once() -> None:
    """A move's copies in T at the very positions of S's live entries (a mover stopped
    between its write to T and its tombstone in S leaves them): the listing returns
    each item once, S's entry, and holds T's rows, copies included, in one batched read
    in each store."""
    async def body() -> tuple[list[tuple[str, str]], list[int], list[int]]:
        stores = [shardex.open_store("memory://", seed=1, profile="unlimited")
                  for _ in range(2)]
        index = await _moving(stores)
        try:
            for i in range(10):
                item_id = f"s{i:02d}"
                where = await stores[0].locate("moving", item_id)
                assert where is not None
                assert where.entry is not None
                copy = StoredEntry(index.routing.shard_key("P", item_id), where.entry.sort, item_id,
                                   where.entry.attrs, version=where.version)
                await stores[1].place("moving", item_id, copy, version=where.version,
                                      expected=None)
            counts = [_placements_read(store) for store in stores]
            listed = await _all(index, 100)
            return listed, *counts
        finally:
            await index.__aexit__(None, None, None)

    listed, in_s, in_t = run_virtual(body())
    assert sorted(listed) == sorted([(f"s{i:02d}", f"{(i + 1) * 100:04d}") for i in range(10)]
                                    + [(f"t{i:02d}", f"{i + 1:04d}") for i in range(10)])
    # T's rows (t00..t09 and the ten copies) are held in one batch in each store
    assert in_s == in_t == [1, 20]
