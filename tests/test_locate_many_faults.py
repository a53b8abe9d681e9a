"""``Store.locate_many`` under faults: the same answers as ``locate`` one by one or a clear
error, a bounded number of requests, and nothing left running once it has raised.

memory:// on virtual time for the batching logic; DynamoDB Local (table and GSI mode)
with a client that answers as DynamoDB does under throttling; the Cosmos DB server with
a transport under the SDK that answers 429 to its ReadMany's query; Azurite for odd ids.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from shardex.errors import Throttled, Unavailable
from shardex.keys import placement_key
from shardex.model.entries import Placement
from shardex.retry import RetryPolicy, call_with_retry
from shardex.sim.clock import run_virtual
from shardex.stores.base import Store
from shardex.stores.memory.store import MemoryStore
from tests.conftest import _REQUIRE, BACKENDS, Backend
from tests.servers import Answer
from tests.test_locate_many import NS, place

pytestmark = pytest.mark.filterwarnings("error")

# ids a store must read as it reads any other: quotes, separators, escapes, a character
# beyond the BMP, a long one, and look-alikes of the keys shardex keeps beside them
ODD_IDS = ["it's", 'say "hi"', "a#b", "a%2Fb", "a/b\\c", "é", "𝄞 clef", "x" * 400,
           "P", "#placement#x", " lead", "tab\there", "q?x=1&y=2", "+plus+"]


class _Pooled(MemoryStore):
    """memory:// whose client carries ``pool`` requests at once, as a small pool does."""

    pool = 2

    @property
    def connections(self) -> int | None:
        return self.pool


def _pooled(pool: int = 2) -> MemoryStore:
    store = _Pooled(seed=3, profile="unlimited")
    store.pool = pool
    return store


async def _one_by_one(store: Store, ids: list[str]) -> dict[str, Placement | None]:
    return dict(zip(ids, await asyncio.gather(*(store.locate(NS, i) for i in ids)),
                    strict=True))


Hook = Callable[[str, list[str], Any], Awaitable[tuple[dict[str, Placement | None], list[str]]]]


def _hooked(store: Store, hook: Callable[[Hook, int, list[str]], Hook]) -> list[list[str]]:
    """Route the store's batched requests through ``hook(send, n, ids)`` (n counts from 0);
    return the ids of each request sent, in order."""
    send: Hook = store._locate_many  # type: ignore[assignment]
    sent: list[list[str]] = []

    async def hooked(namespace: str, ids: list[str], rec: Any
                     ) -> tuple[dict[str, Placement | None], list[str]]:
        sent.append(list(ids))
        return await hook(send, len(sent) - 1, ids)(namespace, ids, rec)

    store._locate_many = hooked  # type: ignore[method-assign]
    return sent


def test_odd_duplicate_and_many_ids_answer_as_locate() -> None:
    async def body() -> None:
        async with _pooled() as store:
            ids = [*ODD_IDS, *(f"item-{i:04d}" for i in range(240))]
            await place(store, ids, deleted=4)
            asked = [*ids, *ids[::7], "never", "never"]
            store.reset_stats()
            found = await store.locate_many(NS, asked)
            assert store.stats(NS).totals.read_requests == 3  # 255 distinct ids, 100 a request
            assert list(found) == list(dict.fromkeys(asked))
            assert found == await _one_by_one(store, list(found))
            assert found["never"] is None
            assert found[ids[0]].entry is None  # type: ignore[union-attr]
            assert found["𝄞 clef"].entry.attrs == {"n": 6}  # type: ignore[union-attr]
            store.reset_stats()
            assert await store.locate_many(NS, iter(())) == {}
            assert store.stats(NS).totals.requests == 0

    run_virtual(body())


def test_placements_never_read_raise_throttled_after_bounded_tries() -> None:
    """A batch whose first id is left unread on every try (UnprocessedKeys that never
    drain): Throttled naming the item, after 8 requests and a few seconds of backoff."""
    async def body() -> None:
        async with _pooled() as store:
            await place(store, ["a", "b", "c"])

            def stuck(send: Hook, n: int, ids: list[str]) -> Hook:
                async def call(namespace: str, ids: list[str], rec: Any
                               ) -> tuple[dict[str, Placement | None], list[str]]:
                    found, unread = await send(namespace, ids, rec)
                    return {k: v for k, v in found.items() if k != "a"}, [*unread, "a"]
                return call

            sent = _hooked(store, stuck)
            began = asyncio.get_running_loop().time()
            with pytest.raises(Throttled, match=r"1 placements .* left unread .*item 'a'") as err:
                await store.locate_many(NS, ["a", "b", "c"])
            assert err.value.reason == "UnprocessedKeys"
            assert sent == [["a", "b", "c"], *[["a"]] * 7]
            assert asyncio.get_running_loop().time() - began < 5.0

    run_virtual(body())


