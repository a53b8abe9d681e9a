"""The backfill: a parallel Scan that gives every item its shard attribute, paced, resumable.

Workers lease Scan segments (``segments``); for each item of a page that has the raw
attribute and lacks a correct shard attribute (absent, or not where the routing's
layout puts the item: a stale one, left by a write that changed the raw value alone),
one conditional UpdateItem sets it, only if the raw value is still the one read and the
shard attribute still the one read. An application write racing it wins (the update
fails its condition and is counted as ``raced``: the writer, following the adoption,
wrote a correct attribute itself). A page done twice after a crash updates nothing
twice.

Pacing: the writes to each shard key of the new GSI are held to ``rate`` write units a
second (its partition's share, as the reshard's mover holds each key), estimated from
the units DynamoDB reports, adapting by AIMD (``shardex.migrate.mover.Pace``): a
throttle halves the rate, each second without one raises it back. Each segment's Scan is
paced at ``read_rate`` read units a second. Base-table writes land on items spread by
their id's hash, so no base partition takes more than its share either.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol, TypeVar

from shardex.clock import Clock
from shardex.errors import ConditionFailed, InvalidKey, OutcomeUnknown, Unavailable
from shardex.index import ShardedIndex
from shardex.keys import validate_value
from shardex.migrate.budget import Budget
from shardex.migrate.pace import Pace, paced
from shardex.migrate.units import Segment
from shardex.migrate.work import Segments, work_units
from shardex.routing import Routing, Turns
from shardex.stores.dynamodb.adopt import GsiAdoptionTools, ScanItem, ScanPage
from shardex.write import in_place

__all__ = ["Backfill"]

log = logging.getLogger("shardex")
T = TypeVar("T")
_BATCH = 8  # updates of one page in flight at once
_POLL = 1.0  # seconds between looks at segments leased by others


class Scanner(Protocol):
    """What the backfill scans: one page of one segment of the base table."""

    async def scan(self, segment: int, segments: int, start: Mapping[str, Any] | None,
                   limit: int) -> ScanPage: ...


class Backfill(abc.ABC):
    """Runs the backfill of one adoption with ``workers`` concurrent workers.

    ``routing()`` returns the layout the shard attributes follow (the index's cached
    routing); ``segments`` holds the leases; ``worker`` names this process in leases of
    ``lease`` seconds. ``progress`` is called after each checkpoint. With a ``budget``
    (``shardex.migrate.budget``) the writes to each shard key keep within the adoption's
    budget, shared with every other process, and follow its controls (pause, rate).
    """

    def __init__(self, tools: Scanner, segments: Segments,
                 routing: Callable[[], Routing],
                 *, clock: Clock, rate: float, read_rate: float, workers: int, lease: float,
                 worker: str, seed: int | None = None,
                 progress: Callable[[], None] | None = None,
                 budget: Budget | None = None) -> None:
        self.tools = tools
        self.budget = budget
        self.segments = segments
        self._routing = routing
        self._clock = clock
        self._rate = rate
        self._read_rate = read_rate
        self._workers = workers
        self._lease = lease
        self._worker = worker
        self._rng = random.Random(seed)
        self._turns = Turns(self._rng)
        self._progress = progress
        self._paces: dict[str, Pace] = {}
        self._cost = 2.0  # write units of one update, base table and GSI (learned)
        self.page_size = max(1, min(100, int(rate * lease / 8)))
        self.scanned = 0  # items this process scanned and updated, for progress
        self.updated = 0

    async def run(self) -> None:
        """Work segments until every one is done (by this process or others)."""
        await asyncio.gather(*(work_units(
            self.segments.all, self._process, records=self.segments, worker=self._worker,
            lease=self._lease, clock=self._clock, rng=self._rng, poll=_POLL)
            for _ in range(self._workers)))

    async def _scan(self, segment: Segment, reads: Pace
                    ) -> tuple[list[ScanItem], dict[str, Any] | None]:
        # a unit of read pace per try, so a throttled Scan waits before it tries again
        items, last, units = await paced(reads, 1.0, lambda: self.tools.scan(
            segment.number, segment.total, segment.start, self.page_size),
            clock=self._clock, rng=self._rng)
        await reads.wait(units)
        return items, last

    async def _process(self, key: str, segment: Segment, revision: int) -> None:
        """Backfill ``segment`` page by page, checkpointing; stop if the lease goes.

        The next page is read while this one's items are written (a read only: the
        checkpoint after a page still records only what was written), and up to
        ``_BATCH`` of a page's writes are in flight at once, each sent as one lands.
        """
        reads = Pace(self._read_rate, self._clock)
        window = asyncio.Semaphore(_BATCH)

        async def index(item: ScanItem) -> str:
            async with window:
                return await self._index(item)

        scanning = asyncio.ensure_future(self._scan(segment, reads))
        try:
            while True:
                items, last = await scanning
                if last is not None:  # read the next page while this one is written
                    scanning = asyncio.ensure_future(self._scan(replace(segment, start=last),
                                                                reads))
                outcomes = await asyncio.gather(*(index(item) for item in items))
                values = dict(segment.values)
                for _, value, _, _ in items:
                    if value is not None:
                        values[value] = values.get(value, 0) + 1
                segment = replace(segment, start=last, done=last is None,
                                  scanned=segment.scanned + len(items),
                                  updated=segment.updated + outcomes.count("updated"),
                                  raced=segment.raced + outcomes.count("raced"),
                                  unresolved=segment.unresolved + outcomes.count("unresolved"),
                                  values=values)
                saved = await self.segments.checkpoint(key, segment, revision,
                                                       lease=self._lease)
                self.scanned += len(items)
                self.updated += outcomes.count("updated")
                if self._progress is not None:
                    self._progress()
                if saved is None or segment.done:
                    return  # done, or the lease was taken over: the other worker goes on
                segment, revision = saved
        finally:
            if not scanning.done():
                scanning.cancel()
                await asyncio.gather(scanning, return_exceptions=True)

    async def _index(self, item: ScanItem) -> str:
        """Index one scanned item: "updated", "ok", "raced" or "unresolved"."""
        item_id, value = item[0], item[1]
        if value is None:
            return "ok"  # no raw value: in neither index
        try:
            validate_value(value)
        except InvalidKey as exc:
            log.warning("adopt: item %r: %s; it cannot be indexed by shardex", item_id, exc)
            return "unresolved"
        return await self._fix(item, value)

    @abc.abstractmethod
    async def _fix(self, item: ScanItem, value: str) -> str:
        """Index one scanned item of raw value ``value`` (valid), as ``_index`` answers."""

    async def _paced(self, target: str, write: Callable[[], Awaitable[T]]) -> T | None:
        """``write()`` at the pace of shard key ``target`` (None: the store never answered).
        Other errors are the caller's."""
        # the shared budget, when there is one, paces each key for every process at once
        pace = None
        if self.budget is None:
            pace = self._paces.get(target)
            if pace is None:  # made once a key, not once a write
                pace = self._paces[target] = Pace(self._rate, self._clock)
        try:
            return await paced(pace, self._cost, write, clock=self._clock, rng=self._rng,
                               budget=self.budget, key=target)
        except Unavailable:
            return None


