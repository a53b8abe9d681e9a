"""CloudTrail DynamoDB data events read as access-log rows.

A CloudTrail log file is one JSON document, ``{"Records": [event, ...]}``, gzipped as
CloudTrail delivers it to S3 or not. An event of ``dynamodb.amazonaws.com`` names
the request (``eventName``), its time (``eventTime``), and in ``requestParameters``
the table and the key of each item it touched: ``tableName`` and ``key`` for the
single-item calls, nested entries for the batch and transaction calls
(``requestItems``: a list of ``{operation, tableName, key}`` for TransactWriteItems
and TransactGetItems; a map of table to ``putRequest``/``deleteRequest`` entries or
``keys`` for BatchWriteItem and BatchGetItem). Field names are matched in either
case (AWS's own examples mix ``key`` and ``Key``), and a typed value (``{"S": "x"}``)
is unwrapped.

What CloudTrail cannot give, and what is done about it:

- the keys of a global secondary index: events name base-table (or shardex index
  table) keys only; a GSI's heat is seen through Contributor Insights on the GSI or
  shardex's live meter;
- the key of a Query, Scan or PartiQL statement: such requests are counted apart,
  not attributed to a key;
- consumed capacity: units are estimated from the item size (``item_bytes``): a write
  costs ``write_units(item_bytes)``, a read ``read_units(item_bytes)`` (half unless
  ``consistentRead``), twice that inside a transaction.

An event whose ``errorCode`` is a throttle (``ProvisionedThroughputExceededException``,
``ThrottlingException``, ``RequestLimitExceeded``, or a cancelled transaction whose
reasons name a throttling error) is a throttled request. Requests are staged into
DuckDB per key attribute (nothing is held in Python beyond one file); once every
file is read, ``select`` picks the table and its partition key attribute and gives
the rows to validate with the access-log rules.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from shardex.capacity import read_units, write_units
from shardex.errors import InvalidInput, InvalidLog
from shardex.heat.rows import COLUMNS
from shardex.heat.sources import read_document

__all__ = ["CloudTrailStage", "RECORD_BITS", "STAGED", "TrailCounts", "pick_table",
           "trail_notes", "trail_rows"]

_SOURCE = "dynamodb.amazonaws.com"
_READS = {"GetItem", "BatchGetItem", "TransactGetItems", "Query", "Scan"}
_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
_STATEMENTS = {"ExecuteStatement", "BatchExecuteStatement", "ExecuteTransaction"}
_THROTTLES = ("ProvisionedThroughputExceeded", "Throttling", "RequestLimitExceeded")
# A staged row's number is (file << RECORD_BITS) | record, so rows sort in file order.
RECORD_BITS = 32
_TYPES = {"S", "N", "B", "BOOL"}


def _field(doc: Mapping[str, Any], name: str) -> Any:
    """``doc[name]``, also spelt with a capital first letter."""
    value = doc.get(name)
    return doc.get(name[0].upper() + name[1:]) if value is None else value


def _key_text(value: Any) -> str | None:
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in _TYPES:
        value = next(iter(value.values()))
    if value is None or isinstance(value, dict | list):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _throttled(event: Mapping[str, Any]) -> bool:
    code = str(event.get("errorCode") or "")
    if any(mark in code for mark in _THROTTLES):
        return True
    return code == "TransactionCanceledException" and "Throttl" in str(
        event.get("errorMessage") or "")


@dataclass(frozen=True, slots=True)
class _Item:
    table: str | None
    key: Mapping[str, Any] | None


def _key_of(entry: Mapping[str, Any]) -> tuple[Any, Mapping[str, Any] | None]:
    """(table, key) of a request entry: its own ``key``, or a nested request's
    (``{"putRequest": {"key": ...}}``, ``{"Put": {"TableName": ..., "Key": ...}}``)."""
    key = _field(entry, "key")
    if isinstance(key, dict):
        return _field(entry, "tableName"), key
    for value in entry.values():
        if isinstance(value, dict) and isinstance(_field(value, "key"), dict):
            return _field(value, "tableName") or _field(entry, "tableName"), _field(value, "key")
    return _field(entry, "tableName"), None


def _items(params: Mapping[str, Any]) -> Iterator[_Item]:
    """Every (table, key) an event's request parameters name."""
    table, key = _key_of(params)
    if key is not None:
        yield _Item(table, key)
        return
    entries = _field(params, "requestItems")
    if entries is None:
        entries = _field(params, "transactItems")
    if isinstance(entries, list):  # transactions: [{operation, tableName, key}, ...]
        for entry in entries:
            if isinstance(entry, dict):
                yield _Item(*_key_of(entry))
    elif isinstance(entries, dict):  # batches: {table: [requests] | {keys: [key, ...]}}
        for name, spec in entries.items():
            if isinstance(spec, list):
                for request in spec:
                    if isinstance(request, dict):
                        yield _Item(str(name), _key_of(request)[1])
            elif isinstance(spec, dict):
                for plain in _field(spec, "keys") or []:
                    yield _Item(str(name), plain if isinstance(plain, dict) else None)
    else:  # Query, Scan: CloudTrail does not record the key
        yield _Item(table, None)


