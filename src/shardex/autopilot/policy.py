"""The autopilot's policy: one pure decision per logical key, from its heat, layout and the clock.

No I/O and no clock of its own: ``decide`` takes every input as a plain value and
returns plain values, so a loop (``shardex autopilot``), the simulation
(``shardex simulate --autopilot``) and the tests call the same function.

The settings it decides by are an ``AutopilotPolicy`` (``shardex.autopilot.settings``).
Inputs, per logical key: its heat (``KeyHeat``, write and read units a second over
sliding windows, ``shardex.autopilot.heat``), its layout and what is under way
(``KeyView``: N, tier, the migration running, when it last changed, the admission
budget in force), the table's facts (``TableFacts``) and ``now``. N comes from a
sizing function (``Sizer``: the planner, ``shardex.autopilot.sizing``). Output: a list
of ``Decision`` values (``none`` included), each with its reason and its inputs.

The rules, with ``capacity = N x the partition's write ceiling``:

==========  ===============================================================================
grow        the load has stayed above ``up`` x capacity for ``t_up`` (the least sample of
            the window): to the planner's N for ``grow_factor`` x the load projected
            ``lead`` seconds on (the trend of the last ``trend`` seconds), as DynamoDB's
            on-demand mode makes room for twice its previous peak: a migration takes
            minutes, so one grow must cover a ramp that goes on meanwhile
shrink      the window's peak over ``t_down`` stayed below ``down`` x capacity, the load
            has settled (the peak of the last ``t_up`` is at least ``settled`` x the
            window's, so a falling load is shrunk once, at its end), ``shrink_wait`` has
            passed since the key's last change (``t_down``, doubled for each flap), and
            the planner's N for the window's peak is smaller; the shrunk layout keeps that
            peak below ``up``, so the same load never grows it back
isolate     a ``tier`` is configured, and the projected load asks more than
            ``isolate_share`` of the table's write limit, or more than ``max_shards``
admit       a sample past ``admit_at`` x capacity (``guard``, for every sample as it
            arrives), or a grow or isolation starting with the load past the budget: a
            budget of ``admit_share`` x capacity holds the key below what its partitions
            take (``shardex.admission``) while the grow gathers evidence and runs; once
            writers follow the grown layout it rises to ``admit_share`` x the new
            capacity, at most twice the key's peak (what it held back drains at up to
            one more peak a second), and never above ``admit_share`` x the table's
            write limit; with no migration under
            way it is lifted once it has held ``t_down`` and the window's peak over
            ``t_down`` stayed below ``up`` (so noise does not set and lift it in turn);
            a budget above ``admit_share`` x capacity (raised for a layout rolled back
            since, or while a migration to fewer shards runs, of the layout writers
            follow) comes down to it at once
none        anything else: the dead band (between ``down`` and ``up``), a migration of
            the key under way, ``min_interval`` since its last change (``shrink_wait``
            before a shrink), ``veto`` since an operator changed the key's layout (a
            migration of their own, or a rollback of the autopilot's), the cap of
            ``max_migrations`` under way, or a floor or ceiling on N
==========  ===============================================================================

Ties: when more keys want a migration than the cap allows, the hottest (load over
capacity) goes first.

Flaps, damped as BGP damps a flapping route and autoscalers stabilise a scale-down: a
grow or isolation that starts less than ``t_down`` after the key's last shrink ended
is a *flap* (the shrink read a lull for the end of the load); the key's count of them
(``KeyView.flaps``) goes up by one, to at most ``MAX_FLAPS``, and a grow that is no
flap sets it back to 0 (``flaps_after``). A shrink waits ``t_down x 2**flaps`` after
the key's last change (``shrink_wait``): a load that comes back every ``t_down`` is
shrunk ever more rarely (it had been shrunk each lull and run over its capacity until
``min_interval`` let it grow back, a reshard pair each cycle), a steady one as before.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from shardex.autopilot.settings import AutopilotPolicy

__all__ = ["ACTIONS", "Action", "Decision", "KeyHeat", "KeyView", "MAX_FLAPS",
           "MigrationView", "Sizer", "TableFacts", "decide", "flaps_after", "guard",
           "shrink_wait"]

Action = Literal["none", "grow", "shrink", "isolate", "admit"]
# a reason's figures (loads, shares, seconds, N): reasons whose words are the same are the
# same decision in the log (``Decision.gist``)
_FIGURES = re.compile(r"\d[\d,.]*")
ACTIONS: tuple[Action, ...] = ("none", "grow", "shrink", "isolate", "admit")
# N for a key's peak write units a second, on a tier (None: the index's own table)
Sizer = Callable[[str, float, "str | None"], int]
# a key's shrink waits at most t_down x 2**MAX_FLAPS (2 h by default) after its last change
MAX_FLAPS = 3


@dataclass(frozen=True, slots=True)
class TableFacts:
    """What the policy knows of the table: a partition's write ceiling and the table's
    write limit (units a second; inf: none), on the index's own table."""

    write_ceiling: float
    write_limit: float = math.inf


