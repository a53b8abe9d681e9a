"""Live controls of a running migration: pause, resume, a new rate, and outside holds.

An operator changes a migration while its movers run, from any host: ``shardex reshard
pause|resume|throttle --rate R`` (the same under ``adopt``) write the migration's
control record, ``migrate/ID/control`` in the index's own records, by compare-and-set.
Every running mover reads it again every ``poll`` seconds (``Controls.refresh``, one
strongly consistent record read), so a change reaches every process within a few
seconds, and ``status`` shows it.

Outside signals hold the movers too, while they last, whatever the record says:
``FileSignal`` while a file exists (``--throttle-file PATH``: gh-ost's throttle flag file),
``MetricSignal`` while a metric (a PromQL query to a Prometheus server, injected as an
async callable) is above a threshold. A held or paused mover spends nothing: the rate in
force (``Controls.rate``) is 0 and the budget (``shardex.migrate.budget``) waits.

``Control`` is a pure value; ``change_control`` is the compare-and-set loop.
"""

from __future__ import annotations

import logging
import math
import os
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from shardex.clock import Clock
from shardex.errors import ConditionFailed, InvalidInput, MalformedItem, ShardexError
from shardex.migrate.status import iso
from shardex.model.entries import Record
from shardex.retry import RetryPolicy, call_with_retry
from shardex.stores.base import Store

__all__ = ["CONTROL_SCHEMA", "Control", "Controls", "FileSignal", "MetricSignal", "Signal",
           "at_rate", "change_control", "check_rate", "control_document", "describe",
           "read_control", "record_key", "update_record"]

log = logging.getLogger("shardex")
CONTROL_SCHEMA = "shardex.migrate.control/1"
PREFIX = "migrate/"
# record reads and writes are few and must not fail a migration for a passing throttle
PATIENT = RetryPolicy(attempts=12, base=0.05, cap=2.0, deadline=None)
DEFAULT_POLL = 1.0


def record_key(migration: str, name: str) -> str:
    """The key of record ``name`` of migration ``migration`` (a reshard's or adoption's id)."""
    return f"{PREFIX}{migration}/{name}"


def check_rate(rate: Any, what: str = "rate") -> float:
    """``rate`` as a float if it is a number of units a second > 0; else InvalidInput."""
    if isinstance(rate, bool) or not isinstance(rate, int | float) \
            or not 0 < rate < math.inf:
        raise InvalidInput(f"{what} must be a number of write units a second > 0, got {rate!r}")
    return float(rate)


@dataclass(frozen=True, slots=True)
class Control:
    """A migration's control record: paused or not, and its rate.

    ``rate`` is the write units a second the migration's movers may put on any one shard
    key, all processes together (None: the rate the first runner was given).
    ``changed_at`` (wall seconds), ``changed_by`` and ``reason`` say who changed it last;
    ``paused_by`` who paused it, while paused (a rate changed since does not take its place).
    """

    paused: bool = False
    rate: float | None = None
    changed_at: float = 0.0
    changed_by: str | None = None
    reason: str | None = None
    paused_by: str | None = None

    def to_body(self) -> dict[str, Any]:
        return {"paused": self.paused, "rate": self.rate, "changed_at": self.changed_at,
                "changed_by": self.changed_by, "reason": self.reason,
                "paused_by": self.paused_by}

    @classmethod
    def from_body(cls, body: Mapping[str, Any], where: str) -> Control:
        """Read a control record; MalformedItem naming it if it is damaged."""
        try:
            paused, rate = body["paused"], body["rate"]
            if not isinstance(paused, bool):
                raise ValueError(f"paused {paused!r}")
            if rate is not None:
                rate = check_rate(rate)
            by, reason = body.get("changed_by"), body.get("reason")
            paused_by = body.get("paused_by")  # absent from records before it
            if not all(text is None or isinstance(text, str) for text in (by, reason,
                                                                           paused_by)):
                raise ValueError(f"changed_by {by!r}, reason {reason!r}, paused_by "
                                 f"{paused_by!r}")
            return cls(paused=paused, rate=rate, changed_at=float(body["changed_at"]),
                       changed_by=by, reason=reason, paused_by=paused_by)
        except (KeyError, TypeError, ValueError) as exc:
            raise MalformedItem(f"{where} is not a migration's control record "
                                f"({type(exc).__name__}: {exc}); delete it and set the "
                                "controls again") from None


