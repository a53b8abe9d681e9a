"""Streaming heat: access-log rows of unbounded input, counted in bounded memory.

Rows are CSV (a header line first) or JSON Lines, with the columns and rules of
``shardex.heat.logs``, checked row by row as they arrive (a file's timestamp kind is
that of its first valid row). The heaviest keys are kept by Space-Saving with ``m``
counters, so each key's units carry an error bound and any key above ``N / m`` of the
units is kept; per-key request counts and peaks are exact from the moment a key was
last admitted to the summary, and so is each second's hottest key (a key is admitted
by its own row, so a key hot within a second is monitored through it). Rows are taken
in arrival order: a row older than the current second counts in the current second.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from shardex.capacity import Ceiling, read_units, write_units
from shardex.counters.spacesaving import SpaceSaving
from shardex.errors import InvalidInput, InvalidLog
from shardex.heat.profile import HeatProfile, HotStep, KeyHeat

__all__ = ["StreamHeat", "read_stream"]

_RUNS = 50_000  # hot-key runs kept before adjacent ones are merged
_EPOCH, _ISO = "epoch seconds", "ISO 8601"


class _Bad(Exception):
    def __init__(self, column: str | None, message: str) -> None:
        super().__init__(message)
        self.column = column


@dataclass(slots=True)
class _Side:
    """What a monitored key did since it was last admitted: exact from then on."""

    reads: int = 0
    writes: int = 0
    read_units: float = 0.0
    write_units: float = 0.0
    throttles: int = 0
    seconds: int = 0
    peak: float = 0.0
    peak_read: float = 0.0
    peak_write: float = 0.0
    ratio: float = 0.0


class StreamHeat:
    """Heat of a stream of requests in ``counters`` Space-Saving counters (see module)."""

    def __init__(self, counters: int, ceiling: Ceiling) -> None:
        self._totals = SpaceSaving(counters)
        self._ceiling = ceiling
        self._side: dict[str, _Side] = {}
        self._second: int | None = None
        self._now: dict[str, list[float]] = {}
        self._now_total = 0.0
        self._runs: list[list[Any]] = []  # [start, end, key, key units, all units]
        self._evicted = False
        self.first: int | None = None
        self.rows = 0
        self.requests = 0
        self.throttles = 0

    def add(self, key: str, second: int, units: float, *, write: bool, throttled: bool) -> None:
        """Count one request of ``units`` on ``key`` at ``second`` (epoch seconds)."""
        if self._second is None:
            self._second = self.first = second
        elif second > self._second:
            self._flush()
            self._second = second
        self.rows += 1
        self.requests += 1
        self.throttles += throttled
        evicted = self._totals.add(key, units)
        if evicted is not None:
            self._evicted = True
            self._side.pop(evicted, None)
            self._now.pop(evicted, None)
        side = self._side.get(key)
        if side is None:
            side = self._side[key] = _Side()
        now = self._now.get(key)
        if now is None:
            now = self._now[key] = [0.0, 0.0]
        if write:
            side.writes += 1
            side.write_units += units
            now[1] += units
        else:
            side.reads += 1
            side.read_units += units
            now[0] += units
        side.throttles += throttled
        self._now_total += units

    def _flush(self) -> None:
        """Close the current second: fold its per-key units into peaks and the hot run."""
        ceiling = self._ceiling
        hot_key, hot_units = None, -1.0
        for key, (ru, wu) in self._now.items():
            side = self._side[key]
            side.seconds += 1
            side.peak = max(side.peak, ru + wu)
            side.peak_read = max(side.peak_read, ru)
            side.peak_write = max(side.peak_write, wu)
            side.ratio = max(side.ratio, wu / ceiling.write_units, ru / ceiling.read_units)
            if ru + wu > hot_units or (ru + wu == hot_units and hot_key is not None
                                       and key < hot_key):
                hot_key, hot_units = key, ru + wu
        if hot_key is not None and self._second is not None:
            key, units = hot_key, hot_units
            last = self._runs[-1] if self._runs else None
            if last is not None and last[2] == key:
                last[1] = self._second
                last[3] += units
                last[4] += self._now_total
            else:
                self._runs.append([self._second, self._second, key, units, self._now_total])
            if len(self._runs) > _RUNS:
                self._coarsen()
        self._now = {}
        self._now_total = 0.0

    def _coarsen(self) -> None:
        merged = []
        for a, b in zip(self._runs[::2], self._runs[1::2], strict=False):
            hot = a if a[3] >= b[3] else b
            merged.append([a[0], b[1], hot[2], hot[3], a[4] + b[4]])
        if len(self._runs) % 2:
            merged.append(self._runs[-1])
        self._runs = merged

    def profile(self, *, top: int = 10, min_ratio: float = 1.0, buckets: int = 24,
                skipped_rows: int = 0, skipped_by_column: Mapping[str, int] | None = None
                ) -> HeatProfile:
        """Return the heat profile of the stream; call it once the stream has ended.

        It closes the current second, so rows added after it would count that second twice.
        """
        if self._now:
            self._flush()
        heats = []
        for counted in self._totals.top():
            side = self._side.get(counted.key, _Side())
            heats.append(KeyHeat(
                key=counted.key, units=counted.count, read_units=side.read_units,
                write_units=side.write_units, reads=side.reads, writes=side.writes,
                throttles=side.throttles, active_seconds=side.seconds,
                peak_units_per_s=side.peak, peak_read_units_per_s=side.peak_read,
                peak_write_units_per_s=side.peak_write,
                sustained_units_per_s=(side.read_units + side.write_units) / side.seconds
                if side.seconds else 0.0,
                peak_to_ceiling=side.ratio, error=counted.error))
        over = sorted((h for h in heats if h.peak_to_ceiling >= min_ratio),
                      key=lambda h: (-h.peak_to_ceiling, h.key))
        last = self._runs[-1][1] if self._runs else None
        return HeatProfile(
            rows=self.rows, skipped_rows=skipped_rows, total_units=self._totals.total,
            requests=self.requests, throttles=self.throttles,
            distinct_keys=self._totals.counters + 1 if self._evicted else len(self._totals),
            distinct_exact=not self._evicted, first_second=self.first, last_second=last,
            top=heats[:max(0, top)], over=over[:100], sequence=self._sequence(buckets),
            ceiling=self._ceiling, skipped_by_column=dict(skipped_by_column or {}))

    def _sequence(self, buckets: int) -> list[HotStep]:
        if not self._runs or self.first is None:
            return []
        first, last = self.first, self._runs[-1][1]
        span = last - first + 1
        count = max(1, min(buckets, span))
        per: list[dict[str, float]] = [{} for _ in range(count)]
        totals = [0.0] * count
        for start, _end, key, units, whole in self._runs:
            b = min(count - 1, (start - first) * count // span)
            per[b][key] = per[b].get(key, 0.0) + units
            totals[b] += whole
        steps = []
        for b, keys in enumerate(per):
            if not keys:
                continue
            key = min(keys, key=lambda k: (-keys[k], k))
            steps.append(HotStep(first + b * span // count, first + (b + 1) * span // count - 1,
                                 key, keys[key] / totals[b] if totals[b] > 0 else 0.0))
        return steps


def _amount(value: Any, column: str) -> float | None:
    """A units/bytes cell as a number >= 0; None when missing; raise _Bad otherwise."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise _Bad(column, f"{column} {json.dumps(value)!r} must be a number >= 0")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise _Bad(column, f"{column} {str(value)!r} must be a number >= 0") from None
    if not math.isfinite(number) or number < 0:
        raise _Bad(column, f"{column} {str(value)!r} must be a number >= 0")
    return number


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class _Rows:
    """Turns raw cells into (key, second, units, write, throttled), by the log rules."""

    def __init__(self, eventual: bool) -> None:
        self._eventual = eventual
        self.kind: str | None = None

    def row(self, cells: Mapping[str, Any]) -> tuple[str, int, float, bool, bool]:
        stamp = _text(cells.get("timestamp"))
        second, kind = self._second(stamp)
        key = _text(cells.get("key"))
        if not key:
            raise _Bad("key", "key is missing or empty")
        op_text = _text(cells.get("op"))
        op = op_text.strip().lower() if op_text is not None else None
        if op not in ("read", "write"):
            shown = "missing" if not op_text or not op_text.strip() else repr(op_text)
            raise _Bad("op", f"op {shown} is not 'read' or 'write'")
        units = _amount(cells.get("units"), "units")
        nbytes = _amount(cells.get("bytes"), "bytes")
        if units is None and nbytes is None:
            raise _Bad("units", "row has neither units nor bytes; give one")
        if units is not None and nbytes is not None:
            raise _Bad("bytes", "row has both units and bytes; give one")
        write = op == "write"
        if units is None:
            assert nbytes is not None
            size = math.ceil(nbytes)
            units = float(write_units(size)) if write else read_units(size, not self._eventual)
        flag = _text(cells.get("throttled"))
        flag = flag.strip().lower() if flag is not None else ""
        if flag not in ("", "0", "1", "true", "false"):
            raise _Bad("throttled", f"throttled {cells.get('throttled')!r} must be 0 or 1")
        if self.kind is None:
            self.kind = kind
        elif kind != self.kind:
            raise _Bad("timestamp", f"timestamp {stamp!r} is {kind}, but this file's timestamps "
                                    f"are {self.kind}; a file must use one kind")
        return key, second, units, write, flag in ("1", "true")

    @staticmethod
    def _second(stamp: str | None) -> tuple[int, str]:
        if stamp is None or not stamp.strip():
            raise _Bad("timestamp", "timestamp missing is neither ISO 8601 nor epoch seconds")
        try:
            number = float(stamp)
        except ValueError:
            pass
        else:
            if math.isfinite(number):
                return math.floor(number), _EPOCH
        try:
            moment = datetime.fromisoformat(stamp.strip())
        except ValueError:
            raise _Bad("timestamp", f"timestamp {stamp!r} is neither ISO 8601 nor epoch "
                                    "seconds") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return math.floor(moment.timestamp()), _ISO


