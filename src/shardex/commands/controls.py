"""Live controls of a running reshard or adoption: ``pause``, ``resume``, ``throttle``.

``register(group, kind)`` adds the three commands to ``shardex reshard`` or ``shardex
adopt``: each writes the migration's control record (``shardex.migrate.control``), which
every running mover reads within a few seconds. ``sharing_options`` adds to a ``run``
command the options of its shared budget (``--budget-redis``) and of the outside signals
that hold its movers (``--throttle-file``, ``--prometheus`` with ``--throttle-query`` and
``--throttle-above``), passed on as ``sharing`` (``shardex.migrate.budget.Sharing``).
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import shlex
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal

import click

from shardex.commands import output
from shardex.commands.connection import Connection, index_options, lasting, open_with, run_noting
from shardex.commands.migrations import noun, require_index
from shardex.commands.params import RATE
from shardex.errors import InvalidInput, ReshardRefused

__all__ = ["controls_lines", "controls_status", "register", "sharing_options",
           "status_controls_lines"]

Kind = Literal["reshard", "adopt"]
_POLL_NOTE = "every running mover follows within a few seconds"


async def _migration(store: Any, name: str, kind: Kind) -> tuple[str, str | None]:
    """The id of the reshard or adoption under way on index ``name``, and the state it is
    in when nothing moves in it (None: its movers may move); ReshardRefused if none."""
    from shardex.clock import LoopClock
    from shardex.migrate.work import WorkRecords
    from shardex.routing import Routing
    from shardex.routing_record import RoutingRecord

    # the record alone: the controls need no tier's store (as an index they were refused
    # for a reshard into a tier, whose routing names one)
    stored, _, _ = await RoutingRecord(store, name).read()
    routing = stored or Routing()
    if kind == "reshard":
        if routing.reshard is None or routing.previous is None:
            raise ReshardRefused(f"index {name!r} has no reshard under way: start one with "
                                 "'shardex reshard start'")
        # the mover moves in write-new till its units are done (as status says), the
        # sweep in retired
        meta = routing.reshard
        if routing.state == "write-new" and await WorkRecords(
                store, name, meta.id, clock=LoopClock()).all_done(meta.generation):
            return meta.id, "write-new (every unit is moved)"
        return meta.id, None if routing.state in ("write-new", "retired") \
            else routing.state
    if routing.adoption is None or not routing.adoption.active:
        raise ReshardRefused(f"index {name!r} has no adoption under way: start one with "
                             "'shardex adopt start'")
    stage = routing.adoption.stage
    return routing.adoption.id, None if stage == "dual-write" else stage


def _control(kind: Kind, typed: str, verb: str, uri: str, name: str, connection: Connection,
             change: Callable[[Any], Any], as_json: bool) -> None:
    """``shardex KIND TYPED`` (pause, resume, throttle): ``change`` the control record of
    index ``name``'s migration, and say it was ``verb``."""
    from shardex.clock import LoopClock
    from shardex.migrate.control import change_control, control_document, describe

    lasting(uri, f"{kind} {typed}")
    store = open_with(uri, connection)

    async def write() -> tuple[str, str | None, Any]:
        clock = LoopClock()
        async with store:
            await require_index(store, uri, name)
            migration, still = await _migration(store, name, kind)
            control = await change_control(store, name, migration, change, clock=clock)
        return migration, still, control

    migration, still, control = run_noting(write)
    if as_json:
        click.echo(json.dumps({**control_document(control, 0), "index": name,
                               "migration": migration}, indent=2))
        return
    where = f"--store {shlex.quote(uri)} --index {shlex.quote(name)}"
    then = (f"; resume with: shardex {kind} resume {where}" if control.paused
            else f"; see it with: shardex {kind} status {where}")
    # not "moving at up to 40 ..." in verified, where nothing moves
    summary = describe(control, None, None if still is None else f"nothing moves in {still}")
    output.console().print(f"index {name!r}: {noun(kind)} {migration} {verb}: "
                           f"{summary} ({_POLL_NOTE}){then}", highlight=False, soft_wrap=True)


def who(command: str) -> str:
    """``user@host (command)``: who changed a control record, and with what."""
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name in the environment or the password file
        user = "?"
    return f"{user}@{socket.gethostname()} ({command})"


