"""The adopter: carries out an adoption's steps against a GSI-mode DynamoDB store.

``Adopter`` is the thin async loop around the copy's decisions (``states``): each step
reads the routing record (strongly consistent), decides, and stores the next routing
with a compare-and-set, so any process may run any step after any crash, and two that
race are told apart by the compare-and-set. Waits run on the injected clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from types import TracebackType
from typing import Any

from shardex.adopted import source_store
from shardex.adoption import Adoption
from shardex.clock import Clock, answered
from shardex.errors import InvalidInput, InvalidRouting, NotFound, ReshardRefused
from shardex.index import ShardedIndex
from shardex.keys import value_fault
from shardex.migrate.adopting import AdoptionLayouts, adoption_layouts
from shardex.migrate.base import MigrationRunner, check_numbers, check_seconds
from shardex.migrate.budget import Budget, Sharing
from shardex.migrate.control import describe
from shardex.migrate.mover import MOVER_RETRY, Mover
from shardex.migrate.registry import finish_migration, record_migration
from shardex.migrate.states import (
    Drop,
    Stop,
    Wait,
    begin_copy,
    copy_complete_step,
    copy_cutover_refusal,
    copy_rollback_refusal,
    copy_to,
    ready_at,
    with_adoption,
)
from shardex.migrate.status import adopt_status_document, past_count
from shardex.migrate.units import Backfilled, Unit, segment_units
from shardex.migrate.verify import adoption_parity
from shardex.migrate.work import WorkRecords
from shardex.routing import Routing, ShardPolicy
from shardex.routing_record import DEFAULT_LEASE
from shardex.stores import open_store
from shardex.stores.base import Store
from shardex.stores.dynamodb import DynamoDBStore
from shardex.stores.dynamodb.admin import create_index_table, create_meta_table
from shardex.stores.dynamodb.adopt import GsiAdoptionTools, TableAdoptionTools
from shardex.stores.dynamodb.source import BorrowedClient
from shardex.transition import Parity, Transition

__all__ = ["AdoptPlan", "Adopter", "Backfilled", "DEFAULT_SEGMENTS"]

DEFAULT_SEGMENTS = 8
DEFAULT_MARGIN = 40.0
_BUILD_WITHIN = 86_400.0  # a GSI on a large table can take hours to build


@dataclass(frozen=True, slots=True)
class AdoptPlan:
    """What ``start`` found and did."""

    routing: Routing
    items: int  # the base table's item count, as DescribeTable last counted it
    created: bool  # the new GSI was created (False: it existed, or a dry run)
    exists: bool  # the new GSI existed before
    stored: bool  # the adoption was recorded (False: a dry run)
    projection: Mapping[str, Any]


class Adopter(MigrationRunner):
    """Adopts the plain GSI ``source`` on ``attribute`` into index ``name`` on ``store``.

    ``store`` is a GSI-mode ``dynamodb://`` store (or its URI) naming the new GSI, with
    ``sort_owner=application`` (the sort attribute is the old GSI's RANGE key, the
    application's own). ``source`` and ``attribute`` are needed by ``start`` only: later
    steps read them from the routing record. ``rate`` caps the write units a second the
    backfill puts on any one shard key of the new GSI, ``read_rate`` (default three times
    ``rate``) the read units a second each Scan segment reads; ``workers`` segments are
    worked at once in this process, each leased for ``unit_lease`` seconds, out of
    ``segments`` (decided by the first ``run``). ``settle`` is waited before verify reads
    gaps again (default 2 s). ``progress`` gets a line of text as steps advance.
    ``clock`` and ``seed`` make it run on virtual time, reproducibly; ``sharing`` makes
    ``rate`` the adoption's one budget (``MigrationRunner``). Use ``async with``.
    """

    verb = "adopt"

    def __init__(self, store: Store | str, name: str, *, source: str | None = None,
                 attribute: str | None = None, base: str | None = None,
                 id_attribute: str | None = None, sort_attribute: str | None = None,
                 rate: float = 250.0,
                 read_rate: float | None = None, workers: int = 1,
                 segments: int = DEFAULT_SEGMENTS, unit_lease: float = 30.0,
                 max_age: float = 900.0, settle: float = 2.0, worker: str | None = None,
                 clock: Clock | None = None, seed: int | None = None,
                 routing_ttl: float = 5.0, routing_lease: float = DEFAULT_LEASE,
                 build_within: float = _BUILD_WITHIN,
                 progress: Callable[[str], None] | None = None,
                 sharing: Sharing | None = None) -> None:
        check_numbers(settle=settle + 1, build_within=build_within)
        opened = open_store(store) if isinstance(store, str) else store
        if not isinstance(opened, DynamoDBStore):
            raise InvalidInput(f"--store {opened.uri}: adoption needs a dynamodb:// store: in "
                               "GSI mode naming the new GSI (gsi=, key_attribute=, "
                               "sort_attribute=, id_attribute=) to adopt a GSI, in index-table "
                               "mode to adopt an index table")
        if source is not None and (base is not None) == opened.gsi_mode:
            raise InvalidInput(f"--store {opened.uri}: a GSI is adopted into a GSI-mode store, "
                               "an index table (--from-table, --base-table) into an index-table"
                               "-mode one")
        if opened.gsi_mode and not opened.gsi.application_sort():
            raise InvalidInput(
                f"--store {opened.uri}: the sort attribute {opened.gsi.sort_attribute!r} of an "
                "adopted GSI is the application's own (the old GSI's RANGE key), not "
                "shardex's: use sort_owner=application, or leave sort_owner out")
        super().__init__(opened, name, rate=rate, read_rate=read_rate, workers=workers,
                         unit_lease=unit_lease, max_age=max_age, worker=worker, clock=clock,
                         seed=seed, sharing=sharing, segments=segments)
        self.store: DynamoDBStore = opened
        self.source = source
        self.attribute = attribute
        self.base = base
        self.id_attribute = id_attribute
        self.sort_attribute = sort_attribute
        self.segments = segments
        self.settle = float(settle)
        self._within = float(build_within)
        self._progress = progress
        self._heard = False  # a line said since the run began (``_say_quiet``)
        # the values seen that the last ``verify`` left out, as no logical key can be
        # them: value -> why (shardex cannot read or route their items in any state)
        self.not_verified: dict[str, str] = {}
        # (value, item id) -> why: the items this process's backfill could not index
        self.unindexable: dict[tuple[str, str], str] = {}
        # the adoption's start creates the record (with ``routing_lease``): status does not
        self._index = ShardedIndex(opened, name, routing_ttl=routing_ttl,
                                   routing_lease=routing_lease, clock=clock, seed=seed,
                                   create_record=False)
        self._index_open = False

    async def __aenter__(self) -> Adopter:
        await self.store.client.open()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._index_open:
            await self._index.close()
        await self.store.client.close()

    def _say(self, line: str) -> None:
        self._heard = True
        if self._progress is not None:
            self._progress(line)

    def _say_quiet(self, note: str) -> None:
        # before the run's first line the command says it (``run_noting``), as for a reshard
        if self._heard:
            self._say(f"backfill: {note}")

    async def index(self) -> ShardedIndex:
        """The index, opened on first use (its store's GSI must exist by then)."""
        if not self._index_open:
            await self._index.open()
            self._index_open = True
        return self._index

    control = index

    @property
    def lease(self) -> float:
        return self._index.routing_lease

    def _tools(self, attribute: str) -> GsiAdoptionTools:
        return GsiAdoptionTools(self.store.client, self.store.gsi, attribute,
                                clock=self.store.clock, meter=self.store.meter)

    def _table_tools(self, adoption: Adoption) -> TableAdoptionTools:
        assert adoption.base
        assert adoption.id_attribute
        assert adoption.sort_attribute
        return TableAdoptionTools(self.store.client, source=adoption.source,
                                  attribute=adoption.attribute, base=adoption.base,
                                  id_attribute=adoption.id_attribute,
                                  sort_attribute=adoption.sort_attribute,
                                  clock=self.store.clock, meter=self.store.meter)

    def _source_tools(self, adoption: Adoption) -> GsiAdoptionTools | TableAdoptionTools:
        return self._tools(adoption.attribute) if adoption.kind == "gsi" \
            else self._table_tools(adoption)

    async def _items(self, adoption: Adoption) -> int:
        """The base table's item count, as DescribeTable last counted it."""
        return int((await self._source_tools(adoption).describe()).get("ItemCount", 0))

    def _records(self, adoption: Adoption) -> WorkRecords:
        return WorkRecords(self.store, self.name, adoption.id, clock=self._clock,
                           rng=self._rng, adoption=True)

    async def _adoption(self, *stages: str) -> tuple[Routing, Adoption]:
        routing = await self.routing()
        adoption = routing.adoption
        if adoption is None:
            raise ReshardRefused(f"index {self.name!r} has no adoption: start one with "
                                 "'shardex adopt start'")
        if stages and adoption.stage not in stages:
            raise ReshardRefused(f"index {self.name!r}: the adoption is {adoption.stage}, not "
                                 f"{' or '.join(stages)}")
        return routing, adoption

    def _begun(self, sets: Mapping[str, ShardPolicy], margin: float, adoption_id: str | None,
               **source: Any) -> Adoption:
        """The adoption ``start`` records, in ``write-new`` (dual-write) from now."""
        now = self._clock.wall()
        return Adoption(state="write-new", migration=Transition(
            id=adoption_id or f"a{uuid.uuid4().hex[:12]}", started_at=now, changed_at=now,
            margin=float(margin), values=tuple(sorted(sets)), kind="copy"), **source)

    # -- start ---------------------------------------------------------------------------

    async def start(self, sets: Mapping[str, ShardPolicy], *, margin: float = DEFAULT_MARGIN,
                    dry_run: bool = False, adoption_id: str | None = None) -> AdoptPlan:
        """Record the adoption (dual-write), creating the new GSI first if it is missing.

        Checks the old GSI (it exists, keyed by the raw attribute and the sort
        attribute) and the new one (absent, or keyed as the store needs) before anything
        changes; ``dry_run`` stops there. Raises InvalidInput or NotFound on bad input,
        ReshardRefused if an adoption or a reshard is under way.
        """
        if self.source is None or self.attribute is None:
            raise InvalidInput("start needs --from-gsi (or --from-table) and --from-attribute")
        check_seconds("margin", margin)
        if self.base is not None:
            return await self._start_table(sets, margin=margin, dry_run=dry_run,
                                           adoption_id=adoption_id)
        tools = self._tools(self.attribute)
        table = await tools.describe()
        source = tools.check_source(table, self.source)
        exists = tools.check_target(table)
        items = int(table.get("ItemCount", 0))
        planned = Routing(overrides=dict(sets))
        projection = source.get("Projection") or {"ProjectionType": "ALL"}
        if dry_run:
            return AdoptPlan(planned, items, created=False, exists=exists, stored=False,
                             projection=projection)
        await self._meta_table()
        if not exists:
            self._say(f"creating the GSI {self.store.gsi.gsi!r} on {self.store.gsi.key_attribute}"
                      f", {self.store.gsi.sort_attribute} (projection "
                      f"{projection.get('ProjectionType', 'ALL')})")
            await tools.create_target(table, source)
        await tools.wait_index(self.store.gsi.gsi, clock=self._clock, within=self._within,
                               progress=self._say)
        adoption = self._begun(sets, margin, adoption_id, kind="gsi", source=self.source,
                               attribute=self.attribute)
        return await self._record(adoption, sets, AdoptPlan(
            planned, items, created=not exists, exists=exists, stored=True,
            projection=projection))

    async def _start_table(self, sets: Mapping[str, ShardPolicy], *, margin: float,
                           dry_run: bool, adoption_id: str | None) -> AdoptPlan:
        """``start`` of an index table: checks, then the shardex index table, then record."""
        assert self.source is not None
        assert self.attribute is not None
        if self.id_attribute is None or self.sort_attribute is None:
            raise InvalidInput("adopting an index table needs --base-table, --id-attribute "
                               "and --sort-attribute")
        adoption = self._begun(sets, margin, adoption_id, kind="table", source=self.source,
                               attribute=self.attribute, base=self.base,
                               id_attribute=self.id_attribute,
                               sort_attribute=self.sort_attribute)
        tools = self._table_tools(adoption)
        await tools.check()
        items = await self._items(adoption)
        try:
            await tools.describe(self.store.table)
            exists = True
        except NotFound:
            exists = False
        if dry_run:
            return AdoptPlan(Routing(overrides=dict(sets)), items, created=False, exists=exists,
                             stored=False, projection={})
        if not exists:
            self._say(f"creating the index table {self.store.table!r}")
            await create_index_table(self.store.table, client=BorrowedClient(self.store.client))
        return await self._record(adoption, sets, AdoptPlan(
            Routing(), items, created=not exists, exists=exists, stored=True, projection={}))

    async def _record(self, adoption: Adoption, sets: Mapping[str, ShardPolicy],
                      plan: AdoptPlan) -> AdoptPlan:
        """Store ``adoption`` in the index's routing, with ``sets`` as its overrides;
        ``plan`` with the routing stored."""
        cleaned = False
        for _ in range(3):
            # read again when the record changed meanwhile: an application opening the
            # index stores its first record (a start refused for it had created the GSI
            # and the metadata table); begin_copy refuses a record a migration holds now
            current = await self.routing()
            try:
                new = begin_copy(current, adoption, sets)
            except InvalidRouting as exc:
                raise ReshardRefused(f"index {self.name!r}: {exc}") from None
            if not cleaned:
                await self._records(adoption).cleanup()
                cleaned = True
            if await self.store_next(new):
                break
        else:
            raise ReshardRefused(f"the routing of index {self.name!r} changed three times "
                                 "while the adoption was being started; it was not started "
                                 "(what it created stays, for a start again): run 'shardex "
                                 "adopt status'")
        await record_migration(self.store, self.name, "adoption", adoption.id,
                               adoption.migration.values, clock=self._clock, rng=self._rng)
        return replace(plan, routing=new)

    async def _meta_table(self) -> None:
        meta = self.store.gsi.records_table
        tools = self._tools(self.attribute or "-")
        try:
            await tools._call("DescribeTable", f"table {meta!r}", TableName=meta)
        except NotFound:
            self._say(f"creating the metadata table {meta!r}")
            await create_meta_table(self.store.table, name=meta,
                                    client=BorrowedClient(self.store.client))

    # -- run: the backfill ---------------------------------------------------------------

    async def _segments(self, adoption: Adoption) -> list[Unit]:
        """The backfill's segments of its current pass (a verify with gaps starts another)."""
        records = self._records(adoption)
        return [unit for unit, _ in
                (await records.units(adoption.migration.generation)).values()]

    async def backfilled(self, adoption: Adoption) -> Backfilled:
        """The backfill's counts, from its segment records."""
        return Backfilled.of(await self._segments(adoption))

    def _layouts(self, adoption: Adoption, index: ShardedIndex) -> AdoptionLayouts:
        """The adoption's layouts over ``index`` (the plain index left unopened)."""
        return adoption_layouts(index, source_store(self.store, adoption),
                                self._source_tools(adoption), clock=self._clock, rng=self._rng)

    async def _plan(self, adoption: Adoption) -> tuple[list[Unit], int | None]:
        # the total is the base table's item count when the backfill is planned, fixed
        return segment_units(self.segments), await self._items(adoption)

    async def run(self) -> Backfilled:
        """Backfill every item's shard attribute (resuming wherever an earlier run stopped).

        Waits until every client writes the shard attribute (``ready_at`` of dual-write)
        before it scans. Refused unless the adoption is in ``dual-write``. A store that
        leaves a request unanswered for 2 s is said in the progress (``answered``, on the
        store's meter, which counts the backfill's own Scan and UpdateItem too), then
        after 4, 8, ... s: the progress comes only as pages land.
        """
        self._heard = False
        return await answered(self._backfill(), self._clock, _QUIET, self._say_quiet,
                              quiet=lambda: self.store.meter.quiet(self.store.clock.now()),
                              tick=_QUIET / 4)

    async def _backfill(self) -> Backfilled:
        routing, adoption = await self._adoption("dual-write")
        await self.wait_until(ready_at(adoption, self.lease), self._say,
                              "every client to write the shard attribute (the routing's "
                              "lease and the margin)", adoption.id)
        records = self._records(adoption)
        before = await self.backfilled(adoption)
        began = self._clock.now()
        items = 0

        def report() -> None:
            # the total is the item count fixed when the backfill was planned
            rate = mover.scanned / max(1e-9, self._clock.now() - began)
            scanned = before.scanned + mover.scanned
            if scanned <= items:
                eta = f", ETA {(items - scanned) / rate:,.0f} s" if rate > 0 else ""
                total = f" of about {items:,}"
            else:  # past a count taken hours ago, on a table that grew since
                eta, total = "", f", {past_count(items)}"
            self._say(f"backfill: scanned {scanned:,}{total}, updated "
                      f"{before.updated + mover.copied:,}, {rate:,.0f} items/s{eta}")

        async with contextlib.AsyncExitStack() as stack:
            budget = await self.budget(stack, adoption.id, self._say)
            # the copies see throttles themselves, to pace by them
            moving = await stack.enter_async_context(ShardedIndex(
                self.store, self.name, retry=MOVER_RETRY, clock=self._clock, seed=self._seed))
            mover = Mover(self._layouts(adoption, moving), records, clock=self._clock,
                          rate=self.rate, read_rate=self.read_rate, workers=self.workers,
                          unit_lease=self.unit_lease, worker=self.worker,
                          seed=self._rng.randrange(2**32), progress=report, budget=budget,
                          refused=self.unindexable)
            plan = partial(self._plan, adoption)
            generation = adoption.migration.generation
            await mover.plan(generation, plan)
            planned = await records.plan(generation)
            assert planned is not None
            items = planned[0].total or 0
            if planned[0].units != self.segments:
                self._say(f"the backfill was planned with {planned[0].units} segments by an "
                          "earlier run: using those")
            holds = asyncio.ensure_future(self._say_holds(budget))
            try:
                await mover.run(routing, plan=plan)
            finally:
                holds.cancel()
                await asyncio.gather(holds, return_exceptions=True)
        now = (await self.routing()).adoption
        if now is None or now.id != adoption.id or now.stage == "rolled-back":
            # the mover stops when the adoption changes under it: a rollback (or another
            # start after one) is not a backfill done, which the run said, exit 0
            how = "rolled back" if now is not None and now.id == adoption.id else "replaced"
            raise ReshardRefused(
                f"index {self.name!r}: the adoption {adoption.id} was {how} while this run "
                f"backfilled ({mover.scanned:,} items scanned): it stopped; 'shardex adopt "
                "status' says what is under way")
        return await self.backfilled(adoption)

    async def _say_holds(self, budget: Budget | None) -> None:
        """Say when the backfill stands still and why (paused, or held by an outside
        signal), and when it goes on: its progress is reported only as pages land."""
        said: str | None = None
        while budget is not None:
            hold = budget.controls.hold
            if hold != said:
                controls = budget.controls
                self._say(f"backfill: {hold or describe(controls.control, controls.held)}")
                said = hold
            await self._clock.sleep(1.0)

    # -- verify, cutover, complete, rollback ---------------------------------------------

    async def verify(self) -> Parity:
        """Check parity of every value named or seen by any pass of the backfill, and
        record the report: for cutover only once the current pass has finished (a report
        made before it ran says nothing of what it would mend, nor of what was written
        since the pass before)."""
        routing, adoption = await self._adoption("dual-write", "read-new")
        every_pass = [unit for unit, _ in (await self._records(adoption).units()).values()]
        seen = sorted(set(adoption.migration.values) | set(routing.overrides)
                      | {v for s in every_pass for v in s.values})
        faults = {value: fault for value in seen if (fault := value_fault(value)) is not None}
        values = [value for value in seen if value not in faults]
        # shardex cannot read or route such a value in any state: its items stay out
        self.not_verified = {value: fault.removeprefix("logical key ")
                             for value, fault in faults.items()}
        layouts = self._layouts(adoption, await self.index())
        # an index table reads strongly consistently: a gap found twice is one
        truth = self._tools(adoption.attribute).item if adoption.kind == "gsi" else None
        await layouts.source.open()
        try:
            self._say(f"verifying {len(values)} value(s): {', '.join(values) or 'none'}")
            report = await adoption_parity(layouts, routing, values, truth=truth,
                                           read_rate=self.read_rate, settle=self.settle,
                                           clock=self._clock)
        finally:
            await layouts.source.close()

        async def record(latest: Adoption) -> Adoption:
            if latest.id != adoption.id:
                raise ReshardRefused(f"index {self.name!r}: the adoption changed while it "
                                     "was being verified; nothing was recorded")
            finished = (await self.backfilled(latest)).finished
            if not report.clean and latest.state == "write-new" \
                    and latest.migration.generation == adoption.migration.generation \
                    and finished:
                # gaps once the scan is done (items written by a host without the shard
                # attribute, say): the next run scans again, in a pass of its own
                return copy_to(latest, latest.state, self._clock.wall(), parity=report,
                               generation=latest.migration.generation + 1)
            if latest.state == "write-new" and not finished:
                # before the pass ran, or while it runs: no report cutover may take
                return copy_to(latest, latest.state, self._clock.wall(), parity=None)
            return copy_to(latest, latest.state, self._clock.wall(), parity=report)

        await self._change(record)
        return report

    async def _change(self, decide: Callable[[Adoption], Awaitable[Adoption]]) -> Routing:
        """Store the adoption ``decide`` makes of the stored one, deciding again if another
        process stored first; ``decide`` raises ReshardRefused to refuse the step."""
        while True:
            routing, adoption = await self._adoption()
            new = with_adoption(routing, await decide(adoption))
            if await self.store_next(new):
                return new

    async def cutover(self, *, max_age: float | None = None) -> Routing:
        """Move readers to the new GSI; refused unless the last verify is clean and fresh."""
        async def cut(adoption: Adoption) -> Adoption:
            done = await self.backfilled(adoption)
            now = self._clock.wall()
            refusal = copy_cutover_refusal(adoption, now=now, backfilled=done.finished,
                                           max_age=self.max_age if max_age is None else max_age)
            if refusal is not None:
                raise ReshardRefused(f"index {self.name!r}: cutover refused: {refusal.why}")
            return copy_to(adoption, "read-new", now)

        return await self._change(cut)

    async def complete(self, *, retain: float | None = None, drop: bool = False) -> Routing:
        """Retire the old GSI's path once ``retain`` seconds have passed; drop it if asked.

        Returns at once, in ``read-new``, while the retention window lasts (a rollback is
        still possible); after it, waits until no reader reads the old GSI (the lease and
        margin after cutover), then completes, and with ``drop`` deletes the old GSI.
        """
        if retain is not None:
            check_seconds("retain", retain)
        _, adoption = await self._adoption("read-new", "complete")
        parity = adoption.migration.parity
        if adoption.stage == "read-new" and parity is not None and not parity.clean:
            # the old index is the way back (and, dropped, gone): not while readers of the
            # new one may miss or list wrongly what the last verify found
            gaps = ", ".join(f"{n} {kind}" for kind, n in parity.counts().items() if n)
            raise ReshardRefused(f"index {self.name!r}: the last parity report has gaps "
                                 f"({gaps}): complete is refused until a verify finds none "
                                 "(readers read the new index: 'shardex adopt rollback', "
                                 "then 'shardex adopt run' mends them, and verify and "
                                 "cutover again)")
        while True:
            routing = await self.routing()
            step = copy_complete_step(routing, now=self._clock.wall(), lease=self.lease,
                                      retain=retain, drop=drop)
            if isinstance(step, Stop):
                if routing.adoption is not None and routing.adoption.stage == "complete":
                    await self._ended(routing.adoption, "complete")
                return routing
            if isinstance(step, Wait):
                await self.wait_until(step.until, self._say, step.why)
                continue
            if isinstance(step, Drop):
                assert routing.adoption is not None
                await self._drop(routing.adoption)
            await self.store_next(step.routing)

    async def _drop(self, adoption: Adoption) -> None:
        """Delete the old index (a table, or a GSI of the base table) and wait until gone."""
        if adoption.kind == "table":
            self._say(f"dropping the old index table {adoption.source!r}")
            await self._table_tools(adoption).drop(clock=self._clock, within=self._within)
            return
        tools = self._tools(adoption.attribute)
        table = await tools.describe()
        if any(i["IndexName"] == adoption.source
               for i in table.get("GlobalSecondaryIndexes") or []):
            self._say(f"dropping the old GSI {adoption.source!r}")
            await tools.drop(adoption.source)
        await tools.wait_index(adoption.source, clock=self._clock, within=self._within,
                               progress=self._say, gone=True)

    async def rollback(self) -> Routing:
        """Send readers back to the old GSI (the shard attributes stay: harmless)."""
        async def back(adoption: Adoption) -> Adoption:
            refusal = copy_rollback_refusal(adoption)
            if refusal is not None:
                raise ReshardRefused(f"index {self.name!r}: rollback refused: {refusal.why}")
            return copy_to(adoption, "done", self._clock.wall(), direction="rollback")

        routing = await self._change(back)
        assert routing.adoption is not None
        await self._ended(routing.adoption, "rolled-back")
        return routing

    async def _ended(self, adoption: Adoption, how: str) -> None:
        """Note in the store's list of migrations how the adoption ended, and when."""
        await finish_migration(self.store, self.name, adoption.id, how, clock=self._clock,
                               rng=self._rng)

    async def status(self, *, uri: str | None = None, gone: str | None = None
                     ) -> dict[str, Any]:
        """The ``shardex.adopt.status/1`` document of the index, counted from its records
        (``gone``: a worker that has stopped, as ``adopt_status_document`` says)."""
        routing = await self.routing()
        segments: list[Unit] = []
        items = None
        if routing.adoption is not None:
            segments = await self._segments(routing.adoption)
            plan = await self._records(routing.adoption).plan(
                routing.adoption.migration.generation)
            items = None if plan is None else plan[0].total
        return adopt_status_document(routing, segments, index=self.name,
                                     store=uri or self.store.uri, lease=self.lease,
                                     now=self._clock.wall(), max_age=self.max_age, items=items,
                                     gone=gone)


_QUIET = 2.0  # seconds a backfill's store may leave a request unanswered before it is said
