"""Metrics from the one metering path, for the tools operators watch.

- ``recorder``: ``MetricsRecorder``, a store-meter subscriber that counts requests,
  units, throttles (by reason), latency, fan-out width and hedges per index, per
  logical key and per shard key, in bounded labels (``labels.TopKeys``: the heaviest
  keys by a Space-Saving summary get their own label, the rest sum under ``other``);
- ``reshard``: ``ReshardProgress``, the gauges a reshard runner reports to;
- ``prometheus``: ``serve_prometheus``, a ``/metrics`` endpoint (prometheus-client);
- ``otel``: ``OpenTelemetryExporter``, the same figures as OpenTelemetry instruments;
- ``accesslog``: ``AccessLogWriter``, the metering written as access-log rows that
  ``shardex diagnose`` reads.

The exporters' clients come with ``pip install 'shardex[metrics]'``; the recorder and
the access-log writer need nothing beyond shardex.
"""

from __future__ import annotations

from shardex.metrics.accesslog import AccessLogWriter
from shardex.metrics.labels import OTHER, TopKeys
from shardex.metrics.recorder import Family, MetricsRecorder, Sample
from shardex.metrics.reshard import ReshardProgress

__all__ = ["AccessLogWriter", "Family", "MetricsRecorder", "OTHER", "ReshardProgress",
           "Sample", "TopKeys"]
