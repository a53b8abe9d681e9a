"""Shard key validation, encoding and parsing."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardex import Routing, ShardedIndex, ShardPolicy, run_virtual
from shardex.errors import InvalidInput, InvalidKey
from shardex.keys import (
    MAX_ITEM_ID_BYTES,
    MAX_SORT_BYTES,
    MAX_VALUE_BYTES,
    SEPARATOR,
    encode_shard_key,
    parse_shard_key,
    validate_item_id,
    validate_sort,
    validate_value,
)

Validator = Callable[[Any], str]

# (validator, the name its messages use, its byte limit)
VALIDATORS: list[tuple[Validator, str, int]] = [
    (validate_value, "logical key", MAX_VALUE_BYTES),
    (validate_item_id, "item id", MAX_ITEM_ID_BYTES),
    (validate_sort, "sort value", MAX_SORT_BYTES),
]
VALIDATOR_IDS = ["value", "item_id", "sort"]

valid_values = st.text(
    alphabet=st.characters(exclude_characters=SEPARATOR + "\x00", codec="utf-8"),
    min_size=1,
    max_size=40,
)


def test_limits_are_the_documented_ones() -> None:
    assert SEPARATOR == "#"
    assert (MAX_VALUE_BYTES, MAX_ITEM_ID_BYTES, MAX_SORT_BYTES) == (1024, 512, 510)


def test_invalid_key_is_an_invalid_input_and_a_value_error() -> None:
    assert issubclass(InvalidKey, InvalidInput)
    assert issubclass(InvalidKey, ValueError)


# -- validation --------------------------------------------------------------------------


@pytest.mark.parametrize(("validate", "kind", "limit"), VALIDATORS, ids=VALIDATOR_IDS)
@pytest.mark.parametrize("text", ["PENDING", "o-1", "2026-11-30T05:00:00Z", "café", "東京", "😀"])
def test_valid_text_is_returned_unchanged(
    validate: Validator, kind: str, limit: int, text: str
) -> None:
    assert validate(text) == text


class Status(str, enum.Enum):  # noqa: UP042 (the form applications use; StrEnum too)
    pending = "PENDING"  # its name is not its text: str() of it is 'Status.pending'


class ItemId(str):
    pass


@pytest.mark.parametrize(("validate", "kind", "limit"), VALIDATORS, ids=VALIDATOR_IDS)
@pytest.mark.parametrize("text", [Status.pending, ItemId("PENDING")], ids=["enum", "subclass"])
def test_a_str_subclass_is_its_text(validate: Validator, kind: str, limit: int,
                                    text: str) -> None:
    assert type(validate(text)) is str
    assert validate(text) == "PENDING"


def test_an_index_takes_a_str_enum_as_its_text() -> None:
    """An application's status enum (class Status(str, Enum)) passed the checks and then
    failed deep inside: 'shard 4 is out of range for 8 shard(s)' for a put, 'item id must
    be non-empty text, got 'o-1'' for a str subclass id. It is its text everywhere."""
    async def main() -> None:
        routing = Routing(overrides={Status.pending: ShardPolicy(shards=8)})
        assert list(routing.overrides) == ["PENDING"]
        assert type(next(iter(routing.overrides))) is str
        async with ShardedIndex("memory://", "orders", routing) as index:
            assert await index.put(Status.pending, ItemId("o-1"), sort=ItemId("s"))
            assert await index.put(Status.pending, "o-2")
            page = await index.query(Status.pending)
            assert [(e.value, e.item_id, e.sort) for e in page.items] == [
                ("PENDING", "o-2", ""), ("PENDING", "o-1", "s")]
            assert all(type(e.value) is str for e in page.items)
            assert await index.count(Status.pending) == 2
            assert (await index.get(ItemId("o-1"))).shard_key.startswith("PENDING#")
            assert await index.move(ItemId("o-1"), old=Status.pending, new="SHIPPED")
            assert [e.item_id async for e in index.scan(Status.pending)] == ["o-2"]
            assert [len(p.items) async for p in index.pages(Status.pending)] == [1]
            assert await index.delete(Status.pending, ItemId("o-2"))
            assert await index.count("PENDING") == 0

    run_virtual(main())


@pytest.mark.parametrize(("validate", "kind", "limit"), VALIDATORS, ids=VALIDATOR_IDS)
@pytest.mark.parametrize(
    ("bad", "type_name"), [(b"PENDING", "bytes"), (7, "int"), (None, "NoneType"), (["A"], "list")]
)
def test_non_text_is_refused(
    validate: Validator, kind: str, limit: int, bad: object, type_name: str
) -> None:
    with pytest.raises(InvalidKey, match=rf"^{kind} must be text \(str\), got {type_name}"):
        validate(bad)


@pytest.mark.parametrize(("validate", "kind"), [(validate_value, "logical key"),
                                                (validate_item_id, "item id")])
def test_empty_is_refused(validate: Validator, kind: str) -> None:
    with pytest.raises(InvalidKey, match=f"^{kind} must not be empty$"):
        validate("")


def test_empty_sort_value_is_allowed() -> None:
    assert validate_sort("") == ""


@pytest.mark.parametrize(("validate", "kind", "limit"), VALIDATORS, ids=VALIDATOR_IDS)
@pytest.mark.parametrize("text", ["\ud800", "a\udfffb", "\udc00PENDING"])
def test_unpaired_surrogate_is_refused(
    validate: Validator, kind: str, limit: int, text: str
) -> None:
    with pytest.raises(InvalidKey, match="not valid text") as caught:
        validate(text)
    assert str(caught.value).startswith(kind)
    assert "unpaired surrogate" in str(caught.value)
    assert isinstance(caught.value.__cause__, UnicodeEncodeError)


