"""The simulation below the stores: virtual clock, capacity model and latency model.

``memory://`` is built from these; the planner uses the same models for its what-if
numbers (units per item, fan-out latency for N shards).
"""

from __future__ import annotations

from shardex.sim.capacity import (
    DYNAMODB_BURST_SECONDS,
    DYNAMODB_READ_CEILING,
    DYNAMODB_WRITE_CEILING,
    QUERY_PAGE_BYTES,
    READ_UNIT_BYTES,
    WRITE_UNIT_BYTES,
    PartitionCapacity,
    PartitionLimits,
    TokenBucket,
    entry_bytes,
    item_bytes,
    number_bytes,
    read_units,
    utf8_len,
    value_bytes,
    write_units,
)
from shardex.sim.clock import Clock, LoopClock, VirtualTimeLoop, run_virtual
from shardex.sim.latency import LatencyModel

__all__ = [
    "Clock",
    "DYNAMODB_BURST_SECONDS",
    "DYNAMODB_READ_CEILING",
    "DYNAMODB_WRITE_CEILING",
    "LatencyModel",
    "LoopClock",
    "PartitionCapacity",
    "PartitionLimits",
    "QUERY_PAGE_BYTES",
    "READ_UNIT_BYTES",
    "TokenBucket",
    "VirtualTimeLoop",
    "WRITE_UNIT_BYTES",
    "entry_bytes",
    "item_bytes",
    "number_bytes",
    "read_units",
    "run_virtual",
    "utf8_len",
    "value_bytes",
    "write_units",
]
