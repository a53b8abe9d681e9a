"""The programmatic migration API (``shardex.migrate.Migrations``), as the autopilot drives
it: a grow and a shrink of a batch of values, stepped with bounded budgets on virtual
time, a rollback, and the refusal of a second migration while one is under way.
"""

from __future__ import annotations

import pytest

from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.errors import ReshardRefused
from shardex.migrate import Migrations, MigrationState
from shardex.stores.base import Store

OPTIONS = {"rate": 50.0, "unit_lease": 3.0, "routing_ttl": 0.5, "seed": 2}


async def _until(migrations: Migrations, goal: str, *, budget: float = 3.0,
                 steps: int = 200) -> list[MigrationState]:
    """Step with ``budget`` seconds at a time until the state is ``goal``."""
    seen = [await migrations.state()]
    while seen[-1].state != goal:
        assert len(seen) < steps, [s.state for s in seen[-5:]]
        seen.append(await migrations.step(budget))
    return seen


async def _listed(index: ShardedIndex, value: str) -> set[str]:
    return {entry.item_id async for entry in index.scan(value)}


@pytest.mark.shardex_virtual
async def test_a_grow_and_a_shrink_of_a_batch_stepped_with_bounded_budgets(
        shardex_store: Store) -> None:
    async with ShardedIndex(shardex_store, "orders", Routing(), routing_lease=2.0,
                            routing_ttl=0.5) as app:
        truth = {value: {f"{value}-{i:03d}" for i in range(count)}
                 for value, count in (("PENDING", 240), ("SHIPPED", 90))}
        for value, items in truth.items():
            for item in sorted(items):
                await app.put(value, item, sort=item)
        async with Migrations(shardex_store, "orders", **OPTIONS) as migrations:
            idle = await migrations.state()
            assert (idle.active, idle.state) == (False, "stable")
            grow = await migrations.start({"PENDING": ShardPolicy(8), "SHIPPED": ShardPolicy(4)},
                                          margin=0.5)
            assert grow.active
            assert grow.values == ("PENDING", "SHIPPED")
            assert grow.total == 330  # every entry leaves its one-key layout
            with pytest.raises(ReshardRefused):
                await migrations.start({"CANCELLED": ShardPolicy(2)})
            seen = await _until(migrations, "verified")
            assert len(seen) > 3  # bounded: it took several steps
            assert {s.total for s in seen[1:]} == {330}
            assert [s.moved for s in seen] == sorted(s.moved for s in seen)
            assert any(s.runners == () and 0 < s.moved < 330 for s in seen)  # leases given back
            done = await migrations.complete(60.0)
            assert (done.active, done.state) == (False, "stable")
            await app.refresh_routing()
            assert app.routing.policy("PENDING").shards == 8
            for value, items in truth.items():
                assert await _listed(app, value) == items

            shrink = await migrations.start({"PENDING": ShardPolicy(2)}, margin=0.5)
            assert shrink.total is not None
            assert 0 < shrink.total < 240  # jump hash: only keys beyond 2 move
            await _until(migrations, "verified")
            assert (await migrations.complete(60.0)).state == "stable"
            await app.refresh_routing()
            assert app.routing.policy("PENDING").shards == 2
            assert await _listed(app, "PENDING") == truth["PENDING"]


@pytest.mark.shardex_virtual
async def test_a_rollback_is_recorded_and_stepped_back_to_the_old_layout(
        shardex_store: Store) -> None:
    async with ShardedIndex(shardex_store, "orders", Routing(), routing_lease=2.0,
                            routing_ttl=0.5) as app:
        for i in range(120):
            await app.put("PENDING", f"o-{i:03d}", sort=f"{i:03d}")
        async with Migrations(shardex_store, "orders", **OPTIONS) as migrations:
            await migrations.start({"PENDING": ShardPolicy(6)}, margin=0.5)
            state = await migrations.step(8.0)
            while state.moved == 0:
                state = await migrations.step(2.0)
            back = await migrations.rollback()
            assert back.direction == "rollback"
            await _until(migrations, "stable")
            await app.refresh_routing()
            assert app.routing.policy("PENDING").shards == 1
            assert await _listed(app, "PENDING") == {f"o-{i:03d}" for i in range(120)}
