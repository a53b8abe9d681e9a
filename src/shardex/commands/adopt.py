"""``shardex adopt``: move an application from its plain, hot GSI to a sharded one, online.

``start`` records the adoption (dual-write; the new GSI created if missing), ``run``
backfills the shard attribute, ``verify`` checks parity, ``cutover`` moves readers to
the new GSI, ``complete`` retires (and with ``--drop-old-index`` drops) the old one,
``rollback`` sends readers back, ``status`` shows it all (``--json``:
``shardex.adopt.status/1``).
"""

from __future__ import annotations

import functools
import json
import shlex
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import click

from shardex.commands import output
from shardex.commands.connection import (
    Connection,
    connection_options,
    index_option,
    open_with,
    run_noting,
    store_option,
)
from shardex.commands.controls import (
    controls_status,
    register,
    sharing_options,
    status_controls_lines,
)
from shardex.commands.migrations import (
    gaps_refused,
    on_interrupt,
    parity_lines,
    print_parity,
    runner_lines,
    status_options,
    status_printer,
    steps_lines,
    watched,
)
from shardex.commands.migrations import watch as watching
from shardex.commands.params import (
    LEASE,
    MARGIN,
    MAX_AGE,
    POLICY,
    RATE,
    RETAIN,
    SETTLE,
    UNIT_LEASE,
    WORKERS,
    ValuePair,
    count,
    distinct,
    number,
)
from shardex.commands.routing import layout_file
from shardex.keys import value_fault
from shardex.routing import ShardPolicy

__all__ = ["adopt"]

T = TypeVar("T")


_CONNECTION = "shardex.adopt.connection"


def _adopter(uri: str, name: str, **options: Any) -> Any:
    """The Adopter of index ``name`` in ``uri``, opened with the command's connection
    options (--region, --profile, --endpoint-url, or the config profile's)."""
    from shardex.migrate.adopter import Adopter

    ctx = click.get_current_context(silent=True)
    connection = None if ctx is None else ctx.meta.get(_CONNECTION)
    return Adopter(uri if connection is None else open_with(uri, connection), name, **options)


def _run(work: Callable[[], Coroutine[Any, Any, T]], lines: _Lines | None = None) -> T:
    # a run says the store's silence in its own progress once it reports
    return run_noting(work, until=None if lines is None else lambda: lines.heard)


def _command(name: str, uri: str, index: str, extra: str = "") -> str:
    return f"shardex adopt {name} --store {shlex.quote(uri)} --index {shlex.quote(index)}{extra}"


class _Lines:
    """Prints progress lines: each new kind of line at once, the same kind every ``every`` s."""

    def __init__(self, every: float = 5.0) -> None:
        self._out = output.console()
        self._every = every
        self._last: tuple[str, float] = ("", 0.0)
        self.heard = False  # a line came: the run says from now on what it waits for

    def __call__(self, line: str) -> None:
        self.heard = True
        kind = line.split(":", 1)[0]
        now = time.monotonic()
        if kind != self._last[0] or now - self._last[1] >= self._every:
            self._out.print(line, highlight=False, soft_wrap=True)
            self._out.file.flush()
            self._last = (kind, now)


def _store_options(command: Any) -> Any:
    @functools.wraps(command)
    def connected(*args: Any, connection: Connection, **kwargs: Any) -> Any:
        click.get_current_context().meta[_CONNECTION] = connection
        return command(*args, **kwargs)

    options = connection_options(index_option()(connected))
    return store_option(
        "The new GSI, as a GSI-mode store URI: dynamodb://TABLE?gsi=NEW&key_attribute=A&"
        "sort_attribute=S&id_attribute=I (the sort attribute is the application's).")(options)


@click.group()
def adopt() -> None:
    """Adopt an application's plain, hot GSI into a shardex-sharded one, online."""


@adopt.command()
@_store_options
@click.option("--from-gsi", "gsi", help="The application's plain GSI.")
@click.option("--from-table", "from_table",
              help="Or: the index table the application keeps itself, keyed by the raw value "
                   "(--store is then a shardex index table).")
@click.option("--from-attribute", "attribute", required=True,
              help="The raw attribute it is keyed by (e.g. status).")
