"""The backfill's work: Scan segments as records in the index's store, leased by CAS.

Records of adoption ``ID`` are ``adopt/ID/plan`` (how many segments: the first ``run``
decides, by compare-and-set) and ``adopt/ID/segment/NNNN``. As the reshard's work units
(``shardex.migrate.work``), a worker takes a segment by a compare-and-set of its record
(owner, expiry in wall seconds), checkpoints after each Scan page (the key to continue
from, counts; renewing the lease, again by compare-and-set: a worker whose lease was
taken over learns it there and stops) and marks it done. A worker killed outright loses
its lease when it expires and any other process resumes from the last checkpoint.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, TypeVar

from shardex.clock import Clock
from shardex.errors import ConditionFailed, MalformedItem
from shardex.migrate.layouts import PATIENT
from shardex.migrate.records import Records
from shardex.stores.base import Store

__all__ = ["Segment", "Segments"]

T = TypeVar("T")
PREFIX = "adopt/"


@dataclass(frozen=True, slots=True)
class Segment:
    """One Scan segment of the backfill, as its record holds it.

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

    def free(self, now: float) -> bool:
        return not self.done and (self.owner is None or self.expires <= now)

    def leased_at(self, now: float) -> bool:
        return not self.done and self.owner is not None and self.expires > now

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


class Segments(Records):
    """The plan and segment records of adoption ``adoption_id`` of index ``namespace``."""

    def __init__(self, store: Store, namespace: str, adoption_id: str, *, clock: Clock,
                 rng: random.Random | None = None) -> None:
        super().__init__(store, namespace, clock=clock, rng=rng, retry=PATIENT)
        self.adoption_id = adoption_id

    @property
    def _prefix(self) -> str:
        return f"{PREFIX}{self.adoption_id}/"

    async def all(self) -> dict[str, tuple[Segment, int]]:
        """Every segment record, by key, with its revision."""
        records = await self._list(self._prefix + "segment/")
        return {key: (Segment.from_body(r.body, self._where(key)), r.revision)
                for key, r in records.items()}

    async def plan(self, segments: int) -> int:
        """The number of segments: ``segments`` unless an earlier run planned another."""
        key = self._prefix + "plan"
        await self._put(key, {"segments": segments}, None)
        record = await self._get(key)
        planned = segments if record is None else record.body.get("segments")
        if isinstance(planned, bool) or not isinstance(planned, int) or planned < 1:
            raise MalformedItem(f"{self._where(key)}: segments is {planned!r}")
        existing = await self.all()
        for number in range(planned):
            name = f"{self._prefix}segment/{number:04d}"
            if name not in existing:
                await self._put(name, Segment(number, planned).to_body(), None)
        return planned

    async def acquire(self, key: str, segment: Segment, revision: int, owner: str,
                      lease: float) -> tuple[Segment, int] | None:
        """Lease ``segment`` to ``owner``; None if another worker took it first."""
        now = self._clock.wall()
        taken = replace(segment, owner=owner, expires=now + lease,
                        started_at=segment.started_at or now)
        revised = await self._put(key, taken.to_body(), revision)
        return None if revised is None else (taken, revised)

    async def checkpoint(self, key: str, segment: Segment, revision: int, *,
                         lease: float) -> tuple[Segment, int] | None:
        """Save progress and renew the lease; None if the lease was lost meanwhile."""
        now = self._clock.wall()
        saved = replace(segment, saved_at=now, expires=now + lease,
                        owner=None if segment.done else segment.owner)
        revised = await self._put(key, saved.to_body(), revision)
        return None if revised is None else (saved, revised)

    async def cleanup(self) -> int:
        """Delete the records of every adoption of the index but this one."""
        store, namespace = self.store, self.namespace
        records = await self._list(PREFIX)
        gone = 0
        for key, record in records.items():
            if key.startswith(self._prefix):
                continue
            try:
                await self._retrying(partial(store.delete_record, namespace, key,
                                             expected=record.revision))
                gone += 1
            except ConditionFailed:
                continue
        return gone
