"""The parity check: per value, the union of both layouts' keys against the target alone.

Every entry on any key of either layout is read, and each item's placement (where the
store says its entry is) is the truth it is held against (``classify``):

- ``extra``: a row on a key its placement does not name (a ghost, or a second copy);
- ``missing``: an entry placed on a key only the layout being left has, which a
  reader of the target layout alone would miss;
- ``misplaced``: on a key of the target layout, but not the one its hash gives it;
- ``mismatched``: the row differs from its placement (version, sort or attributes).

A gap counts only if a second pass finds it again (after ``settle`` seconds where the
store's reads are eventually consistent, as a DynamoDB GSI's are), so an application
write racing the check is not mistaken for one. Reads are paced at ``read_rate``
units a second per key and placements read ``concurrency`` at a time.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence

from shardex.clock import Clock
from shardex.index import ShardedIndex
from shardex.reshard.mover import Pace, read_key, target_of
from shardex.reshard.work import PATIENT
from shardex.retry import call_with_retry
from shardex.routing import Routing
from shardex.stores.base import Placement, Position, StoredEntry
from shardex.transition import MAX_EXAMPLES, Gap, Parity
from shardex.writes import in_place

__all__ = ["check", "classify"]

# the rows of one item found on the keys read: (shard key, row)
Found = list[tuple[str, StoredEntry]]


def classify(value: str, item_id: str, found: Found, placement: Placement | None,
             target: Routing) -> list[Gap]:
    """The gaps of one item of ``value`` found as ``found`` (shard key, row) pairs."""
    placed = None if placement is None else placement.entry
    gaps = []
    keys = set(target.policy(value).shard_keys(value))
    for key, row in found:
        if placed is None or placed.shard_key != key:
            kind = "extra"
        elif key not in keys:
            kind = "missing"
        elif not in_place(target, value, key, item_id):
            kind = "misplaced"
        elif (row.sort, dict(row.attrs), row.version) != \
                (placed.sort, dict(placed.attrs), placed.version):
            kind = "mismatched"
        else:
            continue
        gaps.append(Gap(kind, value, item_id, key))
    return gaps


async def _pass(index: ShardedIndex, routing: Routing, values: Sequence[str], *,
                read_rate: float, concurrency: int, clock: Clock,
                rng: random.Random) -> tuple[list[Gap], int]:
    """One pass over ``values``: the gaps found and the rows read.

    Page by page: each row is held against its item's placement as it is read, so the
    memory a pass takes does not grow with the index (a row and its placement are all a
    row's gaps depend on).
    """
    assert routing.previous is not None
    target = target_of(routing)
    limit = asyncio.Semaphore(concurrency)
    store, name = index.store, index.name

    async def locate(item_id: str) -> Placement | None:
        async with limit:
            return await call_with_retry(lambda: store.locate(name, item_id), PATIENT,
                                         clock=clock, rng=rng)

    gaps: list[Gap] = []
    rows = 0
    for value in values:
        keys = dict.fromkeys(routing.policy(value).shard_keys(value)
                             + routing.previous.policy(value).shard_keys(value))
        for key in keys:
            pace = Pace(read_rate, clock)
            after: Position | None = None
            while True:
                page = await read_key(index, key, after, 1000, pace, clock, rng)
                rows += len(page.entries)
                placements = await asyncio.gather(*(locate(e.item_id) for e in page.entries))
                for entry, placement in zip(page.entries, placements, strict=True):
                    gaps += classify(value, entry.item_id, [(key, entry)], placement, target)
                if page.resume is None:
                    break
                after = page.resume
    return gaps, rows


async def check(index: ShardedIndex, routing: Routing, *, read_rate: float, settle: float,
                concurrency: int, clock: Clock, rng: random.Random | None = None) -> Parity:
    """The parity report of the reshard in ``routing`` (its values, both layouts)."""
    meta = routing.reshard
    assert meta is not None
    assert routing.previous is not None
    rng = rng or random.Random()
    first, rows = await _pass(index, routing, meta.values, read_rate=read_rate,
                              concurrency=concurrency, clock=clock, rng=rng)
    gaps: list[Gap] = []
    if first:
        if settle > 0:
            await clock.sleep(settle)
        again, _ = await _pass(index, routing, sorted({gap.value for gap in first}),
                               read_rate=read_rate, concurrency=concurrency, clock=clock,
                               rng=rng)
        gaps = sorted(set(first) & set(again))
    counts = {kind: sum(1 for gap in gaps if gap.kind == kind)
              for kind in ("missing", "extra", "misplaced", "mismatched")}
    return Parity(checked_at=clock.wall(), entries=rows, examples=tuple(gaps[:MAX_EXAMPLES]),
                  **counts)
