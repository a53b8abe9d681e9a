"""The Azure Tables client adapter, credentials, and the mapping of driver errors.

The store talks to one small interface, ``TablesClient.call(operation, **params)``, with
the operations ``get``, ``create``, ``upsert``, ``update``, ``delete``, ``transact`` and
``query``. ``SdkClient`` implements it over the official async client
(``azure.data.tables.aio``, from the ``azure`` extra), which is imported only when one
is built; tests wrap it to inject faults between the steps of a write.

Credentials come the Azure SDK's way, never from the store URI: a ``credential`` handed
in (``AzureNamedKeyCredential``, ``AzureSasCredential`` or a token credential from
``azure-identity``), else ``AZURE_STORAGE_CONNECTION_STRING``, else the account name and
key in ``AZURE_STORAGE_ACCOUNT`` and ``AZURE_STORAGE_KEY`` (the Azure CLI's names). The
SDK's own retries are switched off (``retry_total=0``): shardex retries with backoff and
jitter, and a retried conditional write that had applied would come back as a failed
condition.
"""

from __future__ import annotations

import abc
import base64
import binascii
import os
from collections.abc import Mapping, Sequence
from typing import Any

from shardex.errors import (
    ConditionFailed,
    InvalidInput,
    MissingDependency,
    NotFound,
    ShardexError,
    StoreError,
    Throttled,
    Unavailable,
)
from shardex.stores.azure.batch import LeanBatch
from shardex.stores.azure.transport import with_transport
from shardex.stores.azure.wire import LeanQuery
from shardex.stores.uri import AIOHTTP_CONNECTIONS, given_endpoint, split_url

__all__ = [
    "Adapter",
    "Row",
    "SdkClient",
    "TablesClient",
    "account_key",
    "connection_settings",
    "map_error",
    "parse_connection_string",
    "request_outcome",
]

# An entity as read: its properties, and its ETag.
Row = tuple[dict[str, Any], str]

CONNECTION_STRING = "AZURE_STORAGE_CONNECTION_STRING"
ACCOUNT, ACCOUNT_KEY = "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY"
_THROTTLE_CODES = frozenset({"ServerBusy", "TooManyRequests"})
_INVALID_CODES = frozenset({
    "InvalidInput", "OutOfRangeInput", "PropertyValueTooLarge", "EntityTooLarge",
    "KeyValueTooLarge", "InvalidValueType", "PropertyNameInvalid", "PropertyNameTooLong",
    "TooManyProperties", "InvalidDuplicateRow", "InvalidXmlDocument", "InvalidQueryParameterValue",
    "InvalidHeaderValue", "InvalidUri", "InvalidResourceName", "OutOfRangeQueryParameterValue"})
_CREDENTIAL_CODES = frozenset({"AuthenticationFailed", "AuthorizationFailure",
                               "AuthorizationPermissionMismatch", "InsufficientAccountPermissions",
                               "AccountIsDisabled"})


def _code(exc: BaseException) -> str:
    code = getattr(exc, "error_code", None)
    code = getattr(code, "value", code)
    if not code:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None) or {}
        code = headers.get("x-ms-error-code", "")
        if not code:
            text = str(exc)
            marker = "ErrorCode:"
            if marker in text:
                code = text.split(marker, 1)[1].split()[0]
            elif '"code":"' in text:
                code = text.split('"code":"', 1)[1].split('"', 1)[0]
    # the SDK's text says "ErrorCode:None" of an answer without one (a proxy's page)
    return "" if not code or str(code) == "None" else str(code)


def _status(exc: BaseException) -> int:
    status = getattr(exc, "status_code", None)
    return int(status) if isinstance(status, int) else 0


