"""The DynamoDB client read path: Query items as JSON decoded them, the pool it carries."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from botocore.parsers import create_parser
from botocore.session import get_session
from hypothesis import given, settings
from hypothesis import strategies as st

from shardex.stores.dynamodb.client import AioClient, adapt_client, lean_item, lean_items

_MODEL = get_session().get_service_model("dynamodb")
_QUERY = _MODEL.operation_model("Query").output_shape
_GET = _MODEL.operation_model("GetItem").output_shape
_NUMBERS = st.decimals(allow_nan=False, allow_infinity=False, places=3).map(str)
_BINARY = st.binary(max_size=8).map(lambda b: base64.b64encode(b).decode())
_TEXT = st.text(max_size=8)


def _values(binary: bool) -> st.SearchStrategy[dict[str, Any]]:
    scalars = [st.builds(lambda s: {"S": s}, _TEXT), st.builds(lambda n: {"N": n}, _NUMBERS),
               st.builds(lambda b: {"BOOL": b}, st.booleans()), st.just({"NULL": True}),
               st.builds(lambda s: {"SS": s}, st.lists(_TEXT, min_size=1, max_size=3,
                                                       unique=True)),
               st.builds(lambda n: {"NS": n}, st.lists(_NUMBERS, min_size=1, max_size=3,
                                                       unique=True))]
    if binary:
        scalars += [st.builds(lambda b: {"B": b}, _BINARY),
                    st.builds(lambda b: {"BS": b}, st.lists(_BINARY, min_size=1, max_size=2,
                                                            unique=True))]
    return st.recursive(st.one_of(scalars), lambda inner: st.one_of(
        st.builds(lambda items: {"L": items}, st.lists(inner, max_size=3)),
        st.builds(lambda fields: {"M": fields}, st.dictionaries(_TEXT, inner, max_size=3))),
        max_leaves=8)


def _body(binary: bool) -> st.SearchStrategy[bytes]:
    item = st.dictionaries(_TEXT, _values(binary), max_size=4)
    return st.builds(lambda items, last: json.dumps({
        "Items": items, "Count": len(items), "ScannedCount": len(items),
        **({"LastEvaluatedKey": last} if last else {}),
        "ConsumedCapacity": {"TableName": "orders", "CapacityUnits": 1.5}}).encode(),
        st.lists(item, max_size=4), st.dictionaries(_TEXT, _values(binary), max_size=2))


def _parsed(body: bytes, *, lean: bool, status: int = 200, handler: Any = lean_items,
            shape: Any = _QUERY) -> tuple[dict[str, Any], bool]:
    """``body`` as botocore parses it to ``shape``, with ``handler`` first when ``lean``;
    and whether the handler took the parse over."""
    response: dict[str, Any] = {"status_code": status, "headers": {}, "body": body}
    custom: dict[str, Any] = {}
    if lean:
        handler(response_dict=response, customized_response_dict=custom)
    parsed = create_parser("json").parse(response, shape)
    parsed.update(custom)
    parsed.pop("ResponseMetadata", None)
    return parsed, bool(custom)


@settings(max_examples=50, deadline=None)
@given(_body(binary=True))
def test_lean_items_equal_botocores_parse(body: bytes) -> None:
    lean, took_over = _parsed(body, lean=True)
    plain, _ = _parsed(body, lean=False)
    assert lean == plain
    # it takes over exactly the bodies without a binary attribute anywhere
    assert took_over == (b'"B"' not in body and b'"BS"' not in body)


@settings(max_examples=30, deadline=None)
@given(_body(binary=False))
def test_bodies_without_binary_skip_the_shape_walk(body: bytes) -> None:
    lean, took_over = _parsed(body, lean=True)
    assert took_over or b'"B"' in body or b'"BS"' in body  # a key may be named B
    assert lean == _parsed(body, lean=False)[0]


@settings(max_examples=50, deadline=None)
@given(st.one_of(st.none(), st.dictionaries(_TEXT, _values(binary=True), max_size=4)))
def test_a_lean_get_item_equals_botocores_parse(item: dict[str, Any] | None) -> None:
    body = json.dumps({**({} if item is None else {"Item": item}), "ConsumedCapacity": {
        "TableName": "orders", "CapacityUnits": 1.0}}).encode()
    lean, took_over = _parsed(body, lean=True, handler=lean_item, shape=_GET)
    assert lean == _parsed(body, lean=False, shape=_GET)[0]
    assert took_over == (item is not None and b'"B"' not in body and b'"BS"' not in body)


def test_errors_and_bodies_that_are_not_json_are_left_to_botocore() -> None:
    for status, body in ((400, b'{"__type": "ValidationException", "Items": []}'),
                         (200, b"not json"), (200, b'{"Count": 0}')):
        response: dict[str, Any] = {"status_code": status, "headers": {}, "body": body}
        custom: dict[str, Any] = {}
        lean_items(response_dict=response, customized_response_dict=custom)
        assert custom == {}
        assert response["body"] == body


@pytest.mark.shardex_virtual
async def test_only_the_clients_shardex_builds_read_items_lean() -> None:
    from aiobotocore.session import get_session as aio_session

    def emitted(client: Any) -> Any:
        custom: dict[str, Any] = {}
        response = {"status_code": 200, "headers": {},
                    "body": b'{"Items": [{"k": {"S": "v"}}], "Count": 1}'}
        return client.meta.events.emit("before-parse.dynamodb.Query", response_dict=response,
                                       customized_response_dict=custom,
                                       operation_model=None), custom

    owned = AioClient(region="us-east-1", endpoint_url="http://127.0.0.1:9")
    await owned.open()
    try:
        sent, custom = emitted(owned._client)
        await sent
        assert custom == {"Items": [{"k": {"S": "v"}}]}
    finally:
        await owned.close()
    async with aio_session().create_client("dynamodb", region_name="us-east-1",
                                           endpoint_url="http://127.0.0.1:9") as theirs:
        handed = adapt_client(client=theirs)
        await handed.open()
        sent, custom = emitted(theirs)
        await sent
        assert custom == {}  # an application's own client parses as it always did


def test_a_fan_out_is_bounded_by_the_pool_of_the_client() -> None:
    import boto3
    import botocore.config

    from shardex.stores.dynamodb import DynamoDBStore

    assert AioClient(region="us-east-1").connections == 64  # the clients shardex builds
    theirs = boto3.client("dynamodb", region_name="eu-west-1", aws_access_key_id="x",
                          aws_secret_access_key="y",
                          config=botocore.config.Config(max_pool_connections=10))
    assert adapt_client(client=theirs).connections == 10
    assert DynamoDBStore("orders", client=theirs).connections == 10


@pytest.mark.shardex_virtual
async def test_the_clients_shardex_builds_name_shardex_in_a_user_agent_built_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3
    from aiobotocore.session import get_session as aio_session

    import shardex
    from shardex.errors import ShardexError
    from shardex.stores.dynamodb.client import ThreadedClient, mapped_call, user_agent

    def recording(client: Any) -> list[str]:
        seen: list[str] = []

        def sent(request: Any, **_: Any) -> None:
            header = request.headers["User-Agent"]  # bytes, once signed
            seen.append(header.decode() if isinstance(header, bytes) else header)

        client.meta.events.register("before-send.dynamodb.Query", sent)
        return seen

    query = {"TableName": "orders", "KeyConditionExpression": "pk = :p",
             "ExpressionAttributeValues": {":p": {"S": "PENDING"}}}
    closed = "http://127.0.0.1:9"  # nothing listens: each request fails at connect
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "y")
    owned = AioClient(region="us-east-1", endpoint_url=closed)
    await owned.open()
    threaded = ThreadedClient(session=boto3.Session(), region="us-east-1", endpoint_url=closed)
    try:
        for client, adapter in ((owned._client, owned), (threaded._client, threaded)):
            seen = recording(client)
            for _ in range(2):
                with pytest.raises(ShardexError):
                    await mapped_call(adapter, "Query", "table 'orders'", **query)
            assert len(seen) == 2
            assert seen[0] == seen[1]
            assert seen[0].startswith(f"shardex/{shardex.__version__} Botocore/")
            assert seen[0].startswith(user_agent())
    finally:
        await owned.close()
        await threaded.close()
    async with aio_session().create_client("dynamodb", region_name="us-east-1",
                                           endpoint_url=closed) as theirs:
        seen = recording(theirs)
        with pytest.raises(ShardexError):
            await mapped_call(adapt_client(client=theirs), "Query", "table 'orders'", **query)
        assert "shardex" not in seen[0]  # an application's own client keeps its own


def _version_by_decimal(text: str) -> int | None:
    """A stored version as Decimal reads it (the whole of ``read_version`` before its
    fast path for plain digits): None where it is refused."""
    import decimal

    try:
        number = decimal.Decimal(text)
    except decimal.InvalidOperation:
        return None
    if not number.is_finite() or number != number.to_integral_value() or number < 0:
        return None
    return int(number)


@settings(max_examples=300)
@given(st.one_of(st.integers(0, 10**40).map(str), st.text(max_size=6),
                 st.from_regex(r"[-+ ]?0*\d{1,3}(\.\d{0,2})?([eE][-+]?\d)?\s?", fullmatch=True),
                 st.sampled_from(["\u0661\u0662", "\uff11\uff12", "\u00b2", "NaN", "Infinity",
                                  "-0", "0"])))
def test_a_version_reads_as_decimal_reads_it(text: str) -> None:
    """``read_version`` reads plain ASCII digits without Decimal (a listing reads one a
    entry); every other text as before."""
    from shardex.errors import MalformedItem
    from shardex.stores.dynamodb.codec import read_version

    expected = _version_by_decimal(text)
    if expected is None:
        with pytest.raises(MalformedItem):
            read_version({"N": text}, "entry 'x' attribute 'v'")
    else:
        assert read_version({"N": text}, "entry 'x' attribute 'v'") == expected