@pytest.mark.parametrize(("validate", "kind", "limit"), VALIDATORS, ids=VALIDATOR_IDS)
@pytest.mark.parametrize("text", ["\x00", "A\x00", "\x00B", "A\x00B"])
def test_nul_is_refused(validate: Validator, kind: str, limit: int, text: str) -> None:
    with pytest.raises(InvalidKey, match="contains a NUL character") as caught:
        validate(text)
    assert str(caught.value).startswith(kind)


def test_separator_is_refused_in_a_logical_key_only() -> None:
    for value in ["#", "PENDING#3", "#PENDING", "A#B#C"]:
        with pytest.raises(InvalidKey, match="contains the separator '#'") as caught:
            validate_value(value)
        assert repr(value) in str(caught.value)
    # Item ids and sort values are free to contain it.
    assert validate_item_id("o#1") == "o#1"
    assert validate_sort("2026#11") == "2026#11"


@pytest.mark.parametrize(("validate", "kind", "limit"), VALIDATORS, ids=VALIDATOR_IDS)
@pytest.mark.parametrize("char", ["a", "é", "東", "😀"])
def test_byte_length_is_limited_not_character_count(
    validate: Validator, kind: str, limit: int, char: str
) -> None:
    width = len(char.encode("utf-8"))
    fits = char * (limit // width) + "a" * (limit % width)
    assert len(fits.encode("utf-8")) == limit
    assert validate(fits) == fits

    over = fits + "a"
    with pytest.raises(InvalidKey, match=f"is {limit + 1} bytes of UTF-8; at most {limit}") as c:
        validate(over)
    assert str(c.value).startswith(kind)

    if width > 1:
        # One more multibyte character: far fewer characters than the limit, still too long.
        longer = fits + char
        assert len(longer) < limit
        with pytest.raises(InvalidKey, match=f"is {limit + width} bytes of UTF-8"):
            validate(longer)


@given(st.text())
def test_validation_either_accepts_unchanged_or_raises_invalid_key(text: str) -> None:
    for validate, _, _ in VALIDATORS:
        try:
            result = validate(text)
        except InvalidKey:
            continue
        assert result == text


@given(valid_values)
def test_every_valid_value_validates(value: str) -> None:
    assert validate_value(value) == value
    assert validate_item_id(value) == value
    assert validate_sort(value) == value


# -- encoding and parsing ----------------------------------------------------------------


def test_encode_one_shard_has_no_suffix() -> None:
    assert encode_shard_key("PENDING", 0, 1) == "PENDING"


@pytest.mark.parametrize(("shard", "shards", "key"),
                         [(0, 2, "PENDING#0"), (3, 8, "PENDING#3"), (4095, 4096, "PENDING#4095")])
def test_encode_sharded_key(shard: int, shards: int, key: str) -> None:
    assert encode_shard_key("PENDING", shard, shards) == key


@pytest.mark.parametrize(("key", "parsed"), [
    ("PENDING", ("PENDING", None)),
    ("PENDING#0", ("PENDING", 0)),
    ("PENDING#3", ("PENDING", 3)),
    ("PENDING#10", ("PENDING", 10)),
    ("PENDING#4095", ("PENDING", 4095)),
    ("東京#7", ("東京", 7)),
])
def test_parse_shard_key(key: str, parsed: tuple[str, int | None]) -> None:
    assert parse_shard_key(key) == parsed


@pytest.mark.parametrize("key", ["#x", "#0", "#", "##1"])
def test_parse_refuses_reserved_keys(key: str) -> None:
    with pytest.raises(InvalidKey, match="reserved for shardex records") as caught:
        parse_shard_key(key)
    assert repr(key) in str(caught.value)


@pytest.mark.parametrize(
    "key",
    ["A#", "A#01", "A#00", "A#x", "A#-1", "A#+1", "A# 1", "A#1 ", "A#1.0", "A#1_0",
     "A#1#2", "A#\u0661", "A#\u00b2", "A#\uff11"],
)
def test_parse_refuses_a_suffix_that_is_not_a_shard_number(key: str) -> None:
    with pytest.raises(InvalidKey, match="suffix that is not a shard number") as caught:
        parse_shard_key(key)
    assert repr(key) in str(caught.value)


@pytest.mark.parametrize("key", ["", b"A#1", None, 3])
def test_parse_refuses_empty_or_non_text(key: Any) -> None:
    with pytest.raises(InvalidKey, match="shard key must be non-empty text"):
        parse_shard_key(key)


@given(valid_values)
def test_round_trip_one_shard(value: str) -> None:
    key = encode_shard_key(value, 0, 1)
    assert key == value
    assert parse_shard_key(key) == (value, None)


@given(valid_values, st.data())
def test_round_trip_many_shards(value: str, data: st.DataObject) -> None:
    shards = data.draw(st.integers(min_value=2, max_value=4096), label="shards")
    shard = data.draw(st.integers(min_value=0, max_value=shards - 1), label="shard")
    key = encode_shard_key(value, shard, shards)
    assert key == f"{value}#{shard}"
    assert parse_shard_key(key) == (value, shard)


@given(valid_values, st.integers(min_value=2, max_value=64))
def test_shard_keys_of_a_value_are_distinct_and_parse_back_in_order(
    value: str, shards: int
) -> None:
    keys = [encode_shard_key(value, k, shards) for k in range(shards)]
    assert len(set(keys)) == shards
    assert [parse_shard_key(k) for k in keys] == [(value, k) for k in range(shards)]
