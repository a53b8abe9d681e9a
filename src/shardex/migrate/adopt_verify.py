"""Parity of an adoption: per value, the old index against the union of the new shard keys.

For each value, every entry of the old index (``V`` on the source store) and every entry
on the value's shard keys in the new index are read, and held against each other:

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

from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from shardex.clock import Clock
from shardex.migrate.pace import Pace
from shardex.routing import Routing
from shardex.stores.base import Position, Store
from shardex.transition import GAP_KINDS, MAX_EXAMPLES, Gap, Parity
from shardex.write import in_place

__all__ = ["Truth", "parity"]

# an item as the base table holds it now: (raw value, shard attribute, has the sort
# attribute), or None when it does not exist
Truth = Callable[[str], Coroutine[Any, Any, tuple[str | None, str | None, bool] | None]]


async def _entries(store: Store, namespace: str, key: str, pace: Pace) -> dict[str, str]:
    """Every entry of ``key``: item id -> sort."""
    found: dict[str, str] = {}
    after: Position | None = None
    while True:
        page = await store.query(namespace, key, after=after, descending=False, limit=1000)
        await pace.wait(page.units)
        found.update((e.item_id, e.sort) for e in page.entries)
        if page.resume is None:
            return found
        after = page.resume


async def _pass(source: Store, target: Store, namespace: str, routing: Routing,
                values: Sequence[str], *, read_rate: float, clock: Clock
                ) -> tuple[set[Gap], int]:
    gaps: set[Gap] = set()
    rows = 0
    for value in values:
        pace = Pace(read_rate, clock)
        old = await _entries(source, namespace, value, pace)
        rows += len(old)
        new: dict[str, tuple[str, str]] = {}
        for key in routing.policy(value).shard_keys(value):
            new.update((item, (key, sort)) for item, sort in
                       (await _entries(target, namespace, key, pace)).items())
        for item_id in old.keys() - new.keys():
            gaps.add(Gap("missing", value, item_id, value))
        for item_id in new.keys() - old.keys():
            gaps.add(Gap("extra", value, item_id, new[item_id][0]))
        for item_id in old.keys() & new.keys():
            key, sort = new[item_id]
            if not in_place(routing, value, key, item_id):
                gaps.add(Gap("misplaced", value, item_id, key))
            elif sort != old[item_id]:
                gaps.add(Gap("mismatched", value, item_id, key))
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


async def parity(source: Store, target: Store, namespace: str, routing: Routing,
                 values: Sequence[str], *, truth: Truth | None, read_rate: float, settle: float,
                 clock: Clock) -> Parity:
    """The parity report of ``values``: the old index on ``source`` against ``target``."""
    first, rows = await _pass(source, target, namespace, routing, values,
                              read_rate=read_rate, clock=clock)
    gaps: list[Gap] = []
    if first:
        if settle > 0:
            await clock.sleep(settle)
        again, _ = await _pass(source, target, namespace, routing,
                               sorted({gap.value for gap in first}), read_rate=read_rate,
                               clock=clock)
        gaps = [gap for gap in sorted(first & again)
                if await _confirmed(gap, routing, truth)]
    counts = {kind: sum(1 for gap in gaps if gap.kind == kind) for kind in GAP_KINDS}
    return Parity(checked_at=clock.wall(), entries=rows, examples=tuple(gaps[:MAX_EXAMPLES]),
                  **counts)
