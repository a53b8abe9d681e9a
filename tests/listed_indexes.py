"""Shared by the Azure and Cosmos DB tests: a store lists its indexes, and ``shardex
migrations list --store URI`` lists every index's migrations without ``--index``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

from shardex import Routing, ShardedIndex
from shardex.stores.base import Store
from tests.servers import shardex_stdout as _shardex

# names whose codes are prefixes of one another, or need escapes ("." and non-ASCII):
# the skip scan passes each index whole without passing over the next
NAMES = ["Ärger", "ord", "orders", "orders.eu", "orders2"]
RESHARDED = ["Ärger", "orders"]


def check_every_index_listed(uri: str, store: Store,
                             foreign: Callable[[str], Awaitable[None]]) -> None:
    """Fill ``NAMES`` in the store at ``uri``, start a reshard of ``RESHARDED``, and write
    rows that are no index's (``foreign(partition)``) between and around them: the store
    lists ``NAMES`` and ``migrations list`` without ``--index`` the two reshards."""

    async def fill() -> None:
        for name in NAMES:
            async with ShardedIndex(uri, name, Routing()) as index:
                await index.put("PENDING", "o-1", sort="2026-12-06")
        # below every code, a prefix of an index's code, a code with no terminator after,
        # a terminator after no code, an undecodable code, above every code
        for partition in ["0", "ord", "orders~", "!x", "~!x", "~~"]:
            await foreign(partition)

    asyncio.run(fill())
    for name in RESHARDED:
        _shardex("reshard", "start", "--store", uri, "--index", name, "--set", "PENDING=2",
                 "--json")

    async def listed() -> list[str] | None:
        async with store:
            return await store.indexes()

    indexes = asyncio.run(listed())
    assert indexes == sorted(NAMES), indexes  # code point order: "Ärger" is the last
    found = json.loads(_shardex("migrations", "list", "--store", uri, "--json"))
    assert [(m["index"], m["kind"], m["state"]) for m in found["migrations"]] == \
        [(name, "reshard", "read-both (forward)") for name in RESHARDED], found
    text = _shardex("migrations", "list", "--store", uri)
    assert all(f"{name}  reshard" in text for name in RESHARDED), text
