"""Listings of a value while another process moves it to a tier of its own, on DynamoDB
Local: every entry present throughout a listing is listed once, page by page."""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import shardex
from shardex import Routing, ShardedIndex, ShardPolicy
from tests import dynamodb_local as local

pytestmark = pytest.mark.dynamodb

ROOT = Path(__file__).resolve().parents[1]


def test_pages_read_while_another_process_moves_the_value_to_a_tier_miss_nothing() -> None:
    """Three entries present throughout a listing (descending pages of 4) were left out,
    inside a page's own range, in each run: a listing in pages of 1 ended a page at the
    same position, its continuation replaced this one's, and this listing's next page
    resumed it, whose T stream had read before those entries were written there (by the
    mover in another process). Two listings never share a continuation now."""
    uri, dedicated = local.table_store().uri, local.table_store().uri
    tiers = {"ded": dedicated}
    rng = random.Random(7)
    model: dict[str, tuple[str, str]] = {}
    failures: list[str] = []
    listed = 0

    async def write(writer: ShardedIndex) -> set[str]:
        """The application's writes between pages: puts, moves and deletes of items."""
        touched = set()
        for _ in range(rng.randrange(3)):
            item, held = f"i{rng.randrange(330)}", None
            held, x, n = model.get(item), rng.random(), rng.randrange(10**6)
            touched.add(item)
            try:
                if held is None or x < 0.4:
                    value, sort = rng.choice("VW"), f"{rng.randrange(40):03d}"
                    await writer.put(value, item, sort=sort, attrs={"n": n})
                    model[item] = (value, sort)
                elif x < 0.7:
                    new = "W" if held[0] == "V" else "V"
                    assert await writer.move(item, old=held[0], new=new)
                    model[item] = (new, held[1])
                else:
                    assert await writer.delete(held[0], item)
                    del model[item]
            except shardex.CapabilityMissing:
                pass  # a write between the two stores: refused, nothing written
        return touched

    async def main() -> None:
        nonlocal listed
        async with ShardedIndex(uri, "ix", Routing(overrides={"V": ShardPolicy(2)}),
                                routing_lease=3.0, routing_ttl=0.5, seed=1,
                                tiers=tiers) as writer:
            for i in range(300):
                value, sort = rng.choice("VVW"), f"{rng.randrange(40):03d}"
                await writer.put(value, f"i{i}", sort=sort, attrs={"n": 0})
                model[f"i{i}"] = (value, sort)
            async with ShardedIndex(uri, "ix", routing_ttl=1.0, seed=2, routing_lease=3.0,
                                    tiers=tiers) as reader:
                where = ["--store", uri, "--index", "ix", "--tier", f"ded={dedicated}"]
                command = [sys.executable, "-m", "shardex", "reshard"]
                start = await asyncio.create_subprocess_exec(
                    *command, "start", *where, "--set", "V=4@ded", "--margin", "1s",
                    cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                assert await start.wait() == 0
                mover = await asyncio.create_subprocess_exec(
                    *command, "run", *where, "--until", "done", "--rate", "100", "--every",
                    "1", cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    env={**os.environ, "COLUMNS": "200"})
                listings: list[dict[str, Any]] = []
                while mover.returncode is None or listings:
                    if mover.returncode is None and len(listings) < 3 and rng.random() < 0.3:
                        listings.append({"order": rng.choice(["asc", "desc"]),
                                         "limit": rng.choice([1, 4, 17, 60]), "cursor": None,
                                         "seen": [], "touched": set(),
                                         "start": {i for i, (v, _) in model.items()
                                                   if v == "V"}})
                    touched = await write(writer)
                    for listing in listings:
                        listing["touched"] |= touched
                    for listing in list(listings):
                        page = await reader.query("V", limit=listing["limit"],
                                                  order=listing["order"],
                                                  cursor=listing["cursor"])
                        listing["seen"] += [entry.item_id for entry in page.items]
                        listing["cursor"] = page.cursor
                        if page.cursor is None:
                            listings.remove(listing)
                            listed += 1
                            throughout = {i for i in listing["start"] - listing["touched"]
                                          if model.get(i, ("",))[0] == "V"}
                            seen = listing["seen"]
                            missing = sorted(throughout - set(seen))
                            twice = sorted(i for i in throughout if seen.count(i) > 1)
                            if missing or twice:
                                failures.append(f"{listing['order']} pages of "
                                                f"{listing['limit']}: missing {missing}, "
                                                f"twice {twice}")
                    if rng.random() < 0.1:  # a count lists the value whole meanwhile
                        await reader.count("V")
                    await asyncio.sleep(rng.uniform(0, 0.2))
                assert await mover.wait() == 0

    asyncio.run(main())
    assert listed >= 5
    assert not failures, failures
