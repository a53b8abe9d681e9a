"""The table's side of a plan: every write and read the layout makes, at the table level,
against what the table (its GSI, in GSI mode) serves at once (``TablePlan``).

Pure arithmetic, no I/O; ``shardex.plan.shards.plan_shards`` adds it to each value's plan.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shardex.sim.profiles import Profile

if TYPE_CHECKING:
    from shardex.plan.shards import ValuePlan

__all__ = ["PLACEMENT_BYTES", "TablePlan", "advise_reads", "placement_units", "plan_table",
           "reads_in_words", "table_limit"]

# A placement record (the item's own record of where its entry is): well under 1 KB.
PLACEMENT_BYTES = 80


@dataclass(frozen=True, slots=True)
class TablePlan:
    """Every write the layout makes, at the table level, against what the table serves.

    - ``entry_units_per_s``: the values' entries, ``sum(write_units_per_s)``;
      ``placement_units_per_s``: one placement record per item write (``item_writes``),
      times the transaction cost in the ``table`` layout; ``write_units_per_s`` both,
      ``required_units_per_s`` with the headroom.
    - ``read_units_per_s``: the strongly consistent read of each item's placement that
      precedes its write; ``entry_read_units_per_s`` the values' measured reads (their
      ``read_units_per_s`` summed), on the GSI in GSI mode (``gsi``: under a limit of its
      own, as the entries' writes are).
    - ``limit_write_units_per_s``/``limit_read_units_per_s``: what the table (its GSI,
      in GSI mode, for the entries) serves at once, ``limited_by`` what sets the write
      figure (``warm throughput``, ``provisioned capacity``, ``per-table quota``,
      ``configured maximum``) and ``setting`` the setting that raises it;
      ``read_limited_by`` and ``read_setting`` the same for the read figure.
    - ``required_units_per_s``: the writes with the headroom, against the write limit: in
      GSI mode the busier of the GSI's entries and the table's placement records, each
      under a limit of its own.
    - ``binds``: ``partition`` (a value needs N > 1 and the table keeps up), ``table``
      (the table cannot take the load, whatever N), ``both``, or ``none``;
      ``write_binds``/``read_binds`` which of the table's limits it is.
    """

    profile: str
    item_writes_per_s: float
    entry_units_per_s: float
    placement_units_per_s: float
    write_units_per_s: float
    required_units_per_s: float
    read_units_per_s: float
    limit_write_units_per_s: float
    limit_read_units_per_s: float
    limited_by: str
    binds: str
    setting: str
    quota_write_units_per_s: float = math.inf
    headroom: float = 1.0
    read_limited_by: str = ""
    read_setting: str = ""
    quota_read_units_per_s: float = math.inf
    entry_read_units_per_s: float = 0.0
    gsi: bool = False
    # reads and writes draw on one budget (Cosmos DB's RU): ``required_units_per_s`` holds
    # both, against the write limit, and the reads bind nothing apart
    shared: bool = False

    @property
    def fits(self) -> bool:
        """Whether the table serves the load (with headroom) at once."""
        return self.binds in ("partition", "none")

    @property
    def write_binds(self) -> bool:
        """Whether the writes, with the headroom, pass what the table serves at once."""
        return self.required_units_per_s > self.limit_write_units_per_s

    @property
    def asked_read_units_per_s(self) -> float:
        """The reads against the read limit at the peak: the locates and the values' reads
        (in GSI mode the busier of the two, each under a limit of its own)."""
        if self.gsi:
            return max(self.read_units_per_s, self.entry_read_units_per_s)
        return self.read_units_per_s + self.entry_read_units_per_s

    @property
    def required_read_units_per_s(self) -> float:
        """The reads (``asked_read_units_per_s``), with the headroom."""
        return self.asked_read_units_per_s * self.headroom

    @property
    def read_binds(self) -> bool:
        """Whether the reads, with the headroom, pass what the table serves (apart from
        the writes: on one budget, ``write_binds`` holds them)."""
        return not self.shared \
            and self.required_read_units_per_s > self.limit_read_units_per_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile, "item_writes_per_s": self.item_writes_per_s,
            "entry_units_per_s": self.entry_units_per_s,
            "placement_units_per_s": self.placement_units_per_s,
            "write_units_per_s": self.write_units_per_s,
            "required_units_per_s": self.required_units_per_s,
            "read_units_per_s": self.read_units_per_s,
            "limit_write_units_per_s": self.limit_write_units_per_s,
            "limit_read_units_per_s": self.limit_read_units_per_s,
            "limited_by": self.limited_by, "fits": self.fits, "setting": self.setting,
            "quota_write_units_per_s": self.quota_write_units_per_s,
            "read_limited_by": self.read_limited_by, "read_setting": self.read_setting,
            "entry_read_units_per_s": self.entry_read_units_per_s,
            "required_read_units_per_s": self.required_read_units_per_s,
            "shared_units": self.shared,
        }


def table_limit(model: Profile, direction: str) -> tuple[float, str, str]:
    """Units a second of ``direction`` (``write``, ``read``) a table of ``model`` serves
    at once, what sets that figure, and the setting that raises it."""
    if model.capacity == "provisioned":
        limit, why, setting = (getattr(model, f"provisioned_{direction}"),
                               "provisioned capacity", f"provisioned_{direction}")
    else:
        limit, why, setting = (getattr(model, f"warm_{direction}"), "warm throughput",
                               f"warm_{direction}")
    quota = getattr(model, f"quota_{direction}")
    if quota < limit:
        limit, why, setting = quota, "per-table quota", f"quota_{direction}"
    most = getattr(model, f"max_{direction}")
    if model.capacity == "on-demand" and most < limit:
        limit, why, setting = most, "configured maximum", f"max_{direction}"
    if model.store == "azure-tables":
        why, setting = "the storage account's scalability target", "accounts"
    return limit, why, setting


def reads_in_words(table: TablePlan) -> str:
    """The table's reads in words, for the verdict."""
    if not table.entry_read_units_per_s:
        return "the reads that locate items"
    if table.gsi:
        return "the busier of the values' reads (on the GSI) and the reads that locate items"
    return "the values' reads and the reads that locate items"


def advise_reads(model: Profile, table: TablePlan) -> tuple[str, float] | None:
    """The read setting, and its least value, that serves the reads with the headroom,
    when the table's read limit does not (None on Azure: no setting raises a storage
    account's target)."""
    if not table.read_binds or model.store == "azure-tables":
        return None
    needed = math.ceil(round(table.required_read_units_per_s, 6))
    return model.limit_setting(False), float(needed)


def placement_units(model: Profile, item_writes: float) -> float:
    """Units a second of one placement record per item written (a transaction's cost but
    in the GSI layout, where the item's own update writes it)."""
    return item_writes * model.write_cost(PLACEMENT_BYTES) * model.place_cost


def plan_table(plans: Mapping[str, ValuePlan], model: Profile, item_writes: float,
                headroom: float, mode: str) -> TablePlan:
    entries = sum(p.write_units_per_s for p in plans.values())
    placements = placement_units(model, item_writes)
    # in GSI mode the entries go to the GSI, which has a table-level limit of its own
    total = max(entries, placements) if mode == "gsi" else entries + placements
    write, why, setting = table_limit(model, "write")
    read, read_why, read_setting = table_limit(model, "read")
    locates = item_writes * model.read_cost(PLACEMENT_BYTES, 1, True)
    entry_reads = sum(p.read_units_per_s or 0.0 for p in plans.values())
    reads = max(locates, entry_reads) if mode == "gsi" else locates + entry_reads
    shared = model.shared_units  # one budget: the reads are asked of the write limit too
    required = (total + (reads if shared else 0.0)) * headroom
    table_binds = required > write or (not shared and reads * headroom > read)
    partition_binds = any(p.sharded for p in plans.values())
    binds = ("both" if table_binds and partition_binds else "table" if table_binds
             else "partition" if partition_binds else "none")
    return TablePlan(profile=model.name, item_writes_per_s=item_writes,
                     entry_units_per_s=entries, placement_units_per_s=placements,
                     write_units_per_s=entries + placements,
                     required_units_per_s=required, read_units_per_s=locates,
                     limit_write_units_per_s=write, limit_read_units_per_s=read,
                     limited_by=why, binds=binds, setting=setting,
                     quota_write_units_per_s=model.quota_write, headroom=headroom,
                     read_limited_by=read_why, read_setting=read_setting,
                     quota_read_units_per_s=model.quota_read,
                     entry_read_units_per_s=entry_reads, gsi=mode == "gsi", shared=shared)