STAGED = ("tbl", "attr", "rn", "n", *COLUMNS)


@dataclass(slots=True)
class TrailCounts:
    """What CloudTrail files held besides keyed rows: requests per table, those without
    a key (Query, Scan) and on an index, PartiQL statements, other events."""

    tables: Counter[str] = field(default_factory=Counter)
    unkeyed: Counter[str] = field(default_factory=Counter)
    on_index: Counter[str] = field(default_factory=Counter)
    statements: int = 0
    events: int = 0
    other_events: int = 0

    def merge(self, other: TrailCounts) -> TrailCounts:
        """Add ``other``'s counts to these; return self."""
        self.tables.update(other.tables)
        self.unkeyed.update(other.unkeyed)
        self.on_index.update(other.on_index)
        self.statements += other.statements
        self.events += other.events
        self.other_events += other.other_events
        return self


def trail_rows(doc: Any, path: str, number: int, item_bytes: int,
               counts: TrailCounts) -> dict[str, list[Any]]:
    """The staged rows (columns STAGED) of the DynamoDB data events of one CloudTrail
    document ``doc``, read from ``path``, the ``number``-th file; counts the rest.

    A row's ``rn`` is ``(number << RECORD_BITS) | record``. Raises InvalidLog for a
    document that is not a CloudTrail file (naming the record at fault for a record
    that is not an object).
    """
    records = doc.get("Records") if isinstance(doc, dict) else None
    if not isinstance(records, list):
        raise InvalidLog('is not a CloudTrail log file: it has no "Records" list', path=path)
    staged: dict[str, list[Any]] = {c: [] for c in STAGED}

    def put(table: str, attr: str | None, rn: int, key: str | None, event: Mapping[str, Any],
            op: str, units: float) -> None:
        for column, value in (("tbl", table), ("attr", attr), ("rn", rn), ("n", 1),
                              ("timestamp", _key_text(event.get("eventTime"))),
                              ("key", key), ("op", op), ("units", repr(units)),
                              ("bytes", None), ("throttled", "1" if _throttled(event)
                                                else "0")):
            staged[column].append(value)

    for index, event in enumerate(records, 1):
        if not isinstance(event, dict):
            raise InvalidLog(f"record {index} is not an object", path=path, line=index)
        if event.get("eventSource") != _SOURCE:
            counts.other_events += 1
            continue
        name = str(event.get("eventName") or "")
        params = event.get("requestParameters")
        if name in _STATEMENTS:
            counts.statements += 1
            continue
        if (name not in _READS and name not in _WRITES) or not isinstance(params, dict):
            counts.other_events += 1
            continue
        counts.events += 1
        write = name in _WRITES
        factor = 2.0 if name.startswith("Transact") else 1.0
        units = factor * (float(write_units(item_bytes)) if write else
                          read_units(item_bytes, params.get("consistentRead") is True))
        rn = (number << RECORD_BITS) | index
        for item in _items(params):
            table = str(item.table) if item.table else "?"
            counts.tables[table] += 1
            if _field(params, "indexName"):
                counts.on_index[table] += 1
            if item.key is None:
                counts.unkeyed[table] += 1
                continue
            for attr, value in item.key.items():
                put(table, str(attr), rn, _key_text(value), event,
                    "write" if write else "read", units)
    return staged


