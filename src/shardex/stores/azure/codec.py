"""How entries, placements and records are written as Azure Table entities.

Pure: no I/O and no driver import. Keys come from ``shardex.stores.azure.keys``.
Azure properties are flat and typed (string, integer, double, ...), each string at most
64 KiB (32,768 UTF-16 code units); shardex's attributes are nested JSON-like values. So
attributes are written as JSON text split over properties ``a0``, ``a1``, ... of at most
``CHUNK_CHARS`` characters, with the types JSON lacks tagged (a one-key object):

=========================================  ==============================================
value                                      JSON
=========================================  ==============================================
bytes (Edm.Binary)                         ``{"$b": base64}``
Decimal                                    ``{"$d": text}``
a set (text, numbers or bytes alone)       ``{"$s": [elements]}``, back as a frozenset
a float JSON cannot hold (NaN, infinities) ``{"$f": "NaN" | "Infinity" | "-Infinity"}``
uuid.UUID (Edm.Guid)                       ``{"$u": text}``
datetime (Edm.DateTime)                    ``{"$t": isoformat}``; one the Azure SDK read
                                           (its service text, 7 fractional digits, kept):
                                           ``{"$ts": [isoformat, service text]}``
the SDK's ``EntityProperty(value, type)``  ``{"$e": [EDM type name, value]}``
a mapping whose only key starts with ``$``  ``{"$m": mapping}``
=========================================  ==============================================

So every value the store accepts (``AZURE_VALUES``: DynamoDB's, and the EDM types as the
Azure SDK hands them to an application) comes back equal and of its type: ints stay
ints (Int32 and Int64), floats floats, an ``EntityProperty`` (the SDK's Int64, say) an
``EntityProperty``, a datetime the SDK read keeps its service text (a datetime with a
zone from ``zoneinfo`` comes back with its fixed offset, the same instant); tuples come
back as lists. Versions are written as decimal text (a version may pass Int64). An
entity holds at most 1 MiB; one that would not fit is refused before any request.

Entities (``P`` is a PartitionKey, ``R`` a RowKey; see ``keys``):

- entry row, twice (the ascending row and its mirror): ``k`` shard key, ``s`` sort, ``id``
  item id, ``v`` version, ``t`` the token of the write that made it, ``st`` its status
  (``p`` pending, ``c`` committed, ``m`` moving; the store's docstring says what they
  promise), ``mv`` the token of the write moving it away, and the attribute chunks;
- placement (R ``P``): ``v``, ``t``, ``h`` (the tokens before it, JSON), and unless a
  tombstone the entry: ``k``, ``s``, ``ev`` and the attribute chunks;
- record (R the encoded record key): ``key``, ``r`` revision, ``b0``... the body as JSON.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import math
import uuid
from collections.abc import Mapping
from typing import Any

from shardex.errors import InvalidInput, MalformedItem, MissingDependency
from shardex.model.entries import Placement, Record, StoredEntry, is_token
from shardex.model.values import ValueRules, check_value
from shardex.stores.azure import keys
from shardex.stores.crosspart import COMMITTED, MOVING, PENDING

__all__ = [
    "AZURE_VALUES",
    "CHUNK_CHARS",
    "COMMITTED",
    "MAX_ENTITY_BYTES",
    "MOVING",
    "PENDING",
    "PLACEMENT_ROW",
    "ServiceDatetime",
    "attrs_from",
    "chunked",
    "entry_from_row",
    "entry_rows",
    "placement_entity",
    "placement_from_entity",
    "record_entity",
    "record_from_entity",
    "text_size",
    "unchunked",
]

PLACEMENT_ROW = "P"
# characters a string property holds at most, counting an astral character twice
CHUNK_CHARS = 16_384
MAX_ENTITY_BYTES = 1024 * 1024


# The EDM types and the Python types the Azure SDK gives their values
_EDM: dict[str, tuple[type, ...]] = {
    "Edm.Binary": (bytes,), "Edm.Boolean": (bool,), "Edm.DateTime": (datetime.datetime,),
    "Edm.Double": (float,), "Edm.Guid": (uuid.UUID,), "Edm.Int32": (int,),
    "Edm.Int64": (int,), "Edm.String": (str,)}
_INT_BITS = {"Edm.Int32": 31, "Edm.Int64": 63}
_FLOATS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class ServiceDatetime(datetime.datetime):
    """A DateTime as Azure stored it: the datetime, and the service's own text of it.

    The Azure SDK reads an Edm.DateTime as a datetime that keeps the service's text
    (``tables_service_value``, with 7 fractional digits where Python keeps 6) and writes
    that text back; shardex hands such a value back the same way.
    """

    _service_value: str

    @property
    def tables_service_value(self) -> str:
        """The service's text of the DateTime, as the SDK's own datetimes name it."""
        return getattr(self, "_service_value", "")


def _entity_property(value: Any) -> bool:
    """True for the Azure SDK's ``EntityProperty(value, edm_type)`` (a named tuple)."""
    return isinstance(value, tuple) and getattr(type(value), "_fields", None) == (
        "value", "edm_type")


