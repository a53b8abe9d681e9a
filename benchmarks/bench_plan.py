"""Plan benchmark: does ``shardex plan``'s verdict hold when its own table is simulated?

Run: .venv/bin/python benchmarks/bench_plan.py [--only NAME]

For each scenario (steady mixes, sale ramps on new, warm and provisioned tables, GSI and
index-table mode, items of 0.5 to 8 KB, Azure Table Storage, Cosmos DB, and the three
scenarios of issue 21 where the planner used to say "keeps up" and the simulation
accepted 79%, 64% and 93%):

1. ``plan_shards`` plans N from the workload's peaks (each value's peak entry writes, a
   move counting on both values; item writes at their peak) on the scenario's table, and
   gives its verdict (``keeps up`` or ``throttles``);
2. ``simulate`` runs the whole workload (ramps, moves, every value) with that routing on
   the same table, at the placement of the shard keys at the p99 of those the plan drew,
   for the workload's duration or as long as the verdict says it must wait (a split for
   heat, an on-demand table's growth), whichever is longer;
3. the row says the verdict, the N, the least share of any value's writes the simulation
   accepted, and whether they agree (``keeps up`` and >= 99.9% of every value's writes
   accepted, or ``throttles`` and less). The run fails (exit 1) if any row disagrees, or
   if a plan that keeps up was simulated below 99%.

``--advised N`` then draws workloads (one to three values, write and read peaks, on an
on-demand, a provisioned and a GSI table) until N of them throttle with a setting that
the verdict says avoids it: each setting's table is planned again (its plan must keep up,
with the N the verdict named) and simulated as ``plan --verify`` does (they must agree).

``--drawn N`` draws N plans of every mode (DynamoDB on demand, provisioned with and
without adaptive capacity, GSI, Azure, Cosmos DB; entry sizes, partition counts, item
writes and headroom varied) and simulates each for 120 s as ``plan --verify`` does,
printing those whose verdict the simulation does not share (a run shorter than a
verdict's watch, or a load within a hair of a ceiling, may differ: their lines say so).

``--causes N`` draws N workloads for ``simulate`` (one to three values with writes,
deletes, page reads and moves, item writes or none, N of 1 to 32, on-demand, GSI and
provisioned tables) and, for each whose verdict names a table setting, simulates again
with every setting its causes name at once (``SETTING of at least X avoids it``, and
``SETTING sets how many it starts with`` at what the workload asks): a table limit that
still binds there (refused, or asked past while its partitions refused first) was
advised short. Prints those and a total; the run fails if any.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from shardex.errors import ShardexError
from shardex.plan import plan_shards
from shardex.routing import Routing, ShardPolicy
from shardex.scenarios.simulate import simulate
from shardex.scenarios.verify import verify_plan
from shardex.scenarios.workload import Schedule, Workload, workload_from_dict
from shardex.sim import profile

ORDERS = {"PENDING": 0.70, "SHIPPED": 0.20, "DELIVERED": 0.08, "CANCELLED": 0.02}


@dataclass(frozen=True)
class Scenario:
    name: str
    why: str
    values: dict[str, Any]
    table: dict[str, Any] = field(default_factory=dict)
    mode: str = "table"
    item_bytes: int = 1024
    duration: int = 300
    moves: list[dict[str, Any]] = field(default_factory=list)
    headroom: float = 1.5


def orders(rate: float, *, item_bytes: int = 1024, steps: list[list[float]] | None = None
           ) -> dict[str, Any]:
    """Orders a second split over the four statuses (70% PENDING), steady or in steps."""
    out = {}
    for value, share in ORDERS.items():
        write: Any = rate * share if steps is None else [[at, r * share] for at, r in steps]
        out[value] = {"write": write, "item_bytes": item_bytes, "sort": "rising"}
    return out


SALE = [[0.0, 500.0], [120.0, 5000.0]]  # a 10x sale two minutes in
SCENARIOS = [
    Scenario("issue-1 warm 30k", "5,000 orders/s, 70% PENDING, warm throughput 30,000 as the "
             "old plan advised (was: keeps up, 79%)", orders(5000), {"warm_write": 30_000.0}),
    Scenario("issue-1 as advised", "the same, warmed as the plan advises now",
             orders(5000), {"warm_write": 84_000.0, "quota_write": 100_000.0}),
    Scenario("issue-2 provisioned 10k", "1,500 orders/s on a provisioned table of 10,000 "
             "write units (was: keeps up, 64%)", orders(1500),
             {"profile": "dynamodb-provisioned", "provisioned_write": 10_000.0,
              "provisioned_read": 10_000.0}),
    Scenario("issue-2 as advised", "the same, provisioned as the plan advises now",
             orders(1500), {"profile": "dynamodb-provisioned", "provisioned_write": 19_000.0,
                            "provisioned_read": 10_000.0}),
    Scenario("issue-3 sale, pre-warmed", "a 10x sale (500 -> 5,000 orders/s) on a table "
             "pre-warmed to the quota, 40,000 (was: keeps up, 93%)",
             orders(0, steps=SALE), {"warm_write": 40_000.0}, duration=720),
    Scenario("sale, pre-warmed as advised", "the same sale, pre-warmed as the plan advises",
             orders(0, steps=SALE), {"warm_write": 84_000.0, "quota_write": 100_000.0},
             duration=720),
    Scenario("sale, new table", "the 10x sale on a new on-demand table (4,000 at once)",
             orders(0, steps=SALE), duration=720),
    Scenario("steady, new table", "300 orders/s on a new on-demand table", orders(300)),
    Scenario("steady, split for heat", "5,000 orders/s on a table warmed to 40,000 whose hot "
             "keys each have a partition (partitions=0, as split for heat leaves it)",
             orders(5000), {"warm_write": 40_000.0, "partitions": 0}),
    Scenario("moves, provisioned", "2,000 new orders/s, 1,500 of them shipping (a move) a "
             "second, provisioned 30,000", {"PENDING": {"write": 2000.0},
                                             "SHIPPED": {"write": 0.0}},
             {"profile": "dynamodb-provisioned", "provisioned_write": 30_000.0,
              "provisioned_read": 10_000.0},
             moves=[{"from": "PENDING", "to": "SHIPPED", "rate": 1500.0}]),
    Scenario("GSI mode", "3,000 orders/s, the index a GSI of a table warmed to 20,000",
             orders(3000), {"profile": "dynamodb-gsi", "warm_write": 20_000.0}, mode="gsi"),
    Scenario("GSI mode, new table", "3,000 orders/s on a new table's GSI (4,000 at once)",
             orders(3000), {"profile": "dynamodb-gsi"}, mode="gsi"),
    Scenario("0.5 KB items", "2,000 orders/s of 512-byte entries, warm 20,000",
             orders(2000, item_bytes=512), {"warm_write": 20_000.0}, item_bytes=512),
    Scenario("4 KB items", "1,000 orders/s of 4 KB entries, warm 30,000",
             orders(1000, item_bytes=4096), {"warm_write": 30_000.0}, item_bytes=4096),
    Scenario("8 KB items", "500 orders/s of 8 KB entries, warm 40,000",
             orders(500, item_bytes=8192), {"warm_write": 40_000.0}, item_bytes=8192),
    Scenario("Azure", "2,000 orders/s on Azure Table Storage (4 entity writes an entry)",
             orders(2000), {"profile": "azure-tables"}, mode="azure"),
    Scenario("Azure, over the account", "5,000 orders/s: past the account's 20,000 "
             "entities/s", orders(5000), {"profile": "azure-tables"}, mode="azure"),
    Scenario("Cosmos DB", "2,000 orders/s on a container of 100,000 RU/s",
             orders(2000), {"profile": "cosmos", "provisioned_write": 100_000.0,
                            "provisioned_read": 100_000.0}, mode="cosmos"),
    Scenario("Cosmos DB, small", "2,000 orders/s on a container of 30,000 RU/s",
             orders(2000), {"profile": "cosmos", "provisioned_write": 30_000.0,
                            "provisioned_read": 30_000.0}, mode="cosmos"),
]


def peaks(load: Workload) -> tuple[dict[str, float], float]:
    """Each value's peak entry writes a second (a move on both values) and the peak item
    writes a second, over the workload's seconds."""
    best: dict[str, float] = dict.fromkeys(load.values, 0.0)
    items = 0.0
    for second in range(load.duration):
        now = float(second)
        rates = {v: x.write.at(now) + x.delete.at(now) for v, x in load.values.items()}
        total = sum(rates.values())
        for move in load.moves:
            rate = move.rate.at(now)
            rates[move.source] += rate
            rates[move.target] += rate
            total += rate
        for value, rate in rates.items():
            best[value] = max(best[value], rate)
        items = max(items, total)
    return best, items