@click.option("--base-table", help="With --from-table: the base table the backfill copies from.")
@click.option("--id-attribute", help="With --from-table: the item id attribute.")
@click.option("--sort-attribute", help="With --from-table: the sort attribute.")
@click.option("--set", "sets", multiple=True, metavar="VALUE=N[:strategy]",
              type=ValuePair(POLICY, "VALUE=N[:strategy]", "PENDING=16"),
              help="Shard VALUE over N shard keys in the new GSI.")
@click.option("--file", "path", type=click.Path(exists=True, dir_okay=False, allow_dash=True,
              path_type=Path),
              help="A plan or diagnosis (--json), or a routing document: its per-value "
                   "policies, as --set gives them (--set wins for a value in both).")
@click.option("--margin", default=40.0, show_default=True, type=MARGIN,
              help="Waited beyond the routing's lease before the backfill and before the "
                   "old GSI may be dropped.")
@click.option("--lease", default=15.0, show_default=True, type=LEASE,
              help="The routing's lease, for an index that has no routing record yet.")
@click.option("--dry-run", is_flag=True, help="Check and print the plan; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print shardex.adopt.start/1.")
def start(uri: str, name: str, gsi: str | None, from_table: str | None, attribute: str,
          base_table: str | None, id_attribute: str | None, sort_attribute: str | None,
          sets: tuple[tuple[str, ShardPolicy], ...], path: Path | None, margin: float,
          lease: float, dry_run: bool, as_json: bool) -> None:
    """Start adopting: create the new GSI if missing, writers add the shard attribute."""
    if (gsi is None) == (from_table is None):
        raise click.UsageError("give one of --from-gsi and --from-table")
    table_options = (base_table, id_attribute, sort_attribute)
    if from_table is not None and None in table_options:
        raise click.UsageError("--from-table needs --base-table, --id-attribute and "
                               "--sort-attribute")
    if gsi is not None and any(table_options):
        raise click.UsageError("--base-table, --id-attribute and --sort-attribute go with "
                               "--from-table")
    source = gsi or from_table
    policies = {**({} if path is None else dict(layout_file(path).routing.overrides)),
                **distinct(sets, "--set")}
    tiered = sorted(value for value, policy in policies.items() if policy.tier is not None)
    if tiered:
        raise click.BadParameter(
            f"{tiered[0]!r} names tier {policies[tiered[0]].tier!r}: an adoption shards "
            "values in the new GSI's own store (move one to a tier later: shardex reshard "
            "start --set VALUE=N@TIER --tier TIER=URI)", param_hint="'--set' or '--file'")
    lines = _Lines(every=0.0 if as_json else 5.0)

    async def begin() -> Any:
        async with _adopter(uri, name, source=source, attribute=attribute, base=base_table,
                            id_attribute=id_attribute, sort_attribute=sort_attribute,
                            routing_lease=lease,
                            progress=None if as_json else lines) as adopter:
            return await adopter.start(policies, margin=margin, dry_run=dry_run), \
                adopter.lease

    plan, routing_lease = _run(begin)
    adoption = plan.routing.adoption
    steps = [] if dry_run else [_command("run", uri, name)]
    if as_json:
        click.echo(json.dumps({
            "schema": "shardex.adopt.start/1", "index": name, "store": uri,
            "adoption_id": None if adoption is None else adoption.id, "dry_run": dry_run,
            "stored": plan.stored, "gsi_created": plan.created, "gsi_existed": plan.exists,
            "items": plan.items, "projection": dict(plan.projection),
            "values": {v: p.to_dict() for v, p in policies.items()},
            "routing": plan.routing.to_dict(), "next_steps": steps}, indent=2))
        return
    out = output.console()
    if dry_run:
        what = "GSI" if gsi else "index table"
        out.print(f"index {name!r}: would adopt {source!r} (on {attribute}), about "
                  f"{plan.items:,} items; the new {what} "
                  + ("exists" if plan.exists else "would be created" + (
                      f" (projection {plan.projection.get('ProjectionType', 'ALL')})"
                      if gsi else ""))
                  + "; dry run: nothing was changed", highlight=False, soft_wrap=True)
        return
    assert adoption is not None
    out.print(f"index {name!r}: started adoption {adoption.id} of {source!r} (dual-write, "
              f"routing version {plan.routing.version}); readers read {source!r}, writers "
              + ("add the shard attribute (index.key_attributes)" if gsi else
                 "write through the index too (index.put, move, delete)"),
              highlight=False, soft_wrap=True)
    for value, policy in sorted(plan.routing.overrides.items()):
        # the routing's own overrides stay beside --set (a rolled-back adoption's too):
        # the backfill and verify follow them, so they are named
        kept = "" if value in policies else " (kept from the routing: --set it to change it)"
        out.print(f"  {value}: {policy.shards} shard(s), {policy.strategy}{kept}",
                  highlight=False)
    out.print(f"the backfill may start {routing_lease + margin:g} s from now (the routing's "
              f"lease {routing_lease:g} s + margin {margin:g} s); next: "
              f"{_command('run', uri, name)}", highlight=False, soft_wrap=True)


