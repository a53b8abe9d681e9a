"""A day of load for the autopilot: a diurnal swing, two flash sales, a tenant going viral.

An index of open orders by shop (``open_orders_by_shop``): each shop's logical key
holds its open orders; an order is written when placed and deleted when it closes, on
average ``DWELL`` seconds later, so a key's entries follow its recent load and its
entry writes are its puts and its deletes. Over the day (midnight to midnight):

- every shop follows one **diurnal curve**, ten times busier at 16:00 than at 04:00;
- **flash sales**: ``shop-a`` at 10:00 and ``shop-b`` at 19:30 ramp their orders 20x in
  60 s, hold for 45 minutes, and fall back over two minutes;
- **a tenant going viral**: ``shop-v`` grows 80x over 30 minutes from 13:00 and stays there;
- page reads (the shops' own order lists) follow the diurnal curve alone, not the sales:
  staff read their lists, customers place the orders.

The simulation adds the noise (+/-30% a second, ``NOISE``). ``day`` returns a
``DayLoad``: the workload as ``shardex simulate`` takes it, the load ramps to report on,
and each key's entries at the start (the steady state of its dwell). ``ramps_of`` finds
the ramps of any workload (``examples/autopilot_steady.toml`` is the same shops at steady
loads inside the policy's dead band, for the acceptance that noise alone moves nothing).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from shardex.scenarios.workload import Schedule, ValueLoad, Workload

__all__ = ["DAY", "DWELL", "DayLoad", "NOISE", "Ramp", "day", "ramps_of"]

DAY = 86_400
DWELL = 600.0  # seconds an order stays open, on average (exponential)
NOISE = 0.3
TABLE: Mapping[str, object] = {"profile": "dynamodb-on-demand", "partitions": 0,
                               "warm_write": 40_000.0}
_ITEM_BYTES = 400
_PAGE = 50

# shop: (orders a second at the diurnal peak, page reads a second at the diurnal peak)
SHOPS: Mapping[str, tuple[float, float]] = {
    "shop-anchor": (220.0, 30.0), "shop-a": (150.0, 25.0), "shop-b": (120.0, 20.0),
    "shop-v": (5.0, 2.0), "shop-c": (40.0, 6.0), "shop-d": (25.0, 4.0),
    "shop-e": (15.0, 3.0), "shop-f": (10.0, 2.0)}
# name, shop, starts at (s), ramp (s), multiple, holds for (s), falls over (s)
SALES = (("flash sale 1", "shop-a", 10 * 3600, 60, 20.0, 45 * 60, 120),
         ("flash sale 2", "shop-b", 19 * 3600 + 1800, 60, 20.0, 45 * 60, 120))
VIRAL = ("viral tenant", "shop-v", 13 * 3600, 30 * 60, 80.0)


@dataclass(frozen=True, slots=True)
class Ramp:
    """A load ramp to report on: ``value``'s load rises from ``start`` (s); the episode
    it starts lasts until ``end`` (s); ``sale`` says it is a flash sale (the acceptance's
    figures are per sale)."""

    name: str
    value: str
    start: int
    end: int
    sale: bool = False


@dataclass(frozen=True, slots=True)
class DayLoad:
    """What an autopilot simulation runs: the workload, its ramps, the entries each key
    holds at the start and the noise on every rate (a share: 0.3 is +/-30%)."""

    workload: Workload
    ramps: tuple[Ramp, ...] = ()
    entries: Mapping[str, float] = field(default_factory=dict)
    noise: float = 0.0


def diurnal(t: float) -> float:
    """The diurnal curve: 0.1 at 04:00, 1.0 at 16:00, a cosine between."""
    return 0.1 + 0.9 * (1 - math.cos(2 * math.pi * (t - 4 * 3600) / DAY)) / 2


def _multiple(shop: str, t: float) -> float:
    """How many times its diurnal load ``shop`` takes at ``t`` (sales, going viral)."""
    for _, name, start, ramp, times, hold, fall in SALES:
        if name == shop and start <= t < start + ramp + hold + fall:
            if t < start + ramp:
                return 1 + (times - 1) * (t - start + 1) / ramp
            if t < start + ramp + hold:
                return times
            return times - (times - 1) * (t - start - ramp - hold + 1) / fall
    _, name, start, ramp, times = VIRAL
    if name == shop and t >= start:
        # exponential growth to ``times`` over the ramp, then it stays
        return float(times ** min(1.0, (t - start + 1) / ramp))
    return 1.0


def _points(start: int, end: int) -> list[int]:
    """Seconds where rates change: each minute, each second of a ramp, each step of a fall."""
    points = set(range(start - start % 60, end, 60)) | {start}
    for _, _, at, ramp, _, hold, fall in SALES:
        points.update(range(at, at + ramp + 1))
        points.update(range(at + ramp + hold, at + ramp + hold + fall + 1))
    _, _, at, ramp, _ = VIRAL
    points.update(range(at, at + ramp + 1, 10))
    return sorted(p for p in points if start <= p < end)


def _shop(shop: str, peak: float, reads: float, points: list[int], end: int,
          multiple: Callable[[str, float], float]) -> tuple[ValueLoad, float]:
    """One shop's load and its entries at the start: puts, deletes as orders close after
    the dwell (the expected closings of the orders placed), reads; its schedules start at
    the first point."""
    puts = [peak * diurnal(p) * multiple(shop, p) for p in points]
    entries = open_now = puts[0] * DWELL
    deletes = []
    for i, rate in enumerate(puts):
        span = (points[i + 1] if i + 1 < len(points) else end) - points[i]
        decay = math.exp(-span / DWELL)
        after = open_now * decay + rate * DWELL * (1 - decay)
        deletes.append(max(0.0, rate - (after - open_now) / span))
        open_now = after
    # a shop gone viral is read ten times as much; a sale's orders are not read more
    _, viral, start, _, _ = VIRAL
    times = [float(p - points[0]) for p in points]
    load = ValueLoad(
        shop, write=Schedule(tuple(zip(times, puts, strict=True))),
        delete=Schedule(tuple(zip(times, deletes, strict=True))),
        read=Schedule(tuple((t, reads * diurnal(p) * (
            10.0 if shop == viral and p >= start else 1.0))
            for t, p in zip(times, points, strict=True))),
        page=_PAGE, item_bytes=_ITEM_BYTES, read_item_bytes=_ITEM_BYTES, rising=True)
    return load, entries


def day(duration: int = DAY, *, start: int = 0, noise: float = NOISE) -> DayLoad:
    """The day as the module describes it, or ``duration`` seconds of it from ``start``
    (seconds after midnight; the keys hold the entries of their load at ``start``)."""
    end = start + duration
    points = _points(start, end)
    values, entries = {}, {}
    for shop, (peak, reads) in SHOPS.items():
        values[shop], entries[shop] = _shop(shop, peak, reads, points, end, _multiple)
    ramps = [Ramp(name, shop, at - start, min(end, at + ramp + hold + fall) - start, sale=True)
             for name, shop, at, ramp, _, hold, fall in SALES if start <= at < end]
    name, shop, at, _, _ = VIRAL
    if start <= at < end:
        ramps.append(Ramp(name, shop, at - start, duration))
    origin = "the autopilot's day" + (f" from {start // 3600:02d}:{start % 3600 // 60:02d}"
                                      if start else "")
    return DayLoad(Workload(duration, values, table=dict(TABLE), origin=origin),
                   tuple(sorted(ramps, key=lambda r: r.start)), entries, noise)


def ramps_of(workload: Workload, *, rise: float = 2.0) -> tuple[Ramp, ...]:
    """The ramps of a workload file: each step or burst that takes a value's writes to at
    least ``rise`` times what they were, its episode lasting until the value's next
    ramp, a fall below the ramp's start, or the run's end."""
    found = []
    for value, load in workload.values.items():
        starts = sorted({int(s) for s, _ in load.write.steps}
                        | {int(b[0]) for b in load.write.bursts}
                        | {int(b[0] + b[1]) for b in load.write.bursts})
        ramps = [s for s in starts if 0 < s < workload.duration
                 and load.write.at(s) >= rise * load.write.at(s - 1) > 0]
        for i, start in enumerate(ramps):
            before = load.write.at(start - 1)
            # a step or burst that ends after the run (one cut short by --duration) ends
            # with it
            end = min(workload.duration, next(
                (s for s in starts if s > start and load.write.at(s) <= before),
                workload.duration))
            if i + 1 < len(ramps):
                end = min(end, ramps[i + 1])
            found.append(Ramp(f"{value} ramp at {start} s", value, start, end))
    return tuple(sorted(found, key=lambda r: (r.start, r.value)))
