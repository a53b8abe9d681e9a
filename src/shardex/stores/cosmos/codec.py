"""How entries, placements and records are written as Cosmos DB documents. Pure.

Keys use the Azure Tables store's text encoding (``shardex.stores.azure.keys``:
reversible, order-preserving, printable ASCII without ``# / ? \\ '``), which also makes
every key a valid Cosmos DB ``id`` (which refuses ``/ \\ ? #``) and gives one order
whatever the service compares. Attribute values are JSON text over properties ``a0``,
``a1``, ... with the types JSON lacks tagged, as on Azure (``shardex.stores.azure.codec``):
Cosmos DB keeps numbers as doubles, so an int past 2**53 or a float's type would not
survive native JSON. The container is partitioned by ``/pk``.

Documents of index ``I`` (``E`` is the key encoding, ``!`` its terminator):

=================  ===============================  ====================================
document           ``pk`` (logical partition)       ``id``
=================  ===============================  ====================================
entry              ``E(I) ! E(shard key)``          ``A E(sort) ! E(item id) ! D``
placement          ``E(I) ! E("#placement#" + id)``  ``P``
record             ``E(I) ! E("#record#")``          ``E(record key)``
=================  ===============================  ====================================

``D`` is 11 digits of a digest of the write's token (two documents of one item at one
position: a write and the one it replaces). An entry's fields: ``k`` shard key, ``s``
sort, ``i`` item id, ``v`` version, ``t`` the token of the write that made it, ``st``
its status (``p`` pending, ``c`` committed, ``m`` moving), ``mv`` the token moving it
away, and the attribute chunks. A placement's: ``v``, ``t``, ``h`` (the tokens before it,
JSON), and unless a tombstone ``k``, ``s``, ``ev`` and the attribute chunks (the Azure
placement entity's fields). A record's: ``key``, ``r`` revision, ``b0``... the body.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from shardex.errors import InvalidInput, InvalidKey, MalformedItem
from shardex.model.entries import Placement, Record, StoredEntry
from shardex.stores.azure import codec as azure_codec
from shardex.stores.azure import keys
from shardex.stores.crosspart import COMMITTED, MOVING, PENDING
from shardex.stores.crosspart import owner_of as _owner_of

__all__ = [
    "COMMITTED",
    "MAX_ID_BYTES",
    "MAX_PARTITION_BYTES",
    "MOVING",
    "PENDING",
    "PLACEMENT_ID",
    "check_namespace",
    "entry_doc",
    "entry_from_doc",
    "entry_id",
    "entry_partition",
    "id_bounds",
    "namespace_prefix",
    "owner_of",
    "placement_doc",
    "placement_from_doc",
    "placement_partition",
    "record_doc",
    "record_from_doc",
    "record_id",
    "record_partition",
]

PLACEMENT_ID = "P"
# Cosmos DB: an id holds at most 1,023 bytes, a partition key value 2,048 (hash v2)
MAX_ID_BYTES = 1023
MAX_PARTITION_BYTES = 2048
_SYSTEM = ("_rid", "_self", "_etag", "_ts", "_attachments", "_lsn")


def _fits(key: str, limit: int, what: str, kind: str) -> str:
    if len(key) > limit:  # encoded keys are ASCII: a character a byte
        raise InvalidKey(f"{what} does not fit a Cosmos DB {kind}: encoded it takes "
                         f"{len(key)} bytes, and a {kind} holds at most {limit}; use shorter "
                         "values or item ids")
    return key


def _fits_partition(key: str, what: str) -> str:
    return _fits(key, MAX_PARTITION_BYTES, what, "partition key")


def entry_partition(namespace: str, shard_key: str) -> str:
    """The logical partition of the entries of ``shard_key`` in index ``namespace``."""
    return keys.entry_partition(namespace, shard_key, _fits_partition)


def placement_partition(namespace: str, item_id: str) -> str:
    """The logical partition of the placement of ``item_id`` in index ``namespace``."""
    return keys.placement_partition(namespace, item_id, _fits_partition)


def record_partition(namespace: str) -> str:
    """The logical partition of the records of index ``namespace``."""
    return keys.record_partition(namespace, _fits_partition)


def check_namespace(namespace: str) -> None:
    """InvalidKey unless index ``namespace`` leaves room for its records and placements."""
    keys.check_namespace(namespace, _fits_partition)


def namespace_prefix(namespace: str) -> str:
    """The start of every partition key of index ``namespace``."""
    return keys.encode_text(namespace) + keys.TERMINATOR


def record_id(key: str) -> str:
    """The id of record ``key``."""
    return _fits(keys.encode_text(key), MAX_ID_BYTES, f"record key {key[:60]!r}", "id")


def entry_id(sort: str, item_id: str, token: str) -> str:
    """The id of an entry written by ``token``: its position's code, then the digest."""
    return _fits(keys.ASC + keys.position_prefix(sort, item_id) + keys.token_digest(token),
                 MAX_ID_BYTES, f"the entry of item {item_id[:60]!r} at sort {sort[:60]!r}",
                 "id")


