"""The adoption in the routing document, its pure decisions, and the status document."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from shardex import Routing, ShardPolicy
from shardex.adopted import follow
from shardex.adoption import Adoption
from shardex.clock import LoopClock
from shardex.errors import InvalidInput, InvalidRouting, MalformedItem
from shardex.migrate import states
from shardex.migrate.adopting import PLAIN
from shardex.migrate.layouts import Layouts
from shardex.migrate.states import copy_cutover_refusal, copy_rollback_refusal, copy_to
from shardex.migrate.status import adopt_status_document as status_document
from shardex.migrate.units import Backfilled, Unit, segment_units
from shardex.migrate.verify import adoption_parity
from shardex.model.entries import Placement, Position, QueryPage, StoredEntry
from shardex.routing import begin_transition
from shardex.stores.dynamodb import DynamoDBStore
from shardex.transition import Gap, Parity, Transition
from shardex.write import in_place

ADOPTION = Adoption(kind="gsi", source="status-index", attribute="status", state="write-new",
                    migration=Transition(id="a1", started_at=100.0, changed_at=100.0,
                                         margin=5.0, values=("PENDING",), kind="copy"))


def adopted(state: str = "write-new", direction: str = "forward", drop_source: bool = False,
            **changes: Any) -> Routing:
    migration = dataclasses.replace(ADOPTION.migration, direction=direction, **changes)
    return Routing(overrides={"PENDING": ShardPolicy(16)}, version=3, adoption=dataclasses.replace(
        ADOPTION, state=state, migration=migration, drop_source=drop_source))


def test_the_adoption_round_trips_through_the_routing_document() -> None:
    routing = adopted(parity=Parity(checked_at=120.0, entries=10, missing=1, examples=(
        Gap("missing", "PENDING", "o-1", "PENDING"),)), retire_after=200.0, drop_source=True)
    assert Routing.from_json(routing.to_json()) == routing
    assert routing.to_dict()["adoption"]["migration"]["kind"] == "copy"
    assert "adoption" not in Routing().to_dict()
    assert "kind" not in Transition(id="r1", started_at=0.0, changed_at=0.0,
                                    margin=0.0).to_dict()


# a routing record as stored before an adoption was a copy migration: its own flat fields
# and state names
OLD_SHAPE = {"id": "a1", "kind": "table", "source": "orders_by_status", "attribute": "status",
             "state": "read-new", "started_at": 100.0, "changed_at": 150.0, "margin": 5.0,
             "values": ["PENDING"], "parity": {"checked_at": 140.0, "entries": 7, "missing": 0,
                                               "extra": 0, "misplaced": 0, "mismatched": 0},
             "retain": 60.0, "retire_after": 210.0, "drop_source": True, "dropped": False,
             "base": "orders", "id_attribute": "order_id", "sort_attribute": "created_at"}


@pytest.mark.parametrize(("old", "state", "direction", "stage"), [
    ("dual-write", "write-new", "forward", "dual-write"),
    ("read-new", "read-new", "forward", "read-new"),
    ("complete", "done", "forward", "complete"),
    ("rolled-back", "done", "rollback", "rolled-back")])
def test_a_record_stored_in_the_old_shape_loads_into_the_new(
        old: str, state: str, direction: str, stage: str) -> None:
    doc = {**adopted().to_dict(), "adoption": {**OLD_SHAPE, "state": old}}
    adoption = Routing.from_dict(doc).adoption
    assert adoption is not None
    assert (adoption.state, adoption.migration.direction, adoption.stage) == (
        state, direction, stage)
    assert (adoption.id, adoption.kind, adoption.source, adoption.base) == (
        "a1", "table", "orders_by_status", "orders")
    meta = adoption.migration
    assert (meta.kind, meta.values, meta.changed_at, meta.retire_after) == (
        "copy", ("PENDING",), 150.0, 210.0)
    assert meta.parity is not None
    assert meta.parity.clean
    assert adoption.drop_source
    assert not adoption.dropped
    again = Routing.from_json(Routing.from_dict(doc).to_json())
    assert again.adoption == adoption
    minimal = {k: v for k, v in OLD_SHAPE.items() if k not in (
        "values", "parity", "retain", "retire_after", "drop_source", "dropped", "base",
        "id_attribute", "sort_attribute")}
    bare = Routing.from_dict({**doc, "adoption": {**minimal, "kind": "gsi"}}).adoption
    assert bare is not None
    assert bare.migration.values == ()
    assert not bare.drop_source


@pytest.mark.parametrize(("path", "bad"), [
    (("state",), "moving"), (("source", "kind"), "view"), (("source", "name"), ""),
    (("migration", "margin"), -1), (("migration", "values"), [1]), (("dropped",), "yes"),
    (("migration", "id"), "a b"), (("migration", "kind"), "move"), (("extra",), 1)])
def test_a_damaged_adoption_names_its_field(path: tuple[str, ...], bad: Any) -> None:
    doc = adopted().to_dict()
    part = doc["adoption"]
    for name in path[:-1]:
        part = part[name]
    part[path[-1]] = bad
    with pytest.raises(InvalidRouting, match="adoption"):
        Routing.from_dict(doc)
    with pytest.raises(InvalidRouting, match=r"routing\.adoption\.state"):
        Routing.from_dict({**doc, "adoption": {**OLD_SHAPE, "state": "moving"}})


def test_an_adoption_under_way_refuses_a_reshard_and_a_complete_one_is_kept() -> None:
    with pytest.raises(InvalidRouting, match="adoption a1 is dual-write"):
        begin_transition(adopted(), {"PENDING": ShardPolicy(32)})
    complete = adopted(state="done")
    resharding = begin_transition(complete, {"PENDING": ShardPolicy(32)})
    assert resharding.adoption == complete.adoption
    assert states.finish(resharding).adoption == complete.adoption


def test_readers_changing_index_stamp_the_change() -> None:
    moved = copy_to(ADOPTION, "read-new", 150.0)
    assert moved.migration.changed_at == 150.0
    assert not moved.reads_source
    assert states.ready_at(moved, 10.0) == 165.0
    retained = copy_to(moved, "read-new", 170.0, retain=60.0)
    assert retained.migration.changed_at == 150.0
    assert retained.migration.retain == 60.0
    back = copy_to(moved, "done", 180.0, direction="rollback")
    assert back.migration.changed_at == 180.0
    assert back.reads_source
    assert not back.active
    assert back.stage == "rolled-back"
    complete = copy_to(moved, "done", 190.0)
    assert (complete.stage, complete.migration.changed_at) == ("complete", 150.0)


def test_an_adoption_starts_only_on_an_index_free_of_migrations() -> None:
    plain = Routing(version=2)
    started = states.begin_copy(plain, ADOPTION, {"PENDING": ShardPolicy(16)})
    assert (started.version, started.adoption) == (3, ADOPTION)
    assert started.policy("PENDING") == ShardPolicy(16)
    resharding = begin_transition(plain, {"PENDING": ShardPolicy(4)})
    for current, why in [(started, "already dual-write"),
                         (adopted(state="done"), "is complete"),
                         (resharding, "a reshard is under way")]:
        refusal = states.copy_start_refusal(current)
        assert refusal is not None
        assert why in refusal.why
        with pytest.raises(InvalidRouting, match=why):
            states.begin_copy(current, ADOPTION, {})
    assert states.copy_start_refusal(adopted(state="done", direction="rollback")) is None


def test_complete_records_the_window_waits_for_it_and_the_lease_then_drops() -> None:
    cut = adopted(state="read-new", changed_at=150.0)

    def step(routing: Routing, now: float, retain: float | None = None,
             drop: bool = False) -> Any:
        return states.copy_complete_step(routing, now=now, lease=10.0, retain=retain, drop=drop)

    window = step(cut, 160.0, retain=60.0, drop=True)
    assert isinstance(window, states.Advance)
    kept = window.routing.adoption
    assert kept is not None
    assert (kept.migration.retire_after, kept.drop_source, window.routing.version) == (
        220.0, True, 4)
    assert step(window.routing, 160.0) == states.Stop("read-new", "the retention window has "
                                                                  "not passed")
    assert isinstance(step(window.routing, 170.0, retain=0.0), states.Advance)
    short = adopted(state="read-new", changed_at=150.0, retire_after=160.0)
    assert step(short, 161.0) == states.Wait(165.0, "no reader to read 'status-index'")
    done = step(short, 165.0)
    assert isinstance(done, states.Advance)
    assert done.routing.adoption is not None
    assert done.routing.adoption.stage == "complete"
    assert step(done.routing, 166.0) == states.Stop("complete", "complete")
    drop = step(done.routing, 166.0, drop=True)
    assert isinstance(drop, states.Drop)
    assert drop.routing.adoption is not None
    assert drop.routing.adoption.dropped
    assert step(drop.routing, 167.0, drop=True) == states.Stop("complete", "complete")


def test_cutover_needs_the_backfill_and_a_clean_fresh_parity() -> None:
    clean = Parity(checked_at=100.0, entries=5)
    ready = copy_to(ADOPTION, "write-new", 0.0, parity=clean)
    assert copy_cutover_refusal(ready, now=110.0, max_age=60.0, backfilled=True) is None
    cases = [
        (None, True, "no adoption"),
        (ADOPTION, False, "backfill has not finished"),
        (ADOPTION, True, "no parity report"),
        (copy_to(ADOPTION, "write-new", 0.0, parity=dataclasses.replace(clean, extra=2)),
         True, "2 extra"),
        (dataclasses.replace(ready, state="read-new"), True, "already read the new"),
    ]
    for adoption, backfilled, why in cases:
        refusal = copy_cutover_refusal(adoption, now=110.0, max_age=60.0,
                                       backfilled=backfilled)
        assert refusal is not None
        assert why in refusal.why
    stale = copy_cutover_refusal(ready, now=500.0, max_age=60.0, backfilled=True)
    assert stale is not None
    assert "older than --max-age" in stale.why


def test_rollback_is_possible_until_complete() -> None:
    assert copy_rollback_refusal(ADOPTION) is None
    assert copy_rollback_refusal(copy_to(ADOPTION, "read-new", 1.0)) is None
    for direction in ("forward", "rollback"):
        refusal = copy_rollback_refusal(copy_to(ADOPTION, "done", 1.0, direction=direction))
        assert refusal is not None
    assert copy_rollback_refusal(None) is not None


def _segment(number: int, scanned: int, updated: int, done: bool,
             values: dict[str, int]) -> Unit:
    return dataclasses.replace(segment_units(2)[number], entries=scanned, moved=updated,
                               done=done, values=values, started_at=100.0, saved_at=110.0)


def test_the_status_document_counts_progress_and_names_the_next_steps() -> None:
    segments = [_segment(0, 300, 200, True, {"PENDING": 250, "SHIPPED": 50}),
                _segment(1, 200, 100, False, {"PENDING": 200})]
    doc = status_document(adopted(), segments, index="orders", store="dynamodb://orders",
                          lease=15.0, now=120.0, max_age=900.0, items=1000)
    assert doc["schema"] == "shardex.adopt.status/1"
    assert doc["state"] == "dual-write"
    assert doc["reads"] == "source"
    progress = doc["progress"]
    assert progress["items_scanned"] == 500
    assert progress["items_remaining"] == 500
    assert progress["rate"] == 50.0
    # no runner holds a segment: nothing moves, so no ETA (it said 10 s, for ever: a probe)
    assert progress["eta_s"] is None
    assert doc["values"]["PENDING"] == {"shards": 16, "strategy": "hash", "items": 450}
    assert doc["values"]["SHIPPED"]["shards"] == 1
    assert doc["next_steps"][0].startswith("shardex adopt run --store dynamodb://orders")
    # a live lease is a runner to watch, unless it is the lease of the run cut short
    held = [segments[0], segments[1].leased("me:1:a", 115.0, 145.0)]
    doc = status_document(adopted(), held, index="orders", store="s", lease=15.0, now=120.0,
                          max_age=900.0, items=1000)
    assert [r["owner"] for r in doc["runners"]] == ["me:1:a"]
    assert doc["progress"]["eta_s"] == 10.0  # at the rate so far, while a runner works
    assert doc["next_steps"][0].startswith("shardex adopt status --store s --index orders")
    doc = status_document(adopted(), held, index="orders", store="s", lease=15.0, now=120.0,
                          max_age=900.0, items=1000, gone="me:1:a")
    assert (doc["runners"], doc["next_steps"][0].split()[:3]) == ([], ["shardex", "adopt", "run"])
    done = [dataclasses.replace(s, done=True) for s in segments]
    clean = adopted(parity=Parity(checked_at=119.0, entries=500))
    doc = status_document(clean, done, index="orders", store="s", lease=15.0, now=120.0,
                          max_age=900.0, items=1000)
    assert doc["progress"]["items_remaining"] == 0
    assert doc["next_steps"][0].startswith("shardex adopt cutover")
    # done: no "remaining about 0, 50 items/s, ETA 0 s" (by hand on DynamoDB Local)
    from shardex.commands.adopt import _status_lines

    # and what it left alone: it read "500 scanned, 300 updated", 200 unsaid
    assert "  backfill: done: 2/2 segments, 500 scanned of about 1,000, 300 updated, 200 " \
        "needing nothing (the shard attribute set, or no value to index)" in \
        _status_lines(doc), _status_lines(doc)
    assert status_document(Routing(), [], index="orders", store="s", lease=15.0, now=0.0,
                           max_age=1.0, items=0)["state"] == "none"


def test_a_backfill_past_the_item_count_says_the_count_lags_and_gives_no_eta() -> None:
    """The total is DescribeTable's ItemCount when the backfill was planned, which DynamoDB
    refreshes about every six hours: on a table that grew since, the scan passes it, and
    the status said "remaining about 0, ETA 0 s" while a runner still scanned."""
    from shardex.commands.adopt import _status_lines

    segments = [_segment(0, 700, 700, False, {"PENDING": 700}),
                _segment(1, 500, 500, False, {"PENDING": 500})]
    held = [segments[0], segments[1].leased("me:1:a", 115.0, 145.0)]
    doc = status_document(adopted(), held, index="orders", store="s", lease=15.0, now=120.0,
                          max_age=900.0, items=1000)
    progress = doc["progress"]
    assert (progress["items_remaining"], progress["eta_s"]) == (None, None), progress
    backfill = next(line for line in _status_lines(doc) if "backfill:" in line)
    assert "1,200 scanned, more than the 1,000 items the table counted when the backfill " \
        "was planned (DynamoDB refreshes that count about every six hours)" in backfill
    assert "ETA" not in backfill, backfill
    assert "remaining" not in backfill, backfill


def test_a_backfill_not_planned_yet_says_so() -> None:
    """Before the first run plans the backfill (while it waits for every client to write
    the shard attribute), status said "backfill: 0/0 segments done, 0 scanned, 0
    updated" (by hand on DynamoDB Local)."""
    from shardex.commands.adopt import _status_lines

    doc = status_document(adopted(), [], index="orders", store="s", lease=15.0, now=120.0,
                          max_age=900.0, items=None)
    backfill = [line for line in _status_lines(doc) if "backfill:" in line]
    assert backfill == ["  backfill: not planned yet: the first run plans it once every "
                        "client writes the shard attribute"], backfill


