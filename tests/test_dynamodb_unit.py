"""DynamoDB store without a server: error mapping, key encoding, attribute codec, options."""

from __future__ import annotations

import asyncio
import builtins
import decimal
import sys
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import (
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    ReadTimeoutError,
)
from hypothesis import given
from hypothesis import strategies as st

import shardex
from shardex.capacity import placement_bytes
from shardex.model.entries import HISTORY_LENGTH, StoredEntry
from shardex.stores.dynamodb import DynamoDBStore
from shardex.stores.dynamodb.client import DynamoDBClient, adapt_client, map_error
from shardex.stores.dynamodb.codec import (
    decode_position,
    encode_position,
    from_attribute,
    item_units,
    placement_item,
    to_attribute,
    value_size,
)

TEXT = st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"),
               max_size=12)


def client_error(code: str, message: str = "", **extra: Any) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}, **extra}, "Query")


def shardex_entry(shard_key: str, item_id: str) -> StoredEntry:
    return StoredEntry(shard_key=shard_key, sort="s", item_id=item_id)


def mapped(exc: BaseException, key: str | None = "PENDING#3") -> shardex.ShardexError:
    return map_error(exc, operation="Query", target="table 'orders'",
                     endpoint="http://127.0.0.1:9", key=key)


# -- error mapping ----------------------------------------------------------------------

@pytest.mark.parametrize("code", ["ProvisionedThroughputExceededException",
                                  "ThrottlingException", "RequestLimitExceeded"])
def test_throttling_codes_map_to_throttled_with_the_reason(code: str) -> None:
    error = mapped(client_error(code, "Rate of requests exceeds the allowed throughput"))
    assert isinstance(error, shardex.Throttled)
    assert error.key == "PENDING#3"
    assert error.reason == f"{code}: Rate of requests exceeds the allowed throughput"
    assert "PENDING#3" in str(error)


def test_throttling_reasons_given_by_dynamodb_are_kept() -> None:
    reasons = [{"reason": "IndexWriteKeyRangeThroughputExceeded", "resource": "arn:..."}]
    error = mapped(client_error("ThrottlingException", "slow down",
                                ThrottlingReasons=reasons))
    assert isinstance(error, shardex.Throttled)
    assert error.reason == "IndexWriteKeyRangeThroughputExceeded"


@pytest.mark.parametrize(("reasons", "kind", "words"), [
    (["ConditionalCheckFailed", "None"], shardex.ConditionFailed, "ConditionalCheckFailed"),
    (["None", "ThrottlingError"], shardex.Throttled, "ThrottlingError"),
    (["ProvisionedThroughputExceeded"], shardex.Throttled, "ProvisionedThroughputExceeded"),
    (["TransactionConflict", "None"], shardex.Throttled, "TransactionConflict"),
    (["ValidationError"], shardex.InvalidInput, "refused"),
    (["ItemCollectionSizeLimitExceeded"], shardex.StoreError, "cancelled"),
])
def test_cancelled_transactions_map_by_their_reasons(reasons: list[str], kind: type,
                                                     words: str) -> None:
    exc = client_error("TransactionCanceledException", "Transaction cancelled",
                       CancellationReasons=[{"Code": c} for c in reasons])
    error = mapped(exc)
    assert type(error) is kind
    assert words in str(error)


def test_condition_not_found_credentials_validation_and_server_errors() -> None:
    assert isinstance(mapped(client_error("ConditionalCheckFailedException")),
                      shardex.ConditionFailed)
    missing = mapped(client_error("ResourceNotFoundException", "Requested resource not found"))
    assert isinstance(missing, shardex.NotFound)
    assert "table 'orders'" in str(missing)
    for code in ("UnrecognizedClientException", "InvalidSignatureException",
                 "ExpiredTokenException"):
        error = mapped(client_error(code, "The security token is invalid"))
        assert type(error) is shardex.StoreError
        assert "credentials" in str(error)
        assert code in str(error)
    invalid = mapped(client_error("ValidationException", "Item size has exceeded 400 KB"))
    assert isinstance(invalid, shardex.InvalidInput)
    assert "400 KB" in str(invalid)
    server = mapped(ClientError({"Error": {"Code": "InternalServerError", "Message": "oops"},
                                 "ResponseMetadata": {"HTTPStatusCode": 500}}, "Query"))
    assert isinstance(server, shardex.Unavailable)


