"""Heat sources read exactly, in DuckDB: access logs, CloudTrail files, Contributor Insights.

Access logs are CSV (a header line first), JSON Lines or Parquet, one row per request
with the columns and rules of ``shardex.heat.rows``; CloudTrail files
(``shardex.heat.cloudtrail``) and Contributor Insights reports
(``shardex.heat.insights``) become rows of the same kind and pass the same rules. The
format is told by each file's content (``shardex.heat.sources``) unless given; CSV
and JSON Lines may be gzipped. Every row is validated in SQL, never in a Python
loop, and file paths and values reach DuckDB as bound parameters. A malformed row
raises InvalidLog naming the file, the line (the 1-based line of the file for CSV
and JSON Lines, the 1-based row for Parquet; the record for CloudTrail, the
datapoint for Contributor Insights) and the column; with ``skip_bad`` such rows are
counted, per column, and left out. Needs the ``diagnose`` extra (duckdb).
"""

from __future__ import annotations

import csv
import gzip
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from shardex.capacity import Ceiling
from shardex.errors import InvalidInput, InvalidLog
from shardex.heat import rows
from shardex.heat.cloudtrail import CloudTrailStage
from shardex.heat.insights import DEFAULT_PERIOD, read_report
from shardex.heat.profile import HeatProfile, HotStep, KeyHeat, Timeline, reserved_note
from shardex.heat.sources import FORMATS, Options, expand, is_gzip, log_format

__all__ = ["COLUMNS", "FORMATS", "LogHeat", "log_format", "read_logs"]

COLUMNS = rows.COLUMNS
# the columns of a key's heat, as _key_heat reads them
_HEAT = ("key, units, ru, wu, reads, writes, thr, secs, peak, peak_r, peak_w, peak_ok, ratio, "
         "shards, partitions, hot_r, hot_w")


@dataclass(frozen=True, slots=True)
class _Source:
    """How to read one file: SQL yielding (rn, jbad, n, COLUMNS), with its parameters."""

    path: str
    fmt: str
    select: str       # @RN@ to fill: NULL in the fast pass, the row number in file order
    types: dict[str, str]
    params: tuple[Any, ...] = ()
    rejects: str | None = None
    names: dict[str, str] | None = None  # CSV: the reader's column -> the header's name
    gzip: bool = False


