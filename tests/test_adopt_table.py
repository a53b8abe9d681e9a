"""Adopting an index table the application keeps itself (keyed by the raw value) into a
shardex index table on DynamoDB Local: a copy backfill from the base table, with a live
writer, verify, cutover, complete with the old table dropped, and rollback.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from typing import Any

import pytest

from shardex import ShardedIndex, ShardPolicy
from shardex.adopt import Adopter
from shardex.cli import main
from shardex.migrate.adopting import TableAdoptionLayouts
from shardex.stores.dynamodb.client import DynamoDBClient
from tests import dynamodb_local as local
from tests.adopt_app import NAME, STATUSES, app_client, check_listings
from tests.servers import shardex_error

pytestmark = pytest.mark.dynamodb
FAST: dict[str, Any] = {"routing_lease": 1.0, "unit_lease": 1.0, "settle": 0.2}


@pytest.fixture(autouse=True)
def endpoint() -> str:
    return local.require_endpoint()


def tables(items: int) -> tuple[str, str, dict[str, str]]:
    """A base table ``orders`` and the application's own ``orders-by-status`` table."""
    client = local.sync_client()
    base, own = local.unique_name("orders"), local.unique_name("orders-by-status")
    client.create_table(TableName=base, BillingMode="PAY_PER_REQUEST",
                        KeySchema=[{"AttributeName": "order_id", "KeyType": "HASH"}],
                        AttributeDefinitions=[{"AttributeName": "order_id",
                                               "AttributeType": "S"}])
    client.create_table(TableName=own, BillingMode="PAY_PER_REQUEST",
                        KeySchema=[{"AttributeName": "status", "KeyType": "HASH"},
                                   {"AttributeName": "order_id", "KeyType": "RANGE"}],
                        AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"}
                                              for a in ("status", "order_id")])
    rng = random.Random(3)
    truth = {f"o-{i:05d}": rng.choice(STATUSES) for i in range(items)}
    for table in (base, own):
        ids = list(truth)
        for start in range(0, len(ids), 25):
            client.batch_write_item(RequestItems={table: [
                {"PutRequest": {"Item": {"order_id": {"S": i}, "status": {"S": truth[i]},
                                         "created_at": {"S": f"2026-11-{1 + n % 28:02d}"},
                                         "total": {"N": str(n % 90)}}}}
                for n, i in enumerate(ids[start:start + 25], start)]})
    return base, own, truth


def uri(table: str) -> str:
    return f"dynamodb://{table}?region={local.REGION}&endpoint_url={local.require_endpoint()}"


class TableWriter:
    """The application: the base item and its own index row; once adopted, the index too."""

    def __init__(self, base: str, own: str, truth: dict[str, str],
                 client: DynamoDBClient) -> None:
        self.base, self.own, self.truth, self.client = base, own, truth, client
        self.index: ShardedIndex | None = None
        self.writes = 0
        self.paused = False
        self.own_too = True  # the application's own index table, until it retires it
        self._ids = sorted(truth)
        self._rng = random.Random(5)

    async def write(self, order_id: str, status: str) -> None:
        old = self.truth.get(order_id)
        item = {"order_id": {"S": order_id}, "status": {"S": status},
                "created_at": {"S": "2026-12-01"}, "total": {"N": "7"}}
        await self.client.call("PutItem", TableName=self.base, Item=item)
        if self.own_too and old is not None and old != status:
            await self.client.call("DeleteItem", TableName=self.own,
                                   Key={"status": {"S": old}, "order_id": {"S": order_id}})
        if self.own_too:
            await self.client.call("PutItem", TableName=self.own, Item=item)
        if self.index is not None:
            await self.index.put(status, order_id, sort="2026-12-01", attrs={"total": 7})
        if old is None:
            self._ids.append(order_id)
        self.truth[order_id] = status
        self.writes += 1

    async def run(self) -> None:
        created = 0
        while True:
            if self.paused:
                await asyncio.sleep(0.01)
                continue
            if self._rng.random() < 0.4:
                await self.write(f"n-{created:05d}", "PENDING")
                created += 1
            else:
                await self.write(self._rng.choice(self._ids), self._rng.choice(STATUSES))


async def paused(writer: TableWriter, task: asyncio.Future[None]) -> None:
    writer.paused = True
    await asyncio.sleep(0.1)  # the write in flight lands
    if task.done():
        task.result()


