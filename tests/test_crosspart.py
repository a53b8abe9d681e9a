"""The cross-partition write on its real servers (Azurite, the Cosmos DB server): a write
killed between any two of its steps, repair racing a write in flight, readers' checks,
and keys of any text through the service.

A put, move or delete is several requests with one commit point (the placement's
If-Match replace; ``shardex.stores.crosspart``). The client is made to fail before and
after each of its requests, as a process killed there; afterwards every read is complete
and shows the item under exactly the value its placement names (or nowhere, when
deleted), before and after ``repair``, which leaves no row uncommitted; the item can be
written again; and a write still in flight while repair runs is fenced: it fails its
commit and changes nothing. And the stateful index test (random writes and paginations
against a model) runs on each server under injected throttles and timeouts, smaller than
on ``memory://``. Every test runs on both stores (``-m azure`` / ``-m cosmos`` pick one).
"""

from __future__ import annotations

import asyncio
import string
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from shardex.errors import ConditionFailed, InvalidInput, Unavailable
from shardex.model.entries import Placement, StoredEntry
from shardex.stores.azure import AzureTablesStore
from shardex.stores.azure import keys as azure_keys
from shardex.stores.base import Store
from shardex.stores.cosmos import CosmosStore
from shardex.stores.cosmos import codec as cosmos_codec
from tests import azurite, cosmos_server
from tests.crosspart_faults import Crash, Faulty, faulty
from tests.test_azure_keys import ITEMS, SORTS
from tests.test_index_stateful import IndexMachine

NS = "orders"
KEYS = ("PENDING#1", "SHIPPED#0")
CrossStore = AzureTablesStore | CosmosStore


async def _azure_rows(s: Any) -> list[dict[str, Any]]:
    low, high = azure_keys.namespace_range(NS)
    rows, _ = await s.client.call("query", filter="PartitionKey gt @lo and PartitionKey lt @hi",
                                  parameters={"lo": low, "hi": high}, top=1000)
    return [props for props, _ in rows if "st" in props]


async def _cosmos_rows(s: Any) -> list[dict[str, Any]]:
    reply = await s.client.call("query", query="SELECT * FROM c WHERE STARTSWITH(c.pk, @p)",
                                parameters={"p": cosmos_codec.namespace_prefix(NS)},
                                partition=None, max_items=1000)
    docs, _ = reply.value
    return [doc for doc in docs if "st" in doc]


def _azure_store(seed: int) -> tuple[CrossStore, Faulty]:
    plain = azurite.table_store()
    client = faulty(plain.client, seed=seed)
    return AzureTablesStore(plain.table, client=client), client  # type: ignore[arg-type]


def _cosmos_store(seed: int) -> tuple[CrossStore, Faulty]:
    plain = cosmos_server.container_store()
    client = faulty(plain.client, seed=seed)
    return CosmosStore(plain.database, plain.container, client=client,  # type: ignore[arg-type]
                       charges="estimated"), client


@dataclass(frozen=True)
class Kind:
    """A store of the protocol, and how its entries look when read raw."""

    name: str
    store: Callable[[], Store]  # a store on a new table or container
    make: Callable[[int], tuple[CrossStore, Faulty]]  # a store over a Faulty adapter
    raw: Callable[[Any], Awaitable[list[dict[str, Any]]]]  # every entry row, as stored
    rows: int  # rows an entry is written as
    item_field: str  # the field of a row that names its item
    row_id: str  # the field of a row that names the row
    commit: str  # the adapter's operation of the placement's If-Match replace
    key_examples: int  # examples of the keys' round trip
    machine_examples: int  # examples of the stateful index test


KINDS = {
    "azure-tables": Kind("azure-tables", azurite.table_store, _azure_store, _azure_rows, rows=2,
                         item_field="id", row_id="RowKey", commit="update", key_examples=25,
                         machine_examples=10),
    "cosmos": Kind("cosmos", cosmos_server.container_store, _cosmos_store, _cosmos_rows,
                   rows=1, item_field="i", row_id="id", commit="replace", key_examples=8,
                   machine_examples=8),
}


@pytest.fixture(params=[pytest.param("azure-tables", marks=pytest.mark.azure),
                        pytest.param("cosmos", marks=pytest.mark.cosmos)])
def kind(request: pytest.FixtureRequest) -> Kind:
    (azurite.require_endpoint if request.param == "azure-tables"
     else cosmos_server.require_endpoint)()
    return KINDS[request.param]