def test_a_complete_adoption_shows_no_step_control_or_window_of_one_under_way() -> None:
    """A complete adoption's status said "next step possible from ...", "controls: moving
    at up to 50 write units a second", a budget "in force" and "retention: the old
    index's path may be retired from ..." (retired already), and named no step, where
    `adopt complete` had named dropping the old index (by hand on DynamoDB Local). A
    rolled-back one likewise shows no controls."""
    from shardex.commands.adopt import _status_lines

    controls = {"recorded": True, "paused": False, "rate": 50.0, "changed_by": "vm:1:a",
                "summary": "moving at up to 50 write units a second per shard key",
                "budget": {"rate": 50.0, "in_force": 50.0, "slices": [], "holds": [],
                           "waits": []}}
    for state, step in (("done", "complete"), ("done", None)):
        direction = "forward" if step else "rollback"
        doc = status_document(adopted(state, direction, retire_after=100.0), [],
                              index="orders", store="s", lease=15.0, now=120.0,
                              max_age=900.0, items=None)
        doc["controls"] = controls
        lines = _status_lines(doc)
        for gone in ("next step possible", "controls:", "budget:", "retention:"):
            assert not any(gone in line for line in lines), (gone, lines)
        if step:
            assert doc["next_steps"] == ["shardex adopt complete --store s --index orders "
                                         "--drop-old-index"], doc["next_steps"]
            assert not any("backfill:" in line for line in lines), lines


