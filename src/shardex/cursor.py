"""Opaque page cursors that hold a position in the merged order, not in one layout.

A cursor carries the logical key, the order and the last ``(sort, item_id)`` a page
returned. The next page reads every shard of the value's *current* layout strictly
beyond that position, so a cursor stays valid when the value's shard count changes
between two pages. (Within one process the next page also resumes each shard where
the last one stopped: ``shardex.fanout`` keeps that apart, so the cursor stays small
and means the same in every process.)

It is signed with keyed BLAKE2b, under a key bound to the index's name: a cursor
that was altered, truncated, or issued for another value, order or index (even one
sharing the same ``cursor_secret``) is refused with InvalidCursor. Without a secret
the key is derived from the index name, which detects damage but not a deliberate
forgery; pass ``cursor_secret`` (bytes, not empty; 32 random bytes is plenty) to make
cursors unforgeable.

A cursor is signed, not encrypted: whoever holds it can read the value, the order
and the last entry's sort and item id in it, with or without a secret. Those are the
fields of the last entry of the page the cursor came with, so a cursor tells its
holder nothing the page did not; an application that shows its clients pages
without item ids, and hands them cursors, should encrypt the cursor at its own
boundary (for example with the ``cryptography`` package's AES-GCM).

The payload is a flat, length-prefixed list of UTF-8 fields (no JSON, no nesting): a
cursor that carries a valid signature but a payload shardex never wrote is refused
with InvalidCursor too.

A cursor is bounded, with a secret or without one: at most ``MAX_CURSOR_CHARS`` (4,096)
characters, checked before anything is decoded, and its fields what a position can
hold (an item id as ``validate_item_id`` allows, at most 512 bytes and no NUL; a sort
value of at most ``MAX_CURSOR_SORT_BYTES``, DynamoDB's 1,024-byte sort key, which an
application's own GSI sort attribute may fill). Without a secret anyone can sign a
cursor, so these checks, not the signature, are what keeps a cursor from carrying
anything else into a query; every cursor shardex writes passes them (the largest is
about 3,500 characters). A fault raises InvalidCursor naming it, before any request.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import Any, Literal

from shardex.errors import InvalidCursor, InvalidInput, InvalidKey, brief
from shardex.keys import validate_item_id
from shardex.model.entries import Position

__all__ = ["CURSOR_VERSION", "Cursor", "CursorCodec", "MAX_CURSOR_CHARS",
           "MAX_CURSOR_SORT_BYTES"]

# 2: the payload no longer carries the routing version (it was never read).
# 3: the key is bound to the index name; the payload is length-prefixed fields.
CURSOR_VERSION = 3
_MAC_BYTES = 16
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+={0,2}")  # padding optional: encode drops it
MAX_CURSOR_CHARS = 4096
MAX_CURSOR_SORT_BYTES = 1024
_ORDERS: dict[str, int] = {"asc": 0, "desc": 1}
Order = Literal["asc", "desc"]


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where the next page of a query starts: strictly beyond ``after`` in ``order``."""

    value: str
    order: Order
    after: Position


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        low, number = number & 0x7F, number >> 7
        out.append(low | (0x80 if number else 0))
        if not number:
            return bytes(out)


class _Reader:
    """Reads the fields of a payload; any fault is InvalidCursor, never another error."""

    def __init__(self, payload: bytes) -> None:
        self._payload = payload
        self._at = 0

    def _fault(self) -> InvalidCursor:
        return InvalidCursor("cursor payload is malformed: it was not written by shardex")

    def byte(self) -> int:
        if self._at >= len(self._payload):
            raise self._fault()
        self._at += 1
        return self._payload[self._at - 1]

    def text(self) -> str:
        length, shift = 0, 0
        while True:
            part = self.byte()
            length |= (part & 0x7F) << shift
            if not part & 0x80:
                break
            shift += 7
            if shift > 28:
                raise self._fault()
        end = self._at + length
        if end > len(self._payload):
            raise self._fault()
        try:
            text = self._payload[self._at:end].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self._fault() from exc
        self._at = end
        return text

    def end(self) -> None:
        if self._at != len(self._payload):
            raise self._fault()


def _check_secret(secret: Any) -> bytes | None:
    if secret is None:
        return None
    if not isinstance(secret, bytes):
        raise InvalidInput(f"cursor_secret must be bytes (e.g. os.urandom(32)), "
                           f"got {type(secret).__name__}")
    if not secret:
        raise InvalidInput("cursor_secret must not be empty: an empty secret makes cursors "
                           "forgeable (None signs with a key derived from the index name)")
    return secret


