"""``shardex serve``: a local page of the live heat, fed by a Prometheus server (the whole
fleet), one process's ``/metrics`` endpoint, or a demo."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from typing import Any

import click

from shardex.commands import output
from shardex.commands.connection import (
    Connection,
    connection_options,
    given_tiers,
    store_ceiling,
    tier_option,
)
from shardex.commands.params import DAY, INDEX_NAME, Duration, given, number

__all__ = ["serve"]


@click.command()
@click.option("--prometheus", "url", metavar="URL",
              help="A Prometheus server that scrapes every process (fleet-wide heat by "
                   "PromQL, e.g. http://127.0.0.1:9090), or one process's /metrics endpoint "
                   "(shardex.metrics.serve_prometheus, shardex reshard run --metrics-port).")
@click.option("--demo", is_flag=True,
              help="Run an orders index on memory:// in this process, unsharded under a hot "
                   "key, and show its meter.")
@click.option("--rate", type=number(0, 1_000_000, low_open=True), default=700.0,
              show_default=True, help="--demo: writes a second.")
@click.option("--store", "uri", metavar="URI",
              help="Also show the routing record and the migration of --index kept in this "
                   "store (they stay on the page when a reshard runner exits).")
@click.option("--index", "name", type=INDEX_NAME,
              help="The index to show: its series only, and its routing record with --store.")
@tier_option("With --store: the store of a tier the routing names (a policy's @NAME), "
             "which the page's next steps name.")
@click.option("--match", default="", metavar="MATCHERS",
              help='A Prometheus server: PromQL label matchers every query adds, e.g. '
                   "'job=\"orders-api\"'.")
@click.option("--history", default="15m", show_default=True, type=Duration(10, 7 * DAY),
              help="A Prometheus server: how far back the charts and counts reach "
                   "(10s to 7d).")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="Port on 127.0.0.1 (0: a free one).")
@click.option("--every", type=number(0.2, 3600), default=2.0, show_default=True,
              help="Seconds between the page's refreshes (with --json and one process's "
                   "/metrics: between the two scrapes a rate is read from).")
@click.option("--ceiling", default=None,
              help="Per-partition ceiling: dynamodb, azure-tables, cosmos, or units/s "
                   "(0.001 to 1e9) "
                   "[default: the kind of --store, else dynamodb].")
@click.option("--json", "as_json", is_flag=True,
              help="Print one shardex.serve/1 document (what the page polls) and exit.")
@connection_options
def serve(url: str | None, demo: bool, rate: float, uri: str | None, name: str | None,
          match: str, history: float, port: int, every: float, ceiling: str | None,
          as_json: bool,
          connection: Connection) -> None:
    """Serve a page of the live heat per logical key and shard key, against the ceiling,
    with throttles and a running reshard's progress, on http://127.0.0.1:PORT/.

    Given a Prometheus server, it shows the whole fleet that server scrapes; given one
    process's /metrics, that process alone. The page answers only at 127.0.0.1 or
    localhost and only reads. Ctrl-C stops it.
    """
    from shardex.capacity import resolve_ceiling
    from shardex.web import HeatServer, PrometheusFeed, RoutingWatch, open_feed
    from shardex.web.server import with_routing

    if (url is None) == (not demo):
        raise click.UsageError("give one source: --prometheus URL or --demo")
    if demo:
        # the demo's index lives on memory:// in this process: nothing here names a store
        named = [option for option, value in (
            ("--store", uri), ("--index", name), ("--match", match or None),
            ("--history", history if given("history") else None),
            ("--region", connection.region), ("--profile", connection.profile),
            ("--endpoint-url", connection.endpoint_url)) if value is not None]
        configured = {"--" + setting.replace("_", "-") for setting in connection.configured}
        stray = [option for option in named if option not in configured]
        if stray:
            raise click.UsageError(f"--demo runs its own index on memory:// in this process: "
                                   f"{stray[0]} is for --prometheus")
    if uri is not None and name is None:
        raise click.UsageError("--store needs --index (the index whose routing it shows)")
    tiers = given_tiers()
    if tiers and uri is None:
        raise click.UsageError("--tier needs --store (the page's next steps name it)")
    if not demo and given("rate"):
        raise click.UsageError("--rate is the demo's writes a second: give it with --demo")
    # the page holds a store to its own ceiling ('' is no ceiling: refused below)
    ceiling = store_ceiling(uri) if ceiling is None else ceiling
    resolve_ceiling(ceiling)
    if uri is not None:
        connection.options(uri)  # a usage error now, not at the first poll
    watch = None if uri is None or name is None else RoutingWatch(
        uri, name, every=max(every, 2.0), options=connection.options(uri), tiers=tiers)
    stop = threading.Event()
    runner: threading.Thread | None = None
    if demo:
        feed, runner = _demo(rate, ceiling, stop)
    else:
        assert url is not None
        feed = open_feed(url, ceiling=ceiling, index=name, match=match, history=history)
        if isinstance(feed, PrometheusFeed) and given("history"):
            raise click.UsageError(f"{url} is one process's /metrics, not a Prometheus "
                                   "server: --history reaches back on a Prometheus server; "
                                   "a process's counts start when it did")
    try:
        if as_json:
            if demo:  # the traffic has just begun: the document once a window of it closed
                heat = _settled(feed, stop)
            else:
                if isinstance(feed, PrometheusFeed):  # a rate is two scrapes --every apart
                    _pause(stop, every)
                heat = feed.read()
            # as the page: the heat, and routing_error when the store cannot be read
            doc = with_routing(heat, watch)
            click.echo(json.dumps(doc, indent=2))
            return
        try:
            server = HeatServer(feed, port=port, every=every, routing=watch)
        except OSError as exc:
            raise click.ClickException(f"127.0.0.1:{port}: {exc.strerror or exc} (--port; 0 "
                                       "picks a free one)") from None
        with server:
            output.console().print(f"serving the live heat of {_source(feed)} on {server.url} "
                                   "(Ctrl-C stops)", highlight=False, markup=False,
                                   soft_wrap=True)
            output.console().file.flush()  # a pipe reader waits for the address
            # until Ctrl-C or SIGTERM: its one line, exit 130 or 143 (it only read). A
            # signal that lands on another thread wakes no wait of this one: Python runs
            # its handler once this thread wakes, so it wakes each second (it waited an
            # hour at a time, and a `kill` of the process went unheard for minutes)
            while not stop.wait(1.0):
                pass
    finally:
        stop.set()
        if runner is not None:
            runner.join(timeout=30)


# seconds of the demo's traffic before ``--demo --json`` reads its one document: the
# meter's window (1 s) and a little, so rates are over whole windows of traffic
_DEMO_SETTLE = 1.5
_DEMO_WAIT = 30.0  # seconds more, at most, for the demo's first closed window of traffic


def _settled(feed: Any, stop: threading.Event) -> dict[str, Any]:
    """The demo's heat once it shows its traffic: a rate is a closed one-second window's,
    and on a loaded host the first writes come late (a fixed wait read every rate 0)."""
    stop.wait(_DEMO_SETTLE)
    deadline = time.monotonic() + _DEMO_WAIT
    while True:
        heat: dict[str, Any] = feed.read()
        if any(row["units_per_s"] > 0 for row in heat["values"]) or stop.is_set() \
                or time.monotonic() >= deadline:
            return heat
        stop.wait(0.1)


def _pause(stop: threading.Event, seconds: float) -> None:
    """Wait ``seconds``, or until stopped: between the two scrapes of ``--json``'s rates."""
    stop.wait(seconds)