@dataclass(frozen=True, slots=True)
class KeyHeat:
    """A logical key's heat over the policy's windows, in units a second.

    ``seconds`` is how much history the windows hold; ``floor_up``/``peak_up`` the least
    and highest write sample over the last ``t_up``, ``peak_down`` the highest over
    ``t_down``, ``slope`` the trend of the last ``trend`` seconds (units a second per
    second), ``last`` the latest sample, ``read_peak`` the highest read sample over
    ``t_up``.
    """

    seconds: float
    floor_up: float
    peak_up: float
    peak_down: float
    slope: float = 0.0
    last: float = 0.0
    read_peak: float = 0.0


@dataclass(frozen=True, slots=True)
class MigrationView:
    """A key's migration under way: from and to (N, tier), its state, and the wall time
    from which every writer follows the new layout (None: not yet known, before
    ``write-new``)."""

    from_n: int
    to_n: int
    state: str
    started_at: float
    writers_follow_at: float | None = None
    from_tier: str | None = None
    to_tier: str | None = None

    @property
    def grows(self) -> bool:
        return self.to_n > self.from_n or self.to_tier != self.from_tier


@dataclass(frozen=True, slots=True)
class KeyView:
    """A key's layout and what is under way: N, tier, its migration, when it last changed
    (the end of its last migration, wall seconds; None: never), the admission budget in
    force (write units a second; None: none) and since when (``budget_since``),
    ``lead``: seconds a migration started now would take until writers follow its new
    layout (None: the policy's ``lead``), ``flaps``: how many times running it grew
    back within ``t_down`` of a shrink (``flaps_after``; 0 to ``MAX_FLAPS``), and
    ``vetoed_until``: until when (wall seconds) an operator's change of the key's layout
    (a migration of their own, or a rollback of the autopilot's) keeps its N as it is
    (None: no such change)."""

    shards: int = 1
    tier: str | None = None
    migration: MigrationView | None = None
    last_change: float | None = None
    budget: float | None = None
    lead: float | None = None
    budget_since: float | None = None
    flaps: int = 0
    vetoed_until: float | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    """One decision for one key at ``t``: ``action``, N before and after, the tier
    (``isolate``), the budget (``admit``: units a second, None lifts it), the reason in
    words and the inputs it was made from."""

    t: float
    key: str
    action: Action
    from_n: int
    to_n: int
    reason: str
    inputs: Mapping[str, Any]
    tier: str | None = None
    budget: float | None = None

    @property
    def migrates(self) -> bool:
        return self.action in ("grow", "shrink", "isolate")

    @property
    def gist(self) -> tuple[Any, ...]:
        """What tells this decision apart from the key's last in the autopilot's log: a
        migration wished again with another N (while it waits or is proposed) is the
        same, and so is a reason whose figures alone changed. A shrink held by its wait
        after a change (damped or not: ``wait``), a key held by an operator's veto, or
        one held for another reason (the dead band, then the cap on migrations under
        way) is a decision of its own: folded into the one before, its reason was never
        logged."""
        return (self.action, self.from_n, None if self.migrates else self.to_n, self.budget,
                self.inputs.get("wait"), self.inputs.get("vetoed_until"),
                None if self.migrates else _FIGURES.sub("#", self.reason))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"t": self.t, "key": self.key, "action": self.action,
                               "from_n": self.from_n, "to_n": self.to_n,
                               "reason": self.reason, "inputs": dict(self.inputs)}
        if self.tier is not None:
            out["tier"] = self.tier
        if self.action == "admit":
            out["budget"] = self.budget
        return out


