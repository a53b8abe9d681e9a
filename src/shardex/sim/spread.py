"""The spread parts of the rate engine's second (``shardex.sim.fluid``): units asked of
every partition of a table in proportion to its share of the hash space (the placement
records of many items), and the partitions only they reach, far from hot, which the
engine leaves as they are (``Quiet``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from shardex.sim.partitions import Partition, Slot
from shardex.sim.table import Resource

__all__ = ["Quiet", "Spread", "Spreading"]


class Spreading:
    """A resource's partitions as one partition map generation has them: each with its
    slot (``everything``: what a second rolls), and those with a share of the hash space
    with that share over the whole (``parts``, summing to 1); ``heaviest`` the largest.

    ``Quiet.split`` sorts them (as of its generation ``split_gen``) into those a second
    rolls and takes units on (``rolled``, ``loud``) and the quiet ones (``quiet``, their
    weights' sum exactly as ``quiet_weight``: a few floats that add up to it without a
    rounding, so a sum over the loud parts and them is the sum over every part)."""

    __slots__ = ("everything", "heaviest", "loud", "parts", "quiet", "quiet_weight", "rolled",
                 "split_gen")

    def __init__(self, everything: list[tuple[Slot, Partition, float]]) -> None:
        self.everything = [(slot, part) for slot, part, _ in everything]
        shares = [(part, share) for _, part, share in everything if share > 0]
        whole = sum(share for _, share in shares)
        self.parts = [(p, share / whole) for p, share in shares] if whole > 0 else []
        self.heaviest = max((weight for _, weight in self.parts), default=0.0)
        self.rolled = self.everything
        self.loud = self.parts
        self.quiet: list[tuple[Partition, float]] = []
        self.quiet_weight: list[float] = []
        self.split_gen = -1


def _exactly(values: Iterable[float]) -> list[float]:
    """Floats whose sum is exactly that of ``values`` (Shewchuk's partials, as
    ``math.fsum`` keeps them): any sum of them with others, through ``math.fsum``, is the
    sum of ``values`` with those others, to the bit."""
    partials: list[float] = []
    for x in values:
        i = 0
        for y in partials:
            if abs(x) < abs(y):
                x, y = y, x
            high = x + y
            low = y - (high - x)
            if low:
                partials[i] = low
                i += 1
            x = high
        partials[i:] = [x]
    return partials


class Spread:
    """A resource's spread parts of one second: its partitions (``base``), the units asked
    of them and the share they accept."""

    __slots__ = ("_factors", "_weighed", "base", "factor", "limiter", "parts", "refused",
                 "resource", "strong", "taken", "units", "write")

    def __init__(self, resource: int, write: bool, base: Spreading) -> None:
        self.resource = resource
        self.write = write
        self.base = base
        self.parts = base.parts
        self.reset()

    def reset(self) -> None:
        self.units = self.taken = self.refused = 0.0
        self.factor = 1.0
        self.strong = False
        self.limiter: Partition | None = None
        self._factors: dict[Partition, float] = {}
        self._weighed = 1.0

    def settle(self, factor: dict[Partition, float]) -> None:
        """The expected share accepted of an operation landing on one of the partitions
        (``factor``: the share each accepts; every quiet one accepts all).

        Exactly 1.0 when every partition accepts all it is asked: the weights' sum is
        1.0 only to a rounding (over 20,000 partitions it fell 2e-13 short, refusing that
        much of the spread each second).
        """
        loud, quiet = self.base.loud, self.base.quiet_weight
        self.limiter = min(loud, key=lambda s: factor[s[0]])[0] if loud else None
        # each sum the same to the bit whichever partitions are quiet (a heat of 44.25
        # summed two ways split a partition at two points)
        self.factor = 1.0 if self.limiter is None or factor[self.limiter] >= 1.0 else min(
            1.0, math.fsum([factor[p] * weight for p, weight in loud] + quiet))
        self._factors = factor
        # what a partition takes is its weight's share of the whole accepted, times its factor
        self._weighed = math.fsum([factor.get(p, 1.0) * w for p, w in loud] + quiet) or 1.0

    def apply(self, write: bool, now: float, pseudo: dict[Partition, tuple[int, int]],
              parts: list[tuple[Partition, float]]) -> None:
        """Take what was accepted, in proportion to what each partition could accept, on
        ``parts`` (those not quiet)."""
        if not self.parts or not (self.taken or self.refused):
            return
        self.put(parts, self.taken + self.refused, self.scale(), write, self.strong, now,
                 pseudo)

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


_Skipped = tuple[Spread, list[tuple[Partition, float]], float, float, bool, bool, float]


class Quiet:
    """The partitions that spread parts alone reach, far from hot: a second leaves them as
    it found them but for their units, which only a roll reads (to clear them), so the
    engine neither rolls them nor takes units on them, and a table of 100,000 partitions
    costs a second what the partitions its keys are on cost.

    A partition no second has placed a key on, with no share bucket, not due to split,
    whose units this second are under half its hot mark, is quiet once two steps have
    gone since the last wake (``calm``, ``form``). Every second the engine asks, before it
    touches a partition, whether the spreads' units would bring a quiet partition to half
    its hot mark in that second (``admit``): while they would not, a quiet partition
    accepts all it is asked (its room is more than that) and stays cold, as it would have,
    and rolling it later (its second left behind) clears what a roll would have cleared
    each second; the units skipped are noted (``skip``). When they would, every quiet
    partition wakes (``wake``): rolled to the second and given the units skipped in it,
    in order, as they would have been. A key a second places on a quiet partition wakes
    that one (``wake_one``).
    """

    __slots__ = ("gen", "load", "parts", "second", "skipped", "steps")

    def __init__(self) -> None:
        self.parts: set[Partition] | None = None
        self.gen = 0
        self.steps = 0  # steps since the last wake
        self.second = -1
        self.skipped: list[_Skipped] = []  # this second's
        self.load: dict[tuple[int, bool], float] = {}  # this second's, at most a partition

    def calm(self, resources: list[Resource], keyed: set[Partition]) -> None:
        """Count a step; the second since the last wake finds the quiet partitions."""
        self.steps += 1
        if self.parts is None and self.steps >= 2:
            self.gen += 1
            self.parts = {
                part for resource in resources for slot in resource.partitions.slots()
                for part in slot.parts
                if part not in keyed and part.share_write is None and part.share_read is None
                and not part.due and part.bytes <= part.limits.bytes
                and 2 * (part.written + part.refused_write) < part.limits.hot_write
                and 2 * (part.read + part.refused_read) < part.limits.hot_read}

    def split(self, base: Spreading) -> Spreading:
        """``base`` with its loud and quiet parts as this generation has them."""
        if base.split_gen != self.gen:
            quiet = self.parts or set()
            base.rolled = [s for s in base.everything if s[1] not in quiet]
            base.loud = [s for s in base.parts if s[0] not in quiet]
            base.quiet = [s for s in base.parts if s[0] in quiet]
            base.quiet_weight = _exactly(weight for _, weight in base.quiet)
            base.split_gen = self.gen
        return base

    def admit(self, asked: Mapping[tuple[int, bool], float],
              bases: Mapping[int, Spreading], second: int) -> bool:
        """Count this step's spread units (``asked``: per resource and kind) against the
        quiet partitions' budget for ``second``; False (nothing counted) if they would
        bring one to half its hot mark."""
        if not self.parts:
            return True
        if second != self.second:
            self.second, self.skipped, self.load = second, [], {}
        loads = dict(self.load)
        for (resource, write), units in asked.items():
            base = bases.get(resource)
            if base is None or not units:
                continue
            limits = base.parts[0][0].limits if base.parts else None
            load = loads[resource, write] = loads.get((resource, write), 0.0) \
                + units * base.heaviest
            if limits is not None and 2 * load >= (limits.hot_write if write
                                                   else limits.hot_read):
                return False
        self.load = loads
        return True

    def skip(self, spread: Spread, write: bool, now: float) -> None:
        """Note ``spread``'s units on its quiet parts, left untaken this second."""
        quiet = spread.base.quiet
        if self.parts and quiet and (spread.taken or spread.refused):
            self.skipped.append((spread, quiet, spread.taken + spread.refused,
                                 spread.scale(), write, spread.strong, now))

    def wake(self, second: int, pseudo: dict[Partition, tuple[int, int]]) -> None:
        """Give the quiet partitions what was skipped on them in ``second``; none is quiet
        after."""
        self.steps = 0
        if self.parts:
            self._give(self.parts, second, pseudo)
            self.gen += 1
        self.parts, self.skipped, self.load, self.second = None, [], {}, -1

    def wake_one(self, part: Partition, second: int,
                 pseudo: dict[Partition, tuple[int, int]]) -> None:
        """``part`` is quiet no more: rolled to ``second`` and given what was skipped on it
        in it."""
        if not self.parts or part not in self.parts:
            return
        self.parts.discard(part)
        self.gen += 1
        self._give({part}, second, pseudo)

    def _give(self, parts: set[Partition], second: int,
              pseudo: dict[Partition, tuple[int, int]]) -> None:
        """Roll ``parts`` to ``second`` and take on them, in order, what was skipped on
        them in it: what each second would have done to them."""
        for part in parts:
            if part.second < second:
                part.roll(second)
        if self.second == second:
            for spread, quiet, asked, scale, write, strong, now in self.skipped:
                spread.put([s for s in quiet if s[0] in parts], asked, scale, write, strong,
                           now, pseudo)
