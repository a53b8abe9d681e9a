"""A stateful test of online reshards: application writes, paginations, reshard steps, crashes.

Several clients, each with its own routing cache and TTL, put, move and delete items and
page through values, while reshard runners (each a "process" with a worker name of its
own) start, drive, cut over, complete and roll back reshards; a runner is killed at a
random moment (its task cancelled: its leases stay until they expire) and another
resumes. Every full pagination, taken while a runner moves entries, must equal the
model: nothing lost, duplicated or ghost. The machine runs on memory:// (virtual time,
with injected throttles and ambiguous writes) and, smaller, on DynamoDB Local.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Coroutine
from typing import Any, ClassVar, TypeVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import shardex
from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.keys import parse_shard_key
from shardex.reshard import Resharder
from shardex.retry import RetryPolicy
from shardex.stores.base import Store

T = TypeVar("T")
VALUES = ["PENDING", "SHIPPED", "DELIVERED"]
ITEMS = [f"o-{i}" for i in range(16)]
SORTS = ["2026-11-30T05:00Z", "2026-11-30T06:00Z", "2026-11-30T07:00Z", ""]
POLICIES = st.builds(ShardPolicy, shards=st.sampled_from([1, 2, 3, 8]),
                     strategy=st.sampled_from(["hash", "random", "round_robin"]))
PATIENT = RetryPolicy(attempts=20, base=0.01, cap=0.2, deadline=None)
Model = dict[str, tuple[str, str, dict[str, Any]]]


class ReshardMachine(RuleBasedStateMachine):
    """Subclasses set ``make_store``, ``new_loop``, the timings and the settings."""

    lease: ClassVar[float] = 2.0
    margin: ClassVar[float] = 0.3
    ttls: ClassVar[tuple[float, ...]] = (0.2, 0.7, 1.5)
    unit_lease: ClassVar[float] = 1.0
    crash_within: ClassVar[float] = 4.0
    read_every: ClassVar[float] = 0.05
    settle: ClassVar[float | None] = None

    def make_store(self, seed: int) -> Store:
        raise NotImplementedError

    def new_loop(self) -> asyncio.AbstractEventLoop:
        raise NotImplementedError

    def __init__(self) -> None:
        super().__init__()
        self.loop = self.new_loop()
        self.model: Model = {}
        self.clients: list[ShardedIndex] = []
        self.store: Store | None = None
        self.workers = itertools.count()
        self.paginations = 0

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    @initialize(seed=st.integers(0, 2**16), pending=POLICIES)
    def open_clients(self, seed: int, pending: ShardPolicy) -> None:
        self.store = self.make_store(seed)
        routing = Routing(overrides={"PENDING": pending})
        self.clients = [ShardedIndex(self.store, "orders", routing, routing_lease=self.lease,
                                     routing_ttl=ttl, seed=seed + i, retry=PATIENT)
                        for i, ttl in enumerate(self.ttls)]
        for client in self.clients:
            self.run(client.open())

    def teardown(self) -> None:
        try:
            if self.clients:
                self.run(self._finish())
        finally:
            for client in self.clients:
                self.run(client.close())
            self.loop.close()

    async def _finish(self) -> None:
        """End any reshard (forward, or back when it can no longer go on), then check all."""
        routing = await self.clients[0].refresh_routing()
        if routing.reshard is not None:
            async with self.resharder() as rs:
                if routing.reshard.direction == "forward" and routing.state in (
                        "read-both", "write-new", "verified"):
                    await rs.rollback()
                else:
                    await rs.run(until="done")
            assert (await self.clients[0].refresh_routing()).state == "stable"
        for value in VALUES:
            await self.check_pagination(self.clients[0], value, [5])

    def resharder(self) -> Resharder:
        assert self.store is not None
        n = next(self.workers)
        return Resharder(self.store, "orders", worker=f"worker-{n}", seed=n, rate=400.0,
                         unit_lease=self.unit_lease, split_every=4, max_age=3600.0,
                         routing_ttl=min(self.ttls), settle=self.settle)

    # -- the application ----------------------------------------------------------------

    async def write(self, client: ShardedIndex, kind: str, item: str, value: str,
                    sort: str, n: int) -> None:
        held = self.model.get(item)
        try:
            if kind == "put":
                assert await client.put(value, item, sort=sort, attrs={"n": n})
                self.model[item] = (value, sort, {"n": n})
            elif kind == "move":
                if held is None:
                    return
                assert await client.move(item, old=held[0], new=value)
                self.model[item] = (value, held[1], held[2])
            else:
                deleted = await client.delete(value, item)
                assert deleted == (held is not None and held[0] == value)
                if deleted:
                    del self.model[item]
        except shardex.OutcomeUnknown:
            await self.resolve(item)

    async def resolve(self, item: str) -> None:
        """After an unknown outcome, take the item's placement as the model's truth."""
        assert self.store is not None
        placement = await self.store.locate("orders", item)
        if placement is None or placement.entry is None:
            self.model.pop(item, None)
        else:
            entry = placement.entry
            self.model[item] = (parse_shard_key(entry.shard_key)[0], entry.sort,
                                dict(entry.attrs))

    async def check_pagination(self, client: ShardedIndex, value: str, sizes: list[int],
                               order: str = "asc") -> None:
        want = sorted(((sort, item, attrs) for item, (v, sort, attrs) in self.model.items()
                       if v == value), reverse=order == "desc")
        got: list[tuple[str, str, dict[str, Any]]] = []
        cursor = None
        pages = 0
        while True:
            page = None
            for _ in range(8):
                try:
                    page = await client.query(value, limit=sizes[pages % len(sizes)],
                                              order=order, cursor=cursor)  # type: ignore[arg-type]
                    break
                except shardex.IncompleteRead:
                    continue  # the same cursor may be read again
            assert page is not None, "eight reads in a row were incomplete"
            got += [(e.sort, e.item_id, dict(e.attrs)) for e in page.items]
            pages += 1
            if (cursor := page.cursor) is None:
                break
        assert got == want, (value, client.routing.state)
        self.paginations += 1

    # -- rules ------------------------------------------------------------------------------

    @rule(client=st.integers(0, 2), kind=st.sampled_from(["put", "put", "move", "delete"]),
          item=st.sampled_from(ITEMS), value=st.sampled_from(VALUES),
          sort=st.sampled_from(SORTS), n=st.integers(0, 9))
    def app_write(self, client: int, kind: str, item: str, value: str, sort: str,
                  n: int) -> None:
        self.run(self.write(self.clients[client], kind, item, value, sort, n))

    @rule(client=st.integers(0, 2), value=st.sampled_from(VALUES),
          order=st.sampled_from(["asc", "desc"]),
          sizes=st.lists(st.integers(1, 6), min_size=1, max_size=3))
    def paginate(self, client: int, value: str, order: str, sizes: list[int]) -> None:
        self.run(self.check_pagination(self.clients[client], value, sizes, order))

    @rule(pending=POLICIES, shipped=st.none() | POLICIES, default=st.none() | POLICIES)
    def start(self, pending: ShardPolicy, shipped: ShardPolicy | None,
              default: ShardPolicy | None) -> None:
        changes = {"PENDING": pending, **({"SHIPPED": shipped} if shipped else {})}

        async def begin() -> None:
            async with self.resharder() as rs:
                busy = (await rs.routing()).in_transition
                try:
                    # a default change moves the values named: every value it re-routes
                    await rs.start(changes, default=default, values=VALUES,
                                   margin=self.margin)
                except shardex.ReshardRefused:
                    assert busy
                except shardex.InvalidRouting as exc:
                    refused = str(exc)
                    assert "no value changes" in refused

        self.run(begin())

    @rule(action=st.sampled_from(["run", "run", "done", "rollback", "cutover", "complete"]),
          crash=st.none() | st.floats(0.0, 1.0),
          writes=st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["put", "move",
                                                                         "delete"]),
                                    st.sampled_from(ITEMS), st.sampled_from(VALUES)),
                          max_size=6),
          client=st.integers(0, 2))
    def drive(self, action: str, crash: float | None, writes: list[tuple[int, str, str, str]],
              client: int) -> None:
        """A runner works (or dies part way) while the application writes and reads."""
        async def work() -> None:
            async with self.resharder() as rs:
                try:
                    if action == "run":
                        await rs.run()
                    elif action == "done":
                        await rs.run(until="done")
                    elif action == "rollback":
                        await rs.rollback()
                    elif action == "cutover":
                        await rs.cutover()
                    else:
                        await rs.complete(retain=0.0)
                except shardex.ReshardRefused:
                    pass

        async def main() -> None:
            runner = asyncio.ensure_future(work())
            loop = asyncio.get_running_loop()
            deadline = None if crash is None else loop.time() + crash * self.crash_within
            try:
                for i, (who, kind, item, value) in enumerate(writes):
                    await self.write(self.clients[who], kind, item, value, SORTS[i % 4], i)
                    await self.check_pagination(self.clients[client], value, [3])
                # read all along while the runner waits, moves, verifies, until it ends or dies
                turn = 0
                while not runner.done() and (deadline is None or loop.time() < deadline):
                    turn += 1
                    await self.check_pagination(self.clients[(client + turn) % 3],
                                                VALUES[turn % 3], [1 + turn % 5])
                    await asyncio.sleep(self.read_every)
            finally:
                if not runner.done():
                    runner.cancel()  # the process dies
                await asyncio.gather(runner, return_exceptions=True)
            if runner.cancelled():
                return
            error = runner.exception()
            if error is not None:
                raise error

        self.run(main())

    @rule(seconds=st.floats(0.1, 3.0))
    def time_passes(self, seconds: float) -> None:
        self.run(asyncio.sleep(seconds))

    @invariant()
    def counts_match(self) -> None:
        if not self.clients:
            return
        for value in VALUES:
            want = sum(1 for v, _, _ in self.model.values() if v == value)
            for _ in range(8):
                try:
                    assert self.run(self.clients[0].count(value)) == want, value
                    break
                except shardex.IncompleteRead:
                    continue


def machine(make_store: Callable[[int], Store], new_loop: Callable[[], asyncio.AbstractEventLoop],
            **timings: Any) -> type[ReshardMachine]:
    """A ReshardMachine on stores made by ``make_store``, loops by ``new_loop``."""
    return type("Machine", (ReshardMachine,), {
        "make_store": lambda self, seed: make_store(seed),
        "new_loop": lambda self: new_loop(), **timings})
