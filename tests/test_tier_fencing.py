"""Fencing across two stores (memory://, virtual time): one slow request of a tier move's
write, held past a rollback or a whole move, hides nothing reported ok and brings back
nothing deleted (a probe's findings; each was reproduced deterministically).

- A put in ``write-new`` lands in the tier, and its confirmation in the store the value
  came from lands 12 s later, after a rollback had swept the tier's row: the put said ok
  while the item had gone (neither its old entry nor the put's was listed).
- A delete in ``read-new`` took 12 s to land in the tier, after the rollback's mover had
  copied the entry back: the delete said ok and the item was listed again, for good.
- A put of a new item in ``read-both`` of a move off a tier landed on the tier 6 s late
  and then timed out: it said ok, and no listing ever showed it (the tier was no reader's
  any more), while later writes of it were refused.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

import shardex
from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.errors import Unavailable
from shardex.reshard import Resharder
from shardex.sim.clock import run_virtual
from shardex.stores.memory import MemoryStore

P = ShardPolicy


class Slow(MemoryStore):
    """A memory store whose next write of an item takes ``pauses[item]`` seconds to apply
    (a request the network held), and then times out if the item is in ``timeouts``;
    or waits for ``gates[item]`` to be set. ``lands[item]`` is set once a live entry of
    the item lands here."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.pauses: dict[str, float] = {}
        self.timeouts: set[str] = set()
        self.gates: dict[str, asyncio.Event] = {}
        self.lands: dict[str, asyncio.Event] = {}

    async def _place(self, namespace: str, item_id: str, entry: Any, *args: Any) -> None:
        pause = self.pauses.pop(item_id, 0.0)
        if pause:
            await self.clock.sleep(pause)
        if (gate := self.gates.pop(item_id, None)) is not None:
            await gate.wait()
        await super()._place(namespace, item_id, entry, *args)
        if entry is not None and item_id in self.lands:
            self.lands.pop(item_id).set()
        if pause and item_id in self.timeouts:
            self.timeouts.discard(item_id)
            raise Unavailable("the request timed out (it applied)")


@contextlib.asynccontextmanager
async def _moving_to_tier() -> AsyncIterator[tuple[Slow, Slow, ShardedIndex, Resharder]]:
    """BIG, one item of it (``i-1``, sort ``old``) in the own store, starting a move to
    tier ``dedicated``: (own store, tier's store, the application's index, the runner)."""
    own, tier = Slow(seed=1), Slow(seed=2)
    tiers = {"dedicated": tier}
    async with ShardedIndex(own, "orders", Routing(overrides={"BIG": P(2)}),
                            routing_lease=3.0, routing_ttl=0.5, tiers=tiers) as index:
        assert await index.put("BIG", "i-1", sort="old")
        async with Resharder(own, "orders", tiers=tiers, seed=1, unit_lease=2.0) as rs:
            await rs.start({"BIG": P(3, tier="dedicated")}, margin=0.5)
            yield own, tier, index, rs


async def _listed(index: ShardedIndex, value: str) -> list[tuple[str, str]]:
    await index.refresh_routing()
    return [(e.item_id, e.sort) for e in (await index.query(value, limit=100)).items]


def test_a_confirmation_landing_after_a_rollback_swept_its_row_loses_nothing() -> None:
    async def main() -> None:
        async with _moving_to_tier() as (own, _, index, rs):
            await rs.run(until="write-new")
            await index.refresh_routing()
            own.pauses["i-1"] = 12.0  # the confirmation in the own store is slow
            put = asyncio.ensure_future(index.put("BIG", "i-1", sort="new"))
            await asyncio.sleep(0.5)  # landed on the tier; its confirmation in flight
            assert (await rs.rollback()).state == "done"
            try:
                said = await put
            except shardex.OutcomeUnknown:
                said = None
            await asyncio.sleep(10)
            listed = await _listed(index, "BIG")
            got = await index.get("i-1")
            # ok: the put's entry is listed; unknown: the old entry or the put's
            allowed = [[("i-1", "new")]] if said else [[("i-1", "old")], [("i-1", "new")]]
            assert listed in allowed, (said, listed)
            assert got is not None
            assert (got.item_id, got.sort) == listed[0]
            assert await index.count("BIG") == 1

    run_virtual(main())


