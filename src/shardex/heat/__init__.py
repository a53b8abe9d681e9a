"""Heat: which keys carry the load, how close they come to a partition's ceiling, and why.

- ``HeatMeter`` counts a live store's traffic per shard key and logical key, in windows
  (it lives below the index, ``shardex.heatmeter``, as ``index.heat()`` reads it);
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

from shardex.counters.histogram import LatencyHistogram
from shardex.counters.spacesaving import Counted, SpaceSaving
from shardex.heat.classify import Classification, Thresholds, classify
from shardex.heat.profile import HeatProfile, KeyHeat
from shardex.heat.report import Diagnosis, Recommendation, diagnose, diagnose_stream
from shardex.heatmeter.meter import HeatMeter
from shardex.heatmeter.view import HeatSnapshot, HotKey, HotView, KeyMeter

__all__ = [
    "Classification",
    "Counted",
    "Diagnosis",
    "HeatMeter",
    "HeatProfile",
    "HeatSnapshot",
    "HotKey",
    "HotView",
    "KeyHeat",
    "KeyMeter",
    "LatencyHistogram",
    "Recommendation",
    "SpaceSaving",
    "Thresholds",
    "classify",
    "diagnose",
    "diagnose_stream",
]
