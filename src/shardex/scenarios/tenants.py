"""The tenants scenario: one tenant's burst against the neighbours on its partition.

An index from tenant to the tenant's events lives on a store with a fixed number of
physical partitions, so tenants share partitions. Every tenant writes at its usual
rate; one (the heavy tenant) bursts to ``burst_factor`` times its own for
``burst_s`` seconds. The same seeded schedule runs three times:

- ``none``: nothing protects the neighbours (the tenants whose key shares the heavy
  tenant's partition): the burst fills the partition and their writes are throttled;
- ``admission``: every tenant has an admission budget sized so one tenant cannot take
  more than its share of a partition (``tenant_budget``): the heavy tenant's excess is
  refused before it reaches the store;
- ``isolation``: the heavy tenant is on a dedicated tier (its own store, sharded to
  take its burst: ``ShardPolicy(shards=N, tier="dedicated")``), and the admission
  budget still holds every other tenant.

Each run reports the neighbours' write p99 and throttled share, the heavy tenant's
offered and accepted rate during the burst, the requests admission refused and the
throttled requests the store wasted (``TenantsRun.summary``: the ``shardex.demo.tenants/1``
run document).
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from shardex.admission import AdmissionPolicy, Budget
from shardex.clock import LoopClock
from shardex.errors import AdmissionRejected, InvalidInput, ShardexError
from shardex.index import ShardedIndex
from shardex.keys import is_reserved
from shardex.plan import shards_for
from shardex.retry import RetryPolicy
from shardex.routing import Routing, ShardPolicy
from shardex.sim.clock import run_virtual
from shardex.stores.memory import MemoryStore
from shardex.stores.metered import Usage

__all__ = ["MODES", "TENANTS_SCHEMA", "TenantsLoad", "TenantsRun", "run_tenants",
           "run_tenants_demo", "tenant_budget"]

TENANTS_SCHEMA = "shardex.demo.tenants/1"
Mode = Literal["none", "admission", "isolation"]
MODES: tuple[Mode, ...] = ("none", "admission", "isolation")
INDEX = "events_by_tenant"
# a place is a transaction (twice the units), on the entry's key and the placement's
_AMPLIFICATION = 2.0


@dataclass(frozen=True, slots=True)
class TenantsLoad:
    """The offered load and the store it meets, in virtual seconds and writes a second.

    ``heavy`` is the index of the bursting tenant; it writes ``heavy_per_s`` usually and
    ``burst_factor`` times that from ``warmup_s`` for ``burst_s`` seconds; the run ends
    ``cooldown_s`` later. The store has ``partitions`` partitions of ``write_ceiling``
    write units a second each.
    """

    tenants: int = 200
    per_tenant_per_s: float = 1.0
    heavy: int = 42
    heavy_per_s: float = 5.0
    burst_factor: float = 20.0
    warmup_s: float = 10.0
    burst_s: float = 60.0
    cooldown_s: float = 10.0
    partitions: int = 20
    write_ceiling: float = 150.0
    headroom: float = 1.5

    def __post_init__(self) -> None:
        numbers = {"per_tenant_per_s": self.per_tenant_per_s, "heavy_per_s": self.heavy_per_s,
                   "burst_factor": self.burst_factor, "burst_s": self.burst_s,
                   "write_ceiling": self.write_ceiling, "headroom": self.headroom}
        for name, number in numbers.items():
            if not math.isfinite(number) or number <= 0:
                raise InvalidInput(f"TenantsLoad.{name} must be a finite number > 0, "
                                   f"got {number!r}")
        if self.tenants < 2 or not 0 <= self.heavy < self.tenants or self.partitions < 1:
            raise InvalidInput("TenantsLoad needs tenants >= 2, 0 <= heavy < tenants and "
                               "partitions >= 1")
        if self.warmup_s < 0 or self.cooldown_s < 0:
            raise InvalidInput("TenantsLoad.warmup_s and cooldown_s must be >= 0")

    @property
    def duration(self) -> float:
        return self.warmup_s + self.burst_s + self.cooldown_s

    @property
    def heavy_tenant(self) -> str:
        return tenant_name(self.heavy)

    def heavy_rate(self, at: float) -> float:
        """The heavy tenant's offered writes a second at ``at``."""
        bursting = self.warmup_s <= at < self.warmup_s + self.burst_s
        return self.heavy_per_s * (self.burst_factor if bursting else 1.0)


