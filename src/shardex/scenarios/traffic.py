"""Paced order traffic on an index, for a live view: writes to a few statuses, and reads.

``orders_traffic(index, rate=, duration=)`` puts new orders on the statuses of
``SHARES`` at ``rate`` writes a second in all, sent in ticks of ``tick`` seconds on the
index's clock (real under ``asyncio.run``, virtual under ``run_virtual``), and reads the
first page of the busiest status once a tick. A write throttled past its retries is
counted, not raised: throttles are what a live view has to show. Returns the writes
accepted and failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
from typing import Any

from shardex.clock import LoopClock
from shardex.errors import InvalidInput, StoreError

__all__ = ["SHARES", "orders_traffic"]

SHARES = {"PENDING": 0.7, "SHIPPED": 0.2, "DELIVERED": 0.07, "CANCELLED": 0.03}


async def orders_traffic(index: Any, *, rate: float = 500.0, duration: float = 60.0,
                         tick: float = 0.25, seed: int = 1) -> tuple[int, int]:
    """Run the traffic (see module) for ``duration`` seconds; return (accepted, failed)."""
    if not rate > 0 or not duration > 0 or not tick > 0:
        raise InvalidInput(f"traffic needs rate, duration and tick > 0, got {rate!r}, "
                           f"{duration!r}, {tick!r}")
    clock = LoopClock()
    rng = random.Random(seed)
    ids = itertools.count()
    statuses, weights = list(SHARES), list(SHARES.values())
    done = {"accepted": 0, "failed": 0}

    async def put(value: str) -> None:
        item = f"ORD-{next(ids):08d}"
        try:
            await index.put(value, item, sort=f"{clock.wall():.3f}")
            done["accepted"] += 1
        except StoreError:
            done["failed"] += 1

    async def read() -> None:
        with contextlib.suppress(StoreError):  # a throttled read: the view shows it
            await index.query(statuses[0], limit=20)

    start = clock.now()
    owed = 0.0
    while clock.now() - start < duration:
        owed += rate * tick
        batch, owed = int(owed), owed - int(owed)
        chosen = rng.choices(statuses, weights, k=batch)
        await asyncio.gather(*(put(value) for value in chosen),
                             read(), clock.sleep(tick))
    return done["accepted"], done["failed"]