async def listing(s: Store, key: str, descending: bool = False) -> list[str]:
    out, after = [], None
    while True:
        page = await s.query(NS, key, after=after, descending=descending, limit=2)
        out += [e.item_id for e in page.entries]
        if page.resume is None:
            return out
        after = page.resume


async def listings(s: Store) -> dict[str, list[str]]:
    """The item ids each of ``KEYS`` lists, checked alike in both orders and by count."""
    listed = {}
    for key in KEYS:
        asc, desc = await listing(s, key), await listing(s, key, descending=True)
        assert asc == desc[::-1]
        assert await s.count(NS, key) == len(asc)
        listed[key] = asc
    return listed


def seen(listed: dict[str, list[str]], item_id: str) -> list[str]:
    """The shard keys whose listings show ``item_id`` (a key twice if it shows it twice)."""
    return [key for key in KEYS for shown in listed[key] if shown == item_id]


async def check_exact(s: Store, item_id: str) -> list[str]:
    """Check that reads show ``item_id`` exactly where its placement names, and the
    bystander o-2 untouched; return where they show it. One set of listings serves
    both (each check reads every key in both orders: the test's most requests)."""
    placement = await s.locate(NS, item_id)
    expected = [] if placement is None or placement.entry is None else \
        [placement.entry.shard_key]
    listed = await listings(s)
    assert seen(listed, item_id) == expected
    assert seen(listed, "o-2") == ["SHIPPED#0"]  # a bystander is untouched
    return expected


async def uncommitted(kind: Kind, s: Store) -> list[str]:
    return [r[kind.row_id] for r in await kind.raw(s) if r["st"] != "c"]


def entry(key: str, item_id: str = "o-1", sort: str = "2026-11-30T05:00:00Z") -> StoredEntry:
    return StoredEntry(shard_key=key, sort=sort, item_id=item_id, attrs={"total": 12})


Write = Callable[[Store, Placement | None], Awaitable[float]]
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
# a crash after request k and one before request k + 1 leave the same state (k applied,
# nothing run between them that a crash could stop): each is run once, as "after"
CASES = [(name, step, after) for name, (_, _, steps) in WRITES.items()
         for step in range(1, steps + 1) for after in (False, True) if after or step == 1]


async def prepared(kind: Kind, placed: bool) -> tuple[CrossStore, Faulty, Placement | None]:
    """An open store holding the bystander o-2 (and o-1 when ``placed``); o-1's placement."""
    s, client = kind.make(0)
    await s.open()
    await s.place(NS, "o-2", entry("SHIPPED#0", "o-2"), version=1, expected=None)
    if placed:
        await s.place(NS, "o-1", entry("PENDING#1"), version=1, expected=None)
    return s, client, await s.locate(NS, "o-1")


@pytest.mark.parametrize("name", sorted(WRITES))
def test_each_write_takes_the_requests_its_protocol_names(kind: Kind, name: str) -> None:
    placed, write, steps = WRITES[name]

    async def main() -> None:
        s, client, before = await prepared(kind, placed)
        try:
            start = len(client.calls)
            await write(s, before)
            assert len(client.calls) - start == steps
            await check_exact(s, "o-1")
        finally:
            await s.close()

    asyncio.run(main())


@pytest.mark.parametrize(("name", "step", "after"), CASES,
                         ids=[f"{n}-step{s}-{'after' if a else 'before'}" for n, s, a in CASES])
def test_a_write_killed_at_any_step_leaves_reads_exact_and_repair_tidies(
        kind: Kind, name: str, step: int, after: bool) -> None:
    placed, write, _ = WRITES[name]

    async def main() -> None:
        s, client, before = await prepared(kind, placed)
        try:
            client.crash_at(step, after=after)
            with pytest.raises(Crash):
                await write(s, before)
            await check_exact(s, "o-1")
            report = await s.repair(NS)
            assert not report.errors
            await check_exact(s, "o-1")
            assert await uncommitted(kind, s) == []
            item_rows = [r for r in await kind.raw(s) if r[kind.item_field] == "o-1"]
            now = await s.locate(NS, "o-1")
            assert len(item_rows) == (0 if now is None or now.entry is None else kind.rows)
            # the item takes writes again, from wherever it is
            await s.place(NS, "o-1", entry("SHIPPED#0", sort="z"),
                          version=(now.version if now else 0) + 1, expected=now)
            assert await check_exact(s, "o-1") == ["SHIPPED#0"]
        finally:
            await s.close()

    asyncio.run(main())


