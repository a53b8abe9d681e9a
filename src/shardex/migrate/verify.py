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

An adoption (``adoption_parity``, a layout change of the ``copy`` kind: every item
stays in the old index) holds, per value, the old index against the union of the new
shard keys, through the same ``classify``: each item's placement is the one the old
index says it must have (``_copied``), and the row held against it is its copy:

- ``missing``: in the old index, on no shard key of the value (a reader of the new
  index alone would miss it);
- ``extra``: on a shard key of the value, not in the old index under it (a stale shard
  attribute: the raw value changed and the shard attribute did not follow);
- ``misplaced``: under the value in both, but on a shard key the layout does not give it;
- ``mismatched``: in both, with another sort.

Both indexes are eventually consistent (DynamoDB GSIs), so a gap counts only if a second
pass after ``settle`` seconds finds it again, and (missing, extra, misplaced) the item
itself, read strongly consistently (``truth``), confirms it: an item whose attributes
are right is only one the index has not caught up with yet. Without ``truth`` (both
indexes read strongly consistently: an adopted index table) two passes suffice.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Collection, Coroutine, Iterable, Sequence
from functools import partial
from typing import Any

from shardex.clock import Clock
from shardex.migrate.layouts import Layouts, target_of
from shardex.migrate.pace import Pace, pages
from shardex.model.entries import Placement, StoredEntry
from shardex.routing import Routing
from shardex.transition import GAP_KINDS, MAX_EXAMPLES, Gap, Parity
from shardex.write import in_place

__all__ = ["Truth", "adoption_parity", "check", "classify", "two_passes"]

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
        if placement is not None and row.version < placement.version:
            # read before a write of its item replaced it (the item is located after its
            # row is read): that write's own row is where the placement says. Under an
            # application re-putting hot items, such rows had stopped runs as
            # "mismatched" or "extra" after three passes, every entry where readers read it
            continue
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
            async for page in pages(partial(layouts.page, key, limit=1000),
                                    Pace(read_rate, clock)):
                rows += len(page.entries)
                placements = await asyncio.gather(*(locate(e.item_id) for e in page.entries))
                for entry, placement in zip(page.entries, placements, strict=True):
                    gaps += classify(value, entry.item_id, [(key, entry)], placement,
                                     target_keys=wanted, placed=placed)
    return gaps, rows


async def two_passes(one_pass: Callable[[Sequence[str]], Awaitable[tuple[Iterable[Gap], int]]],
                     values: Sequence[str], *, settle: float, clock: Clock,
                     confirm: Callable[[Gap], Awaitable[bool]] | None = None) -> Parity:
    """The parity report of ``values``: a gap counts if a second pass, ``settle`` seconds
    after the first, finds it again (and ``confirm``, when given, agrees)."""
    first, rows = await one_pass(values)
    found = set(first)
    gaps: list[Gap] = []
    if found:
        if settle > 0:
            await clock.sleep(settle)
        again, _ = await one_pass(sorted({gap.value for gap in found}))
        gaps = [gap for gap in sorted(found & set(again))
                if confirm is None or await confirm(gap)]
    counts = {kind: sum(1 for gap in gaps if gap.kind == kind) for kind in GAP_KINDS}
    return Parity(checked_at=clock.wall(), entries=rows, examples=tuple(gaps[:MAX_EXAMPLES]),
                  **counts)


async def check(layouts: Layouts, routing: Routing, *, read_rate: float, settle: float,
                concurrency: int, clock: Clock, rng: random.Random | None = None) -> Parity:
    """The parity report of the reshard in ``routing`` (its values, both layouts)."""
    meta = routing.reshard
    assert meta is not None
    return await two_passes(lambda values: _pass(layouts, routing, values, read_rate=read_rate,
                                                 concurrency=concurrency, clock=clock),
                            meta.values, settle=settle, clock=clock)


# an item as the base table holds it now: (raw value, shard attribute, has the sort
# attribute), or None when it does not exist
Truth = Callable[[str], Coroutine[Any, Any, tuple[str | None, str | None, bool] | None]]


async def _rows(layouts: Layouts, keys: Sequence[str], pace: Pace
                ) -> dict[str, tuple[str, StoredEntry]]:
    """Every row on ``keys``: item id -> (key, row)."""
    found: dict[str, tuple[str, StoredEntry]] = {}
    for key in keys:
        async for page in pages(partial(layouts.page, key, limit=1000), pace):
            found.update((e.item_id, (key, e)) for e in page.entries)
    return found


def _copied(item_id: str, old: tuple[str, StoredEntry] | None,
            new: tuple[str, StoredEntry] | None) -> tuple[Found, Placement | None]:
    """An item of a copy as ``classify`` takes it: the row a reader of the target layout
    would find (the old one where the copy has none), and the placement the old layout
    says it must have (the copy's key, the old row's sort; None: in no old row)."""
    if old is None:
        return [new] if new is not None else [], None
    key, row = new or old
    entry = StoredEntry(key, old[1].sort, item_id, row.attrs, row.version)
    return [(key, row)], Placement(item_id, row.version, entry)


async def _copy_pass(layouts: Layouts, routing: Routing, values: Sequence[str], *,
                     read_rate: float, clock: Clock) -> tuple[set[Gap], int]:
    gaps: set[Gap] = set()
    rows = 0
    for value in values:
        pace = Pace(read_rate, clock)
        old = await _rows(layouts, layouts.source_keys(routing, value), pace)
        rows += len(old)
        targets = layouts.target_keys(routing, value)
        new = await _rows(layouts, targets, pace)

        def placed(key: str, item_id: str, value: str = value) -> bool:
            return layouts.placed(routing, value, key, item_id)

        for item_id in old.keys() | new.keys():
            found, placement = _copied(item_id, old.get(item_id), new.get(item_id))
            # a gap on the old layout's key is named by the value it is keyed by
            gaps.update(gap if gap.shard_key in targets else gap._replace(shard_key=value)
                        for gap in classify(value, item_id, found, placement,
                                            target_keys=set(targets), placed=placed))
    return gaps, rows


async def _confirmed(gap: Gap, routing: Routing, truth: Truth | None) -> bool:
    if gap.kind == "mismatched" or truth is None:
        return True
    item = await truth(gap.item_id)
    if item is None:
        return False  # deleted: the indexes are catching up
    value, shard, sorted_ = item
    keyed = shard is not None and in_place(routing, gap.value, shard, gap.item_id)
    if gap.kind == "missing":
        return value == gap.value and sorted_ and not keyed
    if gap.kind == "extra":
        return value != gap.value and shard in routing.policy(gap.value).shard_keys(gap.value)
    return value == gap.value and not keyed


async def adoption_parity(layouts: Layouts, routing: Routing, values: Sequence[str], *,
                          truth: Truth | None, read_rate: float, settle: float,
                          clock: Clock) -> Parity:
    """The parity report of ``values`` of an adoption: the old index against the new one,
    as ``layouts`` (``shardex.migrate.adopting``) reads them."""
    return await two_passes(
        lambda values: _copy_pass(layouts, routing, values, read_rate=read_rate,
                                  clock=clock),
        values, settle=settle, clock=clock,
        confirm=lambda gap: _confirmed(gap, routing, truth))
