"""The spread parts of the rate engine's second (``shardex.sim.fluid``): units asked of
every partition of a table in proportion to its share of the hash space (the placement
records of many items), and the partitions only they reach, which a steady second may
leave as they are (``Quiet``).
"""

from __future__ import annotations

from shardex.sim.partitions import Partition
from shardex.sim.table import Resource

__all__ = ["Quiet", "Spread"]


class Spread:
    """A resource's spread parts of one second: its partitions, each with its share of the
    hash space (summing to 1), the units asked of them and the share they accept."""

    __slots__ = ("_factors", "_weighed", "factor", "heaviest", "limiter", "loud", "parts",
                 "quiet", "refused", "resource", "split_gen", "strong", "taken", "units",
                 "write")

    def __init__(self, resource: int, write: bool, parts: list[tuple[Partition, float]]) -> None:
        whole = sum(weight for _, weight in parts)
        self.resource = resource
        self.write = write
        self.parts = [(p, weight / whole) for p, weight in parts] if whole > 0 else []
        # the parts not quiet and the quiet ones, as of Quiet generation split_gen
        self.loud: list[tuple[Partition, float]] = self.parts
        self.quiet: list[tuple[Partition, float]] = []
        self.heaviest = 0.0  # the largest weight of a quiet part
        self.split_gen = -1
        self.reset()

    def reset(self) -> None:
        self.units = self.taken = self.refused = 0.0
        self.factor = 1.0
        self.strong = False
        self.limiter: Partition | None = None
        self._factors: dict[Partition, float] = {}
        self._weighed = 1.0

    def settle(self, factor: dict[Partition, float]) -> None:
        """The expected share accepted of an operation landing on one of the partitions.

        Exactly 1.0 when every partition accepts all it is asked: the weights' sum is
        1.0 only to a rounding (over 20,000 partitions it fell 2e-13 short, refusing that
        much of the spread each second).
        """
        self.limiter = min(self.parts, key=lambda s: factor[s[0]])[0] if self.parts else None
        self.factor = 1.0 if self.limiter is None or factor[self.limiter] >= 1.0 else min(
            1.0, sum(factor[p] * weight for p, weight in self.parts))
        self._factors = factor
        # what a partition takes is its weight's share of the whole accepted, times its factor
        self._weighed = sum(factor.get(p, 1.0) * w for p, w in self.parts) or 1.0

    def apply(self, write: bool, now: float, pseudo: dict[Partition, tuple[int, int]],
              parts: list[tuple[Partition, float]] | None = None) -> None:
        """Take what was accepted, in proportion to what each partition could accept, on
        ``parts`` (default: all of them)."""
        if not self.parts or not (self.taken or self.refused):
            return
        self.put(self.parts if parts is None else parts, self.taken + self.refused,
                 self.scale(), write, self.strong, now, pseudo)

    def scale(self) -> float:
        """What a partition takes of its weight's share, times its factor."""
        return self.taken / self._weighed

    def put(self, parts: list[tuple[Partition, float]], asked: float, scale: float,
            write: bool, strong: bool, now: float,
            pseudo: dict[Partition, tuple[int, int]]) -> None:
        factors = self._factors
        for partition, weight in parts:
            taken = scale * weight * factors.get(partition, 1.0)
            refused = asked * weight - taken
            partition.spread(taken, refused if refused > 0 else 0.0, write, strong, now,
                             1.0, pseudo.get(partition, (0, 0)))


class Quiet:
    """The partitions that spread parts alone reach, far from hot: a steady second leaves
    them as it found them, so a remembered second skips them.

    A partition none of whose remembered seconds places a key on, with no share bucket
    and not due to split, whose units this second are under half its hot mark, is quiet
    from then on. A remembered second skips its spreads' units on quiet partitions while
    they add up to under half the mark in that second (``skip``): the partition stays
    cold, as it would have, and rolling it later (its second left behind) clears what a
    roll would have cleared each second. Anything else (a second worked out afresh, more
    units) wakes them first (``wake``): they are rolled to the second and given the units
    skipped in it, in order, as they would have been.
    """

    __slots__ = ("gen", "hits", "load", "parts", "second", "skipped")

    def __init__(self) -> None:
        self.parts: set[Partition] | None = None
        self.gen = 0
        self.hits = 0  # remembered seconds since the last wake
        self.second = -1
        self.skipped: list[tuple[Spread, list[tuple[Partition, float]], float, float,
                                 bool, bool, float]] = []
        self.load: dict[tuple[int, bool], float] = {}

    def calm(self, resources: list[Resource], keyed: set[Partition]) -> None:
        """Count a remembered second; the second since the last wake finds the quiet
        partitions (``form``): where seconds worked out afresh come between remembered
        ones, waking them would undo the finding each time."""
        self.hits += 1
        if self.parts is None and self.hits >= 2:
            self.form(resources, keyed)

    def form(self, resources: list[Resource], keyed: set[Partition]) -> None:
        self.gen += 1
        self.parts = {
            part for resource in resources for slot in resource.partitions.slots()
            for part in slot.parts
            if part not in keyed and part.share_write is None and part.share_read is None
            and not part.due and part.bytes <= part.limits.bytes
            and 2 * (part.written + part.refused_write) < part.limits.hot_write
            and 2 * (part.read + part.refused_read) < part.limits.hot_read}

    def loud(self, spread: Spread) -> list[tuple[Partition, float]]:
        """The parts of ``spread`` not quiet: what a remembered second rolls and takes."""
        if not self.parts:
            return spread.parts
        if spread.split_gen != self.gen:
            quiet = self.parts
            spread.loud = [s for s in spread.parts if s[0] not in quiet]
            spread.quiet = [s for s in spread.parts if s[0] in quiet]
            spread.heaviest = max((weight for _, weight in spread.quiet), default=0.0)
            spread.split_gen = self.gen
        return spread.loud

    def skip(self, spread: Spread, write: bool, now: float, second: int) -> bool:
        """Leave ``spread``'s units on its quiet parts untaken, and say so; False when they
        would bring a quiet partition's second to half its hot mark."""
        self.loud(spread)
        if not spread.quiet or not (spread.taken or spread.refused):
            return True
        if second != self.second:
            self.second, self.skipped, self.load = second, [], {}
        asked = spread.taken + spread.refused
        most = asked * spread.heaviest
        limits = spread.quiet[0][0].limits
        key = (spread.resource, write)
        load = self.load.get(key, 0.0) + most
        if 2 * load >= (limits.hot_write if write else limits.hot_read):
            return False
        self.load[key] = load
        self.skipped.append((spread, spread.quiet, asked, spread.scale(), write,
                             spread.strong, now))
        return True

    def wake(self, second: int, pseudo: dict[Partition, tuple[int, int]]) -> None:
        """Give the quiet partitions what was skipped on them in ``second``; none is quiet
        after."""
        self.hits = 0
        if not self.parts:
            self.parts = None
            return
        for part in self.parts:
            if part.second < second:
                part.roll(second)
        if self.second == second:
            for spread, parts, asked, scale, write, strong, now in self.skipped:
                spread.put(parts, asked, scale, write, strong, now, pseudo)
        self.parts, self.skipped, self.load, self.second = None, [], {}, -1
