"""The autopilot's loop: heat in, the pure policy, the migration runner driven, all recorded.

``Autopilot(runner, ...)`` runs over one index (the runner's): a thin async loop with an
injected clock, every decision made by pure functions (``policy.decide``,
``drive.next_move``), so it runs on virtual time in tests. Each ``tick`` (the policy's
``tick`` seconds):

1. **leads**: takes or renews the leader lease (``records``); a second autopilot of the
   index waits, and takes over once the lease expires (a SIGKILLed leader's too);
2. **obeys**: reads the control record; paused, it stops driving at once and acts on
   nothing until resumed (it keeps reading heat meanwhile);
3. **measures**: reads the heat source into each key's ``HeatWindow``;
4. **decides**: folds what happened to the index into its state (``settle``: its
   migration's end, an operator's veto), builds each key's ``KeyView`` from the stored
   routing and that state, and calls ``decide``;
5. **acts**: starts one migration for the keys that want one (together, as one reshard;
   while any migration is under way on the index, the others wait: ``queued``), and
   drives the migration it started through every state (``drive``): run, verify,
   cutover, the retention window, complete, and rollback if parity fails; the migration
   is named ``autopilot-...``, so a restarted autopilot (or the next leader) resumes it
   from the stored routing;
6. **records**: every decision (a key's unchanged decision once) and every action in the
   log, with its reason and inputs, and its state (last change, admission budget, flaps
   and last shrink's start of each key) for the next leader.

Between ticks, while a migration is driven, it reads the control record and renews the
lease every ``poll`` seconds, so a pause stops the runner at once. ``dry_run`` takes no
lease, starts nothing and writes no state: it records what it would do (``proposed``),
paused or not.

Admission budgets (``admit``) are decided and recorded (in the log and in the state
record); enforcing them is the application's (``shardex.admission``), not this loop's.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from shardex.autopilot.drive import NextMove, next_move
from shardex.autopilot.heat import HeatWindow
from shardex.autopilot.metrics import Gauges, NoGauges
from shardex.autopilot.policy import Decision, KeyHeat, Sizer, TableFacts, decide
from shardex.autopilot.records import AutopilotRecords, Control, Lease, LogEntry, State, plain
from shardex.autopilot.runner import DEFAULT_MARGIN, DEFAULT_MAX_AGE, Runner
from shardex.autopilot.settings import AutopilotPolicy
from shardex.autopilot.settle import ID_PREFIX, settle, started, view
from shardex.autopilot.sources import BadHeatLines, HeatSample, HeatSource, is_value
from shardex.clock import Clock, LoopClock, carried
from shardex.errors import InvalidInput, ReshardRefused, ShardexError, Throttled, Unavailable
from shardex.migrate import StartPlan
from shardex.routing import Routing

__all__ = ["Autopilot", "Gauges", "ID_PREFIX", "NoGauges"]

_CARRY_WITHIN = 5.0  # seconds a stopped run still gives its last log entries
_AWAY = (Unavailable, Throttled)  # the store did not answer (after its retries): no refusal

log = logging.getLogger(__name__)
class Autopilot:
    """The loop over ``runner``'s index (see the module).

    ``policy`` the settings, ``source`` the heat, ``facts`` the table's ceilings, ``size``
    N for a peak (``PlannerSizer``). ``lease``: seconds the leader lease lasts (renewed
    every tick; at least twice ``policy.tick``); ``margin`` and ``max_age`` as the runner's
    ``start`` and ``cutover`` take them; ``keep`` log entries are kept; ``worker`` names
    this process in the lease and the log; ``report`` is called with each log entry as it
    is recorded. Use ``async with`` (opens the runner).
    """

    def __init__(self, runner: Runner, *, policy: AutopilotPolicy, source: HeatSource,
                 facts: TableFacts, size: Sizer, dry_run: bool = False,
                 clock: Clock | None = None, worker: str | None = None,
                 lease: float | None = None, margin: float = DEFAULT_MARGIN,
                 max_age: float = DEFAULT_MAX_AGE, keep: int = 2000, poll: float = 1.0,
                 gauges: Gauges | None = None,
                 report: Callable[[LogEntry], None] | None = None) -> None:
        lease = max(15.0, 3 * policy.tick) if lease is None else lease
        for name, value in (("lease", lease), ("poll", poll), ("max_age", max_age)):
            if not (math.isfinite(value) and value > 0):
                raise InvalidInput(f"autopilot {name} must be seconds > 0, got {value!r}")
        if lease < 2 * policy.tick:
            raise InvalidInput(f"the autopilot's lease ({lease:g} s) must be at least twice "
                               f"its tick ({policy.tick:g} s): it is renewed every tick")
        headroom = getattr(size, "headroom", None)  # a PlannerSizer's: the policy's own
        if headroom is not None and headroom != policy.headroom:
            raise InvalidInput(f"the sizer plans with headroom {headroom:g} where the policy "
                               f"says {policy.headroom:g}: build it with "
                               f"PlannerSizer(..., headroom=policy.headroom)")
        if not (isinstance(keep, int) and keep >= 10):
            raise InvalidInput(f"keep must be an integer >= 10 log entries, got {keep!r}")
        self.runner = runner
        self.name = runner.name
        self.policy = policy
        self.source = source
        self.facts = facts
        self.size = size
        self.dry_run = dry_run
        self.lease = float(lease)
        self.margin = float(margin)
        self.max_age = float(max_age)
        self.keep = keep
        self.poll = float(poll)
        self.worker = worker or runner.worker
        self.gauges: Gauges = gauges or NoGauges()
        self._report = report
        self._source_failed = ""
        self._clock: Clock = clock or LoopClock()
        self.records = AutopilotRecords(runner.store, runner.name, clock=self._clock)
        self.windows: dict[str, HeatWindow] = {}
        self._seen: dict[str, float] = {}  # the last sample's time per key
        self._span: dict[str, float] = {}  # and its span
        self._leading: Lease | None = None
        self._paused = False
        self._driving: asyncio.Task[None] | None = None
        self._logged: dict[tuple[str, bool], tuple[Any, ...]] = {}
        self.ticks = 0
        self._backfilled = False
        self._refused: dict[str, float] = {}  # wall s a key's start was last refused
        self._version = 0  # the newest routing version a tick read
        self._dry: tuple[int | None, State] | None = None  # a dry run's own state

    async def __aenter__(self) -> Autopilot:
        await self.runner.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
        await self.runner.__aexit__(None, None, None)

    # -- running -------------------------------------------------------------------------

    async def run(self, *, duration: float | None = None,
                  stop: asyncio.Event | None = None) -> None:
        """Tick until ``duration`` seconds have passed or ``stop`` is set (default: forever);
        then stop driving and give the lease up. Fills the heat windows first
        (``backfill``) unless that was done."""
        clock = self._clock
        end = math.inf if duration is None else clock.now() + duration
        if not self._backfilled:
            await self.backfill()
        next_tick = clock.now()
        try:
            while clock.now() < end and not (stop is not None and stop.is_set()):
                try:
                    if clock.now() >= next_tick:
                        next_tick = clock.now() + self.policy.tick
                        await self.tick()
                    elif self._driving is not None:
                        await self._watch()
                except _AWAY as exc:
                    await self._store_away(exc)
                await clock.sleep(max(0.0, min(self.poll, next_tick - clock.now(),
                                               end - clock.now())))
        finally:
            await self.stop()

    async def _store_away(self, exc: Unavailable | Throttled) -> None:
        """A tick the store did not answer (after its retries): try again next tick; a
        leader whose lease ran out meanwhile stops driving, as one that cannot renew.
        About 10 s of an unreachable store had ended the loop (an autopilot probe)."""
        log.warning("autopilot of index %s: the store did not answer (%s: %s); trying "
                    "again next tick", self.name, type(exc).__name__, exc)
        leading = self._leading
        if leading is not None and self._clock.wall() >= leading.expires:
            self._leading = None
            self.gauges.leader(False)
            with contextlib.suppress(ShardexError):  # its log may be away too
                await self._stop_driving()

    async def stop(self) -> None:
        """Stop driving (the migration stays where it is, for the next leader) and give the
        lease up."""
        await self._stop_driving()
        if self._leading is not None and not self.dry_run:
            with contextlib.suppress(ShardexError):
                await self.records.release(self.worker)
            self._leading = None
            self.gauges.leader(False)

    async def backfill(self) -> int:
        """Fill the heat windows with the source's past (``t_down``); return samples read."""
        now = self._clock.wall()
        past = await self.source.history(now - self.policy.t_down, now, self.policy.tick)
        self._add(past, now, zero_fill=False)
        self._backfilled = True
        return len(past)

    async def tick(self) -> list[Decision]:
        """One round: lead, obey, measure, decide, act, record. Returns the decisions."""
        self.ticks += 1
        now = self._clock.wall()
        if not self.dry_run and not await self._lead(now):
            return []
        samples = await self._read_heat(now)
        # a read that failed says nothing of the load: no key is taken for quiet (a
        # Prometheus outage had zero-filled every key, and the hot ones were shrunk)
        self._add(samples or [], now, zero_fill=samples is not None)
        # a dry run acts on nothing, so a pause does not silence its proposals
        if not self.dry_run and await self._obey(await self.records.control(), now):
            return []
        routing = await self.runner.routing()
        if routing.version < self._version:
            # only a record deleted or written over by hand goes back: said as it is (it
            # read as an operator's rollback, or as a migration that ended)
            await self._record("action", "routing", "fail", f"the routing record of index "
                               f"{self.name!r} went back from version {self._version} to "
                               f"{routing.version}: deleted or replaced by hand; the "
                               "autopilot goes on from the record as it is now",
                               details={"from": self._version, "to": routing.version})
        self._version = routing.version
        stored, revision = await self.records.state()
        # a dry run saves no state: it goes on from what it settled itself until the
        # stored state changes (it had folded a stale leader state's ended migration in
        # again each tick: an 'end' entry a tick, and 'changed 0 s ago' for ever)
        base = self._dry[1] if self._dry is not None and self._dry[0] == revision else stored
        state = await self._settle(routing, base, now)
        if self.dry_run:
            self._dry = (revision, state)
        heats = {key: window.summary() for key, window in self.windows.items()}
        keys = {k for k in (*heats, *routing.overrides, *state.migrating) if is_value(k)}
        views = {key: view(key, routing, state, self.runner.lease, self.policy.veto)
                 for key in keys}
        decisions = decide(self.policy, self.facts, heats, views, now, self.size)
        state = await self._carry_out(decisions, heats, routing, state, now)
        if not self.dry_run and self._leading is not None:
            if state != stored and await self.records.save_state(state, revision) is None:
                log.info("the autopilot state of %s changed meanwhile; read again next tick",
                         self.name)
            self._ensure_driving(state.reshard)
            if self.ticks % 50 == 0:
                await self.records.prune(self.keep)
        return decisions

    # -- the lease and the controls ----------------------------------------------------

    async def _lead(self, now: float) -> bool:
        held, lease = await self.records.hold(self.worker, self.lease)
        if held and self._leading is None:
            await self._record("leader", "lead", "ok", f"took the leader lease of index "
                               f"{self.name!r} (term {lease.term}) for {self.lease:g} s",
                               details={"term": lease.term})
        elif held and self._leading is not None and lease.term != self._leading.term:
            await self._record("leader", "lead", "ok", f"took the leader lease of index "
                               f"{self.name!r} again (term {lease.term}): it lapsed "
                               f"{now - self._leading.expires:.1f} s before this leader "
                               "renewed it (a stall), and no other took it meanwhile",
                               details={"term": lease.term})
        elif not held and self._leading is not None:
            await self._stop_driving()
            await self._record("leader", "lead", "fail", f"lost the leader lease to "
                               f"{lease.owner} (term {lease.term}): stopped acting",
                               details={"term": lease.term, "owner": lease.owner})
        elif not held and self.ticks == 1:
            log.info("index %s: %s holds the autopilot lease until %.0f; waiting",
                     self.name, lease.owner, lease.expires)
        self._leading = lease if held else None
        self.gauges.leader(held)
        return held

    async def _obey(self, control: Control, now: float) -> bool:
        """Act on the control record; True while paused (nothing else this tick)."""
        self.gauges.paused(control.paused)
        if control.paused and not self._paused:
            self._paused = True
            await self._stop_driving()
            await self._record("control", "pause", "ok", "paused by " + (control.by or "?")
                               + (f": {control.reason}" if control.reason else "")
                               + "; acting on nothing until resumed")
        elif not control.paused and self._paused:
            self._paused = False
            await self._record("control", "resume", "ok", "resumed by " + (control.by or "?"))
        return control.paused

    async def _watch(self) -> None:
        """Between ticks, while driving: renew the lease when half of it passed, and stop
        driving at once on a pause."""
        now = self._clock.wall()
        leading = self._leading
        if leading is not None and now >= leading.expires - self.lease / 2 \
                and not await self._lead(now):
            return
        await self._obey(await self.records.control(), now)

    # -- heat ------------------------------------------------------------------------------

    async def _read_heat(self, now: float) -> list[HeatSample] | None:
        """The source's samples; None (and the failure logged once) when it fails, and
        only its good ones when some lines of it were bad."""
        try:
            samples = await self.source.read(now)
        except ShardexError as exc:
            # a bad line of a heat file: the good lines read with it count
            good = exc.samples if isinstance(exc, BadHeatLines) else None
            text = f"{self.source.name}: {type(exc).__name__}: {exc}"
            if text != self._source_failed:
                await self._record("action", "heat", "fail", text + (
                    "; no heat this tick" if good is None else
                    f"; skipped, {len(good)} good sample(s) of this read taken"))
            self._source_failed = text
            return good
        if self._source_failed:
            self._source_failed = ""
            await self._record("action", "heat", "ok", f"{self.source.name} answers again")
        return samples

    def _add(self, samples: list[HeatSample], now: float, *, zero_fill: bool) -> None:
        got = set()
        for sample in sorted(samples, key=lambda s: s.t):
            if sample.t <= self._seen.get(sample.key, -math.inf):
                continue
            window = self.windows.get(sample.key)
            if window is None:
                window = self.windows[sample.key] = HeatWindow(self.policy)
            window.add(sample.t, sample.write_units, sample.read_units, span=sample.span)
            self._seen[sample.key] = sample.t
            got.add(sample.key)
            self.gauges.heat(sample.key, sample.write_units)
            self._span[sample.key] = sample.span
        if not zero_fill:
            return
        for key, window in self.windows.items():
            seen = self._seen.get(key, -math.inf)
            # a key the source no longer lists has no load (its series went stale): at
            # once from a source that lists every key with load each read, and from
            # another (a file) once its newest sample is two of its spans (at least two
            # ticks) old, so neither its last heat nor the file's past is taken for now
            stale = (key not in got if self.source.complete else
                     now - seen > 2 * max(self._span.get(key, 0.0), self.policy.tick))
            if stale and now > seen:
                window.add(now, 0.0, 0.0, span=self.policy.tick)
                self._seen[key] = now
                self.gauges.heat(key, 0.0)

    # -- deciding and acting ---------------------------------------------------------------

    async def _settle(self, routing: Routing, state: State, now: float) -> State:
        """``state`` with what happened to the index since the last tick folded in
        (``settle``), and logged."""
        state, notes = settle(routing, state, now, policy=self.policy,
                              lease=self.runner.lease)
        for note in notes:
            if not (note.leader_only and self.dry_run):  # a dry run drives nothing
                await self._record("action", note.action, "ok", note.reason,
                                   reshard=note.reshard, details=note.details)
        self.gauges.migration(None if routing.reshard is None else routing.state)
        return state

    async def _carry_out(self, decisions: list[Decision], heats: Mapping[str, KeyHeat],
                         routing: Routing, state: State, now: float) -> State:
        wishes: list[Decision] = []
        for decision in decisions:
            self.gauges.decided(decision)
            if decision.migrates:
                wishes.append(decision)
                continue
            if decision.action == "admit" and not self.dry_run:
                before = state.key(decision.key)
                since = None if decision.budget is None else (
                    before.budget_since if before.budget is not None else now)
                state = state.with_key(decision.key, budget=decision.budget,
                                       budget_since=since)
            await self._decision(decision, "proposed" if self.dry_run and
                                 decision.action == "admit" else "recorded")
        if not wishes:
            return state
        if routing.in_transition:  # a dry run too: it says what the leader would do
            busy = routing.reshard.id if routing.reshard is not None else "a transition"
            for wish in wishes:
                await self._decision(wish, "queued", f"; {busy} is under way on the index: "
                                                     "it waits")
            return state
        if self.dry_run:
            for wish in wishes:
                await self._decision(wish, "proposed")
            return state
        # a start refused (a layout the store cannot hold, a refusal that stays) is tried
        # again once min_interval passed, not every tick (it had filled the log)
        waiting = self.policy.min_interval
        held = [w for w in wishes if now - self._refused.get(w.key, -math.inf) < waiting]
        for wish in held:
            await self._held(wish)
        wishes = [w for w in wishes if w not in held]
        if not wishes:
            return state
        return await self._start(wishes, routing, state)

    async def _start(self, wishes: list[Decision], routing: Routing, state: State) -> State:
        # The lease renewed as this tick began may have run out while it measured and
        # decided (a starved process, a pause): renewed again, it is held now, and a
        # start is a moment's work well within it. Lost, the new leader decides anew.
        if not await self._lead(self._clock.wall()):
            return state
        changes = {}
        for wish in wishes:
            current = routing.policy(wish.key)
            changes[wish.key] = dataclasses.replace(
                current, shards=wish.to_n, tier=wish.tier if wish.action == "isolate"
                else current.tier)
        reshard = f"{ID_PREFIX}{uuid.uuid4().hex[:12]}"
        try:
            plan = await self.runner.start(changes, margin=self.margin, reshard_id=reshard)
        except ShardexError as exc:
            # a start another one overtook (an operator's, stored while this one planned)
            # waits as any wish beside a migration does: held for min_interval, a hot key
            # had waited minutes at twice its capacity once the other one ended (a probe)
            if isinstance(exc, ReshardRefused) and await self._overtaken(routing):
                for wish in wishes:
                    await self._decision(wish, "queued", "; another migration was stored "
                                         "while its start was planned: decided again next "
                                         "tick")
                return state
            await self._record("action", "start", "fail", f"{type(exc).__name__}: {exc}",
                               reshard=reshard)
            if not isinstance(exc, _AWAY):  # the store's no, not its absence
                self._refused.update(dict.fromkeys(changes, self._clock.wall()))
                for wish in wishes:
                    await self._held(wish)
            return state
        self._version = max(self._version, plan.routing.version)
        # started: its log entries are written even when the run is stopped meanwhile
        # (Ctrl-C cancels it as the start returns; the entry had been lost, and the next
        # leader took the migration up from the routing without its details)
        await carried(self._log_start(wishes, plan, reshard), self._clock, _CARRY_WITHIN)
        state = dataclasses.replace(state, reshard=reshard, migrating=tuple(sorted(changes)),
                                    targets={key: (p.shards, p.tier)
                                             for key, p in changes.items()})
        for wish in wishes:
            state = started(self.policy, state, wish.key, wish.action, wish.t)
        return state

    async def _log_start(self, wishes: list[Decision], plan: StartPlan, reshard: str) -> None:
        for wish in wishes:  # started only once it is (it had said so of refused starts)
            await self._decision(wish, "started")
        details = {key: {"from": p.source.to_dict(), "to": p.target.to_dict(),
                         "entries": p.entries, "to_move": p.to_move}
                   for key, p in plan.values.items()}
        await self._record("action", "start", "ok", "started the migration of " + ", ".join(
            f"{w.key} N={w.from_n} -> {w.to_n} ({w.action})" for w in wishes)
            + f"; {plan.to_move:,} entries to move", reshard=reshard, details=details)

    async def _held(self, wish: Decision) -> None:
        """Record ``wish`` held: its start was refused lately (see the log)."""
        await self._decision(wish, "held", f"; its start was refused (see the log): tried "
                                           f"again once min_interval "
                                           f"({self.policy.min_interval:g} s) has passed")

    async def _overtaken(self, decided: Routing) -> bool:
        """Whether the routing moved on from the one a start was decided on (another
        migration stored meanwhile): the refusal does not last."""
        try:
            latest = await self.runner.routing()
        except ShardexError:
            return False
        return latest.in_transition or latest.version != decided.version

    # -- driving the migration -------------------------------------------------------------

    def _ensure_driving(self, reshard: str | None) -> None:
        """Drive migration ``reshard`` (the autopilot's, under way) unless already driving."""
        if self._driving is not None and self._driving.done():
            self._driving = None
        if self._driving is None and reshard is not None:
            self._driving = asyncio.ensure_future(self._drive(reshard))

    async def _stop_driving(self) -> None:
        task, self._driving = self._driving, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await self._record("action", "stop", "ok", "stopped driving the migration "
                               "where it is (it resumes from the stored routing)")

    async def _drive(self, reshard: str) -> None:
        """Drive migration ``reshard`` step by step until it ends (see ``drive``)."""
        clock, failed = self._clock, ""
        while True:
            routing = await self.runner.routing()
            self._version = max(self._version, routing.version)  # a tick says if it goes back
            move = next_move(routing, reshard, clock.wall())
            if move.kind == "done":
                return
            if move.kind == "wait":
                await clock.sleep(max(0.0, min(move.until - clock.wall(), self.poll)))
                continue
            try:
                await self._step(move, reshard)
                failed = ""
            except ReshardRefused as exc:
                if await self._parity_failed(reshard):
                    await self._roll_back(reshard, str(exc))
                    continue
                failed = await self._failed(move, reshard, exc, failed)
            except ShardexError as exc:  # the store went away, or throttles: again later
                failed = await self._failed(move, reshard, exc, failed)

    async def _failed(self, move: NextMove, reshard: str, exc: ShardexError,
                      last: str) -> str:
        text = f"{type(exc).__name__}: {exc}"
        if text != last:  # the same failure again is logged once
            await self._record("action", move.kind, "fail", text + "; tried again in "
                               f"{self.policy.tick:g} s", reshard=reshard)
        await self._clock.sleep(self.policy.tick)
        return text

    async def _step(self, move: NextMove, reshard: str) -> None:
        runner = self.runner
        if move.kind in ("run", "rollback"):
            result = await runner.run(until="verified" if move.kind == "run" else "done")
            parity = result.parity
            meta = result.routing.reshard
            if move.kind == "run" and (meta is None or meta.id != reshard
                                       or meta.direction == "rollback"):
                # another runner (an operator) rolled it back under this one: nothing was
                # verified (it had logged "verify ok" with the rollback's state)
                how = ("was rolled back meanwhile, not by the autopilot"
                       if meta is not None and meta.id == reshard else
                       "is no longer in the routing (ended by another runner, or the "
                       "record replaced)")
                await self._record("action", "run", "stopped", f"the migration {how}: "
                                   f"{result.why} ({result.state})", reshard=reshard)
                return
            await self._record("action", "verify" if move.kind == "run" else "rollback", "ok",
                               f"{result.why} ({result.state})" + (
                                   "" if parity is None else f"; parity: {parity.gaps} gap(s) "
                                   f"in {parity.entries:,} entries"), reshard=reshard,
                               details={} if parity is None else {"parity": parity.to_dict()})
        elif move.kind == "cutover":
            new = await runner.cutover(max_age=self.max_age)
            await self._record("action", "cutover", "ok", "readers read the new layout alone "
                               f"(routing version {new.version})", reshard=reshard)
        elif move.kind == "retain":
            result = await runner.complete(retain=self.policy.retain)
            meta = result.routing.reshard
            until = None if meta is None else meta.retire_after
            await self._record("action", "retain", "ok", f"the old layout stays restorable "
                               f"for {self.policy.retain:g} s", reshard=reshard,
                               details={"retire_after": until})
        else:
            result = await runner.complete()
            await self._record("action", "complete", "ok", f"{result.why}; the sweep moved "
                               f"{result.swept} entries", reshard=reshard,
                               details={"swept": result.swept, "cleared": result.cleared,
                                        "state": result.state})

    async def _parity_failed(self, reshard: str) -> bool:
        meta = (await self.runner.routing()).reshard
        return (meta is not None and meta.id == reshard and meta.direction == "forward"
                and meta.parity is not None and not meta.parity.clean)

    async def _roll_back(self, reshard: str, why: str) -> None:
        await self._record("action", "verify", "fail", why, reshard=reshard)
        # the state says whose rollback it is before it starts: any other is an operator's
        for _ in range(5):  # against the tick's own saves; unsaved, it reads as a veto
            state, revision = await self.records.state()
            if await self.records.save_state(dataclasses.replace(
                    state, rollback=(reshard, "autopilot")), revision) is not None:
                break
        result = await self.runner.rollback()
        await self._record("action", "rollback", "ok", f"rolled back: {result.why} "
                           f"({result.state})", reshard=reshard)

    # -- the log ---------------------------------------------------------------------------

    async def _decision(self, decision: Decision, outcome: str, note: str = "") -> None:
        """Record ``decision`` unless the key's last recorded one was the same
        (``Decision.gist``, and the same outcome)."""
        same = (decision.gist, outcome)
        # admission and the layout are two threads of decisions about a key
        thread = (decision.key, decision.action == "admit")
        if self._logged.get(thread) == same:
            return
        self._logged[thread] = same
        await self._record("decision", decision.action, outcome, decision.reason + note,
                           key=decision.key, from_n=decision.from_n, to_n=decision.to_n,
                           details={"inputs": dict(decision.inputs), **(
                               {"budget": decision.budget} if decision.action == "admit"
                               else {}), **({"tier": decision.tier} if decision.tier else {})})

    async def _record(self, kind: str, action: str, outcome: str, reason: str, *,
                      key: str | None = None, from_n: int | None = None,
                      to_n: int | None = None, reshard: str | None = None,
                      details: Mapping[str, Any] | None = None) -> None:
        entry = LogEntry(self._clock.wall(), kind, action, outcome, reason, self.worker, key,
                         from_n, to_n, self.dry_run, reshard, plain(details or {}))
        log.info("autopilot %s: %s %s %s: %s", self.name, kind, action, outcome, reason)
        if kind != "decision":
            self.gauges.acted(action, outcome)
        if self._report is not None:
            self._report(entry)
        await self.records.append(entry)
