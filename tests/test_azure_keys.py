"""The Azure Table key encoding: vectors, round trips, order, limits (pure, no server)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardex.errors import InvalidKey
from shardex.keys import validate_item_id, validate_sort, validate_value
from shardex.stores.azure import keys

VECTORS = json.loads((Path(__file__).parent / "vectors" / "azure_keys.json").read_text())
# what the service refuses in a key, and the quote, which Azurite's batch requests mangle
REFUSED = set("/\\#?'") | {chr(c) for c in range(0x20)} | {chr(c) for c in range(0x7F, 0xA0)}


def accepted(check: object) -> st.SearchStrategy[str]:
    """Any text the index accepts for one kind of key (as its validator says)."""
    def ok(text: str) -> bool:
        try:
            check(text)  # type: ignore[operator]
        except InvalidKey:
            return False
        return True

    return st.text(st.characters(codec="utf-8"), max_size=40).filter(ok)


SORTS, ITEMS, VALUES = accepted(validate_sort), accepted(validate_item_id), \
    accepted(validate_value)


@pytest.mark.parametrize("case", VECTORS["texts"], ids=lambda c: repr(c["text"])[:30])
def test_the_published_text_vectors(case: dict[str, str]) -> None:
    assert keys.encode_text(case["text"]) == case["encoded"]
    assert keys.decode_text(case["encoded"]) == case["text"]


def test_the_published_row_and_partition_key_vectors() -> None:
    for case in VECTORS["row_keys"]:
        for descending, name in ((False, "ascending"), (True, "descending")):
            row = keys.row_key(case["sort"], case["item_id"], case["token"],
                               descending=descending)
            assert row == case[name]
            assert keys.decode_position(row) == (case["sort"], case["item_id"])
    for case in VECTORS["partition_keys"]:
        assert keys.entry_partition(case["index"], case["shard_key"]) == case["partition_key"]


@settings(max_examples=400)
@given(st.text(st.characters(codec="utf-8")))
def test_every_text_round_trips_into_key_characters(text: str) -> None:
    encoded = keys.encode_text(text)
    assert keys.decode_text(encoded) == text
    assert not set(encoded) & REFUSED
    assert keys.TERMINATOR not in encoded
    assert encoded.isascii()


@settings(max_examples=200)
@given(SORTS, ITEMS)
def test_no_row_key_holds_a_refused_character_or_a_quote(sort: str, item: str) -> None:
    for descending in (False, True):
        assert not set(keys.row_key(sort, item, "t", descending=descending)) & REFUSED


@settings(max_examples=400)
@given(st.text(st.characters(codec="utf-8")), st.text(st.characters(codec="utf-8")))
def test_encoding_keeps_code_point_order_and_prefixes(a: str, b: str) -> None:
    ea, eb = keys.encode_text(a), keys.encode_text(b)
    assert (ea < eb) == (a < b)
    assert (ea == eb) == (a == b)
    assert eb.startswith(ea) == b.startswith(a)


@settings(max_examples=400)
@given(st.tuples(SORTS, ITEMS), st.tuples(SORTS, ITEMS), st.text("0123456789abcdef",
                                                                  min_size=1, max_size=32))
def test_row_keys_order_as_sort_then_item_id_both_ways(p: tuple[str, str], q: tuple[str, str],
                                                       token: str) -> None:
    asc_p, asc_q = (keys.row_key(*x, token, descending=False) for x in (p, q))
    desc_p, desc_q = (keys.row_key(*x, token, descending=True) for x in (p, q))
    assert (asc_p < asc_q) == (p < q)
    assert (desc_p < desc_q) == (p > q)
    for row, descending in ((asc_p, False), (desc_p, True)):
        assert keys.decode_position(row) == p
        low, high = keys.position_bounds(p, descending=descending)
        assert low < high
        # the bounds beyond p hold exactly the rows of positions past p in that order
        assert (low < (desc_q if descending else asc_q) < high) == (
            q < p if descending else q > p)
    assert keys.position_bounds(None, descending=False) < (asc_p, "B")


@settings(max_examples=200)
@given(VALUES, st.integers(1, 4096))
def test_partition_keys_of_shard_keys_never_meet_the_reserved_ones(value: str,
                                                                   shards: int) -> None:
    shard_key = f"{value}#{shards - 1}" if shards > 1 else value
    entry = keys.entry_partition("ix", shard_key)
    assert entry.startswith(keys.encode_text("ix") + keys.TERMINATOR)
    assert entry != keys.placement_partition("ix", value)
    assert entry != keys.record_partition("ix")
    assert not entry[len("ix!"):].startswith(keys.encode_text("#"))
    low, high = keys.namespace_range("ix")
    assert low < entry < high
    assert not keys.namespace_range("ix")[0] < keys.entry_partition("ix2", shard_key) < high


def test_a_key_past_one_kibibyte_is_refused_naming_the_limit() -> None:
    keys.row_key("s" * 200, "i" * 200, "token", descending=False)
    with pytest.raises(InvalidKey, match=r"1 KiB \(512 UTF-16 characters\)"):
        keys.row_key("s" * 300, "i" * 200, "token", descending=False)
    with pytest.raises(InvalidKey, match="item 'éé"):
        keys.placement_partition("ix", "é" * 200)
    with pytest.raises(InvalidKey, match="shard key"):
        keys.entry_partition("ix", "v" * 600)



@pytest.mark.parametrize("bad", ["~3000", "~0", '"', "$z", "#", "a/b", "!", "~1000"])
def test_text_that_no_encoding_made_is_refused(bad: str) -> None:
    with pytest.raises(InvalidKey):
        keys.decode_text(bad)


@settings(max_examples=300)
@given(st.dictionaries(st.text(st.characters(codec="utf-8"), min_size=1, max_size=8),
                       st.lists(st.text(max_size=6), min_size=1, max_size=3), max_size=6),
       st.lists(st.text(alphabet=keys.KEY_ALPHABET + "\x7f\u00e9", max_size=6), max_size=6))
def test_a_skip_scan_finds_every_index_once_a_request_an_index(
        indexes: dict[str, list[str]], foreign: list[str]) -> None:
    # a table's partition keys: every index's entries, placements and records, and keys
    # that are none of shardex's; the scan reads the least key at or above a bound
    table = sorted({key for name, shard_keys in indexes.items() for key in (
        *(keys.entry_partition(name, k, lambda key, _: key) for k in shard_keys),
        keys.placement_partition(name, "o-1", lambda key, _: key),
        keys.record_partition(name, lambda key, _: key))} | set(foreign))
    asked: list[str] = []

    async def first_from(low: str) -> str | None:
        asked.append(low)
        return next((key for key in table if key >= low), None)

    found = asyncio.run(keys.namespaces(first_from))
    named = {keys.namespace_of(key) for key in foreign} - {None}
    assert found == sorted(set(indexes) | named)  # code point order: the codes' order
    # one request an index, one a key of no index's (at most), one to find none after
    assert len(asked) <= len(found) + len(foreign) + 1
    assert len(asked) >= len(found) + 1
