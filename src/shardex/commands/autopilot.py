"""``shardex autopilot``: the loop that reshards a live index from its heat (docs/autopilot.md).

``shardex autopilot --store URI --index NAME [--source ...] [--policy FILE] [--dry-run]``
runs the loop (``shardex.autopilot.Autopilot``): one leader per index, heat from the
source each tick, the pure policy, the migration runner driven through every state,
every decision and action recorded in the store, printed one line each.
``log`` prints that record (``--json``: ``shardex.autopilot.log/1``), ``pause`` and
``resume`` stop and restart every autopilot of the index at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import signal
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

import click

from shardex.commands import output
from shardex.commands.connection import (
    Connection,
    given_tiers,
    index_options,
    lasting,
    named_tiers,
    open_with,
    store_ceiling,
)
from shardex.commands.controls import sharing_options
from shardex.commands.migrations import require_index
from shardex.commands.params import (
    LOGICAL_KEY,
    MARGIN,
    MAX_AGE,
    RATE,
    UNIT_LEASE,
    WORKERS,
    count,
    number,
)
from shardex.errors import InvalidInput
from shardex.stores.base import Store

__all__ = ["autopilot"]

_PROFILES = {"azure-tables": "azure-tables", "cosmos": "cosmos"}


class _RunByDefault(click.Group):
    """A group whose own name runs ``run``: ``shardex autopilot --store ...``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # options first: run's; a word that names no command stays one (click names it)
        if args and args[0].startswith("-") and args[0] not in ("-h", "--help"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_RunByDefault)
def autopilot() -> None:
    """Reshard a live index from its heat: grow, shrink, with a leader and an audit log.

    'shardex autopilot --store URI --index NAME' runs it (the same as 'autopilot run').
    """


def _source(text: str, store: Store, index: str) -> Any:
    """The heat source ``--source`` names (see the option's help)."""
    from shardex.autopilot import FileHeat, MeterHeat, PrometheusHeat

    if text == "meter":
        from shardex.clock import LoopClock

        return MeterHeat(store, index, clock=LoopClock())
    if text.startswith("file:"):
        path = text.removeprefix("file:")
        if not path:
            raise click.BadParameter("file: needs a path, e.g. file:heat.jsonl",
                                     param_hint="'--source'")
        if Path(path).is_dir():  # a file not there yet is awaited; a folder never reads
            raise click.BadParameter(f"file:{path} is a folder, not a file of samples",
                                     param_hint="'--source'")
        return FileHeat(Path(path))
    if text.startswith(("prometheus://", "prometheus+https://")):
        from shardex.errors import InvalidURI
        from shardex.stores.uri import split_url
        from shardex.web.promql import PromQL, label_matchers, seconds

        try:
            parts = split_url(text, "heat source")
        except InvalidURI as exc:
            raise click.BadParameter(str(exc), param_hint="'--source'") from None
        options = dict(urllib.parse.parse_qsl(parts.query))
        unknown = sorted(set(options) - {"window", "match"})
        if unknown or not parts.netloc:
            raise click.BadParameter(
                f"{text!r}: expected prometheus://HOST:PORT[/PATH][?window=60s&match=...]"
                + (f" (unknown option {unknown[0]!r})" if unknown else ""),
                param_hint="'--source'")
        scheme = "https" if parts.scheme.endswith("https") else "http"
        url = f"{scheme}://{parts.netloc}{parts.path}"
        api = PromQL(url)
        window = seconds(options.get("window", "60s"))
        _check_window(api, window, text)
        return PrometheusHeat(
            url, index, window=window,
            match=label_matchers(options.get("match", "")),
            instant=lambda query, at: api.instant(query, at=at),
            range_query=lambda query, start, end, step: api.range(
                query, start=start, end=end, step=step))
    raise click.BadParameter(f"{text!r}: use prometheus://HOST:PORT, meter or file:PATH",
                             param_hint="'--source'")


