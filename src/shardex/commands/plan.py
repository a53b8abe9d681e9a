"""``shardex plan``: N per value from its peak write rate (and, from a diagnosis, its measured
reads), and what that N costs to read."""

from __future__ import annotations

import dataclasses
import json
from typing import Any
from urllib.parse import parse_qs

import click

from shardex.commands import output
from shardex.commands.output import escape
from shardex.commands.params import (
    COUNT,
    HEADROOM,
    ITEM_BYTES,
    NUMBER,
    ValuePair,
    count,
    distinct,
    number,
)
from shardex.commands.params import given as option_given
from shardex.commands.plan_from import MODE_OF_CEILING, UNITS_OF_MODE, measured_peaks
from shardex.commands.plan_text import (
    budget_unit,
    pool_lines,
    print_verdict,
    print_verified,
    read_lines,
    table_lines,
)
from shardex.errors import InvalidInput
from shardex.sim.profiles import MAX_PARTITIONS

__all__ = ["plan"]

_MODE_TEXT = {"table": "index-table mode: each entry is written in a TransactWriteItems, "
                       "which costs twice",
              "gsi": "GSI mode: DynamoDB writes each index entry from the item's own write",
              "azure": "Azure Table Storage: the row and its mirror, written and then "
                       "committed, are about 4 entity writes",
              "cosmos": "Cosmos DB: the entry written and then committed, each at its "
                        "documented RU"}
# the modes whose listings read one way only, and why --eventual changes nothing there
_READ_ONE_WAY = {"gsi": "a GSI's queries are always eventually consistent, and its listings "
                        "are priced so",
                 "azure": "Azure Table Storage counts a listing's entities, whatever its "
                          "consistency",
                 "cosmos": "Cosmos DB reads at its account's consistency, not a request's, "
                           "and a listing is priced at Session's (1 RU a KB)"}


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
    """The layout a store URI names: ``gsi`` for ``dynamodb://TABLE?gsi=...`` or a
    ``memory://`` whose profile has the GSI layout, ``azure`` for ``azure-tables://`` (or
    an Azure profile), ``cosmos`` for ``cosmos://`` (or the Cosmos profile), else
    ``table``.

    A text that is not a store URI, or one that opening it would refuse (an unknown
    scheme or option, a value not of its option's type: ``check_store_uri``, which needs
    no driver or credentials), is a usage error naming --store: a mistyped option would
    otherwise plan another mode or pool than the store's.
    """
    from shardex.errors import InvalidInput
    from shardex.stores import check_store_uri
    from shardex.stores.uri import split_url

    try:
        parts = split_url(uri, "store URI", port=False)
        if "://" not in uri or not parts.scheme:
            raise click.BadParameter(f"{uri!r} is not a store URI (scheme://...), e.g. "
                                     "dynamodb://TABLE?gsi=INDEX&...", param_hint="--store")
        check_store_uri(uri)
    except InvalidInput as exc:
        raise click.BadParameter(str(exc), param_hint="--store") from None
    if parts.scheme.lower() == "memory":
        found = _profile_of_store(uri)
        return {"azure-tables": "azure", "cosmos": "cosmos"}.get(found.store,
                                                                str(found.layout))
    if parts.scheme.lower() == "azure-tables":
        return "azure"
    if parts.scheme.lower() == "cosmos":
        return "cosmos"
    return "gsi" if parts.scheme.lower() == "dynamodb" and parse_qs(parts.query).get("gsi") \
        else "table"


def _pool_of(store: str | None, mode: str) -> tuple[int | None, str]:
    """The requests the index's client sends at once, and what says so: ``--store``'s
    ``max_connections``, else the pool of the client shardex builds for ``mode``; None
    on memory:// (no pool)."""
    from shardex.stores.uri import (
        AIOHTTP_CONNECTIONS,
        DYNAMODB_CONNECTIONS,
        StoreURI,
        check_connections,
    )

    dynamodb = mode in ("table", "gsi")
    pool = DYNAMODB_CONNECTIONS if dynamodb else AIOHTTP_CONNECTIONS
    default = (f"the {'DynamoDB' if dynamodb else 'Azure SDK'} client's pool as shardex "
               "builds it; max_connections in the store's URI sets it")
    if store is None:
        return pool, default
    parsed = StoreURI.parse(store)
    if parsed.scheme == "memory":
        return None, "memory:// has no pool"
    text = parsed.options.get("max_connections")
    if text is None:
        return pool, default
    try:
        return check_connections("", int(text) if text.isdigit() else text), \
            "max_connections in --store"
    except InvalidInput as exc:
        raise click.BadParameter(str(exc), param_hint="--store") from None