def test_connection_timeout_and_credential_errors_name_the_problem() -> None:
    unreachable = mapped(EndpointConnectionError(endpoint_url="http://127.0.0.1:9"))
    assert isinstance(unreachable, shardex.Unavailable)
    assert "cannot reach DynamoDB at http://127.0.0.1:9" in str(unreachable)
    slow = mapped(ReadTimeoutError(endpoint_url="http://127.0.0.1:9"))
    assert isinstance(slow, shardex.Unavailable)
    nocreds = mapped(NoCredentialsError())
    assert type(nocreds) is shardex.StoreError
    assert "AWS_ACCESS_KEY_ID" in str(nocreds)


# -- the store over a fake client ----------------------------------------------------

INDEX_TABLE = {"Table": {
    "TableName": "orders", "TableStatus": "ACTIVE",
    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"},
                  {"AttributeName": "sk", "KeyType": "RANGE"}],
    "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"},
                             {"AttributeName": "sk", "AttributeType": "S"}]}}


class FakeClient(DynamoDBClient):
    """Answers DescribeTable with ``tables``; every other call runs ``answer``."""

    endpoint = "fake://dynamodb"

    def __init__(self, answer: Callable[[str, dict[str, Any]], dict[str, Any]],
                 tables: dict[str, dict[str, Any]] | None = None) -> None:
        self.answer = answer
        self.tables = tables if tables is not None else {"orders": INDEX_TABLE}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.closed = 0

    async def close(self) -> None:
        self.closed += 1

    async def call(self, operation: str, **params: Any) -> dict[str, Any]:
        self.calls.append((operation, params))
        if operation == "DescribeTable":
            if params["TableName"] not in self.tables:
                raise client_error("ResourceNotFoundException", "not found")
            return self.tables[params["TableName"]]
        return self.answer(operation, params)


