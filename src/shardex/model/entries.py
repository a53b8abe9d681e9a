"""What a store holds, as plain frozen values: entries, placements, pages and records.

No I/O here: the pure decisions (``shardex.write``) and the cursor read these types
without depending on the store contract (``shardex.stores.base``) that moves them.

Write identity: every write that places an item carries a *token* (``new_token``), and
the placement it leaves records that token and the tokens of the ``HISTORY_LENGTH``
writes before it (``Placement.history``, oldest first; ``NO_TOKEN`` stands for a state
no token wrote: the item never placed, or placed before tokens or by the application).
So whether a given write applied is read from the placement, never guessed from equal
content (``shardex.write.resolve``).
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = ["HISTORY_LENGTH", "MAX_TOKEN_LENGTH", "MAX_VERSION", "NO_TOKEN", "Placement",
           "Position", "QueryPage", "Record", "ScanItem", "ScanPage", "Skipped", "StoredEntry",
           "beyond", "history_after", "is_token", "new_token", "up_to"]

# the largest write version: DynamoDB numbers hold 38 digits
MAX_VERSION = 10**38 - 1

# An item a backfill's Scan read from the table behind a plain index: its id, the indexed
# value as stored (None: not set), and two fields of the index's kind (for a GSI the
# shard attribute or None and whether the sort attribute is set; for an index table the
# sort or None and the item's other attributes).
ScanItem = tuple[str, str | None, Any, Any]
# A Scan page: its items, the cursor to continue from (None: the segment is done) and
# the read units it took.
ScanPage = tuple[list[ScanItem], dict[str, Any] | None, float]

# How many tokens of earlier writes a placement keeps. A write whose try failed
# ambiguously finds out whether it applied by looking for its token in the placement;
# that works while fewer than this many other writes of the item landed in between.
HISTORY_LENGTH = 4
# The history's mark for a state that no token wrote (never placed, or not by shardex).
NO_TOKEN = ""
# DynamoDB's ClientRequestToken alphabet and length, so a token can serve as one.
MAX_TOKEN_LENGTH = 36
_TOKEN = re.compile(rf"[A-Za-z0-9-]{{1,{MAX_TOKEN_LENGTH}}}")


def _fresh_prefix() -> None:
    """A new random prefix for this process's tokens (at import, and in a forked child,
    which would otherwise go on with its parent's prefix and count)."""
    global _prefix, _serial
    _prefix = os.urandom(10).hex()
    _serial = itertools.count()


_prefix = ""
_serial = itertools.count()
_fresh_prefix()
os.register_at_fork(after_in_child=_fresh_prefix)


def new_token() -> str:
    """Return a fresh write token: this process's prefix, 20 random hex digits (80 bits
    from the OS), then a count in hex (at most 36 characters), unique across clients and
    within one. A system call per write had been a fortieth of a throttled write's CPU.

    Never drawn from a seeded generator: two clients built with the same seed must
    still tell their writes apart.
    """
    return f"{_prefix}{next(_serial):x}"


def is_token(token: Any) -> bool:
    """True if ``token`` is a valid write token: 1 to 36 of ``A-Z a-z 0-9 -``."""
    return type(token) is str and _TOKEN.fullmatch(token) is not None

# A position in a shard's order: (sort, item_id). Entries are ordered by it, by code
# point (which is also UTF-8 byte order, DynamoDB's order for string keys).
Position = tuple[str, str]


def beyond(position: Position, bound: Position, descending: bool) -> bool:
    """True if ``position`` lies strictly beyond ``bound`` in the listing's direction."""
    return position < bound if descending else position > bound


def up_to(entries: list[StoredEntry], resume: Position | None, until: Position | None,
          descending: bool) -> tuple[list[StoredEntry], Position | None]:
    """A page of a listing cut at ``until`` (inclusive), for a store that reads past it.

    What lies beyond is dropped; if anything was (or the page resumes beyond ``until``),
    nothing up to ``until`` is left to read, so the page resumes nowhere.
    """
    if until is None:
        return entries, resume
    if entries and beyond(entries[-1].position, until, descending):
        kept = len(entries)
        while kept and beyond(entries[kept - 1].position, until, descending):
            kept -= 1
        return entries[:kept], None
    if resume is not None and not beyond(until, resume, descending):
        return entries, None
    return entries, resume


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
    """Where an item's entry is, the version of the write that placed it, and its token.

    ``entry`` is None for a tombstone: the item was deleted at ``version``, and an
    older late write must not bring it back. ``token`` is the token of the write that
    left this placement (None: written without one), ``history`` the tokens of the
    writes before it, oldest first, at most ``HISTORY_LENGTH``. ``located`` is what a
    store whose items the application writes too (DynamoDB GSI mode) found on the item,
    as ``(attribute, value)`` pairs: a write conditioned on this placement checks them
    all, so an application's own change in between fails it. Empty elsewhere.
    """

    item_id: str
    version: int
    entry: StoredEntry | None
    token: str | None = None
    history: tuple[str, ...] = ()
    located: tuple[tuple[str, Any], ...] = ()

    @property
    def chain(self) -> tuple[str, ...]:
        """The tokens of the writes that led here, oldest first, this one's last."""
        return (*self.history, self.token or NO_TOKEN)



def history_after(expected: Placement | None) -> tuple[str, ...]:
    """The history of a write placed on top of ``expected`` (None: never placed)."""
    if expected is None:
        return (NO_TOKEN,)
    return expected.chain[-HISTORY_LENGTH:]


class Skipped(NamedTuple):
    """A malformed item a listing left out (``malformed="skip"``), and why.

    ``key`` is the shard key read, ``reason`` the MalformedItem's message, ``at`` the
    store clock's seconds. It is also an event on the store's meter, which
    ``store.stats()`` and the metrics exporters count.
    """

    namespace: str
    key: str
    item_id: str
    reason: str
    at: float


@dataclass(frozen=True, slots=True)
class QueryPage:
    """One page of a shard, in the order asked for.

    ``resume`` is the position to pass as ``after`` for the next page, or None when
    the shard holds nothing beyond this page. ``units`` is the read capacity consumed.
    ``skipped``: the malformed items the page left out, when the read skips them
    (``shardex.stores.metered.Skipped``; empty otherwise).
    """

    entries: list[StoredEntry]
    resume: Position | None
    units: float = 0.0
    skipped: tuple[Skipped, ...] = ()


@dataclass(frozen=True, slots=True)
class Record:
    """A small metadata document and its revision, for compare-and-set writes."""

    body: Mapping[str, Any]
    revision: int