def run(scenario: Scenario) -> dict[str, Any]:
    settings = dict(scenario.table)
    model = profile(settings.pop("profile", "dynamodb-on-demand"), **settings)
    doc = {"duration": scenario.duration, "values": scenario.values, "moves": scenario.moves}
    load = workload_from_dict(doc)
    peak, items = peaks(load)
    started = time.perf_counter()
    plan = plan_shards(peak, item_bytes=scenario.item_bytes,
                       mode=scenario.mode, table=model, item_writes=items,
                       headroom=scenario.headroom)
    planned = time.perf_counter() - started
    assert plan.verdict is not None
    assert plan.profile is not None
    duration = max(scenario.duration, int(plan.verdict.watch_seconds))
    load = workload_from_dict({**doc, "duration": duration})
    namespace = plan.partitions[0].busiest.worst_namespace
    started = time.perf_counter()
    sim = simulate(load, plan.routing(), plan.profile, namespace=namespace)
    simulated = time.perf_counter() - started
    least = min(c.ratio for c in sim.values.values())
    keeps = plan.verdict.keeps_up
    return {"name": scenario.name, "why": scenario.why, "keeps": keeps,
            "summary": plan.verdict.summary, "setting": plan.verdict.setting,
            "shards": {v: p.shards for v, p in plan.values.items() if p.shards > 1},
            "least": least, "ok": sim.ok, "agree": keeps == sim.ok,
            "seconds": duration, "planned": planned, "simulated": simulated,
            "sim_verdict": sim.verdict()}


