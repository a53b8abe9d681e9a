"""The sweep of a retired key: what a reshard left on a key the layout in use lacks.

In ``retired`` no reader reads the keys only the layout being left has. What is still
on them is moved where writes go (an entry the mover missed: one the application put
there late), or removed (a copy a rolled-back move between tiers left on the tier it
left, ``TierLayouts.move``: moved back already), and a row whose item's placement names
another key is named for the operator (``Swept.ghosts``) if a second listing of the key
still holds it: another runner sweeping the same key at once moves rows between this
one's listing and its move. Each write is the mover's paced move (``Mover.sweep``): at
the rate in force, within the migration's budget, paused while the migration is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial

from shardex.clock import Clock
from shardex.migrate.layouts import Layouts
from shardex.migrate.pace import Pace, pages
from shardex.model.entries import StoredEntry
from shardex.routing import Routing
from shardex.stores.base import gather_or_cancel

__all__ = ["Swept", "retired_keys", "sweep_key"]


@dataclass
class Swept:
    """What sweeps did: entries ``moved``, left-behind copies ``cleared``, the rows no
    placement names (``ghosts``: retired key, item id), and the retired ``keys`` swept
    of ``retired`` (the others swept by other runners)."""

    moved: int = 0
    cleared: int = 0
    ghosts: list[tuple[str, str]] = field(default_factory=list)
    keys: int = 0
    retired: int = 0

    def add(self, other: Swept) -> None:
        self.moved += other.moved
        self.cleared += other.cleared
        self.ghosts += other.ghosts
        self.keys += other.keys
        self.retired = max(self.retired, other.retired)


def retired_keys(layouts: Layouts, routing: Routing) -> list[tuple[str, str]]:
    """(value, key) of each key the ``retired`` sweep sweeps, in order: each value's keys
    the layout being left has and the one in use lacks."""
    meta = routing.reshard
    assert meta is not None
    retired = []
    for value in meta.values:
        kept = set(layouts.target_keys(routing, value))
        retired += [(value, key) for key in layouts.source_keys(routing, value)
                    if key not in kept]
    return sorted(retired)


async def sweep_key(layouts: Layouts, key: str, move: Callable[[StoredEntry], Awaitable[
        str | None]], *, read_rate: float, clock: Clock, in_flight: int = 1,
                    swept: Swept | None = None) -> Swept:
    """Sweep retired key ``key``: ``move(entry)`` each entry on it (the mover's paced
    move: the key it landed on, or None if the entry was gone or changed), up to
    ``in_flight`` at once, reading at most ``read_rate`` read units a second. Counted
    in ``swept`` as it goes (a new one by default), which keeps them if it is stopped."""
    swept = Swept() if swept is None else swept
    window = asyncio.Semaphore(in_flight)

    async def sweep(entry: StoredEntry) -> None:
        async with window:
            landed = await move(entry)
            if landed is not None:
                # a sweep reads only keys the layout in use lacks: landing on the key
                # itself is a left-behind row removed
                if landed == key:
                    swept.cleared += 1
                else:
                    swept.moved += 1
                return
            placement = await layouts.locate(entry.item_id)
        if placement is None or placement.entry is None \
                or placement.entry.shard_key != key:
            swept.ghosts.append((key, entry.item_id))

    listing = partial(layouts.page, key, limit=100)
    async for page in pages(listing, Pace(read_rate, clock)):
        await gather_or_cancel(sweep(entry) for entry in page.entries)
    if swept.ghosts:
        left = {e.item_id async for page in pages(listing, Pace(read_rate, clock))
                for e in page.entries}
        swept.ghosts = [(k, item) for k, item in swept.ghosts if item in left]
    return swept
