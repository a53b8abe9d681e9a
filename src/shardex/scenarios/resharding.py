"""The orders scenario resharded live: unsharded under the sale, resharded to the planned N.

The index starts with every status unsharded while PENDING takes five times one
partition's write ceiling. After ``before`` seconds a ``Resharder`` starts a reshard to
the layout the planner sizes for the load and runs it to its end (read-both, write-new
and the mover, verified, read-new, retired, stable) while the load goes on; the run ends
``after`` seconds later. Writes, throttles and listings are counted per phase
(before, during, after); every listing is checked against the ground truth, read by a
client whose routing cache is its own. All on virtual time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shardex.clock import LoopClock
from shardex.keys import parse_shard_key
from shardex.reshard import Progress, Resharder
from shardex.routing import Routing
from shardex.scenarios.demo_runs import relaxed_gc
from shardex.scenarios.orders import (
    DEMO_TABLE,
    STATUSES,
    Hooks,
    OrdersLoad,
    RunResult,
    demo_layouts,
    run_orders,
)
from shardex.sim.clock import run_virtual
from shardex.stores.memory import MemoryStore
from shardex.transition import Parity

__all__ = ["ReshardDemo", "run_reshard_demo"]

PHASES = ("before", "during", "after")
_HORIZON = 900.0  # virtual seconds of schedule made: the run stops well before


@dataclass(slots=True)
class ReshardDemo:
    """What the live reshard did: the run by phase, the states and when, what moved."""

    before: Routing
    after: Routing
    ceiling: float
    mover_rate: float
    run: RunResult | None = None
    started: float = 0.0
    finished: float = 0.0
    states: list[tuple[str, str, float]] = field(default_factory=list)
    moved: int = 0
    to_move: int = 0
    parity: Parity | None = None
    mover_units: dict[str, dict[int, float]] = field(default_factory=dict)
    mover_landed: dict[str, dict[int, float]] = field(default_factory=dict)

    @property
    def result(self) -> RunResult:
        """The run of the load (set once the demo has run)."""
        assert self.run is not None
        return self.run

    @property
    def listing_complete(self) -> bool:
        return self.result.listing_complete

    def new_key_throttles(self) -> int:
        """Throttled write requests on the shard keys the reshard created (any cause)."""
        return sum(sum(seconds.values()) for key, seconds in
                   self.result.throttle_timeline.items() if parse_shard_key(key)[1] is not None)

    def landed_key_throttles(self) -> int:
        """Throttled write requests on the keys the mover moved entries to, in its seconds there.

        Only there can the mover have pushed a new key over its ceiling; a throttle in a
        second it did not write the key is the application's own load.
        """
        return sum(self.result.throttle_timeline.get(key, {}).get(second, 0)
                   for key, seconds in self.mover_landed.items() for second in seconds)

    def drained_key_throttles(self) -> int:
        """Throttled write requests on the keys the mover drained, in seconds it ran there."""
        return sum(self.result.throttle_timeline.get(key, {}).get(second, 0)
                   for key, seconds in self.mover_units.items() for second in seconds)

    def mover_peak(self) -> float:
        """The most write units the mover spent on one key in one second."""
        return max((units for seconds in self.mover_units.values()
                    for units in seconds.values()), default=0.0)

    def summary(self) -> dict[str, Any]:
        """The run as the JSON ``shardex demo --reshard --json`` prints."""
        def shards(routing: Routing) -> dict[str, int]:
            return {v: routing.policy(v).shards for v in STATUSES}

        parity = None if self.parity is None else {
            "entries": self.parity.entries, **self.parity.counts()}
        return {
            "schema": "shardex.demo.reshard/1",
            "ceiling_write_units_per_s": self.ceiling,
            "phases": {name: self.result.phases[name].summary()
                       for name in PHASES if name in self.result.phases},
            "reshard": {
                "from": shards(self.before), "to": shards(self.after),
                "started_at_s": round(self.started, 2), "seconds": round(
                    self.finished - self.started, 2),
                "states": [{"state": state, "direction": direction, "at_s": round(at, 2)}
                           for state, direction, at in self.states],
                "moved": self.moved, "to_move": self.to_move,
                "mover_rate_units_per_s": self.mover_rate,
                "mover_peak_units_per_s_on_one_key": round(self.mover_peak(), 1),
                "throttled_requests_on_new_keys": self.new_key_throttles(),
                "throttled_requests_on_new_keys_while_moving_there":
                    self.landed_key_throttles(),
                "throttled_requests_on_drained_keys_while_moving":
                    self.drained_key_throttles(),
                "parity": parity},
            "listings_checked": self.result.listings,
            "listing_complete": self.result.listing_complete,
            "problems": self.result.problems,
        }


def run_reshard_demo(load: OrdersLoad, *, seed: int = 1, ceiling: float = 200.0,
                     mover_rate: float | None = None, before: float = 5.0,
                     after: float = 5.0, lease: float = 2.0,
                     margin: float = 0.5) -> ReshardDemo:
    """Run the scenario unsharded, reshard it live, and go on ``after`` seconds; virtual time.

    The store is ``memory://`` with ``DEMO_TABLE``'s settings (the plain demo's table).
    ``ceiling`` is one partition's write units a second (reads: three times that);
    ``mover_rate`` the mover's write units a second on one key (default half the
    ceiling); ``lease`` and ``margin`` the routing's lease and the reshard's margin.
    """
    sharded = demo_layouts(load, ceiling=ceiling)["sharded"]
    demo = ReshardDemo(before=Routing(), after=sharded, ceiling=ceiling,
                       mover_rate=mover_rate or ceiling / 2)
    now: dict[str, str] = {"phase": "before"}
    clock = LoopClock()

    def seen(progress: Progress) -> None:
        if not demo.states or demo.states[-1][:2] != (progress.state, progress.direction):
            demo.states.append((progress.state, progress.direction, clock.now()))
        if progress.remaining is not None:
            demo.moved = max(demo.moved, progress.moved)

    async def reshard(store: MemoryStore) -> None:
        await clock.sleep(before)
        now["phase"] = "during"
        demo.started = clock.now()
        async with Resharder(store, "orders_by_status", rate=demo.mover_rate, seed=seed,
                             routing_ttl=1.0, unit_lease=5.0, progress=seen) as runner:
            plan = await runner.start(dict(sharded.overrides), margin=margin)
            demo.to_move = plan.to_move
            result = await runner.run(until="done")
            demo.parity = result.parity
            demo.mover_units = runner.mover_units
            demo.mover_landed = runner.mover_landed
        demo.finished = clock.now()
        demo.states.append(("stable", "forward", demo.finished))
        now["phase"] = "after"

    hooks = Hooks(companion=reshard, phase=lambda: now["phase"],
                  done=lambda: now["phase"] == "after" and clock.now() >= demo.finished + after,
                  routing_lease=lease, reader_ttl=1.0)
    long = OrdersLoad(**{**_fields(load), "duration": before + _HORIZON})
    # the plain demo's table (warm, split for heat), at this run's ceiling
    options = {**DEMO_TABLE, "write_ceiling": ceiling, "read_ceiling": 3 * ceiling}
    with relaxed_gc():
        demo.run = run_virtual(run_orders(long, Routing(), layout="resharded live", seed=seed,
                                          store_options=options, hooks=hooks))
    return demo


def _fields(load: OrdersLoad) -> dict[str, Any]:
    return {name: getattr(load, name) for name in OrdersLoad.__dataclass_fields__}