def test_a_gsi_store_without_sort_owner_follows_an_adoption() -> None:
    options = {"gsi": "status-shard-index", "key_attribute": "status_shard",
               "sort_attribute": "created_at", "id_attribute": "order_id",
               "region": "us-east-1"}
    store = DynamoDBStore("orders", **options)
    assert store.capabilities.writes_sort
    follow(store, ADOPTION)
    assert not store.capabilities.writes_sort
    assert store.key_attributes("PENDING#3", None, "o-1") == {"status_shard": "PENDING#3"}
    told = DynamoDBStore("orders", sort_owner="shardex", **options)
    follow(told, ADOPTION)
    assert told.capabilities.writes_sort
    from shardex.adopt import Adopter

    with pytest.raises(InvalidInput, match="sort_owner=application"):
        Adopter(told, "orders_by_status")


@pytest.mark.shardex_virtual
async def test_an_index_stored_with_an_old_adoption_opens_and_a_reshard_rewrites_it() -> None:
    from shardex import ShardedIndex
    from shardex.migrate import Resharder
    from shardex.stores.memory import MemoryStore

    store = MemoryStore(seed=5)
    old = {**OLD_SHAPE, "state": "complete", "retire_after": 100.0}
    await store.put_record("orders", "routing", {
        **Routing(overrides={"PENDING": ShardPolicy(2)}, version=3).to_dict(),
        "adoption": old}, expected=None)
    async with ShardedIndex(store, "orders", routing_lease=1.0) as index:
        adoption = index.routing.adoption
        assert adoption is not None
        assert (adoption.stage, adoption.id, adoption.reads_source) == ("complete", "a1", False)
        await index.put("PENDING", "o-1", sort="2026")
        async with Resharder(store, "orders", unit_lease=5.0) as runner:
            await runner.start({"PENDING": ShardPolicy(4)}, margin=0.5)
            assert (await runner.run(until="done")).state == "done"
        await index.refresh_routing()
        assert index.routing.adoption == adoption
        assert [e.item_id async for e in index.scan("PENDING")] == ["o-1"]
    record = await store.get_record("orders", "routing")
    assert record is not None
    assert record.body["adoption"]["migration"]["kind"] == "copy"
    assert record.body["adoption"]["state"] == "done"