def flaps_after(policy: AutopilotPolicy, action: Action, now: float, flaps: int,
                shrunk_at: float | None, ended: float | None = None
                ) -> tuple[int, float | None]:
    """A key's ``(flaps, shrunk_at)`` once a migration of ``action`` (grow, shrink or
    isolate) starts at ``now``, from its count of flaps, the start of its last shrink
    since its last grow (wall seconds; None: none) and when its last migration ended
    (``ended``: that shrink's end, if it is later). A grow or isolation less than
    ``t_down`` after that shrink ended is a flap: one more, at most ``MAX_FLAPS``; any
    other sets the count to 0, and either ends the shrink's watch. Counted from its start,
    a shrink that took longer than ``t_down`` (a key of many entries) was never damped.
    """
    if action == "shrink":
        return flaps, now
    if shrunk_at is not None and now - max(shrunk_at, ended or shrunk_at) < policy.t_down:
        return min(MAX_FLAPS, flaps + 1), None
    return 0, None


def shrink_wait(policy: AutopilotPolicy, flaps: int) -> float:
    """Seconds a shrink waits after the key's last change: ``t_down``, doubled for each of
    its ``flaps`` (at most ``MAX_FLAPS``)."""
    return policy.t_down * 2.0 ** min(flaps, MAX_FLAPS)


def _inputs(heat: KeyHeat, view: KeyView, capacity: float, policy: AutopilotPolicy,
            **more: Any) -> dict[str, Any]:
    return {"shards": view.shards, "tier": view.tier, "capacity": capacity,
            "seconds": heat.seconds, "floor_up": heat.floor_up, "peak_up": heat.peak_up,
            "peak_down": heat.peak_down, "slope": heat.slope, "last": heat.last,
            "read_peak": heat.read_peak, "up": policy.up, "down": policy.down,
            "budget": view.budget, "last_change": view.last_change, "flaps": view.flaps,
            **more}


def guard(policy: AutopilotPolicy, key: str, view: KeyView, last: float, ceiling: float,
          now: float, *, limit: float = math.inf) -> Decision | None:
    """The admission watermark, for each sample as it arrives (a second's load, ``last``
    write units a second): a key with no migration and no budget whose load passes
    ``admit_at`` of its capacity gets a budget of ``admit_share`` of it at once, before
    the store throttles it (a grow needs ``t_up`` of evidence); ``limit`` is the table's
    write limit (``budget``). None: nothing to do."""
    capacity = view.shards * ceiling
    if view.migration is not None or view.budget is not None \
            or last <= policy.admit_at * capacity:
        return None
    budget = _budget(policy, capacity, limit)
    return Decision(now, key, "admit", view.shards, view.shards,
                    f"{last:,.0f} units/s, past {policy.admit_at:.0%} of capacity: admission "
                    f"holds the key at {budget:,.0f} units/s until it grows or cools",
                    {"shards": view.shards, "capacity": capacity, "last": last,
                     "admit_at": policy.admit_at}, budget=budget)


# the most a budget rises to once writers follow a grown layout, as a multiple of the
# key's peak: the writes held back drain at up to one more peak a second
_DRAIN = 2.0


def _budget(policy: AutopilotPolicy, capacity: float, limit: float) -> float:
    """A key's admission budget for ``capacity`` units a second: ``admit_share`` of it,
    and never above that share of the table's write limit ``limit``: a budget past what
    the table takes lets the writes it held back drain into the table's throttling (a
    grow to N=95 on a 40,000-unit table raised it to 85,500 units/s)."""
    return policy.admit_share * min(capacity, limit)


