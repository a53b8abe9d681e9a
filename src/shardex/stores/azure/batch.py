"""One entity group transaction through the Azure SDK's pipeline, its multipart envelope
made and read without the ``email`` package.

The SDK's ``submit_transaction`` builds each operation's request (``TableBatchOperations``)
and then wraps them with ``email``'s generator, and reads the answer with ``email``'s
parser (a regular expression compiled for each answer's boundary) and a thread pool made
for each answer: measured on Azurite, some 40% of a placement's CPU. ``LeanBatch`` builds
the very same requests with the SDK's own classes, serializes each as the SDK does
(``_serialize_request``, after the ``StorageHeadersPolicy`` the SDK applies to each),
and writes the envelope itself: the bytes the SDK sends, byte for byte, for the same
boundaries and instant (``tests/test_azure_batch.py`` compares them). The answer's parts
are read here when every part succeeded; any other answer (a refused operation, a size
refusal, an answer not the service's) is read by the SDK's own code, which raises what
``submit_transaction`` raises.

``LeanBatch.of`` returns None when the installed SDK lacks a part this relies on (they are
internal to ``azure-data-tables`` and ``azure-core``); the client then submits with
``submit_transaction``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from uuid import uuid4

__all__ = ["LeanBatch", "envelope", "read_parts"]

_CRLF = b"\r\n"


def envelope(batch: str, changeset: str, requests: Sequence[bytes]) -> bytes:
    """The body of a ``$batch`` request: one changeset holding ``requests`` (each an HTTP
    request serialized as ``application/http``), as ``email``'s generator writes it."""
    parts = [f"--{batch}\r\nContent-Type: multipart/mixed; boundary={changeset}\r\n\r\n"
             .encode()]
    for index, request in enumerate(requests):
        parts.append(f"--{changeset}\r\nContent-Type: application/http\r\n"
                     f"Content-Transfer-Encoding: binary\r\nContent-ID: {index}\r\n\r\n"
                     .encode())
        parts.append(request)
        parts.append(_CRLF)
    parts.append(f"--{changeset}--\r\n\r\n--{batch}--\r\n".encode())
    return b"".join(parts)


def _boundary(content_type: str) -> str | None:
    kind, _, rest = content_type.partition(";")
    if kind.strip().lower() != "multipart/mixed":
        return None
    for parameter in rest.split(";"):
        name, _, value = parameter.strip().partition("=")
        if name.lower() == "boundary" and value:
            return value.strip('"')
    return None


def _between(body: bytes, boundary: str) -> list[bytes] | None:
    """The parts of a multipart ``body`` between its ``boundary`` lines, or None."""
    opening, closing = f"--{boundary}".encode(), f"--{boundary}--".encode()
    end = body.find(closing)
    if not body.startswith(opening) or end < 0:
        return None
    return [part.strip(_CRLF) for part in body[len(opening):end].split(_CRLF + opening)]


def _headers(block: bytes) -> dict[str, str]:
    headers = {}
    for line in block.split(_CRLF):
        name, colon, value = line.decode("latin-1").partition(":")
        if colon:
            headers[name.strip().lower()] = value.strip()
    return headers


def read_parts(body: bytes, content_type: str) -> list[tuple[int, dict[str, str]]] | None:
    """Each answered operation of a ``$batch`` answer, ``(status, headers)`` with the
    headers' names in lower case, or None where the answer is not one changeset of
    ``application/http`` parts as the service writes them."""
    outer = _boundary(content_type)
    changesets = None if outer is None else _between(body, outer)
    if changesets is None or len(changesets) != 1:
        return None
    head, _, inner_body = changesets[0].partition(_CRLF * 2)
    inner = _boundary(_headers(head).get("content-type", ""))
    parts = None if inner is None else _between(inner_body, inner)
    if parts is None:
        return None
    answered = []
    for part in parts:
        mime, _, http = part.partition(_CRLF * 2)
        if _headers(mime).get("content-type", "").lower() != "application/http":
            return None
        status_line, _, rest = http.partition(_CRLF)
        fields = status_line.split()
        if len(fields) < 2 or not fields[0].startswith(b"HTTP/") or not fields[1].isdigit():
            return None
        answered.append((int(fields[1]), _headers(rest.partition(_CRLF * 2)[0])))
    return answered


