"""DynamoDB client adapters and the mapping of driver errors to shardex's errors.

The store has one async core that talks to one tiny interface, ``DynamoDBClient.call
(operation, **params) -> dict``. Two adapters implement it: ``AioClient`` over
aiobotocore (the default, from the ``dynamodb`` extra), and ``ThreadedClient`` over
an application's own boto3 client, whose blocking calls run in worker threads (as
many as the client's connection pool), so adopting shardex never forces a botocore
version on an application. Drivers are imported only when an adapter is built.

botocore's own retries are switched off in the clients shardex builds
(``total_max_attempts=1``): shardex retries each shard with backoff and jitter, and
two retry loops would multiply. A client handed in keeps its own configuration.
They also skip botocore's client-side parameter validation
(``parameter_validation=False``): shardex builds every request itself from values it
checked already, and walking a TransactWriteItems' shape costs CPU on every write
(with GetItem's lean parse below, a move went from 1.15x to 1.01-1.07x the raw
client's CPU, ``benchmarks/bench_core.py``); a request DynamoDB still refuses comes
back as its ValidationException (InvalidInput). Their User-Agent is fixed once
(``user_agent``: ``shardex/VERSION`` before botocore's own for this platform) where
botocore builds it from its parts twice a request, a sixth of a request's client CPU.

**Query and GetItem items skip botocore's shape walk** in the clients shardex builds
(``lean_items`` and ``lean_item``, on botocore's ``before-parse`` event): DynamoDB sends
items as typed JSON (``{"S": ...}``, ``{"N": ...}``, ...) and botocore parses them into the same
dicts by walking the AttributeValue shape member by member, which took two thirds of
the CPU of a listing (``benchmarks/bench_reads.py``). The items of a response that
holds no binary attribute (no ``"B"`` or ``"BS"`` in its body) are handed over as
``json`` decoded them, which is what botocore would return; any other response,
and every error, is parsed by botocore as usual. A client handed in is left as it is.

The clients shardex builds send through a connector that aborts the TLS connections it
drops (``shardex.stores.connector``): a read cancelled in flight (a hedge that lost, a
listing given up) otherwise leaves its socket open past the event loop's end.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import contextvars
import functools
import importlib.metadata
import inspect
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from shardex.clock import Clock
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
from shardex.stores.connector import aborting
from shardex.stores.metered import Meter
from shardex.stores.uri import DYNAMODB_CONNECTIONS, split_url

__all__ = [
    "AioClient",
    "DynamoDBClient",
    "ThreadedClient",
    "adapt_client",
    "describe_table",
    "map_error",
    "mapped_call",
    "user_agent",
]

DESCRIBE_TRIES = 5  # DescribeTable: tries in all, and the first backoff's seconds
DESCRIBE_BACKOFF = 0.1

_THROTTLE_CODES = frozenset({
    "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded",
    "Throttling", "TransactionConflictException",
})
_THROTTLE_REASONS = frozenset({
    "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded",
    "TransactionConflict",
})
_CREDENTIAL_CODES = frozenset({
    "UnrecognizedClientException", "InvalidSignatureException", "ExpiredTokenException",
    "ExpiredToken", "InvalidClientTokenId", "MissingAuthenticationToken",
    "MissingAuthenticationTokenException", "IncompleteSignature",
    "IncompleteSignatureException", "AccessDeniedException", "SignatureDoesNotMatch",
})
_INVALID_CODES = frozenset({"ValidationException", "SerializationException"})
_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem",
                     "TransactWriteItems", "ExecuteStatement", "ExecuteTransaction",
                     "BatchExecuteStatement"})
_SERVER_CODES = frozenset({"InternalServerError", "ServiceUnavailable",
                           "InternalFailure", "ServiceUnavailableException"})


def _botocore() -> tuple[Any, Any]:
    """Return (botocore, botocore.exceptions); MissingDependency if botocore is absent."""
    try:
        import botocore
        import botocore.exceptions
    except ImportError as exc:
        raise MissingDependency("aiobotocore", "dynamodb") from exc
    return botocore, botocore.exceptions


class DynamoDBClient(abc.ABC):
    """The one call a DynamoDB store makes: ``await client.call("Query", **params)``.

    ``call`` returns the parsed response and raises the driver's own exceptions;
    the store maps them with ``map_error``. ``endpoint`` names where the client
    talks to, for messages.
    """

    endpoint: str = "DynamoDB"
    connections: int | None = None  # requests it carries at once (its pool), if known

    @property
    def location(self) -> str:
        """The endpoint its requests go to, as far as it is known before any: the URL
        given or the client's, else the one the region it resolves names ('' when none
        is known). Two clients of one location and table hold the same data."""
        return self.endpoint

    async def open(self) -> None:  # noqa: B027 - optional hook
        """Create connections, if the adapter owns any."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release what ``open`` created; a client handed in by the caller is left open."""

    @abc.abstractmethod
    async def call(self, operation: str, **params: Any) -> dict[str, Any]:
        """Run the DynamoDB API operation ``operation`` (e.g. "Query") with ``params``."""


