"""An adoption in a routing document: an application's plain index being moved to shardex's.

Pure values and decisions, no I/O. An application already has an index keyed by the raw
value (a DynamoDB GSI on ``status``, hot on ``PENDING``). Adopting it records an
``Adoption`` in the index's routing (``Routing.adoption``) and drives it through states
whose conduct every client follows through the routing's lease:

==============  ===========================  ===========================================
state           writers                      readers read
==============  ===========================  ===========================================
dual-write      the raw value and the shard  the source (the old index, complete)
                attribute (key_attributes)
read-new        the same                     the new, sharded index
complete        the same                     the new index; the source may be dropped
rolled-back     the same (harmless)          the source again
==============  ===========================  ===========================================

The backfill (``shardex.migrate.backfill``) gives every item written before the writers began to
dual-write its shard attribute; it starts at ``ready_at`` of ``dual-write``, when every
client has seen the adoption (the routing's lease plus the margin), so no item is written
without one behind it. ``cutover`` (to ``read-new``) needs a parity report with no gaps,
younger than ``max_age``: then the new index alone holds every entry. Readers in
``dual-write`` and in ``read-new`` are both complete, so the step needs no wait; the
source is dropped only from ``ready_at`` of ``read-new`` on, when no reader reads it.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, cast, get_args

from shardex.errors import InvalidKey, InvalidRouting
from shardex.keys import validate_value
from shardex.transition import Parity

__all__ = ["ADOPTION_STATES", "Adoption", "AdoptionState", "Refusal", "SourceKind",
           "adoption_from", "adoption_ready_at", "cutover_refusal", "rollback_refusal"]

AdoptionState = Literal["dual-write", "read-new", "complete", "rolled-back"]
ADOPTION_STATES: tuple[str, ...] = get_args(AdoptionState)
SourceKind = Literal["gsi", "table"]
SOURCE_KINDS: tuple[str, ...] = get_args(SourceKind)
_ID = re.compile(r"[A-Za-z0-9-]{1,64}")
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,255}")


class Refusal(NamedTuple):
    """A step the operator asked for that cannot be taken now, and why."""

    why: str


@dataclass(frozen=True, slots=True)
class Adoption:
    """The adoption of an application's plain index into a shardex index.

    - ``id``: the adoption's name (its work records are named after it).
    - ``kind``: ``gsi`` (a GSI of the base table keyed by ``attribute``) or ``table``
      (an index table the application keeps itself, keyed by the raw value).
    - ``source``: the old index's name; ``attribute`` the item attribute it is keyed by.
    - ``state``: one of ``ADOPTION_STATES``; ``changed_at`` (wall seconds) when readers
      or writers last changed what they do, ``margin`` the seconds waited beyond the
      routing's lease after it.
    - ``values``: the logical keys named at start (the backfill finds the others).
    - ``parity``: the last verify report; ``retain``/``retire_after`` the retention
      window asked at complete; ``drop_source`` whether the old index is to be dropped,
      ``dropped`` whether it was.
    - ``table`` adoptions only: ``base`` (the application's base table the backfill
      copies from), ``id_attribute`` and ``sort_attribute`` (the item id and sort, on
      the base items and on the rows of the old index table).
    """

    id: str
    kind: SourceKind
    source: str
    attribute: str
    state: AdoptionState
    started_at: float
    changed_at: float
    margin: float
    values: tuple[str, ...] = ()
    parity: Parity | None = None
    retain: float = 0.0
    retire_after: float | None = None
    drop_source: bool = False
    dropped: bool = False
    base: str | None = None
    id_attribute: str | None = None
    sort_attribute: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not _ID.fullmatch(self.id):
            raise InvalidRouting(f"adoption id must be 1 to 64 of A-Z, a-z, 0-9 and '-', "
                                 f"got {self.id!r}")
        if self.kind not in SOURCE_KINDS:
            raise InvalidRouting(f"adoption kind must be one of {', '.join(SOURCE_KINDS)}, "
                                 f"got {self.kind!r}")
        for field, name in (("source", self.source), ("attribute", self.attribute)):
            if not isinstance(name, str) or not _NAME.fullmatch(name):
                raise InvalidRouting(f"adoption {field} must be a table, index or attribute "
                                     f"name, got {name!r}")
        table = (self.base, self.id_attribute, self.sort_attribute)
        if (self.kind == "table") != all(isinstance(n, str) and _NAME.fullmatch(n)
                                         for n in table):
            raise InvalidRouting("adoption base, id_attribute and sort_attribute: names for a "
                                 f"table adoption, none for a GSI's, got {table!r}")
        if self.state not in ADOPTION_STATES:
            raise InvalidRouting(f"adoption state must be one of {', '.join(ADOPTION_STATES)}, "
                                 f"got {self.state!r}")
        for value in self.values:
            try:
                validate_value(value)
            except InvalidKey as exc:
                raise InvalidRouting(f"adoption values: {exc}") from None

    @property
    def reads_source(self) -> bool:
        """True while readers read the old index (``dual-write``, ``rolled-back``)."""
        return self.state in ("dual-write", "rolled-back")

    @property
    def active(self) -> bool:
        """True while the adoption is under way (not complete, not rolled back)."""
        return self.state in ("dual-write", "read-new")

    def to(self, state: AdoptionState, now: float, **changes: Any) -> Adoption:
        """The adoption in ``state``; ``changed_at`` is ``now`` if readers change index."""
        moved = dataclasses.replace(self, state=state, **changes)
        stamp = now if moved.reads_source != self.reads_source else self.changed_at
        return dataclasses.replace(moved, changed_at=stamp)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "source": self.source,
                "attribute": self.attribute, "state": self.state,
                "started_at": self.started_at, "changed_at": self.changed_at,
                "margin": self.margin, "values": list(self.values),
                "parity": None if self.parity is None else self.parity.to_dict(),
                "retain": self.retain, "retire_after": self.retire_after,
                "drop_source": self.drop_source, "dropped": self.dropped,
                "base": self.base, "id_attribute": self.id_attribute,
                "sort_attribute": self.sort_attribute}

    @classmethod
    def from_dict(cls, doc: Any, where: str = "routing.adoption") -> Adoption:
        """Validate an adoption document; raise InvalidRouting naming the field at fault."""
        if not isinstance(doc, dict):
            raise InvalidRouting(f"{where}: expected an object, got {type(doc).__name__}")
        fields = cast(dict[str, Any], doc)
        required = {"id", "kind", "source", "attribute", "state", "started_at", "changed_at",
                    "margin"}
        optional = {"values", "parity", "retain", "retire_after", "drop_source", "dropped",
                    "base", "id_attribute", "sort_attribute"}
        unknown = sorted(set(fields) - required - optional)
        missing = sorted(required - set(fields))
        if unknown or missing:
            raise InvalidRouting(f"{where}: " + (f"unknown field(s) {unknown}" if unknown
                                                 else f"missing field(s) {missing}"))
        times = {name: _seconds(fields.get(name), f"{where}.{name}")
                 for name in ("started_at", "changed_at", "margin", "retain")}
        retire_after = fields.get("retire_after")
        values = fields.get("values", [])
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise InvalidRouting(f"{where}.values: expected a list of logical keys, "
                                 f"got {values!r}")
        flags = {name: fields.get(name, False) for name in ("drop_source", "dropped")}
        for name, flag in flags.items():
            if not isinstance(flag, bool):
                raise InvalidRouting(f"{where}.{name}: expected true or false, got {flag!r}")
        parity = fields.get("parity")
        try:
            return cls(id=fields["id"], kind=fields["kind"], source=fields["source"],
                       attribute=fields["attribute"], state=fields["state"],
                       started_at=times["started_at"], changed_at=times["changed_at"],
                       margin=times["margin"], values=tuple(values),
                       parity=None if parity is None else Parity.from_dict(
                           parity, f"{where}.parity"),
                       retain=times["retain"],
                       retire_after=None if retire_after is None else _seconds(
                           retire_after, f"{where}.retire_after"),
                       base=fields.get("base"), id_attribute=fields.get("id_attribute"),
                       sort_attribute=fields.get("sort_attribute"), **flags)
        except InvalidRouting as exc:
            if str(exc).startswith(where):
                raise
            raise InvalidRouting(f"{where}: {exc}") from None


def _seconds(value: Any, where: str) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value < 0:
        raise InvalidRouting(f"{where}: expected a number of seconds >= 0, got {value!r}")
    return float(value)


def adoption_ready_at(adoption: Adoption, lease: float) -> float:
    """Wall seconds from which every client acts on the adoption's last change of conduct."""
    return adoption.changed_at + lease + adoption.margin


