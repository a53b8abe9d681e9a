"""The adoption in the routing document, its pure decisions, and the status document."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from shardex import Routing, ShardPolicy
from shardex.adopted import follow
from shardex.adoption import Adoption, cutover_refusal, rollback_refusal
from shardex.errors import InvalidInput, InvalidRouting
from shardex.migrate import states
from shardex.migrate.status import adopt_status_document as status_document
from shardex.migrate.units import Segment
from shardex.routing import begin_transition
from shardex.stores.dynamodb import DynamoDBStore
from shardex.transition import Gap, Parity

ADOPTION = Adoption(id="a1", kind="gsi", source="status-index", attribute="status",
                    state="dual-write", started_at=100.0, changed_at=100.0, margin=5.0,
                    values=("PENDING",))


def adopted(**changes: Any) -> Routing:
    return Routing(overrides={"PENDING": ShardPolicy(16)}, version=3,
                   adoption=dataclasses.replace(ADOPTION, **changes))


def test_the_adoption_round_trips_through_the_routing_document() -> None:
    routing = adopted(parity=Parity(checked_at=120.0, entries=10, missing=1, examples=(
        Gap("missing", "PENDING", "o-1", "PENDING"),)), retire_after=200.0, drop_source=True)
    assert Routing.from_json(routing.to_json()) == routing
    assert "adoption" not in Routing().to_dict()


@pytest.mark.parametrize(("field", "bad"), [
    ("state", "moving"), ("kind", "view"), ("source", ""), ("margin", -1), ("values", [1]),
    ("dropped", "yes"), ("id", "a b")])
def test_a_damaged_adoption_names_its_field(field: str, bad: Any) -> None:
    doc = adopted().to_dict()
    doc["adoption"][field] = bad
    with pytest.raises(InvalidRouting, match="adoption"):
        Routing.from_dict(doc)


def test_an_adoption_under_way_refuses_a_reshard_and_a_complete_one_is_kept() -> None:
    with pytest.raises(InvalidRouting, match="adoption a1 is dual-write"):
        begin_transition(adopted(), {"PENDING": ShardPolicy(32)})
    complete = adopted(state="complete")
    resharding = begin_transition(complete, {"PENDING": ShardPolicy(32)})
    assert resharding.adoption == complete.adoption
    assert states.finish(resharding).adoption == complete.adoption


def test_readers_changing_index_stamp_the_change() -> None:
    moved = ADOPTION.to("read-new", 150.0)
    assert moved.changed_at == 150.0
    assert not moved.reads_source
    retained = dataclasses.replace(moved, retain=60.0).to("read-new", 170.0)
    assert retained.changed_at == 150.0
    back = moved.to("rolled-back", 180.0)
    assert back.changed_at == 180.0
    assert back.reads_source
    assert not back.active


def test_cutover_needs_the_backfill_and_a_clean_fresh_parity() -> None:
    clean = Parity(checked_at=100.0, entries=5)
    ready = dataclasses.replace(ADOPTION, parity=clean)
    assert cutover_refusal(ready, now=110.0, max_age=60.0, backfilled=True) is None
    cases = [
        (None, True, "no adoption"),
        (ADOPTION, False, "backfill has not finished"),
        (ADOPTION, True, "no parity report"),
        (dataclasses.replace(ADOPTION, parity=dataclasses.replace(clean, extra=2)), True,
         "2 extra"),
        (dataclasses.replace(ready, state="read-new"), True, "already read the new"),
    ]
    for adoption, backfilled, why in cases:
        refusal = cutover_refusal(adoption, now=110.0, max_age=60.0, backfilled=backfilled)
        assert refusal is not None
        assert why in refusal.why
    stale = cutover_refusal(ready, now=500.0, max_age=60.0, backfilled=True)
    assert stale is not None
    assert "older than --max-age" in stale.why


def test_rollback_is_possible_until_complete() -> None:
    assert rollback_refusal(ADOPTION) is None
    assert rollback_refusal(ADOPTION.to("read-new", 1.0)) is None
    for state in ("complete", "rolled-back"):
        refusal = rollback_refusal(dataclasses.replace(ADOPTION, state=state))
        assert refusal is not None
    assert rollback_refusal(None) is not None


def _segment(number: int, scanned: int, updated: int, done: bool,
             values: dict[str, int]) -> Segment:
    return Segment(number, 2, scanned=scanned, updated=updated, done=done, values=values,
                   started_at=100.0, saved_at=110.0)


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
    assert progress["eta_s"] == 10.0
    assert doc["values"]["PENDING"] == {"shards": 16, "strategy": "hash", "items": 450}
    assert doc["values"]["SHIPPED"]["shards"] == 1
    assert doc["next_steps"][0].startswith("shardex adopt run --store dynamodb://orders")
    done = [dataclasses.replace(s, done=True) for s in segments]
    clean = adopted(parity=Parity(checked_at=119.0, entries=500))
    doc = status_document(clean, done, index="orders", store="s", lease=15.0, now=120.0,
                          max_age=900.0, items=1000)
    assert doc["progress"]["items_remaining"] == 0
    assert doc["next_steps"][0].startswith("shardex adopt cutover")
    assert status_document(Routing(), [], index="orders", store="s", lease=15.0, now=0.0,
                           max_age=1.0, items=0)["state"] == "none"


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