def register(group: click.Group, kind: Kind) -> None:
    """Add ``pause``, ``resume`` and ``throttle`` to ``group`` (``shardex reshard|adopt``)."""
    json_option = click.option("--json", "as_json", is_flag=True,
                               help="Print shardex.migrate.control/1.")
    # a reshard's commands all take --tier (its next steps name every tier's store); the
    # control record lives in the index's own store, so the controls read none of them
    where = index_options(tiers=kind == "reshard")

    def operator(verb: str, **fields: Any) -> Callable[[Any], Any]:
        """The control record as ``shardex KIND VERB`` leaves it, with ``fields`` set."""
        from shardex.clock import LoopClock

        return lambda c: replace(c, changed_at=LoopClock().wall(),
                                 changed_by=who(f"shardex {kind} {verb}"), **fields)

    def holding(verb: str, paused: bool, help_text: str) -> None:
        @group.command(verb, help=help_text)
        @where
        @json_option
        def command(uri: str, name: str, as_json: bool, connection: Connection) -> None:
            done = "paused" if paused else "resumed"
            _control(kind, verb, done, uri, name, connection, operator(
                verb, paused=paused, reason=f"{done} by an operator",
                paused_by=who(f"shardex {kind} pause") if paused else None), as_json)

    holding("pause", True, "Pause every running mover (they hold their place; resume goes "
                           "on from it).")
    holding("resume", False, "Let the paused movers go on.")

    @group.command()
    @where
    @click.option("--rate", required=True, type=RATE,
                  help="Write units a second the movers may put on any one shard key, "
                       "every process together.")
    @json_option
    def throttle(uri: str, name: str, rate: float, as_json: bool,
                 connection: Connection) -> None:
        """Change the rate of the running movers (all processes together)."""
        _control(kind, "throttle", f"set to {rate:g} write units a second", uri, name,
                 connection,
                 operator("throttle", rate=rate, reason=f"rate set to {rate:g}"), as_json)


