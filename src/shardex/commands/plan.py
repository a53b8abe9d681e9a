"""``shardex plan``: N per value from its peak write rate, and what that N costs to read."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import click
from rich.markup import escape

from shardex.commands import output
from shardex.commands.params import COUNT, NUMBER, ValuePair, distinct

__all__ = ["plan"]

_MODE_TEXT = {"table": "index-table mode: each entry is written in a TransactWriteItems, "
                       "which costs twice",
              "gsi": "GSI mode: DynamoDB writes each index entry from the item's own write"}


class _Listing(click.ParamType):  # type: ignore[type-arg]
    """``N`` (every value) or ``VALUE=N`` (one value): an int or a (value, int) pair."""

    name = "N|VALUE=N"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int | tuple[str, int]:
        if isinstance(value, int | tuple):
            return value
        if "=" in str(value):
            pair: tuple[str, int] = _LISTING_PAIR.convert(value, param, ctx)
            return pair
        count: int = COUNT.convert(value, param, ctx)
        return count


_LISTING_PAIR = ValuePair(COUNT, "VALUE=N", "PENDING=50000")


def _mode_of_store(uri: str) -> str:
    """The layout a store URI names: ``gsi`` for ``dynamodb://TABLE?gsi=...``, else ``table``.

    A text that is not a store URI is a usage error naming --store.
    """
    parts = urlsplit(uri)
    if "://" not in uri or not parts.scheme:
        raise click.BadParameter(f"{uri!r} is not a store URI (scheme://...), e.g. "
                                 "dynamodb://TABLE?gsi=INDEX&...", param_hint="--store")
    return "gsi" if parts.scheme.lower() == "dynamodb" and parse_qs(parts.query).get("gsi") \
        else "table"


@click.command()
@click.option("--peak", "peaks", multiple=True, required=True, metavar="VALUE=WRITES_PER_S",
              type=ValuePair(NUMBER, "VALUE=NUMBER", "PENDING=6000"),
              help="A logical key and its peak writes a second; repeat per value.")
@click.option("--item-bytes", type=int, default=1024, show_default=True,
              help="Bytes of one index entry as written (write units per started KB).")
@click.option("--read-item-bytes", type=int, default=None,
              help="Bytes of one entry as read (projection); default: --item-bytes.")
@click.option("--ceiling", default="dynamodb", show_default=True,
              help="Per-partition ceiling: dynamodb, azure-tables, cosmos, or units/s.")
@click.option("--headroom", type=float, default=1.5, show_default=True,
              help="Multiplier on the peak, for growth and bursts (> 0).")
@click.option("--mode", type=click.Choice(["table", "gsi"]), default=None,
              help="The layout: index table (shardex writes entries in transactions: 2x) or "
                   "GSI (1x). Default: from --store, else table.")
@click.option("--store", "store", metavar="URI", default=None,
              help="The store the index lives in; its URI tells the mode.")
@click.option("--amplification", type=float, default=None,
              help="Write units per unit of item per write; default: the mode's (table 2, "
                   "gsi 1).")
@click.option("--listing-items", "listings", multiple=True, metavar="N|VALUE=N", type=_Listing(),
              help="Entries in a full listing, for all values or per value; gives the "
                   "listing's pages and read units.")
@click.option("--eventual", is_flag=True, help="Listings read eventually consistent (half).")
@click.option("--latency-median-ms", type=float, default=4.0, show_default=True,
              help="Median latency of one request.")
@click.option("--latency-p99-ms", type=float, default=25.0, show_default=True,
              help="99th-percentile latency of one request.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
def plan(peaks: tuple[tuple[str, float], ...], item_bytes: int, read_item_bytes: int | None,
         ceiling: str, headroom: float, mode: str | None, store: str | None,
         amplification: float | None, listings: tuple[int | tuple[str, int], ...],
         eventual: bool, latency_median_ms: float, latency_p99_ms: float,
         as_json: bool) -> None:
    """Plan N per value: the smallest N with peak x units x amplification x headroom <= N x
    ceiling, and the read-side cost of each N (queries, read units, fan-out latency)."""
    from shardex.plan import plan_shards
    from shardex.sim.latency import LatencyModel

    source = "--mode" if mode is not None else "assumed; --mode or --store sets it"
    if store is not None:
        found = _mode_of_store(store)
        if mode is not None and mode != found:
            raise click.BadParameter(f"{mode} contradicts --store, which names {found} mode",
                                     param_hint="--mode")
        mode, source = found, "from --store"

    listing: int | dict[str, int] | None = None
    whole = [count for count in listings if isinstance(count, int)]
    if len(whole) > 1 or (whole and len(whole) != len(listings)):
        raise click.BadParameter("give it once as N, or per value as VALUE=N",
                                 param_hint="--listing-items")
    if whole:
        listing = whole[0]
    elif listings:
        listing = distinct([p for p in listings if isinstance(p, tuple)], "--listing-items")
    result = plan_shards(distinct(peaks, "--peak"), item_bytes=item_bytes,
                         read_item_bytes=read_item_bytes, ceiling=ceiling, headroom=headroom,
                         amplification=amplification, listing_items=listing,
                         consistent=not eventual,
                         latency=LatencyModel(latency_median_ms, latency_p99_ms),
                         mode=mode or "table")
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    console = output.console()
    bound = result.ceiling
    why = "given" if result.amplification_given else _MODE_TEXT[result.mode]
    console.print(
        f"[bold]plan[/]: {result.mode} mode ({source}); amplification "
        f"{result.amplification:g} ({why}); ceiling {bound.name} ({bound.write_units:g} write "
        f"units/s a partition), headroom {result.headroom:g}x, {result.item_bytes} bytes an "
        "entry", highlight=False)
    columns = [output.Column("value", "left"), *(output.Column(name) for name in (
        "peak w/s", "units/item", "WU/s", "N", "per shard", "queries", "listing RU",
        "fan-out p50/p99 ms"))]
    rows = [[escape(value), f"{p.peak:,.0f}", f"{p.units_per_item:g}",
             f"{p.write_units_per_s:,.0f}", f"[bold]{p.shards}[/]" if p.sharded else "1",
             f"{p.units_per_shard_per_s:,.0f} ({100 * p.shard_load:.0f}%)",  # of the ceiling
             f"{p.queries_per_listing:,}",
             "-" if p.listing_read_units is None else f"{p.listing_read_units:,.1f}",
             f"{p.fanout_p50_ms:.1f}/{p.fanout_p99_ms:.1f}"]
            for value, p in result.values.items()]
    console.print(output.table(console, columns, rows))
