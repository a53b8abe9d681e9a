"""Azure Table keys for shardex's keys: a reversible, order-preserving text encoding.

Pure: no I/O of its own (``namespaces`` reads through the function it is given) and no
driver import. Azure Table PartitionKey and RowKey values refuse
``/``, ``\\``, ``#``, ``?`` and control characters, and hold at most 1 KiB (512 UTF-16
code units, which Azurite enforces). Shard keys (``PENDING#3``), sort values and item ids
may hold any of those, so every key shardex writes is encoded by ``encode_text``: each code
point becomes itself or an escape, and the result is printable ASCII without the four
refused characters and without ``'``: the service takes a quote in a key (doubled in the
request's URL), but Azurite cuts a key of a batch request at ``',``, so a quote is escaped
too. The encoding is

- **reversible**: ``decode_text(encode_text(t)) == t``;
- **order-preserving**: code point order of texts is the ordinal order of their
  encodings, and ASCII has one ordinal order (in UTF-8 and UTF-16 alike), so the service's
  order is shardex's order whatever it compares;
- **prefix-free per character**: the code of a character is never a prefix of another's,
  so a text is a prefix of another exactly when its encoding is.

Code points go by bands, in order (``BANDS``); a band is either kept as it is or written
as its *lead* character followed by a fixed-width offset in the digits ``0-9A-Za-z``:

=================  ===================================  ================================
code points        characters                           encoded as
=================  ===================================  ================================
U+0000..U+0022     controls, space, ``!``, ``"``        ``"`` + 1 digit (offset)
U+0023..U+0024     ``#`` ``$``                          ``$`` + 1 digit
U+0025             ``%``                                itself
U+0026..U+0027     ``&`` ``'``                          ``&`` + 1 digit
U+0028..U+002D     ``( ) * + , -``                      themselves
U+002E..U+002F     ``.`` ``/``                          ``.`` + 1 digit
U+0030..U+003D     ``0-9 : ; < =``                      themselves
U+003E..U+003F     ``>`` ``?``                          ``>`` + 1 digit
U+0040..U+005A     ``@ A-Z``                            themselves
U+005B..U+005C     ``[`` ``\\``                          ``[`` + 1 digit
U+005D..U+007D     ``] ^ _ ` a-z { | }``                themselves
U+007E..U+10FFFF   ``~``, DEL, C1 controls, non-ASCII   ``~`` + class + 2, 3 or 4 digits
=================  ===================================  ================================

In the last band the offset ``v = cp - 0x7E`` is written as ``0`` and 2 digits when
``v < 62**2``, ``1`` and 3 digits when ``v < 62**3``, else ``2`` and 4 digits. ``!`` is
never produced: it is the *terminator* that ends a text inside a composite key, below
every character a code starts with, so ``(a, b)`` pairs compare as tuples.

Keys:

- PartitionKey of an entry: ``E(index) ! E(shard key)``; of a placement
  ``E(index) ! E("#placement#" + item id)``; of the records ``E(index) ! E("#record#")``
  (a logical key never starts with ``#``, so these never meet);
- RowKey of an entry: ``A E(sort) ! E(item id) ! D`` in ascending order and
  ``D C(E(sort) ! E(item id) !) D`` for the mirror row read in descending order, where
  ``C`` maps the i-th of the 89 key characters (``KEY_ALPHABET``) to the (88-i)-th, which
  reverses the order, and ``D`` is an 11-digit digest of the write's token that tells
  apart two rows of one item at one position (a write and the one it replaces).
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable

from shardex.errors import InvalidKey

__all__ = [
    "ASC",
    "BANDS",
    "DESC",
    "KEY_ALPHABET",
    "MAX_KEY_CHARS",
    "TERMINATOR",
    "check_key",
    "check_namespace",
    "decode_position",
    "decode_text",
    "encode_text",
    "entry_partition",
    "mirror",
    "namespace_of",
    "namespace_range",
    "namespaces",
    "placement_partition",
    "position_bounds",
    "position_prefix",
    "record_partition",
    "row_key",
    "token_digest",
]

# The most characters a PartitionKey or RowKey holds: 1 KiB of UTF-16.
MAX_KEY_CHARS = 512
TERMINATOR = "!"
DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_BASE = len(DIGITS)
# (first code point, last code point, lead): lead None keeps the characters as they are
BANDS: tuple[tuple[int, int, str | None], ...] = (
    (0x00, 0x22, '"'),
    (0x23, 0x24, "$"),
    (0x25, 0x25, None),
    (0x26, 0x27, "&"),
    (0x28, 0x2D, None),
    (0x2E, 0x2F, "."),
    (0x30, 0x3D, None),
    (0x3E, 0x3F, ">"),
    (0x40, 0x5A, None),
    (0x5B, 0x5C, "["),
    (0x5D, 0x7D, None),
    (0x7E, 0x10FFFF, "~"),
)
_WIDE = 0x7E
# every character an encoded key may hold, in order: printable ASCII less # / ? backslash '
KEY_ALPHABET = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in "#/?\\'")
_MIRROR = str.maketrans(KEY_ALPHABET, KEY_ALPHABET[::-1])
ASC = "A"
DESC = "D"
_DIGEST_DIGITS = 11

# one code per code point below the wide band, built once
_NARROW: list[str] = []
for _first, _last, _lead in BANDS[:-1]:
    for _cp in range(_first, _last + 1):
        _NARROW.append(chr(_cp) if _lead is None else _lead + DIGITS[_cp - _first])
_LEADS = {lead: first for first, _, lead in BANDS[:-1] if lead is not None}
_PLAIN = frozenset(chr(cp) for first, last, lead in BANDS if lead is None
                   for cp in range(first, last + 1))


def _digits(value: int, width: int) -> str:
    out = []
    for _ in range(width):
        value, digit = divmod(value, _BASE)
        out.append(DIGITS[digit])
    return "".join(reversed(out))


def _wide(cp: int) -> str:
    offset = cp - _WIDE
    if offset < _BASE**2:
        return "~0" + _digits(offset, 2)
    if offset < _BASE**3:
        return "~1" + _digits(offset, 3)
    return "~2" + _digits(offset, 4)


def encode_text(text: str) -> str:
    """Return the key encoding of ``text`` (see the module docstring); pure, total."""
    narrow = _NARROW
    return "".join(narrow[cp] if cp < _WIDE else _wide(cp) for cp in map(ord, text))


def decode_text(encoded: str) -> str:
    """Return the text ``encode_text`` made ``encoded`` from; InvalidKey if it made none."""
    if _PLAIN.issuperset(encoded):
        return encoded  # plain characters stand for themselves (the common case, no loop)
    out: list[str] = []
    i, size = 0, len(encoded)
    try:
        while i < size:
            char = encoded[i]
            if char in _PLAIN:
                out.append(char)
                i += 1
            elif char == "~":
                width = 2 + "012".index(encoded[i + 1])
                digits = encoded[i + 2:i + 2 + width]
                if len(digits) != width:
                    raise IndexError(i)
                out.append(chr(_WIDE + _value(digits)))
                i += 2 + width
            else:
                first = _LEADS[char]
                out.append(chr(first + DIGITS.index(encoded[i + 1])))
                i += 2
    except (KeyError, IndexError, ValueError) as exc:
        raise InvalidKey(f"{encoded[:60]!r} is not a shardex Azure key encoding "
                         f"(at character {i})") from exc
    decoded = "".join(out)
    if encode_text(decoded) != encoded:
        raise InvalidKey(f"{encoded[:60]!r} is not a shardex Azure key encoding")
    return decoded


def _value(digits: str) -> int:
    value = 0
    for digit in digits:
        value = value * _BASE + DIGITS.index(digit)
    return value


def check_key(key: str, what: str) -> str:
    """Return ``key`` if it fits an Azure Table key; InvalidKey naming ``what`` otherwise."""
    if len(key) > MAX_KEY_CHARS:
        raise InvalidKey(
            f"{what} does not fit an Azure Table key: encoded it takes {len(key)} characters, "
            f"and a PartitionKey or RowKey holds at most 1 KiB ({MAX_KEY_CHARS} UTF-16 "
            "characters); use a shorter index name, value, sort value or item id")
    return key


# checks that a key fits the store: ``check(key, what)`` returns it or raises InvalidKey
KeyCheck = Callable[[str, str], str]


def _partition(namespace: str, key: str, what: str, check: KeyCheck) -> str:
    return check(encode_text(namespace) + TERMINATOR + encode_text(key), what)


def entry_partition(namespace: str, shard_key: str, check: KeyCheck = check_key) -> str:
    """The PartitionKey of the entries of ``shard_key`` in index ``namespace``.

    ``check`` (here and below) says whether it fits the store: an Azure Table key unless
    told otherwise (Cosmos DB's partition key has its own limit).
    """
    return _partition(namespace, shard_key, f"shard key {shard_key[:60]!r} of {namespace!r}",
                      check)


def placement_partition(namespace: str, item_id: str, check: KeyCheck = check_key) -> str:
    """The PartitionKey of the placement of ``item_id`` in index ``namespace``."""
    return _partition(namespace, "#placement#" + item_id,
                      f"the placement of item {item_id[:60]!r} of {namespace!r}", check)


def record_partition(namespace: str, check: KeyCheck = check_key) -> str:
    """The PartitionKey of the records of index ``namespace``."""
    return _partition(namespace, "#record#", f"the records of index {namespace[:60]!r}",
                      check)


def check_namespace(namespace: str, check: KeyCheck = check_key) -> None:
    """InvalidKey unless index ``namespace`` leaves room in a key for its records and its
    items' placements (a key of the name and the item id, ``placement_partition``)."""
    _partition(namespace, "#placement#_", f"the placements of index {namespace[:60]!r} "
               "(with an item id of one character)", check)
    record_partition(namespace, check)


def namespace_range(namespace: str) -> tuple[str, str]:
    """PartitionKeys ``(low, high)``, exclusive, between which every key of the index lies."""
    prefix = encode_text(namespace)
    return prefix + TERMINATOR, prefix + chr(ord(TERMINATOR) + 1)


def namespace_of(partition: str) -> str | None:
    """The index whose keys ``partition`` is one of (``E(index) !`` starts it); None when
    it is no key of shardex's."""
    code, terminator, _ = partition.partition(TERMINATOR)
    if not code or not terminator:
        return None
    try:
        return decode_text(code)
    except InvalidKey:
        return None


async def namespaces(first_from: Callable[[str], Awaitable[str | None]]) -> list[str]:
    """Every index with keys in a table, in order, by a skip scan of its partition keys.

    ``first_from(low)`` reads the least partition key at or above ``low`` (None: there is
    none), one request: each index found is passed over whole (its keys lie within
    ``namespace_range``), and a key that is none of shardex's alone, so the scan asks
    once an index and once more to find none after the last.
    """
    found: list[str] = []
    low = ""
    while (partition := await first_from(low)) is not None:
        name = namespace_of(partition)
        if name is None:
            # the least key above it that one of shardex's may be (they hold no character
            # below the terminator)
            low = partition + TERMINATOR
        else:
            found.append(name)
            low = namespace_range(name)[1]
    return found


def position_prefix(sort: str, item_id: str) -> str:
    """``E(sort) ! E(item id) !``: the ascending code of a position."""
    return encode_text(sort) + TERMINATOR + encode_text(item_id) + TERMINATOR


def mirror(code: str) -> str:
    """Map each key character to its mirror in ``KEY_ALPHABET``: reverses the order."""
    return code.translate(_MIRROR)


def token_digest(token: str) -> str:
    """11 digits of BLAKE2b over the token: tells apart rows of one item at one position."""
    number = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "big")
    return _digits(number, _DIGEST_DIGITS)


