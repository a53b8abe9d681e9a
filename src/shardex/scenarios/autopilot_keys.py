"""One logical key in an autopilot simulation: its layout, migration, retries and flows.

A key's shard keys fall into *classes* of keys with the same load in a second: the keys
of its layout, or during a migration the keys only the old layout has, only the new one
has and both have, each a source of the mover, a target, or neither, read or not
(``classes``). On a table where every key is its own partition (``partitions=0``, a
table split for heat, Azure Table Storage) the keys of a class behave alike, so one key
of each class stands for the class on the rate engine and the rest of its load counts at
the table level only (a spread part, which there lands on no partition): exact, and it
keeps a day of a key of N = 30 to a handful of flows. A key all of whose classes stay
under ``QUIET`` of a partition's ceilings asks nothing a partition refuses, so on an
on-demand table its whole load goes to the table level (``folded``). With a partition
count every shard key is a class of its own, and nothing is folded.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from shardex.autopilot.heat import HeatWindow
from shardex.autopilot.migration import MigrationModel, moved_share
from shardex.retry import RetryPolicy
from shardex.routing import ShardPolicy
from shardex.scenarios.flows import page_units
from shardex.scenarios.workload import ValueLoad
from shardex.sim.fluid import Flow, Part
from shardex.sim.profiles import Profile

__all__ = ["Costs", "KeyClass", "QUIET", "SimKey", "classes", "flows", "retry_seconds",
           "series"]

# a key's shard keys below this share of a partition's ceilings are folded to the table
# level; below the share at which a partition heats up to split (split_heat, 80%)
QUIET = 0.8


def retry_seconds(policy: RetryPolicy) -> int:
    """Seconds a refused write keeps being tried: the backoff its retries wait in all,
    on average (full jitter: half of each wait's cap), at least one. The default policy's
    seven retries wait 1.3 s in all: a write refused in two seconds running has failed."""
    waits = sum(min(policy.cap, policy.base * 2.0**k) / 2 for k in range(policy.attempts - 1))
    if policy.deadline is not None:
        waits = min(waits, policy.deadline)
    return max(1, round(waits))


def series(schedule_steps: tuple[tuple[float, float], ...],
           bursts: tuple[tuple[float, float, float], ...], duration: int) -> array[float]:
    """A schedule's rate in each second of ``duration`` (as ``Schedule.at`` gives it)."""
    out = array("d", bytes(8 * duration))
    steps = list(schedule_steps)
    for i, (start, rate) in enumerate(steps):
        end = steps[i + 1][0] if i + 1 < len(steps) else duration
        first = max(0, int(-(-start // 1)))
        for second in range(first, min(duration, int(-(-end // 1)))):
            out[second] = rate
    for start, seconds, extra in bursts:
        for second in range(max(0, int(-(-start // 1))),
                            min(duration, int(-(-(start + seconds) // 1)))):
            out[second] += extra
    return out


@dataclass(frozen=True, slots=True)
class Costs:
    """What one operation costs on a profile: an entry write's units on its shard key, a
    placement record's units, a placement read's, and a page read's per shard key."""

    entry: float
    placement: float
    locate: float
    page: int
    read_bytes: int
    profile: Profile
    queries: dict[int, float] = field(default_factory=dict, compare=False)

    @classmethod
    def of(cls, load: ValueLoad, profile: Profile) -> Costs:
        from shardex.plan import PLACEMENT_BYTES

        transaction = profile.place_cost
        return cls(entry=profile.write_cost(load.item_bytes) * transaction
                   * profile.entry_writes,
                   placement=profile.write_cost(PLACEMENT_BYTES) * transaction,
                   locate=profile.read_cost(PLACEMENT_BYTES, 1, True), page=load.page,
                   read_bytes=load.read_item_bytes, profile=profile)

    def query(self, fanout: int) -> float:
        """Read units one shard key's first page costs when a page read fans out ``fanout``
        ways (the fan-out's first round, as ``simulate`` counts it)."""
        found = self.queries.get(fanout)
        if found is None:
            found = self.queries[fanout] = self._query(fanout)
        return found

    def _query(self, fanout: int) -> float:
        return page_units(self.profile, self.page, fanout, self.read_bytes)


@dataclass(slots=True)
class KeyClass:
    """Shard keys with one load: ``count`` of them, ``rep`` the engine key standing for
    them, ``writes`` the share of the value's writes each takes, mover source or target,
    read or not."""

    count: int
    rep: int
    writes: float
    source: bool
    target: bool
    read: bool


@dataclass(slots=True)
class SimKey:
    """One logical key's state through a run, and what happened to it second by second."""

    value: str
    load: ValueLoad
    costs: Costs
    policy: ShardPolicy
    entries: float
    attempts: int
    duration: int
    migration: MigrationModel | None = None
    budget: float | None = None  # write units a second admission lets through
    budget_since: float | None = None
    last_change: float | None = None
    flaps: int = 0  # and the start of its last shrink: ``policy.flaps_after``
    shrunk_at: float | None = None
    window: HeatWindow | None = None
    retries: list[float] = field(default_factory=list)  # refused ops by next attempt
    backlog: deque[list[float]] = field(default_factory=deque)  # [arrived, ops]
    tick_units: float = 0.0
    tick_reads: float = 0.0
    max_wait: float = 0.0
    offered: array[float] = field(default_factory=lambda: array("d"))
    throttled: array[float] = field(default_factory=lambda: array("d"))
    refused: array[float] = field(default_factory=lambda: array("d"))
    failed: array[float] = field(default_factory=lambda: array("d"))
    migrations: list[MigrationModel] = field(default_factory=list)
    reads: float = 0.0
    fanout_reads: float = 0.0

    def __post_init__(self) -> None:
        self.retries = [0.0] * (self.attempts - 1)
        zeros = bytes(8 * self.duration)
        self.offered, self.throttled = array("d", zeros), array("d", zeros)
        self.refused, self.failed = array("d", zeros), array("d", zeros)

    def admit(self, second: int, new: float) -> float:
        """Ops this second's new writes and the backlog let through admission; the rest
        wait, first in first out (counted as refused when first held back)."""
        budget = self.budget
        if budget is None and not self.backlog:
            return new
        room = float("inf") if budget is None else budget / self.costs.entry
        passed = 0.0
        backlog = self.backlog
        while backlog and room > 0:
            arrived, ops = backlog[0]
            took = min(ops, room)
            passed += took
            room -= took
            self.max_wait = max(self.max_wait, second - arrived)
            if took >= ops:
                backlog.popleft()
            else:
                backlog[0][1] = ops - took
        took = min(new, room)
        if new > took:
            backlog.append([float(second), new - took])
            self.refused[second] += new - took
        return passed + took

    def settle(self, second: int, admitted: float, share: float) -> None:
        """Count a second's writes accepted at ``share``; the refused are tried again (one
        attempt a second) until ``attempts``, then fail."""
        retries = self.retries
        refused = 1.0 - share
        if refused <= 1e-12:
            if any(retries):
                self.retries = [0.0] * len(retries)
            return
        self.throttled[second] += admitted * refused  # each write counted once
        self.failed[second] += retries[-1] * refused
        self.retries = [admitted * refused] + [ops * refused for ops in retries[:-1]]

    def fanout(self, now: float) -> int:
        """Shard keys a page read reads at ``now`` (both layouts' while readers read both)."""
        migration = self.migration
        if migration is None:
            return self.policy.shards
        old, new = set(migration.old.shard_keys(self.value)), set(
            migration.new.shard_keys(self.value))
        if migration.readers_on_new(now) >= 1.0:
            return len(new)
        return len(old | new) if migration.reads_new(now) else len(old)


def classes(key: SimKey, now: float, ident: dict[str, int], register: Callable[[str], int],
            *, group: bool) -> list[KeyClass]:
    """The classes of ``key``'s shard keys at ``now`` (see the module's docstring).

    ``ident`` maps shard key names to engine keys, ``register(name)`` names a new one.
    """
    value, migration = key.value, key.migration
    if migration is None:
        names = key.policy.shard_keys(value)
        if group:
            return [KeyClass(len(names), _id(ident, register, names[0]), 1.0 / len(names),
                             False, False, True)]
        return [KeyClass(1, _id(ident, register, name), 1.0 / len(names), False, False, True)
                for name in names]
    old, new = migration.old.shard_keys(value), migration.new.shard_keys(value)
    in_old, in_new = set(old), set(new)
    share = moved_share(migration.old, migration.new)
    if share == 1.0:
        sources, targets = in_old, in_new
    elif migration.new.shards > migration.old.shards:
        sources, targets = in_old, in_new - in_old
    else:
        sources, targets = in_old - in_new, in_new
    on_new = migration.writers_on_new(now)
    if migration.readers_on_new(now) >= 1.0:
        read = in_new
    else:
        read = in_old | in_new if migration.reads_new(now) else in_old
    groups: dict[tuple[float, bool, bool, bool], list[str]] = {}
    for name in dict.fromkeys(old + new):
        writes = ((1.0 - on_new) / len(old) if name in in_old else 0.0) + (
            on_new / len(new) if name in in_new else 0.0)
        moving = migration.phase == "move"
        signature = (writes, moving and name in sources, moving and name in targets,
                     name in read)
        if group:
            groups.setdefault(signature, []).append(name)
        else:
            groups[(*signature[:3], name in read, name)] = [name]  # type: ignore[index]
    return [KeyClass(len(names), _id(ident, register, names[0]), signature[0],
                     signature[1], signature[2], signature[3])
            for signature, names in groups.items()]


def _id(ident: dict[str, int], register: Callable[[str], int], name: str) -> int:
    found = ident.get(name)
    if found is None:
        found = ident[name] = register(name)
    return found


def flows(key: SimKey, found: list[KeyClass], ops: float, reads: float, mover: float,
          resource: int, placed: float = 1.0
          ) -> tuple[list[Flow], list[Flow], Flow | None, float, float]:
    """The write flows of ``ops`` writes a second (``placed``: placement records a write,
    a move's end half of one), the read flows of ``reads`` page reads a second, the
    mover's flow of ``mover`` entries a second, and the highest write and read units a
    second any one shard key takes."""
    costs = key.costs
    entry = costs.entry
    placement = costs.placement * placed
    fanout = sum(c.count for c in found if c.read)
    query = costs.query(max(1, fanout))
    writes: list[Flow] = []
    hottest = hottest_read = 0.0
    sources = [c for c in found if c.source]
    targets = [c for c in found if c.target]
    for c in found:
        per_key = ops * c.writes * entry
        if c.source and mover:
            per_key += mover * entry / c.count / max(1, len(sources))
        if c.target and mover:
            per_key += mover * entry / c.count / max(1, len(targets))
        hottest = max(hottest, per_key)
        if c.writes > 0 and ops > 0:
            writes.append(Flow(ops * c.writes * c.count, True, _parts(
                (resource, c.rep, entry / c.count),
                (resource, None, entry * (c.count - 1) / c.count), (0, None, placement))))
    parts: list[Part] = []
    for c in found:
        if c.read:
            parts.append(Part(resource, c.rep, query))
            if c.count > 1:
                parts.append(Part(resource, None, query * (c.count - 1)))
            hottest_read = max(hottest_read, reads * query)
    read_flows = [Flow(reads, False, tuple(parts), costs.profile.consistent)] \
        if reads > 0 and parts else []
    moving = None
    if mover > 0 and sources and targets:
        source, target = sources[0], targets[0]
        moving = Flow(mover, True, _parts(
            (resource, source.rep, entry / source.count),
            (resource, target.rep, entry / target.count),
            (resource, None, entry * (source.count - 1) / source.count
             + entry * (target.count - 1) / target.count), (0, None, costs.placement)))
    return writes, read_flows, moving, hottest, hottest_read


def _parts(*parts: tuple[int, int | None, float]) -> tuple[Part, ...]:
    """The parts with units, spread parts of one resource joined."""
    out: list[Part] = []
    for resource, key, units in parts:
        if units <= 0:
            continue
        if key is None and out and out[-1].key is None and out[-1].resource == resource:
            out[-1] = Part(resource, None, out[-1].units + units)
        else:
            out.append(Part(resource, key, units))
    return tuple(out)
