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
  the clocks' skew, the time in which its owner may still have spent it. A slice holds
  a share on the keys its process's units write (``Budget.working``: the source key a
  unit drains and the keys it fills; every key for a unit whose keys are not known
  ahead, such as an adoption's Scan segment), so processes writing different keys each
  take the whole rate on theirs; on a key several write, the shares converge on
  ``rate / processes`` (those that want more renew and take what the others gave up).
  A key spent on beyond the slice's is added to it by a renewal before the spend. A
  process with no unit under way gives its slice up. A write costing more than the
  process's share (an entry of several KB at a low rate over many processes) waits: its
  process records what it needs (``needs``), the shares handed out grow to it (fewer
  processes seated, the needy first) while the need lasts, and the write goes once a
  share holds it (``fits``); the process keeps the need while its writes stay that dear.
  Sent beyond the share, such a write had put the difference over the rate in its
  second.
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

``lease``, ``cut``, ``effective_rate`` and ``window_wait`` are pure, with the record's
state (``shardex.migrate.shares``, whose names this module gives too); ``Budget`` is the
thin async part, on an injected clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
from collections import Counter
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from shardex.admission import Budget as AdmissionBudget
from shardex.admission import SharedBudgets
from shardex.admission.budgets import moving_window
from shardex.clock import GOODBYE, Clock, within
from shardex.errors import ReshardRefused, ShardexError, Unavailable
from shardex.migrate.control import (
    DEFAULT_POLL,
    Controls,
    Signal,
    control_document,
    read_control,
    record_key,
    update_record,
)
from shardex.migrate.shares import (
    BudgetPolicy,
    BudgetState,
    Hold,
    Slice,
    SpendWindow,
    budget_document,
    cut,
    effective_rate,
    fits,
    held_until,
    lease,
    release,
    unblocked_at,
    window_wait,
)
from shardex.model.entries import Record
from shardex.stores.base import Store

__all__ = ["Budget", "BudgetPolicy", "BudgetState", "Hold", "Presence", "Sharing", "Slice",
           "SpendWindow", "budget_document", "cut", "effective_rate", "fits", "held_until",
           "lease", "migration_status", "release", "window_wait"]

