"""Access logs read into per-key, per-second heat, in DuckDB: CSV, JSON Lines and Parquet.

A log has one row per request, with the columns:

- ``timestamp``: ISO 8601 (a zone-less time is UTC) or epoch seconds; one kind a file;
- ``key``: the partition key, non-empty; ``op``: ``read`` or ``write`` (any case);
- ``units`` (capacity units consumed, >= 0) or ``bytes`` (item bytes, >= 0, turned
  into units by DynamoDB's rounding: a write costs one unit per started KB, a read one
  per started 4 KB, both at least 1, and a read half that when eventually consistent);
  a file may carry both columns, but each row fills exactly one;
- ``throttled`` (optional): ``0``/``1`` (or ``false``/``true``); a throttled row still
  counts its units as offered load.

The format follows the extension (``.csv``, ``.jsonl``/``.ndjson``/``.json``,
``.parquet``/``.pq``, each optionally ``.gz``) unless given. Every row is validated in
SQL (TRY_CAST and a row number), never in a Python loop: a malformed row raises
InvalidLog naming the file, the line (the 1-based line of the file for CSV and JSON
Lines, the 1-based row for Parquet) and the column; with ``skip_bad`` such rows are
counted, per column, and left out. Needs the ``diagnose`` extra (duckdb).
"""

from __future__ import annotations

import csv
import gzip
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

from shardex.capacity import READ_UNIT_BYTES, WRITE_UNIT_BYTES, Ceiling
from shardex.errors import InvalidInput, InvalidLog, MissingDependency
from shardex.heat.profile import HeatProfile, HotStep, KeyHeat, Timeline

__all__ = ["COLUMNS", "FORMATS", "LogHeat", "log_format", "read_logs"]

FORMATS = ("csv", "jsonl", "parquet")
COLUMNS = ("timestamp", "key", "op", "units", "bytes", "throttled")
_SUFFIXES = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl",
             ".parquet": "parquet", ".pq": "parquet"}
_NUMERIC = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
            "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "REAL"}
_ISO, _EPOCH = 2, 1
# bad-row code -> the column it concerns (None: the row as a whole)
_BAD_COLUMN: Mapping[str, str | None] = {
    "json": None, "row": None, "timestamp": "timestamp", "mixed": "timestamp", "key": "key",
    "op": "op", "neither": "units", "both": "bytes", "units": "units", "bytes": "bytes",
    "throttled": "throttled",
}


def _duckdb() -> ModuleType:
    try:
        import duckdb
    except ImportError as exc:
        raise MissingDependency("duckdb", "diagnose") from exc
    return duckdb


def log_format(path: str | Path, fmt: str | None = None) -> str:
    """Return the format of ``path``: ``fmt`` if given, else from its extension.

    Raises InvalidInput for an unknown format or an extension that names none.
    """
    if fmt is not None:
        if fmt not in FORMATS:
            raise InvalidInput(f"unknown log format {fmt!r}; use one of {', '.join(FORMATS)}")
        return fmt
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] in (".gz", ".gzip"):
        suffixes.pop()
    found = _SUFFIXES.get(suffixes[-1]) if suffixes else None
    if found is None:
        raise InvalidInput(f"cannot tell the format of {str(path)!r} from its extension; "
                           f"give one of {', '.join(FORMATS)} (--format)")
    return found


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _open_text(path: str) -> io.TextIOBase:
    if path.lower().endswith((".gz", ".gzip")):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="replace",
                                newline="")
    return open(path, encoding="utf-8", errors="replace", newline="")


def _line_at(path: str, offsets: Sequence[int]) -> list[int]:
    """Return the 1-based line of each byte offset (ascending) in the file's text."""
    opener = gzip.open if path.lower().endswith((".gz", ".gzip")) else open
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


@dataclass(frozen=True, slots=True)
class _Source:
    """How to read one file: SQL yielding (rn, jbad, ts, key, op, units, bytes, thr)."""

    path: str
    fmt: str
    select: str       # @RN@ to fill: NULL in the fast pass, the row number in file order
    types: Mapping[str, str]
    rejects: str | None = None
    names: Mapping[str, str] | None = None  # CSV: the reader's column -> the header's name


