"""The Azure Tables store without a server: URIs, credentials, error mapping, the codec."""

from __future__ import annotations

import asyncio
import builtins
import decimal
import sys
from typing import Any

import pytest
from azure.core import exceptions as azure_errors
from azure.data.tables import TableTransactionError

import shardex
from shardex.model.entries import StoredEntry
from shardex.stores.azure import AzureTablesStore, codec, keys
from shardex.stores.azure.admin import create_table
from shardex.stores.azure.client import connection_settings, map_error
from tests.servers import dropped_after_sending, refused_to_connect

AZURITE_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/"
               "K1SZFPTOtr/KBHBeksoGMGw==")


@pytest.fixture
def account(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT", "devstoreaccount1")
    monkeypatch.setenv("AZURE_STORAGE_KEY", AZURITE_KEY)


def http_error(status: int, code: str, kind: type = azure_errors.HttpResponseError) -> Any:
    error = kind(message=f"{code} happened\nRequestId:1")
    error.status_code = status
    error.error_code = code
    return error


def test_the_uri_names_a_table_and_an_endpoint_never_credentials(account: None) -> None:
    store = shardex.open_store("azure-tables://orders?endpoint=http://127.0.0.1:1/dev"
                               "&read_timeout=3")
    assert isinstance(store, AzureTablesStore)
    assert store.uri == "azure-tables://orders?endpoint=http://127.0.0.1:1/dev"
    assert store.table == "orders"
    defaulted = shardex.open_store("azure-tables://orders")
    assert defaulted.uri == ("azure-tables://orders?endpoint="
                             "https://devstoreaccount1.table.core.windows.net")


@pytest.mark.parametrize(("uri", "words"), [
    ("azure-tables://user:secret@orders", "no credentials in the URI"),
    ("azure-tables://", "needs a table name"),
    ("azure-tables://orders/path", "no path"),
    ("azure-tables://orders?account_key=x", "does not know the option"),
    ("azure-tables://orders?read_timeout=soon", "not a valid float"),
    # taken before: an endpoint refused only at the first request
    ("azure-tables://orders?endpoint=notaurl",
     "endpoint 'notaurl' is not an http:// or https:// URL"),
    # the driver refused it with its own ValueError at the first request
    ("azure-tables://orders?endpoint=https://user:pw@127.0.0.1:1/x",
     r"endpoint https://\.\.\.@127\.0\.0\.1\.\.\. holds credentials: credentials never go"),
    ("azure-tables://orders?endpoint=", "endpoint '' is not an http:// or https:// URL"),
])
def test_bad_uris_are_refused_naming_the_fault(account: None, uri: str, words: str) -> None:
    with pytest.raises(shardex.InvalidURI, match=words):
        shardex.open_store(uri)


def test_bad_options_are_refused(account: None) -> None:
    with pytest.raises(shardex.InvalidInput, match="read_timeout"):
        AzureTablesStore("orders", read_timeout=0)
    with pytest.raises(shardex.InvalidInput, match="table name"):
        AzureTablesStore("")
    with pytest.raises(shardex.InvalidInput, match="TablesClient"):
        AzureTablesStore("orders", client=object())  # type: ignore[arg-type]
    with pytest.raises(shardex.InvalidInput, match="does not know"):
        shardex.open_store("azure-tables://orders", region="x")


@pytest.mark.parametrize(("table", "words"), [
    ("my_table", "give 3 to 63 letters and digits, the first a letter"),
    ("my-table", "give 3 to 63 letters and digits"), ("ab", "give 3 to 63"),
    ("1orders", "the first a letter"), ("x" * 64, "3 to 63"), ("orders\u00e9", "letters"),
    ("Tables", "reserved by the service"), (None, "give 3 to 63"),
])
def test_a_table_name_azure_refuses_is_refused_before_any_request(
        account: None, table: str, words: str) -> None:
    """They reached the service (Azurite takes some of them, Azure answers
    InvalidResourceName), or failed at the first request."""
    with pytest.raises(shardex.InvalidInput, match=words):
        AzureTablesStore(table)
    if table is not None:
        with pytest.raises(shardex.InvalidInput, match=words):
            shardex.open_store(f"azure-tables://{table}")
        with pytest.raises(shardex.InvalidInput, match=words):
            asyncio.run(create_table(table, endpoint="http://127.0.0.1:1/a"))
    assert AzureTablesStore("Orders2026" + "x" * 53).table.startswith("Orders2026")


def test_credentials_come_from_the_environment_the_sdk_way(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT",
                 "AZURE_STORAGE_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(shardex.InvalidInput, match="AZURE_STORAGE_CONNECTION_STRING"):
        connection_settings(None)
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING",
                       f"DefaultEndpointsProtocol=http;AccountName=dev;AccountKey={AZURITE_KEY};"
                       "TableEndpoint=http://127.0.0.1:9/dev;")
    endpoint, credential = connection_settings(None)
    assert (endpoint, credential.named_key.name) == ("http://127.0.0.1:9/dev", "dev")
    assert connection_settings("http://elsewhere/x")[0] == "http://elsewhere/x"
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING",
                       "AccountName=acc;SharedAccessSignature=sv=1")
    endpoint, credential = connection_settings(None)
    assert endpoint == "https://acc.table.core.windows.net"
    assert credential.signature == "sv=1"
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", "AccountName=acc")
    with pytest.raises(shardex.InvalidInput, match="neither AccountName and AccountKey"):
        connection_settings(None)
    handed = object()
    assert connection_settings("https://a", handed) == ("https://a", handed)
    with pytest.raises(shardex.InvalidInput, match="without an endpoint"):
        connection_settings(None, handed)