def advised(count: int, seed: int) -> bool:
    """Draw workloads until ``count`` verdicts advise a setting; check each setting's plan
    keeps up with the N named and its simulation agrees. Prints a line each and a total."""
    rng = random.Random(seed)
    values = ("PENDING", "SHIPPED", "DELIVERED")
    checked = good = drawn = 0
    while checked < count:
        drawn += 1
        peaks = {v: float(rng.choice([10, 100, 500, 2000, 8000]))
                 for v in values[:rng.randint(1, 3)]}
        reads = {v: float(rng.choice([0, 1000, 5000, 12_000, 40_000])) for v in peaks}
        name = rng.choice(["dynamodb-on-demand", "dynamodb-provisioned", "dynamodb-gsi"])
        mode = "gsi" if name == "dynamodb-gsi" else "table"
        table = {} if name != "dynamodb-provisioned" else {
            "provisioned_write": float(rng.choice([4000, 10_000])),
            "provisioned_read": float(rng.choice([12_000, 30_000]))}
        plan = plan_shards(peaks, read_peaks=reads, mode=mode, table=profile(name, **table))
        assert plan.verdict is not None
        if plan.verdict.keeps_up or plan.verdict.setting is None:
            continue
        checked += 1
        setting = plan.verdict.setting
        # a setting past the per-table quota says to raise it: the table it names does
        at = profile(name, **{**table, **setting, "quota_write": 1e7, "quota_read": 1e7})
        again = plan_shards(peaks, read_peaks=reads, mode=mode, table=at)
        assert again.verdict is not None
        verified = verify_plan(again, seconds=120)
        same_n = {v: p.shards for v, p in again.values.items()} == \
            dict(plan.verdict.recommended_shards)
        ok = again.verdict.keeps_up and same_n and verified["agrees"]
        good += ok
        print(f"  {checked:>3} {name:<20} writes {peaks} reads {reads}: {setting} -> "
              f"{'keeps up' if again.verdict.keeps_up else 'THROTTLES'}"
              f"{'' if same_n else ' (another N)'}, simulation "
              f"{'agrees' if verified['agrees'] else 'DISAGREES'}")
    print(f"\n{good} of {checked} settings advised (of {drawn} drawn workloads) keep up "
          "when planned again, with the N named, and their simulations agree")
    return good == checked


