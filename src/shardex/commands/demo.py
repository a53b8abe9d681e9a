"""``shardex demo``: a scenario on virtual time (orders by status by default, or tenants)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from shardex.commands import output
from shardex.commands.params import PLOT, count, given, number
from shardex.documents import DEMO_SCHEMA
from shardex.plotting import plot_target

__all__ = ["demo"]


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the runs as JSON.")
@click.option("--plot", type=PLOT,
              help="Draw per-shard-key write rates over time to this PNG (plot extra).")
@click.option("--seed", default=1, show_default=True, type=count(0, 2**63 - 1),
              help="Seed of the workload and store.")
@click.option("--duration", default=10.0, show_default=True,
              type=number(0, 3600, low_open=True),
              help="Virtual seconds of traffic per layout.")
@click.option("--rate", default=None, type=number(0, 100_000, low_open=True),
              help="New orders a second (PENDING writes); 5,000 by default, 1,000 with "
                   "--reshard (at least 50 there).")
@click.option("--reshard", "live", is_flag=True,
              help="Start unsharded and reshard live to the planned layout (the partition "
                   "ceiling is a fifth of --rate; --duration is split before and after).")
@click.option("--scenario", type=click.Choice(["orders", "tenants"]), default="orders",
              show_default=True,
              help="orders: orders by status, unsharded and sharded; tenants: 200 tenants "
                   "sharing partitions, one bursting 20x, with no protection, admission, "
                   "and isolation on a dedicated tier.")
@click.option("--burst", default=None, type=number(0, 3600, low_open=True),
              help="Virtual seconds the heavy tenant bursts (tenants; 60 by default).")
@click.option("--autopilot", is_flag=True,
              help="Three hours of a day of shops with a flash sale, the autopilot beside "
                   "static N and no sharding (the short shardex simulate --autopilot).")
def demo(as_json: bool, plot: Path | None, seed: int, duration: float, rate: float | None,
         live: bool, scenario: str, burst: float | None, autopilot: bool) -> None:
    """Run a scenario on virtual time: orders by status (unsharded and sharded), or tenants."""
    from shardex.scenarios.demo_runs import start_demo
    from shardex.scenarios.orders import OrdersLoad, new_table_outcome

    duration_given = given("duration")
    if autopilot:
        if live or rate is not None or burst is not None or plot is not None \
                or scenario != "orders" or duration_given:
            raise click.UsageError("--autopilot takes --json and --seed only (its day is "
                                   "three hours)")
        from shardex.commands.simulate_autopilot import autopilot_demo

        autopilot_demo(as_json=as_json, seed=seed)
        return

    if plot is not None:
        plot_target(plot)  # a missing plot extra or format fails now, not after the runs
    if scenario == "tenants":
        if live or rate is not None or duration_given:
            raise click.UsageError("--reshard, --rate and --duration belong to the orders "
                                   "scenario (the tenants' length follows --burst)")
        from shardex.commands.demo_tenants import tenants_demo

        tenants_demo(as_json=as_json, plot=plot, seed=seed, burst=burst)
        return
    if burst is not None:
        raise click.UsageError("--burst belongs to the tenants scenario")
    if live:
        from shardex.commands.demo_reshard import reshard_demo

        if rate is not None and rate < _LEAST_LIVE_RATE:
            raise click.BadParameter(
                f"with --reshard at least {_LEAST_LIVE_RATE:g} (the partition ceiling is a "
                f"fifth of it, and below {_LEAST_LIVE_RATE / 5:g} units/s the routing record "
                f"and the readers' own requests throttle), got {rate:g}",
                param_hint="'--rate'")

        reshard_demo(as_json=as_json, plot=plot, seed=seed, duration=duration,
                     rate=rate or 1000.0)
        return
    load = OrdersLoad(duration=duration, created_per_s=rate or 5000.0)
    # started before the spinner's thread, so that their processes are forked
    under_way = start_demo(load, seed=seed)
    try:
        console = output.console(stderr=as_json)
        if not as_json:
            _demo_header(console, load)  # at once: the runs take seconds
        with console.status("simulating both layouts on virtual time...", spinner="dots"):
            runs = under_way.wait()
            check = new_table_outcome(load, runs[-1].routing)
    except BaseException:  # stopped before the runs ended: they end now, not after
        under_way.stop()
        raise
    if plot is not None:
        from shardex.scenarios.plot import plot_write_rates

        plot_write_rates(runs, plot)
    if as_json:
        click.echo(json.dumps({"schema": DEMO_SCHEMA, "runs": [r.summary() for r in runs],
                               "table": {
            "store": _DEMO_URI, "asked_write_units_per_s": round(check.asked_write_units_per_s, 1),
            "accepted_on_new_table": round(check.new_table, 4),
            "accepted_warm_unsplit": round(check.warm_unsplit, 4),
            "accepted_on_demo_table": round(check.demo_table, 4)}}, indent=2))
        return
    _demo_table(console, [r.summary() for r in runs])
    _table_note(console, check)
    if plot is not None:
        console.print(f"plot written to {plot}")


_DEMO_URI = "memory://?partitions=0&warm_write=40000.0"
_LEAST_LIVE_RATE = 50.0


def _table_note(console: Console, check: Any) -> None:
    """Say what a new on-demand table would make of the sharded run, and what avoids it."""
    if check.new_table >= 0.999:
        return
    console.print(
        f"[bold]the table[/]: the sharded layout asks {check.asked_write_units_per_s:,.0f} "
        f"write units/s (entries and placement records); a new on-demand table serves 4,000 "
        f"on 4 partitions and would accept {100 * check.new_table:.0f}% of its writes "
        f"(shardex simulate). These runs use a table warmed to 40,000 (warm_write, the "
        f"per-table quota) and split for heat, each hot key on its own partition "
        f"({_DEMO_URI}): {100 * check.demo_table:.1f}% simulated. Warmed but not yet split "
        f"(split for heat takes minutes), hot keys that share a partition would bring it to "
        f"{100 * check.warm_unsplit:.0f}%.", highlight=False)


def _demo_header(console: Console, load: Any) -> None:
    peaks = load.peak_writes()
    console.print(
        f"[bold]orders_by_status[/]: {load.duration:g} virtual s; entry writes/s per status "
        "at full rate (a move writes an entry at both ends) "
        + ", ".join(f"{k} {v:,.0f}" for k, v in peaks.items())
        + f"; an entry write costs 2 write units (a transaction), so PENDING asks "
        f"{2 * peaks['PENDING']:,.0f} units/s, {2 * peaks['PENDING'] / 1000:.1f}x a "
        "partition's ceiling of 1,000, and every write adds a 2-unit placement record"
    )


def _demo_table(console: Console, runs: Sequence[dict[str, Any]]) -> None:
    table = Table(show_header=True, header_style="bold")
    table.add_column("metric")
    for run in runs:
        table.add_column(run["layout"], justify="right")
    rows: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        ("shards (PENDING / SHIPPED)",
         lambda r: f"{r['shards']['PENDING']} / {r['shards']['SHIPPED']}"),
        ("write calls/s offered (put, move, delete; run mean)",
         lambda r: f"{r['offered_writes_per_s']:,.0f}"),
        ("write calls/s accepted", lambda r: f"{r['accepted_writes_per_s']:,.0f}"),
        ("throttled share of write requests", lambda r: f"{100 * r['throttled_ratio']:.1f}%"),
        ("writes failed after retries", lambda r: f"{r['failed_writes']:,}"),
        ("write latency p50 / p99 (ms)",
         lambda r: f"{r['write_p50_ms']:.1f} / {r['write_p99_ms']:.1f}"),
        ("PENDING page read p50 / p99 (ms)",
         lambda r: f"{r['read_p50_ms']:.1f} / {r['read_p99_ms']:.1f}"),
        ("extra read requests (hedged copies)", lambda r: f"{100 * r['hedged_read_ratio']:.1f}%"),
        ("listings checked", lambda r: f"{r['listings_checked']}"),
        ("every listing matched ground truth",
         lambda r: "[green]yes[/]" if r["listing_complete"] else "[red]NO[/]"),
    ]
    for label, cell in rows:
        table.add_row(label, *(cell(r) for r in runs))
    console.print(table)