def lean_items(response_dict: dict[str, Any], customized_response_dict: dict[str, Any],
               **_: Any) -> None:
    """botocore ``before-parse`` handler: hand a Query's items over as JSON decoded them.

    Only a successful response whose body holds no binary attribute: there botocore's
    parse of the items changes nothing, and skipping it saves most of a read's CPU.
    The rest of the body (LastEvaluatedKey, ConsumedCapacity) is parsed by botocore.
    """
    _lean(response_dict, customized_response_dict, "Items", list)


def lean_item(response_dict: dict[str, Any], customized_response_dict: dict[str, Any],
              **_: Any) -> None:
    """botocore ``before-parse`` handler: a GetItem's item as JSON decoded it (the
    placement a write reads first), under the same conditions as ``lean_items``."""
    _lean(response_dict, customized_response_dict, "Item", dict)


def _lean(response_dict: dict[str, Any], customized: dict[str, Any], field: str,
          kind: type) -> None:
    body = response_dict.get("body")
    if response_dict.get("status_code") != 200 or type(body) is not bytes \
            or b'"B"' in body or b'"BS"' in body:
        return
    try:
        parsed = json.loads(body)
    except ValueError:
        return  # botocore reports it
    found = parsed.pop(field, None) if type(parsed) is dict else None
    if type(found) is not kind:
        return
    customized[field] = found
    response_dict["body"] = json.dumps(parsed).encode()


# the operations whose items skip botocore's shape walk, and how
_LEAN_EVENTS = (("before-parse.dynamodb.Query", lean_items),
                ("before-parse.dynamodb.GetItem", lean_item))


def _register_lean(client: Any) -> None:
    for event, handler in _LEAN_EVENTS:
        client.meta.events.register(event, handler)


def _region(region: str | None) -> str | None:
    """``region``, else ``AWS_REGION``: the variable the AWS SDKs read first, which botocore
    leaves to ``AWS_DEFAULT_REGION`` and the config files (those still apply after it)."""
    return region or os.environ.get("AWS_REGION") or None


_NO_REGION = "add ?region=... to the store URI or set AWS_REGION / AWS_DEFAULT_REGION"


@contextlib.contextmanager
def _region_needed() -> Iterator[None]:
    """Building a client: botocore's NoRegionError, and its ValueError for an endpoint
    that is no URL (one named by the environment or the config files: shardex checks its
    own ``endpoint_url`` before), raised there, as InvalidInput."""
    _, errors = _botocore()
    try:
        yield
    except errors.NoRegionError:
        raise InvalidInput(f"no AWS region for DynamoDB: {_NO_REGION}") from None
    except ValueError as exc:
        if not str(exc).startswith("Invalid endpoint"):
            raise
        raise InvalidInput(f"DynamoDB endpoint: {exc}, as AWS_ENDPOINT_URL, "
                           "AWS_ENDPOINT_URL_DYNAMODB or the AWS config file's endpoint_url "
                           "names it; give an http:// or https:// URL") from None

# what botocore takes as a region name (its own check, at the first request)
_REGION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?")


def _method_name(operation: str) -> str:
    botocore, _ = _botocore()
    name: str = botocore.xform_name(operation)
    return name