def _azure_value(value: Any, where: str) -> bool:
    """The values Azure holds beyond DynamoDB's: any double, UUID, datetime, EntityProperty."""
    if isinstance(value, float | uuid.UUID | datetime.datetime):
        return True  # Edm.Double holds NaN and the infinities too
    if not _entity_property(value):
        return False
    inner, edm = value
    name = str(getattr(edm, "value", edm))
    kinds = _EDM.get(name)
    if kinds is None:
        raise InvalidInput(f"{where}: EntityProperty of EDM type {name!r}; Azure Table "
                           f"Storage has {', '.join(sorted(_EDM))}")
    if not isinstance(inner, kinds) or (isinstance(inner, bool) and name != "Edm.Boolean"):
        raise InvalidInput(f"{where}: EntityProperty({inner!r}, {name}) holds a "
                           f"{type(inner).__name__}, not the {kinds[0].__name__} of {name}")
    bits = _INT_BITS.get(name)
    if bits is not None and not -(2**bits) <= inner < 2**bits:
        raise InvalidInput(f"{where}: {inner} does not fit {name}")
    check_value(inner, where, rules=AZURE_VALUES)
    return True


AZURE_VALUES = ValueRules("Azure Table Storage", _azure_value)


def _plain(value: Any) -> Any:
    """A JSON value for a storable attribute value (types JSON lacks are tagged)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$f": json.dumps(value)}
    if isinstance(value, decimal.Decimal):
        return {"$d": str(value)}
    if isinstance(value, bytes | bytearray):
        return {"$b": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, uuid.UUID):
        return {"$u": str(value)}
    if isinstance(value, datetime.datetime):
        service = getattr(value, "tables_service_value", "")
        if service:
            return {"$ts": [value.isoformat(), service]}
        return {"$t": value.isoformat()}
    if _entity_property(value):
        return {"$e": [str(getattr(value[1], "value", value[1])), _plain(value[0])]}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return {"$s": [_plain(v) for v in sorted(value)]}
    mapping = {name: _plain(v) for name, v in value.items()}
    if len(mapping) == 1 and next(iter(mapping)).startswith("$"):
        return {"$m": mapping}
    return mapping


def _typed(value: Any) -> Any:
    """The attribute value ``_plain`` made ``value`` from."""
    if isinstance(value, list):
        return [_typed(v) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        ((tag, inner),) = value.items()
        decode = _TAGS.get(tag)
        if decode is not None:
            return decode(inner)
    return {name: _typed(v) for name, v in value.items()}


def _service_datetime(inner: list[str]) -> ServiceDatetime:
    iso, service = inner
    moment = datetime.datetime.fromisoformat(iso)
    found = ServiceDatetime(moment.year, moment.month, moment.day, moment.hour,
                            moment.minute, moment.second, moment.microsecond, moment.tzinfo,
                            fold=moment.fold)
    found._service_value = service
    return found


def _typed_property(inner: list[Any]) -> Any:
    try:
        from azure.data.tables import EdmType, EntityProperty
    except ImportError as exc:
        raise MissingDependency("azure-data-tables", "azure") from exc
    name, held = inner
    return EntityProperty(_typed(held), EdmType(name))


_TAGS: dict[str, Any] = {
    "$d": decimal.Decimal,
    "$b": base64.b64decode,
    "$m": lambda inner: {name: _typed(v) for name, v in inner.items()},
    "$s": lambda inner: frozenset(_typed(v) for v in inner),
    "$f": lambda inner: _FLOATS[inner],
    "$u": uuid.UUID,
    "$t": datetime.datetime.fromisoformat,
    "$ts": _service_datetime,
    "$e": _typed_property,
}


def chunked(prefix: str, text: str) -> dict[str, str]:
    """Split ``text`` over properties ``prefix0``, ``prefix1``, ... (at least one)."""
    parts = [text[i:i + CHUNK_CHARS] for i in range(0, len(text), CHUNK_CHARS)] or [""]
    return {f"{prefix}{i}": part for i, part in enumerate(parts)}


def unchunked(entity: Mapping[str, Any], prefix: str) -> str | None:
    """Join the properties ``chunked`` wrote; None if there are none."""
    parts: list[str] = []
    while True:
        part = entity.get(f"{prefix}{len(parts)}")
        if not isinstance(part, str):
            return "".join(parts) if parts else None
        parts.append(part)


def _attr_properties(attrs: Mapping[str, Any]) -> dict[str, str]:
    text = json.dumps(_plain(attrs), ensure_ascii=False, separators=(",", ":"),
                      allow_nan=False)
    return chunked("a", text)


def attrs_from(entity: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The attributes held in ``entity``'s chunks; MalformedItem naming ``where`` if damaged."""
    text = unchunked(entity, "a")
    if text is None:
        return {}
    try:
        # without a tag ("$d", "$m", ...) anywhere, _typed would only copy what json made
        attrs = _typed(json.loads(text)) if '"$' in text else json.loads(text)
    except (ValueError, TypeError, KeyError, AttributeError, decimal.DecimalException) as exc:
        raise MalformedItem(f"{where}: its attributes (a0, a1, ...) are not shardex's "
                            f"JSON: {exc}") from exc
    if not isinstance(attrs, dict):
        raise MalformedItem(f"{where}: its attributes are {type(attrs).__name__}, not a map")
    return attrs