def tenant_name(i: int) -> str:
    return f"tenant-{i:03d}"


def tenant_budget(load: TenantsLoad) -> Budget:
    """Every tenant's admission budget: at most a partition's ceiling over the headroom.

    In the index's units (one unit a small write; the store spends ``_AMPLIFICATION``
    on it): a tenant alone never takes more than ``1 / headroom`` of a partition, so the
    other tenants on it keep the rest. Excess is refused at once.
    """
    rate = load.write_ceiling / _AMPLIFICATION / load.headroom / 2
    return Budget(rate=rate, burst=rate, mode="reject")


def dedicated_shards(load: TenantsLoad) -> int:
    """N for the heavy tenant on its own tier: its burst within the ceiling and headroom."""
    return shards_for(load.heavy_per_s * load.burst_factor, ceiling=load.write_ceiling,
                      amplification=_AMPLIFICATION, headroom=load.headroom)


@dataclass(slots=True)
class TenantsRun:
    """What one mode did under the load."""

    mode: Mode
    load: TenantsLoad
    neighbours: list[str]
    neighbour_latencies: list[float] = field(default_factory=list, repr=False)
    neighbour_requests: int = 0
    neighbour_throttles: int = 0
    heavy_offered: int = 0
    heavy_accepted: int = 0
    admission_rejected: int = 0
    throttled_requests: int = 0
    write_requests: int = 0
    failed_writes: int = 0
    dedicated_shards: int = 0
    # per second: accepted writes of the heavy tenant and of the neighbours, and the
    # neighbours' throttled requests
    heavy_timeline: dict[int, int] = field(default_factory=dict, repr=False)
    neighbour_timeline: dict[int, int] = field(default_factory=dict, repr=False)
    throttle_timeline: dict[int, int] = field(default_factory=dict, repr=False)

    def summary(self) -> dict[str, Any]:
        """The run as ``shardex.demo.tenants/1`` prints it (times in ms, rates a second)."""
        burst = self.load.burst_s
        ordered = sorted(self.neighbour_latencies)
        p99 = ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)] \
            if ordered else 0.0
        return {
            "mode": self.mode,
            "neighbour_write_p99_ms": round(1000 * p99, 2),
            "neighbour_throttled_ratio": round(
                self.neighbour_throttles / self.neighbour_requests, 4)
            if self.neighbour_requests else 0.0,
            "heavy_offered_per_s": round(self.heavy_offered / burst, 1),
            "heavy_accepted_per_s": round(self.heavy_accepted / burst, 1),
            "admission_rejected": self.admission_rejected,
            "throttled_requests": self.throttled_requests,
            "write_requests": self.write_requests,
            "failed_writes": self.failed_writes,
            "neighbours": len(self.neighbours),
            "dedicated_shards": self.dedicated_shards,
        }


def _schedule(load: TenantsLoad, rng: random.Random) -> list[tuple[float, int]]:
    """Every write of the run, (time, tenant), in time order: Poisson per tenant."""
    events: list[tuple[float, int]] = []
    burst_end = load.warmup_s + load.burst_s
    for tenant in range(load.tenants):
        if tenant == load.heavy:
            spans = [(0.0, load.warmup_s, load.heavy_per_s),
                     (load.warmup_s, burst_end, load.heavy_per_s * load.burst_factor),
                     (burst_end, load.duration, load.heavy_per_s)]
        else:
            spans = [(0.0, load.duration, load.per_tenant_per_s)]
        for start, end, rate in spans:
            t = start + rng.expovariate(rate)
            while t < end:
                events.append((t, tenant))
                t += rng.expovariate(rate)
    events.sort()
    return events


