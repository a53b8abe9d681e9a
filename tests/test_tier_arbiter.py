"""The index's own store arbitrates an item across tiers: two clients creating one item
on two stores at the same instant meet on one condition there, and exactly one wins."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from shardex import CapabilityMissing, Routing, ShardedIndex, ShardPolicy
from shardex.model.entries import Placement, StoredEntry
from shardex.reshard import Resharder
from shardex.sim.clock import run_virtual
from shardex.stores.memory import MemoryStore
from shardex.write import void
from shardex.write.decide import erase_token, truth, void_token

ROUTING = Routing(overrides={"BIG": ShardPolicy(shards=4, tier="a"),
                             "HUGE": ShardPolicy(shards=2, tier="b")})


class Held(MemoryStore):
    """A memory store that holds the placing of item ``x`` until let through.

    ``live`` gates a place of a live entry, ``confirm`` a tombstone (a tier's write
    confirmed here); ``arrived[kind]`` is set once a place of that kind waits.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.live, self.confirm = asyncio.Event(), asyncio.Event()
        self.live.set()
        self.confirm.set()
        self.arrived = {"live": asyncio.Event(), "confirm": asyncio.Event()}

    async def place(self, namespace: str, item_id: str, entry: StoredEntry | None, *,
                    version: int, expected: Placement | None,
                    token: str | None = None) -> float:
        if item_id == "x" and namespace == "ix":
            kind, gate = ("live", self.live) if entry is not None else ("confirm", self.confirm)
            self.arrived[kind].set()
            await gate.wait()
        return await super().place(namespace, item_id, entry, version=version,
                                   expected=expected, token=token)


async def _listing(index: ShardedIndex, value: str) -> list[str]:
    return sorted([e.item_id async for e in index.scan(value)])


@pytest.mark.parametrize(("first", "second"), [("small", "BIG"), ("BIG", "small"),
                                                ("BIG", "HUGE")])
@pytest.mark.parametrize("seed", range(6))
def test_twin_puts_of_a_new_item_on_two_stores_meet_on_one_condition(
        first: str, second: str, seed: int) -> None:
    """Same instant, virtual time: both clients locate the item as new, both write their
    own store; the index's own store lets exactly one through, the other is refused
    (CapabilityMissing: it did not apply) and takes its row back out."""
    async def main() -> None:
        own, a, b = MemoryStore(seed=seed), MemoryStore(seed=seed + 1), MemoryStore(seed=seed + 2)
        tiers = {"a": a, "b": b}
        async with ShardedIndex(own, "ix", ROUTING, tiers=tiers, seed=1) as one, \
                ShardedIndex(own, "ix", tiers=tiers, seed=2) as two:
            outcomes = await asyncio.gather(one.put(first, "x", sort="1"),
                                            two.put(second, "x", sort="2"),
                                            return_exceptions=True)
            won = [value for value, outcome in zip((first, second), outcomes, strict=True)
                   if outcome is True]
            lost = [outcome for outcome in outcomes if outcome is not True]
            assert len(won) == 1, outcomes
            assert len(lost) == 1
            assert isinstance(lost[0], CapabilityMissing), lost[0]
            got = await one.get("x")
            assert got is not None
            assert got.value == won[0]
            for value in ("small", "BIG", "HUGE"):
                assert await _listing(two, value) == (["x"] if value == won[0] else [])
                assert await one.count(value) == (1 if value == won[0] else 0)

    run_virtual(main())


async def _race(one: ShardedIndex, two: ShardedIndex, own: Held, tier: MemoryStore,
                winner: str) -> None:
    """``one`` puts x under small (the own store), ``two`` under BIG (tier a): ``one``
    has found the item new and is about to place it, ``two`` has written the tier and is
    about to confirm; ``winner`` reaches the own store first. The other is refused."""
    own.live.clear()
    own.confirm.clear()
    plain = asyncio.ensure_future(one.put("small", "x", sort="1"))
    await asyncio.wait_for(own.arrived["live"].wait(), 5.0)
    tiered = asyncio.ensure_future(two.put("BIG", "x", sort="2"))
    await asyncio.wait_for(own.arrived["confirm"].wait(), 5.0)
    placed = await tier.locate("ix", "x")
    assert placed is not None
    assert placed.entry is not None  # written in the tier, not yet confirmed
    first, then = (own.live, own.confirm) if winner == "own store" else \
        (own.confirm, own.live)
    first.set()
    await asyncio.sleep(0.05)
    then.set()
    outcomes = await asyncio.gather(plain, tiered, return_exceptions=True)
    want, refused = ("small", 1) if winner == "own store" else ("BIG", 0)
    assert outcomes[1 - refused] is True
    assert isinstance(outcomes[refused], CapabilityMissing), outcomes
    for value in ("small", "BIG"):
        assert await _listing(one, value) == (["x"] if value == want else [])
    got = await two.get("x")
    assert got is not None
    assert got.value == want
    if want == "small":  # the loser took its row back out of the tier
        placed = await tier.locate("ix", "x")
        assert placed is not None
        assert placed.entry is None


