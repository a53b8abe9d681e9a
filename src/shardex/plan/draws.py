"""The drawn placements of shard keys on a table's partitions, and each one's partition sums.

Pure arithmetic, no I/O. ``slots`` places one shard key in each of a number of
placements (the index names ``NAME``, ``NAME~1``, ...; ``sim.partitions.slot_of``, up to
``MOST`` partitions) and keeps the answer: a plan asks for the same keys over and over
(each N it tries, on each table size); a key is hashed once for every table size (its
jump hash's buckets do not depend on the size: ``_jumps``). ``Draws`` holds, for every
placement, what each partition takes (``spread`` plus the loads of the shard keys on it)
and its busiest; as the loads change (``fit_shards`` grows one value's N a step) it sums
again only the partitions whose shard keys changed, so a step costs the changed keys, not
all of them (when most keys changed, it sums from scratch: that walks each key once).

A partition's sum is the one a sum from scratch gives, to the bit: ``spread`` first, then
the loads of its shard keys, heaviest first (a float sum depends on its order; equal
loads are equal floats, so which key of two comes first does not change it).
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from functools import lru_cache
from hashlib import blake2b

from shardex.hashing import LCG_MULTIPLIER, MASK64

__all__ = ["Draws", "MOST", "buckets_of", "namespace_of", "slots"]

# the most partitions a placement is drawn for (a slot fits an unsigned short)
MOST = 1 << 16
# shard keys whose slots are kept (times 2 bytes a placement: about 50 MB at most)
_KEPT = 1 << 17
_SLOTS: dict[tuple[str, str, int], array[int]] = {}
# shard keys whose jumps are kept (about 2.2 KB a key for 100 placements: 36 MB at most)
_KEPT_JUMPS = 1 << 14
_JUMPS: dict[tuple[str, str], _Runs] = {}


def namespace_of(namespace: str, trial: int) -> str:
    """The index name of placement ``trial``: ``namespace``, then ``namespace~1``, ..."""
    return namespace if trial == 0 else f"{namespace}~{trial}"


def buckets_of(partitions: int) -> int:
    """The partitions a placement is drawn over: ``partitions`` up to ``MOST`` (``MOST``
    for none or fewer)."""
    return partitions if 0 < partitions <= MOST else MOST


def slots(namespace: str, key: str, partitions: int, trials: int) -> Sequence[int]:
    """The slot of ``key`` in each of (at least) ``trials`` placements on ``partitions``
    partitions: ``slot_of(namespace_of(namespace, t), key, buckets_of(partitions))``.

    Kept for the last ``_KEPT`` shard keys asked for (per namespace and partition count),
    and grown when more placements are asked for."""
    buckets = buckets_of(partitions)
    found = _SLOTS.get((namespace, key, buckets))
    if found is not None and len(found) >= trials:
        return found
    out = array("H") if found is None else found
    runs = _jumps(namespace, key, trials, buckets)
    jumps, ends = runs.jumps, runs.ends
    start = ends[len(out) - 1] if out else 0
    for end in ends[len(out):trials]:
        # the last of its jumps below the partitions (the first jump is 0)
        out.append(jumps[bisect_left(jumps, buckets, start, end) - 1])
        start = end
    if found is None:
        if len(_SLOTS) >= _KEPT:
            del _SLOTS[next(iter(_SLOTS))]
        _SLOTS[(namespace, key, buckets)] = out
    return out


class _Runs:
    """The jumps of one shard key's placements, below ``covered``: each placement's run
    one after another in ``jumps``, ``ends`` where each ends, and where each resumes (its
    hash ``states`` and the first jump at or past ``covered``, ``nexts``)."""

    __slots__ = ("covered", "ends", "jumps", "nexts", "states")

    def __init__(self) -> None:
        self.jumps, self.ends = array("H"), array("I")
        self.states, self.nexts = array("Q"), array("Q")
        self.covered = 0


def _jumps(namespace: str, key: str, trials: int, below: int) -> _Runs:
    """Every bucket ``hashing.jump`` passes through for ``key`` in each of (at least)
    ``trials`` placements, below (at least) ``below``, one run after another, and where
    each placement's run ends: its slot on any number of partitions up to ``covered`` is
    the last of its run below that number (the jumps do not depend on it), so a key is
    hashed once for all the table sizes a plan tries. The runs stop at the power of two
    at or past ``below`` (``covered``) and resume from where they stopped when a larger
    table asks: a table of 1,800 partitions takes 8.2 jumps a placement, 4 partitions
    2.1, and every jump below ``MOST`` 11.7 (``plan --peak A=300000`` 17% faster; sizes
    asked for one after another across three decades cost a quarter more).

    Kept for the last ``_KEPT_JUMPS`` shard keys asked for, grown as ``slots``."""
    found = _JUMPS.get((namespace, key))
    if found is not None and len(found.ends) >= trials and found.covered >= below:
        return found
    runs = _Runs() if found is None else found
    bound = max(runs.covered, min(MOST, 1 << max(0, below - 1).bit_length()))
    lcg, mask, top = LCG_MULTIPLIER, MASK64, float(1 << 31)
    # sim.partitions.key_hash and hashing.jump, written out: this is the plan's hot loop
    if bound > runs.covered and runs.ends:
        jumps, ends, states, nexts = array("H"), array("I"), runs.states, runs.nexts
        start = 0
        for run, end in enumerate(runs.ends):
            jumps.extend(runs.jumps[start:end])
            start, h, j = end, states[run], nexts[run]
            while j < bound:
                jumps.append(j)
                h = (h * lcg + 1) & mask
                j = int((j + 1) * (top / ((h >> 33) + 1)))
            ends.append(len(jumps))
            states[run], nexts[run] = h, j
        runs.jumps, runs.ends = jumps, ends
    jumps, ends, tail = runs.jumps, runs.ends, key.encode()
    for prefix in _prefixes(namespace, trials)[len(ends):]:
        hashed = prefix.copy()
        hashed.update(tail)
        h = int.from_bytes(hashed.digest(), "big")
        j = 0
        while j < bound:
            jumps.append(j)
            h = (h * lcg + 1) & mask
            j = int((j + 1) * (top / ((h >> 33) + 1)))
        ends.append(len(jumps))
        runs.states.append(h)
        runs.nexts.append(j)
    runs.covered = bound
    if found is None:
        if len(_JUMPS) >= _KEPT_JUMPS:
            del _JUMPS[next(iter(_JUMPS))]
        _JUMPS[(namespace, key)] = runs
    return runs


@lru_cache(maxsize=64)
def _prefixes(namespace: str, trials: int) -> tuple[blake2b, ...]:
    """Each placement's ``key_hash`` with its index name hashed, to copy for each key (a
    copy costs less than a new BLAKE2b)."""
    out = []
    for trial in range(trials):
        hashed = blake2b(digest_size=8)
        hashed.update(f"{namespace_of(namespace, trial)}\x00".encode())
        out.append(hashed)
    return tuple(out)


def _kept(was: float | None, load: float) -> bool:
    """Whether a key's load ``was`` (None: it is new) adds as ``load`` does: the same
    float (0.0 and -0.0 do not add alike)."""
    return was == load and type(was) is type(load) \
        and (load != 0 or math.copysign(1.0, was) == math.copysign(1.0, load))


class Draws:
    """What each partition takes in each of ``trials`` placements of the shard keys of
    ``loads`` on ``partitions`` (>= 1) partitions, each partition also taking ``spread``.

    ``update(loads)`` sets the loads (shard key -> units a second; checked by the caller).
    Then ``tops[t]`` is ``max(row(t))``, the busiest partition's load in placement ``t``,
    ``apart`` the placements with no two shard keys on one partition, and ``on(t, p)``
    the shard keys on partition ``p`` in placement ``t``, in the order of ``loads``.
    """

    def __init__(self, partitions: int, *, spread: float, namespace: str,
                 trials: int) -> None:
        self.partitions, self.spread = partitions, spread
        self.namespace, self.trials = namespace, trials
        self.loads: dict[str, float] = {}
        self.tops: list[float] = []
        # per placement, each partition's sum and count of keys (``_build`` makes them)
        self._sums: list[list[float]] = []
        self._counts: list[array[int]] = []
        self._crowded = [0] * trials
        self._ids: dict[str, int] = {}
        self._slots: list[Sequence[int]] = []
        self._weights: list[float] = []
        # who is on each partition, once loads change: per placement the first key id on
        # each partition (-1: none), and after key i in placement t the next (at i*T + t)
        self._heads: list[array[int]] = []
        self._after = array("i")

    @property
    def apart(self) -> int:
        """Placements in which no two shard keys share a partition."""
        return self._crowded.count(0)

    def row(self, trial: int) -> list[float]:
        """What each partition takes in placement ``trial``."""
        return self._sums[trial]

    def on(self, trial: int, partition: int) -> list[str]:
        """The shard keys on ``partition`` in placement ``trial``, in the order of loads."""
        return [key for key in self.loads
                if self._slots[self._ids[key]][trial] == partition]

    def update(self, loads: Mapping[str, float]) -> None:
        """Set the loads: summed from scratch the first time, then only the partitions of
        the shard keys that came, went or changed load."""
        if not self.tops:
            self._build(loads)
        else:
            self._change(loads)

    def _id(self, key: str) -> int:
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = len(self._slots)
            # kept slots may hold more placements than these: each zip stops at trials
            self._slots.append(slots(self.namespace, key, self.partitions, self.trials))
            self._weights.append(0.0)
        return found

    def _build(self, loads: Mapping[str, float]) -> None:
        partitions, spread = self.partitions, self.spread
        self._sums = [[spread] * partitions for _ in range(self.trials)]
        self._counts = [array("i", [0]) * partitions for _ in range(self.trials)]
        self._heads = []  # chained again when loads next change a few keys
        for key in sorted(loads, key=lambda k: -loads[k]):
            load = loads[key]
            ident = self._id(key)
            self._weights[ident] = load
            for row, count, slot in zip(self._sums, self._counts, self._slots[ident], strict=False):
                row[slot] += load
                count[slot] += 1
        self.loads = dict(loads)
        self.tops = [max(row) for row in self._sums]
        self._crowded = [len(count) - count.count(0) - count.count(1)
                         for count in self._counts]

    def _link(self) -> None:
        """Chain the shard keys on each partition (needed once loads change)."""
        trials = self.trials
        self._heads = [array("i", [-1]) * self.partitions for _ in range(trials)]
        self._after = array("i", [-1]) * (len(self._slots) * trials)
        for key in self.loads:
            self._chain(self._ids[key])

    def _chain(self, ident: int) -> None:
        trials, after = self.trials, self._after
        if len(after) < (ident + 1) * trials:
            after.extend(array("i", [-1]) * ((ident + 1) * trials - len(after)))
        for trial, (head, slot) in enumerate(zip(self._heads, self._slots[ident], strict=False)):
            after[ident * trials + trial] = head[slot]
            head[slot] = ident

    def _unchain(self, ident: int) -> None:
        trials, after = self.trials, self._after
        for trial, (head, slot) in enumerate(zip(self._heads, self._slots[ident], strict=False)):
            at, before = head[slot], -1
            while at != ident:
                before, at = at, after[at * trials + trial]
            if before < 0:
                head[slot] = after[ident * trials + trial]
            else:
                after[before * trials + trial] = after[ident * trials + trial]

    def _change(self, loads: Mapping[str, float]) -> None:
        old, trials = self.loads, self.trials
        changed = sum(1 for key in old if key not in loads) + sum(
            1 for key, load in loads.items() if not _kept(old.get(key), load))
        if 2 * changed >= len(loads):
            # most keys changed (a value of many shard keys grew its N: each key's load
            # with it): a sum from scratch walks each key once, where summing the
            # partitions again walks their chains, in Python, for every placement
            self._build(loads)
            return
        if not self._heads:
            self._link()
        # per placement, each partition whose keys changed -> its count before
        touched: list[dict[int, int]] = [{} for _ in range(trials)]

        def touch(ident: int) -> None:
            for seen, count, slot in zip(touched, self._counts, self._slots[ident],
                                         strict=False):
                if slot not in seen:
                    seen[slot] = count[slot]

        for key in old:
            if key not in loads:
                ident = self._ids[key]
                touch(ident)
                self._unchain(ident)
                for count, slot in zip(self._counts, self._slots[ident], strict=False):
                    count[slot] -= 1
        for key, load in loads.items():
            was = old.get(key)
            if _kept(was, load):
                continue
            ident = self._id(key)
            self._weights[ident] = load
            touch(ident)
            if was is None:
                self._chain(ident)
                for count, slot in zip(self._counts, self._slots[ident], strict=False):
                    count[slot] += 1
        self.loads = dict(loads)
        for trial, seen in enumerate(touched):
            if seen:
                self._sum_again(trial, seen)

    def _sum_again(self, trial: int, seen: Mapping[int, int]) -> None:
        """Sum again the partitions ``seen`` of placement ``trial`` (each with its count
        before), heaviest key first, and find its busiest again if it may have moved."""
        row, count, head = self._sums[trial], self._counts[trial], self._heads[trial]
        after, weights, trials = self._after, self._weights, self.trials
        top, again = self.tops[trial], False
        for slot, before in seen.items():
            loads, at = [], head[slot]
            while at >= 0:
                loads.append(weights[at])
                at = after[at * trials + trial]
            total = self.spread
            for load in sorted(loads, reverse=True):
                total += load
            again = again or row[slot] >= top or total >= top
            row[slot] = total
            self._crowded[trial] += (count[slot] > 1) - (before > 1)
        if again:
            self.tops[trial] = max(row)
