"""The JSON documents shardex prints: their schema names and the one rounding rule.

Every ``--json`` output carries ``"schema": "shardex.<name>/1"`` (docs/json.md
describes each). Numbers are rounded once, when the document is built, by
``rounded``: a float to ``DECIMALS`` places (a float that is a whole number stays a
float), integers and every other value as they are, so a figure never carries
two roundings or float noise such as ``0.30000000000000004``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["DECIMALS", "DEMO_SCHEMA", "DIAGNOSE_SCHEMA", "PLAN_SCHEMA",
           "ROUTING_RECORD_SCHEMA", "SERVE_SCHEMA", "SIMULATE_AUTOPILOT_SCHEMA",
           "SIMULATE_SCHEMA", "rounded"]

DEMO_SCHEMA = "shardex.demo/1"
DIAGNOSE_SCHEMA = "shardex.diagnose/1"
ROUTING_RECORD_SCHEMA = "shardex.routing-record/1"
SERVE_SCHEMA = "shardex.serve/1"
PLAN_SCHEMA = "shardex.plan/1"
SIMULATE_SCHEMA = "shardex.simulate/1"
SIMULATE_AUTOPILOT_SCHEMA = "shardex.simulate.autopilot/1"
DECIMALS = 4


def rounded(value: Any) -> Any:
    """Return ``value`` with every float in it (through dicts, lists, tuples) rounded.

    Floats go to ``DECIMALS`` places; NaN and infinities, which JSON cannot hold,
    become None. Tuples come back as lists, mappings as dicts.
    """
    if isinstance(value, bool) or value is None or isinstance(value, int | str):
        return value
    if isinstance(value, float):
        return round(value, DECIMALS) if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(v) for v in value]
    return value
