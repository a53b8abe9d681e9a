"""The heat aggregation, defined once, as SQL that DuckDB and Spark both run.

``diagnose`` turns rows (one a request, or one a report datapoint standing for ``n``
requests) into per-key, per-second heat, and that heat into the figures the
classification reads. Both engines run the text this module writes, rendered for
their dialect (``DUCKDB``, ``SPARK``), so a rule cannot hold in one and not the
other:

1. ``validated``: the row rules of ``shardex.heat.rows`` (time kinds, units or bytes,
   op, throttled), giving every row its time kind, epoch, cost and fault code;
2. ``per_second``: the valid rows summed per key, second and time kind (faulty ones
   counted per fault code), the table a source is ``load``-ed into;
3. ``Tally``: what every source's load adds to the report (rows, time kinds, faults,
   a file's major time kind), in Python;
4. ``shardex.heat.tables``: the sources' per-second heat rolled up under logical keys,
   ranked and bucketed into a ``HeatProfile``, through an engine's ``Engine`` adapter.

Only spellings differ between the dialects (identifier quotes, ``isfinite``, how an
ISO 8601 text becomes epoch seconds); every decision is the same expression in both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self

from shardex.capacity import READ_UNIT_BYTES, WRITE_UNIT_BYTES
from shardex.errors import InvalidLog
from shardex.keys import OWNER_KEY, PLACEMENT_PREFIX, RECORD_PREFIX, SEPARATOR
from shardex.routing import MAX_SHARDS

__all__ = [
    "COLUMNS",
    "DUCKDB",
    "Dialect",
    "FAULT_COLUMN",
    "ISO",
    "MAX_AMOUNT",
    "SPARK",
    "TIME_KINDS",
    "TalliedReader",
    "Tally",
    "logical_sql",
    "major_kind",
    "number",
    "per_second",
    "reserved_sql",
    "validated",
]

COLUMNS = ("timestamp", "key", "op", "units", "bytes", "throttled")
# time kind -> its name; 0 (no time) and -1 (out of range) mark faults
TIME_KINDS: Mapping[int, str] = {1: "epoch seconds", 2: "epoch milliseconds",
                                 3: "epoch microseconds", 4: "epoch nanoseconds",
                                 5: "ISO 8601"}
ISO = 5
# (kind, units a second, the first value too large for it)
_EPOCH_UNITS = ((1, 1.0, 1e11), (2, 1e3, 1e14), (3, 1e6, 1e17), (4, 1e9, 1e20))
# units or bytes of one row are below this: far above any request's (DynamoDB's largest
# transaction costs 80,000 units), and low enough that no sum of rows can overflow a float
MAX_AMOUNT = 1e15
# ISO 8601 times, in epoch microseconds: from 0001-01-01T00:00:00Z to before 10000-01-01
_MIN_MICROS = -62_135_596_800_000_000
_END_MICROS = 253_402_300_800_000_000
# fault code -> the column it concerns (None: the row as a whole)
FAULT_COLUMN: Mapping[str, str | None] = {
    "row": None, "timestamp": "timestamp", "range": "timestamp",
    "mixed": "timestamp", "key": "key", "op": "op", "neither": "units", "both": "bytes",
    "units": "units", "bytes": "bytes", "throttled": "throttled",
}
_NUMERIC = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
            "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "REAL"}
# VALUE#k with no separator in VALUE and k a shard number: no leading zero, 4 digits at most
_SHARD_KEY = (f"^([^{SEPARATOR}]+){SEPARATOR}"
              f"(0|[1-9][0-9]{{0,{len(str(MAX_SHARDS - 1)) - 1}}})$")


@dataclass(frozen=True, slots=True)
class Dialect:
    """The spellings one engine's SQL needs; each template takes the expression as {0}.

    Column types handed to ``validated`` are named as DuckDB names them (an engine's
    reader translates its own).
    """

    name: str
    quote: str
    finite_sql: str
    iso_micros_sql: str
    time_micros_sql: str
    matches_sql: str

    def q(self, name: str) -> str:
        """``name`` as a quoted identifier (the column names are SQL keywords)."""
        return f"{self.quote}{name}{self.quote}"

    def finite(self, expr: str) -> str:
        return self.finite_sql.format(expr)

    def iso_micros(self, expr: str) -> str:
        """Epoch microseconds (an integer: exact at the range's ends) of an ISO 8601 text
        (a zone-less one is UTC), or NULL; NULL too for a date with no time of day (a
        day's rows would be one second's) and an offset of 24 hours or more, which the
        engines' casts take (a DATE column is refused by its type)."""
        cast = self.iso_micros_sql.format(expr)
        return (f"CASE WHEN {self.matches_sql.format(expr, _DATE_ONLY)} OR "
                f"{self.matches_sql.format(expr, _BAD_OFFSET)} THEN NULL ELSE {cast} END")

    def time_micros(self, expr: str) -> str:
        """Epoch microseconds of a native TIMESTAMP or DATE column."""
        return self.time_micros_sql.format(expr)


# (no backslash: Spark's string literals read it as an escape, DuckDB's do not)
_DATE_ONLY = "^ *[0-9]{4}-[0-9]{2}-[0-9]{2} *$"
_BAD_OFFSET = "[T ][0-9]{2}:[0-9]{2}.*[+-](2[4-9]|[3-9][0-9])(:?[0-9]{2})? *$"
DUCKDB = Dialect("duckdb", '"', "isfinite({0})", "epoch_us(TRY_CAST({0} AS TIMESTAMPTZ))",
                 "epoch_us({0})", "regexp_matches({0}, '{1}')")
# Spark's session time zone must be UTC (shardex.heat.spark sets it); NaN equals NaN there
SPARK = Dialect("spark", "`", "(NOT isnan({0}) AND abs({0}) < CAST('Infinity' AS DOUBLE))",
                "unix_micros(TRY_CAST({0} AS TIMESTAMP))",
                "unix_micros(CAST({0} AS TIMESTAMP))", "({0} RLIKE '{1}')")


def number(value: float) -> str:
    """A finite number as an SQL DOUBLE literal both dialects read alike."""
    return f"CAST({float(value)!r} AS DOUBLE)"


def reserved_sql(key: str) -> str:
    """SQL that is true for a key of shardex's own records: ``#placement#...``,
    ``#record#...`` and ``#owner``. Not any key that starts with the separator, as in a
    store shardex writes (``keys.is_reserved``): a log may be an application's own, whose
    keys (a channel ``#general``) are its logical keys."""
    return " OR ".join([f"({key} = '{OWNER_KEY}'", *(
        f"substring({key}, 1, {len(prefix)}) = '{prefix}'"
        for prefix in (PLACEMENT_PREFIX, RECORD_PREFIX))]) + ")"


def logical_sql(key: str) -> tuple[str, str]:
    """SQL of the logical key and the shard number (NULL when unsuffixed) of ``key``.

    ``VALUE#k`` is shard k of VALUE when VALUE has no ``#`` and k is a shard number
    below MAX_SHARDS; any other key is its own logical key.
    """
    shard = f"TRY_CAST(regexp_extract({key}, '{_SHARD_KEY}', 2) AS INTEGER)"
    sharded = f"coalesce({shard} < {MAX_SHARDS}, false)"
    return (f"CASE WHEN {sharded} THEN regexp_extract({key}, '{_SHARD_KEY}', 1) ELSE {key} END",
            f"CASE WHEN {sharded} THEN {shard} END")


def _text(kind: str) -> bool:
    return kind == "VARCHAR" or kind == '"NULL"'


def _number(kind: str) -> bool:
    return kind in _NUMERIC or kind.startswith("DECIMAL")


def _nested(kind: str) -> bool:
    """A list, array, map, struct or union type (DuckDB's names, or Spark's uppercased)."""
    head = kind.split("(")[0].split("<")[0].strip()
    return kind.endswith("]") or head in ("STRUCT", "MAP", "UNION", "ARRAY", "LIST")


def _time(kind: str) -> bool:
    return kind.startswith("TIMESTAMP")


def validated(select: str, types: Mapping[str, str], *, eventual: bool, path: str,
              dialect: Dialect = DUCKDB) -> str:
    """SQL (a WITH clause ending in ``v``) of every row of ``select`` with its parsed
    fields, time kind, epoch, cost and fault code.

    ``select`` yields ``rn, jbad, n`` and the COLUMNS (and any other columns, carried
    along); ``types`` holds each column's DuckDB type name (text for logs read as
    text). Raises InvalidLog naming ``path`` for a column of a type it cannot hold.
    """
    t, d = types, dialect
    for column, kind in t.items():
        if column == "key" and _nested(kind):
            # as a JSON Lines row's object or array key is malformed
            raise InvalidLog(f"has type {kind}: a key is text (or a number), not a list, "
                             "map or structure", path=path, column=column)
        if column == "timestamp" and kind == "DATE":
            raise InvalidLog("has type DATE: a timestamp gives its time of day (peaks are "
                             "per second, and a day's rows would be one second's)",
                             path=path, column=column)
        if not (_text(kind) or _number(kind) or (column == "timestamp" and _time(kind))
                or (column == "throttled" and kind == "BOOLEAN") or column == "key"):
            raise InvalidLog(f"has type {kind}, which this column cannot hold",
                             path=path, column=column)
    stamp = d.q("timestamp")
    te = (f"TRY_CAST({stamp} AS DOUBLE)" if _text(t["timestamp"]) else
          f"CAST({stamp} AS DOUBLE)" if _number(t["timestamp"]) else "CAST(NULL AS DOUBLE)")
    # the exact value, for an epoch time that a double rounds up to a bound (99999999999999999
    # is below 1e17, its double is not)
    exact = (f"TRY_CAST({stamp} AS DECIMAL(38, 10))" if _text(t["timestamp"])
             or _number(t["timestamp"]) else "CAST(NULL AS DECIMAL(38, 10))")
    ti = (d.iso_micros(stamp) if _text(t["timestamp"]) else
          d.time_micros(stamp) if _time(t["timestamp"]) else "CAST(NULL AS BIGINT)")

    # The common spellings are tested first so that trim() and lower() run only on
    # the rare others (CASE evaluates a branch only for the rows that reach it).
    def amount(column: str, parsed: str) -> tuple[str, str]:
        ref = d.q(column)
        if _text(t[column]):
            return (f"CASE WHEN {ref} IS NULL THEN true WHEN {parsed} IS NOT NULL THEN false "
                    f"ELSE trim({ref}) = '' END", f"TRY_CAST({ref} AS DOUBLE)")
        return f"({ref} IS NULL)", f"CAST({ref} AS DOUBLE)"

    units_missing, units = amount("units", "u")
    bytes_missing, nbytes = amount("bytes", "b")
    th = d.q("throttled")
    throttled = (f"CASE WHEN {th} IN ('0', '1') THEN {th} ELSE lower(trim({th})) END"
                 if _text(t["throttled"]) else
                 f"CASE WHEN {th} THEN '1' WHEN NOT {th} THEN '0' END"
                 if t["throttled"] == "BOOLEAN" else
                 f"CASE WHEN {th} = 1 THEN '1' WHEN {th} = 0 THEN '0' "
                 f"ELSE CAST({th} AS STRING) END")
    read_cost = f"greatest(1, ceil(b / {READ_UNIT_BYTES}))"
    if eventual:
        read_cost = f"({read_cost} / 2.0)"
    epoch_kind = " ".join(f"WHEN te < {bound:.0e} OR (te = {bound:.0e} AND {exact} < "
                          f"CAST({int(bound)} AS DECIMAL(38, 10))) THEN {kind}"
                          for kind, _, bound in _EPOCH_UNITS)
    # an ISO time's second, exact: a double of its microseconds may round .999999 up
    whole = "(tus - ((tus % 1000000) + 1000000) % 1000000) / 1e6"
    amount_ok = f"AND {{0}} >= 0 AND {{0}} < {number(MAX_AMOUNT)}"
    epoch = " ".join(f"WHEN {kind} THEN te / {scale!r}" for kind, scale, _ in _EPOCH_UNITS)
    op = d.q("op")
    return f"""
        WITH src AS ({select}),
        p AS (
            SELECT *, {te} AS te, CAST({d.q("key")} AS STRING) AS k,
                CASE WHEN {op} IN ('write', 'read') THEN CAST({op} AS STRING)
                    ELSE lower(trim(CAST({op} AS STRING))) END AS o,
                {units} AS u, {nbytes} AS b, {throttled} AS t
            FROM src),
        q AS (
            SELECT *, CASE WHEN te IS NULL OR NOT {d.finite("te")} THEN {ti} END AS tus,
                {units_missing} AS un, {bytes_missing} AS bn
            FROM p),
        r AS (
            SELECT *, CASE
                WHEN {d.finite("te")} THEN CASE WHEN te < 0 THEN -1 {epoch_kind} ELSE -1 END
                WHEN tus IS NOT NULL THEN CASE WHEN tus >= CAST({_MIN_MICROS} AS BIGINT)
                    AND tus < CAST({_END_MICROS} AS BIGINT) THEN {ISO} ELSE -1 END
                ELSE 0 END AS kind
            FROM q),
        v AS (
            SELECT *,
                CASE kind {epoch} WHEN {ISO} THEN {whole} END AS epoch,
                CASE
                    WHEN jbad THEN 'row'
                    WHEN kind = 0 THEN 'timestamp'
                    WHEN kind < 0 THEN 'range'
                    WHEN k IS NULL OR k = '' THEN 'key'
                    WHEN o IS NULL OR o NOT IN ('read', 'write') THEN 'op'
                    WHEN un AND bn THEN 'neither'
                    WHEN NOT un AND NOT bn THEN 'both'
                    WHEN NOT un AND NOT coalesce({d.finite("u")} {amount_ok.format("u")}, false)
                        THEN 'units'
                    WHEN NOT bn AND NOT coalesce({d.finite("b")} {amount_ok.format("b")}, false)
                        THEN 'bytes'
                    WHEN t IS NOT NULL AND t <> '' AND t NOT IN ('0', '1', 'true', 'false')
                        THEN 'throttled'
                END AS bad,
                CASE WHEN NOT un THEN u WHEN o = 'write'
                    THEN greatest(1, ceil(b / {WRITE_UNIT_BYTES})) ELSE {read_cost} END AS cost
            FROM r)
        """


def per_second(validated_sql: str, *, by: Sequence[str] = ()) -> str:
    """SQL summing the rows of ``validated`` (its WITH clause) per key and second.

    One row per (``by`` columns,) key, second, time kind and fault code (key, second
    and kind NULL for a faulty row) with ``nrow`` (rows), ``first_rn`` (the smallest
    row number, when the source numbers its rows), ``reads``, ``writes`` (requests:
    each row's ``n``), ``ru``/``wu`` (units), ``thr`` (throttled requests) and ``tu``
    (throttled units).
    """
    extra = "".join(f"{c}, " for c in by)
    groups = ", ".join(str(i) for i in range(1, len(by) + 5))
    return f"""{validated_sql}
        SELECT {extra}CASE WHEN bad IS NULL THEN k END AS key,
            CASE WHEN bad IS NULL THEN CAST(floor(epoch) AS BIGINT) END AS sec,
            CASE WHEN bad IS NULL THEN kind END AS kind, bad, count(*) AS nrow,
            min(rn) AS first_rn,
            coalesce(sum(n) FILTER (WHERE o = 'read'), 0) AS reads,
            coalesce(sum(n) FILTER (WHERE o = 'write'), 0) AS writes,
            coalesce(sum(cost) FILTER (WHERE o = 'read' AND bad IS NULL), 0) AS ru,
            coalesce(sum(cost) FILTER (WHERE o = 'write' AND bad IS NULL), 0) AS wu,
            coalesce(sum(n) FILTER (WHERE t IN ('1', 'true')), 0) AS thr,
            coalesce(sum(cost) FILTER (WHERE t IN ('1', 'true') AND bad IS NULL), 0) AS tu
        FROM v GROUP BY {groups}"""


def major_kind(kinds: Mapping[int, int]) -> int:
    """The time kind of a source: the one most of its valid rows have (epoch seconds on
    a tie); rows of another kind are its ``mixed`` faults."""
    return max(sorted(kinds), key=lambda k: (kinds[k], k == 1), default=1)


@dataclass(slots=True)
class Tally:
    """What the sources read add up to: rows kept, time kinds, faults, formats, notes.

    ``resolution`` is the seconds one row's time stands for (1, or the coarsest
    Contributor Insights period read); ``unattributed_reads`` the read requests a
    source saw but could not give a key (CloudTrail's Query and Scan).
    """

    rows: int = 0
    skipped_rows: int = 0
    skipped_by_column: dict[str, int] = field(default_factory=dict)
    kinds: dict[int, int] = field(default_factory=dict)
    formats: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    resolution: int = 1
    unattributed_reads: int = 0

    def faults(self, kinds: Mapping[int, int], faults: Mapping[str, int],
               major: int) -> dict[str, int]:
        """A source's faults by code, its rows of another time kind than ``major`` as
        ``mixed``."""
        found = {k: int(n) for k, n in faults.items() if n}
        mixed = sum(n for k, n in kinds.items() if k != major)
        if mixed:
            found["mixed"] = found.get("mixed", 0) + int(mixed)
        return found

    def accept(self, kinds: Mapping[int, int], faults: Mapping[str, int], major: int) -> None:
        """Count a source's valid rows (those of time kind ``major``) and its faults
        (as ``faults`` gives them: the caller has decided they may be skipped)."""
        good = int(kinds.get(major, 0))
        if good:
            self.kinds[major] = self.kinds.get(major, 0) + good
        self.rows += good
        for code, n in faults.items():
            column = FAULT_COLUMN[code] or "row"
            self.skipped_by_column[column] = self.skipped_by_column.get(column, 0) + int(n)
            self.skipped_rows += int(n)

    def time_kinds(self) -> tuple[str, ...]:
        """The names of the time kinds read, the most used first."""
        return tuple(TIME_KINDS[k] for k in sorted(self.kinds, key=lambda k: -self.kinds[k]))


class TalliedReader:
    """A heat reader's counts from its ``tally`` (``rows``, ``skipped_rows``,
    ``skipped_by_column``), and ``with`` closing it: the base of both engines' readers."""

    tally: Tally

    @property
    def rows(self) -> int:
        return self.tally.rows

    @property
    def skipped_rows(self) -> int:
        return self.tally.skipped_rows

    @property
    def skipped_by_column(self) -> dict[str, int]:
        return self.tally.skipped_by_column

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
