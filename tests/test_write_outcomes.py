"""Exact write outcomes on memory://: every reported outcome checked against what applied.

The memory store logs every place that applies (``watch_applied``), with the write's
token. Each write here is given its own token (``token=``), so a test checks each call's
reported outcome against the log: True means its token applied exactly once; False or
an error other than OutcomeUnknown means it never applied; OutcomeUnknown may be either.
Never twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import shardex
from shardex import ConditionFailed, OutcomeUnknown, Routing, ShardPolicy, Throttled, Unavailable
from shardex.model.entries import HISTORY_LENGTH, NO_TOKEN, Placement, StoredEntry, new_token
from shardex.retry import RetryPolicy
from shardex.sim.clock import VirtualTimeLoop, run_virtual
from shardex.stores.memory import MemoryStore
from shardex.stores.memory.state import AppliedWrite
from shardex.stores.metered import Recorder
from shardex.write import Outcome, resolve

VALUES = ["PENDING", "SHIPPED", "DELIVERED"]
ROUTING = Routing(overrides={"PENDING": ShardPolicy(shards=4)})


async def traced(call: Callable[[str], Awaitable[bool]]) -> tuple[str, Any]:
    """Run one write with a token of its own (``token=``); return it and the write's result
    or error."""
    token = new_token()
    try:
        result: Any = await call(token)
    except shardex.ShardexError as exc:
        result = exc
    return token, result


def applies(log: list[AppliedWrite], token: str) -> int:
    return sum(1 for write in log if write.token == token)


def check_outcome(log: list[AppliedWrite], token: str, result: Any) -> str:
    """Assert the reported ``result`` of write ``token`` is true to the log; name it."""
    n = applies(log, token)
    assert n <= 1, f"write {token} applied {n} times"
    if result is True:
        assert n == 1, f"write {token} reported success but never applied"
        return "ok"
    if isinstance(result, OutcomeUnknown):
        assert result.token == token
        return "unknown"
    assert n == 0, f"write {token} reported {result!r} but applied"
    return "fail"


# -- the pure resolution ----------------------------------------------------------------

def placement(token: str | None, *history: str, version: int = 1) -> Placement:
    return Placement("o-1", version, StoredEntry("K", "", "o-1"), token, tuple(history))


def test_resolve_reads_the_outcome_from_tokens_never_from_content() -> None:
    before = placement("t0", NO_TOKEN)
    assert resolve(before, "mine", placement("mine", NO_TOKEN, "t0")) is Outcome.APPLIED
    assert resolve(before, "mine", placement("t9", NO_TOKEN, "t0", "mine", "t8")) is \
        Outcome.APPLIED
    assert resolve(before, "mine", before) is Outcome.NOT_APPLIED
    # where a request may land late, unchanged says only: not landed yet
    assert resolve(before, "mine", before, late_writes=True) is Outcome.NOT_YET
    assert resolve(before, "mine", placement("other", NO_TOKEN, "t0"), late_writes=True) is \
        Outcome.NOT_APPLIED
    # another write landed directly after the state this one was tried on
    assert resolve(before, "mine", placement("other", NO_TOKEN, "t0")) is Outcome.NOT_APPLIED
    # the same content written by another client is not this write
    assert resolve(before, "mine", placement("twin", NO_TOKEN, "t0")) is Outcome.NOT_APPLIED
    # so many writes since that the history no longer reaches back to t0
    assert resolve(before, "mine", placement("x5", "x1", "x2", "x3", "x4")) is Outcome.UNKNOWN
    # never placed: the first write's history starts with NO_TOKEN
    assert resolve(None, "mine", None) is Outcome.NOT_APPLIED
    assert resolve(None, "mine", placement("other", NO_TOKEN)) is Outcome.NOT_APPLIED
    assert resolve(None, "mine", placement("x4", "x0", "x1", "x2", "x3")) is Outcome.UNKNOWN


def test_resolve_where_the_application_writes_the_items_too() -> None:
    located = (("status", {"S": "PENDING"}),)
    app_item = Placement("o-1", 0, StoredEntry("PENDING", "", "o-1"), None, (), located)
    # exactly as located: the try did not land
    assert resolve(app_item, "mine", app_item, foreign_writes=True) is Outcome.NOT_APPLIED
    # changed without a token: the application wrote, and the try may have landed before
    changed = Placement("o-1", 0, app_item.entry, None, (), (("status", {"S": "CANCELLED"}),))
    assert resolve(app_item, "mine", changed, foreign_writes=True) is Outcome.UNKNOWN
    assert resolve(app_item, "mine", Placement("o-1", 1, None, "mine", ("",)),
                   foreign_writes=True) is Outcome.APPLIED
    tokened = placement("t0", NO_TOKEN)
    assert resolve(tokened, "mine", placement("t0", NO_TOKEN, version=7),
                   foreign_writes=True) is Outcome.NOT_APPLIED


# -- scripted faults ----------------------------------------------------------------------

class Scripted(MemoryStore):
    """A memory store whose places and locates follow a script of faults."""

    def __init__(self, **options: Any) -> None:
        super().__init__(seed=1, **options)
        # per place: "ambiguous" (applied, then failed), "ambiguous-then-down" (and every
        # locate fails after), "lost" (failed before it applied), "throttled",
        # "unsent-then-down" (failed, the store saying it did not apply; locates fail)
        self.place_faults: list[str] = []
        self.locate_down = False
        self.after_lost: Callable[[], Awaitable[None]] | None = None

    async def _place(self, namespace: str, item_id: str, entry: StoredEntry | None,
                     version: int, expected: Placement | None, token: str,
                     rec: Recorder) -> None:
        fault = self.place_faults.pop(0) if self.place_faults else "none"
        if fault == "throttled":
            raise Throttled("scripted throttle", key=item_id)
        if fault == "unsent-then-down":  # the store knows it did not apply, then stalls
            self.locate_down = True
            raise Unavailable("scripted: failed before its commit was sent",
                              may_have_applied=False)
        if fault == "lost":
            if self.after_lost is not None:
                hook, self.after_lost = self.after_lost, None
                await hook()
            raise Unavailable("scripted: the request was lost before it applied")
        await super()._place(namespace, item_id, entry, version, expected, token, rec)
        if fault == "ambiguous-then-down":
            self.locate_down = True
        if fault.startswith("ambiguous"):
            raise Unavailable("scripted: timed out after it applied")

    async def _locate(self, namespace: str, item_id: str, rec: Recorder) -> Placement | None:
        if self.locate_down:
            raise Unavailable("scripted: the store does not answer")
        return await super()._locate(namespace, item_id, rec)


FAST = RetryPolicy(attempts=4, base=0.01, cap=0.05, deadline=None)


def test_a_write_that_landed_then_saw_only_throttles_reports_success_once() -> None:
    async def main() -> None:
        store = Scripted()
        log = store.watch_applied()
        async with shardex.ShardedIndex(store, "orders", retry=FAST, seed=1) as index:
            await index.put("PENDING", "o-1", sort="a")
            store.place_faults = ["ambiguous", "throttled", "throttled", "throttled"]
            token, result = await traced(
                lambda token: index.move("o-1", old="PENDING", new="SHIPPED", token=token))
            assert check_outcome(log, token, result) == "ok"
            # and it is never planned again: the item moved once, not back and forth
            assert [w.entry.shard_key if w.entry else None for w in log[1:]] == ["SHIPPED"]

    run_virtual(main())


def test_a_write_lost_before_it_applied_is_tried_again_with_its_token() -> None:
    async def main() -> None:
        store = Scripted()
        log = store.watch_applied()
        async with shardex.ShardedIndex(store, "orders", retry=FAST, seed=1) as index:
            store.place_faults = ["lost", "lost"]
            token, result = await traced(lambda token: index.put("PENDING", "o-1", sort="a",
                                                                 token=token))
            assert check_outcome(log, token, result) == "ok"
            store.place_faults = ["lost"] * 4
            token, result = await traced(lambda token: index.delete("PENDING", "o-1", token=token))
            assert isinstance(result, Unavailable)
            assert "did not apply" in str(result)
            assert check_outcome(log, token, result) == "fail"

    run_virtual(main())


class Late(Scripted):
    """A store whose requests may land after they failed: "held" fails a place at once,
    as a timeout does, and applies it ``hold`` seconds later (a request the network or
    the service held)."""

    def __init__(self, hold: float) -> None:
        super().__init__()
        self.capabilities = replace(self.capabilities, late_writes=True)
        self.hold = hold
        self.held: list[asyncio.Future[None]] = []

    async def _place(self, namespace: str, item_id: str, entry: StoredEntry | None,
                     version: int, expected: Placement | None, token: str,
                     rec: Recorder) -> None:
        if self.place_faults and self.place_faults[0] == "held":
            self.place_faults.pop(0)

            async def land() -> None:
                await self.clock.sleep(self.hold)
                with contextlib.suppress(ConditionFailed):
                    await MemoryStore._place(self, namespace, item_id, entry, version,
                                             expected, token, rec)

            self.held.append(asyncio.ensure_future(land()))
            raise Unavailable("scripted: timed out; the request is held on its way")
        await super()._place(namespace, item_id, entry, version, expected, token, rec)


@pytest.mark.parametrize("late", ["held", "lost"])
def test_a_write_that_may_still_land_is_unknown_never_failed(late: str) -> None:
    """A request held in the network (a proxy, a slow server) landed after shardex had
    read the item back unchanged, given up and said 'did not apply' (Azure Tables and
    DynamoDB Local, with a delaying proxy): unchanged when read is not never."""
    async def main() -> None:
        store = Late(hold=5.0)
        log = store.watch_applied()
        async with shardex.ShardedIndex(store, "orders", retry=FAST, seed=1) as index:
            await index.put("PENDING", "o-1", sort="a")
            store.place_faults = [late, "lost", "lost", "lost"]
            token, result = await traced(
                lambda token: index.move("o-1", old="PENDING", new="SHIPPED", token=token))
            assert isinstance(result, OutcomeUnknown), result
            assert "a try sent before may still land" in str(result)
            await asyncio.gather(*store.held)
            await asyncio.sleep(6)
            assert check_outcome(log, token, result) == "unknown"
            assert applies(log, token) == (1 if late == "held" else 0)

    run_virtual(main())


def test_a_write_the_store_says_did_not_apply_fails_though_it_cannot_be_read_back() -> None:
    """A store whose write is several requests with one commit point knows a write that
    failed before its commit did not apply (``Unavailable.may_have_applied`` False):
    it is tried again without a read back, and fails if the store stays away, where it
    had been reported unknown (a probe on the Cosmos DB server)."""
    async def main() -> None:
        store = Scripted()
        log = store.watch_applied()
        async with shardex.ShardedIndex(store, "orders", retry=FAST, seed=1) as index:
            await index.put("PENDING", "o-1", sort="a")
            store.place_faults = ["unsent-then-down"] * 4
            token, result = await traced(
                lambda token: index.move("o-1", old="PENDING", new="SHIPPED", token=token))
            assert isinstance(result, Unavailable), result
            assert check_outcome(log, token, result) == "fail"
            store.locate_down = False
            store.place_faults = ["unsent-then-down"]  # then its places land again
            token, result = await traced(
                lambda token: index.move("o-1", old="PENDING", new="SHIPPED", token=token))
            assert check_outcome(log, token, result) == "ok"

    run_virtual(main())


def test_outcome_unknown_when_the_placement_cannot_be_read_back() -> None:
    async def main() -> None:
        store = Scripted()
        log = store.watch_applied()
        async with shardex.ShardedIndex(store, "orders", retry=FAST, seed=1) as index:
            await index.put("PENDING", "o-1", sort="a")
            store.place_faults = ["ambiguous-then-down"]
            token, result = await traced(
                lambda token: index.move("o-1", old="PENDING", new="SHIPPED", token=token))
            assert isinstance(result, OutcomeUnknown)
            assert result.item_id == "o-1"
            assert token in str(result)
            assert "may have applied" in str(result)
            assert check_outcome(log, token, result) == "unknown"
            assert applies(log, token) == 1

    run_virtual(main())


def test_outcome_unknown_when_the_history_no_longer_reaches_back() -> None:
    async def main() -> None:
        store = Scripted()
        log = store.watch_applied()
        async with shardex.ShardedIndex(store, "orders", retry=FAST, seed=1) as index, \
                shardex.ShardedIndex(store, "orders", retry=FAST, seed=2) as other:
            await index.put("PENDING", "o-1", sort="a")

            async def others_write() -> None:
                async def writes() -> None:
                    for i in range(HISTORY_LENGTH + 1):
                        await other.put("PENDING", "o-1", sort=f"b{i}")

                await asyncio.create_task(writes(), context=contextvars.Context())

            store.place_faults = ["lost"]
            store.after_lost = others_write
            token, result = await traced(
                lambda token: index.move("o-1", old="PENDING", new="SHIPPED", token=token))
            assert isinstance(result, OutcomeUnknown)
            assert check_outcome(log, token, result) == "unknown"
            assert applies(log, token) == 0

    run_virtual(main())


# -- twin writes from two clients ----------------------------------------------------------

TWIN_TRIALS = 200


def test_twin_moves_and_deletes_have_exactly_one_winner() -> None:
    winners: Counter[str] = Counter()

    async def main() -> None:
        store = MemoryStore(seed=5, latency_median_ms=4, latency_p99_ms=40)
        log = store.watch_applied()
        async with shardex.ShardedIndex(store, "orders", ROUTING, seed=1) as one, \
                shardex.ShardedIndex(store, "orders", seed=2) as two:
            for trial in range(TWIN_TRIALS):
                item = f"o-{trial}"
                await one.put("PENDING", item, sort="a")
                moves = await asyncio.gather(
                    traced(lambda t, i=item: one.move(i, old="PENDING", new="SHIPPED", token=t)),
                    traced(lambda t, i=item: two.move(i, old="PENDING", new="SHIPPED", token=t)))
                outcomes = sorted(check_outcome(log, t, r) for t, r in moves)
                assert outcomes == ["fail", "ok"], moves
                assert all(r is True or isinstance(r, ConditionFailed) for _, r in moves)
                deletes = await asyncio.gather(
                    traced(lambda t, i=item: one.delete("SHIPPED", i, token=t)),
                    traced(lambda t, i=item: two.delete("SHIPPED", i, token=t)))
                assert sorted(r for _, r in deletes) == [False, True], deletes
                for token, result in deletes:
                    check_outcome(log, token, result)
                winners["move"] += 1
                winners["delete"] += 1

    run_virtual(main())
    assert winners == {"move": TWIN_TRIALS, "delete": TWIN_TRIALS}


# -- concurrent clients under injected faults, checked against the applied log ------------

ITEMS = [f"o-{i}" for i in range(8)]
Op = tuple[int, str, str, str, str]  # client, kind, item, value, other value
OPS = st.tuples(st.integers(0, 2), st.sampled_from(["put", "move", "delete"]),
                st.sampled_from(ITEMS), st.sampled_from(VALUES), st.sampled_from(VALUES))


class ConcurrentClients(RuleBasedStateMachine):
    """Three clients write the same few items at once on a faulty store.

    Every call's outcome is checked against the store's applied-writes log, and every
    listing against the state the log leads to.
    """

    outcomes: ClassVar[Counter[str]] = Counter()

    def __init__(self) -> None:
        super().__init__()
        self.loop = VirtualTimeLoop()
        self.clients: list[shardex.ShardedIndex] = []
        self.log: list[AppliedWrite] = []

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    @initialize(seed=st.integers(0, 2**16), attempts=st.sampled_from([3, 8]))
    def open_clients(self, seed: int, attempts: int) -> None:
        store = shardex.open_store("memory://", seed=seed, throttle_rate=0.2,
                                   unavailable_rate=0.05, ambiguous_rate=0.1)
        assert isinstance(store, MemoryStore)
        self.log = store.watch_applied()
        retry = RetryPolicy(attempts=attempts, base=0.01, cap=0.2, deadline=None)
        self.clients = [shardex.ShardedIndex(store, "orders", ROUTING, seed=seed + i,
                                             retry=retry) for i in range(3)]
        for client in self.clients:
            for _ in range(20):  # the routing read at open may meet an injected fault
                try:
                    self.run(client.open())
                    break
                except (Throttled, Unavailable):
                    continue

    def teardown(self) -> None:
        for client in self.clients:
            self.run(client.close())
        self.loop.close()

    def call(self, op: Op) -> Callable[[str], Awaitable[bool]]:
        client, kind, item, value, other = op
        index = self.clients[client]
        if kind == "put":
            return lambda t: index.put(value, item, sort=f"s{client}", attrs={"by": client},
                                     token=t)
        if kind == "move":
            return lambda t: index.move(item, old=value, new=other, token=t)
        return lambda t: index.delete(value, item, token=t)

    @rule(ops=st.lists(OPS, min_size=1, max_size=8))
    def burst(self, ops: list[Op]) -> None:
        async def together() -> list[tuple[str, Any]]:
            return await asyncio.gather(*(traced(self.call(op)) for op in ops))

        results = self.run(together())
        for token, result in results:
            self.outcomes[check_outcome(self.log, token, result)] += 1

    @invariant()
    def listings_match_what_applied(self) -> None:
        if not self.clients:
            return
        last: dict[str, StoredEntry | None] = {}
        for write in self.log:
            last[write.item_id] = write.entry
        for value in VALUES:
            want = sorted(item for item, entry in last.items()
                          if entry is not None and entry.shard_key.partition("#")[0] == value)
            got = self.run(self.listing(value))
            assert got == want

    async def listing(self, value: str) -> list[str]:
        for _ in range(10):
            try:
                return sorted([e.item_id async for e in self.clients[0].scan(value)])
            except shardex.IncompleteRead:
                continue
        raise AssertionError("ten listings in a row were incomplete")


ConcurrentClients.TestCase.settings = settings(
    max_examples=25, stateful_step_count=10, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
TestConcurrentClients = ConcurrentClients.TestCase


def test_a_caller_chooses_the_write_token_and_a_bad_one_is_refused() -> None:
    async def main() -> None:
        store = MemoryStore(seed=1)
        async with shardex.ShardedIndex(store, "orders", seed=1) as index:
            assert await index.put("PENDING", "o-1", sort="a", token="order-1-v1")
            placement = await store.locate("orders", "o-1")
            assert placement is not None
            assert placement.token == "order-1-v1"
            for bad in ("not ok!", "", "x" * 37, 7):
                with pytest.raises(shardex.InvalidInput, match="token must be"):
                    await index.move("o-1", old="PENDING", new="SHIPPED",
                                     token=bad)  # type: ignore[arg-type]
            assert await store.locate("orders", "o-1") == placement  # nothing applied

    run_virtual(main())


def test_a_token_already_on_the_item_is_a_retry_of_its_write_or_refused() -> None:
    """Nothing asked whether a caller's token was already on the item: a move given the
    token of the put before it was acknowledged (and, its first try failing before it
    applied, reported ok without applying); an application retrying, with its token, a
    move that ended OutcomeUnknown but had applied got ConditionFailed, which says it did
    not. Now the retry of the item's last write reports ok and changes nothing; a
    different write with a token the item carries is refused, changing nothing."""
    class Flaky(MemoryStore):
        down = False

        async def _place(self, namespace: str, item_id: str, entry: Any, version: int,
                         expected: Any, token: str, rec: Recorder) -> None:
            await super()._place(namespace, item_id, entry, version, expected, token, rec)
            if token == "tok-move":
                self.down = True
                raise Unavailable("applied, then the connection dropped")

        async def _locate(self, namespace: str, item_id: str, rec: Recorder) -> Any:
            if self.down:
                raise Unavailable("unreachable")
            return await super()._locate(namespace, item_id, rec)

    async def main() -> None:
        store = Flaky(seed=1)
        retry = RetryPolicy(attempts=3, base=0.01, cap=0.1, deadline=None)
        async with shardex.ShardedIndex(store, "orders", Routing(), retry=retry) as index:
            assert await index.put("PENDING", "o-1", sort="a", token="tok-put")
            placement = await store.locate("orders", "o-1")
            with pytest.raises(shardex.InvalidInput, match="token 'tok-put' is already on "
                                                           "item 'o-1'"):
                await index.move("o-1", old="PENDING", new="SHIPPED", token="tok-put")
            assert await store.locate("orders", "o-1") == placement
            with pytest.raises(OutcomeUnknown):
                await index.move("o-1", old="PENDING", new="SHIPPED", token="tok-move")
            store.down = False
            moved = await store.locate("orders", "o-1")
            assert await index.move("o-1", old="PENDING", new="SHIPPED", token="tok-move")
            assert await store.locate("orders", "o-1") == moved
            assert await index.put("SHIPPED", "o-1", sort="b")
            with pytest.raises(shardex.InvalidInput, match="an earlier write"):
                await index.move("o-1", old="PENDING", new="SHIPPED", token="tok-move")
            with pytest.raises(shardex.InvalidInput, match="token 'tok-put'"):
                await index.delete("SHIPPED", "o-1", token="tok-put")
            assert (await index.get("o-1")).sort == "b"

    run_virtual(main())
