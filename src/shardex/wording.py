"""How a count and a list read in the text shardex prints: ``1 key``, ``2 keys``, ``51+ keys``;
``a, b and c``."""

from __future__ import annotations

__all__ = ["counted", "listed"]


def counted(n: float, noun: str, plural: str | None = None, *, shown: str | None = None) -> str:
    """``n`` and ``noun``, singular when ``n`` is 1, else ``plural`` (default: ``noun``
    with an s). ``shown`` is how ``n`` is written (default: with thousands separators),
    for a figure rounded or marked (``51+``)."""
    text = f"{n:,}" if shown is None else shown
    return f"{text} {noun if n == 1 else plural or noun + 's'}"


def listed(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c`` (at least one item)."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