@pytest.mark.shardex_virtual
async def test_a_later_reshard_keeps_a_complete_adoptions_backfill_counts() -> None:
    from shardex import ShardedIndex
    from shardex.clock import LoopClock
    from shardex.migrate import Resharder
    from shardex.migrate.work import WorkRecords
    from shardex.routing_record import RoutingRecord
    from shardex.stores.memory import MemoryStore

    store = MemoryStore(seed=5)
    await store.put_record("orders", "routing", adopted(state="done").to_dict(), expected=None)
    records = WorkRecords(store, "orders", "a1", clock=LoopClock(), adoption=True)
    segments = [dataclasses.replace(unit, done=True, entries=10, moved=7, values={"PENDING": 10})
                for unit in segment_units(2)]
    assert await records.claim_plan(1, "w", 5.0)
    assert await records.publish(1, segments, "w", total=20)
    # a record of a reshard that never began: the start clears it
    await store.put_record("orders", "reshard/r0/0001/plan", {"planned": False, "owner": "x",
                                                             "expires": 0.0}, expected=None)
    async with ShardedIndex(store, "orders", routing_lease=1.0) as index:
        await index.put("PENDING", "o-1", sort="2026")
        async with Resharder(store, "orders", unit_lease=5.0) as runner:
            await runner.start({"PENDING": ShardPolicy(32)}, margin=0.5)
            assert (await runner.run(until="done")).state == "done"
    assert await store.list_records("orders", "reshard/r0/") == {}
    kept = [unit for unit, _ in (await records.units()).values()]
    plan = await records.plan(1)
    assert plan is not None
    routing = (await RoutingRecord(store, "orders").read())[0]
    assert routing is not None
    assert routing.adoption is not None
    doc = status_document(routing, kept, index="orders", store="memory://", lease=1.0,
                          now=1e9, max_age=60.0, items=plan[0].total)
    assert doc["state"] == "complete"
    assert doc["progress"]["items_scanned"] == 20
    assert doc["progress"]["items_updated"] == 14
    assert doc["progress"]["items_total"] == 20
    assert doc["values"]["PENDING"]["items"] == 20


