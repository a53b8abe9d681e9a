"""What a store holds, as plain frozen values: entries, placements, pages and records.

No I/O here: the pure decisions (``shardex.writes``) and the cursor read these types
without depending on the store contract (``shardex.stores.base``) that moves them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Placement", "Position", "QueryPage", "Record", "StoredEntry"]

# A position in a shard's order: (sort, item_id). Entries are ordered by it, by code
# point (which is also UTF-8 byte order, DynamoDB's order for string keys).
Position = tuple[str, str]


@dataclass(frozen=True, slots=True)
class StoredEntry:
    """One index row as a store keeps it."""

    shard_key: str
    sort: str
    item_id: str
    attrs: Mapping[str, Any] = field(default_factory=dict)
    version: int = 1

    @property
    def position(self) -> Position:
        return (self.sort, self.item_id)


@dataclass(frozen=True, slots=True)
class Placement:
    """Where an item's entry is, and the version of the last write that placed it.

    ``entry`` is None for a tombstone: the item was deleted at ``version``, and an
    older late write must not bring it back.
    """

    item_id: str
    version: int
    entry: StoredEntry | None


@dataclass(frozen=True, slots=True)
class QueryPage:
    """One page of a shard, in the order asked for.

    ``resume`` is the position to pass as ``after`` for the next page, or None when
    the shard holds nothing beyond this page. ``units`` is the read capacity consumed.
    """

    entries: list[StoredEntry]
    resume: Position | None
    units: float = 0.0


@dataclass(frozen=True, slots=True)
class Record:
    """A small metadata document and its revision, for compare-and-set writes."""

    body: Mapping[str, Any]
    revision: int
