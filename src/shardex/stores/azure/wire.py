"""One query page through the Azure SDK's pipeline, its entities decoded without its models.

The SDK's ``query_entities`` runs each entity of a page through its generic model
deserializer (every property, one call tree each) and then ``_convert_to_entity``, which
parses each row's ``Timestamp`` with ``strptime``: measured on Azurite, most of the CPU
a listed entry costs, and none of it needed for the rows shardex writes, whose properties
are all text and whose ``Timestamp`` shardex never reads. ``LeanQuery`` sends the very
request the SDK sends (same URL, query options, headers, the client's own pipeline:
authentication, transport, timeouts, no retries) and decodes the page with ``json``.

A page is decoded the fast way only when nothing in it needs the SDK's conversion: no
``@odata.type`` annotation (Int64, DateTime, Guid, Binary, a Double held as text), no JSON
integer outside Int32 (the SDK makes one an Int64 ``EntityProperty``), no ``odata.``
property but each entity's ETag. Any other page goes through the SDK's own
``_convert_to_entity``, entity by entity, so every row comes back exactly as
``query_entities`` gives it (``tests/test_azure_wire.py`` compares the two). An error
answer is raised as the SDK raises it (``_process_table_error``).

``LeanQuery.of`` returns None when the installed SDK lacks a part this relies on (they
are internal to ``azure-data-tables``); the client then pages with ``query_entities``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from shardex.errors import Unavailable

__all__ = ["LeanQuery", "decode_page"]

# An entity as read: its properties, and its ETag (``client.Row``).
Row = tuple[dict[str, Any], str]

_INT32 = range(-(2**31), 2**31)
_ACCEPT = "application/json;odata=minimalmetadata"
_NEXT_PARTITION = "x-ms-continuation-NextPartitionKey"
_NEXT_ROW = "x-ms-continuation-NextRowKey"


def decode_page(body: bytes, convert: Callable[[dict[str, Any]], Any]) -> list[Row]:
    """The rows of a query answer's JSON ``body``, as the SDK's entities would give them.

    ``convert`` is the SDK's ``_convert_to_entity``: used for every entity of a page that
    holds anything but text, Int32 numbers, booleans, doubles and nulls (see the module).
    """
    wide = False

    def integer(text: str) -> int:
        nonlocal wide
        number = int(text)
        if number not in _INT32:
            wide = True
        return number

    document = json.loads(body, parse_int=integer)
    if not isinstance(document, dict) or not isinstance(document.get("value"), list):
        # a 200 that is not the service's answer ('{}' from a proxy): read as an empty
        # last page, it had ended listings early (231 of 300 entries, a probe)
        raise Unavailable("the query answer holds no 'value' list of entities: not Azure "
                          "Table Storage's own answer (a proxy's, or one cut short); a read: "
                          "nothing changed")
    entities: list[dict[str, Any]] = document["value"]
    plain = not wide and b"@odata.type" not in body \
        and body.count(b'"odata.') == len(entities) + ("odata.metadata" in document) \
        and all("odata.etag" in entity for entity in entities)
    if not plain:
        converted = [convert(entity) for entity in entities]
        return [(dict(entity), entity.metadata["etag"]) for entity in converted]
    rows = []
    for entity in entities:
        etag = entity.pop("odata.etag")
        entity.pop("Timestamp", None)  # the SDK keeps it as metadata, which shardex ignores
        rows.append((entity, etag))
    return rows


class LeanQuery:
    """``query`` of one table through an open ``azure.data.tables.aio.TableClient``."""

    def __init__(self, client: Any, table: str, convert: Callable[[dict[str, Any]], Any],
                 substitute: Callable[[Any, str], str],
                 raise_table_error: Callable[[Exception], None]) -> None:
        self._send = client._client.send_request  # the generated client's own way out
        self._version = client.api_version
        self._path = f"/{quote(table)}()"
        self._convert = convert
        self._substitute = substitute
        self._raise_table_error = raise_table_error

    @classmethod
    def of(cls, client: Any, table: str) -> LeanQuery | None:
        """A LeanQuery on ``client``, or None if this SDK version lacks what it needs."""
        try:
            from azure.data.tables._deserialize import _convert_to_entity
            from azure.data.tables._error import _process_table_error
            from azure.data.tables._serialize import _parameter_filter_substitution
            send = client._client.send_request
            version = client.api_version
        except (ImportError, AttributeError):
            return None
        if not callable(send) or not isinstance(version, str):
            return None
        return cls(client, table, _convert_to_entity, _parameter_filter_substitution,
                   _process_table_error)

    async def __call__(self, filter: str, parameters: Mapping[str, Any] | None = None,
                       select: Sequence[str] | None = None, top: int | None = None,
                       continuation: Any = None) -> tuple[list[Row], Any]:
        """One page: ``(rows, continuation)``, continuation None after the last page.

        Raises what the SDK's ``query_entities`` raises for the same answer.
        """
        from azure.core.exceptions import (
            ClientAuthenticationError,
            HttpResponseError,
            ResourceExistsError,
            ResourceNotFoundError,
            ResourceNotModifiedError,
        )
        from azure.core.rest import HttpRequest

        options: dict[str, Any] = {"$filter": self._substitute(parameters, filter)}
        if top is not None:
            options["$top"] = top
        if select:
            options["$select"] = select if isinstance(select, str) else ",".join(select)
        if continuation:
            for name, option in (("PartitionKey", "NextPartitionKey"), ("RowKey", "NextRowKey")):
                if continuation.get(name) is not None:
                    options[option] = continuation[name]
        # quoted as the SDK's serializer quotes them: azure-core sends them as they are
        params = {name: quote(str(value), safe="") for name, value in options.items()}
        response = await self._send(HttpRequest(
            "GET", self._path, params=params,
            headers={"x-ms-version": self._version, "DataServiceVersion": "3.0",
                     "Accept": _ACCEPT}))
        status = response.status_code
        if status != 200:
            # the generated operation's error map, then the SDK's decoding of the error
            known = {401: ClientAuthenticationError, 404: ResourceNotFoundError,
                     409: ResourceExistsError, 304: ResourceNotModifiedError}
            error = known.get(status, HttpResponseError)(response=response)
            self._raise_table_error(error)
            raise error  # pragma: no cover - the SDK's function always raises
        rows = decode_page(response.body(), self._convert)
        headers = response.headers
        partition, row = headers.get(_NEXT_PARTITION), headers.get(_NEXT_ROW)
        return rows, ({"PartitionKey": partition, "RowKey": row}
                      if partition or row else None)
