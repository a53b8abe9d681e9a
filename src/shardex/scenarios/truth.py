"""Ground truth for listings read while writes are in flight.

For each item of one logical key the tracker knows when its write into the key began
and was acknowledged, and when its write out of the key began and was acknowledged.
A listing read between ``start`` and ``end`` must hold every item that was surely in
the key for that whole span, must hold no item that was surely out of it, and must be
in order without duplicates. Items with a write in flight may go either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from shardex.index import Entry
from shardex.model.entries import Position, beyond

__all__ = ["Tracker"]


@dataclass(slots=True)
class _Life:
    position: Position
    in_started: float
    in_acked: float | None = None
    in_failed: bool = False
    out_started: float | None = None
    out_acked: float | None = None


class Tracker:
    """Tracks the items of one logical key and checks listings against them."""

    def __init__(self) -> None:
        # Insertion order is position order, so an ascending page stops its scan early.
        self._lives: dict[str, _Life] = {}
        self._last: Position = ("", "")

    def entering(self, item_id: str, position: Position, now: float) -> None:
        """Record a write into the key; items must enter in ascending position order."""
        if self._lives and position <= self._last:
            raise ValueError(f"{item_id} enters out of position order")
        self._last = position
        self._lives[item_id] = _Life(position=position, in_started=now)

    def entered(self, item_id: str, now: float, *, ok: bool) -> None:
        life = self._lives[item_id]
        if ok:
            life.in_acked = now
        else:
            life.in_failed = True

    def leaving(self, item_id: str, now: float) -> None:
        life = self._lives.get(item_id)
        if life is not None:
            life.out_started = now

    def left(self, item_id: str, now: float, *, ok: bool) -> None:
        life = self._lives.get(item_id)
        if life is None:
            return
        if ok:
            life.out_acked = now
        else:
            life.out_started = None  # a failed write did not apply: the item never left

    def check(self, entries: Sequence[Entry], start: float, end: float, *,
              complete: bool, descending: bool = False) -> list[str]:
        """Return what is wrong with a listing read in [start, end]; empty when right.

        ``complete`` is False for a single page: then only items up to the page's
        last position are owed.
        """
        problems: list[str] = []
        positions = [(e.sort, e.item_id) for e in entries]
        if positions != sorted(positions, reverse=descending):
            problems.append("entries out of order")
        if len({e.item_id for e in entries}) != len(entries):
            problems.append("an entry returned twice")
        for entry in entries:
            life = self._lives.get(entry.item_id)
            if life is None or life.in_started > end:
                problems.append(f"{entry.item_id} listed before it was written")
            elif life.in_failed or (life.out_acked is not None and life.out_acked <= start):
                problems.append(f"{entry.item_id} listed though it was surely gone")
        listed = {e.item_id for e in entries}
        bound = positions[-1] if positions and not complete else None
        lives = reversed(self._lives.items()) if descending else iter(self._lives.items())
        for item_id, life in lives:
            if bound is not None and beyond(life.position, bound, descending):
                break
            owed = (life.in_acked is not None and life.in_acked <= start
                    and life.out_started is None)
            if owed and item_id not in listed:
                problems.append(f"{item_id} missing")
        return problems
