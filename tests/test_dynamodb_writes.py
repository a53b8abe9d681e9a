"""Exact write outcomes on DynamoDB Local, in index-table mode and GSI mode.

Started by scripts/test (``SHARDEX_DYNAMODB_ENDPOINT``). A client wrapper injects
faults around real requests (lost before sending, applied then timed out, throttled)
and logs every write that DynamoDB applied, by the write's token, so each reported
outcome is checked against what applied.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import shardex
from shardex import ConditionFailed, OutcomeUnknown, Routing, ShardPolicy, Throttled, Unavailable
from shardex.model.entries import NO_TOKEN, StoredEntry, new_token
from shardex.retry import RetryPolicy
from shardex.stores.dynamodb import DynamoDBStore
from shardex.stores.dynamodb.client import DynamoDBClient
from tests import dynamodb_local as local

pytestmark = pytest.mark.dynamodb
MODES = ["table", "gsi"]
ROUTING = Routing(overrides={"PENDING": ShardPolicy(shards=4)})


@pytest.fixture(autouse=True)
def endpoint() -> str:
    return local.require_endpoint()


def stores(mode: str, n: int, **options: Any) -> list[DynamoDBStore]:
    """``n`` stores (clients) on one new table of ``mode``."""
    first = local.table_store(**options) if mode == "table" else local.gsi_store(**options)
    settings = {"region": local.REGION, "endpoint_url": local.require_endpoint(), **options}
    if mode == "gsi":
        settings.update(local.GSI)
    return [first] + [DynamoDBStore(first.table, **settings) for _ in range(n - 1)]


class Faulty(DynamoDBClient):
    """A client that injects faults around a real one and logs the writes that applied."""

    def __init__(self, inner: DynamoDBClient, rng: random.Random, *, lost: float = 0.0,
                 ambiguous: float = 0.0, throttled: float = 0.0) -> None:
        self.inner = inner
        self.endpoint = inner.endpoint
        self.rng = rng
        self.rates = (lost, ambiguous, throttled)
        self.applied: Counter[str] = Counter()  # write token -> distinct requests applied
        self._requests: set[str] = set()
        self.before_write: Callable[[], Awaitable[None]] | None = None

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()

    async def call(self, operation: str, **params: Any) -> dict[str, Any]:
        token = _write_token(operation, params)
        lost, ambiguous, throttled = self.rates
        if token is not None:
            if self.before_write is not None:
                hook, self.before_write = self.before_write, None
                await hook()
            if self.rng.random() < throttled:
                raise Throttled("injected throttle")
            if self.rng.random() < lost:
                raise Unavailable("injected: lost before it was sent")
        response = await self.inner.call(operation, **params)
        if token is not None:
            # a retry of the very same transaction is not applied again (its
            # ClientRequestToken): count distinct requests
            request = params.get("ClientRequestToken") or f"{token}/{len(self._requests)}"
            if request not in self._requests:
                self._requests.add(request)
                self.applied[token] += 1
            if self.rng.random() < ambiguous:
                raise Unavailable("injected: timed out after it applied")
        return response


def _write_token(operation: str, params: dict[str, Any]) -> str | None:
    if operation == "TransactWriteItems":
        return str(params["TransactItems"][0]["Put"]["Item"]["t"]["S"])
    if operation == "UpdateItem" and ":t" in params.get("ExpressionAttributeValues", {}):
        return str(params["ExpressionAttributeValues"][":t"]["S"])
    return None


def faulty(store: DynamoDBStore, seed: int, **rates: float) -> Faulty:
    client = Faulty(store.client, random.Random(seed), **rates)
    store._client = client
    return client


async def traced(call: Callable[[str], Awaitable[bool]]) -> tuple[str, Any]:
    """Run one write with a token of its own (``token=``); return it and the write's result
    or error."""
    token = new_token()
    try:
        result: Any = await call(token)
    except shardex.ShardexError as exc:
        result = exc
    return token, result


def check_outcome(applied: Counter[str], token: str, result: Any) -> str:
    n = applied[token]
    assert n <= 1, f"write {token} applied {n} times"
    if result is True:
        assert n == 1, f"write {token} reported success but never applied"
        return "ok"
    if isinstance(result, OutcomeUnknown):
        return "unknown"
    assert n == 0, f"write {token} reported {result!r} but applied"
    return "fail"


# -- DynamoDB's idempotency token ----------------------------------------------------------

def test_a_transaction_sent_again_with_its_token_is_not_applied_twice() -> None:
    async def body() -> None:
        (store,) = stores("table", 1)
        async with store:
            await store.place("ix", "o-1", StoredEntry("K", "a", "o-1"), version=1,
                              expected=None, token="w1")
            located = await store.locate("ix", "o-1")
            moved = StoredEntry("K", "b", "o-1")
            await store.place("ix", "o-1", moved, version=2, expected=located, token="w2")
            # the same request again, as a retry after a timeout sends it: DynamoDB
            # recognises its ClientRequestToken and applies nothing
            await store.place("ix", "o-1", moved, version=2, expected=located, token="w2")
            after = await store.locate("ix", "o-1")
            assert after is not None
            assert (after.version, after.token, after.history) == (2, "w2", (NO_TOKEN, "w1"))
            # another plan of the same write has a request token of its own
            with pytest.raises(ConditionFailed):
                await store.place("ix", "o-1", StoredEntry("K", "c", "o-1"), version=3,
                                  expected=located, token="w2")

    asyncio.run(body())


# -- twin writes from two clients ----------------------------------------------------------

TWIN_TRIALS = 25


@pytest.mark.parametrize("mode", MODES)
def test_twin_moves_and_deletes_have_exactly_one_winner(mode: str) -> None:
    async def body() -> None:
        one_store, two_store = stores(mode, 2)
        async with shardex.ShardedIndex(one_store, "orders", ROUTING) as one, \
                shardex.ShardedIndex(two_store, "orders") as two:
            for trial in range(TWIN_TRIALS):
                item = f"o-{trial}"
                await one.put("PENDING", item, sort="a")
                moves = await asyncio.gather(
                    one.move(item, old="PENDING", new="SHIPPED"),
                    two.move(item, old="PENDING", new="SHIPPED"), return_exceptions=True)
                assert sum(m is True for m in moves) == 1, moves
                assert sum(isinstance(m, ConditionFailed) for m in moves) == 1, moves
                deletes = await asyncio.gather(one.delete("SHIPPED", item),
                                               two.delete("SHIPPED", item))
                assert sorted(deletes) == [False, True], deletes

    asyncio.run(body())


# -- concurrent clients under injected faults ------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_concurrent_clients_under_faults_report_true_outcomes(mode: str) -> None:
    outcomes: Counter[str] = Counter()

    async def body() -> None:
        clients = stores(mode, 3)
        faults = [faulty(store, seed, lost=0.05, ambiguous=0.1, throttled=0.2)
                  for seed, store in enumerate(clients)]
        retry = RetryPolicy(attempts=3, base=0.005, cap=0.02, deadline=None)
        indexes = [shardex.ShardedIndex(store, "orders", ROUTING, retry=retry, seed=i)
                   for i, store in enumerate(clients)]
        for index in indexes:
            await index.open()
        applied: Counter[str] = Counter()
        rng = random.Random(11)
        items = [f"o-{i}" for i in range(6)]
        values = ["PENDING", "SHIPPED", "DELIVERED"]
        try:
            for _ in range(12):
                calls = []
                for _ in range(6):
                    index = rng.choice(indexes)
                    item, value, other = rng.choice(items), rng.choice(values), \
                        rng.choice(values)
                    kind = rng.choice(["put", "move", "delete"])
                    if kind == "put":
                        calls.append(lambda t, x=index, i=item, v=value: x.put(v, i, sort="s",
                                                                             token=t))
                    elif kind == "move":
                        calls.append(lambda t, x=index, i=item, v=value, o=other:
                                     x.move(i, old=v, new=o, token=t))
                    else:
                        calls.append(lambda t, x=index, i=item, v=value: x.delete(v, i, token=t))
                results = await asyncio.gather(*(traced(call) for call in calls))
                applied = sum((f.applied for f in faults), Counter())
                for token, result in results:
                    outcomes[check_outcome(applied, token, result)] += 1
            for fault in faults:
                fault.rates = (0.0, 0.0, 0.0)
            # the index agrees with the placements
            for value in values:
                listed = sorted([e.item_id async for e in indexes[0].scan(value)])
                placed = []
                for item in items:
                    entry = await indexes[0].get(item)
                    if entry is not None and entry.value == value:
                        placed.append(item)
                assert listed == sorted(placed)
        finally:
            for index in indexes:
                await index.close()

    asyncio.run(body())
    assert outcomes["ok"] > 0
    assert outcomes["fail"] > 0
