"""The simulation below the stores: virtual time, capacity models, latency, the rate engine.

``memory://`` is built from these, request by request; ``fluid`` runs the same capacity
model (``profiles``, ``partitions``, ``table``) second by second at any rate, for
``shardex simulate``; the planner uses the latency model for its fan-out numbers. The
unit rules and ceilings the simulation enforces are not simulation: they live in
``shardex.capacity``.
"""

from __future__ import annotations

from shardex.sim.buckets import TokenBucket
from shardex.sim.clock import VIRTUAL_WALL_START, VirtualTimeLoop, run_virtual
from shardex.sim.latency import LatencyModel
from shardex.sim.partitions import KeyTrack, Partition, PartitionMap
from shardex.sim.profiles import PROFILES, Profile, profile
from shardex.sim.table import Refusal, Resource, TableLimit, admit

__all__ = [
    "KeyTrack",
    "LatencyModel",
    "PROFILES",
    "Partition",
    "PartitionMap",
    "Profile",
    "Refusal",
    "Resource",
    "TableLimit",
    "TokenBucket",
    "VIRTUAL_WALL_START",
    "VirtualTimeLoop",
    "admit",
    "profile",
    "run_virtual",
]
