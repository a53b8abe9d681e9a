"""The DynamoDB store, ``dynamodb://``: index-table mode and GSI mode over one async core.

- Index-table mode, ``dynamodb://TABLE?region=R&endpoint_url=URL``: shardex writes
  the entries into a table of its own (``shardex dynamodb create-table TABLE``); see
  ``shardex.stores.dynamodb.table`` for the layout. One index per table: the first
  index to write to the table owns it, and another index name is refused.
- GSI mode, ``dynamodb://TABLE?gsi=INDEX&key_attribute=A&sort_attribute=S&id_attribute=I``:
  the application owns the base table and DynamoDB maintains the GSI; shardex reads
  the GSI and sets or removes the key attributes on the base items; see
  ``shardex.stores.dynamodb.gsi``. The routing record lives in a small metadata table,
  ``<TABLE>-shardex`` unless ``meta_table=`` says otherwise
  (``shardex dynamodb create-meta-table TABLE``).

The driver is aiobotocore, or an application's own boto3 client or session (its
calls then run in worker threads). Region, endpoint and credentials come from the
URI (``region``, ``endpoint_url``, ``profile``) or the usual AWS environment and
config files. Every driver error is mapped to shardex's errors with the driver's
exception chained (``shardex.stores.dynamodb.client.map_error``), and every request
reports the capacity DynamoDB says it consumed (``ReturnConsumedCapacity``) on the
store's meter: a transaction's total is shared over the keys it touched by their items'
write units, DynamoDB's own rule. DynamoDB does not say which partition holds a key.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

from shardex.clock import Clock
from shardex.errors import (
    ConditionFailed,
    InvalidInput,
    InvalidURI,
    MalformedItem,
    NotFound,
    ShardexError,
    StoreInUse,
    Unavailable,
)
from shardex.keys import OWNER_KEY, record_key
from shardex.model.entries import Placement, Position, Record, StoredEntry
from shardex.stores.base import Store
from shardex.stores.dynamodb.client import (
    DynamoDBClient,
    adapt_client,
    describe_table,
    map_error,
    mapped_call,
)
from shardex.stores.dynamodb.codec import (
    record_from_item,
    record_item,
    record_item_key,
    record_partition,
)
from shardex.stores.dynamodb.gsi import GsiLayout
from shardex.stores.dynamodb.layout import Layout, units_of
from shardex.stores.dynamodb.source import BorrowedClient, SourceGsiLayout, SourceTableLayout
from shardex.stores.dynamodb.table import TableLayout
from shardex.stores.metered import Recorder
from shardex.stores.uri import (
    DYNAMODB_CONNECTIONS,
    StoreURI,
    check_client,
    check_keywords,
    check_settings,
    endpoint_of,
)

__all__ = ["DynamoDBStore"]

_TABLE_NAME = re.compile(r"[A-Za-z0-9_.-]{3,255}")
_CACHED_PLACEMENTS = 4096
# option -> type, for URI options
_OPTIONS: dict[str, type] = {
    "region": str, "endpoint_url": str, "profile": str, "gsi": str, "key_attribute": str,
    "sort_attribute": str, "id_attribute": str, "meta_table": str, "version_attribute": str,
    "token_attribute": str, "history_attribute": str, "sort_owner": str,
    "connect_timeout": float, "read_timeout": float, "max_connections": int,
}
_GSI_OPTIONS = ("gsi", "key_attribute", "sort_attribute", "id_attribute")
_DEFAULTS: dict[str, Any] = {"version_attribute": "shardex_version",
                             "token_attribute": "shardex_token",
                             "history_attribute": "shardex_history", "sort_owner": "shardex",
                             "connect_timeout": 5.0, "read_timeout": 30.0,
                             "max_connections": DYNAMODB_CONNECTIONS}


def _check_table_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not _TABLE_NAME.fullmatch(name):
        raise InvalidInput(f"{what} {name!r} is not a DynamoDB table name: 3 to 255 of "
                           "a-z, A-Z, 0-9, '_', '-' and '.'")
    return name


class DynamoDBStore(Store):
    """A store on DynamoDB, in index-table mode or (with ``gsi``) GSI mode.

    ``client`` (an aiobotocore or boto3 client, or a DynamoDBClient) or ``session``
    (aiobotocore, boto3 or botocore) may be handed in; a client handed in is not
    closed by the store and keeps its own retry settings (set
    ``retries={"total_max_attempts": 1}`` so shardex's per-shard retries are not
    multiplied). Without them aiobotocore is used, imported here: MissingDependency
    names ``pip install 'shardex[dynamodb]'`` when it is missing. ``max_connections`` is
    the pool of a client the store builds (the requests it carries at once: a fan-out's
    bound; a client handed in keeps its own).

    Opening the store checks, with DescribeTable, that the table (and in GSI mode
    the index and the metadata table) exists with the key schema needed: NotFound or
    StoreError otherwise, naming the table and the command that creates it.
    ``stats()`` returns the consumed capacity per shard key. ``clock`` times requests.
    """

    scheme = "dynamodb"
    batch_locate = 100  # BatchGetItem's most keys

    def __init__(self, table: str, *, region: str | None = None,
                 endpoint_url: str | None = None, profile: str | None = None,
                 client: Any = None, session: Any = None, gsi: str | None = None,
                 key_attribute: str | None = None, sort_attribute: str | None = None,
                 id_attribute: str | None = None, meta_table: str | None = None,
                 version_attribute: str = "shardex_version",
                 token_attribute: str = "shardex_token",
                 history_attribute: str = "shardex_history", sort_owner: str | None = None,
                 connect_timeout: float = 5.0, read_timeout: float = 30.0,
                 max_connections: int = DYNAMODB_CONNECTIONS, clock: Clock | None = None) -> None:
        self.table = _check_table_name(table, "table")
        given = {"gsi": gsi, "key_attribute": key_attribute, "sort_attribute": sort_attribute,
                 "id_attribute": id_attribute}
        missing = [name for name, value in given.items() if not value]
        if gsi and missing:
            raise InvalidInput(f"dynamodb:// GSI mode needs the options {', '.join(_GSI_OPTIONS)}; "
                               f"missing: {', '.join(missing)}")
        if not gsi and len(missing) < len(given):
            raise InvalidInput("dynamodb:// key_attribute, sort_attribute and id_attribute are "
                               "GSI-mode options: add gsi=INDEX, or drop them")
        gsi_only: dict[str, str | None] = {
            "meta_table": meta_table, "token_attribute": token_attribute,
            "history_attribute": history_attribute, "sort_owner": sort_owner}
        for name, option in {**gsi_only, "version_attribute": version_attribute}.items():
            if not gsi and option is not None and option != _DEFAULTS.get(name):
                raise InvalidInput(f"dynamodb:// {name} is a GSI-mode option (index-table mode "
                                   "keeps placements and the routing record in its own table)")
        check_client("dynamodb:// option ", connect_timeout=connect_timeout,
                     read_timeout=read_timeout, max_connections=max_connections)
        self._settings: dict[str, Any] = {
            "region": region, "endpoint_url": endpoint_url, "profile": profile, **given,
            "version_attribute": version_attribute, **gsi_only,
            "connect_timeout": connect_timeout, "read_timeout": read_timeout,
            "max_connections": max_connections}
        self._layout: Layout
        if gsi:
            assert key_attribute is not None
            assert sort_attribute is not None
            assert id_attribute is not None
            _check_table_name(gsi, "gsi")
            meta = _check_table_name(meta_table or f"{table}-shardex", "meta_table")
            self._layout = GsiLayout(self._request, self.table, gsi=gsi,
                                     key_attribute=key_attribute, sort_attribute=sort_attribute,
                                     id_attribute=id_attribute,
                                     version_attribute=version_attribute,
                                     token_attribute=token_attribute,
                                     history_attribute=history_attribute,
                                     sort_owner=sort_owner, meta_table=meta)
        else:
            self._layout = TableLayout(self._request, self.table)
        super().__init__(capabilities=self._layout.capabilities, clock=clock)
        self._client: DynamoDBClient = adapt_client(
            client=client, session=session, region=region, endpoint_url=endpoint_url,
            profile=profile, connect_timeout=connect_timeout, read_timeout=read_timeout,
            max_connections=max_connections)
        self._owner: str | None = None

    @classmethod
    def from_uri(cls, uri: StoreURI, **options: Any) -> DynamoDBStore:
        """Build the store from ``dynamodb://TABLE?option=value``; keyword options win."""
        cls.check_uri(uri)
        check_keywords("dynamodb", options, set(_OPTIONS) | {"client", "session", "clock"})
        settings = uri.take(_OPTIONS)
        try:
            return cls(uri.location, **{**settings, **options})
        except InvalidInput as exc:
            if isinstance(exc, InvalidURI) or not settings:
                raise
            raise InvalidURI(f"{uri.raw}: {exc}") from exc

    @classmethod
    def check_uri(cls, uri: StoreURI) -> None:
        if uri.username or uri.password:
            raise InvalidURI("dynamodb:// takes no credentials in the URI: use the AWS "
                             "environment, config files or the profile= option")
        if uri.path:
            raise InvalidURI(f"dynamodb:// takes a table name and options, no path: {uri.raw!r}")
        if not uri.location:
            raise InvalidURI(f"dynamodb:// needs a table name: dynamodb://TABLE, got {uri.raw!r}")
        try:
            _check_table_name(uri.location, "table")
        except InvalidInput as exc:  # the URI's table name: the URI's fault
            raise InvalidURI(f"{exc}: {uri.raw!r}") from None
        check_settings(uri.take(_OPTIONS), connections=DYNAMODB_CONNECTIONS,
                       endpoint="endpoint_url", what="endpoint_url",
                       where="dynamodb:// option ")

    @property
    def uri(self) -> str:
        """``dynamodb://TABLE`` with the options that differ from their defaults."""
        options = sorted((name, str(value)) for name, value in self._settings.items()
                         if value is not None and value != _DEFAULTS.get(name))
        query = urlencode(options, safe=":/")
        return f"dynamodb://{self.table}" + (f"?{query}" if query else "")

    @property
    def holds(self) -> Hashable:
        """The endpoint (the one the region resolves names, where none is given) and the
        table: a GSI-mode store's entries are its base table's items. The region as
        written in a URI ('' where the environment gives it) took the index's own table
        for a tier of another."""
        return ("dynamodb", endpoint_of(self._client.location), self.table)

    @property
    def gsi_mode(self) -> bool:
        """True in GSI mode (the application owns the items), False in index-table mode."""
        return isinstance(self._layout, GsiLayout)

    @property
    def gsi(self) -> GsiLayout:
        """The GSI-mode layout (names of the GSI and attributes); InvalidInput otherwise."""
        if not isinstance(self._layout, GsiLayout):
            raise InvalidInput(f"{self.uri} is in index-table mode, not GSI mode (gsi=INDEX)")
        return self._layout

    def plain_index(self, source: str, attribute: str, *, id_attribute: str | None = None,
                    sort_attribute: str | None = None) -> DynamoDBStore:
        """A read-only store on a plain index of this table keyed by the raw ``attribute``.

        A value ``V`` is read from it as the one shard key ``V``. In GSI mode ``source``
        is another GSI of the base table, read with this store's id, sort and version
        attributes (the sort the application's); in index-table mode it is a table the
        application keeps, its rows keyed by ``attribute``, with the item id in
        ``id_attribute`` and the sort in ``sort_attribute`` (both needed then). It shares
        this store's client (and never closes it); opening it checks the index.
        """
        if not self.gsi_mode:
            if id_attribute is None or sort_attribute is None:
                raise InvalidInput(f"{self.uri}: a plain index table is read with its id "
                                   "and sort attributes")
            table = DynamoDBStore(self.table, client=BorrowedClient(self._client),
                                  clock=self.clock)
            table._layout = SourceTableLayout(table._request, self._layout, source,
                                              attribute=attribute, id_attribute=id_attribute,
                                              sort_attribute=sort_attribute)
            return table
        if id_attribute is not None or sort_attribute is not None:
            raise InvalidInput(f"{self.uri}: a plain GSI is read with this store's id and "
                               "sort attributes, not others")
        gsi = DynamoDBStore(self.table, client=BorrowedClient(self._client),
                            clock=self.clock, **{
                                name: self._settings[name] for name in (
                                    "key_attribute", "sort_attribute", "id_attribute",
                                    "meta_table", "version_attribute", "token_attribute",
                                    "history_attribute")},
                            gsi=source, sort_owner="application")
        gsi._layout = SourceGsiLayout(gsi._request, self.gsi, source, attribute)
        return gsi

    def follow_application_sort(self) -> None:
        """Read the sort attribute from now on, and never write it (GSI mode).

        For an index whose GSI keeps the application's own sort attribute (one adopted
        from a plain GSI): unless the URI says ``sort_owner=shardex``, the store then has
        ``capabilities.writes_sort`` False, as with ``sort_owner=application``. Nothing
        changes in index-table mode.
        """
        if isinstance(self._layout, GsiLayout) and self._layout.application_sort():
            self.capabilities = self._layout.capabilities

    @property
    def client(self) -> DynamoDBClient:
        """The client adapter the store calls DynamoDB through."""
        return self._client

    @property
    def connections(self) -> int | None:
        """The client's connection pool (``max_pool_connections``: 64 in those shardex builds)."""
        return self._client.connections

    # -- connection --------------------------------------------------------------------

    async def _connect(self) -> None:
        try:
            await self._client.open()
        except ShardexError:  # already shardex's: as it is, not its own cause
            raise
        except Exception as exc:
            raise map_error(exc, operation="connect", target=f"table {self.table!r}",
                            endpoint=self._client.endpoint) from exc
        try:
            await self._layout.check(self._describe)
            await self._check_owner_record()
        except BaseException:
            await self._client.close()
            raise

    async def _disconnect(self) -> None:
        await self._client.close()

    async def _check_owner_record(self) -> None:
        """Fail at open, not at the first write, on an owner record in another shape."""
        await self._read_owner()

    async def _read_owner(self) -> str | None:
        """The index the owner record names (None: no record yet), strongly consistent."""
        table = self._layout.records_table
        response = await mapped_call(
            self._client, "GetItem", f"table {table!r}", meter=self.meter, clock=self.clock,
            TableName=table, ConsistentRead=True,
            Key={"pk": {"S": OWNER_KEY}, "sk": {"S": self._layout.owner_scope}})
        return self._owner_of(response.get("Item"))

    async def indexes(self) -> list[str]:
        """The one index the table holds, as its owner record names it ([]: none yet)."""
        owner = await self._read_owner()
        return [] if owner is None else [owner]

    def _owner_of(self, item: Mapping[str, Any] | None) -> str | None:
        """The index an owner record names (None: no record); MalformedItem if it is damaged."""
        if item is None:
            return None
        value = item.get("index")
        owner = value.get("S") if isinstance(value, Mapping) else None
        if not isinstance(owner, str) or not owner:
            raise MalformedItem(
                f"the owner record ({OWNER_KEY}, {self._layout.owner_scope}) in table "
                f"{self._layout.records_table!r} is damaged: its attribute 'index' is "
                f"{value!r}, not the name of the index the table serves; delete the record "
                "or set it to the index's name")
        return owner

    async def _describe(self, table: str) -> Mapping[str, Any]:
        try:
            description = await describe_table(self._client, table, clock=self.clock)
        except NotFound as exc:
            raise NotFound(f"table {table!r} does not exist at {self._client.endpoint}; "
                           f"create it with: {self._create_command(table)}") from exc
        status = description.get("TableStatus", "ACTIVE")
        if status not in ("ACTIVE", "UPDATING"):
            raise NotFound(f"table {table!r} is {status} at {self._client.endpoint}, "
                           "not ACTIVE")
        return description

    def _create_command(self, table: str) -> str:
        where = ""
        for option in ("region", "endpoint_url"):
            if self._settings[option]:
                where += f" --{option.replace('_', '-')} {self._settings[option]}"
        if not self.gsi_mode:
            return f"shardex dynamodb create-table {table}{where}"
        if table == self._layout.records_table:
            name = "" if table == f"{self.table}-shardex" else f" --name {table}"
            return f"shardex dynamodb create-meta-table {self.table}{name}{where}"
        return ("your application's own infrastructure (the base table and its GSI are the "
                "application's in GSI mode)")

    async def _request(self, rec: Recorder, operation: str, params: dict[str, Any], *,
                       target: str, weights: Sequence[tuple[str, float]],
                       write: bool) -> dict[str, Any]:
        """Call DynamoDB as one request of ``rec``: map its errors, report its units.

        A write's units are shared over ``weights``; a read counts on its first key. A
        throttle counts on the last key (the entry written, for a transaction).
        """
        key = weights[-1][0] if write else weights[0][0]
        rec.request(key, write=write)
        try:
            response = await self._client.call(operation, **params)
        except ShardexError:  # already shardex's: as it is, not its own cause
            raise
        except Exception as exc:
            raise map_error(exc, operation=operation, target=target,
                            endpoint=self._client.endpoint, key=key) from exc
        missing = _missing(operation, params, response)
        if missing is not None:
            # a 200 that is not DynamoDB's answer (a proxy's page, '{}'): a Query read as
            # an empty last page had ended listings early (170 of 400 entries), and a
            # write taken for applied had reported ok (a probe)
            raise Unavailable(f"{operation} on {target}: {self._client.endpoint} answered "
                              f"without {missing}: not DynamoDB's own answer"
                              + ("; the write may or may not have been applied" if write
                                 else ""))
        if write:
            rec.share(units_of(response), weights)
        else:
            rec.charge(key, units_of(response))
        return response

    # -- the owner of the table ------------------------------------------------------

    async def _own(self, namespace: str, rec: Recorder, *, claim: bool) -> None:
        """Check (and on a write, claim) that ``namespace`` is the index the table holds."""
        if self._owner == namespace:
            return
        if self._owner is not None:
            raise self._not_owner(namespace, self._owner)
        table, scope = self._layout.records_table, self._layout.owner_scope
        key = {"pk": {"S": OWNER_KEY}, "sk": {"S": scope}}
        if claim:
            try:
                await self._request(
                    rec, "PutItem",
                    {"TableName": table, "Item": {**key, "index": {"S": namespace}},
                     "ConditionExpression": "attribute_not_exists(pk) OR #i = :i",
                     "ExpressionAttributeNames": {"#i": "index"},
                     "ExpressionAttributeValues": {":i": {"S": namespace}},
                     "ReturnConsumedCapacity": "TOTAL"},
                    target=f"table {table!r}", weights=[(OWNER_KEY, 1.0)], write=True)
            except ConditionFailed:
                pass
            else:
                self._owner = namespace
                return
        response = await self._request(
            rec, "GetItem", {"TableName": table, "Key": key, "ConsistentRead": True,
                             "ReturnConsumedCapacity": "TOTAL"},
            target=f"table {table!r}", weights=[(OWNER_KEY, 1.0)], write=False)
        owner = self._owner_of(response.get("Item"))
        if owner is None:
            return  # nobody owns it yet, and a read does not claim it
        if owner != namespace:
            raise self._not_owner(namespace, owner)
        self._owner = namespace

    def _not_owner(self, namespace: str, owner: str) -> StoreInUse:
        if self.gsi_mode:
            return StoreInUse(
                f"{self._layout.target} already serves the index {owner!r}; it cannot also "
                f"serve {namespace!r}: one shardex index per GSI")
        return StoreInUse(
            f"table {self.table!r} already holds the index {owner!r}; it cannot also hold "
            f"{namespace!r}: index-table mode keeps one index per table, so give {namespace!r} "
            f"a table of its own (shardex dynamodb create-table TABLE)")

    # -- entries --------------------------------------------------------------------

    async def _locate(self, namespace: str, item_id: str, rec: Recorder) -> Placement | None:
        """One strongly consistent GetItem."""
        await self._own(namespace, rec, claim=False)
        return await self._layout.locate(item_id, rec)

    async def _locate_many(self, namespace: str, item_ids: list[str], rec: Recorder
                           ) -> tuple[dict[str, Placement | None], list[str]]:
        """One strongly consistent BatchGetItem (``batch_locate``: 100 keys)."""
        await self._own(namespace, rec, claim=False)
        return await self._layout.locate_many(item_ids, rec)

    async def _place(self, namespace: str, item_id: str, entry: StoredEntry | None,
                     version: int, expected: Placement | None, token: str,
                     rec: Recorder) -> None:
        """Index-table mode: one TransactWriteItems; GSI mode: one UpdateItem."""
        await self._own(namespace, rec, claim=True)
        await self._layout.place(namespace, item_id, entry, version=version,
                                 expected=expected, token=token, rec=rec)

    async def _query(self, namespace: str, shard_key: str, after: Position | None,
                     until: Position | None, descending: bool, limit: int,
                     rec: Recorder) -> tuple[list[StoredEntry], Position | None]:
        """One Query page: ``Limit`` is ``limit``, DynamoDB also stops at 1 MB."""
        await self._own(namespace, rec, claim=False)
        return await self._layout.query(shard_key, after=after, until=until,
                                        descending=descending, limit=limit, rec=rec)

    async def _count(self, namespace: str, shard_key: str, rec: Recorder) -> int:
        """Select=COUNT, every page."""
        await self._own(namespace, rec, claim=False)
        return await self._layout.count(shard_key, rec)

    def _key_attributes(self, shard_key: str, sort: str | None,
                        item_id: str) -> dict[str, Any]:
        """GSI mode: ``{key_attribute: shard_key, sort_attribute: sort NUL item id}``.

        Index-table mode raises CapabilityMissing.
        """
        return self._layout.key_attributes(shard_key, sort, item_id)

    # -- records ----------------------------------------------------------------------

    def _record_name(self, namespace: str, key: str) -> str:
        return f"record {key!r} of index {namespace!r} in table {self._layout.records_table!r}"

    async def _get_record(self, namespace: str, key: str, rec: Recorder) -> Record | None:
        """A strongly consistent GetItem."""
        await self._own(namespace, rec, claim=False)
        table = self._layout.records_table
        response = await self._request(
            rec, "GetItem", {"TableName": table, "Key": record_item_key(namespace, key),
                             "ConsistentRead": True, "ReturnConsumedCapacity": "TOTAL"},
            target=f"table {table!r}", weights=[(record_key(key), 1.0)], write=False)
        item = response.get("Item")
        return None if item is None else record_from_item(item, self._record_name(namespace, key))

    async def _put_record(self, namespace: str, key: str, body: Mapping[str, Any],
                          revision: int, expected: int | None, rec: Recorder) -> None:
        """A conditional PutItem."""
        item = record_item(namespace, key, body, revision)
        await self._own(namespace, rec, claim=True)
        table = self._layout.records_table
        params: dict[str, Any] = {"TableName": table, "Item": item,
                                  "ExpressionAttributeNames": {"#r": "revision"},
                                  "ReturnConsumedCapacity": "TOTAL"}
        if expected is None:
            params["ConditionExpression"] = "attribute_not_exists(#r)"
        else:
            params["ConditionExpression"] = "#r = :r"
            params["ExpressionAttributeValues"] = {":r": {"N": str(expected)}}
        try:
            await self._request(rec, "PutItem", params, target=f"table {table!r}",
                                weights=[(record_key(key), 1.0)], write=True)
        except ConditionFailed as exc:
            raise ConditionFailed(
                f"record {key!r} of {namespace!r} expected revision "
                f"{'absent' if expected is None else expected}: another writer changed it "
                "first") from exc

    async def _list_records(self, namespace: str, prefix: str,
                            rec: Recorder) -> dict[str, Record]:
        """A strongly consistent Query of the namespace's records, every page."""
        await self._own(namespace, rec, claim=False)
        table = self._layout.records_table
        params: dict[str, Any] = {
            "TableName": table, "KeyConditionExpression": "pk = :p",
            "ExpressionAttributeValues": {":p": {"S": record_partition(namespace)}},
            "ConsistentRead": True, "ReturnConsumedCapacity": "TOTAL"}
        if prefix:
            params["KeyConditionExpression"] += " AND begins_with(sk, :s)"
            params["ExpressionAttributeValues"][":s"] = {"S": prefix}
        records: dict[str, Record] = {}
        while True:
            response = await self._request(rec, "Query", params, target=f"table {table!r}",
                                           weights=[(record_key(prefix), 1.0)], write=False)
            for item in response.get("Items", []):
                records[item["sk"]["S"]] = record_from_item(
                    item, self._record_name(namespace, item["sk"]["S"]))
            last = response.get("LastEvaluatedKey")
            if last is None:
                return records
            params["ExclusiveStartKey"] = last

    async def _delete_record(self, namespace: str, key: str, expected: int,
                             rec: Recorder) -> None:
        """A conditional DeleteItem."""
        await self._own(namespace, rec, claim=True)
        table = self._layout.records_table
        try:
            await self._request(
                rec, "DeleteItem",
                {"TableName": table, "Key": record_item_key(namespace, key),
                 "ConditionExpression": "#r = :r", "ExpressionAttributeNames": {"#r": "revision"},
                 "ExpressionAttributeValues": {":r": {"N": str(expected)}},
                 "ReturnConsumedCapacity": "TOTAL"},
                target=f"table {table!r}", weights=[(record_key(key), 1.0)], write=True)
        except ConditionFailed as exc:
            raise ConditionFailed(
                f"delete of record {key!r} of {namespace!r} expected revision {expected}: "
                "it is absent or another writer changed it first") from exc


def _missing(operation: str, params: Mapping[str, Any],
             response: Mapping[str, Any]) -> str | None:
    """What a successful answer of ``operation`` lacks that DynamoDB always sends: the
    items of a Query or Scan (its count, when it counts), the consumed capacity asked
    for (None: nothing is missing)."""
    if operation in ("Query", "Scan"):
        counting = params.get("Select") == "COUNT"  # a count has no Items, only Count
        if counting and not isinstance(response.get("Count"), int):
            return "its Count"
        if not counting and not isinstance(response.get("Items"), list):
            return "its Items"
    if params.get("ReturnConsumedCapacity") in ("TOTAL", "INDEXES") \
            and "ConsumedCapacity" not in response:
        return "the ConsumedCapacity asked for"
    return None
