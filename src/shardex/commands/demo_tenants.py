"""``shardex demo --scenario tenants``: one tenant's burst, without and with protection."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from shardex.commands import output

__all__ = ["tenants_demo"]


def tenants_demo(*, as_json: bool, plot: Path | None, seed: int,
                 burst: float | None) -> None:
    """Run the tenants scenario in its three modes and print it (a table, or JSON)."""
    from shardex.scenarios.tenants import TENANTS_SCHEMA, TenantsLoad, run_tenants_demo

    load = TenantsLoad() if burst is None else TenantsLoad(burst_s=burst)
    console = output.console(stderr=as_json)
    with console.status("simulating none, admission and isolation on virtual time...",
                        spinner="dots"):
        runs = run_tenants_demo(load, seed=seed)
    if plot is not None:
        from shardex.scenarios.tenants_plot import plot_tenants

        plot_tenants(runs, plot)
    summaries = [run.summary() for run in runs]
    if as_json:
        click.echo(json.dumps({"schema": TENANTS_SCHEMA, "heavy_tenant": load.heavy_tenant,
                               "runs": summaries}, indent=2))
        return
    console.print(
        f"[bold]events_by_tenant[/]: {load.tenants} tenants on {load.partitions} partitions "
        f"of {load.write_ceiling:g} write units/s (a placement costs 2 units); "
        f"{load.heavy_tenant} bursts from {load.heavy_per_s:g} to "
        f"{load.heavy_per_s * load.burst_factor:g} writes/s for {load.burst_s:g} virtual s; "
        f"its neighbours: the {summaries[0]['neighbours']} tenants on its partition",
        highlight=False)
    table = Table(show_header=True, header_style="bold")
    table.add_column("metric")
    for summary in summaries:
        table.add_column(summary["mode"], justify="right")
    rows: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        ("neighbours' write p99 (ms)", lambda r: f"{r['neighbour_write_p99_ms']:,.1f}"),
        ("neighbours' throttled share", lambda r: f"{100 * r['neighbour_throttled_ratio']:.1f}%"),
        ("heavy tenant offered writes/s", lambda r: f"{r['heavy_offered_per_s']:,.1f}"),
        ("heavy tenant accepted writes/s", lambda r: f"{r['heavy_accepted_per_s']:,.1f}"),
        ("refused by admission", lambda r: f"{r['admission_rejected']:,}"),
        ("throttled requests (wasted)", lambda r: f"{r['throttled_requests']:,}"),
        ("writes failed after retries", lambda r: f"{r['failed_writes']:,}"),
    ]
    for label, cell in rows:
        table.add_row(label, *(cell(r) for r in summaries))
    console.print(table)
    isolated = summaries[-1]
    console.print(
        f"isolation: {load.heavy_tenant} on tier 'dedicated' with "
        f"{isolated['dedicated_shards']} shard keys; admission: every other tenant's budget "
        "is a share of one partition, excess refused at once", highlight=False)
    if plot is not None:
        console.print(f"plot written to {plot}")
