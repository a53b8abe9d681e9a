"""Behaviour every store must show through ShardedIndex: written once, run on each backend."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

import shardex
from shardex import RetryPolicy, Routing, ShardPolicy
from shardex.index import store_routing
from shardex.routing import begin_transition
from tests.conftest import Backend
from tests.helpers import relayout

pytestmark = pytest.mark.filterwarnings("error")

SHARDED = Routing(overrides={"PENDING": ShardPolicy(shards=8)})


async def listing(index: shardex.ShardedIndex, value: str, *, limit: int,
                  order: str = "asc") -> list[shardex.Entry]:
    out: list[shardex.Entry] = []
    cursor = None
    while True:
        page = await index.query(value, limit=limit, order=order, cursor=cursor)  # type: ignore[arg-type]
        assert len(page.items) <= limit
        out += page.items
        cursor = page.cursor
        if cursor is None:
            return out


def test_put_query_orders_by_sort_then_item_id(backend: Backend) -> None:
    async def body() -> None:
        async with backend.index(SHARDED) as index:
            rows = [(f"2026-11-30T0{i % 7}:00:00Z", f"o-{i:03d}") for i in range(60)]
            await asyncio.gather(*(index.put("PENDING", item, sort=sort, attrs={"n": i})
                                   for i, (sort, item) in enumerate(rows)))
            asc = await listing(index, "PENDING", limit=7)
            assert [(e.sort, e.item_id) for e in asc] == sorted(rows)
            desc = await listing(index, "PENDING", limit=11, order="desc")
            assert [(e.sort, e.item_id) for e in desc] == sorted(rows, reverse=True)
            whole = await index.query("PENDING", limit=1000)
            assert whole.cursor is None
            assert len(whole.items) == 60
            assert {e.shard_key for e in asc} <= {f"PENDING#{k}" for k in range(8)}
            assert len({e.shard_key for e in asc}) > 1
            assert all(e.value == "PENDING" for e in asc)
            assert asc[0].attrs == {"n": rows.index((asc[0].sort, asc[0].item_id))}
            assert await index.count("PENDING") == 60

    backend.run(body())


def test_unsharded_value_keeps_its_plain_key(backend: Backend) -> None:
    async def body() -> None:
        async with backend.index(SHARDED) as index:
            await index.put("DELIVERED", "o-1", sort="s")
            await index.put("PENDING", "o-2", sort="s")
            assert (await index.get("o-1")).shard_key == "DELIVERED"  # type: ignore[union-attr]
            assert (await index.get("o-2")).shard_key == index.routing.shard_key("PENDING", "o-2")  # type: ignore[union-attr]

    backend.run(body())


def test_last_page_has_no_cursor_and_exact_fit_needs_no_empty_page(backend: Backend) -> None:
    async def body() -> None:
        async with backend.index(SHARDED) as index:
            for i in range(10):
                await index.put("PENDING", f"o-{i}", sort=f"{i:02d}")
            first = await index.query("PENDING", limit=5)
            second = await index.query("PENDING", limit=5, cursor=first.cursor)
            assert first.cursor is not None
            assert second.cursor is None
            assert [e.item_id for e in first.items + second.items] == [f"o-{i}" for i in range(10)]
            empty = await index.query("SHIPPED", limit=5)
            assert empty.items == []
            assert empty.cursor is None

    backend.run(body())


def test_move_is_atomic_and_checks_the_old_value(backend: Backend) -> None:
    async def body() -> None:
        async with backend.index(SHARDED) as index:
            await index.put("PENDING", "o-1", sort="t1", attrs={"total": 12})
            assert await index.move("o-1", old="PENDING", new="SHIPPED", sort="t2")
            assert await index.count("PENDING") == 0
            [shipped] = (await index.query("SHIPPED")).items
            assert (shipped.item_id, shipped.sort, shipped.attrs) == ("o-1", "t2", {"total": 12})
            with pytest.raises(shardex.ConditionFailed, match="under 'SHIPPED'"):
                await index.move("o-1", old="PENDING", new="DELIVERED")
            with pytest.raises(shardex.ConditionFailed, match="no entry"):
                await index.move("o-404", old="PENDING", new="DELIVERED")

    backend.run(body())


def test_delete_only_deletes_under_the_value_named(backend: Backend) -> None:
    async def body() -> None:
        async with backend.index(SHARDED) as index:
            await index.put("PENDING", "o-1", sort="t1")
            assert not await index.delete("SHIPPED", "o-1")
            assert await index.delete("PENDING", "o-1")
            assert not await index.delete("PENDING", "o-1")
            assert await index.get("o-1") is None
            assert (await index.query("PENDING")).items == []

    backend.run(body())


def test_put_again_replaces_the_entry(backend: Backend) -> None:
    async def body() -> None:
        async with backend.index(SHARDED) as index:
            await index.put("PENDING", "o-1", sort="t1", attrs={"v": 1})
            await index.put("PENDING", "o-1", sort="t0", attrs={"v": 2})
            await index.put("CANCELLED", "o-1", sort="t3", attrs={"v": 3})
            assert (await index.query("PENDING")).items == []
            [entry] = (await index.query("CANCELLED")).items
            assert (entry.sort, entry.attrs, entry.version) == ("t3", {"v": 3}, 3)

    backend.run(body())


@pytest.mark.parametrize("strategy", ["random", "round_robin"])
def test_recorded_shard_is_found_by_move_and_delete(backend: Backend, strategy: str) -> None:
    async def body() -> None:
        routing = Routing(overrides={"PENDING": ShardPolicy(shards=16, strategy=strategy),  # type: ignore[arg-type]
                                     "SHIPPED": ShardPolicy(shards=4, strategy=strategy)})  # type: ignore[arg-type]
        async with backend.index(routing) as index:
            for i in range(40):
                await index.put("PENDING", f"o-{i}", sort=f"{i:03d}")
            used = {e.shard_key for e in await listing(index, "PENDING", limit=100)}
            assert len(used) >= 8
            for i in range(0, 40, 2):
                assert await index.move(f"o-{i}", old="PENDING", new="SHIPPED")
            for i in range(1, 40, 4):
                assert await index.delete("PENDING", f"o-{i}")
            pending = await listing(index, "PENDING", limit=6)
            assert [e.item_id for e in pending] == [f"o-{i}" for i in range(3, 40, 4)]
            assert await index.count("SHIPPED") == 20

    backend.run(body())


def test_versions_stop_late_writes(backend: Backend) -> None:
    async def body() -> None:
        async with backend.index(SHARDED) as index:
            assert await index.put("PENDING", "o-1", sort="a", version=5)
            assert not await index.put("PENDING", "o-1", sort="b", version=4)
            assert not await index.put("PENDING", "o-1", sort="b", version=5)
            assert (await index.get("o-1")).sort == "a"  # type: ignore[union-attr]
            assert await index.delete("PENDING", "o-1", version=7)
            # A put that was sent before the delete and arrives after it stays dead.
            assert not await index.put("PENDING", "o-1", sort="c", version=6)
            assert await index.get("o-1") is None
            assert await index.put("PENDING", "o-1", sort="d", version=8)
            assert (await index.get("o-1")).version == 8  # type: ignore[union-attr]

    backend.run(body())


def test_concurrent_writers_of_one_item_leave_one_entry(backend: Backend) -> None:
    async def body() -> None:
        async with backend.index(SHARDED) as index:
            values = ["PENDING", "SHIPPED", "DELIVERED", "CANCELLED"]
            await asyncio.gather(*(index.put(values[i % 4], "o-1", sort=f"{i:02d}")
                                   for i in range(12)))
            counts = [await index.count(v) for v in values]
            assert sum(counts) == 1
            entry = await index.get("o-1")
            assert entry is not None
            assert entry.version == 12

    backend.run(body())


def test_scan_yields_every_entry_once(backend: Backend) -> None:
    async def body() -> None:
        async with backend.index(SHARDED) as index:
            await asyncio.gather(*(index.put("PENDING", f"o-{i}", sort=str(i)) for i in range(50)))
            seen = [e.item_id async for e in index.scan("PENDING")]
            assert sorted(seen) == sorted(f"o-{i}" for i in range(50))

    backend.run(body())


def test_listing_is_complete_when_shards_span_many_pages(backend: Backend) -> None:
    """A shard larger than one 1 MB page must be followed to its end, not cut at page one.

    Two shards of about 80 entries of 30 KB each (2.4 MB, three pages): every shard spans
    pages (checked: more than 1.3 MB on each), and the merge reads both.
    """
    async def body() -> None:
        routing = Routing(overrides={"BIG": ShardPolicy(shards=2)})
        # 4.8 MB written as fast as it goes: the simulated partitions throttle, patience
        patient = RetryPolicy(attempts=30, base=0.05, cap=1.0, deadline=None)
        async with backend.index(routing, retry=patient) as index:
            blob = "x" * 30_000
            for start in range(0, 160, 40):
                await asyncio.gather(*(index.put("BIG", f"i-{i:04d}", sort=f"{i:04d}",
                                                 attrs={"blob": blob})
                                       for i in range(start, start + 40)))
            listed = await listing(index, "BIG", limit=1000)
            assert [e.item_id for e in listed] == [f"i-{i:04d}" for i in range(160)]
            per_shard = Counter(e.shard_key for e in listed)
            assert min(per_shard.values()) * len(blob) > 1_300_000, per_shard  # > 1 MB each
            assert await index.count("BIG") == 160
            assert len([e async for e in index.scan("BIG")]) == 160

    backend.run(body())


def test_cursor_is_refused_when_damaged_or_reused_elsewhere(backend: Backend) -> None:
    async def body() -> None:
        async with backend.index(SHARDED) as index:
            for i in range(6):
                await index.put("PENDING", f"o-{i}", sort=str(i))
            cursor = (await index.query("PENDING", limit=2)).cursor
            assert cursor is not None
            flipped = cursor[:10] + ("A" if cursor[10] != "A" else "B") + cursor[11:]
            bad: list[tuple[Any, str]] = [
                (flipped, "integrity"), (cursor[:12], "truncated|integrity"),
                ("!!not base64!!", "base64"), ("", "non-empty"), (42, "non-empty"),
            ]
            for token, message in bad:
                with pytest.raises(shardex.InvalidCursor, match=message):
                    await index.query("PENDING", limit=2, cursor=token)
            with pytest.raises(shardex.InvalidCursor, match="issued for 'PENDING'"):
                await index.query("SHIPPED", limit=2, cursor=cursor)
            with pytest.raises(shardex.InvalidCursor, match="order 'asc'"):
                await index.query("PENDING", limit=2, order="desc", cursor=cursor)
            async with backend.index(SHARDED) as other:
                with pytest.raises(shardex.InvalidCursor, match="integrity"):
                    await other.query("PENDING", limit=2, cursor=cursor)

    backend.run(body())


def test_a_cursor_at_a_sort_with_a_nul_lists_from_where_the_order_puts_it(
        backend: Backend) -> None:
    """An application's own GSI sort attribute may hold a NUL, so a cursor may carry one
    (its position is checked, not trusted, without a secret): every store lists from
    where ``(sort, item_id)`` order puts it, after the run of the sort before the NUL."""
    from shardex.cursor import Cursor, CursorCodec

    async def body() -> None:
        async with backend.index(SHARDED) as index:
            rows = [("r", "o-0"), ("s", "o-1"), ("s", "o-2"), ("s\x01", "o-3"),
                    ("sa", "o-4"), ("t", "o-5")]
            for sort, item in rows:
                await index.put("PENDING", item, sort=sort)
            with pytest.raises(shardex.InvalidKey, match="NUL"):
                await index.put("PENDING", "o-9", sort="s\x00b")
            at = ("s\x00b", "o-1")
            for order, want in (("asc", [r for r in rows if r > at]),
                                ("desc", [r for r in rows[::-1] if r < at])):
                cursor = CursorCodec(index.name).encode(Cursor("PENDING", order, at))
                for limit in (1, 2, 100):
                    got: list[tuple[str, str]] = []
                    token: str | None = cursor
                    while token is not None:
                        page = await index.query("PENDING", limit=limit, order=order,  # type: ignore[arg-type]
                                                 cursor=token)
                        got += [(e.sort, e.item_id) for e in page.items]
                        token = page.cursor
                    assert got == want, (order, limit)

    backend.run(body())


def test_a_listing_continues_exactly_across_writes_and_layout_changes(backend: Backend) -> None:
    async def body() -> None:
        async with backend.index(SHARDED) as index:
            # 60 entries, about 8 a shard, in pages of 8: a page reads some shards to their
            # end and stops others midway, which its continuation must tell apart
            rows = {f"o-{i:03d}": f"2026-11-30T00:{i:02d}Z" for i in range(60)}
            items = list(rows.items())
            for start in range(0, 60, 20):
                await asyncio.gather(*(index.put("PENDING", item, sort=sort)
                                       for item, sort in items[start:start + 20]))
            got: list[tuple[str, str]] = []

            async def page(cursor: str | None) -> str | None:
                read = await index.query("PENDING", limit=8, cursor=cursor)
                got.extend((e.sort, e.item_id) for e in read.items)
                return read.cursor

            # two pages on 8 shards: the second resumes the shards where the first stopped
            cursor = await page(await page(None))
            # writes ahead of the cursor, through this index: gone, and moved to the end
            for i in range(20, 25):
                assert await index.delete("PENDING", f"o-{i:03d}")
                del rows[f"o-{i:03d}"]
            for i in range(30, 35):
                rows[f"o-{i:03d}"] = f"2026-12-01T00:00:{i:02d}Z"
                await index.put("PENDING", f"o-{i:03d}", sort=rows[f"o-{i:03d}"])
            cursor = await page(cursor)
            # a reshard to 12 shards begins (reads cover both layouts), then ends with
            # every entry re-laid, some on shard keys the first pages never read
            await store_routing(index, begin_transition(index.routing,
                                                        {"PENDING": ShardPolicy(shards=12)}))
            cursor = await page(cursor)
            await relayout(index, "PENDING", ShardPolicy(shards=12))
            while cursor is not None:
                cursor = await page(cursor)
            assert got == sorted((sort, item) for item, sort in rows.items())

    backend.run(body())


def test_routing_is_stored_with_the_index_and_wins_over_code(backend: Backend,
                                                             caplog: pytest.LogCaptureFixture
                                                             ) -> None:
    async def body() -> None:
        store = backend.store()
        async with backend.index(SHARDED, store=store, name="orders") as first:
            await first.put("PENDING", "o-1", sort="s")
            assert first.routing == SHARDED
        async with backend.index(None, store=store, name="orders") as reader:
            assert reader.routing.policy("PENDING").shards == 8
            assert (await reader.query("PENDING")).items[0].item_id == "o-1"
        other = Routing(overrides={"PENDING": ShardPolicy(shards=2)})
        async with backend.index(other, store=store, name="orders") as late:
            assert late.routing.policy("PENDING").shards == 8
        assert "differs from the stored routing" in caplog.text
        with pytest.raises(shardex.RoutingConflict):
            async with backend.index(other, store=store, name="orders", strict_routing=True):
                pass

    backend.run(body())


def test_bad_arguments_are_refused_before_any_request(backend: Backend) -> None:
    async def body() -> None:
        async with backend.index(SHARDED) as index:
            cases: list[tuple[Any, type[Exception], str]] = [
                (index.put("PEN#DING", "o-1"), shardex.InvalidKey, "separator"),
                (index.put("", "o-1"), shardex.InvalidKey, "empty"),
                (index.put(b"PENDING", "o-1"), shardex.InvalidKey, "text"),  # type: ignore[arg-type]
                (index.put("PENDING", "\ud800"), shardex.InvalidKey, "surrogate"),
                (index.put("PENDING", "o-1", sort=5), shardex.InvalidKey, "text"),  # type: ignore[arg-type]
                (index.put("PENDING", "o-1", attrs=[1]), shardex.InvalidInput, "mapping"),  # type: ignore[arg-type]
                (index.put("PENDING", "o-1", version=0), shardex.InvalidInput, "version"),
                (index.query("PENDING", limit=0), shardex.InvalidInput, "limit"),
                (index.query("PENDING", order="up"), shardex.InvalidInput, "order"),  # type: ignore[arg-type]
                (index.move("o-1", old="A", new="B#1"), shardex.InvalidKey, "separator"),
                (index.count("A#1"), shardex.InvalidKey, "separator"),
            ]
            for coro, error, message in cases:
                with pytest.raises(error, match=message):
                    await coro

    backend.run(body())
