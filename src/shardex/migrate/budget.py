"""One rate budget per migration, shared by every process and worker that moves its entries.

A migration's rate caps the write units a second its movers put on any one shard key,
all processes together: four ``adopt run`` processes put no more on a key than one does.
The rate in force comes from the migration's controls (``shardex.migrate.control``: 0
while paused or held). Two ways to share it:

- **Slices leased in the store** (the default): the record ``migrate/ID/budget`` in the
  index's own records holds each process's *slice*, the units a second it may spend on
  each shard key, leased for ``term`` seconds and renewed every ``term / 3`` by
  compare-and-set. A process spends at most its slice on each key in any ``window``
  (one second) of wall time: a sliding window, so the sum over processes holds in every
  second, aligned or not. Why the slices never add up to more than the rate: a process
  takes only what the others' *claims* leave (``lease``), and a claim outlives what it
  was: a slice given up, shrunk, or whose lease ran out still counts for one window plus
  the clocks' skew, the time in which its owner may still have spent it. The shares
  converge on ``rate / processes`` (those that want more renew and take what the others
  gave up); a process with no unit under way gives its slice up (``Budget.working``).
- **Redis** (a URL given): each shard key's moving window in Redis through the ``limits``
  library, as shared admission budgets do (``shardex.admission.SharedBudgets``), at the
  rate in force; nothing is leased.

A process held by its own outside signal (``--throttle-file``, a metric threshold)
records why beside its slice, for as long as the hold lasts (``holds``, leased like a
slice): status names the runners that stand still and the reason, which is theirs alone.
A runner waiting between the migration's steps (for every client to act on a change)
records that likewise (``waits``, ``Presence``): status lists it as a runner.

AIMD, across processes: a throttle seen by any process cuts the migration's rate to
``decrease`` times what it was (``cut``, recorded in the budget record, at most once per
``cooldown``); it then grows back by ``increase`` times the set rate each second, a pure
function of time (``effective_rate``), so no process needs to write it back up. Every
process follows a cut at its next renewal; the one that saw the throttle, at once.

``lease``, ``cut``, ``effective_rate`` and ``window_wait`` are pure; ``Budget`` is the
thin async part, on an injected clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any

from shardex.admission import Budget as AdmissionBudget
from shardex.admission import SharedBudgets
from shardex.admission.budgets import moving_window
from shardex.clock import GOODBYE, Clock, within
from shardex.errors import MalformedItem, ShardexError
from shardex.migrate.control import (
    DEFAULT_POLL,
    Controls,
    Signal,
    control_document,
    read_control,
    record_key,
    update_record,
)
from shardex.model.entries import Record
from shardex.stores.base import Store

__all__ = ["Budget", "BudgetPolicy", "BudgetState", "Hold", "Presence", "Sharing", "Slice",
           "SpendWindow", "budget_document", "cut", "effective_rate", "held_until", "lease",
           "migration_status", "release", "window_wait"]

log = logging.getLogger("shardex")
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class BudgetPolicy:
    """How a migration's budget is shared and adapted.

    - ``term``: seconds a slice is leased for (renewed every third of it).
    - ``window``: seconds over which a slice (and the rate) holds: the load is measured
      per second.
    - ``skew``: seconds the clocks of the hosts running movers may disagree.
    - ``grain``: the smallest slice worth having (about one write's units): with more
      processes than ``rate / grain``, the extra ones wait for a slice.
    - ``decrease``: the factor a throttle cuts the rate by; ``increase``: the share of the
      set rate it grows back by each second; ``cooldown``: seconds after a cut in which
      throttles (answers to requests sent before it) do not cut again; ``floor``: the
      share of the set rate a cut never goes below.
    """

    term: float = 3.0
    window: float = 1.0
    skew: float = 0.25
    grain: float = 2.0
    decrease: float = 0.5
    increase: float = 0.05
    cooldown: float = 1.0
    floor: float = 0.01

    @property
    def linger(self) -> float:
        """Seconds a claim outlives its lease: its owner may still spend it that long."""
        return self.window + self.skew


@dataclass(frozen=True, slots=True)
class Slice:
    """One process's slice: ``share`` units a second on each shard key until ``expires``.

    ``prior`` is a larger share given up, still claimed until ``prior_until`` (wall s).
    """

    share: float
    expires: float
    prior: float = 0.0
    prior_until: float = 0.0

    def live(self, now: float) -> bool:
        return now < self.expires

    def claim(self, now: float, linger: float) -> float:
        """What the slice may still be spending at ``now``."""
        current = self.share if now < self.expires + linger else 0.0
        return max(current, self.prior if now < self.prior_until else 0.0)


@dataclass(frozen=True, slots=True)
class Hold:
    """Why a process's movers stand still (its outside signal), recorded until ``expires``."""

    reason: str
    expires: float


@dataclass(frozen=True, slots=True)
class BudgetState:
    """The budget record: the last cut (AIMD), every process's slice, the processes that
    an outside signal of their own holds (``holds``), and the runners waiting between a
    migration's steps (``waits``: for their clients to act on a change, say), each with
    what it waits for (both absent from older records)."""

    cut_rate: float | None = None
    cut_at: float = 0.0
    slices: Mapping[str, Slice] = field(default_factory=dict)
    holds: Mapping[str, Hold] = field(default_factory=dict)
    waits: Mapping[str, Hold] = field(default_factory=dict)

    def to_body(self) -> dict[str, Any]:
        return {"cut_rate": self.cut_rate, "cut_at": self.cut_at,
                "slices": {owner: [s.share, s.expires, s.prior, s.prior_until]
                           for owner, s in sorted(self.slices.items())},
                "holds": {owner: [h.reason, h.expires]
                          for owner, h in sorted(self.holds.items())},
                "waits": {owner: [w.reason, w.expires]
                          for owner, w in sorted(self.waits.items())}}

    def holding(self, owner: str, reason: str | None, now: float, term: float
                ) -> BudgetState | None:
        """The state with ``owner``'s hold renewed for ``term`` (None: its hold ended) and
        the lapsed ones dropped; None if that changes nothing that status shows (a
        renewal within the last third of a term)."""
        holds = _renewed(self.holds, owner, reason, now, term)
        return None if holds is None else replace(self, holds=holds)

    def waiting(self, owner: str, reason: str | None, now: float, term: float
                ) -> BudgetState | None:
        """``holding`` for ``owner``'s wait between steps (None: it waits no more)."""
        waits = _renewed(self.waits, owner, reason, now, term)
        return None if waits is None else replace(self, waits=waits)

    @classmethod
    def from_body(cls, body: Mapping[str, Any], where: str) -> BudgetState:
        """Read a budget record; MalformedItem naming it if it is damaged."""
        try:
            cut_rate = body["cut_rate"]
            slices = {str(owner): Slice(*(float(v) for v in values))
                      for owner, values in dict(body["slices"]).items()}
            holds, waits = ({str(owner): Hold(str(reason), float(expires))
                             for owner, (reason, expires) in dict(body.get(kind) or {}).items()}
                            for kind in ("holds", "waits"))
            return cls(cut_rate=None if cut_rate is None else float(cut_rate),
                       cut_at=float(body["cut_at"]), slices=slices, holds=holds, waits=waits)
        except (KeyError, TypeError, ValueError) as exc:
            raise MalformedItem(f"{where} is not a migration's budget record "
                                f"({type(exc).__name__}: {exc}); delete it: the running "
                                "movers write it again") from None


def _renewed(marks: Mapping[str, Hold], owner: str, reason: str | None, now: float,
             term: float) -> dict[str, Hold] | None:
    """``marks`` with ``owner``'s renewed for ``term`` (None: it ended) and the lapsed
    ones dropped; None if that changes nothing status shows (a renewal of the same reason
    within the last third of a term)."""
    kept = {o: m for o, m in marks.items() if o != owner and m.expires > now}
    mine = marks.get(owner)
    if reason is not None:
        if mine is not None and mine.reason == reason and mine.expires - now > term * 2 / 3:
            return None
        kept[owner] = Hold(reason, now + term)
    elif mine is None and len(kept) == len(marks):
        return None
    return kept


def effective_rate(state: BudgetState, rate: float, now: float, policy: BudgetPolicy) -> float:
    """The rate in force at ``now``: ``rate`` (the set rate), or less after a recent cut."""
    if rate <= 0 or state.cut_rate is None:
        return max(rate, 0.0)
    grown = state.cut_rate + policy.increase * rate * max(0.0, now - state.cut_at)
    return min(rate, grown)


def cut(state: BudgetState, rate: float, now: float, policy: BudgetPolicy) -> BudgetState | None:
    """The state after a throttle at ``now``; None within ``cooldown`` of the last cut."""
    if state.cut_rate is not None and now - state.cut_at < policy.cooldown:
        return None
    current = effective_rate(state, rate, now, policy)
    return replace(state, cut_rate=max(policy.floor * rate, current * policy.decrease),
                   cut_at=now)


def lease(state: BudgetState, owner: str, rate: float, now: float,
          policy: BudgetPolicy) -> tuple[BudgetState, float]:
    """Lease (or renew) ``owner``'s slice of ``rate`` at ``now``: the new state and share.

    The share is the fair one (the rate in force over the live processes, at most
    ``rate / grain`` of them, by name) but never more than the others' claims leave of
    the set rate ``rate``, so the claims never add up to more than it (after a cut,
    each process comes down to its share of the rate in force as it renews). A share
    smaller than the owner's current one keeps that claimed for ``linger`` seconds.
    Slices whose claims ended are dropped.
    """
    linger = policy.linger
    slices = {o: s for o, s in state.slices.items()
              if o != owner and (s.live(now) or s.claim(now, linger) > 0)}
    mine = state.slices.get(owner)
    available = effective_rate(state, rate, now, policy)
    live = sorted([o for o, s in slices.items() if s.live(now)] + [owner])
    seats = max(1, math.floor(available / policy.grain + _EPS))
    fair = available / min(len(live), seats) if live.index(owner) < seats else 0.0
    others = sum(s.claim(now, linger) for s in slices.values())
    # the claims stay within the set rate; a cut lowers each share at its renewal without
    # stalling the ones that renew first (a cut adapts the load, the set rate bounds it)
    share = max(0.0, min(fair, rate - others))
    prior, prior_until = 0.0, 0.0
    if mine is not None:
        current = mine.share if now < mine.expires + linger else 0.0
        if now < mine.prior_until:
            prior, prior_until = mine.prior, mine.prior_until
        if share < current - _EPS:  # what it gives up now stays claimed a while
            prior, prior_until = max(prior, current), now + linger
    slices[owner] = Slice(share, now + policy.term, prior, prior_until)
    return replace(state, slices=slices), share


def release(state: BudgetState, owner: str, now: float, policy: BudgetPolicy) -> BudgetState:
    """``owner`` gives its slice up: still claimed for ``linger`` seconds, then gone; its
    hold, if any, goes with it."""
    state = state.holding(owner, None, now, policy.term) or state
    mine = state.slices.get(owner)
    if mine is None:
        return state
    held = mine.claim(now, policy.linger)
    return replace(state, slices={**state.slices, owner: Slice(0.0, now, held,
                                                               now + policy.linger)})


class SpendWindow:
    """What was spent on one key (wall or clock seconds, units), oldest first, while it
    counts against a limit (``held_until``), with its running total: ``wait`` says how
    long until a cost fits, ``add`` records a spend. The budget keeps one a key, and a
    unit's pace one (``shardex.migrate.pace``)."""

    __slots__ = ("_spent", "span", "total")

    def __init__(self, span: float) -> None:
        self.span = span
        self._spent: deque[tuple[float, float]] = deque()
        self.total = 0.0

    def wait(self, now: float, cost: float, limit: float) -> float:
        """Seconds until ``cost`` more fits in ``limit`` units per ``span`` at ``now``
        (``window_wait``'s rule); what no longer counts is dropped."""
        if limit <= 0:
            return math.inf
        spent, span = self._spent, self.span
        while spent and held_until(*spent[0], limit, span) <= now:
            self.total -= spent.popleft()[1]
        total = self.total
        if not spent or total + cost <= limit + _EPS:
            return 0.0
        for until, units in sorted((held_until(at, units, limit, span), units)
                                   for at, units in spent):
            total -= units
            if total + cost <= limit + _EPS or total <= _EPS:
                return max(_EPS, until - now)
        return span  # unreachable: the loop empties the window

    def add(self, now: float, cost: float) -> None:
        self._spent.append((now, cost))
        self.total += cost

    def counts(self, now: float, limit: float) -> bool:
        """True while its newest spend still counts against ``limit``."""
        return bool(self._spent) and held_until(*self._spent[-1], limit, self.span) > now


def window_wait(spent: Iterable[tuple[float, float]], now: float, cost: float, limit: float,
                window: float) -> float:
    """Seconds until ``cost`` more fits in ``limit`` units per ``window`` at ``now``.

    ``spent`` is (wall time, units) of what was spent, oldest first; what was spent in
    ``(now - window, now]`` counts. ``inf`` while ``limit`` is 0. A cost larger than
    ``limit`` goes alone, once the window is empty, and counts for ``cost / limit``
    seconds (``held_until``): a rate below one write's cost spaces the writes out to it
    (going alone once a window, they had put 4 units a second on a key at 0.5).
    """
    found = SpendWindow(window)
    for at, units in spent:
        found.add(at, units)
    return found.wait(now, cost, limit)


def held_until(at: float, cost: float, limit: float, window: float) -> float:
    """Until when ``cost`` units spent at ``at`` count against ``limit`` a ``window``."""
    return at + max(window, cost * window / limit) if limit > 0 else math.inf


class _BudgetRecord:
    """Migration ``migration``'s budget record, changed by compare-and-set."""

    def __init__(self, store: Store, namespace: str, migration: str, *, clock: Clock,
                 rng: random.Random | None) -> None:
        self.store = store
        self.namespace = namespace
        self.migration = migration
        self._clock = clock
        self._rng = rng or random.Random()
        self._key = record_key(migration, "budget")

    def _state(self, record: Record | None) -> BudgetState:
        if record is None:
            return BudgetState()
        where = f"record {self._key!r} of index {self.namespace!r} in {self.store.uri}"
        return BudgetState.from_body(record.body, where)

    async def _change(self, change: Callable[[BudgetState, float], BudgetState | None]
                      ) -> BudgetState:
        """Apply ``change(state, now)`` (None: leave it) by compare-and-set; the state after."""
        def changing(record: Record | None) -> Mapping[str, Any] | None:
            new = change(self._state(record), self._clock.wall())
            return None if new is None else new.to_body()

        return self._state(await update_record(self.store, self.namespace, self._key, changing,
                                               clock=self._clock, rng=self._rng))


class Presence(_BudgetRecord):
    """A runner waiting between its migration's steps, marked in the budget record (its
    ``waits``) for ``term`` seconds at a time: status lists it as a runner, with what it
    waits for, and suggests watching it rather than starting another. Its first mark
    records its rate as the migration's if none is yet (``Controls``), as a runner that
    moves does."""

    def __init__(self, store: Store, namespace: str, migration: str, *, controls: Controls,
                 owner: str, clock: Clock, term: float,
                 rng: random.Random | None = None) -> None:
        super().__init__(store, namespace, migration, clock=clock, rng=rng)
        self.controls = controls
        self.owner = owner
        self.term = term
        self._marked = False

    async def mark(self, reason: str) -> None:
        """Mark (or renew) this runner's wait, ``reason`` saying what for; a store that
        does not answer leaves it to lapse (logged), as a budget slice's renewal does."""
        try:
            if not self._marked:
                await self.controls.refresh(force=True)
            await self._change(lambda state, now: state.waiting(self.owner, reason, now,
                                                                self.term))
            self._marked = True
        except ShardexError as exc:
            log.warning("migration %s: the runner's wait could not be recorded: %s",
                        self.migration, exc)

    async def leave(self) -> None:
        """Take this runner's mark out (at most ``GOODBYE`` seconds: else it lapses)."""
        if not self._marked:
            return
        try:
            await within(self._clock, GOODBYE, self._change(
                lambda state, now: state.waiting(self.owner, None, now, self.term)),
                "taking the runner's wait out")
        except ShardexError as exc:
            log.warning("migration %s: the runner's wait was not taken out: %s",
                        self.migration, exc)
        self._marked = False


class Budget(_BudgetRecord):
    """This process's side of migration ``migration``'s budget (see the module).

    ``controls`` give the rate in force; ``owner`` names this process's slice. With
    ``redis`` (a ``SharedBudgets``), the keys' windows are in Redis instead of slices.
    Use ``async with``: it leases a first slice, keeps it renewed, and gives it up.
    ``spend`` waits until a write may go; ``throttled`` reports a throttle.
    """

    def __init__(self, store: Store, namespace: str, migration: str, *, controls: Controls,
                 owner: str, clock: Clock, policy: BudgetPolicy | None = None,
                 redis: SharedBudgets | None = None, rng: random.Random | None = None) -> None:
        super().__init__(store, namespace, migration, clock=clock, rng=rng)
        self.controls = controls
        self.owner = owner
        self.policy = policy or BudgetPolicy()
        self._redis = redis
        self.state = BudgetState()
        self.share = 0.0
        self._expires = 0.0
        self._spent: dict[str, SpendWindow] = {}
        self._cut_seen = -math.inf
        self._keeper: asyncio.Task[None] | None = None
        self._working = 0  # this process's units and spends under way (``working``)
        self._spent_at = -math.inf  # wall s of its last spend
        self._idle = False  # True once it gave its slice up for want of work

    @property
    def rate(self) -> float:
        """The rate in force as this process last saw it (after any cut)."""
        return effective_rate(self.state, self.controls.rate, self._clock.wall(), self.policy)

    async def __aenter__(self) -> Budget:
        if self._redis is not None:
            await self._redis.open()
        await self.renew()
        self._keeper = asyncio.create_task(self._keep())
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
        try:
            if self._redis is None or self.state.holds.get(self.owner) is not None:
                await within(self._clock, GOODBYE, self._change(
                    lambda s, now: release(s, self.owner, now, self.policy)),
                    "giving the budget slice up")
        except ShardexError as exc:  # the lease runs out on its own
            log.warning("migration %s: the budget slice was not given up: %s",
                        self.migration, exc)
        finally:
            if self._redis is not None:
                await self._redis.close()

    async def renew(self) -> float:
        """Read the controls and renew this process's slice; the share it holds now."""
        rate = await self.controls.refresh(force=True)
        held, term = self.controls.held, self.policy.term
        if self._redis is not None:  # the record holds the cut, and a hold while it lasts
            self.state = await self._change(
                lambda state, now: state.holding(self.owner, held, now, term))
            self.share = effective_rate(self.state, rate, self._clock.wall(), self.policy)
            self._expires = math.inf
            return self.share
        if rate <= 0:
            self.share = 0.0  # paused or held: stop at once, before the record says so
        shares: list[float] = []

        def renewing(state: BudgetState, now: float) -> BudgetState:
            new, share = lease(state, self.owner, rate, now, self.policy)
            shares.append(share)
            return new.holding(self.owner, held, now, term) or new

        self.state = await self._change(renewing)
        self.share, self._expires = shares[-1], self.state.slices[self.owner].expires
        return self.share

    async def _keep(self) -> None:
        while True:
            await self._clock.sleep(self.policy.term / 3)
            try:
                recent = self._clock.wall() - self._spent_at < self.policy.term
                if self._working or recent or self._redis is not None:
                    await self.renew()
                elif not self._idle:
                    await self._give_up()
                else:
                    await self.controls.refresh()  # for what status and the run say
            except ShardexError as exc:
                # the slice lapses at its expiry, and spending with it
                log.warning("migration %s: the budget could not be renewed: %s",
                            self.migration, exc)

    @contextlib.asynccontextmanager
    async def working(self) -> AsyncIterator[None]:
        """Hold a slice while a unit of this process is under way (or a spend): one with
        none, and no spend for a term, gives its slice up at its next renewal, so the
        processes that work share the whole rate (an idle process had kept an equal
        share: two runners of one key moved at half the rate), and takes one again as its
        next unit starts."""
        self._working += 1
        try:
            if self._idle:
                self._idle = False
                try:
                    await self.renew()
                except ShardexError as exc:  # the keeper renews it: spending waits till then
                    log.warning("migration %s: the budget could not be renewed: %s",
                                self.migration, exc)
            yield
        finally:
            self._working -= 1

    async def _give_up(self) -> None:
        self._idle = True
        self.share = 0.0
        self.state = await self._change(lambda s, now: release(s, self.owner, now, self.policy))
        await self.controls.refresh()

    # -- spending -----------------------------------------------------------------------

    def _limit(self, now: float) -> float:
        return self.share if now < self._expires else 0.0

    async def spend(self, costs: Mapping[str, float]) -> None:
        """Wait until ``costs`` (write units per shard key) fit this process's budget."""
        async with self.working():
            self._spent_at = self._clock.wall()
            if self._redis is not None:
                await self._spend_shared(costs)
            else:
                await self._spend(costs)

    async def _spend(self, costs: Mapping[str, float]) -> None:
        windows = [(self._spent.get(key) or self._spent.setdefault(
            key, SpendWindow(self.policy.window)), cost) for key, cost in costs.items()]
        while True:
            now = self._clock.wall()
            limit = self._limit(now)
            wait = max((window.wait(now, cost, limit) for window, cost in windows),
                       default=0.0)
            if wait <= 0:
                break
            await self._clock.sleep(min(wait, self.policy.term / 6))
        for window, cost in windows:
            window.add(now, cost)
        if len(self._spent) > 4096:  # keys not written for a while hold nothing
            self._spent = {k: v for k, v in self._spent.items() if v.counts(now, limit)}

    async def _spend_shared(self, costs: Mapping[str, float]) -> None:
        """Take ``costs`` from the keys' moving windows in Redis, in whole units: a cost
        larger than a window holds is taken a window's worth at a time, and a rate below
        one unit a second counts over as many seconds as hold one unit (the movers had
        waited for good on either: a move of 2 units at a rate of 1.5, or any at 0.5)."""
        assert self._redis is not None
        for key, cost in costs.items():
            units = math.ceil(cost - _EPS)
            while units > 0:
                rate = self.share
                if rate <= 0:  # paused or held
                    await self._clock.sleep(self.policy.term / 6)
                    continue
                window = AdmissionBudget(rate=rate, burst=rate * max(1, math.ceil(1 / rate - _EPS)))
                chunk = min(units, moving_window(window, "high")[0])
                wait = await self._redis.take(key, chunk, window, "high")
                if wait == 0.0:
                    units -= chunk
                    continue
                await self._clock.sleep(self.policy.term / 6 if wait is None
                                        else min(wait, self.policy.term / 6))

    async def throttled(self) -> None:
        """Report a throttle: the migration's rate is cut (once per ``cooldown``)."""
        now = self._clock.wall()
        if now - self._cut_seen < self.policy.cooldown:
            return
        self._cut_seen = now
        self.share *= self.policy.decrease  # this process follows at once
        rate = self.controls.rate
        self.state = await self._change(lambda s, at: cut(s, rate, at, self.policy))


def budget_document(state: BudgetState, rate: float, now: float,
                    policy: BudgetPolicy | None = None) -> dict[str, Any]:
    """The budget as ``status`` shows it: the rate in force and the live slices."""
    policy = policy or BudgetPolicy()
    return {"rate": rate, "in_force": effective_rate(state, rate, now, policy),
            "cut_at": state.cut_at if state.cut_rate is not None else None,
            "slices": [{"owner": owner, "share": s.share, "expires": s.expires}
                       for owner, s in sorted(state.slices.items()) if s.live(now)],
            "holds": [{"owner": owner, "reason": h.reason, "expires": h.expires}
                      for owner, h in sorted(state.holds.items()) if h.expires > now],
            "waits": [{"owner": owner, "reason": w.reason, "expires": w.expires}
                      for owner, w in sorted(state.waits.items()) if w.expires > now]}


@dataclass(frozen=True, slots=True)
class Sharing:
    """How a runner shares its migration's budget and follows its controls.

    Through the store (default) or Redis at ``redis``; ``signals`` (a throttle file, a
    metric) hold the movers while they last; the controls are read every ``poll`` s.
    """

    redis: str | None = None
    signals: tuple[Signal, ...] = ()
    policy: BudgetPolicy = field(default_factory=BudgetPolicy)
    poll: float = DEFAULT_POLL

    def budget(self, store: Store, namespace: str, migration: str, *, rate: float,
               owner: str, clock: Clock, rng: random.Random | None = None) -> Budget:
        """This process's side of migration ``migration``'s budget (use ``async with``)."""
        controls = Controls(store, namespace, migration, rate=rate, clock=clock,
                            signals=self.signals, owner=owner, poll=self.poll, rng=rng)
        redis = None if self.redis is None else SharedBudgets(
            self.redis, prefix=f"shardex/migrate/{namespace}/{migration}")
        return Budget(store, namespace, migration, controls=controls, owner=owner,
                      clock=clock, policy=self.policy, redis=redis, rng=rng)

    def presence(self, store: Store, namespace: str, migration: str, *, rate: float,
                 owner: str, clock: Clock, term: float,
                 rng: random.Random | None = None) -> Presence:
        """This runner's mark while it waits between ``migration``'s steps."""
        controls = Controls(store, namespace, migration, rate=rate, clock=clock,
                            owner=owner, poll=self.poll, rng=rng)
        return Presence(store, namespace, migration, controls=controls, owner=owner,
                        clock=clock, term=term, rng=rng)


async def migration_status(store: Store, namespace: str, migration: str, *,
                           clock: Clock) -> dict[str, Any]:
    """The controls and budget of ``migration`` as ``status`` shows them."""
    control, revision = await read_control(store, namespace, migration, clock=clock)
    key = record_key(migration, "budget")
    record = await store.get_record(namespace, key)
    state = BudgetState() if record is None else BudgetState.from_body(
        record.body, f"record {key!r} of index {namespace!r} in {store.uri}")
    return {**control_document(control, revision),
            "budget": budget_document(state, 0.0 if control.paused else control.rate or 0.0,
                                       clock.wall())}