def decide(policy: AutopilotPolicy, table: TableFacts, heats: Mapping[str, KeyHeat],
           views: Mapping[str, KeyView], now: float, size: Sizer) -> list[Decision]:
    """Decide, for every key of ``views``, what to do now (see the module's table).

    ``heats`` holds each key's heat (a key without heat gets ``none``); ``size(key,
    peak, tier)`` gives N for a peak of write units a second. Returns one decision per
    key, plus an ``admit`` beside it where admission changes, in order of urgency.
    """
    under_way = sum(1 for view in views.values() if view.migration is not None)
    ceiling = table.write_ceiling
    out: list[Decision] = []
    wanted: list[tuple[float, Decision]] = []
    for key in sorted(views):
        view = views[key]
        heat = heats.get(key)
        capacity = view.shards * ceiling
        if heat is None:
            out.append(Decision(now, key, "none", view.shards, view.shards,
                                "no heat measured for the key", {"shards": view.shards}))
            continue
        inputs = _inputs(heat, view, capacity, policy)
        migration = view.migration
        if migration is not None:
            out.append(_while_migrating(policy, key, view, migration, heat, now, inputs,
                                        table))
            continue
        wish = _wish(policy, table, key, view, heat, now, size, inputs)
        if wish.migrates:
            wanted.append((heat.peak_up / capacity if wish.to_n > wish.from_n
                           or wish.action == "isolate" else 0.0, wish))
            continue
        out.append(wish)
        out += _admission(policy, key, view, heat, now, inputs, table, growing=False)
    wanted.sort(key=lambda pair: (-pair[0], pair[1].key))
    for _, wish in wanted:
        view, heat = views[wish.key], heats[wish.key]
        if under_way >= policy.max_migrations:
            out.append(replace(wish, action="none", to_n=wish.from_n, tier=None, reason=(
                f"would {wish.action} to N={wish.to_n} ({wish.reason}), but "
                f"{under_way} migration(s) are under way, the cap (max_migrations "
                f"{policy.max_migrations})")))
            out += _admission(policy, wish.key, view, heat, now, wish.inputs, table,
                              growing=False)
            continue
        under_way += 1
        out.append(wish)
        out += _admission(policy, wish.key, view, heat, now, wish.inputs, table,
                          growing=wish.action != "shrink")
    return out


def _admission(policy: AutopilotPolicy, key: str, view: KeyView, heat: KeyHeat, now: float,
               inputs: Mapping[str, Any], table: TableFacts, *, growing: bool
               ) -> list[Decision]:
    """Admission for a key with no migration under way (or one starting now): a bridge for
    a grow that starts, the watermark (``guard``), or a lift once the load stayed below
    ``up`` for ``t_up``."""
    ceiling = table.write_ceiling
    capacity = view.shards * ceiling
    bridge = _budget(policy, capacity, table.write_limit)
    if view.budget is None:
        if growing and heat.peak_up > bridge:
            return [Decision(now, key, "admit", view.shards, view.shards,
                             f"bridge the load while the grow runs: {bridge:,.0f} units/s "
                             f"({policy.admit_share:g} of the old capacity) until writers "
                             "follow the new layout", inputs, budget=bridge)]
        found = guard(policy, key, view, heat.last, ceiling, now, limit=table.write_limit)
        return [] if found is None else [replace(found, inputs=inputs)]
    if view.budget > bridge * (1 + 1e-9):
        # raised for a grown layout that is gone (an operator rolled the grow back): it
        # had let the key take 0.9 of N partitions' units on fewer for t_down
        return [Decision(now, key, "admit", view.shards, view.shards,
                         f"the budget of {view.budget:,.0f} units/s is more than N="
                         f"{view.shards} takes (the layout it rose for is gone: rolled back "
                         "or shrunk by hand): it "
                         f"comes down to {bridge:,.0f} ({policy.admit_share:g} of the "
                         "capacity)", inputs, budget=bridge)]
    held = math.inf if view.budget_since is None else now - view.budget_since
    if not growing and held >= policy.t_down and heat.peak_down < policy.up * capacity:
        return [Decision(now, key, "admit", view.shards, view.shards,
                         f"the load stayed below {policy.up:.0%} of capacity for "
                         f"{policy.t_down:g} s: the budget is lifted", inputs, budget=None)]
    return []


