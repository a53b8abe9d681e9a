"""The rules of an access-log row, written once, as DuckDB SQL, for every reader.

A row is one request. Its columns:

- ``timestamp``: ISO 8601 text (a zone-less time is UTC; a native timestamp column
  counts as ISO 8601), or an epoch time whose unit follows from its size: seconds
  below 1e11, milliseconds below 1e14, microseconds below 1e17, nanoseconds below
  1e20 (each bound is the year 5138 in its unit, so every time from 1973 on is read
  in its own unit). A file uses one kind; times lie in the years 1 to 9999.
- ``key``: the partition key, non-empty. ``op``: ``read`` or ``write`` (any case).
- ``units`` (capacity units consumed, >= 0) or ``bytes`` (item bytes, >= 0, turned
  into units by DynamoDB's rounding: a write costs one unit per started KB, a read
  one per started 4 KB, both at least 1, a read half that when eventually
  consistent); a row fills exactly one of them.
- ``throttled`` (optional): ``0``/``1`` or ``false``/``true``; a throttled row still
  counts its units as offered load.

Readers of aggregated reports (Contributor Insights) stage rows that stand for
``n`` requests each (``n`` is not a log column; a log row is one request).

Every reader applies the same SQL: the file readers (``heat.logs``) to whole
files, the stream reader (``heat.stream``) and the CloudTrail and Contributor
Insights readers to batches they ``stage`` from Python. A malformed row gets a fault
code; ``describe`` gives the one message for it and ``FAULT_COLUMN`` the column at
fault. The SQL also names each key's logical key and shard number (``PENDING#3`` is
shard 3 of ``PENDING``), so every reader rolls shard keys up the same way, and tells
shardex's own records (``#placement#o-1``) from logical keys: readers count those
apart, as they are one partition key an item, never a hot value of the index.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from shardex.capacity import READ_UNIT_BYTES, WRITE_UNIT_BYTES
from shardex.errors import InvalidLog, MissingDependency
from shardex.keys import SEPARATOR
from shardex.routing import MAX_SHARDS

__all__ = [
    "Batch",
    "COLUMNS",
    "FAULT_COLUMN",
    "ISO",
    "Loaded",
    "REQUIRED",
    "TIME_KINDS",
    "check_columns",
    "describe",
    "duckdb",
    "first_fault",
    "interruptible",
    "load",
    "logical_sql",
    "reserved_sql",
    "stage",
]

COLUMNS = ("timestamp", "key", "op", "units", "bytes", "throttled")
REQUIRED = ("timestamp", "key", "op")

# time kind -> its name; 0 (no time) and -1 (out of range) mark faults
TIME_KINDS: Mapping[int, str] = {1: "epoch seconds", 2: "epoch milliseconds",
                                 3: "epoch microseconds", 4: "epoch nanoseconds",
                                 5: "ISO 8601"}
ISO = 5
# (kind, units a second, the first value too large for it)
_EPOCH_UNITS = ((1, 1.0, 1e11), (2, 1e3, 1e14), (3, 1e6, 1e17), (4, 1e9, 1e20))
_MIN_EPOCH = -62_135_596_800.0  # 0001-01-01T00:00:00Z
_MAX_EPOCH = 253_402_300_799.0  # 9999-12-31T23:59:59Z

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


def duckdb() -> ModuleType:
    """Return the duckdb module; raise MissingDependency naming the ``diagnose`` extra."""
    try:
        import duckdb as module
    except ImportError as exc:
        raise MissingDependency("duckdb", "diagnose") from exc
    return module


@contextmanager
def interruptible() -> Iterator[None]:
    """Let Ctrl-C during a DuckDB query arrive as KeyboardInterrupt, as it does elsewhere
    (DuckDB stops the query and raises its own error instead)."""
    try:
        yield
    except Exception as exc:
        if type(exc).__name__ == "InterruptException" or (
                isinstance(exc, RuntimeError) and "interrupted" in str(exc).lower()):
            raise KeyboardInterrupt from exc
        raise


def check_columns(names: Sequence[str], *, path: str, line: int | None) -> None:
    """Refuse a header without the required columns, or with neither units nor bytes."""
    for column in REQUIRED:
        if column not in names:
            raise InvalidLog(f"has no {column!r} column (columns: {', '.join(names)})",
                             path=path, line=line, column=column)
    if "units" not in names and "bytes" not in names:
        raise InvalidLog("has neither a 'units' nor a 'bytes' column", path=path,
                         line=line, column="units")


def describe(code: str, values: Mapping[str, Any], major: int) -> str:
    """The message for a malformed row, from its fault code and raw cells.

    ``major`` is the time kind of the file (the kind a ``mixed`` row differs from);
    ``values`` may hold ``detail`` for a ``row`` fault (a framing error).
    """
    def shown(column: str) -> str:
        value = values.get(column)
        text = None if value is None else str(value)
        return "missing" if text is None or not text.strip() else repr(text)

    if code == "mixed":
        kind = _kind_of(values.get("kind"))
        return (f"timestamp {shown('timestamp')} is {kind}, but this file's timestamps "
                f"are {TIME_KINDS.get(major, 'of another kind')}; a file must use one kind")
    messages = {
        "row": str(values.get("detail") or "is malformed"),
        "timestamp": (f"timestamp {shown('timestamp')} is neither ISO 8601 nor epoch seconds, "
                      "milliseconds, microseconds or nanoseconds"),
        "range": (f"timestamp {shown('timestamp')} is out of range: epoch times are >= 0 "
                  "and below 1e20, dates lie in the years 1 to 9999"),
        "key": "key is missing or empty",
        "op": f"op {shown('op')} is not 'read' or 'write'",
        "neither": "row has neither units nor bytes; give one",
        "both": "row has both units and bytes; give one",
        "units": f"units {shown('units')} must be a number >= 0",
        "bytes": f"bytes {shown('bytes')} must be a number >= 0",
        "throttled": f"throttled {shown('throttled')} must be 0 or 1",
    }
    return messages[code]


def _kind_of(kind: Any) -> str:
    try:
        return TIME_KINDS.get(int(kind), "of another kind")
    except (TypeError, ValueError):
        return "of another kind"


def reserved_sql(key: str) -> str:
    """SQL that is true for a key of shardex's own records (``#placement#...``): a key
    that starts with the separator, which no logical key can (``keys.is_reserved``)."""
    return f"starts_with({key}, '{SEPARATOR}')"


def logical_sql(key: str) -> tuple[str, str]:
    """SQL of the logical key and the shard number (NULL when unsuffixed) of ``key``.

    ``VALUE#k`` is shard k of VALUE when VALUE has no ``#`` and k is a shard number
    below MAX_SHARDS; any other key is its own logical key.
    """
    number = f"TRY_CAST(regexp_extract({key}, '{_SHARD_KEY}', 2) AS INTEGER)"
    sharded = f"coalesce({number} < {MAX_SHARDS}, false)"
    return (f"CASE WHEN {sharded} THEN regexp_extract({key}, '{_SHARD_KEY}', 1) ELSE {key} END",
            f"CASE WHEN {sharded} THEN {number} END")


# -- the rules, in SQL ------------------------------------------------------------------

def _text(kind: str) -> bool:
    return kind == "VARCHAR" or kind == '"NULL"'


def _number(kind: str) -> bool:
    return kind in _NUMERIC or kind.startswith("DECIMAL")


def _time(kind: str) -> bool:
    return kind.startswith("TIMESTAMP") or kind == "DATE"


def _validated(select: str, types: Mapping[str, str], eventual: bool, path: str) -> str:
    """SQL of every row of ``select`` with its parsed fields, time kind, epoch and fault.

    ``select`` yields ``rn, jbad, n`` and the COLUMNS; ``types`` holds each column's
    DuckDB type (text for logs read as text).
    """
    t = types
    for column, kind in t.items():
        if not (_text(kind) or _number(kind) or (column == "timestamp" and _time(kind))
                or (column == "throttled" and kind == "BOOLEAN") or column == "key"):
            raise InvalidLog(f"has type {kind}, which this column cannot hold",
                             path=path, column=column)
    stamp = '"timestamp"'
    te = (f"TRY_CAST({stamp} AS DOUBLE)" if _text(t["timestamp"]) else
          f"CAST({stamp} AS DOUBLE)" if _number(t["timestamp"]) else "NULL::DOUBLE")
    ti = (f"epoch(TRY_CAST({stamp} AS TIMESTAMPTZ))" if _text(t["timestamp"]) else
          f"epoch({stamp})" if _time(t["timestamp"]) else "NULL::DOUBLE")

    # The common spellings are tested first so that trim() and lower() run only on
    # the rare others (CASE evaluates a branch only for the rows that reach it).
    def amount(column: str, parsed: str) -> tuple[str, str]:
        ref = f'"{column}"'
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
    if eventual:
        read_cost = f"({read_cost} / 2.0)"
    epoch_kind = " ".join(f"WHEN te < {bound:.0e} THEN {kind}"
                          for kind, _, bound in _EPOCH_UNITS)
    epoch = " ".join(f"WHEN {kind} THEN te / {scale!r}" for kind, scale, _ in _EPOCH_UNITS)
    return f"""
        WITH src AS ({select}),
        p AS (
            SELECT *, {te} AS te, CAST("key" AS VARCHAR) AS k,
                CASE WHEN "op" IN ('write', 'read') THEN CAST("op" AS VARCHAR)
                    ELSE lower(trim(CAST("op" AS VARCHAR))) END AS o,
                {units} AS u, {nbytes} AS b, {throttled} AS t
            FROM src),
        q AS (
            SELECT *, CASE WHEN te IS NULL OR NOT isfinite(te) THEN {ti} END AS ti,
                {units_missing} AS un, {bytes_missing} AS bn
            FROM p),
        r AS (
            SELECT *, CASE
                WHEN isfinite(te) THEN CASE WHEN te < 0 THEN -1 {epoch_kind} ELSE -1 END
                WHEN isfinite(ti) THEN
                    CASE WHEN ti BETWEEN {_MIN_EPOCH!r} AND {_MAX_EPOCH!r} THEN {ISO} ELSE -1 END
                ELSE 0 END AS kind
            FROM q),
        v AS (
            SELECT *,
                CASE kind {epoch} WHEN {ISO} THEN ti END AS epoch,
                CASE
                    WHEN jbad THEN 'row'
                    WHEN kind = 0 THEN 'timestamp'
                    WHEN kind < 0 THEN 'range'
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
            FROM r)
        """


@dataclass(frozen=True, slots=True)
class Loaded:
    """One source aggregated into ``table``: valid rows per time kind, faults per code.

    ``table`` has a row per (key, second, time kind) of valid rows, with ``rows``,
    ``first`` (the smallest row number, when the source numbers its rows), ``reads``,
    ``writes`` (requests), ``ru``/``wu`` (units), ``thr`` (throttled requests) and
    ``tu`` (throttled units); faulty rows are counted in ``faults``.
    """

    table: str
    kinds: dict[int, int]
    faults: dict[str, int]


def load(con: Any, select: str, types: Mapping[str, str], *, table: str, eventual: bool,
         path: str, params: Sequence[Any] = ()) -> Loaded:
    """Validate every row of ``select`` (its ``?`` bound to ``params``) and aggregate the
    valid ones into ``table``."""
    validated = _validated(select.replace("@RN@", "NULL::BIGINT"), types, eventual, path)
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE {table} AS {validated}
        SELECT CASE WHEN bad IS NULL THEN k END AS key,
            CASE WHEN bad IS NULL THEN CAST(floor(epoch) AS BIGINT) END AS sec,
            CASE WHEN bad IS NULL THEN kind END AS kind, bad, count(*) AS rows, min(rn) AS first,
            coalesce(sum(n) FILTER (WHERE o = 'read'), 0) AS reads,
            coalesce(sum(n) FILTER (WHERE o = 'write'), 0) AS writes,
            coalesce(sum(cost) FILTER (WHERE o = 'read' AND bad IS NULL), 0) AS ru,
            coalesce(sum(cost) FILTER (WHERE o = 'write' AND bad IS NULL), 0) AS wu,
            coalesce(sum(n) FILTER (WHERE t IN ('1', 'true')), 0) AS thr,
            coalesce(sum(cost) FILTER (WHERE t IN ('1', 'true') AND bad IS NULL), 0) AS tu
        FROM v GROUP BY ALL""", list(params))
    kinds = {int(k): int(n) for k, n in con.execute(
        f"SELECT kind, sum(rows) FROM {table} WHERE bad IS NULL GROUP BY kind").fetchall()}
    faults = {str(b): int(n) for b, n in con.execute(
        f"SELECT bad, sum(rows) FROM {table} WHERE bad IS NOT NULL GROUP BY bad").fetchall()}
    return Loaded(table, kinds, faults)


