"""``shardex simulate``: a what-if run of a workload against a layout, on virtual time."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from shardex.commands import output
from shardex.commands.output import escape
from shardex.commands.params import COUNT, PLOT, ValuePair, distinct, given
from shardex.errors import InvalidInput
from shardex.plotting import plot_target

__all__ = ["refuse_unknown", "simulate"]

def _shards(sets: Iterable[tuple[str, int]]) -> dict[str, int]:
    """``--set``'s VALUE=N pairs, each N one a routing takes (1 to the routing's most)."""
    from shardex.routing import ShardPolicy

    overrides = distinct(list(sets), "--set")
    for value, n in overrides.items():
        try:
            ShardPolicy(shards=n)
        except ValueError as exc:
            raise click.BadParameter(f"{value}: {exc}", param_hint="--set") from None
    return overrides


def load_layout(path: Path) -> Any:
    """The routing a layout file carries: a ``shardex.plan/1`` or ``shardex.diagnose/1``
    document (its ``routing``), or a ``shardex.routing/1`` document itself."""
    from shardex.commands.routing import layout_file

    return layout_file(path, "--layout").routing


def model(table: dict[str, Any], store: str | None, origin: str = "workload"
          ) -> tuple[Any, Any]:
    """The profile and latency model: the workload's ``[table]``, then ``--store``'s options
    (a profile they do not make together is refused naming the workload ``origin``)."""
    from shardex.sim.latency import LatencyModel
    from shardex.sim.profiles import DEFAULT_PROFILE, profile
    from shardex.stores.memory.options import OPTIONS, capacity_from_uri
    from shardex.stores.uri import StoreURI

    settings = dict(table)
    latency = {name: spec[1] for name, spec in OPTIONS.items() if name.startswith("latency")}
    if store is not None:
        # checked together with the workload's [table] below
        capacity, options = capacity_from_uri(StoreURI.parse(store), resolve=False)
        settings.update(capacity)
        latency.update({k: v for k, v in options.items() if k.startswith("latency")})
    name = settings.pop("profile", DEFAULT_PROFILE)
    try:
        made = profile(name, **settings)
    except InvalidInput as exc:
        over = " with --store's settings over it" if store is not None else ""
        raise InvalidInput(f"{origin}: table{over}: {exc}") from None
    return made, LatencyModel(latency["latency_median_ms"],
                                                   latency["latency_p99_ms"],
                                                   latency["latency_per_kb_ms"])


@click.command()
@click.argument("workload", required=False,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--set", "sets", multiple=True, metavar="VALUE=N",
              type=ValuePair(COUNT, "VALUE=N", "PENDING=8"),
              help="Shard VALUE N ways (over --layout and the workload's own N); repeat.")
@click.option("--layout", type=click.Path(exists=True, dir_okay=False, allow_dash=True,
              path_type=Path),
              help="The layout: plan --json, diagnose --json, or a routing document.")
@click.option("--store", metavar="URI", default=None,
              help="The capacity model as memory://?profile=NAME&SETTING=VALUE..., over the "
                   "workload's [table] (e.g. memory://?warm_write=40000).")
@click.option("--duration", type=click.IntRange(min=1, max=7 * 24 * 3600), default=None,
              help="Seconds to simulate (default: the workload's).")
@click.option("--rate", type=click.Choice(["peak", "sustained"]), default="peak",
              show_default=True, help="A diagnosis: offer each key's peak or sustained rate.")
@click.option("--per-shard", is_flag=True, help="List every shard key.")
@click.option("--json", "as_json", is_flag=True, help="Print a shardex.simulate/1 document.")
@click.option("--plot", type=PLOT,
              help="Draw offered and accepted writes, and the table's use, to this PNG.")
@click.option("--autopilot", is_flag=True,
              help="Run the autopilot against the load (WORKLOAD, or a day of load with "
                   "two flash sales and a viral tenant), beside static N and no sharding.")
@click.option("--policy", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="--autopilot: the autopilot's policy (TOML; docs/autopilot.md).")
@click.option("--noise", type=click.FloatRange(min=0, max=0.9), default=None,
              help="--autopilot: +/- share of noise on every rate each second (default "
                   "0.3 for the built-in day, 0 for a workload file).")
@click.option("--seed", type=click.IntRange(min=0), default=1, show_default=True,
              help="--autopilot: seed of the noise and the shadow runs.")
def simulate(workload: Path | None, sets: tuple[tuple[str, int], ...], layout: Path | None,
             store: str | None, duration: int | None, rate: str, per_shard: bool,
             as_json: bool, plot: Path | None, autopilot: bool, policy: Path | None,
             noise: float | None, seed: int) -> None:
    """Run WORKLOAD (TOML, or diagnose --json) against a layout on the simulated table,
    second by second on virtual time: what each value and shard key gets accepted, the
    throttles by reason, the table's headroom, the read fan-out's cost, and a verdict.
    With --autopilot, the autopilot's policy reshards as the load goes (docs/autopilot.md)."""
    import dataclasses

    if autopilot:
        if plot is not None or per_shard:
            raise click.UsageError("--plot and --per-shard are not for --autopilot")
        from shardex.commands.simulate_autopilot import simulate_autopilot
        from shardex.scenarios.simulate import routing_for
        from shardex.scenarios.workload import load_workload

        if workload is None and given("rate"):
            raise click.UsageError("--rate is for a WORKLOAD that is a diagnosis (the "
                                   "built-in day has one rate a second per key)")
        starting = _shards(sets)  # checked against the load's values there
        if layout is not None:
            if workload is None:
                raise click.UsageError("--layout needs a WORKLOAD with the values it shards")
            read = load_layout(layout)
            routing = routing_for({}, read, starting)
            values = load_workload(workload, rate=rate).values
            refuse_foreign(read, values, workload, layout)
            starting = {value: routing.policy(value).shards for value in values}
        simulate_autopilot(workload, policy=policy, store=store, duration=duration,
                           rate=rate, noise=noise, seed=seed, starting=starting,
                           as_json=as_json)
        return
    if workload is None:
        raise click.UsageError("Missing argument 'WORKLOAD' (or give --autopilot)")
    if policy is not None or noise is not None:
        raise click.UsageError("--policy and --noise are for --autopilot")
    if given("seed"):
        raise click.UsageError("--seed is for --autopilot (a static layout's run draws "
                               "nothing)")

    from shardex.scenarios.simulate import routing_for
    from shardex.scenarios.simulate import simulate as run
    from shardex.scenarios.workload import load_workload

    if plot is not None:
        plot_target(plot)  # a missing plot extra or format fails now, not after the run
    load = load_workload(workload, rate=rate)
    if duration is not None:
        load = dataclasses.replace(load, duration=duration)
    overrides = _shards(sets)
    refuse_unknown(overrides, load.values, workload)
    given_layout = load_layout(layout) if layout else None
    if given_layout is not None:
        refuse_foreign(given_layout, load.values, workload, layout)
    routing = routing_for(load.values, given_layout, overrides)
    profile, latency = model(dict(load.table), store, load.origin)
    result = run(load, routing, profile, latency=latency)
    if plot is not None:
        from shardex.scenarios.plot import plot_simulation

        plot_simulation(result, plot)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    report(output.console(), result.to_dict(), per_shard=per_shard)
    if plot is not None:
        output.console().print(f"plot written to {plot}")


