"""The lean query path (``shardex.stores.azure.wire``) gives what ``query_entities`` gives.

Unit: ``decode_page`` against the SDK's own conversion of the same JSON, and which pages
it decodes itself. On Azurite: rows of every EDM type, pages with continuations, ``select``,
and the errors of a missing table and a refused filter, each read both ways.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import uuid
from typing import Any

import pytest

from shardex.errors import InvalidInput, NotFound
from shardex.stores.azure.client import Row, SdkClient, connection_settings, map_error
from shardex.stores.azure.wire import LeanQuery, decode_page
from tests import azurite

sdk = pytest.importorskip("azure.data.tables")
from azure.data.tables import EdmType, EntityProperty  # noqa: E402
from azure.data.tables._deserialize import _convert_to_entity  # noqa: E402

ETAG = "W/\"datetime'2026-12-03T09%3A16%3A25.1138794Z'\""
STAMP = "2026-12-03T09:16:25.1138794Z"


def _sdk_rows(document: dict[str, Any]) -> list[Row]:
    return [(dict(e), e.metadata["etag"]) for e in map(_convert_to_entity, document["value"])]


def _decoded(entities: list[dict[str, Any]], metadata: bool = True) -> tuple[list[Row], int]:
    """decode_page's rows for a page of ``entities``, and how many it handed to the SDK."""
    document: dict[str, Any] = {"value": entities}
    if metadata:
        document = {"odata.metadata": "http://x/$metadata#t", **document}
    body = json.dumps(document).encode()
    converted = 0

    def convert(entity: dict[str, Any]) -> Any:
        nonlocal converted
        converted += 1
        return _convert_to_entity(entity)

    rows = decode_page(body, convert)
    assert rows == _sdk_rows(json.loads(body))
    assert [list(p) for p, _ in rows] == [list(p) for p, _ in _sdk_rows(json.loads(body))]
    return rows, converted


def _entity(**props: Any) -> dict[str, Any]:
    return {"odata.etag": ETAG, "PartitionKey": "p", "RowKey": "r", **props,
            "Timestamp": STAMP}


def test_a_page_of_text_rows_is_decoded_without_the_sdk() -> None:
    rows, converted = _decoded([_entity(k="a", a0='{"x":1}'), _entity(k="b")])
    assert converted == 0
    assert rows[0] == ({"PartitionKey": "p", "RowKey": "r", "k": "a", "a0": '{"x":1}'}, ETAG)
    assert _decoded([])[1] == 0
    # numbers within Int32, booleans, doubles and nulls come back as JSON gives them
    assert _decoded([_entity(n=-(2**31), m=2**31 - 1, b=True, d=1.5, z=None)])[1] == 0
    assert _decoded([_entity(k="a")], metadata=False)[1] == 0


@pytest.mark.parametrize("entity", [
    _entity(n=2**31),  # an integer beyond Int32: the SDK makes it Int64
    _entity(**{"n@odata.type": "Edm.Int64", "n": "5"}),
    _entity(**{"when@odata.type": "Edm.DateTime", "when": STAMP}),
    _entity(**{"g@odata.type": "Edm.Guid", "g": str(uuid.UUID(int=7))}),
    _entity(**{"odata.type": "acct.t"}),
    {"PartitionKey": "p", "RowKey": "r", "Timestamp": STAMP},  # no ETag: made from the time
    _entity(k='text with "odata. in it'),  # not a property, but the SDK decodes it alike
], ids=["wide-int", "int64", "datetime", "guid", "odata-property", "no-etag", "text"])
def test_a_page_holding_more_than_text_goes_through_the_sdk(entity: dict[str, Any]) -> None:
    assert _decoded([_entity(k="plain"), entity])[1] == 2


# -- on Azurite --------------------------------------------------------------------------

# what a URL's query string or the filter's quoting treats apart (Azure's keys hold no #?/\)
ODD = "a'b %2B+&=\u00e9;"
ODDER = ODD + "#?/\\"
ROWS: list[dict[str, Any]] = [
    {"PartitionKey": "p", "RowKey": f"r{i:02d}", "k": f"text {i} 'quoted'", "a0": "{}"}
    for i in range(7)] + [
    {"PartitionKey": ODD, "RowKey": f"{ODD}{i}", "k": ODDER} for i in range(3)] + [
    {"PartitionKey": "q", "RowKey": "typed", "i32": 7, "i64": EntityProperty(2**40, EdmType.INT64),
     "d": 2.5, "b": True, "g": uuid.UUID(int=3), "bin": b"\x00\x01",
     "when": datetime.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.UTC)},
]