def first_fault(con: Any, select: str, types: Mapping[str, str], *, eventual: bool,
                path: str, major: int, rn: str, params: Sequence[Any] = ()
                ) -> tuple[int, str, dict[str, Any]] | None:
    """Find the first malformed row of ``select`` in ``rn`` order (rows of a kind other
    than ``major`` count as ``mixed``); return its number, fault code and raw cells."""
    validated = _validated(select.replace("@RN@", rn), types, eventual, path)
    found = con.execute(f"""{validated}
        SELECT rn, coalesce(bad, 'mixed'), kind, CAST("timestamp" AS VARCHAR), k,
            CAST("op" AS VARCHAR), CAST("units" AS VARCHAR), CAST("bytes" AS VARCHAR),
            CAST("throttled" AS VARCHAR)
        FROM v WHERE bad IS NOT NULL OR kind <> ? ORDER BY rn LIMIT 1""",
                        [*params, major]).fetchall()
    if not found:
        return None
    row = found[0]
    values: dict[str, Any] = dict(zip(COLUMNS, row[3:], strict=True))
    values["kind"] = row[2]
    return int(row[0]), str(row[1]), values


# -- rows staged from Python --------------------------------------------------------------

@dataclass(slots=True)
class Batch:
    """Rows staged from Python: text cells per column, a row number and a weight each.

    A row whose framing failed (``framing`` maps its number to how) is counted and
    reported as a ``row`` fault, whatever its cells.
    """

    rn: list[int] = field(default_factory=list)
    cells: dict[str, list[str | None]] = field(
        default_factory=lambda: {c: [] for c in COLUMNS})
    n: list[int] = field(default_factory=list)
    framing: dict[int, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.rn)

    def add(self, rn: int, cells: Mapping[str, Any], n: int = 1) -> None:
        """Add one row; ``cells`` maps columns to raw values (turned into text here)."""
        self.rn.append(rn)
        for column, values in self.cells.items():
            values.append(_cell(cells.get(column)))
        self.n.append(n)

    def add_broken(self, rn: int, detail: str) -> None:
        """Add a row whose framing failed (``detail`` says how), for counting and naming."""
        self.framing[rn] = detail
        self.add(rn, {})

    def add_records(self, rns: Sequence[int], records: Sequence[Sequence[str]],
                    header: Sequence[str]) -> None:
        """Add CSV records (text cells in ``header``'s order), one row each, in bulk."""
        if not records:
            return
        columns = list(zip(*records, strict=True))
        self.rn.extend(rns)
        for column, values in self.cells.items():
            if column in header:
                values.extend(columns[header.index(column)])
            else:
                values.extend([None] * len(records))
        self.n.extend([1] * len(records))


