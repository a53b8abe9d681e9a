"""Streaming heat: access-log rows of unbounded input, counted in bounded memory.

Rows are CSV (a header line first) or JSON Lines (told by the first line unless
given), framed here line by line and validated in batches by the access-log rules
of ``shardex.heat.rows`` (the same SQL the file readers run; a stream's timestamp
kind is that of its first valid row). Shard keys are rolled up under their logical
key. The heaviest logical keys are kept by Space-Saving with ``m`` counters, so each
key's units carry an error bound and any key above ``N / m`` of the units is kept;
per-key request counts, peaks and shard keys are exact from the moment a key was
last admitted to the summary, and so is each second's hottest key. Rows are taken
in arrival order: a row older than the current second counts in the current second.
``profile`` may be called at any time (the live view does): it does not close the
current second.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from shardex.capacity import Ceiling
from shardex.counters.spacesaving import SpaceSaving
from shardex.errors import InvalidInput, InvalidLog
from shardex.heat import rows
from shardex.heat.profile import HeatProfile, HotStep, KeyHeat, keys_to_cover, reserved_note
from shardex.heat.sources import BINARY, EMPTY, HEAD, JSON_ARRAY

__all__ = ["StreamHeat", "StreamReader"]

_RUNS = 50_000  # hot-key runs kept before adjacent ones are merged
_BATCH = 20_000  # rows validated in one DuckDB pass
_RESERVED = 100_000  # distinct keys of shardex's own records counted at most


@dataclass(slots=True)
class _Side:
    """What a key did since it was last admitted: exact from then on."""

    reads: int = 0
    writes: int = 0
    read_units: float = 0.0
    write_units: float = 0.0
    throttles: int = 0
    seconds: int = 0
    peak: float = 0.0
    peak_read: float = 0.0
    peak_write: float = 0.0
    peak_ok: float = 0.0
    ratio: float = 0.0
    parts: dict[str, _Side] = field(default_factory=dict)
    shard: int | None = None  # as a part: its shard number


@dataclass(slots=True)
class _Now:
    """One key's units in the current second: read, write, throttled."""

    ru: float = 0.0
    wu: float = 0.0
    tu: float = 0.0


