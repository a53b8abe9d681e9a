"""The rules of an access-log row, for every reader, and the DuckDB side of reading them.

A row is one request. Its columns:

- ``timestamp``: ISO 8601 text (a zone-less time is UTC; a native timestamp column
  counts as ISO 8601), or an epoch time whose unit follows from its size: seconds
  below 1e11, milliseconds below 1e14, microseconds below 1e17, nanoseconds below
  1e20 (each bound is the year 5138 in its unit, so every time from 1973 on is read
  in its own unit). A file uses one kind; times lie in the years 1 to 9999.
- ``key``: the partition key, non-empty. ``op``: ``read`` or ``write`` (any case).
- ``units`` (capacity units consumed) or ``bytes`` (item bytes, turned
  into units by DynamoDB's rounding: a write costs one unit per started KB, a read
  one per started 4 KB, both at least 1, a read half that when eventually
  consistent); a row fills exactly one of them, a number >= 0 and below
  ``MAX_AMOUNT`` (1e15: no sum of rows can then overflow a float).
- ``throttled`` (optional): ``0``/``1`` or ``false``/``true``; a throttled row still
  counts its units as offered load.

Readers of aggregated reports (Contributor Insights) stage rows that stand for
``n`` requests each (``n`` is not a log column; a log row is one request).

Every reader applies the same SQL (written in ``heat.aggregate``, rendered for DuckDB
or Spark): the file readers (``heat.logs``, ``heat.spark``) to whole files, the
stream reader (``heat.stream``) and the CloudTrail and Contributor Insights readers
to batches they ``stage`` from Python. A malformed row gets a fault
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

from shardex.errors import InvalidLog, MissingDependency
from shardex.heat.aggregate import (
    COLUMNS,
    FAULT_COLUMN,
    ISO,
    MAX_AMOUNT,
    TIME_KINDS,
    logical_sql,
    per_second,
    reserved_sql,
    validated,
)

__all__ = [
    "Batch",
    "COLUMNS",
    "FAULT_COLUMN",
    "ISO",
    "Loaded",
    "MAX_AMOUNT",
    "REQUIRED",
    "TIME_KINDS",
    "check_columns",
    "describe",
    "duckdb",
    "first_fault",
    "header_names",
    "interruptible",
    "json_row",
    "json_row_ok",
    "load",
    "logical_sql",
    "reserved_sql",
    "stage",
]

REQUIRED = ("timestamp", "key", "op")


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


def check_columns(names: Sequence[str], *, path: str, line: int | None,
                  header: Sequence[str] | None = None) -> None:
    """Refuse a header without the required columns, or with neither units nor bytes
    (``header``: the header as read, quoted in the message in place of ``names``)."""
    for column in REQUIRED:
        if column not in names:
            shown = ", ".join(names) if header is None else ", ".join(map(repr, header))
            jsonl = header is not None and header[0].lstrip("\ufeff ").startswith("{")
            raise InvalidLog(f"has no {column!r} column (its header: {shown})" + (
                "; a JSON object: is it JSON Lines (--format jsonl)?" if jsonl else ""),
                path=path, line=line, column=column)
    if "units" not in names and "bytes" not in names:
        raise InvalidLog("has neither a 'units' nor a 'bytes' column", path=path,
                         line=line, column="units")


def header_names(header: Sequence[str] | None, path: str, line: int = 1) -> list[str]:
    """The column names (trimmed, lowercased) of the CSV header record ``header``, on
    line ``line`` of ``path``, checked: raises InvalidLog for no header, a column named
    twice or not at all, or a header without the required columns."""
    if not header:
        raise InvalidLog("is empty: a CSV log starts with a header line", path=path, line=line)
    names = [h.strip().lstrip("\ufeff").lower() for h in header]
    for name in names:
        if names.count(name) > 1 or not name:
            raise InvalidLog(f"header names column {name!r} "
                             f"{'twice' if name else 'with an empty name'}",
                             path=path, line=line, column=name or None)
    check_columns(names, path=path, line=line, header=header)
    return names


def describe(code: str, values: Mapping[str, Any], major: int) -> str:
    """The message for a malformed row, from its fault code and raw cells.

    ``major`` is the time kind of the file (the kind a ``mixed`` row differs from);
    ``values`` may hold ``detail`` for a ``row`` fault (a framing error).
    """
    def shown(column: str) -> str:
        value = values.get(column)
        text = None if value is None else str(value)
        return "missing" if text is None or not text.strip() else repr(text)

    # (a cell that holds the text 'missing' is shown quoted)
    if code in ("timestamp", "op", "units", "bytes", "throttled") and shown(code) == "missing":
        return f"{code} is missing or empty"
    if code == "mixed":
        kind = _kind_of(values.get("kind"))
        return (f"timestamp {shown('timestamp')} is {kind}, but this file's timestamps "
                f"are {TIME_KINDS.get(major, 'of another kind')}; a file must use one kind")
    messages = {
        "row": str(values.get("detail") or "is malformed"),
        "timestamp": (f"timestamp {shown('timestamp')} is neither ISO 8601 nor epoch seconds, "
                      "milliseconds, microseconds or nanoseconds (an ISO 8601 time gives "
                      "its time of day: peaks are per second; and an offset below 24 hours)"),
        "range": (f"timestamp {shown('timestamp')} is out of range: epoch times are >= 0 "
                  "and below 1e20, dates lie in the years 1 to 9999"),
        "key": "key is missing or empty",
        "op": f"op {shown('op')} is not 'read' or 'write'",
        "neither": "row has neither units nor bytes; give one",
        "both": "row has both units and bytes; give one",
        "units": f"units {shown('units')} must be a number >= 0 and below {MAX_AMOUNT:g}",
        "bytes": f"bytes {shown('bytes')} must be a number >= 0 and below {MAX_AMOUNT:g}",
        "throttled": f"throttled {shown('throttled')} must be 0 or 1",
    }
    return messages[code]


def _kind_of(kind: Any) -> str:
    try:
        return TIME_KINDS.get(int(kind), "of another kind")
    except (TypeError, ValueError):
        return "of another kind"


@dataclass(frozen=True, slots=True)
class Loaded:
    """One source aggregated into ``table``: valid rows per time kind, faults per code.

    ``table`` has the columns of ``shardex.heat.aggregate.per_second``; ``kinds``
    counts its valid rows per time kind, ``faults`` its faulty ones per fault code.
    """

    table: str
    kinds: dict[int, int]
    faults: dict[str, int]


def load(con: Any, select: str, types: Mapping[str, str], *, table: str, eventual: bool,
         path: str, params: Sequence[Any] = ()) -> Loaded:
    """Validate every row of ``select`` (its ``?`` bound to ``params``) and aggregate the
    valid ones into ``table`` (``shardex.heat.aggregate.per_second``), in DuckDB."""
    rules = validated(select.replace("@RN@", "NULL::BIGINT"), types, eventual=eventual,
                      path=path)
    con.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS {per_second(rules)}", list(params))
    kinds = {int(k): int(n) for k, n in con.execute(
        f"SELECT kind, sum(nrow) FROM {table} WHERE bad IS NULL GROUP BY kind").fetchall()}
    faults = {str(b): int(n) for b, n in con.execute(
        f"SELECT bad, sum(nrow) FROM {table} WHERE bad IS NOT NULL GROUP BY bad").fetchall()}
    return Loaded(table, kinds, faults)


def first_fault(con: Any, select: str, types: Mapping[str, str], *, eventual: bool,
                path: str, major: int, rn: str, params: Sequence[Any] = ()
                ) -> tuple[int, str, dict[str, Any]] | None:
    """Find the first malformed row of ``select`` in ``rn`` order (rows of a kind other
    than ``major`` count as ``mixed``); return its number, fault code and raw cells."""
    rules = validated(select.replace("@RN@", rn), types, eventual=eventual, path=path)
    found = con.execute(f"""{rules}
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