def _profile_of_store(uri: str) -> Any:
    """The capacity profile a ``memory://`` URI names (its profile and settings)."""
    from shardex.sim.profiles import DEFAULT_PROFILE, profile
    from shardex.stores.memory.options import capacity_from_uri
    from shardex.stores.uri import StoreURI

    capacity, _ = capacity_from_uri(StoreURI.parse(uri))
    return profile(capacity.pop("profile", DEFAULT_PROFILE), **capacity)


def _with_settings(table: Any, mode: str, settings: tuple[str, ...]) -> Any:
    """``table`` (default: the mode's profile) with ``--table SETTING=VALUE`` over it."""
    from urllib.parse import quote

    from shardex.errors import InvalidInput
    from shardex.plan import PROFILE_OF_MODE
    from shardex.stores.memory.options import CAPACITY_OPTIONS, capacity_from_uri
    from shardex.stores.uri import StoreURI

    pairs, names = [], set()
    for text in settings:
        name, sep, value = text.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"expected SETTING=VALUE (a capacity setting), got "
                                     f"{text!r}", param_hint="--table")
        if name == "profile":  # in the right form, but the profile follows --mode
            raise click.BadParameter("profile is no --table setting: the profile is the "
                                     "one --mode names (or --store's); --table sets "
                                     "capacity settings over it", param_hint="--table")
        if name in names:
            raise click.BadParameter(f"{name} is given twice", param_hint="--table")
        if name not in CAPACITY_OPTIONS:
            known = ", ".join(sorted(CAPACITY_OPTIONS))
            raise click.BadParameter(
                f"{name} is no capacity setting (the latency: --latency-median-ms and "
                f"--latency-p99-ms); capacity settings: {known}", param_hint="--table")
        names.add(name)
        pairs.append(f"{quote(name)}={quote(value)}")
    try:
        # each setting checked alone here, and all of them together over the profile
        capacity, _ = capacity_from_uri(StoreURI.parse("memory://?" + "&".join(pairs)),
                                        resolve=False)
    except InvalidInput as exc:
        raise click.BadParameter(str(exc), param_hint="--table") from None
    if table is None:
        from shardex.sim.profiles import profile

        table = profile(PROFILE_OF_MODE[mode])
    for name in ("layout", "unit", "store"):
        # what the mode (or --store) decides: another planned one layout and described
        # another (layout=gsi under table mode's header, DynamoDB priced in RU)
        if name in capacity and capacity[name] != getattr(table, name):
            raise click.BadParameter(
                f"{name}={capacity[name]} contradicts {mode} mode, whose {name} is "
                f"{getattr(table, name)}: the mode sets it (--mode, or --store)",
                param_hint="--table")
    try:
        return table.replace(**capacity)
    except InvalidInput as exc:
        raise click.BadParameter(str(exc), param_hint="--table") from None


@click.command()
@click.option("--peak", "peaks", multiple=True, metavar="VALUE=WRITES_PER_S",
              type=ValuePair(NUMBER, "VALUE=NUMBER", "PENDING=6000"),
              help="A logical key and its peak writes a second; repeat per value.")
@click.option("--read-peak", "read_peaks_given", multiple=True, metavar="VALUE=READ_UNITS_PER_S",
              type=ValuePair(NUMBER, "VALUE=NUMBER", "PENDING=6000"),
              help="A logical key's peak read units a second as the store charges them (its "
                   "listings'); N is at least what spreads them under the read ceiling. "
                   "Repeat per value; over a diagnosis's measured reads.")
@click.option("--from", "source_file", metavar="FILE",
              help="A diagnosis (shardex diagnose --json; '-' reads stdin): plan each key it "
                   "lists on its measured peak write and read units a second.")
@click.option("--item-bytes", type=count(1, ITEM_BYTES), default=1024, show_default=True,
              help="Bytes of one index entry as written (write units per started KB).")
@click.option("--read-item-bytes", type=count(1, ITEM_BYTES), default=None,
              help="Bytes of one entry as read (projection); default: --item-bytes.")
@click.option("--ceiling", default=None,
              help="Per-partition ceiling: dynamodb, azure-tables, cosmos, or units/s "
                   "(0.001 to 1e9). "
                   "Default: the mode's.")
@click.option("--headroom", type=HEADROOM, default=1.5, show_default=True,
              help="Multiplier on the peak, for growth and bursts (1 to 100; 1.5: 50% to "
                   "spare).")
@click.option("--mode", type=click.Choice(["table", "gsi", "azure", "cosmos"]), default=None,
              help="The layout: index table (shardex writes entries in transactions: 2x), "
                   "GSI (1x), Azure Table Storage (4x) or Cosmos DB (2x, in RU). Default: "
                   "from --store, else table.")
