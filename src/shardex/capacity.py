"""Capacity rules and ceilings of the partitioned stores shardex serves: pure arithmetic.

Everything that says what a request costs, or how much a partition takes, lives here,
once; the planner, the heat reports, the simulator and the backends import it.

Unit rules (DynamoDB's; the memory store and the log readers follow them):

- A write costs one *write unit* per started KB (1,024 bytes) of the item, at least 1.
- A read costs one *read unit* per started 4 KB (4,096 bytes), at least 1, and half of
  that when not strongly consistent. A Query is charged over the sum of the bytes it
  read, rounded once, not item by item, and reads at most 1 MB a page.
- Item sizes: attribute names and values in UTF-8 bytes, numbers about one byte per two
  digits plus one (``value_bytes``, ``item_bytes``, ``entry_bytes``).

Per-partition ceilings (``CEILINGS``, by store name):

- DynamoDB: 1,000 write units and 3,000 read units a second per partition, in any
  second: burst capacity (up to 300 seconds of a provisioned table's unused capacity) and
  adaptive capacity never take one partition past them. Eventually consistent reads may
  be served by any of a partition's three replicas: AWS measured 4,500 read units a
  second (9,000 eventually consistent queries) on one partition
  (``DYNAMODB_EVENTUAL_READ_FACTOR``).
- Azure Table Storage: about 2,000 entities a second per partition, and about 20,000 a
  second per storage account (``AZURE_TABLES_ACCOUNT_ENTITIES``), whatever the partitions.
- Cosmos DB: 10,000 RU a second per physical partition (reads and writes together), a
  container's provisioned RU/s shared evenly over its physical partitions. What a request
  costs, by item size (``COSMOS_RU_BY_KB``, Microsoft's "Understand request unit
  consumption" table, session or eventual consistency, default indexing): a point read
  of 1 KB 1 RU, a write of 1 KB 4.95 RU, 8 KB 1.33 and 7.04; strong or bounded-staleness
  reads cost twice (``cosmos_read_units``, ``cosmos_write_units``).

Table-level limits (DynamoDB):

- A new on-demand table serves 4,000 write and 12,000 read request units a second at
  once (its warm throughput), and up to twice its previous peak; traffic past twice the
  peak reached within the last 30 minutes may be throttled.
- The default per-table quota is 40,000 read and 40,000 write units a second, in either
  mode (on-demand: request units served; provisioned: capacity units provisioned).
- A partition holds about 10 GB; with a local secondary index an item collection (one
  partition key) cannot grow past 10 GB.
- A Query page reads at most 1 MB; shardex's stores also return at most 1,000 entries a
  page (``QUERY_PAGE_ITEMS``).

Throttle reasons are DynamoDB's ``ThrottlingReason`` names, ``<Table|Index><Read|Write>
<limit>`` (``throttle_reason``), with the exception DynamoDB raises for each limit
(``THROTTLE_EXCEPTIONS``).

Token buckets, partitions, table limits and profiles, which turn these numbers into
throttling, are simulation and live in ``shardex.sim``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol

from shardex.errors import InvalidInput, brief
from shardex.model.entries import HISTORY_LENGTH, MAX_TOKEN_LENGTH, MAX_VERSION

__all__ = [
    "AZURE_TABLES_ACCOUNT_ENTITIES",
    "AZURE_TABLES_PARTITION_ENTITIES",
    "CEILINGS",
    "COSMOS_PARTITION_RU",
    "COSMOS_RU_BY_KB",
    "Ceiling",
    "DYNAMODB_BURST_SECONDS",
    "DYNAMODB_EVENTUAL_READ_FACTOR",
    "DYNAMODB_NEW_TABLE_READ_UNITS",
    "DYNAMODB_NEW_TABLE_WRITE_UNITS",
    "DYNAMODB_PARTITION_BYTES",
    "DYNAMODB_PEAK_MULTIPLE",
    "DYNAMODB_PEAK_WINDOW_SECONDS",
    "DYNAMODB_READ_CEILING",
    "DYNAMODB_TABLE_QUOTA_UNITS",
    "DYNAMODB_WRITE_CEILING",
    "LIMITS",
    "MAX_HEADROOM",
    "QUERY_PAGE_BYTES",
    "QUERY_PAGE_ITEMS",
    "READ_UNIT_BYTES",
    "THROTTLE_EXCEPTIONS",
    "WRITE_UNIT_BYTES",
    "cosmos_read_units",
    "cosmos_write_units",
    "entry_bytes",
    "item_bytes",
    "number_bytes",
    "placement_bytes",
    "read_units",
    "resolve_ceiling",
    "throttle_reason",
    "utf8_len",
    "value_bytes",
    "write_units",
]

WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096
# The most bytes one Query page reads (DynamoDB: 1 MB), and the most entries a page of
# shardex's stores holds.
QUERY_PAGE_BYTES = 1_048_576
QUERY_PAGE_ITEMS = 1000
DYNAMODB_WRITE_CEILING = 1000.0
# the largest headroom a plan takes (a multiplier on the peak): past it, a typo (1e308
# sharded a key at a tenth of its ceiling to 4,096 keys)
MAX_HEADROOM = 100.0
DYNAMODB_READ_CEILING = 3000.0
DYNAMODB_BURST_SECONDS = 300.0
DYNAMODB_EVENTUAL_READ_FACTOR = 1.5
DYNAMODB_NEW_TABLE_WRITE_UNITS = 4000.0
DYNAMODB_NEW_TABLE_READ_UNITS = 12_000.0
DYNAMODB_PEAK_MULTIPLE = 2.0
DYNAMODB_PEAK_WINDOW_SECONDS = 1800.0
DYNAMODB_TABLE_QUOTA_UNITS = 40_000.0
DYNAMODB_PARTITION_BYTES = 10 * 1024**3
AZURE_TABLES_PARTITION_ENTITIES = 2000.0
AZURE_TABLES_ACCOUNT_ENTITIES = 20_000.0
COSMOS_PARTITION_RU = 10_000.0
# (item KB, point read RU, write RU): learn.microsoft.com, Azure Cosmos DB, "Understand
# request unit consumption" (document size table; reads at session or eventual consistency)
COSMOS_RU_BY_KB: tuple[tuple[int, float, float], ...] = (
    (1, 1.00, 4.95), (2, 1.04, 6.29), (4, 1.14, 6.67), (8, 1.33, 7.04), (16, 1.67, 9.52),
    (32, 2.19, 11.23), (64, 4.76, 22.67), (128, 9.95, 48.19), (256, 20.28, 98.29),
    (512, 40.95, 184.57), (1024, 145.90, 625.00), (2048, 291.80, 1250.00))


class _Entry(Protocol):
    """What ``entry_bytes`` reads of an entry (a ``shardex.stores.base.StoredEntry``)."""

    @property
    def shard_key(self) -> str: ...
    @property
    def sort(self) -> str: ...
    @property
    def item_id(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def attrs(self) -> Mapping[str, Any]: ...


def write_units(nbytes: int) -> int:
    """Return the write units of an item of ``nbytes`` bytes: one per started KB, at least 1."""
    if nbytes <= WRITE_UNIT_BYTES:
        return 1
    return -(-nbytes // WRITE_UNIT_BYTES)


def read_units(nbytes: int, consistent: bool = True) -> float:
    """Return the read units of reading ``nbytes`` bytes: one per started 4 KB, at least 1.

    Halved when ``consistent`` is False (an eventually consistent read), so at least 0.5.
    """
    units = 1 if nbytes <= READ_UNIT_BYTES else -(-nbytes // READ_UNIT_BYTES)
    return float(units) if consistent else units / 2.0


def _cosmos_row(nbytes: int) -> tuple[int, float, float]:
    for row in COSMOS_RU_BY_KB:
        if nbytes <= row[0] * 1024:
            return row
    raise InvalidInput(f"an item of {nbytes:,} bytes is over Cosmos DB's 2 MB item limit")


def cosmos_write_units(nbytes: int) -> float:
    """Return the documented RU of writing an item of ``nbytes`` bytes (default indexing):
    the figure of the smallest size in COSMOS_RU_BY_KB that holds it (1 KB: 4.95 RU).

    Raises InvalidInput past 2 MB, Cosmos DB's item limit.
    """
    return _cosmos_row(nbytes)[2]


def cosmos_read_units(nbytes: int, consistent: bool = False) -> float:
    """Return the documented RU of a point read of an item of ``nbytes`` bytes (1 KB: 1 RU);
    ``consistent`` (strong or bounded staleness) costs twice."""
    units = _cosmos_row(nbytes)[1]
    return 2 * units if consistent else units


def utf8_len(text: str) -> int:
    """Return the length of ``text`` in UTF-8 bytes."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def number_bytes(number: int | float | Decimal) -> int:
    """Return the stored size of a number: about one byte per two digits, plus one."""
    if type(number) is int:
        digits = len(str(number)) - (number < 0)
    else:
        digits = sum(1 for ch in str(number) if ch.isdigit())
    return (digits + 1) // 2 + 1