class AioClient(DynamoDBClient):
    """An aiobotocore client: built from a session on ``open``, or one handed in.

    A client handed in (already entered, e.g. from ``session.create_client(...)``) is
    used as is and not closed; a session handed in, or the default one, is used to
    build a client with retries off, which ``close`` closes.
    """

    def __init__(self, *, client: Any = None, session: Any = None, region: str | None = None,
                 endpoint_url: str | None = None, profile: str | None = None,
                 connect_timeout: float = 5.0, read_timeout: float = 30.0,
                 max_connections: int = DYNAMODB_CONNECTIONS) -> None:
        try:
            from aiobotocore.config import AioConfig
            from aiobotocore.session import AioSession
        except ImportError as exc:
            raise MissingDependency("aiobotocore", "dynamodb") from exc
        self._client = client
        self._owned = client is None
        if session is None and client is None:
            session = AioSession(profile=profile)
            # the service's model and the endpoints' rules, parsed once a process
            session.register_component("data_loader", _shared_loader())
        self._session: Any = session
        self._config = AioConfig(retries={"total_max_attempts": 1, "mode": "standard"},
                                 connect_timeout=connect_timeout, read_timeout=read_timeout,
                                 max_pool_connections=max_connections,
                                 parameter_validation=False, user_agent=user_agent(),
                                 http_session_cls=_aborting_session())
        self._region = region = _region(region)
        self._endpoint_url = endpoint_url
        self._stack: contextlib.AsyncExitStack | None = None
        self._methods: dict[str, Callable[..., Any]] = {}
        self.endpoint = endpoint_url or (f"DynamoDB in {region}" if region else "DynamoDB")
        self.connections = max_connections
        if client is not None:
            self.endpoint = str(getattr(client.meta, "endpoint_url", self.endpoint))
            self.connections = _pool_of(client)

    @property
    def location(self) -> str:
        if self._endpoint_url is not None:
            return self._endpoint_url
        if self._client is not None:
            return str(self._client.meta.endpoint_url)
        # as the client would build it: the environment's endpoint, else the region's
        named = os.environ.get("AWS_ENDPOINT_URL_DYNAMODB") or os.environ.get("AWS_ENDPOINT_URL")
        if named:
            return named
        region = self._region
        if region is None and self._session is not None:
            region = self._session.get_config_variable("region")
        return f"https://dynamodb.{region}.amazonaws.com" if region else ""

    async def open(self) -> None:
        if not self._owned or self._client is not None:
            return
        stack = contextlib.AsyncExitStack()
        with _region_needed():
            self._client = await stack.enter_async_context(self._session.create_client(
                "dynamodb", region_name=self._region, endpoint_url=self._endpoint_url,
                config=self._config))
        _register_lean(self._client)
        self._stack = stack
        if self._endpoint_url is None:
            # where the client goes: AWS_ENDPOINT_URL(_DYNAMODB) or the config files may
            # name an endpoint, and the region's own is named by its URL too
            self.endpoint = str(self._client.meta.endpoint_url)

    async def close(self) -> None:
        if self._stack is not None:
            stack, self._stack = self._stack, None
            self._client = None
            self._methods.clear()
            await stack.aclose()

    async def call(self, operation: str, **params: Any) -> dict[str, Any]:
        method = self._methods.get(operation)
        if method is None:
            if self._client is None:
                raise Unavailable(f"{self.endpoint}: the DynamoDB client is not open")
            method = self._methods[operation] = getattr(self._client, _method_name(operation))
        response: dict[str, Any] = await method(**params)
        return response


@functools.cache
def user_agent() -> str:
    """The User-Agent of the clients shardex builds: ``shardex/VERSION`` and botocore's own
    for this platform, built once. Left to botocore, it is built from its parts (the
    platform, the config, the features a request used) twice for every request: about a
    sixth of a Query's client CPU, which a fan-out spends before its requests leave."""
    try:
        mark = f"shardex/{importlib.metadata.version('shardex')}"
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        mark = "shardex"
    try:
        from botocore.useragent import UserAgentString

        return f"{mark} {UserAgentString.from_environment().to_string()}"
    except (ImportError, AttributeError):  # a botocore before the structured User-Agent
        return mark


@functools.cache
def _shared_loader() -> Any:
    """One botocore data loader for the sessions shardex makes: a loader keeps every JSON
    document it parsed (DynamoDB's model, the endpoints of every partition), which a
    session of its own parsed again for each client, some 120 ms of CPU a client."""
    import botocore.loaders

    return botocore.loaders.create_loader()


