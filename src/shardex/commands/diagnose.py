"""``shardex diagnose``: which keys of a heat source are hot, why, and what to do about it."""

from __future__ import annotations

import io
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.live import Live

from shardex.commands import output
from shardex.commands.heat_view import frame, print_report
from shardex.commands.params import HEADROOM, ITEM_BYTES, PLOT, count, given, number
from shardex.errors import InvalidInput
from shardex.heat.sources import (
    ENGINES,
    FORMATS,
    INSIGHTS_RULES,
    Options,
    detect_format,
    is_gzip,
    require_file,
)
from shardex.plotting import plot_target

if TYPE_CHECKING:
    from shardex.heat.report import Diagnosis

__all__ = ["diagnose"]

_BINS = 120
# the clock the live view refreshes on; a test puts a fake one here
_clock: Callable[[], float] = time.monotonic


@click.command()
@click.argument("files", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(FORMATS),
              help="Read every file in this format (default: told by each file's content).")
@click.option("--skip-bad", is_flag=True, help="Count and skip malformed rows instead of failing.")
@click.option("--eventual", is_flag=True,
              help="Reads given in bytes are eventually consistent (half the units).")
@click.option("--ceiling", default="dynamodb", show_default=True,
              help="Per-partition ceiling: dynamodb, azure-tables, cosmos, or units/s "
                   "(0.001 to 1e9).")
@click.option("--headroom", type=HEADROOM, default=1.5, show_default=True,
              help="Multiplier on observed peaks when sizing N (1 to 100; 1.5: 50% to spare).")
@click.option("--top", type=count(1, 10_000), default=10, show_default=True,
              help="Keys to list.")
@click.option("--per-shard", is_flag=True, help="List each key's shard keys under it.")
@click.option("--stream", is_flag=True,
              help="Read row by row in bounded memory (Space-Saving), with a live view; "
                   "'-' reads stdin.")
@click.option("--every", type=number(0, 3600, low_open=True), default=2.0, show_default=True,
              help="Seconds between refreshes of the live view (--stream, '-').")
@click.option("--counters", type=count(1, 1_000_000), default=1000, show_default=True,
              help="Space-Saving counters when streaming.")
@click.option("--table", "table", default=None,
              help="CloudTrail: the table to diagnose (needed when the files hold several).")
@click.option("--key-attribute", default=None,
              help="CloudTrail: the table's partition key attribute (default: as the keys show).")
@click.option("--item-bytes", type=count(1, ITEM_BYTES), default=1024, show_default=True,
              help="CloudTrail: item size the units are estimated from.")
@click.option("--insights-rule", type=click.Choice(INSIGHTS_RULES), default=None,
              help="Contributor Insights: what the report counts (default: from the file "
                   "name; -PKT-/-SKT- rules count throttles).")
@click.option("--period", type=count(1, 86_400), default=None,
              help="Contributor Insights: seconds a datapoint covers (default: the step "
                   "between its timestamps).")
@click.option("--engine", type=click.Choice(ENGINES), default="duckdb", show_default=True,
              help="What aggregates the files: DuckDB in this process, or Spark in local "
                   "mode (the spark extra; docs/diagnose.md).")
@click.option("--spark-conf", multiple=True, metavar="KEY=VALUE",
              help="--engine spark: a Spark setting (repeatable), e.g. "
                   "spark.jars.packages=org.apache.hadoop:hadoop-aws:3.4.1 for s3a://.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the report as JSON (live: one JSON line a refresh).")
@click.option("--plot", type=PLOT,
              help="Draw a heat map of the top keys over time to this PNG (plot extra).")
