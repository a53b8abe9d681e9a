"""``shardex migrations``, and what ``reshard`` and ``adopt`` share: watching, Ctrl-C.

``migrations list --store URI --index NAME...`` lists every reshard and adoption
recorded for the indexes named (a store cannot list its indexes; ``--index`` falls back
on ``SHARDEX_INDEX`` and the config profile) with the state each is in now (``--json``:
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
from shardex.commands.connection import Connection, connection_options, open_with, store_option
from shardex.commands.params import INDEX_NAME
from shardex.documents import rounded

__all__ = ["LIST_SCHEMA", "interrupted", "migrations", "on_interrupt", "runner_lines",
           "status_printer", "watch", "watched"]

LIST_SCHEMA = "shardex.migrations.list/1"
T = TypeVar("T")


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


def _ended(doc: dict[str, Any]) -> bool:
    if "reshard_id" in doc:
        return doc["reshard_id"] is None
    return doc.get("state") in ("none", "complete", "rolled-back")


def status_printer(as_json: bool, lines: Callable[[dict[str, Any]], list[str]]
                   ) -> Callable[[dict[str, Any]], None]:
    """Prints a status document: as JSON (one after another when watched), or as ``lines``."""
    def show(doc: dict[str, Any]) -> None:
        if as_json:
            click.echo(json.dumps(doc, indent=2))
            return
        out = output.console()
        for line in lines(doc):
            out.print(line, highlight=False, soft_wrap=True)
        out.file.flush()

    return show


def runner_lines(doc: dict[str, Any]) -> list[str]:
    """The runners of a status document, as lines: owner, units held, lease expiry."""
    return [f"  runner {r['owner']}: holds unit(s) {', '.join(map(str, r['units']))}, lease "
            f"until {r['expires_at']}" for r in doc.get("runners", [])]


def interrupted(doc: dict[str, Any], verb: str) -> str:
    """The line a ``run`` stopped by Ctrl-C prints, from the status document read after."""
    what = doc.get("reshard_id") or doc.get("adoption_id")
    steps = doc.get("next_steps") or []
    then = steps[0] if steps else f"shardex {verb} status"
    if what is None:
        return f"interrupted: index {doc['index']!r} has no {verb} under way; nothing to resume"
    return (f"interrupted: {verb} {what} of index {doc['index']!r} is in {doc['state']}; safe "
            "to stop: every step and checkpoint is stored, and the units this process held "
            f"are given back (one it could not reach lapses with its lease); to go on: {then}")


def on_interrupt(work: Callable[[], T], status: Callable[[], dict[str, Any]], verb: str) -> T:
    """``work()``; on Ctrl-C, the one line ``interrupted`` words from ``status()`` (read
    after), and exit 130."""
    try:
        return work()
    except KeyboardInterrupt:
        output.console(stderr=True).print(interrupted(status(), verb), highlight=False,
                                          soft_wrap=True)
        raise click.exceptions.Abort() from None


def watched(work: Callable[[], T], what: str) -> T:
    """``work()`` (a status, watched or not); on Ctrl-C one line, and exit 130."""
    try:
        return work()
    except KeyboardInterrupt:
        output.console(stderr=True).print(f"stopped watching: the {what} goes on as it was",
                                          highlight=False)
        raise click.exceptions.Abort() from None


@click.group()
def migrations() -> None:
    """The migrations (reshards, adoptions) recorded in a store."""


@migrations.command("list")
@store_option("Store URI whose migrations to list, e.g. dynamodb://TABLE.")
@click.option("--index", "names", multiple=True, required=True, type=INDEX_NAME, cls=Setting,
              setting="index", envvar="SHARDEX_INDEX", show_envvar=True,
              help="An index whose migrations to list (repeat for more).")
@connection_options
@click.option("--json", "as_json", is_flag=True, help=f"Print {LIST_SCHEMA}.")
def list_(uri: str, names: tuple[str, ...], as_json: bool, connection: Connection) -> None:
    """List every reshard and adoption recorded for the indexes, with its state now."""
    from shardex.migrate.registry import migrations as recorded
    from shardex.migrate.status import iso

    async def read() -> list[dict[str, Any]]:
        async with open_with(uri, connection) as store:
            return [{**m.to_dict(), "started_at": iso(m.started_at),
                     "ended_at": iso(m.ended_at)} for m in await recorded(store, names)]

    found = asyncio.run(read())
    if as_json:
        click.echo(json.dumps(rounded({"schema": LIST_SCHEMA, "store": uri,
                                       "migrations": found}), indent=2))
        return
    out = output.console()
    if not found:
        out.print(f"no migrations recorded for {', '.join(names)} in {uri}", highlight=False)
        return
    for m in found:
        ended = "" if m["ended_at"] is None else f", ended {m['ended_at']}"
        out.print(f"{m['index']}  {m['kind']} {m['id']}  {m['state']}  values "
                  f"{', '.join(m['values']) or '-'}  started {m['started_at']}{ended}",
                  highlight=False, soft_wrap=True)
