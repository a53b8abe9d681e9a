"""The rate-level engine: the capacity model run second by second on rates, not requests.

An hour at 50,000 writes a second is 180 million requests: too many to push one by one
through ``memory://``. This engine runs the *same* capacity model (the same
``Profile``, ``PartitionMap``, ``Partition`` and ``TableLimit`` objects, so the same
ceilings, burst, table limits and splits) on flows: classes of identical operations,
each offered at a rate. Each second it

1. rolls the partitions its keys live on (a partition due to split splits, as in the
   store),
2. shares every partition's room for the second among the flows that touch it: a flow
   (a transaction over several keys) is accepted at the smallest share of its parts;
   a partition whose flows are limited elsewhere gives its spare room to the rest,
3. holds every flow to the table-level limit of each table it touches, as requests spread
   over the second meet it at one instant: each keeps the smaller of its share and one
   level, the level set so that together they fill the table (``_level``),
4. takes what was accepted, and counts the rest as refused demand (heat), as a
   throttled request is counted.

Writes are shared before reads. Where the two draw on one budget (``shared_units``:
Cosmos DB's RU, Azure Table Storage's entities), the kind shared first takes only its
part of a partition's or table's room in proportion to what both ask (``step``'s
``beside``: the flows of the same second a later step offers), so that a short budget
refuses both kinds alike, as a service admitting requests in arrival order does; what
the first leaves unused, the second takes.

A steady second (the same flows, nothing split, no limit moved) is shared as the one
before it was. Every second leaves the partitions that only spread parts reach, far from
hot, as they were (``shardex.sim.spread.Quiet``): a table of 100,000 partitions costs a
second what the partitions its keys are on cost, to the same figures.

Keys are named once (``FluidEngine.key``) with the order their sort values come in:
``rising`` (a timestamp: a hot key never splits by sort value) or ``spread``. A part
with no key is spread over every partition of its table in proportion to the share of
the hash space each holds: the placement records of many items.

Differences from the request-level store, by design: the engine sees rates, so it has
no latency and no retries (a refused operation counts once, and is not offered again),
and it places a spread part by expectation, not by each item's hash.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from shardex.sim.partitions import KeyTrack, Partition, Slot
from shardex.sim.profiles import Profile
from shardex.sim.spread import Quiet, Spread, Spreading
from shardex.sim.table import KEY_RANGE, Resource

__all__ = ["Flow", "FlowResult", "FluidEngine", "Part"]

_TOP = float(1 << 64)
# seconds worked out that a step may find again: a simulation offers a few flows objects
# again and again (its reads, its writes, the writes its locates hold back)
_REMEMBERED = 16


class Part(NamedTuple):
    """What one operation of a flow asks of one key: ``units`` on key ``key`` of
    ``resource`` (0: the table, 1: its GSI), or spread over the resource (``key`` None)."""

    resource: int
    key: int | None
    units: float


class Flow(NamedTuple):
    """A class of identical operations offered at ``rate`` a second.

    ``write``: writes (else reads); ``strong``: strongly consistent reads; ``parts``:
    what each operation takes where, all or nothing.
    """

    rate: float
    write: bool
    parts: tuple[Part, ...]
    strong: bool = True


@dataclass(slots=True)
class FlowResult:
    """What one second did to one flow: operations accepted and refused, and why refused.

    ``reason`` is the ThrottlingReason of the limit that bound it (None: all accepted);
    ``partition`` the partition that bound it, if one did.
    """

    accepted: float
    refused: float
    reason: str | None = None
    partition: str | None = None


@dataclass(slots=True)
class _Key:
    resource: int
    name: str
    slot: Slot
    h: int
    rising: bool


# what a later step's flows ask of each partition, and of each resource's table
_Reserve = tuple[dict[Partition, float], list[float]]


class FluidEngine:
    """The capacity model of one table (and its GSI in the ``gsi`` layout), run on rates."""

    def __init__(self, profile: Profile, *, namespace: str = "index") -> None:
        self.profile = profile
        self.namespace = namespace
        self.resources = [Resource(profile)]
        if profile.layout == "gsi":
            self.resources.append(Resource(profile, index=True))
        self._keys: list[_Key] = []
        self._pseudo: dict[Partition, tuple[int, int]] = {}
        # id(flows) -> (flows, state, where each part landed, spreads, results, beside): see step
        self._memo: dict[int, tuple[Sequence[Flow], tuple[float, ...], list[list[_Where]],
                                    list[Spread], list[FlowResult], Sequence[Flow]]] = {}
        # token buckets change from second to second: no second is like the one before
        self._cacheable = profile.capacity == "on-demand"
        # resource -> (partition map generation, its partitions and their shares)
        self._spreads: dict[int, tuple[int, Spreading]] = {}
        # the partitions a second has placed a key on: never quiet
        self._keyed: set[Partition] = set()
        self._quiet = Quiet()

    def key(self, name: str, *, index: bool = False, rising: bool = True) -> int:
        """Name a key once; return its id for ``Part``.

        ``index``: the key lives in the GSI (the ``gsi`` layout only; else the table).
        ``rising``: its writes' sort values only rise (else they are spread).
        """
        resource = 1 if index and len(self.resources) > 1 else 0
        partitions = self.resources[resource].partitions
        slot, h = partitions.slot(self.namespace, name)
        partitions.tracks[h] = KeyTrack.rising() if rising else KeyTrack.spread()
        self._keys.append(_Key(resource, name, slot, h, rising))
        return len(self._keys) - 1

    def key_name(self, key: int) -> str:
        return self._keys[key].name

    def partitions_of(self, key: int, second: int) -> list[tuple[Partition, float]]:
        """The partitions holding ``key`` in ``second`` (rolled, split if due), with the
        share of its load each takes."""
        found = self._keys[key]
        partitions = self.resources[found.resource].partitions
        while True:
            spans = self._spans(found)
            split = False
            for part, _ in spans:
                self._quiet.wake_one(part, second, self._pseudo)
                if part.second != second:
                    part.roll(second)
                    if part.due and partitions.split(found.slot, part, second) is not None:
                        split = True
            if not split:
                return spans

    def spread(self, resource: int, second: int) -> Spreading:
        """Every partition of a resource with its share of the hash space, those not quiet
        rolled (split if due).

        With every key its own partition (``partitions=0``) a spread part lands on no
        partition in particular: only the table-level limit applies to it.
        """
        partitions = self.resources[resource].partitions
        while True:
            base = self._spreading(resource)
            generation = partitions.generation
            for slot, part in base.rolled:
                if part.second != second:
                    part.roll(second)
                    if part.due:
                        partitions.split(slot, part, second)
            if partitions.generation == generation:
                return base

    def _spreading(self, resource: int) -> Spreading:
        """The resource's partitions and shares as its map has them now (not rolled),
        split into loud and quiet as ``Quiet`` has them now."""
        partitions = self.resources[resource].partitions
        cached = self._spreads.get(resource)
        if cached is None or cached[0] != partitions.generation:
            out: list[tuple[Slot, Partition, float]] = []
            for slot in partitions.slots() if partitions.count else ():
                bounds = slot.bounds
                for i, part in enumerate(slot.parts):
                    lo = bounds[i][0]
                    hi = bounds[i + 1][0] if i + 1 < len(bounds) else 1 << 64
                    out.append((slot, part, (hi - lo) / _TOP / partitions.count))
                    # two keys inside the range stand for the many spread over it, so
                    # the heat of a partition full of them splits it in the middle
                    self._pseudo[part] = (lo + (hi - lo) // 4, lo + (hi - lo) // 2)
            cached = self._spreads[resource] = (partitions.generation, Spreading(out))
        return self._quiet.split(cached[1])

    def step(self, second: int, flows: Sequence[Flow], *,
             beside: Sequence[Flow] = ()) -> list[FlowResult]:
        """Run one second of ``flows``; return what each had accepted and refused.

        ``beside``: flows a later step offers in the same second (reads stepped first,
        then the writes they let through). Where reads and writes draw on one budget,
        ``flows`` take a partition's or table's room only in proportion to what they
        and ``beside`` ask of it (the module's docstring); elsewhere ``beside`` changes
        nothing.

        The same ``flows`` object offered again (beside the same ``beside``), on
        partitions that have not split and tables whose limits have not moved (and no
        token bucket in play), is shared as it was the second before: a steady workload
        is worked out once, then only carried out, second after second.
        """
        now = float(second)
        for resource in self.resources:
            resource.table.roll(second)
        state = self._state()
        if self._cacheable:
            self._quieten(flows, second)
        memo = self._memo.get(id(flows))
        if memo is not None and memo[0] is flows and memo[5] is beside \
                and memo[1] == state and self._roll_all(memo[2], memo[3], second) == state:
            _, _, known, remembered, shared, _ = memo
            self._memo[id(flows)] = self._memo.pop(id(flows))  # the most recently offered
            again = [FlowResult(r.accepted, r.refused, r.reason, r.partition) for r in shared]
            for write, group in self._groups(flows):
                self._apply([flows[i] for i in group], [known[i] for i in group],
                            [again[i] for i in group], remembered, write, now)
            return again
        spread_of: dict[tuple[int, bool], Spread] = {}
        placed: list[list[_Where]] = []
        for flow in flows:
            where: list[_Where] = []
            for part in flow.parts:
                if part.key is None:
                    spread = spread_of.get((part.resource, flow.write))
                    if spread is None:
                        spread = spread_of[(part.resource, flow.write)] = Spread(
                            part.resource, flow.write, self.spread(part.resource, second))
                    where.append(_Where(part.resource, part.units, None, spread))
                else:
                    found = self._keys[part.key]
                    where.append(_Where(found.resource, part.units,
                                        self.partitions_of(part.key, second), None,
                                        found.h))
            placed.append(where)
        spreads = list(spread_of.values())
        results: list[FlowResult] = [FlowResult(0.0, 0.0)] * len(flows)
        groups = self._groups(flows)
        for n, (write, group) in enumerate(groups):
            later = [flows[i] for _, rest in groups[n + 1:] for i in rest] + list(beside)
            shared = self._share([flows[i] for i in group], [placed[i] for i in group],
                                 spreads, write, now, self._reserved(later, write, second))
            for i, result in zip(group, shared, strict=True):
                results[i] = result
            self._apply([flows[i] for i in group], [placed[i] for i in group],
                        [results[i] for i in group], spreads, write, now)
        self._keyed.update(part for where in placed for w in where
                           for part, _ in w.shares or ())
        if self._cacheable:
            memo_key = id(flows)
            if memo_key not in self._memo and len(self._memo) >= _REMEMBERED:
                # the least recently offered goes: flows made anew each second come no more
                del self._memo[next(iter(self._memo))]
            self._memo.pop(memo_key, None)
            self._memo[memo_key] = (flows, self._state(), placed, spreads,
                                     [FlowResult(r.accepted, r.refused, r.reason, r.partition)
                                      for r in results], beside)
        return results

    def _reserved(self, later: Sequence[Flow], write: bool, second: int) -> _Reserve | None:
        """What flows of the other kind, shared after flows of kind ``write`` in this
        second, ask of each partition and each table: on one budget (``shared_units``)
        alone, else None. A part spread over a table counts at the table alone (thin on
        each partition, as the store's placement records are)."""
        if not self.profile.shared_units:
            return None
        parts: dict[Partition, float] = {}
        tables = [0.0] * len(self.resources)
        for flow in later:
            if flow.write is write:
                continue
            for part in flow.parts:
                load = flow.rate * part.units
                if part.key is None:
                    tables[part.resource] += load
                    continue
                tables[self._keys[part.key].resource] += load
                for partition, weight in self.partitions_of(part.key, second):
                    parts[partition] = parts.get(partition, 0.0) + load * weight
        return (parts, tables) if parts or any(tables) else None

    def _quieten(self, flows: Sequence[Flow], second: int) -> None:
        """Find the quiet partitions once two steps have gone since they last woke; wake
        them if this step's spreads could bring one to half its hot mark this second."""
        quiet = self._quiet
        quiet.calm(self.resources, self._keyed)
        if not quiet.parts:
            return
        asked: dict[tuple[int, bool], float] = {}
        for flow in flows:
            for part in flow.parts:
                if part.key is None:
                    key = (part.resource, flow.write)
                    asked[key] = asked.get(key, 0.0) + flow.rate * part.units
        if asked and not quiet.admit(asked, {r: self._spreading(r) for r, _ in asked},
                                     second):
            quiet.wake(second, self._pseudo)

    def _state(self) -> tuple[float, ...]:
        """What sharing a second depends on besides the flows: splits and table limits."""
        out: list[float] = []
        for resource in self.resources:
            out += (resource.partitions.generation, resource.table.limit(True)[0],
                    resource.table.limit(False)[0])
        return tuple(out)

    def _roll_all(self, placed: list[list[_Where]], spreads: list[Spread],
                  second: int) -> tuple[float, ...]:
        """Roll every partition a remembered second touched; split those due."""
        for where in placed:
            for w in where:
                for part, _ in w.shares or ():
                    self._roll(part, second)
        for spread in spreads:
            for part, _ in self._quiet.split(spread.base).loud:
                self._roll(part, second)
        return self._state()

    def _roll(self, part: Partition, second: int) -> None:
        if part.second != second:
            part.roll(second)
            if part.due:
                for resource in self.resources:
                    slot = resource.partitions.slot_holding(part)
                    if slot is not None:
                        resource.partitions.split(slot, part, second)
                        return

    @staticmethod
    def _groups(flows: Sequence[Flow]) -> list[tuple[bool, list[int]]]:
        out = []
        for write in (True, False):
            group = [i for i, flow in enumerate(flows) if flow.write is write]
            if group:
                out.append((write, group))
        return out

    # -- internals ----------------------------------------------------------------------

    def _spans(self, key: _Key) -> list[tuple[Partition, float]]:
        slot = key.slot
        parts = slot.parts
        if len(parts) == 1:
            return [(parts[0], 1.0)]
        bounds = slot.bounds
        first = bisect.bisect_right(bounds, (key.h, "")) - 1
        last = bisect.bisect_left(bounds, (key.h + 1, "")) - 1
        if first == last:
            return [(parts[first], 1.0)]
        if key.rising:
            return [(parts[last], 1.0)]
        out = []
        for i in range(first, last + 1):
            lo = _position(bounds[i][1]) if bounds[i][0] == key.h else 0.0
            hi = _position(bounds[i + 1][1]) if i < last else 1.0
            if hi > lo:
                out.append((parts[i], hi - lo))
        return out

    def _share(self, flows: list[Flow], placed: list[list[_Where]], spreads: list[Spread],
               write: bool, now: float, reserve: _Reserve | None = None
               ) -> list[FlowResult]:
        """Share the partitions' and tables' room of one second among flows of one kind,
        less what ``reserve`` keeps of it for the other kind (``_reserved``)."""
        spreads = [spread for spread in spreads if spread.write is write]
        for spread in spreads:  # as quiet as they are now: a key may have woken one
            self._quiet.split(spread.base)
        demand: dict[Partition, float] = {}
        owner: dict[Partition, int] = {}
        strong: dict[Partition, bool] = {}
        for flow, where in zip(flows, placed, strict=True):
            for w in where:
                load = flow.rate * w.units
                if w.spread is not None:
                    w.spread.units += load
                    w.spread.strong = w.spread.strong or flow.strong
                    continue
                for partition, weight in w.shares or ():
                    demand[partition] = demand.get(partition, 0.0) + load * weight
                    owner[partition] = w.resource
                    strong[partition] = strong.get(partition, False) or flow.strong
        for spread in spreads:
            for partition, weight in spread.base.loud:
                demand[partition] = demand.get(partition, 0.0) + spread.units * weight
                owner[partition] = spread.resource
                strong[partition] = strong.get(partition, False) or spread.strong
        # a second's operations may take what a bucket holds at its start and what it
        # refills during it (span 1), as requests spread over the second would
        room = {p: max(0.0, p.room(write, strong[p], now, 1.0)) for p in demand}
        if reserve is not None:
            for p, other in reserve[0].items():
                if p in room and demand[p] + other > room[p]:
                    room[p] *= demand[p] / (demand[p] + other)  # this kind's part of it
        factor = {p: 1.0 if demand[p] <= room[p] else room[p] / demand[p] for p in demand}
        for spread in spreads:
            spread.settle(factor)
        accepted = [_accepted(where, factor) for where in placed]
        # a partition whose flows are held back elsewhere gives its spare room to the rest
        used: dict[Partition, float] = {}
        bound: dict[Partition, float] = {}
        for flow, where, (share, limiter) in zip(flows, placed, accepted, strict=True):
            for w in where:
                load = flow.rate * w.units
                if w.spread is not None:
                    w.spread.taken += load * share
                    continue
                for partition, weight in w.shares or ():
                    if limiter is partition:
                        bound[partition] = bound.get(partition, 0.0) + load * weight
                    else:
                        used[partition] = used.get(partition, 0.0) + load * weight * share
        for spread in spreads:
            for partition, weight in spread.base.loud:
                used[partition] = used.get(partition, 0.0) + spread.taken * weight
        for partition, load in bound.items():
            spare = room[partition] - used.get(partition, 0.0)
            factor[partition] = 1.0 if load <= spare else max(0.0, spare) / load
        for spread in spreads:
            spread.settle(factor)
        accepted = [_accepted(where, factor) for where in placed]
        results = []
        for flow, (share, limiter) in zip(flows, accepted, strict=True):
            result = FlowResult(flow.rate * share, flow.rate * (1.0 - share))
            if share < 1.0 and limiter is not None:
                result.reason = self.resources[owner[limiter]].reason(KEY_RANGE, write=write)
                result.partition = limiter.name
            results.append(result)

        for index, table in enumerate(self.resources):
            touching = [(flow, result, sum(w.units for w in where if w.resource == index))
                        for flow, result, where in zip(flows, results, placed, strict=True)]
            touching = [t for t in touching if t[2] > 0 and t[1].accepted > 0]
            taken = sum(result.accepted * units for _, result, units in touching)
            room_left, kind = table.table.room(write, now, 1.0)
            other = reserve[1][index] if reserve is not None else 0.0
            if other and taken + other > room_left > 0:
                room_left *= taken / (taken + other)
            if taken <= max(0.0, room_left) or taken <= 0:
                continue
            level = _level([(result.accepted / flow.rate, flow.rate * units)
                            for flow, result, units in touching], max(0.0, room_left))
            for flow, result, _ in touching:
                if result.accepted > flow.rate * level:
                    cut = result.accepted - flow.rate * level
                    result.refused += cut
                    result.accepted -= cut
                    result.reason = table.reason(kind, write=write)
                    result.partition = None
        return results

    def _apply(self, flows: list[Flow], placed: list[list[_Where]],
               results: list[FlowResult], spreads: list[Spread], write: bool,
               now: float) -> None:
        spreads = [spread for spread in spreads if spread.write is write]
        for spread in spreads:
            spread.taken = spread.refused = 0.0
        for flow, where, result, in zip(flows, placed, results, strict=True):
            for w in where:
                taken, refused = result.accepted * w.units, result.refused * w.units
                table = self.resources[w.resource].table
                if taken:
                    table.take(taken, write, now, 1.0)
                if refused:
                    table.refuse(refused, write)
                if w.spread is not None:
                    w.spread.taken += taken
                    w.spread.refused += refused
                    continue
                for partition, weight in w.shares or ():
                    if taken:
                        partition.take(taken * weight, write, flow.strong, now, w.h, 1.0)
                    if refused:
                        partition.refuse(refused * weight, write, w.h)
        for spread in spreads:
            loud = self._quiet.split(spread.base).loud
            self._quiet.skip(spread, write, now)
            spread.apply(write, now, self._pseudo, loud)


class _Where(NamedTuple):
    """Where one part of a flow lands this second: a key's partitions, or a spread."""

    resource: int
    units: float
    shares: list[tuple[Partition, float]] | None
    spread: Spread | None
    h: int = 0


def _accepted(where: list[_Where], factor: dict[Partition, float]
              ) -> tuple[float, Partition | None]:
    """The share of a flow accepted (its smallest share over its parts), and what bound it."""
    share, limiter = 1.0, None
    for w in where:
        if w.spread is not None:
            if w.spread.factor < share:
                share, limiter = w.spread.factor, w.spread.limiter
            continue
        shares = w.shares or []
        if not shares:
            continue
        if len(shares) == 1:
            fits, partition = factor[shares[0][0]], shares[0][0]
        else:  # one operation lands on one of them: the expected share accepted
            fits = sum(factor[p] * weight for p, weight in shares) / sum(
                weight for _, weight in shares)
            partition = min(shares, key=lambda s: factor[s[0]])[0]
        if fits < share:
            share, limiter = fits, partition
    return share, limiter


def _level(shares: list[tuple[float, float]], room: float) -> float:
    """The share every flow is held to by a table's limit: each flow keeps the smaller of
    its share and the level, and together they take ``room`` units (``shares``: (share
    of its rate accepted so far, units a second at its full rate)). Requests spread over
    a second meet the table's limit at one instant, whatever partition held some of them
    back before it: a flow a partition already holds under the level loses nothing more.
    """
    rest = sum(weight for _, weight in shares)
    for share, weight in sorted(shares):
        if share * rest <= room:
            room -= share * weight
            rest -= weight
            continue
        return room / rest if rest > 0 else 0.0
    return 1.0


def _position(sort: str) -> float:
    """Where a sort value written by ``KeyTrack.spread`` lies in ``[0, 1)``."""
    try:
        return min(1.0, max(0.0, float(sort)))
    except ValueError:
        return 0.0
