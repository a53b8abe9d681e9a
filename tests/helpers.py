"""Test helpers that act on an index the way later tools (a finished reshard) leave it."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from shardex import ConditionFailed, Routing, ShardedIndex, ShardPolicy
from shardex.clock import LoopClock
from shardex.index import store_routing
from shardex.migrate.layouts import IndexLayouts
from shardex.model.entries import StoredEntry
from shardex.retry import RetryPolicy, call_with_retry
from shardex.routing import Turns

PATIENT = RetryPolicy(attempts=50, base=0.01, cap=0.1, deadline=None)


async def relayout(index: ShardedIndex, value: str, policy: ShardPolicy) -> Routing:
    """Re-lay every entry of ``value`` under ``policy`` and store the new routing.

    Entries move one by one with compare-and-set placements, then the routing is
    bumped with no transition left: the state a finished reshard leaves behind.
    """
    store, clock, rng = index.store, LoopClock(), random.Random(0)
    current = await index.refresh_routing()
    overrides = dict(current.overrides)
    overrides[value] = policy
    target = Routing(default=current.default, overrides=overrides, version=current.version + 1)
    entries = [e async for e in index.scan(value)]
    turns = Turns(rng)
    for entry in entries:
        shard_key = target.shard_key(value, entry.item_id, rng=rng, turns=turns)
        while True:
            placement = await call_with_retry(
                lambda e=entry: store.locate(index.name, e.item_id), PATIENT, clock=clock, rng=rng)
            assert placement is not None
            assert placement.entry is not None
            if placement.entry.shard_key == shard_key and placement.version > entry.version:
                break  # a try that looked failed had landed
            moved = StoredEntry(shard_key=shard_key, sort=entry.sort, item_id=entry.item_id,
                                attrs=entry.attrs, version=placement.version + 1)
            try:
                await call_with_retry(
                    lambda p=placement, m=moved: store.place(
                        index.name, m.item_id, m, version=m.version, expected=p),
                    PATIENT, clock=clock, rng=rng)
            except ConditionFailed:
                continue
            break
    await call_with_retry(lambda: store_routing(index, target), PATIENT, clock=clock, rng=rng)
    return target


def count_moves(monkeypatch: pytest.MonkeyPatch, now: Callable[[], float] | None = None,
                layouts: type[IndexLayouts] = IndexLayouts) -> dict[tuple[str, int], float]:
    """Count, per shard key and second (of ``now``, by default the store's clock), the
    write units of each move (``layouts.move``: ``IndexLayouts``'s, or a subclass's own)
    by the second it is sent: on its source key and on the key it landed on. What a
    mover's pace and budget hold is each send; its own tally (``mover_units``) is by the
    second each move ended, which a request's time shifts into the next."""
    sent: dict[tuple[str, int], float] = {}
    move = layouts.move

    async def counted(self: IndexLayouts, entry: StoredEntry, **kw: Any) -> str | None:
        second = int(self.index.store.clock.now() if now is None else now())
        landed = await move(self, entry, **kw)
        for key in (kw["source"], landed):
            if key is not None:
                sent[key, second] = sent.get((key, second), 0.0) + self.cost(entry)
        return landed

    monkeypatch.setattr(layouts, "move", counted)
    return sent


class MoveTimer:
    """A mover's ``progress`` callback that times its move from its reports: from the
    first (nothing moved yet) to the first that counts ``total`` moved."""

    def __init__(self, clock: Any) -> None:
        self._clock = clock
        self._seen: list[tuple[float, int, int | None]] = []

    def __call__(self, progress: Any) -> None:
        self._seen.append((self._clock.now(), progress.moved, progress.remaining))

    def took(self, total: int) -> float:
        began = min(at for at, _, remaining in self._seen if remaining is not None)
        return min(at for at, moved, _ in self._seen if moved >= total) - began