MAP_WHERE = {"table": "orders", "endpoint": "http://127.0.0.1:1/dev", "key": "PENDING#3"}


@pytest.mark.parametrize(("error", "kind", "words"), [
    (http_error(503, "ServerBusy"), shardex.Throttled, "throttled: ServerBusy"),
    (http_error(500, "OperationTimedOut"), shardex.Unavailable, "may or may not"),
    (http_error(500, "InternalError"), shardex.Unavailable, "may or may not"),
    (azure_errors.ServiceResponseError("read timed out"), shardex.Unavailable, "may or may not"),
    (refused_to_connect(), shardex.Unavailable,
     "connection refused); nothing was sent"),  # it said a write may have applied
    (azure_errors.ServiceRequestTimeoutError("connect timed out"), shardex.Unavailable,
     "nothing was sent"),
    # the SDK's ServiceRequestError for a connection dropped after the request went out:
    # it said nothing was sent, of a write that had applied
    (dropped_after_sending(), shardex.Unavailable, "disconnected); a write may or may not"),
    (http_error(412, "UpdateConditionNotSatisfied", azure_errors.ResourceModifiedError),
     shardex.ConditionFailed, "condition failed"),
    (http_error(409, "EntityAlreadyExists", azure_errors.ResourceExistsError),
     shardex.ConditionFailed, "already exists"),
    (http_error(404, "TableNotFound", azure_errors.ResourceNotFoundError), shardex.NotFound,
     "shardex azure create-table orders --endpoint http://127.0.0.1:1/dev"),
    (http_error(404, "ResourceNotFound", azure_errors.ResourceNotFoundError), shardex.NotFound,
     "entity does not exist"),
    (http_error(403, "AuthenticationFailed", azure_errors.ClientAuthenticationError),
     shardex.StoreError, "refused the credentials"),
    (http_error(400, "PropertyValueTooLarge"), shardex.InvalidInput, "PropertyValueTooLarge"),
    (http_error(418, "Teapot"), shardex.StoreError, "Teapot"),
    # a timeout, or an error without the service's code (a proxy's page): it may have
    # applied. A 408 after a move's commit had said it failed, and its clean-up took the
    # item out of every listing (a probe)
    (http_error(408, ""), shardex.Unavailable, "answered 408 without an Azure error code"),
    (http_error(400, ""), shardex.Unavailable, "a write may or may not have applied"),
])
def test_every_sdk_error_maps_to_the_most_specific_shardex_error(error: Exception, kind: type,
                                                                 words: str) -> None:
    mapped = map_error(error, operation="update", table="orders",
                       endpoint="http://127.0.0.1:1/dev", key="PENDING#3")
    assert type(mapped) is kind
    assert words in str(mapped)
    if kind is shardex.Throttled:
        assert (mapped.key, mapped.reason) == ("PENDING#3", "ServerBusy")  # type: ignore[attr-defined]