def test_a_batch_that_fails_stops_the_others_at_once() -> None:
    """Unavailable (or a first request throttled whole) in one batch raises, and the other
    batches send nothing more: the caller retries the whole read, and batches still
    going behind its back (their retries, or those waiting for a connection) would
    read twice and hold the pool."""
    async def body() -> None:
        for error in (Unavailable("store went away"), Throttled("refused whole", key="k")):
            async with _pooled() as store:
                ids = [f"item-{i:04d}" for i in range(1000)]  # ten batches, two at once
                await place(store, ids[:50])

                def failing(send: Hook, n: int, ids: list[str], error: Exception = error
                            ) -> Hook:
                    async def call(namespace: str, ids: list[str], rec: Any
                                   ) -> tuple[dict[str, Placement | None], list[str]]:
                        if n == 1:
                            raise error
                        # half are left unread on each first try, read after a backoff
                        found, unread = await send(namespace, ids[:50], rec)
                        return found, [*unread, *ids[50:]]
                    return call

                sent = _hooked(store, failing)
                with pytest.raises(type(error), match=str(error)):
                    await store.locate_many(NS, ids)
                at_raise = len(sent)
                await asyncio.sleep(30.0)
                assert len(sent) == at_raise, "requests sent after locate_many raised"
                assert at_raise <= 3

    run_virtual(body())


def test_a_later_throttled_try_is_read_again_and_metered_once() -> None:
    """A try refused whole after a first one read some: its ids are asked again; every
    request counts once, every placement read is charged once, the refusal as a throttle."""
    async def body() -> None:
        async with _pooled() as store:
            ids = [f"item-{i:02d}" for i in range(40)]
            await place(store, ids, deleted=2)

            def flaky(send: Hook, n: int, ids: list[str]) -> Hook:
                async def call(namespace: str, ids: list[str], rec: Any
                               ) -> tuple[dict[str, Placement | None], list[str]]:
                    if n == 1:  # sent, and refused whole as DynamoDB refuses one
                        rec.request(placement_key(ids[0]), write=False)
                        raise Throttled("refused whole", key="k", retry_after=0.2)
                    if n == 0:  # the first reads half of them
                        found, unread = await send(namespace, ids[:20], rec)
                        return found, [*unread, *ids[20:]]
                    return await send(namespace, ids, rec)
                return call

            sent = _hooked(store, flaky)
            store.reset_stats()
            found = await store.locate_many(NS, ids)
            assert [len(s) for s in sent] == [40, 20, 20]
            assert found == await _one_by_one(store, ids)
            totals = store.stats(NS).totals
            assert totals.read_requests == 3 + len(ids)  # and the one-by-one reads
            assert totals.read_units == 20 + 20 + len(ids)
            assert totals.read_throttles == 1

    run_virtual(body())


def test_an_item_written_between_batches_reads_as_it_was_when_its_batch_read_it() -> None:
    """Each placement is read once, strongly: an item deleted after its batch was read
    shows live, one deleted before its batch shows its tombstone, none is missing."""
    async def body() -> None:
        async with _pooled(1) as store:  # one batch after another
            ids = [f"item-{i:04d}" for i in range(300)]
            await place(store, ids)
            before = await _one_by_one(store, ["item-0000", "item-0299"])

            def deleting(send: Hook, n: int, ids: list[str]) -> Hook:
                async def call(namespace: str, ids: list[str], rec: Any
                               ) -> tuple[dict[str, Placement | None], list[str]]:
                    if n == 2:  # after the first two batches, before the third
                        for item_id in ("item-0000", "item-0299"):
                            await store.place(NS, item_id, None, version=2,
                                              expected=await store.locate(NS, item_id))
                    return await send(namespace, ids, rec)
                return call

            _hooked(store, deleting)
            found = await store.locate_many(NS, ids)
            assert set(found) == set(ids)
            assert found["item-0000"] == before["item-0000"]
            assert found["item-0299"].entry is None  # type: ignore[union-attr]

    run_virtual(body())


# -- the servers -------------------------------------------------------------------------

