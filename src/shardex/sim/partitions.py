"""Physical partitions: which one holds a key, what each takes in a second, when one splits.

Pure bookkeeping on the caller's clock: every call takes the current whole ``second``
(or ``now`` in seconds). Both engines use these same objects, the request-level store
(``memory://``) request by request and the rate-level engine (``shardex.sim.fluid``)
second by second, so they throttle and split by the same rules.

- **Where a key lives.** With P partitions a key hashes to a *slot*,
  ``jump_hash(h64(namespace + NUL + key), P)``; with 0 every key is its own slot (a
  table fully split for heat). A slot starts as one partition and splits into
  contiguous ranges of ``(h64, sort)``: between keys (by their hash), or inside one
  key by sort value.
- **What a partition takes.** In any one second at most ``write_ceiling`` write
  units, ``read_ceiling`` strongly consistent read units and ``read_ceiling *
  eventual_read_factor`` read units in all, whatever burst it has saved (burst lives
  in the table's limit and, without adaptive capacity, in the partition's share of a
  provisioned table).
- **Split for heat.** A partition whose demand (taken and refused) reaches
  ``split_heat`` of a ceiling for ``split_delay_seconds`` seconds in a row splits in
  two: between its keys at the heat-weighted median, or, when one key is all its heat,
  at the median sort value of that key's recent writes. Never below one item, never
  for a key whose sort value only rises or only falls (new writes would all land on
  one side), and never inside a key of a table with a local secondary index.
- **Split for size.** A partition holding more than ``partition_bytes`` splits too
  (a key with rising sort values splits for size; with an LSI it cannot grow so far).
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Hashable, Iterator

from shardex.errors import InvalidInput
from shardex.hashing import h64, jump_hash
from shardex.sim.buckets import TokenBucket
from shardex.sim.profiles import Profile

__all__ = ["KeyTrack", "Partition", "PartitionMap", "Slot", "check_shared", "key_hash", "slot_of"]

_TOP = 1 << 64
# Heat is kept for this many keys of a partition during a hot streak: enough to place a
# split between the hot ones, bounded for partitions holding millions of placements.
_HEAT_KEYS = 256
_SAMPLE = 32
# sort values a spread key of the rate engine stands for: 2^10, ten splits deep
_SPREAD = 1024
_RANK_WEIGHT = 0.02
# Float sums of units land a hair beyond a ceiling they exactly fill.
EPSILON = 1e-9


def key_hash(namespace: str, key: str) -> int:
    """The h64 a key of ``namespace`` is placed by (``h64(namespace + NUL + key)``)."""
    return h64(f"{namespace}\x00{key}")


def slot_of(namespace: str, key: str, partitions: int) -> int:
    """The slot in ``[0, partitions)`` that ``key`` of ``namespace`` hashes to on a table
    of ``partitions`` partitions (``partitions`` >= 1): the simulator's placement, which
    the planner's partition model draws its placements from."""
    return jump_hash(key_hash(namespace, key), partitions)