def id_bounds(after: tuple[str, str] | None, *, descending: bool) -> str | None:
    """The id bound of the entries strictly beyond ``after`` (None: no bound).

    Ascending: ids above the bound; descending: ids below it. A position's ids are its
    code and digest digits, which sort below ``~``, and no code is a prefix of another's.
    """
    if after is None:
        return None
    code = keys.ASC + keys.position_prefix(*after)
    return code if descending else code + "~"


def _clean(doc: Mapping[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in doc.items() if name not in _SYSTEM}


MAX_DOCUMENT_BYTES = 2 * 1024 * 1024  # as the service counts it: UTF-8 JSON


def _sized(doc: dict[str, Any], what: str) -> dict[str, Any]:
    """``doc``, if Cosmos DB holds it; InvalidInput naming ``what`` and the limit if not.

    Its JSON is measured only when a bound (every character escaped to six bytes) could
    pass the limit: a document of a few KB costs a sum, not a second encoding."""
    bound = sum(6 * len(value) if isinstance(value, str) else 32 for value in doc.values()) \
        + sum(6 * len(name) + 8 for name in doc)
    if bound > MAX_DOCUMENT_BYTES:
        size = len(json.dumps(doc, ensure_ascii=False, separators=(",", ":"),
                              default=str).encode("utf-8", "surrogatepass"))
        if size > MAX_DOCUMENT_BYTES:
            raise InvalidInput(f"{what} takes {size:,} bytes as a Cosmos DB document; a "
                               f"document holds at most {MAX_DOCUMENT_BYTES:,} (2 MB)")
    return doc


def entry_doc(partition: str, entry: StoredEntry, token: str) -> dict[str, Any]:
    """The document of ``entry`` written by ``token``, pending."""
    return _sized({"id": entry_id(entry.sort, entry.item_id, token), "pk": partition,
                   "k": entry.shard_key, "s": entry.sort, "i": entry.item_id,
                   "v": str(entry.version), "t": token, "st": PENDING,
                   **azure_codec._attr_properties(entry.attrs)},
                  f"the entry of item {entry.item_id!r}")


def _text(doc: Mapping[str, Any], name: str, where: str) -> str:
    value = doc.get(name)
    if not isinstance(value, str):
        raise MalformedItem(f"{where}: its field {name!r} is {value!r}, not text")
    return value


def _number(doc: Mapping[str, Any], name: str, where: str, least: int) -> int:
    text = doc.get(name)
    if not isinstance(text, str) or not text.isascii() or not text.isdigit() \
            or int(text) < least:
        raise MalformedItem(f"{where}: its field {name!r} is {text!r}, not a number "
                            f">= {least} as decimal text")
    return int(text)


def entry_from_doc(doc: Mapping[str, Any], where: str) -> StoredEntry:
    """The entry a document holds; MalformedItem naming ``where`` if it is damaged."""
    return StoredEntry(shard_key=_text(doc, "k", where), sort=_text(doc, "s", where),
                       item_id=_text(doc, "i", where),
                       attrs=azure_codec.attrs_from(doc, where),
                       version=_number(doc, "v", where, 1))


def owner_of(doc: Mapping[str, Any], placement: Placement | None) -> bool:
    """True if ``placement`` names the write that made the entry document ``doc``."""
    return _owner_of(doc, placement, item_field="i")


def placement_doc(partition: str, item_id: str, version: int, entry: StoredEntry | None,
                  token: str, history: tuple[str, ...]) -> dict[str, Any]:
    """The placement document of a write (a tombstone when ``entry`` is None)."""
    entity = azure_codec.placement_entity(partition, item_id, version, entry, token, history,
                                          checked=False)
    del entity["PartitionKey"], entity["RowKey"]
    return _sized({"id": PLACEMENT_ID, "pk": partition, **entity},
                  f"the placement of item {item_id!r}")


def placement_from_doc(item_id: str, doc: Mapping[str, Any]) -> Placement:
    """The Placement a document holds; ``located`` carries its ETag, version and token."""
    return azure_codec.placement_from_entity(item_id, _clean(doc),
                                             _text(doc, "_etag", f"placement of {item_id!r}"))


def record_doc(partition: str, key: str, body: Mapping[str, Any],
               revision: int) -> dict[str, Any]:
    """The document of record ``key`` at ``revision``."""
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return {"id": record_id(key), "pk": partition, "key": key, "r": str(revision),
            **azure_codec.chunked("b", text)}


def record_from_doc(doc: Mapping[str, Any], where: str) -> Record:
    """The Record a document holds; MalformedItem naming ``where`` if it is damaged."""
    return azure_codec.record_from_entity(doc, where)
