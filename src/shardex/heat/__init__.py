"""Heat: which keys carry the load, how close they come to a partition's ceiling, and why.

- ``MeteredStore`` counts a live store's traffic per shard key and logical key;
- ``SpaceSaving`` finds the heaviest keys of an unbounded stream with error bounds;
- ``diagnose`` reads heat sources exactly with DuckDB: access logs (CSV, JSON Lines,
  Parquet), CloudTrail DynamoDB data events, Contributor Insights reports, all by the
  one set of row rules of ``heat.rows``; ``diagnose_stream`` reads an unbounded stream
  with Space-Saving (``heat.live`` refreshes a view of it); both roll shard keys up
  under their logical key, classify the heat (low cardinality, sequential, popular
  entity, uniform) and recommend N per hot logical key.

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