@pytest.mark.parametrize("placed", [True, False], ids=["move", "first-put"])
def test_repair_fences_a_write_still_in_flight(kind: Kind, placed: bool) -> None:
    async def main() -> None:
        s, client, before = await prepared(kind, placed)
        try:
            reached, release = client.pause_before(kind.commit if placed else "create")
            writer = asyncio.ensure_future(s.place(NS, "o-1", entry("SHIPPED#0"),
                                                   version=2 if placed else 1, expected=before))
            await reached.wait()  # its rows are written, its commit not yet sent
            await check_exact(s, "o-1")
            report = await s.repair(NS)
            # the new rows are fenced and deleted; the old ones, marked moving, fenced and
            # committed again
            assert (report.fenced, report.deleted, report.committed) == (
                (2, kind.rows, kind.rows) if placed else (1, kind.rows, 0))
            release.set()
            with pytest.raises(ConditionFailed):
                await writer
            assert await check_exact(s, "o-1") == (["PENDING#1"] if placed else [])
            assert await uncommitted(kind, s) == []
        finally:
            await s.close()

    asyncio.run(main())


def test_a_write_losing_the_race_for_a_placement_warns_of_nothing(
        kind: Kind, caplog: pytest.LogCaptureFixture) -> None:
    """Two writes planned on one placement: the first replaces it (its rows go), the
    second finds those rows gone and its commit refused, and is planned again. That
    ordinary race logged a WARNING that the placement's rows "are missing", a dozen for
    a dozen racing puts, which reads as damage. Only a commit that lands over rows that
    were gone (damage it heals) warns now."""
    async def main() -> None:
        s, _, before = await prepared(kind, placed=True)
        try:
            await s.place(NS, "o-1", entry("SHIPPED#0"), version=2, expected=before)
            with caplog.at_level("WARNING"), pytest.raises(ConditionFailed):
                await s.place(NS, "o-1", entry("SHIPPED#0", sort="c"), version=2,
                              expected=before)
            assert [r.getMessage() for r in caplog.records] == []
            assert await check_exact(s, "o-1") == ["SHIPPED#0"]
        finally:
            await s.close()

    asyncio.run(main())


def test_readers_check_only_rows_not_committed(kind: Kind) -> None:
    async def main() -> None:
        s, client = kind.make(0)
        async with s:
            for i in range(5):
                await s.place(NS, f"o-{i}", entry("PENDING#1", f"o-{i}"), version=1,
                              expected=None)
            start = len(client.calls)
            assert await listing(s, "PENDING#1") == [f"o-{i}" for i in range(5)]
            assert set(client.calls[start:]) == {"query"}  # all committed: no placement read
            located = await s.locate(NS, "o-0")
            client.crash_at(4, after=False)  # the move committed; its tidying never happens
            with pytest.raises(Crash):
                await s.place(NS, "o-0", entry("SHIPPED#0", "o-0"), version=2, expected=located)
            start = len(client.calls)
            assert await listing(s, "PENDING#1") == [f"o-{i}" for i in range(1, 5)]
            # the moved item's rows, left moving, are checked against its placement
            assert client.calls[start:].count("get") == 1
            report = await s.repair(NS, shard_keys=["PENDING#1", "SHIPPED#0"])
            assert (report.deleted, report.committed, report.fenced) == (kind.rows, kind.rows, 0)
            start = len(client.calls)
            assert await listing(s, "SHIPPED#0") == ["o-0"]
            assert "get" not in client.calls[start:]

    asyncio.run(main())


def test_any_keys_the_index_accepts_round_trip_in_order(kind: Kind) -> None:
    @settings(max_examples=kind.key_examples, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.lists(st.tuples(SORTS, ITEMS), min_size=1, max_size=8, unique_by=lambda p: p[1]),
           st.text(string.ascii_letters + "#/?\\%'\u00e9", min_size=1, max_size=8))
    # a quote in a row key, as the mirror of "yt" once made: Azurite filed the row elsewhere
    @example(rows=[("", "yt"), ("it's", "a',b")], key="?")
    def round_trip(rows: list[tuple[str, str]], key: str) -> None:
        shard_key = key.replace("#", "") or "k"
        store = kind.store()

        async def main_() -> None:
            async with store:
                for sort, item in rows:
                    await store.place("ix", item,
                                      StoredEntry(shard_key, sort, item, {"s": sort}),
                                      version=1, expected=None)
                for descending in (False, True):
                    page = await store.query("ix", shard_key, after=None,
                                             descending=descending, limit=100)
                    assert [(e.sort, e.item_id) for e in page.entries] == sorted(
                        rows, reverse=descending)
                for sort, item in rows:
                    placement = await store.locate("ix", item)
                    assert placement is not None
                    assert placement.entry == StoredEntry(shard_key, sort, item, {"s": sort})

        asyncio.run(main_())

    round_trip()


