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
from collections.abc import Mapping
from typing import Any

from shardex.capacity import write_units
from shardex.errors import InvalidInput, MalformedItem
from shardex.keys import RECORD_PREFIX, placement_key
from shardex.model.entries import Placement, Position, Record, StoredEntry, is_token
from shardex.model.values import check_set, number_text, number_value

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
    "read_history",
    "read_token",
    "read_version",
    "record_from_item",
    "record_item",
    "record_item_key",
    "record_partition",
    "same_attribute",
    "to_attribute",
    "to_attributes",
    "value_size",
]

SEP = "\x00"
# the one sort key value of placement and owner items (their partition key says it all)
SINGLE = "#"


def encode_position(sort: str, item_id: str) -> str:
    """Return the string key for ``(sort, item_id)`` whose byte order is their order.

    A sort value with a NUL is no entry's here (shardex refuses one in the sorts it
    writes) but may bound a query: a cursor carries one where an application's own GSI
    sort attribute held it, and a cursor's position is checked, not trusted. In
    ``(sort, item_id)`` order such a position lies after every entry whose sort is the
    part before its first NUL and before every greater sort, so it is bound there: that
    part and ``\x01``, which every key of the first run is below and every key of the
    others above. A query then reads from a cursor what memory:// and Azure read.
    """
    if SEP in sort:
        return f"{sort.partition(SEP)[0]}\x01"
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
    """Return the DynamoDB attribute value of a Python value.

    None, bool, int, float (finite, at most 38 significant digits), Decimal, str,
    bytes, lists and tuples (as L), mappings with str keys (as M) and non-empty sets of
    text, numbers or bytes (as SS, NS, BS) are accepted (``shardex.model.values`` has
    the rules, which ``Store.place`` checks first); anything else raises InvalidInput
    naming ``where``. ``from_attribute`` turns the result back into an equal value.
    """
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int | float | decimal.Decimal):
        return {"N": number_text(value, where)}
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, bytes | bytearray):
        return {"B": bytes(value)}
    if isinstance(value, list | tuple):
        return {"L": [to_attribute(v, f"{where}[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, Mapping):
        return {"M": to_attributes(value, where)}
    if isinstance(value, set | frozenset):
        kind = check_set(value, where)
        if kind == "NS":
            return {kind: sorted((number_text(v, where) for v in value), key=decimal.Decimal)}
        return {kind: sorted(value)}
    raise InvalidInput(f"{where}: a {type(value).__name__} cannot be stored in DynamoDB; "
                       "use None, bool, int, float, str, bytes, list, dict or a set")


def to_attributes(values: Mapping[str, Any], where: str = "attrs") -> dict[str, Any]:
    """Return the DynamoDB map of a mapping with string keys (see ``to_attribute``)."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        if not isinstance(name, str):
            raise InvalidInput(f"{where}: attribute names must be text, got {name!r}")
        out[name] = to_attribute(value, f"{where}[{name!r}]")
    return out


def from_attribute(value: Mapping[str, Any]) -> Any:
    """Return the Python value of a DynamoDB attribute value, losing nothing.

    Numbers come back as int when integral, as float when a float holds the number
    exactly (its shortest text is the same number), else as Decimal (up to DynamoDB's 38
    digits); sets (SS, NS, BS) as frozensets; binary as bytes. So ``to_attribute`` of
    the result is the same attribute value (``same_attribute``), and attrs written as
    int, float, Decimal, str, bool, None, bytes, list, dict or set round-trip (a float
    with an integral value, such as 2.0, comes back as the int 2).
    """
    ((kind, data),) = value.items()
    if kind == "S":
        return data
    if kind == "N":
        return number_value(data)
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
        return frozenset(data)
    if kind == "NS":
        return frozenset(number_value(n) for n in data)
    if kind == "BS":
        return frozenset(bytes(b) for b in data)
    raise InvalidInput(f"unknown DynamoDB attribute type {kind!r}")


def from_attributes(values: Mapping[str, Any]) -> dict[str, Any]:
    """Return the Python mapping of a DynamoDB map or item."""
    return {name: from_attribute(value) for name, value in values.items()}


def same_attribute(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """True if two DynamoDB attribute values are equal as DynamoDB compares them.

    Numbers by value (``1.50`` is ``1.5``), sets whatever their order, maps and lists
    element by element; None (absent) equals only None.
    """
    if a is None or b is None:
        return a is b
    return bool(_comparable(a) == _comparable(b))


def _comparable(value: Mapping[str, Any]) -> Any:
    ((kind, data),) = value.items()
    if kind == "N":
        return (kind, decimal.Decimal(data))
    if kind == "NS":
        return (kind, frozenset(decimal.Decimal(n) for n in data))
    if kind in ("SS", "BS"):
        return (kind, frozenset(bytes(v) if kind == "BS" else v for v in data))
    if kind == "B":
        return (kind, bytes(data))
    if kind == "M":
        return (kind, {name: _comparable(v) for name, v in data.items()})
    if kind == "L":
        return (kind, [_comparable(v) for v in data])
    return (kind, data)


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


def item_units(item: Mapping[str, Any], sized: tuple[Any, int] | None = None) -> int:
    """Write units of an item by DynamoDB's sizing rule: one per started KB (at least 1).

    ``sized``: an attribute value already measured, ``(value, its size)``, taken as is
    where the item holds that very value (the attrs map two items share).
    """
    size = 0
    for name, value in item.items():
        size += len(name) if name.isascii() else len(name.encode("utf-8"))
        text = value.get("S")
        if type(text) is str and len(value) == 1:  # most attributes: text, measured here
            size += len(text) if text.isascii() else len(text.encode("utf-8"))
        elif sized is not None and value is sized[0]:
            size += sized[1]
        else:
            size += _value_size(value)
    return write_units(size)


def value_size(value: Mapping[str, Any]) -> int:
    """The size in bytes of one attribute value as DynamoDB counts it."""
    return _value_size(value)


# -- index-table items -------------------------------------------------------------------

def entry_item(entry: StoredEntry, attrs: dict[str, Any] | None = None) -> dict[str, Any]:
    """The index-table item of an entry: ``pk``, ``sk``, ``id``, ``v`` and ``attrs``.

    ``attrs``: the entry's attrs already encoded (``{"M": ...}``), to encode them once.
    """
    return {"pk": {"S": entry.shard_key}, "sk": {"S": encode_position(*entry.position)},
            "id": {"S": entry.item_id}, "v": {"N": str(entry.version)},
            "attrs": attrs if attrs is not None else {"M": to_attributes(entry.attrs)}}


def entry_key(entry: StoredEntry) -> dict[str, Any]:
    """The key (``pk``, ``sk``) of an entry's item."""
    return {"pk": {"S": entry.shard_key}, "sk": {"S": encode_position(*entry.position)}}


def entry_from_item(item: Mapping[str, Any]) -> StoredEntry:
    """The entry an index-table item holds.

    Raises MalformedItem, naming the item and what is wrong, for an item not in the
    shape shardex writes (a hand edit, another tool).
    """
    try:
        sort, item_id = decode_position(item["sk"]["S"])
        attrs = from_attributes(item["attrs"]["M"]) if "attrs" in item else {}
        version = read_version(item["v"], f"entry {item_id!r} attribute 'v'") \
            if "v" in item else 1
        return StoredEntry(shard_key=item["pk"]["S"], sort=sort, item_id=item_id,
                           attrs=attrs, version=version)
    except MalformedItem:
        raise
    except (KeyError, TypeError, AttributeError, ValueError, decimal.DecimalException,
            InvalidInput) as exc:
        where = _shown({k: item[k] for k in ("pk", "sk") if k in item})
        raise MalformedItem(f"the index-table item {where} is not an entry in the shape "
                            f"shardex writes ({type(exc).__name__}: {exc})") from None


def placement_item_key(item_id: str) -> dict[str, Any]:
    """The key of an item's placement item."""
    return {"pk": {"S": placement_key(item_id)}, "sk": {"S": SINGLE}}


def placement_item(item_id: str, version: int, entry: StoredEntry | None, token: str,
                   history: tuple[str, ...], attrs: dict[str, Any] | None = None
                   ) -> dict[str, Any]:
    """The placement item: version, token ``t``, history ``h``, and the whole entry.

    The entry is kept whole so ``locate`` reads once. ``attrs`` as for ``entry_item``.
    """
    item = {**placement_item_key(item_id), "v": {"N": str(version)}, "t": {"S": token},
            "h": {"L": [{"S": earlier} for earlier in history]}}
    if entry is not None:
        item.update({"key": {"S": entry.shard_key}, "sort": {"S": entry.sort},
                     "ev": {"N": str(entry.version)},
                     "attrs": attrs if attrs is not None else {"M": to_attributes(entry.attrs)}})
    return item


def read_version(value: Any, where: str) -> int:
    """The integer >= 0 a stored version attribute holds; MalformedItem naming ``where``."""
    text = value.get("N") if isinstance(value, Mapping) else None
    if type(text) is str and text.isascii() and text.isdigit():
        return int(text)  # as every version shardex writes: a listing reads one an entry
    try:
        number = decimal.Decimal(text) if isinstance(text, str) else None
    except decimal.InvalidOperation:
        number = None
    if number is None or not number.is_finite() or number != number.to_integral_value() \
            or number < 0:
        raise MalformedItem(f"{where} is {_shown(value)}, not a whole number >= 0: shardex "
                            "keeps its write versions there; fix or remove the attribute")
    return int(number)


def read_token(value: Any, where: str) -> str:
    """The write token a stored token attribute holds; MalformedItem naming ``where``."""
    text = value.get("S") if isinstance(value, Mapping) else None
    if not is_token(text):
        raise MalformedItem(f"{where} is {_shown(value)}, not a shardex write token")
    return str(text)


def read_history(value: Any, where: str) -> tuple[str, ...]:
    """The tokens a stored history attribute holds; MalformedItem naming ``where``."""
    tokens = value.get("L") if isinstance(value, Mapping) else None
    if not isinstance(tokens, list):
        raise MalformedItem(f"{where} is {_shown(value)}, not a list of write tokens")
    out = []
    for element in tokens:
        text = element.get("S") if isinstance(element, Mapping) else None
        if text != "" and not is_token(text):
            raise MalformedItem(f"{where} holds {_shown(element)}, not a write token")
        out.append(str(text))
    return tuple(out)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def placement_from_item(item_id: str, item: Mapping[str, Any]) -> Placement:
    """The placement a placement item holds (a tombstone when it names no entry).

    Raises MalformedItem, naming the item and attribute, for a placement item that is
    not in the shape shardex writes.
    """
    where = f"placement of item {item_id!r}"
    try:
        version = read_version(item.get("v"), f"{where} attribute 'v'")
        token = read_token(item["t"], f"{where} attribute 't'") if "t" in item else None
        history = read_history(item["h"], f"{where} attribute 'h'") if "h" in item else ()
        entry = None
        if "key" in item:
            entry = StoredEntry(shard_key=item["key"]["S"], sort=item["sort"]["S"],
                                item_id=item_id,
                                attrs=from_attributes(item.get("attrs", {"M": {}})["M"]),
                                version=read_version(item.get("ev"), f"{where} attribute 'ev'"))
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        if isinstance(exc, MalformedItem):
            raise
        raise MalformedItem(f"{where} is not in the shape shardex writes "
                            f"({type(exc).__name__}: {exc})") from None
    return Placement(item_id, version, entry, token, history)


def record_partition(namespace: str) -> str:
    """The partition key that holds every record of ``namespace``."""
    return RECORD_PREFIX + namespace


def record_item_key(namespace: str, key: str) -> dict[str, Any]:
    """The key of the item of record ``key`` of ``namespace``."""
    return {"pk": {"S": record_partition(namespace)}, "sk": {"S": key}}


def record_from_item(item: Mapping[str, Any], where: str) -> Record:
    """The record a record item holds; MalformedItem naming ``where`` if it is damaged."""
    try:
        body = json.loads(item["body"]["S"])
        revision = read_version(item.get("revision"), f"{where} attribute 'revision'")
    except MalformedItem:
        raise
    except (KeyError, TypeError, AttributeError, ValueError, RecursionError) as exc:
        raise MalformedItem(f"{where} is damaged: its body is not a JSON document "
                            f"({type(exc).__name__}: {str(exc)[:120]})") from None
    if not isinstance(body, dict):
        raise MalformedItem(f"{where} is damaged: its body is JSON {type(body).__name__}, "
                            "not an object")
    return Record(body, revision)


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
