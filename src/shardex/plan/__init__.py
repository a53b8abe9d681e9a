"""Shard-count sizing: N per logical key, where the shard keys fall, and one verdict.

Pure arithmetic, no I/O. ``plan_shards`` is the sizing function other code calls (an
autopilot asks it for N given per-key peak rates, the item size and the table's facts):
it returns a ``Plan`` with N per value, the busiest partition's load over hash placements
(``shardex.plan.partitions``), the table's load against what it serves
(``shardex.plan.table``) and the verdict at the peak with its reasons
(``shardex.plan.verdict``). ``shards_for`` is the per-key rule alone.
"""

from __future__ import annotations

from shardex.plan.partitions import Busiest, busiest_partition, collision_free_odds
from shardex.plan.shards import (
    AMPLIFICATION,
    CEILING_OF_MODE,
    MODES,
    PROFILE_OF_MODE,
    Plan,
    ValuePlan,
    plan_shards,
    sharded_routing,
    shards_for,
)
from shardex.plan.table import PLACEMENT_BYTES, TablePlan
from shardex.plan.verdict import PartitionPlan, Verdict

__all__ = [
    "AMPLIFICATION",
    "Busiest",
    "CEILING_OF_MODE",
    "MODES",
    "PLACEMENT_BYTES",
    "PROFILE_OF_MODE",
    "PartitionPlan",
    "Plan",
    "TablePlan",
    "ValuePlan",
    "Verdict",
    "busiest_partition",
    "collision_free_odds",
    "plan_shards",
    "sharded_routing",
    "shards_for",
]