@functools.cache
def _aborting_session() -> type[Any]:
    """aiobotocore's aiohttp session, on a connector that aborts the TLS connections it
    drops (``shardex.stores.connector``): a read cancelled in flight leaves no socket
    open past the event loop. Its TLS context, for one verify setting without a proxy or
    a client certificate, is built once a process: each built its own, reading the CA
    bundle again (some 40 ms of CPU a client)."""
    from aiobotocore.httpsession import AIOHTTPSession

    contexts: dict[Any, Any] = {}

    class AbortingSession(AIOHTTPSession):  # type: ignore[misc]
        # ``_create_connector`` and ``_build_ssl_contexts`` are aiobotocore's (3.10, the
        # version the extra pins); a context with a proxy's or a certificate's settings
        # is the session's own, as aiobotocore changes it in place
        async def _create_connector(self, proxy_url: Any) -> Any:
            connector = await super()._create_connector(proxy_url)
            connector.__class__ = aborting(type(connector))
            return connector

        def _build_ssl_contexts(self, proxy_url: Any) -> Any:
            if proxy_url or self._cert_file:
                return super()._build_ssl_contexts(proxy_url)
            context = contexts.get(self._verify)
            if context is None:
                context = contexts[self._verify] = self._build_verify_context()
            return context, None

    return AbortingSession


class ThreadedClient(DynamoDBClient):
    """A blocking boto3 (or botocore) client whose calls run in worker threads.

    Built from a client handed in (never closed here), or from a boto3/botocore
    session (the client built has retries off and is closed on ``close``). Its calls
    run in threads of its own, as many as the client's connection pool (botocore's 10
    where the client does not say): asyncio's default executor has min(32, cores + 4),
    6 on two cores, which read a fan-out over 24 shard keys 6 requests at a time.
    """

    def __init__(self, *, client: Any = None, session: Any = None, region: str | None = None,
                 endpoint_url: str | None = None, connect_timeout: float = 5.0,
                 read_timeout: float = 30.0, max_connections: int = DYNAMODB_CONNECTIONS) -> None:
        _botocore()
        import botocore.config

        self._owned = client is None
        if client is None:
            config = botocore.config.Config(
                retries={"total_max_attempts": 1, "mode": "standard"},
                connect_timeout=connect_timeout, read_timeout=read_timeout,
                max_pool_connections=max_connections, parameter_validation=False,
                user_agent=user_agent())
            if session is None:
                raise InvalidInput("ThreadedClient needs a boto3 client or session")
            make = getattr(session, "client", None) or session.create_client
            with _region_needed():
                client = make("dynamodb", region_name=_region(region),
                              endpoint_url=endpoint_url, config=config)
            _register_lean(client)
        self._client = client
        self._methods: dict[str, Callable[..., dict[str, Any]]] = {}
        self.endpoint = str(getattr(getattr(client, "meta", None), "endpoint_url", "DynamoDB"))
        self.connections = _pool_of(client)
        self._threads: ThreadPoolExecutor | None = None  # made by the first call

    async def close(self) -> None:
        try:
            if self._owned:
                await self._in_thread(self._client.close)
        finally:
            # a store closed may be opened again: the next call makes new threads
            threads, self._threads = self._threads, None
            if threads is not None:
                threads.shutdown(wait=False)

    async def call(self, operation: str, **params: Any) -> dict[str, Any]:
        method = self._methods.get(operation)
        if method is None:
            method = self._methods[operation] = getattr(self._client, _method_name(operation))
        answer: dict[str, Any] = await self._in_thread(functools.partial(method, **params))
        return answer

    def _in_thread(self, call: Callable[[], Any]) -> asyncio.Future[Any]:
        """``call()`` in one of this client's threads, in this task's context (as
        ``asyncio.to_thread`` runs it)."""
        threads = self._threads
        if threads is None:  # threads start as calls need them, up to the pool
            threads = self._threads = ThreadPoolExecutor(
                self.connections or _BOTOCORE_POOL, thread_name_prefix="shardex-dynamodb")
        return asyncio.get_running_loop().run_in_executor(
            threads, contextvars.copy_context().run, call)


# the connection pool of a botocore client configured without max_pool_connections
_BOTOCORE_POOL = 10


def _pool_of(client: Any) -> int | None:
    """The ``max_pool_connections`` a botocore client was configured with, if it says."""
    pool = getattr(getattr(getattr(client, "meta", None), "config", None),
                   "max_pool_connections", None)
    return pool if type(pool) is int and pool > 0 else None


def _is_async_client(client: Any) -> bool:
    """True for an aiobotocore client (checked by class, so aiobotocore is not imported)."""
    if any(cls.__module__.startswith("aiobotocore") for cls in type(client).__mro__):
        return True
    return inspect.iscoroutinefunction(getattr(client, "describe_table", None))


