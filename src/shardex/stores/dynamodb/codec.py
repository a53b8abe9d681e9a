"""How shardex's entries, placements and attributes are written as DynamoDB items.

Pure: no I/O and no driver import. The sort key encoding is what makes DynamoDB's
order shardex's order: ``sk = sort + NUL + item_id``. DynamoDB orders string keys by
their UTF-8 bytes, which is code point order; shardex refuses NUL in sort values and
item ids, so NUL is below every character either can hold and the byte order of the
encoded key equals the order of ``(sort, item_id)``: ties on ``sort`` fall to the item
id, and a sort value that is a prefix of another (``"a"`` against ``"a b"``) comes
first. DynamoDB (and DynamoDB Local) accept NUL inside string key attributes.
"""

from __future__ import annotations

import decimal
import json
import math
from collections.abc import Mapping
from typing import Any

from shardex.capacity import write_units
from shardex.errors import InvalidInput
from shardex.keys import RECORD_PREFIX, placement_key
from shardex.stores.base import Placement, Position, Record, StoredEntry

__all__ = [
    "SINGLE",
    "decode_position",
    "encode_position",
    "entry_from_item",
    "entry_item",
    "entry_key",
    "from_attribute",
    "from_attributes",
    "item_units",
    "placement_from_item",
    "placement_item",
    "placement_item_key",
    "record_from_item",
    "record_item",
    "record_item_key",
    "record_partition",
    "to_attribute",
    "to_attributes",
]

SEP = "\x00"
# the one sort key value of placement and owner items (their partition key says it all)
SINGLE = "#"
# DynamoDB numbers: 38 significant digits, exponents from -130 to +125
_NUMBERS = decimal.Context(prec=38, Emin=-128, Emax=126, traps=[decimal.Inexact,
                                                                 decimal.Rounded])


def encode_position(sort: str, item_id: str) -> str:
    """Return the string key for ``(sort, item_id)`` whose byte order is their order."""
    return f"{sort}{SEP}{item_id}"


def decode_position(key: str, item_id: str | None = None) -> Position:
    """Split an encoded position; ``item_id`` stands in when the key carries none.

    A GSI sort attribute an application wrote without shardex's encoding has no NUL:
    its whole value is then the sort value and the item id comes from the base item.
    """
    sort, sep, rest = key.partition(SEP)
    if not sep:
        if item_id is None:
            raise InvalidInput(f"sort key {key!r} is not a shardex position (sort NUL item id)")
        return (sort, item_id)
    return (sort, rest)


# -- attribute values -----------------------------------------------------------------

