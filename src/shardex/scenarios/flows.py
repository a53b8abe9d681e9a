"""The flows one second of a workload offers the rate engine (``shardex.sim.fluid``).

``build`` makes them as the index makes its requests (``shardex.scenarios.simulate``
says how each operation is counted): per value and shard key a flow of puts and one of
deletes, each with its entry write and its share of the placement records; per move a
flow for each pair of shard keys; per value a flow of page reads on each shard key (its
first round's share, ``first_page``) and of its measured read units; the items'
placement reads (``locate``) and, for items with no entry write, their records.
``rates_at`` lists the workload's rates in the order ``build`` and ``operations`` read
them; ``held_units`` is what the writes held back by throttled locates ask of each
resource.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shardex.capacity import QUERY_PAGE_BYTES, QUERY_PAGE_ITEMS
from shardex.plan.table import PLACEMENT_BYTES  # the planner's: both count the same record
from shardex.scenarios.workload import Workload
from shardex.sim.fluid import Flow, Part
from shardex.sim.profiles import Profile

__all__ = ["Flows", "PAGE", "UNITS", "build", "first_page", "held_units", "operations",
           "page_units", "placed", "rates_at"]

# the ends a read flow counts towards: a page read of a shard key, a share of a
# value's measured read units on one
PAGE, UNITS = "read:", "units:"


def first_page(page: int, shards: int) -> int:
    """Entries the fan-out asks each shard for in its first round (``fanout.py``'s rule):
    its mean share of the page plus three standard deviations."""
    mean = (page + 1) / shards
    return min(page + 1, QUERY_PAGE_ITEMS, max(4, math.ceil(mean + 3 * math.sqrt(mean)) + 2))


def page_units(profile: Profile, page: int, shards: int, read_bytes: int) -> float:
    """Read units one shard key's share of a page read costs, fanned out ``shards`` ways:
    its first round (``first_page``) of entries of ``read_bytes``, as the profile reads."""
    nbytes = min(first_page(page, shards) * read_bytes, QUERY_PAGE_BYTES)
    return profile.read_cost(nbytes, max(1, nbytes // read_bytes), profile.consistent)


@dataclass(slots=True)
class Flows:
    """One second's flows, and what each one counts towards."""

    flows: list[Flow] = field(default_factory=list)
    # per flow: (value, shard key) pairs whose entry writes (or reads) it makes
    ends: list[tuple[tuple[str, str], ...]] = field(default_factory=list)
    # per flow, once counted: the counters it adds to (see _targets)
    targets: list[list[tuple[str, Any, Any, float]]] | None = None

    def add(self, flow: Flow, *ends: tuple[str, str]) -> None:
        if flow.rate > 0:
            self.flows.append(flow)
            self.ends.append(ends)


def rates_at(workload: Workload, now: float) -> tuple[float, ...]:
    """Every rate of the workload in the second starting at ``now``, in a fixed order."""
    out: list[float] = []
    for load in workload.values.values():
        if load.write_units is not None:
            out.append(load.write_units.at(now))
        else:
            out += (load.write.at(now), load.delete.at(now))
        out.append(load.read.at(now))
        if load.read_units is not None:
            out.append(load.read_units.at(now))
    out += (move.rate.at(now) for move in workload.moves)
    if workload.item_writes is not None:
        out.append(workload.item_writes.at(now))
    return tuple(out)


def build(workload: Workload, keys: Mapping[str, list[tuple[str, int]]], profile: Profile,
           rates: tuple[float, ...]) -> tuple[Flows, Flows]:
    """One second's read and write flows at ``rates`` (as ``rates_at`` lists them)."""
    entries = 1 if profile.layout == "gsi" else 0
    cost = profile.place_cost
    consistent = profile.consistent
    reads, writes = Flows(), Flows()
    ops = operations(workload, rates)
    items = ops if workload.item_writes is None else rates[-1]
    # each operation carries its share of the items' placement records (one each when
    # items are operations), so a refused locate holds back the writes it precedes
    share = items / ops if ops > 0 else 0.0
    placement = profile.write_cost(PLACEMENT_BYTES) * cost * share
    records = (Part(0, None, placement),) if placement > 0 else ()
    at = iter(rates)
    for value, load in workload.values.items():
        shards = keys[value]
        n = len(shards)
        entry = profile.write_cost(load.item_bytes) * cost * profile.entry_writes
        if load.write_units is not None:
            rate = next(at) / n
            for key, ident in shards:
                writes.add(Flow(rate, True, (Part(entries, ident, 1.0),)), (value, key))
        else:
            put, delete = next(at) / n, next(at) / n
            for key, ident in shards:
                writes.add(Flow(put, True, (Part(entries, ident, entry), *records)),
                           (value, key))
                writes.add(Flow(delete, True, (Part(entries, ident, entry), *records)),
                           (value, key))
        units = page_units(profile, load.page, n, load.read_item_bytes)
        rate = next(at)
        for key, ident in shards:
            reads.add(Flow(rate, False, (Part(entries, ident, units),), consistent),
                      (value, f"{PAGE}{key}"))
        if load.read_units is not None:
            # measured units, charged as the store charged them: strongly consistent, the
            # ceiling diagnose and plan size them against; spread over the shard keys
            rate = next(at) / n
            for key, ident in shards:
                reads.add(Flow(rate, False, (Part(entries, ident, 1.0),), True),
                          (value, f"{UNITS}{key}"))
    for move in workload.moves:
        rate = next(at)
        if rate <= 0:
            continue
        source, target = keys[move.source], keys[move.target]
        pairs = max(len(source), len(target))
        old = profile.write_cost(workload.values[move.source].item_bytes) * cost \
            * profile.entry_writes
        new = profile.write_cost(workload.values[move.target].item_bytes) * cost \
            * profile.entry_writes
        for i in range(pairs):
            (skey, sid), (tkey, tid) = source[i % len(source)], target[i % len(target)]
            writes.add(Flow(rate / pairs, True, (Part(entries, sid, old),
                                                 Part(entries, tid, new), *records)),
                       (move.source, skey), (move.target, tkey))
    if items > 0 and not records:
        # items written with no entry write to carry their records: a flow of their own
        writes.add(Flow(items, True, (Part(0, None, profile.write_cost(PLACEMENT_BYTES)
                                           * cost),)))
    if items > 0:
        reads.add(Flow(items, False, (Part(0, None, profile.read_cost(
            PLACEMENT_BYTES, 1, True)),)), ("", "locate"))
    return reads, writes


def operations(workload: Workload, rates: tuple[float, ...]) -> float:
    """Puts, deletes and moves a second at ``rates`` (as ``rates_at`` lists them): the
    operations that each write an item (a diagnosis's measured units are none)."""
    at, out = iter(rates), 0.0
    for load in workload.values.values():
        if load.write_units is not None:
            next(at)
        else:
            out += next(at) + next(at)
        next(at)  # its page reads
        if load.read_units is not None:
            next(at)  # its measured read units
    return out + sum(next(at) for _ in workload.moves)


def placed(flow: Flow) -> bool:
    """Whether ``flow`` carries placement records (parts spread over the table)."""
    return any(part.key is None for part in flow.parts)


def held_units(flows: list[Flow], sent: list[Flow], resources: int) -> list[float]:
    """The write units a second on each resource of ``flows`` that ``sent`` leaves out."""
    out = [0.0] * resources
    for flow, kept in zip(flows, sent, strict=True):
        if kept is not flow:
            for part in flow.parts:
                out[part.resource] += (flow.rate - kept.rate) * part.units
    return out
