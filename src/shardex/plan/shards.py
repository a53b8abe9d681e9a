"""Shard-count sizing: how many shards each logical key needs, and whether the table keeps up.

Pure arithmetic, no I/O. A value written at ``peak`` writes a second, each costing
``units`` capacity units and ``amplification`` writes (2 for a transactional write,
more when several index rows change), needs the smallest N with::

    peak * units * amplification * headroom <= N * ceiling

where ``ceiling`` is the store's per-partition write ceiling. Values whose load fits
one partition keep N = 1 (no suffix). The amplification follows the layout unless
given (``MODES``): in index-table mode shardex writes each entry in a
TransactWriteItems, which costs twice (2); in GSI mode DynamoDB writes the index
entry from the application's own write (1); on Azure Table Storage (``azure``) a write
is about 4 entity writes on its shard key's partition (the row and its mirror, written
and then committed: ``docs/azure.md``), against 2,000 entities a second a partition.

N cures a hot partition, not a small table: ``plan_shards`` also adds up every write the
layout makes at the table level, the entries of every value and one placement record
per item written (``item_writes``, in the same transaction: the ``table`` layout's own
cost), and checks the total, with the headroom, against what the table serves at once
(its capacity profile, ``shardex.sim.profiles``: a new on-demand table 4,000 write
units a second, its warm throughput, a provisioned table its capacity, the per-table
quota) and says which limit binds: the partition (N sized it), the table (no N helps:
warm or provision the table), both, or neither. It also adds what each N costs on the
read side: Query calls and read units for a full listing (pages of at most 1 MB and
1,000 entries), and the fan-out latency the latency model expects for N requests
through the store's client (``pool`` connections at once).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shardex.capacity import (
    MAX_HEADROOM,
    QUERY_PAGE_BYTES,
    QUERY_PAGE_ITEMS,
    Ceiling,
    resolve_ceiling,
)
from shardex.documents import PLAN_SCHEMA, rounded
from shardex.errors import InvalidInput
from shardex.keys import validate_value
from shardex.plan.partitions import TRIALS
from shardex.plan.reads import checked_read_peaks, fit_reads, read_shards
from shardex.plan.table import (
    PLACEMENT_BYTES,
    TablePlan,
    advise_reads,
    placement_units,
    plan_table,
    reads_in_words,
)
from shardex.plan.verdict import (
    Fit,
    PartitionPlan,
    Verdict,
    fit_shards,
    judge,
    partition_ceiling,
    recommend,
    resources,
    with_setting,
)
from shardex.routing import MAX_SHARDS, Routing, ShardPolicy
from shardex.sim.latency import LatencyModel
from shardex.sim.partitions import check_shared
from shardex.sim.profiles import Profile, profile

__all__ = [
    "AMPLIFICATION",
    "CEILING_OF_MODE",
    "MODES",
    "PROFILE_OF_MODE",
    "Plan",
    "ValuePlan",
    "plan_shards",
    "sharded_routing",
    "shards_for",
]


MODES = ("table", "gsi", "azure", "cosmos")
# write units a logical write costs its shard key, per layout; Cosmos DB: the entry
# written, then committed (the cross-partition protocol Azure Table Storage's store uses,
# without its mirror rows: Cosmos DB pages in both orders)
AMPLIFICATION: Mapping[str, float] = {"table": 2.0, "gsi": 1.0, "azure": 4.0, "cosmos": 2.0}
# the capacity profile each layout is planned on unless one is given
PROFILE_OF_MODE: Mapping[str, str] = {"table": "dynamodb-on-demand", "gsi": "dynamodb-gsi",
                                      "azure": "azure-tables", "cosmos": "cosmos"}
_PROFILES = PROFILE_OF_MODE
# the per-partition ceiling each layout is planned against unless one is given
CEILING_OF_MODE: Mapping[str, str] = {"table": "dynamodb", "gsi": "dynamodb",
                                      "azure": "azure-tables", "cosmos": "cosmos"}


def shards_for(peak: float, *, ceiling: float, units: float = 1.0,
               amplification: float = 1.0, headroom: float = 1.5) -> int:
    """Return the smallest N with peak*units*amplification*headroom <= N*ceiling.

    Raises InvalidInput for a negative peak, non-positive units, amplification or
    ceiling, a headroom below 1, or a load that needs more than 4096 shards.
    """
    for name, number, least in (("peak", peak, 0.0), ("ceiling", ceiling, None),
                                ("units", units, None), ("amplification", amplification, None),
                                ("headroom", headroom, None)):
        if not math.isfinite(number) or (number < least if least is not None else number <= 0):
            raise InvalidInput(
                f"{name} must be a finite number {'>= 0' if least is not None else '> 0'}, "
                f"got {number}")
    if not 1 <= headroom <= MAX_HEADROOM:
        raise InvalidInput(f"headroom is a multiplier on the peak, from 1 to "
                           f"{MAX_HEADROOM:g} (1.5: 50% to spare), got {headroom:g}")
    ratio = peak * units * amplification * headroom / ceiling
    if not ratio <= MAX_SHARDS:  # also an overflow to infinity
        # written out, not '5e+06 ... needs 7.5e+03 shards' (past a trillion, as a float
        # writes it: digits no one reads)
        needs = (f"{math.ceil(round(ratio, 9)):,} shards" if ratio < 1e12 else
                 f"{ratio:.3g} shards") if math.isfinite(ratio) else \
            "more shards than a float can count"
        raise InvalidInput(
            # worded for writes and for the write units a diagnosis measured alike
            f"a peak of {_figure(peak)} a second, {units * amplification:g} write unit(s) "
            f"each, x{headroom:g} headroom, needs {needs} of {_figure(ceiling)} units/s, "
            f"over the limit of {MAX_SHARDS:,}; isolate this key on a dedicated path instead")
    # Round away float noise (3000*1.1/1100 is 3.0000000000000004) before the ceiling.
    return max(1, math.ceil(round(ratio, 9)))


def _figure(number: float) -> str:
    """``number`` with its thousands grouped (5,000,000, 0.5), as a float past a trillion."""
    if number >= 1e12:
        return f"{number:.3g}"
    if number == int(number):
        return f"{number:,.0f}"
    return f"{number:,.2f}".rstrip("0").rstrip(".") if number >= 1000 else f"{number:.4g}"


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
      first page) from the latency model: the slowest of N requests, or, with N above
      ``fanout_pool`` (the client's pool), N requests through that many connections.
    - ``read_units_per_s``: its measured read units a second at the peak, as the store
      charged them (None: not measured); ``read_shards`` the smallest N with
      ``read_units_per_s x headroom <= N x ceiling.read_units`` (a listing's reads spread
      over the N shard keys), which ``shards`` is at least.
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
    read_units_per_s: float | None = None
    read_shards: int | None = None
    fanout_pool: int | None = None

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
            "fanout_pool": self.fanout_pool,
            "read_units_per_s": self.read_units_per_s,
            "read_shards": self.read_shards,
        }


@dataclass(frozen=True, slots=True)
class Plan:
    """Per-value shard counts with their read-side costs, the table's load, and the inputs.

    ``mode`` is the layout planned for; ``amplification_given`` says whether the
    amplification was given or followed from the mode; ``table`` is every write the
    layout makes against what the table serves (``TablePlan``); ``partitions`` where the
    shard keys fall (``PartitionPlan``, one per resource); ``verdict`` whether the table
    keeps up at the peak (``Verdict``); ``profile`` the capacity model it was judged on
    (what ``plan --verify`` simulates).
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
    table: TablePlan | None = None
    partitions: tuple[PartitionPlan, ...] = ()
    verdict: Verdict | None = None
    profile: Profile | None = None
    namespace: str = "index"
    default_from: str | None = None

    @property
    def binds(self) -> str:
        """Which limit binds: ``partition``, ``table``, ``both`` or ``none``."""
        return self.table.binds if self.table is not None else (
            "partition" if any(p.sharded for p in self.values.values()) else "none")

    def routing(self, *, version: int = 1) -> Routing:
        """Return a routing that shards every value whose plan needs N > 1 (hash strategy);
        ``default_from`` names the value whose N is the default's (a time bucket of
        sequential keys: every bucket, the ones to come too, takes it)."""
        default = self.values.get(self.default_from) if self.default_from else None
        return Routing(overrides={v: ShardPolicy(shards=p.shards)
                                  for v, p in self.values.items()
                                  if p.sharded and v != self.default_from},
                       default=ShardPolicy(shards=default.shards)
                       if default is not None and default.sharded else ShardPolicy(),
                       version=version)

    def to_dict(self) -> dict[str, Any]:
        """The ``shardex.plan/1`` document ``shardex plan --json`` prints (docs/json.md),
        rounded once: the inputs, ``values`` (value: its plan), and ``routing``."""
        doc: dict[str, Any] = rounded({
            "schema": PLAN_SCHEMA, "mode": self.mode, "amplification": self.amplification,
            "amplification_from": "given" if self.amplification_given else "mode",
            # on one budget of reads and writes (Azure, Cosmos DB) the reads are held to the
            # write figure, whatever ceiling was named: the figure planned with, as the
            # text says it (a dynamodb ceiling's 3,000 read units read here, unused)
            "ceiling": {"name": self.ceiling.name, "write_units_per_s": self.ceiling.write_units,
                        "read_units_per_s": self.ceiling.write_units
                        if self.profile is not None and self.profile.shared_units
                        else self.ceiling.read_units},
            "headroom": self.headroom, "item_bytes": self.item_bytes,
            "read_item_bytes": self.read_item_bytes, "consistent": self.consistent,
            "values": {value: p.to_dict() for value, p in self.values.items()},
            "table": None if self.table is None else self.table.to_dict(),
            "binds": self.binds,
            "partitions": [p.to_dict() for p in self.partitions],
            "verdict": None if self.verdict is None else self.verdict.to_dict(),
            "routing": self.routing().to_dict()})
        return doc


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidInput(f"{name} must be an integer > 0, got {value!r}")
    return value


