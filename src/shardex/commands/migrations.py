"""``shardex migrations``, and what ``reshard`` and ``adopt`` share: status options and
lines, parity reports, watching, Ctrl-C.

``migrations list --store URI [--index NAME...]`` lists every reshard and adoption
recorded for the indexes named (``--index`` falls back on ``SHARDEX_INDEX`` and the config
profile; without any, every index the store holds: ``Store.indexes``) with the state each
is in now (``--json``:
``shardex.migrations.list/1``: ``store`` and ``migrations``, each ``index``, ``kind``,
``id``, ``state``, ``values``, ``started_at`` and ``ended_at`` as ISO 8601 UTC).
``watch`` shows a status document every ``--every`` seconds until no migration is under
way, on an injected sleep so tests run it on virtual time. ``interrupted`` is the one
line a ``run`` stopped by Ctrl-C prints: the state, that stopping is safe, and what to
run next.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click

from shardex.commands import output
from shardex.commands.config import Setting
from shardex.commands.connection import (
    Connection,
    connection_options,
    open_with,
    run_noting,
    store_option,
)
from shardex.commands.params import INDEX_NAME, MAX_AGE, number
from shardex.documents import rounded
from shardex.errors import ReshardRefused, RoutingStale, ShardexError, StoreInUse, Unavailable

__all__ = ["LIST_SCHEMA", "gaps_refused", "interrupted", "migrations", "on_interrupt",
           "parity_lines", "print_parity", "require_index", "runner_lines", "status_options",
           "status_printer", "steps_lines", "sweep_lines", "watch", "watched"]

LIST_SCHEMA = "shardex.migrations.list/1"
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


async def watch(read: Callable[[], Awaitable[dict[str, Any]]],
                show: Callable[[dict[str, Any]], None], *, every: float,
                sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                rounds: int | None = None) -> dict[str, Any]:
    """Show ``read()`` every ``every`` seconds until no migration is under way (or
    ``rounds`` documents were shown, None: no bound); returns the last document."""
    shown = 0
    while True:
        doc = await read()
        show(doc)
        shown += 1
        if _ended(doc) or (rounds is not None and shown >= rounds):
            return doc
        await sleep(every)


async def require_index(store: Any, uri: str, name: str, said: str = "") -> None:
    """BadParameter for ``--index`` (``said`` after its words) unless index ``name`` has a
    routing record in ``store`` (an index stores one as it first opens): a mistyped name
    read as a healthy index at routing version 1, began a reshard of nothing, or claimed a
    fresh table for the autopilot. ``memory://`` holds nothing from one command to the
    next: not asked there."""
    from shardex.routing_record import RoutingRecord

    if store.scheme == "memory" or (await RoutingRecord(store, name).read())[0] is not None:
        return
    raise click.BadParameter(
        f"no index {name!r} in {uri}: it has no routing record (an index stores one as it "
        f"first opens); 'shardex migrations list --store URI' lists the indexes it holds{said}",
        param_hint="'--index'")


def _ended(doc: dict[str, Any]) -> bool:
    if "reshard_id" in doc:
        return doc["reshard_id"] is None
    return doc.get("state") in ("none", "complete", "rolled-back")


def status_printer(as_json: bool, lines: Callable[[dict[str, Any]], list[str]], *,
                   watched: bool = False) -> Callable[[dict[str, Any]], None]:
    """Prints a status document: as JSON (``watched``: one document a line, JSON Lines, as
    ``diagnose -`` prints its live view), or as ``lines``."""
    def show(doc: dict[str, Any]) -> None:
        if as_json:
            click.echo(json.dumps(doc) if watched else json.dumps(doc, indent=2))
            return
        out = output.console()
        for line in lines(doc):
            out.print(line, highlight=False, soft_wrap=True)
        out.file.flush()

    return show


def runner_lines(doc: dict[str, Any]) -> list[str]:
    """The runners of a status document, as lines: owner, units held, lease expiry."""
    return [f"  runner {r['owner']}: " + (
        f"holds unit(s) {', '.join(map(str, r['units']))}, lease until {r['expires_at']}"
        if r["units"] or not r.get("waiting") else r["waiting"])
        for r in doc.get("runners", [])]


def sweep_lines(doc: dict[str, Any]) -> list[str]:
    """A reshard status document's ``retired`` sweep, as how far it is (none elsewhere)."""
    sweep = doc.get("sweep")
    if sweep is None:
        return []
    return [f"  sweep: {sweep['swept']} of {sweep['keys']} retired keys swept"
            + (f", {sweep['sweeping']} being swept" if sweep["sweeping"] else "")]


_NOUNS = {"adopt": "adoption"}  # what a command group's migration is called, where not itself


def noun(group: str) -> str:
    """What the migrations of command group ``group`` are called: 'adoption' for adopt."""
    return _NOUNS.get(group, group)


