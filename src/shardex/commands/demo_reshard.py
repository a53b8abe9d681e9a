"""``shardex demo --reshard``: the orders scenario resharded live, shown by phase."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from shardex.commands import output

__all__ = ["reshard_demo"]


def reshard_demo(*, as_json: bool, plot: Path | None, seed: int, duration: float,
                 rate: float) -> None:
    """Run the live reshard demo and print it (a table, or JSON), and draw it if asked."""
    from shardex.scenarios.orders import OrdersLoad
    from shardex.scenarios.resharding import run_reshard_demo

    load = OrdersLoad(duration=duration, created_per_s=rate)
    ceiling = rate / 5
    console = output.console(stderr=as_json)
    with console.status("resharding live on virtual time...", spinner="dots"):
        demo = run_reshard_demo(load, seed=seed, ceiling=ceiling, before=duration / 2,
                                after=duration / 2)
    if plot is not None:
        from shardex.scenarios.reshard_plot import plot_reshard

        plot_reshard(demo, plot)
    summary = demo.summary()
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    peaks = load.peak_writes()
    reshard = summary["reshard"]
    console.print(
        "[bold]orders_by_status[/], resharded live: offered writes/s "
        + ", ".join(f"{k} {v:,.0f}" for k, v in peaks.items())
        + f"; partition ceiling {ceiling:,.0f} write units/s, a placement costs 2 units",
        highlight=False)
    table = Table(show_header=True, header_style="bold")
    table.add_column("metric")
    phases = summary["phases"]
    names = {"before": "before (unsharded)", "during": "during the reshard",
             "after": "after (sharded)"}
    for name in phases:
        table.add_column(names[name], justify="right")
    rows: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        ("virtual seconds", lambda p: f"{p['seconds']:,.1f}"),
        ("offered writes/s", lambda p: f"{p['offered_writes_per_s']:,.0f}"),
        ("accepted writes/s", lambda p: f"{p['accepted_writes_per_s']:,.0f}"),
        ("throttled share of write requests", lambda p: f"{100 * p['throttled_ratio']:.1f}%"),
        ("writes failed after retries", lambda p: f"{p['failed_writes']:,}"),
        ("write latency p50 / p99 (ms)",
         lambda p: f"{p['write_p50_ms']:.1f} / {p['write_p99_ms']:.1f}"),
        ("listings checked", lambda p: f"{p['listings_checked']}"),
        ("every listing matched ground truth",
         lambda p: "[green]yes[/]" if p["listing_complete"] else "[red]NO[/]"),
    ]
    for label, cell in rows:
        table.add_row(label, *(cell(p) for p in phases.values()))
    console.print(table)
    states = ", ".join(f"{s['state']} at {s['at_s']:.1f} s" for s in reshard["states"])
    parity = reshard["parity"]
    console.print(
        f"reshard: PENDING {reshard['from']['PENDING']} -> {reshard['to']['PENDING']}, "
        f"SHIPPED {reshard['from']['SHIPPED']} -> {reshard['to']['SHIPPED']} shard keys, "
        f"{reshard['seconds']:.1f} virtual s; {states}", highlight=False)
    console.print(
        f"mover: {reshard['moved']:,} entries moved (the survey at start counted "
        f"{reshard['to_move']:,}), at most {reshard['mover_peak_units_per_s_on_one_key']:,.0f} "
        f"write units/s on one key (its rate: {reshard['mover_rate_units_per_s']:,.0f}, a "
        f"share of the ceiling); throttled requests on the new keys: "
        f"{reshard['throttled_requests_on_new_keys']:,} (in seconds it moved entries there: "
        f"{reshard['throttled_requests_on_new_keys_while_moving_there']:,}), on the keys it "
        f"drained while it ran: {reshard['throttled_requests_on_drained_keys_while_moving']:,};"
        f" parity "
        f"before cutover: "
        + ("none" if parity is None else f"{parity['entries']:,} entries, "
           + ("no gaps" if not any(parity[k] for k in ("missing", "extra", "misplaced",
                                                       "mismatched")) else "GAPS")),
        highlight=False)
    for problem in summary["problems"][:5]:
        console.print(f"[red]listing problem:[/] {problem}", highlight=False)
    if plot is not None:
        console.print(f"plot written to {plot}")