def text_size(entity: Mapping[str, Any]) -> int:
    """Characters of ``entity``'s text properties: what a query page's byte bound counts."""
    values = entity.values()
    try:
        # a row shardex wrote is all text: no need to test each property's type
        return sum(map(len, values))
    except TypeError:
        return sum(len(v) for v in values if isinstance(v, str))


def _size(entity: Mapping[str, Any]) -> int:
    """Bytes Azure counts for an entity: UTF-16 text, with some overhead a property."""
    total = 4
    for name, value in entity.items():
        total += 8 + 2 * len(name) + (2 * len(value) if isinstance(value, str) else 8)
    return total


def _checked(entity: dict[str, Any], what: str) -> dict[str, Any]:
    size = _size(entity)
    if size > MAX_ENTITY_BYTES:
        raise InvalidInput(f"{what} takes {size:,} bytes as an Azure Table entity; an entity "
                           f"holds at most {MAX_ENTITY_BYTES:,} (1 MiB)")
    return entity


def _number(entity: Mapping[str, Any], name: str, where: str, least: int = 0) -> int:
    value = entity.get(name)
    text = value if isinstance(value, str) else None
    if text is None or not text.isdigit() or not text.isascii() or int(text) < least:
        raise MalformedItem(f"{where}: its attribute {name!r} is {value!r}, not a number "
                            f">= {least} as decimal text")
    return int(text)


def _text(entity: Mapping[str, Any], name: str, where: str) -> str:
    value = entity.get(name)
    if not isinstance(value, str):
        raise MalformedItem(f"{where}: its attribute {name!r} is {value!r}, not text")
    return value


def entry_rows(partition: str, entry: StoredEntry, token: str) -> list[dict[str, Any]]:
    """The ascending row and its mirror for ``entry``, written by the write ``token``."""
    body = {"k": entry.shard_key, "s": entry.sort, "id": entry.item_id,
            "v": str(entry.version), "t": token, "st": PENDING,
            **_attr_properties(entry.attrs)}
    rows = [{"PartitionKey": partition,
             "RowKey": keys.row_key(entry.sort, entry.item_id, token, descending=descending),
             **body} for descending in (False, True)]
    _checked(rows[0], f"the entry of item {entry.item_id!r}")
    return rows


