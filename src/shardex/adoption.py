"""An adoption in a routing document: an application's plain index being copied into shardex's.

Pure values, no I/O. An application already has an index keyed by the raw value (a
DynamoDB GSI on ``status``, hot on ``PENDING``). Adopting it is a layout change of the
``copy`` kind (``shardex.transition.Kind``): the from-layout is that plain index, the
to-layout the routing's sharded one, and every item sits on both at once. ``Adoption``
records the plain index (``Routing.adoption``) and the migration (a ``Transition``),
which ``shardex.migrate.states`` drives through its states (``COPY_ORDER``), whose
conduct every client follows through the routing's lease:

==========  ========  ===========================  ==========================================
state       shown as  writers                      readers read
==========  ========  ===========================  ==========================================
write-new   dual-     the raw value and the shard  the plain index (the old one, complete)
            write     attribute (key_attributes)
read-new    read-new  the same                     the new, sharded index
done        complete  the same                     the new index; the plain one may be dropped
done, back  rolled-   the same (harmless)          the plain index again
            back
==========  ========  ===========================  ==========================================

Documents stored before the copy kind (a flat ``adoption`` with its own state names:
``dual-write``, ``read-new``, ``complete``, ``rolled-back``) load into this shape.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

from shardex.errors import InvalidRouting
from shardex.transition import Direction, Transition, fields_of

__all__ = ["Adoption", "COPY_STATES", "CopyState", "SourceKind", "Stage"]

# the states of a copy; its rollback ends in "done" too, with the direction "rollback"
CopyState = Literal["write-new", "read-new", "done"]
COPY_STATES: tuple[str, ...] = get_args(CopyState)
# what an operator sees (the adopt commands, shardex.adopt.status/1)
Stage = Literal["dual-write", "read-new", "complete", "rolled-back"]
SourceKind = Literal["gsi", "table"]
SOURCE_KINDS: tuple[str, ...] = get_args(SourceKind)
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,255}")
_STAGES: dict[tuple[str, Direction], Stage] = {
    ("write-new", "forward"): "dual-write", ("read-new", "forward"): "read-new",
    ("done", "forward"): "complete", ("done", "rollback"): "rolled-back"}
# the stored document's fields: the plain index's, then the copy's own
_SOURCE = ("kind", "name", "attribute", "base", "id_attribute", "sort_attribute")
_FLAGS = ("drop_source", "dropped")


@dataclass(frozen=True, slots=True)
class Adoption:
    """The adoption of an application's plain index into a shardex index.

    - ``kind``: ``gsi`` (a GSI of the base table keyed by ``attribute``) or ``table``
      (an index table the application keeps itself, keyed by the raw value).
    - ``source``: the old index's name; ``attribute`` the item attribute it is keyed by.
    - ``table`` adoptions only: ``base`` (the application's base table the backfill
      copies from), ``id_attribute`` and ``sort_attribute`` (the item id and sort, on
      the base items and on the rows of the old index table).
    - ``state``: one of ``COPY_STATES``; ``migration`` the copy's ``Transition`` (its
      id, names the work records; ``changed_at`` when readers last changed index; the
      values named at start; the last parity report; the retention window; its
      direction, ``rollback`` once rolled back). ``stage`` is the state as shown.
    - ``drop_source``: whether the old index is to be dropped, ``dropped`` whether it was.
    """

    kind: SourceKind
    source: str
    attribute: str
    state: CopyState
    migration: Transition
    drop_source: bool = False
    dropped: bool = False
    base: str | None = None
    id_attribute: str | None = None
    sort_attribute: str | None = None

    def __post_init__(self) -> None:
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
        if self.state not in COPY_STATES:
            raise InvalidRouting(f"adoption state must be one of {', '.join(COPY_STATES)}, "
                                 f"got {self.state!r}")
        if not isinstance(self.migration, Transition) or self.migration.kind != "copy":
            raise InvalidRouting(f"adoption migration must be a copy Transition, "
                                 f"got {self.migration!r}")
        if (self.state, self.migration.direction) not in _STAGES:
            raise InvalidRouting(f"adoption state {self.state!r} with a migration in direction "
                                 f"{self.migration.direction!r}: a rolled-back adoption is "
                                 f"done, and only a done one rolled back")
        for name in _FLAGS:
            if not isinstance(getattr(self, name), bool):
                raise InvalidRouting(f"adoption {name}: expected true or false, "
                                     f"got {getattr(self, name)!r}")

    @property
    def id(self) -> str:
        return self.migration.id

    @property
    def stage(self) -> Stage:
        """The state as an operator sees it: dual-write, read-new, complete, rolled-back."""
        return _STAGES[self.state, self.migration.direction]

    @property
    def reads_source(self) -> bool:
        """True while readers read the old index (``dual-write``, ``rolled-back``)."""
        return self.stage in ("dual-write", "rolled-back")

    @property
    def active(self) -> bool:
        """True while the adoption is under way (not complete, not rolled back)."""
        return self.state != "done"

    def to_dict(self) -> dict[str, Any]:
        return {"source": {"kind": self.kind, "name": self.source, "attribute": self.attribute,
                           "base": self.base, "id_attribute": self.id_attribute,
                           "sort_attribute": self.sort_attribute},
                "state": self.state, "migration": self.migration.to_dict(),
                "drop_source": self.drop_source, "dropped": self.dropped}

    @classmethod
    def from_dict(cls, doc: Any, where: str = "routing.adoption") -> Adoption:
        """Validate an adoption document (either shape); raise InvalidRouting naming the
        field at fault."""
        if isinstance(doc, dict) and "migration" not in doc:
            doc = _from_flat(cast(dict[str, Any], doc), where)
        fields = fields_of(doc, where, required={"source", "state", "migration"},
                           optional=set(_FLAGS))
        source = fields_of(fields["source"], f"{where}.source",
                           required={"kind", "name", "attribute"}, optional=set(_SOURCE))
        try:
            return cls(kind=source["kind"], source=source["name"], attribute=source["attribute"],
                       base=source.get("base"), id_attribute=source.get("id_attribute"),
                       sort_attribute=source.get("sort_attribute"), state=fields["state"],
                       migration=Transition.from_dict(fields["migration"],
                                                      f"{where}.migration"),
                       **{name: fields.get(name, False) for name in _FLAGS})
        except InvalidRouting as exc:
            if str(exc).startswith(where):
                raise
            raise InvalidRouting(f"{where}: {exc}") from None


def _from_flat(fields: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A document in the shape stored before the copy kind, in today's shape."""
    fields_of(fields, where, required={"id", "kind", "source", "attribute", "state",
                                       "started_at", "changed_at", "margin"},
              optional={"values", "parity", "retain", "retire_after", *_FLAGS, *_SOURCE})
    stages: dict[str, tuple[str, Direction]] = {stage: s for s, stage in _STAGES.items()}
    found = stages.get(fields["state"]) if isinstance(fields["state"], str) else None
    if found is None:
        raise InvalidRouting(f"{where}.state: expected one of {', '.join(_STAGES.values())}, "
                             f"got {fields['state']!r}")
    state, direction = found
    moved = ("id", "started_at", "changed_at", "margin", "values", "parity", "retain",
             "retire_after")
    migration = {"direction": direction, "kind": "copy", "values": [],
                 **{name: fields[name] for name in moved if name in fields}}
    return {"source": {"kind": fields["kind"], "name": fields["source"],
                       "attribute": fields["attribute"],
                       **{name: fields.get(name) for name in _SOURCE[3:]}},
            "state": state, "migration": migration,
            **{name: fields[name] for name in _FLAGS if name in fields}}
