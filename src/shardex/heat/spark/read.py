"""Heat sources read with Spark: the same formats, rules and aggregation as the DuckDB reader.

Each format is read by Spark's own reader into the columns of the row rules (``file``
carried along), then validated and summed per key and second by the SQL of
``shardex.heat.aggregate`` in Spark's dialect; a source's time kind is decided per
file, as DuckDB does, and the profile comes from ``shardex.heat.tables``. CloudTrail
files and Contributor Insights reports are parsed by the same Python as the DuckDB
reader's (``trail_rows`` on the executors, ``report_of`` on the driver: reports are
small).

Where the inputs are: local files and directories (formats told by content, as
DuckDB tells them), or URIs Spark reads (``s3a://``, ``hdfs://``, ...: give the format;
a directory is read recursively). What differs from DuckDB: Spark names no line for
a malformed row (the file, column and value only), tells gzip by the ``.gz`` suffix,
and reads the CSV files of one run with one header (a local file's own header is
read first; files under a URI must share the first one's).
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from shardex.capacity import Ceiling
from shardex.errors import InvalidInput, InvalidLog
from shardex.heat.aggregate import (
    COLUMNS,
    FAULT_COLUMN,
    SPARK,
    TalliedReader,
    Tally,
    major_kind,
    per_second,
    validated,
)
from shardex.heat.cloudtrail import (
    RECORD_BITS,
    STAGED,
    TrailCounts,
    pick_table,
    trail_notes,
    trail_rows,
)
from shardex.heat.insights import insights_note, period_of, report_of
from shardex.heat.logs import csv_header, header_names
from shardex.heat.profile import HeatProfile, Timeline
from shardex.heat.rows import describe
from shardex.heat.sources import Options, expand, is_gzip, log_format, parse_document
from shardex.heat.spark.session import SparkEngine, pyspark, spark_errors
from shardex.heat.tables import HeatTables
from shardex.stores.uri import split_url

__all__ = ["SparkLogs", "is_remote", "read_spark"]

_CORRUPT = "_shardex_corrupt"
_TYPES = {"string": "VARCHAR", "tinyint": "TINYINT", "smallint": "SMALLINT", "int": "INTEGER",
          "bigint": "BIGINT", "float": "FLOAT", "double": "DOUBLE", "boolean": "BOOLEAN",
          "date": "DATE", "timestamp": "TIMESTAMP WITH TIME ZONE", "timestamp_ntz": "TIMESTAMP",
          "void": '"NULL"'}
_FRAMING = {"csv": "has a number of fields other than the header's, or an open quote",
            "jsonl": "is not a valid JSON object"}


def is_remote(path: str | Path) -> bool:
    """Whether ``path`` is a URI for Spark to read (``s3a://...``), not a local path."""
    scheme = split_url(str(path), "log path", port=False).scheme
    return len(scheme) > 1 and scheme != "file" and "://" in str(path)


def _local(path: str | Path) -> str:
    text = str(path)
    return unquote(split_url(text, "log path", port=False).path) \
        if text.startswith("file:") else text


class SparkLogs(TalliedReader):
    """Per-key, per-second heat of heat sources, held by a Spark session (see the module).

    Counts as LogHeat does (``rows``, ``skipped_rows``, ``skipped_by_column``); its
    temp views live in a session of their own (``spark.newSession()``). Close it (or
    use ``with``) to release its cached tables, and to stop a session it started.
    """

    def __init__(self, spark: Any, options: Options | None = None, *,
                 owned: bool = False) -> None:
        self.options = options or Options()
        self._owner = spark if owned else None
        self.spark = spark.newSession()
        self.spark.conf.set("spark.sql.session.timeZone", "UTC")
        self.tally = Tally()
        self.engine = SparkEngine(self.spark, "the logs")
        self.tables = HeatTables(self.engine, self.tally, ())
        self._n = 0
        self._shown: dict[str, str] = {}

    def close(self) -> None:
        self.engine.close()
        if self._owner is not None:
            self._owner.stop()
            self._owner = None

    # -- reading ------------------------------------------------------------------------

    def read(self, paths: Iterable[str | Path]) -> None:
        """Read every source (see the module); CloudTrail files as one source, last.

        Raises InvalidInput for a URI without a format, InvalidLog as the DuckDB
        reader does (without a line number).
        """
        self.read_grouped(grouped(paths, self.options))

    def read_grouped(self, groups: Grouped) -> None:
        """Read the sources ``grouped`` found (see ``read``)."""
        by_format, shown = groups
        self._shown.update(shown)
        self.tally.formats.extend(by_format)  # in the order the files name them
        for kind in sorted(by_format, key=lambda k: k == "cloudtrail"):  # CloudTrail last
            reader = {"csv": self._csv, "jsonl": self._jsonl, "parquet": self._parquet,
                      "insights": self._insights, "cloudtrail": self._cloudtrail}[kind]
            with spark_errors(_what(by_format[kind])):
                reader(by_format[kind])

    def _shown_as(self, file: str) -> str:
        """A file as the caller named it (Spark names local files as file: URIs)."""
        return self._shown.get(_local(file), file)

    def _csv(self, paths: list[str]) -> None:
        by_header: dict[tuple[str, ...], list[str]] = {}
        for path in paths:
            if is_remote(path):
                first = self.spark.read.option("recursiveFileLookup", "true").text(path).first()
                record = next(csv.reader([first[0]]), None) if first is not None else None
                names = tuple(header_names(record, path))
            else:
                names = tuple(csv_header(_local(path)))
            by_header.setdefault(names, []).append(path)
        for names, files in by_header.items():
            schema = ", ".join(f"c{i} STRING" for i in range(len(names))) + f", {_CORRUPT} STRING"
            # multiLine: a quoted field may hold a newline, as DuckDB reads it
            frame = (self.spark.read.option("recursiveFileLookup", "true")
                     .csv(files, schema=schema, header=True, multiLine=True, quote='"',
                          escape='"', mode="PERMISSIVE", columnNameOfCorruptRecord=_CORRUPT))
            frame = _with_file(frame)
            picks = [f"c{names.index(c)}" if c in names else "CAST(NULL AS STRING)"
                     for c in COLUMNS]
            self._load(frame, [f"{_CORRUPT} IS NOT NULL AS jbad", *picks],
                       dict.fromkeys(COLUMNS, "VARCHAR"), "csv", files)

    def _jsonl(self, paths: list[str]) -> None:
        frame = _with_file(self.spark.read.option("recursiveFileLookup", "true").text(paths))
        fields = ", ".join(f"{c} STRING" for c in COLUMNS) + f", {_CORRUPT} STRING"
        # a row names each field once, and its key is no object or array (as
        # rows.json_row tells it for the other readers)
        frame = frame.where("trim(value) <> ''").selectExpr(
            "file", f"from_json(value, '{fields}', map('columnNameOfCorruptRecord', "
            f"'{_CORRUPT}')) AS j",
            "coalesce(size(json_object_keys(value)) <> "
            "size(array_distinct(json_object_keys(value))), false) "
            "OR from_json(value, 'key MAP<STRING, STRING>').key IS NOT NULL "
            "OR from_json(value, 'key ARRAY<STRING>').key IS NOT NULL AS jodd")
        self._load(frame, [f"j.{_CORRUPT} IS NOT NULL OR jodd AS jbad",
                           *(f"j.{SPARK.q(c)}" for c in COLUMNS)],
                   dict.fromkeys(COLUMNS, "VARCHAR"), "jsonl", paths)

    def _parquet(self, paths: list[str]) -> None:
        frame = _with_file(self.spark.read.option("recursiveFileLookup", "true")
                           .option("mergeSchema", "true").parquet(*paths))
        found = {f.name.strip().lower(): f for f in frame.schema.fields if f.name != "file"}
        from shardex.heat.rows import check_columns

        check_columns(list(found), path=_what([self._shown_as(p) for p in paths]), line=None)
        picks, types = [], {}
        for c in COLUMNS:
            if c in found:
                picks.append(SPARK.q(found[c].name))
                types[c] = _duck_type(found[c].dataType.simpleString())
            else:
                picks.append("CAST(NULL AS STRING)")
                types[c] = "VARCHAR"
        self._load(frame, ["false AS jbad", *picks], types, "parquet", paths)

    def _insights(self, paths: list[str]) -> None:
        files = (self.spark.read.format("binaryFile").option("recursiveFileLookup", "true")
                 .load(paths).select("path", "content").orderBy("path").collect())
        for path, content in files:
            shown = self._shown_as(path)
            report = report_of(parse_document(bytes(content), shown), shown,
                               self.options.insights_rule)
            batch = report.batch
            data = [(shown, rn, rn in batch.framing, n,
                     *(batch.cells[c][i] for c in COLUMNS))
                    for i, (rn, n) in enumerate(zip(batch.rn, batch.n, strict=True))]
            frame = self.spark.createDataFrame(data, "file STRING, rn BIGINT, jbad BOOLEAN, "
                                               "n BIGINT, " + ", ".join(f"{c} STRING"
                                                                        for c in COLUMNS))
            table = self._load(frame, ["jbad", *(SPARK.q(c) for c in COLUMNS)],
                               dict.fromkeys(COLUMNS, "VARCHAR"), "insights", [shown],
                               rn="rn", n="n", where=partial(_place, shown, report.where),
                               by=("file", "rn"))  # a row each: period_of checks its time
            period = period_of(report, [(int(rn), int(sec)) for rn, sec in self.engine.rows(
                f"SELECT first_rn, sec FROM {table} WHERE bad IS NULL AND kind = "
                f"(SELECT major FROM major_{self._n})")], self.options.period)
            period, note = insights_note(report, period, given=self.options.period is not None)
            self.tally.resolution = max(self.tally.resolution, period)
            self.tally.notes.append(note)

    def _cloudtrail(self, paths: list[str]) -> None:
        item_bytes = self.options.item_bytes
        files = (self.spark.read.format("binaryFile").option("recursiveFileLookup", "true")
                 .load(paths).select("path", "content").rdd.zipWithIndex())
        parsed = files.map(lambda f: _trail_file(f[0][0], f[0][1], f[1], item_bytes)).persist()
        try:
            faults = parsed.filter(lambda p: p[2] is not None).map(lambda p: p[2]).take(1)
            if faults:
                path, message, line = faults[0]
                raise InvalidLog(message, path=self._shown_as(path), line=line)
            counts = parsed.map(lambda p: p[1]).fold(TrailCounts(), _merge)
            frame = self.spark.createDataFrame(
                parsed.flatMap(lambda p: p[0]),
                "tbl STRING, attr STRING, rn BIGINT, n BIGINT, "
                + ", ".join(f"{c} STRING" for c in COLUMNS))
            self.engine.frame("cloudtrail", frame)

            def attributes(table: str) -> dict[str, int]:
                rows = frame.where(frame.tbl == table).groupBy("attr").agg(
                    pyspark().sql.functions.countDistinct("rn")).collect()
                return {str(r[0]): int(r[1]) for r in sorted(rows, key=lambda r: str(r[0]))}

            table, attribute = pick_table(counts, self.options.table, self.options.key_attribute,
                                          attributes)
            picked = frame.where((frame.tbl == table) & (frame.attr == attribute)) \
                .selectExpr("'cloudtrail' AS file", "*")

            def where(rn: int) -> tuple[str, str]:
                number = rn >> RECORD_BITS
                path = files.filter(lambda f: f[1] == number).map(lambda f: f[0][0]).first()
                return self._shown_as(path), f"record {rn & ((1 << RECORD_BITS) - 1)}"

            self._load(picked, ["false AS jbad", *(SPARK.q(c) for c in COLUMNS)],
                       dict.fromkeys(COLUMNS, "VARCHAR"), "cloudtrail", paths, rn="rn", n="n",
                       where=where)
            self.tally.notes.extend(trail_notes(counts, table, attribute, item_bytes))
            self.tally.unattributed_reads += counts.unkeyed[table]
        finally:
            parsed.unpersist()

    def _load(self, frame: Any, picks: Sequence[str], types: dict[str, str], fmt: str,
              paths: Sequence[str], *, rn: str = "CAST(NULL AS BIGINT)", n: str = "1",
              where: Callable[[int], tuple[str, str]] | None = None,
              by: tuple[str, ...] = ("file",)) -> str:
        """Validate and sum one source's rows (``picks``: jbad then COLUMNS, over
        ``frame``, which has ``file``); count them per file; add its heat. Returns the
        name of its per-second table, summed by ``by`` too (``rn``: a row each)."""
        self._n += 1
        name, source = f"agg_{self._n}", f"src_{self._n}"
        frame.createOrReplaceTempView(source)
        select = (f"SELECT file, {rn} AS rn, {picks[0]}, {n} AS n, "
                  + ", ".join(f"{p} AS {SPARK.q(c)}" for p, c in zip(picks[1:], COLUMNS,
                                                                   strict=True))
                  + f" FROM {source}")
        what = _what([self._shown_as(p) for p in paths])
        rules = validated(select, types, eventual=self.options.eventual, path=what,
                          dialect=SPARK)
        self.engine.table(name, per_second(rules, by=by))
        kinds: dict[str, dict[int, int]] = {}
        faults: dict[str, dict[str, int]] = {}
        for file, kind, bad, count in self.engine.rows(
                f"SELECT file, kind, bad, sum(nrow) FROM {name} GROUP BY 1, 2, 3 ORDER BY 1"):
            kinds.setdefault(str(file), {})
            faults.setdefault(str(file), {})
            if bad is None:
                kinds[str(file)][int(kind)] = int(count)
            else:
                faults[str(file)][str(bad)] = int(count)
        majors = {file: major_kind(found) for file, found in kinds.items()}
        for file in sorted(kinds):
            found = self.tally.faults(kinds[file], faults[file], majors[file])
            if found and not self.options.skip_bad:
                raise self._first_bad(rules, file, majors[file], fmt, where)
        for file in sorted(kinds):
            self.tally.accept(kinds[file], self.tally.faults(kinds[file], faults[file],
                                                              majors[file]), majors[file])
        self.engine.frame(f"major_{self._n}", self.spark.createDataFrame(
            sorted(majors.items()) or [("", 0)], "file STRING, major INT"))
        self.tables.add(f"""
            SELECT a.key, a.sec, sum(a.reads) AS reads, sum(a.writes) AS writes,
                sum(a.ru) AS ru, sum(a.wu) AS wu, sum(a.thr) AS thr, sum(a.tu) AS tu
            FROM {name} a JOIN major_{self._n} m ON a.file = m.file AND a.kind = m.major
            WHERE a.bad IS NULL GROUP BY 1, 2""")
        return name

    def _first_bad(self, rules: str, file: str, major: int, fmt: str,
                   where: Callable[[int], tuple[str, str]] | None) -> InvalidLog:
        """Describe a malformed row of ``file`` (Spark keeps no line numbers)."""
        self.engine.keys("bad_file", [file])
        cells = ", ".join(f"CAST({SPARK.q(c)} AS STRING)" for c in COLUMNS)
        found = self.engine.rows(f"""{rules}
            SELECT rn, coalesce(bad, 'mixed'), kind, {cells} FROM v
            WHERE file IN (SELECT key FROM bad_file) AND (bad IS NOT NULL OR kind <> {major})
            ORDER BY rn LIMIT 1""")
        shown = self._shown_as(file)
        if not found:  # pragma: no cover - the counts said a row was bad
            return InvalidLog("has a malformed row that could not be located", path=shown)
        rn, code, kind = found[0][:3]
        values: dict[str, Any] = dict(zip(COLUMNS, found[0][3:], strict=True))
        values["kind"] = kind
        values["detail"] = _FRAMING.get(fmt)
        message, column = describe(str(code), values, major), FAULT_COLUMN[str(code)]
        if where is not None and rn is not None:
            path, place = where(int(rn))
            return InvalidLog(f"{place}: {message}", path=path, column=column)
        return InvalidLog(f"{message} (Spark numbers no lines: the DuckDB engine names it)",
                          path=shown, column=column)

    # -- reports ------------------------------------------------------------------------

    def profile(self, *, ceiling: Ceiling, top: int = 10, min_ratio: float = 1.0,
                min_throttles: int | None = None, buckets: int = 24, over_limit: int = 100,
                per_shard: bool = False, cover: float = 0.8) -> HeatProfile:
        """Return the heat profile over logical keys (``shardex.heat.tables``)."""
        return self.tables.profile(ceiling=ceiling, top=top, min_ratio=min_ratio,
                                   min_throttles=min_throttles, buckets=buckets,
                                   over_limit=over_limit, per_shard=per_shard,
                                   cover=cover)

    def timeline(self, keys: Sequence[str], *, bins: int = 120) -> Timeline:
        """Return each logical key's busiest second in each of up to ``bins`` time bins."""
        return self.tables.timeline(keys, bins=bins)


def _place(path: str, where: Callable[[int], str], rn: int) -> tuple[str, str]:
    return path, where(rn)


def _with_file(frame: Any) -> Any:
    return frame.select("*", frame["_metadata.file_path"].alias("file"))


def _what(paths: Sequence[str]) -> str:
    return paths[0] if len(paths) == 1 else f"{paths[0]} (and {len(paths) - 1} more)"


def _duck_type(name: str) -> str:
    """A Spark type's name as the row rules name column types (DuckDB's)."""
    return name.upper() if name.startswith("decimal") else _TYPES.get(name, name.upper())


def _merge(a: TrailCounts, b: TrailCounts) -> TrailCounts:
    return TrailCounts().merge(a).merge(b)


def _trail_file(path: str, content: bytes, number: int, item_bytes: int
                ) -> tuple[list[tuple[Any, ...]], TrailCounts, tuple[str, str, int | None] | None]:
    """On an executor: one CloudTrail file's staged rows and counts, or its fault."""
    counts = TrailCounts()
    try:
        staged = trail_rows(parse_document(bytes(content), path), path, number, item_bytes,
                            counts)
    except InvalidLog as exc:
        message = str(exc).split(": ", 1)[1] if ": " in str(exc) else str(exc)
        return [], counts, (path, message, exc.line)
    return list(zip(*(staged[c] for c in STAGED), strict=True)), counts, None


Grouped = tuple[dict[str, list[str]], dict[str, str]]


def grouped(paths: Iterable[str | Path], options: Options) -> Grouped:
    """The files of ``paths`` by format, as URIs for Spark, and each as the caller named
    it: what can be told of them without Spark (a path that cannot be parsed or does not
    exist, a URI without a format, a misnamed gzip file) is refused before a session starts.
    """
    groups: dict[str, list[str]] = {}
    shown: dict[str, str] = {}
    for path in paths:
        if is_remote(path):
            if options.fmt is None:
                raise InvalidInput(f"{path}: give --format to read a URI with Spark "
                                   "(a format is told by content for local files only)")
            shown[str(path)] = str(path)
            groups.setdefault(options.fmt, []).append(str(path))
            continue
        for name in expand([_local(path)]):
            kind = log_format(name, options.fmt)
            if kind in ("csv", "jsonl") and is_gzip(name) and not name.endswith(".gz"):
                raise InvalidLog("is gzipped: Spark unpacks a file whose name ends in "
                                 ".gz only; rename it", path=name)
            uri = Path(name).resolve().as_uri()
            shown[_local(uri)] = name
            groups.setdefault(kind, []).append(uri)
    return groups, shown


def read_spark(paths: Iterable[str | Path], *, options: Options | None = None,
               spark: Any = None, master: str = "local[*]",
               conf: dict[str, str] | None = None) -> SparkLogs:
    """Read heat sources with Spark into one SparkLogs (see the module).

    ``spark``: the session to use (None: the active one, or a local one on ``master``
    with ``conf``, stopped when the SparkLogs closes). Raises InvalidInput when no path is given,
    InvalidLog as ``SparkLogs.read``, MissingDependency without pyspark.
    """
    given = list(paths)
    if not given:
        raise InvalidInput("give at least one access-log file")
    options = options or Options()
    groups = grouped(given, options)  # a bad path is named before a JVM starts
    owned = False
    if spark is None:
        from shardex.heat.spark.session import local_session

        # a session already running in this process (a notebook's) is joined, not stopped
        owned = pyspark().sql.SparkSession.getActiveSession() is None
        spark = local_session(master, conf)
    logs = SparkLogs(spark, options, owned=owned)
    try:
        logs.read_grouped(groups)
        with spark_errors("the logs"):
            logs.tables.build()
    except BaseException:
        logs.close()
        raise
    return logs
