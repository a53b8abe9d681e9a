"""Where the autopilot's loop reads heat: samples of write and read units a second per key.

A source answers ``read(now)`` with ``HeatSample`` values (a logical key's mean units a
second over ``span`` seconds ending at ``t``, wall seconds), and may answer
``history(start, end, step)`` with the past, so a loop that starts (or restarts after a
crash) has its windows filled at once rather than after ``t_up``:

- ``PrometheusHeat``: a Prometheus server that scrapes the fleet (every application
  process's ``serve_prometheus``): ``sum by (value, op) (rate(shardex_key_units_total
  {index="NAME"}[W]))``, every process summed; the query function is injected (the
  command gives ``shardex.web.promql.PromQL``), so this module knows no HTTP.
- ``MeterHeat``: a store's own meter (``store.stats``): what the processes that share
  this store object wrote, as differences between reads (one process, or a test).
- ``FileHeat``: a JSON Lines file another tool appends to, one sample a line:
  ``{"t": 1764480000.0, "key": "PENDING", "write_units": 850.0, "read_units": 40.0,
  "span": 5}`` (``read_units`` and ``span`` optional: 0 and 1); each read takes the
  lines added since the last. A line that is no sample is skipped, never the lines
  around it: the read raises ``BadHeatLines`` naming it, with the good lines in
  ``samples``. The file lists only what its writer saw: the loop counts a key it has
  not listed for two of its samples' spans (at least two ticks) as no load. A file
  rotated (moved aside and created anew, or emptied in place) is read from its start.

Keys the store reserves (``#placement``, ...) and the metrics' ``other`` are left out.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from shardex.clock import Clock
from shardex.errors import InvalidInput
from shardex.keys import is_reserved, parse_shard_key, validate_value
from shardex.stores.base import Store

__all__ = ["BadHeatLines", "FileHeat", "HeatSample", "HeatSource", "MeterHeat",
           "PrometheusHeat", "is_value"]

# PromQL instant query: (query, at) -> [(labels, value)]; range: (query, start, end, step)
Instant = Callable[[str, float], list[tuple[dict[str, str], float]]]
Range = Callable[[str, float, float, float], list[tuple[dict[str, str],
                                                       list[tuple[float, float]]]]]


@dataclass(frozen=True, slots=True)
class HeatSample:
    """``key``'s mean write and read units a second over ``span`` seconds ending at ``t``."""

    key: str
    t: float
    write_units: float
    read_units: float = 0.0
    span: float = 1.0


class BadHeatLines(InvalidInput):
    """Lines of a heat file that are no heat samples; ``samples``: the good lines read
    with them (the loop takes those)."""

    def __init__(self, message: str, samples: list[HeatSample]) -> None:
        super().__init__(message)
        self.samples = samples


class HeatSource(Protocol):
    """What the loop reads heat from (see the module)."""

    name: str
    complete: bool  # each read lists every key with load: a key left out has none

    async def read(self, now: float) -> list[HeatSample]: ...

    async def history(self, start: float, end: float, step: float) -> list[HeatSample]: ...


def is_value(key: str) -> bool:
    """Whether ``key`` is a logical key the autopilot may reshard."""
    if is_reserved(key):  # the bounded labels' #other among them
        return False
    try:
        validate_value(key)
    except ValueError:
        return False
    return True


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class PrometheusHeat:
    """Heat of index ``index`` from a Prometheus server (see the module).

    ``window`` is the rate's window in seconds (at least four scrape intervals);
    ``match`` more label matchers (already checked, ``job="orders"``).
    """

    def __init__(self, url: str, index: str, *, instant: Instant, range_query: Range,
                 window: float = 60.0, match: str = "") -> None:
        if not math.isfinite(window) or window <= 0:
            raise InvalidInput(f"a Prometheus rate window is seconds > 0, got {window!r}")
        self.name = f"prometheus {url}"
        self.complete = True
        self.window = float(window)
        self._instant = instant
        self._range = range_query
        selector = ",".join(p for p in (f"index={_quote(index)}", match) if p)
        self.query = (f"sum by (value, op) (rate(shardex_key_units_total{{{selector}}}"
                      f"[{max(1, round(window))}s]))")

    @staticmethod
    def _fold(rows: Sequence[tuple[dict[str, str], float, float]], span: float
              ) -> list[HeatSample]:
        by: dict[tuple[str, float], list[float]] = {}
        for labels, t, value in rows:
            key = labels.get("value", "")
            if not is_value(key) or not math.isfinite(value):
                continue
            slot = by.setdefault((key, t), [0.0, 0.0])
            slot[0 if labels.get("op") == "write" else 1] += max(0.0, value)
        return [HeatSample(key, t, w, r, span) for (key, t), (w, r) in sorted(
            by.items(), key=lambda item: (item[0][1], item[0][0]))]

    async def read(self, now: float) -> list[HeatSample]:
        rows = await asyncio.to_thread(self._instant, self.query, now)
        return self._fold([(labels, now, value) for labels, value in rows], self.window)

    async def history(self, start: float, end: float, step: float) -> list[HeatSample]:
        series = await asyncio.to_thread(self._range, self.query, start, end, step)
        return self._fold([(labels, t, value) for labels, points in series
                           for t, value in points], self.window)


