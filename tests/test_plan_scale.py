"""The planner's placements scale with the keys: each shard key is placed once per table
size, and growing one value's N sums again only its partitions, to the same bits."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import shardex.plan.draws as draws
from shardex.plan import busiest_partition, plan_shards
from shardex.plan.partitions import TRIALS, Placements, placed
from shardex.sim.partitions import slot_of

# loads that tie, that are zero, and that add with rounding
LOADS = st.sampled_from([0.0, -0.0, 1e-9, 50.0, 100.0, 100.0, 333.3333333333333, 625.0])
STEPS = st.lists(st.dictionaries(st.sampled_from([f"K{i}" for i in range(12)]), LOADS,
                                 min_size=1), min_size=1, max_size=6)


@given(steps=STEPS, partitions=st.integers(1, 9), spread=st.sampled_from([0.0, 0.1, 40.0]),
       trials=st.integers(1, 12), quantile=st.sampled_from([0.5, 0.99, 1.0]))
def test_placements_answer_as_a_sum_from_scratch_does(
        steps: list[dict[str, float]], partitions: int, spread: float, trials: int,
        quantile: float) -> None:
    """As the loads change (keys come, go, change load), each answer is the one a fresh
    ``busiest_partition`` gives, every field to the bit."""
    placements = Placements(partitions, spread=spread, namespace="t", trials=trials,
                            quantile=quantile)
    for loads in steps:
        again = placements.busiest(loads)
        fresh = busiest_partition(loads, partitions, spread=spread, namespace="t",
                                  trials=trials, quantile=quantile)
        assert repr(again) == repr(fresh)


def test_a_key_is_placed_as_the_simulator_places_it() -> None:
    """The kept slots are ``slot_of`` over the index names, up to ``MOST`` partitions."""
    for partitions in (1, 3, 1500, draws.MOST, draws.MOST + 7):
        found = draws.slots("orders", "K\u00e9#3", partitions, 5)
        expected = [slot_of(draws.namespace_of("orders", t), "K\u00e9#3",
                            min(partitions, draws.MOST)) for t in range(5)]
        assert list(found[:5]) == expected
        assert placed("orders", "K\u00e9#3", partitions) == expected[0]


@given(key=st.text(min_size=1, max_size=6), sizes=st.lists(
    st.integers(1, draws.MOST + 9), min_size=1, max_size=4), first=st.integers(1, 6),
    then=st.integers(1, 12))
def test_a_key_hashed_once_is_placed_on_every_table_size_as_the_simulator_places_it(
        key: str, sizes: list[int], first: int, then: int) -> None:
    """A key's jumps, hashed once (for ``first`` placements, then grown to ``then``), place
    it on any number of partitions as ``slot_of`` does."""
    kept: dict[Any, Any] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(draws, "_SLOTS", {})
        patch.setattr(draws, "_JUMPS", kept)
        for partitions in sizes:
            for trials in (first, then):
                found = draws.slots("t", key, partitions, trials)
                assert list(found[:trials]) == [
                    slot_of(draws.namespace_of("t", t), key, min(partitions, draws.MOST))
                    for t in range(trials)]
    assert list(kept) == [("t", key)]


def test_a_plan_that_tries_many_table_sizes_hashes_each_shard_key_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Pre-warming advice tries table after table, each placing every shard key: each key
    was hashed again for each (482 shard keys on 6 table sizes here; a plan of 4,800 on
    warm_write=500,000 spent 17 s of its 31 s so)."""
    jumps: dict[Any, Any] = {}
    kept: dict[Any, Any] = {}
    monkeypatch.setattr(draws, "_JUMPS", jumps)
    monkeypatch.setattr(draws, "_SLOTS", kept)
    plan = plan_shards({"A": 20_000.0})
    assert plan.verdict.setting is not None
    sizes = {buckets for _, _, buckets in kept}
    assert len(sizes) >= 5
    assert len(jumps) == len({(namespace, key) for namespace, key, _ in kept})


@pytest.mark.parametrize("values", [40, 160])
def test_a_plan_places_each_shard_key_a_few_times(monkeypatch: pytest.MonkeyPatch,
                                                  values: int) -> None:
    """A plan of many hot keys (each needing several shards, on a table too small for
    them, so the planner tries larger ones) places each shard key on each table size it
    tries once, and sums every placement from scratch once per table size: work linear
    in the keys, not in keys times the steps of N it tries."""
    kept: dict[Any, Any] = {}
    monkeypatch.setattr(draws, "_SLOTS", kept)
    built: list[int] = []
    build = draws.Draws._build

    def counted(self: draws.Draws, loads: Any) -> None:
        built.append(len(loads))
        build(self, loads)

    monkeypatch.setattr(draws.Draws, "_build", counted)
    plan = plan_shards({f"K{i}": 5000.0 for i in range(values)}, amplification=1.0,
                       item_writes=0.0)
    shard_keys = sum(p.shards for p in plan.values.values())
    assert shard_keys == 8 * values
    placements = sum(len(slots) for slots in kept.values())
    # on the table as given (all placements) and on the larger one tried (half of them)
    assert placements <= 2 * TRIALS * shard_keys
    assert len(built) <= 3


@pytest.mark.parametrize("item_writes", [1e8, 1e9])
def test_a_table_past_the_modelled_partitions_gets_no_pre_warmed_size(
        item_writes: float) -> None:
    """The recommendation tried a table of the partitions the load needs (3,000,015 at
    1e9 item writes a second), drawing placements over millions of partitions: 47-54 s
    for one plan. Past MAX_PARTITIONS it says so instead, as the profile refuses."""
    plan = plan_shards({"A": 5000.0}, item_writes=item_writes)
    assert not plan.verdict.keeps_up
    assert plan.verdict.setting is None
    assert plan.verdict.reasons[-1] == (
        "a table that takes it has more than 100,000 partitions, past what the planner "
        "models: no pre-warmed size is proposed")


def test_a_table_within_the_modelled_partitions_gets_its_pre_warmed_size() -> None:
    plan = plan_shards({"A": 5000.0}, item_writes=1e7)
    # and the read limit (12,000) for its 1e7 locates a second, with the headroom
    assert plan.verdict.setting == {"warm_write": 30_015_000.0, "warm_read": 15_000_000.0}
