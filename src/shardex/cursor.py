"""Opaque page cursors that hold a position in the merged order, not in one layout.

A cursor carries the logical key, the order and the last ``(sort, item_id)`` a page
returned. The next page queries every shard of the value's *current* layout strictly
beyond that position, so a cursor stays valid when the value's shard count changes
between two pages. It is signed with keyed BLAKE2b: a cursor that was altered,
truncated or issued for another value, order or index is refused with InvalidCursor.
Without an index secret the key is derived from the index name, which detects damage
but not a deliberate forgery; pass ``cursor_secret`` to make cursors unforgeable.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any, Literal

from shardex.errors import InvalidCursor
from shardex.stores.entries import Position

__all__ = ["CURSOR_VERSION", "Cursor", "CursorCodec"]

# 2: the payload no longer carries the routing version (it was never read).
CURSOR_VERSION = 2
_MAC_BYTES = 16
Order = Literal["asc", "desc"]


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where the next page of a query starts: strictly beyond ``after`` in ``order``."""

    value: str
    order: Order
    after: Position


class CursorCodec:
    """Encodes and checks the cursors of one index."""

    def __init__(self, index_name: str, secret: bytes | None = None) -> None:
        material = secret if secret is not None else b"shardex-cursor/" + index_name.encode()
        # BLAKE2b keys are at most 64 bytes; hashing the secret keeps any length usable.
        self._key = hashlib.blake2b(material, digest_size=32).digest()

    def _mac(self, payload: bytes) -> bytes:
        return hashlib.blake2b(payload, key=self._key, digest_size=_MAC_BYTES).digest()

    def encode(self, cursor: Cursor) -> str:
        payload = json.dumps(
            [cursor.value, cursor.order, cursor.after[0], cursor.after[1]],
            ensure_ascii=False, separators=(",", ":"),
        ).encode("utf-8")
        blob = bytes([CURSOR_VERSION]) + self._mac(payload) + payload
        return base64.urlsafe_b64encode(blob).decode("ascii").rstrip("=")

    def decode(self, token: Any, *, value: str, order: Order) -> Cursor:
        """Check and decode ``token`` for a query of ``value`` in ``order``.

        Raises InvalidCursor naming the fault: not a string, not base64, too short, an
        unknown cursor version, a failed integrity check, or another value or order.
        """
        if not isinstance(token, str) or not token:
            raise InvalidCursor(f"cursor must be a non-empty string, got {token!r}")
        try:
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
        try:
            c_value, c_order, sort, item_id = json.loads(payload)
        except (ValueError, TypeError) as exc:  # pragma: no cover - only a forged MAC gets here
            raise InvalidCursor("cursor payload is malformed") from exc
        if c_value != value:
            raise InvalidCursor(f"cursor was issued for {c_value!r}, not {value!r}")
        if c_order != order:
            raise InvalidCursor(f"cursor was issued for order {c_order!r}, not {order!r}")
        return Cursor(value=c_value, order=c_order, after=(sort, item_id))