def _cells(lines: Iterable[str], fmt: str, name: str
           ) -> Iterator[tuple[int, Mapping[str, Any] | None, str | None]]:
    """Yield (line, cells, fault) per row; cells None with a fault for an unreadable row."""
    if fmt == "jsonl":
        for number, text in enumerate(lines, 1):
            if not text.strip():
                continue
            try:
                doc = json.loads(text)
            except ValueError:
                doc = None
            if isinstance(doc, dict):
                yield number, doc, None
            else:
                yield number, None, "is not a valid JSON object"
        return
    reader = csv.reader(lines)
    header = next(reader, None)
    if not header:
        raise InvalidLog("is empty: a CSV log starts with a header line", path=name, line=1)
    names = [h.strip().lower() for h in header]
    for column in ("timestamp", "key", "op"):
        if column not in names:
            raise InvalidLog(f"has no {column!r} column (columns: {', '.join(names)})",
                             path=name, line=1, column=column)
    if "units" not in names and "bytes" not in names:
        raise InvalidLog("has neither a 'units' nor a 'bytes' column", path=name, line=1,
                         column="units")
    start = reader.line_num + 1
    for record in reader:
        line, start = start, reader.line_num + 1
        if not record:
            continue
        if len(record) != len(names):
            yield line, None, f"has {len(record)} fields, the header {len(names)}"
            continue
        yield line, {n: (v if v != "" else None) for n, v in zip(names, record, strict=True)}, \
            None