@adopt.command()
@_store_options
@click.option("--rate", default=250.0, show_default=True, type=RATE,
              help="Write units a second the backfill may put on any one shard key, every "
                   "process together (the first run's; change it with throttle --rate).")
@click.option("--workers", default=1, show_default=True, type=WORKERS,
              help="Scan segments worked at once by this process.")
@click.option("--segments", default=8, show_default=True, type=count(1, 1_000_000),
              help="Scan segments (the first run decides; later runs use its number).")
@click.option("--unit-lease", default=30.0, show_default=True, type=UNIT_LEASE,
              help="Seconds a worker holds a segment between checkpoints.")
@click.option("--every", default=5.0, show_default=True, type=number(0, 3600),
              help="Seconds between progress lines.")
@sharing_options
def run(uri: str, name: str, rate: float, workers: int, segments: int, unit_lease: float,
        every: float, sharing: Any) -> None:
    """Backfill the shard attribute on every item (resuming wherever it stopped)."""
    from shardex.migrate.base import default_worker

    worker = default_worker()
    lines = _Lines(every)
    unindexable: dict[tuple[str, str], str] = {}

    async def fill() -> Any:
        async with _adopter(uri, name, rate=rate, workers=workers, segments=segments,
                            unit_lease=unit_lease, progress=lines,
                            sharing=sharing, worker=worker) as adopter:
            adopter.say_every = every
            adopter.unindexable = unindexable
            return await adopter.run()

    # a lease this process still holds is no other runner: 'run' goes on from it
    done = on_interrupt(lambda: _run(fill, lines), lambda: _status(uri, name, 900.0, gone=worker),
                        "adopt")
    out = output.console()
    already = done.scanned - done.updated - done.raced - done.unresolved
    out.print(f"index {name!r}: backfill done: {done.scanned:,} items scanned, "
              f"{done.updated:,} updated, {already:,} needing nothing (the shard attribute "
              f"set, or no value to index), {done.raced:,} changed by the application "
              f"first, {done.unresolved:,} unresolved{_unindexable(unindexable)}; next: "
              f"{_command('verify', uri, name)}", highlight=False, soft_wrap=True)


def _unindexable(found: dict[tuple[str, str], str]) -> str:
    """The items of values no logical key can be, which no run resolves: the first named."""
    from shardex.migrate.mover import first_refused

    if not found:
        return ""
    item_id, value, why, more = first_refused(found)
    return (f" ({len(found):,} of them this run: item {item_id!r}{more}, whose value "
            f"{value!r} shardex cannot index: {why}; verify names their values)")


@adopt.command()
@_store_options
@click.option("--settle", default=2.0, show_default=True, type=SETTLE,
              help="Waited before gaps are read again (GSIs are eventually consistent).")
