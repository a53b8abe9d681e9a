"""Creating the DynamoDB tables shardex uses, and waiting until they are ACTIVE.

- ``create_index_table``: a table for index-table mode (``pk`` S HASH, ``sk`` S RANGE).
- ``create_meta_table``: the small table that holds the routing record in GSI mode,
  ``<TABLE>-shardex`` by default (same key schema).
- ``create_gsi_table``: a base table keyed by an id attribute with a GSI on a shard
  key attribute and a sort attribute, as GSI mode expects; for examples, tests and
  applications starting from nothing (an existing application adds the GSI itself).

Each takes the connection arguments of DynamoDBStore (``region``, ``endpoint_url``,
``profile``, ``client``, ``session``), creates the table on demand (PAY_PER_REQUEST)
or provisioned, and waits up to ``wait`` seconds (0: not at all) until it is
ACTIVE, polling DescribeTable every ``poll`` seconds. Errors are mapped like the store's;
a table that already exists raises ConditionFailed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from shardex.errors import ConditionFailed, InvalidInput, ShardexError, Unavailable
from shardex.stores.dynamodb.client import DynamoDBClient, adapt_client, map_error, mapped_call

__all__ = ["Billing", "create_gsi_table", "create_index_table", "create_meta_table",
           "delete_table"]

Billing = Literal["on-demand", "provisioned"]


def _billing(billing: str, read_units: int | None, write_units: int | None,
             ) -> dict[str, Any]:
    if billing == "on-demand":
        if read_units is not None or write_units is not None:
            raise InvalidInput("read and write units are for provisioned billing; "
                               "on-demand tables take none")
        return {"BillingMode": "PAY_PER_REQUEST"}
    if billing != "provisioned":
        raise InvalidInput(f"billing must be 'on-demand' or 'provisioned', got {billing!r}")
    for name, units in (("read_units", read_units), ("write_units", write_units)):
        if isinstance(units, bool) or not isinstance(units, int) or units < 1:
            raise InvalidInput(f"provisioned billing needs {name} >= 1, got {units!r}")
    return {"BillingMode": "PROVISIONED",
            "ProvisionedThroughput": {"ReadCapacityUnits": read_units,
                                      "WriteCapacityUnits": write_units}}


async def _with_client(work: Callable[[DynamoDBClient], Awaitable[None]],
                       connection: dict[str, Any]) -> None:
    client = adapt_client(**connection)
    await client.open()
    try:
        await work(client)
    finally:
        await client.close()


async def _create(client: DynamoDBClient, table: str, params: dict[str, Any], *,
                  wait: float, poll: float) -> None:
    try:
        await client.call("CreateTable", TableName=table, **params)
    except ShardexError:  # already shardex's: as it is, not its own cause
        raise
    except Exception as exc:
        code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
        if code == "ResourceInUseException":
            raise ConditionFailed(f"table {table!r} already exists at {client.endpoint}") \
                from exc
        raise map_error(exc, operation="CreateTable", target=f"table {table!r}",
                        endpoint=client.endpoint) from exc
    if wait > 0:
        await wait_active(client, table, within=wait, poll=poll)


async def wait_active(client: DynamoDBClient, table: str, *, within: float = 300.0,
                      poll: float = 1.0) -> None:
    """Wait until ``table`` and its indexes are ACTIVE; Unavailable after ``within`` s."""
    deadline = time.monotonic() + within
    while True:
        response = await mapped_call(client, "DescribeTable", f"table {table!r}",
                                     TableName=table)
        description = response["Table"]
        statuses = [description.get("TableStatus")] + [
            index.get("IndexStatus") for index in description.get("GlobalSecondaryIndexes") or []]
        if all(status == "ACTIVE" for status in statuses):
            return
        if time.monotonic() >= deadline:
            raise Unavailable(f"table {table!r} is still not ACTIVE after {within:g} s "
                              f"({', '.join(map(str, statuses))})")
        await asyncio.sleep(poll)


_PK_SK = {
    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"},
                  {"AttributeName": "sk", "KeyType": "RANGE"}],
    "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"},
                             {"AttributeName": "sk", "AttributeType": "S"}],
}


async def create_index_table(table: str, *, billing: Billing = "on-demand",
                             read_units: int | None = None, write_units: int | None = None,
                             wait: float = 300.0, poll: float = 1.0,
                             **connection: Any) -> None:
    """Create an index-table-mode table (``pk`` S HASH, ``sk`` S RANGE) and wait for it.

    ``connection``: ``region``, ``endpoint_url``, ``profile``, ``client`` or ``session``
    as for DynamoDBStore. Raises ConditionFailed if the table exists.
    """
    params = {**_PK_SK, **_billing(billing, read_units, write_units)}

    async def work(client: DynamoDBClient) -> None:
        await _create(client, table, params, wait=wait, poll=poll)

    await _with_client(work, connection)


async def create_meta_table(table: str, *, name: str | None = None,
                            billing: Billing = "on-demand", read_units: int | None = None,
                            write_units: int | None = None, wait: float = 300.0,
                            poll: float = 1.0,
                            **connection: Any) -> str:
    """Create the GSI-mode metadata table of base table ``table``; return its name.

    The name is ``<table>-shardex`` unless ``name`` is given (then pass the same
    ``meta_table=`` to the store).
    """
    meta = name or f"{table}-shardex"
    await create_index_table(meta, billing=billing, read_units=read_units,
                             write_units=write_units, wait=wait, poll=poll,
                             **connection)
    return meta


async def create_gsi_table(table: str, *, gsi: str, key_attribute: str, sort_attribute: str,
                           id_attribute: str, projection: str = "ALL",
                           billing: Billing = "on-demand", read_units: int | None = None,
                           write_units: int | None = None, wait: float = 300.0,
                           poll: float = 1.0,
                           **connection: Any) -> None:
    """Create a base table keyed by ``id_attribute`` with the GSI that GSI mode reads.

    The GSI ``gsi`` has ``key_attribute`` (S) as HASH and ``sort_attribute`` (S) as
    RANGE and projects ``projection`` (ALL or KEYS_ONLY). The metadata table is not
    created here: see ``create_meta_table``.
    """
    billed = _billing(billing, read_units, write_units)
    index: dict[str, Any] = {
        "IndexName": gsi,
        "KeySchema": [{"AttributeName": key_attribute, "KeyType": "HASH"},
                      {"AttributeName": sort_attribute, "KeyType": "RANGE"}],
        "Projection": {"ProjectionType": projection}}
    if "ProvisionedThroughput" in billed:
        index["ProvisionedThroughput"] = billed["ProvisionedThroughput"]
    params = {
        "KeySchema": [{"AttributeName": id_attribute, "KeyType": "HASH"}],
        "AttributeDefinitions": [{"AttributeName": name, "AttributeType": "S"}
                                 for name in (id_attribute, key_attribute, sort_attribute)],
        "GlobalSecondaryIndexes": [index], **billed}

    async def work(client: DynamoDBClient) -> None:
        await _create(client, table, params, wait=wait, poll=poll)

    await _with_client(work, connection)


async def delete_table(table: str, **connection: Any) -> None:
    """Delete ``table`` (no wait); NotFound if it does not exist."""
    async def work(client: DynamoDBClient) -> None:
        await mapped_call(client, "DeleteTable", f"table {table!r}", TableName=table)

    await _with_client(work, connection)