def owned(then: Callable[[str, dict[str, Any]], dict[str, Any]]
          ) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    """Answer the owner check as if index 'ix' owned the table, then defer to ``then``."""
    def answer(operation: str, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("Key", {}).get("pk", {}).get("S") == "#owner":
            return {"Item": {"index": {"S": "ix"}},
                    "ConsumedCapacity": {"TableName": "orders-shardex", "CapacityUnits": 0.0}}
        return then(operation, params)
    return answer


def test_an_answer_that_is_not_dynamodb_s_may_have_applied() -> None:
    """A 408, or an error botocore names by its status (a body that is none of DynamoDB's:
    a proxy's page), is Unavailable, not a refusal: a TransactWriteItems answered 408
    after it applied had been reported as a failure (a probe)."""
    for code, status in (("408", 408), ("400", 400), ("", 403)):
        error = mapped(ClientError({"Error": {"Code": code, "Message": "<html>"},
                                    "ResponseMetadata": {"HTTPStatusCode": status}},
                                   "TransactWriteItems"))
        assert type(error) is shardex.Unavailable, (code, error)
    assert type(mapped(client_error("ValidationException", "bad"))) is shardex.InvalidInput


def test_a_200_without_what_dynamodb_always_sends_is_no_answer() -> None:
    """A Query answered 200 '{}' (a proxy's page) read as an empty last page, and a
    listing ended early with 170 of 400 entries; a write answered so read as applied (a
    probe). Each is Unavailable: a read is tried again, a write read back."""
    def answer(operation: str, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def body() -> None:
        store = DynamoDBStore("orders", client=FakeClient(owned(answer)))
        async with store:
            with pytest.raises(shardex.Unavailable, match="answered without its Items"):
                await store.query("ix", "P#1", after=None, descending=False, limit=7)
            with pytest.raises(shardex.Unavailable, match="ConsumedCapacity asked for: not "
                                                          "DynamoDB's own answer; the write "
                                                          "may or may not"):
                await store.place("ix", "o-1", shardex_entry("P#1", "o-1"), version=1,
                                  expected=None)

    asyncio.run(body())


def test_a_throttled_query_raises_throttled_and_is_counted() -> None:
    def answer(operation: str, params: dict[str, Any]) -> dict[str, Any]:
        raise client_error("ProvisionedThroughputExceededException", "too fast")

    async def body() -> None:
        store = DynamoDBStore("orders", client=FakeClient(owned(answer)))
        async with store:
            with pytest.raises(shardex.Throttled) as caught:
                await store.query("ix", "PENDING#1", after=None, descending=False, limit=10)
        assert isinstance(caught.value.__cause__, ClientError)
        stats = store.stats("ix")
        assert stats.by_key["PENDING#1"].read_throttles == 1
        assert stats.totals.read_throttles == 1

    asyncio.run(body())


def test_a_shardex_error_from_the_client_is_not_made_its_own_cause() -> None:
    """A client adapter that raises a shardex error (a closed client's Unavailable) had it
    raised 'from' itself: its __cause__ was itself, and a walk down the chain (a log
    handler's, an application's) never ended. It passes as it is, its own cause kept."""
    first = shardex.Unavailable("the DynamoDB client is not open")

    def answer(operation: str, params: dict[str, Any]) -> dict[str, Any]:
        raise first

    async def body() -> None:
        store = DynamoDBStore("orders", client=FakeClient(owned(answer)))
        async with store:
            with pytest.raises(shardex.Unavailable) as caught:
                await store.query("ix", "P#1", after=None, descending=False, limit=7)
        assert caught.value is first
        assert caught.value.__cause__ is None

    asyncio.run(body())


def test_query_pages_carry_units_and_resume_from_last_evaluated_key() -> None:
    seen: list[dict[str, Any]] = []

    def answer(operation: str, params: dict[str, Any]) -> dict[str, Any]:
        seen.append(params)
        item = {"pk": {"S": "P#1"}, "sk": {"S": "s1\x00o-1"}, "id": {"S": "o-1"},
                "v": {"N": "2"}, "attrs": {"M": {"total": {"N": "12.5"}}}}
        return {"Items": [item], "LastEvaluatedKey": {"pk": item["pk"], "sk": item["sk"]},
                "ConsumedCapacity": {"TableName": "orders", "CapacityUnits": 1.5}}

    async def body() -> None:
        store = DynamoDBStore("orders", client=FakeClient(owned(answer)))
        async with store:
            page = await store.query("ix", "P#1", after=("s0", "o-0"), descending=True,
                                     limit=7)
        assert page.resume == ("s1", "o-1")
        assert page.units == 1.5
        assert page.entries[0].attrs == {"total": 12.5}
        assert page.entries[0].version == 2
        assert seen[-1]["ExclusiveStartKey"] == {"pk": {"S": "P#1"}, "sk": {"S": "s0\x00o-0"}}
        assert seen[-1]["Limit"] == 7
        assert seen[-1]["ScanIndexForward"] is False
        assert seen[-1]["ConsistentRead"] is True
        assert store.stats().by_key["P#1"].read_units == 1.5

    asyncio.run(body())


def test_open_fails_fast_on_a_missing_table_and_closes_the_client() -> None:
    fake = FakeClient(lambda op, p: {}, tables={})

    async def body() -> None:
        with pytest.raises(shardex.NotFound, match="create-table orders"):
            await DynamoDBStore("orders", client=fake).open()

    asyncio.run(body())
    assert fake.closed == 1


class FlakyDescribe(FakeClient):
    """A FakeClient whose first DescribeTable calls fail with ``codes``, one each."""

    def __init__(self, *codes: str) -> None:
        super().__init__(owned(lambda op, p: {}))
        self.codes = list(codes)

    async def call(self, operation: str, **params: Any) -> dict[str, Any]:
        if operation == "DescribeTable" and self.codes:
            self.calls.append((operation, params))
            raise client_error(self.codes.pop(0), "reached max retries: 0")
        return await super().call(operation, **params)


def test_open_tries_describe_table_again_after_a_server_error_or_a_throttle() -> None:
    fake = FlakyDescribe("InternalFailure", "ThrottlingException")

    async def body() -> None:
        async with DynamoDBStore("orders", client=fake):
            pass

    shardex.run_virtual(body())
    assert [op for op, _ in fake.calls].count("DescribeTable") == 3


def test_open_gives_up_on_a_server_that_keeps_failing_and_closes_the_client() -> None:
    fake = FlakyDescribe(*["InternalFailure"] * 20)

    async def body() -> None:
        with pytest.raises(shardex.Unavailable, match="DescribeTable"):
            await DynamoDBStore("orders", client=fake).open()

    shardex.run_virtual(body())
    assert [op for op, _ in fake.calls].count("DescribeTable") == 5
    assert fake.closed == 1


def test_a_table_with_another_key_schema_is_refused() -> None:
    other = {"Table": {"TableName": "orders", "TableStatus": "ACTIVE",
                       "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
                       "AttributeDefinitions": [{"AttributeName": "id",
                                                 "AttributeType": "S"}]}}

    async def body() -> None:
        store = DynamoDBStore("orders", client=FakeClient(lambda op, p: {}, {"orders": other}))
        with pytest.raises(shardex.StoreError, match="not a shardex index table"):
            await store.open()

    asyncio.run(body())


def test_bad_keys_and_positions_are_refused_before_any_request() -> None:
    fake = FakeClient(owned(lambda op, p: {}))

    async def body() -> None:
        store = DynamoDBStore("orders", client=fake)
        async with store:
            before = len(fake.calls)
            bad: list[tuple[Any, str]] = [
                (store.query("ix", "#placement#o-1", after=None, descending=False, limit=5),
                 "reserved"),
                (store.query("ix", "", after=None, descending=False, limit=5), "non-empty"),
                (store.query("ix", "P", after=("only-sort",), descending=False, limit=5),
                 "pair"),
                (store.query("ix", "P", after=None, descending=False, limit=0), "limit"),
                (store.count("ix", "#record#routing"), "reserved"),
                (store.place("ix", "o-1", shardex_entry("#owner", "o-1"), version=1,
                             expected=None), "start with '#'"),
                (store.place("ix", "o-1", shardex_entry("P", "o-2"), version=1, expected=None),
                 "must match"),
                (store.place("ix", "o-1", None, version=2, expected=2), "Placement"),  # type: ignore[arg-type]
                (store.place("ix", "o-1", None, version=0, expected=None), ">= 1"),
                (store.place("ix", "o-1", None, version=1, expected=None, token="a b"),
                 "write token"),
                (store.put_record("ix", "routing", {"bad": float("nan")}, expected=None),
                 "not a JSON document"),
            ]
            for call, words in bad:
                with pytest.raises(shardex.InvalidInput, match=words):
                    await call
            assert len(fake.calls) == before

    asyncio.run(body())


def test_a_sort_key_without_the_separator_is_not_a_position() -> None:
    with pytest.raises(shardex.InvalidInput, match="not a shardex position"):
        decode_position("2026-11-30")
    # a GSI sort attribute the application wrote itself: the item id comes from the item
    assert decode_position("2026-11-30", "o-1") == ("2026-11-30", "o-1")
    assert decode_position("a\x00b\x00c") == ("a", "b\x00c")


# -- key encoding and attributes -----------------------------------------------------

@given(st.lists(st.tuples(TEXT, TEXT.filter(bool)), min_size=2, max_size=30))
def test_encoded_positions_sort_as_positions_by_utf8_bytes(
        positions: list[tuple[str, str]]) -> None:
    by_bytes = sorted(positions, key=lambda p: encode_position(*p).encode("utf-8"))
    assert by_bytes == sorted(positions)
    for sort, item_id in positions:
        assert decode_position(encode_position(sort, item_id)) == (sort, item_id)


def test_ties_and_prefixes_order_like_tuples() -> None:
    cases = [("a b", "1"), ("a", "2"), ("a", "10"), ("", "z"), ("a\x01", "0"), ("ab", "0")]
    encoded = sorted(cases, key=lambda p: encode_position(*p).encode("utf-8"))
    assert encoded == sorted(cases)
    assert encoded[:3] == [("", "z"), ("a", "10"), ("a", "2")]


def test_attributes_round_trip_through_dynamodb_types() -> None:
    attrs = {"int": 12, "big": 10**30, "neg": -7, "float": 12.5, "tiny": 1e-20, "str": "é",
             "empty": "", "bool": True, "none": None, "list": [1, "a", None, [2.25]],
             "map": {"nested": {"n": 3}}, "bytes": b"\x00\x01",
             "decimal": decimal.Decimal("3.14"), "digits": decimal.Decimal("1." + "3" * 37),
             "tags": frozenset({"b", "a"}), "scores": {1, 2.5, decimal.Decimal("0." + "1" * 38)},
             "blobs": {b"", b"\x01"}}
    back = {name: from_attribute(to_attribute(value)) for name, value in attrs.items()}
    assert back == {**attrs, "decimal": 3.14}
    assert type(back["digits"]) is decimal.Decimal  # 38 digits: more than a float holds
    assert type(back["tags"]) is frozenset
    assert type(back["int"]) is int
    assert type(back["float"]) is float
    assert from_attribute(to_attribute(2.0)) == 2


@pytest.mark.parametrize(("value", "words"), [
    (float("nan"), "cannot store"), (float("inf"), "cannot store"),
    (set(), "empty set cannot be stored"), ({1, "a"}, "text alone, numbers alone"),
    (object(), "object cannot be stored"),
    (decimal.Decimal("1" * 40), "38 significant digits"), ({1: "x"}, "names must be text"),
])
def test_values_dynamodb_cannot_hold_are_refused_clearly(value: Any, words: str) -> None:
    with pytest.raises(shardex.InvalidInput, match=words):
        to_attribute(value, "attrs['x']")


def test_item_units_follow_the_1kb_rule() -> None:
    assert item_units({"pk": {"S": "x"}}) == 1
    assert item_units({"pk": {"S": "x" * 1030}}) == 2


@given(TEXT.filter(bool), TEXT, TEXT.filter(bool),
       st.dictionaries(TEXT.filter(bool),
                       st.one_of(TEXT, st.booleans(), st.none(), st.binary(max_size=8),
                                 st.lists(TEXT, max_size=3),
                                 st.dictionaries(TEXT, TEXT, max_size=2)), max_size=4))
def test_placement_bytes_is_the_placement_item_at_its_longest(
        key: str, sort: str, item_id: str, attrs: dict[str, Any]) -> None:
    """``shardex.capacity.placement_bytes`` (the size every store checks) is the size of
    the placement item this store writes for the entry, with the largest version and
    the longest write token and history. (Numbers are left out of the attributes:
    ``number_bytes`` counts an even number of digits a byte smaller than ``item_units``,
    both DynamoDB's rule of about a byte for two digits.)"""
    biggest = 10**38 - 1
    entry = StoredEntry(key, sort, item_id, attrs, version=biggest)
    item = placement_item(item_id, biggest, entry, "t" * 36, ("h" * 36,) * HISTORY_LENGTH)
    size = sum(len(name) + value_size(value) for name, value in item.items())
    assert placement_bytes(entry) == size


# -- options, URI and drivers --------------------------------------------------------

@pytest.mark.parametrize(("uri", "error", "words"), [
    ("dynamodb://", shardex.InvalidURI, "needs a table name"),
    ("dynamodb://ab", shardex.InvalidInput, "not a DynamoDB table name"),
    ("dynamodb://orders/extra", shardex.InvalidURI, "no path"),
    ("dynamodb://key:secret@orders", shardex.InvalidURI, "no credentials"),
    ("dynamodb://orders?colour=red", shardex.InvalidURI, "does not know"),
    ("dynamodb://orders?gsi=by_status", shardex.InvalidURI, "missing: key_attribute"),
    ("dynamodb://orders?key_attribute=a", shardex.InvalidURI, "GSI-mode options"),
    ("dynamodb://orders?read_timeout=0", shardex.InvalidURI, "read_timeout must be a number "
     "of seconds above 0 and at most 3600"),
    # each of these was taken, and failed (or not) only at the first request
    ("dynamodb://orders?connect_timeout=nan", shardex.InvalidURI, "connect_timeout must be"),
    ("dynamodb://orders?read_timeout=inf", shardex.InvalidURI, "read_timeout must be"),
    ("dynamodb://orders?version_attribute=v", shardex.InvalidURI,
     "version_attribute is a GSI-mode option"),
    ("dynamodb://orders?region=bad%20region", shardex.InvalidInput,
     "region 'bad region' is not an AWS region name"),
    ("dynamodb://orders?region=", shardex.InvalidInput, "region '' is not an AWS region name"),
    ("dynamodb://orders?profile=", shardex.InvalidInput, "not an empty one"),
    ("dynamodb://orders?endpoint_url=notaurl", shardex.InvalidURI,
     "endpoint_url 'notaurl' is not an http:// or https:// URL with a host"),
    ("dynamodb://orders?gsi=g1x&key_attribute=a&sort_attribute=a&id_attribute=i",
     shardex.InvalidURI, "distinct"),
])
def test_bad_uris_are_refused_with_the_reason(uri: str, error: type, words: str) -> None:
    with pytest.raises(error, match=words):
        shardex.open_store(uri)


def test_uri_round_trips_without_defaults() -> None:
    store = shardex.open_store("dynamodb://orders?region=eu-west-1&gsi=by_status"
                               "&key_attribute=status_shard&sort_attribute=status_sort"
                               "&id_attribute=order_id&endpoint_url=http://127.0.0.1:8000")
    assert isinstance(store, DynamoDBStore)
    assert store.gsi_mode
    assert not store.capabilities.consistent_reads
    assert store.uri == ("dynamodb://orders?endpoint_url=http://127.0.0.1:8000&gsi=by_status"
                         "&id_attribute=order_id&key_attribute=status_shard"
                         "&region=eu-west-1&sort_attribute=status_sort")
    assert store.key_attributes("PENDING#3", "2026", "o-1") == {
        "status_shard": "PENDING#3", "status_sort": "2026\x00o-1"}
    table = shardex.open_store("dynamodb://orders?region=eu-west-1")
    assert table.capabilities.consistent_reads
    with pytest.raises(shardex.CapabilityMissing, match="index-table mode"):
        table.key_attributes("PENDING#3", "2026", "o-1")


def test_a_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_aiobotocore(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("aiobotocore"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    for module in [m for m in sys.modules if m.startswith("aiobotocore")]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setattr(builtins, "__import__", no_aiobotocore)
    with pytest.raises(shardex.MissingDependency, match=r"pip install 'shardex\[dynamodb\]'"):
        shardex.open_store("dynamodb://orders?region=eu-west-1")


def test_a_boto3_client_needs_no_aiobotocore(monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3

    for variable in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"):  # the test's own
        monkeypatch.delenv(variable, raising=False)                   # endpoint, not a server's
    client = boto3.client("dynamodb", region_name="eu-west-1", aws_access_key_id="x",
                          aws_secret_access_key="y")
    real_import = builtins.__import__

    def no_aiobotocore(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("aiobotocore"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_aiobotocore)
    store = DynamoDBStore("orders", client=client)
    assert type(store.client).__name__ == "ThreadedClient"
    assert store.client.endpoint == "https://dynamodb.eu-west-1.amazonaws.com"


def test_a_client_and_a_session_together_are_refused() -> None:
    with pytest.raises(shardex.InvalidInput, match="not both"):
        adapt_client(client=object(), session=object())


@pytest.fixture
def no_region(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/shardex-test-config")


@pytest.mark.usefixtures("no_region")
def test_a_client_without_a_region_is_refused_naming_the_fix() -> None:
    """botocore's NoRegionError came out of open() as a traceback (adopt's commands)."""
    from shardex.stores.dynamodb.client import AioClient

    with pytest.raises(shardex.InvalidInput, match="no AWS region for DynamoDB: add "
                                                   r"\?region=\.\.\. to the store URI"):
        asyncio.run(AioClient().open())


@pytest.mark.usefixtures("no_region")
@pytest.mark.parametrize("variable", ["AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"])
def test_an_endpoint_from_the_environment_that_is_no_url_is_refused_naming_it(
        monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    """botocore's ValueError ('Invalid endpoint: notaurl') came out at exit 1, naming
    neither the variable nor a fix."""
    from shardex.stores.dynamodb.client import AioClient, ThreadedClient

    monkeypatch.setenv(variable, "notaurl")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    fault = "DynamoDB endpoint: Invalid endpoint: notaurl, as AWS_ENDPOINT_URL, "
    with pytest.raises(shardex.InvalidInput, match=fault):
        asyncio.run(AioClient().open())
    import boto3

    with pytest.raises(shardex.InvalidInput, match=fault):
        ThreadedClient(session=boto3.Session())


@pytest.mark.usefixtures("no_region")
def test_aws_region_names_the_region_as_the_aws_sdks_read_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore reads AWS_DEFAULT_REGION only: AWS_REGION, which the docs and the error
    name, was ignored."""
    from shardex.stores.dynamodb.client import AioClient

    monkeypatch.setenv("AWS_REGION", "eu-west-1")

    async def region() -> str:
        client = AioClient()
        await client.open()
        try:
            return str(client._client.meta.region_name)  # type: ignore[attr-defined]
        finally:
            await client.close()

    assert asyncio.run(region()) == "eu-west-1"
    assert AioClient(region="us-east-2").endpoint == "DynamoDB in us-east-2"


@pytest.mark.usefixtures("no_region")
def test_an_endpoint_from_the_environment_is_the_one_errors_name(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Errors said 'cannot reach DynamoDB at DynamoDB in us-east-1' for a client that
    AWS_ENDPOINT_URL sent elsewhere."""
    from shardex.stores.dynamodb.client import AioClient

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")

    async def endpoint() -> str:
        client = AioClient(region="us-east-1")
        await client.open()
        try:
            return client.endpoint
        finally:
            await client.close()

    assert asyncio.run(endpoint()) == "http://127.0.0.1:9"


def test_clients_share_the_parsed_models_and_the_tls_context_of_one_verify_setting() -> None:
    """Each client built its own botocore loader and TLS context: DynamoDB's model and
    the endpoints parsed again, the CA bundle read again, some 130 ms of CPU a client
    (a fifth of the DynamoDB tests' CPU). A context aiobotocore changes in place (a
    proxy's, a client certificate's) stays the session's own."""
    from shardex.stores.dynamodb.client import AioClient, _aborting_session

    one, two = AioClient(region="eu-west-1"), AioClient(region="eu-west-1")
    assert one._session is not two._session
    assert one._session.get_component("data_loader") \
        is two._session.get_component("data_loader")
    session = _aborting_session()
    verified, _ = session()._build_ssl_contexts(None)
    assert session()._build_ssl_contexts(None)[0] is verified
    unverified, _ = session(verify=False)._build_ssl_contexts(None)
    assert unverified is not verified
    assert not unverified.check_hostname
    proxied, _ = session()._build_ssl_contexts("http://proxy.example:3128")
    assert proxied is not verified