def read_stream(lines: Iterable[str], *, fmt: str = "csv", name: str = "<stdin>",
                skip_bad: bool = False, eventual: bool = False, counters: int = 1000,
                ceiling: Ceiling) -> tuple[StreamHeat, int, dict[str, int]]:
    """Read rows from ``lines`` into a StreamHeat; return it, the skipped rows, per column.

    Raises InvalidLog naming ``name``, the line and the column for a malformed row
    (unless ``skip_bad``), InvalidInput for an unknown format.
    """
    if fmt not in ("csv", "jsonl"):
        raise InvalidInput(f"a stream is read as csv or jsonl, not {fmt!r}")
    heat = StreamHeat(counters, ceiling)
    rows = _Rows(eventual)
    skipped: dict[str, int] = {}
    for line, cells, fault in _cells(lines, fmt, name):
        column: str | None = None
        try:
            if cells is None:
                raise _Bad(None, fault or "is malformed")
            key, second, units, write, throttled = rows.row(cells)
        except _Bad as bad:
            if not skip_bad:
                raise InvalidLog(str(bad), path=name, line=line, column=bad.column) from None
            column = bad.column or "row"
            skipped[column] = skipped.get(column, 0) + 1
            continue
        heat.add(key, second, units, write=write, throttled=throttled)
    return heat, sum(skipped.values()), skipped