@click.option("--json", "as_json", is_flag=True, help="Print shardex.adopt.verify/1.")
def verify(uri: str, name: str, settle: float, as_json: bool) -> None:
    """Check parity: the old GSI against the new shard keys, per value; record it."""
    async def check() -> tuple[Any, bool, dict[str, str], str | None]:
        async with _adopter(uri, name, settle=settle) as adopter:
            parity = await adopter.verify()
            adoption = (await adopter.routing()).adoption
            # a report made before the backfill's pass finished is not kept for cutover
            kept = adoption is None or adoption.state != "write-new" \
                or (await adopter.backfilled(adoption)).finished
            # past cutover (read-new) the next step is complete: cutover is refused there
            after = None if adoption is None else adoption.state
            return parity, kept, adopter.not_verified, after

    parity, kept, left_out, state = _run(check)
    following = "complete" if state == "read-new" else "cutover"
    if as_json:
        from shardex.documents import rounded
        from shardex.migrate.status import iso

        click.echo(json.dumps(rounded({
            "schema": "shardex.adopt.verify/1", "index": name, **parity.to_dict(),
            "checked_at": iso(parity.checked_at), "clean": parity.clean,
            "not_verified": left_out}), indent=2))
    else:
        for value, why in sorted(left_out.items()):
            output.console().print(
                f"not verified: {value!r} cannot be a logical key ({why}): its items are in "
                "no index's reads through shardex, in any state; give them another value to "
                "index them", highlight=False, markup=False, soft_wrap=True)
        print_parity(name, parity, f"{following} is refused until a verify finds none"
                     if not parity.clean else f"next: {_command(following, uri, name)}"
                     if kept else "the backfill's pass has not finished, so cutover does not "
                     f"take this report; next: {_command('run', uri, name)}, then verify")
    gaps_refused(name, parity, _command("run", uri, name))


@adopt.command()
@_store_options
@click.option("--max-age", default=900.0, show_default=True, type=MAX_AGE,
              help="Oldest parity report the cutover may rely on.")
def cutover(uri: str, name: str, max_age: float) -> None:
    """Move readers to the new GSI; needs the backfill done and a fresh, clean verify."""
    async def switch() -> Any:
        async with _adopter(uri, name) as adopter:
            return await adopter.cutover(max_age=max_age)

    routing = _run(switch)
    output.console().print(
        f"index {name!r}: readers read the new {_kind_word(routing.adoption)} (read-new, "
        f"routing version {routing.version}); next: {_command('complete', uri, name)} | "
        f"{_command('rollback', uri, name)}", highlight=False, soft_wrap=True)


def _kind_word(adoption: Any) -> str:
    """What an adoption's indexes are: GSIs, or index tables (``--from-table``)."""
    return "index table" if adoption is not None and adoption.kind == "table" else "GSI"


@adopt.command()
@_store_options
@click.option("--retain", type=RETAIN, default=None,
              help="Keep the old GSI's path restorable this long first (default: none).")
@click.option("--drop-old-index", "drop", is_flag=True,
              help="Delete the old GSI (or index table) once no reader reads it.")
def complete(uri: str, name: str, retain: float | None, drop: bool) -> None:
    """Retire the old GSI's path (after the retention window); drop it if asked."""
    async def finish() -> Any:
        async with _adopter(uri, name, progress=_Lines()) as adopter:
            return await adopter.complete(retain=retain, drop=drop)

    routing = _run(finish)
    adoption = routing.adoption
    out = output.console()
    if adoption is not None and adoption.state == "read-new":
        from shardex.migrate.status import iso

        until = iso(adoption.migration.retire_after)
        out.print(f"index {name!r}: the old {_kind_word(adoption)} stays restorable until "
                  f"{until}; run {_command('complete', uri, name)} again after it",
                  highlight=False, soft_wrap=True)
        return
    dropped = adoption is not None and adoption.dropped
    then = (f"shardex reshard start --store {shlex.quote(uri)} --index {shlex.quote(name)} "
            "--set VALUE=N (to change shard counts later: a reshard)") if dropped else (
        _command("complete", uri, name, " --drop-old-index")
        + " (once nothing outside shardex reads the old index)")
    out.print(f"index {name!r}: adoption complete"
              + (f"; the old index {adoption.source!r} was dropped" if dropped and adoption
                 else "") + f"; next: {then}", highlight=False, soft_wrap=True)


@adopt.command()
@_store_options
def rollback(uri: str, name: str) -> None:
    """Send readers back to the old GSI (before complete); shard attributes stay."""
    async def back() -> Any:
        async with _adopter(uri, name) as adopter:
            return await adopter.rollback()

    routing = _run(back)
    output.console().print(
        f"index {name!r}: rolled back: readers read {routing.adoption.source!r} again "
        f"(routing version {routing.version})", highlight=False, soft_wrap=True)


