"""The outcomes of versioned writes racing a tier move, when the write's two steps (the
row in T, the confirmation in S, the index's own store) are held apart while the mover
works: each was found from outside saying False while it applied, or keeping an entry
it should have deleted.

- a versioned ``put`` whose confirmation is held while the reshard rolls back: the
  rollback's mover carries its row in T back to S, and the put, whose confirmation
  then fails, knows the carry for its own (``derived(token, "carry")``) and says True;
- a versioned ``delete`` (or ``put``) whose row landed in T and whose answer comes late
  while the mover moves the value to T: the mover fences S and replaces the row S never
  confirmed at the version of the entry it carries, not the row's; the write, deciding
  again, applies over it;
- an unversioned ``put`` over such a row numbers itself from the item as it is, so the
  versioned write it displaced applies after it;
- a put whose claim in the own store is held while a move carries its row home, and a
  write whose confirmation is throttled after its row became the item's truth in T, say
  they applied;
- a move whose confirmation fails takes its row back out of T (readers of T alone
  listed it), and so does a write whose tries ran out after its row landed there (a
  later move carried the row over the item's truth).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

import shardex.migrate.runner as runner_module
from shardex import Routing, ShardedIndex, ShardexError, ShardPolicy, Throttled, Unavailable
from shardex.reshard import Resharder
from shardex.sim.clock import run_virtual
from shardex.stores.memory import MemoryStore

TIERED = {"PENDING": ShardPolicy(2, tier="dedicated")}


class Held(MemoryStore):
    """A store whose confirmations of items ``x...`` wait ``before`` seconds before they
    are sent, and whose writes of items ``o-...`` that are the application's (tombstones,
    and entries sorted ``"new"``) answer ``after`` seconds late, while the other entries of
    those items (the mover's) wait ``moving`` seconds before they are sent."""

    def __init__(self, seed: int, *, before: float = 0.0, after: float = 0.0,
                 moving: float = 0.0) -> None:
        super().__init__(seed=seed)
        self.on = False
        self.before, self.after, self.moving = before, after, moving

    async def _place(self, namespace: str, item_id: str, entry: Any, version: int,
                     expected: Any, token: str, rec: Any) -> Throttled | None:
        mine = item_id.startswith("o-") and (entry is None or entry.sort == "new")
        if self.on and entry is None and item_id.startswith("x"):
            await self.clock.sleep(self.before)
        if self.on and entry is not None and item_id.startswith("o-") and not mine:
            await self.clock.sleep(self.moving)
        refused = await super()._place(namespace, item_id, entry, version, expected, token,
                                       rec)
        if self.on and mine:
            await self.clock.sleep(self.after)
        return refused


def mover(own: MemoryStore, tier: MemoryStore, *, rate: float, seed: int) -> Resharder:
    return Resharder(own, "orders", unit_lease=2.0, rate=rate, seed=seed,
                     tiers={"dedicated": tier})


async def to_write_new(runner: Resharder) -> None:
    """Start the move of PENDING to the tier and run it to write-new."""
    await runner.start(TIERED, margin=0.5)
    await runner.run(until="write-new")


def index(own: MemoryStore, tier: MemoryStore) -> ShardedIndex:
    return ShardedIndex(own, "orders", Routing(), routing_lease=3.0, routing_ttl=0.5,
                        tiers={"dedicated": tier})


def test_a_versioned_put_held_through_a_tier_rollback_says_what_applied() -> None:
    async def main() -> list[str]:
        own, tier = Held(1, before=6.0), Held(2)
        async with index(own, tier) as app:
            for i in range(20):
                await app.put("PENDING", f"o-{i}", sort=f"{i:03d}")
            async with mover(own, tier, rate=500.0, seed=1) as runner:
                await to_write_new(runner)
                own.on = True
                rollback = asyncio.create_task(runner.rollback())
                puts: dict[str, asyncio.Task[bool]] = {}
                while not rollback.done():
                    item = f"x{len(puts)}"
                    puts[item] = asyncio.create_task(app.put("PENDING", item, sort="999",
                                                             version=1))
                    await asyncio.sleep(0.5)
                await rollback
                own.on = False
                await asyncio.sleep(7.0)
            await app.refresh_routing()
            listed = {entry.item_id async for entry in app.scan("PENDING")}
            return [item for item, put in puts.items()
                    if (await put) != (item in listed)
                    or (await put) != ((await app.get(item)) is not None)]

    assert run_virtual(main()) == []  # 5 of 30 said False, each live and listed


def writes_during_the_move(write: Callable[[ShardedIndex, str], Awaitable[bool]],
                           leaves: tuple[str, int] | None) -> list[str]:
    """The items of 40 (put at version 1, then moved to the tier at 20 a second) whose
    ``write``, started one every 0.25 s during the move with its answer from the tier 6 s
    late, said other than True or left the item other than ``leaves`` (its sort and
    version; None: deleted)."""
    async def main() -> list[str]:
        own, tier = Held(1), Held(2, after=6.0, moving=2.0)
        async with index(own, tier) as app:
            for i in range(40):
                await app.put("PENDING", f"o-{i}", sort=f"{i:03d}", version=1)
            async with mover(own, tier, rate=20.0, seed=1) as runner:
                await to_write_new(runner)
                tier.on = True
                moving = asyncio.create_task(runner.run(until="verified"))
                await asyncio.sleep(3.7)
                await app.refresh_routing()
                writes = {}
                for i in range(40):
                    writes[f"o-{i}"] = asyncio.create_task(write(app, f"o-{i}"))
                    await asyncio.sleep(0.25)
                said = {item: await task for item, task in writes.items()}
                tier.on = False
                await moving
            wrong = []
            for item, applied in said.items():
                got = await app.get(item)
                left = None if got is None else (got.sort, got.version)
                if applied is not True or left != leaves:
                    wrong.append(item)
            return wrong

    return run_virtual(main())


async def delete_at_2(app: ShardedIndex, item: str) -> bool:
    return await app.delete("PENDING", item, version=2)


async def put_at_2(app: ShardedIndex, item: str) -> bool:
    return await app.put("PENDING", item, sort="new", version=2)


def test_a_versioned_delete_answered_late_during_a_tier_move_deletes() -> None:
    # the mover placed the entry at the delete's version: 10 of 40 said False, and stayed
    assert writes_during_the_move(delete_at_2, None) == []


def test_a_versioned_put_answered_late_during_a_tier_move_applies_at_its_version() -> None:
    # the mover placed the old entry at the put's version 2: 10 of 40 said False and kept
    # the old sort at version 2, a version the application never wrote
    assert writes_during_the_move(put_at_2, ("new", 2)) == []


def test_an_unversioned_put_over_a_versioned_one_in_flight_lets_it_apply() -> None:
    async def main() -> tuple[bool, bool, tuple[str, int] | None]:
        own, tier = Held(1), Held(2, after=3.0)
        async with index(own, tier) as app:
            await app.put("PENDING", "o-1", sort="old", version=1)
            async with mover(own, tier, rate=20.0, seed=1) as runner:
                await to_write_new(runner)
                await app.refresh_routing()
                tier.on = True
                # its row lands in the tier at once, its answer 3 s later
                first = asyncio.create_task(app.put("PENDING", "o-1", sort="new", version=5))
                await asyncio.sleep(1.0)
                second = await app.put("PENDING", "o-1", sort="mid")
                applied = await first
                tier.on = False
                got = await app.get("o-1")
                return applied, second, None if got is None else (got.sort, got.version)

    # the unversioned put took version 5 from the row in flight, and the put at 5 said
    # False with 'mid' left at 5
    assert run_virtual(main()) == (True, True, ("new", 5))


class Refusing(MemoryStore):
    """A store that throttles every tombstone of item ``o-1`` while ``on`` (the
    confirmations of writes to the tier)."""

    on = False

    async def _place(self, namespace: str, item_id: str, entry: Any, version: int,
                     expected: Any, token: str, rec: Any) -> Throttled | None:
        if self.on and entry is None and item_id == "o-1":
            return Throttled("o-1: throttled (the test's)", key=item_id)
        return await super()._place(namespace, item_id, entry, version, expected, token, rec)


def test_a_write_whose_row_stands_in_the_tier_does_not_say_it_failed() -> None:
    async def main() -> tuple[str, tuple[str, int] | None]:
        own, tier = Refusing(seed=1), MemoryStore(seed=2)
        async with index(own, tier) as app:
            await app.put("PENDING", "o-0", sort="000")
            async with mover(own, tier, rate=20.0, seed=1) as runner:
                await to_write_new(runner)
                await app.refresh_routing()
                # a put to the tier, confirmed in the own store by a tombstone
                await app.put("PENDING", "o-1", sort="old", version=1)
                own.on = True
                try:
                    said = str(await app.put("PENDING", "o-1", sort="new", version=2))
                except ShardexError as exc:
                    said = type(exc).__name__
                own.on = False
                got = await app.get("o-1")
                return said, None if got is None else (got.sort, got.version)

    # its row in the tier, numbered above the own store's tombstone, is the item's: the put
    # said Throttled (did not apply) with 'new' at version 2 live
    assert run_virtual(main()) == ("True", ("new", 2))


def test_a_put_whose_claim_is_held_while_a_move_carries_its_row_says_it_applied() -> None:
    async def main() -> tuple[bool, tuple[str, int] | None, list[str]]:
        own, tier = Held(1, before=15.0), Held(2)
        async with index(own, tier) as app:
            async with mover(own, tier, rate=50.0, seed=1) as runner:
                await runner.start(TIERED, margin=0.5)
                await runner.run(until="done")
            await app.refresh_routing()
            own.on = True
            # made live in the tier from nothing, then claimed in the own store: held
            put = asyncio.create_task(app.put("PENDING", "x0", sort="new", version=1))
            await asyncio.sleep(0.5)
            async with mover(own, tier, rate=50.0, seed=2) as runner:
                await runner.start({"PENDING": ShardPolicy(2)}, margin=0.5)
                await runner.run(until="verified")
                applied = await put
                own.on = False
                got = await app.get("x0")
                await app.refresh_routing()
                listed = [entry.item_id async for entry in app.scan("PENDING")]
                return applied, None if got is None else (got.sort, got.version), listed

    # the move carried its row home before its claim landed, and it said False
    assert run_virtual(main()) == (True, ("new", 1), ["x0"])


class Timed(MemoryStore):
    """A store whose places of item ``o-1`` wait before they are sent: ``hold(entry)``
    seconds (entry None: a tombstone)."""

    def __init__(self, seed: int, hold: Callable[[Any], float]) -> None:
        super().__init__(seed=seed)
        self.hold = hold
        self.holding = asyncio.Event()  # set once a place of o-1 is held

    async def _place(self, namespace: str, item_id: str, entry: Any, version: int,
                     expected: Any, token: str, rec: Any) -> Throttled | None:
        if item_id == "o-1":
            seconds = self.hold(entry)
            if seconds > 0:
                self.holding.set()
            await self.clock.sleep(seconds)
        return await super()._place(namespace, item_id, entry, version, expected, token, rec)


def test_a_move_whose_confirmation_fails_takes_its_row_back_out() -> None:
    own = MemoryStore(seed=1)
    # the mover's row waits 4 s before it is sent (a paused runner)
    tier = Timed(2, lambda entry: 4.0 if entry is not None else 0.0)

    async def main() -> tuple[list[str], tuple[str, str] | None]:
        async with index(own, tier) as app:
            await app.put("PENDING", "o-1", sort="001")
            async with mover(own, tier, rate=20.0, seed=1) as runner:
                await to_write_new(runner)
                moving = asyncio.create_task(runner.run(until="read-new"))
                await tier.holding.wait()  # the mover's row is on its way to the tier
                # the item moves to a value that stays home, before the row lands
                await app.put("DONE", "o-1", sort="002")
                await moving
                await app.refresh_routing()
                listed = [entry.item_id async for entry in app.scan("PENDING")]
                got = await app.get("o-1")
                return listed, None if got is None else (got.value, got.sort)

    # the mover's row stayed in the tier, and from read-new (readers of the tier alone)
    # the item was listed under PENDING while it is under DONE
    assert run_virtual(main()) == ([], ("DONE", "002"))


def test_a_row_left_by_a_writer_gone_between_its_steps_does_not_stop_the_move() -> None:
    # the confirmations of o-1 in the own store never leave: its writer is gone
    own = Timed(1, lambda entry: 1e6 if entry is None else 0.0)

    async def main() -> tuple[str, list[str], tuple[str, str] | None]:
        async with o_1_at_write_new(own, MemoryStore(seed=2), "DONE") as (app, runner):
            # placed in the tier, never confirmed in the own store (where it is DONE)
            gone = asyncio.create_task(app.put("PENDING", "o-1", sort="002"))
            await asyncio.sleep(1.0)
            gone.cancel()
            result = await runner.run(until="read-new")
            return (result.state, *(await seen(app)))

    # the parity check found the row extra three times and refused the reshard (a run
    # again found it again): nothing but an operator's hand took it out
    assert run_virtual(main()) == ("read-new", [], ("DONE", "001"))


@contextlib.asynccontextmanager
async def o_1_at_write_new(own: MemoryStore, tier: MemoryStore, value: str
                           ) -> AsyncIterator[tuple[ShardedIndex, Resharder]]:
    """An index with item o-1 under ``value``, and PENDING's move to the tier at write-new."""
    async with index(own, tier) as app:
        await app.put(value, "o-1", sort="001")
        async with mover(own, tier, rate=20.0, seed=1) as runner:
            await to_write_new(runner)
            await app.refresh_routing()
            yield app, runner


async def seen(app: ShardedIndex) -> tuple[list[str], tuple[str, str] | None]:
    """What readers see now: the items PENDING lists, and o-1's value and sort."""
    await app.refresh_routing()
    listed = [entry.item_id async for entry in app.scan("PENDING")]
    got = await app.get("o-1")
    return listed, None if got is None else (got.value, got.sort)


class Lost(MemoryStore):
    """A store whose places of item ``o-1`` under PENDING apply and then time out: the
    answer never comes back (Unavailable, may have applied)."""

    async def _place(self, namespace: str, item_id: str, entry: Any, version: int,
                     expected: Any, token: str, rec: Any) -> Throttled | None:
        refused = await super()._place(namespace, item_id, entry, version, expected, token,
                                       rec)
        if refused is None and item_id == "o-1" and entry is not None \
                and entry.shard_key.startswith("PENDING"):
            raise Unavailable("o-1: the answer was lost (the test's)")
        return refused


def test_a_crossing_write_whose_answers_are_lost_takes_its_row_out_and_fails() -> None:
    async def main() -> tuple[str, list[str], tuple[str, str] | None]:
        async with o_1_at_write_new(MemoryStore(seed=1), Lost(seed=2), "SHIPPED") \
                as (app, runner):
            try:
                said = str(await app.put("PENDING", "o-1", sort="002"))
            except ShardexError as exc:
                said = type(exc).__name__
            await runner.run(until="read-new")
            return (said, *(await seen(app)))

    # its row stayed in the tier, never confirmed, and the put said OutcomeUnknown (the
    # parity check's mend took the row out; one landing after the check stayed, listed
    # from read-new under PENDING while get said SHIPPED: the torture run's seed 22)
    assert run_virtual(main()) == ("Unavailable", [], ("SHIPPED", "001"))


class HeldOnce(MemoryStore):
    """A store whose first tombstone of item ``x`` at each version in ``waits`` waits that
    many seconds before it is sent; ``live`` and ``gone`` are set as x's entry lands and
    as a tombstone of it does."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed=seed)
        self.waits: dict[int, float] = {}
        self.live, self.gone = asyncio.Event(), asyncio.Event()

    async def _place(self, namespace: str, item_id: str, entry: Any, version: int,
                     expected: Any, token: str, rec: Any) -> Throttled | None:
        if item_id == "x" and entry is None and version in self.waits:
            await self.clock.sleep(self.waits.pop(version))
        refused = await super()._place(namespace, item_id, entry, version, expected, token,
                                       rec)
        if item_id == "x" and refused is None:
            (self.gone if entry is None else self.live).set()
        return refused


def test_a_put_that_lost_its_confirmation_leaves_no_version_behind() -> None:
    """Found on Azurite by the tier-move torture run: PENDING moves home from the tier
    and rolls back; SHIPPED lives on the tier. A put of SHIPPED at version 12, confirmed
    in the store PENDING came from, lost there to a delete's confirmation and took its row
    out at 12: deciding again it found the item at 12 and said False, and a put at 11
    after it said False too."""
    own, tier = HeldOnce(1), HeldOnce(2)

    async def main() -> tuple[bool, bool, tuple[str, str] | None]:
        async with ShardedIndex(own, "orders", Routing(overrides={
                "PENDING": ShardPolicy(1, tier="dedicated"),
                "SHIPPED": ShardPolicy(1, tier="dedicated")}), routing_lease=2.5,
                routing_ttl=0.5, tiers={"dedicated": tier}) as app:
            for i in range(10):
                await app.put("PENDING", f"o{i}", sort=f"{i}")
            async with Resharder(own, "orders", unit_lease=1.5, rate=300.0, seed=1,
                                 routing_ttl=0.5, tiers={"dedicated": tier}) as runner:
                await runner.start({"PENDING": ShardPolicy(2)}, margin=0.5)
                await runner.run(until="read-new")
                await app.refresh_routing()
                await app.put("PENDING", "x", sort="1", version=9)
                rollback = asyncio.create_task(runner.rollback())
                await tier.live.wait()  # carried back to the tier
                own.waits = {10: 1.0, 12: 3.0}
                tier.gone.clear()
                deleted = asyncio.create_task(app.delete("PENDING", "x", version=10))
                await tier.gone.wait()
                put = await app.put("SHIPPED", "x", sort="2", version=12)
                assert await deleted
                await rollback
            got = await app.get("x")
            older = await app.put("SHIPPED", "x", sort="3", version=11)
            return put, older, None if got is None else (got.value, got.sort)

    assert run_virtual(main()) == (True, False, ("SHIPPED", "2"))


class LateThenThrottled(MemoryStore):
    """A store whose next entry of item ``x`` (once ``late`` is set) lands 11 s after it
    is sent, and whose place of x after that one is throttled."""

    late = throttle = False

    async def _place(self, namespace: str, item_id: str, entry: Any, version: int,
                     expected: Any, token: str, rec: Any) -> Throttled | None:
        if item_id == "x" and self.throttle:
            self.throttle = False
            return Throttled("x: throttled (the test's)", key=item_id)
        if item_id == "x" and self.late and entry is not None:
            self.late, self.throttle = False, True
            await self.clock.sleep(11.0)
        return await super()._place(namespace, item_id, entry, version, expected, token, rec)


def test_a_write_that_fails_after_its_row_landed_takes_the_row_out() -> None:
    """Found on memory:// by the tier-move torture run (ported to DynamoDB Local): a put
    of PENDING, moving to the tier, of an item live under DONE at home. Its row lands in
    the tier 11 s late, past its routing's lease; deciding again it re-places the row,
    which is throttled, and its tries have run out: it said Throttled (did not apply)
    and left the row. From read-new the item was listed under PENDING while get said
    DONE, and when PENDING moved home again the mover carried the row over DONE: the
    put that failed was the item's truth, and DONE's acknowledged write was gone."""
    own, tier = MemoryStore(seed=1), LateThenThrottled(seed=2)

    async def main() -> tuple[str, list[list[str]], list[tuple[str, str] | None]]:
        lists: list[list[str]] = []
        gets: list[tuple[str, str] | None] = []

        async def look() -> None:
            async with ShardedIndex(own, "orders", tiers={"dedicated": tier}) as reader:
                lists.append([entry.item_id async for entry in reader.scan("PENDING")])
                got = await reader.get("x")
                gets.append(None if got is None else (got.value, got.sort))

        async with index(own, tier) as app:
            for i in range(3):
                await app.put("PENDING", f"o-{i}", sort=f"{i:03d}")
            await app.put("DONE", "x", sort="500")
            async with mover(own, tier, rate=300.0, seed=1) as runner:
                await to_write_new(runner)
                await app.refresh_routing()
                tier.late = True
                put = asyncio.create_task(app.put("PENDING", "x", sort="900"))
                await asyncio.sleep(0.1)
                await runner.run(until="read-new")
                try:
                    said = str(await put)
                except ShardexError as exc:
                    said = type(exc).__name__
                await look()
                await runner.run(until="done")
                await look()
                await runner.start({"PENDING": ShardPolicy(1)}, margin=0.5)
                await runner.run(until="done")
                await look()
        return said, lists, gets

    said, lists, gets = run_virtual(main())
    assert said == "Throttled"
    assert lists == [["o-0", "o-1", "o-2"]] * 3
    assert gets == [("DONE", "500")] * 3


class LateAtHome(MemoryStore):
    """A store whose next place of item ``x`` (once ``late`` is set) lands 25 s after it is
    sent."""

    late = False

    async def _place(self, namespace: str, item_id: str, entry: Any, version: int,
                     expected: Any, token: str, rec: Any) -> Throttled | None:
        if item_id == "x" and self.late:
            self.late = False
            await self.clock.sleep(25.0)
        return await super()._place(namespace, item_id, entry, version, expected, token, rec)


@pytest.mark.parametrize("before", ["new", "deleted on the tier"])
def test_an_item_that_lands_at_home_after_its_value_moved_to_a_tier_is_carried_there(
        before: str) -> None:
    """Found by the tier-move torture run: a put of an item of SHIPPED, sent while
    SHIPPED was at home, landed there 25 s late, after a reshard had moved SHIPPED to a
    tier and ended. It said OutcomeUnknown, and the index stayed split: get returned the
    entry, and listings of SHIPPED (the tier alone) never listed it. The same for an item
    the tier held a tombstone of (written and deleted there, on an earlier visit)."""
    own, tier = LateAtHome(seed=1), MemoryStore(seed=2)

    async def main() -> tuple[str, tuple[str, str] | None, list[str], int]:
        async with index(own, tier) as app:
            for i in range(3):
                await app.put("SHIPPED", f"o-{i}", sort=f"{i:03d}")
            if before != "new":
                async with mover(own, tier, rate=300.0, seed=3) as runner:
                    await runner.start({"SHIPPED": ShardPolicy(2, tier="dedicated")},
                                       margin=0.5)
                    await runner.run(until="done")
                    await app.refresh_routing()
                    await app.put("SHIPPED", "x", sort="100")
                    await app.delete("SHIPPED", "x")
                    await runner.start({"SHIPPED": ShardPolicy(1)}, margin=0.5)
                    await runner.run(until="done")
                await app.refresh_routing()
            async with mover(own, tier, rate=300.0, seed=1) as runner:
                await runner.start({"SHIPPED": ShardPolicy(2, tier="dedicated")}, margin=0.5)
                own.late = True
                put = asyncio.create_task(app.put("SHIPPED", "x", sort="900"))
                await runner.run(until="done")
                try:
                    said = str(await put)
                except ShardexError as exc:
                    said = type(exc).__name__
        async with ShardedIndex(own, "orders", tiers={"dedicated": tier}) as reader:
            got = await reader.get("x")
            listed = [entry.item_id async for entry in reader.scan("SHIPPED")]
            return said, None if got is None else (got.value, got.sort), listed, \
                await reader.count("SHIPPED")

    assert run_virtual(main()) == ("True", ("SHIPPED", "900"), ["o-0", "o-1", "o-2", "x"], 4)


@pytest.mark.parametrize("direction", ["forward", "rollback"])
def test_a_write_that_lands_after_the_next_state_s_parity_check_is_moved(
        direction: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the tier-move torture run (and on DynamoDB Local): a put planned in
    read-both whose row landed in the layout being left once the next state's parity check
    had read its key. It landed one routing version after the one it was planned under,
    which the write took for where every reader of either state reads it, and said True:
    from read-new no listing held it; going back (a rollback) the retired sweep removed it
    as a move's copy, and get found nothing; going forward get found it and no listing
    ever did."""
    checked = asyncio.Event()
    real_check = runner_module.check

    async def check(layouts: Any, routing: Routing, **options: Any) -> Any:
        parity = await real_check(layouts, routing, **options)
        if routing.reshard is not None and routing.reshard.direction == direction:
            checked.set()
            await asyncio.sleep(0.5)  # the check still reads other keys
        return parity

    monkeypatch.setattr(runner_module, "check", check)

    class UntilChecked(MemoryStore):
        hold = False

        async def _place(self, namespace: str, item_id: str, entry: Any, version: int,
                         expected: Any, token: str, rec: Any) -> Throttled | None:
            if item_id == "x" and self.hold and entry is not None:
                self.hold = False
                await checked.wait()
            return await super()._place(namespace, item_id, entry, version, expected, token,
                                        rec)

    own, tier = UntilChecked(seed=1), UntilChecked(seed=2)

    async def main() -> tuple[bool, tuple[str, str] | None, bool, int]:
        async with ShardedIndex(own, "orders", Routing(overrides={"PENDING": ShardPolicy(2)}),
                                routing_lease=3.0, routing_ttl=0.5,
                                tiers={"dedicated": tier}) as app:
            for i in range(20):
                await app.put("PENDING", f"o-{i}", sort=f"{i:03d}")
            async with mover(own, tier, rate=300.0, seed=1) as runner:
                await runner.start(TIERED, margin=0.5)
                if direction == "forward":
                    await runner.run(until="read-both")
                    moving = asyncio.create_task(runner.run(until="done"))
                    own.hold = True
                else:
                    await runner.run(until="read-new")
                    moving = asyncio.create_task(runner.rollback())
                    while True:  # until clients see the rollback
                        meta = (await app.refresh_routing()).reshard
                        if meta is not None and meta.direction == "rollback":
                            break
                        await asyncio.sleep(0.1)
                    tier.hold = True
                await app.refresh_routing()
                said = await app.put("PENDING", "x", sort="999")
                await moving
        async with ShardedIndex(own, "orders", tiers={"dedicated": tier}) as reader:
            got = await reader.get("x")
            listed = {entry.item_id async for entry in reader.scan("PENDING")}
            return said, None if got is None else (got.value, got.sort), "x" in listed, \
                await reader.count("PENDING")

    assert run_virtual(main()) == (True, ("PENDING", "999"), True, 21)


class SlowConfirmation(MemoryStore):
    """A store whose first tombstone of item ``x`` (once ``hold`` is set: a crossing
    write's confirmation) is 6 s in flight, and which throttles the first ``throttles``
    places of x that carry an entry meanwhile (the fences of the parity check's mend)."""

    hold = False
    throttles = 2

    async def _place(self, namespace: str, item_id: str, entry: Any, version: int,
                     expected: Any, token: str, rec: Any) -> Throttled | None:
        if item_id == "x" and entry is not None and not self.hold and self.throttles \
                and self.clock.now() < self.until:
            self.throttles -= 1
            return Throttled("x: throttled (the test's)", key=item_id)
        if item_id == "x" and entry is None and self.hold:
            self.hold = False
            self.until = self.clock.now() + 6.0
            await self.clock.sleep(6.0)
        return await super()._place(namespace, item_id, entry, version, expected, token, rec)

    until = 0.0


def test_a_throttled_mend_of_a_write_between_its_steps_does_not_refuse_the_move() -> None:
    """Found by the tier-move torture run: a put of SHIPPED (moving to the tier) of an
    item under DONE at home, its row in the tier and its confirmation 6 s in flight: the
    parity check found the row extra, the mend's fence at home was throttled, and the
    next two checks ran within a second, found it again and refused the reshard; the
    put said True seconds later. A dirty check is checked again once a writer between
    its two steps has sent its confirmation (a lease and the margin on)."""
    own, tier = SlowConfirmation(seed=1), MemoryStore(seed=2)

    async def main() -> tuple[str, bool, tuple[str, str] | None]:
        async with index(own, tier) as app:
            for i in range(5):
                await app.put("SHIPPED", f"o-{i}", sort=f"{i:03d}")
            await app.put("DONE", "x", sort="500")
            async with mover(own, tier, rate=300.0, seed=1) as runner:
                await runner.start({"SHIPPED": ShardPolicy(4, tier="dedicated")}, margin=0.5)
                await runner.run(until="write-new")
                await app.refresh_routing()
                own.hold = True
                put = asyncio.create_task(app.put("SHIPPED", "x", sort="600"))
                await asyncio.sleep(0.2)
                result = await runner.run(until="verified")
                said = await put
                got = await app.get("x")
                return result.state, said, None if got is None else (got.value, got.sort)

    assert run_virtual(main()) == ("verified", True, ("SHIPPED", "600"))


class ClaimHeldCarryThrottled(MemoryStore):
    """A store whose first tombstone of item ``x`` once ``on`` (a put's claim) is 10 s in
    flight, and whose first place of x carrying an entry once ``on`` (a mover's carry) is
    throttled."""

    on = held = throttled = False

    async def _place(self, namespace: str, item_id: str, entry: Any, version: int,
                     expected: Any, token: str, rec: Any) -> Throttled | None:
        if self.on and item_id == "x" and entry is None and not self.held:
            self.held = True
            await self.clock.sleep(10.0)
        if self.on and item_id == "x" and entry is not None and not self.throttled:
            self.throttled = True
            return Throttled("x: throttled (the test's)", key=item_id)
        return await super()._place(namespace, item_id, entry, version, expected, token, rec)


def test_a_put_whose_row_a_move_fenced_twice_and_carried_says_it_applied() -> None:
    """Found by the tier-move torture run (not reproduced there): PENDING lives on a tier,
    and a versioned put makes item x live there, its claim at home in flight. A reshard
    moves PENDING home: the mover fences the put's row (home holds an older tombstone of
    x), its carry home is throttled, and trying again it fences the row again and carries
    it under the carry of its own fence's token. The put's claim failed on the carry,
    which it did not know for its own, and deciding again it found its own version and
    said False, its entry live and listed."""
    own, tier = ClaimHeldCarryThrottled(seed=1), MemoryStore(seed=2)

    async def main() -> tuple[bool, tuple[str, int] | None, bool]:
        async with index(own, tier) as app:
            await app.put("PENDING", "o-0", sort="000")
            async with mover(own, tier, rate=300.0, seed=1) as runner:
                await runner.start(TIERED, margin=0.5)
                await runner.run(until="done")
                await app.refresh_routing()
                await app.put("PENDING", "x", sort="100", version=7)
                await app.delete("PENDING", "x", version=8)
                own.on = True
                put = asyncio.create_task(app.put("PENDING", "x", sort="900", version=9))
                await asyncio.sleep(0.5)
                await runner.start({"PENDING": ShardPolicy(2)}, margin=0.5)
                await runner.run(until="verified")
                said = await put
                got = await app.get("x")
                await app.refresh_routing()
                listed = [entry.item_id async for entry in app.scan("PENDING")]
                return said, None if got is None else (got.sort, got.version), "x" in listed

    assert run_virtual(main()) == (True, ("900", 9), True)
