"""What a routing document says about the reshard under way: its id, timing and parity.

Pure values, no I/O. A routing in transition (``shardex.routing.Routing`` with a
``previous`` layout) carries a ``Transition``: which reshard it is (``id``), whether it
moves toward the new layout or back (``direction``), the logical keys whose entries
the mover moves (``values``), when clients last had to change what they do
(``changed_at``, wall seconds) and the ``margin`` the runner waits beyond the routing's
lease, the last parity report (``Parity``), and the retention the operator asked for.
Every field is validated; a malformed one raises InvalidRouting naming it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, cast, get_args

from shardex.errors import InvalidKey, InvalidRouting, brief
from shardex.keys import validate_item_id, validate_value

__all__ = ["DIRECTIONS", "Direction", "GAP_KINDS", "Gap", "KINDS", "Kind", "Parity", "Transition",
           "fields_of"]

Direction = Literal["forward", "rollback"]
DIRECTIONS: tuple[str, ...] = get_args(Direction)
# how entries change layout: a move takes each off the old layout onto the new one; a
# copy (an adoption) puts each on the new one too, so both hold every entry at once
Kind = Literal["move", "copy"]
KINDS: tuple[str, ...] = get_args(Kind)
# what a parity check counts: entries a reader of the target layout alone would miss,
# rows no placement points at, entries on a key the layout does not give them, and
# entries whose row differs from their placement
GAP_KINDS = ("missing", "extra", "misplaced", "mismatched")
MAX_EXAMPLES = 20
_ID = re.compile(r"[A-Za-z0-9-]{1,64}")
_MAX_SECONDS = 1e12  # wall seconds or a duration: some 31,700 years


class Gap(NamedTuple):
    """One entry a parity check found wrong: its ``kind``, value, item and shard key."""

    kind: str
    value: str
    item_id: str
    shard_key: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "value": self.value, "item_id": self.item_id,
                "shard_key": self.shard_key}


def _fail(where: str, message: str) -> InvalidRouting:
    return InvalidRouting(f"{where}: {message}")


def _count(doc: Mapping[str, Any], name: str, where: str) -> int:
    value = doc.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _fail(f"{where}.{name}", f"expected an integer >= 0, got {brief(value)}")
    return value


def _seconds(doc: Mapping[str, Any], name: str, where: str, *, optional: bool = False
             ) -> float | None:
    value = doc.get(name)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not 0 <= value <= _MAX_SECONDS:
        raise _fail(f"{where}.{name}", f"expected a number of seconds from 0 to "
                                       f"{_MAX_SECONDS:g}, got {brief(value)}")
    return float(value)


def fields_of(doc: Any, where: str, *, required: set[str], optional: set[str]
              ) -> Mapping[str, Any]:
    """``doc`` if it is an object with every ``required`` field and no other than
    ``optional``; else InvalidRouting naming ``where`` and the fields at fault."""
    if not isinstance(doc, dict):
        raise _fail(where, f"expected an object, got {type(doc).__name__}")
    keys = set(cast(dict[str, Any], doc))
    unknown = sorted(map(brief, keys - required - optional))  # a parsed key may be no text
    if unknown:
        raise _fail(where, f"unknown field(s) {', '.join(unknown)}")
    missing = sorted(required - keys)
    if missing:
        raise _fail(where, f"missing field(s) {', '.join(map(repr, missing))}")
    return cast(dict[str, Any], doc)


@dataclass(frozen=True, slots=True)
class Parity:
    """A parity report: the union of both layouts' keys checked against the target alone.

    ``checked_at`` is when the check finished (wall seconds), ``entries`` how many
    entries it read; the four counts are the gaps by kind (``GAP_KINDS``) and
    ``examples`` up to twenty of them.
    """

    checked_at: float
    entries: int
    missing: int = 0
    extra: int = 0
    misplaced: int = 0
    mismatched: int = 0
    examples: tuple[Gap, ...] = ()

    @property
    def gaps(self) -> int:
        """All gaps together: zero means the target layout alone holds every entry, right."""
        return self.missing + self.extra + self.misplaced + self.mismatched

    @property
    def clean(self) -> bool:
        return self.gaps == 0

    def counts(self) -> dict[str, int]:
        return {kind: getattr(self, kind) for kind in GAP_KINDS}

    def to_dict(self) -> dict[str, Any]:
        return {"checked_at": self.checked_at, "entries": self.entries, **self.counts(),
                "examples": [gap.to_dict() for gap in self.examples[:MAX_EXAMPLES]]}

    @classmethod
    def from_dict(cls, doc: Any, where: str) -> Parity:
        fields = fields_of(doc, where, required={"checked_at", "entries", *GAP_KINDS},
                         optional={"examples"})
        raw = fields.get("examples", [])
        if not isinstance(raw, list) or len(raw) > MAX_EXAMPLES:
            raise _fail(f"{where}.examples", f"expected a list of at most {MAX_EXAMPLES} "
                                             f"gaps, got {type(raw).__name__}")
        examples = []
        for i, gap in enumerate(raw):
            at = f"{where}.examples[{i}]"
            item = fields_of(gap, at, required={"kind", "value", "item_id", "shard_key"},
                           optional=set())
            if item["kind"] not in GAP_KINDS:
                raise _fail(f"{at}.kind", f"expected one of {', '.join(GAP_KINDS)}, "
                                          f"got {item['kind']!r}")
            try:
                validate_value(item["value"])
                validate_item_id(item["item_id"])
                validate_item_id(item["shard_key"])
            except InvalidKey as exc:
                raise _fail(at, str(exc)) from None
            examples.append(Gap(item["kind"], item["value"], item["item_id"],
                                item["shard_key"]))
        checked_at = _seconds(fields, "checked_at", where)
        assert checked_at is not None
        return cls(checked_at=checked_at, entries=_count(fields, "entries", where),
                   **{kind: _count(fields, kind, where) for kind in GAP_KINDS},
                   examples=tuple(examples))


@dataclass(frozen=True, slots=True)
class Transition:
    """The migration a routing in transition belongs to: a reshard's, or an adoption's.

    - ``id``: the migration's name (1 to 64 of A-Z, a-z, 0-9, '-'); its work records
      in the store are named after it.
    - ``direction``: ``forward`` toward the routing's own layout, ``rollback`` when a
      reshard is being undone (the routing's own layout is then the old one).
    - ``values``: the logical keys whose entries the mover moves.
    - ``started_at``, ``changed_at``: wall seconds; ``changed_at`` is when clients last
      had to change what they do (the layout written or the keys read).
    - ``margin``: seconds the runner waits beyond the routing's lease after such a change.
    - ``generation``: the mover's pass; a parity check with gaps starts another.
    - ``parity``: the last parity report, or None.
    - ``retain``: seconds the old layout stays restorable after cutover;
      ``retire_after`` the wall time from which it may be retired (None: not asked).
    - ``kind``: ``move`` (a reshard) or ``copy`` (an adoption, ``shardex.adoption``).
    - ``tiers``: (tier name, the data its store names: ``shardex.tiers.identity``) of
      each tier the moving values leave or enter, as the reshard began with them: a
      runner given another store for one is refused (the entries it moved would be
      where no client of the first looks).
    """

    id: str
    started_at: float
    changed_at: float
    margin: float
    direction: Direction = "forward"
    values: tuple[str, ...] = ()
    generation: int = 1
    parity: Parity | None = None
    retain: float = 0.0
    retire_after: float | None = None
    kind: Kind = "move"
    tiers: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not _ID.fullmatch(self.id):
            raise InvalidRouting(f"reshard id must be 1 to 64 of A-Z, a-z, 0-9 and '-', "
                                 f"got {self.id!r}")
        if self.direction not in DIRECTIONS:
            raise InvalidRouting(f"reshard direction must be one of {', '.join(DIRECTIONS)}, "
                                 f"got {self.direction!r}")
        if self.kind not in KINDS:
            raise InvalidRouting(f"migration kind must be one of {', '.join(KINDS)}, "
                                 f"got {self.kind!r}")
        for value in self.values:
            try:
                validate_value(value)
            except InvalidKey as exc:
                raise InvalidRouting(f"reshard values: {exc}") from None
        if isinstance(self.generation, bool) or not isinstance(self.generation, int) \
                or self.generation < 1:
            raise InvalidRouting(f"reshard generation must be an integer >= 1, "
                                 f"got {self.generation!r}")

    def to_dict(self) -> dict[str, Any]:
        # "kind" only for a copy: a reshard's document reads as it always did
        kind = {} if self.kind == "move" else {"kind": self.kind}
        tiers = {"tiers": dict(self.tiers)} if self.tiers else {}
        return {"id": self.id, "direction": self.direction, "values": list(self.values),
                "started_at": self.started_at, "changed_at": self.changed_at,
                "margin": self.margin, "generation": self.generation,
                "parity": None if self.parity is None else self.parity.to_dict(),
                "retain": self.retain, "retire_after": self.retire_after, **kind, **tiers}

    @classmethod
    def from_dict(cls, doc: Any, where: str = "routing.reshard") -> Transition:
        """Validate a transition document; raise InvalidRouting naming the field at fault."""
        fields = fields_of(doc, where, required={"id", "direction", "values", "started_at",
                                               "changed_at", "margin"},
                         optional={"generation", "parity", "retain", "retire_after", "kind",
                                   "tiers"})
        values = fields["values"]
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise _fail(f"{where}.values", f"expected a list of logical keys, got {values!r}")
        parity = fields.get("parity")
        generation = fields.get("generation", 1)
        tiers = fields.get("tiers", {})
        if not isinstance(tiers, dict) or not all(
                isinstance(k, str) and k and isinstance(v, str) and v for k, v in tiers.items()):
            raise _fail(f"{where}.tiers", "expected an object of tier names and the stores "
                        f"they named at start, got {tiers!r}")
        times = {name: _seconds(fields, name, where)
                 for name in ("started_at", "changed_at", "margin")}
        try:
            return cls(id=fields["id"], direction=fields["direction"], values=tuple(values),
                       started_at=times["started_at"] or 0.0,
                       changed_at=times["changed_at"] or 0.0, margin=times["margin"] or 0.0,
                       generation=generation,
                       parity=None if parity is None else Parity.from_dict(
                           parity, f"{where}.parity"),
                       retain=_seconds(fields, "retain", where, optional=True) or 0.0,
                       retire_after=_seconds(fields, "retire_after", where, optional=True),
                       kind=fields.get("kind", "move"), tiers=tuple(sorted(tiers.items())))
        except InvalidRouting as exc:
            if str(exc).startswith(where):
                raise
            raise _fail(where, str(exc)) from None