class _Skipping:
    """A clock whose sleeps end at once, keeping what they asked for: backoffs against a
    real server without sleeping for real."""

    def __init__(self) -> None:
        self.at = 0.0
        self.slept: list[float] = []

    def now(self) -> float:
        return self.at

    def wall(self) -> float:
        return self.at

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.at += seconds
        await asyncio.sleep(0)


@pytest.fixture(params=[pytest.param(name, marks=pytest.mark.dynamodb)
                        for name in ("dynamodb-table", "dynamodb-gsi")])
def dynamodb(request: pytest.FixtureRequest) -> Backend:
    _REQUIRE["dynamodb"]()
    return BACKENDS[request.param]


def _client_error(code: str, status: int) -> Exception:
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": code, "Message": "injected"},
                        "ResponseMetadata": {"HTTPStatusCode": status}}, "BatchGetItem")


def _batch_gets(store: Store, answer: Callable[[int, dict[str, Any]], Exception | list[int]]
                ) -> list[int]:
    """Route the DynamoDB client's BatchGetItems through ``answer(n, params)``: an error to
    raise (the request refused whole), or the positions of its keys to answer as
    UnprocessedKeys. Returns how many keys each BatchGetItem asked for."""
    client: Any = store._client  # type: ignore[attr-defined]
    # a second routing replaces the first
    send, asked = client.__dict__.setdefault("unrouted", client.call), []

    async def call(operation: str, **params: Any) -> dict[str, Any]:
        if operation != "BatchGetItem":
            return await send(operation, **params)  # type: ignore[no-any-return]
        (table, ask), = params["RequestItems"].items()
        keys = ask["Keys"]
        asked.append(len(keys))
        verdict = answer(len(asked) - 1, params)
        if isinstance(verdict, Exception):
            raise verdict
        unread = [keys[at] for at in verdict]
        read = [key for key in keys if key not in unread]
        # nothing read: DynamoDB's answer still holds the capacity asked for
        response: dict[str, Any] = await send(operation, **{
            **params, "RequestItems": {table: {**ask, "Keys": read}}}) if read else {
            "Responses": {table: []},
            "ConsumedCapacity": [{"TableName": table, "CapacityUnits": 0.0}]}
        if unread:
            response["UnprocessedKeys"] = {table: {**ask, "Keys": unread}}
        return response

    client.call = call
    return asked


def test_dynamodb_reads_odd_ids_and_bounds_keys_never_processed(dynamodb: Backend) -> None:
    async def body() -> None:
        clock = _Skipping()
        async with dynamodb.store(clock=clock) as store:
            ids = [*ODD_IDS, *(f"item-{i:04d}" for i in range(106))]
            await place(store, ids[:30], deleted=3)  # the rest never placed
            asked = [*ids, *ids[::5], "never"]
            expected = await _one_by_one(store, list(dict.fromkeys(asked)))
            store.reset_stats()
            assert await store.locate_many(NS, asked) == expected
            assert store.stats(NS).totals.read_requests == 2  # 121 distinct ids

            # the first key of the first batch is never processed: Throttled naming it,
            # after 8 tries, the 7 backoffs each half to all of 25 ms doubling up to 1 s
            # (2.575 s): 1.29 to 2.58 s in all (a bound of 1.5 failed at 1.486)
            sent = _batch_gets(store, lambda n, params: [0])
            with pytest.raises(Throttled, match=r"1 placements .* after 8 tries .*it's"):
                await store.locate_many(NS, ids[:3])
            assert sent == [3, 1, 1, 1, 1, 1, 1, 1]
            assert len(clock.slept) == 7
            assert 2.575 / 2 <= sum(clock.slept) <= 2.575 + 1e-9

    dynamodb.run(body())


@pytest.mark.parametrize(("code", "status", "error"), [
    ("ProvisionedThroughputExceededException", 400, Throttled),
    ("ServiceUnavailable", 503, Unavailable)])
