"""``simulate --autopilot``: the autopilot's policy against the rate-level simulator.

One load (a ``DayLoad``: a workload, its ramps, each key's entries, noise) runs three
ways on the same table, second by second on ``shardex.sim.fluid``, with the same noise:

- ``autopilot``: from the workload's own layout, the policy (``shardex.autopilot``)
  decides every ``tick`` from each key's heat (the write units a second its writes ask,
  each write counted once, when first asked); a grow, shrink or isolation runs as
  ``MigrationModel`` (the runner's states, waits, survey, mover, parity check and sweep,
  with their extra writes and reads on the keys they touch); an ``admit`` sets the key's
  admission budget, which holds writes back (first in, first out) instead of letting the
  store throttle them;
- ``static``: each key at the planner's N for its peak (plus the noise), all day;
- ``none``: the workload's own layout, all day.

Writes refused by the store are tried again once a second, up to ``RetryPolicy``'s
attempts (8, within its 10 s deadline), then fail; ``throttled`` counts every refused
attempt. Page reads fan out over the keys readers read (both layouts' while a migration
has readers on both). Every listing's completeness is measured by a shadow run of each
migration on the real index and runner (``shardex.scenarios.shadow``).
"""

from __future__ import annotations

import random
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from shardex.autopilot import (
    AutopilotPolicy,
    Decision,
    HeatWindow,
    KeyView,
    MigrationView,
    PlannerSizer,
    TableFacts,
    decide,
    flaps_after,
    guard,
)
from shardex.autopilot.migration import MigrationCosts, MigrationModel, survey_seconds
from shardex.errors import InvalidInput
from shardex.retry import RetryPolicy
from shardex.routing import ShardPolicy
from shardex.scenarios.autopilot_keys import (
    QUIET,
    Costs,
    SimKey,
    classes,
    flows,
    retry_seconds,
    series,
)
from shardex.scenarios.day import DayLoad, Ramp
from shardex.scenarios.flows import held_units
from shardex.scenarios.table_use import TableUse, record_tables, tables_of
from shardex.scenarios.workload import Workload
from shardex.sim.fluid import Flow, FlowResult, FluidEngine, Part
from shardex.sim.profiles import Profile

__all__ = ["MODES", "ModeRun", "run_mode"]

MODES = ("autopilot", "static", "none")
# a ramp's reshards are counted from its start until this long after its episode ends
SETTLE_S = 3600


@dataclass(slots=True)
class _Sent:
    """What one key sent in a second: its writes admitted and tried, where its flows are
    (``first``: -1 when folded to the table level), its net entries a write, its mover."""

    key: SimKey
    admitted: float
    ops: float
    net: float
    mover: float = 0.0
    first: int = -1
    count: int = 0
    moving: int = -1