def _cell(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(value) if isinstance(value, dict | list) else str(value)


def stage(con: Any, table: str, batch: Batch) -> tuple[str, dict[str, str]]:
    """Put ``batch`` into the temp table ``table`` (values bound, never spliced); return
    the select and column types to ``load`` it with."""
    # an interrupt (Ctrl-C) may have cut the last add short: keep whole rows only
    lists: list[list[Any]] = [batch.rn, batch.n, *batch.cells.values()]
    whole = min(len(values) for values in lists)
    for values in lists:
        del values[whole:]
    # Only what varies is passed: a column no row fills is NULL, the weight 1 unless some
    # row stands for more, a broken row by its number (few are).
    present = [c for c in COLUMNS if any(v is not None for v in batch.cells[c])]
    ones = all(n == 1 for n in batch.n)
    picks = [f'unnest(?::VARCHAR[]) AS "{c}"' if c in present else f'NULL::VARCHAR AS "{c}"'
             for c in COLUMNS]
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE {table} AS
        SELECT *, list_contains(?::BIGINT[], rn) AS jbad FROM (
            SELECT unnest(?::BIGINT[]) AS rn, {'1' if ones else 'unnest(?::BIGINT[])'} AS n,
                {", ".join(picks)})""",
                [list(batch.framing), batch.rn, *([] if ones else [batch.n]),
                 *(batch.cells[c] for c in present)])
    quoted = ", ".join(f'"{c}"' for c in COLUMNS)
    select = f"SELECT rn, jbad, n, {quoted} FROM {table}"
    return select, dict.fromkeys(COLUMNS, "VARCHAR")