def _while_migrating(policy: AutopilotPolicy, key: str, view: KeyView,
                     migration: MigrationView, heat: KeyHeat, now: float,
                     inputs: dict[str, Any], table: TableFacts) -> Decision:
    """The decision for a key whose migration is under way: admission only.

    Before writers follow a grown layout the budget is ``admit_share`` of the old
    capacity; once they do, of the new one (the writes held back drain at the new
    layout's pace, not all at once); it is lifted as any budget is, once the migration
    ended. A migration to fewer shards (a shrink, or an operator's rollback of a grow)
    brings a budget above that share of the layout writers follow down to it, and keeps
    it: lifted at the rollback's start, it had let the load that drove the grow onto
    one partition for as long as the rollback ran (a probe on DynamoDB Local).
    """
    inputs = {**inputs, "migration": migration.state, "to_n": migration.to_n}
    following = migration.writers_follow_at is not None and now >= migration.writers_follow_at
    bridge = _budget(policy, (migration.to_n if following else migration.from_n)
                     * table.write_ceiling, table.write_limit)
    if view.budget is not None and not migration.grows:
        if view.budget > bridge * (1 + 1e-9):
            return Decision(now, key, "admit", view.shards, view.shards,
                            f"the migration goes to N={migration.to_n}: the budget comes down "
                            f"to {bridge:,.0f} units/s ({policy.admit_share:g} of the "
                            "capacity writers follow)", inputs, budget=bridge)
        return Decision(now, key, "none", view.shards, view.shards,
                        f"a migration of the key is under way (to N={migration.to_n}, "
                        f"{migration.state}): no other until it ends", inputs)
    if view.budget is not None and following:  # a grow's (the others returned above)
        # what admission held back drains at up to one more peak a second (DynamoDB's
        # on-demand mode makes room for twice its previous peak): at 0.9 of a grown
        # layout sized for a projected climb it drained into the table's own limit
        # (a step to 8,000 units/s grown to N=95: 154,402 writes failed, none at 2x)
        risen = min(bridge, _DRAIN * heat.peak_up)
        # in steps of a quarter at least, as the peak climbs (not every tick)
        if view.budget < risen and (risen == bridge or risen >= 1.25 * view.budget):
            return Decision(now, key, "admit", view.shards, view.shards,
                            f"writers follow the new layout: the budget rises to "
                            f"{risen:,.0f} units/s (" + (
                                f"{policy.admit_share:g} of its capacity"
                                if risen == bridge else f"{_DRAIN:g}x the peak of "
                                f"{heat.peak_up:,.0f}") + "); once the migration has ended it is "
                            f"lifted when the load has stayed below {policy.up:g} of the "
                            f"capacity for {policy.t_down:g} s",
                            inputs, budget=risen)
    if view.budget is None and migration.grows and not following and heat.peak_up > bridge:
        return Decision(now, key, "admit", view.shards, view.shards,
                        f"bridge the load while the migration to N={migration.to_n} runs "
                        f"({migration.state}): {bridge:,.0f} units/s", inputs, budget=bridge)
    return Decision(now, key, "none", view.shards, view.shards,
                    f"a migration of the key is under way (to N={migration.to_n}, "
                    f"{migration.state}): no other until it ends", inputs)


