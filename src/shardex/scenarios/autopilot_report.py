"""The autopilot simulation's three runs, their shadow runs, and the document they make.

``simulate_autopilot`` runs a ``DayLoad`` each way (``MODES``), then a shadow run
(``shardex.scenarios.shadow``) of every migration the autopilot made, and of each fixed
layout's most sharded key, and returns a ``Report``; ``Report.to_dict`` is the
``shardex.simulate.autopilot/1`` document (docs/json.md) and ``Report.checks`` the
acceptance of issue 24 measured on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shardex.autopilot import AutopilotPolicy
from shardex.autopilot.migration import MigrationCosts
from shardex.documents import SIMULATE_AUTOPILOT_SCHEMA, rounded
from shardex.scenarios.autopilot import MODES, ModeRun, run_mode
from shardex.scenarios.day import DAY, DayLoad
from shardex.scenarios.shadow import ShadowResult, shadow
from shardex.scenarios.table_use import avoid_words, limit_words, served_words
from shardex.sim.profiles import Profile
from shardex.wording import listed

__all__ = ["Report", "simulate_autopilot"]

# the entries a shadow run holds at most (a scaled population of the key's)
SHADOW_ENTRIES = 200


@dataclass(slots=True)
class Report:
    """The runs of one load, with their shadow runs."""

    load: DayLoad
    profile: Profile
    policy: AutopilotPolicy
    seed: int
    runs: dict[str, ModeRun] = field(default_factory=dict)
    shadows: dict[str, list[ShadowResult]] = field(default_factory=dict)

    def run_dict(self, mode: str) -> dict[str, Any]:
        run = self.runs[mode]
        totals = run.totals()
        writes = totals["writes"]
        ramps = [run.ramp(ramp) for ramp in self.load.ramps]
        shadows = self.shadows.get(mode, [])
        migrations = run.migrations()
        counts: dict[str, int] = {}
        for migration in migrations:
            counts[migration.key] = counts.get(migration.key, 0) + 1
        return {
            "mode": mode,
            "throttled_share": totals["throttled"] / writes if writes else 0.0,
            "admission_refused_share": totals["refused"] / writes if writes else 0.0,
            "writes_failed": round(totals["failed"]),
            "listings_complete": all(s.complete for s in shadows) if shadows else None,
            "actions": [{"t": d.t, "key": d.key, "action": d.action, "from_n": d.from_n,
                         "to_n": d.to_n, "reason": d.reason}
                        | ({"budget": d.budget} if d.action == "admit" else {})
                        for d in run.actions],
            "max_reshards_per_key": max(counts.values(), default=0),
            "fanout_n_read_weighted": totals["fanout_reads"] / totals["reads"]
            if totals["reads"] else 0.0,
            "time_to_cure_s": [{"ramp": r["name"], "value": r["value"],
                                "start_s": r["start_s"], "seconds": r["time_to_cure_s"]}
                               for r in ramps],
            "writes": writes,
            "writes_throttled": totals["throttled"],
            "writes_refused_by_admission": totals["refused"],
            "admission_max_wait_s": max((k.max_wait for k in run.keys.values()), default=0),
            "shards_at_end": {v: k.policy.shards for v, k in run.keys.items()},
            "ramps": ramps,
            "migrations": [{"key": m.key, "from_n": m.old.shards, "to_n": m.new.shards,
                            "started_s": m.started, "entries": m.entries,
                            "moved": m.moved, "states": [{"state": state, "at_s": at}
                                                         for state, at in m.states]}
                           for m in migrations],
            "shadows": [s.to_dict() for s in shadows],
            "listings_checked": sum(s.listings for s in shadows),
            "planner": {"plans": run.plans},
            "tables": [table.to_dict() for table in run.tables],
            "cpu_s": run.seconds,
        }

    def causes(self) -> list[str]:
        """Each table limit the runs were asked past, in words, with the runs it bound in,
        what the load asks of it at first attempt (its retries aside) and the setting that
        sets it: a table limit no N lifts (a fan-out's reads aside).

        A limit that refused in some run comes first; one that refused nothing but was
        asked past it (writes held back by throttled placement reads, or hot partitions
        refusing first) follows, as ``simulate`` says them.
        """
        runs = self.runs
        if not runs:
            return []
        duration = self.load.workload.duration
        now: list[str] = []
        then: list[str] = []
        for i, first in enumerate(next(iter(runs.values())).tables):
            uses = {mode: run.tables[i] for mode, run in runs.items()}
            refusing = {m: t for m, t in uses.items() if t.refused_seconds}
            held = {m: t for m, t in uses.items() if t.held_seconds}
            over = {m: t for m, t in uses.items() if t.over_seconds}
            binding = refusing or held or over
            if not binding:
                continue
            peak = max(t.peak_asked for t in uses.values())
            table = min(binding.values(), key=lambda t: t.served)
            if refusing:
                seconds = listed([f"{t.refused_seconds:,} s ({m})"
                                  for m, t in refusing.items()])
                said = (f"{limit_words(first, self.profile)} binds in {seconds} of "
                        f"{duration:,}: it served {served_words(table, self.profile)}, and "
                        f"the load asks up to {peak:,.0f} at first attempt"
                        + (", more with its retries" if peak <= table.served else ""))
            else:
                # what kept them from it: their partitions, an admission budget (of writes)
                totals = [runs[m].totals() for m in binding]
                admitted = first.write and any(t["refused"] for t in totals)
                first_by = listed(["its partitions refused them"] * (
                    any(t["throttled"] for t in totals) or not admitted)
                    + ["admission held them back"] * admitted)
                # writes held back by throttled reads (on one budget, the budget held them)
                reads_held = bool(held) and not first.both
                said = ((f"once its reads are served, the {first.resource}'s writes"
                         if reads_held else f"the {first.resource}'s {first.asks}")
                        + f" ask up to {peak:,.0f} {self.profile.unit_word} a second at "
                          "first attempt ("
                        + listed(list(binding)) + f"), past the {table.served:,.0f} it served"
                        + ("" if reads_held else f", though {first_by} first"))
            # its runs try refused writes again, asking more than their first attempts
            # of whatever refused them: no figure is sure to avoid it
            (now if refusing else then).append(
                said + avoid_words(table, self.profile, peak, sure=False))
        return now + then

    def checks(self) -> list[dict[str, Any]]:
        """The acceptance, each ``{check, ok, figure}``, measured on these runs."""
        out: list[dict[str, Any]] = []
        if "autopilot" not in self.runs:
            return out
        auto = self.run_dict("autopilot")
        for ramp in auto["ramps"]:
            if not any(r.sale and r.name == ramp["name"] for r in self.load.ramps):
                continue
            name = ramp["name"]
            out += [
                {"check": f"{name}: throttled share of the sale's writes <= 1%",
                 "ok": ramp["throttled_share"] <= 0.01,
                 "figure": ramp["throttled_share"]},
                {"check": f"{name}: 0 writes failed after retries",
                 "ok": round(ramp["writes_failed"]) == 0, "figure": ramp["writes_failed"]},
                {"check": f"{name}: at most 2 reshards of {ramp['value']}",
                 "ok": ramp["reshards"] <= 2, "figure": ramp["reshards"]}]
        out.append({"check": "every listing complete (shadow runs of every migration)",
                    "ok": auto["listings_complete"] is not False,
                    "figure": auto["listings_checked"]})
        out.append({"check": "no migration of a key starts while one of it runs",
                    "ok": _one_at_a_time(auto["migrations"]), "figure": len(auto["migrations"])})
        sales = any(r.sale for r in self.load.ramps)
        steady = "none" in self.runs and not self.runs["none"].totals()["throttled"]
        if not self.load.ramps and steady:
            out.append({"check": "a steady load its layout serves (noise alone): 0 actions",
                        "ok": not auto["actions"], "figure": len(auto["actions"])})
        if "static" in self.runs and sales and self.load.workload.duration >= DAY:
            static = self.run_dict("static")["fanout_n_read_weighted"]
            ratio = auto["fanout_n_read_weighted"] / static if static else 0.0
            out.append({"check": "the day's fan-out N weighted by reads <= 0.5x static N "
                                 "planned for the peak",
                        "ok": ratio <= 0.5, "figure": ratio})
        return out

    def to_dict(self) -> dict[str, Any]:
        workload = self.load.workload
        doc: dict[str, Any] = rounded({
            "schema": SIMULATE_AUTOPILOT_SCHEMA, "source": workload.origin,
            "duration_s": workload.duration, "noise": self.load.noise, "seed": self.seed,
            "profile": {"name": self.profile.name,
                        "partitions": self.profile.initial_partitions,
                        "warm_write": self.profile.warm_write,
                        "write_ceiling": self.profile.write_ceiling},
            "policy": self.policy.to_dict(),
            "ramps": [{"name": r.name, "value": r.value, "start_s": r.start, "end_s": r.end,
                       "sale": r.sale} for r in self.load.ramps],
            "runs": [self.run_dict(mode) for mode in self.runs],
            "causes": self.causes(),
            "checks": self.checks()})
        return doc


def _one_at_a_time(migrations: list[dict[str, Any]]) -> bool:
    ends: dict[str, float] = {}
    for migration in migrations:
        key = migration["key"]
        if migration["started_s"] < ends.get(key, -1.0):
            return False
        states = migration["states"]
        ends[key] = states[-1]["at_s"] if states and states[-1]["state"] == "done" \
            else float("inf")
    return True


def simulate_autopilot(load: DayLoad, profile: Profile, policy: AutopilotPolicy, *,
                       seed: int = 1, modes: tuple[str, ...] = MODES,
                       shadows: bool = True, namespace: str = "index",
                       costs: MigrationCosts | None = None) -> Report:
    """Run ``load`` each way of ``modes``; with ``shadows``, check every listing of a shadow
    run of each migration (and of each fixed layout's most sharded key)."""
    report = Report(load, profile, policy, seed)
    for mode in modes:
        run = run_mode(load, mode, profile, policy, seed=seed, namespace=namespace,
                       costs=costs)
        report.runs[mode] = run
        if not shadows:
            continue
        found = []
        migrations = run.migrations()
        for i, migration in enumerate(migrations):
            entries = max(20, min(SHADOW_ENTRIES, round(migration.entries)))
            found.append(shadow(migration.key, migration.old, migration.new,
                                entries=entries, seed=seed + i))
        if not migrations:
            value, key = max(run.keys.items(), key=lambda pair: pair[1].policy.shards)
            found.append(shadow(value, key.policy, None, entries=SHADOW_ENTRIES, seed=seed))
        report.shadows[mode] = found
    return report