async def _both(name: str, **query: Any) -> tuple[Any, Any]:
    """The same query through the lean path and through ``query_entities``: each page's
    rows and continuation, to the end."""
    client = SdkClient(name, endpoint=azurite.require_endpoint())
    await client.open()
    try:
        lean = client._lean
        assert lean is not None
        found: list[list[Any]] = [[], []]
        for i, call in enumerate((lean, lambda **q: SdkClient._query(client._table(), **q))):
            continuation = None
            while True:
                rows, continuation = await call(**query, continuation=continuation)
                found[i].append((rows, continuation))
                if continuation is None:
                    break
        return found[0], found[1]
    finally:
        await client.close()


def _filled(rows: list[dict[str, Any]]) -> str:
    """A new Azurite table holding ``rows``, written by the SDK; its name."""
    name = azurite.new_table()

    async def fill() -> None:
        from azure.data.tables.aio import TableClient

        url, credential = connection_settings(azurite.require_endpoint())
        async with TableClient(url, name, credential=credential) as table:
            for row in rows:
                await table.create_entity(row)

    asyncio.run(fill())
    return name


@pytest.mark.azure
def test_the_lean_path_reads_what_the_sdk_reads_on_azurite() -> None:
    name = _filled(ROWS)
    for query in (
            {"filter": "PartitionKey eq @p", "parameters": {"p": "p"}, "top": 3},
            {"filter": "PartitionKey eq @p and RowKey gt @lo", "parameters": {"p": "p",
                                                                             "lo": "r02"},
             "select": ["RowKey", "k"], "top": 1000},
            {"filter": "PartitionKey eq @p", "parameters": {"p": "q"}},
            {"filter": "PartitionKey eq @p and RowKey gt @lo", "parameters": {
                "p": ODD, "lo": ODD}, "top": 1},
            {"filter": "k eq @k", "parameters": {"k": ODDER}},
            {"filter": "PartitionKey eq @p", "parameters": {"p": "nothing there"}}):
        lean, public = asyncio.run(_both(name, **query))
        assert lean == public
        assert [[list(p) for p, _ in rows] for rows, _ in lean] == \
            [[list(p) for p, _ in rows] for rows, _ in public]
    pages, _ = asyncio.run(_both(name, filter="PartitionKey eq @p", parameters={"p": "p"}, top=3))
    assert [len(rows) for rows, _ in pages] == [3, 3, 1]
    odd, _ = asyncio.run(_both(name, filter="PartitionKey eq @p", parameters={"p": ODD}, top=2))
    assert [[p["RowKey"] for p, _ in rows] for rows, _ in odd] == [[ODD + "0", ODD + "1"],
                                                                    [ODD + "2"]]
    assert len(asyncio.run(_both(name, filter="k eq @k", parameters={"k": ODDER}))[0][0][0]) == 3
    typed = asyncio.run(_both(name, filter="RowKey eq @r", parameters={"r": "typed"}))[0]
    props = typed[0][0][0][0]
    assert props["i64"] == EntityProperty(2**40, EdmType.INT64)
    assert props["bin"] == b"\x00\x01"


@pytest.mark.azure
@pytest.mark.parametrize(("table", "filter", "error"), [
    ("nosuchtable", "PartitionKey eq 'p'", NotFound),
    (None, "PartitionKey eq", InvalidInput),
])
def test_the_lean_path_fails_as_the_sdk_fails(table: str | None, filter: str,
                                              error: type[Exception]) -> None:
    name = table or azurite.new_table()

    async def fail(lean: bool) -> Exception:
        client = SdkClient(name, endpoint=azurite.require_endpoint())
        await client.open()
        if not lean:
            client._lean = None
        try:
            await client.call("query", filter=filter, parameters={})
        except Exception as exc:  # compared below
            return exc
        finally:
            await client.close()
        raise AssertionError("the query did not fail")

    lean, public = asyncio.run(fail(True)), asyncio.run(fail(False))
    assert type(lean) is type(public)
    assert getattr(lean, "error_code", None) == getattr(public, "error_code", None)
    assert getattr(lean, "status_code", None) == getattr(public, "status_code", None)
    mapped = [map_error(e, operation="query", table=name, endpoint="e") for e in (lean, public)]
    assert isinstance(mapped[0], error)
    assert str(mapped[0]) == str(mapped[1])


def test_an_sdk_without_the_parts_reads_through_query_entities() -> None:
    assert LeanQuery.of(object(), "t") is None