def diagnose(files: tuple[str, ...], fmt: str | None, skip_bad: bool, eventual: bool,
             ceiling: str, headroom: float, top: int, per_shard: bool, stream: bool,
             every: float, counters: int, table: str | None, key_attribute: str | None,
             item_bytes: int, insights_rule: str | None, period: int | None, engine: str,
             spark_conf: tuple[str, ...], as_json: bool, plot: Path | None) -> None:
    """Diagnose hot partitions from access logs (CSV, JSON Lines, Parquet; '-' is stdin),
    CloudTrail DynamoDB data events, or a Contributor Insights report.

    Access-log columns: timestamp (ISO 8601 or epoch s/ms/us/ns), key, op (read|write),
    units or bytes, and optionally throttled (0/1). A directory stands for its files.
    See docs/diagnose.md and docs/heat-sources.md.
    """
    from shardex.heat import report

    options = Options(fmt=fmt, skip_bad=skip_bad, eventual=eventual, table=table,
                      key_attribute=key_attribute, item_bytes=item_bytes,
                      insights_rule=insights_rule, period=period)
    settings = _spark_settings(engine, spark_conf)
    if stream or "-" in files:
        if engine != "duckdb":
            raise InvalidInput("--stream and stdin are read by the stream reader, not "
                               f"--engine {engine}")
        if plot is not None:
            raise InvalidInput("--plot needs files read exactly, not --stream or stdin")
        if len(files) != 1:
            raise InvalidInput("--stream reads one file or '-' (stdin)" if stream else
                               "'-' (stdin) is read alone: give no file beside it")
        if fmt is not None and fmt not in ("csv", "jsonl"):
            raise InvalidInput(f"--stream reads csv or jsonl, not {fmt}")
        _live(files[0], fmt, options, ceiling=ceiling, headroom=headroom, top=top,
              counters=counters, every=every, per_shard=per_shard, as_json=as_json)
        return
    streamed = [f"--{name}" for name in ("every", "counters") if given(name)]
    if streamed:
        raise InvalidInput(f"{streamed[0]} goes with --stream or '-' (stdin); files are "
                           "read whole")
    _formats_read(files, fmt, {kind: [f"--{name.replace('_', '-')}" for name in names
                                      if given(name)]
                               for kind, names in _FOR_FORMAT.items()})
    if plot is not None:
        plot_target(plot)  # a missing plot extra or format fails now, not after the read
    status = output.console(stderr=True)
    label = "DuckDB" if engine == "duckdb" else "Spark (local mode)"
    with status.status(f"aggregating with {label}...", spinner="dots"):
        result = report.diagnose(list(files), options=options, ceiling=ceiling,
                                 headroom=headroom, top=top, per_shard=per_shard,
                                 timeline_bins=_BINS if plot else 0, engine=engine,
                                 spark_conf=settings)
    _refuse_empty(result, ", ".join(files))
    if plot is not None:
        from shardex.heat.plot import plot_heatmap

        plot_heatmap(result, plot)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    print_report(output.console(), result)
    if plot is not None:
        output.console().print(f"heat map written to {plot}", markup=False, highlight=False)


def _refuse_empty(result: Diagnosis, name: str) -> None:
    """Refuse a report of no rows: "nothing needs shards" would be said of nothing."""
    why = result.nothing_read()
    if why is not None:
        raise InvalidInput(f"{name}: no rows to diagnose: {why}")


# the options that one format of input reads, and no other
_FOR_FORMAT = {"cloudtrail": ("table", "key_attribute", "item_bytes"),
               "insights": ("insights_rule", "period")}


def _formats_read(files: tuple[str, ...], fmt: str | None,
                  given: dict[str, list[str]]) -> None:
    """Refuse an option of a format that none of ``files`` is (it would go unread)."""
    if not any(given.values()):
        return
    from shardex.heat.sources import expand

    formats = {fmt} if fmt is not None else {detect_format(f) for f in expand(files)}
    for kind, options in given.items():
        if options and kind not in formats:
            raise InvalidInput(f"{options[0]} reads {kind} input, and none of the files is "
                               f"({', '.join(sorted(formats))})")


def _spark_settings(engine: str, given: tuple[str, ...]) -> dict[str, str]:
    """The ``--spark-conf`` settings, checked (KEY=VALUE, with --engine spark only)."""
    if given and engine != "spark":
        raise InvalidInput("--spark-conf goes with --engine spark")
    settings: dict[str, str] = {}
    for item in given:
        key, sep, value = item.partition("=")
        if not sep or not key.strip().startswith("spark.") or not value.strip():
            raise InvalidInput(f"--spark-conf {item!r} is not spark.KEY=VALUE")
        settings[key.strip()] = value.strip()
    return settings


