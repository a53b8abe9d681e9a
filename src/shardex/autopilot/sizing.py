"""N for a key's peak, from the planner (``shardex.plan.plan_shards``), cached.

The policy sizes in write units a second (what heat measures); the planner in entry
writes a second of a given item size. ``PlannerSizer`` converts, plans the key alone on
the table's capacity profile (partitions and placement load included: with a partition
count, where the key's shard keys hash matters) and caches the answer on a 2% grid of
peaks, rounded up, so a noisy load asks the planner once per grid step and never gets a
smaller N than its own peak needs. A plan on a table split for heat (``partitions=0``)
takes about 0.1 ms; on a new table with partitions about 0.15 s; ``plans`` counts them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from shardex.capacity import Ceiling
from shardex.errors import InvalidInput
from shardex.plan import AMPLIFICATION, plan_shards
from shardex.routing import MAX_SHARDS
from shardex.sim.profiles import Profile

__all__ = ["PlannerSizer", "mode_of"]

_GRID = math.log(1.02)


def mode_of(profile: Profile) -> str:
    """The planner's mode for a capacity profile: ``azure``, ``cosmos``, ``gsi`` or ``table``."""
    if profile.store == "azure-tables":
        return "azure"
    if profile.store == "cosmos":
        return "cosmos"
    return "gsi" if profile.layout == "gsi" else "table"


class PlannerSizer:
    """``size(key, peak_units, tier) -> N`` (the policy's ``Sizer``) from the planner.

    ``table`` is the index's own table's profile, ``tiers`` the profile of each tier;
    ``item_bytes``, ``mode`` (``table``, ``gsi``, ``azure``, ``cosmos``) and
    ``headroom`` as ``plan_shards`` takes them; ``namespace`` the index's name.
    """

    def __init__(self, table: Profile, *, item_bytes: int = 1024, mode: str | None = None,
                 headroom: float = 1.5, namespace: str = "index",
                 tiers: Mapping[str, Profile] | None = None) -> None:
        self.table = table
        self.tiers = dict(tiers or {})
        self.item_bytes = item_bytes
        self.mode = mode or mode_of(table)
        self.headroom = headroom
        self.namespace = namespace
        amplification = AMPLIFICATION[self.mode]
        # write units one entry write costs its shard key, as plan_shards counts it
        self.units_per_write = table.write_cost(item_bytes) * amplification
        self.plans = 0
        self._cache: dict[tuple[str, str | None, float], int] = {}

    def __call__(self, key: str, peak_units: float, tier: str | None, *,
                 exact: bool = False) -> int:
        """N for ``key`` at ``peak_units`` (in ``tier``'s store), the peak rounded up to a
        2% grid so that ticks share plans; ``exact``: at the peak itself (a layout held
        all day, which the planner's own N for that peak should be)."""
        if peak_units <= 0:
            return 1
        step = math.ceil(math.log(peak_units) / _GRID)
        cache = (key if self.table.partitions else "", tier,
                 peak_units if exact else step)
        found = self._cache.get(cache)
        if found is not None:
            return found
        profile = self.table if tier is None else self.tiers.get(tier, self.table)
        writes = (peak_units if exact else math.exp(step * _GRID)) / self.units_per_write
        self.plans += 1
        try:
            plan = plan_shards({key: writes}, item_bytes=self.item_bytes, mode=self.mode,
                               headroom=self.headroom, table=profile,
                               namespace=self.namespace, ceiling=Ceiling(
                                   profile.name, profile.write_ceiling, profile.read_ceiling,
                                   "units/s"))
            n = plan.values[key].shards
        except InvalidInput:  # past the planner's ceiling on N
            n = MAX_SHARDS
        self._cache[cache] = n
        return n
