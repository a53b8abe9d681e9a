"""The mover's work units: a range of a source key's sort order, or a Scan segment; pure values.

A reshard's entries are moved off the shard keys of the layout being left (the
*source* keys of each value that changes). A survey reads each source key once, counts
its entries and the ones the target layout puts elsewhere, and cuts the key into ranges
of at most ``split_every`` entries: each range is a ``Unit``, leased to one worker at a
time through its record in the store, and checkpointed after each page (``after``).
``allocate`` shares the mover's rate so that neither a source key nor a target key
takes more than ``rate`` units a second from the mover, however many workers run: the
ranges of one source key are worked one at a time (``busy_sources``), each at its key's
rate. An adoption's backfill is cut into Scan segments of its source instead
(``segment_units``): units of the other kind, leased and recorded the same way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from shardex.errors import MalformedItem
from shardex.model.entries import Position

__all__ = ["Backfilled", "DEFAULT_RATE", "DEFAULT_SPLIT", "KINDS", "Survey", "Unit", "allocate",
           "busy_sources", "segment_units", "tally", "units_of"]

# a quarter of one DynamoDB partition's 1,000 write units a second: the mover must
# never be what makes a key hot
DEFAULT_RATE = 250.0
DEFAULT_SPLIT = 5000


@dataclass(frozen=True, slots=True)
class Unit:
    """One unit of a migration's work, as its record holds it: of one of two kinds.

    - ``range`` (a reshard's, a tier move's): a range of source key ``source`` of
      ``value``, every position after ``start`` (None: the key's beginning) up to and
      including ``end`` (None: the key's end); ``after`` is the checkpoint: everything up
      to it is done. ``rate`` is the write units a second the mover may spend on it.
      ``entries`` is the survey's count, ``to_move`` the entries the target layout puts
      elsewhere; ``moved``, ``skipped`` (gone or changed when reached) and
      ``unresolved`` (a move whose outcome stayed unknown, left for the parity check)
      count what the mover did.
    - ``segment`` (an adoption's backfill): Scan segment ``number`` of ``segments`` of
      the source (``source`` names it, ``value`` is empty, ``rate`` None: each target
      key is paced at the run's rate). ``cursor`` is the key the Scan continues from
      (None: the segment's beginning); ``entries`` counts the items scanned, ``moved``
      the ones copied (a shard attribute set, an entry put), ``skipped`` the ones an
      application write raced (it wrote them itself), ``values`` the items seen per raw
      value.

    ``owner`` holds the lease until ``expires`` (wall seconds); ``started_at`` and
    ``saved_at`` are the wall seconds of its first lease and last checkpoint.
    """

    number: int
    generation: int
    value: str
    source: str
    rate: float | None
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
    kind: str = "range"
    segments: int = 0
    cursor: dict[str, Any] | None = None
    values: dict[str, int] = field(default_factory=dict)
    started_at: float | None = None
    saved_at: float | None = None

    def free(self, now: float) -> bool:
        """True if the unit has work left and no live lease (``now`` in wall seconds)."""
        return not self.done and (self.owner is None or self.expires <= now)

    def leased_at(self, now: float) -> bool:
        """True if a worker holds a live lease on the unit."""
        return not self.done and self.owner is not None and self.expires > now

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
                "expires": self.expires, "direction": self.direction, "kind": self.kind,
                "segments": self.segments, "cursor": self.cursor,
                "values": dict(sorted(self.values.items())), "started_at": self.started_at,
                "saved_at": self.saved_at}

    @classmethod
    def from_body(cls, body: Mapping[str, Any], where: str) -> Unit:
        """Read a work record, of either kind or in the shape of an adoption's segment
        records before there was one kind; MalformedItem naming the record and field if
        it is damaged."""
        try:
            if "source" not in body and "total" in body:
                return _old_segment(body)
            kind = body.get("kind", "range")
            if kind not in KINDS:
                raise ValueError(f"kind {kind!r}")
            rate = body["rate"]
            unit = cls(number=_int(body["number"]), generation=_int(body["generation"]),
                       value=_str(body["value"], empty=kind == "segment"),
                       source=_str(body["source"]),
                       rate=None if rate is None and kind == "segment" else float(rate),
                       start=_position(body["start"]),
                       end=_position(body["end"]), after=_position(body["after"]),
                       done=bool(body["done"]), entries=_int(body["entries"]),
                       to_move=_int(body["to_move"]), moved=_int(body["moved"]),
                       skipped=_int(body["skipped"]), unresolved=_int(body["unresolved"]),
                       owner=None if body["owner"] is None else _str(body["owner"]),
                       expires=float(body["expires"]), direction=_str(body["direction"]),
                       kind=kind, segments=_int(body.get("segments", 0)),
                       cursor=_cursor(body.get("cursor")), values=_values(body.get("values")),
                       started_at=_time(body.get("started_at")),
                       saved_at=_time(body.get("saved_at")))
        except (KeyError, TypeError, ValueError) as exc:
            raise MalformedItem(f"{where} is not a migration work unit ({type(exc).__name__}:"
                                f" {exc}); delete it and run the migration again") from None
        if unit.rate is not None and (not math.isfinite(unit.rate) or unit.rate <= 0):
            raise MalformedItem(f"{where}: rate must be > 0, got {unit.rate!r}")
        return unit

    def leased(self, owner: str | None, now: float, until: float) -> Unit:
        return replace(self, owner=owner, expires=until, started_at=self.started_at
                       or (None if owner is None else now))

    def saved(self, now: float, until: float) -> Unit:
        """The unit as a checkpoint stores it: a done unit gives its lease up."""
        return replace(self, owner=None, expires=0.0, saved_at=now) if self.done \
            else replace(self, expires=until, saved_at=now)


KINDS = ("range", "segment")


def segment_units(segments: int, *, generation: int = 1) -> list[Unit]:
    """The ``segments`` Scan-segment units of a backfill, numbered from 0."""
    return [Unit(number=n, generation=generation, value="", source=f"segment {n}", rate=None,
                 kind="segment", segments=segments) for n in range(segments)]


def _old_segment(body: Mapping[str, Any]) -> Unit:
    """A segment record of the shape adoptions stored before there was one kind of unit
    (``adopt/ID/segment/NNNN``: ``total``, ``start``, ``scanned``, ``updated``, ``raced``)."""
    number = _int(body["number"])
    return Unit(number=number, generation=1, value="", source=f"segment {number}", rate=None,
                kind="segment", segments=_int(body["total"]), cursor=_cursor(body["start"]),
                done=bool(body["done"]), entries=_int(body["scanned"]),
                moved=_int(body["updated"]), skipped=_int(body["raced"]),
                unresolved=_int(body["unresolved"]), values=_values(body["values"]),
                started_at=_time(body["started_at"]), saved_at=_time(body["saved_at"]),
                owner=None if body["owner"] is None else _str(body["owner"]),
                expires=float(body["expires"]))


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


def _str(raw: Any, *, empty: bool = False) -> str:
    if not isinstance(raw, str) or not (raw or empty):
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

    ``add(position, moves, cost)`` for each entry in ascending order (``cost``: the write
    units its move costs, 0 where it stays); ``ranges`` then holds ``(start, end, entries,
    to_move)`` per range of at most ``split_every`` entries, the first from the key's
    beginning and the last to its end; ``units`` the write units the key's moves cost.
    """

    source: str
    split_every: int = DEFAULT_SPLIT
    ranges: list[tuple[Position | None, Position | None, int, int]] = field(
        default_factory=list)
    units: float = 0.0
    _start: Position | None = None
    _last: Position | None = None
    _entries: int = 0
    _to_move: int = 0

    def add(self, position: Position, moves: bool, cost: float = 0.0) -> None:
        if self._entries >= self.split_every:
            self.ranges.append((self._start, self._last, self._entries, self._to_move))
            self._start, self._entries, self._to_move = self._last, 0, 0
        self._entries += 1
        self._to_move += int(moves)
        self.units += cost
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
             rate: float, first: int = 0) -> list[Unit]:
    """The work units of ``value`` from its closed source-key ``surveys``, numbered from ``first``.

    Each range runs at ``rate``, its source key's share (``allocate``): the ranges of one
    key are worked one at a time.
    """
    units: list[Unit] = []
    for survey in surveys:
        for start, end, entries, to_move in survey.ranges:
            units.append(Unit(number=first + len(units), generation=generation, value=value,
                              source=survey.source, rate=rate,
                              start=start, end=end, after=start, entries=entries,
                              to_move=to_move, direction=direction))
    return units


def _time(raw: Any) -> float | None:
    return None if raw is None else float(raw)


def _cursor(raw: Any) -> dict[str, Any] | None:
    if raw is not None and not isinstance(raw, dict):
        raise ValueError(f"a Scan cursor is a key or null, got {raw!r}")
    return raw


def _values(raw: Any) -> dict[str, int]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(
            isinstance(k, str) and _count(v) for k, v in raw.items()):
        raise ValueError(f"values {raw!r}")
    return dict(raw)


def _count(raw: Any) -> bool:
    return not isinstance(raw, bool) and isinstance(raw, int) and raw >= 0


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
    def of(cls, units: list[Unit]) -> Backfilled:
        """The counts of a backfill's segment units (items scanned, copied, raced)."""
        return cls(segments=len(units), done=sum(u.done for u in units),
                   scanned=sum(u.entries for u in units), updated=sum(u.moved for u in units),
                   raced=sum(u.skipped for u in units),
                   unresolved=sum(u.unresolved for u in units))
