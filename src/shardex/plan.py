"""Shard-count sizing: how many shards each logical key needs.

Pure arithmetic, no I/O. A value written at ``peak`` writes a second, each costing
``units`` capacity units and ``amplification`` writes (2 for a transactional write,
more when several index rows change), needs the smallest N with::

    peak * units * amplification * headroom <= N * ceiling

where ``ceiling`` is the store's per-partition write ceiling. Values whose load fits
one partition keep N = 1 (no suffix).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from shardex.errors import InvalidInput
from shardex.routing import MAX_SHARDS, Routing, ShardPolicy

__all__ = ["CEILINGS", "Ceiling", "shards_for", "sharded_routing"]


@dataclass(frozen=True, slots=True)
class Ceiling:
    """A store's per-partition throughput ceiling, in its own units a second."""

    name: str
    write_units: float
    read_units: float
    unit: str


CEILINGS: Mapping[str, Ceiling] = {
    "dynamodb": Ceiling("dynamodb", 1000.0, 3000.0, "capacity units/s"),
    "azure-tables": Ceiling("azure-tables", 2000.0, 2000.0, "entities/s"),
    "cosmos": Ceiling("cosmos", 10000.0, 10000.0, "RU/s"),
}


def shards_for(peak: float, *, ceiling: float, units: float = 1.0,
               amplification: float = 1.0, headroom: float = 1.5) -> int:
    """Return the smallest N with peak*units*amplification*headroom <= N*ceiling.

    Raises InvalidInput for a negative peak, non-positive units, amplification,
    headroom or ceiling, or a load that needs more than 4096 shards.
    """
    for name, number, least in (("peak", peak, 0.0), ("ceiling", ceiling, None),
                                ("units", units, None), ("amplification", amplification, None),
                                ("headroom", headroom, None)):
        if not math.isfinite(number) or (number < least if least is not None else number <= 0):
            raise InvalidInput(
                f"{name} must be a finite number {'>= 0' if least is not None else '> 0'}, "
                f"got {number}")
    load = peak * units * amplification * headroom
    # Round away float noise (6000*1.5/1000 is 9.000000000000002) before the ceiling.
    shards = max(1, math.ceil(round(load / ceiling, 9)))
    if shards > MAX_SHARDS:
        raise InvalidInput(
            f"a peak of {peak:g} writes/s needs {shards} shards, over the limit of {MAX_SHARDS}; "
            "isolate this key on a dedicated path instead")
    return shards


def sharded_routing(peaks: Mapping[str, float], *, ceiling: float, units: float = 1.0,
                    amplification: float = 1.0, headroom: float = 1.5,
                    version: int = 1) -> Routing:
    """Return a routing that shards each value in ``peaks`` that needs it (hash strategy)."""
    overrides = {}
    for value, peak in peaks.items():
        n = shards_for(peak, ceiling=ceiling, units=units, amplification=amplification,
                       headroom=headroom)
        if n > 1:
            overrides[value] = ShardPolicy(shards=n)
    return Routing(overrides=overrides, version=version)