class KeyTrack:
    """The order a key's writes come in: by sort value, monotonic or spread.

    Keeps the sort values of the key's last 32 writes; ``rank`` is a moving average of
    where each new write falls among them (0: below all, 1: above all). A key whose
    writes keep landing at one end (``rank`` at least 0.75, or at most 0.25) is
    *monotonic*: today's date, a timestamp, a counter. Concurrent writers reorder a
    rising key a little; its rank stays high all the same.
    """

    __slots__ = ("fixed", "rank", "recent", "sorted")

    def __init__(self, *, rank: float = 0.5, samples: tuple[str, ...] = (),
                 fixed: bool = False) -> None:
        self.rank = rank
        self.fixed = fixed
        self.recent: deque[str] = deque(samples, maxlen=max(_SAMPLE, len(samples)))
        self.sorted = sorted(samples)

    @classmethod
    def spread(cls) -> KeyTrack:
        """A key written at sort values spread evenly over ``[0, 1)`` (the rate engine's):
        fine enough that it splits again and again, halving each time (10 times over)."""
        return cls(samples=tuple(f"{i / _SPREAD:.6f}" for i in range(_SPREAD)), fixed=True)

    @classmethod
    def rising(cls) -> KeyTrack:
        """A key whose every write has a sort value above all before it."""
        return cls(rank=1.0, samples=("",), fixed=True)

    def write(self, sort: str) -> None:
        """Note one write at ``sort``."""
        if self.fixed:
            return
        ordered = self.sorted
        if ordered:
            self.rank += (bisect.bisect_left(ordered, sort) / len(ordered) - self.rank) \
                * _RANK_WEIGHT
            if len(self.recent) == _SAMPLE:
                del ordered[bisect.bisect_left(ordered, self.recent[0])]
        self.recent.append(sort)
        bisect.insort(ordered, sort)

    @property
    def monotonic(self) -> bool:
        """Whether new writes keep landing at one end of the key's sort values."""
        return self.rank >= 0.75 or self.rank <= 0.25

    def median(self, lo: str = "", hi: str | None = None) -> str | None:
        """A sort value that splits the recent writes at or above ``lo`` and below ``hi``
        (None: no bound) in two, or None (fewer than 2 distinct values there): a key split
        once splits again inside either half, as DynamoDB keeps splitting a hot key whose
        sort values are spread."""
        ordered = self.sorted
        first = bisect.bisect_left(ordered, lo) if lo else 0
        last = bisect.bisect_left(ordered, hi) if hi is not None else len(ordered)
        if last - first < 2:
            return None
        middle = ordered[first + (last - first) // 2]
        return middle if middle > ordered[first] else None


class _Ceilings:
    """A profile's per-partition figures, read on every request."""

    __slots__ = ("bytes", "delay", "eventual", "hot_read", "hot_write", "read", "shared",
                 "write")

    def __init__(self, profile: Profile) -> None:
        # reads and writes draw on one budget (Cosmos DB's RU): each takes the other's room
        self.shared = profile.shared_units
        self.write = profile.write_ceiling
        self.read = profile.read_ceiling
        self.eventual = profile.read_ceiling * profile.eventual_read_factor
        self.hot_write = profile.write_ceiling * profile.split_heat
        self.hot_read = profile.read_ceiling * profile.split_heat
        self.delay = profile.split_delay_seconds
        self.bytes = profile.partition_bytes


class Partition:
    """One physical partition: units taken and refused in the current second, heat, bytes.

    ``name`` is ``p3`` (slot 3 of a table), ``p3.1`` after a split, ``i3`` for a GSI's;
    None when a key is its own partition and has not split. ``lo`` is the lowest
    ``(h64, sort)`` it holds. ``share_write``/``share_read`` are its share of a
    provisioned table without adaptive capacity (None otherwise).
    """

    __slots__ = ("bytes", "due", "heat", "hot_until", "limits", "lo", "name", "read",
                 "refused_read", "refused_write", "second", "share_read", "share_write",
                 "streak", "strong", "written")

    def __init__(self, name: str | None, lo: tuple[int, str], limits: _Ceilings,
                 second: int) -> None:
        self.name = name
        self.lo = lo
        self.limits = limits
        self.second = second
        self.written = self.read = self.strong = 0.0
        self.refused_write = self.refused_read = 0.0
        self.streak = 0
        self.hot_until = -2
        self.due = False
        self.heat: dict[int, float] = {}
        self.bytes = 0.0
        self.share_write: TokenBucket | None = None
        self.share_read: TokenBucket | None = None

    def roll(self, second: int) -> None:
        """Close the seconds before ``second``: note whether the last was hot, start afresh."""
        if second <= self.second:
            return
        limits = self.limits
        hot = (self.written + self.refused_write >= limits.hot_write
               or self.read + self.refused_read >= limits.hot_read)
        if hot:
            self.streak = self.streak + 1 if self.hot_until == self.second - 1 else 1
            self.hot_until = self.second
        else:
            self.streak = 0
            self.heat.clear()
        self.due = (hot and self.streak >= limits.delay) or self.bytes > limits.bytes
        self.second = second
        self.written = self.read = self.strong = 0.0
        self.refused_write = self.refused_read = 0.0

    def room(self, write: bool, strong: bool, now: float, span: float = 0.0) -> float:
        """Units this partition may still take in the current second (over ``span``
        seconds from ``now``, for a share's bucket: the rate engine's whole second)."""
        if write:  # ceiling_room's, inline: asked of every partition a request touches
            limits = self.limits
            room = limits.write - self.written
            if limits.shared:
                room -= self.read
            share = self.share_write
        else:
            room = self.ceiling_room(False, strong)
            share = self.share_read
        if share is not None:
            room = min(room, share.room(now, span))
        return room

    def ceiling_room(self, write: bool, strong: bool) -> float:
        """Units the per-second ceiling still allows this second (its share's bucket aside)."""
        limits = self.limits
        if write:
            return limits.write - self.written - (self.read if limits.shared else 0.0)
        room = limits.eventual - self.read
        if strong:
            room = min(room, limits.read - self.strong)
        if limits.shared:
            room -= self.written
        return room

    def take(self, units: float, write: bool, strong: bool, now: float, key: int,
             span: float = 0.0) -> None:
        """Take ``units`` (the caller checked ``room``); ``key`` is the key's h64."""
        if write:
            self.written += units
            if self.share_write is not None:
                self.share_write.consume(units, now, span)
        else:
            self.read += units
            if strong:
                self.strong += units
            if self.share_read is not None:
                self.share_read.consume(units, now, span)
        self._heat(key, units)

    def spread(self, taken: float, refused: float, write: bool, strong: bool, now: float,
               span: float, keys: tuple[int, int]) -> None:
        """Take ``taken`` and refuse ``refused`` units of many keys, whose heat is noted
        half on each of two ``keys`` standing for them (the rate engine's placements)."""
        if write:
            self.written += taken
            self.refused_write += refused
            if taken and self.share_write is not None:
                self.share_write.consume(taken, now, span)
        else:
            self.read += taken
            self.refused_read += refused
            if strong:
                self.strong += taken
            if taken and self.share_read is not None:
                self.share_read.consume(taken, now, span)
        half = (taken + refused) / 2
        heat = self.heat
        for key in keys:
            seen = heat.get(key)
            if seen is not None:
                heat[key] = seen + half
            elif len(heat) < _HEAT_KEYS:
                heat[key] = half

    def refuse(self, units: float, write: bool, key: int) -> None:
        """Count ``units`` asked of this partition and refused: they are heat all the same."""
        if write:
            self.refused_write += units
        else:
            self.refused_read += units
        heat = self.heat  # _heat's, inline: a throttled hot key is refused thousands of times
        seen = heat.get(key)
        if seen is not None:
            heat[key] = seen + units
        elif len(heat) < _HEAT_KEYS:
            heat[key] = units

    def _heat(self, key: int, units: float) -> None:
        heat = self.heat
        seen = heat.get(key)
        if seen is not None:
            heat[key] = seen + units
        elif len(heat) < _HEAT_KEYS:
            heat[key] = units


class Slot:
    """The partitions of one slot, by the lowest ``(h64, sort)`` each holds.

    ``label`` names them: ``p3``, then ``p3.1``, ... ; a key that is its own slot is
    unnamed (None) until it splits, then ``KEY~0``, ``KEY~1``, ...
    """

    __slots__ = ("bounds", "label", "own", "parts", "splits")

    def __init__(self, label: str, own: bool, first: Partition) -> None:
        self.label = label
        self.own = own
        self.bounds: list[tuple[int, str]] = [first.lo]
        self.parts = [first]
        self.splits = 0

    def find(self, h: int, sort: str) -> Partition:
        """The partition holding ``(h, sort)``."""
        parts = self.parts
        if len(parts) == 1:
            return parts[0]
        return parts[bisect.bisect_right(self.bounds, (h, sort)) - 1]


def check_shared(profile: Profile) -> None:
    """InvalidInput for a provisioned table without adaptive capacity whose keys are each
    their own partition (``partitions=0``): its capacity is shared over a partition count,
    which it then has none of."""
    if not profile.adaptive and profile.capacity == "provisioned" \
            and profile.initial_partitions == 0:
        raise InvalidInput(f"partitions=0 (every key its own partition) does not model a "
                           f"{profile.name} table: its provisioned capacity is shared "
                           "evenly over its partitions, with no adaptive capacity to move "
                           "it; give partitions > 0")


class PartitionMap:
    """The physical partitions of one table or GSI: where each key lives, and the splits.

    ``count`` is the profile's initial partitions (0: every key its own).
    ``generation`` grows with every split, so a caller may cache where a key lives.
    ``tracks`` holds the write order of the keys written with a sort value.
    """

    def __init__(self, profile: Profile, *, prefix: str = "p", now: float = 0.0) -> None:
        check_shared(profile)
        self.profile = profile
        self.count = profile.initial_partitions
        self.prefix = prefix
        self.limits = _Ceilings(profile)
        self.generation = 0
        self.tracks: dict[int, KeyTrack] = {}
        self._slots: dict[Hashable, Slot] = {}
        self._holding: dict[Partition, Slot] = {}
        self._shared = profile.capacity == "provisioned" and not profile.adaptive
        self._partitions = 0
        self._start = int(now)
        if self.count:
            shared, self._shared = self._shared, False  # shared out once, at the end
            for sid in range(self.count):
                self._slot(sid, f"{prefix}{sid}", now, own=False)
            self._shared = shared
            self._first_shares(int(now))

    def slot(self, namespace: str, key: str, now: float = 0.0, *,
             tracked: bool = True) -> tuple[Slot, int]:
        """Return the slot of ``key`` of ``namespace``, and the key's h64.

        ``tracked=False``: the key is never written with a sort value (a placement or
        record key); when every key is its own slot its hash is then never needed, and
        0 stands for it.
        """
        if self.count:
            h = key_hash(namespace, key)
            return self._slots[jump_hash(h, self.count)], h
        h = key_hash(namespace, key) if tracked else 0
        found = self._slots.get((namespace, key))
        return (found if found is not None else self._slot((namespace, key), key, now)), h

    def at(self, slot: Slot, h: int, sort: str, second: int) -> Partition:
        """The partition holding ``(h, sort)`` in ``second``, rolled to it (splitting if due)."""
        while True:
            parts = slot.parts
            part = parts[0] if len(parts) == 1 else \
                parts[bisect.bisect_right(slot.bounds, (h, sort)) - 1]
            if part.second == second:
                return part
            part.roll(second)
            if not part.due:
                return part
            self.split(slot, part, second)

    def track(self, h: int) -> KeyTrack:
        """The write order of key ``h`` (made on first use)."""
        found = self.tracks.get(h)
        if found is None:
            found = self.tracks[h] = KeyTrack()
        return found

    def slot_holding(self, part: Partition) -> Slot | None:
        """The slot ``part`` belongs to, if it is one of this map's."""
        return self._holding.get(part)

    def slots(self) -> list[Slot]:
        """Every slot made so far (with P partitions: the P slots, in order)."""
        return list(self._slots.values())

    def partitions(self) -> Iterator[Partition]:
        """Every partition made so far."""
        for slot in self._slots.values():
            yield from slot.parts

    def __len__(self) -> int:
        return self._partitions

    def split(self, slot: Slot, part: Partition, second: int) -> Partition | None:
        """Split ``part`` in two if it may be split; return the new upper half, or None."""
        for_size = part.bytes > self.limits.bytes
        point = self._split_point(slot, part, for_size)
        part.due = False
        part.streak = 0
        part.heat.clear()
        if point is None:
            return None
        slot.splits += 1
        if slot.own:
            upper = Partition(f"{slot.label}~{slot.splits}", point, self.limits, second)
            if part.name is None:
                part.name = f"{slot.label}~0"
        else:
            upper = Partition(f"{slot.label}.{slot.splits}", point, self.limits, second)
        at = slot.parts.index(part) + 1
        slot.parts.insert(at, upper)
        self._holding[upper] = slot
        slot.bounds.insert(at, point)
        upper.bytes = part.bytes / 2
        part.bytes -= upper.bytes
        self._partitions += 1
        self.generation += 1
        self._reshare(second)
        return upper

    # -- internals --------------------------------------------------------------------

    def _slot(self, sid: Hashable, label: str, now: float, *, own: bool = True) -> Slot:
        second = int(now)
        slot = self._slots[sid] = Slot(label, own, Partition(
            None if own else label, (0, ""), self.limits, second))
        self._holding[slot.parts[0]] = slot
        self._partitions += 1
        if self._shared:
            self._reshare(second)
        return slot

    def _first_shares(self, second: int) -> None:
        """The shares ``_reshare`` gives the first ``count`` partitions made one by one, in
        one pass: each keeps the first tokens of its share when it was made, capped by its
        share of the whole table. Shared again at each partition made, a table of 4,000
        partitions took 4.9 s to make, 100,000 (the most) an hour."""
        if not self._shared:
            return
        profile, count = self.profile, max(1, self._partitions)
        for made, part in enumerate(self.partitions(), start=1):
            for name, total in self._share_totals():
                rate = total / count
                capacity = rate * profile.burst_seconds
                first = total / made * profile.initial_burst_seconds
                setattr(part, name, TokenBucket(rate, capacity, min(first, capacity), second))
            if profile.shared_units:
                part.share_read = part.share_write

    def _share_totals(self) -> tuple[tuple[str, float], ...]:
        """Each share bucket a partition has, with the table's capacity it shares out: one
        for reads and writes alike where they draw on one budget (``shared_units``)."""
        profile = self.profile
        if profile.shared_units:
            return (("share_write", profile.provisioned_write),)
        return (("share_write", profile.provisioned_write),
                ("share_read", profile.provisioned_read))

    def _reshare(self, now: float) -> None:
        """Give every partition its share of a provisioned table without adaptive capacity."""
        if not self._shared:
            return
        profile, count = self.profile, max(1, self._partitions)
        for part in self.partitions():
            for name, total in self._share_totals():
                rate = total / count
                bucket = getattr(part, name)
                if bucket is None:
                    bucket = TokenBucket(rate, rate * profile.burst_seconds,
                                         rate * profile.initial_burst_seconds, now)
                    setattr(part, name, bucket)
                else:
                    bucket.available(now)
                    bucket.rate, bucket.capacity = rate, rate * profile.burst_seconds
                    bucket.tokens = min(bucket.tokens, bucket.capacity)
            if profile.shared_units:
                part.share_read = part.share_write

    def _split_point(self, slot: Slot, part: Partition,
                     for_size: bool) -> tuple[int, str] | None:
        at = slot.parts.index(part)
        lo = part.lo
        hi = slot.bounds[at + 1] if at + 1 < len(slot.bounds) else (_TOP, "")
        heat = sorted(part.heat.items())
        if len(heat) >= 2:
            half, seen = sum(units for _, units in heat) / 2, 0.0
            for i, (h, units) in enumerate(heat):
                if i and seen + units / 2 > half:
                    return (h, "")
                seen += units
            return (heat[-1][0], "")
        if len(heat) == 1 or lo[0] == hi[0] or hi[0] - lo[0] == 1:
            h = heat[0][0] if heat else lo[0]
            track = self.tracks.get(h)
            if self.profile.lsi or track is None or (track.monotonic and not for_size):
                return None
            middle = track.median(lo[1] if lo[0] == h else "",
                                  hi[1] if hi[0] == h and hi[1] else None)
            point = (h, middle) if middle is not None else None
            return point if point is not None and lo < point < hi else None
        middle_h = (lo[0] + hi[0]) // 2
        return (middle_h, "") if lo < (middle_h, "") < hi else None
