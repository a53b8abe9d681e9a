"""Attributes of the application's that shardex rewrites: counted on DynamoDB Local and Azurite.

DynamoDB GSI mode: ``--items`` items written by the application with a raw boto3 client,
each holding every DynamoDB type (SS, NS, BS, a 38-digit number, a number of 130
decimals, nested maps and lists, binary, null, an empty string, a bool), go through
``index.put`` (no attrs), ``index.move`` (default attrs), the mover's relocate (a
reshard of their value to 4 shards) and, on a second table, an adoption's backfill. After
each step every item is read back raw and each attribute compared with what DynamoDB
held after the application's write; a client wrapper also records the attribute names
each of shardex's writes names. Azure Table Storage: items whose attrs are every EDM
type as the Azure SDK reads them go through put, move and relocate; each entry's attrs
are compared (type, value, wire text) with what the SDK handed over.

    scripts/dynamodb-local run scripts/azurite run .venv/bin/python \\
        benchmarks/bench_owned_attributes.py

It prints, per store and step, the attributes checked and rewritten (and the writes
refused); nothing is asserted. ``--leave-out NAME`` leaves an attribute out of the
items (an older shardex refused a move of an item holding ``big``, a number whose
trailing zeros it counted as digits, so its rewrites show only without it).
``tests/test_owned_attributes.py`` is the property test.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import math
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests import azurite
from tests import dynamodb_local as local
from tests.adopt_app import NAME, orders_table, store_uri
from tests.test_owned_attributes import GSI_OWN, OWN, AppTable, Recording, Sdk, changed, same_edm

from shardex import Routing, ShardedIndex, ShardexError, ShardPolicy
from shardex.adopt import Adopter
from shardex.reshard import Resharder
from shardex.stores.dynamodb import DynamoDBStore
from shardex.stores.uri import StoreURI

EVERY_TYPE: dict[str, Any] = {
    "tags": {"SS": ["b", "a", ""]},
    "scores": {"NS": ["1", "3.14", "12345678901234567890123456789012345678"]},
    "blobs": {"BS": [b"\x00", b"\xff\x01"]},
    "price": {"N": "1234567890.123456789012345678901234567"},
    "tiny": {"N": "1E-130"},
    "big": {"N": "9.9999999999999999999999999999999999999E+125"},
    "nested": {"M": {"l": {"L": [{"S": ""}, {"NULL": True}, {"B": b"\x00"}, {"SS": ["x"]},
                                 {"N": "0.1"}, {"M": {"deep": {"NS": ["-1.5"]}}}]},
                     "flag": {"BOOL": False}}},
    "empty": {"S": ""},
    "nothing": {"NULL": True},
    "raw": {"B": b"\x00\x01\x02"},
    "yes": {"BOOL": True},
}
FAST: dict[str, Any] = {"unit_lease": 1.0, "settle": 0.2}
Row = tuple[str, str, int, int, int, str]  # store, step, items, checked, rewritten, foreign


async def attempt(step: Callable[[], Awaitable[Any]], refused: list[str]) -> None:
    try:
        await step()
    except ShardexError as exc:
        refused.append(f"{type(exc).__name__}: {str(exc)[:90]}")


async def dynamodb(items: int, every: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    first = local.gsi_store()
    recording = Recording(first.client, first.table, GSI_OWN)
    store = DynamoDBStore(first.table, client=recording, **local.GSI)
    app = AppTable(store.table, "id", OWN)
    written = app.write({f"o-{i:04d}": every for i in range(items)})

    def measure(step: str, refused: list[str]) -> None:
        rewritten = sum(len(changed(app.read(i), attributes))
                        for i, attributes in written.items())
        rows.append(("dynamodb gsi", step, items, items * len(every), rewritten,
                     ", ".join(sorted(recording.foreign())) + (
                         f" refused {len(refused)}: {refused[0]}" if refused else "")))
        recording.written.clear()

    async with ShardedIndex(store, "orders", Routing(), routing_lease=0.5,
                            routing_ttl=0.1) as index:
        for name, call in [
            ("put", lambda i: index.put("PENDING", i, sort=i)),
            ("move", lambda i: index.move(i, old="PENDING", new="SHIPPED")),
        ]:
            refused: list[str] = []
            for item_id in written:
                await attempt(lambda call=call, item_id=item_id: call(item_id), refused)
            measure(name, refused)
        refused = []
        async with Resharder(store, "orders", **FAST) as runner:
            await runner.start({"SHIPPED": ShardPolicy(4)}, margin=0.1)
            await attempt(runner.run, refused)
        measure("relocate", refused)

    table, _ = orders_table(0)
    own = {"order_id", "status_shard", *GSI_OWN}
    app = AppTable(table, "order_id", own)
    written = app.write({f"o-{i:04d}": every for i in range(items)},
                        status={"S": "PENDING"}, created_at={"S": "2026-12-01"})
    inner = DynamoDBStore(table, region=local.REGION, endpoint_url=local.require_endpoint())
    recording = Recording(inner.client, table, own)
    store = DynamoDBStore.from_uri(StoreURI.parse(store_uri(table)), client=recording)
    refused = []
    async with Adopter(store, NAME, source="status-index", attribute="status", segments=2,
                       rate=1000, routing_lease=1.0, **FAST) as adopter:
        await adopter.start({"PENDING": ShardPolicy(4)}, margin=0.1)
        await attempt(adopter.run, refused)
    measure("backfill", refused)
    return rows


def edm_attrs(sdk: Sdk, key: str) -> dict[str, Any]:
    from azure.data.tables import EdmType, EntityProperty

    return sdk.round_trip(key, {
        "Int32": 7, "Int64": EntityProperty(2**40, EdmType.INT64),
        "Int64small": EntityProperty(5, EdmType.INT64), "Double": 0.1, "NaN": math.nan,
        "Inf": -math.inf, "Guid": uuid.UUID(int=12345),
        "DateTime": datetime.datetime(2026, 11, 30, 5, 0, 0, 123456, tzinfo=datetime.UTC),
        "Binary": b"\x00\xff", "Boolean": False, "String": "", "Text": "ünïcødé"})


async def azure(items: int) -> list[Row]:
    rows: list[Row] = []
    sdk = Sdk()
    given = {f"o-{i:04d}": edm_attrs(sdk, f"in-{i}") for i in range(items)}
    store = azurite.table_store()

    async with ShardedIndex(store, "orders", Routing(), routing_lease=0.5,
                            routing_ttl=0.1) as index:
        async def measure(step: str, refused: list[str]) -> None:
            rewritten = 0
            for item_id, attrs in given.items():
                entry = await index.get(item_id)
                rewritten += len(attrs) if entry is None else len(same_edm(
                    dict(entry.attrs), attrs))
            rows.append(("azure tables", step, items, items * len(next(iter(given.values()))),
                         rewritten, f"refused {len(refused)}: {refused[0]}" if refused else ""))

        for name, call in [
            ("put", lambda i: index.put("PENDING", i, sort=i, attrs=given[i])),
            ("move", lambda i: index.move(i, old="PENDING", new="SHIPPED")),
        ]:
            refused: list[str] = []
            for item_id in given:
                await attempt(lambda call=call, item_id=item_id: call(item_id), refused)
            await measure(name, refused)
        refused = []
        async with Resharder(store, "orders", **FAST) as runner:
            await runner.start({"SHIPPED": ShardPolicy(4)}, margin=0.1)
            await attempt(runner.run, refused)
        await measure("relocate", refused)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=40)
    parser.add_argument("--leave-out", action="append", default=[], metavar="NAME",
                        choices=sorted(EVERY_TYPE))
    args = parser.parse_args()
    every = {k: v for k, v in EVERY_TYPE.items() if k not in args.leave_out}
    rows = asyncio.run(dynamodb(args.items, every)) + asyncio.run(azure(args.items))
    print(f"{'store':<13} {'step':<9} {'items':>5} {'attributes':>10} {'rewritten':>9}  "
          "names written besides shardex's own; refusals")
    for store, step, items, checked, rewritten, foreign in rows:
        print(f"{store:<13} {step:<9} {items:>5} {checked:>10} {rewritten:>9}  {foreign or '-'}")


if __name__ == "__main__":
    main()
