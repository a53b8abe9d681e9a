"""Crash injection on the Cosmos DB server: a write killed between any two of its steps.

A put, move or delete is several requests with one commit point (the placement's
If-Match replace). The client is made to fail before and after each of its requests, as
a process killed there; afterwards every read is complete and shows the item under
exactly the value its placement names (or nowhere, when deleted), before and after
``repair``, which leaves no document uncommitted; the item can be written again; and a
write still in flight while repair runs is fenced: it fails its commit and changes
nothing. And the stateful index test (random writes and paginations against a model)
runs on the server under injected 429s and timeouts, smaller than on ``memory://``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from shardex.errors import ConditionFailed
from shardex.stores.base import Placement, Store, StoredEntry
from shardex.stores.cosmos import CosmosStore, codec
from tests import cosmos_server
from tests.cosmos_faults import Crash, Faulty
from tests.test_index_stateful import IndexMachine

pytestmark = pytest.mark.cosmos
NS = "orders"
KEYS = ("PENDING#1", "SHIPPED#0")


def store_with_faults(seed: int = 0) -> tuple[CosmosStore, Faulty]:
    plain = cosmos_server.container_store()
    faulty = Faulty(plain.client, seed=seed)
    return CosmosStore(plain.database, plain.container, client=faulty,
                       charges="estimated"), faulty


async def listing(s: CosmosStore, key: str, descending: bool = False) -> list[str]:
    out, after = [], None
    while True:
        page = await s.query(NS, key, after=after, descending=descending, limit=2)
        out += [e.item_id for e in page.entries]
        if page.resume is None:
            return out
        after = page.resume


async def where(s: CosmosStore, item_id: str) -> list[str]:
    """The shard keys whose listings (both orders) and counts show ``item_id``."""
    seen = []
    for key in KEYS:
        asc, desc = await listing(s, key), await listing(s, key, descending=True)
        assert asc == desc[::-1]
        assert await s.count(NS, key) == len(asc)
        seen += [key] * asc.count(item_id)
    return seen


async def raw_docs(s: CosmosStore) -> list[dict[str, Any]]:
    """Every entry document of the index, as stored."""
    reply = await s.client.call("query", query="SELECT * FROM c WHERE STARTSWITH(c.pk, @p)",
                                parameters={"p": codec.namespace_prefix(NS)}, partition=None,
                                max_items=1000)
    docs, _ = reply.value
    return [doc for doc in docs if "st" in doc]


async def check_exact(s: CosmosStore, item_id: str) -> None:
    placement = await s.locate(NS, item_id)
    expected = [] if placement is None or placement.entry is None else \
        [placement.entry.shard_key]
    assert await where(s, item_id) == expected
    assert await where(s, "o-2") == ["SHIPPED#0"]  # a bystander is untouched


def entry(key: str, item_id: str = "o-1", sort: str = "2026-11-30T05:00:00Z") -> StoredEntry:
    return StoredEntry(shard_key=key, sort=sort, item_id=item_id, attrs={"total": 12})


Write = Callable[[CosmosStore, Placement | None], Awaitable[float]]
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


async def prepared(placed: bool) -> tuple[CosmosStore, Faulty, Placement | None]:
    s, faulty = store_with_faults()
    await s.open()
    await s.place(NS, "o-2", entry("SHIPPED#0", "o-2"), version=1, expected=None)
    if placed:
        await s.place(NS, "o-1", entry("PENDING#1"), version=1, expected=None)
    return s, faulty, await s.locate(NS, "o-1")


@pytest.mark.parametrize("name", sorted(WRITES))
def test_each_write_takes_the_requests_its_protocol_names(name: str) -> None:
    placed, write, steps = WRITES[name]

    async def main() -> None:
        s, faulty, before = await prepared(placed)
        try:
            start = len(faulty.calls)
            await write(s, before)
            assert len(faulty.calls) - start == steps
            await check_exact(s, "o-1")
        finally:
            await s.close()

    asyncio.run(main())


@pytest.mark.parametrize(("name", "step", "after"), CASES,
                         ids=[f"{n}-step{s}-{'after' if a else 'before'}" for n, s, a in CASES])
def test_a_write_killed_at_any_step_leaves_reads_exact_and_repair_tidies(
        name: str, step: int, after: bool) -> None:
    placed, write, _ = WRITES[name]

    async def main() -> None:
        s, faulty, before = await prepared(placed)
        try:
            faulty.crash_at(step, after=after)
            with pytest.raises(Crash):
                await write(s, before)
            await check_exact(s, "o-1")
            report = await s.repair(NS)
            assert not report.errors
            await check_exact(s, "o-1")
            assert [d["id"] for d in await raw_docs(s) if d["st"] != "c"] == []
            item_docs = [d for d in await raw_docs(s) if d["i"] == "o-1"]
            now = await s.locate(NS, "o-1")
            assert len(item_docs) == (0 if now is None or now.entry is None else 1)
            # the item takes writes again, from wherever it is
            await s.place(NS, "o-1", entry("SHIPPED#0", sort="z"),
                          version=(now.version if now else 0) + 1, expected=now)
            assert await where(s, "o-1") == ["SHIPPED#0"]
        finally:
            await s.close()

    asyncio.run(main())


@pytest.mark.parametrize("placed", [True, False], ids=["move", "first-put"])
def test_repair_fences_a_write_still_in_flight(placed: bool) -> None:
    async def main() -> None:
        s, faulty, before = await prepared(placed)
        try:
            reached, release = faulty.pause_before("replace" if placed else "create")
            writer = asyncio.ensure_future(s.place(NS, "o-1", entry("SHIPPED#0"),
                                                   version=2 if placed else 1, expected=before))
            await reached.wait()  # its document is written, its commit not yet sent
            await check_exact(s, "o-1")
            report = await s.repair(NS)
            # the new document is fenced and deleted; the old one, marked moving, fenced
            # and committed again
            assert (report.fenced, report.deleted, report.committed) == (
                (2, 1, 1) if placed else (1, 1, 0))
            release.set()
            with pytest.raises(ConditionFailed):
                await writer
            await check_exact(s, "o-1")
            assert await where(s, "o-1") == (["PENDING#1"] if placed else [])
            assert [d["id"] for d in await raw_docs(s) if d["st"] != "c"] == []
        finally:
            await s.close()

    asyncio.run(main())


def test_readers_check_only_documents_not_committed() -> None:
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
            # the moved item's document, left moving, is checked against its placement
            assert faulty.calls[start:].count("get") == 1
            report = await s.repair(NS, shard_keys=["PENDING#1", "SHIPPED#0"])
            assert (report.deleted, report.committed, report.fenced) == (1, 1, 0)
            start = len(faulty.calls)
            assert await listing(s, "SHIPPED#0") == ["o-0"]
            assert "get" not in faulty.calls[start:]

    asyncio.run(main())


class CosmosIndexMachine(IndexMachine):
    """The stateful index test on the server, smaller: 10% 429s, 3% ambiguous timeouts."""

    def new_loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.new_event_loop()

    def new_store(self, seed: int) -> Store:
        store, faulty = store_with_faults(seed)
        faulty.rates(throttle=0.10, ambiguous=0.03)
        return store


CosmosIndexMachine.TestCase.settings = settings(
    max_examples=8, stateful_step_count=20, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
TestIndexOnCosmos = CosmosIndexMachine.TestCase