class CursorCodec:
    """Encodes and checks the cursors of one index.

    Raises InvalidInput for a ``secret`` that is not bytes, or is empty.
    """

    def __init__(self, index_name: str, secret: bytes | None = None) -> None:
        checked = _check_secret(secret)
        name = index_name.encode("utf-8")
        if checked is None:
            self._key = hashlib.blake2b(b"shardex-cursor/" + name, digest_size=32).digest()
        else:
            # BLAKE2b keys are at most 64 bytes; hashing the secret keeps any length usable,
            # and keying the index name with it gives each index sharing a secret its own key.
            master = hashlib.blake2b(checked, digest_size=32).digest()
            self._key = hashlib.blake2b(b"shardex-cursor/" + name, key=master,
                                        digest_size=32).digest()

    def _mac(self, payload: bytes) -> bytes:
        return hashlib.blake2b(payload, key=self._key, digest_size=_MAC_BYTES).digest()

    def encode(self, cursor: Cursor) -> str:
        payload = bytearray([_ORDERS[cursor.order]])
        for text in (cursor.value, *cursor.after):
            data = text.encode("utf-8")
            payload += _varint(len(data)) + data
        blob = bytes([CURSOR_VERSION]) + self._mac(bytes(payload)) + payload
        return base64.urlsafe_b64encode(blob).decode("ascii").rstrip("=")

    def decode(self, token: Any, *, value: str, order: Order) -> Cursor:
        """Check and decode ``token`` for a query of ``value`` in ``order``.

        Raises InvalidCursor naming the fault: not a string, longer than
        ``MAX_CURSOR_CHARS``, not base64, too short, an unknown cursor version, a failed
        integrity check, a payload shardex did not write, a position no entry can have,
        or another value or order.
        """
        if not isinstance(token, str) or not token:
            raise InvalidCursor(f"cursor must be a non-empty string, got {brief(token)}")
        if len(token) > MAX_CURSOR_CHARS:
            raise InvalidCursor(f"cursor is {len(token):,} characters long; shardex's cursors "
                                f"are at most {MAX_CURSOR_CHARS:,}: pass page.cursor unchanged")
        try:
            if not _BASE64URL.fullmatch(token):  # the decoder would skip what is not
                raise ValueError("a character outside base64url")
            blob = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        except (binascii.Error, ValueError) as exc:
            raise InvalidCursor("cursor is not valid base64; pass page.cursor unchanged") from exc
        if len(blob) <= 1 + _MAC_BYTES:
            raise InvalidCursor("cursor is truncated")
        if blob[0] != CURSOR_VERSION:
            raise InvalidCursor(
                f"cursor version {blob[0]} is not supported (expected {CURSOR_VERSION})")
        mac, payload = blob[1 : 1 + _MAC_BYTES], blob[1 + _MAC_BYTES :]
        if not hmac.compare_digest(mac, self._mac(payload)):
            raise InvalidCursor(
                "cursor failed its integrity check: altered, truncated, or issued by another index"
            )
        reader = _Reader(payload)
        code = reader.byte()
        c_value, sort, item_id = reader.text(), reader.text(), reader.text()
        reader.end()
        c_order = next((name for name, number in _ORDERS.items() if number == code), None)
        if c_order is None:
            raise InvalidCursor(f"cursor payload is malformed: unknown order {code}")
        if c_value != value:
            raise InvalidCursor(f"cursor was issued for {c_value!r}, not {value!r}")
        if c_order != order:
            raise InvalidCursor(f"cursor was issued for order {c_order!r}, not {order!r}")
        try:
            validate_item_id(item_id)
        except InvalidKey as exc:
            raise InvalidCursor(f"cursor holds a position no entry has: {exc}") from None
        # a sort value may hold a NUL: shardex refuses one in the sort values it writes,
        # but an application's own GSI sort attribute (sort_owner=application) may hold
        # one, and a listing's cursor after such an entry is one shardex wrote
        if len(sort.encode("utf-8")) > MAX_CURSOR_SORT_BYTES:
            raise InvalidCursor(f"cursor holds a position no entry has: a sort value of "
                                f"{len(sort.encode('utf-8')):,} bytes (at most "
                                f"{MAX_CURSOR_SORT_BYTES:,})")
        return Cursor(value=c_value, order=order, after=(sort, item_id))
