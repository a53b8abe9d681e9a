"""Routing reads under a full client pool: requests per put with a short routing lease.

Many concurrent ``index.put`` on one key through one index fill the store client's
connection pool. A routing read that queued behind them would come back older than a
short lease (its age counts from when it was asked for) and make every write read the
routing again. Each run prints the requests the puts made, the routing reads among
them, and the wall time, for a 0.5 s lease and a 15 s lease with every put sent at
once, and the 0.5 s lease with ``--batch`` puts at a time; the ratio compares the short
lease's requests with the long lease's, measured in this run. Run it with:

    scripts/dynamodb-local run .venv/bin/python benchmarks/bench_routing_lease.py

Nothing is asserted (``tests/test_fencing_pool.py`` holds the bound, on memory://).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid
from typing import Any

from shardex import ShardedIndex
from shardex.stores.dynamodb import DynamoDBStore
from shardex.stores.dynamodb.admin import create_index_table, delete_table
from shardex.stores.dynamodb.client import DynamoDBClient, adapt_client


class Counting(DynamoDBClient):
    """The store's aiobotocore adapter, counting requests and the routing record's reads."""

    def __init__(self, inner: DynamoDBClient) -> None:
        self.inner = inner
        self.endpoint = inner.endpoint
        self.connections = inner.connections
        self.requests = 0
        self.routing_reads = 0

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()

    async def call(self, operation: str, **params: Any) -> dict[str, Any]:
        self.requests += 1
        key = params.get("Key", {}).get("sk", {}).get("S", "")
        if operation == "GetItem" and key.endswith("routing"):
            self.routing_reads += 1
        return await self.inner.call(operation, **params)


async def run(connection: dict[str, Any], puts: int, lease: float,
              batch: int) -> tuple[str, int]:
    table = f"bench-lease-{uuid.uuid4().hex[:10]}"
    await create_index_table(table, poll=0.05, **connection)
    client = Counting(adapt_client(**connection))
    try:
        async with DynamoDBStore(table, client=client) as store, \
                ShardedIndex(store, "orders", routing_lease=lease) as index:
            before, reads = client.requests, client.routing_reads
            started = time.perf_counter()
            results: list[bool | BaseException] = []
            for first in range(0, puts, batch):
                results += await asyncio.gather(
                    *(index.put("PENDING", f"o-{i}")
                      for i in range(first, min(first + batch, puts))),
                    return_exceptions=True)
            took = time.perf_counter() - started
            ok = sum(1 for r in results if r is True)
            requests, reads = client.requests - before, client.routing_reads - reads
    finally:
        await delete_table(table, **connection)
    return (f"lease {lease:>4g} s, {batch:>4} at a time: {requests:6d} requests "
            f"({reads} routing reads), {ok}/{puts} ok, {took:5.2f} s"), requests


async def bench(args: argparse.Namespace) -> None:
    connection = {"endpoint_url": args.endpoint_url, "region": args.region}
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "local")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "local")
    print(f"{args.puts} puts on one key through one index, {args.endpoint_url or 'AWS'}")
    short, short_requests = await run(connection, args.puts, 0.5, args.puts)
    long, long_requests = await run(connection, args.puts, 15.0, args.puts)
    batched, _ = await run(connection, args.puts, 0.5, args.batch)
    for line in (short, long, batched):
        print("  " + line)
    print(f"  requests, 0.5 s lease / 15 s lease: {short_requests / long_requests:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint-url", default=os.environ.get("SHARDEX_DYNAMODB_ENDPOINT"))
    parser.add_argument("--region", default=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    parser.add_argument("--puts", type=int, default=600)
    parser.add_argument("--batch", type=int, default=50)
    asyncio.run(bench(parser.parse_args()))


if __name__ == "__main__":
    main()
