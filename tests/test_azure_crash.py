"""Crash injection on Azurite: a write killed between any two of its steps.

A put, move or delete is several requests with one commit point (the placement's
If-Match replace). The client is made to fail before and after each of its requests, as
a process killed there; afterwards every read is complete and shows the item under
exactly the value its placement names (or nowhere, when deleted), before and after
``repair``, which leaves no row uncommitted; the item can be written again; and a write
still in flight while repair runs is fenced: it fails its commit and changes nothing.
And the stateful index test (random writes and paginations against a model) runs on
Azurite under injected throttles and timeouts, smaller than on ``memory://``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from shardex.errors import ConditionFailed
from shardex.stores.azure import AzureTablesStore, keys
from shardex.stores.base import Placement, Store, StoredEntry
from tests import azurite
from tests.azure_faults import Crash, Faulty
from tests.test_index_stateful import IndexMachine

pytestmark = pytest.mark.azure
NS = "orders"
KEYS = ("PENDING#1", "SHIPPED#0")


def store_with_faults() -> tuple[AzureTablesStore, Faulty]:
    plain = azurite.table_store()
    faulty = Faulty(plain.client)
    return AzureTablesStore(plain.table, client=faulty), faulty


async def listing(s: AzureTablesStore, key: str, descending: bool = False) -> list[str]:
    out, after = [], None
    while True:
        page = await s.query(NS, key, after=after, descending=descending, limit=2)
        out += [e.item_id for e in page.entries]
        if page.resume is None:
            return out
        after = page.resume


async def where(s: AzureTablesStore, item_id: str) -> list[str]:
    """The shard keys whose listings (both orders) and counts show ``item_id``."""
    seen = []
    for key in KEYS:
        asc, desc = await listing(s, key), await listing(s, key, descending=True)
        assert asc == desc[::-1]
        assert await s.count(NS, key) == len(asc)
        seen += [key] * asc.count(item_id)
    return seen


async def raw_rows(s: AzureTablesStore) -> list[dict[str, Any]]:
    low, high = keys.namespace_range(NS)
    rows, _ = await s.client.call("query", filter="PartitionKey gt @lo and PartitionKey lt @hi",
                                  parameters={"lo": low, "hi": high}, top=1000)
    return [props for props, _ in rows if "st" in props]


async def check_exact(s: AzureTablesStore, item_id: str) -> None:
    placement = await s.locate(NS, item_id)
    expected = [] if placement is None or placement.entry is None else \
        [placement.entry.shard_key]
    assert await where(s, item_id) == expected
    assert await where(s, "o-2") == ["SHIPPED#0"]  # a bystander is untouched


def entry(key: str, item_id: str = "o-1", sort: str = "2026-11-30T05:00:00Z") -> StoredEntry:
    return StoredEntry(shard_key=key, sort=sort, item_id=item_id, attrs={"total": 12})


Write = Callable[[AzureTablesStore, Placement | None], Awaitable[float]]
WRITES: dict[str, tuple[bool, Write, int]] = {
    # name: (placed first?, the write, its requests when nothing fails)
    "move": (True, lambda s, p: s.place(NS, "o-1", entry("SHIPPED#0"), version=2, expected=p),
             5),
    "put-same-key": (True, lambda s, p: s.place(NS, "o-1", entry("PENDING#1", sort="b"),
                                                version=2, expected=p), 5),
    "first-put": (False, lambda s, p: s.place(NS, "o-1", entry("PENDING#1"), version=1,
                                              expected=p), 3),
    "delete": (True, lambda s, p: s.place(NS, "o-1", None, version=2, expected=p), 3),
}
CASES = [(name, step, after) for name, (_, _, steps) in WRITES.items()
         for step in range(1, steps + 1) for after in (False, True)]


@pytest.mark.parametrize(("name", "step", "after"), CASES,
                         ids=[f"{n}-step{s}-{'after' if a else 'before'}" for n, s, a in CASES])
def test_a_write_killed_at_any_step_leaves_reads_exact_and_repair_tidies(
        name: str, step: int, after: bool) -> None:
    placed, write, steps = WRITES[name]

    async def main() -> None:
        s, faulty = store_with_faults()
        async with s:
            await s.place(NS, "o-2", entry("SHIPPED#0", "o-2"), version=1, expected=None)
            if placed:
                await s.place(NS, "o-1", entry("PENDING#1"), version=1, expected=None)
            before = await s.locate(NS, "o-1")
            start = len(faulty.calls)
            await write(s, before)  # once cleanly, on a copy of the table: count its steps
            assert len(faulty.calls) - start == steps

        s, faulty = store_with_faults()
        async with s:
            await s.place(NS, "o-2", entry("SHIPPED#0", "o-2"), version=1, expected=None)
            if placed:
                await s.place(NS, "o-1", entry("PENDING#1"), version=1, expected=None)
            before = await s.locate(NS, "o-1")
            faulty.crash_at(step, after=after)
            with pytest.raises(Crash):
                await write(s, before)
            await check_exact(s, "o-1")
            report = await s.repair(NS)
            assert not report.errors
            await check_exact(s, "o-1")
            assert [r["RowKey"] for r in await raw_rows(s) if r["st"] != "c"] == []
            item_rows = [r for r in await raw_rows(s) if r["id"] == "o-1"]
            now = await s.locate(NS, "o-1")
            assert len(item_rows) == (0 if now is None or now.entry is None else 2)
            # the item takes writes again, from wherever it is
            await s.place(NS, "o-1", entry("SHIPPED#0", sort="z"),
                          version=(now.version if now else 0) + 1, expected=now)
            await check_exact(s, "o-1")
            assert await where(s, "o-1") == ["SHIPPED#0"]

    asyncio.run(main())


@pytest.mark.parametrize("placed", [True, False], ids=["move", "first-put"])
def test_repair_fences_a_write_still_in_flight(placed: bool) -> None:
    async def main() -> None:
        s, faulty = store_with_faults()
        async with s:
            await s.place(NS, "o-2", entry("SHIPPED#0", "o-2"), version=1, expected=None)
            if placed:
                await s.place(NS, "o-1", entry("PENDING#1"), version=1, expected=None)
            before = await s.locate(NS, "o-1")
            reached, release = faulty.pause_before("update" if placed else "create")
            writer = asyncio.ensure_future(s.place(NS, "o-1", entry("SHIPPED#0"),
                                                   version=2 if placed else 1, expected=before))
            await reached.wait()  # its rows are written, its commit not yet sent
            await check_exact(s, "o-1")
            report = await s.repair(NS)
            # the new rows are fenced and deleted; the old ones, marked moving, fenced and
            # committed again
            assert (report.fenced, report.deleted, report.committed) == (
                (2, 2, 2) if placed else (1, 2, 0))
            release.set()
            with pytest.raises(ConditionFailed):
                await writer
            await check_exact(s, "o-1")
            assert await where(s, "o-1") == (["PENDING#1"] if placed else [])
            assert [r["RowKey"] for r in await raw_rows(s) if r["st"] != "c"] == []

    asyncio.run(main())


def test_readers_check_only_rows_not_committed() -> None:
    async def main() -> None:
        s, faulty = store_with_faults()
        async with s:
            for i in range(5):
                await s.place(NS, f"o-{i}", entry("PENDING#1", f"o-{i}"), version=1,
                              expected=None)
            start = len(faulty.calls)
            assert await listing(s, "PENDING#1") == [f"o-{i}" for i in range(5)]
            assert set(faulty.calls[start:]) == {"query"}  # all committed: no placement read
            located = await s.locate(NS, "o-0")
            faulty.crash_at(4, after=False)  # the move committed; its tidying never happens
            with pytest.raises(Crash):
                await s.place(NS, "o-0", entry("SHIPPED#0", "o-0"), version=2, expected=located)
            start = len(faulty.calls)
            assert await listing(s, "PENDING#1") == [f"o-{i}" for i in range(1, 5)]
            # the moved item's row, left moving, is checked against its placement
            assert faulty.calls[start:].count("get") == 1
            assert await s.repair(NS) is not None
            start = len(faulty.calls)
            assert await listing(s, "SHIPPED#0") == ["o-0"]
            assert "get" not in faulty.calls[start:]

    asyncio.run(main())


class AzuriteIndexMachine(IndexMachine):
    """The stateful index test on Azurite, smaller: 10% throttles, 3% ambiguous timeouts."""

    def new_loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.new_event_loop()

    def new_store(self, seed: int) -> Store:
        plain = azurite.table_store()
        faulty = Faulty(plain.client, seed=seed)
        faulty.rates(throttle=0.10, ambiguous=0.03)
        return AzureTablesStore(plain.table, client=faulty)


AzuriteIndexMachine.TestCase.settings = settings(
    max_examples=10, stateful_step_count=20, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
TestIndexOnAzurite = AzuriteIndexMachine.TestCase