def row_key(sort: str, item_id: str, token: str, *, descending: bool) -> str:
    """The RowKey of an entry row (the ascending one, or its descending mirror)."""
    code = position_prefix(sort, item_id)
    key = (DESC + mirror(code) if descending else ASC + code) + token_digest(token)
    return check_key(key, f"the entry of item {item_id[:60]!r} at sort {sort[:60]!r}")


def position_bounds(after: tuple[str, str] | None, *, descending: bool) -> tuple[str, str]:
    """RowKeys ``(low, high)``, exclusive, of the rows strictly beyond ``after``.

    In ascending order for the ascending rows, and in the mirror rows' order (descending
    positions) for ``descending``. A RowKey is a position's code and a digest, whose
    digits all sort below ``~``: a bound of code + ``~`` lies after every row of it.
    """
    lead = DESC if descending else ASC
    high = chr(ord(lead) + 1)
    if after is None:
        return lead, high
    code = position_prefix(*after)
    return lead + (mirror(code) if descending else code) + "~", high


def decode_position(row: str) -> tuple[str, str]:
    """The ``(sort, item_id)`` of an entry RowKey, ascending or mirror."""
    body = row[1:len(row) - _DIGEST_DIGITS]
    if row[:1] == DESC:
        body = mirror(body)
    elif row[:1] != ASC:
        raise InvalidKey(f"RowKey {row[:60]!r} is not a shardex entry row")
    sort, sep, rest = body.partition(TERMINATOR)
    item, sep2, tail = rest.partition(TERMINATOR)
    if not sep or not sep2 or tail:
        raise InvalidKey(f"RowKey {row[:60]!r} is not a shardex entry row")
    return decode_text(sort), decode_text(item)