def _machine(kind: Kind) -> Any:
    """The stateful index test on ``kind``, smaller: 10% throttles, 3% ambiguous timeouts."""

    class Machine(IndexMachine):
        def new_loop(self) -> asyncio.AbstractEventLoop:
            return asyncio.new_event_loop()

        def new_store(self, seed: int) -> Store:
            store, client = kind.make(seed)
            client.rates(throttle=0.10, ambiguous=0.03)
            return store

    Machine.TestCase.settings = settings(
        max_examples=kind.machine_examples, stateful_step_count=20, deadline=None,
        suppress_health_check=[HealthCheck.too_slow])
    return Machine.TestCase


TestIndexOnAzurite = pytest.mark.azure(_machine(KINDS["azure-tables"]))
TestIndexOnCosmos = pytest.mark.cosmos(_machine(KINDS["cosmos"]))


@pytest.mark.parametrize("name", ["first-put", "move"])
def test_a_write_that_fails_before_its_commit_is_sent_says_it_did_not_apply(
        kind: Kind, name: str) -> None:
    """The write's first request applies and times out: the commit was never sent, so
    the store says the write did not apply (``may_have_applied`` False), and the engine
    need not read the item back to know. It had been reported unknown when the server
    then stalled and the read back failed too (a probe on the Cosmos DB server)."""
    placed, write, _ = WRITES[name]

    async def main() -> None:
        s, client, before = await prepared(kind, placed)
        try:
            client.time_out(1)
            with pytest.raises(Unavailable, match="commit was sent") as failed:
                await write(s, before)
            assert failed.value.may_have_applied is False
            assert await s.locate(NS, "o-1") == before
            await check_exact(s, "o-1")
        finally:
            await s.close()

    asyncio.run(main())


def _not_the_services(kind: Kind, status: int) -> Exception:
    """What the store's adapter raises for an error ``status`` the service did not send
    (no Azure error code, no Cosmos DB activity id: a proxy's page), as mapped."""
    from azure.core.exceptions import HttpResponseError
    from azure.cosmos.exceptions import CosmosHttpResponseError

    from shardex.stores.azure.client import map_error as azure_error
    from shardex.stores.cosmos.client import map_error as cosmos_error

    if kind.name == "azure-tables":
        raw = HttpResponseError(message="<html>Request Timeout</html>")
        raw.status_code = status
        return azure_error(raw, operation="update", table="t", endpoint="http://proxy")
    error = CosmosHttpResponseError(status_code=status, message="<html>Bad Request</html>")
    error.headers = {}
    return cosmos_error(error, operation="replace", where="container d/c",
                        endpoint="https://proxy")


@pytest.mark.parametrize("name", ["move", "put-same-key", "first-put"])
def test_an_answer_not_the_service_s_to_the_commit_leaves_the_write_as_it_applied(
        kind: Kind, name: str) -> None:
    """The commit applies and a proxy answers it (408 on Azure, 400 on Cosmos DB, with no
    error code or activity id of the service's): it may have applied, so the write is
    Unavailable (the engine reads it back), and its rows stay. Mapped as a refusal, the
    clean-up had taken the rows of a move that applied out of every listing (a probe)."""
    placed, write, _ = WRITES[name]
    commit = 2 if name == "first-put" else 3

    async def main() -> None:
        s, client, before = await prepared(kind, placed)
        try:
            client.answer_at(commit, _not_the_services(kind, 408 if kind.name ==
                                                       "azure-tables" else 400))
            with pytest.raises(Unavailable) as caught:
                await write(s, before)
            assert caught.value.may_have_applied
            placement = await s.locate(NS, "o-1")
            assert placement is not None
            assert placement != before  # the commit applied
            await check_exact(s, "o-1")
        finally:
            await s.close()

    asyncio.run(main())