def entry_from_row(row: Mapping[str, Any], where: str) -> StoredEntry:
    """The entry an entry row holds; MalformedItem naming ``where`` if it is damaged."""
    get = row.get
    shard_key, sort, item_id, version, text = get("k"), get("s"), get("id"), get("v"), \
        get("a0")
    # the common row, checked inline: a listing decodes every row it returns, and
    # this is most of shardex's own CPU in one (one chunk of attributes, no tags)
    if type(shard_key) is str and type(sort) is str and type(item_id) is str and \
            type(version) is str and version.isdigit() and version.isascii() and \
            type(text) is str and "a1" not in row and '"$' not in text:
        number = int(version)
        try:
            attrs = json.loads(text)
        except ValueError:
            attrs = None
        if number >= 1 and type(attrs) is dict:
            return StoredEntry(shard_key, sort, item_id, attrs, number)
    return StoredEntry(shard_key=_text(row, "k", where), sort=_text(row, "s", where),
                       item_id=_text(row, "id", where), attrs=attrs_from(row, where),
                       version=_number(row, "v", where, least=1))


def placement_entity(partition: str, item_id: str, version: int, entry: StoredEntry | None,
                     token: str, history: tuple[str, ...], *,
                     checked: bool = True) -> dict[str, Any]:
    """The placement entity of a write (a tombstone when ``entry`` is None), held to an
    entity's size unless not ``checked`` (a Cosmos DB document, held to its own)."""
    entity: dict[str, Any] = {"PartitionKey": partition, "RowKey": PLACEMENT_ROW,
                              "v": str(version), "t": token,
                              "h": json.dumps(list(history), separators=(",", ":"))}
    if entry is not None:
        entity.update({"k": entry.shard_key, "s": entry.sort, "ev": str(entry.version),
                       **_attr_properties(entry.attrs)})
    return _checked(entity, f"the placement of item {item_id!r}") if checked else entity


def placement_from_entity(item_id: str, entity: Mapping[str, Any], etag: str) -> Placement:
    """The Placement a placement entity holds; ``located`` carries its ETag.

    ``located`` is ``(("etag", etag), ("version", v), ("token", t))``: the compare-and-set
    of a write conditioned on this placement is If-Match on that ETag, which the store
    uses only while the expected version and token are still these.
    """
    where = f"the placement of item {item_id!r}"
    version = _number(entity, "v", where)
    token = entity.get("t")
    if token is not None and not is_token(token):
        raise MalformedItem(f"{where}: its attribute 't' is {token!r}, not a write token")
    try:
        history = json.loads(_text(entity, "h", where))
    except ValueError as exc:
        raise MalformedItem(f"{where}: its attribute 'h' is not a JSON list") from exc
    if not isinstance(history, list) or not all(isinstance(t, str) for t in history):
        raise MalformedItem(f"{where}: its attribute 'h' is {history!r}, not a list of tokens")
    entry = None
    if "k" in entity:
        entry = StoredEntry(shard_key=_text(entity, "k", where), sort=_text(entity, "s", where),
                            item_id=item_id, attrs=attrs_from(entity, where),
                            version=_number(entity, "ev", where, least=1))
    return Placement(item_id, version, entry, token, tuple(history),
                     (("etag", etag), ("version", version), ("token", token)))


def record_entity(partition: str, key: str, body: Mapping[str, Any],
                  revision: int) -> dict[str, Any]:
    """The entity of record ``key`` at ``revision``."""
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    entity = {"PartitionKey": partition,
              "RowKey": keys.check_key(keys.encode_text(key), f"record key {key[:60]!r}"),
              "key": key, "r": str(revision), **chunked("b", text)}
    return _checked(entity, f"record {key!r}")


def record_from_entity(entity: Mapping[str, Any], where: str) -> Record:
    """The Record a record entity holds; MalformedItem naming ``where`` if it is damaged."""
    text = unchunked(entity, "b")
    try:
        body = json.loads(text) if text is not None else None
    except ValueError as exc:
        raise MalformedItem(f"{where}: its body (b0, b1, ...) is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise MalformedItem(f"{where}: its body is {type(body).__name__}, not a JSON object")
    return Record(body, _number(entity, "r", where, least=1))
