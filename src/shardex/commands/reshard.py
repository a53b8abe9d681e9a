"""``shardex reshard``: change a live index's layout through the reshard states.

``start`` records the reshard (read-both) and prints its steps, ``run`` drives it (and
resumes one stopped anywhere), ``status`` shows it (``--json``:
``shardex.reshard.status/1``), ``verify`` checks parity, ``cutover`` moves readers to
the new layout alone, ``complete`` retires the old one, ``rollback`` goes back.
"""

from __future__ import annotations

import contextlib
import functools
import json
import shlex
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import click

from shardex.commands import output
from shardex.commands.connection import (
    Connection,
    given_tiers,
    index_options,
    lasting,
    named_tiers,
    open_with,
    run_noting,
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
    require_index,
    runner_lines,
    status_options,
    status_printer,
    steps_lines,
    sweep_lines,
    watched,
)
from shardex.commands.migrations import watch as watching
from shardex.commands.params import (
    LOGICAL_KEY,
    MARGIN,
    MAX_AGE,
    POLICY,
    RATE,
    RETAIN,
    UNIT_LEASE,
    WORKERS,
    ValuePair,
    count,
    distinct,
    given,
    number,
)
from shardex.commands.reshard_progress import Reporter, finished
from shardex.commands.routing import LayoutFile, layout_file
from shardex.errors import InvalidRouting, ReshardRefused
from shardex.routing import Routing, ShardPolicy
from shardex.stores.base import Store

__all__ = ["reshard"]

T = TypeVar("T")
_STATES = ("read-both", "write-new", "verified", "read-new", "retired", "done")


def _mover_options(command: Any) -> Any:
    command = click.option(
        "--unit-lease", default=30.0, show_default=True, type=UNIT_LEASE,
        help="Seconds a worker holds a work unit between checkpoints.")(command)
    command = click.option(
        "--workers", default=1, show_default=True, type=WORKERS,
        help="Work units moved at once by this process.")(command)
    return click.option(
        "--rate", default=250.0, show_default=True, type=RATE,
        help="Write units a second the mover may put on any one shard key, every process "
             "together (the first run's; change it with throttle --rate).")(command)


_every_option = click.option(
    "--every", default=5.0, show_default=True, type=number(0, 3600),
    help="Seconds between progress lines when the output is not a terminal.")


def _run(work: Callable[[], Coroutine[Any, Any, T]], report: Reporter | None = None) -> T:
    # a run says the store's silence in its own progress once it reports
    return run_noting(work, until=None if report is None else lambda: report.heard)


def _resharder(store: str | Store, name: str, connection: Connection, **options: Any) -> Any:
    from shardex.migrate import Resharder

    return Resharder(open_with(store, connection) if isinstance(store, str) else store, name,
                     tiers=given_tiers() or None, **options)


@contextlib.asynccontextmanager
async def _existing(store: str | Store, uri: str, name: str, connection: Connection,
                    **options: Any) -> AsyncIterator[Any]:
    """``_resharder`` of an index that has a routing record (``require_index``), as every
    reshard command needs (run and the steps on a mistyped name said 'no reshard is under
    way', run exited 0)."""
    async with _resharder(store, name, connection, **options) as runner:
        await require_index(runner.store, uri, name)
        yield runner


def _policy_text(policy: ShardPolicy) -> str:
    where = "" if policy.tier is None else f" on tier {policy.tier!r}"
    return f"{policy.shards} shard(s), {policy.strategy}{where}"


def _command(name: str, uri: str, index: str, extra: str = "") -> str:
    tiers = "".join(f" --tier {shlex.quote(f'{tier}={where}')}"
                    for tier, where in given_tiers().items())
    return (f"shardex reshard {name} --store {shlex.quote(uri)} --index {shlex.quote(index)}"
            f"{tiers}{extra}")


@click.group()
def reshard() -> None:
    """Change a live index's layout (shard counts, strategies) without losing an entry."""


# -- start ---------------------------------------------------------------------------


def _changes(current: Routing, given: LayoutFile | None, sets: dict[str, ShardPolicy]
             ) -> tuple[dict[str, ShardPolicy | None], ShardPolicy | None]:
    changes: dict[str, ShardPolicy | None] = {}
    default = None
    if given is not None:
        layout = given.routing
        # a diagnosis changes the keys it recommends for; a whole layout (a routing
        # document, a plan) sends the values it leaves out back to the default
        for value in (set(current.overrides) if given.whole else set()) \
                | set(layout.overrides):
            changes[value] = layout.overrides.get(value)
        default = layout.default if given.has_default else None
    changes.update(sets)
    return changes, default