def map_error(exc: BaseException, *, operation: str, table: str, endpoint: str,
              key: str | None = None) -> ShardexError:
    """Return the shardex error for an exception the Azure SDK raised in ``operation``.

    The caller raises it ``from exc``. 503 Server Busy (and 429) is Throttled: the request
    was refused before it ran. A 408, or any error status without the service's error
    code (not the service's own answer), is Unavailable: it may have applied. 500
    Operation Timed Out, other 5xx, a dropped connection and a client timeout are
    Unavailable: a write may or may not have applied. 412 (and
    409 for an insert) is ConditionFailed; 404 for the table is NotFound naming the
    command that creates it; refused credentials a StoreError naming them; a request the
    service refuses as malformed is InvalidInput.
    """
    if isinstance(exc, ShardexError):
        return exc
    where = f"table {table!r}" + (f" key {key!r}" if key is not None else "")
    try:
        from azure.core import exceptions as errors
    except ImportError:  # pragma: no cover - the driver raised it, so it is installed
        return StoreError(f"{operation} on {where}: {exc}")
    code, status = _code(exc), _status(exc)
    message = str(getattr(exc, "message", None) or exc).split("\n", 1)[0]
    if status == 408 or (status >= 400 and not code
                         and status not in (401, 403, 429, 503)):
        # a timeout, or an answer without the service's error code (a proxy's page, an
        # answer cut short): who answered, and whether a write applied, is unknown. A 408
        # after the commit had failed a move that applied, and its clean-up had then
        # taken the item out of every listing (a probe)
        return Unavailable(f"{operation} on {where}: {endpoint} answered {status} "
                           f"without an Azure error code ({message[:120]}); "
                           + request_outcome(exc, errors, operation))
    if isinstance(exc, errors.ClientAuthenticationError) or code in _CREDENTIAL_CODES:
        return StoreError(
            f"{endpoint} refused the credentials ({code or status}: {message}); set "
            f"{CONNECTION_STRING}, or {ACCOUNT} and {ACCOUNT_KEY}, or hand in a credential")
    if code == "TableNotFound":
        return NotFound(f"table {table!r} does not exist at {endpoint}; create it with: "
                        f"shardex azure create-table {table} --endpoint {endpoint}")
    if code in _THROTTLE_CODES or status in (429, 503):
        reason = code or str(status)
        return Throttled(f"{operation} on {where} throttled: {reason}: {message}", key=key,
                         reason=reason)
    if isinstance(exc, errors.ResourceModifiedError) or status == 412 \
            or code in ("UpdateConditionNotSatisfied", "ConditionNotMet"):
        return ConditionFailed(f"{operation} on {where}: the condition failed ({code})")
    if code == "EntityAlreadyExists" or status == 409:
        return ConditionFailed(f"{operation} on {where}: the entity already exists ({code})")
    if status == 404 or code == "ResourceNotFound":
        return NotFound(f"{operation} on {where}: the entity does not exist ({code})")
    if code in _INVALID_CODES or status == 400:
        return InvalidInput(f"{operation} on {where}: Azure refused the request: "
                            f"{code}: {message}")
    what = code or status or type(exc).__name__
    if isinstance(exc, errors.ServiceRequestError | errors.ServiceResponseError) \
            or status >= 500 or isinstance(exc, TimeoutError | OSError):
        return Unavailable(f"{operation} on {where}: {endpoint} failed ({what}: {message}); "
                           + request_outcome(exc, errors, operation))
    return StoreError(f"{operation} on {where}: {what}: {message}")


# operations that change nothing (both SDK adapters' names, and opening a store)
_READ_OPERATIONS = frozenset({"get", "query", "read_many", "open", "check"})


def request_outcome(exc: BaseException, errors: Any, operation: str) -> str:
    """What a request of ``operation`` that failed so left behind.

    Nothing was sent only where the connection was never made (a connect timeout, or a
    connector error below azure-core's ServiceRequestError): the SDK raises that same
    ServiceRequestError for a connection the server dropped after the request went out.
    """
    if operation in _READ_OPERATIONS:
        return "a read: nothing changed"
    inner = getattr(exc, "inner_exception", None)
    if isinstance(exc, errors.ServiceRequestTimeoutError) or _connect_failed(inner):
        return "nothing was sent"
    return "a write may or may not have applied"


def _sdk_operations(operations: Sequence[tuple[str, Mapping[str, Any], str | None]]) -> list[Any]:
    """``transact``'s operations as ``submit_transaction`` takes them."""
    from azure.core import MatchConditions

    batch: list[Any] = []
    for kind, entity, etag in operations:
        options = {} if etag is None else {"etag": etag,
                                           "match_condition": MatchConditions.IfNotModified}
        batch.append((kind if kind != "merge" else "update", entity,
                      {**options, "mode": "merge"} if kind == "merge" else options))
    return batch


def _etags(results: Sequence[Mapping[str, Any]]) -> list[str | None]:
    return [result.get("etag") for result in results]


def _connect_failed(error: Any) -> bool:
    try:
        from aiohttp import ClientConnectorError
    except ImportError:  # pragma: no cover - azure-core's aio transport needs aiohttp
        return False
    return isinstance(error, ClientConnectorError)


def parse_connection_string(text: str) -> dict[str, str]:
    """``Name=value;...`` as a dict, names in lower case (Azure's and Cosmos DB's)."""
    settings: dict[str, str] = {}
    for part in text.split(";"):
        name, sep, value = part.strip().partition("=")
        if sep:
            settings[name.strip().lower()] = value.strip()
    return settings