@click.option("--table", "settings", multiple=True, metavar="SETTING=VALUE",
              help="A fact of the table, or an assumption, over the mode's profile: "
                   "warm_write=40000, provisioned_write=10000, split_delay_seconds=300, ... "
                   "(any memory:// capacity setting); repeat.")
@click.option("--partitions", type=count(0, MAX_PARTITIONS), default=None,
              help="Physical partitions the table has now (0: every key its own, as split "
                   "for heat leaves it). Default: from its warm or provisioned throughput.")
@click.option("--store", "store", metavar="URI", default=None,
              help="The store the index lives in; its URI tells the mode.")
@click.option("--amplification", type=number(0, 100, low_open=True), default=None,
              help="Write units per unit of item per write; default: the mode's (table 2, "
                   "gsi 1, azure 4, cosmos 2).")
@click.option("--listing-items", "listings", multiple=True, metavar="N|VALUE=N", type=_Listing(),
              help="Entries in a full listing, for all values or per value; gives the "
                   "listing's pages and read units.")
@click.option("--eventual", is_flag=True, help="Listings read eventually consistent (half).")
@click.option("--item-writes", type=number(0, 1e9), default=None, metavar="N",
              help="Items written a second, each with one placement record (a move writes "
                   "two entries for one item); default: the sum of the peaks.")
@click.option("--verify", is_flag=True,
              help="Run the recommendation through simulate (each value at its peak) and "
                   "report the outcome.")
@click.option("--verify-seconds", type=click.IntRange(min=1, max=86_400), default=None,
              help="Virtual seconds --verify simulates (default: long enough to see the "
                   "split or growth the verdict expects, else 300).")
@click.option("--latency-median-ms", type=number(0, 60_000, low_open=True), default=4.0,
              show_default=True,
              help="Median latency of one request.")
