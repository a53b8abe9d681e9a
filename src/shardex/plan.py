"""Shard-count sizing: how many shards each logical key needs.

Pure arithmetic, no I/O. A value written at ``peak`` writes a second, each costing
``units`` capacity units and ``amplification`` writes (2 for a transactional write,
more when several index rows change), needs the smallest N with::

    peak * units * amplification * headroom <= N * ceiling

where ``ceiling`` is the store's per-partition write ceiling. Values whose load fits
one partition keep N = 1 (no suffix). The amplification follows the layout unless
given (``MODES``): in index-table mode shardex writes each entry in a
TransactWriteItems, which costs twice (2); in GSI mode DynamoDB writes the index
entry from the application's own write (1). ``plan_shards`` adds what each N costs on the
read side: Query calls and read units for a full listing, and the fan-out latency the
latency model expects for N parallel requests.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shardex.capacity import QUERY_PAGE_BYTES, Ceiling, read_units, resolve_ceiling, write_units
from shardex.documents import PLAN_SCHEMA, rounded
from shardex.errors import InvalidInput
from shardex.keys import validate_value
from shardex.routing import MAX_SHARDS, Routing, ShardPolicy
from shardex.sim.latency import LatencyModel

__all__ = [
    "AMPLIFICATION",
    "MODES",
    "Plan",
    "ValuePlan",
    "plan_shards",
    "sharded_routing",
    "shards_for",
]


MODES = ("table", "gsi")
# write units a logical write costs its shard key, per layout
AMPLIFICATION: Mapping[str, float] = {"table": 2.0, "gsi": 1.0}


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
    ratio = peak * units * amplification * headroom / ceiling
    if not ratio <= MAX_SHARDS:  # also an overflow to infinity
        raise InvalidInput(
            f"a peak of {peak:g} writes/s needs {ratio:.3g} shards, over the limit of "
            f"{MAX_SHARDS}; isolate this key on a dedicated path instead")
    # Round away float noise (3000*1.1/1100 is 3.0000000000000004) before the ceiling.
    return max(1, math.ceil(round(ratio, 9)))


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


@dataclass(frozen=True, slots=True)
class ValuePlan:
    """The plan of one logical key: its N and what that N costs on the read side.

    - ``write_units_per_s``: peak x units per item x amplification (before headroom);
      ``required_units_per_s`` adds the headroom, and ``shards`` is the smallest N with
      ``required_units_per_s <= N x ceiling``.
    - ``queries_per_listing``: Query calls to list the whole value, N x pages per shard
      (one page per shard when no listing size is given).
    - ``listing_read_units``: read units of that listing, when its size is known.
    - ``fanout_p50_ms`` / ``fanout_p99_ms``: latency of one fan-out round (every shard's
      first page) from the latency model: the slowest of N requests.
    """

    value: str
    peak: float
    shards: int
    units_per_item: float
    write_units_per_s: float
    required_units_per_s: float
    units_per_shard_per_s: float
    shard_load: float
    queries_per_listing: int
    pages_per_shard: int
    listing_items: int | None
    listing_read_units: float | None
    fanout_p50_ms: float
    fanout_p99_ms: float

    @property
    def sharded(self) -> bool:
        """Whether the value needs more than one shard key."""
        return self.shards > 1

    def to_dict(self) -> dict[str, Any]:
        """The plan as JSON-ready values (``value`` is the key it is filed under)."""
        return {
            "shards": self.shards,
            "peak_writes_per_s": self.peak,
            "units_per_item": self.units_per_item,
            "write_units_per_s": self.write_units_per_s,
            "required_units_per_s": self.required_units_per_s,
            "units_per_shard_per_s": self.units_per_shard_per_s,
            "shard_load": self.shard_load,
            "queries_per_listing": self.queries_per_listing,
            "pages_per_shard": self.pages_per_shard,
            "listing_items": self.listing_items,
            "listing_read_units": self.listing_read_units,
            "fanout_p50_ms": self.fanout_p50_ms,
            "fanout_p99_ms": self.fanout_p99_ms,
        }


@dataclass(frozen=True, slots=True)
class Plan:
    """Per-value shard counts with their read-side costs, and the inputs they came from.

    ``mode`` is the layout planned for (``table`` or ``gsi``); ``amplification_given``
    says whether the amplification was given or followed from the mode.
    """

    values: Mapping[str, ValuePlan]
    ceiling: Ceiling
    item_bytes: int
    read_item_bytes: int
    headroom: float
    amplification: float
    consistent: bool
    latency: LatencyModel
    mode: str = "table"
    amplification_given: bool = True

    def routing(self, *, version: int = 1) -> Routing:
        """Return a routing that shards every value whose plan needs N > 1 (hash strategy)."""
        return Routing(overrides={v: ShardPolicy(shards=p.shards)
                                  for v, p in self.values.items() if p.sharded},
                       version=version)

    def to_dict(self) -> dict[str, Any]:
        """The ``shardex.plan/1`` document ``shardex plan --json`` prints (docs/json.md),
        rounded once: the inputs, ``values`` (value: its plan), and ``routing``."""
        doc: dict[str, Any] = rounded({
            "schema": PLAN_SCHEMA, "mode": self.mode, "amplification": self.amplification,
            "amplification_from": "given" if self.amplification_given else "mode",
            "ceiling": {"name": self.ceiling.name, "write_units_per_s": self.ceiling.write_units,
                        "read_units_per_s": self.ceiling.read_units},
            "headroom": self.headroom, "item_bytes": self.item_bytes,
            "read_item_bytes": self.read_item_bytes, "consistent": self.consistent,
            "values": {value: p.to_dict() for value, p in self.values.items()},
            "routing": self.routing().to_dict()})
        return doc


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidInput(f"{name} must be an integer > 0, got {value!r}")
    return value


def _listing_cost(items: int, shards: int, item_bytes: int,
                  consistent: bool) -> tuple[int, float]:
    """Return (pages per shard, read units) of listing ``items`` spread over ``shards``.

    Each shard holds about ``ceil(items / shards)`` items and returns them in pages of
    at most one MB (DynamoDB's Query page); a page is charged over its bytes, rounded once.
    """
    per_shard = -(-items // shards)
    per_page = max(1, QUERY_PAGE_BYTES // item_bytes)
    full, rest = divmod(per_shard, per_page)
    pages = max(1, full + (1 if rest else 0))
    units = full * read_units(per_page * item_bytes, consistent)
    if rest or not full:
        units += read_units(rest * item_bytes, consistent)
    return pages, shards * units


def plan_shards(peaks: Mapping[str, float], *, item_bytes: int = 1024,
                ceiling: str | float | Ceiling = "dynamodb", headroom: float = 1.5,
                amplification: float | None = None, read_item_bytes: int | None = None,
                listing_items: int | Mapping[str, int] | None = None,
                consistent: bool = True, latency: LatencyModel | None = None,
                mode: str = "table") -> Plan:
    """Plan N for each value of ``peaks`` (value -> peak writes a second) and its read cost.

    N is the smallest with ``peak x write_units(item_bytes) x amplification x headroom
    <= N x ceiling.write_units``; values that fit one partition keep N = 1. The
    amplification defaults to that of ``mode`` (AMPLIFICATION: 2 for ``table``, 1
    for ``gsi``). Read-side costs use ``read_item_bytes`` (default ``item_bytes``),
    ``listing_items`` (entries in a full listing, for all values or per value) and
    ``latency`` (default ``LatencyModel()``: 4 ms median, 25 ms p99). Raises InvalidKey
    for a value that cannot be a logical key, InvalidInput for a negative or non-finite peak, a
    non-positive size, headroom or amplification, an unknown ceiling or mode, or a
    value that needs more than 4096 shards.
    """
    if mode not in MODES:
        raise InvalidInput(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    given = amplification is not None
    if amplification is None:
        amplification = AMPLIFICATION[mode]
    bound = resolve_ceiling(ceiling)
    size = _positive_int("item bytes", item_bytes)
    read_size = size if read_item_bytes is None else _positive_int("read item bytes",
                                                                  read_item_bytes)
    model = latency if latency is not None else LatencyModel()
    for name, number in (("headroom", headroom), ("amplification", amplification)):
        if isinstance(number, bool) or not isinstance(number, int | float) \
                or not math.isfinite(number) or number <= 0:
            raise InvalidInput(f"{name} must be a finite number > 0, got {number!r}")
    if not isinstance(peaks, Mapping) or not peaks:
        raise InvalidInput("give at least one value and its peak writes a second")
    if listing_items is not None and not isinstance(listing_items, Mapping):
        listing_items = dict.fromkeys(peaks, listing_items)
    unknown = sorted(set(listing_items or ()) - set(peaks))
    if unknown:
        raise InvalidInput(f"listing size given for {', '.join(map(repr, unknown))}, "
                           "which has no peak")
    units = float(write_units(size))
    plans: dict[str, ValuePlan] = {}
    for value, peak in peaks.items():
        validate_value(value)
        if isinstance(peak, bool) or not isinstance(peak, int | float):
            raise InvalidInput(f"peak of {value!r} must be a number of writes/s, got {peak!r}")
        try:
            n = shards_for(float(peak), ceiling=bound.write_units, units=units,
                           amplification=amplification, headroom=headroom)
        except InvalidInput as exc:
            raise InvalidInput(f"{value}: {exc}") from exc
        items = None if listing_items is None else listing_items.get(value)
        if items is not None and (isinstance(items, bool) or not isinstance(items, int)
                                  or items < 0):
            raise InvalidInput(f"listing size of {value!r} must be an integer >= 0, "
                               f"got {items!r}")
        pages, listing_units = (1, None) if items is None else _listing_cost(
            items, n, read_size, consistent)
        load = float(peak) * units * amplification
        plans[value] = ValuePlan(
            value=value, peak=float(peak), shards=n, units_per_item=units,
            write_units_per_s=load, required_units_per_s=load * headroom,
            units_per_shard_per_s=load / n, shard_load=load / n / bound.write_units,
            queries_per_listing=n * pages, pages_per_shard=pages, listing_items=items,
            listing_read_units=listing_units,
            fanout_p50_ms=1000.0 * model.fanout_quantile(n, 0.5),
            fanout_p99_ms=1000.0 * model.fanout_quantile(n, 0.99))
    return Plan(values=plans, ceiling=bound, item_bytes=size, read_item_bytes=read_size,
                headroom=float(headroom), amplification=float(amplification),
                consistent=consistent, latency=model, mode=mode, amplification_given=given)