@pytest.mark.parametrize("kind", ["delete", "put"])
@pytest.mark.parametrize("pause", [4.0, 10.0, 12.0, 16.0])
def test_a_write_landing_after_a_rollback_copied_the_entry_back_is_not_undone(
        pause: float, kind: str) -> None:
    """A delete, or a put, sent to the tier in ``read-new`` and held there while the
    rollback's mover copies the entry back: what it said holds once readers read the
    own store alone (a put held so was reported unknown, its old entry listed)."""
    async def main() -> None:
        async with _moving_to_tier() as (_, tier, index, rs):
            await rs.run(until="verified")
            await rs.cutover()
            await index.refresh_routing()
            tier.pauses["i-1"] = pause  # the write's request to the tier is slow
            write = asyncio.ensure_future(index.delete("BIG", "i-1") if kind == "delete"
                                          else index.put("BIG", "i-1", sort="new"))
            await asyncio.sleep(0.1)
            assert (await rs.rollback()).state == "done"
            try:
                said: bool | None = await write
            except shardex.OutcomeUnknown:
                said = None
            except shardex.RoutingStale as exc:
                said = False
                stale = str(exc)
            if said is False:
                assert "did not apply" in stale
            await asyncio.sleep(10)
            listed = await _listed(index, "BIG")
            written = [] if kind == "delete" else [("i-1", "new")]
            assert listed == (written if said else [("i-1", "old")] if said is False
                              else listed), (said, listed)
            assert said is not None or listed in ([("i-1", "old")], written)
            assert await index.count("BIG") == len(listed)
            got = await index.get("i-1")
            assert ([(got.item_id, got.sort)] if got else []) == listed

    run_virtual(main())


@pytest.mark.parametrize(("offset", "pause"), [(0.5, 9.0), (2.0, 6.0), (2.0, 9.0)])
def test_a_put_that_landed_late_on_a_tier_a_move_left_is_listed_or_unknown(
        offset: float, pause: float) -> None:
    async def main() -> None:
        own, tier = Slow(seed=1), Slow(seed=2)
        tiers = {"dedicated": tier}
        async with ShardedIndex(own, "orders", Routing(overrides={"BIG": P(2, tier="dedicated")}),
                                routing_lease=3.0, routing_ttl=0.5, tiers=tiers) as index:
            for i in range(5):
                assert await index.put("BIG", f"old-{i}")
            async with Resharder(own, "orders", tiers=tiers, seed=1, unit_lease=2.0) as rs:
                await rs.start({"BIG": P(3)}, margin=0.5)
                runner = asyncio.ensure_future(rs.run(until="done"))
                await asyncio.sleep(offset)
                tier.pauses["new-1"] = pause
                tier.timeouts.add("new-1")
                try:
                    said = await index.put("BIG", "new-1", sort="x")
                except shardex.OutcomeUnknown:
                    said = None
                assert (await runner).state == "done"
            await asyncio.sleep(10)
            listed = dict(await _listed(index, "BIG"))
            if said:
                assert listed.get("new-1") == "x", listed
            assert len(listed) == await index.count("BIG")
            # never wedged: the item takes a write, and a delete of it, whatever was said
            assert await index.put("BIG", "new-1", sort="y")
            assert dict(await _listed(index, "BIG"))["new-1"] == "y"
            assert await index.delete("BIG", "new-1")
            assert "new-1" not in dict(await _listed(index, "BIG"))
            assert await index.get("new-1") is None

    run_virtual(main())


@contextlib.asynccontextmanager
async def _rolling_back_off_tier() -> AsyncIterator[
        tuple[Slow, ShardedIndex, asyncio.Future[Any]]]:
    """BIG, one item of it (``i-1``, sort ``old``) on tier ``dedicated``, moved to the own
    store, cut over, and now rolled back: (own store, the application's index, the
    rollback under way)."""
    own, tier = Slow(seed=1), Slow(seed=2)
    tiers = {"dedicated": tier}
    async with ShardedIndex(own, "orders", Routing(overrides={"BIG": P(2, tier="dedicated")}),
                            routing_lease=3.0, routing_ttl=0.5, tiers=tiers) as index:
        assert await index.put("BIG", "i-1", sort="old")
        async with Resharder(own, "orders", tiers=tiers, seed=1, unit_lease=2.0) as rs:
            await rs.start({"BIG": P(3)}, margin=0.5)
            await rs.run(until="verified")
            await rs.cutover()
            yield own, index, asyncio.ensure_future(rs.rollback())


