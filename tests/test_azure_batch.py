"""The lean transaction path (``shardex.stores.azure.batch``) sends and answers as
``submit_transaction`` does.

Unit: the envelope is the SDK's own bytes for the same requests and boundaries, and the
answer's parts are read as the service writes them (anything else is left to the SDK).
On Azurite: transactions that succeed give the same ETags' shape and the same rows, and
every refusal (a row that exists, an ETag that changed, a row twice, a missing table)
raises what the SDK raises.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from shardex.stores.azure.batch import LeanBatch, envelope, read_parts
from shardex.stores.azure.client import SdkClient, connection_settings, map_error
from tests import azurite

pytest.importorskip("azure.data.tables")
from azure.core.pipeline import PipelineContext, PipelineRequest
from azure.core.rest import HttpRequest
from azure.data.tables._policies import StorageHeadersPolicy
from azure.data.tables._table_batch import TableBatchOperations

OPERATIONS: list[Any] = [
    ("upsert", {"PartitionKey": "p", "RowKey": "r1", "a": "x"}, {}),
    ("create", {"PartitionKey": "p", "RowKey": "r2", "n": 7}, {}),
    ("update", {"PartitionKey": "p", "RowKey": "r3", "b": "é"}, {"mode": "merge"}),
    ("delete", {"PartitionKey": "p", "RowKey": "r4"}, {"etag": 'W/"datetime\'x\'"'}),
]

ANSWER = (b"--batchresponse_1\r\nContent-Type: multipart/mixed; boundary=changesetresponse_2"
          b"\r\n\r\n--changesetresponse_2\r\nContent-Type: application/http\r\n"
          b"Content-Transfer-Encoding: binary\r\n\r\nHTTP/1.1 204 No Content\r\n"
          b"DataServiceVersion: 1.0;\r\nETag: W/\"datetime'a'\"\r\n\r\n\r\n"
          b"--changesetresponse_2\r\nContent-Type: application/http\r\n"
          b"Content-Transfer-Encoding: binary\r\n\r\nHTTP/1.1 201 Created\r\n"
          b"Content-Type: application/json\r\nEtag: W/\"datetime'b'\"\r\n\r\n{\"x\": 1}\r\n"
          b"--changesetresponse_2--\r\n--batchresponse_1--\r\n")


def _requests() -> list[Any]:
    batched = TableBatchOperations(config=_config(), endpoint="http://127.0.0.1:1/acct",
                                   table_name="orders", is_cosmos_endpoint=False)
    from azure.core import MatchConditions

    for kind, entity, options in OPERATIONS:
        if "etag" in options:
            options = {**options, "match_condition": MatchConditions.IfNotModified}
        batched.add_operation((kind, entity, options))
    policy = StorageHeadersPolicy()
    for request in batched.requests:
        policy.on_request(PipelineRequest(request, PipelineContext(None)))
    return list(batched.requests)


def _config() -> Any:
    from azure.core.credentials import AzureNamedKeyCredential
    from azure.data.tables.aio import TableClient

    client = TableClient("http://127.0.0.1:1/acct", "orders",
                         credential=AzureNamedKeyCredential("acct", "a2V5"))
    return client._client._config


def test_the_envelope_is_the_sdks_own_bytes() -> None:
    """The SDK writes the envelope with email's generator; shardex writes the same bytes."""
    requests = _requests()
    changeset = HttpRequest("POST", "")
    changeset.set_multipart_mixed(*requests, boundary="changeset_c")
    batch = HttpRequest("POST", "http://127.0.0.1:1/acct/$batch")
    batch.set_multipart_mixed(changeset, boundary="batch_b")
    batch.prepare_multipart_body()
    from azure.core.utils._pipeline_transport_rest_shared import _serialize_request

    ours = envelope("batch_b", "changeset_c", [_serialize_request(r) for r in requests])
    assert ours == batch.content
    assert b'"b": "\\u00e9"' in ours  # each operation's entity, as its JSON
    assert ours.count(b"Content-ID: ") == len(OPERATIONS)


def test_the_parts_of_an_answer_are_read_as_the_service_writes_them() -> None:
    parts = read_parts(ANSWER, "multipart/mixed; boundary=batchresponse_1")
    assert parts is not None
    assert [status for status, _ in parts] == [204, 201]
    assert [headers["etag"] for _, headers in parts] == ["W/\"datetime'a'\"",
                                                         "W/\"datetime'b'\""]


@pytest.mark.parametrize(("body", "content_type"), [
    (ANSWER, "application/json"),
    (ANSWER, "multipart/mixed; boundary=other"),
    (ANSWER.replace(b"HTTP/1.1 201", b"HTTP/1.1 abc"), "multipart/mixed; boundary=batchresponse_1"),
    (ANSWER.replace(b"application/http", b"text/plain"),
     "multipart/mixed; boundary=batchresponse_1"),
    (ANSWER[:-25], "multipart/mixed; boundary=batchresponse_1"),
    (b"{}", "multipart/mixed; boundary=batchresponse_1"),
])
def test_an_answer_not_as_the_service_writes_it_is_left_to_the_sdk(
        body: bytes, content_type: str) -> None:
    assert read_parts(body, content_type) is None