def connection_settings(endpoint: str | None, credential: Any = None,
                        connection_string: str | None = None) -> tuple[str, Any]:
    """Return ``(endpoint, credential)`` the SDK way; InvalidInput naming what is missing.

    ``endpoint`` (e.g. ``http://127.0.0.1:10002/devstoreaccount1``) wins over the one a
    connection string names; without either, an account name gives
    ``https://ACCOUNT.table.core.windows.net``.
    """
    given_endpoint(endpoint, "Azure endpoint")
    url, credential = _settings(endpoint, credential, connection_string)
    split_url(url, "Azure endpoint", web=True)
    return url, credential


def account_key(key: str, source: str, what: str = "an Azure Storage account key",
                hint: str = "the portal's key1 or key2") -> str:
    """``key`` if it is base64 text, as an account key is; InvalidInput naming ``source``
    before any request (at the first request it would be blamed on the server)."""
    try:
        base64.b64decode(key, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(f"{source} is not {what}: an account key is base64 text "
                           f"({hint})") from None
    return key


def _settings(endpoint: str | None, credential: Any,
              connection_string: str | None) -> tuple[str, Any]:
    if credential is not None:
        if not endpoint:
            raise InvalidInput("a credential was handed in without an endpoint: add "
                               "?endpoint=https://ACCOUNT.table.core.windows.net to the URI")
        return endpoint, credential
    from azure.core.credentials import AzureNamedKeyCredential, AzureSasCredential

    text = connection_string or os.environ.get(CONNECTION_STRING)
    if text:
        settings = parse_connection_string(text)
        name = settings.get("accountname")
        where = settings.get("tableendpoint") or (
            f"{settings.get('defaultendpointsprotocol', 'https')}://{name}.table."
            f"{settings.get('endpointsuffix', 'core.windows.net')}" if name else None)
        url = endpoint or where
        if not url:
            raise InvalidInput(f"{CONNECTION_STRING} names no AccountName or TableEndpoint")
        if settings.get("sharedaccesssignature"):
            return url, AzureSasCredential(settings["sharedaccesssignature"])
        if name and settings.get("accountkey"):
            return url, AzureNamedKeyCredential(name, account_key(
                settings["accountkey"], f"the AccountKey of {CONNECTION_STRING}"))
        raise InvalidInput(f"{CONNECTION_STRING} holds neither AccountName and AccountKey "
                           "nor SharedAccessSignature")
    name, key = os.environ.get(ACCOUNT), os.environ.get(ACCOUNT_KEY)
    if name and key:
        return endpoint or f"https://{name}.table.core.windows.net", \
            AzureNamedKeyCredential(name, account_key(key, ACCOUNT_KEY))
    raise InvalidInput(
        f"no Azure credentials: set {CONNECTION_STRING}, or {ACCOUNT} and {ACCOUNT_KEY}, or "
        "hand in credential= (e.g. azure.identity.aio.DefaultAzureCredential())")


class Adapter(abc.ABC):
    """A store's client adapter: one ``call(operation, **params)`` (Azure Tables, Cosmos DB).

    ``endpoint`` and ``table`` (a table's or a container's name) are for messages.
    """

    endpoint: str = ""
    table: str = ""

    async def open(self) -> None:  # noqa: B027 - optional hook
        """Create connections, if the adapter owns any."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release what ``open`` created."""

    @abc.abstractmethod
    async def call(self, operation: str, **params: Any) -> Any:
        """Run ``operation`` with ``params`` (see the class docstring)."""


class TablesClient(Adapter):
    """The one call an Azure Tables store makes: ``await client.call("get", ...)``.

    Operations (``Row`` is ``(properties, etag)``):

    - ``get(partition, row)`` -> Row or None;
    - ``create(entity)`` / ``upsert(entity)`` -> etag (insert; insert or replace);
    - ``update(entity, etag=None, merge=True)`` -> etag (If-Match ``etag``, or ``*``);
    - ``delete(partition, row, etag=None)``;
    - ``transact(operations)`` -> etags: one entity group transaction, one partition,
      ``operations`` as ``(kind, entity, etag)`` with kind ``upsert``, ``merge`` or
      ``delete``;
    - ``query(filter, parameters, select, top, continuation)`` -> ``(rows, continuation)``:
      one page.

    ``call`` raises the driver's own exceptions; the store maps them with ``map_error``.
    """

    endpoint: str = "Azure Table Storage"
    connections: int | None = None  # requests it carries at once (its pool), if known


def _import_sdk() -> Any:
    try:
        from azure.data.tables import aio
    except ImportError as exc:
        raise MissingDependency("azure-data-tables", "azure") from exc
    return aio


class SdkClient(TablesClient):
    """The official async client (``azure.data.tables.aio.TableClient``) on one table.

    ``transport`` is an azure-core ``AsyncHttpTransport`` to send every request through
    (a test's, to inject faults); by default the client makes its own on ``open``, with a
    pool of ``max_connections``.
    """

    def __init__(self, table: str, *, endpoint: str | None = None, credential: Any = None,
                 connection_string: str | None = None, connect_timeout: float = 5.0,
                 read_timeout: float = 30.0, transport: Any = None,
                 max_connections: int = AIOHTTP_CONNECTIONS) -> None:
        aio = _import_sdk()
        self.table = table
        self.endpoint, self._credential = connection_settings(endpoint, credential,
                                                              connection_string)
        self._options: dict[str, Any] = {"retry_total": 0, "connection_timeout": connect_timeout,
                                         "read_timeout": read_timeout}
        if transport is not None:  # azure-core's AsyncHttpTransport to send through
            self._options["transport"] = transport
        self._aio = aio
        self._client: Any = None
        self._lean: LeanQuery | None = None
        self._batch: LeanBatch | None = None
        # the pool of the transport made on open (aiohttp's default: 100 connections)
        self._pool = self.connections = max_connections

    async def open(self) -> None:
        if self._client is None:
            self._client = self._aio.TableClient(self.endpoint, self.table,
                                                 credential=self._credential,
                                                 **with_transport(self._options, self._pool))
            self._lean = LeanQuery.of(self._client, self.table)
            self._batch = LeanBatch.of(self._client)

    async def close(self) -> None:
        client, self._client, self._lean, self._batch = self._client, None, None, None
        if client is not None:
            await client.close()

    def _table(self) -> Any:
        if self._client is None:
            raise Unavailable(f"{self.endpoint}: the Azure Tables client is not open")
        return self._client

    async def call(self, operation: str, **params: Any) -> Any:
        if operation == "query" and self._lean is not None:  # the SDK's pages, decoded leaner
            return await self._lean(**params)
        if operation == "transact" and self._batch is not None:  # its envelope, made leaner
            return _etags(await self._batch(_sdk_operations(**params)))
        method = getattr(self, f"_{operation}", None)
        if method is None:
            raise InvalidInput(f"unknown Azure Tables operation {operation!r}")
        return await method(self._table(), **params)

    @staticmethod
    async def _get(table: Any, partition: str, row: str,
                   select: Sequence[str] | None = None) -> Row | None:
        from azure.core.exceptions import ResourceNotFoundError

        try:
            entity = await table.get_entity(partition, row, select=select)
        except ResourceNotFoundError as exc:
            if _code(exc) == "TableNotFound":
                raise
            return None
        return dict(entity), entity.metadata["etag"]

    @staticmethod
    async def _create(table: Any, entity: Mapping[str, Any]) -> str:
        response = await table.create_entity(entity)
        return str(response["etag"])

    @staticmethod
    async def _upsert(table: Any, entity: Mapping[str, Any]) -> str:
        from azure.data.tables import UpdateMode

        response = await table.upsert_entity(entity, mode=UpdateMode.REPLACE)
        return str(response["etag"])

    @staticmethod
    async def _update(table: Any, entity: Mapping[str, Any], etag: str | None = None,
                      merge: bool = True) -> str:
        from azure.core import MatchConditions
        from azure.data.tables import UpdateMode

        mode = UpdateMode.MERGE if merge else UpdateMode.REPLACE
        if etag is None:
            response = await table.update_entity(entity, mode=mode)
        else:
            response = await table.update_entity(entity, mode=mode, etag=etag,
                                                 match_condition=MatchConditions.IfNotModified)
        return str(response["etag"])

    @staticmethod
    async def _delete(table: Any, partition: str, row: str, etag: str | None = None) -> None:
        from azure.core import MatchConditions

        if etag is None:
            await table.delete_entity(partition, row)
        else:
            await table.delete_entity(partition, row, etag=etag,
                                      match_condition=MatchConditions.IfNotModified)

    @staticmethod
    async def _transact(table: Any,
                        operations: Sequence[tuple[str, Mapping[str, Any], str | None]]
                        ) -> list[str | None]:
        return _etags(await table.submit_transaction(_sdk_operations(operations)))

    @staticmethod
    async def _query(table: Any, filter: str, parameters: Mapping[str, Any] | None = None,
                     select: Sequence[str] | None = None, top: int | None = None,
                     continuation: Any = None) -> tuple[list[Row], Any]:
        pager = table.query_entities(filter, parameters=parameters, select=select,
                                     results_per_page=top).by_page(
                                         continuation_token=continuation)
        try:
            page = await pager.__anext__()
        except StopAsyncIteration:
            return [], None
        rows = [(dict(entity), entity.metadata["etag"]) async for entity in page]
        return rows, pager.continuation_token
