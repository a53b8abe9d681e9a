"""What a store can hold as an attribute value: DynamoDB's rules, checked once for every store.

The memory store models DynamoDB, so it refuses what DynamoDB refuses, with the same
error (InvalidInput naming the attribute): code tested on ``memory://`` does not fail
in production on a value DynamoDB cannot store. ``Store.place`` runs these checks for
every backend before any request, with the store's ``ValueRules``
(``capabilities.values``), and the DynamoDB codec writes numbers with ``number_text``;
no backend keeps a copy of the rules.

Storable everywhere (``DYNAMODB_VALUES``): None, bool, int and float (finite, at most 38
significant digits, exponent from -130 to +125), Decimal (the same), str and attribute
names (valid Unicode: no unpaired surrogate; a name at most 64 KB, ``MAX_NAME_BYTES``),
bytes, lists and tuples, mappings with text keys, nested at most 32 levels counted from
the store's item (an entry's attributes start two down: 30 levels of their own), and
sets as DynamoDB has them (SS, NS, BS): a non-empty set (or frozenset) of text alone, of
numbers alone or of bytes alone. An item is at most 400 KB (``MAX_ITEM_BYTES``), names
included: an entry is sized as the placement record that holds it
(``shardex.capacity.placement_bytes``).

A store that holds more says so with its own ``ValueRules``: Azure Table Storage adds
its EDM types (``shardex.stores.azure.codec.AZURE_VALUES``: any double, UUID, datetime,
and the Azure SDK's ``EntityProperty``).
"""

from __future__ import annotations

import decimal
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from shardex.errors import InvalidInput, brief

__all__ = ["DYNAMODB_VALUES", "MAX_DEPTH", "MAX_ITEM_BYTES", "MAX_NAME_BYTES", "ValueRules",
           "check_attrs", "check_document", "check_set", "check_text", "check_value",
           "dynamodb_attrs", "number_text", "number_value", "owned_attrs"]

MAX_ITEM_BYTES = 400 * 1024
MAX_NAME_BYTES = 64 * 1024
MAX_DEPTH = 32
_SMALL_INT = 10**38


@dataclass(frozen=True, slots=True)
class ValueRules:
    """The attribute values one store holds: DynamoDB's, and what ``extra`` adds.

    ``extra(value, where)`` is asked first about every value that is not text, a small
    int, None or a bool: it returns True for a value the store holds beyond DynamoDB's
    rules (raising InvalidInput, naming ``where``, for a bad one of its kinds), False to
    let DynamoDB's rules decide. ``name`` names the store family in messages.
    """

    name: str = "DynamoDB"
    extra: Callable[[Any, str], bool] | None = None


DYNAMODB_VALUES = ValueRules()


def check_text(text: str, where: str, store: str = "DynamoDB") -> None:
    """Raise InvalidInput if ``text`` holds an unpaired surrogate (not valid Unicode), which
    ``store`` (named in the message) cannot hold."""
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{where}: {text[:40]!r} is not valid text (an unpaired "
                           f"surrogate), which {store} cannot store") from exc


def number_text(value: int | float | decimal.Decimal, where: str,
                store: str = "DynamoDB") -> str:
    """Return a number as DynamoDB's ``N`` text; InvalidInput (naming ``store``, whose
    rules these are) if it cannot hold it."""
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInput(f"{where}: {store} cannot store {value!r}")
    number = decimal.Decimal(repr(value)) if isinstance(value, float) else decimal.Decimal(value)
    if not number.is_finite():
        raise InvalidInput(f"{where}: {store} cannot store {brief(value)}")
    # trailing zeros are not significant: DynamoDB holds 10**38 (1E+38)
    significant = len(bytes(number.as_tuple().digits).rstrip(b"\0"))
    if significant > 38 or (significant and not -130 <= number.adjusted() <= 125):
        # DynamoDB's range, held on every store but for the types a store holds besides
        # (an Azure double): a value tried on memory:// holds on DynamoDB
        raise InvalidInput(f"{where}: {brief(value)} does not fit the numbers shardex holds "
                           f"on {store}, DynamoDB's (38 significant digits, exponent -130 "
                           "to 125)")
    return str(number)


