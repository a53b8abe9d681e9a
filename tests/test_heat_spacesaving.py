"""Space-Saving: the error bounds hold on any stream, and heavy keys are always kept."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardex.counters.spacesaving import SpaceSaving
from shardex.errors import InvalidInput

KEYS = st.sampled_from([f"k{i}" for i in range(30)])
STREAMS = st.lists(st.tuples(KEYS, st.integers(min_value=0, max_value=50)), max_size=400)


def check_bounds(summary: SpaceSaving, truth: Counter[str]) -> None:
    total = sum(truth.values())
    assert summary.total == total
    threshold = total / summary.counters
    counted = {c.key: c for c in summary.top()}
    assert len(counted) <= summary.counters
    if counted:
        assert sum(c.count for c in counted.values()) == total  # counts sum to N
    for key, c in counted.items():
        assert c.count - c.error <= truth[key] <= c.count, key
        assert 0 <= c.error <= threshold
    for key, true in truth.items():
        if true > threshold:
            assert key in counted, (key, true, threshold)
    for c in summary.guaranteed():
        assert truth[c.key] > threshold


@settings(max_examples=300, deadline=None)
@given(stream=STREAMS, m=st.integers(min_value=1, max_value=12))
def test_weighted_bounds_hold_on_any_stream(stream: list[tuple[str, int]], m: int) -> None:
    summary = SpaceSaving(m)
    truth: Counter[str] = Counter()
    for key, weight in stream:
        summary.add(key, weight)
        truth[key] += weight
    check_bounds(summary, truth)


@settings(max_examples=200, deadline=None)
@given(stream=st.lists(KEYS, max_size=600), m=st.integers(min_value=1, max_value=12))
def test_batched_unit_updates_keep_the_bounds(stream: list[str], m: int) -> None:
    summary = SpaceSaving(m)
    summary.update(stream)
    check_bounds(summary, Counter(stream))


@settings(max_examples=100, deadline=None)
@given(stream=st.lists(KEYS, max_size=300), m=st.integers(min_value=1, max_value=8))
def test_unit_stream_matches_the_classic_algorithm(stream: list[str], m: int) -> None:
    """With weight 1 the heap gives the very counts of the textbook list version."""
    summary = SpaceSaving(m)
    classic: dict[str, list[int]] = {}
    for key in stream:
        summary.add(key)
        if key in classic:
            classic[key][0] += 1
        elif len(classic) < m:
            classic[key] = [1, 0]
        else:
            low = min(c[0] for c in classic.values())
            # any counter holding the minimum may be replaced: follow the summary's choice
            victim = next(k for k in classic if k not in summary)
            assert classic[victim][0] == low
            del classic[victim]
            classic[key] = [low + 1, low]
    assert sorted((c.key, c.count, c.error) for c in summary.top()) == \
        sorted((k, float(v[0]), float(v[1])) for k, v in classic.items())


def test_a_key_above_n_over_m_survives_a_flood_of_new_keys() -> None:
    summary = SpaceSaving(10)
    summary.update(["hot"] * 200)
    summary.update(f"cold-{i}" for i in range(1000))
    hot = summary.get("hot")
    assert hot is not None
    assert hot.lower <= 200 <= hot.count
    assert summary.top(1)[0].key == "hot"
    assert [c.key for c in summary.guaranteed()] == ["hot"]


def test_add_returns_the_evicted_key() -> None:
    summary = SpaceSaving(2)
    assert summary.add("a", 5) is None
    assert summary.add("b", 1) is None
    assert summary.full
    assert summary.add("c", 1) == "b"
    assert "b" not in summary
    c = summary.get("c")
    assert c is not None
    assert (c.count, c.error) == (2.0, 1.0)


@pytest.mark.parametrize("weight", [-1.0, float("nan"), float("inf")])
def test_bad_weights_are_refused(weight: float) -> None:
    with pytest.raises(InvalidInput, match="weights"):
        SpaceSaving(3).add("a", weight)


@pytest.mark.parametrize("m", [0, -1, True, 2.5])
def test_bad_counter_counts_are_refused(m: object) -> None:
    with pytest.raises(InvalidInput, match="counter"):
        SpaceSaving(m)  # type: ignore[arg-type]