@reshard.command()
@index_options(tiers=True)
@click.option("--set", "sets", multiple=True, metavar="VALUE=N[:strategy][@tier]",
              type=ValuePair(POLICY, "VALUE=N[:strategy][@tier]", "PENDING=16:hash"),
              help="Reshard VALUE over N shard keys (strategy hash, random or round_robin), "
                   "in the store of tier 'tier' (--tier) if given, else the index's own: a "
                   "value whose tier changes moves between stores.")
@click.option("--default", "default", metavar="N[:strategy]", type=POLICY,
              help="The new default policy (name the values it moves with --value).")
@click.option("--value", "values", multiple=True, metavar="VALUE", type=LOGICAL_KEY,
              help="A value that follows the default and holds entries (the store cannot "
                   "list them): its entries move when the default changes.")
@click.option("--file", "path", type=click.Path(exists=True, dir_okay=False, allow_dash=True,
              path_type=Path),
              help="A routing document or plan (--json): the new layout; or a diagnosis "
                   "(--json), which changes the keys it recommends for ('-': standard "
                   "input).")
@click.option("--margin", default=40.0, show_default=True, type=MARGIN,
              help="Waited beyond the routing's lease between steps: the longest request "
                   "and the clock skew between hosts.")
@click.option("--dry-run", is_flag=True, help="Print the steps and what would move; change "
                                              "nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
def start(uri: str, name: str, sets: tuple[tuple[str, ShardPolicy], ...],
          default: ShardPolicy | None, values: tuple[str, ...], path: Path | None,
          margin: float, dry_run: bool, as_json: bool, connection: Connection) -> None:
    """Start a reshard of index NAME: readers cover both layouts, then 'run' drives it."""
    if not (sets or default or path):
        raise click.UsageError("nothing to change: give --set, --default or --file")
    if values and default is None and path is None:  # it was ignored
        raise click.UsageError("--value names values that follow the default, for a change "
                               "of it: give --default too, or --set VALUE=N to shard a value")
    overrides = distinct(sets, "--set")
    given = layout_file(path) if path is not None else None
    named_tiers([p.tier for p in overrides.values()], "--set")
    named_tiers([None if default is None else default.tier], "--default")
    if given is not None:
        named_tiers([given.routing.default.tier,
                     *(p.tier for p in given.routing.overrides.values())], "--file")
    lasting(uri, None if dry_run else "reshard start", offers_dry_run=True)
    omitted: list[str] = []  # sharded values the --file leaves out: back to the default

    async def begin() -> Any:
        async with _existing(uri, uri, name, connection) as runner:
            current = await runner.routing()
            changes, file_default = _changes(current, given, overrides)
            omitted.extend(sorted(value for value, policy in changes.items()
                                  if policy is None and value in current.overrides
                                  and value not in overrides))
            try:
                plan = await runner.start(changes, default=default or file_default,
                                          values=values, margin=margin, dry_run=dry_run)
            except InvalidRouting as exc:  # the input was checked: what is stored refuses it
                raise ReshardRefused(f"index {name!r}: {exc}") from None
            return plan, runner.lease, runner.rate

    plan, lease, rate = _run(begin)
    where = uri  # as given, as status names it
    meta = plan.routing.reshard
    if as_json:
        click.echo(json.dumps({
            "schema": "shardex.reshard.start/1", "index": name, "store": where,
            "reshard_id": meta.id, "dry_run": dry_run, "stored": plan.stored,
            "routing_version": plan.routing.version,
            "values": {v: {"from": p.source.to_dict(), "to": p.target.to_dict(),
                           "entries": p.entries, "to_move": p.to_move}
                       for v, p in plan.values.items()},
            "to_move": plan.to_move, "routing": plan.routing.to_dict(),
            "next_steps": [] if dry_run else [_command("run", uri, name)]}, indent=2))
        return
    out = output.console()
    verb = "would start" if dry_run else "started"
    out.print(f"index {name!r} in {where}: {verb} reshard {meta.id} (routing version "
              f"{plan.routing.version - 1} -> {plan.routing.version})", highlight=False)
    for value, p in plan.values.items():
        out.print(f"  {value}: {_policy_text(p.source)} -> {_policy_text(p.target)}: "
                  f"{p.entries:,} entries, {p.to_move:,} to move"
                  + (f" (not in {path}: back to the default)" if value in omitted else ""),
                  highlight=False)
    previous = plan.routing.previous
    if previous is not None and previous.default != plan.routing.default:
        # the store cannot list the values that follow the default: say what is moved
        named = [v for v in plan.values if v not in plan.routing.overrides]
        out.print(f"  the default changes: of the values that follow it, the reshard moves "
                  f"{', '.join(map(repr, named)) or 'none'} (named by --value) alone; any "
                  "other that holds entries stays on the old shard keys and is hidden once "
                  "readers read the new layout alone: name each one", highlight=False,
                  soft_wrap=True)
    wait = lease + margin
    alone, together = (max(1, round(plan.move_seconds(rate, workers)))
                       for workers in (1, plan.sources))
    moving = f"about {alone} s or more"
    if together < alone:  # run's one worker drains a source key at a time
        moving += f" with one worker, run's default; {together} s with --workers {plan.sources}"
    steps = [
        ("read-both", "readers read the old and the new shard keys; writers still write the "
                      "old ones" + (" (now)" if not dry_run else "")),
        ("write-new", f"writers write the new shard keys, {wait:g} s later (the routing's "
                      f"lease {lease:g} s + margin {margin:g} s): shardex reshard run"),
        ("move", f"after another {wait:g} s the mover moves {plan.to_move:,} entries, at up "
                 f"to {rate:g} write units a second on any shard key ({moving})"),
        ("verified", "a parity check finds every entry on the new layout"),
        ("read-new", "readers read the new shard keys alone: shardex reshard cutover"),
        ("retired", "after the retention window: shardex reshard complete [--retain]"),
        ("stable", "the new layout alone; until retired, shardex reshard rollback goes back"),
    ]
    out.print("steps:")
    for i, (state, text) in enumerate(steps, 1):
        out.print(f"  {i}. {state:<10} {text}", highlight=False)
    if dry_run:
        out.print("dry run: nothing was changed")
    else:
        out.print(f"next: {_command('run', uri, name)}", highlight=False, soft_wrap=True)


# -- run (what it shows as it goes: ``reshard_progress``) ------------------------------


@reshard.command()
@index_options(tiers=True)
@_mover_options
@sharing_options
@click.option("--until", type=click.Choice(_STATES), default=None,
              help="The state to stop at (default: verified; done for a rollback).")
@click.option("--max-age", default=900.0, show_default=True, type=MAX_AGE,
              help="Oldest parity report a cutover made by --until read-new or later uses.")
@_every_option
@click.option("--metrics-port", type=count(0, 65535), default=None,
              help="Serve the reshard's progress gauges and the store's metrics on "
                   "http://127.0.0.1:PORT/metrics while it runs (0: a free port; needs the "
                   "metrics extra); once done it waits for one more scrape to be answered in "
                   "full (at most twice the scrape interval plus 5 s, and 30 s), so its "
                   "last counts are not lost.")
def run(uri: str, name: str, rate: float, workers: int, unit_lease: float, until: str | None,
        max_age: float, every: float, metrics_port: int | None,
        connection: Connection, sharing: Any) -> None:
    """Drive the reshard of index NAME (resuming it wherever it stopped)."""
    if (until is None or _STATES.index(until) <= _STATES.index("verified")) \
            and given("max_age"):
        raise click.UsageError("--max-age bounds the parity report a cutover relies on: give "
                               "--until read-new or later (the run stops at "
                               f"{until or 'verified'}, before any cutover)")
    lasting(uri, "reshard run")
    out = output.console()
    store = open_with(uri, connection)
    with contextlib.ExitStack() as stack:
        recorder = metrics_url = None
        if metrics_port is not None:
            from shardex.metrics import MetricsRecorder
            from shardex.metrics.prometheus import serve_prometheus

            recorder = MetricsRecorder().attach(store)
            server = stack.enter_context(serve_prometheus(recorder, port=metrics_port,
                                                          final_scrape=30.0))
            metrics_url = server.url
        report = stack.enter_context(Reporter(out, every=every))

        from shardex.migrate.base import default_worker

        worker = default_worker()

        async def drive() -> Any:
            async with _existing(store, uri, name, connection, rate=rate, workers=workers,
                                 unit_lease=unit_lease, max_age=max_age, progress=report,
                                 recorder=recorder, sharing=sharing, worker=worker) as runner:
                runner.say_every = every
                # announced once the reshard was found and opened: a run refused at once
                # fails in one line
                if metrics_url is not None:
                    output.console(stderr=True).print(f"metrics: {metrics_url}",
                                                      highlight=False)
                return await runner.run(until=until)

        # a lease this process still holds is no other runner: 'run' goes on from it
        result = on_interrupt(lambda: _run(drive, report), lambda: _status(
            uri, name, connection, max_age, gone=worker), "reshard")
    finished(out, result, uri, name)


# -- status, verify --------------------------------------------------------------------


def _status_lines(doc: dict[str, Any]) -> list[str]:
    from shardex.migrate.states import MOVING

    if doc["reshard_id"] is None and doc.get("adoption"):
        adoption = doc["adoption"]
        return [f"index {doc['index']!r} in {doc['store']}: no reshard under way; adoption "
                f"{adoption['id']} is ({adoption['stage']}, routing version "
                f"{doc['routing_version']}): a reshard may start once it ends",
                f"next: {doc['next_steps'][0]}"]
    if doc["reshard_id"] is None:
        return [f"index {doc['index']!r} in {doc['store']}: no reshard under way (routing "
                f"version {doc['routing_version']}, {doc['state']})"]
    lines = [f"index {doc['index']!r} in {doc['store']}: reshard {doc['reshard_id']} "
             f"({doc['direction']}), state {doc['state']}, routing version "
             f"{doc['routing_version']}"]
    for value, v in doc["values"].items():
        remaining = "not planned yet" if v["remaining"] is None else f"{v['remaining']:,}"
        lines.append(f"  {value}: {_policy_text(ShardPolicy.from_dict(v['from']))} -> "
                     f"{_policy_text(ShardPolicy.from_dict(v['to']))}: moved {v['moved']:,}, "
                     f"remaining {remaining}")
    if doc["total"] is not None:
        line = (f"  moved {doc['moved']:,} of {doc['total']:,} (fixed at the plan), "
                f"remaining {doc['remaining']:,}")
        short = doc["total"] - doc["moved"]
        if doc["remaining"] == 0 and short > 0:
            # moves no record counts (a runner SIGKILLed before its checkpoint) read as lost
            line += (f"; the other {short:,} were moved by a runner that stopped before it "
                     "recorded them, or deleted or moved by the application first (parity "
                     "reads what is there)")
        elif short < 0:
            line += (f"; {-short:,} more than planned: the application wrote them on the "
                     "old layout after the plan, before writers followed the new one")
        elif doc["remaining"] and short > doc["remaining"]:
            line += (f"; {short - doc['remaining']:,} needed no move (moved by a runner that "
                     "stopped before it recorded them, or deleted or moved by the "
                     "application first)")
        lines.append(line)
    units = doc["units"]
    lines.append(f"  work units: {units['total']} ({units['done']} done, {units['leased']} "
                 f"leased); next step possible from {doc['ready_at']}")
    lines += runner_lines(doc) + sweep_lines(doc)
    done = units["total"] > 0 and units["done"] == units["total"]
    # the mover moves in write-new till its units are done, the sweep in retired
    lines += parity_lines(doc["parity"]) + status_controls_lines(
        doc, (doc["state"] in MOVING and not done) or doc["state"] == "retired")
    if doc["retire_after"] is not None:
        lines.append(f"  retention: the old layout may be retired from {doc['retire_after']}")
    return lines + steps_lines(doc["next_steps"])


async def _status(uri: str, name: str, connection: Connection,
                  max_age: float, gone: str | None = None) -> dict[str, Any]:
    from shardex.migrate import status_document
    from shardex.migrate.status import with_controls

    tiers = given_tiers()
    async with _existing(uri, uri, name, connection) as runner:
        routing = await runner.routing()
        units = await runner.units(routing)
        doc: dict[str, Any] = status_document(
            routing, units, index=name, store=uri, lease=runner.lease,
            now=runner.store.clock.wall(), max_age=max_age, gone=gone, tiers=tiers,
            sweeps=await runner.sweeps(routing))
        controls = await controls_status(runner.store, name, doc["reshard_id"])
        return with_controls(doc, controls, "reshard", gone=gone)


@reshard.command()
@index_options(tiers=True)
@status_options("shardex.reshard.status/1", "reshard")
def status(uri: str, name: str, as_json: bool, max_age: float, watch: bool, every: float,
           connection: Connection) -> None:
    """Show the reshard of index NAME: state, progress, runners, parity, next steps."""
    lasting(uri, None)
    show = status_printer(as_json, _status_lines, watched=watch)
    read = functools.partial(_status, uri, name, connection, max_age)
    watched(lambda: _run(lambda: watching(read, show, every=every,
                                          rounds=None if watch else 1)), "reshard", watch)


@reshard.command()
@index_options(tiers=True)
@click.option("--json", "as_json", is_flag=True, help="Print the parity report as JSON.")
def verify(uri: str, name: str, as_json: bool, connection: Connection) -> None:
    """Check parity: both layouts' entries against the new layout alone, and record it."""
    lasting(uri, "reshard verify")

    async def check() -> Any:
        async with _existing(uri, uri, name, connection) as runner:
            parity = await runner.verify()
            return parity, await runner.routing()

    parity, routing = _run(check)
    if as_json:
        from shardex.documents import rounded
        from shardex.migrate.status import iso

        click.echo(json.dumps(rounded({
            "schema": "shardex.reshard.verify/1", "index": name, "state": routing.state,
            **parity.to_dict(), "checked_at": iso(parity.checked_at),
            "clean": parity.clean}), indent=2))
    else:
        print_parity(name, parity, f"the reshard is in {routing.state}")
    gaps_refused(name, parity, _command("run", uri, name))


# -- cutover, complete, rollback ----------------------------------------------------------


@reshard.command()
@index_options(tiers=True)
@click.option("--max-age", default=900.0, show_default=True, type=MAX_AGE,
              help="Oldest parity report the cutover may rely on.")
def cutover(uri: str, name: str, max_age: float, connection: Connection) -> None:
    """Move readers to the new layout alone (read-new); needs a fresh, clean parity report."""
    lasting(uri, "reshard cutover")
    out = output.console()

    with Reporter(out) as report:
        async def switch() -> Routing:
            async with _existing(uri, uri, name, connection, progress=report) as runner:
                new: Routing = await runner.cutover(max_age=max_age)
                return new

        routing = _run(switch)
    out.print(f"index {name!r}: readers read the new layout alone (read-new, routing version "
              f"{routing.version}); next: {_command('complete', uri, name)} | "
              f"{_command('rollback', uri, name)}", highlight=False, soft_wrap=True)


@reshard.command()
@index_options(tiers=True)
@click.option("--retain", type=RETAIN, default=None,
              help="Keep the old layout restorable this long before retiring it "
                   "(default: the window already asked for, else none).")
def complete(uri: str, name: str, retain: float | None, connection: Connection) -> None:
    """Retire the old layout (after the retention window) and end the reshard."""
    lasting(uri, "reshard complete")
    out = output.console()
    with Reporter(out) as report:
        async def finish() -> Any:
            async with _existing(uri, uri, name, connection, progress=report) as runner:
                return await runner.complete(retain=retain)

        result = _run(finish)
    meta = result.routing.reshard
    if meta is None and not result.ended:
        # it ended between this command's read and its write: another complete (or run)
        out.print(f"index {name!r}: the reshard had already ended, completed by another "
                  f"process (routing version {result.routing.version}, stable)",
                  highlight=False, soft_wrap=True)
        return
    if meta is not None and result.state == "read-new":
        from shardex.migrate.status import iso

        out.print(f"index {name!r}: the old layout stays restorable until "
                  f"{iso(meta.retire_after)}; run {_command('complete', uri, name)} again "
                  "after it (or 'shardex reshard run --until done', which waits)",
                  highlight=False, soft_wrap=True)
        return
    finished(out, result, uri, name)


@reshard.command()
@index_options(tiers=True)
@_mover_options
@sharing_options
@_every_option
def rollback(uri: str, name: str, rate: float, workers: int, unit_lease: float,
             every: float, connection: Connection, sharing: Any) -> None:
    """Roll the reshard back to the layout it left, moving entries back, to its end.

    Its movers share the reshard's one budget and follow its controls (pause, resume,
    throttle), as run's do.
    """
    from shardex.migrate.base import default_worker
    from shardex.migrate.reshard_base import DEFAULT_MAX_AGE

    lasting(uri, "reshard rollback")
    out = output.console()
    worker = default_worker()
    with Reporter(out, every=every) as report:
        async def back() -> Any:
            async with _existing(uri, uri, name, connection, rate=rate, workers=workers,
                                 unit_lease=unit_lease, progress=report, sharing=sharing,
                                 worker=worker) as runner:
                runner.say_every = every
                return await runner.rollback()

        # Ctrl-C says where the rollback is and how to go on, as run's does
        result = on_interrupt(lambda: _run(back, report), lambda: _status(
            uri, name, connection, DEFAULT_MAX_AGE, gone=worker), "reshard")
    finished(out, result, uri, name)


register(reshard, "reshard")
