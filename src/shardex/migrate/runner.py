"""The runner: carries out the state machine's decisions against one index's store.

``Resharder`` is the thin async loop around ``shardex.migrate.states``: it reads the
routing record (strongly consistent), asks ``next_step`` what to do, and does it:
waits on the injected clock, stores the next routing with a compare-and-set, runs the
mover, checks parity, sweeps the retired keys. Every step starts again from the stored
state, so a runner that crashed anywhere is resumed by any process (``run``), and
several runners of one reshard cooperate: the compare-and-sets pick one winner, the
work units are leased.
"""

from __future__ import annotations

import contextlib
import uuid
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace

from shardex.clock import alongside, answered
from shardex.errors import InvalidInput, InvalidKey, InvalidRouting, ReshardRefused, ShardexError
from shardex.migrate import states
from shardex.migrate.base import check_seconds
from shardex.migrate.budget import Budget
from shardex.migrate.mover import Mover, first_refused
from shardex.migrate.registry import finish_migration, record_migration
from shardex.migrate.reporting import Gauges, Progress, Recorder, RunResult
from shardex.migrate.reshard_base import DEFAULT_MAX_AGE, DEFAULT_UNIT_LEASE, ReshardBase
from shardex.migrate.startplan import StartPlan, ValuePlan
from shardex.migrate.status import held_by_others
from shardex.migrate.sweep import Swept
from shardex.migrate.tiered import crossing_refusal
from shardex.migrate.verify import check
from shardex.migrate.work import TakenOver
from shardex.routing import Routing, ShardPolicy
from shardex.tiers import identity
from shardex.transition import Parity

__all__ = ["DEFAULT_MARGIN", "DEFAULT_MAX_AGE", "DEFAULT_UNIT_LEASE", "Gauges", "Progress",
           "Recorder", "Resharder", "RunResult", "StartPlan", "ValuePlan"]

# a DynamoDB request may take its connect and read timeouts (5 + 30 s) to fail, and
# clocks of the hosts running reshard commands may disagree by a few seconds
DEFAULT_MARGIN = 40.0
_DIRTY_PASSES = 3  # parity checks with gaps in a row before the runner asks for help
_REPORT_EVERY = 2.0
# what the run and status say while a runner holds no unit
_SWEEPING = "sweeping the retired keys"
_CHECKING = "checking parity"
_RATE_WINDOW = 30.0  # seconds the moving rate is taken over
_POLL = 1.0  # seconds between looks at another runner's parity check


