"""One of two processes of a fleet: fire requests at a shared Redis budget, print the outcome.

Usage: python -m tests.admission_worker URL PREFIX INDEX REQUESTS CONCURRENCY
INDEX is 0 or 1: each process waits at a barrier in Redis for the other, so both fire
at the same time. Prints one JSON line: {"admitted": N, "rejected": N}.
"""

from __future__ import annotations

import asyncio
import json
import sys

import redis.asyncio

from shardex.admission import Admission, AdmissionPolicy, Budget, SharedBudgets
from shardex.errors import AdmissionRejected

# 100 units in any 100 s: the fleet's whole run fits in one window.
BUDGET = Budget(rate=1, burst=100, mode="reject")


async def barrier(url: str, prefix: str, index: int) -> None:
    """Return once the other process has reached the barrier too (or fail after 30 s)."""
    client = redis.asyncio.Redis.from_url(url)
    try:
        await client.rpush(f"{prefix}:barrier:{index}", 1)
        if await client.blpop([f"{prefix}:barrier:{1 - index}"], timeout=30) is None:
            raise SystemExit("the other process never reached the barrier")
    finally:
        await client.aclose()


async def main(url: str, prefix: str, index: int, requests: int,
               concurrency: int) -> dict[str, int]:
    outcome = {"admitted": 0, "rejected": 0}
    pending = iter(range(requests))
    async with Admission(AdmissionPolicy(default=BUDGET),
                         budgets=SharedBudgets(url, prefix=prefix)) as admission:

        async def worker() -> None:
            for _ in pending:
                try:
                    await admission.admit("tenant-1", units=1)
                    outcome["admitted"] += 1
                except AdmissionRejected:
                    outcome["rejected"] += 1

        await admission.admit("warm-up")  # connect before the barrier
        await barrier(url, prefix, index)
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return outcome


if __name__ == "__main__":
    url, prefix = sys.argv[1:3]
    index, requests, concurrency = map(int, sys.argv[3:6])
    print(json.dumps(asyncio.run(main(url, prefix, index, requests, concurrency))))
