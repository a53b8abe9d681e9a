"""An adoption's own DescribeTable calls (``stores/dynamodb/adopt.py``) are tried again
after a server error or a throttle, as a store's open tries it: one retry, on the clock
handed in (virtual time here)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import shardex
from shardex.clock import LoopClock
from shardex.stores.dynamodb.adopt import TableAdoptionTools
from shardex.stores.dynamodb.client import DESCRIBE_TRIES
from tests.test_dynamodb_unit import FlakyDescribe


def tools(client: FlakyDescribe) -> TableAdoptionTools:
    return TableAdoptionTools(client, source="orders", attribute="status", base="orders",
                              id_attribute="id", sort_attribute="sort", clock=LoopClock())


def describes(client: FlakyDescribe) -> int:
    return [op for op, _ in client.calls].count("DescribeTable")


@pytest.mark.shardex_virtual
async def test_describe_tries_again_after_a_server_error_and_a_throttle() -> None:
    client = FlakyDescribe("InternalFailure", "ThrottlingException")
    started = asyncio.get_running_loop().time()
    table = await tools(client).describe()
    assert table["TableName"] == "orders"
    assert describes(client) == 3
    # backoff from 0.1 s, doubling, on the clock handed in
    assert asyncio.get_running_loop().time() - started == pytest.approx(0.3)


@pytest.mark.shardex_virtual
async def test_describe_gives_up_after_its_tries_and_a_missing_table_at_once() -> None:
    failing = FlakyDescribe(*["InternalFailure"] * 20)
    with pytest.raises(shardex.Unavailable, match="DescribeTable"):
        await tools(failing).describe()
    assert describes(failing) == DESCRIBE_TRIES

    missing = FlakyDescribe()
    with pytest.raises(shardex.NotFound, match="'elsewhere'"):
        await tools(missing).describe("elsewhere")
    assert describes(missing) == 1


def keyed(table: str, attribute: str) -> dict[str, Any]:
    return {"Table": {"TableName": table, "TableStatus": "ACTIVE",
                      "KeySchema": [{"AttributeName": attribute, "KeyType": "HASH"}],
                      "AttributeDefinitions": [{"AttributeName": attribute,
                                                "AttributeType": "S"}]}}


@pytest.mark.shardex_virtual
async def test_the_old_index_check_rides_out_a_server_error() -> None:
    client = FlakyDescribe("InternalFailure", "ThrottlingException")
    client.tables = {"by_status": keyed("by_status", "status"), "orders": keyed("orders", "id")}
    await TableAdoptionTools(client, source="by_status", attribute="status", base="orders",
                             id_attribute="id", sort_attribute="sort",
                             clock=LoopClock()).check()
    assert describes(client) == 4
