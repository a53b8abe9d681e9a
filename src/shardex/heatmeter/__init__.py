"""The live heat meter: a store's traffic per shard key and logical key, in windows.

It reads the events every store reports on its meter (``shardex.stores.metered``) and
knows what the stores do not: which logical key a shard key belongs to. ``meter``
holds ``HeatMeter``; ``view`` the snapshot types it hands out (``HeatSnapshot``,
``HotView``), which ``index.heat()`` and the live page read.
"""

from __future__ import annotations

from shardex.heatmeter.meter import OTHER, HeatMeter
from shardex.heatmeter.view import HeatSnapshot, HotKey, HotView, KeyMeter

__all__ = ["HeatMeter", "HeatSnapshot", "HotKey", "HotView", "KeyMeter", "OTHER"]
