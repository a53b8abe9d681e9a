"""The embedded simulated partitioned store, ``memory://``: DynamoDB's ceilings on virtual time.

- ``store``: ``MemoryStore``, its requests on entries, placements and records (conditions);
- ``cycle``: the request cycle each goes through (latency, faults, capacity);
- ``state``: what it keeps per key and per item (entries in order, placements, buckets);
- ``options``: its options, checked once, and its URI.
"""

from __future__ import annotations

from shardex.stores.memory.store import MemoryStore

__all__ = ["MemoryStore"]
