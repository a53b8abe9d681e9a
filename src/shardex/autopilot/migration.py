"""What one migration of one logical key costs and how long it takes, state by state.

The simulation's model of a reshard, pure and on the caller's clock: the state machine is
the runner's own (``states.begin``, ``next_step``, ``after_verify``, through
``autopilot.runner``), so a simulated migration goes through the same states and waits
(the routing's lease plus the margin at each change of conduct, the retention window)
as a real one. The work between the states is what the runner's code does, at its pace:

- **survey** (before ``read-both`` is stored): ``Resharder.start`` reads every entry of
  the value's source keys once, key after key, at ``read_rate`` units a second a key;
- **move** (``write-new``, from its ``ready_at``): the mover relocates each entry whose
  shard key changes, one transaction each (``move_units`` on its source key and as many on
  its target, plus the placement record), each source key paced at
  ``allocate(rate, sources, targets)`` units a second so no key takes more than
  ``rate`` from it, ``workers`` source keys at once (``reshard run``'s one worker
  drains them one after another, the autopilot's 16 all at once); a throttled move is
  tried again (the share accepted slows it);
- **verify**: the parity check reads every row of both layouts, key after key, at
  ``read_rate``, and each row's placement (16 at a time, one read unit each);
- **sweep** (``retired``): one page of each key only the old layout has.

Clients follow a change within the routing cache's ``ttl`` (writers to the new layout
from ``write-new``, readers to the new layout alone from ``read-new``): the share that
has followed grows evenly over it. A migration here always finds parity clean: the
shadow run (``shardex.scenarios.shadow``) checks that claim on the real runner.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from shardex.autopilot.runner import (
    DEFAULT_LEASE,
    DEFAULT_MARGIN,
    DEFAULT_MAX_AGE,
    DEFAULT_RATE,
    DEFAULT_WORKERS,
    allocate,
    states,
)
from shardex.routing import Routing, ShardPolicy
from shardex.transition import Parity

__all__ = ["MigrationCosts", "MigrationModel", "moved_share", "survey_seconds"]

_PLACEMENT_CONCURRENCY = 16


@dataclass(frozen=True, slots=True)
class MigrationCosts:
    """The runner's settings and the unit costs a migration's work is paid in.

    ``lease``/``margin``/``ttl``: the routing's lease, the reshard's margin and the
    clients' cache TTL (seconds); ``rate``/``read_rate``: the mover's write and read
    units a second a key; ``move_units``: write units one moved entry costs its source
    key (and as many its target); ``row_read_units``: read units a row costs a page read;
    ``latency``: seconds a placement read takes; ``retain``: the retention window;
    ``workers``: work units the runner moves at once (the autopilot's ``--workers``; one
    a source key at most).
    """

    move_units: float
    row_read_units: float
    lease: float = DEFAULT_LEASE
    margin: float = DEFAULT_MARGIN
    ttl: float = 5.0
    rate: float = DEFAULT_RATE
    read_rate: float = 3 * DEFAULT_RATE
    latency: float = 0.004
    retain: float = 60.0
    max_age: float = DEFAULT_MAX_AGE
    workers: int = DEFAULT_WORKERS


def moved_share(old: ShardPolicy, new: ShardPolicy) -> float:
    """The share of a value's entries whose shard key changes from ``old`` to ``new``.

    Jump hash keeps an entry's shard when N grows from N to M > N unless it moves to one of
    the new shards ((M - N) / M move), and likewise back; N = 1 has no suffix, so every
    entry moves to or from it, as it does between tiers or strategies.
    """
    if old == new:
        return 0.0
    if old.tier != new.tier or old.strategy != new.strategy or old.strategy != "hash" \
            or 1 in (old.shards, new.shards):
        return 1.0
    big, small = max(old.shards, new.shards), min(old.shards, new.shards)
    return (big - small) / big


@dataclass(slots=True)
class MigrationModel:
    """One key's migration from ``old`` to ``new``, started at ``started`` (sim seconds)
    with ``entries`` entries; ``tick`` advances it, the properties say what clients do.

    ``phase`` is ``survey``, ``wait``, ``move``, ``verify``, ``sweep`` or ``done``;
    ``states`` lists (state, entered at) as the runner stores them.
    """

    key: str
    old: ShardPolicy
    new: ShardPolicy
    started: float
    entries: float
    costs: MigrationCosts
    routing: Routing | None = None
    phase: str = "survey"
    until: float = 0.0
    to_move: float = 0.0
    moved: float = 0.0
    states: list[tuple[str, float]] = field(default_factory=list)
    followed: dict[str, float] = field(default_factory=dict)
    _swept: bool = False
    _mover_done: bool = False
    _reads: float = 0.0  # read units a second the phase under way reads
    _rows: int = 0

    def __post_init__(self) -> None:
        costs = self.costs
        # the survey reads every entry of the source keys, one key after another
        self._reads = costs.read_rate
        self.until = self.started + self.entries * costs.row_read_units / costs.read_rate

    @property
    def done(self) -> bool:
        return self.phase == "done"

    @property
    def state(self) -> str:
        """The routing's state (``survey`` before ``read-both`` is stored)."""
        return "survey" if self.routing is None else (
            "done" if self.routing.reshard is None else str(self.routing.state))

    @property
    def sources(self) -> int:
        """Source keys the mover drains: every old key, or those the new layout drops."""
        old, new = self.old, self.new
        if moved_share(old, new) == 1.0 or new.shards > old.shards:
            return old.shards
        return old.shards - new.shards

    @property
    def targets(self) -> int:
        """Keys the mover fills: every new key, or those the old layout lacked."""
        old, new = self.old, self.new
        if moved_share(old, new) == 1.0 or new.shards < old.shards:
            return new.shards
        return new.shards - old.shards

    def mover_rate(self) -> float:
        """Entries a second the mover moves while it runs: as many source keys at once as
        it has workers, each at its share of the rate (``allocate``)."""
        costs = self.costs
        per_source = allocate(costs.rate, sources=self.sources, targets=self.targets)
        return min(costs.workers, self.sources) * per_source / costs.move_units

    def writers_on_new(self, now: float) -> float:
        """The share of writers that follow the new layout at ``now``."""
        return self._share("write-new", now)

    def readers_on_new(self, now: float) -> float:
        """The share of readers that read the new layout alone at ``now``."""
        return self._share("read-new", now)

    def reads_old(self, now: float) -> bool:
        """Whether some reader still reads the old layout's keys at ``now``."""
        return self.readers_on_new(now) < 1.0

    def reads_new(self, now: float) -> bool:
        """Whether some reader reads the new layout's keys at ``now`` (from ``read-both``)."""
        return "read-both" in self.followed and now >= self.followed["read-both"]

    def _share(self, state: str, now: float) -> float:
        at = self.followed.get(state)
        if at is None or now < at:
            return 0.0
        ttl = self.costs.ttl
        return 1.0 if ttl <= 0 else min(1.0, (now - at) / ttl)

    def writers_follow_at(self) -> float | None:
        """When every writer follows the new layout (None before ``write-new``)."""
        at = self.followed.get("write-new")
        return None if at is None else at + self.costs.ttl

    def work(self, now: float) -> tuple[float, float]:
        """(entries a second the mover moves, read units a second the runner reads) now."""
        if self.phase == "move":
            return self.mover_rate(), 0.0
        if self.phase in ("survey", "verify") and now < self.until:
            return 0.0, self._reads
        return 0.0, 0.0

    def tick(self, now: float, entries: float, moved: float = 0.0) -> None:
        """Advance to ``now``: ``entries`` is the value's entries now, ``moved`` what the
        mover moved in the second that ended (its share accepted by the store)."""
        if self.phase == "move":
            self.moved += moved
            if self.moved + 1e-9 < self.to_move:
                return
            self._mover_done = True
        elif self.phase in ("survey", "wait", "verify", "sweep") and now < self.until:
            return
        if self.phase == "survey":
            self._enter(states.begin(Routing(overrides=_overrides(self.key, self.old)),
                                     {self.key: self.new}, default=None, values=(),
                                     reshard_id=f"ap-{self.key}-{int(self.started)}"[:64],
                                     now=now, margin=self.costs.margin), now)
        elif self.phase == "verify":
            assert self.routing is not None
            self._enter(states.after_verify(self.routing, Parity(now, self._rows),
                                            mover_done=self._mover_done), now)
        elif self.phase == "sweep":
            self._swept = True
        self._advance(now, entries)

    def _advance(self, now: float, entries: float) -> None:
        """Take the runner's steps until one takes time."""
        costs = self.costs
        while True:
            assert self.routing is not None
            step = states.next_step(self.routing, now=now, lease=costs.lease, until="done",
                                    mover_done=self._mover_done, swept=self._swept,
                                    max_age=costs.max_age)
            if isinstance(step, states.Stop):
                self.phase = "done"
                return
            if isinstance(step, states.Advance):
                routing = step.routing
                if routing.state == "read-new" and routing.reshard is not None \
                        and routing.reshard.retire_after is None and costs.retain >= 0:
                    routing = states.with_retention(routing, now, costs.retain)
                self._enter(routing, now)
                continue
            if isinstance(step, states.Wait):
                self.phase, self.until = "wait", step.until
            elif isinstance(step, states.Move):
                self.phase = "move"
                self.to_move = entries * moved_share(self.old, self.new)
                self.moved = 0.0
            elif isinstance(step, states.Verify):
                # every row of both layouts (each entry is on one of them), a page at a
                # time at read_rate, then the page's placements 16 at a time
                self._rows = rows = max(1, round(entries))
                seconds = rows * (costs.row_read_units / costs.read_rate
                                  + costs.latency / _PLACEMENT_CONCURRENCY)
                self._reads = rows * (costs.row_read_units + 1.0) / seconds
                self.phase, self.until = "verify", now + seconds
            else:  # Sweep: one page of each key only the old layout has
                self.phase, self.until = "sweep", now + 1.0
            return

    def _enter(self, routing: Routing, now: float) -> None:
        before = self.state
        self.routing = routing
        state = self.state
        if state != before:
            self.states.append((state, now))
            self.followed.setdefault(state, now)


def _overrides(key: str, policy: ShardPolicy) -> dict[str, ShardPolicy]:
    return {} if policy == ShardPolicy() else {key: policy}


def survey_seconds(entries: float, costs: MigrationCosts) -> float:
    """Seconds the survey of ``entries`` entries takes (part of a grow's lead)."""
    return math.ceil(entries * costs.row_read_units / costs.read_rate)
