"""``shardex diagnose``: which keys of an access log are hot, why, and what to do about it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from shardex.commands import output
from shardex.errors import InvalidInput, InvalidLog
from shardex.plotting import pyplot

if TYPE_CHECKING:
    from shardex.heat.report import Diagnosis

__all__ = ["diagnose"]

_BINS = 120


@click.command()
@click.argument("files", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(["csv", "jsonl", "parquet"]),
              help="Read every file in this format, whatever its extension.")
@click.option("--skip-bad", is_flag=True, help="Count and skip malformed rows instead of failing.")
@click.option("--eventual", is_flag=True,
              help="Reads given in bytes are eventually consistent (half the units).")
@click.option("--ceiling", default="dynamodb", show_default=True,
              help="Per-partition ceiling: dynamodb, azure-tables, cosmos, or units/s.")
@click.option("--headroom", type=float, default=1.5, show_default=True,
              help="Multiplier on observed peaks when sizing N (> 0).")
@click.option("--top", type=int, default=10, show_default=True, help="Keys to list.")
@click.option("--stream", is_flag=True,
              help="Read row by row in bounded memory (Space-Saving); '-' reads stdin.")
@click.option("--counters", type=int, default=1000, show_default=True,
              help="Space-Saving counters when streaming.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--plot", type=click.Path(dir_okay=False, writable=True, path_type=Path),
              help="Draw a heat map of the top keys over time to this PNG (plot extra).")
def diagnose(files: tuple[str, ...], fmt: str | None, skip_bad: bool, eventual: bool,
             ceiling: str, headroom: float, top: int, stream: bool, counters: int,
             as_json: bool, plot: Path | None) -> None:
    """Diagnose hot partitions from access logs (CSV, JSON Lines, Parquet; '-' is stdin).

    Columns: timestamp (ISO 8601 or epoch seconds), key, op (read|write), units or
    bytes, and optionally throttled (0/1). See docs/diagnose.md.
    """
    from shardex.heat import report

    if plot is not None and not (stream or "-" in files):
        pyplot()  # a missing plot extra fails now, not after the files are read
    if stream or "-" in files:
        if plot is not None:
            raise InvalidInput("--plot needs files read exactly, not --stream or stdin")
        if len(files) != 1:
            raise InvalidInput("--stream reads one file or '-' (stdin)")
        name = files[0]
        kind = fmt or ("csv" if name == "-" else None)
        if kind is None:
            from shardex.heat.logs import log_format
            kind = log_format(name)

        if name != "-" and not Path(name).is_file():
            raise InvalidLog("no such file", path=name)
        if name.lower().endswith((".gz", ".gzip")):
            raise InvalidInput(f"--stream reads plain text: zcat {name} | shardex diagnose -")
        shown = "<stdin>" if name == "-" else name
        try:
            with click.open_file(name, "r", encoding="utf-8") as lines:
                result = report.diagnose_stream(
                    lines, fmt=kind, name=shown, skip_bad=skip_bad, eventual=eventual,
                    ceiling=ceiling, headroom=headroom, top=top, counters=counters)
        except UnicodeDecodeError as exc:
            raise InvalidLog(f"is not UTF-8 text: {exc}", path=shown) from exc
    else:
        console = output.console(stderr=True)
        with console.status("aggregating with DuckDB...", spinner="dots"):
            result = report.diagnose(list(files), fmt=fmt, skip_bad=skip_bad,
                                     eventual=eventual, ceiling=ceiling, headroom=headroom,
                                     top=top, timeline_bins=_BINS if plot else 0)
    if plot is not None:
        from shardex.heat.plot import plot_heatmap

        plot_heatmap(result, plot)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    _print(output.console(), result)
    if plot is not None:
        output.console().print(f"heat map written to {plot}", markup=False, highlight=False)


def _print(console: Console, result: Diagnosis) -> None:
    profile = result.profile
    bound = profile.ceiling
    console.print(
        f"[bold]{profile.rows:,} rows[/], {profile.distinct_keys:,}"
        f"{'' if profile.distinct_exact else '+'} keys, {profile.seconds:,} s, "
        f"{profile.total_units:,.0f} units, {profile.throttles:,} throttled; ceiling "
        f"{bound.name}: {bound.write_units:g} write / {bound.read_units:g} read units/s"
        + (f"; [yellow]{profile.skipped_rows:,} malformed rows skipped[/] "
           f"({', '.join(f'{c}: {n}' for c, n in sorted(profile.skipped_by_column.items()))})"
           if profile.skipped_rows else ""))
    shards = result.recommendation.shards
    table = Table(show_header=True, header_style="bold")
    table.add_column("key", overflow="fold", min_width=12)
    for name in ("share", "peak u/s", "sustained u/s", "peak/ceiling", "throttles", "N"):
        table.add_column(name, justify="right", no_wrap=True)
    for k in result.keys:
        ratio = k.peak_to_ceiling
        table.add_row(
            escape(k.key), f"{100 * profile.share(k):.1f}%", f"{k.peak_units_per_s:,.0f}",
            f"{k.sustained_units_per_s:,.1f}",
            f"[red]{ratio:.2f}[/]" if ratio > 1 else f"{ratio:.2f}", f"{k.throttles:,}",
            str(shards.get(k.key, 1)))
    console.print(table)
    evidence = result.classification.evidence
    shown = {k: v for k, v in evidence.items() if k not in ("hot_key_sequence",)}
    console.print(f"[bold]classification[/]: {result.classification.kind}  "
                  + escape(", ".join(f"{k}={v}" for k, v in shown.items())), highlight=False)
    if "hot_key_sequence" in evidence:
        console.print("  hot key over time: " + " -> ".join(evidence["hot_key_sequence"]),
                      markup=False, highlight=False)
    rec = result.recommendation
    console.print(f"[bold]recommendation[/]: {rec.strategy}"
                  + (escape(f"  shards: {', '.join(f'{k}={n}' for k, n in shards.items())}")
                     if shards else ""), highlight=False)
    console.print(f"  {rec.why}", markup=False, highlight=False)