# -- JSON Lines rows --------------------------------------------------------------------


class _Pairs(dict[str, Any]):
    """A JSON object that keeps its fields as written, a name given twice included."""

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        super().__init__(pairs)
        self.pairs = pairs


def json_row(text: str) -> dict[str, Any] | tuple[str | None, str]:
    """A JSON Lines row's object, or, for a line that is none, the field at fault (None:
    the line as a whole) and why.

    A row is one JSON object that names each field once (which of two values a reader
    takes is up to the reader) and whose key is no object or array (text or a number).
    The file reader checks the same in SQL (``json_row_ok``) and asks this for why.
    """
    try:
        doc = json.loads(text, object_pairs_hook=_Pairs)
    except (ValueError, RecursionError):  # a line nested too deeply is broken too
        doc = None
    if not isinstance(doc, _Pairs):
        return None, "is not a valid JSON object"
    names = [name for name, _ in doc.pairs]
    twice = next((name for name in names if names.count(name) > 1), None)
    if twice is not None:
        return twice, f"names field {twice!r} twice: a row gives each field once"
    key = doc.get("key")
    if isinstance(key, dict | list):
        what = "an object" if isinstance(key, dict) else "an array"
        return "key", f"key {json.dumps(key, ensure_ascii=False)} is {what}, not text"
    return dict(doc)


def json_row_ok(line: str) -> str:
    """SQL: whether the text ``line`` is a JSON Lines row (as ``json_row`` tells it)."""
    return (f"CASE WHEN json_valid({line}) AND json_type({line}) = 'OBJECT' THEN "
            f"len(json_keys({line})) = len(list_distinct(json_keys({line}))) "
            f"AND coalesce(json_type({line}, '$.key') NOT IN ('OBJECT', 'ARRAY'), true) "
            "ELSE false END")


# -- rows staged from Python --------------------------------------------------------------

@dataclass(slots=True)
class Batch:
    """Rows staged from Python: text cells per column, a row number and a weight each.

    A row whose framing failed (``framing`` maps its number to how, ``columns`` to the
    field at fault when one is) is counted and reported as a ``row`` fault, whatever
    its cells.
    """

    rn: list[int] = field(default_factory=list)
    cells: dict[str, list[str | None]] = field(
        default_factory=lambda: {c: [] for c in COLUMNS})
    n: list[int] = field(default_factory=list)
    framing: dict[int, str] = field(default_factory=dict)
    columns: dict[int, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.rn)

    def add(self, rn: int, cells: Mapping[str, Any], n: int = 1) -> None:
        """Add one row; ``cells`` maps columns to raw values (turned into text here)."""
        self.rn.append(rn)
        for column, values in self.cells.items():
            values.append(_cell(cells.get(column)))
        self.n.append(n)

    def add_broken(self, rn: int, detail: str, column: str | None = None) -> None:
        """Add a row whose framing failed (``detail`` says how; ``column``: the field at
        fault), for counting and naming."""
        self.framing[rn] = detail
        if column is not None:
            self.columns[rn] = column
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