def test_a_failed_transaction_maps_by_its_status_and_code() -> None:
    error = TableTransactionError(message="1:The update condition specified in the request was "
                                          "not satisfied.\nErrorCode:UpdateConditionNotSatisfied")
    error.status_code = 412
    mapped = map_error(error, operation="transact", table="t", endpoint="e")
    assert isinstance(mapped, shardex.ConditionFailed)


def test_attributes_round_trip_with_their_types() -> None:
    attrs = {"n": 12, "big": 10**30, "f": 2.0, "x": 1.5, "d": decimal.Decimal("1.10"),
             "b": b"\x00\xff", "s": "caf\u00e9 \U0001f600", "none": None, "t": True,
             "list": [1, (2, 3)], "nested": {"$b": "not bytes"}, "deep": {"a": {"$d": 1}},
             "$": {"$m": 1}}
    entry = StoredEntry("K", "s", "o-1", attrs, 3)
    [row, mirror] = codec.entry_rows("P", entry, "tok")
    assert row["RowKey"] != mirror["RowKey"]
    back = codec.entry_from_row(row, "row")
    assert back.attrs == {**attrs, "list": [1, [2, 3]]}
    assert type(back.attrs["f"]) is float
    assert type(back.attrs["d"]) is decimal.Decimal
    assert (back.shard_key, back.sort, back.item_id, back.version) == ("K", "s", "o-1", 3)


def test_large_attributes_are_split_over_properties_within_one_entity() -> None:
    text = "\U0001f600" * 40_000  # astral: two UTF-16 units each
    [row, _] = codec.entry_rows("P", StoredEntry("K", "", "o", {"blob": text}), "tok")
    chunks = [name for name in row if name.startswith("a") and name[1:].isdigit()]
    assert len(chunks) == 3
    assert all(len(row[c].encode("utf-16-le")) <= 65_536 for c in chunks)
    assert codec.entry_from_row(row, "row").attrs == {"blob": text}
    with pytest.raises(shardex.InvalidInput, match="1 MiB"):
        codec.entry_rows("P", StoredEntry("K", "", "o", {"blob": "\u00e9" * 600_000}), "t")


@pytest.mark.parametrize(("change", "words"), [
    ({"v": "x"}, "'v'"), ({"a0": "{not json"}, "not shardex's JSON"), ({"k": 3}, "'k'"),
    ({"a0": "[1]"}, "not a map"), ({"v": "0"}, "'v'"), ({"v": "\u0661"}, "'v'"),
    ({"a0": '{"n":{"$d":"x"}}'}, "not shardex's JSON")])
def test_damaged_rows_are_named(change: dict[str, Any], words: str) -> None:
    [row, _] = codec.entry_rows("P", StoredEntry("K", "", "o", {"n": 1}), "tok")
    with pytest.raises(shardex.MalformedItem, match=words):
        codec.entry_from_row({**row, **change}, "entry row X")


def test_a_row_counts_the_characters_of_its_text_towards_a_page() -> None:
    [row, _] = codec.entry_rows("P", StoredEntry("K", "s", "o", {"n": 1}), "tok")
    text = sum(len(v) for v in row.values())
    assert codec.text_size(row) == text
    assert codec.text_size({**row, "n": 5, "when": None}) == text  # other types: not text