def sharing_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the shared budget's and the outside signals' options; pass ``sharing=``."""
    @functools.wraps(command)
    def wrapped(*args: Any, budget_redis: str | None, throttle_file: str | None,
                prometheus: str | None, throttle_query: str | None,
                throttle_above: float | None, **kwargs: Any) -> Any:
        return command(*args, sharing=_sharing(budget_redis, throttle_file, prometheus,
                                               throttle_query, throttle_above), **kwargs)

    options = [
        click.option("--budget-redis", metavar="URL", default=None,
                     help="Share the rate budget through Redis (redis://host:port) instead "
                          "of the store's records; needs the redis extra."),
        click.option("--throttle-file", metavar="PATH", default=None,
                     help="Hold the movers while this file exists."),
        click.option("--prometheus", metavar="URL", default=None,
                     help="A Prometheus server to ask --throttle-query."),
        click.option("--throttle-query", metavar="PROMQL", default=None,
                     help="Hold the movers while this query's value is above "
                          "--throttle-above (the largest of its series)."),
        click.option("--throttle-above", type=float, default=None, metavar="X",
                     help="The threshold of --throttle-query."),
    ]
    for option in options:
        wrapped = option(wrapped)
    return wrapped


def _sharing(redis: str | None, path: str | None, prometheus: str | None,
             query: str | None, above: float | None) -> Any:
    from shardex.migrate.budget import Sharing
    from shardex.migrate.control import FileSignal, MetricSignal, Signal

    signals: list[Signal] = []
    if path is not None and not path.strip():
        raise click.BadParameter("a file's path, not an empty one", param_hint="'--throttle-file'")
    if query is not None and not query.strip():
        raise click.BadParameter("a PromQL query, not an empty one",
                                 param_hint="'--throttle-query'")
    if above is not None and not math.isfinite(above):
        raise click.BadParameter(f"a finite threshold, got {above}",
                                 param_hint="'--throttle-above'")
    if path is not None:
        signals.append(FileSignal(path))
    given = [prometheus is not None, query is not None, above is not None]
    if any(given) and not all(given):
        raise click.UsageError("--prometheus, --throttle-query and --throttle-above go "
                               "together")
    if prometheus is not None and query is not None and above is not None:
        from shardex.web.promql import PromQL

        try:
            client = PromQL(prometheus, timeout=5.0)
        except InvalidInput as exc:
            raise click.BadParameter(str(exc), param_hint="'--prometheus'") from None

        async def ask() -> float | None:
            found = await asyncio.to_thread(client.instant, query)
            return max((value for _, value in found), default=None)

        signals.append(MetricSignal(ask, above, f"{query!r} at {prometheus}"))
    if redis is not None and not redis.startswith(("redis://", "rediss://")):
        raise click.BadParameter(f"a redis://host:port URL, got {redis!r}",
                                 param_hint="'--budget-redis'")
    return Sharing(redis=redis, signals=tuple(signals))


async def controls_status(store: Any, name: str, migration: str | None) -> dict[str, Any] | None:
    """The controls and budget of ``migration`` for a status document (None: no migration)."""
    if migration is None:
        return None
    from shardex.clock import LoopClock
    from shardex.migrate.budget import migration_status

    return await migration_status(store, name, migration, clock=LoopClock())


def status_controls_lines(doc: dict[str, Any], moving: bool) -> list[str]:
    """Status document ``doc``'s controls and budget, as lines (``controls_lines``), with
    why nothing moves now: its state has nothing to move (not ``moving``), or no runner
    runs; and whether a runner holds units (``working``)."""
    idle = None
    if not moving:
        idle = f"nothing moves in {doc['state']}"
    elif not doc["runners"]:
        idle = "no runner runs"
    return controls_lines(doc.get("controls"), idle,
                          working=any(r["units"] for r in doc["runners"]))


def _slice(doc: dict[str, Any]) -> str:
    """``runner-1 25`` (on every key), ``runner-1 25-100 on 5 keys``."""
    keys = doc.get("keys")
    if keys is None:
        return f"{doc['owner']} {doc['share']:g}"
    least, most = round(doc.get("least", doc["share"]), 1), round(doc["share"], 1)
    shares = f"{most:g}" if least >= most else f"{least:g}-{most:g}"
    return f"{doc['owner']} {shares} on {keys} key{'s' if keys != 1 else ''}"


def controls_lines(doc: dict[str, Any] | None, idle: str | None = None, *,
                   working: bool = False) -> list[str]:
    """A status document's controls and budget, as lines; ``idle``: why nothing moves now
    (``nothing moves in verified``, ``no runner runs``), where the rate is no "moving";
    ``working``: some runner holds units (with no slice in the store, it may spend
    through Redis, which keeps none there)."""
    if doc is None:
        return []
    budget = doc["budget"]
    slices = ", ".join(_slice(s) for s in budget["slices"]) or (
        "none in the store (a budget shared through Redis, --budget-redis, keeps none "
        "there)"
        if working and not doc["paused"] and not budget.get("holds") else "none")
    if doc["rate"] is None and not budget["slices"]:  # no runner yet: nothing is in force
        return [f"  controls: {doc['summary']}"]
    summary = doc["summary"]
    if idle is not None and not doc["paused"] and not budget.get("holds"):
        # it read "moving at up to 40 ..." in verified and read-new, where nothing moves,
        # and with no runner at all
        from shardex.migrate.control import at_rate

        summary = at_rate(doc["rate"], idle)
    if doc["paused"]:  # nothing in force: say what resuming brings back ("0 of 0")
        rate = "no rate set yet" if doc["rate"] is None else \
            f"{doc['rate']:g} write units a second per shard key once resumed"
        budget_line = f"  budget: none in force while paused ({rate})"
    else:
        budget_line = (f"  budget: {budget['in_force']:g} of {budget['rate']:g} write units a "
                       "second per shard key in force")
    return [f"  controls: {summary}" + (f" (set by {doc['changed_by']})"
                                               if doc["changed_by"] else ""),
            f"{budget_line}; runners' slices: {slices}",
            *(f"  held: {h['owner']}: {h['reason']}" for h in budget.get("holds", ())),
            *(_need(n, budget["slices"]) for n in budget.get("needs", ()))]


def _need(need: dict[str, Any], slices: list[dict[str, Any]]) -> str:
    """A runner whose writes cost more than a share: waiting for a larger one, or holding
    it while its writes stay that dear."""
    held = [s for s in slices if s["owner"] == need["owner"]
            and s.get("least", s["share"]) >= need["units"] - 1e-9]
    why = (f"writes of {need['units']:g} units; every share is at least that meanwhile, "
           "fewer runners seated")
    if held:
        return f"  holding a larger share: {need['owner']} ({why})"
    return f"  waiting for a larger share: {need['owner']} ({why})"
