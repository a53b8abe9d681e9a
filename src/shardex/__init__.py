"""shardex: cure hot partitions in partitioned key-value stores.

Spread a hot logical key over N shard keys, read it back by fanning out and merging,
find which keys are hot and what N to pick, and change N on a live index.
"""

from __future__ import annotations

from shardex import starting as _starting  # noqa: F401  # first: Ctrl-C as the command loads
from shardex.admission import AdaptiveRate, Admission, AdmissionPolicy, Budget
from shardex.errors import (
    AdmissionRejected,
    CapabilityMissing,
    ConditionFailed,
    IncompleteRead,
    InvalidCursor,
    InvalidInput,
    InvalidKey,
    InvalidLog,
    InvalidPolicy,
    InvalidRouting,
    InvalidURI,
    MalformedItem,
    MissingDependency,
    NotFound,
    OutcomeUnknown,
    ReshardRefused,
    RoutingConflict,
    RoutingStale,
    ShardexError,
    StoreError,
    StoreInUse,
    Throttled,
    Unavailable,
)
from shardex.hedging import HedgePolicy
from shardex.index import Entry, Page, ShardedIndex
from shardex.retry import RetryPolicy
from shardex.routing import Routing, ShardPolicy
from shardex.sim.clock import run_virtual
from shardex.stores import open_store
from shardex.stores.base import Store
from shardex.sync import SyncShardedIndex

__version__ = "0.1.0"

__all__ = [
    "AdaptiveRate",
    "Admission",
    "AdmissionPolicy",
    "AdmissionRejected",
    "Budget",
    "CapabilityMissing",
    "ConditionFailed",
    "Entry",
    "HedgePolicy",
    "IncompleteRead",
    "InvalidCursor",
    "InvalidInput",
    "InvalidKey",
    "InvalidLog",
    "InvalidPolicy",
    "InvalidRouting",
    "InvalidURI",
    "MalformedItem",
    "MissingDependency",
    "NotFound",
    "OutcomeUnknown",
    "Page",
    "ReshardRefused",
    "RetryPolicy",
    "Routing",
    "RoutingConflict",
    "RoutingStale",
    "ShardPolicy",
    "ShardedIndex",
    "ShardexError",
    "Store",
    "StoreError",
    "StoreInUse",
    "SyncShardedIndex",
    "Throttled",
    "Unavailable",
    "__version__",
    "open_store",
    "run_virtual",
]