def number_value(text: str) -> int | float | decimal.Decimal:
    """The Python number DynamoDB's ``N`` text reads as: an int when integral, a float
    when a float holds it exactly (its shortest text is this number), else a Decimal."""
    digits = text[1:] if text[:1] == "-" else text
    if digits.isdigit() and digits.isascii():
        return int(text)  # the common case: a whole number, without a Decimal
    number = decimal.Decimal(text)
    if number == number.to_integral_value():
        return int(number)
    close = float(number)
    # a float when its shortest text is this very number, so it writes back the same
    return close if decimal.Decimal(repr(close)) == number else number


def check_value(value: Any, where: str, depth: int = 0,
                rules: ValueRules = DYNAMODB_VALUES) -> None:
    """Raise InvalidInput, naming ``where``, unless the store of ``rules`` can hold ``value``."""
    kind = type(value)
    if kind is str:
        check_text(value, where, rules.name)
        return
    if kind is int and -_SMALL_INT < value < _SMALL_INT:
        return
    if value is None or kind is bool:
        return
    if rules.extra is not None and rules.extra(value, where):
        return
    if isinstance(value, int | float | decimal.Decimal) and not isinstance(value, bool):
        number_text(value, where, rules.name)
    elif isinstance(value, str):
        check_text(value, where, rules.name)
    elif isinstance(value, bytes | bytearray):
        return
    elif isinstance(value, tuple) and hasattr(value, "_fields"):
        # a named tuple (Azure's EntityProperty among them) would come back a list, its
        # field names and meaning gone
        raise InvalidInput(f"{where}: {kind.__name__} is a named tuple, which {rules.name} "
                           "cannot store (it would read back as a list): store a dict or a "
                           "list")
    elif isinstance(value, list | tuple | Mapping):
        if depth >= MAX_DEPTH:
            raise InvalidInput(f"{where}: nested deeper than {MAX_DEPTH} levels counted from "
                               f"the store's item, which {rules.name} cannot store")
        if isinstance(value, Mapping):
            check_attrs(value, where, depth + 1, rules)
        else:
            for i, element in enumerate(value):
                check_value(element, f"{where}[{i}]", depth + 1, rules)
    elif isinstance(value, set | frozenset):
        check_set(value, where, rules.name)
    else:
        raise InvalidInput(f"{where}: a {kind.__name__} cannot be stored in {rules.name}; "
                           "use None, bool, int, float, Decimal, str, bytes, list, dict or a "
                           "set of text, numbers or bytes")


def check_set(value: set[Any] | frozenset[Any], where: str, store: str = "DynamoDB") -> str:
    """Return DynamoDB's type of a set (SS, NS or BS); InvalidInput naming ``where`` unless
    it is non-empty and holds text alone, numbers alone or bytes alone (DynamoDB's sets,
    which every store holds alike)."""
    if not value:
        raise InvalidInput(f"{where}: an empty set cannot be stored in {store} (a set is "
                           "never empty, as in DynamoDB); store None or leave the attribute "
                           "out")
    kinds = set()
    for element in value:
        if isinstance(element, str):
            check_text(element, where, store)
            kinds.add("SS")
        elif isinstance(element, bytes):
            kinds.add("BS")
        elif isinstance(element, int | float | decimal.Decimal) \
                and not isinstance(element, bool):
            number_text(element, where, store)
            kinds.add("NS")
        else:
            kinds.add(type(element).__name__)
    if len(kinds) != 1 or not kinds <= {"SS", "NS", "BS"}:
        raise InvalidInput(f"{where}: a set holds text alone, numbers alone or bytes alone "
                           f"(DynamoDB's SS, NS and BS), not {', '.join(sorted(kinds))}")
    return kinds.pop()


