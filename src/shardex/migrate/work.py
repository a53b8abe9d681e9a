"""A migration's work records in the index's own store, leased by compare-and-set.

Every migration's records are ``reshard/ID/GGGG/plan`` and ``reshard/ID/GGGG/unit/NNNNN``
(``ID`` the migration's, ``GGGG`` the mover's generation), one kind of record for both
kinds of unit (``shardex.migrate.units.Unit``: a range of a source key, a Scan segment).
Adoptions begun before there was one kind keep theirs at ``adopt/ID/plan`` and
``adopt/ID/segment/NNNN``; ``WorkRecords(..., adoption=True)`` reads those too, and a
checkpoint rewrites one where it is, so such an adoption resumes where it stopped. As
the Kinesis Client Library coordinates workers through a lease table, a worker takes a
unit by a compare-and-set of its record (owner and expiry, in wall seconds), renews the
lease with each checkpoint (again a compare-and-set: a worker whose lease was taken over
learns it there and stops) and marks the unit done. A worker killed outright loses its
leases when they expire; any other process resumes from the last checkpoint. The plan
record is leased the same way while one process surveys the source keys, so one plan is
made; it keeps the total the migration set out to move (or, for a backfill, the items to
scan), fixed at start, which status reports against the counts of the unit records
(``tally``), never against a store's own estimate. A job one runner does for all (a
retired key's sweep, a parity check) is a ``Claim`` at ``reshard/ID/GGGG/job/NAME``,
leased the same way (``WorkRecords.claim``, ``holding``) and marked done.

``Records`` holds patient reads and compare-and-set writes (the autopilot keeps its own
records on it); ``WorkRecords`` the plan and units of one migration; ``work_units`` is the
one loop in which a mover's worker takes units.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from shardex.clock import GOODBYE, Clock, alongside, settled, within
from shardex.errors import ConditionFailed, MalformedItem, ShardexError, Unavailable
from shardex.migrate.layouts import PATIENT
from shardex.migrate.units import Unit
from shardex.model.entries import Record
from shardex.retry import RetryPolicy, call_with_retry
from shardex.stores.base import Store

__all__ = ["Claim", "Idle", "POLL", "PlanRecord", "Records", "Runner", "TakenOver",
           "WorkRecords", "runners", "work_units"]

T = TypeVar("T")
log = logging.getLogger("shardex")
RESHARD, ADOPT = "reshard/", "adopt/"  # ADOPT: the records of adoptions begun before
POLL = 1.0  # seconds between looks at units leased by others


class TakenOver(ShardexError):
    """Another runner took over a job this runner held (``WorkRecords.holding``)."""


@dataclass(frozen=True, slots=True)
class Runner:
    """A worker holding leases now: its name, the units it holds, when its last one lapses."""

    owner: str
    units: tuple[int, ...]
    expires: float


def runners(units: list[Unit], now: float, gone: str | None = None) -> list[Runner]:
    """The workers with a live lease at wall time ``now``, by name; ``gone`` names a worker
    known to have stopped (its leases lapse unused)."""
    held: dict[str, list[Unit]] = {}
    for unit in units:
        if unit.leased_at(now) and unit.owner is not None and unit.owner != gone:
            held.setdefault(unit.owner, []).append(unit)
    return [Runner(owner, tuple(sorted(u.number for u in mine)), max(u.expires for u in mine))
            for owner, mine in sorted(held.items())]


@dataclass(frozen=True, slots=True)
class PlanRecord:
    """A plan: ``planned`` once every unit record is written (``units`` of them, to move
    ``total`` entries or scan ``total`` items, as counted when it was made)."""

    planned: bool
    units: int = 0
    owner: str | None = None
    expires: float = 0.0
    total: int | None = None

    def to_body(self) -> dict[str, Any]:
        return {"planned": self.planned, "units": self.units, "owner": self.owner,
                "expires": self.expires, "total": self.total}

    @classmethod
    def from_body(cls, body: Mapping[str, Any], where: str) -> PlanRecord:
        if "planned" not in body and "segments" in body:  # a backfill planned before totals
            body = {"planned": True, "units": body["segments"], "owner": None, "expires": 0.0}
        try:
            planned, units, owner = body["planned"], body["units"], body["owner"]
            expires, total = float(body["expires"]), body.get("total")
            if not isinstance(planned, bool) or not _count(units) \
                    or not (owner is None or isinstance(owner, str)) \
                    or not (total is None or _count(total)):
                raise ValueError(f"planned {planned!r}, units {units!r}, owner {owner!r}, "
                                 f"total {total!r}")
        except (KeyError, TypeError, ValueError) as exc:
            raise MalformedItem(f"{where} is not a migration plan ({type(exc).__name__}: "
                                f"{exc}); delete it and run the migration again") from None
        return cls(planned=planned, units=units, owner=owner, expires=expires, total=total)


def _count(raw: Any) -> bool:
    return not isinstance(raw, bool) and isinstance(raw, int) and raw >= 0


@dataclass(frozen=True, slots=True)
class Claim:
    """A job one runner of a migration does for every runner (a retired key's sweep, a
    parity check): ``done`` once it is, else leased to ``owner`` until ``expires`` (wall
    seconds)."""

    done: bool = False
    owner: str | None = None
    expires: float = 0.0

    def to_body(self) -> dict[str, Any]:
        return {"done": self.done, "owner": self.owner, "expires": self.expires}

    @classmethod
    def from_body(cls, body: Mapping[str, Any], where: str) -> Claim:
        try:
            done, owner, expires = body["done"], body["owner"], float(body["expires"])
            if not isinstance(done, bool) or not (owner is None or isinstance(owner, str)):
                raise ValueError(f"done {done!r}, owner {owner!r}")
        except (KeyError, TypeError, ValueError) as exc:
            raise MalformedItem(f"{where} is not a migration job's claim "
                                f"({type(exc).__name__}: {exc}); delete it and run the "
                                "migration again") from None
        return cls(done=done, owner=owner, expires=expires)


class Records:
    """Records of index ``namespace`` in ``store``, read and written under ``retry``; each
    write a compare-and-set on the revision the writer read, so two workers that read the
    same record meet on it and one of them loses."""

    def __init__(self, store: Store, namespace: str, *, clock: Clock,
                 rng: random.Random | None = None, retry: RetryPolicy = PATIENT) -> None:
        self.store = store
        self.namespace = namespace
        self._clock = clock
        self._rng = rng or random.Random()
        self._retry = retry

    def _retrying(self, call: Callable[[], Awaitable[T]]) -> Awaitable[T]:
        return call_with_retry(call, self._retry, clock=self._clock, rng=self._rng)

    def _where(self, key: str) -> str:
        return f"record {key!r} of index {self.namespace!r} in {self.store.uri}"

    async def _list(self, prefix: str) -> dict[str, Record]:
        store, namespace = self.store, self.namespace
        return await self._retrying(lambda: store.list_records(namespace, prefix))

    async def _get(self, key: str) -> Record | None:
        store, namespace = self.store, self.namespace
        found: Record | None = await self._retrying(lambda: store.get_record(namespace, key))
        return found

    async def _put(self, key: str, body: Mapping[str, Any], expected: int | None) -> int | None:
        """Write a record at ``expected``; None if another writer got there first."""
        store, namespace = self.store, self.namespace
        try:
            return await self._retrying(
                lambda: store.put_record(namespace, key, body, expected=expected))
        except ConditionFailed:
            return None

    async def plan_record(self, key: str) -> tuple[PlanRecord, int] | None:
        record = await self._get(key)
        if record is None:
            return None
        return PlanRecord.from_body(record.body, self._where(key)), record.revision



class WorkRecords(Records):
    """The plan and unit records of migration ``migration_id`` of index ``namespace``.

    ``adoption``: the migration is an adoption, whose records may be in the shape of
    adoptions begun before there was one kind of record (read as generation 1).
    """

    def __init__(self, store: Store, namespace: str, migration_id: str, *, clock: Clock,
                 rng: random.Random | None = None, retry: RetryPolicy = PATIENT,
                 adoption: bool = False) -> None:
        super().__init__(store, namespace, clock=clock, rng=rng, retry=retry)
        self.prefix = f"{RESHARD}{migration_id}/"
        self.migration_id = migration_id
        self._old = f"{ADOPT}{migration_id}/" if adoption else None

    def _prefix(self, generation: int) -> str:
        return f"{self.prefix}{generation:04d}/"

    async def units(self, generation: int | None = None) -> dict[str, tuple[Unit, int]]:
        """The unit records of ``generation`` (None: every generation), by key, with revisions."""
        prefix = self.prefix if generation is None else self._prefix(generation)
        found = {key: record for key, record in (await self._list(prefix)).items()
                 if "/unit/" in key}
        if self._old is not None and generation in (None, 1):
            found.update((key, record) for key, record in
                         (await self._list(self._old + "segment/")).items())
        return {key: (Unit.from_body(record.body, self._where(key)), record.revision)
                for key, record in found.items()}

    async def plan(self, generation: int) -> tuple[PlanRecord, int] | None:
        """The plan record of ``generation`` and its revision, or None."""
        found = await self.plan_record(self._prefix(generation) + "plan")
        if found is None and self._old is not None and generation == 1:
            found = await self.plan_record(self._old + "plan")
        return found

    async def all_done(self, generation: int) -> bool:
        """True once the plan of ``generation`` is made and every unit of it is done."""
        plan = await self.plan(generation)
        if plan is None or not plan[0].planned:
            return False
        return all(unit.done for unit, _ in (await self.units(generation)).values())

    async def claim_plan(self, generation: int, owner: str, lease: float) -> bool:
        """Take the plan of ``generation`` to make it; False if it is made or being made."""
        found = await self.plan(generation)
        now = self._clock.wall()
        if found is not None and (found[0].planned or found[0].expires > now):
            return False
        claim = PlanRecord(planned=False, owner=owner, expires=now + lease)
        return await self._put(self._prefix(generation) + "plan", claim.to_body(),
                               None if found is None else found[1]) is not None

    async def publish(self, generation: int, units: list[Unit], owner: str, *,
                      total: int | None = None) -> bool:
        """Write every unit record, then mark the plan made with ``total`` (default: the
        entries the units are to move); False if the claim was lost."""
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
        done = PlanRecord(planned=True, units=len(units),
                          total=sum(u.to_move for u in units) if total is None else total)
        return await self._put(self._prefix(generation) + "plan", done.to_body(),
                               found_plan[1]) is not None

    def _job(self, generation: int, job: str) -> str:
        return f"{self._prefix(generation)}job/{job}"

    async def claim(self, generation: int, job: str, owner: str, lease: float, *,
                    seen: bool = False) -> tuple[Claim, int | None]:
        """Lease ``job`` of ``generation`` to ``owner`` for ``lease`` seconds (or renew
        its own lease), unless it is done or another's lease on it runs: the claim as it
        stands, and its revision if ``owner`` holds it now (else None). A job ``seen``
        claimed before whose record is gone is done: the migration ended, and its records
        were cleaned up (claimed again, its record outlived the migration)."""
        key = self._job(generation, job)
        record = await self._get(key)
        if record is None and seen:
            return Claim(done=True), None
        found = None if record is None else Claim.from_body(record.body, self._where(key))
        now = self._clock.wall()
        if found is not None and (found.done or (found.owner != owner and found.expires > now)):
            return found, None
        claim = Claim(owner=owner, expires=now + lease)
        revision = await self._put(key, claim.to_body(),
                                   None if record is None else record.revision)
        if revision is None:  # another runner claimed it first
            return await self.claim(generation, job, owner, lease, seen=True)
        return claim, revision

    async def claims(self, generation: int, prefix: str = "") -> dict[str, Claim]:
        """The claims of ``generation``'s jobs whose names start with ``prefix``, by name."""
        start = self._job(generation, prefix)
        found = await self._list(start)
        return {key.rsplit("/", 1)[-1]: Claim.from_body(record.body, self._where(key))
                for key, record in found.items()}

    async def finish(self, generation: int, job: str, owner: str, *,
                     done: bool = True) -> None:
        """Mark ``job`` done (or, not ``done``, give it up for another runner to claim at
        once), if ``owner`` holds it still (a runner that took the lease over meanwhile
        marks it itself)."""
        key = self._job(generation, job)
        while (record := await self._get(key)) is not None:
            if Claim.from_body(record.body, self._where(key)).owner != owner:
                return
            if await self._put(key, Claim(done=done).to_body(), record.revision) is not None:
                return

    @contextlib.asynccontextmanager
    async def holding(self, generation: int, job: str, owner: str,
                      lease: float) -> AsyncIterator[None]:
        """Hold ``owner``'s claim on ``job`` (``claim`` took it) while the body runs,
        renewed every third of ``lease``; mark it done as the body ends, or give it up if
        the body fails (another runner takes it over at once).

        A renewal that finds another runner's claim (this one stood still past its lease,
        and the other took the job over) stops the body, cancelled where it waits, and
        raises TakenOver: the job is the other's, and two runners doing it would both
        spend the budget on it.
        """
        task = asyncio.current_task()
        assert task is not None
        cancelling = task.cancelling()
        taker: list[str] = []

        async def renew() -> None:
            while True:
                await self._clock.sleep(lease / 3)
                try:
                    claim, renewed = await self.claim(generation, job, owner, lease,
                                                      seen=True)
                except ShardexError as exc:  # tried again at the next: it had ended them
                    log.warning("migration %s: %s was not renewed: %s", self.migration_id,
                                job, exc)
                    continue
                if renewed is None:
                    if not claim.done:  # this runner stood still past its lease
                        log.warning("migration %s: %s was taken over by %s: this runner "
                                    "stops it", self.migration_id, job, claim.owner)
                        taker.append(claim.owner or "another runner")
                        task.cancel()
                    return

        done = False
        try:
            try:
                async with alongside(renew()):
                    yield
            except BaseException as exc:
                # as asyncio.timeout tells its own cancel from any other
                if taker and task.uncancel() <= cancelling:
                    raise TakenOver(f"migration {self.migration_id}: {job} was taken over "
                                    f"by {taker[0]}, after this runner stood still past "
                                    f"its lease; this runner stopped it") from exc
                raise
            if taker:  # the body had ended as the renewal cancelled it: the cancel is spent
                task.uncancel()
            done = True
        finally:
            if not taker:  # taken over, the claim is the other's
                with contextlib.suppress(ShardexError):  # given up or not, its lease lapses
                    await within(self._clock, GOODBYE, self.finish(generation, job, owner,
                                                                   done=done),
                                 f"marking {job} {'done' if done else 'given up'}")

    async def acquire(self, key: str, unit: Unit, revision: int, owner: str,
                      lease: float) -> tuple[Unit, int] | None:
        """Lease ``unit`` (found at ``revision``) to ``owner``; None if another worker did."""
        now = self._clock.wall()
        leased = unit.leased(owner, now, now + lease)
        revised = await self._put(key, leased.to_body(), revision)
        return None if revised is None else (leased, revised)

    async def checkpoint(self, key: str, unit: Unit, revision: int, *,
                         lease: float) -> tuple[Unit, int] | None:
        """Store ``unit``'s progress and renew its lease; None if the lease was lost.

        A done unit gives its lease up.
        """
        now = self._clock.wall()
        saved = unit.saved(now, now + lease)
        revised = await self._put(key, saved.to_body(), revision)
        return None if revised is None else (saved, revised)

    async def release(self, key: str, unit: Unit, revision: int) -> None:
        """Give ``unit``'s lease up without progress (another worker may take it at once)."""
        await self._put(key, unit.leased(None, 0.0, 0.0).to_body(), revision)

    async def cleanup(self, *, keep: str | None = None, only: bool = False) -> int:
        """Delete every work record of the index, of every migration but ``keep``: called
        as one begins (the others ended, or never began) and as one ends; with ``only``,
        this migration's reshard records alone (a runner that found it ended by another).

        A reshard keeps the records of the index's adoption (``keep``): once the adoption
        is complete they are what its status counts the backfill from.
        """
        store, namespace = self.store, self.namespace
        kept = () if keep is None else (f"{RESHARD}{keep}/", f"{ADOPT}{keep}/")
        gone = 0
        for kind in (self.prefix,) if only else (RESHARD, ADOPT):
            for key, record in (await self._list(kind)).items():
                if key.startswith(kept):
                    continue
                try:
                    await self._retrying(partial(store.delete_record, namespace, key,
                                                 expected=record.revision))
                    gone += 1
                except ConditionFailed:
                    continue  # changed or deleted meanwhile: a later clean-up gets it
        return gone