def drawn(count: int, seed: int) -> int:
    """Draw ``count`` plans (see the module docstring) and simulate each; print those the
    simulation disagrees with, and a total. Returns how many disagree."""
    rng = random.Random(seed)
    values = ("PENDING", "SHIPPED", "DELIVERED", "CANCELLED")
    disagree = refused = 0
    for _ in range(count):
        peaks = {v: float(rng.choice([5, 50, 300, 1000, 3000, 9000]))
                 for v in values[:rng.randint(1, 4)]}
        reads = {v: float(rng.choice([0, 0, 500, 3000, 9000, 30_000])) for v in peaks}
        name = rng.choice(["dynamodb-on-demand", "dynamodb-provisioned", "dynamodb-gsi",
                           "cosmos", "azure-tables"])
        mode = {"dynamodb-gsi": "gsi", "cosmos": "cosmos", "azure-tables": "azure"}.get(
            name, "table")
        table: dict[str, Any] = {}
        if name == "dynamodb-provisioned":
            table = {"provisioned_write": float(rng.choice([2000, 8000, 30_000])),
                     "provisioned_read": float(rng.choice([6000, 20_000, 40_000])),
                     "adaptive": rng.random() < 0.5}
        elif name.startswith("dynamodb"):
            table = {"warm_write": float(rng.choice([4000, 12_000, 40_000]))}
        options: dict[str, Any] = {}
        for option, odds, choices in (("item_bytes", 0.3, [300, 1024, 3000, 9000]),
                                      ("partitions", 0.2, [0, 2, 8, 40]),
                                      ("item_writes", 0.2, [0.0, 100.0, 5000.0]),
                                      ("headroom", 0.2, [1.0, 1.2, 2.0])):
            if rng.random() < odds:
                options[option] = rng.choice(choices)
        try:
            plan = plan_shards(peaks, read_peaks=reads, mode=mode,
                               table=profile(name, **table), **options)
        except ShardexError:
            refused += 1  # a table the planner (and the simulator) cannot model
            continue
        verified = verify_plan(plan, seconds=120)
        if not verified["agrees"]:
            disagree += 1
            assert plan.verdict is not None
            print(f"  disagree: {name} {table} {options} writes {peaks} reads {reads}: plan "
                  f"{'keeps up' if plan.verdict.keeps_up else 'throttles'}; simulation "
                  f"{verified['verdict']['summary']}; "
                  + "; ".join(verified["watched"] + verified["verdict"]["causes"]))
    print(f"\n{count - refused - disagree} of {count - refused} drawn plans agree with their "
          f"120 s simulations ({refused} tables refused as the simulator refuses them)")
    return disagree


# a table limit the causes name, with the setting and the least that avoids it
_AVOIDS = re.compile(r"the (?:table|index)'s (write|read)(?: limit binds|s ask up to).*?; "
                     r"(\w+) of at least ([\d,]+) avoids it")
_STARTS = re.compile(r"starts with .*?, [\d,]+ (write|read) units a second in all, and the "
                     r"workload asks up to ([\d,]+); .*\((?:set by partitions=\d+; )?(\w+) "
                     r"sets")


def _named(causes: list[str]) -> dict[str, float]:
    """Every table setting ``causes`` name, at the least they name (quotas raised too)."""
    out: dict[str, float] = {}
    for cause in causes:
        found = _AVOIDS.search(cause)
        starts = _STARTS.search(cause)
        for direction, setting, least in ([found.groups()] if found else []) + (
                [(starts[1], starts[3], starts[2])] if starts else []):
            value = float(least.replace(",", ""))
            out[setting] = max(out.get(setting, 0.0), value)
            out[f"quota_{direction}"] = max(out.get(f"quota_{direction}", 40_000.0), value)
    return out


