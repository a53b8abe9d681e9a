"""The hot-key fleet scenario: several clients write one shard key straight to the store.

Each client stands for one process of a fleet: it shares nothing with the others, and
with ``adaptive`` set it paces the key through an ``AdaptiveGate`` of its own. Every
client runs ``workers`` writers in a closed loop (a write, then the next), each write
a new item placed on the hot key and retried on throttling with ``RetryPolicy``. The
run counts the store requests sent and throttled (wasted), and the writes accepted and
failed after their retries. Runs on the store's clock: virtual under ``run_virtual``.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from dataclasses import dataclass, field
from functools import partial

from shardex.admission import AdaptiveGate, AdaptiveRate
from shardex.clock import LoopClock
from shardex.errors import InvalidInput, Throttled
from shardex.model.entries import StoredEntry
from shardex.retry import RetryPolicy, call_with_retry
from shardex.stores.base import Store

__all__ = ["FleetRun", "run_fleet"]

HOT_KEY = "HOT"


@dataclass
class FleetRun:
    """What one fleet run did: store requests, throttles, writes, and the clients' rates."""

    seconds: float = 0.0
    sent: int = 0
    throttled: int = 0
    accepted: int = 0
    failed: int = 0
    rates: list[float | None] = field(default_factory=list)

    @property
    def wasted(self) -> float:
        """The share of store requests that were throttled."""
        return self.throttled / self.sent if self.sent else 0.0

    @property
    def accepted_per_s(self) -> float:
        return self.accepted / self.seconds if self.seconds else 0.0


async def run_fleet(store: Store, *, adaptive: AdaptiveRate | None, clients: int = 8,
                    workers: int = 8, duration: float = 10.0, seed: int = 1,
                    retry: RetryPolicy | None = None) -> FleetRun:
    """Run the fleet against ``store`` (opened here) for ``duration`` seconds of its clock."""
    if clients < 1 or workers < 1 or duration <= 0:
        raise InvalidInput("a fleet needs clients >= 1, workers >= 1 and duration > 0, got "
                           f"{clients}, {workers}, {duration}")
    clock = LoopClock()
    run = FleetRun()
    ids = itertools.count()
    policy = retry or RetryPolicy()
    gates = [AdaptiveGate(adaptive, clock=clock) if adaptive else None for _ in range(clients)]

    async def place(entry: StoredEntry) -> float:
        run.sent += 1
        try:
            return await store.place("fleet", entry.item_id, entry, version=1, expected=None)
        except Throttled:
            run.throttled += 1
            raise

    async def write(gate: AdaptiveGate | None, entry: StoredEntry) -> float:
        if gate is None:
            return await place(entry)
        return await gate.call(HOT_KEY, lambda: place(entry))

    async def writer(gate: AdaptiveGate | None, rng: random.Random, end: float) -> None:
        while clock.now() < end:
            item = f"o-{next(ids):09d}"
            entry = StoredEntry(shard_key=HOT_KEY, sort=item, item_id=item, attrs={"n": 1})
            try:
                await call_with_retry(partial(write, gate, entry), policy, clock=clock, rng=rng)
                run.accepted += 1
            except Throttled:
                run.failed += 1

    async with store:
        start = clock.now()
        await asyncio.gather(*(writer(gates[c], random.Random(seed * 100_003 + c * 101 + w),
                                      start + duration)
                               for c in range(clients) for w in range(workers)))
        run.seconds = clock.now() - start
    run.rates = [None if gate is None else gate.rate(HOT_KEY) for gate in gates]
    return run