def check_attrs(attrs: Mapping[str, Any], where: str = "attrs", depth: int = 0,
                rules: ValueRules = DYNAMODB_VALUES) -> None:
    """Raise InvalidInput unless every name is non-empty text and every value storable."""
    for name, value in attrs.items():
        if type(name) is not str or not name:
            raise InvalidInput(f"{where}: attribute names must be non-empty text, got {name!r}")
        check_text(name, f"{where} name", rules.name)
        if len(name) > MAX_NAME_BYTES // 4 and (size := len(name.encode())) > MAX_NAME_BYTES:
            raise InvalidInput(f"{where}: an attribute name of {size:,} bytes "
                               f"({name[:20]!r}...), which {rules.name} cannot store: "
                               f"DynamoDB's names are at most {MAX_NAME_BYTES:,} bytes (64 KB)")
        check_value(value, f"{where}[{name!r}]", depth, rules)


def check_document(body: Mapping[str, Any], where: str, max_bytes: int = MAX_ITEM_BYTES) -> None:
    """Raise InvalidInput unless ``body`` is a JSON document (no NaN) of at most ``max_bytes``.

    Records (the routing document, a reshard's checkpoints) are stored as JSON text,
    nested at most ``MAX_DEPTH`` levels.
    """
    _check_depth(body, where, 0)
    try:
        text = json.dumps(body, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInput(f"{where}: the body is not a JSON document: {exc}") from None
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidInput(f"{where}: the body holds text that is not valid Unicode (an "
                           "unpaired surrogate)") from None
    if size > max_bytes:
        raise InvalidInput(f"{where}: the body is {size:,} bytes of JSON; at most "
                           f"{max_bytes:,} are stored")


def _check_depth(value: Any, where: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise InvalidInput(f"{where}: the body is nested deeper than {MAX_DEPTH} levels")
    children = value.values() if isinstance(value, Mapping) else \
        value if isinstance(value, list | tuple) else ()
    for child in children:
        _check_depth(child, where, depth + 1)


# the attribute values no one can change in place (a frozenset holds text, numbers or bytes)
_IMMUTABLE = frozenset({str, int, float, bool, type(None), decimal.Decimal, bytes, frozenset})


def owned_attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``attrs`` (checked by ``check_attrs``) that shares nothing mutable with
    it: its maps, lists, sets and bytearrays are copied at every depth, as a store that
    encodes them would."""
    return {name: value if type(value) in _IMMUTABLE else _owned(value)
            for name, value in attrs.items()}


def _owned(value: Any) -> Any:
    if type(value) in _IMMUTABLE:
        return value
    if isinstance(value, Mapping):
        return {key: _owned(item) for key, item in value.items()}
    if isinstance(value, tuple):  # a plain one, or a named one (Azure's EntityProperty)
        items = [_owned(item) for item in value]
        if all(mine is theirs for mine, theirs in zip(items, value, strict=True)):
            return value  # nothing in it can change
        return tuple(items) if type(value) is tuple else type(value)(*items)
    if isinstance(value, list):
        return [_owned(item) for item in value]
    if isinstance(value, set | bytearray):
        return type(value)(value)  # a set holds text, numbers or bytes: none mutable
    return value


# the attribute values that come back from DynamoDB as they were written
_AS_WRITTEN = frozenset({str, int, bool, type(None), bytes})


def dynamodb_attrs(attrs: Mapping[str, Any]) -> Mapping[str, Any]:
    """``attrs`` (checked by ``check_attrs``) as DynamoDB reads them back: lists for
    tuples, frozensets for sets, bytes for bytearrays, numbers as ``number_value`` reads
    their text (2.0 is 2, Decimal('1.10') is 1.1, -0.0 is 0); ``attrs`` itself when
    nothing differs. The simulated store keeps this on every profile, so code tried on
    it sees the types it will see on DynamoDB (Azure and Cosmos DB keep 2.0, -0.0 and a
    Decimal's digits)."""
    out = {name: value if type(value) in _AS_WRITTEN else _dynamodb(value)
           for name, value in attrs.items()}
    return attrs if all(out[name] is value for name, value in attrs.items()) else out


def _dynamodb(value: Any) -> Any:
    if type(value) in _AS_WRITTEN:
        return value
    if isinstance(value, float | decimal.Decimal):
        return number_value(number_text(value, "attrs"))
    if isinstance(value, Mapping):
        return {key: _dynamodb(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_dynamodb(item) for item in value]
    if isinstance(value, set | frozenset):
        return frozenset(_dynamodb(item) for item in value)
    if isinstance(value, bytearray):
        return bytes(value)
    return value
