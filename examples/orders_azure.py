"""Orders by status on Azure Table Storage: the hot PENDING key spread over 8 partitions.

An Azure table partition serves about 2,000 entities a second; an orders-by-status index
keyed by status puts every new order on the PENDING partition. Here shardex spreads
PENDING over 8 shard keys (``PENDING#0`` ... ``PENDING#7``), writes 300 orders, moves
some on (each move is a cross-partition write with one commit point), lists PENDING page
by page in both orders, checks the listing against what was written, and shows which
partitions took the writes.

Run it against Azurite with one command (from the repository root):

    scripts/azurite run .venv/bin/python examples/orders_azure.py

or against a storage account: ``--endpoint URL`` and ``AZURE_STORAGE_CONNECTION_STRING``
(or ``AZURE_STORAGE_ACCOUNT`` and ``AZURE_STORAGE_KEY``). It creates its table (a fresh
name each run) and deletes it at the end unless ``--keep``. Exit status 1 if a listing
disagrees with the writes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import uuid
from collections import Counter

from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.stores.azure import AzureTablesStore
from shardex.stores.azure.admin import create_table, delete_table

ROUTING = Routing(overrides={"PENDING": ShardPolicy(shards=8),
                             "SHIPPED": ShardPolicy(shards=4)})
FATE = {"PENDING": 0.70, "SHIPPED": 0.20, "DELIVERED": 0.07, "CANCELLED": 0.03}


async def run(endpoint: str | None, orders: int, page_size: int, keep: bool) -> int:
    table = f"orders{uuid.uuid4().hex[:12]}"
    await create_table(table, endpoint=endpoint)
    store = AzureTablesStore(table, endpoint=endpoint)
    rng = random.Random(7)
    status: dict[str, str] = {}
    try:
        async with ShardedIndex(store, "orders_by_status", ROUTING) as index:
            async def new_order(i: int) -> None:
                order_id = f"o-{i:05d}"
                placed = f"2026-11-30T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z"
                await index.put("PENDING", order_id, sort=placed,
                                attrs={"total": rng.randrange(500, 50_000) / 100})
                status[order_id] = "PENDING"

            for start in range(0, orders, 50):
                await asyncio.gather(*(new_order(i) for i in range(start,
                                                                    min(orders, start + 50))))
            written = store.stats().by_key
            pending_keys = sorted(k for k in written if k.startswith("PENDING"))
            print(f"{orders} orders written under PENDING, over {len(pending_keys)} shard keys: "
                  + ", ".join(f"{k} {written[k].write_units:.0f}" for k in pending_keys)
                  + " entities written")

            async def transition(order_id: str) -> None:
                fate = rng.choices(list(FATE), weights=list(FATE.values()))[0]
                if fate != "PENDING":
                    await index.move(order_id, old="PENDING", new=fate)
                    status[order_id] = fate

            ids = sorted(status)
            for start in range(0, len(ids), 50):
                await asyncio.gather(*(transition(o) for o in ids[start:start + 50]))
            moved = Counter(status.values())
            print("moved on: " + ", ".join(f"{v} {n}" for v, n in sorted(moved.items())))

            want = sorted(o for o, v in status.items() if v == "PENDING")
            listed, pages, cursor = [], 0, None
            while True:
                page = await index.query("PENDING", limit=page_size, cursor=cursor)
                listed += [e.item_id for e in page.items]
                pages += 1
                if page.cursor is None:
                    break
                cursor = page.cursor
            newest = (await index.query("PENDING", limit=5, order="desc")).items
            by_sort = sorted(o for o in want)
            ok = sorted(listed) == want and [e.item_id for e in newest] == by_sort[::-1][:5] \
                and await index.count("PENDING") == len(want)
            print(f"PENDING listed in {pages} pages of {page_size}: {len(listed)} orders; "
                  f"newest first: {', '.join(e.item_id for e in newest)}; "
                  f"{'the listing matches the writes' if ok else 'MISMATCH'}")
            report = await store.repair("orders_by_status")
            print(f"repair: {report.checked} rows left uncommitted (none when no write "
                  "crashed)")
            return 0 if ok and report.checked == 0 else 1
    finally:
        if not keep:
            await delete_table(table, endpoint=endpoint)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", default=os.environ.get("SHARDEX_AZURITE_ENDPOINT"),
                        help="table service URL (default: $SHARDEX_AZURITE_ENDPOINT)")
    parser.add_argument("--orders", type=int, default=300)
    parser.add_argument("--page-size", type=int, default=40)
    parser.add_argument("--keep", action="store_true", help="keep the table")
    args = parser.parse_args()
    sys.exit(asyncio.run(run(args.endpoint, args.orders, args.page_size, args.keep)))


if __name__ == "__main__":
    main()
