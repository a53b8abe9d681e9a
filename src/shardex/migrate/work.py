"""The reshard's records in the index's store: its plan and work units, leased by CAS.

Records of reshard ``ID`` are named ``reshard/ID/GGGG/plan`` and
``reshard/ID/GGGG/unit/NNNNN`` (``GGGG`` the mover's generation). As the Kinesis Client
Library coordinates workers through a lease table, a worker takes a unit by a
compare-and-set of its record (owner and expiry, in wall seconds), renews the lease with
each checkpoint (again a compare-and-set: a worker whose lease was taken over learns it
there and stops), and marks the unit done. A worker killed outright loses its leases
when they expire; any other process resumes from the last checkpoint. The plan record
is leased the same way while one process surveys the source keys, so one plan is made.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from shardex.clock import Clock
from shardex.errors import ConditionFailed, MalformedItem
from shardex.migrate.layouts import PATIENT
from shardex.migrate.records import Records
from shardex.migrate.units import Unit
from shardex.retry import RetryPolicy
from shardex.stores.base import Store

__all__ = ["PlanRecord", "WorkRecords"]

T = TypeVar("T")
PREFIX = "reshard/"


@dataclass(frozen=True, slots=True)
class PlanRecord:
    """A generation's plan: ``planned`` once every unit record is written (``units``)."""

    planned: bool
    units: int = 0
    owner: str | None = None
    expires: float = 0.0

    def to_body(self) -> dict[str, Any]:
        return {"planned": self.planned, "units": self.units, "owner": self.owner,
                "expires": self.expires}

    @classmethod
    def from_body(cls, body: Mapping[str, Any], where: str) -> PlanRecord:
        try:
            planned, units, owner = body["planned"], body["units"], body["owner"]
            expires = float(body["expires"])
            if not isinstance(planned, bool) or isinstance(units, bool) \
                    or not isinstance(units, int) or units < 0 \
                    or not (owner is None or isinstance(owner, str)):
                raise ValueError(f"planned {planned!r}, units {units!r}, owner {owner!r}")
        except (KeyError, TypeError, ValueError) as exc:
            raise MalformedItem(f"{where} is not a reshard plan ({type(exc).__name__}: {exc}); "
                                "delete it and run the reshard again") from None
        return cls(planned=planned, units=units, owner=owner, expires=expires)


class WorkRecords(Records):
    """The plan and unit records of reshard ``reshard_id`` of index ``namespace``."""

    def __init__(self, store: Store, namespace: str, reshard_id: str, *, clock: Clock,
                 rng: random.Random | None = None, retry: RetryPolicy = PATIENT) -> None:
        super().__init__(store, namespace, clock=clock, rng=rng, retry=retry)
        self.reshard_id = reshard_id

    def _prefix(self, generation: int) -> str:
        return f"{PREFIX}{self.reshard_id}/{generation:04d}/"

    # -- reading ---------------------------------------------------------------------

    async def units(self, generation: int | None = None) -> dict[str, tuple[Unit, int]]:
        """The unit records of ``generation`` (None: every generation), by key, with revisions."""
        prefix = self._prefix(generation) if generation is not None \
            else f"{PREFIX}{self.reshard_id}/"
        return {key: (Unit.from_body(record.body, self._where(key)), record.revision)
                for key, record in (await self._list(prefix)).items() if "/unit/" in key}

    async def plan(self, generation: int) -> tuple[PlanRecord, int] | None:
        """The plan record of ``generation`` and its revision, or None."""
        key = self._prefix(generation) + "plan"
        record = await self._get(key)
        if record is None:
            return None
        return PlanRecord.from_body(record.body, self._where(key)), record.revision

    # -- writing (each a compare-and-set) ----------------------------------------------

    async def claim_plan(self, generation: int, owner: str, lease: float) -> bool:
        """Take the plan of ``generation`` to make it; False if it is made or being made."""
        found = await self.plan(generation)
        now = self._clock.wall()
        if found is not None and (found[0].planned or found[0].expires > now):
            return False
        claim = PlanRecord(planned=False, owner=owner, expires=now + lease)
        return await self._put(self._prefix(generation) + "plan", claim.to_body(),
                               None if found is None else found[1]) is not None

    async def publish(self, generation: int, units: list[Unit], owner: str) -> bool:
        """Write every unit record, then mark the plan made; False if the claim was lost."""
        existing = await self.units(generation)
        for unit in units:
            key = f"{self._prefix(generation)}unit/{unit.number:05d}"
            found = existing.get(key)
            # a planner that crashed may have left some: they are replaced
            if await self._put(key, unit.to_body(), None if found is None else found[1]) is None:
                return False
        found_plan = await self.plan(generation)
        if found_plan is None or found_plan[0].owner != owner:
            return False
        done = PlanRecord(planned=True, units=len(units))
        return await self._put(self._prefix(generation) + "plan", done.to_body(),
                               found_plan[1]) is not None

    async def acquire(self, key: str, unit: Unit, revision: int, owner: str,
                      lease: float) -> tuple[Unit, int] | None:
        """Lease ``unit`` (found at ``revision``) to ``owner``; None if another worker did."""
        leased = unit.leased(owner, self._clock.wall() + lease)
        revised = await self._put(key, leased.to_body(), revision)
        return None if revised is None else (leased, revised)

    async def checkpoint(self, key: str, unit: Unit, revision: int, *,
                         lease: float) -> tuple[Unit, int] | None:
        """Store ``unit``'s progress and renew its lease; None if the lease was lost.

        A done unit gives its lease up.
        """
        saved = replace(unit, owner=None, expires=0.0) if unit.done \
            else replace(unit, expires=self._clock.wall() + lease)
        revised = await self._put(key, saved.to_body(), revision)
        return None if revised is None else (saved, revised)

    async def release(self, key: str, unit: Unit, revision: int) -> None:
        """Give ``unit``'s lease up without progress (another worker may take it at once)."""
        await self._put(key, replace(unit, owner=None, expires=0.0).to_body(), revision)

    async def _delete(self, store: Store, namespace: str, key: str, revision: int) -> None:
        await self._retrying(lambda: store.delete_record(namespace, key, expected=revision))

    async def cleanup(self, *, keep: str | None = None) -> int:
        """Delete every reshard record of the index but those of reshard ``keep``."""
        store, namespace = self.store, self.namespace
        gone = 0
        for key, record in (await self._list(PREFIX)).items():
            if keep is not None and key.startswith(f"{PREFIX}{keep}/"):
                continue
            try:
                await self._delete(store, namespace, key, record.revision)
                gone += 1
            except ConditionFailed:
                continue  # changed or deleted meanwhile: a later clean-up gets it
        return gone