def test_a_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch, account: None) -> None:
    real_import = builtins.__import__

    def no_azure(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("azure.data"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    for module in [m for m in sys.modules if m.startswith("azure.data")]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setattr(builtins, "__import__", no_azure)
    with pytest.raises(shardex.MissingDependency, match=r"pip install 'shardex\[azure\]'"):
        shardex.open_store("azure-tables://orders")


def test_an_endless_timeout_is_refused(account: None) -> None:
    """It was taken: a request that never times out."""
    with pytest.raises(shardex.InvalidInput, match="read_timeout must be a number of seconds "
                                                   "above 0 and at most 3600, got inf"):
        shardex.open_store("azure-tables://orders?read_timeout=inf")


@pytest.mark.parametrize("key", ["PEN#DING#3", "PENDING#x", "PENDING#03", "#records", ""])
def test_repair_refuses_a_shard_key_shardex_never_writes(account: None, key: str) -> None:
    """It queried the key, found nothing, and reported 'checked 0'."""
    async def repair() -> None:
        await AzureTablesStore("orders", endpoint="http://127.0.0.1:1/a").repair(
            "ix", shard_keys=["PENDING#1", key])

    with pytest.raises(shardex.InvalidKey):
        asyncio.run(repair())


def test_repair_refuses_an_index_name_no_key_can_hold(account: None) -> None:
    """A 600-character name: the query found nothing and 'checked 0' was reported, where
    every other command refuses the name."""
    async def repair() -> None:
        await AzureTablesStore("orders", endpoint="http://127.0.0.1:1/a").repair("i" * 600)

    with pytest.raises(shardex.InvalidKey, match="does not fit an Azure Table key"):
        asyncio.run(repair())


@pytest.mark.parametrize("timeouts", [{"read_timeout": 0.3}, {"connect_timeout": 0.3,
                                                              "read_timeout": 0.3}])
def test_a_server_that_never_answers_fails_within_the_read_timeout(
        account: None, timeouts: dict[str, float]) -> None:
    """The transport shardex builds for the SDK kept azure-core's own 300 s: a stopped
    server (SIGSTOP) held a read with read_timeout=2 past 38 s, and the CLI with it."""
    async def body() -> float:
        async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read()  # takes the request, answers nothing, until closed
            writer.close()

        server = await asyncio.start_server(swallow, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        store = AzureTablesStore("orders", endpoint=f"http://127.0.0.1:{port}/a", **timeouts)
        loop = asyncio.get_running_loop()
        began = loop.time()
        try:
            with pytest.raises(shardex.Unavailable):
                await asyncio.wait_for(store.open(), 10)
            return loop.time() - began
        finally:
            server.close()
            await server.wait_closed()

    assert asyncio.run(body()) < 5  # 0.3 s and the client's own costs, not 300 s


@pytest.mark.parametrize("operation", ["get", "query", "open"])
@pytest.mark.parametrize("backend", ["azure", "cosmos"])
def test_a_read_that_fails_says_nothing_changed(operation: str, backend: str) -> None:
    """A timed-out read ended '; a write may or may not have applied' (Cosmos DB)."""
    from shardex.stores.cosmos.client import map_error as cosmos_error

    error = azure_errors.ServiceResponseError("read timed out")
    mapped = map_error(error, operation=operation, **MAP_WHERE) if backend == "azure" else \
        cosmos_error(error, operation=operation, where="container orders/entries",
                     endpoint="https://127.0.0.1:1/", key="PENDING#3")
    assert type(mapped) is shardex.Unavailable
    assert str(mapped).endswith("; a read: nothing changed"), mapped


def test_an_account_key_that_is_no_base64_is_refused_before_any_request(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """It failed at the first request's signing, reported as the server refusing the
    credentials (exit 1); Cosmos DB refused the same key up front."""
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT", "dev")
    monkeypatch.setenv("AZURE_STORAGE_KEY", "notbase64!!")
    with pytest.raises(shardex.InvalidInput, match="AZURE_STORAGE_KEY is not an Azure "
                                                   "Storage account key"):
        connection_settings(None)
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING",
                       "AccountName=dev;AccountKey=not base64;TableEndpoint=http://h/dev;")
    with pytest.raises(shardex.InvalidInput, match="the AccountKey of "
                                                   "AZURE_STORAGE_CONNECTION_STRING is not"):
        connection_settings(None)


def test_an_entry_whose_row_key_does_not_fit_is_refused_before_any_request(
        account: None) -> None:
    """A sort and item id past Azure's 1 KiB RowKey once encoded: refused by the index
    before any request (the endpoint refuses connections: a request would fail as
    Unavailable), as a shard key past the PartitionKey limit is."""
    store = shardex.open_store("azure-tables://orders?endpoint=http://127.0.0.1:1/dev")

    async def put() -> None:
        index = shardex.ShardedIndex(store, "ix", routing=shardex.Routing())
        await index.put("K", "o" * 512, sort="s" * 510)

    with pytest.raises(shardex.InvalidKey, match="does not fit an Azure Table key"):
        asyncio.run(put())
    assert store.stats().totals.requests == 0
    store.check_position("s" * 200, "o" * 200)


def test_an_error_the_sdk_says_has_code_none_is_no_answer_of_the_service_s() -> None:
    """The SDK's text of a proxy's 400 page says 'ErrorCode:None': read as the code
    'None', it was a refusal, and a move that applied was reported failed (a probe)."""
    error = azure_errors.HttpResponseError(message="Operation returned an invalid status "
                                                   "'Bad Request'\nErrorCode:None")
    error.status_code = 400
    mapped = map_error(error, operation="update", table="orders",
                       endpoint="http://127.0.0.1:1/dev", key="#placement#o-1")
    assert type(mapped) is shardex.Unavailable, mapped
    assert "a write may or may not have applied" in str(mapped)


def test_a_query_answer_without_its_entities_is_no_answer() -> None:
    """A 200 '{}' (a proxy's) read as an empty last page, and a listing ended with 231 of
    300 entries (a probe): a page without its 'value' list is Unavailable, tried again."""
    from shardex.stores.azure.wire import decode_page

    for body in (b"{}", b"[]", b'{"value": null}'):
        with pytest.raises(shardex.Unavailable, match="no 'value' list"):
            decode_page(body, lambda entity: entity)
    assert decode_page(b'{"value": []}', lambda entity: entity) == []


def test_an_index_whose_name_leaves_no_room_for_placements_is_refused_as_it_is_built(
        account: None) -> None:
    """An index named with 498 to 504 characters opened (its records' key fit) and then
    refused every write (its placements' did not): it is refused as it is built, before
    any request (the endpoint refuses connections). Its records' key stays readable, so
    a table that holds one still lists its indexes."""
    store = shardex.open_store(
        "azure-tables://orders?endpoint=http://127.0.0.1:1/devstoreaccount1")
    assert shardex.ShardedIndex(store, "N" * 497).name == "N" * 497
    assert keys.record_partition("N" * 498)
    for name in ("N" * 498, "N" * 504, "é" * 200):
        with pytest.raises(shardex.InvalidKey, match=r"the placements of index '(N+|é+)' "
                                                     r"\(with an item id of one character\) "
                                                     "does not fit"):
            shardex.ShardedIndex(store, name)


def test_a_tier_on_the_index_table_by_another_spelling_is_refused(account: None) -> None:
    """Azure's table names know no case, and an endpoint's trailing '/' names the same
    account: the index's own table as a tier (its entries swept as a tier's copies)."""
    endpoint = "http://127.0.0.1:10002/devstoreaccount1"
    with pytest.raises(shardex.InvalidInput, match=r"tiers\['d'\] is the index's own store"):
        shardex.ShardedIndex(f"azure-tables://orders?endpoint={endpoint}", "ix",
                             tiers={"d": f"azure-tables://ORDERS?endpoint={endpoint}/"})
    shardex.ShardedIndex(f"azure-tables://orders?endpoint={endpoint}", "ix",
                         tiers={"d": f"azure-tables://heavy?endpoint={endpoint}"})


@pytest.mark.parametrize(("variable", "trusted"), [(None, False), ("HTTPS_PROXY", True),
                                                   ("http_proxy", True)])
def test_the_transport_trusts_the_environment_when_it_names_a_proxy(
        monkeypatch: pytest.MonkeyPatch, variable: str | None, trusted: bool) -> None:
    """Trusted always, aiohttp looked up the proxy and a netrc in a worker thread on every
    request, for nothing where the environment names no proxy: twice a read's CPU."""
    from shardex.stores.azure.transport import aio_transport

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                 "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    if variable is not None:
        monkeypatch.setenv(variable, "http://127.0.0.1:3128")

    async def made() -> bool:
        transport = aio_transport(4)
        try:
            return bool(transport.session.trust_env)
        finally:
            await transport.close()

    assert asyncio.run(made()) is trusted


@pytest.mark.parametrize("store", ["azure", "cosmos"])
@pytest.mark.parametrize("endpoint", ["", "  "])
def test_an_empty_endpoint_is_refused_not_taken_from_the_environment(
        account: None, endpoint: str, store: str) -> None:
    """``--endpoint "$EP"`` with EP unset created the table (or container) in the account
    the environment names (Azure's and Cosmos DB's connection settings, one check)."""
    import importlib

    connection_settings = importlib.import_module(
        f"shardex.stores.{store}.client").connection_settings
    with pytest.raises(shardex.InvalidInput, match="endpoint is empty: give its URL, or "
                       "leave it out to take the one the environment names"):
        connection_settings(endpoint)
