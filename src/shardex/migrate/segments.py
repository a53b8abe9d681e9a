"""The mover's copies of an adoption's Scan segments: ``SegmentCopying``, a part of ``Mover``.

An adoption's units are Scan segments of its source (``Unit.kind``): each item scanned
is copied onto the target key the layouts give it (``Layouts.copy``), only if unchanged
since it was scanned, so an application write racing it wins (counted as ``skipped``:
the writer, following the adoption, wrote the copy itself), and a page done twice after
a crash copies nothing twice. The copies onto each target key are held to ``rate``
write units a second, adapting by AIMD as moves are; each segment's Scan to
``read_rate``.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import replace

from shardex.clock import Clock
from shardex.errors import ConditionFailed, InvalidKey, OutcomeUnknown, Unavailable
from shardex.keys import validate_value
from shardex.migrate.budget import Budget
from shardex.migrate.layouts import Layouts
from shardex.migrate.pace import IN_FLIGHT, Pace, paced, page_entries
from shardex.migrate.units import Unit
from shardex.migrate.work import WorkRecords
from shardex.model.entries import ScanItem, ScanPage
from shardex.routing import Routing

__all__ = ["SegmentCopying"]

log = logging.getLogger("shardex")


class SegmentCopying:
    """The ``Mover``'s work on a unit of kind ``segment`` (``_scan_segment``), a part of
    it: what it uses of the rest of the mover is declared here."""

    layouts: Layouts
    records: WorkRecords
    budget: Budget | None
    refused: dict[tuple[str, str], str]
    scanned: int
    copied: int
    _clock: Clock
    _rng: random.Random
    _rate: float
    _read_rate: float
    _lease: float
    _progress: Callable[[], None] | None
    _current: Callable[[Routing], bool]
    _holding: Callable[[str, Unit, int, asyncio.Future[list[str]]],
                       Awaitable[tuple[list[str], tuple[Unit, int]] | None]]
    _pace: Callable[[str], Pace | None]

    async def _scan(self, unit: Unit, reads: Pace) -> ScanPage:
        # a unit of read pace per try, so a throttled Scan waits before it tries again
        page = await paced(reads, 1.0, lambda: self.layouts.scan(
            unit.number, unit.segments, unit.cursor, page_entries(self._rate, self._lease)),
            clock=self._clock, rng=self._rng)
        await reads.wait(page[2])
        return page

    async def _scan_segment(self, routing: Routing, key: str, unit: Unit,
                            revision: int) -> None:
        """Copy the items of Scan segment ``unit`` page by page, checkpointing; stop if the
        lease goes or the routing leaves the copy.

        The next page is read while this one's items are written (a read only: the
        checkpoint after a page still records only what was written), and up to
        ``IN_FLIGHT`` of a page's copies are in flight at once, each sent as one lands.
        """
        reads = Pace(self._read_rate, self._clock)
        window = asyncio.Semaphore(IN_FLIGHT)

        async def copy(item: ScanItem) -> str:
            async with window:
                return await self._copy(item)

        scanning = asyncio.ensure_future(self._scan(unit, reads))
        try:
            while self._current(routing):
                items, cursor, _ = await scanning
                if cursor is not None:  # read the next page while this one is written
                    scanning = asyncio.ensure_future(self._scan(replace(unit, cursor=cursor),
                                                                reads))
                held = await self._holding(key, unit, revision, asyncio.gather(
                    *(copy(item) for item in items)))
                if held is None:
                    return  # the lease was taken over: the other worker goes on
                outcomes, (unit, revision) = held
                values = dict(unit.values)
                for _, value, _, _ in items:
                    if value is not None:
                        values[value] = values.get(value, 0) + 1
                unit = replace(unit, cursor=cursor, done=cursor is None,
                               entries=unit.entries + len(items),
                               moved=unit.moved + outcomes.count("moved"),
                               skipped=unit.skipped + outcomes.count("raced"),
                               unresolved=unit.unresolved + outcomes.count("unresolved"),
                               values=values)
                saved = await self.records.checkpoint(key, unit, revision, lease=self._lease)
                self.scanned += len(items)
                self.copied += outcomes.count("moved")
                if self._progress is not None:
                    self._progress()
                if saved is None or unit.done:
                    return  # done, or the lease was taken over: the other worker goes on
                unit, revision = saved
        finally:
            if not scanning.done():
                scanning.cancel()
                await asyncio.gather(scanning, return_exceptions=True)

    async def _clear(self, item: ScanItem) -> str:
        """Take out the shard attribute of an item in neither layout: "moved" if it had
        one, "ok" if not (or it changed meanwhile), "unresolved" if the store did not say."""
        if item[2] is None or not self.layouts.clears:
            return "ok"
        try:
            cleared = await paced(self._pace(item[2]), self.layouts.copy_cost(),
                                  lambda: self.layouts.clear(item), clock=self._clock,
                                  rng=self._rng, budget=self.budget, key=item[2])
        except (Unavailable, OutcomeUnknown) as exc:
            log.warning("adopt: %s", exc)
            return "unresolved"
        return "moved" if cleared else "ok"

    async def _copy(self, item: ScanItem) -> str:
        """Copy one scanned item: "moved", "ok" (nothing to do), "raced" or "unresolved"."""
        item_id, value = item[0], item[1]
        if value is None:  # no raw value: in neither layout, but a stale shard attribute
            return await self._clear(item)
        try:
            validate_value(value)
        except InvalidKey as exc:
            log.warning("adopt: item %r: %s; it cannot be indexed by shardex", item_id, exc)
            self.refused[(value, item_id)] = str(exc)
            # in no layout either: a shard attribute it kept from a value it left is
            # stale (readers of the new index listed it under that value, and every
            # verify found it extra)
            await self._clear(item)
            return "unresolved"
        target = self.layouts.copy_to(item, value)
        if target is None:
            return "ok"
        try:
            copied = await paced(self._pace(target), self.layouts.copy_cost(),
                                 lambda: self.layouts.copy(item, value, target),
                                 clock=self._clock, rng=self._rng, budget=self.budget,
                                 key=target)
        except (Unavailable, OutcomeUnknown, ConditionFailed) as exc:
            # a hot or changing item: verify names it, another run retries
            log.warning("adopt: %s", exc)
            return "unresolved"
        return "moved" if copied else "raced"
