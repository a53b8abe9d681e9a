"""What a store can hold as an attribute value: DynamoDB's rules, checked once for every store.

The memory store models DynamoDB, so it refuses what DynamoDB refuses, with the same
error (InvalidInput naming the attribute): code tested on ``memory://`` does not fail
in production on a value DynamoDB cannot store. ``Store.place`` runs these checks for
every backend before any request, and the DynamoDB codec writes numbers with
``number_text``; no backend keeps a copy of the rules.

Storable: None, bool, int and float (finite, at most 38 significant digits, exponent
from -130 to +125), Decimal (the same), str and attribute names (valid Unicode: no
unpaired surrogate), bytes, lists and tuples, and mappings with text keys, nested at
most 32 levels. Sets are refused (DynamoDB's sets cannot be empty and come back as
lists: store a list). An item is at most 400 KB (``MAX_ITEM_BYTES``), names included.
"""

from __future__ import annotations

import decimal
import json
import math
from collections.abc import Mapping
from typing import Any

from shardex.errors import InvalidInput

__all__ = ["MAX_DEPTH", "MAX_ITEM_BYTES", "check_attrs", "check_document", "check_text",
           "check_value", "number_text"]

MAX_ITEM_BYTES = 400 * 1024
MAX_DEPTH = 32
# DynamoDB numbers: 38 significant digits, exponents from -130 to +125
_NUMBERS = decimal.Context(prec=38, Emin=-128, Emax=126, traps=[decimal.Inexact,
                                                                 decimal.Rounded])
_SMALL_INT = 10**38


def check_text(text: str, where: str) -> None:
    """Raise InvalidInput if ``text`` holds an unpaired surrogate (not valid Unicode)."""
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{where}: {text[:40]!r} is not valid text (an unpaired "
                           "surrogate); DynamoDB stores UTF-8") from exc


def number_text(value: int | float | decimal.Decimal, where: str) -> str:
    """Return a number as DynamoDB's ``N`` text; InvalidInput if it cannot hold it."""
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


def check_value(value: Any, where: str, depth: int = 0) -> None:
    """Raise InvalidInput, naming ``where``, unless DynamoDB can store ``value``."""
    kind = type(value)
    if kind is str:
        check_text(value, where)
    elif kind is int:
        if not -_SMALL_INT < value < _SMALL_INT:
            number_text(value, where)
    elif value is None or kind is bool:
        return
    elif isinstance(value, int | float | decimal.Decimal) and not isinstance(value, bool):
        number_text(value, where)
    elif isinstance(value, str):
        check_text(value, where)
    elif isinstance(value, bytes | bytearray):
        return
    elif isinstance(value, list | tuple | Mapping):
        if depth >= MAX_DEPTH:
            raise InvalidInput(f"{where}: nested deeper than DynamoDB's {MAX_DEPTH} levels")
        if isinstance(value, Mapping):
            check_attrs(value, where, depth + 1)
        else:
            for i, element in enumerate(value):
                check_value(element, f"{where}[{i}]", depth + 1)
    elif isinstance(value, set | frozenset):
        raise InvalidInput(f"{where}: a set cannot be stored (DynamoDB's sets are never "
                           "empty and come back as lists); store a list")
    else:
        raise InvalidInput(f"{where}: a {kind.__name__} cannot be stored in DynamoDB; "
                           "use None, bool, int, float, Decimal, str, bytes, list or dict")


def check_attrs(attrs: Mapping[str, Any], where: str = "attrs", depth: int = 0) -> None:
    """Raise InvalidInput unless every name is non-empty text and every value storable."""
    for name, value in attrs.items():
        if type(name) is not str or not name:
            raise InvalidInput(f"{where}: attribute names must be non-empty text, got {name!r}")
        check_text(name, f"{where} name")
        check_value(value, f"{where}[{name!r}]", depth)


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