def adapt_client(*, client: Any = None, session: Any = None, region: str | None = None,
                 endpoint_url: str | None = None, profile: str | None = None,
                 connect_timeout: float = 5.0, read_timeout: float = 30.0,
                 max_connections: int = DYNAMODB_CONNECTIONS) -> DynamoDBClient:
    """Return the adapter for what the caller handed in, or an aiobotocore one.

    ``client`` may be a DynamoDBClient, an aiobotocore client or a boto3 client;
    ``session`` an aiobotocore, boto3 or botocore session. With neither, aiobotocore
    builds a client from ``region``, ``endpoint_url``, ``profile`` and the usual AWS
    environment and config files, with a pool of ``max_connections`` (as does a session
    handed in; a client handed in keeps its own). Raises MissingDependency when the driver needed
    is not installed, InvalidInput when both ``client`` and ``session`` are given.
    """
    if client is not None and session is not None:
        raise InvalidInput("give DynamoDBStore a client or a session, not both")
    if endpoint_url is not None:
        split_url(endpoint_url, "endpoint_url", web=True)
    if region is not None and not _REGION.fullmatch(region):
        raise InvalidInput(f"region {region!r} is not an AWS region name (letters, digits "
                           "and '-', as us-east-1)")
    if profile is not None and not profile.strip():
        raise InvalidInput("profile: an AWS config profile's name, not an empty one")
    if isinstance(client, DynamoDBClient):
        return client
    if client is not None:
        if _is_async_client(client):
            return AioClient(client=client)
        return ThreadedClient(client=client)
    if session is not None and not type(session).__module__.startswith("aiobotocore"):
        return ThreadedClient(session=session, region=region, endpoint_url=endpoint_url,
                              connect_timeout=connect_timeout, read_timeout=read_timeout,
                              max_connections=max_connections)
    return AioClient(session=session, region=region, endpoint_url=endpoint_url,
                     profile=profile, connect_timeout=connect_timeout,
                     read_timeout=read_timeout, max_connections=max_connections)



async def describe_table(client: DynamoDBClient, table: str, *, clock: Clock,
                         meter: Meter | None = None) -> dict[str, Any]:
    """DescribeTable of ``table``: its description, tried again after a server error or a
    throttle (``DESCRIBE_TRIES`` tries, backoff from ``DESCRIBE_BACKOFF`` s on ``clock``).

    The client's own retries are off (shardex retries data requests itself), and a
    control-plane read must not fail an open or an adoption on one InternalFailure. Any
    other error, or the last try's, is raised mapped (NotFound: no such table). Each try
    counts on ``meter`` for ``Meter.quiet``, if given (``mapped_call``).
    """
    for attempt in range(DESCRIBE_TRIES):
        try:
            response = await mapped_call(client, "DescribeTable", f"table {table!r}",
                                         meter=meter, clock=clock, TableName=table)
        except (Unavailable, Throttled):
            if attempt + 1 == DESCRIBE_TRIES:
                raise
            await clock.sleep(DESCRIBE_BACKOFF * 2**attempt)
            continue
        description: dict[str, Any] = response["Table"]
        return description
    raise AssertionError("unreachable: the last try returns or raises")


async def mapped_call(client: DynamoDBClient, operation: str, target: str, *,
                      meter: Meter | None = None, clock: Clock | None = None,
                      **params: Any) -> dict[str, Any]:
    """``client.call(operation, **params)``, its error mapped (``map_error``, ``target``
    naming what it addressed); counted on ``meter`` (on ``clock``) if given: a request of
    shardex's that no store's ``Recorder`` sends (an adoption's, a table check's) still
    tells whether the store answers (``Meter.asked``)."""
    with contextlib.nullcontext() if meter is None or clock is None \
            else meter.asked(clock):
        try:
            return await client.call(operation, **params)
        except ShardexError:  # already shardex's: as it is, not its own cause
            raise
        except Exception as exc:
            raise map_error(exc, operation=operation, target=target,
                            endpoint=client.endpoint) from exc


def _throttle_reason(response: Mapping[str, Any], code: str, message: str) -> str:
    reasons = response.get("ThrottlingReasons") or []
    named = [str(r.get("reason")) for r in reasons if isinstance(r, Mapping) and r.get("reason")]
    if named:
        return ", ".join(named)
    return f"{code}: {message}" if message else code