class Idle:
    """How the workers of one process wait while every unit left is leased: until their
    next look (``poll``), or until one of them ends a unit, whichever comes first.

    Looking only every ``poll`` seconds, the run's last idle workers saw the last unit
    end up to a poll late, and the run ended with them (0.8 s after an adoption's last
    update on DynamoDB Local).
    """

    def __init__(self) -> None:
        self._ended: asyncio.Event | None = None

    def ended(self) -> None:
        """A worker of this process ended a unit (done, or its lease given up)."""
        if self._ended is not None:
            self._ended.set()
            self._ended = None

    async def wait(self, clock: Clock, seconds: float) -> None:
        """Wait ``seconds`` on ``clock``, or until a worker of this process ends a unit."""
        if self._ended is None:
            self._ended = asyncio.Event()
        ended = asyncio.ensure_future(self._ended.wait())
        try:
            await settled(ended, clock, seconds)
        finally:
            ended.cancel()


async def _give_back(pending: Callable[[], Awaitable[dict[str, tuple[Unit, int]]]],
                     records: WorkRecords, key: str, worker: str) -> None:
    """Give the lease of unit ``key`` back if ``worker`` still holds it and it is not done."""
    mine = (await pending()).get(key)
    if mine is not None and mine[0].owner == worker and not mine[0].done:
        await records.release(key, *mine)