log = logging.getLogger("shardex")
_EPS = 1e-9
_SHARED_PATIENCE = 10.0  # seconds a shared budget's Redis may not answer before a run stops
_WAKE = 0.01  # seconds after a claim ends that a renewal waiting for it looks
# the most keys a process's slice names one by one: beyond, it holds a share of every key.
# A unit of a reshard to 1,024 keys names its source key and the 512 it fills; the budget
# record, which every process rewrites each second (on DynamoDB a write unit a KB), keeps
# runs of keys (``shardex.migrate.shares``) and stays a few KB
# (``tests/test_migrate_budget.py::test_the_budget_record_stays_a_few_kilobytes``)
MOST_KEYS = 1025


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
        self._shares: dict[str, float] | None = None  # the share on each key; None: on every
        self._expires = 0.0
        self._declared: Counter[str] = Counter()  # the keys the units under way write
        self._everywhere = 0  # units under way that write keys not known ahead
        self._extra: dict[str, float] = {}  # keys spent on that no unit declared: when last
        self._spent: dict[str, SpendWindow] = {}
        self._cut_seen = -math.inf
        self._wake: float | None = None  # when a claim in the way of a fair share ends
        self._keeper: asyncio.Task[None] | None = None
        self._working = 0  # this process's units and spends under way (``working``)
        self._spent_at = -math.inf  # wall s of its last spend
        self._idle = False  # True once it gave its slice up for want of work
        # the units a write waits for a share of, since when, and when it last waited
        self._need = (0.0, 0.0, -math.inf)
        self._dear_at = -math.inf  # when a write dearer than the grain last went

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
            self._shares = None
        keys = self._keys()
        need = self._need[:2] if self._needing(self._clock.wall()) else None

        def renewing(state: BudgetState, now: float) -> BudgetState:
            state = state.needing(self.owner, need, now, term) or state
            new, _ = lease(state, self.owner, rate, now, self.policy, keys)
            return new.holding(self.owner, held, now, term) or new

        self.state = await self._change(renewing)
        mine = self.state.slices[self.owner]
        self.share, self._expires = mine.share, mine.expires
        self._shares = None if mine.keys is None else dict(mine.keys)
        self._wake = unblocked_at(self.state, self.owner, rate, self._clock.wall(),
                                  self.policy)
        return self.share

    def _keys(self) -> frozenset[str] | None:
        """The keys this process's slice is to hold a share on: those its units under way
        write and those it spent on lately; None (every key) while a unit writes keys not
        known ahead, or beyond ``MOST_KEYS``."""
        now = self._clock.wall()
        self._extra = {key: at for key, at in self._extra.items()
                       if now - at < self.policy.term}
        keys = frozenset(self._declared).union(self._extra)
        return None if self._everywhere or len(keys) > MOST_KEYS else keys

    def _covers(self, keys: Iterable[str]) -> bool:
        return self._shares is None or all(key in self._shares for key in keys)

    async def _keep(self) -> None:
        while True:
            # every third of a term, or as soon as a claim in the way of a fair share ends
            wait = self.policy.term / 3
            if self._wake is not None:
                wait = min(wait, max(_WAKE, self._wake - self._clock.wall() + _WAKE))
            await self._clock.sleep(wait)
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
    async def working(self, keys: Collection[str] | None = None) -> AsyncIterator[None]:
        """Hold a slice while a unit of this process is under way: one with none, and no
        spend for a term, gives its slice up at its next renewal, so the processes that
        work share the whole rate (an idle process had kept an equal share: two runners
        of one key moved at half the rate), and takes one again as its next unit starts.

        ``keys``: the shard keys the unit writes (None: not known ahead, every key). The
        slice holds a share on those alone, so runners whose units write different keys
        each take the whole rate on theirs (with a share of every key, four runners of one
        worker each moved a reshard no faster than one); a key spent on beyond them is
        added to the slice before the spend (``spend``)."""
        self._working += 1
        if keys is None:
            self._everywhere += 1
        else:
            self._declared.update(set(keys))
        try:
            if self._idle or not self._covers(keys or ()) or (
                    keys is None and self._shares is not None):
                self._idle = False
                await self._renew_now()
            yield
        finally:
            self._working -= 1
            if keys is None:
                self._everywhere -= 1
            else:
                self._declared.subtract(set(keys))
                self._declared = +self._declared  # the keys no unit writes go

    async def _renew_now(self) -> None:
        try:
            await self.renew()
        except ShardexError as exc:  # the keeper renews it: spending waits till then
            log.warning("migration %s: the budget could not be renewed: %s",
                        self.migration, exc)

    async def _give_up(self) -> None:
        self._idle = True
        self.share, self._shares = 0.0, {}  # a spend takes a slice again first
        self.state = await self._change(lambda s, now: release(s, self.owner, now, self.policy))
        await self.controls.refresh()

    # -- spending -----------------------------------------------------------------------

    def _limit(self, now: float, key: str) -> float:
        if now >= self._expires:
            return 0.0
        return self.share if self._shares is None else self._shares.get(key, 0.0)

    async def spend(self, costs: Mapping[str, float],
                    hold: Callable[[], float] | None = None) -> None:
        """Wait until ``costs`` (write units per shard key) fit this process's budget, and
        ``hold()`` says 0 (the seconds until the caller's own limits let it send), and
        count them then: a send the budget counted, then held by the caller's pace, went
        in a later second than it was counted in (a key both drained and filled took 1.08x
        the rate in a second). Through Redis the budget takes once the caller is ready."""
        self._working += 1
        try:
            self._spent_at = self._clock.wall()
            if self._redis is not None:
                await self._spend_shared(costs, hold)
            else:
                await self._spend(costs, hold)
        finally:
            self._working -= 1

    async def _spend(self, costs: Mapping[str, float],
                     hold: Callable[[], float] | None) -> None:
        windows = [(key, self._spent.get(key) or self._spent.setdefault(
            key, SpendWindow(self.policy.window)), cost) for key, cost in costs.items()]
        while True:
            if not self._covers(costs):
                # a key no unit declared (a move landing off its unit's keys): the slice
                # takes it first, a renewal of its own
                self._extra.update((key, self._clock.wall()) for key in costs
                                   if key not in self._declared)
                self._idle = False
                await self._renew_now()
            now = self._clock.wall()
            for key in costs:  # a key waited on is wanted still
                if key in self._extra:
                    self._extra[key] = now
            rate = self.controls.rate
            short = max((cost for key, _, cost in windows
                         if not fits(cost, self._limit(now, key), rate)), default=0.0)
            if short > self.policy.grain + _EPS:  # waits for a share that holds it, asked
                await self._needs(short, now)
                continue
            if short:  # any seat holds it: it waits for one (or for claims to end) in turn
                await self._clock.sleep(self.policy.term / 6)
                continue
            self._keep_need(max(cost for _, _, cost in windows), now)
            wait = max([window.wait(now, cost, self._limit(now, key))
                        for key, window, cost in windows]
                       + [hold() if hold is not None else 0.0])
            if wait <= 0:
                break
            await self._clock.sleep(min(wait, self.policy.term / 6))
        for _, window, cost in windows:
            window.add(now, cost)
        if len(self._spent) > 4096:  # keys not written for a while hold nothing
            self._spent = {k: v for k, v in self._spent.items()
                           if v.counts(now, self._limit(now, k))}

    async def _needs(self, units: float, now: float) -> None:
        """A write of ``units`` waits for a share that holds it: record the need (a
        renewal at once if it is new or larger) and wait a while, or until a renewal."""
        known, since, _ = self._need
        fresh = self._needing(now)
        self._need = (max(units, known), since, now) if fresh else (units, now, now)
        if not fresh or units > known + _EPS:
            await self._renew_now()
        else:
            await self._clock.sleep(self.policy.term / 6)

    def _keep_need(self, cost: float, now: float) -> None:
        """A write of ``cost`` goes within the share: a need it had keeps this process
        seated while it writes and a write dearer than the grain went within the last
        term (they are its unit's entries; given up after each, the seat went to the other
        needy process and back, a hand-over of two seconds or more between moves: two
        runners of 4 KB entries at a rate of 12 took 2.2x one runner's time; kept only
        from one dear write to the next, it lapsed while the cheaper ones between them
        waited for the window), and lapses a third of a term after its last write."""
        known, since, _ = self._need
        if cost > self.policy.grain + _EPS:
            self._dear_at = now
        if self._needing(now) and now - self._dear_at < self.policy.term:
            self._need = (max(known, cost), since, now)

    def _needing(self, now: float) -> bool:
        """True while this process's need lives: a write waited for it, or one as dear
        went, within the last third of a term."""
        units, _, wanted = self._need
        return units > 0 and now - wanted < self.policy.term / 3

    async def _spend_shared(self, costs: Mapping[str, float],
                            hold: Callable[[], float] | None) -> None:
        """Take ``costs`` from the keys' moving windows in Redis, in whole units: a cost
        larger than a window holds is taken a window's worth at a time, and a rate below
        one unit a second counts over as many seconds as hold one unit (the movers had
        waited for good on either: a move of 2 units at a rate of 1.5, or any at 0.5)."""
        assert self._redis is not None
        while hold is not None and (delay := hold()) > 0:
            await self._clock.sleep(delay)
        failing: list[float] = []  # since when Redis has not answered
        for key, cost in (await self._spend_together(costs, failing)).items():
            units = math.ceil(cost - _EPS)
            while units > 0:
                rate = self.share
                if rate <= 0:  # paused or held
                    await self._clock.sleep(self.policy.term / 6)
                    continue
                window = _window_of(rate)
                chunk = min(units, moving_window(window, "high")[0])
                try:
                    wait = await self._redis.take(key, chunk, window, "high")
                except Unavailable as exc:
                    await self._unanswered(exc, failing)
                    continue
                failing.clear()
                if wait == 0.0:
                    units -= chunk
                    continue
                await self._clock.sleep(self.policy.term / 6 if wait is None
                                        else min(wait, self.policy.term / 6))

    async def _spend_together(self, costs: Mapping[str, float],
                              failing: list[float]) -> Mapping[str, float]:
        """Take ``costs`` through Redis once every key's window has room for its cost, so
        that each key counts the write in the second it goes: taken key by key, a key
        counted at once was then held by another's wait, and several went together in a
        later second (1.4x the rate on one key in a second, with four processes). Returns
        the costs left to take a window's worth at a time (a cost past a window) or key by
        key (no rate: paused or held); none when all were taken."""
        assert self._redis is not None
        taken: set[str] = set()  # (a Redis that stopped answering between two takes)
        while True:
            rate = self.share
            left = {key: cost for key, cost in costs.items() if key not in taken}
            if rate <= 0:  # paused or held
                if not taken:
                    return left
                await self._clock.sleep(self.policy.term / 6)  # between two takes: wait
                continue
            window = _window_of(rate)
            try:
                waits = [await self._redis.room(key, cost, window, "high")
                         for key, cost in left.items()]
                if any(wait is None for wait in waits):
                    return left
                longest = max((wait or 0.0 for wait in waits), default=0.0)
                if longest <= 0:
                    for key, cost in left.items():
                        # another process may have taken the room meanwhile: wait for it
                        while (wait := await self._redis.take(key, cost, window, "high")) \
                                != 0.0:
                            if wait is None:  # the rate fell meanwhile: key by key
                                return {k: c for k, c in left.items() if k not in taken}
                            await self._clock.sleep(min(wait, self.policy.term / 6))
                        taken.add(key)
                    return {}
            except Unavailable as exc:
                await self._unanswered(exc, failing)
                continue
            failing.clear()
            await self._clock.sleep(min(longest, self.policy.term / 6))

    async def _unanswered(self, exc: Unavailable, failing: list[float]) -> None:
        """Wait a second after Redis did not answer; ReshardRefused once it has not for
        ``_SHARED_PATIENCE`` s (``failing`` holds since when). Not one item's fault, as a
        store's failed request is: every move waits on it (each had been left to the
        parity check as unresolved, and the run ended blaming its gaps)."""
        now = self._clock.wall()
        if not failing:
            failing.append(now)
        if now - failing[0] >= _SHARED_PATIENCE:
            raise ReshardRefused(
                f"the migration's shared budget ({exc}) has not answered for "
                f"{_SHARED_PATIENCE:g} s: nothing moves without it; give a --budget-redis "
                "that answers, or leave it out (the store keeps the budget), and run "
                "again") from exc
        await self._clock.sleep(1.0)

    async def throttled(self) -> None:
        """Report a throttle: the migration's rate is cut (once per ``cooldown``)."""
        now = self._clock.wall()
        if now - self._cut_seen < self.policy.cooldown:
            return
        self._cut_seen = now
        self.share *= self.policy.decrease  # this process follows at once
        if self._shares is not None:
            self._shares = {key: share * self.policy.decrease
                            for key, share in self._shares.items()}
        rate = self.controls.rate
        self.state = await self._change(lambda s, at: cut(s, rate, at, self.policy))


def _window_of(rate: float) -> AdmissionBudget:
    """A shared budget's window at ``rate``: a second's worth, or as many seconds as hold
    one whole unit (Redis's moving windows count whole units a whole second)."""
    return AdmissionBudget(rate=rate, burst=rate * max(1, math.ceil(1 / rate - _EPS)))


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
