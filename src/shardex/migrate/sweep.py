"""The sweep of a retired key: what a reshard left on a key the layout in use lacks.

In ``retired`` no reader reads the keys only the layout being left has. What is still
on them is moved where writes go (an entry the mover missed: one the application put
there late), or removed (a copy a rolled-back move between tiers left on the tier it
left, ``TierLayouts.move``: moved back already), and a row whose item's placement names
another key is named for the operator (``Swept.ghosts``) if a second listing of the key
still holds it: another runner sweeping the same key at once moves rows between this
one's listing and its move.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

from shardex.clock import Clock
from shardex.migrate.layouts import Layouts
from shardex.migrate.pace import Pace, pages

__all__ = ["Swept", "sweep_key"]


@dataclass
class Swept:
    """What sweeps did: entries ``moved``, left-behind copies ``cleared``, and the rows
    no placement names (``ghosts``: retired key, item id)."""

    moved: int = 0
    cleared: int = 0
    ghosts: list[tuple[str, str]] = field(default_factory=list)

    def add(self, other: Swept) -> None:
        self.moved += other.moved
        self.cleared += other.cleared
        self.ghosts += other.ghosts


async def sweep_key(layouts: Layouts, value: str, key: str, *, reshard: str, generation: int,
                    rate: float, read_rate: float, clock: Clock) -> Swept:
    """Sweep retired key ``key`` of ``value`` for generation ``generation`` of ``reshard``,
    writing at most ``rate`` write units a second and reading ``read_rate``."""
    pace = Pace(rate, clock)
    swept = Swept()
    listing = partial(layouts.page, key, limit=100)
    async for page in pages(listing, Pace(read_rate, clock)):
        for entry in page.entries:
            await pace.wait(layouts.cost(entry))
            landed = await layouts.move(entry, value=value, source=key, reshard=reshard,
                                        generation=generation)
            if landed is not None:
                # a sweep reads only keys the layout in use lacks: landing on the key
                # itself is a left-behind row removed
                if landed == key:
                    swept.cleared += 1
                else:
                    swept.moved += 1
                continue
            placement = await layouts.locate(entry.item_id)
            if placement is None or placement.entry is None \
                    or placement.entry.shard_key != key:
                swept.ghosts.append((key, entry.item_id))
    if swept.ghosts:
        left = {e.item_id async for page in pages(listing, Pace(read_rate, clock))
                for e in page.entries}
        swept.ghosts = [(k, item) for k, item in swept.ghosts if item in left]
    return swept
