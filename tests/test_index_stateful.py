"""A stateful property test: ShardedIndex against a plain dictionary, with faults.

Random puts, moves and deletes, and full paginations with random page sizes in both
orders, on a memory store that throttles a share of all requests. Between two pages a
value may be re-laid under another shard count, as a finished reshard leaves it. Every
full pagination must return exactly the model's entries, in order, once each.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import shardex
from shardex import Routing, ShardPolicy
from shardex.retry import RetryPolicy
from shardex.sim.clock import VirtualTimeLoop
from shardex.stores.base import Store
from tests.helpers import relayout

VALUES = ["PENDING", "SHIPPED", "DELIVERED"]
ITEMS = [f"o-{i}" for i in range(14)]
SORTS = ["2026-11-30T05:00Z", "2026-11-30T06:00Z", "2026-11-30T07:00Z", ""]
POLICIES = st.builds(ShardPolicy, shards=st.sampled_from([1, 2, 3, 8]),
                     strategy=st.sampled_from(["hash", "random", "round_robin"]))


class IndexMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = self.new_loop()
        self.model: dict[str, tuple[str, str, dict[str, Any]]] = {}
        self.index: shardex.ShardedIndex | None = None

    def new_loop(self) -> asyncio.AbstractEventLoop:
        """The loop the machine runs on (virtual time, for the memory store)."""
        return VirtualTimeLoop()

    def new_store(self, seed: int) -> Store:
        """A fresh store that throttles a share of requests and times out after others."""
        return shardex.open_store("memory://", seed=seed, throttle_rate=0.15,
                                  ambiguous_rate=0.05)

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    @initialize(seed=st.integers(0, 2**16), pending=POLICIES)
    def open_index(self, seed: int, pending: ShardPolicy) -> None:
        store = self.new_store(seed)
        self.index = shardex.ShardedIndex(
            store, "orders", Routing(overrides={"PENDING": pending}), seed=seed,
            retry=RetryPolicy(attempts=12, base=0.01, cap=0.2, deadline=None))
        self.run(self.index.open())

    def teardown(self) -> None:
        if self.index is not None:
            self.run(self.index.close())
        self.loop.close()

    @property
    def ix(self) -> shardex.ShardedIndex:
        assert self.index is not None
        return self.index

    @rule(value=st.sampled_from(VALUES), item=st.sampled_from(ITEMS),
          sort=st.sampled_from(SORTS), n=st.integers(0, 9))
    def put(self, value: str, item: str, sort: str, n: int) -> None:
        assert self.run(self.ix.put(value, item, sort=sort, attrs={"n": n}))
        self.model[item] = (value, sort, {"n": n})

    @rule(item=st.sampled_from(ITEMS), new=st.sampled_from(VALUES),
          sort=st.none() | st.sampled_from(SORTS))
    def move(self, item: str, new: str, sort: str | None) -> None:
        held = self.model.get(item)
        old = held[0] if held else "PENDING"
        if held is None:
            try:
                self.run(self.ix.move(item, old=old, new=new, sort=sort))
            except shardex.ConditionFailed:
                return
            raise AssertionError(f"move of absent {item} succeeded")
        assert self.run(self.ix.move(item, old=old, new=new, sort=sort))
        self.model[item] = (new, held[1] if sort is None else sort, held[2])

    @rule(value=st.sampled_from(VALUES), item=st.sampled_from(ITEMS))
    def delete(self, value: str, item: str) -> None:
        held = self.model.get(item)
        deleted = self.run(self.ix.delete(value, item))
        assert deleted == (held is not None and held[0] == value)
        if deleted:
            del self.model[item]

    @rule(value=st.sampled_from(VALUES), order=st.sampled_from(["asc", "desc"]),
          sizes=st.lists(st.integers(1, 6), min_size=1, max_size=4),
          relay_after=st.none() | st.integers(0, 3), policy=POLICIES)
    def paginate(self, value: str, order: str, sizes: list[int], relay_after: int | None,
                 policy: ShardPolicy) -> None:
        expected = sorted(
            ((sort, item, attrs) for item, (v, sort, attrs) in self.model.items() if v == value),
            reverse=order == "desc")
        got: list[tuple[str, str, dict[str, Any]]] = []
        cursor = None
        pages = 0
        while True:
            page = self.read_page(value, order, sizes[pages % len(sizes)], cursor)
            got += [(e.sort, e.item_id, dict(e.attrs)) for e in page.items]
            assert all(e.value == value for e in page.items)
            if page.cursor is None:
                break
            if pages == relay_after:
                self.run(relayout(self.ix, value, policy))
            cursor = page.cursor
            pages += 1
        assert got == expected

    def read_page(self, value: str, order: str, limit: int, cursor: str | None
                  ) -> shardex.Page:
        for _ in range(5):
            try:
                return self.run(self.ix.query(value, limit=limit, order=order,  # type: ignore[arg-type]
                                              cursor=cursor))
            except shardex.IncompleteRead:
                continue  # the same cursor may be read again
        raise AssertionError("five reads in a row were incomplete")

    @invariant()
    def counts_match(self) -> None:
        if self.index is None:
            return
        for value in VALUES:
            want = sum(1 for v, _, _ in self.model.values() if v == value)
            assert self.run(self.ix.count(value)) == want


IndexMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestIndexAgainstModel = IndexMachine.TestCase