async def _status(uri: str, name: str, max_age: float,
                  gone: str | None = None) -> dict[str, Any]:
    from shardex.migrate.status import with_controls

    async with _adopter(uri, name, max_age=max_age) as adopter:
        doc: dict[str, Any] = await adopter.status(uri=uri, gone=gone)
        controls = await controls_status(adopter.store, name, doc["adoption_id"])
        return with_controls(doc, controls, "adopt", gone=gone)


@adopt.command()
@_store_options
@status_options("shardex.adopt.status/1", "adoption")
def status(uri: str, name: str, as_json: bool, max_age: float, watch: bool,
           every: float) -> None:
    """Show the adoption: state, backfill progress, runners, last parity, next steps."""
    show = status_printer(as_json, _status_lines, watched=watch)
    watched(lambda: _run(lambda: watching(functools.partial(_status, uri, name, max_age), show,
                                          every=every, rounds=None if watch else 1)),
            "adoption", watch)


def _status_lines(doc: dict[str, Any]) -> list[str]:
    from shardex.migrate.status import past_count

    if doc["adoption_id"] is None:
        return [f"index {doc['index']!r}: no adoption (routing version "
                f"{doc['routing_version']})"]
    source = doc["source"]
    lines = [f"index {doc['index']!r}: adoption {doc['adoption_id']} of {source['name']!r} "
             f"(on {source['attribute']}), state {doc['state']}, readers read the "
             f"{'old' if doc['reads'] == 'source' else 'new'} index"]
    for value, v in doc["values"].items():
        seen = "" if v["items"] is None else f", {v['items']:,} items seen"
        fault = value_fault(value)
        if fault is not None:  # seen by the backfill: no logical key can be it
            lines.append(f"  {value}: shardex cannot index it ({fault}){seen}")
            continue
        lines.append(f"  {value}: {v['shards']} shard(s), {v['strategy']}{seen}")
    p = doc["progress"]
    rate = "" if p["rate"] is None else f", {p['rate']:,.0f} items/s"
    eta = "" if p["eta_s"] is None else f", ETA {p['eta_s']:,.0f} s"
    total = "" if p["items_total"] is None else f" of about {p['items_total']:,}" \
        if p["items_scanned"] <= p["items_total"] else f", {past_count(p['items_total'])}"
    left = "" if p["items_remaining"] is None else \
        f", remaining about {p['items_remaining']:,}"
    ended = doc["state"] in ("complete", "rolled-back")  # nothing moves, nothing waits
    if not p["segments"] and doc["state"] == "dual-write":
        lines.append("  backfill: not planned yet: the first run plans it once every client "
                     "writes the shard attribute")
    elif not p["segments"] and ended:
        pass  # its records went with it
    elif p["segments"] and p["segments_done"] == p["segments"]:
        already = p["items_scanned"] - p["items_updated"] - p["items_raced"] \
            - p["items_unresolved"]
        lines.append(f"  backfill: done: {p['segments']}/{p['segments']} segments, "
                     f"{p['items_scanned']:,} scanned{total}, {p['items_updated']:,} updated, "
                     f"{already:,} needing nothing (the shard attribute set, or no value "
                     "to index)"
                     + "".join(f", {p[k]:,} {what}" for k, what in (
                         ("items_raced", "changed by the application first"),
                         ("items_unresolved", "unresolved")) if p[k]))
    else:
        lines.append(f"  backfill: {p['segments_done']}/{p['segments']} segments done, "
                     f"{p['items_scanned']:,} scanned{total}, {p['items_updated']:,} "
                     f"updated{left}{rate}{eta}")
    lines += runner_lines(doc)
    if not ended:
        lines.append(f"  next step possible from {doc['ready_at']} (the routing's lease and "
                     "the margin after the last change)")
    lines += parity_lines(doc["parity"])
    if not ended:
        filling = doc["state"] == "dual-write" and not (
            p["segments"] and p["segments_done"] == p["segments"])
        lines += status_controls_lines(doc, filling)
        if doc["retire_after"] is not None:
            lines.append(f"  retention: the old index's path may be retired from "
                         f"{doc['retire_after']}")
    return lines + steps_lines(doc["next_steps"])


register(adopt, "adopt")