def _live(name: str, fmt: str | None, options: Options, *, ceiling: str, headroom: float,
          top: int, counters: int, every: float, per_shard: bool, as_json: bool) -> None:
    """Read a stream with a view refreshed every ``every`` seconds; report at its end or
    on Ctrl-C (what was read until then)."""
    from shardex.capacity import resolve_ceiling
    from shardex.heat.live import FileFeed, PipeFeed, watch
    from shardex.heat.report import diagnose_reader
    from shardex.heat.stream import StreamReader

    shown = "<stdin>" if name == "-" else name
    if name != "-" and Path(name).is_dir():
        raise InvalidInput(f"{name}: is a directory; --stream reads one file (shardex "
                           f"diagnose {name} reads every file under it)")
    if name != "-":
        require_file(name)  # a pipe given by name is never opened: its read would be lost
        found = fmt or detect_format(name)  # which also refuses a missing or binary file
        if is_gzip(name):
            raise InvalidInput(f"--stream reads plain text: zcat {name} | shardex diagnose -")
        if found not in ("csv", "jsonl"):
            raise InvalidInput(f"{name} is {found}, which is read whole, not streamed: "
                               f"shardex diagnose {name}")
        fmt = found
    reader = StreamReader(ceiling=resolve_ceiling(ceiling), fmt=fmt, name=shown,
                          skip_bad=options.skip_bad, eventual=options.eventual,
                          counters=counters)
    console = output.console()
    started = _clock()

    def report(final: bool) -> Diagnosis:
        return diagnose_reader(reader, headroom=headroom, top=top, per_shard=per_shard,
                               extra={"live": {"final": final,
                                               "elapsed_s": _clock() - started}})

    try:
        with _Opened(name) as stream:
            fd = _pipe(stream) if name == "-" else None
            feed = PipeFeed(fd, shown) if fd is not None else FileFeed(stream, shown)
            with _View(console, as_json, report) as view:
                interrupted = False
                try:
                    watch(feed, reader, every=every, clock=_clock, refresh=view.refresh)
                except KeyboardInterrupt:
                    interrupted = True
        with _deaf_to_interrupts(interrupted):
            if interrupted:
                reader.finish(complete=False)
            result = report(final=True)
            _refuse_empty(result, shown)
            if as_json:
                click.echo(json.dumps(result.to_dict(), separators=(",", ":")))
            else:
                if interrupted:
                    console.print("interrupted: the report covers what was read until then",
                                  style="yellow", highlight=False)
                print_report(console, result)
    finally:
        reader.close()


@contextmanager
def _deaf_to_interrupts(deaf: bool) -> Iterator[None]:
    """After Ctrl-C, let the short final report finish: an interrupt that follows at
    once (a second key press, a signal sent to the process and its group) is ignored."""
    previous = None
    if deaf:
        try:
            previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        except ValueError:  # not the main thread: nothing to guard
            previous = None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _pipe(stream: IO[bytes] | IO[str]) -> int | None:
    """The descriptor of a stdin to wait on, or None when reading it never blocks."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, io.UnsupportedOperation):
        return None  # an in-memory stdin (an embedding caller, a test)
    return None if os.name == "nt" else fd


class _Opened:
    """The stream to read: stdin's bytes or the named file's (decoded as UTF-8 by the
    feed, which names the byte that is not), or a text-only stdin as it is."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._file: IO[bytes] | None = None

    def __enter__(self) -> IO[bytes] | IO[str]:
        if self._name == "-":
            raw: IO[bytes] | None = getattr(sys.stdin, "buffer", None)
            return sys.stdin if raw is None else raw  # a text-only stdin, as embedders give
        self._file = open(self._name, "rb")
        return self._file

    def __exit__(self, *exc: object) -> None:
        if self._file is not None:
            self._file.close()


class _View:
    """The refreshes: a rich Live table on a terminal, JSON lines with --json, else a
    table a refresh."""

    def __init__(self, console: Console, as_json: bool,
                 report: Callable[[bool], Diagnosis]) -> None:
        self._console = console
        self._json = as_json
        self._report = report
        self._live: Live | None = None
        self._count = 0

    def __enter__(self) -> _View:
        if not self._json and self._console.is_terminal:
            self._live = Live(console=self._console, auto_refresh=False, transient=True)
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()

    def refresh(self) -> None:
        result = self._report(False)
        self._count += 1
        if self._json:
            click.echo(json.dumps(result.to_dict(), separators=(",", ":")))
            sys.stdout.flush()
            return
        elapsed: Any = result.extra["live"]["elapsed_s"]
        heading = (f"live: refresh {self._count}, {elapsed:,.0f} s, "
                   f"{result.profile.rows:,} rows (Ctrl-C for the full report)")
        if self._live is not None:
            self._live.update(frame(self._console, result, heading), refresh=True)
        else:
            self._console.print(frame(self._console, result, heading))