class MeterHeat:
    """Heat of index ``index`` from ``store``'s meter (see the module); ``clock`` times reads."""

    def __init__(self, store: Store, index: str, *, clock: Clock) -> None:
        self.name = f"meter of {store.uri}"
        self.complete = True
        self._store = store
        self._index = index
        self._clock = clock
        self._last: tuple[float, dict[str, tuple[float, float]]] | None = None

    def _totals(self) -> dict[str, tuple[float, float]]:
        out: dict[str, tuple[float, float]] = {}
        for shard_key, counts in self._store.stats(self._index).by_key.items():
            if is_reserved(shard_key):
                continue
            value = parse_shard_key(shard_key)[0]
            write, read = out.get(value, (0.0, 0.0))
            out[value] = (write + counts.write_units, read + counts.read_units)
        return out

    async def read(self, now: float) -> list[HeatSample]:
        at, totals = self._clock.now(), self._totals()
        last, self._last = self._last, (at, totals)
        if last is None or at <= last[0]:
            return []
        span = at - last[0]
        return [HeatSample(key, now, max(0.0, w - last[1].get(key, (0.0, 0.0))[0]) / span,
                           max(0.0, r - last[1].get(key, (0.0, 0.0))[1]) / span, span)
                for key, (w, r) in sorted(totals.items()) if is_value(key)]

    async def history(self, start: float, end: float, step: float) -> list[HeatSample]:
        return []  # the meter keeps totals, not their past


# where a file's sample may be stamped, around the reader's now: another host's clock may
# run a little ahead; a sample older than a year is no heat of today's; a day at most
_AHEAD = 300.0
_BEHIND = 366 * 86_400.0
_SPAN = 86_400.0
# the bytes of a file's start that tell it from the file a rotation leaves in its place
_HEAD = 256


class FileHeat:
    """Heat samples appended to a JSON Lines file at ``path`` (see the module)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.name = f"file {self.path}"
        self.complete = False
        self._offset = 0
        self._line = 0
        # the file read last: its (device, inode) and its first bytes, to tell it from
        # the file a rotation puts in its place
        self._identity: tuple[int, int] | None = None
        self._head = b""

    def _parse(self, text: str, now: float) -> HeatSample:
        """The sample of one line; InvalidInput naming the line for one that is none, or
        stamped where no sample of now can be (``_AHEAD`` past ``now``, more than
        ``_BEHIND`` before it: milliseconds, or a thousandth of the seconds), or spanning
        more than ``_SPAN`` seconds."""
        where = f"{self.path}:{self._line}"
        try:
            doc: Any = json.loads(text)
            if not isinstance(doc, dict):
                raise ValueError("a sample is a JSON object")
            unknown = set(doc) - {"t", "key", "write_units", "read_units", "span"}
            if unknown:
                raise ValueError(f"unknown field(s) {', '.join(sorted(unknown))}")
            key = doc["key"]
            numbers = [doc["t"], doc["write_units"], doc.get("read_units", 0.0),
                       doc.get("span", 1.0)]
            if not isinstance(key, str) or not is_value(key):
                raise ValueError(f"key {key!r} is not a logical key")
            # a float's range, not math.isfinite: an int past it overflows that and float()
            if any(isinstance(n, bool) or not isinstance(n, int | float)
                   or not 0 <= n <= sys.float_info.max for n in numbers) or numbers[3] <= 0:
                raise ValueError("t, write_units and read_units are numbers >= 0, span > 0")
            t, span = float(numbers[0]), float(numbers[3])
            if t > now + _AHEAD or t < now - _BEHIND:
                off = f"{t - now:,.0f} s ahead of" if t > now else f"{now - t:,.0f} s before"
                raise ValueError(f"t {t:.6g} is {off} now: t is wall seconds since the epoch"
                                 + (" (milliseconds?)" if t > 1000 * now / 2 else ""))
            if span > _SPAN:
                raise ValueError(f"span {span:g} is over a day: a sample covers the seconds "
                                 "before its t")
        except (ValueError, KeyError, RecursionError) as exc:
            fault = "nested too deeply" if isinstance(exc, RecursionError) else exc
            raise InvalidInput(f"{where}: not a heat sample ({fault}); a line is "
                               '{"t": WALL, "key": "PENDING", "write_units": 850.0, '
                               '"read_units": 40.0, "span": 5}') from None
        t, write, read, span = (float(n) for n in numbers)
        return HeatSample(key, t, write, read, span)

    def _new_lines(self, now: float) -> list[HeatSample]:
        try:
            with self.path.open("rb") as handle:
                self._rotated(handle)
                handle.seek(self._offset)
                data = handle.read()
        except OSError as exc:
            raise InvalidInput(f"cannot read heat file {self.path}: {exc}") from None
        complete = data[:data.rfind(b"\n") + 1]  # a line still being written waits
        self._offset += len(complete)
        out, bad = [], []
        for raw in complete.decode("utf-8", errors="replace").splitlines():
            self._line += 1
            if raw.strip():
                try:
                    out.append(self._parse(raw, now))
                except InvalidInput as exc:
                    bad.append(str(exc))
        if bad:
            more = f" (and {len(bad) - 1} more bad line(s) in this read)" if len(bad) > 1 else ""
            raise BadHeatLines(bad[0] + more, out)
        return out

    def _rotated(self, handle: Any) -> None:
        """Read from the start a file rotated since the last read: another file at the
        path (moved aside and created anew), or this one emptied in place (copytruncate:
        shorter than what was read, or its first bytes changed once it grew again).
        What was read of the old one stays read."""
        stat = os.fstat(handle.fileno())
        identity = (stat.st_dev, stat.st_ino)
        head = handle.read(_HEAD)
        if identity != self._identity or stat.st_size < self._offset \
                or head[:len(self._head)] != self._head:
            self._identity, self._offset, self._line, self._head = identity, 0, 0, head
        elif len(head) > len(self._head):
            self._head = head

    async def read(self, now: float) -> list[HeatSample]:
        return self._new_lines(now)

    async def history(self, start: float, end: float, step: float) -> list[HeatSample]:
        return []  # read() takes the whole file the first time