def to_attribute(value: Any, where: str = "attrs") -> dict[str, Any]:
    """Return the DynamoDB attribute value of a JSON-like Python value.

    None, bool, int, float (finite, at most 38 significant digits), Decimal, str,
    bytes, lists and tuples (as L) and mappings with str keys (as M) are accepted;
    anything else raises InvalidInput naming ``where``.
    """
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int | float | decimal.Decimal):
        return {"N": _number(value, where)}
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, bytes | bytearray):
        return {"B": bytes(value)}
    if isinstance(value, list | tuple):
        return {"L": [to_attribute(v, f"{where}[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, Mapping):
        return {"M": to_attributes(value, where)}
    raise InvalidInput(f"{where}: a {type(value).__name__} cannot be stored in DynamoDB; "
                       "use None, bool, int, float, str, bytes, list or dict")


def to_attributes(values: Mapping[str, Any], where: str = "attrs") -> dict[str, Any]:
    """Return the DynamoDB map of a mapping with string keys (see ``to_attribute``)."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        if not isinstance(name, str):
            raise InvalidInput(f"{where}: attribute names must be text, got {name!r}")
        out[name] = to_attribute(value, f"{where}[{name!r}]")
    return out


def _number(value: int | float | decimal.Decimal, where: str) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInput(f"{where}: DynamoDB cannot store {value!r}")
    number = decimal.Decimal(repr(value)) if isinstance(value, float) else decimal.Decimal(value)
    if not number.is_finite():
        raise InvalidInput(f"{where}: DynamoDB cannot store {value!r}")
    try:
        _NUMBERS.create_decimal(number)
    except decimal.DecimalException as exc:
        raise InvalidInput(f"{where}: {value!r} does not fit a DynamoDB number "
                           "(38 significant digits, exponent -130 to 125)") from exc
    return str(number)


def from_attribute(value: Mapping[str, Any]) -> Any:
    """Return the Python value of a DynamoDB attribute value.

    Numbers come back as int when integral, else float; sets as sorted lists; binary
    as bytes. So attrs written as int, float, str, bool, None, list or dict round-trip
    (a float with an integral value, such as 2.0, comes back as the int 2).
    """
    ((kind, data),) = value.items()
    if kind == "S":
        return data
    if kind == "N":
        return _from_number(data)
    if kind == "BOOL":
        return bool(data)
    if kind == "NULL":
        return None
    if kind == "M":
        return from_attributes(data)
    if kind == "L":
        return [from_attribute(v) for v in data]
    if kind == "B":
        return bytes(data)
    if kind == "SS":
        return sorted(data)
    if kind == "NS":
        return sorted(_from_number(n) for n in data)
    if kind == "BS":
        return sorted(bytes(b) for b in data)
    raise InvalidInput(f"unknown DynamoDB attribute type {kind!r}")


def from_attributes(values: Mapping[str, Any]) -> dict[str, Any]:
    """Return the Python mapping of a DynamoDB map or item."""
    return {name: from_attribute(value) for name, value in values.items()}


def _from_number(text: str) -> int | float:
    number = decimal.Decimal(text)
    if number == number.to_integral_value():
        return int(number)
    return float(number)


# -- item sizes ------------------------------------------------------------------------

def _value_size(value: Mapping[str, Any]) -> int:
    ((kind, data),) = value.items()
    if kind == "S":
        return len(data.encode("utf-8"))
    if kind == "N":
        return len(data.lstrip("-").replace(".", "")) // 2 + 2
    if kind == "B":
        return len(data)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "M":
        return 3 + sum(len(k.encode("utf-8")) + _value_size(v) + 1 for k, v in data.items())
    if kind == "L":
        return 3 + sum(_value_size(v) + 1 for v in data)
    return sum(_value_size({kind[0]: v}) for v in data)


def item_units(item: Mapping[str, Any]) -> int:
    """Write units of an item by DynamoDB's sizing rule: one per started KB (at least 1)."""
    return write_units(
        sum(len(name.encode("utf-8")) + _value_size(value) for name, value in item.items()))


# -- index-table items -------------------------------------------------------------------

def entry_item(entry: StoredEntry) -> dict[str, Any]:
    """The index-table item of an entry: ``pk``, ``sk``, ``id``, ``v`` and ``attrs``."""
    return {"pk": {"S": entry.shard_key}, "sk": {"S": encode_position(*entry.position)},
            "id": {"S": entry.item_id}, "v": {"N": str(entry.version)},
            "attrs": {"M": to_attributes(entry.attrs)}}


def entry_key(entry: StoredEntry) -> dict[str, Any]:
    """The key (``pk``, ``sk``) of an entry's item."""
    return {"pk": {"S": entry.shard_key}, "sk": {"S": encode_position(*entry.position)}}


def entry_from_item(item: Mapping[str, Any]) -> StoredEntry:
    """The entry an index-table item holds."""
    sort, item_id = decode_position(item["sk"]["S"])
    return StoredEntry(shard_key=item["pk"]["S"], sort=sort, item_id=item_id,
                       attrs=from_attributes(item["attrs"]["M"]) if "attrs" in item else {},
                       version=int(item["v"]["N"]) if "v" in item else 1)


def placement_item_key(item_id: str) -> dict[str, Any]:
    """The key of an item's placement item."""
    return {"pk": {"S": placement_key(item_id)}, "sk": {"S": SINGLE}}


def placement_item(item_id: str, version: int, entry: StoredEntry | None) -> dict[str, Any]:
    """The placement item: its version, and the whole entry so ``locate`` reads once."""
    item = {**placement_item_key(item_id), "v": {"N": str(version)}}
    if entry is not None:
        item.update({"key": {"S": entry.shard_key}, "sort": {"S": entry.sort},
                     "ev": {"N": str(entry.version)},
                     "attrs": {"M": to_attributes(entry.attrs)}})
    return item


def placement_from_item(item_id: str, item: Mapping[str, Any]) -> Placement:
    """The placement a placement item holds (a tombstone when it names no entry)."""
    version = int(item["v"]["N"])
    entry = None
    if "key" in item:
        entry = StoredEntry(shard_key=item["key"]["S"], sort=item["sort"]["S"], item_id=item_id,
                            attrs=from_attributes(item.get("attrs", {"M": {}})["M"]),
                            version=int(item["ev"]["N"]))
    return Placement(item_id, version, entry)


def record_partition(namespace: str) -> str:
    """The partition key that holds every record of ``namespace``."""
    return RECORD_PREFIX + namespace


def record_item_key(namespace: str, key: str) -> dict[str, Any]:
    """The key of the item of record ``key`` of ``namespace``."""
    return {"pk": {"S": record_partition(namespace)}, "sk": {"S": key}}


def record_from_item(item: Mapping[str, Any]) -> Record:
    """The record a record item holds."""
    return Record(json.loads(item["body"]["S"]), int(item["revision"]["N"]))


def record_item(namespace: str, key: str, body: Mapping[str, Any],
                revision: int) -> dict[str, Any]:
    """A record item: its body as JSON text (exact, whatever its numbers) and revision."""
    try:
        text = json.dumps(dict(body), sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"record {key!r} of {namespace!r} is not a JSON document: {exc}") \
            from exc
    return {**record_item_key(namespace, key), "body": {"S": text},
            "revision": {"N": str(revision)}}