def test_work_units_of_both_kinds_load_as_stored_and_so_do_records_of_the_old_shapes() -> None:
    ranged = Unit(3, 2, "PENDING", "PENDING#1", 125.0, start=("a", "o-1"), moved=4)
    segment = dataclasses.replace(segment_units(4)[2], cursor={"order_id": {"S": "o-9"}},
                                  entries=10, moved=7, values={"PENDING": 9})
    for unit in (ranged, segment):
        assert Unit.from_body(unit.to_body(), "r") == unit
    # a range stored before units had kinds
    before = {k: v for k, v in ranged.to_body().items()
              if k not in ("kind", "segments", "cursor", "values", "started_at", "saved_at")}
    assert Unit.from_body(before, "r") == ranged
    old = {"number": 1, "total": 2, "start": {"order_id": {"S": "o-5"}}, "done": False,
           "scanned": 10, "updated": 7, "raced": 2, "unresolved": 1, "values": {"PENDING": 10},
           "started_at": 1.0, "saved_at": 2.0, "owner": "w", "expires": 3.0}
    loaded = Unit.from_body(old, "r")
    assert (loaded.kind, loaded.segments, loaded.cursor, loaded.entries, loaded.moved,
            loaded.skipped, loaded.unresolved, loaded.owner) == (
        "segment", 2, {"order_id": {"S": "o-5"}}, 10, 7, 2, 1, "w")
    assert Backfilled.of([loaded]) == Backfilled(1, 0, 10, 7, 2, 1)
    for damaged in ({**old, "scanned": -1}, {**segment.to_body(), "kind": "sideways"},
                    {**ranged.to_body(), "rate": None}):
        with pytest.raises(MalformedItem, match="work unit"):
            Unit.from_body(damaged, "r")