def test_adopting_an_index_table_with_a_live_writer() -> None:
    base, own, truth = tables(600)
    store = uri(local.unique_name("orders-sharded"))
    options = {"source": own, "attribute": "status", "base": base,
               "id_attribute": "order_id", "sort_attribute": "created_at"}

    async def scenario() -> None:
        client = await app_client(base)
        writer = TableWriter(base, own, truth, client)
        task = asyncio.ensure_future(writer.run())
        try:
            async with Adopter(store, NAME, segments=3, **options, **FAST) as adopter:
                plan = await adopter.start({"PENDING": ShardPolicy(8)}, margin=0.2)
                assert plan.created
                async with ShardedIndex(store, NAME, routing_ttl=0.1) as index:
                    await paused(writer, task)
                    await check_listings(index, truth)  # from the application's table
                    writer.index = index  # the application writes through shardex too
                    writer.paused = False
                    assert (await adopter.run()).finished
                    await paused(writer, task)
                    report = await adopter.verify()
                    assert report.clean, report
                    await adopter.cutover()
                    await check_listings(index, truth)  # from the shardex index table
                    writer.own_too = False  # the application retires its own table
                    writer.paused = False
                    done = await adopter.complete(drop=True)
                    assert done.adoption is not None
                    assert done.adoption.dropped
                    await paused(writer, task)
                    await check_listings(index, truth)
            assert own not in local.table_names()
            assert writer.writes > 20
        finally:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            await client.close()

    asyncio.run(scenario())


def test_the_cli_adopts_an_index_table_and_rolls_back(
        capsys: pytest.CaptureFixture[str]) -> None:
    base, own, truth = tables(200)
    where = ("--store", uri(local.unique_name("orders-sharded")), "--index", NAME)
    table = ("--from-table", own, "--from-attribute", "status", "--base-table", base,
             "--id-attribute", "order_id", "--sort-attribute", "created_at")
    for args in (table[:4], ("--from-gsi", "status-index", *table)):
        shardex_error(capsys, "adopt", "start", *where, *args, code=2)
    for command in (["adopt", "start", *where, *table, "--set", "PENDING=4", "--margin", "0.1",
                     "--lease", "1"],
                    ["adopt", "run", *where, "--unit-lease", "1", "--segments", "2"],
                    ["adopt", "verify", *where, "--settle", "0"],
                    ["adopt", "cutover", *where], ["adopt", "rollback", *where]):
        with contextlib.suppress(SystemExit):
            main(command)
        captured = capsys.readouterr()
        assert "error" not in captured.err, (command, captured.err)
        if command[1] == "cutover":  # it said "readers read the new GSI"
            assert "readers read the new index table (read-new" in captured.out, captured.out
    assert "rolled back" in captured.out

    async def listing() -> None:
        async with ShardedIndex(where[1], NAME) as index:
            await check_listings(index, truth)

    asyncio.run(listing())
    # started again with another --set: the rolled-back adoption's PENDING=4 stays in the
    # routing beside it, and start says so (it listed SHIPPED alone, and the backfill
    # followed both: a probe)
    with contextlib.suppress(SystemExit):
        main(["adopt", "start", *where, *table, "--set", "SHIPPED=2", "--margin", "0.1",
              "--lease", "1"])
    out = capsys.readouterr().out
    assert "  PENDING: 4 shard(s), hash (kept from the routing" in out, out
    assert "  SHIPPED: 2 shard(s), hash\n" in out, out


def test_an_item_deleted_between_the_scan_and_its_copy_stays_deleted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The application deletes an order (its base item, its own row, then ``index.delete``)
    after the backfill's Scan page read it and before the copy lands: the delete found
    nothing in the index to delete, the copy (a put at version 1) then put it there, and
    verify reported it extra for good (a probe: 13 of 300 orders under a live writer)."""
    base, own, truth = tables(30)
    store = uri(local.unique_name("orders-sharded"))
    options = {"source": own, "attribute": "status", "base": base,
               "id_attribute": "order_id", "sort_attribute": "created_at"}
    doomed = {"o-00003", "o-00011", "o-00024"}
    copy = TableAdoptionLayouts.copy

    async def scenario() -> None:
        client = await app_client(base)
        try:
            async with Adopter(store, NAME, segments=2, **options, **FAST) as adopter:
                await adopter.start({"PENDING": ShardPolicy(4)}, margin=0.2)
                async with ShardedIndex(store, NAME, routing_ttl=0.1) as index:
                    async def deleted_first(layouts: TableAdoptionLayouts, item: Any,
                                            value: str, key: str) -> bool:
                        order = item[0]
                        if order in doomed:  # the application's delete, as adopt.md says
                            doomed.discard(order)
                            await client.call("DeleteItem", TableName=base,
                                              Key={"order_id": {"S": order}})
                            await client.call("DeleteItem", TableName=own, Key={
                                "status": {"S": truth[order]}, "order_id": {"S": order}})
                            assert not await index.delete(truth.pop(order), order)
                        return await copy(layouts, item, value, key)

                    monkeypatch.setattr(TableAdoptionLayouts, "copy", deleted_first)
                    assert (await adopter.run()).finished
                    assert not doomed  # each was deleted under the copy
                    report = await adopter.verify()
                    assert report.clean, report
                    await adopter.cutover()
                    await check_listings(index, truth)
        finally:
            await client.close()

    asyncio.run(scenario())