@dataclass(slots=True)
class ModeRun:
    """What one mode did: per key, the actions, the migrations, and what planning cost."""

    mode: str
    load: DayLoad
    keys: dict[str, SimKey]
    policy: AutopilotPolicy
    actions: list[Decision] = field(default_factory=list)
    plans: int = 0
    plan_seconds: float = 0.0
    seconds: float = 0.0
    # each table's use of each direction, second by second (``tables_of``'s order)
    tables: list[TableUse] = field(default_factory=list)

    @property
    def duration(self) -> int:
        return self.load.workload.duration

    def migrations(self) -> list[MigrationModel]:
        return sorted((m for key in self.keys.values() for m in key.migrations),
                      key=lambda m: m.started)

    def totals(self) -> dict[str, float]:
        offered = sum(sum(k.offered) for k in self.keys.values())
        return {"writes": offered,
                "throttled": sum(sum(k.throttled) for k in self.keys.values()),
                "refused": sum(sum(k.refused) for k in self.keys.values()),
                "failed": sum(sum(k.failed) for k in self.keys.values()),
                "reads": sum(k.reads for k in self.keys.values()),
                "fanout_reads": sum(k.fanout_reads for k in self.keys.values())}

    def ramp(self, ramp: Ramp) -> dict[str, Any]:
        """One ramp's figures: its writes, throttled, refused and failed, its reshards,
        the seconds from its start until a second with no throttle for good (None:
        throttled to its end), and until admission held nothing back for good."""
        key = self.keys[ramp.value]
        window = range(ramp.start, ramp.end)
        writes = sum(key.offered[s] for s in window)
        throttled = sum(key.throttled[s] for s in window)
        refused = sum(key.refused[s] for s in window)
        last = max((s for s in window if key.throttled[s] >= 0.5), default=None)
        cure = 0 if last is None else (None if last >= ramp.end - 1 else last + 1 - ramp.start)
        held = max((s for s in window if key.refused[s] >= 0.5), default=None)
        later = [r.start for r in self.load.ramps if r.value == ramp.value and r.start > ramp.start]
        until = min([ramp.end + SETTLE_S, *later])
        return {"name": ramp.name, "value": ramp.value, "start_s": ramp.start,
                "end_s": ramp.end, "writes": writes, "throttled": throttled,
                "throttled_share": throttled / writes if writes else 0.0,
                "admission_refused": refused,
                "admission_refused_share": refused / writes if writes else 0.0,
                "writes_failed": sum(key.failed[s] for s in window),
                "reshards": sum(1 for m in key.migrations if ramp.start <= m.started < until),
                "time_to_cure_s": cure,
                "time_to_admitted_s": 0 if held is None else (
                    None if held >= ramp.end - 1 else held + 1 - ramp.start)}


def _static_policy(key: SimKey, sizer: PlannerSizer, noise: float, rates: Sequence[float],
                   ) -> ShardPolicy:
    peak = max(rates, default=0.0) * key.costs.entry * (1 + noise)
    n = sizer(key.value, peak, None, exact=True)
    return ShardPolicy(shards=n) if n > 1 else ShardPolicy()


