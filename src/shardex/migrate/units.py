"""The mover's work units: a source shard key, or a range of its sort order; pure values.

A reshard's entries are moved off the shard keys of the layout being left (the
*source* keys of each value that changes). A survey reads each source key once, counts
its entries and the ones the target layout puts elsewhere, and cuts the key into ranges
of at most ``split_every`` entries: each range is a ``Unit``, leased to one worker at a
time through its record in the store, and checkpointed after each page (``after``).
``allocate`` shares the mover's rate so that neither a source key nor a target key
takes more than ``rate`` units a second from the mover, however many workers run: the
ranges of one source key are worked one at a time (``busy_sources``), each at its key's
rate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from shardex.errors import MalformedItem
from shardex.model.entries import Position

__all__ = ["Backfilled", "DEFAULT_RATE", "DEFAULT_SPLIT", "Segment", "Survey", "Unit", "allocate",
           "busy_sources", "tally", "units_of"]

# a quarter of one DynamoDB partition's 1,000 write units a second: the mover must
# never be what makes a key hot
DEFAULT_RATE = 250.0
DEFAULT_SPLIT = 5000


class _Lease:
    """What a leased work record answers from its ``done``, ``owner`` and ``expires``."""

    __slots__ = ()
    done: bool
    owner: str | None
    expires: float

    def free(self, now: float) -> bool:
        """True if the record has work left and no live lease (``now`` in wall seconds)."""
        return not self.done and (self.owner is None or self.expires <= now)

    def leased_at(self, now: float) -> bool:
        """True if a worker holds a live lease on the record."""
        return not self.done and self.owner is not None and self.expires > now


@dataclass(frozen=True, slots=True)
class Unit(_Lease):
    """One range of a source key, as its record holds it.

    The range is every position after ``start`` (None: the key's beginning) up to and
    including ``end`` (None: the key's end); ``after`` is the checkpoint: everything up
    to it is done. ``rate`` is the write units a second the mover may spend on it.
    ``owner`` holds the lease until ``expires`` (wall seconds). ``to_move`` is the
    survey's count of entries the target layout puts elsewhere; ``moved``, ``skipped``
    (gone or already in place when reached) and ``unresolved`` (a move whose outcome
    stayed unknown, left for the parity check) count what the mover did.
    """

    number: int
    generation: int
    value: str
    source: str
    rate: float
    start: Position | None = None
    end: Position | None = None
    after: Position | None = None
    done: bool = False
    entries: int = 0
    to_move: int = 0
    moved: int = 0
    skipped: int = 0
    unresolved: int = 0
    owner: str | None = None
    expires: float = 0.0
    direction: str = field(default="forward")

    @property
    def remaining(self) -> int:
        """Entries still expected to move (0 once the unit is done)."""
        return 0 if self.done else max(0, self.to_move - self.moved - self.skipped)

    def contains(self, position: Position) -> bool:
        return self.end is None or position <= self.end

    def to_body(self) -> dict[str, Any]:
        return {"number": self.number, "generation": self.generation, "value": self.value,
                "source": self.source, "rate": self.rate, "start": _pos(self.start),
                "end": _pos(self.end), "after": _pos(self.after), "done": self.done,
                "entries": self.entries, "to_move": self.to_move, "moved": self.moved,
                "skipped": self.skipped, "unresolved": self.unresolved, "owner": self.owner,
                "expires": self.expires, "direction": self.direction}

    @classmethod
    def from_body(cls, body: Mapping[str, Any], where: str) -> Unit:
        """Read a unit record; MalformedItem naming the record and field if it is damaged."""
        try:
            unit = cls(number=_int(body["number"]), generation=_int(body["generation"]),
                       value=_str(body["value"]), source=_str(body["source"]),
                       rate=float(body["rate"]), start=_position(body["start"]),
                       end=_position(body["end"]), after=_position(body["after"]),
                       done=bool(body["done"]), entries=_int(body["entries"]),
                       to_move=_int(body["to_move"]), moved=_int(body["moved"]),
                       skipped=_int(body["skipped"]), unresolved=_int(body["unresolved"]),
                       owner=None if body["owner"] is None else _str(body["owner"]),
                       expires=float(body["expires"]), direction=_str(body["direction"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise MalformedItem(f"{where} is not a reshard work unit ({type(exc).__name__}: "
                                f"{exc}); delete it and run the reshard again") from None
        if not math.isfinite(unit.rate) or unit.rate <= 0:
            raise MalformedItem(f"{where}: rate must be > 0, got {unit.rate!r}")
        return unit

    def leased(self, owner: str | None, now: float, until: float) -> Unit:
        return replace(self, owner=owner, expires=until)

    def saved(self, now: float, until: float) -> Unit:
        """The unit as a checkpoint stores it: a done unit gives its lease up."""
        return replace(self, owner=None, expires=0.0) if self.done \
            else replace(self, expires=until)


def _pos(position: Position | None) -> list[str] | None:
    return None if position is None else [position[0], position[1]]


def _position(raw: Any) -> Position | None:
    if raw is None:
        return None
    if not isinstance(raw, list) or len(raw) != 2 or not all(isinstance(p, str) for p in raw):
        raise ValueError(f"a position is a [sort, item id] pair, got {raw!r}")
    return (raw[0], raw[1])


def _int(raw: Any) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise ValueError(f"expected a count, got {raw!r}")
    return raw


def _str(raw: Any) -> str:
    if not isinstance(raw, str) or not raw:
        raise ValueError(f"expected text, got {raw!r}")
    return raw


def allocate(rate: float, *, sources: int, targets: int) -> float:
    """The write units a second the mover may spend draining one source key.

    ``sources`` keys drain into ``targets`` keys, the target keys evenly: each takes
    ``sources / targets`` of a source key's rate, so a source key's rate is capped at
    ``rate * targets / sources`` to keep every target key within ``rate`` too.
    """
    return rate * min(1.0, targets / max(1, sources))


@dataclass(slots=True)
class Survey:
    """Counts one source key's entries in order and cuts it into ranges as it goes.

    ``add(position, moves)`` for each entry in ascending order; ``ranges`` then holds
    ``(start, end, entries, to_move)`` per range of at most ``split_every`` entries, the
    first from the key's beginning and the last to its end.
    """

    source: str
    split_every: int = DEFAULT_SPLIT
    ranges: list[tuple[Position | None, Position | None, int, int]] = field(
        default_factory=list)
    _start: Position | None = None
    _last: Position | None = None
    _entries: int = 0
    _to_move: int = 0

    def add(self, position: Position, moves: bool) -> None:
        if self._entries >= self.split_every:
            self.ranges.append((self._start, self._last, self._entries, self._to_move))
            self._start, self._entries, self._to_move = self._last, 0, 0
        self._entries += 1
        self._to_move += int(moves)
        self._last = position

    def close(self) -> None:
        """End the survey: the last range runs to the key's end."""
        self.ranges.append((self._start, None, self._entries, self._to_move))
        self._start, self._entries, self._to_move = None, 0, 0

    @property
    def entries(self) -> int:
        return sum(r[2] for r in self.ranges) + self._entries

    @property
    def to_move(self) -> int:
        return sum(r[3] for r in self.ranges) + self._to_move


def busy_sources(units: list[Unit], now: float, *, besides: int | None = None) -> set[str]:
    """The source keys with a unit under a live lease (other than unit ``besides``)."""
    return {u.source for u in units if u.leased_at(now) and u.number != besides}


def units_of(value: str, surveys: list[Survey], *, generation: int, direction: str,
             rate: float, targets: int, first: int = 0) -> list[Unit]:
    """The work units of ``value`` from its closed source-key ``surveys``, numbered from ``first``.

    Each range runs at its source key's rate (``allocate``): the ranges of one key are
    worked one at a time.
    """
    per_key = allocate(rate, sources=len(surveys), targets=targets)
    units: list[Unit] = []
    for survey in surveys:
        for start, end, entries, to_move in survey.ranges:
            units.append(Unit(number=first + len(units), generation=generation, value=value,
                              source=survey.source, rate=per_key,
                              start=start, end=end, after=start, entries=entries,
                              to_move=to_move, direction=direction))
    return units


@dataclass(frozen=True, slots=True)
class Segment(_Lease):
    """One Scan segment of an adoption's backfill, as its record holds it.

    ``start`` is the key the Scan continues from (None: the segment's beginning);
    ``scanned`` items read, ``updated`` shard attributes set, ``raced`` items an
    application write changed first, ``unresolved`` updates that kept failing (left for
    verify), ``values`` the items seen per raw value. ``started_at``/``saved_at`` are
    wall seconds (rate and ETA). ``owner`` holds the lease until ``expires``.
    """

    number: int
    total: int
    start: dict[str, Any] | None = None
    done: bool = False
    scanned: int = 0
    updated: int = 0
    raced: int = 0
    unresolved: int = 0
    values: dict[str, int] = field(default_factory=dict)
    started_at: float | None = None
    saved_at: float | None = None
    owner: str | None = None
    expires: float = 0.0

    def leased(self, owner: str | None, now: float, until: float) -> Segment:
        return replace(self, owner=owner, expires=until, started_at=self.started_at
                       or (None if owner is None else now))

    def saved(self, now: float, until: float) -> Segment:
        return replace(self, saved_at=now, expires=until,
                       owner=None if self.done else self.owner)

    def to_body(self) -> dict[str, Any]:
        return {"number": self.number, "total": self.total, "start": self.start,
                "done": self.done, "scanned": self.scanned, "updated": self.updated,
                "raced": self.raced, "unresolved": self.unresolved,
                "values": dict(sorted(self.values.items())), "started_at": self.started_at,
                "saved_at": self.saved_at, "owner": self.owner, "expires": self.expires}

    @classmethod
    def from_body(cls, body: Mapping[str, Any], where: str) -> Segment:
        """Read a segment record; MalformedItem naming it if it is damaged."""
        try:
            values = body["values"]
            if not isinstance(values, dict) or not all(
                    isinstance(k, str) and isinstance(v, int) for k, v in values.items()):
                raise ValueError(f"values {values!r}")
            start = body["start"]
            if start is not None and not isinstance(start, dict):
                raise ValueError(f"start {start!r}")
            return cls(number=int(body["number"]), total=int(body["total"]), start=start,
                       done=bool(body["done"]), scanned=int(body["scanned"]),
                       updated=int(body["updated"]), raced=int(body["raced"]),
                       unresolved=int(body["unresolved"]), values=dict(values),
                       started_at=_time(body["started_at"]), saved_at=_time(body["saved_at"]),
                       owner=body["owner"], expires=float(body["expires"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise MalformedItem(f"{where} is not a backfill segment ({type(exc).__name__}: "
                                f"{exc}); delete it and run the adoption again") from None


def _time(raw: Any) -> float | None:
    return None if raw is None else float(raw)


def tally(units: list[Unit], direction: str) -> tuple[int | None, int, int | None]:
    """``(total, moved, remaining)`` of a reshard's ``direction``, from its unit records.

    ``total`` is what the direction's first plan set out to move (fixed once planned:
    None before), ``moved`` what every generation's units moved (it may pass the total by
    the entries writers put on the old layout while readers widened, in read-both),
    ``remaining`` the total less what was moved or found already in place (0 once the
    latest plan is done).
    """
    mine = [u for u in units if u.direction == direction]
    moved = sum(u.moved for u in mine)
    if not mine:
        return None, moved, None
    first = min(u.generation for u in mine)
    latest = max(u.generation for u in mine)
    total = sum(u.to_move for u in mine if u.generation == first)
    if all(u.done for u in mine if u.generation == latest):
        return total, moved, 0
    return total, moved, max(0, total - sum(u.moved + u.skipped for u in mine))


@dataclass(frozen=True, slots=True)
class Backfilled:
    """What the backfill's segments say: counts over every segment."""

    segments: int
    done: int
    scanned: int
    updated: int
    raced: int
    unresolved: int

    @property
    def finished(self) -> bool:
        return self.segments > 0 and self.done == self.segments

    @classmethod
    def of(cls, segments: list[Segment]) -> Backfilled:
        return cls(segments=len(segments), done=sum(s.done for s in segments),
                   **{name: sum(getattr(s, name) for s in segments)
                      for name in ("scanned", "updated", "raced", "unresolved")})
