"""A write of an existing item while readers read both layouts leaves its entry where it is.

Clients in two adjacent states act at once (each within its routing's lease): a reader in
``read-both`` beside a writer in ``write-new``, or the other way round. A put of an item
that already has an entry of the value re-filed it on the key of the writer's own layout:
a ``write-new`` writer moved it onto the new layout, a ``read-both`` writer back onto the
old one. The two readers read the layouts in opposite orders, so neither order covered
both directions, and a listing, scan or count between the two phases missed the item (a
probe: every one of the twelve cases below, on memory:// and on DynamoDB Local in GSI mode).
Only the mover moves an entry between layouts now, one way, in the states its readers
read in that order. memory://, virtual time, deterministic.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.hashing import shard_of
from shardex.migrate.states import ready_at
from shardex.reshard import Resharder
from shardex.sim.clock import run_virtual
from shardex.stores.memory import MemoryStore


class Gated(MemoryStore):
    """A memory store whose reads of ``gate_keys`` wait for ``gate`` (a slow network)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.gate_keys: set[str] = set()
        self.gate = asyncio.Event()
        self.reached = asyncio.Event()

    async def _held(self, shard_key: str) -> None:
        if shard_key in self.gate_keys:
            self.reached.set()
            await self.gate.wait()

    async def _query(self, namespace: str, shard_key: str, *args: Any) -> Any:
        await self._held(shard_key)
        return await super()._query(namespace, shard_key, *args)

    async def _count(self, namespace: str, shard_key: str, *args: Any) -> Any:
        await self._held(shard_key)
        return await super()._count(namespace, shard_key, *args)


async def _listed(index: ShardedIndex, read: str) -> list[str] | int:
    if read == "query":
        return sorted(e.item_id for e in (await index.query("P", limit=1000)).items)
    if read == "scan":
        return sorted([e.item_id async for e in index.scan("P")])
    return await index.count("P")


@pytest.mark.parametrize("read", ["query", "scan", "count"])
@pytest.mark.parametrize(("old", "new"), [(4, 16), (16, 4)], ids=["grow", "shrink"])
@pytest.mark.parametrize("reader_state", ["read-both", "write-new"])
def test_a_put_between_a_union_read_s_phases_hides_no_entry(
        reader_state: str, old: int, new: int, read: str) -> None:
    async def main() -> None:
        store = Gated(seed=1)
        items = [f"i-{k}" for k in range(40)]
        moved = next(i for i in items if shard_of(i, old) != shard_of(i, new))
        lease = 3.0
        async with ShardedIndex(store, "orders", Routing(overrides={"P": ShardPolicy(old)}),
                                routing_lease=lease, routing_ttl=0.5) as behind, \
                ShardedIndex(store, "orders", routing_ttl=0.5) as ahead, \
                ShardedIndex(store, "orders", routing_ttl=0.5) as reader:
            for item in items:
                if item != moved or reader_state == "read-both":
                    assert await behind.put("P", item, sort="s")
            async with Resharder(store, "orders", seed=1, unit_lease=2.0) as resharder:
                await resharder.start({"P": ShardPolicy(new)}, margin=0.5)
                await reader.refresh_routing()
                running = asyncio.ensure_future(resharder.run(until="write-new"))
                clock = reader._clock
                await clock.sleep(max(0.0, ready_at(reader.routing, lease) - clock.wall()
                                      - 0.2))
                for client in (behind, ahead, reader):  # all in read-both, 0.2 s before
                    await client.refresh_routing()
                    assert client.routing.state == "read-both"
                while ahead.routing.state != "write-new":
                    await asyncio.sleep(0.05)
                    await ahead.refresh_routing()
                if reader_state == "read-both":  # it reads as write-new re-files
                    reading, writer = behind, ahead
                else:  # a write-new client's item, re-put by a read-both client
                    assert await ahead.put("P", moved, sort="s")
                    await reader.refresh_routing()
                    reading, writer = reader, behind
                assert reading.routing.state == reader_state
                store.gate_keys = set(reading.routing.read_phases("P")[1])
                listing = asyncio.ensure_future(_listed(reading, read))
                await store.reached.wait()
                store.gate_keys = set()
                assert await writer.put("P", moved, sort="s")
                store.gate.set()
                got = await listing
                assert got == (len(items) if read == "count" else sorted(items)), got
                running.cancel()
                await asyncio.gather(running, return_exceptions=True)

    run_virtual(main())
