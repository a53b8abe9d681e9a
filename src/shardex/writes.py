"""The write decision: from an item's current placement and a write request, what to do next.

Pure: ``decide`` reads no store and raises nothing; it returns a decision value that the
index's write loop carries out:

- ``Write(entry, version, expected)``: place ``entry`` (None: delete) at ``version``,
  as a compare-and-set on the placement version ``expected``;
- ``Skip(result)``: nothing to write; the call returns ``result`` (True when the write
  already landed, False when a newer write or the item's absence makes it moot);
- ``Refuse(error)``: the request cannot apply to the item as it is; raise ``error``.

The loop locates the item, decides, and on a ConditionFailed from the store (another
writer moved the item first) locates and decides again. Passing the last ``Write`` as
``attempted`` lets the decision recognise a try that looked failed but landed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shardex.errors import ConditionFailed, ShardexError
from shardex.keys import parse_shard_key
from shardex.routing import Routing
from shardex.stores.entries import Placement, StoredEntry

__all__ = ["Decision", "Delete", "Move", "Put", "Refuse", "Skip", "Write", "WriteRequest",
           "decide"]


@dataclass(frozen=True, slots=True)
class Put:
    """Write the item's entry under ``value`` (moving it there from wherever it is).

    ``fresh_key`` is the shard key a new entry of ``value`` would take under the routing
    (the index draws it: a random or round-robin choice is not the decision's to make).
    """

    value: str
    item_id: str
    sort: str
    attrs: Mapping[str, Any]
    version: int | None
    fresh_key: str


@dataclass(frozen=True, slots=True)
class Move:
    """Move the item's entry from ``old`` to ``new``; ``sort``/``attrs`` None keep its own."""

    item_id: str
    old: str
    new: str
    sort: str | None
    attrs: Mapping[str, Any] | None
    version: int | None
    fresh_key: str


@dataclass(frozen=True, slots=True)
class Delete:
    """Delete the item's entry if it is under ``value``."""

    value: str
    item_id: str
    version: int | None


WriteRequest = Put | Move | Delete


@dataclass(frozen=True, slots=True)
class Write:
    """Place ``entry`` (None: a tombstone) at ``version`` if the placement is at ``expected``."""

    entry: StoredEntry | None
    version: int
    expected: int | None


@dataclass(frozen=True, slots=True)
class Skip:
    """Write nothing; the call returns ``result``."""

    result: bool


@dataclass(frozen=True, slots=True)
class Refuse:
    """Write nothing; the call raises ``error``."""

    error: ShardexError


Decision = Write | Skip | Refuse


def _value_of(entry: StoredEntry) -> str:
    return parse_shard_key(entry.shard_key)[0]


def _target(routing: Routing, value: str, fresh_key: str, current: StoredEntry | None) -> str:
    # An entry already on one of the value's current shards stays there: for the random
    # strategies a re-put must not wander, and for hash it is the same key anyway.
    if current is not None and routing.is_current_key(value, current.shard_key) \
            and routing.policy(value).strategy != "hash":
        return current.shard_key
    return fresh_key


def decide(request: WriteRequest, current: Placement | None, routing: Routing, *,
           attempted: Write | None = None) -> Decision:
    """Decide what ``request`` does to an item whose placement is ``current``.

    ``routing`` is the layout writes follow; ``attempted`` the last Write the loop
    tried for this request, if any.
    """
    if attempted is not None and current is not None and \
            (current.version, current.entry) == (attempted.version, attempted.entry):
        return Skip(True)  # an earlier try that looked failed had landed
    held = 0 if current is None else current.version
    if request.version is not None and request.version <= held:
        return Skip(False)  # a newer write already placed (or deleted) this item
    entry = None if current is None else current.entry
    version = held + 1 if request.version is None else request.version
    expected = None if current is None else current.version
    item_id = request.item_id
    if isinstance(request, Put):
        return Write(StoredEntry(
            shard_key=_target(routing, request.value, request.fresh_key, entry),
            sort=request.sort, item_id=item_id, attrs=request.attrs, version=version),
            version, expected)
    if isinstance(request, Move):
        if entry is None or _value_of(entry) != request.old:
            where = "no entry" if entry is None else f"its entry under {_value_of(entry)!r}"
            return Refuse(ConditionFailed(f"cannot move {item_id!r} from {request.old!r} to "
                                          f"{request.new!r}: the item has {where}"))
        return Write(StoredEntry(
            shard_key=_target(routing, request.new, request.fresh_key, entry),
            sort=entry.sort if request.sort is None else request.sort, item_id=item_id,
            attrs=entry.attrs if request.attrs is None else request.attrs, version=version),
            version, expected)
    if entry is None or _value_of(entry) != request.value:
        return Skip(False)
    return Write(None, version, expected)