class Resharder(ReshardBase):
    """Drives reshards of index ``name`` on ``store`` (a Store or a store URI).

    The options ``MigrationRunner`` takes, for the mover (``rate`` on any key, source or
    target). ``settle`` is waited before a parity check reads gaps
    again (default 0, or 2 s where reads are eventually consistent). ``progress`` is
    called with a ``Progress`` as the reshard advances; with a ``recorder`` (a
    ``shardex.metrics.MetricsRecorder``) the runner also reports to its
    ``reshard(name)`` gauges: the state (``rolled-back`` once a rollback ends), entries
    moved of the total, the last parity check's gaps and the routing versions it goes
    from and to. ``layouts`` makes the ``Layouts`` the mover, the
    parity check and the sweep use, from the mover's own index (default:
    ``IndexLayouts``, the index's shard keys, or ``TierLayouts`` with ``tiers``).
    ``tiers`` (as ``ShardedIndex``'s) names the store of each tier the layouts name; a
    value whose policy changes tier moves between stores (``shardex.migrate.tiered``).
    ``sharing`` makes ``rate`` the reshard's one budget (``MigrationRunner``). Use
    ``async with``. What its steps stand on (its indexes, work records and mover, the
    routing writes and reports) is ``ReshardBase``'s.
    """

    # -- the operator's steps --------------------------------------------------------------

    async def start(self, changes: Mapping[str, ShardPolicy | None], *,
                    default: ShardPolicy | None = None, values: Sequence[str] = (),
                    margin: float = DEFAULT_MARGIN, dry_run: bool = False,
                    reshard_id: str | None = None) -> StartPlan:
        """Begin a reshard toward the layout with ``changes`` (and ``default``), in read-both.

        ``values`` names logical keys that follow the default and hold entries, when the
        default changes. Reads every entry of the values that change once, to count
        what will move and cut the work into units; ``dry_run`` stops there. Raises
        ReshardRefused if a reshard is under way, InvalidRouting if nothing changes.
        """
        check_seconds("margin", margin)
        current = await self.routing()
        if current.in_transition:
            raise ReshardRefused(self._busy(current))
        new = states.begin(current, changes, default=default, values=values,
                           reshard_id=reshard_id or f"r{uuid.uuid4().hex[:12]}",
                           now=self._clock.wall(), margin=float(margin))
        assert new.reshard is not None
        assert new.previous is not None
        refused = crossing_refusal(new)
        if refused is not None:
            raise ReshardRefused(f"index {self.name!r}: {refused}")
        new = await self._with_tiers(new)
        assert new.reshard is not None
        assert new.previous is not None
        await self._check_keys(new)
        mover = self._mover(new)
        surveys = await mover.survey(new, new.reshard.values)
        plans = {value: ValuePlan(value, new.previous.policy(value), new.policy(value),
                                  sum(s.entries for s in found), sum(s.to_move for s in found),
                                  max((s.to_move for s in found), default=0),
                                  *self.layouts.flow(new, value),
                                  sum(s.units for s in found),
                                  *self.layouts.kept(new, value))
                 for value, found in surveys.items()}
        if dry_run:
            return StartPlan(new, plans, stored=False)
        records = self._records(new)
        # records of reshards that ended or never began
        await records.cleanup(keep=_adoption_of(new))
        if await records.claim_plan(1, self.worker, self.unit_lease * 4):
            await records.publish(1, mover.units(new, surveys), self.worker)
        latest = await self.routing()
        if latest.version != current.version or not await self._store(new):
            raise ReshardRefused(f"the routing of index {self.name!r} changed while the "
                                 "reshard was being planned (another start?); nothing was "
                                 "started: run 'shardex reshard status'")
        await record_migration(self.store, self.name, "reshard", new.reshard.id,
                               new.reshard.values, clock=self._clock, rng=self._rng)
        return StartPlan(new, plans, stored=True)

    async def _with_tiers(self, routing: Routing) -> Routing:
        """``routing`` with its transition recording the store of each tier its moving
        values leave or enter (``Transition.tiers``), as this runner was given them."""
        meta, previous = routing.reshard, routing.previous
        assert meta is not None
        assert previous is not None
        index = await self.control()
        named = {policy.tier for value in meta.values
                 for policy in (previous.policy(value), routing.policy(value))}
        found = {}
        for tier in sorted(t for t in named if t is not None):
            store = index.tiers.get(tier)
            text = None if store is None else identity(store)
            if text is not None:
                found[tier] = text
        if not found:
            return routing
        return replace(routing, reshard=replace(meta, tiers=tuple(found.items())))

    async def _check_keys(self, routing: Routing) -> None:
        """Refuse a layout whose shard keys a store cannot hold (InvalidKey naming the
        value and the key), before any is routed to: once read-both began, every read of
        the value failed, and a rollback too (a value of 1,021 bytes to 16 shards on
        Cosmos DB, whose partition key holds 2,048 bytes encoded)."""
        assert routing.reshard is not None
        index = await self.control()
        for value in routing.reshard.values:
            policy = routing.policy(value)
            store = index.store if policy.tier is None else index.tiers.get(policy.tier)
            if store is None:
                continue  # a tier this runner was not given: no store to ask
            key = policy.shard_keys(value)[-1]  # the longest: the highest shard number
            try:
                store.check_shard_key(self.name, key)
            except InvalidKey as exc:
                raise InvalidKey(f"index {self.name!r}: {value!r} cannot have {policy.shards} "
                                 f"shards on {store.uri}: {exc}; nothing was started") from None

    def _busy(self, routing: Routing) -> str:
        meta = routing.reshard
        what = f"reshard {meta.id} is" if meta is not None else "a transition is"
        return (f"index {self.name!r}: {what} under way (state {routing.state}"
                f"{'' if meta is None else ', ' + meta.direction}); finish it ('shardex "
                "reshard run', 'cutover', 'complete') or roll it back ('shardex reshard "
                "rollback') before starting another")

    async def run(self, until: states.Until | None = None) -> RunResult:
        """Drive the reshard until it reaches ``until`` (default: ``verified`` forward,
        ``done`` for a rollback); resumes one stopped anywhere.
        """
        if until is not None and until not in states.UNTIL:
            raise InvalidInput(f"until must be one of {', '.join(states.UNTIL)}, "
                               f"got {until!r}")
        # a store that stops answering is said in the progress, whatever the step waits on
        every = min(_REPORT_EVERY, self.unit_lease)
        return await answered(self._steps(until), self._clock, every, self._say_quiet,
                              quiet=self._quiet, tick=every / 4)

    async def _steps(self, until: states.Until | None) -> RunResult:
        swept = False
        dirty = 0
        result = RunResult("stable", "", Routing())
        seen = None  # the last reshard this run saw under way
        while True:
            routing = await self.routing()
            meta = routing.reshard
            seen = meta or seen
            goal: states.Until = until or ("verified" if meta is None
                                           or meta.direction == "forward" else "done")
            done = await self._mover_done(routing)
            step = states.next_step(routing, now=self._clock.wall(), lease=self.lease,
                                    until=goal, mover_done=done, swept=swept,
                                    max_age=self.max_age)
            if isinstance(step, states.Stop):
                result.state, result.why, result.routing = step.reached, step.why, routing
                if result.parity is None and seen is not None:
                    result.parity = seen.parity  # another runner's check, as recorded
                if meta is None and seen is not None:  # it ended here: say how
                    result.ended = seen.id
                    # what this runner wrote after another ended it (a sweep's claims):
                    # left if the store does not answer, as a later start cleans up
                    with contextlib.suppress(ShardexError):
                        await self._records_of(seen.id).cleanup(keep=_adoption_of(routing),
                                                                only=True)
                    result.why = ("rolled back: the layout it left is in use"
                                  if seen.direction == "rollback" else
                                  "the new layout alone is in use") + \
                        f" (routing version {routing.version}, stable)"
                return result
            if isinstance(step, states.Wait):
                await self._sleep_until(step.until, routing, step.why, running=True)
            elif isinstance(step, states.Advance):
                if await self._store(step.routing):
                    self._report(step.routing, None, step.why)
                    if step.routing.reshard is None and meta is not None:
                        await self._records(routing).cleanup(keep=_adoption_of(routing))
                        await finish_migration(self.store, self.name, meta.id, "rolled-back"
                                               if meta.direction == "rollback" else "stable",
                                               clock=self._clock, rng=self._rng)
            elif isinstance(step, states.Move):
                await self._move(routing)
            elif isinstance(step, states.Verify):
                checked = await self._check_once(routing, mover_done=done)
                if checked is None:
                    continue  # another runner's check: its report is in the routing now
                parity = result.parity = checked
                dirty = 0 if parity.clean else dirty + 1
                usable = max(self._clock.wall(), states.ready_at(routing, self.lease))
                cuts_over = states.ORDER.index(goal) > states.ORDER.index("verified")
                if parity.clean and done and cuts_over and \
                        usable - parity.checked_at > self.max_age:
                    # stale before readers may move: checking again would store a new
                    # routing version a pass, without end
                    raise ReshardRefused(
                        f"index {self.name!r}: the parity report is "
                        f"{usable - parity.checked_at:.1f} s old by the time readers may "
                        f"move to the target layout alone (the check, then the routing's "
                        f"lease and the margin), older than --max-age {self.max_age:g} s; "
                        "run again with a larger --max-age")
                if dirty and dirty < _DIRTY_PASSES:
                    # what the mover's next pass does not visit
                    await self.layouts.mend(routing, parity.examples)
                    # and the next check once a writer between its two steps has sent
                    # its confirmation (within its lease), or been fenced out: three
                    # checks within a second refused a reshard for one throttled mend
                    assert routing.reshard is not None
                    await self._sleep_until(
                        self._clock.wall() + self.lease + routing.reshard.margin, routing,
                        f"parity gaps ({_gap_text(parity)}): checking again once writers "
                        "between their two steps have landed", running=True)
                if dirty >= _DIRTY_PASSES:
                    raise ReshardRefused(
                        f"index {self.name!r}: the parity check found {parity.gaps} gap(s) "
                        f"after {dirty} passes of the mover ({_gap_text(parity)})"
                        f"{_refused_text(self.mover_refused)}; 'shardex reshard status' lists "
                        "examples; roll back or fix them and run again")
            else:
                found = await self._sweep(routing)
                result.swept += found.moved
                result.cleared += found.cleared
                result.ghosts += found.ghosts
                result.swept_keys = (result.swept_keys[0] + found.keys, found.retired)
                swept = True

    async def _move(self, routing: Routing) -> None:
        await self._patiently(self._moving.refresh_routing)
        async with self._budgeted(routing) as mover:
            await mover.run(routing)
        now, meta = self.layouts.routing, routing.reshard  # as the mover last saw it
        if meta is not None and (now.reshard is None or now.reshard.id != meta.id
                                 or now.reshard.direction != meta.direction):
            # another process rolled it back (or ended it): the mover stopped, not done
            why = ("the reshard is rolling back" if now.reshard is not None
                   and now.reshard.direction == "rollback" else "the reshard changed")
            self._report(routing, await self.units(routing), f"the mover stopped: {why}")
            return
        self._report(routing, await self.units(routing), "the mover is done")

    @contextlib.asynccontextmanager
    async def _budgeted(self, routing: Routing, *,
                        sweeping: bool = False) -> AsyncIterator[Mover]:
        """A mover under the migration's budget and controls, reporting while it works."""
        async with contextlib.AsyncExitStack() as stack:
            assert routing.reshard is not None
            budget = await self.budget(stack, routing.reshard.id,
                                       lambda line: self._report(routing, None, line))
            async with alongside(self._keep_reporting(routing, budget, sweeping)):
                yield self._mover(routing, budget)

    async def _keep_reporting(self, routing: Routing, budget: Budget | None,
                              sweeping: bool = False) -> None:
        """Report the moving (or the sweep) every few seconds; while the movers stand
        still, why (paused, or held by an outside signal: the output had said only "0
        entries/s").

        The moved count is the units' checkpoints', which come a page or up to a third of
        the unit lease apart: the rate is taken over the last ``_RATE_WINDOW`` seconds (or
        the unit lease, if longer), and is None over less than a third of a lease.
        """
        seen: deque[tuple[float, int]] = deque()
        window, least = max(_RATE_WINDOW, self.unit_lease), self.unit_lease / 3
        while True:
            hold = None if budget is None else budget.controls.hold
            if sweeping:
                self._report(routing, None, hold or _SWEEPING)
                await self._clock.sleep(min(_REPORT_EVERY, self.unit_lease))
                continue
            units = await self.units(routing)  # a store that stops answering: run says it
            moved = sum(u.moved for u in units)
            now = self._clock.now()
            if hold:
                # no rate and no ETA while held (an ETA that grew through a pause), and
                # the rate once resumed is taken from then
                seen.clear()
            seen.append((now, moved))
            while now - seen[0][0] > window:
                seen.popleft()
            then, before = seen[0]
            rate = (moved - before) / (now - then) if now - then >= least else None
            waiting = held_by_others(units, self._clock.wall(), self.worker)
            self._report(routing, units, hold or waiting or "moving entries",
                         rate)
            await self._clock.sleep(min(_REPORT_EVERY, self.unit_lease))

    async def _check_once(self, routing: Routing, *, mover_done: bool) -> Parity | None:
        """Check parity (``_verify``) unless another runner checks it for this version of
        the routing: then wait, marked waiting for it, till the routing moves on or its
        claim lapses, and return None. Every runner whose units were done checked, each
        reading every entry twice."""
        assert routing.reshard is not None
        meta, records = routing.reshard, self._records(routing)
        job = f"check-{routing.version:06d}"
        claim, held = await records.claim(meta.generation, job, self.worker, self.unit_lease)
        if held is not None:
            try:
                async with records.holding(meta.generation, job, self.worker,
                                           self.unit_lease):
                    return await self._verify(routing, mover_done=mover_done)
            except TakenOver:
                return None  # another runner checks it now
        if claim.done:
            return None
        waiting = f"waiting for {claim.owner}'s parity check"
        self._report(routing, None, waiting)
        async with self.present(meta.id, waiting):
            while (await self.routing()).version == routing.version:
                claim, held = await records.claim(meta.generation, job, self.worker,
                                                  self.unit_lease, seen=True)
                if held is not None or claim.done:
                    break  # its runner stopped: this one checks (held), or it is done
                await self._clock.sleep(_POLL)
        return None

    async def _verify(self, routing: Routing, *, mover_done: bool) -> Parity:
        """Check parity and record the report (entering ``verified`` when it may)."""
        assert routing.reshard is not None
        self._report(routing, None, _CHECKING)
        await self._patiently(self._moving.refresh_routing)
        settle = self._settle if self._settle is not None else (
            0.0 if self.layouts.consistent else 2.0)
        async with self.present(routing.reshard.id, _CHECKING):
            parity = await check(self.layouts, routing, read_rate=self.read_rate,
                                 settle=settle, concurrency=16, clock=self._clock,
                                 rng=self._rng)
        while True:
            recorded = states.after_verify(routing, parity, mover_done=mover_done)
            if await self._store(recorded):
                self._report(recorded, None, "parity checked: " + (
                    "no gaps" if parity.clean else _gap_text(parity)))
                return parity
            routing = await self.routing()
            if routing.reshard is None:
                return parity
            mover_done = await self._mover_done(routing)

    async def verify(self) -> Parity:
        """Check parity now and record the report; ReshardRefused before anything moved."""
        routing = await self.routing()
        if routing.reshard is None:
            raise ReshardRefused(f"index {self.name!r} has no reshard under way to verify")
        if routing.state == "read-both":
            raise ReshardRefused(f"index {self.name!r}: the reshard is in read-both, nothing "
                                 "has moved yet: run 'shardex reshard run' first")
        done = await self._mover_done(routing)
        if routing.state in states.MOVING and not done:
            # the entries still to move would read as gaps, and the advice to mend them
            # (run again) as though no runner were moving them
            raise ReshardRefused(
                f"index {self.name!r}: the mover has not finished (work units remain; "
                "'shardex reshard status' says how many and which runner holds them): the "
                "entries still to move would read as gaps; 'shardex reshard run' checks "
                "parity once it has moved them")
        return await self._verify(routing, mover_done=done)

    async def cutover(self, *, max_age: float | None = None) -> Routing:
        """Move readers to the target layout alone (``read-new``) once parity holds.

        Refused (ReshardRefused) unless the reshard is ``verified`` with a clean report
        younger than ``max_age`` seconds; waits out the lease and margin if needed.
        """
        age = self.max_age if max_age is None else max_age
        while True:
            routing = await self.routing()
            if routing.reshard is None:
                raise ReshardRefused(f"index {self.name!r} has no reshard under way")
            refusal = states.cutover_refusal(routing, now=self._clock.wall(), max_age=age)
            if refusal is not None:
                raise ReshardRefused(f"index {self.name!r}: {refusal.why}")
            ready = states.ready_at(routing, self.lease)
            if self._clock.wall() < ready:
                await self._sleep_until(ready, routing, "every client to act on the last "
                                                        "change")
                continue
            new = states.next_step(routing, now=self._clock.wall(), lease=self.lease,
                                   until="read-new", mover_done=True, swept=False,
                                   max_age=age)
            if isinstance(new, states.Advance) and await self._store(new.routing):
                return new.routing

    async def complete(self, *, retain: float | None = None) -> RunResult:
        """Retire the layout left once ``retain`` seconds have passed since this call.

        ``retain`` None keeps the window already asked for (none: 0). Refused unless the
        reshard is in ``read-new`` (after cutover) or later. Within the window the state
        stays ``read-new`` and rollback stays possible; the call returns at once, saying
        when; once it has passed, the reshard is finished.
        """
        if retain is not None:
            check_seconds("retain", retain)
        routing = await self.routing()
        meta = routing.reshard
        if meta is None:
            raise ReshardRefused(f"index {self.name!r} has no reshard under way to complete")
        if routing.state not in ("read-new", "retired"):
            raise ReshardRefused(f"index {self.name!r}: the reshard is in {routing.state}; "
                                 "complete comes after 'shardex reshard cutover' (read-new)")
        if routing.state == "read-new" and (meta.retire_after is None or (
                retain is not None and retain != meta.retain)):
            await self._store(states.with_retention(routing, self._clock.wall(),
                                                    meta.retain if retain is None else retain))
            routing = await self.routing()
            meta = routing.reshard
        if meta is not None and meta.retire_after is not None \
                and self._clock.wall() < meta.retire_after:
            return RunResult(states.state_of(routing), "the retention window has not passed",
                             routing)
        return await self.run(until="done")

    async def rollback(self) -> RunResult:
        """Roll the reshard back toward the layout it left, and drive the rollback to its end.

        Refused (ReshardRefused) with no reshard, after ``retired``, or while one rolls back.
        """
        await self.begin_rollback()
        return await self.run(until="done")

    async def begin_rollback(self) -> Routing:
        """Store the rollback's first state (waiting out the lease if needed); ``run`` with
        ``until="done"`` drives it. Refused as ``rollback`` is."""
        while True:
            routing = await self.routing()
            try:
                step = states.rollback_step(routing, now=self._clock.wall(), lease=self.lease)
            except InvalidRouting as exc:
                raise ReshardRefused(f"index {self.name!r}: {exc}") from None
            if isinstance(step, states.Wait):
                await self._sleep_until(step.until, routing, step.why, running=True)
                continue
            if await self._store(step.routing):
                self._report(step.routing, None, step.why)
                return step.routing

    async def _sweep(self, routing: Routing) -> Swept:
        """Sweep every key only the old layout has (``shardex.migrate.sweep``)."""
        assert routing.reshard is not None
        assert routing.previous is not None
        # the layouts decide from the mover's own copy of the routing: it must be in
        # ``retired`` too, where rows a rollback left behind are no reader's any more
        await self._patiently(self._moving.refresh_routing)
        async with self.present(routing.reshard.id, _SWEEPING), \
                self._budgeted(routing, sweeping=True) as mover:
            return await mover.sweep(routing)


def _gap_text(parity: Parity) -> str:
    return ", ".join(f"{count} {kind}" for kind, count in parity.counts().items() if count) \
        or "none"


def _refused_text(refused: Mapping[tuple[str, str], str]) -> str:
    """What the stores of their new places said of the entries they refused, the first
    named: the parity check sees only that they did not move."""
    if not refused:
        return ""
    item_id, value, why, more = first_refused(refused)
    return (f"; the store of its new place refused the entry of item {item_id!r} of "
            f"{value!r}{more} ({why})")


def _adoption_of(routing: Routing) -> str | None:
    """The id of the index's adoption, whose work records outlive later reshards."""
    return None if routing.adoption is None else routing.adoption.id
