"""``simulate``: a workload against a layout on the rate-level engine, second by second.

Each logical write of a value becomes what the index does for it in the store: a
strongly consistent read of the item's placement (``locate``), then one write that
changes the placement and the entries (a transaction costing ``transaction_cost`` in
the ``table`` layout; the item's own update and its GSI entries in the ``gsi``
layout). A put writes one entry on one of the value's N shard keys, a delete removes
one, a move does both on two values (each entry write times the profile's
``entry_writes``: 4 entity writes on Azure Table Storage); the placement records of the
items are spread over the whole table. A page read of a value asks every shard key for
its share of the page, as the fan-out does (``shardex.scenarios.flows`` makes the flows).
All of it runs on ``shardex.sim.fluid`` with the same capacity model as ``memory://``.

Counting: an *entry write* is a put, a delete or one end of a move on a shard key (a
move counts on both values, as ``OrdersLoad.peak_writes`` does); refused operations
count once each, as the engine has no retries (a write whose locate was refused is not
sent, but the table's write units asked count it: once reads are served it asks as
much); a workload from a diagnosis offers its measured units, one unit a write, and its
measured reads (``ValueLoad.read_units``) one unit a read, spread over the value's shard
keys against the read ceiling. A value's ``accepted_ratio`` is the least of its writes',
its page reads' and its read units' accepted shares.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shardex.documents import SIMULATE_SCHEMA, rounded
from shardex.routing import Routing
from shardex.scenarios.flows import (
    PAGE,
    UNITS,
    Flows,
    build,
    held_units,
    placed,
    rates_at,
)
from shardex.scenarios.table_use import (
    TableUse,
    avoid_words,
    limit_words,
    record_tables,
    served_words,
    tables_of,
)
from shardex.scenarios.workload import ValueLoad, Workload
from shardex.sim.fluid import Flow, FlowResult, FluidEngine
from shardex.sim.latency import LatencyModel
from shardex.sim.profiles import Profile
from shardex.wording import counted

__all__ = ["ACCEPTED_ENOUGH", "Simulation", "routing_for", "simulate"]

# A value passes when at least this share of its offered writes is accepted.
ACCEPTED_ENOUGH = 0.999
_TIMELINE_POINTS = 300


@dataclass(slots=True)
class _Count:
    offered: float = 0.0
    accepted: float = 0.0

    @property
    def ratio(self) -> float:
        return self.accepted / self.offered if self.offered else 1.0


@dataclass(slots=True)
class Simulation:
    """The outcome of one simulated run: per value and shard key, tables, throttles."""

    workload: Workload
    routing: Routing
    profile: Profile
    latency: LatencyModel
    values: dict[str, _Count] = field(default_factory=dict)
    shard_keys: dict[str, dict[str, _Count]] = field(default_factory=dict)
    reads: dict[str, _Count] = field(default_factory=dict)
    read_units: dict[str, float] = field(default_factory=dict)
    # a diagnosis's measured read units, offered and accepted; and every read unit offered
    unit_reads: dict[str, _Count] = field(default_factory=dict)
    offered_read_units: dict[str, float] = field(default_factory=dict)
    peaks: dict[str, float] = field(default_factory=dict)
    throttles: dict[str, float] = field(default_factory=dict)
    tables: list[TableUse] = field(default_factory=list)
    timeline: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)
    partitions: dict[str, tuple[int, int]] = field(default_factory=dict)
    hot: dict[str, str] = field(default_factory=dict)
    # shard keys whose writes throttled placement reads held back
    held: set[str] = field(default_factory=set)

    @property
    def duration(self) -> int:
        return self.workload.duration

    def shards(self, value: str) -> int:
        return self.routing.policy(value).shards

    @property
    def ok(self) -> bool:
        """Whether every value had its writes and reads accepted (``ACCEPTED_ENOUGH``)."""
        return all(c.ratio >= ACCEPTED_ENOUGH for c in (*self.values.values(),
                                                         *self.reads.values(),
                                                         *self.unit_reads.values()))

    def accepted_ratio(self, value: str) -> float:
        """The least of ``value``'s writes', page reads' and read units' accepted shares."""
        return min(count.ratio for count in (self.values[value],
                                             self.reads.get(value, _Count()),
                                             self.unit_reads.get(value, _Count())))

    def causes(self) -> list[str]:
        """What throttled, in words, the table limits first, with what would avoid it."""
        now: list[str] = []  # what binds
        then: list[str] = []  # what binds once that is served
        for table in self.tables:
            said = self._limit_cause(table)
            if said is not None:
                (then if said[1] else now).append(said[0])
        out = now + then
        profile = self.profile
        for table in self.tables:
            if table.refused_seconds or not self._starts_short(table):
                continue
            first, last = self.partitions[table.resource]
            ceiling = profile.write_ceiling if table.write else profile.read_ceiling
            peak = table.peak_asked
            units = "units" if table.both else f"{table.direction} units"
            name = profile.limit_setting(table.write)
            out.append(f"the {table.resource} starts with {counted(first, 'partition')}, "
                       f"{first * ceiling:,.0f} {units} a second in all"
                       + (" (reads and writes alike)" if table.both else "")
                       + ", and the workload "
                       f"asks up to {peak:,.0f}; it had {last} when the run ended ("
                       + (f"set by partitions={first}; {name} sets it where partitions is "
                          "not given)" if profile.partitions is not None else
                          f"{name} sets how many it starts with)"))
        worst = sorted([(count.ratio, key, value) for value, keys in self.shard_keys.items()
                        for key, count in keys.items() if count.ratio < ACCEPTED_ENOUGH]
                       + [(count.ratio, f"{PAGE}{value}", value)
                          for value, count in self.reads.items()
                          if count.ratio < ACCEPTED_ENOUGH]
                       + [(count.ratio, f"{UNITS}{value}", value)
                          for value, count in self.unit_reads.items()
                          if count.ratio < ACCEPTED_ENOUGH])
        for ratio, key, value in worst[:3]:
            n = self.shards(value)
            if key.startswith((PAGE, UNITS)):
                what = "page reads" if key.startswith(PAGE) else "read units"
                out.append(f"{value} (N={n}) accepted {100 * ratio:.1f}% of its {what}")
                continue
            why = ([f"its partition {self.hot[key]} throttled it"] if key in self.hot else []) \
                + (["its placement reads were throttled"] if key in self.held else [])
            out.append(f"{key} ({value}, N={n}) accepted {100 * ratio:.1f}% of "
                       f"its entry writes" + (f"; {' and '.join(why)}" if why else ""))
        return out

    def _limit_cause(self, table: TableUse) -> tuple[str, bool] | None:
        """What ``table``'s own limit did, in words with what avoids it, and whether it
        binds only once what binds now is served; None if it kept up with what it was
        asked.

        A table asked past its limit may have refused nothing itself: its writes held
        back by throttled reads (``held_seconds``: they are asked all the same once the
        reads are served), or its hot partitions refusing first (said here unless the
        partitions' own cause in ``causes`` says it: they hold no more than the limit).
        """
        peak = table.peak_asked
        # writes held back by throttled reads (on one budget, the budget itself held them)
        held = not table.refused_seconds and table.held_seconds > 0 and not table.both
        over = not table.refused_seconds and not held and table.over_seconds > 0 \
            and not self._starts_short(table)
        if not table.refused_seconds and not held and not over:
            return None
        if held or over:
            said = (f"once its reads are served, the {table.resource}'s writes ask up to "
                    if held else f"the {table.resource}'s {table.asks} ask up to ") \
                + f"{peak:,.0f} {self.profile.unit_word} a second, past the " \
                f"{table.served:,.0f} it served" \
                + ("" if held else ", though its partitions refused them first")
        else:
            said = (f"{limit_words(table, self.profile)} "
                    f"binds in {table.refused_seconds:,} s of {self.duration:,}: it served "
                    f"{served_words(table, self.profile)}, the workload asks up to "
                    f"{peak:,.0f}")
        return said + avoid_words(table, self.profile), held or over

    def _starts_short(self, table: TableUse) -> bool:
        """Whether ``table``'s partitions at the start hold less than it was asked at its
        peak (by more than a floating-point hair): ``causes`` says so of them."""
        first = self.partitions.get(table.resource, (0, 0))[0]
        ceiling = self.profile.write_ceiling if table.write else self.profile.read_ceiling
        return bool(first) and table.peak_asked > first * ceiling * (1 + 1e-9)

    def verdict(self) -> str:
        """One line: ``ok`` or ``throttled``, and why."""
        if self.ok:
            least = min((c.ratio for c in self.values.values()), default=1.0)
            return f"ok: {100 * least:.2f}% or more of every value's writes accepted"
        causes = self.causes()
        return "throttled: " + (causes[0] if causes else "some operations were refused")

    def to_dict(self) -> dict[str, Any]:
        """The ``shardex.simulate/1`` document (docs/json.md), rounded once."""
        duration = self.duration
        values = {}
        for value, count in self.values.items():
            n = self.shards(value)
            reads = self.reads.get(value, _Count())
            values[value] = {
                "shards": n,
                "offered_writes": count.offered, "accepted_writes": count.accepted,
                "offered_writes_per_s": count.offered / duration,
                "accepted_writes_per_s": count.accepted / duration,
                "accepted_ratio": self.accepted_ratio(value),
                "peak_offered_writes_per_s": self.peaks.get(value, 0.0),
                "reads_per_s": reads.offered / duration,
                "accepted_reads_per_s": reads.accepted / duration,
                "queries_per_s": n * reads.offered / duration,
                "read_units_per_s": self.read_units.get(value, 0.0) / duration,
                "offered_read_units_per_s": self.offered_read_units.get(value, 0.0) / duration,
                "fanout_p50_ms": 1000.0 * self.latency.fanout_quantile(n, 0.5),
                "fanout_p99_ms": 1000.0 * self.latency.fanout_quantile(n, 0.99),
                "shard_keys": {key: {"offered_writes": c.offered, "accepted_writes": c.accepted,
                                     "accepted_ratio": c.ratio,
                                     "throttled_by": self.hot.get(key)}
                               for key, c in self.shard_keys.get(value, {}).items()},
            }
        step = max(1, math.ceil(duration / _TIMELINE_POINTS))
        doc: dict[str, Any] = rounded({
            "schema": SIMULATE_SCHEMA, "source": self.workload.origin, "duration_s": duration,
            "profile": {"name": self.profile.name, **_settings(self.profile)},
            "routing": self.routing.to_dict(),
            "values": values,
            # a reason seen only for a sliver of an operation is no throttle to report
            "throttles": {reason: count for reason, count in sorted(self.throttles.items())
                          if count >= 0.5},
            "tables": [table.to_dict() for table in self.tables],
            "partitions": {name: {"first": first, "last": last}
                           for name, (first, last) in self.partitions.items()},
            "verdict": {"ok": self.ok, "summary": self.verdict(), "causes": self.causes()},
            "timeline": {"step_s": step, "values": {
                value: {"offered_writes_per_s": _downsample(offered, step),
                        "accepted_writes_per_s": _downsample(accepted, step)}
                for value, (offered, accepted) in self.timeline.items()},
                "tables": [{"resource": t.resource, "direction": t.direction,
                            "used_per_s": _downsample(t.used, step),
                            "limit_per_s": _downsample(t.limit, step)} for t in self.tables]},
            # only where the workload left something of its source out, or past its end
            **({"notes": notes} if (notes := [*self.workload.notes, *self.workload.unrun()])
               else {}),
        })
        return doc


def _settings(profile: Profile) -> dict[str, Any]:
    keep = ("capacity", "layout", "unit", "write_ceiling", "read_ceiling", "warm_write",
            "warm_read", "provisioned_write", "provisioned_read", "quota_write", "quota_read",
            "max_write", "max_read", "partitions", "split_delay_seconds", "transaction_cost",
            "consistent")
    out = {name: getattr(profile, name) for name in keep}
    out["partitions"] = profile.initial_partitions
    if profile.capacity == "on-demand":
        for name in ("provisioned_write", "provisioned_read"):
            del out[name]
    else:
        for name in ("warm_write", "warm_read", "max_write", "max_read"):
            del out[name]
    return out


def _downsample(series: list[float], step: int) -> list[float]:
    return [sum(series[i:i + step]) / len(series[i:i + step])
            for i in range(0, len(series), step)]


def _beside(writes: list[Flow], expect: float,
            last: tuple[list[Flow], float, list[Flow]] | None
            ) -> tuple[list[Flow], float, list[Flow]]:
    """``writes`` as the reads of a second on one budget make room for them (the rate
    engine's ``beside``): those a locate gates at ``expect`` of their rate; ``last``
    again while the same (the engine works the same flows out once)."""
    if last is not None and last[0] is writes and last[1] == expect:
        return last
    return writes, expect, [flow._replace(rate=flow.rate * expect) if placed(flow) else flow
                            for flow in writes]


def simulate(workload: Workload, routing: Routing, profile: Profile, *,
             latency: LatencyModel | None = None, namespace: str = "index") -> Simulation:
    """Run ``workload`` against ``routing`` on ``profile``'s table for its duration.

    ``namespace`` is the index's name: keys hash to partitions with it, as in the store.
    """
    engine = FluidEngine(profile, namespace=namespace)
    gsi = profile.layout == "gsi"
    sim = Simulation(workload, routing, profile, latency or LatencyModel())
    keys: dict[str, list[tuple[str, int]]] = {}
    for value, load in workload.values.items():
        shard_keys = routing.policy(value).shard_keys(value)
        keys[value] = [(key, engine.key(key, index=gsi, rising=load.rising))
                       for key in shard_keys]
        sim.values[value] = _Count()
        sim.shard_keys[value] = {key: _Count() for key in shard_keys}
        sim.timeline[value] = ([], [])
    sim.tables = tables_of(engine)
    built: tuple[tuple[float, ...], Flows, Flows] | None = None
    # the writes a locate lets by, and the write units on each resource it holds back
    held: tuple[list[Flow], float, list[Flow], list[float]] | None = None
    # on one budget (shared_units), the share of the writes the reads make room for:
    # what the locates let by, estimated from the seconds before (``_beside``)
    expect, writes_beside = 1.0, None
    for second in range(workload.duration):
        rates = rates_at(workload, float(second))
        if built is None or built[0] != rates:
            # a steady workload builds its flows once
            built = (rates, *build(workload, keys, profile, rates))
        _, reads, writes = built
        if profile.shared_units:
            writes_beside = _beside(writes.flows, expect, writes_beside)
        read_results = engine.step(second, reads.flows,
                                   beside=writes_beside[2] if writes_beside else ())
        located = next((result.accepted / flow.rate for flow, result, ends in zip(
            reads.flows, read_results, reads.ends, strict=True) if ends == (("", "locate"),)),
            1.0)
        _account(sim, reads, read_results, {})
        # an operation whose locate was throttled never gets to write; the same flows
        # held back alike are the same object, which the engine works out once
        if located >= 1.0:
            sent, held_back = writes.flows, None
        elif held is not None and held[0] is writes.flows and held[1] == located:
            sent, held_back = held[2], held[3]
        else:
            sent = [flow._replace(rate=flow.rate * located) if placed(flow) else flow
                    for flow in writes.flows]
            held_back = held_units(writes.flows, sent, len(engine.resources))
            held = (writes.flows, located, sent, held_back)
            if located < 1.0 - 1e-9:  # not a rounding error's hold
                sim.held.update(key for flow, ends in zip(writes.flows, writes.ends,
                                                          strict=True)
                                if placed(flow) for _, key in ends)
        # halfway to what the locates let by now: the estimate settles without swinging
        # about it (a hold makes the next second's reads take less, so more are let by)
        expect = (expect + min(1.0, located)) / 2
        now_counts: dict[str, list[float]] = {}
        _account(sim, writes, engine.step(second, sent), now_counts)
        for value, (offered, accepted) in sim.timeline.items():
            offered_now, accepted_now = now_counts.get(value, [0.0, 0.0])
            offered.append(offered_now)
            accepted.append(accepted_now)
            sim.peaks[value] = max(sim.peaks.get(value, 0.0), offered_now)
        # the writes a throttled locate held back are asked all the same once reads are
        # served: a write limit advised from fewer throttles then
        record_tables(engine, sim.tables, held_back)
    for resource in engine.resources:
        partitions = resource.partitions
        sim.partitions[resource.kind] = (partitions.count, len(partitions))
    return sim


def _targets(sim: Simulation, flows: Flows) -> list[list[tuple[str, _Count, _Count | None,
                                                                 float]]]:
    """Per flow: (value, its counter, its shard key's counter or None for a read, the
    share of the flow's rate it counts) for every end the flow makes."""
    out = []
    for ends in flows.ends:
        targets: list[tuple[str, _Count, _Count | None, float]] = []
        for value, key in ends:
            if not value:
                continue
            if key.startswith(PAGE):
                n = len(sim.shard_keys[value])
                targets.append((value, sim.reads.setdefault(value, _Count()), None, 1.0 / n))
            elif key.startswith(UNITS):
                targets.append((value, sim.unit_reads.setdefault(value, _Count()), None, 1.0))
            else:
                targets.append((value, sim.values[value], sim.shard_keys[value][key], 1.0))
        out.append(targets)
    return out


def _account(sim: Simulation, flows: Flows, results: list[FlowResult],
             now: dict[str, list[float]]) -> None:
    """Count one step's results: per shard key and value (offered as in ``flows``, before
    any locate was refused), reads, throttles by reason, and into ``now`` per value."""
    if flows.targets is None:
        flows.targets = _targets(sim, flows)
    throttles = sim.throttles
    for flow, result, ends, targets in zip(flows.flows, results, flows.ends, flows.targets,
                                           strict=True):
        refused = result.refused
        if refused > 1e-12 and result.reason:
            throttles[result.reason] = throttles.get(result.reason, 0.0) + refused
            if result.partition is not None:
                for _, key in ends:
                    sim.hot.setdefault(key.removeprefix(PAGE).removeprefix(UNITS),
                                       result.partition)
        rate, accepted = flow.rate, result.accepted
        for value, count, shard, share in targets:
            if shard is None:  # a page read: each of its N shard queries counts 1/N
                count.offered += rate * share
                count.accepted += accepted * share
                units = flow.parts[0].units
                sim.read_units[value] = sim.read_units.get(value, 0.0) + accepted * units
                sim.offered_read_units[value] = sim.offered_read_units.get(value, 0.0) + \
                    rate * units
                continue
            shard.offered += rate
            shard.accepted += accepted
            count.offered += rate
            count.accepted += accepted
            totals = now.get(value)
            if totals is None:
                totals = now[value] = [0.0, 0.0]
            totals[0] += rate
            totals[1] += accepted


def routing_for(values: Mapping[str, ValueLoad], routing: Routing | None,
                overrides: Mapping[str, int]) -> Routing:
    """The layout simulated: ``routing`` (or the values' own N), with ``overrides`` applied."""
    from shardex.routing import ShardPolicy

    policies = dict(routing.overrides) if routing is not None else {
        value: ShardPolicy(shards=load.shards) for value, load in values.items()
        if load.shards and load.shards > 1}
    for value, n in overrides.items():
        policies[value] = ShardPolicy(shards=n)
    default = routing.default if routing is not None else ShardPolicy(shards=1)
    return Routing(default=default, overrides={v: p for v, p in policies.items()
                                               if p != default})
