"""``Store.locate_many``: the same answers as ``locate`` one by one, on every backend, in
as few requests as each store's batched read allows (a moving value's listing, which reads
its placements in batches: ``tests/test_tier_listing.py``)."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from shardex.errors import InvalidInput, Throttled
from shardex.model.entries import Placement, StoredEntry
from shardex.stores.base import Store
from tests.conftest import Backend

pytestmark = pytest.mark.filterwarnings("error")

NS = "ix"


async def place(store: Store, ids: list[str], *, deleted: int = 0) -> None:
    """Place an item of each of ``ids`` (the first ``deleted`` of them deleted again)."""
    async def one(i: int, item_id: str) -> None:
        entry = StoredEntry(f"V#{i % 4}", f"{i:04d}", item_id, {"n": i})
        await store.place(NS, item_id, entry, version=1, expected=None)
        if i < deleted:
            await store.place(NS, item_id, None, version=2,
                              expected=await store.locate(NS, item_id))

    for start in range(0, len(ids), 32):
        await asyncio.gather(*(one(i, ids[i]) for i in range(start, min(len(ids), start + 32))))


async def _placed(store: Store, count: int, *, deleted: int = 0) -> list[str]:
    """Place ``count`` items (the first ``deleted`` of them deleted again); their ids."""
    ids = [f"item-{i:04d}" for i in range(count)]
    await place(store, ids, deleted=deleted)
    return ids


def test_answers_as_locate_one_by_one_in_batched_requests(backend: Backend) -> None:
    async def body() -> None:
        async with backend.store() as store:
            ids = await _placed(store, 110, deleted=3)
            asked = [*ids, "never-placed", "never-either", ids[5], ids[0]]
            store.reset_stats()
            found = await store.locate_many(NS, asked)
            requests = store.stats(NS).totals.read_requests
            one_by_one = dict(zip(asked, await asyncio.gather(
                *(store.locate(NS, item_id) for item_id in asked)), strict=True))
            assert found == one_by_one
            assert list(found) == list(dict.fromkeys(asked))
            assert found["never-placed"] is None
            assert [found[i].entry for i in ids[:3]] == [None] * 3  # type: ignore[union-attr]
            assert found[ids[7]].entry.attrs == {"n": 7}  # type: ignore[union-attr]
            size = store.batch_locate
            distinct = len(ids) + 2
            # a batched store reads them in ceil(n / batch) requests (more than one takes)
            assert requests == (distinct if size is None else math.ceil(distinct / size))
            assert await store.locate_many(NS, []) == {}
            if backend.name.startswith("dynamodb"):
                await _unprocessed(store, found)

    backend.run(body())


def test_bad_ids_are_refused_before_any_request(memory: Backend) -> None:
    async def body() -> None:
        async with memory.store() as store:
            for bad in ("item-1", ["ok", ""], ["ok", 7], None, [None]):
                with pytest.raises(InvalidInput, match="item id"):
                    await store.locate_many(NS, bad)  # type: ignore[arg-type]
            with pytest.raises(InvalidInput, match="namespace"):
                await store.locate_many("", ["a"])
            assert store.stats().totals.requests == 0

    memory.run(body())


def test_throttled_placements_are_read_again_and_a_refused_request_raises(
        memory: Backend) -> None:
    async def body() -> None:
        # one partition holding 100 placements, 80 read units a second: a batch of 100
        # is read over a few tries, its throttled keys left unread and read again (the
        # backoffs span over a second)
        store = memory.store(partitions=1, read_ceiling=80.0)
        async with store:
            ids = await _placed(store, 100)
            await asyncio.sleep(5.0)
            store.reset_stats()
            found = await store.locate_many(NS, ids)
            assert [found[i].entry.attrs for i in ids] == [  # type: ignore[union-attr]
                {"n": n} for n in range(len(ids))]
            stats = store.stats(NS).totals
            # the first request read some, a later one may have been refused whole
            assert 1 < stats.read_requests <= 8
            assert stats.read_units == len(ids)
        refused = memory.store(throttle_rate=1.0)
        async with refused:
            with pytest.raises(Throttled):
                await refused.locate_many(NS, ["a", "b"])

    memory.run(body())


async def _unprocessed(store: Store, located: dict[str, Placement | None]) -> None:
    """DynamoDB Local never throttles: the client answers the first three BatchGetItems
    for half their keys, the other half UnprocessedKeys, as DynamoDB does."""
    client: Any = store._client  # type: ignore[attr-defined]
    send, halved = client.call, []

    async def call(operation: str, **params: Any) -> dict[str, Any]:
        if operation != "BatchGetItem" or len(halved) >= 3:
            return await send(operation, **params)  # type: ignore[no-any-return]
        (table, ask), = params["RequestItems"].items()
        keys = ask["Keys"]
        halved.append(len(keys))
        response: dict[str, Any] = await send(operation, **{
            **params, "RequestItems": {table: {**ask, "Keys": keys[:len(keys) // 2]}}})
        response["UnprocessedKeys"] = {table: {**ask, "Keys": keys[len(keys) // 2:]}}
        return response

    client.call = call
    try:
        store.reset_stats()
        found = await store.locate_many(NS, ids := list(located))
    finally:
        client.call = send
    assert found == located
    # two batches (100 and the rest), both halved, then one of them again: a request each
    assert sorted(halved[:2]) == [len(ids) - 100, 100]
    assert len(halved) == 3
    assert store.stats(NS).totals.read_requests == 2 + 3
