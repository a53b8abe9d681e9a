"""Numbers and types at the edges of the public API: each refused with InvalidInput naming
the field, never a bare TypeError, ValueError or OverflowError (not even while the error
message is written: Python will not print an int of more than 4,300 digits)."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from typing import Any

import pytest

import shardex
from shardex import AdaptiveRate, Budget, HedgePolicy, InvalidInput, RetryPolicy, Throttled
from shardex.errors import brief
from shardex.keys import encode_shard_key, parse_shard_key
from shardex.sim.clock import run_virtual
from shardex.sim.latency import LatencyModel
from shardex.sim.profiles import profile
from shardex.stores.memory import MemoryStore

HUGE = 10**5000  # too long for repr()
BIG = 10**400  # too large for a float


@pytest.mark.parametrize("value", [
    HUGE, -HUGE, BIG, 10**38 + 1, {HUGE}, {1, BIG}, [HUGE], {"deep": HUGE},
], ids=["huge", "-huge", "big", "39 digits", "{huge}", "{1, big}", "[huge]", "{deep: huge}"])
def test_a_number_past_38_digits_in_attrs_is_refused_naming_the_attribute(value: Any) -> None:
    async def body() -> None:
        async with shardex.ShardedIndex(MemoryStore(seed=1), "ix") as index:
            with pytest.raises(InvalidInput, match=r"attrs\['n'\].*38 significant digits"):
                await index.put("P", "o-1", attrs={"n": value})

    run_virtual(body())


@pytest.mark.parametrize(("value", "shown"), [
    (HUGE, "an int of 5,001 digits"), (-BIG, "an int of 401 digits"),
    (10**47, repr(10**47)), ("x" * 500, "'" + "x" * 76 + "..."), ([HUGE], "a list"),
], ids=["huge", "-big", "48 digits", "long text", "[huge]"])
def test_brief_describes_any_value_in_a_bounded_text(value: Any, shown: str) -> None:
    assert brief(value) == shown


@pytest.mark.parametrize(("build", "field"), [
    (lambda: Budget(rate=BIG), "Budget.rate"),
    (lambda: Budget(rate=1.0, burst=BIG), "Budget.burst"),
    (lambda: Budget(rate=1.0, max_wait=HUGE), "Budget.max_wait"),
    (lambda: AdaptiveRate(floor=BIG), "AdaptiveRate.floor"),
    (lambda: AdaptiveRate(ceiling=BIG), "AdaptiveRate.ceiling"),
    (lambda: HedgePolicy(budget=BIG), "HedgePolicy.budget"),
    (lambda: HedgePolicy(spacing=HUGE), "HedgePolicy.spacing"),
    (lambda: MemoryStore(latency_median_ms=BIG), "latency_median_ms"),
    (lambda: MemoryStore(throttle_rate=HUGE), "throttle_rate"),
    (lambda: MemoryStore(seed=HUGE), "seed"),
    (lambda: MemoryStore(max_page_bytes=HUGE), "max_page_bytes"),
    (lambda: shardex.ShardedIndex(MemoryStore(seed=1), "ix", meter=True).heat(ceiling=BIG),
     "ceiling"),
    (lambda: profile("dynamodb-on-demand", warm_write=BIG), "warm_write"),
    (lambda: profile("dynamodb-on-demand", quota_write=BIG), "quota_write"),
    (lambda: LatencyModel(median_ms=BIG), "median_ms"),
])
def test_an_int_too_large_for_a_float_is_refused_naming_the_field(
        build: Callable[[], Any], field: str) -> None:
    with pytest.raises(InvalidInput, match=rf"{field}.*an int of [\d,]+ digits"):
        build()


def test_a_seed_or_a_page_size_may_be_any_int_a_uri_can_spell() -> None:
    store = MemoryStore(seed=BIG, max_page_bytes=BIG)
    assert f"seed={BIG}" in store.uri
    assert f"max_page_bytes={BIG}" in store.uri


@pytest.mark.parametrize("bad", [
    {"attempts": "3"}, {"attempts": None}, {"attempts": 2.5}, {"attempts": True},
    {"attempts": 0}, {"base": "1"}, {"base": math.nan}, {"base": BIG}, {"base": False},
    {"cap": "1"}, {"cap": math.inf}, {"cap": math.nan}, {"deadline": "1"},
    {"deadline": math.nan}, {"deadline": math.inf}, {"deadline": True}, {"deadline": BIG},
    {"retry_on": "x"}, {"retry_on": (1,)}, {"retry_on": [Throttled]}, {"retry_on": Throttled},
    {"retry_on": (Throttled, int)},
])
def test_a_bad_retry_policy_is_refused_naming_the_field(bad: dict[str, Any]) -> None:
    (field,) = bad
    with pytest.raises(InvalidInput, match=f"RetryPolicy.{field}"):
        RetryPolicy(**bad)


def test_a_retry_policy_may_retry_nothing_or_any_exception() -> None:
    assert RetryPolicy(retry_on=()).decide(0, 0.0, Throttled("t"), random.Random(1)) is None
    assert RetryPolicy(retry_on=(Exception,)).decide(0, 0.0, KeyError(), random.Random(1))


def test_backoff_stays_at_the_cap_however_many_the_tries() -> None:
    policy = RetryPolicy(attempts=10**9, deadline=None)
    rng = random.Random(1)
    assert all(0.0 <= policy.backoff(k, rng) <= policy.cap for k in (1023, 1024, 10**6))


def test_two_thousand_throttled_tries_end_in_throttled() -> None:
    async def body() -> None:
        store = MemoryStore(seed=1, throttle_rate=1.0)
        with pytest.raises(Throttled):
            async with shardex.ShardedIndex(
                    store, "ix", retry=RetryPolicy(attempts=2000, deadline=None)):
                pass

    run_virtual(body())


@pytest.mark.parametrize("bad", [
    {"window": 10**30}, {"window": 65_537}, {"delay": BIG}, {"delay": 3600.5},
])
def test_a_hedge_policy_past_its_bounds_is_refused_naming_the_field(bad: dict[str, Any]) -> None:
    (field,) = bad
    with pytest.raises(InvalidInput, match=f"HedgePolicy.{field}"):
        HedgePolicy(**bad)


def test_a_hedge_policy_at_its_bounds_is_taken() -> None:
    assert HedgePolicy(window=65_536, delay=3600).window == 65_536


@pytest.mark.parametrize(("key", "fault"), [
    ("P#" + "9" * 5000, "not a shard number"), ("\ud800#1", "not valid text"),
    ("\ud800", "not valid text"), ("#placement#o-1", "reserved"), ("P#01", "not a shard number"),
    (HUGE, "non-empty text, got an int of 5,001 digits"),
], ids=lambda arg: brief(arg, 20))
def test_parse_refuses_what_is_not_a_shard_key(key: str, fault: str) -> None:
    with pytest.raises(shardex.InvalidKey, match=fault):
        parse_shard_key(key)


@pytest.mark.parametrize("args", [
    ("P#", 1, 2), ("P#", 0, 1), ("", 0, 2), ("P", "1", 2), ("P", 1.5, 4), ("P", True, 2),
    ("P", 1, "2"), ("P", 2, 2), ("P", -1, 2), (7, 0, 2), (HUGE, 0, 2), ("P", HUGE, 2),
], ids=lambda arg: brief(arg, 20))
def test_encode_refuses_what_makes_no_shard_key(args: tuple[Any, Any, Any]) -> None:
    with pytest.raises(shardex.InvalidKey):
        encode_shard_key(*args)


def test_encode_and_parse_round_trip() -> None:
    assert parse_shard_key(encode_shard_key("P", 3, 4)) == ("P", 3)
    assert parse_shard_key(encode_shard_key("é", 0, 1)) == ("é", None)


@pytest.mark.parametrize("top", ["3", None, 2.5, True, 0, -1])
def test_heat_refuses_a_top_that_is_not_a_count(top: Any) -> None:
    index = shardex.ShardedIndex(MemoryStore(seed=1), "ix", meter=True)
    with pytest.raises(InvalidInput, match=f"top must be an integer >= 1, got {top!r}"):
        index.heat(top=top)


@pytest.mark.parametrize("factory", [5, None, lambda: None])
def test_sync_index_refuses_a_loop_factory_that_makes_no_loop(factory: Any) -> None:
    with pytest.raises(InvalidInput, match="loop_factory"):
        shardex.SyncShardedIndex(MemoryStore(seed=1), "ix", loop_factory=factory)


@pytest.mark.parametrize("version", [HUGE, 10**38, 0, True, 1.0],
                         ids=["huge", "39 digits", "0", "True", "1.0"])
def test_a_routing_version_a_store_cannot_keep_is_refused(version: Any) -> None:
    """Accepted before up to any size, a version past 38 digits made ``to_json`` raise
    ValueError (past 4,300 digits) or became a number DynamoDB cannot keep."""
    with pytest.raises(shardex.InvalidRouting, match="version must be an integer from 1"):
        shardex.Routing(shardex.ShardPolicy(1), version=version)
    text = shardex.Routing(shardex.ShardPolicy(1)).to_json()
    assert '"version":1}' in text
    spelled = "1" + "0" * 5000 if version is HUGE else json.dumps(version)
    refused = r"routing(\.version: expected an integer| document is not valid JSON)"
    with pytest.raises(shardex.InvalidRouting, match=refused):
        shardex.Routing.from_json(text.replace('"version":1}', f'"version":{spelled}}}'))


def test_the_largest_routing_version_round_trips() -> None:
    routing = shardex.Routing(shardex.ShardPolicy(1), version=10**38 - 1)
    assert shardex.Routing.from_json(routing.to_json()) == routing


def test_a_write_without_a_version_at_the_highest_version_says_so() -> None:
    """A put without version= of an item at 10**38 - 1 was refused naming 'version
    100000000000000000000000000000000000000', a version its caller never passed."""
    async def main() -> None:
        async with shardex.ShardedIndex(MemoryStore(seed=1), "ix") as index:
            assert await index.put("A", "i9", version=10**38 - 1)
            for write in (lambda: index.put("A", "i9"),
                          lambda: index.move("i9", old="A", new="B"),
                          lambda: index.delete("A", "i9")):
                with pytest.raises(InvalidInput, match=r"^item 'i9' is at the highest version, "
                                                       r"10\*\*38 - 1, so no write can follow"):
                    await write()
            assert [e.item_id for e in (await index.query("A")).items] == ["i9"]

    shardex.run_virtual(main())