class LogHeat:
    """Per-key, per-second heat of access-log files, held in an in-memory DuckDB database.

    The table ``heat(key, sec, reads, writes, read_units, write_units, throttles)`` has
    one row per key and second. ``rows`` counts the rows read, ``skipped_rows`` those
    left out as malformed (``skipped_by_column``: how many per column). Close it (or
    use ``with``) to free the database.
    """

    def __init__(self, *, eventual: bool = False, threads: int | None = None) -> None:
        duckdb = _duckdb()
        self._duckdb = duckdb
        self.con = duckdb.connect(":memory:")
        self.con.execute("SET TimeZone = 'UTC'")
        if threads is not None:
            self.con.execute(f"SET threads = {int(threads)}")
        self._eventual = eventual
        self._files = 0
        self.paths: list[str] = []
        self.rows = 0
        self.skipped_rows = 0
        self.skipped_by_column: dict[str, int] = {}
        self._parts: list[str] = []
        self._built = False

    def __enter__(self) -> LogHeat:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self.con.close()

    # -- reading ------------------------------------------------------------------------

    def add(self, path: str | Path, *, fmt: str | None = None, skip_bad: bool = False) -> None:
        """Read one log file into the heat table (see the module for the format).

        Raises InvalidLog for a missing or unreadable file, a missing column, or (unless
        ``skip_bad``) a malformed row; MissingDependency without duckdb.
        """
        name = str(path)
        kind = log_format(name, fmt)
        if not Path(name).is_file():
            raise InvalidLog("no such file", path=name)
        self._files += 1
        try:
            source = {"csv": self._csv, "jsonl": self._jsonl, "parquet": self._parquet}[kind](
                name)
            self._load(source, skip_bad)
        except self._duckdb.Error as exc:
            detail = str(exc).strip().splitlines()[0]
            raise InvalidLog(f"cannot read as {kind}: {detail}", path=name) from exc
        self.paths.append(name)
        self._built = False

    def _csv(self, path: str) -> _Source:
        try:
            with _open_text(path) as text:
                header = next(csv.reader(text), None)
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            raise InvalidLog(f"cannot read the CSV header: {exc}", path=path, line=1) from exc
        if not header:
            raise InvalidLog("is empty: a CSV log starts with a header line", path=path, line=1)
        names = [h.strip().lstrip("\ufeff").lower() for h in header]
        for name in names:
            if names.count(name) > 1 or not name:
                raise InvalidLog(f"header names column {name!r} "
                                 f"{'twice' if name else 'with an empty name'}",
                                 path=path, line=1, column=name or None)
        self._require(path, names, line=1)
        columns = ", ".join(f"{_lit(f'c{i}')}: 'VARCHAR'" for i in range(len(names)))
        rejects = f"rejects_{self._files}"
        reader = (f"read_csv({_lit(path)}, header = true, auto_detect = false, "
                  f"columns = {{{columns}}}, delim = ',', quote = '\"', escape = '\"', "
                  f"store_rejects = true, rejects_table = {_lit(rejects)}, "
                  f"rejects_scan = {_lit(rejects + '_scan')})")
        picks = [f'c{names.index(c)}' if c in names else "NULL::VARCHAR" for c in COLUMNS]
        select = ("SELECT @RN@ AS rn, false AS jbad, "
                  + ", ".join(f"{p} AS {_ident(c)}" for p, c in zip(picks, COLUMNS, strict=True))
                  + f" FROM {reader}")
        return _Source(path, "csv", select, dict.fromkeys(COLUMNS, "VARCHAR"), rejects,
                       {f"c{i}": name for i, name in enumerate(names)})

    def _jsonl(self, path: str) -> _Source:
        paths = ", ".join(_lit(f"$.{c}") for c in COLUMNS)
        lines = (f"(SELECT row_number() OVER () AS n, l FROM read_csv({_lit(path)}, "
                 "header = false, auto_detect = false, columns = {'l': 'VARCHAR'}, "
                 "delim = E'\\n', quote = '', escape = ''))")
        parsed = (f"(SELECT n, l, CASE WHEN json_valid(l) THEN json_type(l) = 'OBJECT' "
                  f"ELSE false END AS ok FROM {lines} WHERE l IS NOT NULL AND trim(l) <> '')")
        fields = (f"(SELECT n, NOT ok AS jbad, CASE WHEN ok THEN json_extract_string(l, "
                  f"[{paths}]) END AS j FROM {parsed})")
        select = ("SELECT @RN@ AS rn, jbad, "
                  + ", ".join(f"j[{i + 1}] AS {_ident(c)}" for i, c in enumerate(COLUMNS))
                  + f" FROM {fields}")
        return _Source(path, "jsonl", select, dict.fromkeys(COLUMNS, "VARCHAR"))

    def _parquet(self, path: str) -> _Source:
        reader = f"read_parquet({_lit(path)}@ROWS@)"
        described = self.con.execute(
            f"DESCRIBE SELECT * FROM read_parquet({_lit(path)})").fetchall()
        found = {str(row[0]).strip().lower(): (str(row[0]), str(row[1])) for row in described}
        self._require(path, list(found), line=None)
        picks, types = [], {}
        for c in COLUMNS:
            if c in found:
                picks.append(f"{_ident(found[c][0])} AS {_ident(c)}")
                types[c] = found[c][1]
            else:
                picks.append(f"NULL::VARCHAR AS {_ident(c)}")
                types[c] = "VARCHAR"
        select = ("SELECT @RN@ AS rn, false AS jbad, " + ", ".join(picks) + f" FROM {reader}")
        return _Source(path, "parquet", select, types)

    @staticmethod
    def _require(path: str, names: Sequence[str], *, line: int | None) -> None:
        for column in ("timestamp", "key", "op"):
            if column not in names:
                raise InvalidLog(f"has no {column!r} column (columns: {', '.join(names)})",
                                 path=path, line=line, column=column)
        if "units" not in names and "bytes" not in names:
            raise InvalidLog("has neither a 'units' nor a 'bytes' column", path=path,
                             line=line, column="units")

    # -- validation and aggregation, in SQL ---------------------------------------------

    def _validated(self, source: _Source, rn: str) -> str:
        """SQL of every row with its parsed fields, its timestamp kind and its fault."""
        t = source.types
        for column, kind in t.items():
            if not (_text(kind) or _number(kind) or (column == "timestamp" and _time(kind))
                    or (column == "throttled" and kind == "BOOLEAN") or column == "key"):
                raise InvalidLog(f"has type {kind}, which this column cannot hold",
                                 path=source.path, column=column)
        stamp = '"timestamp"'
        ts = (f"TRY_CAST({stamp} AS DOUBLE)" if _text(t["timestamp"]) else
              f"CAST({stamp} AS DOUBLE)" if _number(t["timestamp"]) else "NULL::DOUBLE")
        ti = (f"epoch(TRY_CAST({stamp} AS TIMESTAMPTZ))" if _text(t["timestamp"]) else
              f"epoch({stamp})" if _time(t["timestamp"]) else "NULL::DOUBLE")

        # The common spellings are tested first so that trim() and lower() run only on
        # the rare others (CASE evaluates a branch only for the rows that reach it).
        def amount(column: str, parsed: str) -> tuple[str, str]:
            ref = _ident(column)
            if _text(t[column]):
                return (f"CASE WHEN {ref} IS NULL THEN true WHEN {parsed} IS NOT NULL THEN false "
                        f"ELSE trim({ref}) = '' END", f"TRY_CAST({ref} AS DOUBLE)")
            return f"({ref} IS NULL)", f"CAST({ref} AS DOUBLE)"

        units_missing, units = amount("units", "u")
        bytes_missing, nbytes = amount("bytes", "b")
        throttled = ('CASE WHEN "throttled" IN (\'0\', \'1\') THEN "throttled" '
                     'ELSE lower(trim("throttled")) END' if _text(t["throttled"]) else
                     'CASE WHEN "throttled" THEN \'1\' WHEN NOT "throttled" THEN \'0\' END'
                     if t["throttled"] == "BOOLEAN" else
                     'CASE WHEN "throttled" = 1 THEN \'1\' WHEN "throttled" = 0 THEN \'0\' '
                     'ELSE CAST("throttled" AS VARCHAR) END')
        read_cost = f"greatest(1, ceil(b / {READ_UNIT_BYTES}))"
        if self._eventual:
            read_cost = f"({read_cost} / 2.0)"
        rows = ", file_row_number = true" if rn == "file_row_number + 1" else ""
        select = source.select.replace("@RN@", rn).replace("@ROWS@", rows)
        return f"""
        WITH src AS ({select}),
        p AS (
            SELECT *, {ts} AS te, CAST("key" AS VARCHAR) AS k,
                CASE WHEN "op" IN ('write', 'read') THEN CAST("op" AS VARCHAR)
                    ELSE lower(trim(CAST("op" AS VARCHAR))) END AS o,
                {units} AS u, {nbytes} AS b, {throttled} AS t
            FROM src),
        q AS (
            SELECT *, CASE WHEN te IS NULL OR NOT isfinite(te) THEN {ti} END AS ti,
                {units_missing} AS un, {bytes_missing} AS bn
            FROM p),
        v AS (
            SELECT *,
                CASE WHEN isfinite(te) THEN {_EPOCH} WHEN isfinite(ti) THEN {_ISO} ELSE 0 END
                    AS kind,
                CASE
                    WHEN jbad THEN 'json'
                    WHEN NOT (coalesce(isfinite(te), false) OR coalesce(isfinite(ti), false))
                        THEN 'timestamp'
                    WHEN k IS NULL OR k = '' THEN 'key'
                    WHEN o IS NULL OR o NOT IN ('read', 'write') THEN 'op'
                    WHEN un AND bn THEN 'neither'
                    WHEN NOT un AND NOT bn THEN 'both'
                    WHEN NOT un AND NOT coalesce(isfinite(u) AND u >= 0, false) THEN 'units'
                    WHEN NOT bn AND NOT coalesce(isfinite(b) AND b >= 0, false) THEN 'bytes'
                    WHEN t IS NOT NULL AND t <> '' AND t NOT IN ('0', '1', 'true', 'false')
                        THEN 'throttled'
                END AS bad,
                CASE WHEN NOT un THEN u WHEN o = 'write'
                    THEN greatest(1, ceil(b / {WRITE_UNIT_BYTES})) ELSE {read_cost} END AS cost
            FROM q)
        """

    def _load(self, source: _Source, skip_bad: bool) -> None:
        table = f"file_{self._files}"
        self.con.execute(f"""
            CREATE TEMP TABLE {table} AS {self._validated(source, "NULL::BIGINT")}
            SELECT CASE WHEN bad IS NULL THEN k END AS key,
                CASE WHEN bad IS NULL
                    THEN CAST(floor(CASE WHEN kind = {_EPOCH} THEN te ELSE ti END) AS BIGINT)
                END AS sec,
                kind, bad, count(*) AS n,
                count(*) FILTER (WHERE o = 'read') AS reads,
                count(*) FILTER (WHERE o = 'write') AS writes,
                coalesce(sum(cost) FILTER (WHERE o = 'read' AND bad IS NULL), 0) AS ru,
                coalesce(sum(cost) FILTER (WHERE o = 'write' AND bad IS NULL), 0) AS wu,
                count(*) FILTER (WHERE t IN ('1', 'true')) AS thr
            FROM v GROUP BY ALL""")
        kinds = dict(self.con.execute(
            f"SELECT kind, sum(n) FROM {table} WHERE bad IS NULL GROUP BY kind").fetchall())
        major = max(kinds, key=lambda k: (kinds[k], k == _EPOCH), default=_EPOCH)
        bad = dict(self.con.execute(
            f"SELECT bad, sum(n) FROM {table} WHERE bad IS NOT NULL GROUP BY bad").fetchall())
        mixed = sum(n for k, n in kinds.items() if k != major)
        if mixed:
            bad["mixed"] = mixed
        rejected: list[tuple[int, str | None, str]] = []
        if source.rejects is not None:
            rejected = [(int(r[0]), r[1], str(r[2])) for r in self.con.execute(
                "SELECT line_byte_position, first(column_name), first(error_message) "
                f"FROM {source.rejects} GROUP BY line_byte_position "
                "ORDER BY line_byte_position").fetchall()]  # one fault a row
            if rejected:
                bad["row"] = len(rejected)
        if bad and not skip_bad:
            raise self._first_bad(source, major, rejected)
        self._parts.append(f"SELECT key, sec, reads, writes, ru AS read_units, wu AS write_units, "
                           f"thr AS throttles FROM {table} WHERE bad IS NULL AND kind = {major}")
        self.rows += int(sum(kinds.values())) - mixed
        for code, n in bad.items():
            column = _BAD_COLUMN[code] or "row"
            self.skipped_by_column[column] = self.skipped_by_column.get(column, 0) + int(n)
            self.skipped_rows += int(n)

    def _first_bad(self, source: _Source, major: int,
                   rejected: list[tuple[int, str | None, str]]) -> InvalidLog:
        """Find, in file order, the first malformed row and describe it."""
        ordered = {"csv": "row_number() OVER ()", "jsonl": "n",
                   "parquet": "file_row_number + 1"}[source.fmt]
        found = self.con.execute(f"""{self._validated(source, ordered)}
            SELECT rn, coalesce(bad, 'mixed'), CAST("timestamp" AS VARCHAR), k,
                CAST("op" AS VARCHAR), CAST("units" AS VARCHAR), CAST("bytes" AS VARCHAR),
                CAST("throttled" AS VARCHAR)
            FROM v WHERE bad IS NOT NULL OR kind <> {major} ORDER BY rn LIMIT 1""").fetchall()
        reject_lines = _line_at(source.path, [r[0] for r in rejected]) if rejected else []
        line = None
        if found:
            line = int(found[0][0])
            if source.fmt == "csv":
                line = self._csv_line(source.path, line, reject_lines)
        if reject_lines and (line is None or reject_lines[0] < line):
            _, column, message = rejected[0]
            if column is not None and source.names:
                column = source.names.get(column, column)
            return InvalidLog(f"malformed CSV row: {message}", path=source.path,
                              line=reject_lines[0], column=column)
        if not found or line is None:  # pragma: no cover - the counts said a row was bad
            return InvalidLog("has a malformed row that could not be located", path=source.path)
        code, values = str(found[0][1]), dict(zip(COLUMNS, found[0][2:], strict=True))
        return InvalidLog(_describe(code, values, major), path=source.path, line=line,
                          column=_BAD_COLUMN[code])

    def _csv_line(self, path: str, row: int, rejected_lines: Sequence[int]) -> int:
        """Return the line where data row ``row`` (1-based, rejected rows not counted) starts.

        A record starts on a non-blank line after the header that lies outside quotes
        (an even number of quote characters before it); rejected records are skipped.
        """
        self.con.execute("CREATE OR REPLACE TEMP TABLE rejected_lines (line BIGINT)")
        if rejected_lines:
            self.con.executemany("INSERT INTO rejected_lines VALUES (?)",
                                 [[n] for n in rejected_lines])
        found = self.con.execute(f"""
            WITH lines AS (
                SELECT row_number() OVER () AS ln, l FROM read_csv({_lit(path)}, header = false,
                    auto_detect = false, columns = {{'l': 'VARCHAR'}}, delim = E'\\n',
                    quote = '', escape = '')),
            marks AS (
                SELECT ln, l, coalesce(sum(length(l) - length(replace(l, '"', ''))) OVER (
                    ORDER BY ln ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS quotes
                FROM lines),
            starts AS (
                SELECT ln, row_number() OVER (ORDER BY ln) AS r FROM marks
                WHERE ln > 1 AND l IS NOT NULL AND quotes % 2 = 0
                    AND ln NOT IN (SELECT line FROM rejected_lines))
            SELECT ln FROM starts WHERE r = ?""", [row]).fetchall()
        return int(found[0][0]) if found else row + 1

    # -- reports ------------------------------------------------------------------------

    def _build(self) -> None:
        if self._built:
            return
        empty = ("SELECT NULL::VARCHAR AS key, NULL::BIGINT AS sec, 0 AS reads, 0 AS writes, "
                 "0.0 AS read_units, 0.0 AS write_units, 0 AS throttles WHERE false")
        if len(self._parts) <= 1:  # one file: one row per key and second already
            self.con.execute("CREATE OR REPLACE TEMP VIEW heat AS "
                             + (self._parts[0] if self._parts else empty))
        else:
            self.con.execute(f"""
                CREATE OR REPLACE TEMP TABLE heat AS
                SELECT key, sec, sum(reads) AS reads, sum(writes) AS writes,
                    sum(read_units) AS read_units, sum(write_units) AS write_units,
                    sum(throttles) AS throttles
                FROM ({" UNION ALL ".join(self._parts)}) GROUP BY key, sec""")
        self._built = True

    def profile(self, *, ceiling: Ceiling, top: int = 10, min_ratio: float = 1.0,
                buckets: int = 24, over_limit: int = 100) -> HeatProfile:
        """Return the heat profile: totals, the ``top`` keys by units, the keys whose peak
        reaches ``min_ratio`` of ``ceiling`` (at most ``over_limit``), and the hottest key
        of each of up to ``buckets`` time buckets."""
        self._build()
        con = self.con
        con.execute(f"""
            CREATE OR REPLACE TEMP TABLE keys AS
            SELECT key, sum(read_units + write_units) AS units, sum(read_units) AS ru,
                sum(write_units) AS wu, sum(reads) AS reads, sum(writes) AS writes,
                sum(throttles) AS thr, count(*) AS secs, min(sec) AS first, max(sec) AS last,
                max(read_units + write_units) AS peak, max(read_units) AS peak_r,
                max(write_units) AS peak_w,
                max(greatest(write_units / {ceiling.write_units!r},
                             read_units / {ceiling.read_units!r})) AS ratio
            FROM heat GROUP BY key""")
        units, requests, throttles, distinct, first, last = con.execute("""
            SELECT coalesce(sum(units), 0), coalesce(sum(reads + writes), 0),
                coalesce(sum(thr), 0), count(*), min(first), max(last)
            FROM keys""").fetchall()[0]
        columns = ("key, units, ru, wu, reads, writes, thr, secs, peak, peak_r, peak_w, "
                   "units / secs, ratio")
        top_rows = con.execute(f"SELECT {columns} FROM keys ORDER BY units DESC, key LIMIT ?",
                               [max(0, top)]).fetchall()
        over_rows = con.execute(f"SELECT {columns} FROM keys WHERE ratio >= ? "
                                "ORDER BY ratio DESC, key LIMIT ?",
                                [min_ratio, over_limit]).fetchall()
        sequence: list[HotStep] = []
        if first is not None:
            span = int(last) - int(first) + 1
            count = max(1, min(buckets, span))
            for bucket, key, share in con.execute(f"""
                    WITH b AS (
                        SELECT CAST(floor((sec - {int(first)}) * {count} / {span}) AS BIGINT)
                            AS bucket, key, sum(read_units + write_units) AS u
                        FROM heat GROUP BY ALL)
                    SELECT bucket, first(key ORDER BY u DESC, key),
                        CASE WHEN sum(u) > 0 THEN max(u) / sum(u) ELSE 0 END
                    FROM b GROUP BY bucket ORDER BY bucket""").fetchall():
                start = int(first) + (int(bucket) * span) // count
                end = int(first) + ((int(bucket) + 1) * span) // count - 1
                sequence.append(HotStep(start, end, str(key), float(share)))
        return HeatProfile(
            rows=self.rows, skipped_rows=self.skipped_rows, total_units=float(units),
            requests=int(requests), throttles=int(throttles), distinct_keys=int(distinct),
            distinct_exact=True, first_second=None if first is None else int(first),
            last_second=None if last is None else int(last),
            top=[_key_heat(r) for r in top_rows], over=[_key_heat(r) for r in over_rows],
            sequence=sequence, ceiling=ceiling, skipped_by_column=dict(self.skipped_by_column))

    def timeline(self, keys: Sequence[str], *, bins: int = 120) -> Timeline:
        """Return each key's busiest second in each of up to ``bins`` time bins."""
        self._build()
        first, last = self.con.execute("SELECT min(sec), max(sec) FROM heat").fetchall()[0]
        if first is None or not keys:
            return Timeline(list(keys), 0, 1, [[] for _ in keys])
        span = int(last) - int(first) + 1
        width = max(1, -(-span // max(1, bins)))
        count = -(-span // width)
        rows = {k: [0.0] * count for k in keys}
        for key, j, peak in self.con.execute(f"""
                SELECT key, CAST((sec - {int(first)}) // {width} AS BIGINT),
                    max(read_units + write_units)
                FROM heat WHERE list_contains(?, key) GROUP BY ALL""", [list(keys)]).fetchall():
            rows[str(key)][int(j)] = float(peak)
        return Timeline(list(keys), int(first), width, [rows[k] for k in keys])


def _text(kind: str) -> bool:
    return kind == "VARCHAR" or kind == '"NULL"'


def _number(kind: str) -> bool:
    return kind in _NUMERIC or kind.startswith("DECIMAL")


def _time(kind: str) -> bool:
    return kind.startswith("TIMESTAMP") or kind == "DATE"


def _key_heat(row: Sequence[Any]) -> KeyHeat:
    (key, units, ru, wu, reads, writes, thr, secs, peak, peak_r, peak_w, sustained,
     ratio) = row
    return KeyHeat(key=str(key), units=float(units), read_units=float(ru),
                   write_units=float(wu), reads=int(reads), writes=int(writes),
                   throttles=int(thr), active_seconds=int(secs), peak_units_per_s=float(peak),
                   peak_read_units_per_s=float(peak_r), peak_write_units_per_s=float(peak_w),
                   sustained_units_per_s=float(sustained), peak_to_ceiling=float(ratio))


def _describe(code: str, values: Mapping[str, str | None], major: int) -> str:
    """The message for a malformed row, from its fault code and raw values."""
    def shown(column: str) -> str:
        value = values.get(column)
        return "missing" if value is None or not value.strip() else repr(value)

    kinds = {_EPOCH: "epoch seconds", _ISO: "ISO 8601"}
    messages = {
        "json": "is not a valid JSON object",
        "timestamp": f"timestamp {shown('timestamp')} is neither ISO 8601 nor epoch seconds",
        "mixed": (f"timestamp {shown('timestamp')} is {kinds[_ISO + _EPOCH - major]}, but "
                  f"this file's timestamps are {kinds[major]}; a file must use one kind"),
        "key": "key is missing or empty",
        "op": f"op {shown('op')} is not 'read' or 'write'",
        "neither": "row has neither units nor bytes; give one",
        "both": "row has both units and bytes; give one",
        "units": f"units {shown('units')} must be a number >= 0",
        "bytes": f"bytes {shown('bytes')} must be a number >= 0",
        "throttled": f"throttled {shown('throttled')} must be 0 or 1",
    }
    return messages[code]


def read_logs(paths: Iterable[str | Path], *, fmt: str | None = None, skip_bad: bool = False,
              eventual: bool = False, threads: int | None = None) -> LogHeat:
    """Read access-log files into one LogHeat (see the module for the format).

    Raises InvalidInput when no file is given, InvalidLog for a file or row that does
    not fit (unless ``skip_bad`` for rows), MissingDependency without duckdb.
    """
    files = list(paths)
    if not files:
        raise InvalidInput("give at least one access-log file")
    heat = LogHeat(eventual=eventual, threads=threads)
    try:
        for path in files:
            heat.add(path, fmt=fmt, skip_bad=skip_bad)
    except BaseException:
        heat.close()
        raise
    return heat