def interrupted(doc: dict[str, Any], verb: str) -> str:
    """The line a ``run`` stopped by Ctrl-C prints, from the status document read after."""
    what = doc.get("reshard_id") or doc.get("adoption_id")
    steps = doc.get("next_steps") or []
    then = steps[0] if steps else f"shardex {verb} status"
    if what is None:
        return (f"interrupted: index {doc['index']!r} has no {noun(verb)} under way; nothing "
                "to resume")
    runners = doc.get("runners") or []
    if runners and then.startswith(f"shardex {verb} status "):
        # watching another runner: it may be one that was killed, whose lease lapses
        owners = ", ".join(r["owner"] for r in runners)
        until = max(r["expires_at"] for r in runners)
        if any(r["units"] for r in runners):
            then += (f" ({owners} holds units until {until} unless it renews them; if it "
                     f"has stopped, 'shardex {verb} run' takes them over then)")
        else:  # waiting between steps: its mark lapses as a lease does
            then += (f" ({owners} waits to go on, marked until {until} unless it renews "
                     f"the mark; if it has stopped, 'shardex {verb} run' goes on after that)")
    return (f"interrupted: {noun(verb)} {what} of index {doc['index']!r} is in "
            f"{doc['state']}; safe to stop: every step and checkpoint is stored, and the "
            "units this process held are given back (one it could not reach lapses with its "
            f"lease); to go on: {then}")


_STATUS_WAIT = 10.0  # seconds Ctrl-C waits to read where the migration stopped


def on_interrupt(work: Callable[[], T], status: Callable[[], Awaitable[dict[str, Any]]],
                 verb: str, *, run: Callable[[Any], Any] = asyncio.run,
                 say: Callable[[str], None] | None = None) -> T:
    """``work()``; on Ctrl-C, the one line ``interrupted`` words from ``status()`` (read
    after, by ``run``), and exit 130.

    If the state cannot be read in ``_STATUS_WAIT`` seconds (a store that takes requests
    and never answers had Ctrl-C wait minutes) or at all, the line says so.
    """
    try:
        return work()
    except (RoutingStale, Unavailable) as exc:
        # the store stopped answering: what stopping leaves, as after a Ctrl-C (the
        # state is not to be read from a store that does not answer)
        raise ShardexError(f"{exc}; safe to stop: every step and checkpoint stored is "
                           "kept, and the units this process held lapse with their lease; "
                           f"once the store answers, to see where it stands: shardex {verb} "
                           "status") from exc
    except KeyboardInterrupt:
        try:
            line = interrupted(run(asyncio.wait_for(status(), _STATUS_WAIT)), verb)
        except TimeoutError:
            line = unread(verb, f"the store did not answer within {_STATUS_WAIT:g} s")
        except ShardexError as exc:
            line = unread(verb, str(exc))
        if say is not None:
            say(line)
        else:
            output.console(stderr=True).print(line, highlight=False, soft_wrap=True)
        raise click.exceptions.Abort() from None


def unread(verb: str, why: str) -> str:
    """The line of a Ctrl-C after which the migration's state could not be read."""
    return (f"interrupted: the {noun(verb)}'s state could not be read ({why}); "
            "safe to stop: every step and checkpoint stored is kept, and the units this "
            f"process held lapse with their lease; to see where it stands: shardex {verb} "
            "status")


def watched(work: Callable[[], T], what: str, watch: bool) -> T:
    """``work()`` (a status); on Ctrl-C while it ``watch``es, one line that watching
    stopped, and exit 130 (read once, the command's own line: ``cli.Interrupted``)."""
    if not watch:
        return work()
    try:
        return work()
    except KeyboardInterrupt:
        output.console(stderr=True).print(f"stopped watching: the {what} goes on as it was",
                                          highlight=False)
        raise click.exceptions.Abort() from None


def parity_lines(parity: dict[str, Any] | None) -> list[str]:
    """A status document's parity report, as lines (up to five examples)."""
    if parity is None:
        return ["  parity: not checked yet"]
    gaps = ", ".join(f"{parity[k]:,} {k}" for k in ("missing", "extra", "misplaced",
                                                     "mismatched") if parity[k])
    lines = [f"  parity: checked {parity['checked_at']} ({parity['age_s']:.0f} s ago), "
             f"{parity['entries']:,} entries, {gaps or 'no gaps'}"]
    return lines + [f"    {gap['kind']}: {gap['item_id']!r} on {gap['shard_key']!r}"
                    for gap in parity["examples"][:5]]


def _gaps(parity: Any) -> str:
    """A parity report's gap counts, ``2 missing, 1 extra`` (empty: none)."""
    return ", ".join(f"{n:,} {kind}" for kind, n in parity.counts().items() if n)


