"""The simulation below the stores: virtual time, token buckets and the latency model.

``memory://`` is built from these; the planner uses the latency model for its fan-out
numbers. The unit rules and ceilings the simulation enforces are not simulation: they
live in ``shardex.capacity``.
"""

from __future__ import annotations

from shardex.sim.buckets import PartitionCapacity, PartitionLimits, TokenBucket
from shardex.sim.clock import VIRTUAL_WALL_START, VirtualTimeLoop, run_virtual
from shardex.sim.latency import LatencyModel

__all__ = [
    "LatencyModel",
    "PartitionCapacity",
    "PartitionLimits",
    "TokenBucket",
    "VIRTUAL_WALL_START",
    "VirtualTimeLoop",
    "run_virtual",
]
