"""The Cosmos DB store without a server: URIs, credentials, error mapping, charges, keys."""

from __future__ import annotations

import asyncio
import builtins
import datetime
import sys
from typing import Any

import pytest
from azure.core import exceptions as azure_errors
from azure.cosmos import exceptions as cosmos_errors
from azure.data.tables import EdmType, EntityProperty

import shardex
from shardex.capacity import cosmos_read_units, cosmos_write_units
from shardex.model.entries import Placement, StoredEntry
from shardex.retry import RetryPolicy
from shardex.stores.cosmos import CosmosStore, codec
from shardex.stores.cosmos.admin import create_container
from shardex.stores.cosmos.client import connection_settings, map_error
from shardex.stores.cosmos.store import _estimate
from tests.servers import dropped_after_sending, refused_to_connect

KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="


@pytest.fixture
def account(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COSMOS_CONNECTION_STRING", raising=False)
    monkeypatch.setenv("COSMOS_KEY", KEY)
    monkeypatch.setenv("COSMOS_ENDPOINT", "https://acc.documents.azure.com:443/")


def http_error(status: int, sub: int | None = None, headers: dict[str, str] | None = None,
               kind: type = cosmos_errors.CosmosHttpResponseError) -> Any:
    error = kind(status_code=status, message=f"status {status}\nActivityId: 1")
    error.sub_status = sub
    # the service names its activity in every answer
    error.headers = {"x-ms-activity-id": "1"} if headers is None else headers
    return error


def test_the_uri_names_a_database_a_container_and_an_endpoint_never_credentials(
        account: None) -> None:
    store = shardex.open_store("cosmos://orders/entries?endpoint=https://127.0.0.1:1/"
                               "&read_timeout=3&charges=estimated")
    assert isinstance(store, CosmosStore)
    assert store.uri == "cosmos://orders/entries?endpoint=https://127.0.0.1:1/"
    assert (store.database, store.container, store.charges) == ("orders", "entries",
                                                                "estimated")
    defaulted = shardex.open_store("cosmos://orders/entries")
    assert defaulted.uri == "cosmos://orders/entries?endpoint=https://acc.documents.azure.com:443/"


@pytest.mark.parametrize(("uri", "words"), [
    ("cosmos://user:secret@orders/entries", "no credentials in the URI"),
    ("cosmos://orders", "needs a database and a container"),
    ("cosmos://orders/a/b", "needs a database and a container"),
    ("cosmos:///entries", "needs a database and a container"),
    ("cosmos://orders/entries?key=x", "does not know the option"),
    ("cosmos://orders/entries?read_timeout=soon", "not a valid float"),
    # taken before: an endpoint refused only at the first request
    ("cosmos://orders/entries?endpoint=notaurl",
     "endpoint 'notaurl' is not an http:// or https:// URL"),
    # the driver refused it with its own ValueError at the first request
    ("cosmos://orders/entries?endpoint=https://user:pw@127.0.0.1:1/x",
     r"endpoint https://\.\.\.@127\.0\.0\.1\.\.\. holds credentials: credentials never go"),
    ("cosmos://orders/entries?endpoint=", "endpoint '' is not an http:// or https:// URL"),
])
def test_bad_uris_are_refused_naming_the_fault(account: None, uri: str, words: str) -> None:
    with pytest.raises(shardex.InvalidURI, match=words):
        shardex.open_store(uri)


def test_bad_options_are_refused(account: None) -> None:
    with pytest.raises(shardex.InvalidInput, match="read_timeout"):
        CosmosStore("d", "c", read_timeout=0)
    with pytest.raises(shardex.InvalidInput, match="container name"):
        CosmosStore("d", "")
    with pytest.raises(shardex.InvalidInput, match="charges must be one of"):
        CosmosStore("d", "c", charges="free")
    with pytest.raises(shardex.InvalidInput, match="ContainerClient"):
        CosmosStore("d", "c", client=object())  # type: ignore[arg-type]
    with pytest.raises(shardex.InvalidInput, match="does not know"):
        shardex.open_store("cosmos://d/c", region="x")


def test_credentials_come_from_the_environment_or_a_connection_string(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("COSMOS_CONNECTION_STRING", "COSMOS_KEY", "COSMOS_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(shardex.InvalidInput, match="no Cosmos DB credentials: set COSMOS_KEY"):
        connection_settings(None)
    monkeypatch.setenv("COSMOS_KEY", KEY)
    with pytest.raises(shardex.InvalidInput, match="no Cosmos DB endpoint"):
        connection_settings(None)
    assert connection_settings("https://a/") == ("https://a/", KEY)
    monkeypatch.setenv("COSMOS_KEY", "not base64!")
    with pytest.raises(shardex.InvalidInput, match="COSMOS_KEY is not a Cosmos DB account key"):
        connection_settings("https://a/")
    monkeypatch.setenv("COSMOS_CONNECTION_STRING",
                       f"AccountEndpoint=https://b.documents.azure.com:443/;AccountKey={KEY};")
    assert connection_settings(None) == ("https://b.documents.azure.com:443/", KEY)
    assert connection_settings("https://c/")[0] == "https://c/"
    monkeypatch.setenv("COSMOS_CONNECTION_STRING", "AccountEndpoint=https://b/")
    with pytest.raises(shardex.InvalidInput, match="AccountKey"):
        connection_settings(None)
    handed = type("TokenCredential", (), {"get_token": lambda self, *scopes: None})()
    assert connection_settings("https://a", handed) == ("https://a", handed)
    with pytest.raises(shardex.InvalidInput, match="without an endpoint"):
        connection_settings(None, handed)
    with pytest.raises(shardex.InvalidInput, match="credential handed in is not"):
        connection_settings("https://a", "%%%")


@pytest.mark.parametrize(("error", "kind", "words"), [
    (http_error(429, 3200, {"x-ms-retry-after-ms": "250", "x-ms-activity-id": "1"}),
     shardex.Throttled,
     "retry after 0.25 s"),
    (http_error(408), shardex.Unavailable, "may or may not"),
    (http_error(503), shardex.Unavailable, "may or may not"),
    (http_error(500), shardex.Unavailable, "may or may not"),
    (azure_errors.ServiceResponseError("read timed out"), shardex.Unavailable, "may or may not"),
    (refused_to_connect(), shardex.Unavailable,
     "connection refused); nothing was sent"),  # it said a write may have applied
    (azure_errors.ServiceRequestTimeoutError("connect timed out"), shardex.Unavailable,
     "nothing was sent"),
    # the SDK's ServiceRequestError for a connection dropped after the request went out:
    # it said nothing was sent, of a write that had applied
    (dropped_after_sending(), shardex.Unavailable, "disconnected); a write may or may not"),
    (http_error(412, kind=cosmos_errors.CosmosAccessConditionFailedError),
     shardex.ConditionFailed, "condition failed"),
    (http_error(409, kind=cosmos_errors.CosmosResourceExistsError), shardex.ConditionFailed,
     "already exists"),
    (http_error(404, 1003, kind=cosmos_errors.CosmosResourceNotFoundError), shardex.NotFound,
     "shardex cosmos create-container orders entries --endpoint https://127.0.0.1:1/"),
    (http_error(404, kind=cosmos_errors.CosmosResourceNotFoundError), shardex.NotFound,
     "item does not exist"),
    (http_error(401), shardex.StoreError, "refused the credentials"),
    (http_error(400), shardex.InvalidInput, "refused the request"),
    (http_error(413), shardex.InvalidInput, "refused the request"),
    (http_error(418), shardex.StoreError, "418"),
    # an error the service did not send (no activity id: a proxy's page): a 400 after a
    # move's commit had said it failed though it applied (a probe)
    (http_error(400, headers={}), shardex.Unavailable,
     "answered 400 without Cosmos DB's activity id"),
    (http_error(409, headers={}, kind=cosmos_errors.CosmosResourceExistsError),
     shardex.Unavailable, "a write may or may not"),
])
def test_every_sdk_error_maps_to_the_most_specific_shardex_error(error: Exception, kind: type,
                                                                 words: str) -> None:
    mapped = map_error(error, operation="replace", where="container orders/entries",
                       endpoint="https://127.0.0.1:1/", key="PENDING#3")
    assert type(mapped) is kind
    assert words in str(mapped)
    if kind is shardex.Throttled:
        assert (mapped.key, mapped.reason, mapped.retry_after) == (  # type: ignore[attr-defined]
            "PENDING#3", "429/3200", 0.25)


def test_a_throttle_waits_at_least_the_retry_after_the_service_names() -> None:
    import random

    throttled = shardex.Throttled("busy", retry_after=0.4)
    policy = RetryPolicy(base=0.01, cap=0.05)
    assert policy.decide(0, 0.0, throttled, random.Random(1)) == pytest.approx(0.4)
    assert policy.decide(0, 0.0, shardex.Throttled("busy"), random.Random(1)) <= 0.01


def test_the_documented_charges_by_document_size() -> None:
    # what the store meters where the service reports no charge
    assert cosmos_read_units(200) == 1.0  # a point read of 1 KB: 1 RU
    assert cosmos_write_units(1024) == 4.95
    assert cosmos_read_units(3 * 1024) == 1.14
    assert cosmos_write_units(64 * 1024) == 22.67
    assert _estimate("query", 0) == 1.0
    assert _estimate("query", 5 * 1024 * 1024) == pytest.approx(2 * 291.80 + 145.90)
    assert _estimate("delete", 0) == 4.95


def test_documents_round_trip_and_keys_keep_the_order() -> None:
    entry = StoredEntry("PENDING#3", "2026-11-30T05:00:00Z", "o/1?#", {"n": 10**30, "f": 2.0})
    doc = codec.entry_doc(codec.entry_partition("ix", entry.shard_key), entry, "tok")
    assert doc["pk"] == "ix!PENDING$03"
    assert not set("/\\?#") & set(doc["id"])
    back = codec.entry_from_doc(doc, "doc")
    assert back == entry
    assert type(back.attrs["f"]) is float
    placement = codec.placement_doc(codec.placement_partition("ix", "o/1?#"), "o/1?#", 3,
                                    entry, "t2", ("", "t1"))
    located = codec.placement_from_doc("o/1?#", {**placement, "_etag": "e1", "_ts": 1})
    assert (located.version, located.entry, located.token, located.history) == (
        3, entry, "t2", ("", "t1"))
    assert codec.owner_of({**doc, "t": "t2"}, located)
    assert not codec.owner_of(doc, located)
    assert codec.owner_of(doc, Placement("o/1?#", 1, None, "tok")) is False
    ids = sorted(codec.entry_id(sort, item, "t") for sort, item in
                 [("b", "x"), ("a", "z"), ("a", "y~"), ("", "q"), ("a", "y")])
    assert [codec.keys.decode_position(i) for i in ids] == sorted(
        [("b", "x"), ("a", "z"), ("a", "y~"), ("", "q"), ("a", "y")])
    after = codec.id_bounds(("a", "y"), descending=False)
    assert after is not None
    assert [i for i in ids if i > after] == ids[2:]
    with pytest.raises(shardex.MalformedItem, match="'v'"):
        codec.entry_from_doc({**doc, "v": "x"}, "doc")


def test_a_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch, account: None) -> None:
    real_import = builtins.__import__

    def no_cosmos(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("azure.cosmos"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    for module in [m for m in sys.modules if m.startswith("azure.cosmos")]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setattr(builtins, "__import__", no_cosmos)
    with pytest.raises(shardex.MissingDependency, match=r"pip install 'shardex\[cosmos\]'"):
        shardex.open_store("cosmos://orders/entries")


def test_an_endless_timeout_is_refused(account: None) -> None:
    """It was taken: a request that never times out."""
    with pytest.raises(shardex.InvalidInput, match="read_timeout must be a number of seconds "
                                                   "above 0 and at most 3600, got inf"):
        shardex.open_store("cosmos://orders/entries?read_timeout=inf")



@pytest.mark.parametrize(("database", "container"), [
    ("d", "c#1"), ("d", "c?1"), ("d", "c\\1"), ("d", "c\x01"), ("d", "c" * 256), ("d", "c "),
    ("", "c"), ("a/b", "c")])
def test_names_cosmos_db_does_not_take_are_refused_before_any_request(
        account: None, database: str, container: str) -> None:
    """'c#1' reached the service (ValueError: Id contains illegal chars, exit 1), and a
    container named with a control character or 300 characters was created."""
    with pytest.raises(shardex.InvalidInput, match=r"Cosmos DB (database|container) name "
                                                   r"must be 1 to 255 characters without"):
        CosmosStore(database, container)
    with pytest.raises(shardex.InvalidInput, match="must be 1 to 255 characters"):
        asyncio.run(create_container(database, container))


def test_a_value_cosmos_db_cannot_hold_is_refused_naming_cosmos_db(account: None) -> None:
    """The refusals named DynamoDB ('DynamoDB cannot store nan'; 'DynamoDB stores UTF-8' of
    an unpaired surrogate, "DynamoDB's sets are never empty"), and an Azure EntityProperty
    was stored as a list ([2147483648, 'Edm.Int32']) that an Azure tier then refused."""
    store = CosmosStore("d", "c")
    nested: list[Any] = []
    for _ in range(40):
        nested = [nested]
    for value, words in ((float("nan"), "Cosmos DB cannot store nan"),
                         (datetime.datetime(2026, 1, 1), "cannot be stored in Cosmos DB"),
                         ("\ud800", "surrogate\\), which Cosmos DB cannot store"),
                         (frozenset(), "an empty set cannot be stored in Cosmos DB"),
                         (nested, "levels counted from the store.s item, which Cosmos DB "
                                  "cannot store"),
                         (EntityProperty(2**31, EdmType.INT32),
                          "EntityProperty is a named tuple, which Cosmos DB cannot store")):
        with pytest.raises(shardex.InvalidInput, match=words):
            asyncio.run(store.place("ix", "o-1", StoredEntry("K", "", "o-1", {"a": value}),
                                    version=1, expected=None))


def test_an_entry_whose_id_does_not_fit_is_refused_before_any_request(account: None) -> None:
    """A sort and item id over Cosmos DB's 1,023-byte id once encoded were refused only
    after the put's placement read (a request, metered); now before any, as a shard key
    past the partition key limit is. The endpoint refuses connections: a request would
    fail as Unavailable, not InvalidKey."""
    store = shardex.open_store("cosmos://d/c?endpoint=https://127.0.0.1:1/")

    async def put() -> None:
        index = shardex.ShardedIndex(store, "ix", routing=shardex.Routing())
        await index.put("K", "o" * 512, sort="s" * 510)

    with pytest.raises(shardex.InvalidKey, match="does not fit a Cosmos DB id"):
        asyncio.run(put())
    stats = store.stats()
    assert (stats.totals.requests, stats.unavailable) == (0, 0)
    store.check_position("s" * 400, "o" * 400)
    with pytest.raises(shardex.InvalidInput, match="item id"):
        store.check_position("s", "")


def test_a_tier_on_the_index_container_by_another_spelling_is_refused(account: None) -> None:
    """The index's own container as a tier: its entries swept as a tier's copies."""
    main = "cosmos://d/c?endpoint=https://127.0.0.1:8081"
    with pytest.raises(shardex.InvalidInput, match=r"tiers\['d'\] is the index's own store"):
        shardex.ShardedIndex(main, "ix", tiers={"d": "cosmos://d/c?endpoint=https://127.0.0.1:8081/"})
    shardex.ShardedIndex(main, "ix", tiers={"d": "cosmos://d/heavy?endpoint=https://127.0.0.1:8081"})


@pytest.mark.parametrize(("credential", "said"), [
    (123, "must be the account key \\(text\\), a dict of resource tokens or a token "
          "credential \\(azure-identity\\), got 123"),
    (b"abc", "got b'abc'"),
    ("", "the credential handed in is empty"),
])
def test_a_credential_of_the_wrong_kind_is_refused_before_any_request(
        monkeypatch: pytest.MonkeyPatch, credential: Any, said: str) -> None:
    """An int or bytes ended in the SDK's TypeError ('int' object is not subscriptable)
    with its HTTP session left open; an empty key was taken."""
    monkeypatch.delenv("COSMOS_ENDPOINT", raising=False)
    with pytest.raises(shardex.InvalidInput, match=said):
        shardex.open_store("cosmos://d/c?endpoint=https://127.0.0.1:8081/",
                           credential=credential)


def test_a_credential_takes_its_endpoint_from_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """credential= without ?endpoint= was refused with COSMOS_ENDPOINT set, which the docs
    give as the endpoint's default."""
    monkeypatch.setenv("COSMOS_ENDPOINT", "https://127.0.0.1:8081/")
    store = shardex.open_store("cosmos://d/c", credential=KEY)
    assert store.uri == "cosmos://d/c?endpoint=https://127.0.0.1:8081/"
    monkeypatch.delenv("COSMOS_ENDPOINT")
    with pytest.raises(shardex.InvalidInput, match="without an endpoint"):
        shardex.open_store("cosmos://d/c", credential=KEY)


def test_a_number_past_dynamodb_s_range_is_not_called_cosmos_db_s(account: None) -> None:
    """1e308 'does not fit Cosmos DB's numbers (38 significant digits, exponent -130 to
    125)': Cosmos DB holds doubles; the range is DynamoDB's, which shardex keeps on every
    store."""
    store = CosmosStore("d", "c")
    with pytest.raises(shardex.InvalidInput, match="does not fit the numbers shardex holds "
                                                   "on Cosmos DB, DynamoDB's"):
        asyncio.run(store.place("ix", "o-1", StoredEntry("K", "", "o-1", {"a": 1e308}),
                                version=1, expected=None))
