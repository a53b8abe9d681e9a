"""Regenerate ``tests/vectors/azure_keys.json``, the published Azure Table key vectors.

Run from anywhere: ``python tests/vectors/make_azure_vectors.py``. The encoding of
docs/azure.md is reimplemented here on purpose, without importing shardex and written
from the spec's table rather than from the library's code, so the vectors are an
independent reference that the library (and ports to other languages) must agree with:

- every code point is looked up in the table of bands; a band either keeps its
  characters or writes a lead character and the offset into the band in base 62
  (digits ``0-9A-Za-z``), one digit in the narrow bands; in the last band (from U+007E)
  the offset is written as class ``0`` + 2 digits, ``1`` + 3 digits or ``2`` + 4 digits,
  the fewest that hold it;
- a composite key joins encoded texts with ``!``, which no code contains;
- the mirror of a key replaces the i-th character of the 89 key characters (printable
  ASCII less ``#``, ``/``, ``?``, ``\\``, ``'``) by the (88-i)-th;
- a row key is ``A`` + E(sort) ``!`` E(item id) ``!`` + digest, or ``D`` + the mirror of
  the same middle + digest; the digest is the BLAKE2b-64 of the token's UTF-8 bytes,
  big-endian, as 11 base-62 digits.

The output is deterministic: every input below is a literal.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

OUTPUT = Path(__file__).with_name("azure_keys.json")
DIGITS = "0123456789" + "ABCDEFGHIJKLMNOPQRSTUVWXYZ" + "abcdefghijklmnopqrstuvwxyz"

# The spec's table: (first, last, lead or "" to keep the characters).
SPEC = [
    ("\u0000", "\u0022", '"'),
    ("#", "$", "$"),
    ("%", "%", ""),
    ("&", "'", "&"),
    ("(", "-", ""),
    (".", "/", "."),
    ("0", "=", ""),
    (">", "?", ">"),
    ("@", "Z", ""),
    ("[", "\\", "["),
    ("]", "}", ""),
    ("~", "\U0010ffff", "~"),
]


def base62(number: int, width: int) -> str:
    text = ""
    while number:
        text = DIGITS[number % 62] + text
        number //= 62
    return text.rjust(width, "0")


def encode(text: str) -> str:
    out = []
    for char in text:
        for first, last, lead in SPEC:
            if first <= char <= last:
                offset = ord(char) - ord(first)
                if not lead:
                    out.append(char)
                elif lead != "~":
                    out.append(lead + base62(offset, 1))
                elif offset < 62 * 62:
                    out.append("~0" + base62(offset, 2))
                elif offset < 62 * 62 * 62:
                    out.append("~1" + base62(offset, 3))
                else:
                    out.append("~2" + base62(offset, 4))
                break
    return "".join(out)


KEY_CHARS = [chr(c) for c in range(33, 127) if chr(c) not in "#/?\\'"]


def mirror(key: str) -> str:
    return "".join(KEY_CHARS[len(KEY_CHARS) - 1 - KEY_CHARS.index(c)] for c in key)


def digest(token: str) -> str:
    number = int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(),
                            "big")
    return base62(number, 11)


def row_keys(sort: str, item_id: str, token: str) -> dict[str, str]:
    middle = encode(sort) + "!" + encode(item_id) + "!"
    return {"ascending": "A" + middle + digest(token),
            "descending": "D" + mirror(middle) + digest(token)}


TEXTS = [
    "", "PENDING", "PENDING#3", "o-1", "2026-11-30T05:00:00Z", "2026-11-30T05:00:00.123Z",
    "a/b", "a\\b", "a?b", "a#b", "!", '"', "$", ".", ">", "[", "~", "}", "%&'()*+,-", "',",
    "0123456789:;<=", "@AZ", "]^_`az{|", "tab\there", "line\nbreak", "\u0001\u001f\u0020",
    "\u007f", "\u0080\u009f", "\u00a0", "caf\u00e9", "\u00e9t\u00e9", "\u0416", "\u05d0",
    "\u4e2d\u6587", "\u30c6\u30b9\u30c8", "\ue000", "\ufffd", "\uffff", "\U00010000",
    "\U0001f600", "\U0003a2f5", "\U0003a2f6", "\U0010ffff", "o-\U0001f4e6-7",
    "550e8400-e29b-41d4-a716-446655440000",
]
POSITIONS = [
    ("2026-11-30T05:00:00Z", "o-1", "7f1c0b2a9d3e4f5a6b7c8d9e0f1a2b3c"),
    ("2026-11-30T05:00:00Z", "o-10", "7f1c0b2a9d3e4f5a6b7c8d9e0f1a2b3c"),
    ("", "o-1", "token-1"),
    ("a", "b", "token-2"),
    ("a b", "a", "token-3"),
    ("caf\u00e9", "\U0001f600", "t"),
    ("x/y?z", "id#1", "0123456789abcdef0123456789abcdef"),
    # a quote never reaches a key, nor does the mirror of a code make one
    ("", "yt", "token-4"),
    ("it's", "a',b", "token-5"),
]
PARTITIONS = [("orders_by_status", "PENDING#3"), ("orders_by_status", "DELIVERED"),
              ("ix", "\u00e9t\u00e9#12")]


def main() -> None:
    document = {
        "description": "shardex Azure Table key encoding (docs/azure.md): encode(text), "
                       "row keys (ascending and mirror) of (sort, item id, token), and the "
                       "PartitionKey of (index, shard key) = encode(index) '!' "
                       "encode(shard key)",
        "texts": [{"text": text, "encoded": encode(text)} for text in TEXTS],
        "row_keys": [{"sort": sort, "item_id": item, "token": token, **row_keys(sort, item, token)}
                     for sort, item, token in POSITIONS],
        "partition_keys": [{"index": index, "shard_key": key,
                            "partition_key": encode(index) + "!" + encode(key)}
                           for index, key in PARTITIONS],
    }
    OUTPUT.write_text(json.dumps(document, indent=1, ensure_ascii=True) + "\n")


if __name__ == "__main__":
    main()
