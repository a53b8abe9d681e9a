"""An application for adoption tests and benchmarks: an ``orders`` table with a plain
``status-index`` on DynamoDB Local, a writer that creates and moves orders keeping the
ground truth, and the check that every listing equals it.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from typing import Any

from shardex import RoutingStale, ShardedIndex
from shardex.stores.dynamodb import DynamoDBStore
from shardex.stores.dynamodb.client import DynamoDBClient
from tests import dynamodb_local as local

__all__ = ["NAME", "STATUSES", "Writer", "app_client", "check_listings", "gsis", "orders_table",
           "store_uri"]

NAME = "orders_by_status"
STATUSES = ("PENDING", "SHIPPED", "DELIVERED")


def orders_table(items: int, *, projection: str = "ALL") -> tuple[str, dict[str, str]]:
    """A table ``orders`` keyed by order_id with a plain ``status-index``; its ground truth."""
    client = local.sync_client()
    table = local.unique_name("orders")
    client.create_table(
        TableName=table, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "order_id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"}
                              for a in ("order_id", "status", "created_at")],
        GlobalSecondaryIndexes=[{
            "IndexName": "status-index", "Projection": {"ProjectionType": projection},
            "KeySchema": [{"AttributeName": "status", "KeyType": "HASH"},
                          {"AttributeName": "created_at", "KeyType": "RANGE"}]}])
    rng = random.Random(7)
    truth = {f"o-{i:06d}": rng.choice(("PENDING", "PENDING", "PENDING", "SHIPPED", "DELIVERED"))
             for i in range(items)}
    ids = list(truth)
    for start in range(0, len(ids), 25):
        client.batch_write_item(RequestItems={table: [
            {"PutRequest": {"Item": {"order_id": {"S": i}, "status": {"S": truth[i]},
                                     "created_at": {"S": f"2026-11-{1 + n % 28:02d}"},
                                     "total": {"N": str(n % 90)}}}}
            for n, i in enumerate(ids[start:start + 25], start)]})
    return table, truth


def store_uri(table: str, gsi: str = "status-shard-index") -> str:
    return (f"dynamodb://{table}?gsi={gsi}&key_attribute=status_shard&sort_attribute=created_at"
            f"&id_attribute=order_id&region={local.REGION}"
            f"&endpoint_url={local.require_endpoint()}")


def gsis(table: str) -> dict[str, list[str]]:
    described = local.sync_client().describe_table(TableName=table)["Table"]
    return {i["IndexName"]: [k["AttributeName"] for k in i["KeySchema"]]
            for i in described.get("GlobalSecondaryIndexes", [])}


async def app_client(table: str) -> DynamoDBClient:
    """The application's own DynamoDB client (open; the caller closes it)."""
    client = DynamoDBStore(table, region=local.REGION,
                           endpoint_url=local.require_endpoint()).client
    await client.open()
    return client


class Writer:
    """The application: creates and moves orders, keeping the ground truth of what it wrote.

    It writes through ``client`` (the application's own DynamoDB client): ``status``
    alone until ``adopt(index)``, then with the shard attribute from
    ``index.key_attributes`` too, as the one-line application change does.
    """

    def __init__(self, table: str, truth: dict[str, str], client: DynamoDBClient) -> None:
        self.table = table
        self.truth = truth
        self.client = client
        self.index: ShardedIndex | None = None
        self._ids = sorted(truth)
        self._created = 0
        self.paused = asyncio.Event()
        self.idle = asyncio.Event()
        self.task: asyncio.Future[None] | None = None
        self.writes = 0
        self._rng = random.Random(11)

    async def _write(self, order_id: str, status: str) -> None:
        names = {"#s": "status", "#c": "created_at"}
        values: dict[str, Any] = {":s": {"S": status}, ":c": {"S": "2026-12-01"}}
        update = "SET #s = :s, #c = if_not_exists(#c, :c)"
        if self.index is not None:
            shard = (await self._key_attributes(self.index, status, order_id))["status_shard"]
            names["#k"] = "status_shard"
            values[":k"] = {"S": shard}
            update += ", #k = :k"
        for attempt in range(100):
            try:
                await self.client.call(
                    "UpdateItem", TableName=self.table, Key={"order_id": {"S": order_id}},
                    UpdateExpression=update, ExpressionAttributeNames=names,
                    ExpressionAttributeValues=values)
                break
            except Exception as exc:
                # DynamoDB Local answers a write racing a GSI's deletion with a 500, which
                # an application retries (the update is idempotent)
                code = getattr(exc, "response", {}).get("Error", {}).get("Code")
                if code != "InternalFailure" or attempt == 99:
                    raise
                await asyncio.sleep(0.1)
        if order_id not in self.truth:
            self._ids.append(order_id)
        self.truth[order_id] = status
        self.writes += 1

    @staticmethod
    async def _key_attributes(index: ShardedIndex, status: str, order_id: str
                              ) -> dict[str, Any]:
        """As an application does: its copy of the routing grew older than the lease
        (a loaded machine stalled the refresh), so it refreshes and asks again."""
        try:
            return index.key_attributes(status, order_id)
        except RoutingStale:
            await index.refresh_routing()
            return index.key_attributes(status, order_id)

    def adopt(self, index: ShardedIndex) -> None:
        """From now on, write the shard attribute too (the application change)."""
        self.index = index

    async def run(self) -> None:
        while True:
            if self.paused.is_set():
                self.idle.set()
                await asyncio.sleep(0.01)
                continue
            self.idle.clear()
            if self._rng.random() < 0.4:
                await self._write(f"n-{self._created:05d}", "PENDING")
                self._created += 1
            else:
                order_id = self._rng.choice(self._ids)
                await self._write(order_id, self._rng.choice(STATUSES))
            await asyncio.sleep(0.002)

    def start(self) -> None:
        self.task = asyncio.ensure_future(self.run())

    async def stop(self) -> None:
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task

    @contextlib.asynccontextmanager
    async def quiet(self) -> Any:
        assert self.task is not None
        self.paused.set()
        await asyncio.wait([self.task, asyncio.ensure_future(self.idle.wait())],
                           return_when=asyncio.FIRST_COMPLETED)
        if self.task.done():
            self.task.result()  # the writer failed: say why
        await asyncio.sleep(0.3)  # the GSIs catch up
        try:
            yield
        finally:
            self.paused.clear()


async def check_listings(index: ShardedIndex, truth: dict[str, str]) -> None:
    """Every value's full listing (scan and paged query) equals the ground truth."""
    await index.refresh_routing()
    for status in STATUSES:
        want = {i for i, s in truth.items() if s == status}
        scanned = [e.item_id async for e in index.scan(status)]
        assert sorted(scanned) == sorted(want), status
        paged: list[str] = []
        cursor = None
        while True:
            page = await index.query(status, limit=500, cursor=cursor)
            paged += [e.item_id for e in page.items]
            cursor = page.cursor
            if cursor is None:
                break
        assert sorted(paged) == sorted(want), status
        assert await index.count(status) == len(want)
