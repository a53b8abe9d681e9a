"""Capacity profiles: every setting of the simulated capacity model, with each store's defaults.

A ``Profile`` is what both engines run on, the request-level store (``memory://``) and
the rate-level one (``shardex.sim.fluid``): per-partition ceilings, burst, table-level
limits (on-demand warm throughput and previous peak, provisioned capacity, quotas),
splits for heat and size, and what a write or read costs. ``PROFILES`` holds one per
store, with the figures its documentation gives (``shardex.capacity``):

- ``dynamodb-on-demand`` (the default): a new on-demand table, shardex writing its own
  index table (each entry in a transaction, which costs twice);
- ``dynamodb-provisioned``: a provisioned table (set ``provisioned_write`` and
  ``provisioned_read`` to the table's), with burst and adaptive capacity;
- ``dynamodb-gsi``: an on-demand table whose GSI holds the index: entry writes cost once
  and go to the index's partitions, a throttled index partition throttles the base
  table's write (back-pressure), and index reads are eventually consistent;
- ``azure-tables``: 2,000 entities a second a partition key (each its own partition),
  20,000 a storage account; an entry write is 4 entity writes (``entry_writes``);
- ``cosmos``: a container of provisioned RU/s, 10,000 RU/s a physical partition, its
  throughput shared evenly over them (no adaptive capacity, no burst), writes and reads
  at their documented RU by item size (``shardex.capacity.COSMOS_RU_BY_KB``); a refused
  request is a 429 with a retry-after hint (``x-ms-retry-after-ms``).

``profile(name, **overrides)`` returns a profile with some settings changed; every
setting is checked, and a bad one raises InvalidInput naming it.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shardex.capacity import (
    AZURE_TABLES_ACCOUNT_ENTITIES,
    AZURE_TABLES_PARTITION_ENTITIES,
    COSMOS_PARTITION_RU,
    DYNAMODB_BURST_SECONDS,
    DYNAMODB_EVENTUAL_READ_FACTOR,
    DYNAMODB_NEW_TABLE_READ_UNITS,
    DYNAMODB_NEW_TABLE_WRITE_UNITS,
    DYNAMODB_PARTITION_BYTES,
    DYNAMODB_PEAK_MULTIPLE,
    DYNAMODB_PEAK_WINDOW_SECONDS,
    DYNAMODB_READ_CEILING,
    DYNAMODB_TABLE_QUOTA_UNITS,
    DYNAMODB_WRITE_CEILING,
    cosmos_read_units,
    cosmos_write_units,
    read_units,
    write_units,
)
from shardex.errors import InvalidInput, brief

__all__ = ["ASSUMPTIONS", "DEFAULT_PROFILE", "MAX_PARTITIONS", "PROFILES", "Profile",
           "SPLIT_DELAY_SECONDS", "profile"]

# DynamoDB publishes no timing for split for heat; AWS's own single-key test (the
# "Scaling DynamoDB" blog series, part 2) ran flat for its first 10 minutes. An assumption.
SPLIT_DELAY_SECONDS = 600.0
# The settings whose figures no store documents: a plan that relies on one names it.
ASSUMPTIONS: Mapping[str, str] = {
    "split_delay_seconds": "seconds a partition stays hot before DynamoDB splits it for "
                           "heat (not published)",
    "split_heat": "the share of a partition's ceiling that counts as hot for a split "
                  "(not published)",
    "peak_window_seconds": "seconds before an on-demand table serves twice a new peak "
                           "(DynamoDB: 'within 30 minutes', no exact timing)",
    "initial_burst_seconds": "seconds of burst a provisioned table has saved when the load "
                             "starts (DynamoDB: up to 300, what is saved is not shown)",
}
DEFAULT_PROFILE = "dynamodb-on-demand"

_CHOICES: Mapping[str, tuple[str, ...]] = {
    "capacity": ("on-demand", "provisioned"),
    "layout": ("table", "gsi"),
    "unit": ("capacity", "entity", "ru"),
    "store": ("dynamodb", "azure-tables", "cosmos"),
}
# setting -> (lowest, what a valid value is); inf allowed only where the text says so
_RANGES: Mapping[str, tuple[float, str]] = {
    "write_ceiling": (1e-9, ">= 1e-9 units/s"),
    "read_ceiling": (1e-9, ">= 1e-9 units/s"),
    "eventual_read_factor": (1.0, ">= 1"),
    "burst_seconds": (1.0, ">= 1 second"),
    "initial_burst_seconds": (0.0, ">= 0 seconds"),
    "warm_write": (1e-9, ">= 1e-9 units/s"),
    "warm_read": (1e-9, ">= 1e-9 units/s"),
    "provisioned_write": (1e-9, ">= 1e-9 units/s"),
    "provisioned_read": (1e-9, ">= 1e-9 units/s"),
    "quota_write": (1e-9, ">= 1e-9 units/s, or inf"),
    "quota_read": (1e-9, ">= 1e-9 units/s, or inf"),
    "max_write": (1e-9, ">= 1e-9 units/s, or inf (no maximum)"),
    "max_read": (1e-9, ">= 1e-9 units/s, or inf (no maximum)"),
    "peak_multiple": (1.0, ">= 1"),
    "peak_window_seconds": (0.0, ">= 0 seconds"),
    "split_delay_seconds": (0.0, ">= 0 seconds, or inf (never split)"),
    "split_heat": (1e-9, "a share of the ceiling from 1e-9 to 1"),
    "partition_bytes": (1.0, ">= 1 byte, or inf"),
    "transaction_cost": (1.0, ">= 1"),
    "entry_writes": (1e-9, ">= 1e-9"),
}
# the settings only a table of one capacity mode reads (sim.table, sim.partitions)
_ONLY: Mapping[str, set[str]] = {
    "on-demand": {"warm_write", "warm_read", "max_write", "max_read", "peak_multiple",
                  "peak_window_seconds"},
    "provisioned": {"provisioned_write", "provisioned_read", "burst_seconds",
                    "initial_burst_seconds", "adaptive"},
}
_UNBOUNDED = {"quota_write", "quota_read", "max_write", "max_read", "split_delay_seconds",
              "partition_bytes"}
# the most physical partitions a table starts with: 100 million write units a second, or
# a petabyte; the model keeps a list per partition, and more would only exhaust memory
MAX_PARTITIONS = 100_000


@dataclass(frozen=True, slots=True)
class Profile:
    """The capacity model of one table (and its GSI): units a second, seconds, bytes.

    =======================  ==========================================================
    setting                  meaning
    =======================  ==========================================================
    capacity                 ``on-demand`` or ``provisioned``
    layout                   ``table`` (entries in shardex's own table) or ``gsi``
                             (entries in a GSI of the application's table)
    store                    whose throttles: ``dynamodb`` (ThrottlingReason names),
                             ``azure-tables`` (503 ServerBusy), ``cosmos`` (429 with a
                             retry-after hint)
    unit                     ``capacity`` (DynamoDB: a write unit per started KB, a read
                             unit per started 4 KB), ``entity`` (one per entity) or
                             ``ru`` (Cosmos DB's documented RU by item size)
    write_ceiling            write units a partition takes in any one second
    read_ceiling             strongly consistent read units a partition serves a second
    eventual_read_factor     eventually consistent reads of a partition may reach
                             ``read_ceiling`` times this (its replicas serve them too)
    burst_seconds            seconds of unused provisioned capacity kept as burst
    initial_burst_seconds    seconds of burst a new provisioned table starts with
    warm_write, warm_read    on-demand: what the table serves at once (a new table:
                             4,000 and 12,000); it also sets the partition count
    provisioned_write/_read  provisioned: the table's capacity units
    quota_write, quota_read  the per-table quota (40,000 each by default)
    max_write, max_read      on-demand: the table's configured maximum throughput
    peak_multiple            on-demand: how far past its previous peak a table serves
    peak_window_seconds      on-demand: how long a new peak takes to count (30 min)
    adaptive                 provisioned: a hot partition may take more than its share
                             of the table (up to its ceiling); false: it keeps its share
    partitions               physical partitions the table starts with; 0: every key
                             is its own partition; None: from the warm (on-demand) or
                             provisioned throughput, ceil(max(write / write_ceiling,
                             read / read_ceiling))
    split_delay_seconds      seconds a partition stays hot before it splits for heat
    split_heat               the share of a ceiling at which a second counts as hot
    lsi                      the table has a local secondary index: no item
                             collection is split, and none may pass partition_bytes
    partition_bytes          bytes a partition holds before it splits (10 GB)
    transaction_cost         unit multiplier of a transactional write
    entry_writes             writes one entry write makes on its shard key (Azure: the
                             row and its mirror, written and then committed: 4; the rate
                             engine applies it, ``memory://`` writes each entry once)
    consistent               queries are strongly consistent (GSI reads never are)
    shared_units             reads and writes draw on one budget: a partition's ceiling
                             and the table's capacity serve both (Cosmos DB's RU/s, Azure
                             Table Storage's entities a second); each read figure is its
                             write figure, and a figure given for either sets both
    =======================  ==========================================================
    """

    name: str = DEFAULT_PROFILE
    store: str = "dynamodb"
    capacity: str = "on-demand"
    layout: str = "table"
    unit: str = "capacity"
    write_ceiling: float = DYNAMODB_WRITE_CEILING
    read_ceiling: float = DYNAMODB_READ_CEILING
    eventual_read_factor: float = DYNAMODB_EVENTUAL_READ_FACTOR
    burst_seconds: float = DYNAMODB_BURST_SECONDS
    initial_burst_seconds: float = 1.0
    warm_write: float = DYNAMODB_NEW_TABLE_WRITE_UNITS
    warm_read: float = DYNAMODB_NEW_TABLE_READ_UNITS
    provisioned_write: float = DYNAMODB_WRITE_CEILING
    provisioned_read: float = DYNAMODB_READ_CEILING
    quota_write: float = DYNAMODB_TABLE_QUOTA_UNITS
    quota_read: float = DYNAMODB_TABLE_QUOTA_UNITS
    max_write: float = math.inf
    max_read: float = math.inf
    peak_multiple: float = DYNAMODB_PEAK_MULTIPLE
    peak_window_seconds: float = DYNAMODB_PEAK_WINDOW_SECONDS
    adaptive: bool = True
    partitions: int | None = None
    split_delay_seconds: float = SPLIT_DELAY_SECONDS
    split_heat: float = 0.8
    lsi: bool = False
    partition_bytes: float = float(DYNAMODB_PARTITION_BYTES)
    transaction_cost: float = 2.0
    entry_writes: float = 1.0
    consistent: bool = True
    shared_units: bool = False

    def __post_init__(self) -> None:
        for name, allowed in _CHOICES.items():
            if getattr(self, name) not in allowed:
                raise InvalidInput(f"profile {self.name}: {name} must be one of "
                                   f"{', '.join(allowed)}, got {getattr(self, name)!r}")
        for name, (lowest, what) in _RANGES.items():
            value = getattr(self, name)
            # compared, not math.isfinite: an int too large for a float overflows that
            ok = not isinstance(value, bool) and isinstance(value, int | float) \
                and lowest <= value and (value <= sys.float_info.max
                                         or (name in _UNBOUNDED and value == math.inf))
            if not ok or (name == "split_heat" and value > 1):
                raise InvalidInput(f"profile {self.name}: {name} must be {what}, "
                                   f"got {brief(value)}")
        for name in ("adaptive", "lsi", "consistent", "shared_units"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidInput(f"profile {self.name}: {name} must be true or false, "
                                   f"got {getattr(self, name)!r}")
        if self.partitions is not None and (isinstance(self.partitions, bool) or not isinstance(
                self.partitions, int) or self.partitions < 0):
            raise InvalidInput(f"profile {self.name}: partitions must be an integer >= 0 or "
                               f"None, got {self.partitions!r}")
        if self.initial_partitions > MAX_PARTITIONS:
            raise InvalidInput(
                f"profile {self.name}: the table would start with {self.initial_partitions:,} "
                f"partitions (partitions, or its warm or provisioned throughput over the "
                f"ceiling); at most {MAX_PARTITIONS:,} are modelled")
        if self.initial_burst_seconds > self.burst_seconds:
            raise InvalidInput(
                f"profile {self.name}: initial_burst_seconds ({self.initial_burst_seconds:g}) "
                f"must not exceed burst_seconds ({self.burst_seconds:g})")
        if self.shared_units:
            apart = [(write, read) for write, read in _budget_pairs(self.capacity)
                     if getattr(self, read) != getattr(self, write)]
            if apart:
                raise InvalidInput(
                    f"profile {self.name}: reads and writes draw on one budget "
                    f"(shared_units): " + ", ".join(
                        f"{read} ({getattr(self, read):g}) must be {write} "
                        f"({getattr(self, write):g})" for write, read in apart))
        if self.capacity == "provisioned":
            for direction in ("write", "read"):
                given = getattr(self, f"provisioned_{direction}")
                quota = getattr(self, f"quota_{direction}")
                if given > quota:
                    raise InvalidInput(
                        f"profile {self.name}: provisioned_{direction} ({given:g}) is over "
                        f"the per-table quota ({quota:g}); raise quota_{direction}")

    def replace(self, **settings: Any) -> Profile:
        """Return this profile with ``settings`` changed; InvalidInput names a bad one, and
        one the table's capacity mode does not use (``provisioned_write`` given to an
        on-demand table was taken and ignored: the plan was of an on-demand table)."""
        unknown = sorted(set(settings) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise InvalidInput(f"unknown profile setting(s) {', '.join(unknown)}")
        capacity = settings.get("capacity", self.capacity)
        other = "provisioned" if capacity == "on-demand" else "on-demand"
        unused = sorted(set(settings) & _ONLY.get(other, set()))
        if unused:
            them = "it" if len(unused) == 1 else "them"
            raise InvalidInput(
                f"profile {settings.get('name', self.name)}: {', '.join(unused)} "
                f"{'is a setting' if len(unused) == 1 else 'are settings'} of a table of "
                f"{other} capacity, and this one is {capacity}: give capacity={other} with "
                f"{them}, or leave {them} out")
        if "name" not in settings and self.name in _BY_CAPACITY.values() \
                and capacity in _BY_CAPACITY:
            # the two DynamoDB table profiles differ in their capacity mode alone: a table
            # changed to the other is named by it (it read 'dynamodb-on-demand serves
            # 20,000 (provisioned capacity)')
            settings = {**settings, "name": _BY_CAPACITY[capacity]}
        if settings.get("shared_units", self.shared_units):
            # one budget: a figure given for either direction is the figure of both
            for write, read in _budget_pairs(capacity):
                if (write in settings) != (read in settings):
                    given = settings[write] if write in settings else settings[read]
                    settings = {**settings, write: given, read: given}
        return dataclasses.replace(self, **settings)

    @property
    def place_cost(self) -> float:
        """The unit multiplier of a place: ``transaction_cost`` (a TransactWriteItems), or
        1 in GSI mode, whose write is one UpdateItem of the application's item."""
        return 1.0 if self.layout == "gsi" else self.transaction_cost

    def limit_setting(self, write: bool) -> str:
        """The setting that sets the table's limit in a direction: ``warm_write``,
        ``provisioned_read``, ...; on one budget of reads and writes, the write one."""
        direction = "write" if write or self.shared_units else "read"
        return ("provisioned_" if self.capacity == "provisioned" else "warm_") + direction

    @property
    def unit_word(self) -> str:
        """What the table's figures count, in words: Azure Table Storage's entities, else
        units."""
        return "entities" if self.store == "azure-tables" else "units"

    @property
    def initial_partitions(self) -> int:
        """The physical partitions the table starts with (0: every key its own)."""
        if self.partitions is not None:
            return self.partitions
        write, read = self.table_throughput
        return max(1, math.ceil(round(max(write / self.write_ceiling,
                                          read / self.read_ceiling), 9)))

    @property
    def table_throughput(self) -> tuple[float, float]:
        """(write, read) units a second the table serves at once: warm or provisioned."""
        if self.capacity == "provisioned":
            return self.provisioned_write, self.provisioned_read
        return self.warm_write, self.warm_read

    def write_cost(self, nbytes: int) -> float:
        """Units a write of an item of ``nbytes`` bytes takes (before any transaction cost)."""
        if self.unit == "ru":
            return cosmos_write_units(nbytes)
        return 1.0 if self.unit == "entity" else float(write_units(nbytes))

    def read_cost(self, nbytes: int, items: int, consistent: bool) -> float:
        """Units a read of ``items`` items, ``nbytes`` bytes in all, takes (at least one)."""
        if self.unit == "entity":
            return float(max(1, items))
        if self.unit == "ru":  # a page costs about what point reads of its items do
            # at Session consistency, as the store estimates its own reads (a locate
            # priced at Strong's twice beside listings at Session's once mixed the two)
            each = -(-nbytes // max(1, items))
            return max(1, items) * cosmos_read_units(each)
        return read_units(nbytes, consistent)


def _budget_pairs(capacity: str) -> tuple[tuple[str, str], ...]:
    """The write and read figures of each budget a table of ``capacity`` reads: one
    figure for both where reads and writes draw on one budget (``shared_units``)."""
    pairs = (("write_ceiling", "read_ceiling"), ("quota_write", "quota_read"))
    if capacity == "provisioned":
        return (*pairs, ("provisioned_write", "provisioned_read"))
    return (*pairs, ("warm_write", "warm_read"), ("max_write", "max_read"))


_DYNAMODB = Profile()
# the DynamoDB table profile of each capacity mode
_BY_CAPACITY: Mapping[str, str] = {"on-demand": "dynamodb-on-demand",
                                   "provisioned": "dynamodb-provisioned"}
PROFILES: Mapping[str, Profile] = {
    "dynamodb-on-demand": _DYNAMODB,
    "dynamodb-provisioned": dataclasses.replace(_DYNAMODB, name="dynamodb-provisioned",
                                                capacity="provisioned"),
    "dynamodb-gsi": dataclasses.replace(_DYNAMODB, name="dynamodb-gsi", layout="gsi",
                                        transaction_cost=1.0, consistent=False),
    "azure-tables": Profile(
        name="azure-tables", store="azure-tables", unit="entity", partitions=0,
        entry_writes=4.0, split_delay_seconds=math.inf,
        write_ceiling=AZURE_TABLES_PARTITION_ENTITIES,
        read_ceiling=AZURE_TABLES_PARTITION_ENTITIES, eventual_read_factor=1.0,
        warm_write=AZURE_TABLES_ACCOUNT_ENTITIES, warm_read=AZURE_TABLES_ACCOUNT_ENTITIES,
        quota_write=AZURE_TABLES_ACCOUNT_ENTITIES, quota_read=AZURE_TABLES_ACCOUNT_ENTITIES,
        peak_multiple=1.0, partition_bytes=math.inf, transaction_cost=1.0,
        shared_units=True),
    "cosmos": Profile(
        name="cosmos", store="cosmos", capacity="provisioned", unit="ru", adaptive=False,
        write_ceiling=COSMOS_PARTITION_RU, read_ceiling=COSMOS_PARTITION_RU,
        eventual_read_factor=1.0, provisioned_write=COSMOS_PARTITION_RU,
        provisioned_read=COSMOS_PARTITION_RU, burst_seconds=1.0, initial_burst_seconds=0.0,
        quota_write=math.inf, quota_read=math.inf, split_delay_seconds=math.inf,
        partition_bytes=50 * 1024**3, transaction_cost=1.0, entry_writes=2.0,
        consistent=False, shared_units=True),
    # a table that never throttles: benchmarks of code, and tests of anything but capacity
    "unlimited": dataclasses.replace(
        _DYNAMODB, name="unlimited", partitions=0, write_ceiling=1e12, read_ceiling=1e12,
        warm_write=1e12, warm_read=1e12, quota_write=1e12, quota_read=1e12),
}


def profile(name: str = DEFAULT_PROFILE, **settings: Any) -> Profile:
    """Return the profile ``name`` (one of PROFILES) with ``settings`` changed.

    Raises InvalidInput for an unknown name or setting, or a setting out of range.
    """
    found = PROFILES.get(name) if isinstance(name, str) else None
    if found is None:
        raise InvalidInput(f"unknown profile {name!r}; use one of {', '.join(PROFILES)}")
    return found.replace(**settings) if settings else found