def refuse_unknown(sets: Mapping[str, int], values: Iterable[str], origin: str | Path) -> None:
    """Refuse a --set of a value the load from ``origin`` does not have (a typo left N as
    it was)."""
    names = list(values)
    unknown = [value for value in sets if value not in names]
    if unknown:
        raise click.BadParameter(
            f"{unknown[0]!r} is no value of {origin} (its values: {', '.join(names)})",
            param_hint="--set")


def refuse_foreign(layout: Any, values: Iterable[str], origin: str | Path,
                   path: str | Path | None) -> None:
    """Refuse a --layout whose overrides name none of the load's values: a layout for
    another workload would run the load at N=1 throughout, unsaid."""
    names = list(values)
    named = list(layout.overrides)
    if named and not set(named) & set(names):
        raise click.BadParameter(
            f"{path} shards {', '.join(map(repr, named[:5]))}"
            f"{', ...' if len(named) > 5 else ''}, none of which is a value of {origin} "
            f"(its values: {', '.join(names)})", param_hint="--layout")


def report(console: Console, doc: dict[str, Any], *, per_shard: bool = False) -> None:
    """Print a ``shardex.simulate/1`` document as text."""
    profile = doc["profile"]
    # (a file's 40000 is an int, a profile's 4000.0 a float: both read 40,000 and 4,000)
    settings = ", ".join(f"{k} {v:,.15g}" if isinstance(v, int | float)
                         and not isinstance(v, bool) else f"{k} {v}"
                         for k, v in profile.items()
                         if k in ("warm_write", "provisioned_write", "partitions", "layout"))
    console.print(f"[bold]simulate[/]: {escape(doc['source'])}, {doc['duration_s']:,} virtual s "
                  f"on {profile['name']} ({settings})", highlight=False)
    for note in doc.get("notes", ()):
        console.print(f"note: {note}", markup=False, highlight=False)
    columns = [output.Column("value", "left"), *(output.Column(name) for name in (
        "N", "offered writes/s", "accepted writes/s", "accepted", "page reads/s",
        "queries/s", "read units/s", "fan-out p50/p99 ms"))]
    rows = []
    for value, v in doc["values"].items():
        ratio = v["accepted_ratio"]
        style = "green" if ratio >= 0.999 else "red"
        rows.append([escape(value), str(v["shards"]), f"{v['offered_writes_per_s']:,.0f}",
                     f"{v['accepted_writes_per_s']:,.0f}", f"[{style}]{100 * ratio:.1f}%[/]",
                     f"{v['reads_per_s']:,.1f}", f"{v['queries_per_s']:,.1f}",
                     f"{v['read_units_per_s']:,.1f}",
                     f"{v['fanout_p50_ms']:.1f}/{v['fanout_p99_ms']:.1f}"])
        if per_shard:
            seconds = doc["duration_s"]
            for key, k in v["shard_keys"].items():
                where = f" [dim]({escape(k['throttled_by'])})[/]" if k["throttled_by"] else ""
                rows.append([f"  {escape(key)}{where}", "",
                             f"{k['offered_writes'] / seconds:,.0f}",
                             f"{k['accepted_writes'] / seconds:,.0f}",
                             f"{100 * k['accepted_ratio']:.1f}%", "", "", "", ""])
    console.print(output.table(console, columns, rows))
    for table in doc["tables"]:
        if not table["peak_asked_per_s"]:
            continue
        console.print(
            f"{table['resource']} "
            + ("reads and writes" if table["direction"] == "both" else f"{table['direction']}s")
            + f": limit {table['limit_first_s']:,.0f} -> "
            f"{table['limit_last_s']:,.0f} units/s ({table['limited_by']}), peak asked "
            f"{table['peak_asked_per_s']:,.0f}, peak used {table['peak_used_per_s']:,.0f}, "
            f"least headroom {100 * table['headroom']:.0f}%"
            + (f", [red]refused in {table['seconds_refused']:,} s[/]"
               if table["seconds_refused"] else ""), highlight=False)
    # a first count of 0 is partitions=0, every partition key its own: no count to grow from
    partitions = ", ".join(f"{name} {p['first']} -> {p['last']}" if p["first"] else
                           f"{name} every partition key its own ({p['last']:,} at the end)"
                           for name, p in doc["partitions"].items())
    console.print(f"partitions: {partitions}", highlight=False)
    if doc["throttles"]:
        console.print("throttled operations by reason: " + ", ".join(
            f"{reason} {count:,.0f}" for reason, count in doc["throttles"].items()),
            highlight=False)
    verdict = doc["verdict"]
    console.print(f"[bold {'green' if verdict['ok'] else 'red'}]verdict[/]: "
                  f"{escape(verdict['summary'])}", highlight=False)
    for cause in verdict["causes"][1:]:
        console.print(f"  also: {escape(cause)}", highlight=False)