def _listing_cost(items: int, shards: int, item_bytes: int, consistent: bool,
                  model: Profile) -> tuple[int, float]:
    """Return (pages per shard, read units) of listing ``items`` spread over ``shards``.

    Each shard holds about ``ceil(items / shards)`` items and returns them in pages of
    at most one MB (DynamoDB's Query page) and 1,000 entries (shardex's stores' page); a
    page is charged as ``model``'s store charges it (``Profile.read_cost``: DynamoDB over
    its bytes, rounded once; Azure Table Storage by entity; Cosmos DB in RU), strongly
    consistent only where the caller asks and the store reads so (a GSI never does).
    """
    consistent = consistent and model.consistent
    per_shard = -(-items // shards)
    per_page = max(1, min(QUERY_PAGE_ITEMS, QUERY_PAGE_BYTES // item_bytes))
    full, rest = divmod(per_shard, per_page)
    pages = max(1, full + (1 if rest else 0))
    units = full * model.read_cost(per_page * item_bytes, per_page, consistent)
    if rest or not full:
        units += model.read_cost(rest * item_bytes, rest, consistent)
    return pages, shards * units


def plan_shards(peaks: Mapping[str, float], *, item_bytes: int = 1024,
                ceiling: str | float | Ceiling | None = None, headroom: float = 1.5,
                amplification: float | None = None, read_item_bytes: int | None = None,
                listing_items: int | Mapping[str, int] | None = None,
                consistent: bool = True, latency: LatencyModel | None = None,
                mode: str = "table", table: Profile | None = None,
                item_writes: float | None = None, partitions: int | None = None,
                namespace: str = "index",
                read_peaks: Mapping[str, float] | None = None,
                pool: int | None = None, floors: Mapping[str, int] | None = None) -> Plan:
    """Plan N for each value of ``peaks`` (value -> peak writes a second), its read cost,
    the table's partitions and the one verdict: the sizing function other code calls.

    Inputs: per-value peak entry writes a second, the item size, the layout (``mode``)
    and the table's facts (``table``: a capacity profile, its warm or provisioned
    throughput, quotas and assumptions; ``partitions`` overrides its partition count).
    Result (``Plan``): N per value (``values[v].shards``, ``routing()``), the partitions'
    busiest load (``partitions``) and the verdict with its reasons (``verdict``).

    ``ceiling`` defaults to the mode's (``CEILING_OF_MODE``). N starts as the smallest
    with ``peak x units(item_bytes) x amplification x headroom
    <= N x ceiling.write_units`` (values that fit one partition keep N = 1) and grows while
    the busiest partition, at the p99 of hash placements, would pass its ceiling with the
    headroom (``shardex.plan.verdict.fit_shards``); placements are drawn over index names
    starting at ``namespace``. ``read_peaks`` (value -> its measured read units a second,
    as the store charged them; a value left out was not measured: None in its plan, no
    reads counted) sets a floor on N: the
    smallest with ``read_peak x headroom <= N x ceiling.read_units``, a listing's reads
    spread over the N shard keys; N then grows, as for the writes, while the busiest
    partition's reads at the p99 pass its read ceiling, and the reads count against the
    table's read limit. ``floors`` (value -> N) is the least N of a value, measured
    elsewhere (a diagnosis's recommendation for a key throttled below the ceiling, or
    already sharded unevenly). The
    amplification defaults to that of ``mode`` (AMPLIFICATION: 2 for ``table``, 1
    for ``gsi``, 4 for ``azure``, 2 for ``cosmos``). Read-side costs use
    ``read_item_bytes`` (default ``item_bytes``),
    ``listing_items`` (entries in a full listing, for all values or per value) and
    ``latency`` (default ``LatencyModel()``: 4 ms median, 25 ms p99); a fan-out wider
    than ``pool`` (the requests the store's client carries at once; None: every shard
    key at once) is priced through that many connections. The table-level
    check (``Plan.table``) runs on ``table`` (a capacity profile; default: a new
    on-demand table, ``dynamodb-gsi`` in GSI mode, ``azure-tables`` for ``azure``) with
    ``item_writes`` items written a second (default: the sum of the peaks, each entry
    written by its own item write; a move writes two entries for one item). Raises InvalidKey
    for a value that cannot be a logical key, InvalidInput for a negative or non-finite peak
    or read peak, a read peak of a value with no peak, a non-positive size, headroom or
    amplification, an unknown ceiling or mode, or a value that needs more than 4096 shards.
    """
    if mode not in MODES:
        raise InvalidInput(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    given = amplification is not None
    if amplification is None:
        amplification = AMPLIFICATION[mode]
    bound = resolve_ceiling(CEILING_OF_MODE[mode] if ceiling is None else ceiling)
    size = _positive_int("item bytes", item_bytes)
    read_size = size if read_item_bytes is None else _positive_int("read item bytes",
                                                                  read_item_bytes)
    model = latency if latency is not None else LatencyModel()
    if pool is not None and (isinstance(pool, bool) or not isinstance(pool, int) or pool < 1):
        raise InvalidInput(f"pool must be an integer >= 1 (connections), got {pool!r}")

    def fanout(n: int, q: float) -> float:
        return model.fanout_quantile(n, q) if pool is None else model.pooled_quantile(n, pool, q)
    for name, number, least in (("headroom", headroom, 1.0),
                                ("amplification", amplification, 0.0)):
        if isinstance(number, bool) or not isinstance(number, int | float) \
                or not math.isfinite(number) or number <= 0 or number < least:
            raise InvalidInput(f"{name} must be a finite number "
                               f"{'>= 1 (a multiplier on the peak)' if least else '> 0'}, "
                               f"got {number!r}")
    if not isinstance(peaks, Mapping) or not peaks:
        raise InvalidInput("give at least one value and its peak writes a second")
    if listing_items is not None and not isinstance(listing_items, Mapping):
        listing_items = dict.fromkeys(peaks, listing_items)
    unknown = sorted(set(listing_items or ()) - set(peaks))
    if unknown:
        raise InvalidInput(f"listing size given for {', '.join(map(repr, unknown))}, "
                           "which has no peak")
    reads = checked_read_peaks(read_peaks, peaks)
    base_model = table or profile(_PROFILES[mode])
    # on one budget of reads and writes, the ceiling's write figure is the budget
    read_bound = bound.write_units if base_model.shared_units else bound.read_units
    if (base_model.write_ceiling, base_model.read_ceiling) != (bound.write_units, read_bound):
        base_model = base_model.replace(write_ceiling=bound.write_units,
                                        read_ceiling=read_bound)
    if partitions is not None:
        base_model = base_model.replace(partitions=partitions)
    # the simulation counts what the plan counts: entry writes times the amplification
    model_ = base_model.replace(entry_writes=amplification / base_model.place_cost)
    check_shared(model_)  # as the simulation of it would: planned, it read "keeps up"
    units = model_.write_cost(size)
    base: dict[str, int] = {}
    read_base: dict[str, int] = {}
    for value, peak in peaks.items():
        validate_value(value)
        if isinstance(peak, bool) or not isinstance(peak, int | float):
            raise InvalidInput(f"peak of {value!r} must be a number of writes/s, got {peak!r}")
        try:
            base[value] = shards_for(float(peak), ceiling=bound.write_units, units=units,
                                     amplification=amplification, headroom=headroom)
        except InvalidInput as exc:
            raise InvalidInput(f"{value}: {exc}") from exc
        least = (floors or {}).get(value, 1)
        if isinstance(least, bool) or not isinstance(least, int) or not 1 <= least <= MAX_SHARDS:
            raise InvalidInput(f"least N of {value!r} must be an integer from 1 to "
                               f"{MAX_SHARDS}, got {least!r}")
        base[value] = max(base[value], least)
        if value in reads:
            read_base[value] = read_shards(value, reads[value], bound.read_units, headroom)
            base[value] = max(base[value], read_base[value])
            if model_.shared_units:
                # reads and writes draw on one budget (Cosmos DB's RU): N takes both
                base[value] = max(base[value], read_shards(
                    value, reads[value] + float(peak) * units * amplification,
                    bound.write_units, headroom))
        items = None if listing_items is None else listing_items.get(value)
        if items is not None and (isinstance(items, bool) or not isinstance(items, int)
                                  or items < 0):
            raise InvalidInput(f"listing size of {value!r} must be an integer >= 0, "
                               f"got {items!r}")
    if item_writes is None:
        item_writes = sum(float(peak) for peak in peaks.values())
    elif isinstance(item_writes, bool) or not isinstance(item_writes, int | float) \
            or not math.isfinite(item_writes) or item_writes < 0:
        raise InvalidInput(f"item writes must be a finite number >= 0, got {item_writes!r}")
    writes = {value: float(peak) * units * amplification for value, peak in peaks.items()}
    locates = float(item_writes) * model_.read_cost(PLACEMENT_BYTES, 1, True)
    count = model_.initial_partitions
    placements = placement_units(model_, float(item_writes))
    # the values that read: a key with no reads takes no read units where it hashes
    read_loads = {value: read for value, read in reads.items() if read > 0}
    loads = writes
    if model_.shared_units:
        # one budget (Cosmos DB's RU): each partition takes a key's reads with its writes,
        # and the locates with the placement records; no read ceiling of their own
        loads = {value: load + read_loads.get(value, 0.0) for value, load in writes.items()}
        placements, read_loads = placements + locates, {}
    entry_spread = 0.0 if model_.layout == "gsi" or not count else placements / count
    bound_units = partition_ceiling(model_, count)
    shards, fitted = fit_shards(loads, base, partitions=count, ceiling=bound_units,
                                spread=entry_spread, headroom=headroom, namespace=namespace,
                                trials=TRIALS)
    if not fitted and headroom > 1:
        # no N leaves the headroom: the N that takes the peak itself, if one does
        shards, _ = fit_shards(loads, base, partitions=count, ceiling=bound_units,
                               spread=entry_spread, headroom=1.0, namespace=namespace,
                               trials=TRIALS)
    if read_loads:
        # the reads on the same shard keys, from the N the writes fitted: more of them
        # where a partition's reads at the p99 pass its read ceiling
        shards, read_fitted = fit_reads(model_, read_loads, base, shards, count=count,
                                        locates=locates, headroom=headroom,
                                        namespace=namespace)
    else:
        read_fitted = True
    plans: dict[str, ValuePlan] = {}
    for value, peak in peaks.items():
        n = shards[value]
        items = None if listing_items is None else listing_items.get(value)
        pages, listing_units = (1, None) if items is None else _listing_cost(
            items, n, read_size, consistent, model_)
        load = writes[value]
        plans[value] = ValuePlan(
            value=value, peak=float(peak), shards=n, units_per_item=units,
            write_units_per_s=load, required_units_per_s=load * headroom,
            units_per_shard_per_s=load / n, shard_load=load / n / bound.write_units,
            queries_per_listing=n * pages, pages_per_shard=pages, listing_items=items,
            listing_read_units=listing_units,
            fanout_p50_ms=1000.0 * fanout(n, 0.5), fanout_p99_ms=1000.0 * fanout(n, 0.99),
            read_units_per_s=reads.get(value), read_shards=read_base.get(value),
            fanout_pool=pool if pool is not None and n > pool else None)
    table_plan = plan_table(plans, model_, float(item_writes), float(headroom), mode)
    parts = resources(model_, loads, shards, placements=placements, headroom=headroom,
                      namespace=namespace, reads=read_loads, locates=locates)
    total = table_plan.entry_units_per_s + table_plan.placement_units_per_s \
        if mode != "gsi" else max(table_plan.entry_units_per_s,
                                  table_plan.placement_units_per_s)
    total_reads = table_plan.asked_read_units_per_s
    if model_.shared_units:  # one budget: the table's reads are asked of it with the writes
        total, total_reads = total + total_reads, 0.0
    # a larger table for the writes only when they need one: a read limit that binds is
    # raised by its own setting (warm_read, provisioned_read), which a write setting leaves
    needs_more = not fitted or not all(p.fits for p in parts if p.direction == "write") \
        or table_plan.write_binds

    def fit(table: Profile, crowd: bool, trials: int) -> dict[str, int] | None:
        """N as the plan of ``table`` sizes it (the writes', grown for the reads), if the
        writes' partitions take it, and the reads' too when ``crowd``."""
        partitions = table.initial_partitions
        sized, fits = fit_shards(
            loads, base, partitions=partitions, ceiling=partition_ceiling(table, partitions),
            spread=0.0 if table.layout == "gsi" or not partitions else placements / partitions,
            headroom=headroom, namespace=namespace, trials=trials)
        if not fits:
            return None
        if read_loads:
            sized, fits = fit_reads(table, read_loads, base, sized, count=partitions,
                                    locates=locates, headroom=headroom, namespace=namespace,
                                    trials=trials)
            if crowd and not fits:
                return None
        held = resources(table, loads, sized, placements=placements, headroom=headroom,
                         namespace=namespace, reads=read_loads, locates=locates,
                         trials=trials)
        return sized if all(p.fits for p in held if crowd or p.direction == "write") \
            else None

    # the writes keep up at the peak, the table's headroom aside: a read setting that
    # ends the reads' throttling is advice enough where no write setting is found
    margin_only = fitted and all(p.fits for p in parts if p.direction == "write") \
        and total <= table_plan.limit_write_units_per_s
    advice, read_advice, advised = _advise(
        model_, fit, writes=needs_more, margin_only=margin_only,
        crowded=not all(p.fits for p in parts if p.direction == "read"),
        read_advice=advise_reads(model_, table_plan), total=total,
        total_reads=total_reads, headroom=headroom)
    verdict = judge(model_, parts, table_units=total,
                    table_limit=table_plan.limit_write_units_per_s,
                    limited_by=table_plan.limited_by,
                    read_units=total_reads,
                    read_limit=table_plan.limit_read_units_per_s, headroom=headroom,
                    fitted=fitted and read_fitted, recommendation=advice,
                    read_recommendation=read_advice, advised_shards=advised, planned=shards,
                    reads_are=reads_in_words(table_plan))
    return Plan(values=plans, ceiling=bound, item_bytes=size, read_item_bytes=read_size,
                headroom=float(headroom), amplification=float(amplification),
                consistent=consistent, latency=model, mode=mode, amplification_given=given,
                table=table_plan, partitions=tuple(parts), verdict=verdict, profile=model_,
                namespace=namespace)


def _advise(model: Profile, fit: Fit, *, writes: bool, crowded: bool,
            read_advice: tuple[str, float] | None, total: float, total_reads: float,
            headroom: float, margin_only: bool = False
            ) -> tuple[tuple[str, float] | None, tuple[str, float] | None,
                       dict[str, int] | None]:
    """The settings that avoid the throttling, and N on the table they start, as that
    table is planned (``fit``): (write setting, read setting, N), N None when the table
    the settings start does not keep up (or none is advised): no setting is then said to
    avoid it.

    ``read_advice``: the read setting that serves the table's read limit (if it binds);
    ``writes``: whether the writes need a larger table; ``crowded``: whether the values'
    reads crowd a partition, which a table of more partitions spreads (the write
    setting's, or a read setting's: cheaper, three times the read units a partition);
    ``margin_only``: the writes keep up at the peak and only the table's headroom is
    short, so where no write setting is found (a partition count given) the read setting
    is still said to avoid the reads' throttling (it named none).
    """
    try:
        table = model if read_advice is None else with_setting(model, *read_advice)
    except InvalidInput:  # a table past the partitions the model places: none is advised
        return None, read_advice, None
    advice = None
    if writes:
        found = recommend(table, fit, total=total, headroom=headroom)
        if found is not None:
            advice = found[:2]
            table = with_setting(table, *advice)
        elif read_advice is None or not margin_only:
            return None, read_advice, None
    if advice is None and read_advice is None and not crowded:
        return None, None, None
    held = fit(table, True, TRIALS)
    if held is not None:
        return advice, read_advice, held  # the reads fit the table too, crowded or not
    spreading = recommend(table, fit, total=total_reads, headroom=headroom, write=False)
    if spreading is None:
        return advice, read_advice, None
    name, least, sized = spreading
    return advice, (name, max(least, read_advice[1] if read_advice else 0.0)), sized