@pytest.mark.parametrize("step", [4, 5])
def test_a_refusal_after_the_commit_changes_no_outcome(kind: Kind, step: int) -> None:
    """Steps 4 and 5 of a move only tidy up: a 400 answered there (InvalidInput, which is
    no StoreError) had failed a move that applied (a probe)."""
    placed, write, _ = WRITES["move"]

    async def main() -> None:
        s, client, before = await prepared(kind, placed)
        try:
            client.answer_at(step, InvalidInput("Azure refused the request: 400"))
            await write(s, before)
            assert await check_exact(s, "o-1") == ["SHIPPED#0"]
        finally:
            await s.close()

    asyncio.run(main())


def _beside(store: CrossStore, *, seed: int) -> tuple[CrossStore, Faulty]:
    """Another store object (another client) on ``store``'s table or container."""
    if isinstance(store, AzureTablesStore):
        client = faulty(AzureTablesStore(store.table, endpoint=azurite.require_endpoint())
                        .client, seed=seed)
        return AzureTablesStore(store.table, client=client), client  # type: ignore[arg-type]
    plain = CosmosStore(store.database, store.container,
                        endpoint=cosmos_server.require_endpoint())
    client = faulty(plain.client, seed=seed)
    return CosmosStore(store.database, store.container, client=client,  # type: ignore[arg-type]
                       charges="estimated"), client


def _hold(client: Faulty, operation: str, nth: int
          ) -> tuple[asyncio.Event, asyncio.Event, Callable[[], None]]:
    """Hold the ``nth`` call of ``operation`` from now: (reached, release, undo)."""
    reached, release, inner, seen = asyncio.Event(), asyncio.Event(), client.call, [0]

    async def call(op: str, **params: Any) -> Any:
        if op == operation:
            seen[0] += 1
            if seen[0] == nth:
                reached.set()
                await release.wait()
        return await inner(op, **params)

    client.call = call  # type: ignore[method-assign]
    return reached, release, lambda: setattr(client, "call", inner)


@pytest.mark.parametrize("read", ["query", "count"])
@pytest.mark.parametrize("case", ["re-sorted", "rewritten"])
def test_a_read_racing_a_write_of_an_item_lists_it_once(kind: Kind, case: str,
                                                         read: str) -> None:
    """One shard key, no reshard. The query reads an item's rows at one instant and its
    placement is read at a later one. ``re-sorted``: a put moving the item from sort m
    to n was between its first two steps (its old row still committed, its new one
    pending) and committed before the placement read: both rows were kept, the item
    listed twice and counted 4 of 3. ``rewritten``: two puts at the same sort, the first
    between its steps 2 and 3 (old row moving, new one pending) when read, both done
    before the placement read: neither row was owned, and the item, at that position
    throughout, was missed (a probe, on both servers)."""
    from shardex import Routing, ShardedIndex, ShardPolicy

    async def body() -> None:
        writes, writer = kind.make(1)
        reads, reader = _beside(writes, seed=2)
        mark = ("transact", 2) if kind.name == "azure-tables" else ("patch", 1)
        async with ShardedIndex(writes, NS, Routing(overrides={"P": ShardPolicy(1)}),
                                routing_lease=60.0, routing_ttl=30.0) as w, \
                ShardedIndex(reads, NS, routing_ttl=30.0) as r:
            for item, sort in (("a", "a"), ("x", "m"), ("z", "z")):
                assert await w.put("P", item, sort=sort)

            async def listed() -> Any:
                if read == "count":
                    return await r.count("P")
                return sorted(e.item_id for e in (await r.query("P", limit=100)).items)

            assert await listed() == (3 if read == "count" else ["a", "x", "z"])
            held, release, undo = _hold(writer, *(mark if case == "re-sorted"
                                                   else (kind.commit, 1)))
            put = asyncio.ensure_future(w.put("P", "x", sort="n" if case == "re-sorted"
                                              else "m"))
            await asyncio.wait_for(held.wait(), 10)
            located, go_on, undo_reader = _hold(reader, "get", 1)  # the placement read
            reading = asyncio.ensure_future(listed())
            await asyncio.wait_for(located.wait(), 10)
            release.set()
            undo()
            assert await put
            if case == "rewritten":
                assert await w.put("P", "x", sort="m")
            go_on.set()
            undo_reader()
            assert await reading == (3 if read == "count" else ["a", "x", "z"])

    asyncio.run(body())
