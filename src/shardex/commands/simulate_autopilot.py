"""``shardex simulate --autopilot`` and ``shardex demo --autopilot``: run and print."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from shardex.commands import output
from shardex.commands.output import escape

__all__ = ["autopilot_demo", "report", "simulate_autopilot"]

_NOISE = 0.3
# the demo's window of the day: 09:30 to 12:30, the first flash sale and its shrink
_DEMO_START, _DEMO_SECONDS = 9 * 3600 + 1800, 3 * 3600


def simulate_autopilot(workload: Path | None, *, policy: Path | None, store: str | None,
                       duration: int | None, rate: str, noise: float | None, seed: int,
                       starting: dict[str, int], as_json: bool) -> None:
    """Run the load (the built-in day, or a workload file) the three ways and print them."""
    from shardex.autopilot import AutopilotPolicy, load_policy
    from shardex.commands.simulate import model, refuse_unknown
    from shardex.scenarios.day import DayLoad, day, ramps_of
    from shardex.scenarios.workload import load_workload

    if workload is None:
        load = day(duration or 86_400, noise=_NOISE if noise is None else noise)
    else:
        found = load_workload(workload, rate=rate)
        measured = sorted(v for v, spec in found.values.items()
                          if spec.write_units is not None or spec.read_units is not None)
        if measured:
            # the autopilot's runs drive writes and reads a second: a diagnosis's measured
            # units had run as no load at all (0 writes, "ok", in all three runs)
            raise click.BadParameter(
                f"{workload} is a diagnosis: its keys ({', '.join(measured[:5])}"
                + (", ..." if len(measured) > 5 else "") + ") carry measured units, which "
                "the autopilot's runs do not take; simulate it without --autopilot, or give a "
                "workload file of writes a second (docs/simulate.md)",
                param_hint="'WORKLOAD'")
        if duration is not None:
            found = dataclasses.replace(found, duration=duration)
        load = DayLoad(found, ramps_of(found), {}, 0.0 if noise is None else noise)
    refuse_unknown(starting, load.workload.values, load.workload.origin)
    if starting:
        values = {value: dataclasses.replace(spec, shards=starting.get(value, spec.shards))
                  for value, spec in load.workload.values.items()}
        load = dataclasses.replace(load, workload=dataclasses.replace(load.workload,
                                                                       values=values))
    rules = load_policy(policy) if policy is not None else AutopilotPolicy()
    profile, _ = model(dict(load.workload.table), store, load.workload.origin)
    _run(load, profile, rules, seed=seed, as_json=as_json)


def autopilot_demo(*, as_json: bool, seed: int) -> None:
    """The short version: 09:30 to 12:30 of the day, the first flash sale."""
    from shardex.autopilot import AutopilotPolicy
    from shardex.commands.simulate import model
    from shardex.scenarios.day import day

    load = day(_DEMO_SECONDS, start=_DEMO_START)
    profile, _ = model(dict(load.workload.table), None, load.workload.origin)
    _run(load, profile, AutopilotPolicy(), seed=seed, as_json=as_json)


def _run(load: Any, profile: Any, policy: Any, *, seed: int, as_json: bool) -> None:
    from shardex.scenarios.autopilot_report import simulate_autopilot as run

    console = output.console(stderr=as_json)
    with console.status("simulating the autopilot, static N and no sharding...",
                        spinner="dots"):
        doc = run(load, profile, policy, seed=seed).to_dict()
    if as_json:
        click.echo(json.dumps(doc, indent=2))
        return
    report(output.console(), doc)


def _percent(share: float) -> str:
    return f"{100 * share:.2f}%"


def report(console: Console, doc: dict[str, Any]) -> None:
    """Print a ``shardex.simulate.autopilot/1`` document as text."""
    profile = doc["profile"]
    console.print(f"[bold]simulate --autopilot[/]: {escape(doc['source'])}, "
                  f"{doc['duration_s']:,} virtual s, noise +/-{100 * doc['noise']:.0f}% a "
                  f"second, on {profile['name']} (partitions {profile['partitions']}, "
                  f"warm_write {profile['warm_write']:,.0f})", highlight=False)
    runs = doc["runs"]
    columns = [output.Column("metric", "left"), *(output.Column(r["mode"]) for r in runs)]
    rows: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        ("writes throttled (share)", lambda r: _percent(r["throttled_share"])),
        ("writes held by admission (share)", lambda r: _percent(r["admission_refused_share"])),
        ("longest wait in admission", lambda r: f"{r['admission_max_wait_s']:,.0f} s"),
        ("writes failed after retries", lambda r: f"{r['writes_failed']:,}"),
        ("reshards (most on one key)",
         lambda r: f"{len(r['migrations'])} ({r['max_reshards_per_key']})"),
        ("actions (grow, shrink, admit)", lambda r: ", ".join(
            str(sum(1 for a in r["actions"] if a["action"] == kind))
            for kind in ("grow", "shrink", "admit"))),
        ("fan-out N weighted by reads", lambda r: f"{r['fanout_n_read_weighted']:.2f}"),
        ("listings checked (shadow runs)",
         lambda r: f"{r['listings_checked']:,} ({len(r['shadows'])})"),
        ("every listing complete", lambda r: {True: "[green]yes[/]", False: "[red]NO[/]",
                                              None: "-"}[r["listings_complete"]]),
    ]
    for ramp in doc["ramps"]:
        name = ramp["name"]
        rows += [(f"{name}: throttled", partial(_ramp_cell, name, "throttled")),
                 (f"{name}: held by admission", partial(_ramp_cell, name, "held")),
                 (f"{name}: failed", partial(_ramp_cell, name, "failed")),
                 (f"{name}: seconds to no throttle", partial(_ramp_cell, name, "cure")),
                 (f"{name}: seconds to nothing held", partial(_ramp_cell, name, "admitted"))]
    console.print(output.table(console, columns, [
        [label, *(cell(r) for r in runs)] for label, cell in rows]))
    for cause in doc["causes"]:
        console.print(f"[bold]cause[/]: {escape(cause)}", highlight=False)
    auto = next((r for r in runs if r["mode"] == "autopilot"), None)
    if auto is not None and auto["migrations"]:
        console.print("[bold]the autopilot's reshards[/]: " + "; ".join(
            f"{escape(m['key'])} {m['from_n']} -> {m['to_n']} at {m['started_s']:,.0f} s"
            for m in auto["migrations"]), highlight=False)
    for check in doc["checks"]:
        mark = "[green]ok[/]" if check["ok"] else "[red]FAILS[/]"
        figure = check["figure"]
        shown = f"{figure:.4g}" if isinstance(figure, float) else str(figure)
        console.print(f"{mark} {escape(check['check'])} ({shown})", highlight=False)


def _ramp_cell(name: str, what: str, run: dict[str, Any]) -> str:
    ramp = next(r for r in run["ramps"] if r["name"] == name)
    if what == "throttled":
        return _percent(ramp["throttled_share"])
    if what == "held":
        return _percent(ramp["admission_refused_share"])
    if what == "failed":
        return f"{ramp['writes_failed']:,.0f}"
    seconds = ramp["time_to_cure_s" if what == "cure" else "time_to_admitted_s"]
    return "never" if seconds is None else f"{seconds:,} s"
