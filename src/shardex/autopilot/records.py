"""The autopilot's records in the index's own store: its leader lease, controls, state and log.

Every record is one small document under ``autopilot/`` in the index's namespace, read
strongly consistent and written by compare-and-set on its revision (``Records``, as the
migration runners keep theirs), so two autopilots of one index meet on the record and
one of them loses:

- ``autopilot/leader``: the leader lease (``Lease``): owner, expiry (wall seconds) and
  term. An autopilot holds it by renewing it before it expires; another one takes it
  only once it has expired, with the next term. A SIGKILLed leader loses it when it
  expires.
- ``autopilot/control``: ``paused`` (``Control``), written by ``shardex autopilot
  pause``/``resume``; a leader that reads it paused stops acting at once.
- ``autopilot/state``: what the leader must know after a restart (``State``): the
  migration it started and drives, each key's last change, admission budget, flaps and
  last shrink's start (a record from before those two reads as 0 and none); fields a
  later release wrote are kept as they were.
- ``autopilot/log/<ms>-<worker>-<n>``: one record per decision or action
  (``LogEntry``), created once, never rewritten; the oldest are pruned past ``keep``.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from shardex.autopilot.policy import MAX_FLAPS
from shardex.autopilot.runner import Records
from shardex.clock import Clock
from shardex.errors import ConditionFailed, MalformedItem
from shardex.stores.base import Store

__all__ = ["AutopilotRecords", "Control", "KeyState", "Lease", "LogEntry", "PREFIX", "State",
           "entries_of", "plain"]

PREFIX = "autopilot/"
_LEADER, _CONTROL, _STATE, _LOG = (PREFIX + "leader", PREFIX + "control", PREFIX + "state",
                                   PREFIX + "log/")


def _malformed(where: str, exc: Exception) -> MalformedItem:
    return MalformedItem(f"{where} is not an autopilot record ({type(exc).__name__}: {exc}); "
                         "delete it and start the autopilot again")


@dataclass(frozen=True, slots=True)
class Lease:
    """The leader lease: ``owner`` holds it until ``expires`` (wall seconds), in ``term``
    (one more at each change of owner), since ``since``."""

    owner: str | None = None
    expires: float = 0.0
    term: int = 0
    since: float = 0.0

    def held_by(self, worker: str, now: float) -> bool:
        return self.owner == worker and now < self.expires

    def to_body(self) -> dict[str, Any]:
        return {"owner": self.owner, "expires": self.expires, "term": self.term,
                "since": self.since}

    @classmethod
    def from_body(cls, body: Mapping[str, Any], where: str) -> Lease:
        try:
            owner = body["owner"]
            if owner is not None and not isinstance(owner, str):
                raise TypeError(f"owner {owner!r}")
            return cls(owner, float(body["expires"]), int(body["term"]), float(body["since"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise _malformed(where, exc) from None


@dataclass(frozen=True, slots=True)
class Control:
    """What an operator asked: ``paused`` (since ``at``, by ``by``, for ``reason``)."""

    paused: bool = False
    at: float = 0.0
    by: str = ""
    reason: str = ""

    def to_body(self) -> dict[str, Any]:
        return {"paused": self.paused, "at": self.at, "by": self.by, "reason": self.reason}

    @classmethod
    def from_body(cls, body: Mapping[str, Any], where: str) -> Control:
        try:
            paused = body["paused"]
            if not isinstance(paused, bool):
                raise TypeError(f"paused {paused!r}")
            return cls(paused, float(body["at"]), str(body["by"]), str(body["reason"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise _malformed(where, exc) from None


@dataclass(frozen=True, slots=True)
class KeyState:
    """One key's memory: when its last migration ended (wall seconds), the admission
    budget the policy set (units a second) and since when, its count of flaps and when
    its last shrink started (``policy.flaps_after``), and when the autopilot last saw an
    operator change the key's layout (``vetoed_at``: a migration of their own, or a
    rollback of the autopilot's; no migration of it for ``veto`` seconds). ``later``:
    the fields a later release wrote that this one does not know, kept as they were."""

    last_change: float | None = None
    budget: float | None = None
    budget_since: float | None = None
    flaps: int = 0
    shrunk_at: float | None = None
    vetoed_at: float | None = None
    later: Mapping[str, Any] = field(default_factory=dict)

    def to_body(self) -> dict[str, Any]:
        return {**self.later, "last_change": self.last_change, "budget": self.budget,
                "budget_since": self.budget_since, "flaps": self.flaps,
                "shrunk_at": self.shrunk_at, "vetoed_at": self.vetoed_at}


@dataclass(frozen=True, slots=True)
class State:
    """The leader's state: the migration it drives (``reshard``, of the keys
    ``migrating``, toward ``targets``: key -> (N, tier)), per key (``keys``), and
    ``rollback``: the last of its migrations seen rolled back, and by whom (``autopilot``,
    recorded before its own rollback starts, as its parity failed; or ``operator``).

    ``later``: the fields a later release wrote that this one does not know, kept as they
    were (each key's in its ``KeyState``): a leader of this release that takes over from
    a later one, in a rolling upgrade or back, loses none of them. (A leader of the
    release before the flaps lost those, which read as 0 again.)
    """

    reshard: str | None = None
    keys: Mapping[str, KeyState] = field(default_factory=dict)
    migrating: tuple[str, ...] = ()
    targets: Mapping[str, tuple[int, str | None]] = field(default_factory=dict)
    rollback: tuple[str, str] | None = None
    later: Mapping[str, Any] = field(default_factory=dict)

    def rolled_back(self, reshard: str | None) -> str | None:
        """Who rolled migration ``reshard`` back (None: no rollback of it seen)."""
        return self.rollback[1] if self.rollback and self.rollback[0] == reshard else None

    def key(self, name: str) -> KeyState:
        return self.keys.get(name, KeyState())

    def with_key(self, name: str, **changes: Any) -> State:
        return replace(self, keys={**self.keys, name: replace(self.key(name), **changes)})

    def to_body(self) -> dict[str, Any]:
        return {**self.later, "reshard": self.reshard, "migrating": list(self.migrating),
                "targets": {key: {"shards": n, "tier": tier}
                            for key, (n, tier) in sorted(self.targets.items())},
                "rollback": None if self.rollback is None else {
                    "reshard": self.rollback[0], "by": self.rollback[1]},
                "keys": {name: k.to_body() for name, k in sorted(self.keys.items())}}

    @classmethod
    def from_body(cls, body: Mapping[str, Any], where: str) -> State:
        def number(x: Any) -> float | None:
            return None if x is None else float(x)

        def flaps(x: Any) -> int:
            if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x <= MAX_FLAPS:
                raise ValueError(f"flaps {x!r}")
            return x

        def name(x: Any, what: str) -> str | None:
            if x is not None and not isinstance(x, str):
                raise TypeError(f"{what} {x!r}")
            return x

        def target(x: Mapping[str, Any]) -> tuple[int, str | None]:
            shards = x["shards"]
            if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
                raise ValueError(f"target shards {shards!r}")
            return shards, name(x["tier"], "target tier")

        def rollback(x: Any) -> tuple[str, str] | None:
            if x is None:
                return None
            by = x["by"]
            if by not in ("autopilot", "operator"):
                raise ValueError(f"rollback by {by!r}")
            return str(name(x["reshard"], "rollback reshard")), by

        try:
            # flaps, shrunk_at, vetoed_at, targets and rollback came later: a record
            # written before them has none of them
            keys = {str(key): KeyState(number(k["last_change"]), number(k["budget"]),
                                       number(k["budget_since"]), flaps(k.get("flaps", 0)),
                                       number(k.get("shrunk_at")), number(k.get("vetoed_at")),
                                       _later(k, _KEY_FIELDS))
                    for key, k in dict(body["keys"]).items()}
            targets = {str(key): target(x)
                       for key, x in dict(body.get("targets") or {}).items()}
            return cls(name(body["reshard"], "reshard"), keys,
                       tuple(str(v) for v in body["migrating"]), targets,
                       rollback(body.get("rollback")), _later(body, _STATE_FIELDS))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise _malformed(where, exc) from None


_KEY_FIELDS = frozenset({"last_change", "budget", "budget_since", "flaps", "shrunk_at",
                         "vetoed_at"})
_STATE_FIELDS = frozenset({"reshard", "migrating", "targets", "rollback", "keys"})


def _later(body: Mapping[str, Any], known: frozenset[str]) -> dict[str, Any]:
    """The fields of ``body`` this release does not know: a later one's, kept as they are."""
    return {name: value for name, value in body.items() if name not in known}


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One line of the audit log: a decision (``kind`` ``decision``) or something done
    (``action``, ``leader``, ``control``), when (``t``, wall seconds) and by whom.

    ``outcome`` says what came of it: ``ok``, ``fail``, ``proposed`` (dry run),
    ``queued`` (another migration is under way), ``recorded`` (a decision that needs
    no action), ``started``, ``stopped`` (a run the migration's rollback by someone else
    ended).
    """

    t: float
    kind: str
    action: str
    outcome: str
    reason: str
    worker: str
    key: str | None = None
    from_n: int | None = None
    to_n: int | None = None
    dry_run: bool = False
    reshard: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    def names(self, key: str) -> bool:
        """Whether this entry is about logical key ``key``: its own (a decision's), or
        one a migration's action names in its details (a start's values, an end's
        shards, a veto's keys)."""
        if self.key == key:
            return True
        details = self.details
        # a start's details are keyed by its values; any other entry's by field names
        # (a key named "inputs" or "term" is no field of theirs)
        return (self.action == "start" and self.kind == "action" and key in details) \
            or key in (details.get("shards") or {}) or key in (details.get("keys") or ())

    def to_body(self) -> dict[str, Any]:
        return {"t": self.t, "kind": self.kind, "action": self.action,
                "outcome": self.outcome, "reason": self.reason, "worker": self.worker,
                "key": self.key, "from_n": self.from_n, "to_n": self.to_n,
                "dry_run": self.dry_run, "reshard": self.reshard,
                "details": dict(self.details)}

    @classmethod
    def from_body(cls, body: Mapping[str, Any], where: str) -> LogEntry:
        try:
            return cls(float(body["t"]), str(body["kind"]), str(body["action"]),
                       str(body["outcome"]), str(body["reason"]), str(body["worker"]),
                       body.get("key"), body.get("from_n"), body.get("to_n"),
                       bool(body.get("dry_run", False)), body.get("reshard"),
                       dict(body.get("details") or {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise _malformed(where, exc) from None


class AutopilotRecords(Records):
    """The autopilot records of index ``namespace`` in ``store`` (see the module)."""

    def __init__(self, store: Store, namespace: str, *, clock: Clock,
                 rng: random.Random | None = None) -> None:
        super().__init__(store, namespace, clock=clock, rng=rng)
        self._serial = itertools.count()

    # -- the leader lease ------------------------------------------------------------

    async def lease(self) -> tuple[Lease, int | None]:
        """The stored lease and its revision (an empty lease and None when absent)."""
        found = await self._get(_LEADER)
        if found is None:
            return Lease(), None
        return Lease.from_body(found.body, self._where(_LEADER)), found.revision

    async def hold(self, worker: str, duration: float) -> tuple[bool, Lease]:
        """Take or renew the lease for ``duration`` seconds: (True, it) when ``worker``
        holds it now, (False, the holder's) while another's has not expired."""
        lease, revision = await self.lease()
        now = self._clock.wall()
        if lease.owner != worker and lease.owner is not None and now < lease.expires:
            return False, lease
        ours = lease.owner == worker and now < lease.expires
        taken = Lease(worker, now + duration, lease.term if ours else lease.term + 1,
                      lease.since if ours else now)
        if await self._put(_LEADER, taken.to_body(), revision) is None:
            return False, (await self.lease())[0]
        return True, taken

    async def release(self, worker: str) -> None:
        """Give the lease up at once (a clean stop), if ``worker`` still holds it."""
        lease, revision = await self.lease()
        if lease.owner == worker and revision is not None:
            await self._put(_LEADER, replace(lease, expires=0.0).to_body(), revision)

    # -- controls and state -------------------------------------------------------------

    async def control(self) -> Control:
        found = await self._get(_CONTROL)
        return Control() if found is None else Control.from_body(found.body,
                                                                 self._where(_CONTROL))

    async def set_control(self, control: Control) -> None:
        """Store ``control`` whatever was there (the operator's word is the last)."""
        while True:
            found = await self._get(_CONTROL)
            if await self._put(_CONTROL, control.to_body(),
                               None if found is None else found.revision) is not None:
                return

    async def state(self) -> tuple[State, int | None]:
        found = await self._get(_STATE)
        if found is None:
            return State(), None
        return State.from_body(found.body, self._where(_STATE)), found.revision

    async def save_state(self, state: State, revision: int | None) -> int | None:
        """Store ``state`` at ``revision``; None if another writer changed it meanwhile."""
        return await self._put(_STATE, state.to_body(), revision)

    # -- the log -----------------------------------------------------------------------

    async def append(self, entry: LogEntry) -> None:
        """Add ``entry`` to the log (a record of its own, named for its time)."""
        tag = "".join(c if c.isalnum() else "-" for c in entry.worker)[-24:]
        key = f"{_LOG}{round(entry.t * 1000):015d}-{tag}-{next(self._serial):06d}"
        await self._put(key, entry.to_body(), None)

    async def log(self) -> list[LogEntry]:
        """Every entry of the log, oldest first."""
        return [LogEntry.from_body(record.body, self._where(key))
                for key, record in (await self._list(_LOG)).items()]

    async def prune(self, keep: int) -> int:
        """Delete the oldest entries past the ``keep`` newest; return how many went."""
        found = await self._list(_LOG)
        gone = 0
        for key in list(found)[:max(0, len(found) - keep)]:
            try:
                await self._delete(key, found[key].revision)
                gone += 1
            except ConditionFailed:
                continue
        return gone

    async def _delete(self, key: str, revision: int) -> None:
        store, namespace = self.store, self.namespace
        await self._retrying(lambda: store.delete_record(namespace, key, expected=revision))


def plain(value: Any) -> Any:
    """``value`` as JSON the store takes (a log entry's details): infinities and NaN as
    None, tuples as lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def entries_of(entries: Sequence[LogEntry], key: str) -> list[LogEntry]:
    """The entries about logical key ``key`` (``LogEntry.names``), and every action of a
    migration one of them names (a verify, a cutover of a migration that moves it)."""
    migrations = {e.reshard for e in entries if e.reshard is not None and e.names(key)}
    return [e for e in entries if e.names(key) or (e.kind == "action"
                                                   and e.reshard in migrations)]