class LeanBatch:
    """``submit_transaction`` of an open ``azure.data.tables.aio.TableClient``."""

    def __init__(self, client: Any, sdk: dict[str, Any]) -> None:
        self._client = client
        self._sdk = sdk
        self._send = client._client.send_request  # the generated client's own way out
        # the account's endpoint, as the SDK's batch and its operations address it
        self._endpoint = f"{client.scheme}://{client._primary_hostname}"

    @classmethod
    def of(cls, client: Any) -> LeanBatch | None:
        """A LeanBatch on ``client``, or None if this SDK version lacks what it needs."""
        try:
            from azure.core.pipeline import PipelineContext, PipelineRequest
            from azure.core.rest import HttpRequest
            from azure.core.utils._pipeline_transport_rest_shared import _serialize_request
            from azure.data.tables._error import (
                RequestTooLargeError,
                TableTransactionError,
                _decode_error,
                _validate_tablename_error,
            )
            from azure.data.tables._policies import StorageHeadersPolicy
            from azure.data.tables._table_batch import TableBatchOperations

            sdk = {"context": PipelineContext, "pipeline_request": PipelineRequest,
                   "request": HttpRequest, "serialize": _serialize_request,
                   "too_large": RequestTooLargeError, "failed": TableTransactionError,
                   "decode_error": _decode_error, "table_error": _validate_tablename_error,
                   "headers": StorageHeadersPolicy, "operations": TableBatchOperations}
            lean = cls(client, sdk)
            lean._operations()
            version = client.api_version
        except (ImportError, AttributeError, TypeError):
            return None
        if not callable(lean._send) or not isinstance(version, str):
            return None
        return lean

    def _operations(self) -> Any:
        client = self._client
        return self._sdk["operations"](config=client._client._config,
                                       endpoint=self._endpoint,
                                       table_name=client.table_name,
                                       is_cosmos_endpoint=client._cosmos_endpoint)

    async def __call__(self, operations: Sequence[Any]) -> list[dict[str, Any]]:
        """What ``submit_transaction(operations)`` returns (each operation's ETag), or
        raises what it raises for the same answer."""
        if not operations:  # the SDK's own answer to an empty transaction
            answer: list[dict[str, Any]] = await self._client.submit_transaction(operations)
            return answer
        sdk = self._sdk
        batched = self._operations()
        for operation in operations:
            batched.add_operation(operation)
        requests = batched.requests
        policy = sdk["headers"]()
        for request in requests:  # as the pipeline applies the batch's policies to each
            policy.on_request(sdk["pipeline_request"](request, sdk["context"](None)))
        batch, changeset = f"batch_{uuid4()}", f"changeset_{uuid4()}"
        request = sdk["request"](
            "POST", f"{self._endpoint}/$batch",
            headers={"x-ms-version": self._client.api_version, "DataServiceVersion": "3.0",
                     "MaxDataServiceVersion": "3.0;NetFx",
                     "Content-Type": f"multipart/mixed; boundary={batch}",
                     "Accept": "application/json"},
            content=envelope(batch, changeset, [sdk["serialize"](r) for r in requests]))
        response = await self._send(request, stream=True)
        await response.read()
        if response.status_code == 202:
            parts = read_parts(response.body(), response.headers.get("Content-Type", ""))
            if parts is not None and len(parts) == len(requests) \
                    and all(200 <= status < 300 for status, _ in parts):
                return [{"etag": headers["etag"]} if "etag" in headers else {}
                        for _, headers in parts]
            # the SDK reads the parts by the requests it would have built: it is told
            # what was sent (on the response's request, the copy the client sent)
            sent = sdk["request"]("POST", "")
            sent.set_multipart_mixed(*requests, policies=[policy], boundary=changeset)
            response.request.set_multipart_mixed(sent, policies=[policy],
                                                 enforce_https=False, boundary=batch)
        return await self._sdk_answer(response)

    async def _sdk_answer(self, response: Any) -> list[dict[str, Any]]:
        """The tail of the SDK's ``_batch_send``: its errors, or its parts' ETags."""
        sdk = self._sdk
        decode: Callable[..., Exception] = sdk["decode_error"]
        table = self._client.table_name
        if response.status_code == 413:
            raise decode(response, error_message="The transaction request was too large",
                         error_type=sdk["too_large"])
        if response.status_code != 202:
            decoded = decode(response)
            sdk["table_error"](decoded, table)
            raise decoded
        parts = []
        async for part in response.parts():
            await part.read()
            parts.append(part)
        failed = [part for part in parts if not 200 <= part.status_code < 300]
        if failed:
            if failed[0].status_code == 413:
                raise decode(response, error_message="The transaction request was too large",
                             error_type=sdk["too_large"])
            decoded = decode(response=failed[0], error_type=sdk["failed"])
            sdk["table_error"](decoded, table)
            raise decoded
        return [{"etag": part.headers["Etag"]} if "Etag" in part.headers else {}
                for part in parts]
