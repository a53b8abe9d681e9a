"""The lean query path gives what ``query_entities`` gives for values the wire test does
not write: edge numbers, special doubles, empty and long text, text beyond the BMP,
binary, a 7-digit DateTime, properties named like OData's keys, pages over 1 MB, and the
errors of a page refused mid-listing (a throttled 503, a 500) below the SDK's pipeline.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import math
from typing import Any

import pytest

from shardex.stores.azure.client import SdkClient, map_error
from tests import azurite
from tests.servers import Answer
from tests.test_azure_wire import _both, _filled

pytestmark = [pytest.mark.azure, pytest.mark.filterwarnings("error")]
sdk = pytest.importorskip("azure.data.tables")
from azure.data.tables import EdmType, EntityProperty  # noqa: E402

BIG = "\U0001d11e" + "x" * 31_000  # near the service's 64 KiB a string property
EDGES: list[dict[str, Any]] = [
    {"PartitionKey": "e", "RowKey": "text", "empty": "", "big": BIG, "clef": "\U0001d11e\u00e9",
     "nul": "a\u0000b", "odata": "x", "odata_etag": "y", "etag": "z", "metadata": "m"},
    {"PartitionKey": "e", "RowKey": "quoted", "q": 'say "odata.etag" @odata.type'},
    {"PartitionKey": "e", "RowKey": "numbers", "i32lo": -(2**31), "i32hi": 2**31 - 1,
     "i64lo": EntityProperty(-(2**63), EdmType.INT64),
     "i64hi": EntityProperty(2**63 - 1, EdmType.INT64), "t": True, "f": False,
     "zero": -0.0, "whole": 3.0, "tiny": 5e-324, "huge": 1.7976931348623157e308},
    {"PartitionKey": "e", "RowKey": "special", "nan": math.nan, "inf": math.inf,
     "ninf": -math.inf},
    {"PartitionKey": "e", "RowKey": "binary", "bin": b"\x00\xff" * 100, "none": b""},
    {"PartitionKey": "e", "RowKey": "when", "when": datetime.datetime(
        2026, 1, 2, 3, 4, 5, 678901, tzinfo=datetime.UTC)},
    # what a row shardex writes looks like, beside them on the same page
    {"PartitionKey": "e", "RowKey": "plain", "k": "{}", "a0": '{"n": 1}'},
]


def _same(lean: Any, public: Any) -> None:
    """Equal rows, properties in the same order, NaN equal to NaN."""
    assert json.dumps(lean, default=repr) == json.dumps(public, default=repr)
    assert [[list(p) for p, _ in rows] for rows, _ in lean] == \
        [[list(p) for p, _ in rows] for rows, _ in public]


def test_edge_values_read_the_same_both_ways() -> None:
    name = _filled(EDGES)
    for query in ({"filter": "PartitionKey eq @p", "parameters": {"p": "e"}},
                  {"filter": "PartitionKey eq @p", "parameters": {"p": "e"}, "top": 1},
                  {"filter": "RowKey eq @r", "parameters": {"r": "text"}},
                  {"filter": "RowKey eq @r", "parameters": {"r": "plain"}},
                  {"filter": "clef eq @c", "parameters": {"c": "\U0001d11e\u00e9"}}):
        lean, public = asyncio.run(_both(name, **query))
        _same(lean, public)
    every = asyncio.run(_both(name, filter="PartitionKey eq @p", parameters={"p": "e"}))[0]
    assert sum(len(rows) for rows, _ in every) == len(EDGES)
    special = next(p for rows, _ in every for p, _ in rows if p["RowKey"] == "special")
    assert math.isnan(special["nan"])
    assert special["ninf"] == -math.inf
    text = asyncio.run(_both(name, filter="RowKey eq @r", parameters={"r": "text"}))[0]
    assert text[0][0][0][0]["big"] == BIG
    assert text[0][0][0][0]["nul"] == "a\u0000b"


def test_pages_over_a_megabyte_read_the_same_both_ways() -> None:
    name = _filled([{"PartitionKey": "big", "RowKey": f"r{i:03d}", "k": BIG[:20_000] + str(i)}
                  for i in range(80)])  # about 3 MB of text
    lean, public = asyncio.run(_both(name, filter="PartitionKey eq @p", parameters={"p": "big"}))
    _same(lean, public)
    assert sum(len(rows) for rows, _ in lean) == 80


def _refusal(request: Any, status: int, code: str, message: str) -> Answer:
    """An error the Table service answers."""
    return Answer(request, status, "Server Busy" if status == 503 else "Error",
                  {"Content-Type": "application/json;odata=minimalmetadata",
                   "x-ms-error-code": code},
                  {"odata.error": {"code": code, "message": {"lang": "en-US",
                                                             "value": message}}})


@pytest.mark.parametrize(("status", "code"), [(503, "ServerBusy"), (500, "InternalError")])
def test_a_page_refused_mid_listing_fails_the_same_both_ways(status: int, code: str) -> None:
    """The second page of a listing answered 503 (the service's throttle) or 500, below the
    SDK's pipeline: the same exception, status, code and shardex error both ways."""
    from azure.core.pipeline.transport import AioHttpTransport

    name = _filled([{"PartitionKey": "p", "RowKey": f"r{i}", "k": "{}"} for i in range(4)])

    class Refusing(AioHttpTransport):  # type: ignore[misc]
        queries = 0

        async def send(self, request: Any, **kwargs: Any) -> Any:
            if request.method == "GET" and f"/{name}()" in request.url:
                self.queries += 1
                if self.queries == 2:
                    return _refusal(request, status, code, "The server is busy.")
            return await super().send(request, **kwargs)

    async def fail(lean: bool) -> tuple[Exception, int]:
        transport = Refusing()
        client = SdkClient(name, endpoint=azurite.require_endpoint(), transport=transport)
        await client.open()
        if not lean:
            client._lean = None
        try:
            rows, continuation = await client.call(
                "query", filter="PartitionKey eq @p", parameters={"p": "p"}, top=2)
            assert len(rows) == 2
            await client.call("query", filter="PartitionKey eq @p", parameters={"p": "p"},
                              top=2, continuation=continuation)
        except Exception as exc:  # compared below
            return exc, transport.queries
        finally:
            await client.close()
        raise AssertionError("the second page did not fail")

    (lean, sent), (public, sent_public) = asyncio.run(fail(True)), asyncio.run(fail(False))
    assert sent == sent_public == 2  # neither retried it (the store retries, with backoff)
    assert type(lean) is type(public)
    for attribute in ("status_code", "error_code", "reason", "message"):
        assert getattr(lean, attribute, None) == getattr(public, attribute, None), attribute
    mapped = [map_error(e, operation="query", table=name, endpoint="e") for e in (lean, public)]
    assert type(mapped[0]) is type(mapped[1])
    assert str(mapped[0]) == str(mapped[1])