class LogHeat:
    """Per-key, per-second heat of heat sources, held in an in-memory DuckDB database.

    ``rows`` counts the rows read, ``skipped_rows`` those left out as malformed
    (``skipped_by_column``: how many per column). Close it (or use ``with``) to free
    the database.
    """

    def __init__(self, options: Options | None = None, *, threads: int | None = None) -> None:
        duckdb = rows.duckdb()
        self._duckdb = duckdb
        self.options = options or Options()
        self.con = duckdb.connect(":memory:")
        self.con.execute("SET TimeZone = 'UTC'")
        if threads is not None:
            self.con.execute(f"SET threads = {int(threads)}")
        self._files = 0
        self.paths: list[str] = []
        self.rows = 0
        self.skipped_rows = 0
        self.skipped_by_column: dict[str, int] = {}
        self.kinds: dict[int, int] = {}
        self.formats: list[str] = []
        self.notes: list[str] = []
        self.resolution = 1
        self._parts: list[str] = []
        self._cloudtrail: CloudTrailStage | None = None
        self._reserved = (0, 0.0, 0)
        self._built = False

    def __enter__(self) -> LogHeat:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self.con.close()

    # -- reading ------------------------------------------------------------------------

    def add(self, path: str | Path) -> None:
        """Read one file (see the module); CloudTrail files are read once all are added.

        Raises InvalidLog for a missing or unreadable file, a missing column, or (unless
        ``skip_bad``) a malformed row; MissingDependency without duckdb.
        """
        name = str(path)
        kind = log_format(name, self.options.fmt)
        self._files += 1
        if kind not in self.formats:
            self.formats.append(kind)
        try:
            with rows.interruptible():
                if kind == "cloudtrail":
                    if self._cloudtrail is None:
                        self._cloudtrail = CloudTrailStage(self.con, self.options.item_bytes)
                    self._cloudtrail.add(name)
                elif kind == "insights":
                    self._insights(name)
                else:
                    reader = {"csv": self._csv, "jsonl": self._jsonl, "parquet": self._parquet}
                    source = reader[kind](name)
                    loaded = rows.load(self.con, source.select, source.types,
                                       table=f"file_{self._files}", eventual=self.options.eventual,
                                       path=name, params=source.params)
                    self._accept(loaded, source, self._major(loaded))
        except self._duckdb.Error as exc:
            detail = str(exc).strip().splitlines()[0]
            raise InvalidLog(f"cannot read as {kind}: {detail}", path=name) from exc
        self.paths.append(name)
        self._built = False

    def _csv(self, path: str) -> _Source:
        packed = is_gzip(path)
        try:
            with _open_text(path, packed) as text:
                header = next(csv.reader(text), None)
        except (OSError, UnicodeDecodeError, csv.Error, EOFError) as exc:
            raise InvalidLog(f"cannot read the CSV header: {exc}", path=path, line=1) from exc
        if not header:
            raise InvalidLog("is empty: a CSV log starts with a header line", path=path, line=1)
        names = [h.strip().lstrip("\ufeff").lower() for h in header]
        for name in names:
            if names.count(name) > 1 or not name:
                raise InvalidLog(f"header names column {name!r} "
                                 f"{'twice' if name else 'with an empty name'}",
                                 path=path, line=1, column=name or None)
        rows.check_columns(names, path=path, line=1)
        columns = ", ".join(f"'c{i}': 'VARCHAR'" for i in range(len(names)))
        rejects = f"rejects_{self._files}"
        reader = (f"read_csv(?, header = true, auto_detect = false, compression = ?, "
                  f"columns = {{{columns}}}, delim = ',', quote = '\"', escape = '\"', "
                  f"store_rejects = true, rejects_table = '{rejects}', "
                  f"rejects_scan = '{rejects}_scan')")
        picks = [f"c{names.index(c)}" if c in names else "NULL::VARCHAR" for c in COLUMNS]
        select = ("SELECT @RN@ AS rn, false AS jbad, 1 AS n, "
                  + ", ".join(f'{p} AS "{c}"' for p, c in zip(picks, COLUMNS, strict=True))
                  + f" FROM {reader}")
        return _Source(path, "csv", select, dict.fromkeys(COLUMNS, "VARCHAR"),
                       (path, "gzip" if packed else "none"), rejects,
                       {f"c{i}": name for i, name in enumerate(names)}, packed)

    def _jsonl(self, path: str) -> _Source:
        paths = ", ".join(f"'$.{c}'" for c in COLUMNS)
        packed = is_gzip(path)
        lines = ("(SELECT row_number() OVER () AS n, l FROM read_csv(?, header = false, "
                 "auto_detect = false, compression = ?, columns = {'l': 'VARCHAR'}, "
                 "delim = E'\\n', quote = '', escape = ''))")
        parsed = (f"(SELECT n, l, CASE WHEN json_valid(l) THEN json_type(l) = 'OBJECT' "
                  f"ELSE false END AS ok FROM {lines} WHERE l IS NOT NULL AND trim(l) <> '')")
        fields = (f"(SELECT n AS line, NOT ok AS jbad, CASE WHEN ok THEN json_extract_string(l, "
                  f"[{paths}]) END AS j FROM {parsed})")
        select = ("SELECT @RN@ AS rn, jbad, 1 AS n, "
                  + ", ".join(f'j[{i + 1}] AS "{c}"' for i, c in enumerate(COLUMNS))
                  + f" FROM {fields}")
        return _Source(path, "jsonl", select, dict.fromkeys(COLUMNS, "VARCHAR"),
                       (path, "gzip" if packed else "none"), gzip=packed)

    def _parquet(self, path: str) -> _Source:
        described = self.con.execute("DESCRIBE SELECT * FROM read_parquet(?)",
                                     [path]).fetchall()
        found = {str(row[0]).strip().lower(): (i + 1, str(row[1]))
                 for i, row in enumerate(described)}
        rows.check_columns(list(found), path=path, line=None)
        picks, types = [], {}
        for c in COLUMNS:
            if c in found:  # by position: a column name from the file never enters the SQL
                picks.append(f'#{found[c][0]} AS "{c}"')
                types[c] = found[c][1]
            else:
                picks.append(f'NULL::VARCHAR AS "{c}"')
                types[c] = "VARCHAR"
        select = ("SELECT @RN@ AS rn, false AS jbad, 1 AS n, " + ", ".join(picks)
                  + " FROM read_parquet(?, file_row_number = true)")
        return _Source(path, "parquet", select, types, (path,))

    def _insights(self, path: str) -> None:
        report = read_report(path, self.options.insights_rule)
        table = f"file_{self._files}"
        select, types = rows.stage(self.con, f"staged_{self._files}", report.batch)
        loaded = rows.load(self.con, select, types, table=table,
                           eventual=self.options.eventual, path=path)
        source = _Source(path, "insights", select, types)
        self._accept(loaded, source, self._major(loaded), where=report.where)
        period = self.options.period
        said = "given"
        if period is None:
            steps = self.con.execute(f"""
                SELECT min(step) FROM (SELECT sec - lag(sec) OVER (ORDER BY sec) AS step
                    FROM (SELECT DISTINCT sec FROM {table} WHERE bad IS NULL))
                WHERE step > 0""").fetchall()
            found = steps[0][0] if steps else None
            period, said = (int(found), "the step between its timestamps") if found \
                else (DEFAULT_PERIOD, "assumed: its timestamps show no step; --period sets it")
        self.resolution = max(self.resolution, period)
        what = ("throttled requests" if report.rule == "throttled" else
                "capacity units consumed, compared with the write ceiling"
                if report.statistic == "Sum" else "requests, one unit each")
        what += (" (reads and writes together: the report cannot tell them apart, so it "
                 "cannot show whether a key is read)")
        self.notes.append(f"Contributor Insights {Path(path).name}: {report.rule} rule "
                          f"({report.statistic}) on {report.label!r}, {what}; one datapoint "
                          f"per {period} s ({said})")

    def _finish(self) -> None:
        """Read the staged CloudTrail files as one source, now that all are in."""
        stage = self._cloudtrail
        if stage is None:
            return
        self._cloudtrail = None
        table, attribute, select, params = stage.select(self.options.table,
                                                        self.options.key_attribute)
        types = dict.fromkeys(COLUMNS, "VARCHAR")
        loaded = rows.load(self.con, select, types, table="file_cloudtrail",
                           eventual=self.options.eventual, path=stage.files[0], params=params)
        source = _Source(stage.files[0], "cloudtrail", select, types, tuple(params))
        self._accept(loaded, source, self._major(loaded), cloudtrail=stage)
        self.notes.extend(stage.notes(table, attribute))

    @staticmethod
    def _major(loaded: rows.Loaded) -> int:
        kinds = loaded.kinds
        return max(kinds, key=lambda k: (kinds[k], k == 1), default=1)

    def _accept(self, loaded: rows.Loaded, source: _Source, major: int, *,
                where: Any = None, cloudtrail: CloudTrailStage | None = None) -> None:
        """Keep the valid rows of a loaded source, or raise for its first malformed row."""
        faults = dict(loaded.faults)
        mixed = sum(n for k, n in loaded.kinds.items() if k != major)
        if mixed:
            faults["mixed"] = mixed
        rejected: list[tuple[int, str | None, str]] = []
        if source.rejects is not None:
            rejected = [(int(r[0]), r[1], str(r[2])) for r in self.con.execute(
                "SELECT line_byte_position, first(column_name), first(error_message) "
                f"FROM {source.rejects} GROUP BY line_byte_position "
                "ORDER BY line_byte_position").fetchall()]  # one fault a row
            if rejected:
                faults["row"] = faults.get("row", 0) + len(rejected)
        if faults and not self.options.skip_bad:
            raise self._first_bad(source, major, rejected, where, cloudtrail)
        self._parts.append(f"SELECT key, sec, reads, writes, ru, wu, thr, tu FROM "
                           f"{loaded.table} WHERE bad IS NULL AND kind = {int(major)}")
        good = loaded.kinds.get(major, 0)
        if good:
            self.kinds[major] = self.kinds.get(major, 0) + good
        self.rows += good
        for code, n in faults.items():
            column = rows.FAULT_COLUMN[code] or "row"
            self.skipped_by_column[column] = self.skipped_by_column.get(column, 0) + int(n)
            self.skipped_rows += int(n)

    def _first_bad(self, source: _Source, major: int,
                   rejected: list[tuple[int, str | None, str]], where: Any,
                   cloudtrail: CloudTrailStage | None) -> InvalidLog:
        """Find, in file order, the first malformed row and describe it."""
        ordered = {"csv": "row_number() OVER ()", "jsonl": "line",
                   "parquet": "file_row_number + 1"}.get(source.fmt, "rn")
        found = rows.first_fault(self.con, source.select, source.types,
                                 eventual=self.options.eventual, path=source.path, major=major,
                                 rn=ordered, params=source.params)
        reject_lines = _line_at(source.path, [r[0] for r in rejected], source.gzip) \
            if rejected else []
        line = None
        if found:
            line = found[0]
            if source.fmt == "csv":
                line = self._csv_line(source, line, reject_lines)
        if reject_lines and (line is None or reject_lines[0] < line):
            _, column, message = rejected[0]
            if column is not None and source.names:
                column = source.names.get(column, column)
            return InvalidLog(f"malformed CSV row: {message}", path=source.path,
                              line=reject_lines[0], column=column)
        if not found or line is None:  # pragma: no cover - the counts said a row was bad
            return InvalidLog("has a malformed row that could not be located", path=source.path)
        code, values = found[1], found[2]
        if code == "row" and source.fmt == "jsonl":
            values["detail"] = "is not a valid JSON object"
        message, column = rows.describe(code, values, major), rows.FAULT_COLUMN[code]
        if where is not None:
            return InvalidLog(f"{where(line)}: {message}", path=source.path, column=column)
        if cloudtrail is not None:
            path, record = cloudtrail.path_of(line)
            return InvalidLog(f"record {record}: {message}", path=path, column=column)
        return InvalidLog(message, path=source.path, line=line, column=column)

    def _csv_line(self, source: _Source, row: int, rejected_lines: Sequence[int]) -> int:
        """Return the line where data row ``row`` (1-based, rejected rows not counted) starts.

        A record starts on a non-blank line after the header that lies outside quotes
        (an even number of quote characters before it); rejected records are skipped.
        """
        self.con.execute("CREATE OR REPLACE TEMP TABLE rejected_lines (line BIGINT)")
        if rejected_lines:
            self.con.execute("INSERT INTO rejected_lines SELECT unnest(?::BIGINT[])",
                             [list(rejected_lines)])
        found = self.con.execute("""
            WITH lines AS (
                SELECT row_number() OVER () AS ln, l FROM read_csv(?, header = false,
                    auto_detect = false, compression = ?, columns = {'l': 'VARCHAR'},
                    delim = E'\\n', quote = '', escape = '')),
            marks AS (
                SELECT ln, l, coalesce(sum(length(l) - length(replace(l, '"', ''))) OVER (
                    ORDER BY ln ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS quotes
                FROM lines),
            starts AS (
                SELECT ln, row_number() OVER (ORDER BY ln) AS r FROM marks
                WHERE ln > 1 AND l IS NOT NULL AND quotes % 2 = 0
                    AND ln NOT IN (SELECT line FROM rejected_lines))
            SELECT ln FROM starts WHERE r = ?""",
            [source.path, "gzip" if source.gzip else "none", row]).fetchall()
        return int(found[0][0]) if found else row + 1

    # -- reports ------------------------------------------------------------------------

    def _build(self) -> None:
        self._finish()
        if self._built:
            return
        empty = ("SELECT NULL::VARCHAR AS key, NULL::BIGINT AS sec, 0 AS reads, 0 AS writes, "
                 "0.0 AS ru, 0.0 AS wu, 0 AS thr, 0.0 AS tu WHERE false")
        res = self.resolution
        union = " UNION ALL ".join(self._parts) if self._parts else empty
        if len(self._parts) <= 1 and res == 1:  # one file: one row per key and second already
            self.con.execute(f"CREATE OR REPLACE TEMP VIEW heat AS {union}")
        else:
            self.con.execute(f"""
                CREATE OR REPLACE TEMP TABLE heat AS
                SELECT key, sec // {res} * {res} AS sec, sum(reads) AS reads,
                    sum(writes) AS writes, sum(ru) AS ru, sum(wu) AS wu, sum(thr) AS thr,
                    sum(tu) AS tu
                FROM ({union}) GROUP BY ALL""")
        # Only keys holding the separator can be shard keys or shardex's own records; the
        # others stand for themselves, so the common unsharded log is not copied again.
        logical, shard = rows.logical_sql("key")
        self.con.execute(f"""
            CREATE OR REPLACE TEMP TABLE keymap AS
            SELECT key, {logical} AS logical, {shard} AS shard,
                {rows.reserved_sql("key")} AS reserved
            FROM (SELECT DISTINCT key FROM heat WHERE contains(key, '#'))""")
        requests, units, keys = self.con.execute("""
            SELECT coalesce(sum(reads + writes), 0), coalesce(sum(ru + wu), 0),
                count(DISTINCT key)
            FROM heat WHERE key IN (SELECT key FROM keymap WHERE reserved)""").fetchall()[0]
        self._reserved = (int(requests), float(units), int(keys))
        self.con.execute("""
            CREATE OR REPLACE TEMP TABLE rolled AS
            SELECT DISTINCT logical FROM keymap WHERE shard IS NOT NULL""")
        self.con.execute("""
            CREATE OR REPLACE TEMP VIEW lsec AS
            SELECT key, sec, reads, writes, ru, wu, thr, tu FROM heat
            WHERE key NOT IN (SELECT key FROM keymap WHERE reserved OR shard IS NOT NULL)
                AND key NOT IN (SELECT logical FROM rolled)
            UNION ALL
            SELECT coalesce(m.logical, h.key) AS key, h.sec, sum(reads), sum(writes), sum(ru),
                sum(wu), sum(thr), sum(tu)
            FROM heat h LEFT JOIN keymap m USING (key)
            WHERE m.shard IS NOT NULL OR h.key IN (SELECT logical FROM rolled)
            GROUP BY ALL""")
        self._built = True

    def profile(self, *, ceiling: Ceiling, top: int = 10, min_ratio: float = 1.0,
                min_throttles: int | None = None, buckets: int = 24, over_limit: int = 100,
                per_shard: bool = False) -> HeatProfile:
        """Return the heat profile over logical keys (shard keys rolled up).

        ``top``: the heaviest logical keys by units; ``over``: those whose busiest
        partition reaches ``min_ratio`` of ``ceiling``, or that had at least
        ``min_throttles`` throttled requests (at most ``over_limit``); the hottest
        key of each of up to ``buckets`` time buckets; with ``per_shard`` each top
        key's shard keys as its parts.
        """
        self._build()
        con, res = self.con, self.resolution
        bounds = [ceiling.write_units, ceiling.read_units]
        # the partition keys of the rolled-up logical keys: their shard keys, and a plain
        # key of the same value (written while the value had one shard)
        con.execute("""
            CREATE OR REPLACE TEMP TABLE parts AS
            SELECT h.key, coalesce(m.logical, h.key) AS logical, m.shard,
                sum(ru + wu) AS units, sum(ru) AS ru, sum(wu) AS wu, sum(reads) AS reads,
                sum(writes) AS writes, sum(thr) AS thr, count(*) AS secs,
                max(ru + wu) AS peak, max(ru) AS peak_r, max(wu) AS peak_w,
                max(ru + wu - tu) AS peak_ok, max(greatest(wu / ?, ru / ?)) AS ratio,
                1 AS shards, 1 AS partitions, max(ru) AS hot_r, max(wu) AS hot_w
            FROM heat h LEFT JOIN keymap m USING (key)
            WHERE m.shard IS NOT NULL OR h.key IN (SELECT logical FROM rolled)
            GROUP BY ALL""", bounds)
        con.execute("""
            CREATE OR REPLACE TEMP TABLE keys AS
            WITH l AS (
                SELECT key, sum(ru + wu) AS units, sum(ru) AS ru, sum(wu) AS wu,
                    sum(reads) AS reads, sum(writes) AS writes, sum(thr) AS thr,
                    count(*) AS secs, min(sec) AS first, max(sec) AS last,
                    max(ru + wu) AS peak, max(ru) AS peak_r, max(wu) AS peak_w,
                    max(ru + wu - tu) AS peak_ok, max(greatest(wu / ?, ru / ?)) AS own
                FROM lsec GROUP BY key),
            p AS (
                SELECT logical AS key, max(ratio) AS ratio,
                    CASE WHEN max(shard) IS NULL THEN 1 ELSE greatest(max(shard) + 1, 2) END
                        AS shards,
                    count(*) AS partitions, max(peak_r) AS hot_r, max(peak_w) AS hot_w
                FROM parts GROUP BY logical)
            SELECT l.*, coalesce(p.ratio, l.own) AS ratio, coalesce(p.shards, 1) AS shards,
                coalesce(p.partitions, 1) AS partitions, coalesce(p.hot_r, l.peak_r) AS hot_r,
                coalesce(p.hot_w, l.peak_w) AS hot_w
            FROM l LEFT JOIN p USING (key)""", bounds)
        units, requests, throttles, distinct, first, last = con.execute("""
            SELECT coalesce(sum(units), 0), coalesce(sum(reads + writes), 0),
                coalesce(sum(thr), 0), count(*), min(first), max(last)
            FROM keys""").fetchall()[0]
        top_rows = con.execute(f"SELECT {_HEAT} FROM keys ORDER BY units DESC, key LIMIT ?",
                               [max(0, top)]).fetchall()
        floor = 1 << 62 if min_throttles is None else min_throttles
        over_rows = con.execute(f"SELECT {_HEAT} FROM keys WHERE ratio >= ? OR thr >= ? "
                                "ORDER BY ratio DESC, key LIMIT ?",
                                [min_ratio * res, floor, over_limit]).fetchall()
        parts: dict[str, list[KeyHeat]] = {}
        if per_shard and top_rows:
            for row in con.execute(f"SELECT logical, {_HEAT} FROM parts "
                                   "WHERE list_contains(?, logical) ORDER BY units DESC, key",
                                   [[r[0] for r in top_rows]]).fetchall():
                parts.setdefault(str(row[0]), []).append(_key_heat(row[1:], res))
            for row in top_rows:  # a key not rolled up is its own one partition
                if str(row[0]) not in parts:
                    parts[str(row[0])] = [_key_heat(row, res)]
        return HeatProfile(
            rows=self.rows, skipped_rows=self.skipped_rows, total_units=float(units),
            requests=int(requests), throttles=int(throttles), distinct_keys=int(distinct),
            distinct_exact=True, first_second=None if first is None else int(first),
            last_second=None if last is None else int(last) + res - 1,
            top=[_key_heat(r, res, tuple(parts.get(str(r[0]), ()))) for r in top_rows],
            over=[_key_heat(r, res) for r in over_rows],
            sequence=self._sequence(first, last, buckets), ceiling=ceiling,
            skipped_by_column=dict(self.skipped_by_column), resolution=res,
            time_kinds=tuple(rows.TIME_KINDS[k] for k in sorted(
                self.kinds, key=lambda k: -self.kinds[k])),
            sources=tuple(self.formats), notes=tuple(self._notes()))

    def _notes(self) -> list[str]:
        said = list(self.notes)
        if self._reserved[2]:
            said.append(reserved_note(*self._reserved))
        if self.resolution > 1:
            said.append(f"rates are means over {self.resolution} s buckets (the coarsest "
                        "source's period): a second's peak within one may be higher")
        return said

    def _sequence(self, first: Any, last: Any, buckets: int) -> list[HotStep]:
        if first is None:
            return []
        res = self.resolution
        span = int(last) + res - int(first)
        count = max(1, min(buckets, span // res))
        steps = []
        for bucket, key, share in self.con.execute("""
                WITH b AS (
                    SELECT CAST(floor((sec - ?) * ? / ?) AS BIGINT) AS bucket, key,
                        sum(ru + wu) AS u
                    FROM lsec GROUP BY ALL)
                SELECT bucket, first(key ORDER BY u DESC, key),
                    CASE WHEN sum(u) > 0 THEN max(u) / sum(u) ELSE 0 END
                FROM b GROUP BY bucket ORDER BY bucket""",
                [int(first), count, span]).fetchall():
            start = int(first) + (int(bucket) * span) // count
            end = int(first) + ((int(bucket) + 1) * span) // count - 1
            steps.append(HotStep(start, end, str(key), float(share)))
        return steps

    def timeline(self, keys: Sequence[str], *, bins: int = 120) -> Timeline:
        """Return each logical key's busiest second in each of up to ``bins`` time bins."""
        self._build()
        res = self.resolution
        first, last = self.con.execute("SELECT min(sec), max(sec) FROM lsec").fetchall()[0]
        if first is None or not keys:
            return Timeline(list(keys), 0, res, [[] for _ in keys])
        span = int(last) + res - int(first)
        width = max(res, -(-span // max(1, bins)) // res * res)
        count = -(-span // width)
        found = {k: [0.0] * count for k in keys}
        for key, j, peak in self.con.execute("""
                SELECT key, CAST((sec - ?) // ? AS BIGINT), max(ru + wu)
                FROM lsec WHERE list_contains(?, key) GROUP BY ALL""",
                [int(first), width, list(keys)]).fetchall():
            found[str(key)][int(j)] = float(peak) / res
        return Timeline(list(keys), int(first), width, [found[k] for k in keys])


def _key_heat(row: Sequence[Any], res: int, parts: tuple[KeyHeat, ...] = ()) -> KeyHeat:
    (key, units, ru, wu, reads, writes, thr, secs, peak, peak_r, peak_w, peak_ok, ratio,
     shards, partitions, hot_r, hot_w) = row
    seconds = int(secs) * res
    return KeyHeat(key=str(key), units=float(units), read_units=float(ru),
                   write_units=float(wu), reads=int(reads), writes=int(writes),
                   throttles=int(thr), active_seconds=seconds,
                   peak_units_per_s=float(peak) / res, peak_read_units_per_s=float(peak_r) / res,
                   peak_write_units_per_s=float(peak_w) / res,
                   sustained_units_per_s=float(units) / seconds if seconds else 0.0,
                   peak_to_ceiling=float(ratio) / res, shards=int(shards),
                   partitions=int(partitions), hottest_read_units_per_s=float(hot_r) / res,
                   hottest_write_units_per_s=float(hot_w) / res,
                   peak_accepted_units_per_s=float(peak_ok) / res, parts=parts)


def _open_text(path: str, packed: bool) -> io.TextIOBase:
    if packed:
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="replace",
                                newline="")
    return open(path, encoding="utf-8", errors="replace", newline="")


def _line_at(path: str, offsets: Sequence[int], packed: bool) -> list[int]:
    """Return the 1-based line of each byte offset (ascending) in the file's text."""
    opener = gzip.open if packed else open
    lines: list[int] = []
    newlines, read = 0, 0
    with opener(path, "rb") as raw:
        pending = iter(offsets)
        target = next(pending, None)
        while target is not None:
            chunk = raw.read(min(1 << 20, max(1, target - read)))
            if not chunk:
                break
            newlines += chunk.count(b"\n")
            read += len(chunk)
            while target is not None and read >= target:
                lines.append(newlines + 1)
                target = next(pending, None)
    return lines + [newlines + 1] * (len(offsets) - len(lines))


def read_logs(paths: Iterable[str | Path], *, fmt: str | None = None, skip_bad: bool = False,
              eventual: bool = False, threads: int | None = None,
              options: Options | None = None) -> LogHeat:
    """Read heat sources into one LogHeat (see the module); a directory stands for its files.

    ``options`` (``shardex.heat.sources.Options``) carries the source choices; ``fmt``,
    ``skip_bad`` and ``eventual`` are shorthands for its fields. Raises InvalidInput when
    no file is given, InvalidLog for a file or row that does not fit (unless
    ``skip_bad`` for rows), MissingDependency without duckdb.
    """
    given = list(paths)
    if not given:
        raise InvalidInput("give at least one access-log file")
    if options is None:
        options = Options(fmt=fmt, skip_bad=skip_bad, eventual=eventual)
    files = expand(given)
    heat = LogHeat(options, threads=threads)
    try:
        for path in files:
            heat.add(path)
        heat._build()
    except BaseException:
        heat.close()
        raise
    return heat
