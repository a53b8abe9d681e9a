"""The first client to open an index stores its routing record (``create_record``).

Two clients opening the same new index at once, a store that refuses or half-answers the
create, and the commands that only look: one record, stored once, that every client then
acts under (its routing and its lease), and none stored by a look.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest

import shardex
from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.errors import RoutingConflict, Throttled, Unavailable
from shardex.retry import RetryPolicy
from shardex.routing_record import ROUTING_RECORD
from shardex.sim.clock import run_virtual
from shardex.stores.base import Store
from tests.conftest import BACKENDS

pytestmark = pytest.mark.filterwarnings("error")

EIGHT = Routing(overrides={"PENDING": ShardPolicy(8)})
FOUR = Routing(overrides={"PENDING": ShardPolicy(4)})


def _store() -> Store:
    return shardex.open_store("memory://", seed=5, profile="unlimited")


def _puts_of_records(store: Store, fault: Callable[[int], Exception | None]
                     ) -> list[int]:
    """Route ``put_record`` through ``fault(n)``: an error raised before the write (n
    counts from 0), or None to send it; a returned list counts the calls."""
    # a second routing replaces the first
    send = store.__dict__.setdefault("unrouted_put_record", store.put_record)
    calls: list[int] = []

    async def put_record(*args: Any, **kwargs: Any) -> int:
        calls.append(len(calls))
        error = fault(len(calls) - 1)
        if error is not None:
            raise error
        return await send(*args, **kwargs)

    store.put_record = put_record  # type: ignore[method-assign]
    return calls


def test_two_clients_opening_a_new_index_at_once_act_under_one_record(
        caplog: pytest.LogCaptureFixture) -> None:
    """Both read no record, both try to create one: the one created holds for both, its
    routing and its lease; the other client says its routing was not used."""
    async def body() -> tuple[list[Routing], list[float], int | None]:
        store = _store()
        async with store:
            first = ShardedIndex(store, "ix", EIGHT, routing_lease=60)
            second = ShardedIndex(store, "ix", FOUR, routing_lease=5)
            await asyncio.gather(first.open(), second.open())
            try:
                record = await store.get_record("ix", ROUTING_RECORD)
                return ([first.routing, second.routing],
                        [first.routing_lease, second.routing_lease],
                        None if record is None else record.revision)
            finally:
                await first.close()
                await second.close()

    with caplog.at_level(logging.WARNING, logger="shardex"):
        routings, leases, revision = run_virtual(body())
    assert revision == 1
    assert routings[0] == routings[1]
    assert routings[0].policy("PENDING").shards in (8, 4)
    assert leases[0] == leases[1] == (60.0 if routings[0].policy("PENDING").shards == 8
                                      else 5.0)
    assert "differs from the stored routing" in caplog.text


def test_a_strict_client_that_lost_the_race_refuses_to_open() -> None:
    async def body() -> list[BaseException | None]:
        store = _store()
        async with store:
            clients = [ShardedIndex(store, "ix", routing, strict_routing=True)
                       for routing in (EIGHT, FOUR)]
            results = await asyncio.gather(*(c.open() for c in clients),
                                           return_exceptions=True)
            for client, result in zip(clients, results, strict=True):
                if result is None:
                    await client.close()
            assert store._opened == 1  # type: ignore[attr-defined]
            return results

    results = run_virtual(body())
    assert sum(r is None for r in results) == 1
    assert sum(isinstance(r, RoutingConflict) for r in results) == 1


@pytest.mark.parametrize("error", [Throttled("refused", key="k"), Unavailable("gone")],
                         ids=["throttled", "unavailable"])
def test_a_store_that_refuses_the_create_fails_the_open_cleanly(error: Exception) -> None:
    """Refused on every try: open raises the store's error after the retry policy's tries,
    closes the store, and leaves no record; refused twice, it opens."""
    async def body() -> None:
        store = _store()
        async with store:
            calls = _puts_of_records(store, lambda n: error)
            index = ShardedIndex(store, "ix", EIGHT, retry=RetryPolicy(attempts=3))
            with pytest.raises(type(error)):
                await index.open()
            assert len(calls) == 3
            assert store._opened == 1  # type: ignore[attr-defined]  # ours only
            assert await store.get_record("ix", ROUTING_RECORD) is None
            calls = _puts_of_records(store, lambda n: error if n < 2 else None)
            async with ShardedIndex(store, "ix", EIGHT, retry=RetryPolicy(attempts=3)) as index:
                assert index.routing.policy("PENDING").shards == 8
            assert len(calls) == 3

    run_virtual(body())


def test_a_create_that_applied_but_answered_unavailable_opens_on_the_record_it_wrote() -> None:
    """The create applied, its answer was lost: the retry finds a record (a failed
    condition), reads it back and opens on it; one record, written once."""
    async def body() -> None:
        store = _store()
        async with store:
            send = store.put_record
            writes = []

            async def put_record(*args: Any, **kwargs: Any) -> int:
                revision = await send(*args, **kwargs)
                writes.append(revision)
                if len(writes) == 1:
                    raise Unavailable("the answer was lost")
                return revision

            store.put_record = put_record  # type: ignore[method-assign]
            async with ShardedIndex(store, "ix", EIGHT, routing_lease=40) as index:
                assert index.routing.policy("PENDING").shards == 8
                assert index.routing_lease == 40
            record = await store.get_record("ix", ROUTING_RECORD)
            assert record is not None
            assert record.revision == 1
            assert writes == [1]

    run_virtual(body())


def test_clients_that_only_look_store_no_record() -> None:
    """``create_record=False`` (the runners, status, the controls, routing show) reads the
    implicit routing and stores nothing, however long it stays open."""
    async def body() -> None:
        store = _store()
        async with store:
            async with ShardedIndex(store, "ix", EIGHT, create_record=False,
                                    routing_ttl=1.0) as index:
                assert index.routing == Routing()
                await asyncio.sleep(10.0)  # refreshes
                await index.refresh_routing()
            assert await store.get_record("ix", ROUTING_RECORD) is None
            assert store.stats("ix").totals.write_requests == 0

    run_virtual(body())


@pytest.mark.dynamodb
def test_routing_show_and_reshard_status_store_no_record(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The read-only commands on an index nobody opened: no record afterwards (reshard
    status refuses such an index, which a mistyped name is)."""
    from shardex.cli import main
    from tests import dynamodb_local
    from tests.servers import shardex_error

    dynamodb_local.require_endpoint()
    store: Any = BACKENDS["dynamodb-table"].store()
    uri = store.uri
    main(["routing", "show", "--store", uri, "--index", "fresh", "--json"])  # exits on errors
    assert '"stored": false' in capsys.readouterr().out
    assert "no index 'fresh' in " in shardex_error(
        capsys, "reshard", "status", "--store", uri, "--index", "fresh", "--json", code=2)

    async def record() -> Any:
        async with store:
            return await store.get_record("fresh", ROUTING_RECORD)

    assert asyncio.run(record()) is None