def print_parity(name: str, parity: Any, then: str) -> None:
    """A verify's parity report of index ``name`` on the console: its gaps (or none), then
    ``then``, and up to ten examples."""
    out = output.console()
    out.print(f"index {name!r}: parity of {parity.entries:,} entries: "
              f"{_gaps(parity) or 'no gaps'}; {then}", highlight=False, soft_wrap=True)
    for gap in parity.examples[:10]:
        out.print(f"  {gap.kind}: {gap.item_id!r} of {gap.value!r} on {gap.shard_key!r}",
                  highlight=False)


def gaps_refused(name: str, parity: Any, run: str) -> None:
    """After a verify's report is printed: exit 1 (one line) if it found gaps, so that a
    script sees them by the exit code, as ``cutover`` will; ``run`` mends them."""
    if parity.clean:
        return
    raise ReshardRefused(f"index {name!r}: the parity check found gaps ({_gaps(parity)}); "
                         f"to mend them, run again, then verify again: {run}")


def steps_lines(steps: list[str]) -> list[str]:
    """A status document's next steps, as lines."""
    return ["next steps:", *(f"  {step}" for step in steps)] if steps else []


def status_options(schema: str, what: str) -> Callable[[F], F]:
    """The options of ``reshard status`` and ``adopt status``: ``--json`` (``schema``),
    ``--max-age``, ``--watch`` (until no ``what`` is under way) and ``--every``."""
    def apply(command: F) -> F:
        for option in reversed((
                click.option("--json", "as_json", is_flag=True, help=f"Print {schema}."),
                click.option("--max-age", default=900.0, show_default=True, type=MAX_AGE,
                             help="Age past which the parity report counts as stale."),
                click.option("--watch", is_flag=True, help="Show it again every --every "
                             f"seconds until no {what} is under way."),
                click.option("--every", default=5.0, show_default=True,
                             type=number(0.1, 3600),
                             help="Seconds between documents with --watch."))):
            command = option(command)
        return command

    return apply


@click.group()
def migrations() -> None:
    """The migrations (reshards, adoptions) recorded in a store."""


@migrations.command("list")
@store_option("Store URI whose migrations to list, e.g. dynamodb://TABLE.")
@click.option("--index", "names", multiple=True, type=INDEX_NAME, cls=Setting,
              setting="index", envvar="SHARDEX_INDEX", show_envvar=True,
              help="An index whose migrations to list (repeat for more; default: every "
                   "index the store holds).")
@connection_options
@click.option("--json", "as_json", is_flag=True, help=f"Print {LIST_SCHEMA}.")
def list_(uri: str, names: tuple[str, ...], as_json: bool, connection: Connection) -> None:
    """List every reshard and adoption recorded for the indexes, with its state now."""
    from shardex.migrate.registry import migrations as recorded
    from shardex.migrate.status import iso

    async def read() -> tuple[list[dict[str, Any]], dict[str, str], list[str]]:
        """The migrations, the indexes refused (why), and those listed."""
        listed, refused = [], {}
        async with open_with(uri, connection) as store:
            asked = list(dict.fromkeys(names))
            if not asked:
                held = await store.indexes()
                if held is None:
                    raise click.UsageError(
                        f"--index is needed: {uri.split(':', 1)[0]}:// stores keep no "
                        "list of their indexes",
                        ctx=click.get_current_context())
                asked = held
            for name in asked:
                try:
                    listed += await recorded(store, [name])
                except StoreInUse as exc:  # an index table holds one index: list the rest
                    refused[name] = exc
        if refused and len(refused) == len(asked):
            raise next(iter(refused.values()))
        listed.sort(key=lambda m: (m.started_at, m.index, m.id))
        return [{**m.to_dict(), "started_at": iso(m.started_at),
                 "ended_at": iso(m.ended_at)} for m in listed], \
            {name: str(exc) for name, exc in refused.items()}, \
            [name for name in asked if name not in refused]

    found, refused, asked = run_noting(read)
    if as_json:
        click.echo(json.dumps(rounded({"schema": LIST_SCHEMA, "store": uri,
                                       "migrations": found, "refused": refused}), indent=2))
        return
    out = output.console()
    for name, why in refused.items():
        out.print(f"{name}: not listed: {why}", highlight=False, soft_wrap=True)
    if not found:
        out.print(f"no migrations recorded for {', '.join(asked)} in {uri}" if asked
                  else f"no index has written to {uri} yet: no migrations recorded",
                  highlight=False)
        return
    for m in found:
        ended = "" if m["ended_at"] is None else f", ended {m['ended_at']}"
        out.print(f"{m['index']}  {m['kind']} {m['id']}  {m['state']}  values "
                  f"{', '.join(m['values']) or '-'}  started {m['started_at']}{ended}",
                  highlight=False, soft_wrap=True)