def test_dynamodb_batch_refused_whole(dynamodb: Backend, code: str, status: int,
                                      error: type[Exception]) -> None:
    """A first BatchGetItem refused whole raises it (the caller retries the read), and
    the other batches stop; refused on a later try (after some were read), its keys are
    asked for again."""
    async def body() -> None:
        async with dynamodb.store(clock=_Skipping()) as store:
            ids = [f"item-{i:04d}" for i in range(250)]
            await place(store, ids[:20])
            expected = await _one_by_one(store, ids)

            sent = _batch_gets(store, lambda n, params: _client_error(code, status))
            with pytest.raises(error, match=code) as raised:
                await store.locate_many(NS, ids)
            assert len(sent) <= 3
            assert "write" not in str(raised.value)  # a read: nothing may have applied

            def later(n: int, params: dict[str, Any]) -> Exception | list[int]:
                # each batch's first try leaves 10 unread, its second is refused whole
                return list(range(10)) if n < 3 else (
                    _client_error(code, status) if n < 6 else [])

            sent = _batch_gets(store, later)
            if error is Throttled:
                assert await store.locate_many(NS, ids) == expected
                assert sorted(sent) == [10] * 6 + [50, 100, 100]
            else:  # Unavailable is no throttle: raised at once, the batches stopped
                with pytest.raises(Unavailable, match=code):
                    await store.locate_many(NS, ids)
                assert 4 <= len(sent) <= 6

    dynamodb.run(body())


def _refusal(request: Any, after_ms: int) -> Answer:
    """The 429 the Cosmos DB service answers to a request over the partition's rate."""
    return Answer(request, 429, "Too Many Requests",
                  {"Content-Type": "application/json", "x-ms-retry-after-ms": str(after_ms),
                   "x-ms-substatus": "3200", "x-ms-request-charge": "0"},
                  {"code": "TooManyRequests", "message": "Request rate is large"})


def _throttling_transport() -> Any:
    """An azure-core transport under the SDK (below its retry policy) that answers 429 to
    the next ``refuse`` document queries (ReadMany's), and counts the queries sent."""
    from azure.core.pipeline.transport import AioHttpTransport

    class Throttling(AioHttpTransport):  # type: ignore[misc]
        refuse = 0
        queries = 0

        async def send(self, request: Any, **kwargs: Any) -> Any:
            if request.method == "POST" and request.url.rstrip("/").endswith("/docs") \
                    and "query" in request.headers.get("Content-Type", ""):
                self.queries += 1
                if self.refuse:
                    self.refuse -= 1
                    return _refusal(request, 40)
            return await super().send(request, **kwargs)

    return Throttling()


@pytest.mark.cosmos
def test_cosmos_read_many_under_429_raises_throttled_and_a_retry_reads_all() -> None:
    """The SDK's retries are off: a 429 on ReadMany's query comes back at once as
    Throttled (its retry-after, one throttle metered, nothing read), and the caller's
    retry (``CrossReads`` retries the whole read) answers as ``locate`` one by one."""
    _REQUIRE["cosmos"]()

    from shardex.stores.cosmos import CosmosStore
    from shardex.stores.cosmos.client import SdkClient

    async def body() -> None:
        transport = _throttling_transport()
        made: Any = BACKENDS["cosmos"].store()
        store = CosmosStore(made.database, made.container, charges="estimated",
                            client=SdkClient(made.database, made.container,
                                             endpoint=made.client.endpoint,
                                             transport=transport))
        async with store:
            ids = [*ODD_IDS, *(f"item-{i:04d}" for i in range(20))]
            await place(store, ids[:24], deleted=2)
            expected = await _one_by_one(store, ids)
            store.reset_stats()
            transport.refuse, transport.queries = 1, 0
            with pytest.raises(Throttled, match="request rate too large") as err:
                await store.locate_many(NS, ids)
            assert err.value.retry_after == pytest.approx(0.04)
            assert transport.queries == 1  # the SDK did not retry it
            totals = store.stats(NS).totals
            assert (totals.read_requests, totals.read_throttles) == (1, 1)
            assert totals.read_units == 0

            transport.refuse, transport.queries = 2, 0
            clock = _Skipping()
            found = await call_with_retry(lambda: store.locate_many(NS, ids), RetryPolicy(),
                                          clock=clock, rng=random.Random(1))
            assert found == expected
            assert transport.queries == 3
            assert all(wait >= 0.04 for wait in clock.slept)

    asyncio.run(body())


@pytest.mark.azure
def test_azure_point_reads_of_odd_ids_answer_as_locate() -> None:
    _REQUIRE["azure"]()

    async def body() -> None:
        async with BACKENDS["azure-tables"].store() as store:
            ids = [*ODD_IDS, *(f"item-{i:04d}" for i in range(6))]
            await place(store, ids[:16], deleted=2)
            expected = await _one_by_one(store, ids)
            store.reset_stats()
            assert await store.locate_many(NS, [*ids, *ids[:5]]) == expected
            assert store.stats(NS).totals.read_requests == len(ids)

    asyncio.run(body())
