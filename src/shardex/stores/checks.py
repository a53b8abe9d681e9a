"""What every store checks of its arguments before any request: a caller's mistake is an
InvalidInput naming it, whatever the backend."""

from __future__ import annotations

from typing import Any, Literal

from shardex.errors import InvalidInput
from shardex.keys import is_reserved

__all__ = ["MALFORMED", "Malformed", "check_malformed", "check_position", "check_revision",
           "check_shard_key", "check_text"]

# what a listing does with an item the store holds that is not in an entry's shape
Malformed = Literal["raise", "skip"]
MALFORMED: tuple[Malformed, ...] = ("raise", "skip")


def check_malformed(malformed: Any) -> Malformed:
    """Return ``malformed`` if it is one of ``MALFORMED``; InvalidInput naming it otherwise."""
    if malformed not in MALFORMED:
        raise InvalidInput(f"malformed must be one of {', '.join(MALFORMED)}, "
                           f"got {malformed!r}")
    return malformed  # type: ignore[no-any-return]


def check_text(what: str, text: Any, *, empty: bool = False) -> None:
    if type(text) is not str or not (text or empty):
        raise InvalidInput(f"{what} must be {'' if empty else 'non-empty '}text, got {text!r}")


def check_shard_key(shard_key: Any) -> None:
    check_text("shard key", shard_key)
    if is_reserved(shard_key):
        raise InvalidInput(f"shard key {shard_key!r} is reserved: it starts with '#'")


def check_position(what: str, position: Any) -> None:
    if position is not None and not (type(position) is tuple and len(position) == 2
                                     and type(position[0]) is str
                                     and type(position[1]) is str):
        raise InvalidInput(f"query {what} must be a (sort, item_id) pair or None, "
                           f"got {position!r}")


def check_revision(what: str, revision: Any, *, optional: bool) -> None:
    if revision is None and optional:
        return
    if type(revision) is not int or revision < 1:
        raise InvalidInput(f"{what} revision must be an integer >= 1"
                           f"{' or None' if optional else ''}, got {revision!r}")