def layouts(load: TenantsLoad, mode: Mode) -> tuple[Routing, AdmissionPolicy | None]:
    """The routing and admission policy of ``mode``."""
    if mode == "none":
        return Routing(), None
    admission = AdmissionPolicy(default=tenant_budget(load))
    if mode == "admission":
        return Routing(), admission
    heavy = load.heavy_tenant
    routing = Routing(overrides={heavy: ShardPolicy(shards=dedicated_shards(load),
                                                    tier="dedicated")})
    return routing, AdmissionPolicy(default=admission.default, overrides={heavy: None})


async def run_tenants(load: TenantsLoad, mode: Mode, *, seed: int = 1) -> TenantsRun:
    """Drive one mode of the scenario on the current (virtual) loop."""
    store = MemoryStore(partitions=load.partitions, write_ceiling=load.write_ceiling,
                        seed=seed)
    heavy = load.heavy_tenant
    partition = store.partition_of(INDEX, heavy)
    neighbours = [tenant_name(i) for i in range(load.tenants)
                  if i != load.heavy and store.partition_of(INDEX, tenant_name(i)) == partition]
    routing, admission = layouts(load, mode)
    tiers = {"dedicated": MemoryStore(write_ceiling=load.write_ceiling,
                                      seed=seed + 1)} if mode == "isolation" else None
    clock = LoopClock()
    retry = RetryPolicy(attempts=5, base=0.05, cap=0.8, deadline=2.0)
    index = ShardedIndex(store, INDEX, routing, retry=retry, seed=seed, admission=admission,
                         tiers=tiers)
    run = TenantsRun(mode, load, neighbours,
                     dedicated_shards=routing.policy(heavy).shards if tiers else 0)
    near = set(neighbours)
    burst_from, burst_to = load.warmup_s, load.warmup_s + load.burst_s

    async def write(at: float, tenant: str, seq: int) -> None:
        start = clock.now()
        bursting = tenant == heavy and burst_from <= at < burst_to
        run.heavy_offered += bursting
        try:
            await index.put(tenant, f"{tenant}-{seq:07d}", sort=f"{at:012.6f}",
                            attrs={"kind": "event", "n": seq})
        except AdmissionRejected:
            run.admission_rejected += 1
            return
        except ShardexError:
            run.failed_writes += 1
            return
        second = int(clock.now())
        if bursting:
            run.heavy_accepted += 1
        if tenant == heavy:
            run.heavy_timeline[second] = run.heavy_timeline.get(second, 0) + 1
        elif tenant in near:
            run.neighbour_latencies.append(clock.now() - start)
            run.neighbour_timeline[second] = run.neighbour_timeline.get(second, 0) + 1

    def throttled(usage: Any) -> None:
        if isinstance(usage, Usage) and usage.write and usage.outcome == "throttled" \
                and usage.key in near:
            second = int(usage.end)
            run.throttle_timeline[second] = run.throttle_timeline.get(second, 0) + 1

    store.meter.subscribe(throttled)
    tasks: list[asyncio.Task[None]] = []
    async with index:
        for seq, (at, tenant) in enumerate(_schedule(load, random.Random(seed))):
            wait = at - clock.now()
            if wait > 0.0005:
                await clock.sleep(wait)
            tasks.append(asyncio.ensure_future(write(at, tenant_name(tenant), seq)))
            if len(tasks) > 4096:
                tasks = [t for t in tasks if not t.done()]
        await asyncio.gather(*tasks)
    store.meter.unsubscribe(throttled)
    for stores in (store, *(tiers or {}).values()):
        stats = stores.stats(INDEX)
        for key, key_stats in stats.by_key.items():
            if is_reserved(key):
                continue
            run.write_requests += key_stats.write_requests
            run.throttled_requests += key_stats.write_throttles
            if stores is store and key in near:
                run.neighbour_requests += key_stats.write_requests
                run.neighbour_throttles += key_stats.write_throttles
    return run


def run_tenants_demo(load: TenantsLoad | None = None, *, seed: int = 1,
                     modes: Sequence[Mode] = MODES) -> list[TenantsRun]:
    """Run each mode on virtual time, on the same seeded schedule."""
    load = load or TenantsLoad()
    return [run_virtual(run_tenants(load, mode, seed=seed)) for mode in modes]