class ShardBackfill(Backfill):
    """Sets the shard attribute of each item a GSI is adopted for (``GsiAdoptionTools``)."""

    tools: GsiAdoptionTools

    async def _fix(self, item: ScanItem, value: str) -> str:
        """Give one item a correct shard attribute."""
        item_id, _, shard, _ = item
        routing = self._routing()
        if shard is not None and in_place(routing, value, shard, item_id):
            return "ok"
        target = routing.shard_key(value, item_id, rng=self._rng, turns=self._turns)
        try:
            units = await self._paced(target, lambda: self.tools.set_shard(
                item_id, value, shard, target))
        except ConditionFailed:
            return "raced"
        if units is None:
            return "unresolved"
        if units > 0:
            self._cost = 0.8 * self._cost + 0.2 * units
        return "updated"


class CopyBackfill(Backfill):
    """Copies each item of the base table into a shardex index table (``index``).

    Each copy is ``index.put`` at version 1: skipped when the item already carries a
    version (the application, dual-writing, put or deleted it first), so a copy never
    overwrites a newer entry or brings a deleted one back. ``index`` sees throttles
    itself (its retry policy leaves them to the backfill's pacing).
    """

    def __init__(self, tools: Scanner, segments: Segments, index: ShardedIndex,
                 **options: Any) -> None:
        super().__init__(tools, segments, lambda: index.routing, **options)
        self.index = index

    async def _fix(self, item: ScanItem, value: str) -> str:
        item_id, _, sort, attrs = item
        target = self._routing().shard_key(value, item_id, rng=self._rng, turns=self._turns)
        try:
            copied = await self._paced(target, lambda: self.index.put(
                value, item_id, sort=sort or "", attrs=attrs, version=1))
        except (OutcomeUnknown, ConditionFailed) as exc:
            log.warning("adopt: %s", exc)
            return "unresolved"
        if copied is None:
            return "unresolved"
        return "updated" if copied else "raced"
