"""A workload request by request: through ``ShardedIndex`` on ``memory://``, on virtual time.

The request-level counterpart of ``shardex.scenarios.simulate``: the same workload
(writes, deletes and moves; reads are left out), the same layout and capacity profile,
entries padded to the workload's item sizes, but every operation is a real ``put``,
``delete`` or ``move`` of the index on the simulated store, so the two engines can be
checked against each other. Operations of a value come evenly spaced in each second;
throttled writes are not retried (the rate engine has no retries), and entry writes
are counted as ``simulate`` counts them. Meant for workloads of thousands of
operations, not millions.
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from shardex.clock import LoopClock
from shardex.errors import ShardexError
from shardex.index import ShardedIndex
from shardex.retry import RetryPolicy
from shardex.routing import Routing
from shardex.scenarios.workload import Schedule, Workload
from shardex.stores.memory import MemoryStore

__all__ = ["Replay", "replay"]

_EPOCH = datetime(2026, 11, 30, 5, 0, tzinfo=UTC)
_ENTRY_OVERHEAD = 100


@dataclass(slots=True)
class Replay:
    """Entry writes offered and accepted per value, and the store that served them."""

    offered: dict[str, int] = field(default_factory=dict)
    accepted: dict[str, int] = field(default_factory=dict)
    store: MemoryStore | None = None

    def ratio(self, value: str) -> float:
        offered = self.offered.get(value, 0)
        return self.accepted.get(value, 0) / offered if offered else 1.0


def _events(workload: Workload) -> Iterator[tuple[float, str, str, str | None]]:
    """(time, kind, value, other value) of every operation, in time order."""
    streams: list[tuple[Schedule, str, str, str | None]] = []
    for value, load in workload.values.items():
        streams.append((load.write, "put", value, None))
        streams.append((load.delete, "delete", value, None))
    for move in workload.moves:
        streams.append((move.rate, "move", move.source, move.target))
    out: list[tuple[float, int, str, str, str | None]] = []
    seq = 0
    for second in range(workload.duration):
        for schedule, kind, value, other in streams:
            rate = schedule.at(float(second))
            count = round(rate)
            for i in range(count):
                out.append((second + (i + 0.5) / count, seq, kind, value, other))
                seq += 1
    heapq.heapify(out)
    while out:
        at, _, kind, value, other = heapq.heappop(out)
        yield at, kind, value, other


async def replay(workload: Workload, routing: Routing, *, seed: int = 1,
                 namespace: str = "index", **store_options: Any) -> Replay:
    """Run ``workload`` on a new ``MemoryStore(**store_options)`` through an index named
    ``namespace`` (its keys hash to partitions with it, as ``simulate``'s do)."""
    store = MemoryStore(seed=seed, **store_options)
    clock = LoopClock()
    index = ShardedIndex(store, namespace, routing, retry=RetryPolicy(attempts=1), seed=seed)
    result = Replay(store=store)
    live: dict[str, list[str]] = {value: [] for value in workload.values}
    counter = 0
    tasks: list[asyncio.Task[None]] = []

    def count(value: str, ok: bool) -> None:
        result.offered[value] = result.offered.get(value, 0) + 1
        result.accepted[value] = result.accepted.get(value, 0) + ok

    def padding(value: str) -> dict[str, str]:
        # an entry as large as the workload says (its keys, ids and version take ~100
        # bytes), so both engines charge the same units for it
        return {"pad": "x" * max(0, workload.values[value].item_bytes - _ENTRY_OVERHEAD)}

    async def put(value: str, item: str, sort: str) -> None:
        try:
            await index.put(value, item, sort=sort, attrs=padding(value))
        except ShardexError:
            count(value, False)
            return
        count(value, True)
        live[value].append(item)

    async def move(source: str, target: str, item: str, sort: str) -> None:
        try:
            await index.move(item, old=source, new=target, sort=sort,
                             attrs=padding(target))
        except ShardexError:
            count(source, False)
            count(target, False)
            live[source].append(item)
            return
        count(source, True)
        count(target, True)
        live[target].append(item)

    async def delete(value: str, item: str) -> None:
        try:
            await index.delete(value, item)
        except ShardexError:
            count(value, False)
            live[value].append(item)
            return
        count(value, True)

    async with index:
        for at, kind, value, other in _events(workload):
            wait = at - clock.now()
            if wait > 0:
                await clock.sleep(wait)
            sort = (_EPOCH + timedelta(seconds=at)).isoformat(timespec="microseconds")
            if kind == "put":
                counter += 1
                tasks.append(asyncio.ensure_future(put(value, f"r-{counter:08d}", sort)))
            elif live[value]:
                item = live[value].pop(0)
                tasks.append(asyncio.ensure_future(
                    move(value, other, item, sort) if other is not None
                    else delete(value, item)))
        await asyncio.gather(*tasks)
    return result
