"""What the memory store keeps: per key its entries in order, per item its placement.

Each key and item also remembers where it lives in the simulated table (its slot of
the partition map and its h64, ``shardex.sim.partitions``), so a request finds its
partition without hashing the key again.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from sortedcontainers import SortedList

from shardex.capacity import number_bytes, utf8_len
from shardex.keys import PLACEMENT_PREFIX, placement_key
from shardex.model.entries import Placement, Position, StoredEntry, history_after
from shardex.sim.partitions import Partition, Slot
from shardex.sim.table import Resource

if TYPE_CHECKING:
    from shardex.sim.profiles import Profile

__all__ = ["AppliedWrite", "Item", "KeyState", "Plan", "copied", "describe",
           "placement_bytes", "plan_place", "same_placement"]


class AppliedWrite(NamedTuple):
    """One place that applied: what ``MemoryStore.watch_applied`` logs, at store time ``at``."""

    namespace: str
    item_id: str
    token: str
    version: int
    entry: StoredEntry | None
    at: float


_SCALARS = (str, int, float, bool, type(None))


def copied(value: Any) -> Any:
    """A deep copy of a record's body, as a store's serialisation would hand back: its
    dicts and lists made anew, its strings, numbers and None shared (they cannot change),
    anything else ``copy.deepcopy``'d. A third of what ``deepcopy`` takes for the same
    body (its memo and dispatch, for values that need neither): a migration reads and
    writes its records many times a second."""
    kind = type(value)
    if kind is dict:
        return {key: copied(item) for key, item in value.items()}
    if kind is list:
        return [copied(item) for item in value]
    if kind in _SCALARS:
        return value
    return copy.deepcopy(value)


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
    """One key of one namespace: its entries in ``(sort, item_id)`` order and its slot."""

    __slots__ = ("entries", "h", "nbytes", "positions", "sizes", "slot")

    def __init__(self, slot: Slot, h: int) -> None:
        self.slot = slot
        self.h = h
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

    def beyond(self, after: Position | None, descending: bool,
               until: Position | None = None) -> Iterator[Position]:
        """Iterate the positions strictly beyond ``after`` in the direction asked, up to
        ``until`` (inclusive) if given."""
        positions = self.positions
        if after is None and until is None:
            return reversed(positions) if descending else iter(positions)
        if descending:
            return positions.irange(minimum=until, maximum=after, inclusive=(True, False),
                                    reverse=True)
        return positions.irange(minimum=after, maximum=until, inclusive=(False, True))


class Plan(NamedTuple):
    """What a place writes, worked out once for the placement it was tried on
    (``current``): a throttled place is sent again as it was, many times.

    ``pkey``, ``psize`` and ``punits``: the placement key, the placement's new size and
    its units; ``old``: the entry it removes, on ``old_state`` (``old_size`` bytes,
    ``old_units`` units); ``new_state`` and ``units``: the key the new entry goes to and
    its units; ``same_key``: both on one key (one request to it).
    """

    current: Placement | None
    entry: StoredEntry | None
    version: int
    token: str
    pkey: str
    psize: int
    history: tuple[str, ...]
    punits: float
    old: StoredEntry | None
    old_state: KeyState | None
    old_size: int
    old_units: float
    new_state: KeyState | None
    units: float
    same_key: bool


def plan_place(profile: Profile, state: Callable[[str], KeyState], item_id: str,
               item: Item, current: Placement | None, entry: StoredEntry | None,
               version: int, token: str, size: int) -> Plan:
    """What a place of ``entry`` (``size`` bytes) over ``current`` writes: the keys it
    touches and the units each takes (the partitions they are on are found per request);
    ``state(key)`` is the entries' state of a shard key."""
    cost = profile.place_cost
    history = history_after(current)
    psize = placement_bytes(item_id, version, entry, token, history)
    old = current.entry if current is not None else None
    same_key = old is not None and entry is not None and old.shard_key == entry.shard_key
    old_state = new_state = None
    old_size = 0
    old_units = units = 0.0
    if old is not None:
        old_state = state(old.shard_key)
        old_size = old_state.sizes[old.position]
        old_units = profile.write_cost(old_size) * cost
    if entry is not None:
        if old is not None and old_state is not None and same_key:
            # one key, one request: a delete and a put, or one overwrite of the row
            new_state = old_state
            units = (profile.write_cost(max(size, old_size))
                     if old.position == entry.position
                     else profile.write_cost(old_size) + profile.write_cost(size)) * cost
        else:
            new_state = state(entry.shard_key)
            units = profile.write_cost(size) * cost
    return Plan(current, entry, version, token, placement_key(item_id), psize, history,
                profile.write_cost(max(item.size, psize)) * cost, old, old_state, old_size,
                old_units, new_state, units, same_key)


class Sent(NamedTuple):
    """What a place of ``plan`` touched as it was last sent: its keys' partitions (no
    split since: ``generations``, the table's and the entries' partition maps'), the
    ``touched`` keys ``(key, resource, partition, units, h64)``, the ``parts`` the capacity
    model takes, and the shares a refusal charges (0 units on each key)."""

    plan: Plan
    old_part: Partition | None
    new_part: Partition | None
    generations: tuple[int, int]
    touched: list[tuple[str, Resource, Partition, float, int]]
    parts: list[tuple[Resource, Partition, float, int]]
    refused: list[tuple[str, float, str | None]]


class Item:
    """One item of one namespace: its placement, the placement's size, and its slot."""

    __slots__ = ("h", "placement", "sent", "size", "slot", "tried")

    def __init__(self, slot: Slot, h: int) -> None:
        self.slot = slot
        self.h = h
        self.placement: Placement | None = None
        self.size = 0
        # the plan of the last place tried on it: a throttled place is sent again as it was
        self.tried: Plan | None = None
        self.sent: Sent | None = None  # how that plan was last sent


def placement_bytes(item_id: str, version: int, entry: StoredEntry | None, token: str = "",
                    history: tuple[str, ...] = ()) -> int:
    """Size of a placement record: ``pk``, ``v``, ``t``, ``h``, the entry's shard key and sort."""
    size = 2 + len(PLACEMENT_PREFIX) + utf8_len(item_id) + 1 + number_bytes(version)
    size += 1 + len(token) + 4 + sum(len(t) + 1 for t in history)
    if entry is not None:
        size += 4 + utf8_len(entry.shard_key + entry.sort)
    return size
