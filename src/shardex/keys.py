"""Shard key encoding, decoding and validation.

A logical key ``value`` is written as ``value`` when its policy has one shard and as
``value#k`` (0 <= k < N) otherwise, so an unsharded index stays valid as it is.

Keys that start with the separator are *reserved* for a store's own rows, and no
logical key can produce one (a logical key never holds the separator):

- ``#placement#<item id>``: where an item's entry is, and its write version;
- ``#record#<key>``: a small record such as the routing document;
- ``#owner``: which index a table (or GSI) serves.

This module is the one place these spellings live; stores and counters import them.
"""

from __future__ import annotations

from typing import Any

from shardex.errors import InvalidKey, MalformedItem, brief

__all__ = [
    "MAX_ITEM_ID_BYTES",
    "MAX_SORT_BYTES",
    "MAX_VALUE_BYTES",
    "OWNER_KEY",
    "PLACEMENT_PREFIX",
    "RECORD_PREFIX",
    "SEPARATOR",
    "encode_shard_key",
    "is_reserved",
    "parse_shard_key",
    "placement_key",
    "record_key",
    "stored_value",
    "validate_item_id",
    "validate_shard_key",
    "validate_sort",
    "validate_value",
    "value_fault",
]

SEPARATOR = "#"
PLACEMENT_PREFIX = "#placement#"
RECORD_PREFIX = "#record#"
OWNER_KEY = "#owner"
# DynamoDB caps a partition key at 2,048 bytes and a sort key at 1,024; the entry's
# sort key holds the sort value, a NUL and the item id.
MAX_VALUE_BYTES = 1024
MAX_ITEM_ID_BYTES = 512
MAX_SORT_BYTES = 510
# a shard number is below routing's MAX_SHARDS (4096); a longer suffix is none, and int()
# refuses one of more than 4,300 digits with a ValueError
_SUFFIX_DIGITS = 18


def _text(kind: str, given: Any, max_bytes: int, *, allow_empty: bool = False) -> str:
    if not isinstance(given, str):
        raise InvalidKey(f"{kind} must be text (str), got {type(given).__name__}: "
                         f"{brief(given)}")
    # a str subclass (a str or StrEnum member): its text, as a store's driver writes it
    text = given if type(given) is str else str.__str__(given)
    if not text and not allow_empty:
        raise InvalidKey(f"{kind} must not be empty")
    if text.isascii():  # every write checks several: ASCII needs no encoding
        size = len(text)
    else:
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise InvalidKey(f"{kind} {text!r} is not valid text (unpaired surrogate)") from exc
    if size > max_bytes:
        raise InvalidKey(f"{kind} is {size} bytes of UTF-8; at most {max_bytes} are allowed")
    if "\x00" in text:
        raise InvalidKey(f"{kind} {text!r} contains a NUL character")
    return text


def validate_value(value: Any, kind: str = "logical key") -> str:
    """Return ``value`` as a plain str if it can be a logical key; raise InvalidKey
    naming the fault.

    A logical key is non-empty text of at most MAX_VALUE_BYTES UTF-8 bytes, without
    NUL and without the separator ``#``; so is an index name (``kind`` names which in
    the message). A str subclass (an enum's member of ``str``, a
    ``StrEnum``) is its text: ``Status.PENDING`` is ``"PENDING"``.
    """
    text = _text(kind, value, MAX_VALUE_BYTES)
    if SEPARATOR in text:
        raise InvalidKey(
            f"{kind} {text!r} contains the separator {SEPARATOR!r}, "
            "which shard keys reserve"
        )
    return text


def value_fault(value: Any) -> str | None:
    """Why ``value`` cannot be a logical key (``validate_value``'s words), or None if it
    can: for readers that name such values and go on rather than stop."""
    try:
        validate_value(value)
    except InvalidKey as exc:
        return str(exc)
    return None