def map_error(exc: BaseException, *, operation: str, target: str, endpoint: str,
              key: str | None = None) -> ShardexError:
    """Return the shardex error for a driver exception raised by ``operation``.

    ``target`` names the table or index the call addressed, ``key`` the partition
    key when one was. The caller raises the result ``from exc``. Throttling (and a
    transaction cancelled for throttling or a conflicting transaction) maps to
    Throttled with DynamoDB's reason; a failed condition to ConditionFailed; a missing
    table or index to NotFound; refused credentials to StoreError; an unreachable
    endpoint, a timeout, or an error without DynamoDB's own code (not its answer) to
    Unavailable; a refused request to InvalidInput.
    """
    if isinstance(exc, ShardexError):
        return exc
    where = f"{target} key {key!r}" if key is not None else target
    _, errors = _botocore()
    if isinstance(exc, errors.ClientError):
        response: Mapping[str, Any] = exc.response or {}
        error = response.get("Error") or {}
        code = str(error.get("Code") or "")
        message = str(error.get("Message") or response.get("message") or "")
        if code == "TransactionCanceledException":
            return _cancelled(response, message, operation, where, key)
        if code == "TransactionInProgressException":
            # the same request (its ClientRequestToken) is still running: it may apply
            return Unavailable(f"{operation} on {where}: the same request is still in "
                               f"progress at {endpoint}; it may or may not apply ({message})")
        if code in _THROTTLE_CODES:
            reason = _throttle_reason(response, code, message)
            return Throttled(f"{operation} on {where} throttled: {reason}", key=key,
                             reason=reason)
        if code == "ConditionalCheckFailedException":
            return ConditionFailed(f"{operation} on {where}: the condition failed ({message})")
        if code == "ResourceNotFoundException":
            return NotFound(f"{operation}: {target} does not exist at {endpoint} ({message})")
        if code in _CREDENTIAL_CODES:
            return StoreError(
                f"{endpoint} refused the AWS credentials ({code}: {message}); check "
                "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN, the profile, "
                "and that the session token has not expired")
        if code in _INVALID_CODES:
            return InvalidInput(f"{operation} on {where}: DynamoDB refused the request: "
                                f"{message or code}")
        status = int((response.get("ResponseMetadata") or {}).get("HTTPStatusCode") or 0)
        # a 408, or an error without DynamoDB's own code (botocore names it by the status
        # when the body is none of DynamoDB's: a proxy's page): unknown whether it applied.
        # A 408 answered after a write applied had been reported as a failure (a probe)
        if code in _SERVER_CODES or status >= 500 or status == 408 or not code \
                or code.isdigit():
            ambiguous = ("; the write may or may not have been applied"
                         if operation in _WRITES else "")
            return Unavailable(f"{operation} on {where}: {endpoint} failed ({code or status}: "
                               f"{message}){ambiguous}")
        return StoreError(f"{operation} on {where}: {code or 'error'}: {message}")
    credential_errors = tuple(getattr(errors, name) for name in (
        "NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError",
        "TokenRetrievalError", "UnknownCredentialError") if hasattr(errors, name))
    if isinstance(exc, credential_errors):
        return StoreError(f"no usable AWS credentials for {endpoint}: {exc}; set "
                          "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile= option")
    if isinstance(exc, errors.NoRegionError):
        return InvalidInput(f"no AWS region for {target}: {_NO_REGION}")
    if isinstance(exc, errors.ParamValidationError):
        return InvalidInput(f"{operation} on {where}: {exc}")
    if isinstance(exc, errors.ConnectionError | errors.HTTPClientError | TimeoutError | OSError):
        return Unavailable(f"{operation} on {where}: cannot reach DynamoDB at {endpoint}: {exc}")
    if isinstance(exc, errors.BotoCoreError):
        return StoreError(f"{operation} on {where}: {exc}")
    return Unavailable(f"{operation} on {where}: {type(exc).__name__}: {exc}")


def _cancelled(response: Mapping[str, Any], message: str, operation: str, where: str,
               key: str | None) -> ShardexError:
    codes = [str(r.get("Code")) for r in response.get("CancellationReasons") or []
             if isinstance(r, Mapping)]
    failed = [c for c in codes if c not in ("None", "")]
    if "ConditionalCheckFailed" in failed:
        return ConditionFailed(f"{operation} on {where}: a condition failed "
                               f"(cancellation reasons: {', '.join(codes)})")
    throttled = [c for c in failed if c in _THROTTLE_REASONS]
    if throttled:
        reason = ", ".join(sorted(set(throttled)))
        return Throttled(f"{operation} on {where} cancelled: {reason}", key=key, reason=reason)
    if "ValidationError" in failed:
        return InvalidInput(f"{operation} on {where}: DynamoDB refused the request: {message}")
    return StoreError(f"{operation} on {where} cancelled: {message or ', '.join(codes)}")