@pytest.mark.parametrize("winner", ["own store", "tier"])
def test_twin_puts_that_both_wrote_their_store_meet_in_the_own_store(winner: str) -> None:
    """The interleaving the arbiter exists for: both clients found the item new and
    wrote their own store (without the arbiter both succeeded: the item listed under
    two values). Whichever reaches the index's own store first wins."""
    async def main() -> None:
        own, tier = Held(seed=3), MemoryStore(seed=4)
        tiers = {"a": tier, "b": MemoryStore(seed=5)}
        async with ShardedIndex(own, "ix", ROUTING, tiers=tiers, seed=1) as one, \
                ShardedIndex(own, "ix", tiers=tiers, seed=2) as two:
            await _race(one, two, own, tier, winner)

    run_virtual(main())


@pytest.mark.parametrize("winner", ["own store", "tier"])
def test_twin_puts_while_a_value_moves_off_its_tier_meet_in_the_own_store(winner: str) -> None:
    """The same race while a reshard moves BIG from tier a back to the index's own store
    (read-both: its writes still land in the tier): the tier's store arbitrates BIG's
    items, and the own store still arbitrates an item new to both."""
    async def main() -> None:
        own, tier = Held(seed=6), MemoryStore(seed=7)
        tiers = {"a": tier, "b": MemoryStore(seed=8)}
        async with ShardedIndex(own, "ix", ROUTING, tiers=tiers, seed=1, routing_ttl=0.1) as one, \
                ShardedIndex(own, "ix", tiers=tiers, seed=2, routing_ttl=0.1) as two:
            async with Resharder(own, "ix", tiers=tiers, seed=3) as rs:
                await rs.start({"BIG": ShardPolicy(shards=2)}, margin=0.1)
            for index in (one, two):
                assert (await index.refresh_routing()).state == "read-both"
            await _race(one, two, own, tier, winner)

    run_virtual(main())


def test_a_void_row_is_the_item_only_while_nothing_newer_is_in_the_own_store() -> None:
    row = StoredEntry("BIG#1", "", "i", {}, 3)
    tier = Placement("i", 3, row, "t", ("", "c"))
    assert not void(None, tier)
    assert void(Placement("i", 1, StoredEntry("small", "", "i"), "m"), tier)  # live there
    assert not void(Placement("i", 2, None, "c"), tier)  # older: a write made live after it
    assert not void(Placement("i", 3, None, "x"), tier)  # as new: a row a move left, removed
    assert not void(Placement("i", 4, None, "t", ("",)), tier)  # its own confirmation
    assert void(Placement("i", 4, None, "d", ("m",)), tier)  # deleted there since


def test_the_own_stores_take_out_of_a_losing_writes_row_says_what_was_there_before() -> None:
    """A write over the item in the own store that lost in the tier that arbitrated it
    takes its row out at its own version, above the row it lost to (a rollback's copy
    keeps its version): that tombstone deleted nothing."""
    copy = Placement("i", 1, StoredEntry("BIG#1", "", "i", {}, 1), "k", ("", "m"))
    lost = void_token("p")
    assert not void(Placement("i", 2, None, lost, ("", "m", "p")), copy)  # m led to the copy
    assert not void(Placement("i", 2, None, lost, ("", "p")), copy)  # nothing was there
    assert not void(Placement("i", 3, None, lost, ("m", "p", "q")), copy)  # q wrote over p
    assert void(Placement("i", 2, None, lost, ("", "n", "p")), copy)  # n: not this row's
    assert void(Placement("i", 2, None, lost, ("p",)), copy)  # what was before p: unknown
    assert void(Placement("i", 2, None, void_token("z"), ("", "m", "p")), copy)  # not p's


def test_a_tombstone_a_standing_write_left_in_the_other_store_deleted_nothing_of_it() -> None:
    """While a value crosses from S to T: S's tombstone as new as T's row holds (the item
    was deleted) unless a write of T's row's chain left it, by its own token or as the
    take-out of an older copy (``erase_token``), which had read as a delete."""
    row = Placement("i", 3, StoredEntry("B#0", "new", "i", {}, 3), "p", ("", "m"))
    assert truth(Placement("i", 3, None, erase_token("p"), ("", "p")), row) == (row, True)
    assert truth(Placement("i", 3, None, erase_token("m"), ("", "m")), row) == (row, True)
    assert truth(Placement("i", 3, None, "p", ("", "m")), row) == (row, True)
    other = Placement("i", 3, None, erase_token("q"), ("", "q"))  # another write's: a delete
    assert truth(other, row) == (other, False)
    newer = Placement("i", 4, None, erase_token("p"), ("", "p"))
    assert truth(newer, row) == (newer, False)