def _source(feed: Any) -> str:
    from shardex.web import FleetFeed, PrometheusFeed

    if isinstance(feed, FleetFeed):
        return f"every process that the Prometheus server {feed.source} scrapes"
    if isinstance(feed, PrometheusFeed):
        return f"one process ({feed.source})"
    return "the demo's index"


def _demo(rate: float, ceiling: str, stop: threading.Event) -> tuple[Any, threading.Thread]:
    """An unsharded orders index on memory:// with its traffic in a thread of its own."""
    from shardex.heatmeter.meter import HeatMeter
    from shardex.index import ShardedIndex
    from shardex.scenarios.traffic import orders_traffic
    from shardex.stores import open_store
    from shardex.web import MeterFeed

    store = open_store("memory://?seed=1")
    meter = HeatMeter(store, windows=120)
    ready = threading.Event()
    loops: list[asyncio.AbstractEventLoop] = []

    async def run() -> None:
        async with ShardedIndex(store, "orders_by_status", meter=meter) as index:
            loops.append(asyncio.get_running_loop())
            ready.set()

            async def traffic() -> None:
                while True:
                    await orders_traffic(index, rate=rate, duration=5.0)

            running = asyncio.ensure_future(traffic())
            await asyncio.to_thread(stop.wait)  # at once, not after 5 s of traffic more
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running

    runner = threading.Thread(target=lambda: asyncio.run(run()), name="shardex-demo",
                              daemon=True)
    runner.start()
    ready.wait(timeout=10)
    return MeterFeed(meter, ceiling=ceiling, loop=loops[0] if loops else None), runner
