"""The hash contract: which shard an item id lands on.

``shard = jump_hash(h64(item_id), N)``. ``h64`` reads the 8-byte BLAKE2b digest of the
item id's UTF-8 bytes as a big-endian unsigned integer; ``jump_hash`` is the jump
consistent hash of Lamping and Veach ("A Fast, Minimal Memory, Consistent Hash
Algorithm", 2014). Growing N to M moves only (M-N)/M of the ids, and every id that
moves goes to one of the new shards N..M-1. Published test vectors live in
``tests/vectors/shards.json``.
"""

from __future__ import annotations

import hashlib

__all__ = ["LCG_MULTIPLIER", "MASK64", "h64", "jump", "jump_hash", "shard_of"]

MASK64 = (1 << 64) - 1
LCG_MULTIPLIER = 2862933555777941757


def h64(item_id: str) -> int:
    """Return the unsigned 64-bit hash of ``item_id`` (BLAKE2b, digest size 8, big-endian)."""
    digest = hashlib.blake2b(item_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def jump_hash(key: int, buckets: int) -> int:
    """Return the bucket in ``[0, buckets)`` of the unsigned 64-bit ``key``.

    Follows the reference implementation exactly, including its double-precision
    division, so results agree across languages. Raises ValueError when
    ``buckets`` < 1 or ``key`` is not an unsigned 64-bit integer.
    """
    if buckets < 1:
        raise ValueError(f"buckets must be at least 1, got {buckets}")
    if not 0 <= key <= MASK64:
        raise ValueError(f"key must be an unsigned 64-bit integer, got {key}")
    return jump(key, buckets)


def jump(key: int, buckets: int) -> int:
    """``jump_hash`` without its checks, for a ``key`` and ``buckets`` known to be valid."""
    b, j = -1, 0
    while j < buckets:
        b = j
        key = (key * LCG_MULTIPLIER + 1) & MASK64
        j = int((b + 1) * (float(1 << 31) / float((key >> 33) + 1)))
    return b


def shard_of(item_id: str, shards: int) -> int:
    """Return the shard number in ``[0, shards)`` that ``item_id`` hashes to."""
    return jump_hash(h64(item_id), shards)
