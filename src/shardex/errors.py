"""The exception hierarchy of shardex.

Every error a store's driver raises is mapped at the store's boundary to the most
specific class below, with the driver's exception chained (``raise ... from exc``).
A write (``put``, ``move``, ``delete``) that raises anything but OutcomeUnknown did not
apply: shardex found out before raising::

    ShardexError
    ├── InvalidInput                  bad arguments; also a ValueError
    │   ├── InvalidKey                a logical key, item id or sort that cannot be stored
    │   ├── InvalidPolicy             a shard or admission policy out of range
    │   ├── InvalidRouting            a routing document that does not validate
    │   │   └── DamagedRouting        the stored routing record (also a MalformedItem)
    │   ├── InvalidCursor             a cursor that was tampered with, truncated or misused
    │   ├── InvalidURI                a store URI that cannot be parsed
    │   ├── InvalidLog                a malformed access-log row (file, line, column)
    │   └── StoreInUse                a table or GSI that already serves another index
    ├── MissingDependency             a backend's driver is not installed; also an ImportError
    ├── CapabilityMissing             the store cannot do what the caller needs
    ├── RoutingConflict               the stored routing differs from the one given
    ├── RoutingStale                  the routing could not be refreshed within its lease
    ├── ReshardRefused                a reshard (or adoption) step not allowed in its state
    ├── AdmissionRejected             admission control refused a request before the store
    └── StoreError                    the store refused or failed a request
        ├── Throttled                 a partition's capacity was exceeded; safe to retry
        ├── ConditionFailed           a conditional write found another state
        ├── NotFound                  a table, index or record the caller named does not exist
        ├── Unavailable               the store could not be reached or did not answer
        ├── IncompleteRead            some shards of a read failed; nothing partial is returned
        ├── OutcomeUnknown            a write may or may not have applied, and shardex cannot tell
        └── MalformedItem             an item or record in the store is not in a shape shardex reads
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = [
    "AdmissionRejected",
    "CapabilityMissing",
    "ConditionFailed",
    "DamagedRouting",
    "IncompleteRead",
    "InvalidCursor",
    "InvalidInput",
    "InvalidKey",
    "InvalidLog",
    "InvalidPolicy",
    "InvalidRouting",
    "InvalidURI",
    "MalformedItem",
    "MissingDependency",
    "NotFound",
    "OutcomeUnknown",
    "ReshardRefused",
    "RoutingConflict",
    "RoutingStale",
    "ShardexError",
    "StoreError",
    "StoreInUse",
    "Throttled",
    "Unavailable",
]


class ShardexError(Exception):
    """Base class of every error shardex raises."""


class InvalidInput(ShardexError, ValueError):
    """An argument or document was refused before any request was made."""


class InvalidKey(InvalidInput):
    """A logical key, item id or sort value that cannot be stored."""


class InvalidPolicy(InvalidInput):
    """A shard or admission policy with a field out of range; the message names the field."""


class InvalidRouting(InvalidInput):
    """A routing document that does not validate; the message names the field."""


class InvalidCursor(InvalidInput):
    """A cursor that was tampered with, truncated, or used for another value or order."""


class InvalidURI(InvalidInput):
    """A store URI that cannot be parsed or names an unknown option."""


class InvalidLog(InvalidInput):
    """A malformed access-log row; ``path``, ``line`` and ``column`` say where."""

    def __init__(self, message: str, *, path: str, line: int | None = None,
                 column: str | None = None) -> None:
        where = path if line is None else f"{path}:{line}"
        if column is not None:
            where += f" column {column!r}"
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line
        self.column = column


class StoreInUse(InvalidInput):
    """The table or GSI already serves another index, as a read of it found: refused by
    what the store holds (the command line exits 1), not by the arguments alone."""


class MissingDependency(ShardexError, ImportError):
    """A backend's optional driver is missing; the message names the extra to install."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(
            f"{package} is not installed; run: pip install 'shardex[{extra}]'"
        )
        self.package = package
        self.extra = extra


class CapabilityMissing(ShardexError):
    """The store lacks a capability (such as multi-partition transactions) the caller needs."""


class RoutingConflict(ShardexError):
    """The routing given to an index differs from the routing stored for it."""


class RoutingStale(ShardexError):
    """The index could not refresh its routing within the routing's lease.

    A client whose last successful read of the routing record is older than the lease
    stops reading and writing rather than act on a layout that may have changed since
    (a reshard waits out the lease between its steps). The message says when the
    routing was last read and why refreshing failed; the refresh is retried on the
    next call.
    """


class ReshardRefused(ShardexError):
    """A reshard step was asked for in a state that does not allow it; nothing changed.

    The message says why (a reshard already under way, a cutover before a clean parity
    report, a rollback after the old layout was retired, ...) and what to run instead.
    """


