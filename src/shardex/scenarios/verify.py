"""``verify_plan``: a plan checked on the rate-level engine (``shardex plan --verify``).

The plan's routing, on the table it was judged on, written and read at its peaks for as
long as its verdict needs to show: the simulation agrees with the verdict, or says where
it does not.
"""

from __future__ import annotations

from typing import Any

from shardex.errors import InvalidInput
from shardex.plan import Plan
from shardex.scenarios.simulate import simulate
from shardex.scenarios.workload import Schedule, ValueLoad, Workload

__all__ = ["verify_plan"]


def verify_plan(plan: Plan, *, seconds: int | None = None) -> dict[str, Any]:
    """Simulate ``plan`` on the table it was judged on: its routing, at the placement at
    the p99 of those it drew (``Busiest.worst_namespace``: of the writes, or of the
    values' reads when they come nearer their ceiling), each value written at its
    peak and read at its measured read peak (``ValuePlan.read_units_per_s``), with the
    item writes the plan counted (``TablePlan.item_writes_per_s``: one
    placement record and one locate each), for ``seconds`` (default:
    ``Verdict.watch_seconds``, long enough to see the split or growth the verdict expects).

    Returns the run's ``shardex.simulate/1`` figures that matter here, ``namespace``,
    ``watched`` (what the run saw of what the plan expects) and ``agrees`` (the plan's
    verdict is the simulation's).
    """
    if plan.profile is None or plan.verdict is None:
        raise InvalidInput("a plan to verify carries its profile and verdict (plan_shards)")
    values = {value: ValueLoad(value, write=Schedule(((0.0, p.peak),)),
                               item_bytes=plan.item_bytes,
                               read_item_bytes=plan.read_item_bytes,
                               read_units=Schedule(((0.0, p.read_units_per_s),))
                               if p.read_units_per_s else None)
              for value, p in plan.values.items()}
    duration = seconds if seconds is not None else int(plan.verdict.watch_seconds)
    # the p99 placement of the entries' writes, or of the values' reads where those come
    # nearer their ceiling: the placement the verdict is tightest on
    keyed = [p for p in plan.partitions if p.busiest.keys]
    tightest = max(keyed, key=lambda p: p.busiest.worst / p.ceiling if p.ceiling else 0.0,
                   default=plan.partitions[0] if plan.partitions else None)
    namespace = tightest.busiest.worst_namespace if tightest is not None else plan.namespace
    # The plan's item writes, not one a value's write: they differ with --item-writes, and
    # a plan of a diagnosis has none unless told (its measured units are the entries as
    # written, size and amplification included; a log counts units, not items, and holds
    # no placement records of a layout not yet built). Writing one a unit offered 3x what
    # the plan judged, and a plan that kept up simulated at 70%.
    items = plan.table.item_writes_per_s if plan.table is not None else None
    sim = simulate(Workload(duration, values, origin="plan --verify",
                            item_writes=None if items is None else Schedule(((0.0, items),))),
                   plan.routing(), plan.profile, latency=plan.latency, namespace=namespace)
    run = sim.to_dict()
    watched = []
    last = min(60, duration)
    tail = [sum(sim.timeline[v][1][-last:]) / max(1e-9, sum(sim.timeline[v][0][-last:]))
            for v in sim.timeline]
    for expected in plan.verdict.expects:
        needed = plan.profile.split_delay_seconds if expected == "split" \
            else plan.profile.peak_window_seconds
        if duration < needed:
            watched.append(f"ran {duration:,} s: too short to see the {expected} the plan "
                           f"expects after {needed:,.0f} s (assumed)")
    if plan.verdict.expects:
        first, after = sim.partitions.get("index" if plan.profile.layout == "gsi"
                                          else "table", (0, 0))
        watched.append(f"partitions {first} -> {after}; in the last {last} s "
                       f"{100 * min(tail, default=1.0):.1f}% or more of each value's writes "
                       "accepted")
    keeps = plan.verdict.keeps_up
    return {key: run[key] for key in ("schema", "duration_s", "profile", "throttles",
                                      "tables", "partitions", "verdict")} | {
        "namespace": namespace, "watched": watched, "agrees": keeps == sim.ok,
        "values": {value: {k: v[k] for k in ("shards", "offered_writes_per_s",
                                             "accepted_writes_per_s", "accepted_ratio",
                                             "offered_read_units_per_s", "read_units_per_s")}
                   for value, v in run["values"].items()}}
