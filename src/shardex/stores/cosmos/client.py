"""The Cosmos DB client adapter, credentials, and the one boundary where driver errors map.

The store talks to one small interface, ``ContainerClient.call(operation, **params)``,
which answers a ``Reply`` (the result, the request charge the service reported, and the
bytes of the documents sent or returned, for the documented estimate where it reported
none). Operations: ``get``, ``create``, ``upsert``, ``replace``, ``patch``, ``delete``
and ``query`` (one page). ``SdkClient`` implements it over the official async client
(``azure.cosmos.aio``, the ``cosmos`` extra), imported only when one is built; tests wrap
it to inject faults between the steps of a write.

Credentials never come from the store URI: a ``credential`` handed in (the account key,
or a token credential from ``azure-identity``), else a connection string
(``AccountEndpoint=...;AccountKey=...``) handed in or in ``COSMOS_CONNECTION_STRING``,
else ``COSMOS_KEY`` (with ``COSMOS_ENDPOINT`` when the URI names no endpoint). The SDK's
own retries are switched off: shardex retries with backoff and jitter (honouring the
service's ``x-ms-retry-after-ms``), and a retried conditional write that had applied
would come back as a failed condition.
"""

from __future__ import annotations

import abc
import asyncio
import binascii
import contextlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from shardex.errors import (
    ConditionFailed,
    InvalidInput,
    MissingDependency,
    NotFound,
    ShardexError,
    StoreError,
    Throttled,
    Unavailable,
    brief,
)
from shardex.stores.azure.client import (
    Adapter,
    account_key,
    parse_connection_string,
    request_outcome,
)
from shardex.stores.azure.transport import with_transport
from shardex.stores.uri import AIOHTTP_CONNECTIONS, given_endpoint, split_url

__all__ = [
    "ContainerClient",
    "Reply",
    "SdkClient",
    "check_names",
    "client_options",
    "close_client",
    "connection_settings",
    "document_bytes",
    "import_sdk",
    "map_error",
    "mapped_errors",
]

KEY, ENDPOINT, CONNECTION_STRING = "COSMOS_KEY", "COSMOS_ENDPOINT", "COSMOS_CONNECTION_STRING"
# the sub-status of a 404 whose container (or database) does not exist
_OWNER_MISSING = 1003
_CHECK_WAIT = 2.0


class Reply(NamedTuple):
    """What one request answered: its result, the reported charge (None: none), doc bytes."""

    value: Any
    charge: float | None
    size: int


def _status(exc: BaseException) -> int:
    status = getattr(exc, "status_code", None)
    return int(status) if isinstance(status, int) else 0


def _headers(exc: BaseException) -> Mapping[str, str]:
    headers = getattr(exc, "headers", None)
    if not headers:
        headers = getattr(getattr(exc, "response", None), "headers", None)
    return headers or {}


def _retry_after(headers: Mapping[str, str]) -> float | None:
    try:
        return float(headers.get("x-ms-retry-after-ms", "")) / 1000.0
    except ValueError:
        return None


