"""diagnose on Spark: the heat of logs too large for one machine (the ``spark`` extra).

``read_spark`` reads the sources ``shardex diagnose`` reads (access logs as CSV, JSON
Lines or Parquet; CloudTrail files; Contributor Insights reports), on local paths or
URIs Spark reads (``s3a://``), validates and aggregates them per key and second in
Spark with the one definition of ``shardex.heat.aggregate`` and ``heat.tables``, and
gives the HeatProfile the shared classification and report read:
``shardex.heat.report.diagnose(paths, engine="spark")`` is ``shardex diagnose
--engine spark``, and ``shardex.heat.spark.job`` the spark-submit job (a Glue or EMR
step). pyspark is imported when Spark is used, never by importing this package.
"""

from __future__ import annotations

from shardex.heat.spark.read import SparkLogs, is_remote, read_spark
from shardex.heat.spark.session import local_session

__all__ = ["SparkLogs", "is_remote", "local_session", "read_spark"]