class StreamHeat:
    """Heat of a stream of per-second aggregates in ``counters`` Space-Saving counters."""

    def __init__(self, counters: int, ceiling: Ceiling) -> None:
        self._totals = SpaceSaving(counters)
        self._ceiling = ceiling
        self._side: dict[str, _Side] = {}
        self._second: int | None = None
        self._now: dict[str, _Now] = {}
        self._now_parts: dict[str, dict[str, _Now]] = {}
        self._now_total = 0.0
        self._runs: list[list[Any]] = []  # [start, end, key, key units, all units]
        self._evicted = False
        self.first: int | None = None
        self.rows = 0
        self.requests = 0
        self.throttles = 0

    @property
    def counters(self) -> int:
        """m, the Space-Saving counters."""
        return self._totals.counters

    def add(self, key: str, logical: str, shard: int | None, second: int, *, reads: int,
            writes: int, read_units: float, write_units: float, throttles: int,
            throttled_units: float) -> None:
        """Count a second's requests of shard key ``key`` (of ``logical``)."""
        if self._second is None:
            self._second = self.first = second
        elif second > self._second:
            self._flush()
            self._second = second
        self.requests += reads + writes
        self.throttles += throttles
        units = read_units + write_units
        evicted = self._totals.add(logical, units)
        if evicted is not None:
            self._evicted = True
            self._side.pop(evicted, None)
            self._now.pop(evicted, None)
            self._now_parts.pop(evicted, None)
        side = self._side.get(logical)
        if side is None:
            side = self._side[logical] = _Side()
        now = self._now.get(logical)
        if now is None:
            now = self._now[logical] = _Now()
        self._count(side, now, reads, writes, read_units, write_units, throttles,
                    throttled_units)
        # A key seen only unsuffixed is its own one partition: its side says it all. Its
        # first shard key makes partitions of it, the plain key taking what came before.
        if key != logical or side.parts:
            if not side.parts and key != logical and side.reads + side.writes > reads + writes:
                plain = side.parts[logical] = _Side()
                self._count(plain, _Now(), side.reads - reads, side.writes - writes,
                            side.read_units - read_units, side.write_units - write_units,
                            side.throttles - throttles, 0.0)
                plain.seconds, plain.peak, plain.peak_read = side.seconds, side.peak, side.peak_read
                plain.peak_write, plain.peak_ok, plain.ratio = (side.peak_write, side.peak_ok,
                                                                side.ratio)
                self._now_parts.setdefault(logical, {})[logical] = _Now(
                    now.ru - read_units, now.wu - write_units, now.tu - throttled_units)
            part = side.parts.get(key)
            if part is None:
                part = side.parts[key] = _Side(shard=shard)
            nows = self._now_parts.get(logical)
            if nows is None:
                nows = self._now_parts[logical] = {}
            part_now = nows.get(key)
            if part_now is None:
                part_now = nows[key] = _Now()
            self._count(part, part_now, reads, writes, read_units, write_units, throttles,
                        throttled_units)
        self._now_total += units

    @staticmethod
    def _count(side: _Side, now: _Now, reads: int, writes: int, read_units: float,
               write_units: float, throttles: int, throttled_units: float) -> None:
        side.reads += reads
        side.writes += writes
        side.read_units += read_units
        side.write_units += write_units
        side.throttles += throttles
        now.ru += read_units
        now.wu += write_units
        now.tu += throttled_units

    def _fold(self, side: _Side, now: _Now) -> None:
        ceiling = self._ceiling
        side.seconds += 1
        side.peak = max(side.peak, now.ru + now.wu)
        side.peak_read = max(side.peak_read, now.ru)
        side.peak_write = max(side.peak_write, now.wu)
        side.peak_ok = max(side.peak_ok, now.ru + now.wu - now.tu)
        side.ratio = max(side.ratio, ceiling.ratio(now.wu, now.ru))

    def _flush(self) -> None:
        """Close the current second: fold its units into peaks and the hot run."""
        hot_key, hot_units = None, -1.0
        for key, now in self._now.items():
            side = self._side[key]
            self._fold(side, now)
            for part, part_now in self._now_parts.get(key, {}).items():
                self._fold(side.parts[part], part_now)
            units = now.ru + now.wu
            if units > hot_units or (units == hot_units and hot_key is not None
                                     and key < hot_key):
                hot_key, hot_units = key, units
        if hot_key is not None and self._second is not None:
            last = self._runs[-1] if self._runs else None
            if last is not None and last[2] == hot_key:
                last[1] = self._second
                last[3] += hot_units
                last[4] += self._now_total
            else:
                self._runs.append([self._second, self._second, hot_key, hot_units,
                                   self._now_total])
            if len(self._runs) > _RUNS:
                self._coarsen()
        self._now, self._now_parts = {}, {}
        self._now_total = 0.0

    def _coarsen(self) -> None:
        merged = []
        for a, b in zip(self._runs[::2], self._runs[1::2], strict=False):
            hot = a if a[3] >= b[3] else b
            merged.append([a[0], b[1], hot[2], hot[3], a[4] + b[4]])
        if len(self._runs) % 2:
            merged.append(self._runs[-1])
        self._runs = merged

    def _view(self, side: _Side, now: _Now | None) -> _Side:
        """The side as it would be with the current second closed (not changing it)."""
        if now is None:
            return side
        seen = _Side(side.reads, side.writes, side.read_units, side.write_units,
                     side.throttles, side.seconds, side.peak, side.peak_read, side.peak_write,
                     side.peak_ok, side.ratio, shard=side.shard)
        self._fold(seen, now)
        return seen

    def _heat(self, key: str, side: _Side, now: _Now | None, units: float, error: float,
              parts: tuple[KeyHeat, ...] = ()) -> KeyHeat:
        seen = self._view(side, now)
        return KeyHeat(
            key=key, units=units, read_units=seen.read_units, write_units=seen.write_units,
            reads=seen.reads, writes=seen.writes, throttles=seen.throttles,
            active_seconds=seen.seconds, peak_units_per_s=seen.peak,
            peak_read_units_per_s=seen.peak_read, peak_write_units_per_s=seen.peak_write,
            sustained_units_per_s=(seen.read_units + seen.write_units) / seen.seconds
            if seen.seconds else 0.0,
            peak_to_ceiling=seen.ratio, error=error, hottest_read_units_per_s=seen.peak_read,
            hottest_write_units_per_s=seen.peak_write, peak_accepted_units_per_s=seen.peak_ok,
            parts=parts)

    def _logical(self, key: str, units: float, error: float, per_shard: bool) -> KeyHeat:
        side = self._side.get(key, _Side())
        now = self._now.get(key)
        if not side.parts:  # its one partition is the key itself
            heat = self._heat(key, side, now, units, error)
            return replace(heat, parts=(replace(heat, error=0.0),) if per_shard else ())
        pending = self._now_parts.get(key, {})
        parts = [self._heat(name, part, pending.get(name),
                            part.read_units + part.write_units, 0.0)
                 for name, part in side.parts.items()]
        shards = [p.shard for p in side.parts.values() if p.shard is not None]
        heat = self._heat(key, side, now, units, error,
                          tuple(sorted(parts, key=lambda h: (-h.units, h.key)))
                          if per_shard else ())
        return replace(
            heat, peak_to_ceiling=max(p.peak_to_ceiling for p in parts),
            hottest_read_units_per_s=max(p.peak_read_units_per_s for p in parts),
            hottest_write_units_per_s=max(p.peak_write_units_per_s for p in parts),
            shards=max(max(shards) + 1, 2) if shards else 1, partitions=len(parts))

    def profile(self, *, top: int = 10, min_ratio: float = 1.0, min_throttles: int | None = None,
                buckets: int = 24, skipped_rows: int = 0,
                skipped_by_column: Mapping[str, int] | None = None, per_shard: bool = False,
                time_kinds: tuple[str, ...] = (), notes: tuple[str, ...] = (),
                cover: float = 0.8) -> HeatProfile:
        """Return the heat profile of the stream so far (the current second included)."""
        heats = [self._logical(c.key, c.count, c.error, per_shard) for c in self._totals.top()]
        floor = 1 << 62 if min_throttles is None else min_throttles
        over = sorted((h for h in heats if h.peak_to_ceiling >= min_ratio
                       or h.throttles >= floor), key=lambda h: (-h.peak_to_ceiling, h.key))
        runs = self._runs + self._pending_run()
        last = runs[-1][1] if runs else self._second
        return HeatProfile(
            rows=self.rows, skipped_rows=skipped_rows, total_units=self._totals.total,
            requests=self.requests, throttles=self.throttles,
            distinct_keys=self._totals.counters + 1 if self._evicted else len(self._totals),
            distinct_exact=not self._evicted, first_second=self.first, last_second=last,
            top=heats[:max(0, top)], over=over[:100], sequence=_sequence(runs, buckets),
            ceiling=self._ceiling, skipped_by_column=dict(skipped_by_column or {}),
            time_kinds=time_kinds, sources=("stream",), notes=notes, cover=cover,
            # the units the kept keys surely took, of every unit: past the counters, how
            # many keys carry the share is not known (None)
            keys_to_cover=keys_to_cover([h.units - h.error for h in heats], cover,
                                        self._totals.total if self._evicted else None))

    def _pending_run(self) -> list[list[Any]]:
        if not self._now or self._second is None:
            return []
        key = min(self._now, key=lambda k: (-(self._now[k].ru + self._now[k].wu), k))
        units = self._now[key].ru + self._now[key].wu
        return [[self._second, self._second, key, units, self._now_total]]