def map_error(exc: BaseException, *, operation: str, where: str, endpoint: str,
              key: str | None = None) -> ShardexError:
    """Return the shardex error for an exception the Cosmos SDK raised in ``operation``.

    The caller raises it ``from exc``. 429 is Throttled, with the service's
    ``x-ms-retry-after-ms`` as ``retry_after``: the request did not run. 412 (and 409
    for a create) is ConditionFailed; 404 NotFound (a missing container or database
    names the command that creates it); 401/403 a StoreError naming the credential
    variables; 400 and 413 InvalidInput; 408, 449, 5xx, a dropped connection, a client
    timeout and an error without the service's ``x-ms-activity-id`` (not its answer)
    Unavailable: a write may or may not have applied.
    """
    if isinstance(exc, ShardexError):
        return exc
    if isinstance(exc, binascii.Error):
        return InvalidInput(f"the Cosmos DB account key is not base64 ({exc}); set {KEY} "
                            "to the account's primary or secondary key")
    from azure.core import exceptions as errors

    status, headers = _status(exc), _headers(exc)
    sub = getattr(exc, "sub_status", None)
    message = str(getattr(exc, "message", None) or exc).split("\n", 1)[0][:300]
    subject = f"{where}" + (f" key {key!r}" if key is not None else "")
    if status in (401, 403) or isinstance(exc, errors.ClientAuthenticationError):
        return StoreError(f"{endpoint} refused the credentials ({status}: {message}); set "
                          f"{KEY} (and {ENDPOINT}), or {CONNECTION_STRING}, or hand in a "
                          "credential")
    if status >= 400 and status != 429 \
            and not any(name.lower() == "x-ms-activity-id" for name in headers):
        # an error the service did not send (it names its activity in every answer): a
        # proxy's page, or one cut short; unknown whether a write applied (a 400 after a
        # move's commit had reported it failed though it applied: a probe)
        return Unavailable(f"{operation} on {subject}: {endpoint} answered {status} "
                           f"without Cosmos DB's activity id ({message[:120]}); "
                           + request_outcome(exc, errors, operation))
    if status == 429:
        after = _retry_after(headers)
        reason = f"429/{sub}" if sub else "429"
        return Throttled(f"{operation} on {subject} throttled: request rate too large"
                         + (f"; retry after {after:.3g} s" if after is not None else ""),
                         key=key, reason=reason, retry_after=after)
    if status == 412:
        return ConditionFailed(f"{operation} on {subject}: the condition failed (412)")
    if status == 409:
        return ConditionFailed(f"{operation} on {subject}: the item already exists (409)")
    if status == 404:
        if sub == _OWNER_MISSING or operation in ("open", "check"):
            return NotFound(f"{where} does not exist at {endpoint}; create it with: shardex "
                            f"cosmos create-container {where.split()[-1].replace('/', ' ', 1)} "
                            f"--endpoint {endpoint}")
        return NotFound(f"{operation} on {subject}: the item does not exist (404)")
    if status in (400, 413):
        return InvalidInput(f"{operation} on {subject}: Cosmos DB refused the request "
                            f"({status}): {message}")
    if isinstance(exc, errors.ServiceRequestError | errors.ServiceResponseError) \
            or status in (408, 449) or status >= 500 or isinstance(exc, TimeoutError | OSError):
        return Unavailable(f"{operation} on {subject}: {endpoint} failed "
                           f"({status or type(exc).__name__}: {message}); "
                           + request_outcome(exc, errors, operation))
    return StoreError(f"{operation} on {subject}: {status or type(exc).__name__}: {message}")


@contextlib.contextmanager
def mapped_errors(operation: str, where: str, endpoint: str,
                  key: str | None = None) -> Iterator[None]:
    """Map every exception of the block with ``map_error``, the driver's chained."""
    try:
        yield
    except ShardexError:  # already shardex's: as it is, not its own cause
        raise
    except Exception as exc:
        raise map_error(exc, operation=operation, where=where, endpoint=endpoint,
                        key=key) from exc


def _check_key(key: str, source: str) -> str:
    return account_key(key, source, "a Cosmos DB account key", "the portal's PRIMARY KEY")


def connection_settings(endpoint: str | None, credential: Any = None,
                        connection_string: str | None = None) -> tuple[str, Any]:
    """Return ``(endpoint, credential)``; InvalidInput naming what is missing or malformed.

    ``endpoint`` (``https://ACCOUNT.documents.azure.com:443/``) wins over the one the
    connection string or ``COSMOS_ENDPOINT`` names.
    """
    given_endpoint(endpoint, "Cosmos DB endpoint")
    url, credential = _settings(endpoint, credential, connection_string)
    split_url(url, "Cosmos DB endpoint", web=True)
    return url, credential