def _check_window(api: Any, window: float, text: str) -> None:
    """Refuse a rate ``window`` of fewer than two of the server's longest scrape interval:
    a rate needs two samples in its window, so every key read as no heat at all, silently
    (docs/autopilot.md asks for four). A server that does not answer now is not checked:
    the loop waits for it as for any heat that does not come."""
    from shardex.errors import ShardexError

    try:
        intervals = [interval for _, _, interval in api.scrape_intervals()]
    except ShardexError:
        return
    if intervals and window < 2 * max(intervals):
        raise click.BadParameter(
            f"{text!r}: window {window:g} s holds fewer than two scrapes of "
            f"{max(intervals):g} s (the server's longest scrape interval): a rate needs "
            f"two samples, so no key would show heat; give window={4 * max(intervals):g}s "
            f"(four scrape intervals)", param_hint="'--source'")


def _sizing(uri: str, ceiling: str | None, index: str, headroom: float) -> tuple[Any, Any]:
    """The table's facts and the planner's sizer, from the store's kind and ``--ceiling``
    (planning with the policy's ``headroom``)."""
    from shardex.autopilot import PlannerSizer, TableFacts
    from shardex.capacity import resolve_ceiling
    from shardex.sim.profiles import profile
    from shardex.stores.uri import StoreURI

    scheme = StoreURI.parse(uri).scheme
    found = resolve_ceiling(store_ceiling(uri) if ceiling is None else ceiling)
    # the loop plans for a table split for heat (each hot shard key its own partition)
    table = profile(_PROFILES.get(scheme, "dynamodb-on-demand"), partitions=0,
                    write_ceiling=found.write_units, read_ceiling=found.read_units)
    # isolate_share is a share of the table's write limit: the store's per-table quota (a
    # table's warm throughput is not known here); it was left infinite, so no key was
    # ever isolated by its share, only past max_shards
    return TableFacts(found.write_units, table.quota_write), PlannerSizer(
        table, namespace=index, headroom=headroom)


def _line(entry: Any) -> str:
    from shardex.migrate.status import iso

    layout = "" if entry.to_n is None else f" N={entry.from_n}->{entry.to_n}"
    who = f" {entry.key}" if entry.key else ""
    return (f"{iso(entry.t)} {entry.kind} {entry.action} {entry.outcome}{who}{layout}: "
            f"{entry.reason}")


@autopilot.command()
@index_options(tiers=True)
@click.option("--source", default="prometheus://127.0.0.1:9090", show_default=True,
              help="Where heat is read: prometheus://HOST:PORT[/PATH][?window=60s&match="
                   "job%3D%22orders%22] (a Prometheus server scraping the fleet; window: "
                   "the rate's, at least four scrape intervals), meter (this process's own "
                   "store meter) or file:PATH (JSON Lines of samples, appended).")
@click.option("--policy", "policy_path", type=click.Path(exists=True, dir_okay=False,
                                                         path_type=Path),
              help="The policy (TOML; docs/autopilot.md): thresholds, windows, cooldowns.")
@click.option("--dry-run", is_flag=True, help="Propose and record; start nothing, take no "
                                              "lease.")
@click.option("--ceiling", default=None,
              help="A partition's write ceiling: a store name (dynamodb, azure-tables, "
                   "cosmos) or units a second, 0.001 to 1e9 (default: the store's).")
@click.option("--lease", type=number(1.0, 3600.0), default=None,
              help="Seconds the leader lease lasts (default: 15, or three ticks).")
@click.option("--margin", default=40.0, show_default=True, type=MARGIN,
              help="Waited beyond the routing's lease between a migration's steps.")
@click.option("--max-age", default=900.0, show_default=True, type=MAX_AGE,
              help="Oldest parity report a cutover relies on.")
@click.option("--rate", default=250.0, show_default=True, type=RATE,
              help="Write units a second the mover may put on any one shard key.")
@click.option("--workers", default=16, show_default=True, type=WORKERS,  # DEFAULT_WORKERS
              help="Work units moved at once by this process: every source key of a "
                   "migration of up to 16 keys at once, each at its share of --rate.")
@click.option("--unit-lease", default=30.0, show_default=True, type=UNIT_LEASE,
              help="Seconds a worker holds a work unit between checkpoints.")
@click.option("--duration", type=number(0.0, 1e9, low_open=True), default=None,
              help="Stop after this many seconds (default: run until Ctrl-C or SIGTERM).")
