"""Cursors: bound to one index, refused with InvalidCursor for anything shardex did not write."""

from __future__ import annotations

import base64
from typing import Any

import pytest

import shardex
from shardex.cursor import CURSOR_VERSION, MAX_CURSOR_CHARS, Cursor, CursorCodec
from shardex.sim.clock import run_virtual

SECRET = b"0123456789abcdef0123456789abcdef"


def _signed(codec: CursorCodec, payload: bytes) -> str:
    """A cursor whose signature is valid for ``codec``: what a holder of the secret forges."""
    blob = bytes([CURSOR_VERSION]) + codec._mac(payload) + payload
    return base64.urlsafe_b64encode(blob).decode("ascii").rstrip("=")


def test_a_cursor_round_trips_any_text() -> None:
    codec = CursorCodec("orders", SECRET)
    # a NUL in a sort: an application's own GSI sort attribute may hold one
    for after in [("", "o-1"), ("2026-11-30T05:00:00Z", "ünïcødé ✓"), ("a" * 1024, "b" * 512),
                  ("é" * 512, "中" * 170), ("2026-11-30\x00late", "o-1")]:
        for value in ("PENDING", "v" * 1024):
            cursor = Cursor(value, "desc", after)
            token = codec.encode(cursor)
            assert len(token) <= MAX_CURSOR_CHARS
            assert codec.decode(token, value=value, order="desc") == cursor


@pytest.mark.parametrize("secret", [None, SECRET])
@pytest.mark.parametrize(("after", "words"), [
    (("s", ""), "item id must not be empty"),
    (("s", "o\x00-1"), "NUL"),
    (("s", "i" * 513), "at most 512"),
    (("s" * 1025, "o-1"), "sort value of 1,025 bytes"),
])
def test_a_signed_cursor_holding_a_position_no_entry_has_is_invalid(
        secret: bytes | None, after: tuple[str, str], words: str) -> None:
    # without a secret anyone can sign a cursor: its content is checked all the same
    codec = CursorCodec("orders", secret)
    token = codec.encode(Cursor("PENDING", "asc", after))
    with pytest.raises(shardex.InvalidCursor, match=words):
        codec.decode(token, value="PENDING", order="asc")


@pytest.mark.parametrize("inserted", ["=A", ".", "!", " ", "\n", "\x00", "+", "/"])
def test_a_cursor_with_a_character_outside_base64url_is_refused(inserted: str) -> None:
    # the decoder would have skipped it (the same position: an altered cursor accepted)
    codec = CursorCodec("orders", SECRET)
    token = codec.encode(Cursor("PENDING", "asc", ("s", "o-1")))
    with pytest.raises(shardex.InvalidCursor, match="not valid base64"):
        codec.decode(token[:8] + inserted + token[8:], value="PENDING", order="asc")


@pytest.mark.parametrize("secret", [None, SECRET])
def test_an_over_long_cursor_is_refused_before_it_is_decoded(secret: bytes | None) -> None:
    codec = CursorCodec("orders", secret)
    token = codec.encode(Cursor("PENDING", "asc", ("s" * 3100, "o-1")))
    assert len(token) > MAX_CURSOR_CHARS
    with pytest.raises(shardex.InvalidCursor, match=r"4,\d+ characters long; .* at most 4,096"):
        codec.decode(token, value="PENDING", order="asc")
    with pytest.raises(shardex.InvalidCursor, match="10,000,000 characters long"):
        codec.decode("A" * 10_000_000, value="PENDING", order="asc")


def test_a_bad_cursor_is_refused_by_the_index_before_any_request() -> None:
    async def body() -> None:
        store = shardex.open_store("memory://")
        async with shardex.ShardedIndex(store, "orders") as index:
            await index.put("PENDING", "o-1")
            forged = CursorCodec("orders").encode(Cursor("PENDING", "asc", ("s", "o\x00")))
            store.reset_stats()
            for cursor, words in [("A" * 5000, "5,000 characters"), (forged, "NUL"),
                                  (b"x", "non-empty string")]:
                with pytest.raises(shardex.InvalidCursor, match=words):
                    await index.query("PENDING", cursor=cursor)  # type: ignore[arg-type]
            assert store.stats().totals.requests == 0

    run_virtual(body())


