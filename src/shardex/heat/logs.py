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
from typing import Any

from shardex.capacity import Ceiling
from shardex.errors import InvalidInput, InvalidLog
from shardex.heat import rows
from shardex.heat.aggregate import DUCKDB, TalliedReader, Tally, major_kind, validated
from shardex.heat.cloudtrail import CloudTrailStage
from shardex.heat.insights import insights_note, period_of, read_report
from shardex.heat.profile import HeatProfile, Timeline
from shardex.heat.rows import Loaded, header_names
from shardex.heat.sources import FORMATS, Options, expand, is_gzip, log_format
from shardex.heat.tables import HeatTables

__all__ = ["COLUMNS", "FORMATS", "LogHeat", "csv_header", "header_names", "log_format", "read_logs"]

COLUMNS = rows.COLUMNS


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


class LogHeat(TalliedReader):
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
        self.tally = Tally()
        self.tables = HeatTables(_DuckDB(self.con), self.tally, ())
        self._cloudtrail: CloudTrailStage | None = None

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
        if kind not in self.tally.formats:
            self.tally.formats.append(kind)
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
                    self._accept(loaded, source, major_kind(loaded.kinds))
        except self._duckdb.Error as exc:
            detail = str(exc).strip().splitlines()[0]
            raise InvalidLog(f"cannot read as {kind}: {detail}", path=name) from exc
        self.paths.append(name)

    def _csv(self, path: str) -> _Source:
        packed = is_gzip(path)
        names = csv_header(path)
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
        parsed = (f"(SELECT n, l, {rows.json_row_ok('l')} AS ok "
                  f"FROM {lines} WHERE l IS NOT NULL AND trim(l) <> '')")
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
        self._accept(loaded, source, major_kind(loaded.kinds), where=report.where)
        rules = validated(select, types, eventual=self.options.eventual, path=path)
        period = period_of(report, self.con.execute(
            f"{rules} SELECT rn, CAST(floor(epoch) AS BIGINT) FROM v "
            f"WHERE bad IS NULL AND kind = {int(major_kind(loaded.kinds))}").fetchall(),
            self.options.period)
        period, note = insights_note(report, period, given=self.options.period is not None)
        self.tally.resolution = max(self.tally.resolution, period)
        self.tally.notes.append(note)

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
        self._accept(loaded, source, major_kind(loaded.kinds), cloudtrail=stage)
        self.tally.notes.extend(stage.notes(table, attribute))
        self.tally.unattributed_reads += stage.counts.unkeyed[table]

    def _accept(self, loaded: Loaded, source: _Source, major: int, *,
                where: Any = None, cloudtrail: CloudTrailStage | None = None) -> None:
        """Keep the valid rows of a loaded source, or raise for its first malformed row."""
        faults = self.tally.faults(loaded.kinds, loaded.faults, major)
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
        self.tables.add(f"SELECT key, sec, reads, writes, ru, wu, thr, tu FROM "
                        f"{loaded.table} WHERE bad IS NULL AND kind = {int(major)}")
        self.tally.accept(loaded.kinds, faults, major)

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
        column = rows.FAULT_COLUMN[code]
        if code == "row" and source.fmt == "jsonl":
            fault = rows.json_row(_text_of_line(source.path, line, source.gzip))
            column, values["detail"] = fault if isinstance(fault, tuple) else (
                None, "is not a valid JSON object")
        message = rows.describe(code, values, major)
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
        self.tables.build()

    def profile(self, *, ceiling: Ceiling, top: int = 10, min_ratio: float = 1.0,
                min_throttles: int | None = None, buckets: int = 24, over_limit: int = 100,
                per_shard: bool = False, cover: float = 0.8) -> HeatProfile:
        """Return the heat profile over logical keys (``shardex.heat.tables``)."""
        self._finish()
        return self.tables.profile(ceiling=ceiling, top=top, min_ratio=min_ratio,
                                   min_throttles=min_throttles, buckets=buckets,
                                   over_limit=over_limit, per_shard=per_shard,
                                   cover=cover)

    def timeline(self, keys: Sequence[str], *, bins: int = 120) -> Timeline:
        """Return each logical key's busiest second in each of up to ``bins`` time bins."""
        self._finish()
        return self.tables.timeline(keys, bins=bins)


class _DuckDB:
    """The shared tables' engine: temp tables and views of one DuckDB connection."""

    dialect = DUCKDB

    def __init__(self, con: Any) -> None:
        self.con = con

    def table(self, name: str, select: str) -> None:
        self.con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS {select}")

    def view(self, name: str, select: str) -> None:
        self.con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS {select}")

    def keys(self, name: str, keys: Sequence[str]) -> None:
        self.con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS "
                         "SELECT unnest(?::VARCHAR[]) AS key", [list(keys)])

    def rows(self, select: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.con.execute(select).fetchall()]


def csv_header(path: str) -> list[str]:
    """The column names of a CSV log's header line (trimmed, lowercased), checked.

    Raises InvalidLog for a file without a header, a column named twice or not at
    all, or a header without the required columns.
    """
    try:
        with _open_text(path, is_gzip(path)) as text:
            header = next(csv.reader(text), None)
    except (OSError, UnicodeDecodeError, csv.Error, EOFError) as exc:
        raise InvalidLog(f"cannot read the CSV header: {exc}", path=path, line=1) from exc
    return header_names(header, path)


def _open_text(path: str, packed: bool) -> io.TextIOBase:
    if packed:
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="replace",
                                newline="")
    return open(path, encoding="utf-8", errors="replace", newline="")


def _text_of_line(path: str, line: int, packed: bool) -> str:
    """The text of the 1-based ``line`` of the file (lines end at a newline, as read)."""
    opener = gzip.open if packed else open
    with opener(path, "rb") as raw:
        for number, text in enumerate(raw, 1):
            if number == line:
                return text.decode("utf-8", "replace").removeprefix("\ufeff")
    return ""  # pragma: no cover - the reader numbered the line


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
