"""The orders-by-status scenario: an index from order status to order ids, under a sale.

New orders are written to PENDING, some ship (PENDING to SHIPPED), a few are
cancelled (PENDING to CANCELLED) and some shipped orders are delivered (SHIPPED to
DELIVERED), each transition a ``move``. PENDING takes several times a partition's
write ceiling, SHIPPED is hot too, DELIVERED and CANCELLED stay cold. A dashboard
reads the first page of PENDING ten times a second and a report lists all of it every
few seconds; every read is checked against the scenario's ground truth. The schedule
comes from one seed, so two layouts meet exactly the same load.

The table the demo runs on (``DEMO_TABLE``) is an established one: warmed to the
per-table quota, 40,000 write units a second, and split for heat so that every hot key
has a partition of its own. A new on-demand table serves 4,000 write units a second on
4 partitions, far less than the sharded layout asks (placement records included);
``new_table_outcome`` measures what such a table, or a warm one not yet split, would
accept of the same load, on the rate-level engine.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from shardex.errors import InvalidInput, ShardexError
from shardex.index import Entry, ShardedIndex
from shardex.keys import is_reserved
from shardex.plan import shards_for
from shardex.retry import RetryPolicy
from shardex.routing import Routing, ShardPolicy
from shardex.routing_record import DEFAULT_LEASE
from shardex.scenarios.simulate import simulate
from shardex.scenarios.truth import Tracker
from shardex.scenarios.workload import Move, Schedule, ValueLoad, Workload
from shardex.sim.clock import loop_clock
from shardex.sim.profiles import profile
from shardex.stores.memory import MemoryStore
from shardex.stores.metered import Usage

__all__ = ["DEMO_TABLE", "Hooks", "OrdersLoad", "Phase", "RunResult", "STATUSES", "TableCheck",
           "demo_layouts", "new_table_outcome", "run_orders"]

# The demo's table: warmed to the per-table quota and split for heat (each hot key on a
# partition of its own), as an established table is; see new_table_outcome for a new one.
DEMO_TABLE: Mapping[str, Any] = {"warm_write": 40_000.0, "partitions": 0}
# bytes of one of the scenario's entries as stored (shard key, sort, id, total, customer)
_ENTRY_BYTES = 110

EPOCH = datetime(2026, 11, 30, 5, 0, tzinfo=UTC)
STATUSES = ("PENDING", "SHIPPED", "DELIVERED", "CANCELLED")
# event kind -> (status left, status entered)
TRANSITIONS: Mapping[str, tuple[str | None, str]] = {
    "create": (None, "PENDING"), "ship": ("PENDING", "SHIPPED"),
    "cancel": ("PENDING", "CANCELLED"), "deliver": ("SHIPPED", "DELIVERED"),
}


@dataclass(frozen=True, slots=True)
class OrdersLoad:
    """The offered load, in virtual seconds and operations a second."""

    duration: float = 10.0
    created_per_s: float = 5000.0
    ship_share: float = 0.4
    cancel_share: float = 0.02
    deliver_share: float = 0.15
    dwell_s: float = 1.5
    dashboard_reads_per_s: float = 10.0
    dashboard_page: int = 100
    report_every_s: float = 2.5
    report_page: int = 1000

    def __post_init__(self) -> None:
        if self.duration <= 0 or self.created_per_s <= 0:
            raise InvalidInput("duration and created_per_s must be positive")
        if not 0 <= self.ship_share + self.cancel_share <= 1 or not 0 <= self.deliver_share <= 1:
            raise InvalidInput("ship_share + cancel_share and deliver_share must lie in [0, 1]")

    def peak_writes(self) -> dict[str, float]:
        """Steady-state writes a second offered to each status (a move writes both ends)."""
        created = self.created_per_s
        shipped = created * self.ship_share
        cancelled = created * self.cancel_share
        delivered = shipped * self.deliver_share
        return {"PENDING": created + shipped + cancelled, "SHIPPED": shipped + delivered,
                "DELIVERED": delivered, "CANCELLED": cancelled}

    def item_writes(self) -> float:
        """Items written a second: creations and transitions, each one placement record."""
        created = self.created_per_s
        return created * (1 + self.ship_share * (1 + self.deliver_share) + self.cancel_share)

    def workload(self) -> Workload:
        """The same load for ``shardex simulate``: creations, and moves between statuses."""
        created = self.created_per_s
        shipped = created * self.ship_share
        rate = {"PENDING": created}
        values = {status: ValueLoad(status, write=Schedule(((0.0, rate.get(status, 0.0)),)),
                                    read=Schedule(((0.0, self.dashboard_reads_per_s
                                                    if status == "PENDING" else 0.0),)),
                                    page=self.dashboard_page, item_bytes=_ENTRY_BYTES,
                                    read_item_bytes=_ENTRY_BYTES)
                  for status in STATUSES}
        moves = (Move("PENDING", "SHIPPED", Schedule(((0.0, shipped),))),
                 Move("PENDING", "CANCELLED", Schedule(((0.0, created * self.cancel_share),))),
                 Move("SHIPPED", "DELIVERED", Schedule(((0.0, shipped * self.deliver_share),))))
        return Workload(max(1, math.ceil(self.duration)), values, moves, origin="demo")


@dataclass(slots=True)
class Phase:
    """What one phase of a run saw: its span (virtual s), writes, throttles and listings."""

    name: str
    start: float
    end: float = 0.0
    offered: int = 0
    accepted: int = 0
    failed: int = 0
    write_requests: int = 0
    write_throttles: int = 0
    listings: int = 0
    problems: int = 0
    latencies: list[float] = field(default_factory=list, repr=False)

    def summary(self) -> dict[str, Any]:
        """The phase as JSON: rates a second, times in ms."""
        seconds = max(self.end - self.start, 1e-9)
        return {"seconds": round(self.end - self.start, 2),
                "offered_writes_per_s": round(self.offered / seconds, 1),
                "accepted_writes_per_s": round(self.accepted / seconds, 1),
                "throttled_ratio": round(self.write_throttles / self.write_requests, 4)
                if self.write_requests else 0.0,
                "failed_writes": self.failed,
                "write_p50_ms": _ms(self.latencies, 0.50),
                "write_p99_ms": _ms(self.latencies, 0.99),
                "listings_checked": self.listings, "listing_complete": self.problems == 0}


@dataclass(slots=True)
class Hooks:
    """What a run adds around the plain scenario (the reshard demo's).

    ``companion(store)`` runs beside the load; the load stops once ``done()`` holds (the
    schedule, made for ``load.duration``, is cut there); ``phase()`` names the phase each
    write and store request counts in. The dashboard and the report read through a
    client of their own whose routing TTL is ``reader_ttl``; the routing record the run
    creates has a lease of ``routing_lease`` seconds.
    """

    companion: Callable[[MemoryStore], Awaitable[None]]
    done: Callable[[], bool]
    phase: Callable[[], str]
    routing_lease: float = 15.0
    reader_ttl: float = 5.0


@dataclass(slots=True)
class RunResult:
    """What one layout did under the load (by phase, for a run with ``Hooks``)."""

    layout: str
    routing: Routing
    duration: float
    offered_writes: int
    accepted_writes: int
    failed_writes: int
    throttled_ratio: float
    write_latencies: list[float]
    read_latencies: list[float]
    listings: int
    problems: list[str]
    offered_by_status: dict[str, int]
    timeline: dict[str, dict[int, float]] = field(repr=False)
    phases: dict[str, Phase] = field(default_factory=dict, repr=False)
    throttle_timeline: dict[str, dict[int, int]] = field(default_factory=dict, repr=False)
    hedged_reads: float = 0.0

    @property
    def listing_complete(self) -> bool:
        return not self.problems

    def summary(self) -> dict[str, Any]:
        """The run as the JSON the CLI prints (times in ms, rates a second)."""
        return {
            "layout": self.layout,
            "offered_writes_per_s": round(self.offered_writes / self.duration, 1),
            "accepted_writes_per_s": round(self.accepted_writes / self.duration, 1),
            "throttled_ratio": round(self.throttled_ratio, 4),
            "failed_writes": self.failed_writes,
            "write_p50_ms": _ms(self.write_latencies, 0.50),
            "write_p99_ms": _ms(self.write_latencies, 0.99),
            "read_p50_ms": _ms(self.read_latencies, 0.50),
            "read_p99_ms": _ms(self.read_latencies, 0.99),
            "hedged_read_ratio": round(self.hedged_reads, 4),
            "listing_complete": self.listing_complete,
            "listings_checked": self.listings,
            "shards": {v: self.routing.policy(v).shards for v in STATUSES},
        }


def _ms(samples: list[float], q: float) -> float:
    if not samples:
        return 0.0
    ordered = sorted(samples)
    return round(1000 * ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)], 2)


class _Event(NamedTuple):
    at: float
    seq: int
    kind: str
    order: int


def _schedule(load: OrdersLoad, rng: random.Random) -> list[_Event]:
    """Every write of the run, in time order: creations, then their transitions."""
    events: list[_Event] = []
    seq = 0
    t = rng.expovariate(load.created_per_s)
    order = 0
    while t < load.duration:
        order += 1
        events.append(_Event(t, seq, "create", order))
        seq += 1
        roll = rng.random()
        leave = t + 0.5 + rng.expovariate(1 / load.dwell_s)
        if roll < load.ship_share and leave < load.duration:
            events.append(_Event(leave, seq, "ship", order))
            seq += 1
            if rng.random() < load.deliver_share:
                arrive = leave + 0.5 + rng.expovariate(1 / load.dwell_s)
                if arrive < load.duration:
                    events.append(_Event(arrive, seq, "deliver", order))
                    seq += 1
        elif roll < load.ship_share + load.cancel_share and leave < load.duration:
            events.append(_Event(leave, seq, "cancel", order))
            seq += 1
        t += rng.expovariate(load.created_per_s)
    events.sort()  # by time, then sequence (unique): compared in C
    return events


# (days, seconds) after EPOCH -> its ISO text to the second: made once a second
_SECONDS: dict[tuple[int, int], str] = {}


def _sort_of(at: float) -> str:
    """The sort value of an event at ``at`` virtual seconds: its ISO instant, to the
    microsecond (timedelta's rounding), the text to the second made once a second."""
    offset = timedelta(seconds=at)
    whole = (offset.days, offset.seconds)
    head = _SECONDS.get(whole)
    if head is None:
        if len(_SECONDS) > 100_000:
            _SECONDS.clear()
        head = _SECONDS[whole] = (EPOCH + timedelta(days=whole[0], seconds=whole[1])
                                  ).isoformat(timespec="seconds").replace("+00:00", "")
    return f"{head}.{offset.microseconds:06d}Z"


class _PhaseMeter:
    """Counts write requests and throttles on shard keys by phase, and throttles a second."""

    def __init__(self, tally: Callable[[], Phase]) -> None:
        self._tally = tally
        self.throttles: dict[str, dict[int, int]] = {}

    def __call__(self, usage: Any) -> None:
        if not isinstance(usage, Usage) or not usage.write or is_reserved(usage.key):
            return
        phase = self._tally()
        phase.write_requests += 1
        if usage.outcome == "throttled":
            phase.write_throttles += 1
            second = self.throttles.setdefault(usage.key, {})
            second[int(usage.end)] = second.get(int(usage.end), 0) + 1


async def run_orders(load: OrdersLoad, routing: Routing, *, layout: str, seed: int = 1,
                     store_options: Mapping[str, Any] | None = None,
                     hooks: Hooks | None = None) -> RunResult:
    """Drive one index through the scenario on the current (virtual) loop."""
    options: dict[str, Any] = {"seed": seed, **(store_options or {})}
    clock = loop_clock()  # the run's objects read the virtual loop's clock directly
    store = MemoryStore(clock=clock, **options)
    retry = RetryPolicy(attempts=5, base=0.05, cap=0.8, deadline=2.0)
    index = ShardedIndex(store, "orders_by_status", routing, retry=retry, seed=seed,
                         routing_lease=DEFAULT_LEASE if hooks is None else hooks.routing_lease,
                         clock=clock)
    reader = index if hooks is None else ShardedIndex(
        store, "orders_by_status", retry=retry, seed=seed + 1, routing_ttl=hooks.reader_ttl,
        clock=clock)
    truth = Tracker()
    phase: Callable[[], str] = (lambda: "all") if hooks is None else hooks.phase
    phases: dict[str, Phase] = {}

    def now_in() -> Phase:
        name = phase()
        current = phases.get(name)
        if current is None:
            current = phases[name] = Phase(name, clock.now())
        current.end = clock.now()
        return current

    # the phases' request counts and throttles a second serve a run with hooks alone
    meter = _PhaseMeter(now_in) if hooks is not None else None

    def running() -> bool:
        return clock.now() < load.duration if hooks is None else not hooks.done()

    offered = dict.fromkeys(STATUSES, 0)
    write_latencies: list[float] = []
    read_latencies: list[float] = []
    problems: list[str] = []
    counts = {"accepted": 0, "failed": 0, "listings": 0}
    last_op: dict[int, asyncio.Task[None]] = {}
    create_task = asyncio.get_running_loop().create_task  # once an event: no lookups

    async def write(event: _Event, after: asyncio.Task[None] | None) -> None:
        item = f"ORD-{event.order:07d}"
        sort = _sort_of(event.at)
        if event.kind == "create":
            truth.entering(item, (sort, item), clock.now())
        if after is not None:
            await after  # an order's transitions follow its earlier writes
        old, new = TRANSITIONS[event.kind]
        if old == "PENDING":
            truth.leaving(item, clock.now())
        start = clock.now()
        try:
            if old is None:
                await index.put(new, item, sort=sort, attrs={
                    "total": 1000 + event.order % 9000, "customer": f"C-{event.order % 977}"})
            else:
                await index.move(item, old=old, new=new, sort=sort)
            ok = True
        except ShardexError as exc:
            # its traceback holds the write machine's frames, whose locals hold the error:
            # a cycle per failed write, left to the garbage collector unless cut here
            exc.__traceback__ = None
            ok = False
        counts["accepted" if ok else "failed"] += 1
        write_latencies.append(clock.now() - start)
        if hooks is not None:
            tally = now_in()
            tally.accepted += ok
            tally.failed += not ok
            tally.latencies.append(clock.now() - start)
        if new == "PENDING":
            truth.entered(item, clock.now(), ok=ok)
        elif old == "PENDING":
            truth.left(item, clock.now(), ok=ok)

    def launch(event: _Event) -> None:
        for status in TRANSITIONS[event.kind]:
            if status is not None:
                offered[status] += 1
        if hooks is not None:
            now_in().offered += 1
        last_op[event.order] = create_task(write(event, last_op.get(event.order)))

    async def dashboard() -> None:
        period = 1 / load.dashboard_reads_per_s
        while running():
            await clock.sleep(period)
            start = clock.now()
            try:
                page = await reader.query("PENDING", limit=load.dashboard_page)
            except ShardexError as exc:
                problems.append(f"dashboard read failed: {exc}")
                continue
            read_latencies.append(clock.now() - start)
            checked(truth.check(page.items, start, clock.now(), complete=page.cursor is None))

    def checked(found: list[str]) -> None:
        counts["listings"] += 1
        problems.extend(found)
        if hooks is not None:
            tally = now_in()
            tally.listings += 1
            tally.problems += len(found)

    async def report() -> None:
        while True:
            await clock.sleep(load.report_every_s)
            start = clock.now()
            entries: list[Entry] = []
            cursor = None
            try:
                while True:
                    began = clock.now()
                    page = await reader.query("PENDING", limit=load.report_page,
                                              cursor=cursor)
                    read_latencies.append(clock.now() - began)
                    entries += page.items
                    if (cursor := page.cursor) is None:
                        break
            except ShardexError as exc:
                problems.append(f"report read failed: {exc}")
                continue
            checked(truth.check(entries, start, clock.now(), complete=True))
            if not running():
                return

    schedule = _schedule(load, random.Random(seed))
    launched = 0
    if meter is not None:
        store.meter.subscribe(meter)
    async with index:
        if reader is not index:
            await reader.open()
        companion = None if hooks is None else asyncio.ensure_future(hooks.companion(store))
        readers = [asyncio.ensure_future(dashboard()), asyncio.ensure_future(report())]
        for event in schedule:
            wait = event.at - clock.now()
            if wait > 0.0005:
                await clock.sleep(wait)
            if not running():
                break
            launch(event)
            launched += 1
        await asyncio.gather(*last_op.values())
        await asyncio.gather(*readers)
        if companion is not None:
            await companion
        if reader is not index:
            await reader.close()
    if meter is not None:
        store.meter.unsubscribe(meter)
    stats = store.stats("orders_by_status")
    requests = throttles = reads = hedges = 0.0
    for key, key_stats in stats.by_key.items():
        if not is_reserved(key):
            requests += key_stats.write_requests
            throttles += key_stats.write_throttles
            reads += key_stats.read_requests
            hedges += key_stats.hedges_sent
    return RunResult(
        layout=layout, routing=routing,
        duration=load.duration if hooks is None else clock.now(),
        offered_writes=launched, accepted_writes=counts["accepted"],
        failed_writes=counts["failed"], throttled_ratio=throttles / requests if requests else 0.0,
        write_latencies=write_latencies, read_latencies=read_latencies,
        listings=counts["listings"], problems=problems[:20],
        offered_by_status=offered,
        timeline={k: dict(v) for k, v in stats.timeline.items() if not is_reserved(k)},
        phases=phases, throttle_timeline={} if meter is None else meter.throttles,
        hedged_reads=hedges / (reads - hedges) if reads > hedges else 0.0,
    )


def demo_layouts(load: OrdersLoad, *, ceiling: float = 1000.0, units: float = 1.0,
                 amplification: float = 2.0, headroom: float = 1.5) -> dict[str, Routing]:
    """The two layouts the demo compares: none sharded, and the hot statuses sized by plan.

    ``amplification`` 2 because a placement is a transaction, which costs twice.
    """
    peaks = load.peak_writes()
    hot = {"PENDING": peaks["PENDING"], "SHIPPED": peaks["SHIPPED"]}
    overrides = {v: ShardPolicy(shards=shards_for(p, ceiling=ceiling, units=units,
                                                  amplification=amplification,
                                                  headroom=headroom))
                 for v, p in hot.items()}
    return {"unsharded": Routing(), "sharded": Routing(overrides=overrides)}


@dataclass(frozen=True, slots=True)
class TableCheck:
    """What a table would accept of the demo's sharded layout, on the rate-level engine.

    ``asked_write_units_per_s``: every write unit the layout asks a second (entries and
    placement records); ``new_table``: the share of entry writes a new on-demand table
    accepts; ``warm_unsplit``: the share a table warmed as ``DEMO_TABLE`` but not yet
    split for heat accepts (its hot keys may share partitions); ``demo_table``: the share
    the demo's own table accepts.
    """

    asked_write_units_per_s: float
    new_table: float
    warm_unsplit: float
    demo_table: float


def new_table_outcome(load: OrdersLoad, routing: Routing) -> TableCheck:
    """Simulate ``routing`` under ``load`` on a new table, a warm unsplit one, and the demo's."""
    workload = load.workload()

    def accepted(**settings: Any) -> tuple[float, float]:
        run = simulate(workload, routing, profile(**settings))
        offered = sum(c.offered for c in run.values.values())
        taken = sum(c.accepted for c in run.values.values())
        asked = max((max(t.asked, default=0.0) for t in run.tables if t.write), default=0.0)
        return (taken / offered if offered else 1.0), asked

    new, asked = accepted()
    unsplit, _ = accepted(warm_write=DEMO_TABLE["warm_write"])
    demo, _ = accepted(**DEMO_TABLE)
    return TableCheck(asked, new, unsplit, demo)