def test_indexes_sharing_a_secret_refuse_each_others_cursors() -> None:
    async def body() -> None:
        store = shardex.open_store("memory://")
        one = shardex.ShardedIndex(store, "orders", cursor_secret=SECRET)
        two = shardex.ShardedIndex(store, "returns", cursor_secret=SECRET)
        async with one, two:
            for index in (one, two):
                for i in range(4):
                    await index.put("PENDING", f"o-{i}", sort=str(i))
            cursor = (await one.query("PENDING", limit=2)).cursor
            assert cursor is not None
            assert len((await one.query("PENDING", limit=2, cursor=cursor)).items) == 2
            with pytest.raises(shardex.InvalidCursor, match="another index"):
                await two.query("PENDING", limit=2, cursor=cursor)

    run_virtual(body())


def test_a_secret_changes_the_signature() -> None:
    plain, keyed = CursorCodec("orders"), CursorCodec("orders", SECRET)
    token = plain.encode(Cursor("PENDING", "asc", ("s", "o-1")))
    with pytest.raises(shardex.InvalidCursor, match="integrity"):
        keyed.decode(token, value="PENDING", order="asc")


@pytest.mark.parametrize(("secret", "message"), [
    (b"", "must not be empty"), ("str secret", "must be bytes"), (42, "must be bytes"),
    (bytearray(b"abc"), "must be bytes"), (["a"], "must be bytes"),
])
def test_a_bad_secret_is_refused_with_a_typed_error(secret: Any, message: str) -> None:
    with pytest.raises(shardex.InvalidInput, match=message):
        shardex.ShardedIndex("memory://", "orders", cursor_secret=secret)


def _field(text: bytes) -> bytes:
    assert len(text) < 128
    return bytes([len(text)]) + text


@pytest.mark.parametrize("payload", [
    b"",  # nothing
    b"\x00",  # an order and no fields
    b"\x00" + _field(b"PENDING") + _field(b"s"),  # a field short
    b"\x00" + _field(b"PENDING") + _field(b"s") + _field(b"o-1") + b"\x00",  # one too many
    b"\x00" + _field(b"PENDING") + _field(b"s") + b"\x05o-1",  # a length past the end
    b"\x00" + _field(b"PENDING") + _field(b"\xff\xfe") + _field(b"o-1"),  # not UTF-8
    b"\x07" + _field(b"PENDING") + _field(b"s") + _field(b"o-1"),  # no such order
    b"\x00" + b"\xff" * 8,  # a length that never ends
    b"[" * 1000 + b"]" * 1000,  # deep nesting (the JSON of an older format)
    b'["PENDING", "asc", 1, ["o-1"]]',  # wrong types
    b'{"value": "PENDING"}',
])
def test_a_forged_validly_signed_cursor_is_invalid_never_a_crash(payload: bytes) -> None:
    codec = CursorCodec("orders", SECRET)
    with pytest.raises(shardex.InvalidCursor, match=r"malformed|truncated"):
        codec.decode(_signed(codec, payload), value="PENDING", order="asc")


def test_a_forged_cursor_through_the_index_is_invalid() -> None:
    async def body() -> None:
        async with shardex.ShardedIndex("memory://", "orders", cursor_secret=SECRET) as index:
            forged = _signed(CursorCodec("orders", SECRET), b"[" * 2_000)
            with pytest.raises(shardex.InvalidCursor, match="malformed"):
                await index.query("PENDING", cursor=forged)

    run_virtual(body())


def test_a_cursor_of_an_older_version_is_refused_by_name() -> None:
    codec = CursorCodec("orders")
    token = codec.encode(Cursor("PENDING", "asc", ("s", "o-1")))
    blob = bytearray(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    blob[0] = 2
    old = base64.urlsafe_b64encode(bytes(blob)).decode("ascii")
    with pytest.raises(shardex.InvalidCursor, match="version 2 is not supported"):
        codec.decode(old, value="PENDING", order="asc")


def test_a_cursor_is_signed_not_encrypted() -> None:
    # documented: the last entry's sort and item id can be read from a cursor, as from
    # the page it came with
    token = CursorCodec("orders", SECRET).encode(Cursor("PENDING", "asc", ("2026", "o-42")))
    blob = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    assert b"o-42" in blob
    assert b"2026" in blob
