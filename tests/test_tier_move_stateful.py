"""The reshard stateful machine on a tiered index: policies move values between the
index's own store and a dedicated tier's, under writes, reads, crashes and rollbacks."""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule

import shardex
from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.keys import parse_shard_key
from shardex.reshard import Resharder
from shardex.sim.clock import VirtualTimeLoop
from shardex.stores.base import Store
from tests.reshard_machine import ITEMS, PATIENT, SORTS, VALUES, ReshardMachine

TIERED = st.builds(ShardPolicy, shards=st.sampled_from([1, 2, 3]),
                   strategy=st.sampled_from(["hash", "random"]),
                   tier=st.sampled_from([None, "dedicated"]))


class TieredMachine(ReshardMachine):
    """``ReshardMachine`` whose policies name a tier; the tier is another memory:// store."""

    def make_store(self, seed: int) -> Store:
        return shardex.open_store("memory://", seed=seed, throttle_rate=0.05,
                                  ambiguous_rate=0.02)

    def new_loop(self) -> Any:
        return VirtualTimeLoop()

    @initialize(seed=st.integers(0, 2**16), pending=TIERED)
    def open_clients(self, seed: int, pending: ShardPolicy) -> None:
        self.store = self.make_store(seed)
        self.tier = self.make_store(seed + 1)
        routing = Routing(overrides={"PENDING": pending})
        self.clients = [ShardedIndex(self.store, "orders", routing, routing_lease=self.lease,
                                     routing_ttl=ttl, seed=seed + i, retry=PATIENT,
                                     tiers={"dedicated": self.tier})
                        for i, ttl in enumerate(self.ttls)]
        for client in self.clients:
            self.run(client.open())

    def resharder(self) -> Resharder:
        n = next(self.workers)
        assert self.store is not None
        return Resharder(self.store, "orders", worker=f"worker-{n}", seed=n, rate=400.0,
                         unit_lease=self.unit_lease, split_every=4, max_age=3600.0,
                         routing_ttl=min(self.ttls), settle=self.settle,
                         tiers={"dedicated": self.tier})

    @rule(pending=TIERED, shipped=st.none() | TIERED)
    def start(self, pending: ShardPolicy, shipped: ShardPolicy | None,
              default: ShardPolicy | None = None) -> None:
        changes = {"PENDING": pending, **({"SHIPPED": shipped} if shipped else {})}

        async def begin() -> None:
            async with self.resharder() as rs:
                busy = (await rs.routing()).in_transition
                try:
                    await rs.start(changes, values=VALUES, margin=self.margin)
                except shardex.ReshardRefused as exc:
                    refused = str(exc)
                    assert busy or "one pair of tiers, one way" in refused
                except shardex.InvalidRouting as exc:
                    refused = str(exc)
                    assert "no value changes" in refused

        self.run(begin())

    async def write(self, client: ShardedIndex, kind: str, item: str, value: str,
                    sort: str, n: int) -> None:
        # an item between values of two tiers is refused, and the write did not apply
        with contextlib.suppress(shardex.CapabilityMissing):
            await super().write(client, kind, item, value, sort, n)

    @rule(item=st.sampled_from(ITEMS), first=st.sampled_from(VALUES),
          second=st.sampled_from(VALUES), n=st.integers(0, 9))
    def twin_puts(self, item: str, first: str, second: str, n: int) -> None:
        """Two clients put one item under two values at the same instant: whatever the
        stores, the item ends with one entry (the model takes it from ``get``)."""
        async def both() -> None:
            outcomes = await asyncio.gather(
                self.clients[0].put(first, item, sort=SORTS[0], attrs={"n": n}),
                self.clients[1].put(second, item, sort=SORTS[1], attrs={"n": n}),
                return_exceptions=True)
            for outcome in outcomes:
                if isinstance(outcome, BaseException) and not isinstance(
                        outcome, shardex.CapabilityMissing | shardex.ConditionFailed
                        | shardex.OutcomeUnknown):
                    raise outcome
            await self.resolve(item)

        self.run(both())

    async def resolve(self, item: str) -> None:
        entry = await self.clients[0].get(item)
        if entry is None:
            self.model.pop(item, None)
        else:
            self.model[item] = (parse_shard_key(entry.shard_key)[0], entry.sort,
                                dict(entry.attrs))


