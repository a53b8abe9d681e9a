"""Shard policies, routing decisions, transitions and the routing document."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardex.errors import InvalidInput, InvalidKey, InvalidPolicy, InvalidRouting
from shardex.hashing import h64, jump_hash
from shardex.migrate import states
from shardex.routing import (
    MAX_SHARDS,
    ROUTING_FORMAT,
    Routing,
    ShardPolicy,
    Turns,
    begin_transition,
)

P = ShardPolicy


def pending(shards: int, strategy: str = "hash") -> Routing:
    return Routing(default=P(1), overrides={"PENDING": P(shards, strategy)})  # type: ignore[arg-type]


# -- ShardPolicy -------------------------------------------------------------------------


def test_policy_defaults_to_one_hashed_shard() -> None:
    assert P() == P(shards=1, strategy="hash")
    assert MAX_SHARDS == 4096


@pytest.mark.parametrize("shards", [1, 2, 4095, 4096])
@pytest.mark.parametrize("strategy", ["hash", "random", "round_robin"])
def test_policy_accepts_shards_in_range(shards: int, strategy: str) -> None:
    policy = P(shards=shards, strategy=strategy)  # type: ignore[arg-type]
    assert (policy.shards, policy.strategy) == (shards, strategy)


@pytest.mark.parametrize(("shards", "fragment"), [
    (0, "between 1 and 4096, got 0"),
    (-1, "between 1 and 4096, got -1"),
    (4097, "between 1 and 4096, got 4097"),
    (True, "must be an integer, got True"),
    (False, "must be an integer, got False"),
    (2.0, "must be an integer, got 2.0"),
    ("8", "must be an integer, got '8'"),
    (None, "must be an integer, got None"),
])
def test_policy_refuses_bad_shard_counts(shards: Any, fragment: str) -> None:
    with pytest.raises(InvalidPolicy, match="shards") as caught:
        P(shards=shards)
    assert fragment in str(caught.value)


@pytest.mark.parametrize("strategy", ["modulo", "HASH", "", 7, None])
def test_policy_refuses_unknown_strategies(strategy: Any) -> None:
    with pytest.raises(InvalidPolicy, match="strategy must be one of hash, random, round_robin"):
        P(shards=8, strategy=strategy)


def test_policy_is_immutable() -> None:
    policy = P(8)
    with pytest.raises(AttributeError):
        policy.shards = 2  # type: ignore[misc]


def test_policy_shard_keys() -> None:
    assert P(1).shard_keys("PENDING") == ["PENDING"]
    assert P(3).shard_keys("PENDING") == ["PENDING#0", "PENDING#1", "PENDING#2"]


# -- writes: shard_key ---------------------------------------------------------------------

ITEM_IDS = ["o-1", "o-2", "ORD-0000042", "東京", "😀", "a" * 500, "x"]


@pytest.mark.parametrize("shards", [2, 8, 200, 4096])
def test_hash_strategy_follows_the_hash_contract(shards: int) -> None:
    routing = pending(shards)
    for item_id in ITEM_IDS:
        expected = f"PENDING#{jump_hash(h64(item_id), shards)}"
        assert routing.shard_key("PENDING", item_id) == expected
        # Deterministic: the same item always lands on the same shard key.
        assert routing.shard_key("PENDING", item_id) == expected


def test_hash_strategy_agrees_with_a_published_vector() -> None:
    # tests/vectors/shards.json: item id "a" is on shard 6 of 8 and 379 of 1000.
    assert pending(8).shard_key("PENDING", "a") == "PENDING#6"
    assert pending(1000).shard_key("PENDING", "a") == "PENDING#379"


@pytest.mark.parametrize("strategy", ["hash", "random", "round_robin"])
def test_one_shard_writes_the_plain_value(strategy: str) -> None:
    routing = pending(1, strategy)
    for item_id in ITEM_IDS:
        assert routing.shard_key("PENDING", item_id, rng=random.Random(1)) == "PENDING"


def test_values_without_override_follow_the_default() -> None:
    routing = Routing(default=P(4), overrides={"PENDING": P(8)})
    key = routing.shard_key("SHIPPED", "o-1")
    assert key == f"SHIPPED#{jump_hash(h64('o-1'), 4)}"
    assert pending(8).shard_key("SHIPPED", "o-1") == "SHIPPED"


@pytest.mark.parametrize(("value", "item_id", "fragment"), [
    ("", "o-1", "logical key must not be empty"),
    ("A#B", "o-1", "separator"),
    ("PENDING", "", "item id must not be empty"),
    ("PENDING", "o\x00", "NUL"),
    ("PENDING", b"o-1", "item id must be text"),
])
def test_shard_key_refuses_bad_keys(value: Any, item_id: Any, fragment: str) -> None:
    with pytest.raises(InvalidKey, match=fragment):
        pending(8).shard_key(value, item_id)


def test_random_strategy_stays_in_range_and_spreads_evenly() -> None:
    routing = pending(8, "random")
    rng = random.Random(2014)
    writes = 16_000
    counts = Counter(routing.shard_key("PENDING", f"o-{i}", rng=rng) for i in range(writes))
    assert set(counts) == {f"PENDING#{k}" for k in range(8)}
    # Binomial(16000, 1/8): standard deviation ~42; allow about six of them.
    assert all(abs(n - writes / 8) < 250 for n in counts.values()), counts


def test_random_strategy_is_driven_by_the_given_generator() -> None:
    routing = pending(200, "random")
    first = [routing.shard_key("PENDING", "o-1", rng=random.Random(99)) for _ in range(3)]
    assert len(set(first)) == 1, "a fresh generator with one seed must repeat its draw"

    rng_a, rng_b = random.Random(5), random.Random(5)
    seq_a = [routing.shard_key("PENDING", "o-1", rng=rng_a) for _ in range(50)]
    seq_b = [routing.shard_key("PENDING", "o-1", rng=rng_b) for _ in range(50)]
    assert seq_a == seq_b
    assert len(set(seq_a)) > 10, "the same item id must not stick to one shard"


def test_round_robin_cycles_through_every_shard() -> None:
    routing = pending(8, "round_robin")
    turns = Turns(random.Random(1))
    keys = [routing.shard_key("PENDING", "o-1", turns=turns) for _ in range(80)]
    shards = [int(k.rpartition("#")[2]) for k in keys]
    assert Counter(shards) == dict.fromkeys(range(8), 10)
    # Consecutive writes go to consecutive shards, wrapping around.
    assert all(b == (a + 1) % 8 for a, b in itertools.pairwise(shards))


def test_round_robin_keeps_one_cycle_per_value() -> None:
    routing = Routing(default=P(4, "round_robin"), overrides={"PENDING": P(8, "round_robin")})
    pending_keys, shipped_keys = [], []
    turns = Turns(random.Random(1))
    for _ in range(16):
        pending_keys.append(routing.shard_key("PENDING", "o-1", turns=turns))
        shipped_keys.append(routing.shard_key("SHIPPED", "o-1", turns=turns))
    assert Counter(pending_keys) == {f"PENDING#{k}": 2 for k in range(8)}
    assert Counter(shipped_keys) == {f"SHIPPED#{k}": 4 for k in range(4)}


def test_random_and_round_robin_need_their_state_passed_in() -> None:
    """No fallback to a global generator: the writer owns its randomness and its turns."""
    with pytest.raises(InvalidInput, match="rng="):
        pending(8, "random").shard_key("PENDING", "o-1")
    with pytest.raises(InvalidInput, match="turns="):
        pending(8, "round_robin").shard_key("PENDING", "o-1")
    routing = pending(8, "round_robin")
    assert routing == pending(8, "round_robin")  # a routing holds no turn state


# -- reads: read_keys ----------------------------------------------------------------------


def test_read_keys_cover_every_shard() -> None:
    assert pending(8).read_keys("PENDING") == [f"PENDING#{k}" for k in range(8)]
    assert pending(8).read_keys("SHIPPED") == ["SHIPPED"]
    assert len(pending(4096).read_keys("PENDING")) == 4096


@pytest.mark.parametrize(("old", "new", "expected"), [
    (4, 8, [f"P#{k}" for k in range(8)]),
    (8, 4, [f"P#{k}" for k in range(4)] + [f"P#{k}" for k in range(4, 8)]),
    (1, 4, ["P#0", "P#1", "P#2", "P#3", "P"]),
    (4, 1, ["P", "P#0", "P#1", "P#2", "P#3"]),
    (3, 3, ["P#0", "P#1", "P#2"]),
])
def test_read_keys_during_a_transition_are_the_union_current_first(
    old: int, new: int, expected: list[str]
) -> None:
    routing = begin_transition(Routing(overrides={"P": P(old)}), {"P": P(new)})
    assert routing.in_transition
    keys = routing.read_keys("P")
    assert keys == expected
    assert len(keys) == len(set(keys))
    assert keys[:new] == P(new).shard_keys("P")


def test_read_keys_refuses_a_bad_value() -> None:
    with pytest.raises(InvalidKey, match="separator"):
        pending(8).read_keys("PENDING#1")


def test_is_current_key_follows_the_layout_writes_follow_in_each_state() -> None:
    both = begin_transition(pending(4), {"PENDING": P(2)})
    assert both.state == "read-both"
    # in read-both, writers still follow the layout being left
    assert both.is_current_key("PENDING", "PENDING#3")
    assert both.writing == pending(4)
    new = dataclasses.replace(both, state="write-new", version=both.version + 1)
    assert new.is_current_key("PENDING", "PENDING#1")
    assert not new.is_current_key("PENDING", "PENDING#3")
    assert not new.is_current_key("PENDING", "PENDING")


# -- transitions -----------------------------------------------------------------------------


def _rolled_back(routing: Routing) -> Routing:
    """The layout a transition leaves, stable, one version on (what a finished rollback
    stores)."""
    assert routing.previous is not None
    return Routing(default=routing.previous.default, overrides=routing.previous.overrides,
                   version=routing.version + 1, adoption=routing.adoption)


def test_a_transition_begins_and_finishes() -> None:
    v1 = Routing(default=P(1), overrides={"PENDING": P(8)})
    v2 = begin_transition(v1, {"PENDING": P(16)})
    assert v2.version == 2
    assert v2.in_transition
    assert v2.policy("PENDING") == P(16)
    assert v2.previous == Routing(default=P(1), overrides={"PENDING": P(8)}, version=1)
    assert v1 == Routing(default=P(1), overrides={"PENDING": P(8)}), "begin must not mutate"
    assert not v1.in_transition

    v3 = states.finish(v2)
    assert v3 == Routing(default=P(1), overrides={"PENDING": P(16)}, version=3)
    assert v3.previous is None
    assert v3.read_keys("PENDING") == [f"PENDING#{k}" for k in range(16)]


def test_a_transition_begins_and_rolls_back() -> None:
    v4 = Routing(default=P(2), overrides={"PENDING": P(8)}, version=4)
    v5 = begin_transition(v4, {"PENDING": P(2, "random"), "SHIPPED": P(4)}, default=P(3))
    assert v5.version == 5
    assert v5.default == P(3)
    assert dict(v5.overrides) == {"PENDING": P(2, "random"), "SHIPPED": P(4)}
    v6 = _rolled_back(v5)
    assert v6 == Routing(default=P(2), overrides={"PENDING": P(8)}, version=6)
    assert not v6.in_transition


def test_begin_with_none_drops_an_override() -> None:
    v1 = Routing(default=P(1), overrides={"PENDING": P(8), "SHIPPED": P(2)})
    v2 = begin_transition(v1, {"PENDING": None, "NEVER_SET": None})
    assert dict(v2.overrides) == {"SHIPPED": P(2)}
    assert v2.read_keys("PENDING") == ["PENDING"] + [f"PENDING#{k}" for k in range(8)]


def test_begin_during_a_transition_is_refused() -> None:
    v2 = begin_transition(pending(8), {"PENDING": P(16)})
    with pytest.raises(InvalidRouting, match="already in a transition"):
        begin_transition(v2, {"PENDING": P(32)})


def test_a_routing_has_no_method_that_makes_another_layout() -> None:
    """A layout changes only through the reshard states (``shardex reshard``): a routing
    is a value, and the transitions that a runner stores are made by
    ``shardex.migrate.states``."""
    for name in ("begin", "finish", "rollback"):
        assert not hasattr(Routing, name), name


def test_begin_validates_its_changes() -> None:
    with pytest.raises(InvalidRouting, match="separator"):
        begin_transition(pending(8), {"A#B": P(2)})
    with pytest.raises(InvalidRouting, match="must be a ShardPolicy"):
        begin_transition(pending(8), {"PENDING": 16})  # type: ignore[dict-item]


# -- construction ----------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "fragment"), [
    ("", "must not be empty"),
    ("A#B", "separator"),
    ("\ud800", "unpaired surrogate"),
    ("A\x00", "NUL"),
    ("é" * 513, "1026 bytes"),
    (7, "must be text"),
    (b"PENDING", "must be text"),
])
def test_overrides_with_bad_values_are_refused(value: Any, fragment: str) -> None:
    with pytest.raises(InvalidRouting, match=r"^overrides: ") as caught:
        Routing(overrides={value: P(8)})
    assert fragment in str(caught.value)
    assert isinstance(caught.value.__cause__, InvalidKey)


_VERSION = "version must be an integer from 1 to 10**38 - 1 (a DynamoDB number), got "


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"overrides": {"PENDING": 8}}, "overrides['PENDING'] must be a ShardPolicy"),
    ({"overrides": {"PENDING": {"shards": 8}}}, "overrides['PENDING'] must be a ShardPolicy"),
    ({"overrides": [("PENDING", P(8))]}, "overrides must be a mapping, got list"),
    ({"default": 8}, "default must be a ShardPolicy"),
    ({"default": None}, "default must be a ShardPolicy"),
    ({"version": 0}, _VERSION + "0"),
    ({"version": -3}, _VERSION + "-3"),
    ({"version": True}, _VERSION + "True"),
    ({"version": "3"}, _VERSION + "'3'"),
    ({"version": 2.0}, _VERSION + "2.0"),
])
def test_bad_constructor_arguments_are_refused(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InvalidRouting) as caught:
        Routing(**kwargs)
    assert fragment in str(caught.value)


def test_previous_must_be_older_and_not_itself_a_transition() -> None:
    with pytest.raises(InvalidRouting, match=r"previous.version \(3\) must be below version \(3\)"):
        Routing(version=3, previous=Routing(version=3))
    with pytest.raises(InvalidRouting, match=r"previous.version \(4\) must be below version \(3\)"):
        Routing(version=3, previous=Routing(version=4))
    nested = Routing(version=2, previous=Routing(version=1))
    with pytest.raises(InvalidRouting, match="exactly two layouts"):
        Routing(version=3, previous=nested)


def test_previous_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(InvalidRouting, match="previous"):
        Routing(version=2, previous={"version": 1})  # type: ignore[arg-type]


def test_mutating_the_callers_overrides_does_not_reroute() -> None:
    overrides = {"PENDING": P(8)}
    routing = Routing(overrides=overrides)
    before = routing.shard_key("PENDING", "o-1")
    overrides["PENDING"] = P(2)
    overrides["SHIPPED"] = P(4)
    del overrides["PENDING"]
    assert routing.policy("PENDING") == P(8)
    assert routing.policy("SHIPPED") == P(1)
    assert routing.shard_key("PENDING", "o-1") == before
    assert routing.read_keys("PENDING") == [f"PENDING#{k}" for k in range(8)]
    assert routing.to_dict()["overrides"] == {"PENDING": {"shards": 8, "strategy": "hash"}}


def test_routing_overrides_cannot_be_mutated_through_the_routing() -> None:
    routing = pending(8)
    with pytest.raises(TypeError):
        routing.overrides["PENDING"] = P(2)  # type: ignore[index]
    assert routing.policy("PENDING") == P(8)
    assert hash(routing) == hash(pending(8))


def test_routing_is_immutable() -> None:
    routing = pending(8)
    with pytest.raises(AttributeError):
        routing.version = 2  # type: ignore[misc]


# -- the routing document ----------------------------------------------------------------------


def test_document_format_is_the_published_one() -> None:
    routing = Routing(default=P(1), overrides={"PENDING": P(8), "CANCELLED": P(2, "random")})
    assert routing.to_dict() == {
        "format": "shardex.routing/1",
        "version": 1,
        "default": {"shards": 1, "strategy": "hash"},
        "overrides": {
            "CANCELLED": {"shards": 2, "strategy": "random"},
            "PENDING": {"shards": 8, "strategy": "hash"},
        },
        "previous": None,
    }
    assert routing.to_json() == (
        '{"default":{"shards":1,"strategy":"hash"},"format":"shardex.routing/1",'
        '"overrides":{"CANCELLED":{"shards":2,"strategy":"random"},'
        '"PENDING":{"shards":8,"strategy":"hash"}},"previous":null,"version":1}'
    )
    moving = begin_transition(routing, {"PENDING": P(16)})
    assert moving.to_dict()["previous"] == {
        "version": 1,
        "default": {"shards": 1, "strategy": "hash"},
        "overrides": {
            "CANCELLED": {"shards": 2, "strategy": "random"},
            "PENDING": {"shards": 8, "strategy": "hash"},
        },
    }
    assert moving.to_dict()["version"] == 2


def test_document_strategy_defaults_to_hash_and_overrides_are_optional() -> None:
    doc = {"format": ROUTING_FORMAT, "version": 7, "default": {"shards": 4}}
    assert Routing.from_dict(doc) == Routing(default=P(4), version=7)
    assert Routing.from_json(json.dumps(doc).encode()) == Routing(default=P(4), version=7)


policies = st.builds(
    ShardPolicy,
    shards=st.integers(min_value=1, max_value=MAX_SHARDS),
    strategy=st.sampled_from(["hash", "random", "round_robin"]),
)
values = st.text(
    alphabet=st.characters(exclude_characters="#\x00", codec="utf-8"),
    min_size=1,
    max_size=20,
)
overrides_maps = st.dictionaries(values, policies, max_size=6)


@st.composite
def routings(draw: st.DrawFn) -> Routing:
    version = draw(st.integers(min_value=1, max_value=2**40))
    previous = None
    if version > 1 and draw(st.booleans()):
        previous = Routing(
            default=draw(policies),
            overrides=draw(overrides_maps),
            version=draw(st.integers(min_value=1, max_value=version - 1)),
        )
    return Routing(default=draw(policies), overrides=draw(overrides_maps), version=version,
                   previous=previous)


@settings(deadline=None)  # a busy CI machine can take 0.3 s over one case
@given(routings())
def test_document_round_trip(routing: Routing) -> None:
    text = routing.to_json()
    again = Routing.from_json(text)
    assert again == routing
    assert again.previous == routing.previous
    assert again.to_json() == text
    assert Routing.from_dict(routing.to_dict()) == routing
    # to_dict holds only JSON types: it survives a trip through the json module unchanged.
    assert json.loads(json.dumps(routing.to_dict())) == routing.to_dict()
    for value in routing.overrides:
        assert again.read_keys(value) == routing.read_keys(value)


@given(routings(), st.dictionaries(values, st.none() | policies, max_size=4), st.data())
def test_transitions_read_the_union_and_bump_versions(
    routing: Routing, changes: dict[str, ShardPolicy | None], data: st.DataObject
) -> None:
    if routing.in_transition:
        routing = states.finish(routing)
    moving = begin_transition(routing, changes)
    assert moving.version == routing.version + 1
    assert Routing.from_json(moving.to_json()) == moving
    touched = list(changes) + list(routing.overrides) + ["UNTOUCHED"]
    value = data.draw(st.sampled_from(touched))
    keys = moving.read_keys(value)
    current = moving.policy(value).shard_keys(value)
    old = routing.policy(value).shard_keys(value)
    assert keys[: len(current)] == current
    assert set(keys) == set(current) | set(old)
    assert len(keys) == len(set(keys))
    assert states.finish(moving).version == _rolled_back(moving).version == routing.version + 2
    assert states.finish(moving).read_keys(value) == current
    assert _rolled_back(moving).read_keys(value) == old


# -- malformed documents -----------------------------------------------------------------------


def base_doc() -> dict[str, Any]:
    return {
        "format": ROUTING_FORMAT,
        "version": 3,
        "default": {"shards": 1, "strategy": "hash"},
        "overrides": {"PENDING": {"shards": 8, "strategy": "hash"}},
        "previous": {
            "version": 2,
            "default": {"shards": 1, "strategy": "hash"},
            "overrides": {"PENDING": {"shards": 4, "strategy": "hash"}},
        },
    }


def test_base_document_is_valid() -> None:
    routing = Routing.from_dict(base_doc())
    assert routing.version == 3
    assert routing.previous == Routing(overrides={"PENDING": P(4)}, version=2)
    assert routing.read_keys("PENDING") == [f"PENDING#{k}" for k in range(8)]


def edit(change: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    doc = copy.deepcopy(base_doc())
    change(doc)
    return doc


BROKEN: list[tuple[str, Any, str]] = [
    ("top-level list", [base_doc()], "routing: expected an object, got list"),
    ("top-level string", "routing", "routing: expected an object, got str"),
    ("top-level null", None, "routing: expected an object, got NoneType"),
    ("wrong format", edit(lambda d: d.update(format="shardex.routing/2")),
     "routing.format: expected 'shardex.routing/1', got 'shardex.routing/2'"),
    ("format not text", edit(lambda d: d.update(format=1)), "routing.format"),
    ("missing format", edit(lambda d: d.pop("format")), "missing field(s) 'format'"),
    ("missing version", edit(lambda d: d.pop("version")), "routing: missing field(s) 'version'"),
    ("missing default", edit(lambda d: d.pop("default")), "routing: missing field(s) 'default'"),
    ("unknown top-level field", edit(lambda d: d.update(color="red")),
     "routing: unknown field(s) 'color'"),
    ("unknown field in default", edit(lambda d: d["default"].update(weight=2)),
     "routing.default: unknown field(s) 'weight'"),
    ("unknown field in override", edit(lambda d: d["overrides"]["PENDING"].update(ttl=5)),
     "routing.overrides['PENDING']: unknown field(s) 'ttl'"),
    ("unknown field in previous", edit(lambda d: d["previous"].update(format=ROUTING_FORMAT)),
     "routing.previous: unknown field(s) 'format'"),
    ("unknown field in previous policy",
     edit(lambda d: d["previous"]["default"].update(x=1)),
     "routing.previous.default: unknown field(s) 'x'"),
    ("missing shards in default", edit(lambda d: d["default"].pop("shards")),
     "routing.default: missing field(s) 'shards'"),
    ("override shards 0", edit(lambda d: d["overrides"]["PENDING"].update(shards=0)),
     "routing.overrides['PENDING']: shards must be between 1 and 4096, got 0"),
    ("override shards 4097", edit(lambda d: d["overrides"]["PENDING"].update(shards=4097)),
     "routing.overrides['PENDING']: shards must be between 1 and 4096, got 4097"),
    ("override shards float", edit(lambda d: d["overrides"]["PENDING"].update(shards=8.0)),
     "routing.overrides['PENDING']: shards must be an integer, got 8.0"),
    ("override shards bool", edit(lambda d: d["overrides"]["PENDING"].update(shards=True)),
     "routing.overrides['PENDING']: shards must be an integer, got True"),
    ("previous override shards 0",
     edit(lambda d: d["previous"]["overrides"]["PENDING"].update(shards=0)),
     "routing.previous.overrides['PENDING']: shards must be between 1 and 4096"),
    ("version as text", edit(lambda d: d.update(version="3")),
     "routing.version: expected an integer from 1 to 10**38 - 1, got '3'"),
    ("version 0", edit(lambda d: d.update(version=0)),
     "routing.version: expected an integer from 1 to 10**38 - 1, got 0"),
    ("version bool", edit(lambda d: d.update(version=True)),
     "routing.version: expected an integer from 1 to 10**38 - 1, got True"),
    ("version float", edit(lambda d: d.update(version=3.0)),
     "routing.version: expected an integer from 1 to 10**38 - 1, got 3.0"),
    ("previous version as text", edit(lambda d: d["previous"].update(version="2")),
     "routing.previous.version: expected an integer from 1 to 10**38 - 1, got '2'"),
    ("overrides a list", edit(lambda d: d.update(overrides=[["PENDING", {"shards": 8}]])),
     "routing.overrides: expected an object, got list"),
    ("overrides null", edit(lambda d: d.update(overrides=None)),
     "routing.overrides: expected an object, got NoneType"),
    ("override not an object", edit(lambda d: d["overrides"].update(PENDING=8)),
     "routing.overrides['PENDING']: expected an object, got int"),
    ("default not an object", edit(lambda d: d.update(default=8)),
     "routing.default: expected an object, got int"),
    ("strategy 7", edit(lambda d: d["default"].update(strategy=7)),
     "routing.default: strategy must be one of hash, random, round_robin, got 7"),
    ("unknown strategy", edit(lambda d: d["overrides"]["PENDING"].update(strategy="modulo")),
     "routing.overrides['PENDING']: strategy must be one of"),
    ("override value with separator",
     edit(lambda d: d["overrides"].update({"A#B": {"shards": 2}})),
     "routing.overrides: logical key 'A#B' contains the separator"),
    ("override value empty", edit(lambda d: d["overrides"].update({"": {"shards": 2}})),
     "routing.overrides: logical key must not be empty"),
    ("previous not an object", edit(lambda d: d.update(previous=[])),
     "routing.previous: expected an object, got list"),
    ("previous missing default", edit(lambda d: d["previous"].pop("default")),
     "routing.previous: missing field(s) 'default'"),
    ("previous version equal", edit(lambda d: d["previous"].update(version=3)),
     "previous.version (3) must be below version (3)"),
    ("previous version newer", edit(lambda d: d["previous"].update(version=9)),
     "previous.version (9) must be below version (3)"),
    ("nested previous", edit(lambda d: d["previous"].update(previous=base_doc()["previous"])),
     "routing.previous: unknown field(s) 'previous'"),
]


@pytest.mark.parametrize(("doc", "fragment"), [(doc, frag) for _, doc, frag in BROKEN],
                         ids=[name for name, _, _ in BROKEN])
def test_malformed_documents_are_refused_naming_the_field(doc: Any, fragment: str) -> None:
    with pytest.raises(InvalidRouting) as caught:
        Routing.from_dict(doc)
    assert fragment in str(caught.value)
    with pytest.raises(InvalidRouting) as caught_json:
        Routing.from_json(json.dumps(doc))
    assert str(caught_json.value) == str(caught.value)


@pytest.mark.parametrize("text", ["", "{", "not json", '{"format": }', b"\xff\xfe", "[1,]"])
def test_text_that_is_not_json_is_refused(text: str | bytes) -> None:
    with pytest.raises(InvalidRouting, match="routing document is not valid JSON"):
        Routing.from_json(text)


@pytest.mark.parametrize("text", ["[]", "null", "42", '"routing"', "true"])
def test_json_that_is_not_an_object_is_refused(text: str) -> None:
    with pytest.raises(InvalidRouting, match=r"^routing: expected an object"):
        Routing.from_json(text)


def test_invalid_routing_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="routing"):
        Routing.from_json("{}")


def test_a_routing_pickles_as_it_is_even_mid_transition() -> None:
    import pickle

    old = Routing(overrides={"PENDING": ShardPolicy(shards=2)})
    new = Routing(overrides={"PENDING": ShardPolicy(shards=8, strategy="random")}, version=2,
                  previous=old, state="read-both")
    again = pickle.loads(pickle.dumps(new))
    assert again == new
    assert again.previous == old
    assert again.state == "read-both"
    assert again.read_keys("PENDING") == new.read_keys("PENDING")


@given(st.integers(1, 40), st.sampled_from(["P", "PENDING", "ü"]),
       st.one_of(st.integers(0, 60).map(str), st.sampled_from(["", "00", "01", "٣", "-1",
                                                                "1 ", "x"])),
       st.sampled_from(["P", "PENDING", "ü", "Q"]), st.booleans())
def test_has_key_is_membership_of_shard_keys(shards: int, value: str, suffix: str,
                                             key_value: str, bare: bool) -> None:
    """``has_key`` answers what ``in shard_keys(value)`` does, without the list (a write's
    check, where a layout may have thousands of keys)."""
    policy = ShardPolicy(shards)
    key = key_value if bare else f"{key_value}#{suffix}"
    assert policy.has_key(value, key) == (key in policy.shard_keys(value))