@click.option("--latency-p99-ms", type=number(0, 60_000, low_open=True), default=25.0,
              show_default=True,
              help="99th-percentile latency of one request.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
def plan(peaks: tuple[tuple[str, float], ...],
         read_peaks_given: tuple[tuple[str, float], ...], source_file: str | None,
         item_bytes: int,
         read_item_bytes: int | None,
         ceiling: str | None, headroom: float, mode: str | None,
         settings: tuple[str, ...], partitions: int | None, store: str | None,
         amplification: float | None, listings: tuple[int | tuple[str, int], ...],
         eventual: bool, item_writes: float | None, verify: bool, verify_seconds: int | None,
         latency_median_ms: float, latency_p99_ms: float, as_json: bool) -> None:
    """Plan N per value: the smallest N with peak x units x amplification x headroom <= N x
    ceiling (and, with --read-peak or from a diagnosis, its read units x headroom <= N x
    read ceiling), grown
    until the busiest physical partition (where the shard keys hash, at the
    p99 of placements, with the placement records) takes the peak; the read-side cost of
    each N; every write the layout makes against what the table serves; and one verdict,
    keeps up or throttles, with the assumptions it rests on and what avoids it."""
    from shardex.capacity import write_units
    from shardex.plan import AMPLIFICATION, CEILING_OF_MODE, plan_shards
    from shardex.sim.latency import LatencyModel

    given = distinct(peaks, "--peak")
    reads_given = distinct(read_peaks_given, "--read-peak")
    try:
        latency = LatencyModel(latency_median_ms, latency_p99_ms)
    except InvalidInput as exc:
        raise click.BadParameter(f"{exc} (--latency-median-ms {latency_median_ms:g})",
                                 param_hint="--latency-p99-ms") from None
    if partitions is not None and any(text.partition("=")[0] == "partitions"
                                      for text in settings):
        raise click.UsageError("--partitions and --table partitions=N both set the table's "
                               "partitions: give one")
    if verify_seconds is not None and not verify:
        raise click.UsageError("--verify-seconds sets the run --verify makes: give --verify")
    if not listings:
        # they price a listing's pages and nothing else: taken, they went unread
        for name, option in (("read_item_bytes", "--read-item-bytes"),
                             ("eventual", "--eventual")):
            if option_given(name):
                raise click.UsageError(f"{option} prices a full listing's pages: give "
                                       "--listing-items with it")
    if source_file is not None:
        if amplification is not None:
            raise click.BadParameter("a diagnosis measured its units, amplification included",
                                     param_hint="--amplification")
        if option_given("item_bytes"):
            # it was taken and ignored: the entries were planned as 1,024 bytes
            raise click.BadParameter("a diagnosis measured its units, the entries' size "
                                     "included (--read-item-bytes sizes a listing's entries)",
                                     param_hint="--item-bytes")
        # measured units already hold the item's size and the layout's amplification
        measured, read_peaks, notes, measured_against, floors, bucket, left_out = \
            measured_peaks(source_file)  # (a Diagnosed)
        # a --peak (writes a second) beside them is put in their units once the mode is
        # known (below): over a measured key, its writes as given, its reads as measured
        written, given = given, measured
        item_bytes, amplification = 1024, 1.0
        if item_writes is None:
            # A diagnosis measures each logical key's units, its entries as written; its
            # placement records, if any, are shardex's own keys, left out of its keys. A
            # log counts units, not items: --item-writes tells them, and --verify offers
            # the same (scenarios.verify.verify_plan).
            item_writes = 0.0
    else:
        read_peaks, notes, measured_against, written, floors, bucket = {}, (), None, {}, {}, \
            None
        left_out = 0.0
    read_peaks = {**read_peaks, **reads_given}
    # a value read but not written: planned on its reads, at 0 writes a second
    given = {**dict.fromkeys(reads_given, 0.0), **given}
    if not given:
        raise click.UsageError("give each value's peak (--peak VALUE=WRITES_PER_S) or a "
                               "diagnosis (--from FILE)")

    source = "--mode" if mode is not None else "assumed; --mode or --store sets it"
    if store is not None:
        found = _mode_of_store(store)
        if mode is not None and mode != found:
            raise click.BadParameter(f"{mode} contradicts --store, which names {found} mode",
                                     param_hint="--mode")
        mode, source = found, "from --store"
    if written:
        # writes of 1 KB entries, in write units as the layout writes them (a diagnosis
        # measured those): they had been planned at 1 unit a write, half a table's N
        per_write = AMPLIFICATION[mode or "table"] * write_units(1024)
        given = {**given, **{value: writes * per_write for value, writes in written.items()}}
        notes = (*notes, "--peak " + ", ".join(
            f"{value}={writes:g}" for value, writes in written.items()) + f" (writes a second "
            f"of 1 KB entries) planned as {per_write:g} write units each, the "
            f"{mode or 'table'} mode's, beside the measured units")
    if eventual and mode in _READ_ONE_WAY:
        # taken, it changed nothing: the listing was priced as the store prices it anyway
        raise click.UsageError(f"--eventual: {_READ_ONE_WAY[mode]}; leave it out")

    listing: int | dict[str, int] | None = None
    whole = [count for count in listings if isinstance(count, int)]
    if len(whole) > 1 or (whole and len(whole) != len(listings)):
        raise click.BadParameter("give it once as N, or per value as VALUE=N",
                                 param_hint="--listing-items")
    if whole:
        listing = whole[0]
    elif listings:
        listing = distinct([p for p in listings if isinstance(p, tuple)], "--listing-items")
    table = _profile_of_store(store) if store is not None and store.lower().startswith(
        "memory://") else None
    pool, pool_source = _pool_of(store, mode or "table")
    if settings:
        table = _with_settings(table, mode or "table", settings)
    def planned(peaks: dict[str, float]) -> Any:
        return plan_shards(peaks, item_bytes=item_bytes, read_item_bytes=read_item_bytes,
                           ceiling=CEILING_OF_MODE[mode or "table"] if ceiling is None
                           else ceiling, headroom=headroom,
                           amplification=amplification, listing_items=listing,
                           consistent=not eventual, latency=latency,
                           mode=mode or "table", table=table, item_writes=item_writes,
                           partitions=partitions, pool=pool,
                           read_peaks={v: r for v, r in read_peaks.items() if v in peaks},
                           floors={v: n for v, n in floors.items() if v in peaks})

    result = planned(given)
    per_item = next(iter(result.values.values())).units_per_item
    measured_as = "1 unit an item"
    if source_file is not None and per_item != 1:
        # a store whose units a 1 KB item is more than one of (Cosmos DB's request units)
        if measured_against == "cosmos":
            # the diagnosis measured this store's own units: planned as they are
            result = planned({value: peak / per_item for value, peak in given.items()})
            measured_as = (f"as this store's request units, {per_item:g} to a 1 KB item: the "
                           "diagnosis was made against the cosmos ceiling")
        else:
            measured_as = (f"taken as DynamoDB write units: 1 KB items, {per_item:g} request "
                           f"units each here (the diagnosis was made against the "
                           f"{measured_against or 'dynamodb'} ceiling)")
    elif source_file is not None and measured_against in MODE_OF_CEILING \
            and MODE_OF_CEILING[measured_against] != result.mode:
        # another store's units, planned as this mode's without a word: say so
        mode_of = MODE_OF_CEILING[measured_against]
        notes = (*notes, f"the diagnosis was made against the {measured_against} ceiling, "
                 f"in {UNITS_OF_MODE[mode_of]}, and is planned here in {result.mode} mode "
                 f"as {UNITS_OF_MODE.get(result.mode, 'DynamoDB write units')}; --mode "
                 f"{mode_of} (or a --store of it) plans it on that store")
    if bucket is not None and bucket in result.values:
        result = dataclasses.replace(result, default_from=bucket)
    if left_out >= 0.5 and result.verdict is not None and result.verdict.keeps_up:
        # measured load beside the keys planned, which the table serves too
        result = dataclasses.replace(result, verdict=dataclasses.replace(
            result.verdict, summary=f"{result.verdict.summary} for the keys planned; "
            f"{left_out:,.0f} write units/s measured beside them are not in these figures "
            "(the notes name them)"))
    if source_file is not None and len(result.values) > 1 and result.verdict is not None \
            and any(reason.startswith("the table's") for reason in result.verdict.reasons):
        notes = (*notes, "the table's figures add each key's own peak, as if every key "
                 "peaked in the same second: a diagnosis measures each key's busiest second, "
                 "not when they come together, and keys that peak apart ask less of the "
                 "table than that")
    verified = _verify(result, verify_seconds) if verify else None
    if as_json:
        doc = result.to_dict()
        if source_file is not None:  # the units were measured, amplification included
            doc["amplification_from"] = "measured"
        if verified is not None:
            doc["verify"] = verified
        if notes:
            doc["notes"] = list(notes)
        click.echo(json.dumps(doc, indent=2))
        return
    console = output.console()
    bound = result.ceiling
    why = "given" if result.amplification_given else _MODE_TEXT[result.mode]
    sizes = (f"amplification {result.amplification:g} ({why}); "
             f"ceiling {bound.name} ({bound.write_units:g} "
             + (f"{budget_unit(result)}/s a partition, reads and writes alike"
                if result.profile.shared_units else "write units/s a partition")
             + f"), headroom {result.headroom:g}x, {result.item_bytes} bytes an entry")
    if source_file is not None:
        read = any(p.read_units_per_s is not None for p in result.values.values())
        sizes = (f"peaks are the write units/s measured in {escape(source_file)} (item size "
                 f"and amplification as measured: {escape(measured_as)}, 1x; placement "
                 f"records for --item-writes only)"
                 + (", and its read units/s as measured" if read else "")
                 + f"; ceiling {bound.name} ({bound.write_units:g} write "
                 + (f"and {bound.read_units:g} read " if read else "")
                 + f"units/s a partition), headroom {result.headroom:g}x")
    console.print(f"[bold]plan[/]: {result.mode} mode ({source}); {sizes}", highlight=False)
    for note in notes:
        console.print(f"note: {note}", markup=False, highlight=False)
    columns = [output.Column("value", "left"), *(output.Column(name) for name in (
        "peak w/s", "units/item", "WU/s", "N", "per shard", "queries",
        # in the store's own units: Azure Table Storage counts entities
        "listing entities" if result.mode == "azure" else "listing RU",
        "fan-out p50/p99 ms"))]
    rows = [[escape(value), f"{p.peak:,.0f}", f"{p.units_per_item:g}",
             f"{p.write_units_per_s:,.0f}", f"[bold]{p.shards}[/]" if p.sharded else "1",
             f"{p.units_per_shard_per_s:,.0f} ({100 * p.shard_load:.0f}%)",  # of the ceiling
             f"{p.queries_per_listing:,}",
             "-" if p.listing_read_units is None else f"{p.listing_read_units:,.1f}",
             f"{p.fanout_p50_ms:.1f}/{p.fanout_p99_ms:.1f}"]
            for value, p in result.values.items()]
    console.print(output.table(console, columns, rows))
    for line in pool_lines(result, latency, pool_source):
        console.print(line, highlight=False)
    for line in read_lines(result):
        console.print(line, highlight=False)
    for line in table_lines(result):
        console.print(line, highlight=False)
    print_verdict(console, result)
    if verified is not None:
        print_verified(console, verified)


def _verify(result: Any, seconds: int | None) -> dict[str, Any]:
    """Simulate ``result``'s routing on the table it was judged on, at the placement at
    the p99 of those it drew, each value written at its peak, for ``seconds`` (default:
    what the verdict expects to wait for, the split or the growth, and then some)."""
    from shardex.scenarios.verify import verify_plan

    return verify_plan(result, seconds=seconds)
