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
from collections.abc import Callable, Collection, Sequence

from shardex.clock import Clock
from shardex.migrate.layouts import Layouts, target_of
from shardex.migrate.pace import Pace, read_page
from shardex.routing import Routing
from shardex.stores.base import Placement, Position, StoredEntry
from shardex.transition import GAP_KINDS, MAX_EXAMPLES, Gap, Parity

__all__ = ["check", "classify"]

# the rows of one item found on the keys read: (shard key, row)
Found = list[tuple[str, StoredEntry]]


def classify(value: str, item_id: str, found: Found, placement: Placement | None, *,
             target_keys: Collection[str], placed: Callable[[str, str], bool]) -> list[Gap]:
    """The gaps of one item of ``value`` found as ``found`` (shard key, row) pairs.

    ``target_keys`` are the value's keys in the target layout, ``placed(key, item_id)``
    says whether the target layout puts the item's entry on that key.
    """
    placed_entry = None if placement is None else placement.entry
    gaps = []
    for key, row in found:
        if placed_entry is None or placed_entry.shard_key != key:
            kind = "extra"
        elif key not in target_keys:
            kind = "missing"
        elif not placed(key, item_id):
            kind = "misplaced"
        elif (row.sort, dict(row.attrs), row.version) != \
                (placed_entry.sort, dict(placed_entry.attrs), placed_entry.version):
            kind = "mismatched"
        else:
            continue
        gaps.append(Gap(kind, value, item_id, key))
    return gaps


async def _pass(layouts: Layouts, routing: Routing, values: Sequence[str], *,
                read_rate: float, concurrency: int, clock: Clock) -> tuple[list[Gap], int]:
    """One pass over ``values``: the gaps found and the rows read.

    Page by page: each row is held against its item's placement as it is read, so the
    memory a pass takes does not grow with the index (a row and its placement are all a
    row's gaps depend on).
    """
    target = target_of(routing)
    limit = asyncio.Semaphore(concurrency)

    async def locate(item_id: str) -> Placement | None:
        async with limit:
            return await layouts.locate(item_id)

    gaps: list[Gap] = []
    rows = 0
    for value in values:
        targets = layouts.target_keys(routing, value)
        keys = dict.fromkeys(targets + layouts.source_keys(routing, value))
        wanted = set(targets)

        def placed(key: str, item_id: str, value: str = value) -> bool:
            return layouts.placed(target, value, key, item_id)

        for key in keys:
            pace = Pace(read_rate, clock)
            after: Position | None = None
            while True:
                page = await read_page(layouts, key, after, 1000, pace)
                rows += len(page.entries)
                placements = await asyncio.gather(*(locate(e.item_id) for e in page.entries))
                for entry, placement in zip(page.entries, placements, strict=True):
                    gaps += classify(value, entry.item_id, [(key, entry)], placement,
                                     target_keys=wanted, placed=placed)
                if page.resume is None:
                    break
                after = page.resume
    return gaps, rows


async def check(layouts: Layouts, routing: Routing, *, read_rate: float, settle: float,
                concurrency: int, clock: Clock, rng: random.Random | None = None) -> Parity:
    """The parity report of the reshard in ``routing`` (its values, both layouts)."""
    meta = routing.reshard
    assert meta is not None
    first, rows = await _pass(layouts, routing, meta.values, read_rate=read_rate,
                              concurrency=concurrency, clock=clock)
    gaps: list[Gap] = []
    if first:
        if settle > 0:
            await clock.sleep(settle)
        again, _ = await _pass(layouts, routing, sorted({gap.value for gap in first}),
                               read_rate=read_rate, concurrency=concurrency, clock=clock)
        gaps = sorted(set(first) & set(again))
    counts = {kind: sum(1 for gap in gaps if gap.kind == kind) for kind in GAP_KINDS}
    return Parity(checked_at=clock.wall(), entries=rows, examples=tuple(gaps[:MAX_EXAMPLES]),
                  **counts)