@click.option("--metrics-port", type=count(0, 65535), default=None,
              help="Serve the autopilot's metrics, the runner's and the store's on "
                   "http://127.0.0.1:PORT/metrics (0: a free port; needs the metrics extra).")
@sharing_options
def run(uri: str, name: str, source: str, policy_path: Path | None, dry_run: bool,
        ceiling: str | None, lease: float | None, margin: float, max_age: float,
        rate: float, workers: int, unit_lease: float, duration: float | None,
        metrics_port: int | None, connection: Connection, sharing: Any) -> None:
    """Run the autopilot of index NAME (one leader per index; others wait)."""
    from shardex.autopilot import Autopilot, AutopilotPolicy, load_policy
    from shardex.autopilot.runner import Runner

    lasting(uri, None if dry_run else "autopilot", offers_dry_run=True)
    policy = AutopilotPolicy() if policy_path is None else load_policy(policy_path)
    named_tiers([policy.tier], "--policy", where=f"{policy_path}: tier")
    try:
        facts, sizer = _sizing(uri, ceiling, name, policy.headroom)
    except InvalidInput as exc:
        raise click.BadParameter(str(exc), param_hint="'--ceiling'") from None
    store = open_with(uri, connection)
    heat = _source(source, store, name)
    out = output.console()

    def report(entry: Any) -> None:
        out.print(_line(entry), highlight=False, soft_wrap=True)
        out.file.flush()  # a pipe reader waits on each line

    with contextlib.ExitStack() as stack:
        recorder = gauges = metrics_url = None
        if metrics_port is not None:
            from shardex.autopilot.metrics import AutopilotMetrics
            from shardex.metrics import MetricsRecorder
            from shardex.metrics.prometheus import serve_prometheus

            recorder = MetricsRecorder().attach(store)
            server = stack.enter_context(serve_prometheus(recorder, port=metrics_port))
            gauges = AutopilotMetrics(name, server.registry)
            metrics_url = server.url

        async def drive() -> bool:
            stop = asyncio.Event()
            with contextlib.suppress(NotImplementedError, RuntimeError):
                asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
            # the migration's one budget and live controls, as 'reshard run' shares them:
            # without them 'reshard pause' and 'throttle' did not reach its movers
            runner = Runner(store, name, rate=rate, workers=workers, unit_lease=unit_lease,
                            max_age=max_age, recorder=recorder, tiers=given_tiers() or None,
                            sharing=sharing)
            pilot = Autopilot(runner, policy=policy, source=heat, facts=facts, size=sizer,
                              dry_run=dry_run, lease=lease, margin=margin, max_age=max_age,
                              gauges=gauges, report=report)
            async with pilot:
                # a mistyped name took the leader lease (or, dry, wrote a log record) of an
                # index that is not there, and claimed a fresh table for it
                await require_index(store, uri, name, "; nothing was written")
                # the heat source's first answer: one out of reach fails the run here, in
                # one line, before anything is announced
                await pilot.backfill()
                if metrics_url is not None:
                    output.console(stderr=True).print(f"metrics: {metrics_url}",
                                                      highlight=False)
                out.print(f"autopilot of index {name!r} in {uri}: heat from "
                          f"{heat.name}, a decision every {policy.tick:g} s"
                          + (" (dry run: nothing is changed)" if dry_run else
                             f", worker {pilot.worker}"), highlight=False, soft_wrap=True)
                out.file.flush()
                await pilot.run(duration=duration, stop=stop)
            return stop.is_set()  # SIGTERM: the pilot stopped as it would on Ctrl-C

        def stopped() -> None:
            what = "its dry run changed nothing" if dry_run else (
                "a migration it drove stays in the state it reached, and the next leader "
                "(this command again, or another autopilot of the index) drives it on; "
                "its lease was given up, or lapses")
            again = ["shardex", "autopilot", "run", "--store", uri, "--index", name,
                     "--source", source, *(["--policy", str(policy_path)] if policy_path else []),
                     *(["--ceiling", ceiling] if ceiling else []),
                     *(["--dry-run"] if dry_run else [])]
            output.console(stderr=True).print(
                f"interrupted: the autopilot of index {name!r} stopped; safe to stop: {what}; "
                f"to go on: {shlex.join(again)} (with your other options)",
                highlight=False, soft_wrap=True)

        try:
            terminated = asyncio.run(drive())
        except KeyboardInterrupt:
            stopped()
            raise click.exceptions.Abort() from None
        if terminated:  # it stopped in order; a stop still says so, as SIGTERM exits
            stopped()
            sys.exit(128 + signal.SIGTERM)