def _where(store: Store, namespace: str, key: str) -> str:
    return f"record {key!r} of index {namespace!r} in {store.uri}"


async def _get(store: Store, namespace: str, key: str, clock: Clock,
               rng: random.Random) -> Record | None:
    found: Record | None = await call_with_retry(
        lambda: store.get_record(namespace, key), PATIENT, clock=clock, rng=rng)
    return found


async def read_control(store: Store, namespace: str, migration: str, *, clock: Clock,
                       rng: random.Random | None = None) -> tuple[Control, int | None]:
    """The control record of ``migration`` and its revision (None: never written)."""
    key = record_key(migration, "control")
    record = await _get(store, namespace, key, clock, rng or random.Random())
    if record is None:
        return Control(), None
    return Control.from_body(record.body, _where(store, namespace, key)), record.revision


async def update_record(store: Store, namespace: str, key: str,
                        change: Callable[[Record | None], Mapping[str, Any] | None], *,
                        clock: Clock, rng: random.Random) -> Record | None:
    """Write ``change(record)`` over record ``key`` by compare-and-set, again if another won.

    ``change`` gets the record as read (None: absent) and returns the new body, or None
    to leave it; the record as it stands after is returned.
    """
    while True:
        record = await _get(store, namespace, key, clock, rng)
        body = change(record)
        if body is None:
            return record
        expected = None if record is None else record.revision

        def put(body: Mapping[str, Any] = body, expected: int | None = expected
                ) -> Awaitable[int]:
            return store.put_record(namespace, key, body, expected=expected)
        try:
            revision = await call_with_retry(put, PATIENT, clock=clock, rng=rng)
            return Record(body, revision)
        except ConditionFailed:
            await clock.sleep(rng.uniform(0.005, 0.05))


async def change_control(store: Store, namespace: str, migration: str,
                         change: Callable[[Control], Control], *, clock: Clock,
                         rng: random.Random | None = None) -> Control:
    """Apply ``change`` to the control record by compare-and-set, again if another won."""
    key = record_key(migration, "control")
    where = _where(store, namespace, key)

    def changing(record: Record | None) -> Mapping[str, Any] | None:
        current = Control() if record is None else Control.from_body(record.body, where)
        new = change(current)
        return None if new == current and record is not None else new.to_body()

    record = await update_record(store, namespace, key, changing, clock=clock,
                                 rng=rng or random.Random())
    assert record is not None
    return Control.from_body(record.body, where)