def _settings(endpoint: str | None, credential: Any,
              connection_string: str | None) -> tuple[str, Any]:
    if credential is not None:
        url = endpoint or os.environ.get(ENDPOINT)  # the endpoint's default, as documented
        if not url:
            raise InvalidInput("a credential was handed in without an endpoint: add "
                               "?endpoint=https://ACCOUNT.documents.azure.com:443/ to the URI "
                               f"(or set {ENDPOINT})")
        if isinstance(credential, str):
            if not credential:
                raise InvalidInput("the credential handed in is empty: give the account key")
            _check_key(credential, "the credential handed in")
        elif not isinstance(credential, dict) and not callable(getattr(credential, "get_token",
                                                                          None)):
            # the SDK raised TypeError ('int' object is not subscriptable for bytes) and
            # left its HTTP session open
            raise InvalidInput(f"the credential handed in must be the account key (text), a "
                               f"dict of resource tokens or a token credential "
                               f"(azure-identity), got {brief(credential)}")
        return url, credential
    text = connection_string or os.environ.get(CONNECTION_STRING)
    if text:
        settings = parse_connection_string(text)
        url = endpoint or settings.get("accountendpoint")
        if not url or not settings.get("accountkey"):
            raise InvalidInput("the Cosmos DB connection string needs AccountEndpoint=...;"
                               "AccountKey=...")
        return url, _check_key(settings["accountkey"], "the connection string's AccountKey")
    key, url = os.environ.get(KEY), endpoint or os.environ.get(ENDPOINT)
    if key and url:
        return url, _check_key(key, KEY)
    raise InvalidInput(f"no Cosmos DB {'endpoint' if key else 'credentials'}: set {KEY} and "
                       f"{ENDPOINT} (or give the endpoint: ?endpoint= in a store URI, "
                       f"--endpoint to the cosmos commands), or {CONNECTION_STRING}, or "
                       "hand in credential=")


def document_bytes(value: Any) -> int:
    """Bytes of a document (or documents) as JSON: what the service charges by."""
    if value is None:
        return 0
    if isinstance(value, list):
        return sum(document_bytes(v) for v in value)
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


class ContainerClient(Adapter):
    """The one call a Cosmos DB store makes: ``await client.call("get", ...)``.

    Operations (a document is a dict with ``id``, ``pk`` and ``_etag``):

    - ``check()`` -> the container's properties (NotFound if it does not exist);
    - ``get(partition, id)`` -> the document, or None;
    - ``read_many(items)`` -> the documents of ``(id, partition)`` pairs that exist
      (ReadMany: one call of the SDK, a query per physical partition they lie on);
    - ``create(doc)`` / ``upsert(doc)`` -> the document written;
    - ``replace(doc, etag)`` -> the document written (If-Match ``etag``; None: any);
    - ``patch(partition, id, operations, etag)`` -> the document (``set`` operations);
    - ``delete(partition, id, etag)`` -> None;
    - ``query(query, parameters, partition, max_items, continuation)`` ->
      ``(documents, continuation)``: one page, within ``partition`` (None: across all).

    Each returns a ``Reply``. ``call`` raises the driver's own exceptions; the store maps
    them with ``mapped_errors``.
    """

    endpoint: str = "Cosmos DB"
    connections: int | None = None  # requests it carries at once (its pool), if known
    table: str = ""  # the container's name, for messages

    @abc.abstractmethod
    async def call(self, operation: str, **params: Any) -> Reply:
        """Run ``operation`` with ``params`` (see the class docstring)."""


def import_sdk() -> Any:
    """The ``azure.cosmos.aio`` module; MissingDependency naming the extra if absent."""
    try:
        from azure.cosmos import aio
    except ImportError as exc:
        raise MissingDependency("azure-cosmos", "cosmos") from exc
    return aio


