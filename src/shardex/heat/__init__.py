"""Heat: which keys carry the load, how close they come to a partition's ceiling, and why.

- ``MeteredStore`` counts a live store's traffic per shard key and logical key;
- ``SpaceSaving`` finds the heaviest keys of an unbounded stream with error bounds;
- ``diagnose`` reads access logs (CSV, JSON Lines, Parquet) with DuckDB, and
  ``diagnose_stream`` reads an unbounded stream with Space-Saving; both classify the
  heat (low cardinality, sequential, popular entity, uniform) and recommend a plan.

Log reading needs the ``diagnose`` extra (duckdb); plotting the ``plot`` extra.
"""

from __future__ import annotations

from shardex.heat.classify import Classification, Thresholds, classify
from shardex.heat.histogram import LatencyHistogram
from shardex.heat.meter import MeteredStore
from shardex.heat.profile import HeatProfile, KeyHeat
from shardex.heat.report import Diagnosis, Recommendation, diagnose, diagnose_stream
from shardex.heat.snapshot import HeatSnapshot, HotKey, HotView, KeyMeter
from shardex.heat.spacesaving import Counted, SpaceSaving

__all__ = [
    "Classification",
    "Counted",
    "Diagnosis",
    "HeatProfile",
    "HeatSnapshot",
    "HotKey",
    "HotView",
    "KeyHeat",
    "KeyMeter",
    "LatencyHistogram",
    "MeteredStore",
    "Recommendation",
    "SpaceSaving",
    "Thresholds",
    "classify",
    "diagnose",
    "diagnose_stream",
]