def validate_item_id(item_id: Any) -> str:
    """Return ``item_id`` (as a plain str) if it is non-empty text without NUL; raise
    InvalidKey otherwise."""
    return _text("item id", item_id, MAX_ITEM_ID_BYTES)


def validate_sort(sort: Any) -> str:
    """Return ``sort`` (as a plain str) if it is text (possibly empty) without NUL; raise
    InvalidKey otherwise."""
    return _text("sort value", sort, MAX_SORT_BYTES, allow_empty=True)


def encode_shard_key(value: str, shard: int, shards: int) -> str:
    """Return the shard key of shard ``shard`` of ``shards`` for the logical key ``value``.

    Raises InvalidKey unless ``value`` is a logical key (``validate_value``) and
    ``shard`` and ``shards`` are ints with 0 <= shard < shards.
    """
    # every read and write encodes: cheap checks here, the full rules on the error path
    if type(value) is not str or not value or SEPARATOR in value or type(shard) is not int \
            or type(shards) is not int or not 0 <= shard < shards:
        _refuse_parts(value, shard, shards)
    if shards == 1:
        return value
    return f"{value}{SEPARATOR}{shard}"


def _refuse_parts(value: Any, shard: Any, shards: Any) -> None:
    validate_value(value)
    for name, number in (("shard", shard), ("shards", shards)):
        if type(number) is not int:  # a bool (or another int subclass) is no shard number
            raise InvalidKey(f"{name} must be an int, got {brief(number)}")
    raise InvalidKey(f"shard {brief(shard)} is out of range for {brief(shards)} shard(s)")


def parse_shard_key(shard_key: str) -> tuple[str, int | None]:
    """Split a shard key into its logical key and shard number (None when unsuffixed).

    Raises InvalidKey for a reserved key, a logical key that is not valid text (an
    unpaired surrogate: no store holds one) or a suffix that is not a shard number;
    callers that meet keys shardex did not write rely on that error.
    """
    if not isinstance(shard_key, str) or not shard_key:
        raise InvalidKey(f"shard key must be non-empty text, got {brief(shard_key)}")
    value, sep, suffix = shard_key.partition(SEPARATOR)
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidKey(f"shard key {brief(shard_key)} is not valid text (an unpaired "
                             "surrogate)") from None
    if not sep:
        return value, None
    if not value:
        raise InvalidKey(f"shard key {brief(shard_key)} is reserved for shardex records")
    if len(suffix) > _SUFFIX_DIGITS or not suffix.isdigit() or not suffix.isascii() or (
            suffix != "0" and suffix.startswith("0")):
        raise InvalidKey(f"shard key {brief(shard_key)} has a suffix that is not a shard "
                         "number")
    return value, int(suffix)


def validate_shard_key(shard_key: Any) -> str:
    """Return ``shard_key`` if it is one shardex writes (a logical key, alone or with a
    shard number); InvalidKey naming the fault otherwise."""
    value, _ = parse_shard_key(shard_key)
    validate_value(value)
    return str(shard_key)


def stored_value(shard_key: str, item_id: str) -> str:
    """The logical key of the shard key a store holds for ``item_id``'s entry.

    MalformedItem, naming the item and the key, when it is not a shard key shardex
    writes: something else wrote it (in DynamoDB GSI mode, the application's own key
    attribute), and the item is not the caller's argument at fault.
    """
    try:
        return parse_shard_key(shard_key)[0]
    except InvalidKey as exc:
        raise MalformedItem(f"item {brief(item_id)}: its entry's shard key is not one "
                            f"shardex writes: {exc}", item_id=item_id,
                            key=shard_key) from None


def is_reserved(key: str) -> bool:
    """Return whether ``key`` is a store's own key (placement, record, owner), not a shard key."""
    return key.startswith(SEPARATOR)


def placement_key(item_id: str) -> str:
    """Return the reserved key of the placement of ``item_id``."""
    return PLACEMENT_PREFIX + item_id


def record_key(key: str) -> str:
    """Return the reserved key of the record named ``key``."""
    return RECORD_PREFIX + key
