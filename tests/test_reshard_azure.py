"""Reshards on Azurite: ``azure-tables://``, which has no transaction across partitions.

A move there is several requests with one commit point, the placement's conditional
replace, and readers keep only the rows the placement names (``docs/azure.md``). The
mover's move is an ordinary write through that protocol, conditioned on the placement it
located and keeping the entry's version, so at every instant an item is readable on its
old key or its new one, never both or neither, and the reshard keeps its guarantees as
on DynamoDB. A scripted reshard under live writes, and the stateful reshard machine
(small), check it. Real time (a real server): leases and margins are fractions of a second.
"""

from __future__ import annotations

import asyncio
import random

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.reshard import Resharder
from tests import azurite
from tests.reshard_machine import machine
from tests.test_reshard import (
    Model,
    assert_complete,
    expected,
    listing,
    live_write,
    populate,
)

pytestmark = pytest.mark.azure


# the live writers write at most 50 times a second: each state of the reshard (at least
# a lease and a margin, 1.2 s) still sees tens of writes, and the suite's CPU is not
# spent on thousands more (a busy loop took 7 s of CPU beside the runner)
PACE = 0.02


@pytest.fixture(autouse=True)
def endpoint() -> str:
    return azurite.require_endpoint()


def test_a_reshard_under_live_writes_keeps_every_listing_complete() -> None:
    async def main() -> None:
        rng = random.Random(3)
        store = azurite.table_store()
        model: Model = {}
        async with ShardedIndex(store, "orders", Routing(), routing_lease=1.0,
                                routing_ttl=0.1, seed=1) as writer, \
                ShardedIndex(store, "orders", routing_ttl=0.3, seed=2) as reader:
            await populate(writer, model, {"PENDING": 40, "SHIPPED": 12})
            async with Resharder(store, "orders", rate=400.0, unit_lease=1.0, split_every=15,
                                 routing_ttl=0.1, seed=5) as rs:
                plan = await rs.start({"PENDING": ShardPolicy(4),
                                       "SHIPPED": ShardPolicy(3, "random")}, margin=0.2)
                assert plan.to_move > 20
                runner = asyncio.ensure_future(rs.run(until="done"))
                seen, checked, n = set(), 0, 0
                while not runner.done():
                    n += 1
                    await live_write(writer, model, rng, n, 40, ["PENDING", "SHIPPED"])
                    await asyncio.sleep(PACE)  # an application's pace, not a busy loop
                    if n % 3 == 0:
                        value = "PENDING" if n % 2 else "SHIPPED"
                        assert await listing(reader, value, rng.randint(3, 20)) == \
                            expected(model, value)
                        checked += 1
                    seen.add(reader.routing.state)
                result = await runner
                assert result.state == "done"
                assert result.parity is not None
                assert result.parity.clean
            assert {"read-both", "write-new"} <= seen
            assert checked > 10
            await assert_complete(reader, model, ["PENDING", "SHIPPED"])
            assert {e.shard_key async for e in reader.scan("PENDING")} == \
                {f"PENDING#{k}" for k in range(4)}

    asyncio.run(main())


def test_the_stateful_machine_on_azurite() -> None:
    run_state_machine_as_test(
        machine(lambda seed: azurite.table_store(), asyncio.new_event_loop, lease=1.0,
                margin=0.2, ttls=(0.1, 0.3, 0.6), unit_lease=1.0, crash_within=3.0),
        settings=settings(max_examples=2, stateful_step_count=10, deadline=None,
                          suppress_health_check=list(HealthCheck), database=None))