def _wish(policy: AutopilotPolicy, table: TableFacts, key: str, view: KeyView, heat: KeyHeat,
          now: float, size: Sizer, inputs: dict[str, Any]) -> Decision:
    """What the key's heat asks for, before the cap on migrations under way."""
    n = view.shards
    capacity = inputs["capacity"]
    floor, top = policy.bounds(key)
    since = math.inf if view.last_change is None else now - view.last_change
    middle = (policy.up + policy.down) / 2

    def none(reason: str, **more: Any) -> Decision:
        return Decision(now, key, "none", n, n, reason, {**inputs, **more})

    hot = heat.seconds >= policy.t_up and heat.floor_up > policy.up * capacity
    cold = heat.seconds >= policy.t_down and heat.peak_down < policy.down * capacity
    if not hot and not cold:
        return none(f"in the dead band: the least load over {policy.t_up:g} s is "
                    f"{heat.floor_up / capacity:.0%} of capacity (grow above "
                    f"{policy.up:.0%}), the peak over {policy.t_down:g} s "
                    f"{heat.peak_down / capacity:.0%} (shrink below {policy.down:.0%})"
                    if heat.seconds >= policy.t_down else
                    f"the least load over {policy.t_up:g} s is "
                    f"{heat.floor_up / capacity:.0%} of capacity (grow above "
                    f"{policy.up:.0%}); {heat.seconds:.0f} s of heat, where a shrink is "
                    f"judged over {policy.t_down:g} s"
                    if heat.seconds >= policy.t_up else
                    f"{heat.seconds:.0f} s of heat: a grow is judged over {policy.t_up:g} s "
                    f"(its least load above {policy.up:.0%} of capacity)")
    if since < policy.min_interval:
        return none(f"the key changed {since:.0f} s ago, under min_interval "
                    f"{policy.min_interval:g} s")
    if view.vetoed_until is not None and now < view.vetoed_until:
        return none(f"{'above' if hot else 'below'} {policy.up if hot else policy.down:.0%} "
                    f"of capacity, but an operator changed its layout lately (a migration "
                    f"of their own, or a rollback of the autopilot's): its N={n} stays as "
                    f"the operator left it for another {view.vetoed_until - now:,.0f} s "
                    f"(veto {policy.veto:g} s)",
                    vetoed_until=view.vetoed_until)
    if hot:
        lead = policy.lead if view.lead is None else view.lead
        projected = max(heat.peak_up, heat.last + max(0.0, heat.slope) * lead)
        room = policy.grow_factor * projected
        more = {"projected": projected, "lead": lead, "sized_for": room}
        isolate = policy.tier is not None and view.tier != policy.tier and (
            projected > policy.isolate_share * table.write_limit
            or size(key, projected, None) > top)
        if isolate:
            assert policy.tier is not None
            to_n = min(top, max(floor, size(key, room, policy.tier)))
            return Decision(now, key, "isolate", n, to_n,
                            f"{projected:,.0f} units/s projected, past "
                            f"{policy.isolate_share:.0%} of the table's write limit or "
                            f"N={top}: isolate on tier {policy.tier}",
                            {**inputs, **more}, tier=policy.tier)
        wanted = max(size(key, room, view.tier),
                     math.ceil(round(projected / (middle * table.write_ceiling), 9)))
        to_n = min(top, max(floor, wanted))
        if to_n <= n:
            return none(f"above {policy.up:.0%} of capacity, but its ceiling is N={top}"
                        + ("" if n == top else f" (it is at N={n})")
                        if n >= top else f"above {policy.up:.0%} of capacity, and the "
                        f"planner's N for {room:,.0f} units/s is {wanted}", **more)
        return Decision(now, key, "grow", n, to_n,
                        f"above {policy.up:.0%} of capacity for {policy.t_up:g} s "
                        f"(least {heat.floor_up:,.0f} of {capacity:,.0f} units/s); "
                        f"{projected:,.0f} units/s projected in {lead:g} s, sized for "
                        f"{policy.grow_factor:g}x that", {**inputs, **more})
    if heat.peak_up < policy.settled * heat.peak_down:
        return none(f"below {policy.down:.0%} of capacity, but still falling: the last "
                    f"{policy.t_up:g} s peak at {heat.peak_up:,.0f} units/s, under "
                    f"{policy.settled:g} x the window's {heat.peak_down:,.0f}")
    wait = shrink_wait(policy, view.flaps)
    if since < wait:
        rule = (f"t_down {policy.t_down:g} s after a change" if not view.flaps else
                f"{wait:g} s after a change, t_down damped x{wait / policy.t_down:g}: it "
                f"grew back within t_down of its last shrink {view.flaps} time(s) running")
        return none(f"below {policy.down:.0%} of capacity, but the key changed {since:.0f} s "
                    f"ago: a shrink waits {rule}", wait=wait)
    if n <= floor:
        return none(f"below {policy.down:.0%} of capacity, but N={n} is not above its floor "
                    f"N={floor}: a shrink stops there (a floor bounds the N the autopilot "
                    "picks; it raises no cold key to it)")
    grown = size(key, policy.grow_factor * heat.peak_down, view.tier)
    if n <= grown:
        # what a grow sizes for this load: the same load does not undo it (a grow sizes
        # for grow_factor x the load with the planner's headroom, which leaves the load
        # at a third of the new capacity, under down: every grow was shrunk t_down later)
        return none(f"below {policy.down:.0%} of capacity, but a grow for the peak of "
                    f"{heat.peak_down:,.0f} units/s would size N={grown}: the same load "
                    "does not undo a grow")
    wanted = max(size(key, heat.peak_down, view.tier),
                 math.ceil(round(heat.peak_down / (policy.up * table.write_ceiling), 9)))
    # never below what keeps the peak under ``up``, not capped at the ceiling: a key at
    # 64 with a ceiling lowered to 16 was shrunk to 16 for a peak that needed 25
    to_n = max(floor, wanted)
    if to_n >= n:
        return none(f"below {policy.down:.0%} of capacity, and the planner's N for the "
                    f"peak is {wanted}")
    return Decision(now, key, "shrink", n, to_n,
                    f"peak {heat.peak_down:,.0f} units/s over {policy.t_down:g} s, below "
                    f"{policy.down:.0%} of capacity ({capacity:,.0f})", inputs)