def test_an_sdk_without_the_parts_submits_through_submit_transaction() -> None:
    assert LeanBatch.of(object()) is None


def _seeded() -> str:
    """A new Azurite table holding rows r3 and r4 of partition p; its name."""
    name = azurite.new_table()

    async def fill() -> None:
        from azure.data.tables.aio import TableClient

        url, credential = connection_settings(azurite.require_endpoint())
        async with TableClient(url, name, credential=credential) as table:
            for row in ("r3", "r4"):
                await table.create_entity({"PartitionKey": "p", "RowKey": row, "k": row})

    asyncio.run(fill())
    return name


async def _transact(name: str, lean: bool, operations: list[tuple[str, dict[str, Any],
                                                                   str | None]]) -> Any:
    """``transact`` through the lean path or ``submit_transaction``: the ETags and the
    rows after, or the exception raised."""
    client = SdkClient(name, endpoint=azurite.require_endpoint())
    await client.open()
    if not lean:
        client._batch = None
    else:
        assert client._batch is not None
    try:
        try:
            etags = await client.call("transact", operations=operations)
        except Exception as exc:  # compared by the caller
            return exc
        rows, _ = await client.call("query", filter="PartitionKey eq @p",
                                    parameters={"p": "p"})
        return etags, [props for props, _ in rows]
    finally:
        await client.close()


@pytest.mark.azure
def test_a_transaction_gives_what_the_sdk_gives_on_azurite() -> None:
    async def etag_of(name: str, row: str) -> str:
        client = SdkClient(name, endpoint=azurite.require_endpoint())
        await client.open()
        try:
            found = await client.call("get", partition="p", row=row)
            assert found is not None
            return str(found[1])
        finally:
            await client.close()

    outcomes = []
    for lean in (True, False):
        name = _seeded()
        etag = asyncio.run(etag_of(name, "r4"))
        outcomes.append(asyncio.run(_transact(name, lean, [
            ("upsert", {"PartitionKey": "p", "RowKey": "r1", "a": "x"}, None),
            ("create", {"PartitionKey": "p", "RowKey": "r2", "n": "é"}, None),
            ("merge", {"PartitionKey": "p", "RowKey": "r3", "b": "y"}, None),
            ("delete", {"PartitionKey": "p", "RowKey": "r4"}, etag)])))
    (lean_etags, lean_rows), (sdk_etags, sdk_rows) = outcomes
    assert [e is None for e in lean_etags] == [e is None for e in sdk_etags]
    assert all(e is None or e.startswith('W/"datetime') for e in lean_etags)
    assert lean_rows == sdk_rows
    assert [row["RowKey"] for row in lean_rows] == ["r1", "r2", "r3"]
    assert lean_rows[2] == {"PartitionKey": "p", "RowKey": "r3", "k": "r3", "b": "y"}


@pytest.mark.azure
@pytest.mark.parametrize("refusal", ["exists", "etag", "twice", "no-table"])
def test_a_refused_transaction_fails_as_the_sdk_fails_on_azurite(refusal: str) -> None:
    stale = 'W/"datetime\'2020-01-01T00%3A00%3A00.0000000Z\'"'
    operations: list[tuple[str, dict[str, Any], str | None]] = {
        "exists": [("upsert", {"PartitionKey": "p", "RowKey": "r1"}, None),
                   ("create", {"PartitionKey": "p", "RowKey": "r3"}, None)],
        "etag": [("merge", {"PartitionKey": "p", "RowKey": "r3", "b": "y"}, stale)],
        "twice": [("upsert", {"PartitionKey": "p", "RowKey": "r1"}, None),
                  ("merge", {"PartitionKey": "p", "RowKey": "r1", "b": "y"}, None)],
        "no-table": [("upsert", {"PartitionKey": "p", "RowKey": "r1"}, None)],
    }[refusal]
    failures = []
    for lean in (True, False):
        name = f"nosuch{uuid.uuid4().hex[:12]}" if refusal == "no-table" else _seeded()
        failures.append(asyncio.run(_transact(name, lean, operations)))
    lean_error, sdk_error = failures
    assert isinstance(lean_error, Exception), lean_error
    assert type(lean_error) is type(sdk_error)
    assert lean_error.error_code == sdk_error.error_code  # type: ignore[attr-defined]
    assert lean_error.status_code == sdk_error.status_code  # type: ignore[attr-defined]
    mapped = [str(map_error(e, operation="transact", table="t", endpoint="e"))
              for e in failures]
    assert mapped[0] == mapped[1]