async def work_units(pending: Callable[[], Awaitable[dict[str, tuple[Unit, int]]]],
                     process: Callable[[str, Unit, int], Awaitable[None]], *,
                     records: WorkRecords, worker: str, lease: float, clock: Clock,
                     rng: random.Random,
                     eligible: Callable[[Unit, list[Unit], float], bool] = lambda u, a, n: True,
                     alone: Callable[[Unit], Awaitable[bool]] | None = None,
                     going: Callable[[], bool] = lambda: True, poll: float = 1.0,
                     idle: Idle | None = None) -> None:
    """The loop in which one worker takes units of work until none is left.

    ``pending()`` lists the records; a unit that is not done, has no live lease and is
    ``eligible`` (given every record and the wall time) is leased at random and handed to
    ``process``; ``alone``, when given, is asked after the lease is taken and a False
    gives the lease back (two workers took rival units at one instant). Stops when every
    unit is done or ``going()`` turns False; cancelled, it gives its lease back first.
    While every unit left is leased, it looks again after ``poll`` seconds, or (``idle``,
    shared by the workers of a process) as soon as another of them ends a unit.
    """
    idle = idle or Idle()  # alone, a worker waits out the poll
    while going():
        found = await pending()
        units = [unit for unit, _ in found.values()]
        todo = [(key, unit, rev) for key, (unit, rev) in found.items() if not unit.done]
        if not todo:
            return
        now = clock.wall()
        free = [t for t in todo if t[1].free(now) and eligible(t[1], units, now)]
        if not free:
            await idle.wait(clock, min(poll, lease / 4))
            continue
        key, unit, revision = rng.choice(free)
        taken = await records.acquire(key, unit, revision, worker, lease)
        if taken is None:
            continue
        if alone is not None and not await alone(taken[0]):
            await records.release(key, *taken)
            continue
        try:
            await process(key, *taken)
        except asyncio.CancelledError:
            # a bounded step was cut short: give the lease back, so the next step (or any
            # worker) takes the unit from its last checkpoint at once, not at its expiry
            # (a store that does not answer in time: the lease lapses)
            with contextlib.suppress(Unavailable):
                await within(clock, GOODBYE, _give_back(pending, records, key, worker),
                             f"giving unit {key!r} back")
            raise
        idle.ended()