def value_bytes(value: Any) -> int:
    """Return the stored size of one attribute value, as DynamoDB counts it.

    Strings: UTF-8 length; bytes: length; numbers: ``number_bytes``; booleans and None:
    1; lists, tuples and sets: 3 plus, per element, its size plus 1; mappings: 3 plus,
    per element, the UTF-8 length of its name, its size and 1. Anything else is
    counted as its ``str()``.
    """
    if isinstance(value, str):
        return utf8_len(value)
    if value is None or isinstance(value, bool):
        return 1
    if isinstance(value, int | float | Decimal):
        return number_bytes(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return len(value)
    if isinstance(value, Mapping):
        return 3 + sum(utf8_len(str(k)) + value_bytes(v) + 1 for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return 3 + sum(value_bytes(v) + 1 for v in value)
    return utf8_len(str(value))


def item_bytes(attrs: Mapping[str, Any]) -> int:
    """Return the stored size of an attribute map: each name's UTF-8 length plus its value's."""
    return sum(utf8_len(name) + value_bytes(value) for name, value in attrs.items())


def entry_bytes(entry: _Entry) -> int:
    """Return the stored size in bytes of an index entry, as DynamoDB would count it.

    The entry is stored as the attributes ``pk`` = shard key, ``sk`` = sort, one
    separator byte and item id, ``id`` = item id, ``v`` = version (a number), plus its
    projected attributes::

        2 + len(shard_key) + 2 + len(sort) + 1 + len(item_id) + 2 + len(item_id)
          + 1 + number_bytes(version) + item_bytes(attrs)

    with every length in UTF-8 bytes (see ``value_bytes`` for attribute values).
    """
    # Every entry is sized on the memory store's write path: ASCII text (the common
    # case) is measured without encoding, and small versions without str().
    item_id, version = entry.item_id, entry.version
    text = entry.shard_key + entry.sort + item_id + item_id
    size = 8 + (len(text) if text.isascii() else utf8_len(text))
    size += 2 if type(version) is int and 0 <= version < 100 else number_bytes(version)
    for name, value in entry.attrs.items():
        kind = type(value)
        if kind is str:
            text = name + value
            size += len(text) if text.isascii() else utf8_len(text)
        else:
            size += utf8_len(name) + (number_bytes(value) if kind is int or kind is float
                                      else value_bytes(value))
    return size


# The placement record of an entry (``shardex.stores.dynamodb.codec.placement_item``)
# beside the entry's attributes: "pk" and "#placement#" (``shardex.keys.PLACEMENT_PREFIX``),
# "sk" and "#"; "v" and "ev", versions at their largest (38 digits: a byte more than
# ``number_bytes`` says, as the DynamoDB store's ``item_units`` counts an even number of
# digits); "t", a write token at its longest, and "h", the history of tokens (a list)
# full of the longest; "key", "sort", and "attrs", a map (3 bytes, and one a value).
_VERSION_BYTES = number_bytes(MAX_VERSION) + 1
_PLACEMENT_BYTES = (2 + 11) + (2 + 1) + (1 + _VERSION_BYTES) + (2 + _VERSION_BYTES) \
    + (1 + MAX_TOKEN_LENGTH) + (1 + 3 + HISTORY_LENGTH * (1 + MAX_TOKEN_LENGTH)) + 3 + 4 \
    + (5 + 3)
# what entry_bytes counts that the placement record holds once or not at all: its names
# "pk", "sk", "id" and "v", one separator byte, and the version
_ENTRY_ONLY_BYTES = 8


def placement_bytes(entry: _Entry, size: int | None = None) -> int:
    """Return the size in bytes of the placement record that holds ``entry``, as DynamoDB
    counts it, with the versions and the write tokens at their largest: the largest item
    a write of the entry stores, whatever its history. A store refuses an entry past its
    ``max_item_bytes`` by this size, so an entry written once is written again (its
    first writes' records hold fewer and shorter tokens).

    ``size``: ``entry_bytes(entry)`` when the caller has it (then this takes no time).
    """
    if size is None:
        size = entry_bytes(entry)
    return size - _ENTRY_ONLY_BYTES - utf8_len(entry.item_id) - number_bytes(entry.version) \
        + _PLACEMENT_BYTES + len(entry.attrs)


@dataclass(frozen=True, slots=True)
class Ceiling:
    """A store's per-partition throughput ceiling, in its own units a second; ``shared``:
    reads and writes draw on it together (``write_units``), as on Azure Table Storage and
    Cosmos DB, rather than each on its own figure (DynamoDB)."""

    name: str
    write_units: float
    read_units: float
    unit: str
    shared: bool = False

    def ratio(self, write_units: float, read_units: float) -> float:
        """How far one second's units on a partition come to its ceiling (1: at it)."""
        if self.shared:
            return (write_units + read_units) / self.write_units
        return max(write_units / self.write_units, read_units / self.read_units)

    def peak_ratio(self, peak: float, peak_write: float, peak_read: float) -> float:
        """``ratio`` of a key's peaks over a window: its busiest second of both together
        (``peak``) where they share the ceiling, else each peak over its own figure."""
        if self.shared:
            return peak / self.write_units
        return self.ratio(peak_write, peak_read)


CEILINGS: Mapping[str, Ceiling] = {
    "dynamodb": Ceiling("dynamodb", DYNAMODB_WRITE_CEILING, DYNAMODB_READ_CEILING,
                        "capacity units/s"),
    "azure-tables": Ceiling("azure-tables", AZURE_TABLES_PARTITION_ENTITIES,
                            AZURE_TABLES_PARTITION_ENTITIES, "entities/s", shared=True),
    "cosmos": Ceiling("cosmos", COSMOS_PARTITION_RU, COSMOS_PARTITION_RU, "RU/s",
                      shared=True),
}


def resolve_ceiling(spec: str | float | Ceiling) -> Ceiling:
    """Return the per-partition ceiling ``spec`` names: a store name, a number, or a Ceiling.

    A store name is one of CEILINGS (``dynamodb``, ``azure-tables``, ``cosmos``); a number
    (or numeric text) is one ceiling for reads and writes alike, in units a second.
    Raises InvalidInput for an unknown name or a number outside MIN_CEILING to
    MAX_CEILING.
    """
    if isinstance(spec, Ceiling):
        return spec
    if isinstance(spec, str):
        named = CEILINGS.get(spec.strip().lower())
        if named is not None:
            return named
        try:
            number = float(spec)
        except ValueError:
            raise InvalidInput(
                f"unknown ceiling {brief(spec)}; use one of {', '.join(sorted(CEILINGS))} "
                "or a number of units a second") from None
    elif isinstance(spec, bool) or not isinstance(spec, int | float):
        raise InvalidInput(f"ceiling must be a store name or a number, got {brief(spec)}")
    else:
        try:
            number = float(spec)
        except OverflowError:  # an int past any float
            number = math.inf
    if not math.isfinite(number) or not MIN_CEILING <= number <= MAX_CEILING:
        raise InvalidInput(f"ceiling must be a number of units/s from 0.001 to 1e9, got "
                           f"{brief(spec)}")
    return Ceiling(f"{number:g} units/s", number, number, "units/s")


# a partition's ceiling in units a second, as a number: documents give its figures to 4
# decimals (1e-300 read 0.0), and no store's partition serves a billion a second
MIN_CEILING, MAX_CEILING = 0.001, 1e9


# The limit types of DynamoDB's ThrottlingReason, and the exception it raises for each.
LIMITS = ("KeyRangeThroughputExceeded", "ProvisionedThroughputExceeded",
          "AccountLimitExceeded", "MaxOnDemandThroughputExceeded")
THROTTLE_EXCEPTIONS: Mapping[str, str] = {
    "KeyRangeThroughputExceeded": "ProvisionedThroughputExceededException",
    "ProvisionedThroughputExceeded": "ProvisionedThroughputExceededException",
    "AccountLimitExceeded": "RequestLimitExceeded",
    "MaxOnDemandThroughputExceeded": "ThrottlingException",
}


def throttle_reason(limit: str, *, write: bool, index: bool = False) -> str:
    """Return DynamoDB's ThrottlingReason for ``limit`` (one of LIMITS) on a table or GSI.

    ``TableWriteKeyRangeThroughputExceeded``, ``IndexReadAccountLimitExceeded``, ...:
    resource type, operation type, limit type. Raises InvalidInput for an unknown limit.
    """
    if not isinstance(limit, str) or limit not in THROTTLE_EXCEPTIONS:
        raise InvalidInput(f"unknown throttle limit {brief(limit)}; use one of "
                           f"{', '.join(LIMITS)}")
    return f"{'Index' if index else 'Table'}{'Write' if write else 'Read'}{limit}"