async def _stands_through_the_next_move(index: ShardedIndex, rollback: asyncio.Future[Any],
                                        want: dict[str, list[tuple[str, str]]]) -> None:
    """The item is listed as ``want`` says (value: [(item, sort)]), and ``get`` agrees,
    once the rollback is done, and again after the next move of BIG off the tier."""
    assert (await rollback).state == "done"
    await asyncio.sleep(10)
    for shards in (4, None):
        assert {v: await _listed(index, v) for v in want} == want
        got = await index.get("i-1")
        assert got is not None
        assert [(got.item_id, got.sort)] == want[got.value]
        if shards is not None:
            async with Resharder(index.store, "orders", tiers=index.tiers, seed=2,
                                 unit_lease=2.0) as rs:
                await rs.start({"BIG": P(shards)}, margin=0.5)
                assert (await rs.run(until="done")).state == "done"


@pytest.mark.parametrize(("pause", "delay"), [(12.0, 0.5), (8.0, 4.0), (5.0, 6.0), (4.0, 7.0)])
def test_a_put_under_another_value_landing_after_a_rollback_copied_the_item_back_stands(
        pause: float, delay: float) -> None:
    """BIG moved off tier 'dedicated' to the own store and is rolled back; a put of its
    item under SMALL (a value of the own store) is held on its way while the rollback's
    mover copies BIG's entry back to the tier. The put said ok, and the item was listed
    under both values; the next move of BIG carried the copy back over the put, which
    was then gone for good (a probe on DynamoDB Local and Azurite, and here)."""
    async def main() -> None:
        async with _rolling_back_off_tier() as (own, index, rollback):
            await asyncio.sleep(delay)
            own.pauses["i-1"] = pause
            try:
                said = await index.put("SMALL", "i-1", sort="new")
            except (shardex.CapabilityMissing, shardex.RoutingStale):
                said = False
            await _stands_through_the_next_move(
                index, rollback, {"BIG": [], "SMALL": [("i-1", "new")]} if said else
                {"BIG": [("i-1", "old")], "SMALL": []})

    run_virtual(main())


@pytest.mark.parametrize("delay", [3.5, 5.0, 7.0])
def test_a_put_losing_to_a_rollbacks_copy_leaves_the_item_where_it_is_listed(
        delay: float) -> None:
    """BIG moved off tier 'dedicated' to the own store and is rolled back. A put of its
    item under SMALL, planned in ``read-both``, is held on its way to the own store until
    the rollback's mover has copied BIG's entry back to the tier; its confirmation there
    then loses (the item is BIG's again, on the tier). The put failed, rightly, and took
    its row out of the own store with a tombstone one version above the tier's copy:
    ``get`` said None for good while BIG's listing showed the item, and the next move of
    BIG found a gap it never closed (a probe on DynamoDB Local and Azurite, and here)."""
    async def main() -> None:
        async with _rolling_back_off_tier() as (own, index, rollback):
            await asyncio.sleep(delay)
            assert (await index.refresh_routing()).state == "read-both"
            tier = index.tiers["dedicated"]
            assert isinstance(tier, Slow)
            copied = own.gates["i-1"] = tier.lands["i-1"] = asyncio.Event()
            with pytest.raises(shardex.CapabilityMissing, match="under 'BIG' on tier"):
                await index.put("SMALL", "i-1", sort="new")
            assert copied.is_set()  # the put was held until the rollback's copy landed
            await _stands_through_the_next_move(index, rollback,
                                                {"BIG": [("i-1", "old")], "SMALL": []})
            assert await index.delete("BIG", "i-1")
            assert await index.get("i-1") is None
            assert await _listed(index, "BIG") == []

    run_virtual(main())