def client_options(connect_timeout: float, read_timeout: float) -> dict[str, Any]:
    """Keyword arguments of ``CosmosClient``: timeouts, and the SDK's retries switched off."""
    from azure.cosmos import documents
    from azure.cosmos._retry_options import RetryOptions

    policy = documents.ConnectionPolicy()
    # retry_total=0 would be read as "not given" (0 or default): set the options instead
    policy.RetryOptions = RetryOptions(max_retry_attempt_count=0, max_wait_time_in_seconds=0)
    return {"connection_policy": policy, "connection_timeout": connect_timeout,
            "read_timeout": read_timeout, "retry_connect": 0, "retry_read": 0,
            "retry_status": 0}


async def close_client(client: Any) -> None:
    """Close a ``CosmosClient`` once its background endpoint check has ended.

    The SDK checks the account's endpoints in a task of its own when it first connects,
    and its ``close`` cancels that task, which can leave the check's connection half-open
    (a socket nobody closes) when it was still in its TLS handshake: the check is let
    finish first (it is one small read), for at most ``_CHECK_WAIT`` seconds.
    """
    manager = getattr(getattr(client, "client_connection", None), "_global_endpoint_manager",
                      None)
    task = getattr(manager, "refresh_task", None)
    if isinstance(task, asyncio.Task) and not task.done():
        await asyncio.wait({task}, timeout=_CHECK_WAIT)
    await client.close()


class _Charge:
    """A response hook keeping the request charge the service reported (None: none)."""

    __slots__ = ("charge",)

    def __init__(self) -> None:
        self.charge: float | None = None

    def __call__(self, headers: Mapping[str, str], _result: Any) -> None:
        text = headers.get("x-ms-request-charge")
        if text is not None:
            with contextlib.suppress(ValueError):
                self.charge = (self.charge or 0.0) + float(text)