def cutover_refusal(adoption: Adoption | None, *, now: float, max_age: float,
                    backfilled: bool) -> Refusal | None:
    """Why readers may not move to the new index yet (None: they may)."""
    if adoption is None or not adoption.active:
        return Refusal("no adoption is under way: start one with 'shardex adopt start'")
    if adoption.state != "dual-write":
        return Refusal(f"the adoption is in {adoption.state}: readers already read the new "
                       "index")
    if not backfilled:
        return Refusal("the backfill has not finished: run 'shardex adopt run', then "
                       "'shardex adopt verify'")
    parity = adoption.parity
    if parity is None:
        return Refusal("no parity report yet: run 'shardex adopt verify' first")
    if not parity.clean:
        gaps = ", ".join(f"{n} {kind}" for kind, n in parity.counts().items() if n)
        return Refusal(f"the last parity report has gaps ({gaps}): run 'shardex adopt run' "
                       "and 'shardex adopt verify' again")
    if now - parity.checked_at > max_age:
        return Refusal(f"the last parity report is {now - parity.checked_at:.0f} s old, older "
                       f"than --max-age {max_age:g} s: run 'shardex adopt verify' again")
    return None


def rollback_refusal(adoption: Adoption | None) -> Refusal | None:
    """Why the adoption cannot be rolled back (None: it can)."""
    if adoption is None:
        return Refusal("no adoption is under way")
    if adoption.state == "complete":
        return Refusal("the adoption is complete; it can no longer be rolled back")
    if adoption.state == "rolled-back":
        return Refusal("the adoption is already rolled back: readers read the old index")
    return None


def adoption_from(doc: Mapping[str, Any]) -> Adoption | None:
    """The adoption of a routing document, or None when it has none."""
    raw = doc.get("adoption")
    return None if raw is None else Adoption.from_dict(raw)
