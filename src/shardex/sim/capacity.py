"""The capacity model of a partitioned store, after DynamoDB: item sizes, units, token buckets.

Pure arithmetic, no I/O and no clock of its own: every call takes ``now`` (seconds).

- A write costs one *write unit* per started KB (1,024 bytes) of the item, at least 1.
- A read costs one *read unit* per started 4 KB (4,096 bytes), at least 1, and half of
  that when not strongly consistent. A Query is charged over the sum of the bytes it
  read, rounded once, not item by item.
- Every physical partition has a write ceiling (DynamoDB: 1,000 units a second) and a
  read ceiling (3,000 units a second), each a token bucket that keeps up to
  ``burst_seconds`` (300) of unused capacity as burst. A request that finds too few
  tokens is throttled and takes none.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from shardex.errors import InvalidInput

if TYPE_CHECKING:  # the sim sits below the stores: no runtime import of them
    from shardex.stores.base import StoredEntry

__all__ = [
    "DYNAMODB_BURST_SECONDS",
    "DYNAMODB_READ_CEILING",
    "DYNAMODB_WRITE_CEILING",
    "PartitionCapacity",
    "PartitionLimits",
    "QUERY_PAGE_BYTES",
    "READ_UNIT_BYTES",
    "TokenBucket",
    "WRITE_UNIT_BYTES",
    "entry_bytes",
    "item_bytes",
    "number_bytes",
    "read_units",
    "utf8_len",
    "value_bytes",
    "write_units",
]

WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096
# The most bytes one Query page reads (DynamoDB: 1 MB).
QUERY_PAGE_BYTES = 1_048_576
DYNAMODB_WRITE_CEILING = 1000.0
DYNAMODB_READ_CEILING = 3000.0
DYNAMODB_BURST_SECONDS = 300.0

# Float refills land a hair below a whole number of units; without the slack a bucket
# refilled for exactly one unit's worth of time would still refuse that unit.
_EPSILON = 1e-9


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


def entry_bytes(entry: StoredEntry) -> int:
    """Return the stored size in bytes of an index entry, as DynamoDB would count it.

    The entry is stored as the attributes ``pk`` = shard key, ``sk`` = sort, one
    separator byte and item id, ``id`` = item id, ``v`` = version (a number), plus its
    projected attributes::

        2 + len(shard_key) + 2 + len(sort) + 1 + len(item_id) + 2 + len(item_id)
          + 1 + number_bytes(version) + item_bytes(attrs)

    with every length in UTF-8 bytes (see ``value_bytes`` for attribute values).
    """
    item_id = utf8_len(entry.item_id)
    size = 8 + utf8_len(entry.shard_key) + utf8_len(entry.sort) + 2 * item_id
    size += number_bytes(entry.version)
    for name, value in entry.attrs.items():
        kind = type(value)
        size += utf8_len(name) + (utf8_len(value) if kind is str else number_bytes(value)
                                  if kind is int or kind is float else value_bytes(value))
    return size


def _require(name: str, value: float, *, minimum: float = 0.0) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(f"{name} must be a number, got {type(value).__name__}: {value!r}")
    if not math.isfinite(value) or value < minimum:
        raise InvalidInput(f"{name} must be a finite number >= {minimum:g}, got {value!r}")


@dataclass(slots=True)
class TokenBucket:
    """Tokens that refill continuously at ``rate`` units a second up to ``capacity``.

    ``tokens`` is the content at time ``updated`` (seconds). Time that runs backwards
    is ignored. A request takes its units only when the bucket holds that many.
    """

    rate: float
    capacity: float
    tokens: float
    updated: float = 0.0

    def __post_init__(self) -> None:
        try:  # one comparison chain on the hot path; the detail only when it fails
            if 0.0 <= self.rate < math.inf and 0.0 <= self.tokens <= self.capacity < math.inf:
                return
        except TypeError:
            pass
        _require("rate", self.rate)
        _require("capacity", self.capacity)
        _require("tokens", self.tokens)
        if self.tokens > self.capacity:
            raise InvalidInput(
                f"tokens ({self.tokens:g}) must not exceed capacity ({self.capacity:g})"
            )

    def available(self, now: float) -> float:
        """Refill up to ``now`` and return the tokens held."""
        if now > self.updated:
            self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
            self.updated = now
        return self.tokens

    def has(self, units: float, now: float) -> bool:
        """Return whether ``units`` could be taken at ``now``, taking nothing."""
        return self.available(now) + _EPSILON >= units

    def take(self, units: float, now: float) -> None:
        """Take ``units`` unconditionally; call after ``has`` said they are there."""
        self.available(now)
        self.tokens -= units

    def try_take(self, units: float, now: float) -> bool:
        """Take ``units`` if the bucket holds them at ``now``; a refusal takes nothing."""
        if self.available(now) + _EPSILON >= units:
            self.tokens -= units
            return True
        return False


@dataclass(frozen=True, slots=True)
class PartitionLimits:
    """The ceilings of one physical partition, in units a second, and its burst.

    ``burst_seconds``: how many seconds of unused capacity a partition keeps (at least
    1, so that any item the ceiling allows fits in the bucket). A new partition starts
    with ``initial_burst_seconds`` of capacity (0 up to ``burst_seconds``). Raises
    InvalidInput naming the field that is out of range.
    """

    write_ceiling: float = DYNAMODB_WRITE_CEILING
    read_ceiling: float = DYNAMODB_READ_CEILING
    burst_seconds: float = DYNAMODB_BURST_SECONDS
    initial_burst_seconds: float = 1.0

    def __post_init__(self) -> None:
        for name in ("write_ceiling", "read_ceiling"):
            value = getattr(self, name)
            _require(name, value)
            if value <= 0:
                raise InvalidInput(f"{name} must be > 0 units/s, got {value!r}")
        _require("burst_seconds", self.burst_seconds, minimum=1.0)
        _require("initial_burst_seconds", self.initial_burst_seconds)
        if self.initial_burst_seconds > self.burst_seconds:
            raise InvalidInput(
                f"initial_burst_seconds ({self.initial_burst_seconds:g}) must not exceed "
                f"burst_seconds ({self.burst_seconds:g})"
            )

    def write_bucket(self, now: float) -> TokenBucket:
        """Return the write bucket of a partition first used at ``now``."""
        return TokenBucket(self.write_ceiling, self.write_ceiling * self.burst_seconds,
                           self.write_ceiling * self.initial_burst_seconds, now)

    def read_bucket(self, now: float) -> TokenBucket:
        """Return the read bucket of a partition first used at ``now``."""
        return TokenBucket(self.read_ceiling, self.read_ceiling * self.burst_seconds,
                           self.read_ceiling * self.initial_burst_seconds, now)

    def new_partition(self, now: float) -> PartitionCapacity:
        """Return the buckets of a partition first used at ``now``."""
        return PartitionCapacity(write=self.write_bucket(now), read=self.read_bucket(now))


@dataclass(slots=True)
class PartitionCapacity:
    """The write and read token buckets of one physical partition."""

    write: TokenBucket
    read: TokenBucket