@pytest.mark.parametrize("end", ["done", "rollback"])
def test_a_put_confirmed_across_two_moves_stands_beside_the_copy_it_took_out(end: str) -> None:
    """B moves to tier 't'; in write-new a put of i1 lands in the tier and its confirmation
    in the own store is held 20 s, past the whole move and into the start of the move back.
    The put lands in the own store and says ok, and takes out the tier's older row under
    a token of its own at its version. That tombstone in the store B moves from had read
    as the item deleted: get said None and no listing showed it, before and after the
    move back (or its rollback), and every run of the move back found a parity gap (a
    probe: every hold of 11.25 s or more, 242 cases)."""
    async def main() -> None:
        own, tier = Slow(seed=1), Slow(seed=2)
        tiers = {"t": tier}
        async with ShardedIndex(own, "orders", Routing(overrides={"B": P(2)}),
                                routing_lease=3.0, routing_ttl=0.5, tiers=tiers,
                                seed=1) as index:
            assert await index.put("B", "i1", sort="old")
            async with Resharder(own, "orders", tiers=tiers, seed=1, unit_lease=2.0) as rs:
                await rs.start({"B": P(2, tier="t")}, margin=0.5)
                await rs.run(until="write-new")
                await index.refresh_routing()
                own.pauses["i1"] = 20.0  # the put's confirmation in the own store
                put = asyncio.ensure_future(index.put("B", "i1", sort="new"))
                await asyncio.sleep(0.2)
                await rs.run(until="done")
            async with Resharder(own, "orders", tiers=tiers, seed=2, unit_lease=2.0) as back:
                await back.start({"B": P(2)}, margin=0.5)
                await back.run(until="write-new")
                assert await put is True
                assert await _read(index, "i1") == (("B", "new"), [("i1", "new")])
                if end == "rollback":
                    await back.rollback()
                assert (await back.run(until="done")).state == "done"
            await asyncio.sleep(7)
            assert await _read(index, "i1") == (("B", "new"), [("i1", "new")])

    run_virtual(main())


async def _read(index: ShardedIndex, item: str) -> tuple[tuple[str, str] | None,
                                                          list[tuple[str, str]]]:
    got = await index.get(item)
    return (None if got is None else (got.value, got.sort)), await _listed(index, "B")


@pytest.mark.parametrize("state", ["read-both", "write-new", "verified"])
@pytest.mark.parametrize(("src", "dst"), [(None, "d1"), ("d1", None)], ids=["onto", "off"])
@pytest.mark.parametrize("second", ["none", "re-put", "move-same"])
def test_a_write_of_the_moving_value_over_an_item_on_a_third_store_is_refused(
        src: str | None, dst: str | None, state: str, second: str) -> None:
    """BIG crosses between the index's store and d1; the item lives on d2 under 'other',
    which stays. A put under BIG surveyed only the two stores BIG crosses between: it
    was acknowledged, and the item (written again on d2 first) was listed under both
    values for good, parity clean. It is refused, as outside the move, and changes
    nothing."""
    from tests.test_reshard import _until

    async def main() -> None:
        own = MemoryStore(seed=1)
        tiers = {"d1": MemoryStore(seed=2), "d2": MemoryStore(seed=3)}
        start = {"BIG": ShardPolicy(2, tier=src), "other": ShardPolicy(2, tier="d2")}
        async with ShardedIndex(own, "orders", Routing(overrides=start), routing_lease=3.0,
                                routing_ttl=0.5, tiers=tiers) as index, \
                Resharder(own, "orders", tiers=tiers, unit_lease=2.0) as runner:
            await runner.start({"BIG": ShardPolicy(3, tier=dst)}, margin=0.5)
            await _until(runner, state)
            await asyncio.sleep(1)
            assert await index.put("other", "i-6", sort="s1")
            if second == "re-put":
                assert await index.put("other", "i-6", sort="s1b")
            elif second == "move-same":
                assert await index.move("i-6", old="other", new="other")
            with pytest.raises(shardex.CapabilityMissing, match="under 'other' on tier 'd2'"):
                await index.put("BIG", "i-6", sort="s2")
            assert [e.item_id for e in (await index.query("other")).items] == ["i-6"]
            assert (await index.query("BIG")).items == []
            found = await index.get("i-6")
            assert found is not None
            assert found.value == "other"

    run_virtual(main())