class _Indexes(Layouts):
    """An adoption's two indexes as rows in memory: the plain one under ``PLAIN`` keys."""

    def __init__(self, rows: dict[str, list[StoredEntry]]) -> None:
        self.rows = rows

    routing = Routing()
    consistent = True

    def source_keys(self, routing: Routing, value: str) -> list[str]:
        return [PLAIN + value]

    def target_keys(self, routing: Routing, value: str) -> list[str]:
        return routing.policy(value).shard_keys(value)

    def placed(self, layout: Routing, value: str, key: str, item_id: str) -> bool:
        return in_place(layout, value, key, item_id)

    async def page(self, key: str, after: Position | None, limit: int) -> QueryPage:
        return QueryPage(sorted(self.rows.get(key, []), key=lambda e: e.position), None)

    async def locate(self, item_id: str) -> Placement | None:
        raise AssertionError("a copy's parity holds rows against the old index")


@pytest.mark.shardex_virtual
async def test_a_copys_parity_classifies_items_as_a_reshards_does() -> None:
    routing = Routing(overrides={"PENDING": ShardPolicy(4)})
    keys = routing.policy("PENDING").shard_keys("PENDING")
    home = {item: routing.shard_key("PENDING", item) for item in ("ok", "wrong", "resorted")}
    away = next(k for k in keys if k != home["wrong"])
    old = [StoredEntry("PENDING", "s", item) for item in ("ok", "uncopied", "wrong", "resorted")]
    new = [StoredEntry(home["ok"], "s", "ok"), StoredEntry(keys[0], "s", "stale"),
           StoredEntry(away, "s", "wrong"), StoredEntry(home["resorted"], "t", "resorted")]
    rows: dict[str, list[StoredEntry]] = {PLAIN + "PENDING": old}
    for entry in new:
        rows.setdefault(entry.shard_key, []).append(entry)
    report = await adoption_parity(_Indexes(rows), routing, ["PENDING"], truth=None,
                                   read_rate=1e6, settle=0.0, clock=LoopClock())
    assert set(report.examples) == {
        Gap("missing", "PENDING", "uncopied", "PENDING"),
        Gap("extra", "PENDING", "stale", keys[0]),
        Gap("misplaced", "PENDING", "wrong", away),
        Gap("mismatched", "PENDING", "resorted", home["resorted"])}
    assert report.entries == 4