def causes(count: int, seed: int) -> int:
    """Draw ``count`` workloads (see the module docstring), follow every table setting a
    verdict's causes name at once, and print those whose table still binds a limit, and
    a total. Returns how many."""
    rng = random.Random(seed)
    checked = short = 0
    for _ in range(count):
        values: dict[str, dict[str, Any]] = {}
        for i in range(rng.randint(1, 3)):
            value: dict[str, Any] = {"write": rng.choice([0, 50, 500, 3000, 8000])}
            if rng.random() < 0.5:
                value["read"] = rng.choice([5, 50, 300])
            if rng.random() < 0.3:
                value["delete"] = rng.choice([10, 1000])
            values[f"V{i}"] = value
        if not any(v["write"] or "read" in v for v in values.values()):
            continue
        doc: dict[str, Any] = {"duration": 300, "values": values}
        if len(values) > 1 and rng.random() < 0.3:
            doc["moves"] = [{"from": "V0", "to": "V1", "rate": rng.choice([100, 2000])}]
        workload = workload_from_dict(doc)
        if rng.random() < 0.6:
            items = float(rng.choice([1000, 10_000, 30_000]))
            workload = dataclasses.replace(workload, item_writes=Schedule(((0.0, items),)))
        routing = Routing(overrides={v: ShardPolicy(shards=rng.choice([1, 2, 8, 32]))
                                     for v in values})
        name = rng.choice(["dynamodb-on-demand", "dynamodb-gsi", "dynamodb-provisioned"])
        table: dict[str, float] = {
            "provisioned_write": rng.choice([1000, 20_000]),
            "provisioned_read": rng.choice([1000, 20_000])} if name.endswith("provisioned") \
            else {"warm_write": rng.choice([4000, 40_000]),
                  "warm_read": rng.choice([12_000, 40_000])}
        named = _named(simulate(workload, routing, profile(name, **table)).causes())
        if not named:
            continue
        checked += 1
        again = simulate(workload, routing, profile(name, **{**table, **named}))
        left = [cause for cause in again.causes()
                if _AVOIDS.search(cause) or _STARTS.search(cause)]
        if left:
            short += 1
            print(f"  short: {name} {table} {doc} item writes {workload.item_writes}: given "
                  f"{named}, {left[0]}")
    print(f"\n{checked - short} of {checked} drawn workloads whose verdict names table "
          "settings refuse nothing at a table limit given every setting named at once")
    return short


def _table(rows: list[dict[str, Any]], *, why: bool, agree: int,
           kept: list[dict[str, Any]]) -> None:
    """The scenarios' rows, and their total."""
    width = max(len(r["name"]) for r in rows)
    print(f"{'scenario':<{width}}  {'plan says':<10} {'N (sharded)':<34} {'sim s':>6} "
          f"{'least accepted':>14}  agree")
    for r in rows:
        shards = ", ".join(f"{v[:4]}={n}" for v, n in r["shards"].items()) or "-"
        print(f"{r['name']:<{width}}  {'keeps up' if r['keeps'] else 'throttles':<10} "
              f"{shards:<34} {r['seconds']:>6,} {100 * r['least']:>13.2f}%  "
              f"{'yes' if r['agree'] else 'NO'}")
        if why:
            print(f"    {r['why']}\n    plan: {r['summary']}\n    simulate: {r['sim_verdict']}")
            if r["setting"]:
                print(f"    avoid it with: {r['setting']}")
    print(f"\n{agree} of {len(rows)} verdicts agree with their simulation; "
          f"{len(kept)} plans keep up, the least of them simulated at "
          f"{100 * min((r['least'] for r in kept), default=1.0):.2f}%; planning took "
          f"{max(r['planned'] for r in rows):.2f} s at most, simulating "
          f"{sum(r['simulated'] for r in rows):.1f} s in all")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", help="run the scenarios whose name holds this text")
    parser.add_argument("--why", action="store_true", help="print each verdict's reason")
    parser.add_argument("--advised", type=int, default=0,
                        help="then check the settings of this many drawn workloads' verdicts")
    parser.add_argument("--drawn", type=int, default=0,
                        help="then simulate this many drawn plans of every mode")
    parser.add_argument("--causes", type=int, default=0,
                        help="then follow the table settings of this many drawn workloads' "
                             "simulated causes")
    parser.add_argument("--seed", type=int, default=11, help="the draws' seed")
    args = parser.parse_args()
    chosen = [s for s in SCENARIOS if not args.only or args.only.lower() in s.name.lower()]
    rows = [run(scenario) for scenario in chosen]
    agree = sum(r["agree"] for r in rows)
    kept = [r for r in rows if r["keeps"]]
    if rows:  # --only may name none, to run the drawn sections alone
        _table(rows, why=args.why, agree=agree, kept=kept)
    truthful = advised(args.advised, args.seed) if args.advised else True
    if args.drawn:
        drawn(args.drawn, args.seed)  # knife edges may disagree: printed, not failed
    short = causes(args.causes, args.seed) if args.causes else 0
    if agree < len(rows) or any(r["least"] < 0.99 for r in kept) or not truthful or short:
        sys.exit(1)


if __name__ == "__main__":
    main()