class AdmissionRejected(ShardexError):
    """Admission control refused a request of logical key ``key``; the store never saw it.

    ``retry_after`` is the soonest, in seconds, that the same request could be admitted
    (None: never, it asks for more than its budget lets its priority use). ``op``,
    ``units`` and ``priority`` describe the request.
    """

    def __init__(self, key: str, *, retry_after: float | None, op: str = "write",
                 units: float = 1.0, priority: str = "normal", reason: str = "") -> None:
        when = "never" if retry_after is None else f"retry after {retry_after:.3g} s"
        super().__init__(f"admission refused {op} of {units:g} unit(s) of {key!r} "
                         f"(priority {priority}): {reason or 'budget exhausted'}; {when}")
        self.key = key
        self.retry_after = retry_after
        self.op = op
        self.units = units
        self.priority = priority


class StoreError(ShardexError):
    """The store refused or failed a request."""


class Throttled(StoreError):
    """A partition's capacity was exceeded; the request did not take effect.

    ``reason`` carries the store's own throttle reason where it gives one, ``key``
    the partition (shard) key that throttled where it is known, and ``retry_after``
    the seconds the store asked to wait before a retry (Cosmos DB's
    ``x-ms-retry-after-ms``), None where it names none.
    """

    def __init__(self, message: str, *, key: str | None = None,
                 reason: str | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.reason = reason
        self.retry_after = retry_after


class ConditionFailed(StoreError):
    """A conditional write found the record or entry in another state than expected."""


class NotFound(StoreError):
    """A table, index or record the caller named does not exist."""


class Unavailable(StoreError):
    """The store could not be reached, or did not answer in time.

    ``may_have_applied`` is False where the store knows a write it failed did not
    apply: no request that could make it take effect had been sent (a store whose
    write is several requests with one commit point failed before the commit).
    """

    def __init__(self, message: str, *, may_have_applied: bool = True) -> None:
        super().__init__(message)
        self.may_have_applied = may_have_applied


class IncompleteRead(StoreError):
    """A read failed on some shards; ``failed`` maps each failed shard key to its error.

    shardex never returns the entries of the shards that answered as if they were
    the whole result: the read raises this instead.
    """

    def __init__(self, value: str, failed: dict[str, BaseException]) -> None:
        keys: Sequence[str] = sorted(failed)
        super().__init__(
            f"read of {value!r} incomplete: {len(keys)} shard(s) failed: "
            + ", ".join(f"{k} ({type(failed[k]).__name__})" for k in keys)
        )
        self.value = value
        self.failed = dict(failed)


class OutcomeUnknown(StoreError):
    """A write may have applied or not, and shardex could not find out which.

    Raised only after a try of the write failed ambiguously (a timeout, an unreachable
    store) and reading the item's placement back did not settle it (the store stayed
    unreachable, or too many other writes landed since). ``item_id`` names the item and
    ``token`` is the write's token: the write applied if the item's placement carries
    it (``Placement.token`` or ``Placement.history``); ``index.get(item_id)`` shows the
    entry as it is now.
    """

    def __init__(self, message: str, *, item_id: str, token: str) -> None:
        super().__init__(message)
        self.item_id = item_id
        self.token = token


class MalformedItem(StoreError):
    """An item, record or attribute in the store is not in the shape shardex reads.

    The message names the item (or record) and the attribute at fault, and what was
    expected; shardex changes nothing about it. Something other than shardex wrote it
    (an application, a tool, a hand edit): fix or remove the attribute. Raised by a
    listing, it also names the shard key read, and ``item_id`` and ``key`` hold both.
    """

    def __init__(self, message: str, *, item_id: str | None = None,
                 key: str | None = None) -> None:
        super().__init__(message)
        self.item_id = item_id
        self.key = key


_SHOWN_INT_BITS = 160  # about 48 digits: a longer int is described by its length
_LOG10_2 = math.log10(2)


def brief(value: object, limit: int = 80) -> str:
    """``repr(value)`` for an error message: at most ``limit`` characters, and never failing.

    An int of more than about 48 digits is described by its length ("an int of 5,001
    digits"): Python refuses to print one of more than 4,300 digits, and raises
    ValueError instead. A value whose repr fails is named by its type.
    """
    if isinstance(value, int) and not isinstance(value, bool) \
            and value.bit_length() > _SHOWN_INT_BITS:
        size = abs(value)
        digits = max(1, int((size.bit_length() - 1) * _LOG10_2) - 1)
        while 10**digits <= size:
            digits += 1
        return f"an int of {digits:,} digits"
    try:
        text = repr(value)
    except Exception:  # an int too long to print inside a container, or a broken __repr__
        return f"a {type(value).__name__}"
    return text if len(text) <= limit else f"{text[:limit - 3]}..."


class DamagedRouting(InvalidRouting, MalformedItem):
    """The routing record the store holds does not validate: an InvalidRouting (naming the
    record and the field at fault) that is what the store holds, not an argument, so
    also a MalformedItem (the command line exits 1, as for any damaged record)."""
