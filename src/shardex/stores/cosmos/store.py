"""``CosmosStore``: the store's hooks, its request path, reads, records and charges.

Every request goes through ``_call``: it marks the request on the call's Recorder, sends
it through the client adapter inside the one error boundary (``mapped_errors``), and
meters its request units on the key: the charge the service reported
(``x-ms-request-charge``) or, where it reported none (or ``charges="estimated"``), the
documented charge by document size (``shardex.capacity.cosmos_read_units`` and
``cosmos_write_units``). ``request_charges()`` says how many of each were metered.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar
from urllib.parse import urlencode

from shardex.capacity import (
    COSMOS_RU_BY_KB,
    QUERY_PAGE_BYTES,
    cosmos_read_units,
    cosmos_write_units,
)
from shardex.clock import Clock
from shardex.errors import ConditionFailed, InvalidInput, InvalidKey, InvalidURI, MalformedItem
from shardex.keys import record_key, validate_shard_key
from shardex.model.entries import Placement, Position, Record, StoredEntry
from shardex.model.values import ValueRules
from shardex.stores.azure import keys
from shardex.stores.base import Capabilities, Store
from shardex.stores.cosmos import codec
from shardex.stores.cosmos.client import (
    ContainerClient,
    SdkClient,
    check_names,
    mapped_errors,
)
from shardex.stores.cosmos.placement import DocumentRows, Placer, RepairReport
from shardex.stores.metered import Recorder
from shardex.stores.uri import (
    AIOHTTP_CONNECTIONS,
    StoreURI,
    check_client,
    check_keywords,
    check_settings,
    endpoint_of,
)

__all__ = ["ChargeTally", "CosmosStore"]

log = logging.getLogger("shardex.cosmos")

_MAX_PAGE = 1000
_PARTITION_PATH = "/pk"
_CHARGES = ("reported", "estimated")
_OPTIONS: Mapping[str, type] = {"endpoint": str, "connect_timeout": float,
                                "read_timeout": float, "max_connections": int, "charges": str}
_READS = frozenset({"get", "query", "read_many"})
_COUNTED = "c.id, c.k, c.s, c.i, c.t, c.st"


def _check_charges(charges: Any) -> None:
    if charges not in _CHARGES:
        raise InvalidInput(f"charges must be one of {', '.join(_CHARGES)}, got {charges!r}")


@dataclass(frozen=True, slots=True)
class ChargeTally:
    """Request units metered so far: reported by the service, or estimated by shardex."""

    reported_requests: int = 0
    reported_units: float = 0.0
    estimated_requests: int = 0
    estimated_units: float = 0.0

    @property
    def source(self) -> str:
        """``reported``, ``estimated``, ``mixed``, or ``none`` (no request yet)."""
        if self.reported_requests and self.estimated_requests:
            return "mixed"
        if self.reported_requests:
            return "reported"
        return "estimated" if self.estimated_requests else "none"


_MAX_DOCUMENT = COSMOS_RU_BY_KB[-1][0] * 1024


def _estimate(operation: str, size: int) -> float:
    """The documented charge of one request that moved ``size`` bytes of documents.

    A write is charged by its document; a read (a point read, or a query page of several
    documents) as point reads of its bytes in pieces of at most one document's 2 MB.
    """
    if operation not in _READS:
        return cosmos_write_units(min(size, _MAX_DOCUMENT))
    whole, rest = divmod(size, _MAX_DOCUMENT)
    return whole * cosmos_read_units(_MAX_DOCUMENT) + (
        cosmos_read_units(rest) if rest or not whole else 0.0)


# the values a Cosmos DB container holds as shardex writes them: DynamoDB's (the codec
# tags them), named so in messages
COSMOS_VALUES = ValueRules("Cosmos DB")


class CosmosStore(Store):
    """Cosmos DB for NoSQL through ``azure-cosmos``'s async client.

    ``container`` of ``database`` must exist, partitioned by ``/pk`` (``shardex cosmos
    create-container DATABASE CONTAINER``); indexes share it, each under its own
    partition keys. ``endpoint`` is the account URL; credentials come from ``credential``
    (the account key or a token credential), ``connection_string``, or the environment
    (``shardex.stores.cosmos.client``). ``client`` hands in a ``ContainerClient``
    adapter instead (tests inject faults with one). ``charges``: ``reported`` meters
    the service's request charge (the documented estimate where it reports none),
    ``estimated`` always the estimate (for a server whose charges mean nothing).
    Timeouts are seconds; ``max_connections`` is the client's pool (the requests it carries
    at once: a fan-out's bound). Raises MissingDependency (``pip install 'shardex[cosmos]'``)
    when the driver is not installed.
    """

    scheme: ClassVar[str] = "cosmos"
    batch_locate: ClassVar[int | None] = 1000  # a ReadMany's ids (the SDK splits them)

    def __init__(self, database: str, container: str, *, endpoint: str | None = None,
                 credential: Any = None, connection_string: str | None = None,
                 client: ContainerClient | None = None, connect_timeout: float = 5.0,
                 read_timeout: float = 30.0, max_connections: int = AIOHTTP_CONNECTIONS,
                 charges: str = "reported", clock: Clock | None = None) -> None:
        super().__init__(capabilities=Capabilities(consistent_reads=True, max_page=_MAX_PAGE,
                                                   values=COSMOS_VALUES), clock=clock)
        check_names(database, container)
        check_client("", connect_timeout=connect_timeout, read_timeout=read_timeout,
                     max_connections=max_connections)
        _check_charges(charges)
        if client is not None and not isinstance(client, ContainerClient):
            raise InvalidInput(f"client must be a shardex ContainerClient adapter, got "
                               f"{client!r}")
        self.database, self.container = database, container
        self.charges = charges
        self._client = client if client is not None else SdkClient(
            database, container, endpoint=endpoint, credential=credential,
            connection_string=connection_string, connect_timeout=connect_timeout,
            read_timeout=read_timeout, max_connections=max_connections)
        self._endpoint = endpoint
        self._tally = ChargeTally()
        self._rows = DocumentRows(self._call)
        self._placer = Placer(self._rows)

    @classmethod
    def from_uri(cls, uri: StoreURI, **options: Any) -> CosmosStore:
        """``cosmos://DATABASE/CONTAINER?endpoint=URL&charges=...&read_timeout=S``."""
        cls.check_uri(uri)
        check_keywords("cosmos", options,
                       set(_OPTIONS) | {"credential", "connection_string", "client", "clock"})
        return cls(uri.location, uri.path, **{**uri.take(_OPTIONS), **options})

    @classmethod
    def check_uri(cls, uri: StoreURI) -> None:
        if uri.username or uri.password:
            raise InvalidURI("cosmos:// takes no credentials in the URI; set COSMOS_KEY (and "
                             "COSMOS_ENDPOINT), or COSMOS_CONNECTION_STRING, or hand in "
                             "credential=")
        if not uri.location or not uri.path or "/" in uri.path:
            raise InvalidURI(f"cosmos:// needs a database and a container: "
                             f"cosmos://DATABASE/CONTAINER?endpoint=URL, got {uri.raw!r}")
        options = uri.take(_OPTIONS)
        check_settings(options, connections=AIOHTTP_CONNECTIONS, endpoint="endpoint",
                       what="Cosmos DB endpoint")
        _check_charges(options.get("charges", "reported"))

    @property
    def uri(self) -> str:
        """``cosmos://DATABASE/CONTAINER?endpoint=URL``, without credentials."""
        endpoint = self._endpoint or self._client.endpoint
        return f"cosmos://{self.database}/{self.container}?" + urlencode(
            {"endpoint": endpoint}, safe=":/")

    @property
    def holds(self) -> Hashable:
        """The account's endpoint, the database and the container."""
        return ("cosmos", endpoint_of(self._endpoint or self._client.endpoint),
                self.database, self.container)

    @property
    def client(self) -> ContainerClient:
        """The adapter the store calls Cosmos DB through."""
        return self._client

    @property
    def connections(self) -> int | None:
        """The client's connection pool, if it says (the SDK's aiohttp session: 100)."""
        return self._client.connections

    def request_charges(self) -> ChargeTally:
        """The request units metered since the store was built, by where they came from."""
        return self._tally

    def _where(self) -> str:
        return f"container {self.database}/{self.container}"

    async def _connect(self) -> None:
        await self._client.open()
        try:
            with mapped_errors("open", self._where(), self._client.endpoint):
                properties = (await self._client.call("check")).value
        except BaseException:
            await self._client.close()
            raise
        paths = (properties or {}).get("partitionKey", {}).get("paths")
        if paths != [_PARTITION_PATH]:
            await self._client.close()
            # (a partition key is fixed when a container is made: naming this one again
            # would say it exists)
            raise InvalidInput(f"{self._where()} is partitioned by {paths}; shardex needs "
                               f"['{_PARTITION_PATH}']: create a container of another name "
                               f"with shardex cosmos create-container {self.database} NAME")

    async def _disconnect(self) -> None:
        await self._client.close()

    async def indexes(self) -> list[str]:
        """Every index with documents in the container, in name order: a skip scan of its
        partition keys (``keys.namespaces``), a query of one key an index."""
        return await keys.namespaces(self._first_partition)

    async def _first_partition(self, low: str) -> str | None:
        """The least partition key at or above ``low`` (None: none): a query across the
        container's partitions, its continuations followed."""
        continuation = None
        while True:
            with self.meter.asked(self.clock), \
                    mapped_errors("query", self._where(), self._client.endpoint):
                docs, continuation = (await self._client.call(
                    "query", query="SELECT TOP 1 c.pk FROM c WHERE c.pk >= @low ORDER BY c.pk",
                    parameters={"low": low}, partition=None, max_items=1,
                    continuation=continuation)).value
            if docs:
                partition: str = docs[0]["pk"]
                return partition
            if continuation is None:
                return None

    async def _call(self, rec: Recorder, key: str, operation: str, write: bool,
                    **params: Any) -> Any:
        """One request (see the module docstring); returns its value."""
        rec.request(key, write=write)
        with mapped_errors(operation, self._where(), self._client.endpoint, key):
            reply = await self._client.call(operation, **params)
        tally = self._tally
        if reply.charge is not None and self.charges == "reported":
            units = reply.charge
            self._tally = replace(tally, reported_requests=tally.reported_requests + 1,
                                  reported_units=tally.reported_units + units)
        else:
            units = _estimate(operation, reply.size)
            self._tally = replace(tally, estimated_requests=tally.estimated_requests + 1,
                                  estimated_units=tally.estimated_units + units)
        rec.charge(key, units)
        return reply.value

    # -- entries ---------------------------------------------------------------------

    async def _locate(self, namespace: str, item_id: str, rec: Recorder) -> Placement | None:
        """One point read of the placement document."""
        return await self._placer.locate(rec, namespace, item_id)

    async def _locate_many(self, namespace: str, item_ids: list[str], rec: Recorder
                           ) -> tuple[dict[str, Placement | None], list[str]]:
        """One ReadMany of the placement documents: all read, or Throttled (429)."""
        return await self._rows.locate_many(rec, namespace, item_ids), []

    async def _place(self, namespace: str, item_id: str, entry: StoredEntry | None,
                     version: int, expected: Placement | None, token: str,
                     rec: Recorder) -> None:
        """Up to five requests, one commit point (``shardex.stores.crosspart``)."""
        await self._placer.place(rec, namespace, item_id, entry, version, expected, token)

    async def _pages(self, rec: Recorder, key: str, query: str, parameters: dict[str, str],
                     partition: str | None, max_items: int, continuation: Any
                     ) -> tuple[list[dict[str, Any]], Any]:
        result: tuple[list[dict[str, Any]], Any] = await self._call(
            rec, key, "query", False, query=query, parameters=parameters, partition=partition,
            max_items=max_items, continuation=continuation)
        return result

    def _check_shard_key(self, namespace: str, shard_key: str) -> None:
        codec.entry_partition(namespace, shard_key)  # InvalidKey past the key limit

    def check_namespace(self, namespace: str) -> None:
        codec.check_namespace(namespace)

    def _check_position(self, sort: str, item_id: str) -> None:
        codec.entry_id(sort, item_id, "")  # InvalidKey past the id limit

    async def _query(self, namespace: str, shard_key: str, after: Position | None,
                     until: Position | None, descending: bool, limit: int,
                     rec: Recorder) -> tuple[list[StoredEntry], Position | None]:
        """Documents beyond ``after`` (up to ``until``) in id order, continuation tokens
        followed as needed.

        A page ends after ``limit`` documents or 1 MB, and never inside the documents of
        one position (a write and the one it replaces): the document after the page is
        read to know that, and ``resume`` is set only when there is one. Documents the
        item's placement does not own are dropped, so a page may hold fewer than ``limit``.
        """
        partition = codec.entry_partition(namespace, shard_key)
        bound = codec.id_bounds(after, descending=descending)
        parameters = {"pk": partition}
        query = "SELECT * FROM c WHERE c.pk = @pk"
        if bound is not None:
            query += f" AND c.id {'<' if descending else '>'} @bound"
            parameters["bound"] = bound
        last = None if until is None else codec.id_bounds(until, descending=descending)
        if last is not None:  # the ids of ``until`` lie on this side of its own bound
            query += f" AND c.id {'>' if descending else '<'} @until"
            parameters["until"] = last
        query += f" ORDER BY c.id {'DESC' if descending else 'ASC'}"
        docs: list[tuple[dict[str, Any], Position]] = []
        size, more, continuation = 0, False, None
        while not more:
            page, continuation = await self._pages(
                rec, shard_key, query, parameters, partition,
                max(1, min(_MAX_PAGE, limit + 1 - len(docs))), continuation)
            for doc in page:
                try:
                    position = keys.decode_position(doc["id"])
                except InvalidKey:  # a document of the application's, say: not an entry
                    rec.malformed(MalformedItem(
                        f"document {doc['id'][:60]!r} of {shard_key!r}: not a shardex entry "
                        "document (its id encodes no entry's position)"), _id_of(doc))
                    continue
                if (len(docs) >= limit or size >= QUERY_PAGE_BYTES) \
                        and position != docs[-1][1]:
                    more = True
                    break
                docs.append((doc, position))
                size += sum(len(v) for v in doc.values() if isinstance(v, str))
            if continuation is None:
                break
        entries = await self._placer.entries(
            rec, namespace, [doc for doc, _ in docs],
            lambda doc: codec.entry_from_doc(doc, f"entry {doc['id']!r} of {shard_key!r}"),
            _id_of)
        return entries, docs[-1][1] if more else None

    async def _count(self, namespace: str, shard_key: str, rec: Recorder) -> int:
        """Every document of the shard key, keys and status only; others are checked."""
        partition = codec.entry_partition(namespace, shard_key)
        total, continuation = 0, None
        while True:
            page, continuation = await self._pages(
                rec, shard_key, f"SELECT {_COUNTED} FROM c WHERE c.pk = @pk", {"pk": partition},
                partition, _MAX_PAGE, continuation)
            total += sum(kept is not False
                         for kept in await self._placer.owned(rec, namespace, page))
            if continuation is None:
                return total

    async def repair(self, namespace: str, *, shard_keys: list[str] | None = None
                     ) -> RepairReport:
        """Remove what failed or crashed writes of index ``namespace`` left behind.

        Reads the entry documents not committed, of ``shard_keys`` (InvalidKey for one that
        is no shard key) or (None) of the whole index (a query across the container's
        partitions), and commits, or fences and deletes, each
        (``shardex.stores.crosspart``). Safe while writers run: a write still in flight
        whose document is removed fails its commit with ConditionFailed and is planned
        again. Returns what it did.
        """
        for key in shard_keys or ():
            validate_shard_key(key)
        report = RepairReport()
        status = "(c.st = 'p' OR c.st = 'm')"
        scopes: list[tuple[str, dict[str, str], str | None, str]]
        with self._recorder(namespace, "#repair", True) as rec:
            if shard_keys is None:
                scopes = [(f"SELECT * FROM c WHERE STARTSWITH(c.pk, @prefix) AND {status}",
                           {"prefix": codec.namespace_prefix(namespace)}, None, "#repair")]
            else:
                scopes = [(f"SELECT * FROM c WHERE c.pk = @pk AND {status}",
                           {"pk": codec.entry_partition(namespace, key)},
                           codec.entry_partition(namespace, key), key) for key in shard_keys]
            for query, parameters, partition, key in scopes:
                continuation = None
                while True:
                    page, continuation = await self._pages(rec, key, query, parameters,
                                                           partition, _MAX_PAGE, continuation)
                    await self._placer.repair(
                        rec, namespace, [(doc, doc.get("_etag")) for doc in page], report)
                    if continuation is None:
                        break
        return report

    # -- records -----------------------------------------------------------------------

    def _record_where(self, namespace: str, key: str) -> str:
        return f"record {key!r} of index {namespace!r} in {self._where()}"

    async def _read_record(self, namespace: str, key: str,
                           rec: Recorder) -> dict[str, Any] | None:
        found: dict[str, Any] | None = await self._call(
            rec, record_key(key), "get", False, partition=codec.record_partition(namespace),
            id=codec.record_id(key))
        return found

    async def _get_record(self, namespace: str, key: str, rec: Recorder) -> Record | None:
        """One point read."""
        found = await self._read_record(namespace, key, rec)
        return None if found is None else codec.record_from_doc(
            found, self._record_where(namespace, key))

    async def _revision_etag(self, namespace: str, key: str, expected: int, rec: Recorder,
                             what: str) -> str:
        found = await self._read_record(namespace, key, rec)
        if found is None or codec.record_from_doc(
                found, self._record_where(namespace, key)).revision != expected:
            raise ConditionFailed(f"{what} of record {key!r} of {namespace!r} expected "
                                  f"revision {expected}: it is absent or another writer "
                                  "changed it first")
        return str(found["_etag"])

    async def _put_record(self, namespace: str, key: str, body: Mapping[str, Any],
                          revision: int, expected: int | None, rec: Recorder) -> None:
        """A create, or a read and an ``If-Match`` replace (the ETag pins the revision)."""
        doc = codec.record_doc(codec.record_partition(namespace), key, body, revision)
        if expected is None:
            try:
                await self._call(rec, record_key(key), "create", True, doc=doc)
            except ConditionFailed as exc:
                raise ConditionFailed(f"record {key!r} of {namespace!r} expected absent: "
                                      "another writer created it first") from exc
            return
        etag = await self._revision_etag(namespace, key, expected, rec, "write")
        await self._call(rec, record_key(key), "replace", True, doc=doc, etag=etag)

    async def _list_records(self, namespace: str, prefix: str,
                            rec: Recorder) -> dict[str, Record]:
        """The records partition's documents whose id starts with the prefix's code."""
        partition = codec.record_partition(namespace)
        records: dict[str, Record] = {}
        continuation = None
        while True:
            page, continuation = await self._pages(
                rec, record_key(prefix),
                "SELECT * FROM c WHERE c.pk = @pk AND STARTSWITH(c.id, @prefix)",
                {"pk": partition, "prefix": keys.encode_text(prefix)}, partition, _MAX_PAGE,
                continuation)
            for doc in page:
                key = doc.get("key")
                if isinstance(key, str):
                    records[key] = codec.record_from_doc(doc,
                                                         self._record_where(namespace, key))
            if continuation is None:
                return records

    async def _delete_record(self, namespace: str, key: str, expected: int,
                             rec: Recorder) -> None:
        """A read and an ``If-Match`` delete."""
        etag = await self._revision_etag(namespace, key, expected, rec, "delete")
        await self._call(rec, record_key(key), "delete", True,
                         partition=codec.record_partition(namespace), id=codec.record_id(key),
                         etag=etag)


def _id_of(doc: Mapping[str, Any]) -> str:
    """The item id an entry document names, else its document id, for a report of a
    document that is not an entry."""
    found = doc.get("i")
    return found if isinstance(found, str) else str(doc.get("id", "?"))
