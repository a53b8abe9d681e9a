"""A writer process that a test stops with SIGSTOP between its routing check and its request.

Usage: python -m tests.paused_writer URI COUNT

Opens index ``orders`` on URI (the routing record exists: the test made it) and puts
COUNT new items ``new-0``... under PENDING at once. Each put, once planned (its routing
checked, its shard key chosen), prints ``{"sending": ITEM}`` and waits 0.3 s before its
request leaves, so the test can stop the process there. Then one JSON line per put:
``{"item": ITEM, "outcome": "ok" | "fail" | "unknown", "error": ...}``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from shardex import OutcomeUnknown, ShardedIndex, ShardexError
from shardex.stores import open_store


async def main(uri: str, count: int) -> None:
    store = open_store(uri)
    send = store._place  # the backend's request, under the contract's checks

    async def held(namespace: str, item_id: str, *args: Any) -> None:
        print(json.dumps({"sending": item_id}), flush=True)
        await asyncio.sleep(0.3)
        await send(namespace, item_id, *args)

    store._place = held  # type: ignore[method-assign]
    async with ShardedIndex(store, "orders", routing_ttl=0.2) as index:

        async def put(item: str) -> dict[str, Any]:
            try:
                ok = await index.put("PENDING", item, sort=item)
            except OutcomeUnknown as exc:
                return {"item": item, "outcome": "unknown", "error": str(exc)}
            except ShardexError as exc:
                return {"item": item, "outcome": "fail", "error": str(exc)}
            return {"item": item, "outcome": "ok" if ok else "fail"}

        for outcome in await asyncio.gather(*(put(f"new-{i}") for i in range(count))):
            print(json.dumps(outcome), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
