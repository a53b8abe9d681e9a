"""How the cost of a read grows with the shard count N and with the entries of a value.

Run: .venv/bin/python benchmarks/bench_read_scale.py [--quick]

On memory:// under virtual time (latency median 4 ms, p99 25 ms: the store's default),
entries of about 1 KB, hedging off so the figures are the reads' own, three reads of
one logical key:

- *first page*: ``query(limit=100)``;
- *full listing*: ``query(limit=1000)`` and its cursors to the end;
- *count*: ``count()`` (a Select=COUNT query per shard, paged by 1 MB).

For each: store requests, read units (strongly consistent: 1 per started 4 KB) and
virtual time. Table 1 varies N from 1 to 1,024 at 100,000 entries; table 2 varies the
entries from 1,000 to 1,000,000 at N = 16. Entries are put straight into the simulated
store's state (the write path is not what is measured, and a million writes through it
would take minutes); every listing is checked against what was loaded.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import dataclass

from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.capacity import entry_bytes
from shardex.sim.clock import run_virtual
from shardex.stores.base import StoredEntry
from shardex.stores.memory import MemoryStore

PAD = "x" * 960


@dataclass
class Cost:
    requests: int
    units: float
    seconds: float


def _load(store: MemoryStore, index: ShardedIndex, entries: int) -> None:
    """Put ``entries`` entries of PENDING straight into the store's state."""
    routing = index.routing
    for i in range(entries):
        item_id = f"o-{i:07d}"
        entry = StoredEntry(routing.shard_key("PENDING", item_id), f"{i:07d}", item_id,
                            {"pad": PAD})
        store._state("scale", entry.shard_key, 0.0).add(entry, entry_bytes(entry))


def measure(shards: int, entries: int) -> dict[str, Cost]:
    async def body() -> dict[str, Cost]:
        store = MemoryStore(seed=5, profile="unlimited")
        routing = Routing(overrides={"PENDING": ShardPolicy(shards=shards)})
        costs: dict[str, Cost] = {}
        async with ShardedIndex(store, "scale", routing, hedge=None, seed=1) as index:
            _load(store, index, entries)
            loop = asyncio.get_running_loop()

            async def cost(name: str, read: object) -> object:
                store.reset_stats()
                began = loop.time()
                result = await read  # type: ignore[misc]
                totals = store.stats("scale").totals
                costs[name] = Cost(totals.read_requests, totals.read_units, loop.time() - began)
                return result

            page = await cost("first page", index.query("PENDING", limit=100))
            assert [e.item_id for e in page.items] == \
                [f"o-{i:07d}" for i in range(min(100, entries))]  # type: ignore[attr-defined]

            async def listing() -> int:
                count, cursor, last = 0, None, ""
                while True:
                    got = await index.query("PENDING", limit=1000, cursor=cursor)
                    assert all(e.sort > last for e in got.items[:1])
                    count += len(got.items)
                    last = got.items[-1].sort if got.items else last
                    if (cursor := got.cursor) is None:
                        return count

            assert await cost("full listing", listing()) == entries
            assert await cost("count", index.count("PENDING")) == entries
        return costs

    return run_virtual(body())


def _row(label: str, costs: dict[str, Cost]) -> str:
    cells = []
    for name in ("first page", "full listing", "count"):
        c = costs[name]
        cells.append(f"{c.requests:>7,} {c.units:>9,.0f} {_time(c.seconds):>8}")
    return f"  {label:>10} " + "   ".join(cells)


def _time(seconds: float) -> str:
    return f"{1000 * seconds:.0f}ms" if seconds < 10 else f"{seconds:.1f}s"


def _header(label: str) -> str:
    names = "".join(f"{name:^29}" for name in ("first page (100)", "full listing (1000s)",
                                                "count"))
    sub = "   ".join(f"{'requests':>7} {'units':>9} {'time':>8}" for _ in range(3))
    return f"  {'':>10} {names}\n  {label:>10} {sub}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    started = time.perf_counter()
    fixed = 20_000 if args.quick else 100_000
    print(f"read cost against N, {fixed:,} entries of ~1 KB (memory://, virtual time)")
    print(_header("N"))
    for shards in (1, 4, 16, 64, 256, 1024):
        print(_row(f"{shards:,}", measure(shards, fixed)), flush=True)
    print("read cost against entries per value, N = 16")
    print(_header("entries"))
    sizes = (1_000, 10_000, 100_000) if args.quick else (1_000, 10_000, 100_000, 1_000_000)
    for entries in sizes:
        print(_row(f"{entries:,}", measure(16, entries)), flush=True)
    print(f"({time.perf_counter() - started:.0f} s wall)")


if __name__ == "__main__":
    main()
