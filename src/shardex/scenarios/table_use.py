"""A table's (or GSI's) use of one direction, second by second, and its limit in words.

``simulate`` and the autopilot's runs (``shardex.scenarios.autopilot``) both record what
each of the engine's tables was asked, used and refused each second (``TableUse.record``,
``record_tables``), and say a limit that bound with the setting that avoids it
(``served_words``, ``avoid_words``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from shardex.sim.fluid import FluidEngine
from shardex.sim.profiles import Profile

__all__ = ["TableUse", "avoid_words", "limit_words", "record_tables", "served_words",
           "tables_of"]

LIMITS = {
    "KeyRangeThroughputExceeded": "its warm throughput, or twice its previous peak",
    "AccountLimitExceeded": "the per-table quota",
    "MaxOnDemandThroughputExceeded": "its configured maximum",
    "ProvisionedThroughputExceeded": "its provisioned capacity and burst",
}


@dataclass(slots=True)
class TableUse:
    """One table's (or GSI's) use of one direction, second by second."""

    resource: str
    write: bool
    used: list[float] = field(default_factory=list)
    asked: list[float] = field(default_factory=list)
    limit: list[float] = field(default_factory=list)
    kind: list[str] = field(default_factory=list)
    refused_seconds: int = 0
    # seconds it refused nothing itself but was asked past its limit: its partitions
    # refused first, or (``held_seconds``, writes) throttled reads held the writes back
    over_seconds: int = 0
    held_seconds: int = 0
    # reads and writes on one budget (``Profile.shared_units``): this is both directions
    both: bool = False

    @property
    def direction(self) -> str:
        return "both" if self.both else "write" if self.write else "read"

    @property
    def asks(self) -> str:
        """What it is asked, in words: ``writes``, ``reads``, ``reads and writes``."""
        return "reads and writes" if self.both else f"{self.direction}s"

    @property
    def peak_asked(self) -> float:
        return max(self.asked, default=0.0)

    @property
    def served(self) -> float:
        """The least limit it had: what it served in the seconds it bound."""
        return min(self.limit) if self.limit else 0.0

    def record(self, used: float, refused: float, held: float, limit: float, kind: str,
               asked: float | None = None) -> None:
        """One second: the units it took and refused, those throttled reads held back
        (asked all the same once reads are served), and its limit with what set it.
        ``asked`` is what the load asked of it, if not all of those: a load whose
        refused operations are tried again asks its first attempts (a table that serves
        them refuses nothing, so nothing is tried again)."""
        asked = used + refused + held if asked is None else asked
        self.used.append(used)
        self.asked.append(asked)
        self.limit.append(limit)
        self.kind.append(kind)
        if refused > 1e-9 and used >= limit * 0.999:
            self.refused_seconds += 1
        elif asked > limit * (1 + 1e-9):
            self.over_seconds += 1
            self.held_seconds += held > 1e-9

    def to_dict(self) -> dict[str, Any]:
        """Its entry in a document's ``tables`` (docs/json.md), unrounded."""
        return {
            "resource": self.resource, "direction": self.direction,
            "limit_first_s": self.limit[0] if self.limit else None,
            "limit_last_s": self.limit[-1] if self.limit else None,
            "peak_used_per_s": max(self.used, default=0.0),
            "peak_asked_per_s": self.peak_asked,
            "headroom": max(0.0, min((1.0 - u / lim for u, lim in zip(
                self.used, self.limit, strict=True) if lim > 0), default=1.0)),
            "seconds_refused": self.refused_seconds,
            "limited_by": self.kind[-1] if self.kind else None}


def tables_of(engine: FluidEngine) -> list[TableUse]:
    """A ``TableUse`` for each of the engine's tables and direction: writes, then reads;
    one for both where they draw on one budget (``Profile.shared_units``)."""
    if engine.profile.shared_units:
        return [TableUse(resource.kind, True, both=True) for resource in engine.resources]
    return [TableUse(resource.kind, write) for resource in engine.resources
            for write in (True, False)]


def record_tables(engine: FluidEngine, tables: Sequence[TableUse],
                  held: Sequence[float] | None,
                  asked: Sequence[float] | None = None) -> None:
    """Record the second the engine just stepped in ``tables`` (``tables_of``'s order),
    with the write units on each resource that ``held`` (or nothing) held back and, if
    given, what each resource was ``asked`` (``TableUse.record``; writes then reads per
    resource, summed where they share one budget)."""
    for index, resource in enumerate(engine.resources):
        table = resource.table
        held_here = held[index] if held else 0.0
        if engine.profile.shared_units:
            limit, kind = table.limit(True)
            tables[index].record(
                table.written + table.read, table.refused_write + table.refused_read,
                held_here, limit, kind,
                None if asked is None else asked[2 * index] + asked[2 * index + 1])
            continue
        for at, write in ((2 * index, True), (2 * index + 1, False)):
            limit, kind = table.limit(write)
            tables[at].record(table.written if write else table.read,
                              table.refused_write if write else table.refused_read,
                              held_here if write else 0.0, limit, kind,
                              None if asked is None else asked[at])


def limit_words(table: TableUse, profile: Profile) -> str:
    """Its limit, named: "the table's write limit", "the storage account's limit (reads and
    writes)"."""
    resource = "storage account" if profile.store == "azure-tables" else table.resource
    return f"the {resource}'s " + (
        "limit (reads and writes)" if table.both else f"{table.direction} limit")


def served_words(table: TableUse, profile: Profile) -> str:
    """What it served at its limit, and what set that: "4,000 units a second (...)"."""
    if profile.store == "azure-tables":
        return (f"{table.served:,.0f} entities a second (the storage account's scalability "
                "target)")
    why = LIMITS.get(table.kind[0] if table.kind else "", "its limit")
    return f"{table.served:,.0f} units a second ({why})"


def avoid_words(table: TableUse, profile: Profile, peak: float | None = None, *,
                sure: bool = True) -> str:
    """What avoids its limit binding at ``peak`` (its own peak asked by default), to
    follow a clause: "; warm_write of at least 32,000 avoids it". Not ``sure`` (a run
    whose refused operations are tried again, asking more than ``peak`` of whatever
    limit refused them): the setting that sets the limit, with no figure said to avoid
    it ("; warm_write sets what it serves").
    """
    peak = table.peak_asked if peak is None else peak
    if profile.store == "azure-tables":
        # a storage account's target is fixed: no setting raises it (plan says so)
        served = table.served
        accounts = max(1, math.ceil(round(peak / served, 6))) if served else 1
        if not sure:
            return ("; a storage account's target is fixed: spread the index over more "
                    "storage accounts or lower the load")
        return (f"; spread the index over at least {accounts:,} storage accounts or lower "
                "the load")
    name = profile.limit_setting(table.write)
    quota = profile.quota_write if table.write else profile.quota_read
    past = f"past the per-table quota of {quota:,.0f}: raise it too" if peak > quota else ""
    if not sure:
        return f"; {name} sets what it serves" + (f" ({past})" if past else "")
    return (f"; {name} of at least {math.ceil(round(peak, 6)):,} avoids it"
            + (f" ({past})" if past else ""))
