"""A process of the fleet test: an application that writes, or ``shardex reshard run``.

    python -m tests.fleet_app writer URI INDEX WRITER RATE SECONDS
        serves its store's metrics (``serve_prometheus``, a free port) and prints
        ``{"metrics": URL}``; on a line from stdin, puts RATE entries a second for SECONDS
        (70% PENDING, 20% SHIPPED, 10% DELIVERED; item ids WRITER-n; at most 16 at once)
        and lists PENDING every fifth operation; prints ``{"done_at": WALL, "stats": ...}``
        (its store's counters); keeps serving its metrics until stdin closes.
    python -m tests.fleet_app runner STATS ARG...
        runs ``shardex ARG...`` (e.g. ``reshard run ... --metrics-port 0``) as the command
        line does, and at its end writes the counters of the stores it opened to STATS.

The counters are ``store.stats()``: what the store counted, which the page read through
Prometheus must agree with.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import shardex
from shardex.keys import is_reserved, parse_shard_key

SHARES = {"PENDING": 0.7, "SHIPPED": 0.2, "DELIVERED": 0.1}


def counters(stats: Any) -> dict[str, Any]:
    """A store's counters as JSON: totals, and per logical key (shard keys rolled up)."""
    by_value: dict[str, dict[str, float]] = {}
    for key, k in stats.by_key.items():
        # the store's own keys by the label the metrics give them: #placement, #record, ...
        value = "#" + key[1:].partition("#")[0] if is_reserved(key) else parse_shard_key(key)[0]
        slot = by_value.setdefault(value, {"requests": 0, "units": 0.0})
        slot["requests"] += k.requests
        slot["units"] += k.read_units + k.write_units
    totals = stats.totals
    return {"requests": totals.requests, "units": totals.read_units + totals.write_units,
            "throttles": totals.throttles, "by_value": by_value}


def say(doc: dict[str, Any]) -> None:
    print(json.dumps(doc), flush=True)


async def write(uri: str, name: str, writer: str, rate: float, seconds: float) -> None:
    from shardex.metrics import MetricsRecorder
    from shardex.metrics.prometheus import serve_prometheus

    store = shardex.open_store(uri)
    recorder = MetricsRecorder().attach(store)
    loop = asyncio.get_running_loop()
    with serve_prometheus(recorder) as server:
        say({"metrics": server.url})
        await loop.run_in_executor(None, sys.stdin.readline)
        rng = random.Random(writer)
        # at most 16 operations in flight: a slow server slows the writer, rather than
        # piling up work its event loop (and its metrics) would wait behind
        room = asyncio.Semaphore(16)

        async def one(n: int, value: str) -> None:
            async with room:
                if n % 5:
                    await index.put(value, f"{writer}-{n:06d}", sort=f"{time.time():.3f}")
                else:
                    await index.query("PENDING", limit=20)

        async with shardex.ShardedIndex(store, name, routing_ttl=0.25) as index:
            start, done, tasks = time.monotonic(), 0, set()
            while (elapsed := time.monotonic() - start) < seconds:
                due = min(int(elapsed * rate), done + 16 - len(tasks))
                while done < due:
                    value = rng.choices(list(SHARES), list(SHARES.values()))[0]
                    task = asyncio.ensure_future(one(done, value))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                    done += 1
                await asyncio.sleep(0.05)
            await asyncio.gather(*tasks)
        say({"done_at": time.time(), "stats": counters(store.stats())})
        await loop.run_in_executor(None, sys.stdin.read)  # until the test closes stdin


def run_command(path: str, args: list[str]) -> int:
    import shardex.commands.reshard as command
    from shardex.cli import main

    opened: list[Any] = []
    open_with = command.open_with

    def keep(uri: Any, connection: Any) -> Any:
        store = open_with(uri, connection)
        opened.append(store)
        return store

    command.open_with = keep  # the stores the command opens, to read their counters after
    code = 0
    try:
        main(args)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        Path(path).write_text(json.dumps([counters(s.stats()) for s in opened]))
    return code


if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    if mode == "writer":
        uri, name, writer, rate, seconds = rest
        asyncio.run(write(uri, name, writer, float(rate), float(seconds)))
    else:
        sys.exit(run_command(rest[0], rest[1:]))
