"""What the memory store keeps: per key its entries in order, per item its placement.

Partitions: with ``partitions=0`` every partition key is its own physical partition;
with P > 0 a key goes to ``jump_hash(h64(namespace + NUL + key), P)``, so keys may
share one partition and its token buckets.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import NamedTuple

from sortedcontainers import SortedList

from shardex.capacity import number_bytes, utf8_len
from shardex.hashing import h64, jump_hash
from shardex.keys import PLACEMENT_PREFIX
from shardex.sim.buckets import PartitionCapacity, PartitionLimits, TokenBucket
from shardex.stores.base import Placement, Position, StoredEntry

__all__ = ["AppliedWrite", "Item", "KeyState", "Partitions", "describe", "placement_bytes",
           "same_placement"]


class AppliedWrite(NamedTuple):
    """One place that applied: what ``MemoryStore.watch_applied`` logs, at store time ``at``."""

    namespace: str
    item_id: str
    token: str
    version: int
    entry: StoredEntry | None
    at: float


def same_placement(found: Placement | None, expected: Placement | None) -> bool:
    """True if ``found`` is still the placement ``expected`` was located as."""
    if found is None or expected is None:
        return found is expected
    return (found.version, found.token, found.history, found.entry) == (
        expected.version, expected.token, expected.history, expected.entry)


def describe(placement: Placement | None) -> str:
    """A placement in a condition's message: version and token, or 'never placed'."""
    if placement is None:
        return "never placed"
    return f"version {placement.version} (token {placement.token or 'none'})"


class KeyState:
    """One key of one namespace: its entries in ``(sort, item_id)`` order and its partition.

    ``partition`` is the name the key's requests count under when the store has a fixed
    number of partitions, None when the key is its own partition.
    """

    __slots__ = ("buckets", "entries", "nbytes", "partition", "positions", "sizes")

    def __init__(self, buckets: PartitionCapacity, partition: str | None) -> None:
        self.buckets = buckets
        self.partition = partition
        self.positions: SortedList[Position] = SortedList()
        self.entries: dict[Position, StoredEntry] = {}
        self.sizes: dict[Position, int] = {}
        self.nbytes = 0

    def add(self, entry: StoredEntry, size: int) -> None:
        pos = entry.position
        self.positions.add(pos)
        self.entries[pos] = entry
        self.sizes[pos] = size
        self.nbytes += size

    def remove(self, pos: Position) -> None:
        del self.entries[pos]
        self.nbytes -= self.sizes.pop(pos)
        self.positions.remove(pos)

    def beyond(self, after: Position | None, descending: bool) -> Iterator[Position]:
        """Iterate the positions strictly beyond ``after`` in the direction asked."""
        positions = self.positions
        if after is None:
            return reversed(positions) if descending else iter(positions)
        if descending:
            return positions.irange(maximum=after, inclusive=(True, False), reverse=True)
        return positions.irange(minimum=after, inclusive=(False, True))


class Item(TokenBucket):
    """One item of one namespace: its placement and the placement's size.

    The item is itself the write bucket of its placement key's partition when every
    key is its own partition (unused otherwise), and keeps that partition's read bucket
    once it is read: with one placement key per item, one object per item matters.
    """

    __slots__ = ("placement", "read", "size")

    def __init__(self, rate: float, capacity: float, tokens: float, updated: float) -> None:
        super().__init__(rate, capacity, tokens, updated)
        self.placement: Placement | None = None
        self.size = 0
        self.read: TokenBucket | None = None


class Partitions:
    """The physical partitions of one store: which holds a key, and their token buckets."""

    def __init__(self, count: int, limits: PartitionLimits) -> None:
        self.count = count
        self.limits = limits
        self._names = [f"p{i}" for i in range(count)]
        self._buckets: dict[Hashable, PartitionCapacity] = {}

    def of(self, namespace: str, key: str) -> tuple[Hashable, str]:
        """Return the partition id and name of ``key`` of ``namespace``."""
        if not self.count:
            return (namespace, key), key
        pid = jump_hash(h64(f"{namespace}\x00{key}"), self.count)
        return pid, self._names[pid]

    def counted_as(self, namespace: str, key: str) -> str | None:
        """The partition a request on ``key`` counts under; None: the key is its own."""
        return self.of(namespace, key)[1] if self.count else None

    def buckets(self, pid: Hashable, now: float) -> PartitionCapacity:
        found = self._buckets.get(pid)
        if found is None:
            found = self._buckets[pid] = self.limits.new_partition(now)
        return found

    def placement_bucket(self, namespace: str, item_id: str, item: Item, now: float, *,
                         write: bool) -> TokenBucket:
        """The write or read bucket of the partition of the item's placement key."""
        if self.count:
            buckets = self.buckets(self.of(namespace, PLACEMENT_PREFIX + item_id)[0], now)
            return buckets.write if write else buckets.read
        if write:
            return item
        if item.read is None:
            item.read = self.limits.read_bucket(now)
        return item.read


def placement_bytes(item_id: str, version: int, entry: StoredEntry | None, token: str = "",
                    history: tuple[str, ...] = ()) -> int:
    """Size of a placement record: ``pk``, ``v``, ``t``, ``h``, the entry's shard key and sort."""
    size = 2 + len(PLACEMENT_PREFIX) + utf8_len(item_id) + 1 + number_bytes(version)
    size += 1 + len(token) + 4 + sum(len(t) + 1 for t in history)
    if entry is not None:
        size += 4 + utf8_len(entry.shard_key + entry.sort)
    return size