def run_mode(load: DayLoad, mode: str, profile: Profile, policy: AutopilotPolicy, *,
             seed: int = 1, namespace: str = "index", costs: MigrationCosts | None = None,
             every_key: bool = False) -> ModeRun:
    """Run ``load`` one way (``MODES``) on ``profile``'s table; see the module docstring.

    ``costs`` overrides the migration's settings (default: the runner's, with the
    policy's retention and the load's item size). ``every_key`` runs every shard key on
    the engine, none folded or standing for others (slower: what shows that grouping
    changes nothing). A move counts as an entry write at each end, each accepted on its
    own (the store takes it in one transaction), with one placement record between them.
    InvalidInput for a policy that names a tier (the simulation has no tier tables) or an
    unknown mode.
    """
    if mode not in MODES:
        raise InvalidInput(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    if policy.tier is not None:
        raise InvalidInput("the autopilot simulation has no tier tables: leave tier out "
                           "of the policy")
    started = time.process_time()
    workload = load.workload
    duration = workload.duration
    engine = FluidEngine(profile, namespace=namespace)
    gsi = profile.layout == "gsi"
    resource = 1 if gsi else 0
    group = not profile.partitions and not every_key
    fold = group and profile.capacity == "on-demand" and not gsi
    sizer = PlannerSizer(profile, item_bytes=_item_bytes(workload.values), namespace=namespace,
                         headroom=policy.headroom)
    attempts = 1 + retry_seconds(RetryPolicy())
    run = ModeRun(mode, load, {}, policy, tables=tables_of(engine))
    writes_of, deletes_of, reads_of, moves_of = {}, {}, {}, {}
    for value, spec in workload.values.items():
        base = ShardPolicy(shards=spec.shards) if spec.shards and spec.shards > 1 \
            else ShardPolicy()
        key = SimKey(value, spec, Costs.of(spec, profile), base,
                     load.entries.get(value, 0.0), attempts, duration)
        writes_of[value] = series(spec.write.steps, spec.write.bursts, duration)
        deletes_of[value] = series(spec.delete.steps, spec.delete.bursts, duration)
        reads_of[value] = series(spec.read.steps, spec.read.bursts, duration)
        # items moving in and out, a second: one entry write at each end
        moves_of[value] = (_moves(workload, value, duration, True),
                           _moves(workload, value, duration, False))
        if mode == "static":
            key.policy = _static_policy(key, sizer, load.noise, [
                w + d + i + o for w, d, i, o in zip(writes_of[value], deletes_of[value],
                                                    *moves_of[value], strict=True)])
        if mode == "autopilot":
            key.window = HeatWindow(policy)
        run.keys[value] = key
    facts = TableFacts(profile.write_ceiling, _write_limit(profile))
    migration_costs = costs or MigrationCosts(
        move_units=next(iter(run.keys.values())).costs.entry,
        row_read_units=profile.read_cost(_item_bytes(workload.values) * 1000, 1000, True)
        / 1000, retain=policy.retain)
    rng = random.Random(seed)
    noise = load.noise
    ident: dict[str, int] = {}

    def register(name: str) -> int:
        return engine.key(name, index=gsi)

    keys = list(run.keys.values())
    watch = mode == "autopilot"
    locate_units = keys[0].costs.locate if keys else 1.0
    tick = max(1, round(policy.tick))
    write_ceiling = QUIET * profile.write_ceiling
    read_ceiling = QUIET * profile.read_ceiling
    watermark = policy.admit_at * profile.write_ceiling
    for second in range(duration):
        now = float(second)
        table_writes = table_reads = locates = fresh = 0.0
        # the units each resource is asked this second at first attempt: writes, reads
        asked = [[0.0, 0.0] for _ in engine.resources]
        write_flows: list[Flow] = []
        read_flows: list[Flow] = []
        sent: list[_Sent] = []
        for key in keys:
            value, cost = key.value, key.costs
            factor = 1.0 + noise * (2 * rng.random() - 1) if noise else 1.0
            read_factor = 1.0 + noise * (2 * rng.random() - 1) if noise else 1.0
            puts = writes_of[value][second] * factor
            deletes = deletes_of[value][second] * factor
            reads = reads_of[value][second] * read_factor
            arriving, leaving = moves_of[value][0][second], moves_of[value][1][second]
            new = puts + deletes + arriving + leaving
            # a move writes one placement record (and reads one) for its two ends
            placed = (puts + deletes + (arriving + leaving) / 2) / new if new else 1.0
            key.offered[second] = new
            demand = new * cost.entry
            key.tick_units += demand
            migration = key.migration
            if watch and key.budget is None and migration is None \
                    and demand > watermark * key.policy.shards:
                _act(run, guard(policy, value, KeyView(shards=key.policy.shards), demand,
                                profile.write_ceiling, now, limit=facts.write_limit),
                     migration_costs)
            admitted = key.admit(second, new)
            ops = admitted + sum(key.retries)
            locates += ops * placed
            fresh += new * placed
            # the table's write units of one write at the table level: its entry and its share
            # of a placement record
            per_write = cost.entry + cost.placement * placed
            one = _Sent(key, admitted, ops,
                        (puts + arriving - deletes - leaving) / new if new else 0.0)
            sent.append(one)
            if migration is None:
                n = key.policy.shards
                query = cost.query(n)
                page_units = reads * query * n
                key.reads += reads
                key.fanout_reads += reads * n
                key.tick_reads += page_units
                if fold and ops * cost.entry <= write_ceiling * n \
                        and reads * query <= read_ceiling:
                    # nothing here a partition refuses: the table level alone decides
                    table_writes += ops * per_write
                    table_reads += page_units
                    asked[0][0] += new * per_write
                    asked[0][1] += page_units
                    continue
                mover = 0.0
            else:
                mover, runner_reads = migration.work(now)
                table_reads += runner_reads
                asked[0][1] += runner_reads
            found = classes(key, now, ident, register, group=group)
            fanout = sum(c.count for c in found if c.read)
            if migration is not None:
                page_units = reads * cost.query(max(1, fanout)) * fanout
                key.reads += reads
                key.fanout_reads += reads * fanout
                key.tick_reads += page_units
            mine, mine_reads, moving, hottest, hottest_read = flows(
                key, found, ops, reads, mover, resource, placed)
            one.mover = mover
            if fold and hottest <= write_ceiling and hottest_read <= read_ceiling:
                moved = mover * (2 * cost.entry + cost.placement)
                table_writes += ops * per_write + moved
                table_reads += page_units
                asked[0][0] += new * per_write + moved
                asked[0][1] += page_units
                continue
            # what the table is asked at first attempt (admission and retries aside): a
            # table that serves it throttles nothing, so nothing is tried again
            if ops > 0:
                _ask(asked, mine, new / ops)
            elif new > 0:  # admission held every write back: the load asks them all the same
                _ask(asked, flows(key, found, new, 0.0, 0.0, resource, placed)[0], 1.0)
            _ask(asked, mine_reads, 1.0)
            if moving is not None:
                _ask(asked, [moving], 1.0)
            one.first, one.count = len(write_flows), len(mine)
            write_flows += mine
            read_flows += mine_reads
            if moving is not None:
                one.moving = len(write_flows)
                write_flows.append(moving)
        if not write_flows and not read_flows and fold:
            located, table_share = _table_only(engine, second, locates * locate_units,
                                               table_reads, table_writes)
            held = [table_writes * (1.0 - located)]
        else:
            # the placement reads before each write and the runners' reads (table level)
            locating = len(read_flows)
            read_flows.append(Flow(locates, False, (Part(0, None, locate_units),)))
            read_flows.append(Flow(table_reads, False, (Part(0, None, 1.0),)))
            read_results = _step(engine, second, read_flows)
            located = _share(read_flows[locating], read_results[locating])
            table_at = len(write_flows)
            write_flows.append(Flow(table_writes, True, (Part(0, None, 1.0),)))
            if located < 1.0:  # a write whose placement read was refused is not sent
                sending = [f._replace(rate=f.rate * located) for f in write_flows]
                held = held_units(write_flows, sending, len(engine.resources))
                write_flows = sending
            else:
                held = None
            write_results = _step(engine, second, write_flows)
            table_share = _share(write_flows[table_at], write_results[table_at]) * located
        asked[0][1] += fresh * locate_units
        record_tables(engine, run.tables, held, [a for pair in asked for a in pair])
        for one in sent:
            key = one.key
            if one.first < 0:
                share, moved = table_share, one.mover * table_share
            else:
                accepted = sum(write_results[i].accepted
                               for i in range(one.first, one.first + one.count))
                share = min(1.0, accepted / one.ops) if one.ops > 0 else located
                moved = write_results[one.moving].accepted if one.moving >= 0 else 0.0
            key.settle(second, one.admitted, share)
            key.entries = max(0.0, key.entries + one.net * one.admitted * share)
            migration = key.migration
            if migration is not None:
                migration.tick(now + 1, key.entries, moved)
                if migration.done:
                    key.policy = migration.new
                    key.last_change = now + 1
                    key.migration = None
        if watch and (second + 1) % tick == 0:
            _decide(run, now + 1, tick, facts, sizer, migration_costs)
    run.plans = sizer.plans
    run.seconds = time.process_time() - started
    return run


def _step(engine: FluidEngine, second: int, flows: list[Flow]) -> list[FlowResult]:
    """Step the engine over the flows with a rate; zero flows get an empty result."""
    live = [i for i, f in enumerate(flows) if f.rate > 0]
    results = engine.step(second, [flows[i] for i in live])
    out = [FlowResult(0.0, 0.0)] * len(flows)
    for i, result in zip(live, results, strict=True):
        out[i] = result
    return out


def _share(flow: Flow, result: FlowResult) -> float:
    return result.accepted / flow.rate if flow.rate > 0 else 1.0


def _decide(run: ModeRun, now: float, tick: int, facts: TableFacts, sizer: PlannerSizer,
            costs: MigrationCosts) -> None:
    """One tick of the policy: sample every key's heat, decide, act."""
    policy = run.policy
    heats, views = {}, {}
    for value, key in run.keys.items():
        assert key.window is not None
        key.window.add(now, key.tick_units / tick, key.tick_reads / tick, span=float(tick))
        key.tick_units = key.tick_reads = 0.0
        heats[value] = key.window.summary()
        migration = key.migration
        view_migration = None if migration is None else MigrationView(
            migration.old.shards, migration.new.shards, migration.state, migration.started,
            migration.writers_follow_at())
        views[value] = KeyView(shards=key.policy.shards, migration=view_migration,
                               last_change=key.last_change, budget=key.budget,
                               lead=survey_seconds(key.entries, costs) + costs.lease
                               + costs.margin + costs.ttl, budget_since=key.budget_since,
                               flaps=key.flaps)
    for decision in decide(policy, facts, heats, views, now, sizer):
        _act(run, decision, costs)


def _act(run: ModeRun, decision: Decision | None, costs: MigrationCosts) -> None:
    """Carry out one decision: record it, set a budget or start a migration."""
    if decision is None or decision.action == "none":
        return
    key = run.keys[decision.key]
    run.actions.append(decision)
    if decision.action == "admit":
        key.budget = decision.budget
        key.budget_since = None if decision.budget is None else decision.t
        return
    key.flaps, key.shrunk_at = flaps_after(run.policy, decision.action, decision.t,
                                           key.flaps, key.shrunk_at, key.last_change)
    new = ShardPolicy(shards=decision.to_n) if decision.to_n > 1 else ShardPolicy()
    key.migration = MigrationModel(decision.key, key.policy, new, decision.t, key.entries,
                                   costs)
    key.migrations.append(key.migration)


def _ask(asked: list[list[float]], flows: list[Flow], share: float) -> None:
    """Add ``share`` of ``flows``' units to what each resource is asked, by direction."""
    for flow in flows:
        for part in flow.parts:
            asked[part.resource][0 if flow.write else 1] += flow.rate * part.units * share


def _table_only(engine: FluidEngine, second: int, locate_units: float, read_units: float,
                write_units: float) -> tuple[float, float]:
    """A second in which every key is folded: the engine's table-level limits alone, which
    is all the engine does with spread parts on a table without partitions. Returns the
    shares of the placement reads and of the writes accepted."""
    now = float(second)
    table = engine.resources[0].table
    table.roll(second)
    shares = []
    located = 1.0
    for write, units in ((False, locate_units + read_units), (True, write_units)):
        if write:
            units *= located
        room, _ = table.room(write, now, 1.0)
        taken = min(units, max(0.0, room))
        if taken > 0:
            table.take(taken, write, now, 1.0)
        if units > taken:
            table.refuse(units - taken, write)
        share = taken / units if units > 0 else 1.0
        if not write:
            located = share
        shares.append(share)
    return located, shares[1] * located


def _moves(workload: Workload, value: str, duration: int, arriving: bool) -> array[float]:
    """Items moving into (or out of) ``value`` in each second."""
    total = array("d", bytes(8 * duration))
    for move in workload.moves:
        if (move.target if arriving else move.source) == value:
            for second, rate in enumerate(series(move.rate.steps, move.rate.bursts,
                                                 duration)):
                total[second] += rate
    return total


def _item_bytes(values: Any) -> int:
    sizes = [spec.item_bytes for spec in values.values()]
    return max(sizes) if sizes else 1024


def _write_limit(profile: Profile) -> float:
    """The write units a second the table serves at once (what ``isolate_share`` is of)."""
    if profile.capacity == "provisioned":
        return min(profile.provisioned_write, profile.quota_write)
    return min(profile.quota_write, profile.max_write, profile.warm_write)