def test_a_reshard_after_a_rolled_back_adoption_says_to_adopt_again() -> None:
    """It said "finish it ('shardex adopt cutover', 'complete')", which both refuse: no
    adoption is under way once it rolled back."""
    with pytest.raises(InvalidRouting, match=r"rolled-back: readers read 'status-index'; "
                                             r"adopt it again \('shardex adopt start'\)"):
        begin_transition(adopted("done", "rollback"), {"PENDING": ShardPolicy(4)})
    with pytest.raises(InvalidRouting, match=r"finish it \('shardex adopt cutover', "
                                             r"'complete'\)"):
        begin_transition(adopted(), {"PENDING": ShardPolicy(4)})


@pytest.mark.shardex_virtual
async def test_an_idle_worker_ends_with_the_last_unit_not_at_its_next_poll() -> None:
    # One worker of a process finished its unit and found the other leased: it looked
    # again a second later, so a run ended up to a poll after its last unit (adopt run
    # on DynamoDB Local: 0.8 s idle after the last update of 5,000 items, 4 segments).
    import asyncio
    import random

    from shardex.clock import LoopClock
    from shardex.migrate.units import Unit
    from shardex.migrate.work import Idle, WorkRecords, work_units
    from shardex.stores.memory import MemoryStore

    store = MemoryStore(seed=5, profile="unlimited")
    clock = LoopClock()
    records = WorkRecords(store, "orders", "r1", clock=clock)
    units = [Unit(n, 1, "PENDING", f"PENDING#{n}", 100.0) for n in (1, 2)]
    assert await records.claim_plan(1, "w", 5.0)
    assert await records.publish(1, units, "w")
    loop = asyncio.get_running_loop()
    began = loop.time()

    async def process(key: str, unit: Unit, revision: int) -> None:
        await asyncio.sleep(5.0 if unit.number == 1 else 0.5)
        await records.checkpoint(key, dataclasses.replace(unit, done=True), revision,
                                 lease=60.0)

    idle, ended = Idle(), []

    async def worker(seed: int) -> None:
        await work_units(lambda: records.units(1), process, records=records, worker="w",
                         lease=60.0, clock=clock, rng=random.Random(seed), poll=1.0,
                         idle=idle)
        ended.append(loop.time() - began)

    await asyncio.gather(worker(1), worker(2))
    assert min(ended) >= 5.0  # the idle worker waited for the long unit
    assert max(ended) < 5.2  # and ended with it (it had ended at 5.5 s)