class Signal(Protocol):
    """An outside reason to hold the movers: ``holding()`` says why, or None."""

    async def holding(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class FileSignal:
    """Holds the movers while the file ``path`` exists (``--throttle-file``)."""

    path: str

    async def holding(self) -> str | None:
        return f"throttle file {self.path} exists" if _exists(self.path) else None


def _exists(path: str) -> bool:
    return os.path.exists(path)  # one stat: not worth a thread


@dataclass(frozen=True, slots=True)
class MetricSignal:
    """Holds the movers while ``query()`` answers a value above ``threshold``.

    ``query`` returns the metric's current value (None: no data, which holds nothing);
    ``name`` says what it is in the reason. An error reaching the metric holds too
    (a migration does not run blind when it was told to watch), and says so.
    """

    query: Callable[[], Awaitable[float | None]]
    threshold: float
    name: str

    async def holding(self) -> str | None:
        try:
            value = await self.query()
        except ShardexError as exc:
            return f"{self.name} cannot be read ({exc})"
        if value is not None and value > self.threshold:
            return f"{self.name} is {value:g} > {self.threshold:g}"
        return None


class Controls:
    """What one runner follows: migration ``migration``'s control record and ``signals``.

    ``rate`` is the runner's own rate, recorded as the migration's if the record has
    none yet. ``refresh()`` reads the record and the signals (at most every ``poll``
    seconds) and returns the rate in force: 0 while paused or held.
    """

    def __init__(self, store: Store, namespace: str, migration: str, *, rate: float,
                 clock: Clock, signals: Sequence[Signal] = (), owner: str = "",
                 poll: float = DEFAULT_POLL, rng: random.Random | None = None) -> None:
        self.store = store
        self.namespace = namespace
        self.migration = migration
        self.own_rate = check_rate(rate)
        self._clock = clock
        self._signals = tuple(signals)
        self._owner = owner
        self._poll = poll
        self._rng = rng or random.Random()
        self.control = Control()
        self.held: str | None = None
        self._read_at = -math.inf

    @property
    def rate(self) -> float:
        """The rate in force, as last refreshed: 0 while paused or held."""
        return 0.0 if self._stopped else self.set_rate

    @property
    def _stopped(self) -> bool:
        return self.control.paused or self.held is not None

    @property
    def set_rate(self) -> float:
        """The migration's rate, as last refreshed, paused or not: what it moves at once
        it goes on (this runner's own until the record has one)."""
        return self.control.rate if self.control.rate is not None else self.own_rate

    @property
    def hold(self) -> str | None:
        """Why the movers stand still, as last refreshed (paused, or an outside signal's
        hold), in one line; None while they move."""
        return describe(self.control, self.held) if self._stopped else None

    def _with_own_rate(self, control: Control) -> Control:
        """``control`` with this runner's rate where it has none; an operator's change
        (a pause before any runner ran) stays the last one it names."""
        if control.rate is not None:
            return control
        if control.changed_by is not None:
            return replace(control, rate=self.own_rate)
        return replace(control, rate=self.own_rate, changed_at=self._clock.wall(),
                       changed_by=self._owner, reason="the first runner's rate")

    async def refresh(self, *, force: bool = False) -> float:
        """Read the control record and the signals again, unless read within ``poll``."""
        now = self._clock.now()
        if not force and now - self._read_at < self._poll:
            return self.rate
        self._read_at = now
        before = (self.control.paused, self.held, self.rate)
        control, revision = await read_control(self.store, self.namespace, self.migration,
                                               clock=self._clock, rng=self._rng)
        if revision is None or control.rate is None:
            control = await change_control(self.store, self.namespace, self.migration,
                                           self._with_own_rate, clock=self._clock,
                                           rng=self._rng)
        self.control = control
        self.held = None
        for signal in self._signals:
            self.held = await signal.holding()
            if self.held is not None:
                break
        if (control.paused, self.held, self.rate) != before:
            log.warning("migration %s: %s", self.migration, describe(control, self.held))
        return self.rate


def describe(control: Control, held: str | None, idle: str | None = None) -> str:
    """One line: what the movers do under ``control`` and the outside hold ``held``
    (``idle``: why nothing moves now, whatever the rate: ``at_rate``)."""
    if control.paused:
        who = control.paused_by or control.changed_by or "an operator"
        return f"paused by {who}; resume to go on"
    if held is not None:
        return f"held: {held}"
    if control.rate is None:
        return "no rate yet: the first runner's --rate sets it"
    return at_rate(control.rate, idle)


def at_rate(rate: float, idle: str | None = None) -> str:
    """The movers' ``rate`` in words: moving at up to it, or (``idle``: why nothing moves
    now, as ``nothing moves in verified``) what they would move at."""
    if idle is None:
        return f"moving at up to {rate:g} write units a second per shard key"
    return f"up to {rate:g} write units a second per shard key; {idle}"


def control_document(control: Control, revision: int | None) -> dict[str, Any]:
    """The controls as ``status`` shows them (``shardex.migrate.control/1``); its
    ``changed_at`` in ISO 8601 UTC as every time a status shows (None: never changed)."""
    return {"schema": CONTROL_SCHEMA, "recorded": revision is not None, **control.to_body(),
            "changed_at": iso(control.changed_at) if control.changed_at else None,
            "summary": describe(control, None)}
