"""``AzureTablesStore``: the store's hooks, its request path, reads and records.

Every request goes through ``_call``: it marks the request on the call's Recorder,
sends it through the client adapter, maps the driver's errors (``map_error``) and
reports the entities the request touched as its units (Azure's ceilings count entities:
a write costs one unit an entity written, a read one an entity returned, at least one).
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping
from typing import Any, ClassVar
from urllib.parse import urlencode

from shardex.capacity import QUERY_PAGE_BYTES
from shardex.clock import Clock
from shardex.errors import (
    ConditionFailed,
    InvalidInput,
    InvalidKey,
    InvalidURI,
    MalformedItem,
    ShardexError,
)
from shardex.keys import record_key, validate_shard_key
from shardex.model.entries import Placement, Position, Record, StoredEntry
from shardex.stores.azure import codec, keys
from shardex.stores.azure.client import Row, SdkClient, TablesClient, map_error
from shardex.stores.azure.placement import Placer, RepairReport, TableRows
from shardex.stores.base import Capabilities, Store
from shardex.stores.metered import Recorder
from shardex.stores.uri import (
    AIOHTTP_CONNECTIONS,
    StoreURI,
    check_client,
    check_keywords,
    check_settings,
    endpoint_of,
)

__all__ = ["AzureTablesStore", "check_table_name"]

_MAX_PAGE = 1000
_ENTRY_FIELDS = ["PartitionKey", "RowKey", "k", "s", "id", "t", "st"]
_OPTIONS: Mapping[str, type] = {"endpoint": str, "connect_timeout": float,
                                "read_timeout": float, "max_connections": int}



# Azure's rule for a table name (the service answers InvalidResourceName otherwise, and
# Azurite takes some it refuses): a letter, then letters and digits, 3 to 63 in all
_TABLE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]{2,62}")


def check_table_name(table: Any) -> str:
    """``table``, if Azure Table Storage takes it as a table name; InvalidInput otherwise."""
    if type(table) is not str or not _TABLE_NAME.fullmatch(table):
        raise InvalidInput(f"Azure table name {table!r}: give 3 to 63 letters and digits, "
                           "the first a letter")
    if table.lower() == "tables":
        raise InvalidInput(f"Azure table name {table!r} is reserved by the service")
    return table


class AzureTablesStore(Store):
    """Azure Table Storage (and the Cosmos DB Table API) through ``azure-data-tables``.

    ``table`` must exist (``shardex azure create-table TABLE``); indexes share it, each
    under its own partition keys. ``endpoint`` is the table service URL (Azurite:
    ``http://127.0.0.1:10002/devstoreaccount1``); credentials come from ``credential``, or
    ``connection_string``, or the environment (``shardex.stores.azure.client``). ``client``
    hands in a ``TablesClient`` adapter instead (tests inject faults with one).
    ``connect_timeout`` and ``read_timeout`` are seconds, ``max_connections`` the client's
    pool (the requests it carries at once: a fan-out's bound). Raises MissingDependency
    (``pip install 'shardex[azure]'``) when the driver is not installed.
    """

    scheme: ClassVar[str] = "azure-tables"

    def __init__(self, table: str, *, endpoint: str | None = None, credential: Any = None,
                 connection_string: str | None = None, client: TablesClient | None = None,
                 connect_timeout: float = 5.0, read_timeout: float = 30.0,
                 max_connections: int = AIOHTTP_CONNECTIONS, clock: Clock | None = None) -> None:
        super().__init__(capabilities=Capabilities(consistent_reads=True, max_page=_MAX_PAGE,
                                                   values=codec.AZURE_VALUES), clock=clock)
        check_table_name(table)
        check_client("", connect_timeout=connect_timeout, read_timeout=read_timeout,
                     max_connections=max_connections)
        self.table = table
        if client is not None and not isinstance(client, TablesClient):
            raise InvalidInput(f"client must be a shardex TablesClient adapter, got {client!r}")
        self._client = client if client is not None else SdkClient(
            table, endpoint=endpoint, credential=credential,
            connection_string=connection_string, connect_timeout=connect_timeout,
            read_timeout=read_timeout, max_connections=max_connections)
        self._endpoint = endpoint
        self._placer = Placer(TableRows(self._call))

    @classmethod
    def from_uri(cls, uri: StoreURI, **options: Any) -> AzureTablesStore:
        """``azure-tables://TABLE?endpoint=URL&connect_timeout=S&read_timeout=S&max_connections=N``."""
        cls.check_uri(uri)
        check_keywords("azure-tables", options,
                       set(_OPTIONS) | {"credential", "connection_string", "client", "clock"})
        return cls(uri.location, **{**uri.take(_OPTIONS), **options})

    @classmethod
    def check_uri(cls, uri: StoreURI) -> None:
        if uri.username or uri.password:
            raise InvalidURI("azure-tables:// takes no credentials in the URI; set "
                             "AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT and "
                             "AZURE_STORAGE_KEY, or hand in credential=")
        if uri.path or not uri.location:
            raise InvalidURI(f"azure-tables:// needs a table name and no path: "
                             f"azure-tables://TABLE?endpoint=URL, got {uri.raw!r}")
        try:
            check_table_name(uri.location)
        except InvalidInput as exc:  # the URI's table name: the URI's fault
            raise InvalidURI(f"{exc}: {uri.raw!r}") from None
        check_settings(uri.take(_OPTIONS), connections=AIOHTTP_CONNECTIONS,
                       endpoint="endpoint", what="Azure endpoint")

    @property
    def uri(self) -> str:
        """``azure-tables://TABLE?endpoint=URL``, without credentials."""
        endpoint = self._endpoint or self._client.endpoint
        return f"azure-tables://{self.table}?" + urlencode({"endpoint": endpoint}, safe=":/")

    @property
    def holds(self) -> Hashable:
        """The account's endpoint and the table (Azure's table names know no case)."""
        return ("azure-tables", endpoint_of(self._endpoint or self._client.endpoint),
                self.table.lower())

    @property
    def client(self) -> TablesClient:
        """The adapter the store calls Azure through."""
        return self._client

    @property
    def connections(self) -> int | None:
        """The client's connection pool, if it says (the SDK's aiohttp session: 100)."""
        return self._client.connections

    async def _connect(self) -> None:
        await self._client.open()
        try:
            # a read of an entity that never exists: 404 for it, or TableNotFound
            await self._client.call("get", partition=keys.TERMINATOR, row=keys.TERMINATOR)
        except Exception as exc:
            await self._client.close()
            if isinstance(exc, ShardexError):  # already shardex's: not its own cause
                raise
            raise map_error(exc, operation="open", table=self.table,
                            endpoint=self._client.endpoint) from exc

    async def _disconnect(self) -> None:
        await self._client.close()

    async def indexes(self) -> list[str]:
        """Every index with keys in the table, in name order: a skip scan of its
        PartitionKeys (``keys.namespaces``), a query of one key an index."""
        return await keys.namespaces(self._first_partition)

    async def _first_partition(self, low: str) -> str | None:
        """The least PartitionKey at or above ``low`` (None: none), following the service's
        continuations (it may answer a page with no entity and a continuation)."""
        continuation = None
        while True:
            with self.meter.asked(self.clock):
                try:
                    rows, continuation = await self._client.call(
                        "query", filter="PartitionKey ge @low", parameters={"low": low},
                        select=["PartitionKey"], top=1, continuation=continuation)
                except ShardexError:  # already shardex's: as it is, not its own cause
                    raise
                except Exception as exc:
                    raise map_error(exc, operation="query", table=self.table,
                                    endpoint=self._client.endpoint) from exc
            if rows:
                partition: str = rows[0][0]["PartitionKey"]
                return partition
            if continuation is None:
                return None

    async def _call(self, rec: Recorder, key: str, operation: str, units: float | None,
                    write: bool, **params: Any) -> Any:
        """One request: mark it on ``rec``, map errors, report ``units`` entities on ``key``.

        ``units`` None counts the rows a query returned (at least one).
        """
        rec.request(key, write=write)
        try:
            result = await self._client.call(operation, **params)
        except ShardexError:  # already shardex's: as it is, not its own cause
            raise
        except Exception as exc:
            raise map_error(exc, operation=operation, table=self.table,
                            endpoint=self._client.endpoint, key=key) from exc
        rec.charge(key, max(1.0, float(len(result[0]))) if units is None else units)
        return result

    async def _query_rows(self, rec: Recorder, key: str, filter: str,
                          parameters: Mapping[str, str], *, top: int,
                          select: list[str] | None = None, continuation: Any = None
                          ) -> tuple[list[Row], Any]:
        result: tuple[list[Row], Any] = await self._call(
            rec, key, "query", None, False, filter=filter, parameters=parameters,
            select=select, top=top, continuation=continuation)
        return result

    # -- entries ---------------------------------------------------------------------

    async def _locate(self, namespace: str, item_id: str, rec: Recorder) -> Placement | None:
        """One point read of the placement entity."""
        return await self._placer.locate(rec, namespace, item_id)

    async def _place(self, namespace: str, item_id: str, entry: StoredEntry | None,
                     version: int, expected: Placement | None, token: str,
                     rec: Recorder) -> None:
        """Up to five requests, one commit point (``shardex.stores.crosspart``)."""
        await self._placer.place(rec, namespace, item_id, entry, version, expected, token)

    def _check_shard_key(self, namespace: str, shard_key: str) -> None:
        keys.entry_partition(namespace, shard_key)  # InvalidKey past the key limit

    def check_namespace(self, namespace: str) -> None:
        keys.check_namespace(namespace)

    def _check_position(self, sort: str, item_id: str) -> None:
        keys.row_key(sort, item_id, "", descending=False)  # its mirror is as long

    async def _query(self, namespace: str, shard_key: str, after: Position | None,
                     until: Position | None, descending: bool, limit: int,
                     rec: Recorder) -> tuple[list[StoredEntry], Position | None]:
        """Rows beyond ``after`` (up to ``until``) in RowKey order, continuation tokens
        followed as needed.

        A page ends after ``limit`` rows or 1 MB, and never inside the rows of one
        position (a write and the one it replaces): the row after the page is read to
        know that, and ``resume`` is set only when there is one. Rows the item's
        placement does not own are dropped (``Placer.owned``), so a page may hold fewer
        than ``limit`` entries.
        """
        partition = keys.entry_partition(namespace, shard_key)
        low, high = keys.position_bounds(after, descending=descending)
        if until is not None:  # every row of a position lies below its bound's low end
            high = keys.position_bounds(until, descending=descending)[0]
        parameters = {"p": partition, "lo": low, "hi": high}
        rows: list[tuple[dict[str, Any], Position]] = []
        size, more, continuation = 0, False, None
        while not more:
            page, continuation = await self._query_rows(
                rec, shard_key, "PartitionKey eq @p and RowKey gt @lo and RowKey lt @hi",
                parameters, top=max(1, min(_MAX_PAGE, limit + 1 - len(rows))),
                continuation=continuation)
            for props, _ in page:
                try:
                    position = keys.decode_position(props["RowKey"])
                except InvalidKey as exc:
                    rec.malformed(MalformedItem(f"entity {props['RowKey'][:60]!r} of "
                                                f"{shard_key!r}: {exc}"), _id_of(props))
                    continue
                if (len(rows) >= limit or size >= QUERY_PAGE_BYTES) \
                        and position != rows[-1][1]:
                    more = True
                    break
                rows.append((props, position))
                size += codec.text_size(props)
            if continuation is None:
                break
        entries = await self._placer.entries(
            rec, namespace, [props for props, _ in rows],
            lambda props: codec.entry_from_row(
                props, f"entry row {props['RowKey']!r} of {shard_key!r}"), _id_of)
        return entries, rows[-1][1] if more else None

    async def _count(self, namespace: str, shard_key: str, rec: Recorder) -> int:
        """Every ascending row, keys and status only; rows not committed are checked."""
        low, high = keys.position_bounds(None, descending=False)
        parameters = {"p": keys.entry_partition(namespace, shard_key), "lo": low, "hi": high}
        total, continuation = 0, None
        while True:
            page, continuation = await self._query_rows(
                rec, shard_key, "PartitionKey eq @p and RowKey gt @lo and RowKey lt @hi",
                parameters, top=_MAX_PAGE, select=_ENTRY_FIELDS, continuation=continuation)
            total += sum(kept is not False for kept in await self._placer.owned(
                rec, namespace, [p for p, _ in page]))
            if continuation is None:
                return total

    async def repair(self, namespace: str, *, shard_keys: list[str] | None = None
                     ) -> RepairReport:
        """Remove what failed or crashed writes of index ``namespace`` left behind.

        Reads the rows not committed, of ``shard_keys`` (InvalidKey for one that is no
        shard key) or (None) of the whole index (a query over the table's partitions of
        the index), and commits, or fences and deletes, each
        (``shardex.stores.crosspart``). Safe while writers run: a write still in flight
        whose row is removed fails its commit with ConditionFailed and is planned again.
        Returns what it did.
        """
        # an index name no key can hold found nothing, and said so as a clean report
        self.check_namespace(namespace)
        for key in shard_keys or ():
            # a key shardex never writes ('PEN#DING#3') found nothing, and said so as 0
            validate_shard_key(key)
        report = RepairReport()
        filter = "(st eq 'p' or st eq 'm')"
        with self._recorder(namespace, "#repair", True) as rec:
            if shard_keys is None:
                low, high = keys.namespace_range(namespace)
                scopes = [("PartitionKey gt @lo and PartitionKey lt @hi and " + filter,
                           {"lo": low, "hi": high}, "#repair")]
            else:
                scopes = [("PartitionKey eq @p and " + filter,
                           {"p": keys.entry_partition(namespace, key)}, key)
                          for key in shard_keys]
            for query, parameters, key in scopes:
                continuation = None
                while True:
                    page, continuation = await self._query_rows(
                        rec, key, query, parameters, top=_MAX_PAGE, continuation=continuation)
                    await self._placer.repair(rec, namespace, page, report)
                    if continuation is None:
                        break
        return report

    # -- records -----------------------------------------------------------------------

    async def _read_record(self, namespace: str, key: str, rec: Recorder) -> Row | None:
        found: Row | None = await self._call(
            rec, record_key(key), "get", 1.0, False, partition=keys.record_partition(namespace),
            row=keys.check_key(keys.encode_text(key), f"record key {key[:60]!r}"))
        return found

    def _where(self, namespace: str, key: str) -> str:
        return f"record {key!r} of index {namespace!r} in table {self.table!r}"

    async def _get_record(self, namespace: str, key: str, rec: Recorder) -> Record | None:
        """One point read."""
        found = await self._read_record(namespace, key, rec)
        return None if found is None else codec.record_from_entity(found[0],
                                                                   self._where(namespace, key))

    async def _revision_etag(self, namespace: str, key: str, expected: int, rec: Recorder,
                             what: str) -> str:
        found = await self._read_record(namespace, key, rec)
        if found is None or codec.record_from_entity(
                found[0], self._where(namespace, key)).revision != expected:
            raise ConditionFailed(f"{what} of record {key!r} of {namespace!r} expected "
                                  f"revision {expected}: it is absent or another writer "
                                  "changed it first")
        return found[1]

    async def _put_record(self, namespace: str, key: str, body: Mapping[str, Any],
                          revision: int, expected: int | None, rec: Recorder) -> None:
        """An insert, or a read and an ``If-Match`` replace (the ETag pins the revision)."""
        entity = codec.record_entity(keys.record_partition(namespace), key, body, revision)
        if expected is None:
            try:
                await self._call(rec, record_key(key), "create", 1.0, True, entity=entity)
            except ConditionFailed as exc:
                raise ConditionFailed(f"record {key!r} of {namespace!r} expected absent: "
                                      "another writer created it first") from exc
            return
        etag = await self._revision_etag(namespace, key, expected, rec, "write")
        await self._call(rec, record_key(key), "update", 1.0, True, entity=entity, etag=etag,
                         merge=False)

    async def _list_records(self, namespace: str, prefix: str,
                            rec: Recorder) -> dict[str, Record]:
        """The records partition from the prefix's code on, every page."""
        start = keys.encode_text(prefix)
        parameters = {"p": keys.record_partition(namespace), "lo": start}
        records: dict[str, Record] = {}
        continuation = None
        while True:
            page, continuation = await self._query_rows(
                rec, record_key(prefix), "PartitionKey eq @p and RowKey ge @lo", parameters,
                top=_MAX_PAGE, continuation=continuation)
            for props, _ in page:
                if not props["RowKey"].startswith(start):
                    return records
                key = props.get("key")
                if isinstance(key, str):
                    records[key] = codec.record_from_entity(props, self._where(namespace, key))
            if continuation is None:
                return records

    async def _delete_record(self, namespace: str, key: str, expected: int,
                             rec: Recorder) -> None:
        """A read and an ``If-Match`` delete."""
        etag = await self._revision_etag(namespace, key, expected, rec, "delete")
        await self._call(rec, record_key(key), "delete", 1.0, True,
                         partition=keys.record_partition(namespace),
                         row=keys.encode_text(key), etag=etag)


def _id_of(props: Mapping[str, Any]) -> str:
    """The item id an entry row names, for a report of a row that is not an entry."""
    found = props.get("id")
    return found if isinstance(found, str) else "?"