def test_an_adoption_past_its_backfill_or_without_a_runner_says_nothing_moves() -> None:
    """Cut over (read-new), or with no runner (one stopped by SIGTERM, by hand on
    DynamoDB Local), status said "controls: moving at up to 50 write units a second per
    shard key", with nothing moving."""
    from shardex.commands.adopt import _status_lines

    controls = {"recorded": True, "paused": False, "rate": 50.0, "changed_by": "vm:1:a",
                "summary": "moving at up to 50 write units a second per shard key",
                "budget": {"rate": 50.0, "in_force": 50.0, "slices": [], "holds": [],
                           "waits": []}}
    runner = {"owner": "vm:1:a", "units": [2], "expires_at": "2026-12-05T12:29:36Z"}
    for state, runners, idle in (("read-new", [runner], "nothing moves in read-new"),
                                 ("write-new", [], "no runner runs"),
                                 ("write-new", [runner], None)):
        doc = status_document(adopted(state), [], index="orders", store="s", lease=15.0,
                              now=120.0, max_age=900.0, items=None)
        doc.update(controls=controls, runners=runners)
        (line,) = [line for line in _status_lines(doc) if "controls:" in line]
        assert line == (f"  controls: up to 50 write units a second per shard key; {idle} "
                        "(set by vm:1:a)" if idle else
                        "  controls: moving at up to 50 write units a second per shard key "
                        "(set by vm:1:a)"), (state, line)


def test_with_no_adoption_the_start_suggested_names_what_start_needs() -> None:
    """It suggested 'shardex adopt start --store S --index I --set VALUE=N', which start
    refuses without --from-gsi (or --from-table) and --from-attribute."""
    from shardex.migrate.status import adopt_next_steps

    (step,) = adopt_next_steps(None, store="dynamodb://orders", index="o", backfilled=False,
                               stale=False)
    assert step == ("shardex adopt start --store dynamodb://orders --index o --from-gsi INDEX "
                    "--from-attribute ATTRIBUTE --set VALUE=N")


def test_in_the_retention_window_complete_says_from_when() -> None:
    """While ``complete --retain`` waits out its window, status listed 'complete' (which
    changes nothing before it ends) with no time; now it names it, as its retention line
    does. Past the window, or with none, the step reads as before."""
    retained = adopted("read-new", changed_at=150.0, retire_after=220.0)
    doc = status_document(retained, [], index="orders", store="s", lease=15.0, now=160.0,
                          max_age=900.0, items=None)
    assert doc["next_steps"][0] == ("shardex adopt complete --store s --index orders "
                                    f"(from {doc['retire_after']}, when the retention ends)")
    for routing, now in ((retained, 221.0), (adopted("read-new", changed_at=150.0), 160.0)):
        doc = status_document(routing, [], index="orders", store="s", lease=15.0, now=now,
                              max_age=900.0, items=None)
        assert doc["next_steps"][0] == ("shardex adopt complete --store s --index orders "
                                        "[--retain DURATION] [--drop-old-index]")