def _encodable(doc: Any) -> bool:
    """Whether UTF-8 can hold every text in ``doc``: JSON's escapes can spell a lone
    surrogate (``"\\ud800"``), which the file reader's JSON parser refuses."""
    try:
        json.dumps(doc, ensure_ascii=False).encode("utf-8")
    except (UnicodeEncodeError, ValueError, RecursionError):
        return False
    return True


def _sequence(runs: list[list[Any]], buckets: int) -> list[HotStep]:
    if not runs:
        return []
    first, last = runs[0][0], runs[-1][1]
    span = last - first + 1
    count = max(1, min(buckets, span))
    per: list[dict[str, float]] = [{} for _ in range(count)]
    totals = [0.0] * count
    for start, _end, key, units, whole in runs:
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


class StreamReader:
    """Frames lines into rows, validates them in batches, and counts them in a StreamHeat.

    ``feed`` takes lines as they arrive (any number, in order), ``flush`` validates
    what is pending, ``profile`` reports at any time. Raises InvalidLog naming
    ``name``, the line and the column for a malformed row (unless ``skip_bad``), and
    as the file reader refuses a whole file: a bad CSV header, and, when ``fmt`` is
    None (the format told by content), an empty or binary input (a NUL in its first
    ``HEAD`` bytes); InvalidInput for a format other than csv or jsonl,
    MissingDependency without duckdb.
    """

    def __init__(self, *, ceiling: Ceiling, fmt: str | None = None, name: str = "<stdin>",
                 skip_bad: bool = False, eventual: bool = False, counters: int = 1000,
                 batch: int = _BATCH) -> None:
        if fmt is not None and fmt not in ("csv", "jsonl"):
            raise InvalidInput(f"a stream is read as csv or jsonl, not {fmt!r}")
        self.heat = StreamHeat(counters, ceiling)
        self.fmt = fmt
        self.name = name
        self.skip_bad = skip_bad
        self.eventual = eventual
        self.skipped: dict[str, int] = {}
        self.kind: int | None = None
        # shardex's own records: requests and units, and (up to a bound) their keys
        self.reserved: list[Any] = [0, 0.0]
        self.reserved_keys: set[str] = set()
        self._con = rows.duckdb().connect(":memory:")
        self._con.execute("SET TimeZone = 'UTC'")
        self._size = batch
        self._batch = rows.Batch()
        self._line = 0
        self._header: list[str] | None = None
        self._held: list[str] = []  # the lines of a CSV record whose quotes are still open
        self._held_at = 0
        # the bytes looked at for a NUL, as the file reader looks at a file's head
        self._head = 0 if fmt is None else HEAD

    def close(self) -> None:
        self._con.close()

    def feed(self, lines: Iterable[str]) -> None:
        """Take the next lines of the stream (each one physical line, newline or not)."""
        plain: list[str] = []  # CSV lines without quotes, parsed together
        for text in lines:
            self._line += 1
            if self._head < HEAD:
                self._sniff(text)
            if self.fmt is None:
                if not text.strip():
                    continue
                first = text.lstrip("\ufeff \t")
                if first.startswith("["):  # read as a CSV, it lacked a 'timestamp' column
                    raise InvalidLog(JSON_ARRAY, path=self.name, line=self._line)
                self.fmt = "jsonl" if first.startswith("{") else "csv"
            if self.fmt == "jsonl":
                self._json(text)
            elif self._header is not None and not self._held and '"' not in text:
                plain.append(text)
                if len(plain) + len(self._batch) >= self._size:
                    self._plain(plain)
                    plain = []
                    self.flush()
                continue
            else:
                self._plain(plain)
                plain = []
                self._csv(text)
            if len(self._batch) >= self._size:
                self.flush()
        self._plain(plain)
        if len(self._batch) >= self._size:
            self.flush()

    def _plain(self, lines: list[str]) -> None:
        """Frame CSV lines without quotes (the common case), which are one record each."""
        if not lines:
            return
        first = self._line - len(lines) + 1  # they are the lines just read, in order
        header = self._header
        assert header is not None
        good: list[list[str]] = []
        numbers: list[int] = []
        for i, record in enumerate(csv.reader(line.rstrip("\r\n") for line in lines)):
            if not record or record == [""]:
                continue
            if len(record) == len(header):
                good.append(record)
                numbers.append(first + i)
            else:
                self._batch.add_broken(first + i, f"has {len(record)} fields, the header "
                                                  f"{len(header)}")
        self._batch.add_records(numbers, good, header)

    def _sniff(self, text: str) -> None:
        """Refuse a NUL in the first HEAD bytes, as ``sources.detect_format`` does."""
        nul = text.find("\x00")
        if nul >= 0 and self._head + len(text[:nul].encode("utf-8")) < HEAD:
            raise InvalidLog(BINARY, path=self.name)
        self._head += len(text.encode("utf-8"))

    def _json(self, text: str) -> None:
        if not text.strip():
            return
        if self._line == 1:  # a byte order mark, which the file reader skips too
            text = text.removeprefix("\ufeff")
        doc = rows.json_row(text)
        if isinstance(doc, dict) and "\\u" in text and not _encodable(doc):
            doc = (None, "is not a valid JSON object")
        if isinstance(doc, dict):
            if ({"Records", "Contributors"} & set(doc)) and not ({"timestamp", "key"} & set(doc)):
                raise InvalidInput(f"{self.name} holds a CloudTrail file or a Contributor "
                                   "Insights report, which is read whole: save it and run "
                                   "shardex diagnose FILE")
            self._batch.add(self._line, doc)
        else:
            column, detail = doc
            self._batch.add_broken(self._line, detail, column)

    def _csv(self, text: str) -> None:
        if not self._held:
            if not text.strip():
                return
            self._held_at = self._line
        self._held.append(text)
        joined = "".join(self._held)
        if joined.count('"') % 2:  # a quoted field goes on over the next line
            return
        self._held = []
        try:
            record = next(csv.reader([joined.rstrip("\r\n")]), [])
        except csv.Error as exc:
            self._batch.add_broken(self._held_at, f"is not a CSV row: {exc}")
            return
        if self._header is None:
            self._header = rows.header_names(record, self.name, self._held_at)
            return
        if len(record) != len(self._header):
            self._batch.add_broken(self._held_at, f"has {len(record)} fields, the header "
                                                  f"{len(self._header)}")
            return
        self._batch.add_records([self._held_at], [record], self._header)

    def flush(self) -> None:
        """Validate the pending rows and count them (raises for a malformed one)."""
        with rows.interruptible():
            self._flush()

    def _flush(self) -> None:
        batch = self._batch
        if not batch:
            return
        con = self._con
        select, types = rows.stage(con, "batch", batch)
        loaded = rows.load(con, select, types, table="agg", eventual=self.eventual,
                           path=self.name)
        self._batch = rows.Batch()  # from here on the batch counts, even if cut short
        if self.kind is None and loaded.kinds:
            self.kind = int(con.execute("SELECT kind FROM agg WHERE bad IS NULL "
                                        "ORDER BY first_rn LIMIT 1").fetchall()[0][0])
        faults = dict(loaded.faults)
        mixed = sum(n for k, n in loaded.kinds.items() if k != self.kind)
        if mixed:
            faults["mixed"] = mixed
        if faults and not self.skip_bad:
            found = rows.first_fault(con, select, types, eventual=self.eventual,
                                     path=self.name, major=self.kind or 0, rn="rn")
            if found is not None:
                line, code, values = found
                values["detail"] = batch.framing.get(line)
                raise InvalidLog(rows.describe(code, values, self.kind or 0), path=self.name,
                                 line=line,
                                 column=batch.columns.get(line) or rows.FAULT_COLUMN[code])
        for code, n in faults.items():
            column = rows.FAULT_COLUMN[code] or "row"
            self.skipped[column] = self.skipped.get(column, 0) + n
        self.heat.rows += loaded.kinds.get(self.kind or 0, 0)
        logical, shard = rows.logical_sql("key")
        for (key, name, number, reserved, sec, reads, writes, ru, wu, thr, tu) in con.execute(f"""
                SELECT key, {logical}, {shard}, {rows.reserved_sql("key")}, sec, sum(reads),
                    sum(writes), sum(ru), sum(wu), sum(thr), sum(tu)
                FROM agg WHERE bad IS NULL AND kind = ? GROUP BY key, sec
                ORDER BY sec, key""", [self.kind]).fetchall():
            if reserved:
                if len(self.reserved_keys) < _RESERVED:
                    self.reserved_keys.add(str(key))
                self.reserved[0] += int(reads) + int(writes)
                self.reserved[1] += float(ru) + float(wu)
                continue
            self.heat.add(str(key), str(name), None if number is None else int(number),
                          int(sec), reads=int(reads), writes=int(writes), read_units=float(ru),
                          write_units=float(wu), throttles=int(thr), throttled_units=float(tu))

    def finish(self, *, complete: bool = True) -> None:
        """End of input: a CSV record left open is malformed; validate what is pending.

        ``complete`` (not cut short by Ctrl-C): an input without a line, or a CSV one
        without a header, is refused as the file reader refuses such a file.
        """
        if complete and not self._held:
            if self.fmt is None:
                raise InvalidLog(EMPTY, path=self.name)
            if self.fmt == "csv" and self._header is None:
                rows.header_names(None, self.name)
        if self._held:
            self._batch.add_broken(self._held_at, "ends inside a quoted field")
            self._held = []
        self.flush()

    def profile(self, *, top: int = 10, min_ratio: float = 1.0, min_throttles: int | None = None,
                buckets: int = 24, per_shard: bool = False, cover: float = 0.8) -> HeatProfile:
        """The heat profile of the rows counted so far (see StreamHeat.profile)."""
        kinds = (rows.TIME_KINDS[self.kind],) if self.kind is not None else ()
        notes = (reserved_note(self.reserved[0], self.reserved[1], len(self.reserved_keys)),) \
            if self.reserved_keys else ()
        return self.heat.profile(top=top, min_ratio=min_ratio, min_throttles=min_throttles,
                                 buckets=buckets, skipped_rows=sum(self.skipped.values()),
                                 skipped_by_column=self.skipped, per_shard=per_shard,
                                 time_kinds=kinds, notes=notes, cover=cover)