# CI draws the same 50 examples every run (the "fixed" profile); SHARDEX_HYPOTHESIS=explore
# draws fresh ones, 400 of 35 steps, to look for what the fixed draw does not reach
EXPLORE = os.environ.get("SHARDEX_HYPOTHESIS") == "explore"
TieredMachine.TestCase.settings = settings(
    max_examples=400 if EXPLORE else 50, stateful_step_count=35 if EXPLORE else 25,
    deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
TestTierMoveStateful = TieredMachine.TestCase


def _replay(steps: list[tuple[str, dict[str, Any]]]) -> None:
    """Run the machine through ``steps`` (rule name, arguments), its invariant after each."""
    machine = TieredMachine()
    try:
        for name, arguments in steps:
            getattr(machine, name)(**arguments)
            machine.counts_match()
    finally:
        machine.teardown()


def test_a_put_onto_a_moving_value_leaves_no_row_of_a_value_that_stays() -> None:
    """Found by a long run: o-14 under SHIPPED (the index's store) is put under PENDING,
    which moves back from the tier; the put landed in the tier and left SHIPPED's row
    (its removal was throttled and never sent again). It is refused now."""
    _replay([
        ("open_clients", {"pending": ShardPolicy(2, "random", tier="dedicated"),
                          "seed": 65536}),
        ("app_write", {"client": 0, "item": "o-11", "kind": "put", "n": 3,
                       "sort": "2026-11-30T07:00Z", "value": "PENDING"}),
        ("start", {"pending": ShardPolicy(3, "hash"), "shipped": None}),
        ("app_write", {"client": 1, "item": "o-14", "kind": "put", "n": 0, "sort": "",
                       "value": "SHIPPED"}),
        ("paginate", {"client": 1, "order": "asc", "sizes": [3], "value": "DELIVERED"}),
        ("app_write", {"client": 2, "item": "o-5", "kind": "delete", "n": 0, "sort": "",
                       "value": "PENDING"}),
        ("drive", {"action": "run", "client": 1, "crash": 0.5461002510526624, "writes": [
            (0, "move", "o-15", "PENDING"), (0, "put", "o-14", "PENDING"),
            (0, "move", "o-8", "PENDING"), (0, "put", "o-12", "SHIPPED"),
            (1, "delete", "o-6", "DELIVERED"), (2, "delete", "o-13", "DELIVERED")]}),
    ])


def test_a_rolled_back_move_then_a_reshard_within_the_tier_finds_every_entry() -> None:
    """Found by a long run: PENDING moves from the tier to the index's store and is rolled
    back; the rollback's sweep decided from a routing copy a step behind and left the
    moved rows live in the index's store, which the next reshard (within the tier) took
    for the items: its parity check never came clean."""
    _replay([
        ("open_clients", {"seed": 15735, "pending": ShardPolicy(2, "random",
                                                               tier="dedicated")}),
        ("start", {"pending": ShardPolicy(1, "hash"), "shipped": None}),
        ("drive", {"action": "cutover", "client": 1, "crash": 0.6834217220702391, "writes": [
            (2, "delete", "o-5", "DELIVERED"), (0, "delete", "o-2", "PENDING"),
            (0, "put", "o-7", "PENDING"), (1, "move", "o-7", "DELIVERED"),
            (1, "move", "o-6", "PENDING"), (0, "delete", "o-10", "SHIPPED")]}),
        ("drive", {"action": "run", "client": 2, "crash": None, "writes": [
            (0, "move", "o-4", "DELIVERED"), (1, "delete", "o-7", "DELIVERED")]}),
        ("drive", {"action": "rollback", "client": 2, "crash": None, "writes": [
            (2, "move", "o-4", "DELIVERED"), (1, "delete", "o-7", "SHIPPED"),
            (2, "move", "o-15", "DELIVERED"), (0, "put", "o-1", "SHIPPED"),
            (0, "delete", "o-15", "DELIVERED"), (2, "move", "o-4", "SHIPPED")]}),
        ("start", {"pending": ShardPolicy(2, "hash", tier="dedicated"), "shipped": None}),
    ])