@dataclass(slots=True)
class CloudTrailStage:
    """CloudTrail files staged in DuckDB, to be read as one source once all are in."""

    con: Any
    item_bytes: int
    files: list[str] = field(default_factory=list)
    counts: TrailCounts = field(default_factory=TrailCounts)

    def __post_init__(self) -> None:
        columns = ", ".join(f'"{c}" VARCHAR' for c in COLUMNS)
        self.con.execute("CREATE OR REPLACE TEMP TABLE cloudtrail (tbl VARCHAR, attr VARCHAR, "
                         f"rn BIGINT, n BIGINT, {columns})")

    def add(self, path: str) -> None:
        """Stage the DynamoDB data events of one CloudTrail file (see ``trail_rows``)."""
        staged = trail_rows(read_document(path), path, len(self.files), self.item_bytes,
                            self.counts)
        self.files.append(path)
        if staged["rn"]:
            casts = ", ".join(f"unnest(?::{'BIGINT' if c in ('rn', 'n') else 'VARCHAR'}[])"
                              for c in staged)
            self.con.execute(f"INSERT INTO cloudtrail SELECT {casts}", list(staged.values()))

    def select(self, table: str | None, attribute: str | None) -> tuple[str, str, str, list[Any]]:
        """Pick the table and partition key attribute; return (table, attribute, the rows'
        select, its parameters). Raises InvalidInput as ``pick_table`` does."""
        def attributes(name: str) -> dict[str, int]:
            return dict(self.con.execute(
                "SELECT attr, count(DISTINCT rn) FROM cloudtrail WHERE tbl = ? GROUP BY attr "
                "ORDER BY attr", [name]).fetchall())

        table, attribute = pick_table(self.counts, table, attribute, attributes)
        quoted = ", ".join(f'"{c}"' for c in COLUMNS)
        return table, attribute, (f"SELECT rn, false AS jbad, n, {quoted} FROM "
                                  "cloudtrail WHERE tbl = ? AND attr = ?"), [table, attribute]

    def path_of(self, rn: int) -> tuple[str, int]:
        """The file and record number of a staged row."""
        return self.files[rn >> RECORD_BITS], rn & ((1 << RECORD_BITS) - 1)

    def notes(self, table: str, attribute: str) -> list[str]:
        """What this source could not see or had to assume, said plainly."""
        return trail_notes(self.counts, table, attribute, self.item_bytes)


def pick_table(counts: TrailCounts, table: str | None, attribute: str | None,
               attributes: Callable[[str], Mapping[str, int]]) -> tuple[str, str]:
    """The table to diagnose and its partition key attribute (``attributes(table)``
    gives the key attributes of a table's requests, each with its request count).

    Raises InvalidInput when the files hold several tables and none is given, the
    table given is not among them, or the partition key attribute cannot be told.
    """
    if not counts.tables:
        raise InvalidInput("the CloudTrail files hold no DynamoDB data events (turn on "
                           "data events for the table: see docs/heat-sources.md)")
    seen = ", ".join(f"{t} ({n:,} requests)" for t, n in counts.tables.most_common())
    if table is None:
        if len(counts.tables) > 1:
            raise InvalidInput(f"the CloudTrail files hold requests to several tables: "
                               f"{seen}; choose one with --table")
        table = next(iter(counts.tables))
    elif table not in counts.tables:
        raise InvalidInput(f"the CloudTrail files hold no requests to table {table!r}; "
                           f"they hold {seen}")
    attrs = attributes(table)
    if attribute is None:
        attribute = _partition_attribute(table, attrs)
    elif attrs and attribute not in attrs:
        raise InvalidInput(f"the keys of table {table!r} in CloudTrail have no attribute "
                           f"{attribute!r}; they have {', '.join(map(repr, attrs))}")
    return table, attribute or "?"


def trail_notes(counts: TrailCounts, table: str, attribute: str, item_bytes: int) -> list[str]:
    """What CloudTrail files could not show or had to assume, said plainly."""
    said = [f"CloudTrail: table {table}, partition key attribute {attribute!r}. CloudTrail "
            "records base-table and index-table keys only, never a global secondary "
            "index's key attributes: see a GSI's heat with Contributor Insights on the "
            "GSI or shardex's live meter",
            f"CloudTrail records no consumed capacity: units estimated for items of "
            f"{item_bytes:,} bytes (--item-bytes), twice that in transactions"]
    unkeyed, on_index = counts.unkeyed[table], counts.on_index[table]
    if unkeyed:
        said.append(f"{unkeyed:,} Query/Scan requests name no key in CloudTrail and are "
                    "not counted" + (f" ({on_index:,} of them on an index)"
                                     if on_index else ""))
    if counts.statements:
        said.append(f"{counts.statements:,} PartiQL statements are not counted (CloudTrail "
                    "gives their keys only inside the statement text)")
    return said


def _partition_attribute(table: str, attrs: Mapping[str, int]) -> str | None:
    if not attrs:
        return None
    if len(attrs) == 1:
        return next(iter(attrs))
    if "pk" in attrs:  # a shardex index table: pk (shard key), sk (position)
        return "pk"
    raise InvalidInput(f"the keys of table {table!r} in CloudTrail have the attributes "
                       f"{', '.join(map(repr, attrs))}: name the partition key with "
                       "--key-attribute")