def _records(uri: str, name: str, connection: Connection) -> Any:
    from shardex.autopilot import AutopilotRecords
    from shardex.clock import LoopClock

    return AutopilotRecords(open_with(uri, connection), name, clock=LoopClock())


@autopilot.command()
@index_options()
@click.option("--limit", type=count(1, 100_000), default=50, show_default=True,
              help="The newest entries shown.")
@click.option("--key", "key", default=None, type=LOGICAL_KEY,
              help="Only the entries of this logical key and the actions of the "
                   "migrations that move it.")
@click.option("--json", "as_json", is_flag=True, help="Print shardex.autopilot.log/1.")
def log(uri: str, name: str, limit: int, key: str | None, as_json: bool,
        connection: Connection) -> None:
    """Print the autopilot's record of index NAME: leader, pause, decisions and actions."""
    lasting(uri, None)

    async def read() -> tuple[Any, ...]:
        records = _records(uri, name, connection)
        async with records.store:
            # a mistyped name read as an autopilot with no leader, exit 0
            await require_index(records.store, uri, name)
            lease, _ = await records.lease()
            state, _ = await records.state()
            return lease, await records.control(), state, await records.log()

    from shardex.autopilot.records import entries_of

    lease, control, state, entries = asyncio.run(read())
    where = uri  # as given, as every command names it
    # a key's entries and its migrations' actions (a start names its keys in details)
    entries = (entries if key is None else entries_of(entries, key))[-limit:]
    held = lease.owner is not None and lease.expires > time.time()  # else it lapsed
    if as_json:
        from shardex.documents import rounded

        click.echo(json.dumps(rounded({
            "schema": "shardex.autopilot.log/1", "index": name, "store": where,
            "leader": lease.to_body() if held else None,
            "paused": control.paused, "control": control.to_body(),
            "state": state.to_body(), "entries": [e.to_body() for e in entries]}),
            indent=2))
        return
    out = output.console()
    out.print(f"autopilot of index {name!r} in {where}: "
              + (f"leader {lease.owner} (term {lease.term})" if held else "no leader")
              + (f"; PAUSED by {control.by or '?'}" + (f": {control.reason}"
                                                       if control.reason else "")
                 if control.paused else "")
              + (f"; driving migration {state.reshard}" if state.reshard else ""),
              highlight=False, soft_wrap=True)
    for entry in entries:
        out.print(_line(entry), highlight=False, soft_wrap=True)


def _control(uri: str, name: str, paused: bool, reason: str,
             connection: Connection) -> None:
    import getpass
    import socket

    from shardex.autopilot import Control
    from shardex.clock import LoopClock

    async def write() -> None:
        records = _records(uri, name, connection)
        async with records.store:
            # a mistyped name would claim a fresh table for an index that is not there
            await require_index(records.store, uri, name, "; nothing was written")
            await records.set_control(Control(paused, LoopClock().wall(),
                                              f"{getpass.getuser()}@{socket.gethostname()}",
                                              reason))

    asyncio.run(write())


@autopilot.command()
@index_options()
@click.option("--reason", default="", help="Why, for the log.")
def pause(uri: str, name: str, reason: str, connection: Connection) -> None:
    """Stop every autopilot of index NAME from acting, at once, until 'resume'."""
    lasting(uri, "autopilot pause")
    _control(uri, name, True, reason, connection)
    output.console().print(f"autopilot of index {name!r}: paused; a running leader stops "
                           "driving within a second (its migration stays where it is)",
                           highlight=False)


@autopilot.command()
@index_options()
def resume(uri: str, name: str, connection: Connection) -> None:
    """Let the autopilot of index NAME act again (it resumes the migration it drove)."""
    lasting(uri, "autopilot resume")
    _control(uri, name, False, "", connection)
    output.console().print(f"autopilot of index {name!r}: resumed", highlight=False)