class SdkClient(ContainerClient):
    """The official async client (``azure.cosmos.aio``) on one container of one database.

    ``transport`` is an azure-core ``AsyncHttpTransport`` to send every request through
    (a test's, to inject faults); by default the client makes its own on ``open``, with a
    pool of ``max_connections``.
    """

    def __init__(self, database: str, container: str, *, endpoint: str | None = None,
                 credential: Any = None, connection_string: str | None = None,
                 connect_timeout: float = 5.0, read_timeout: float = 30.0,
                 transport: Any = None, max_connections: int = AIOHTTP_CONNECTIONS) -> None:
        self._aio = import_sdk()
        self.database, self.table = database, container
        self.endpoint, self._credential = connection_settings(endpoint, credential,
                                                              connection_string)
        self._options = client_options(connect_timeout, read_timeout)
        if transport is not None:  # azure-core's AsyncHttpTransport to send through
            self._options["transport"] = transport
        self._client: Any = None
        self._container: Any = None
        # the pool of the transport made on open (aiohttp's default: 100 connections)
        self._pool = self.connections = max_connections

    async def open(self) -> None:
        if self._client is None:
            self._client = self._aio.CosmosClient(self.endpoint, credential=self._credential,
                                                  **with_transport(self._options, self._pool))
            self._container = self._client.get_database_client(
                self.database).get_container_client(self.table)

    async def close(self) -> None:
        client, self._client, self._container = self._client, None, None
        if client is not None:
            await close_client(client)

    async def call(self, operation: str, **params: Any) -> Reply:
        if self._container is None:
            raise Unavailable(f"{self.endpoint}: the Cosmos DB client is not open")
        method = getattr(self, f"_{operation}", None)
        if method is None:
            raise InvalidInput(f"unknown Cosmos DB operation {operation!r}")
        hook = _Charge()
        value, size = await method(self._container, hook, **params)
        return Reply(value, hook.charge, size)

    @staticmethod
    async def _check(container: Any, hook: _Charge) -> tuple[Any, int]:
        properties = await container.read(response_hook=hook)
        return properties, 0

    @staticmethod
    async def _get(container: Any, hook: _Charge, partition: str,
                   id: str) -> tuple[Any, int]:
        from azure.cosmos.exceptions import CosmosResourceNotFoundError

        try:
            doc = await container.read_item(id, partition_key=partition, response_hook=hook)
        except CosmosResourceNotFoundError as exc:
            if getattr(exc, "sub_status", None) == _OWNER_MISSING:
                raise
            return None, 0
        return dict(doc), document_bytes(doc)

    @staticmethod
    async def _read_many(container: Any, hook: _Charge,
                         items: Sequence[tuple[str, str]]) -> tuple[Any, int]:
        found = await container.read_items(list(items))
        hook(found.get_response_headers(), None)
        docs = [dict(doc) for doc in found]
        return docs, document_bytes(docs)

    @staticmethod
    async def _create(container: Any, hook: _Charge, doc: Mapping[str, Any]) -> tuple[Any, int]:
        written = await container.create_item(dict(doc), response_hook=hook)
        return dict(written), document_bytes(doc)

    @staticmethod
    async def _upsert(container: Any, hook: _Charge, doc: Mapping[str, Any]) -> tuple[Any, int]:
        written = await container.upsert_item(dict(doc), response_hook=hook)
        return dict(written), document_bytes(doc)

    @staticmethod
    async def _replace(container: Any, hook: _Charge, doc: Mapping[str, Any],
                       etag: str | None = None) -> tuple[Any, int]:
        from azure.core import MatchConditions

        condition = {} if etag is None else {"etag": etag,
                                             "match_condition": MatchConditions.IfNotModified}
        written = await container.replace_item(doc["id"], dict(doc), response_hook=hook,
                                               **condition)
        return dict(written), document_bytes(doc)

    @staticmethod
    async def _patch(container: Any, hook: _Charge, partition: str, id: str,
                     operations: Sequence[Mapping[str, Any]],
                     etag: str | None = None) -> tuple[Any, int]:
        from azure.core import MatchConditions

        condition = {} if etag is None else {"etag": etag,
                                             "match_condition": MatchConditions.IfNotModified}
        written = await container.patch_item(id, partition_key=partition,
                                             patch_operations=list(operations),
                                             response_hook=hook, **condition)
        return dict(written), document_bytes(written)

    @staticmethod
    async def _delete(container: Any, hook: _Charge, partition: str, id: str,
                      etag: str | None = None) -> tuple[Any, int]:
        from azure.core import MatchConditions

        condition = {} if etag is None else {"etag": etag,
                                             "match_condition": MatchConditions.IfNotModified}
        await container.delete_item(id, partition_key=partition, response_hook=hook,
                                    **condition)
        return None, 0

    @staticmethod
    async def _query(container: Any, hook: _Charge, query: str,
                     parameters: Mapping[str, Any], partition: str | None = None,
                     max_items: int = 1000, continuation: Any = None) -> tuple[Any, int]:
        where = {} if partition is None else {"partition_key": partition}
        pager = container.query_items(
            query, parameters=[{"name": f"@{n}", "value": v} for n, v in parameters.items()],
            max_item_count=max_items, response_hook=hook, **where).by_page(continuation)
        try:
            page = await pager.__anext__()
        except StopAsyncIteration:
            return ([], None), 0
        docs = [dict(doc) async for doc in page]
        return (docs, pager.continuation_token), document_bytes(docs)


def check_names(database: Any, container: Any) -> None:
    """InvalidInput unless Cosmos DB takes both as resource ids: 1 to 255 characters,
    none of '/', '\\', '?', '#' or a control character, not ending in a space."""
    for what, name in (("database", database), ("container", container)):
        if type(name) is not str or not 0 < len(name) <= 255 or name.endswith(" ") \
                or any(c in "/\\?#" or ord(c) < 32 or 127 <= ord(c) < 160 for c in name):
            raise InvalidInput(f"Cosmos DB {what} name must be 1 to 255 characters without "
                               f"'/', '\\', '?', '#' or a control character, not ending in "
                               f"a space, got {name!r}")
