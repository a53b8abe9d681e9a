"""Click parameter types for the options that name a value: ``VALUE=N[:strategy]`` and kin.

A bad option is refused by click itself, as a usage error naming the option (exit 2);
``shardex.cli.main`` prints it as one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from shardex.errors import InvalidPolicy
from shardex.routing import ShardPolicy

__all__ = ["COUNT", "HEADROOM", "NUMBER", "POLICY", "ValuePair", "distinct"]


class _Number(click.ParamType):  # type: ignore[type-arg]
    """A number, as ``float`` (``integer``: an integer, as ``int``)."""

    def __init__(self, *, integer: bool = False) -> None:
        self.integer = integer
        self.name = "integer" if integer else "number"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        try:
            return int(value) if self.integer else float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not {'an integer' if self.integer else 'a number'}",
                      param, ctx)


class _Policy(click.ParamType):  # type: ignore[type-arg]
    """``N``, ``N:strategy``, either with ``@tier`` after it, as a ShardPolicy."""

    name = "N[:strategy][@tier]"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> ShardPolicy:
        if isinstance(value, ShardPolicy):
            return value
        text, at, tier = str(value).partition("@")
        shards, _, strategy = text.partition(":")
        try:
            count = int(shards)
        except ValueError:
            self.fail(f"expected N, N:strategy or either with @tier, got {value!r}", param, ctx)
        try:
            return ShardPolicy(shards=count, strategy=strategy or "hash",  # type: ignore[arg-type]
                               tier=tier if at else None)
        except InvalidPolicy as exc:
            self.fail(str(exc), param, ctx)


class _Headroom(click.ParamType):  # type: ignore[type-arg]
    """A headroom: a multiplier on the peak, at least 1 (1.5: 50% to spare).

    A number below 1 is refused, naming the multiplier it may have meant: read as a
    multiplier it would size shards past their ceiling (0.25: 4x over), and read as a
    fraction it would be a guess.
    """

    name = "multiplier"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        if isinstance(value, float) and value >= 1:
            return value
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not number >= 1 or number == float("inf"):
            hint = (f"; for {100 * number:g}% to spare give {1 + number:g}"
                    if 0 < number < 1 else "")
            self.fail(f"the headroom is a multiplier on the peak, at least 1 (1.5: 50% to "
                      f"spare), got {value}{hint}", param, ctx)
        return number


NUMBER = _Number()
HEADROOM = _Headroom()
COUNT = _Number(integer=True)
POLICY = _Policy()


class ValuePair(click.ParamType):  # type: ignore[type-arg]
    """``VALUE=X``, as ``(value, X)``, ``X`` converted by ``inner``.

    The value is not checked here: the code that uses it validates logical keys. It
    ends at the last ``=`` (a logical key may hold one), or at the first with ``first``
    (``X`` may hold some: a store URI's query).
    """

    def __init__(self, inner: click.ParamType, shape: str,  # type: ignore[type-arg]
                 example: str, *, first: bool = False) -> None:
        self.inner = inner
        self.example = example
        self.name = shape
        self.first = first

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> tuple[str, Any]:
        if isinstance(value, tuple):
            return value
        text = str(value)
        name, sep, rest = text.partition("=") if self.first else text.rpartition("=")
        if not sep or not name:
            self.fail(f"expected {self.name}, e.g. {self.example}, got {value!r}", param, ctx)
        return name, self.inner.convert(rest, param, ctx)


def distinct(pairs: Sequence[tuple[str, Any]], option: str) -> dict[str, Any]:
    """Return ``pairs`` as a dict; a value given twice is a usage error naming ``option``."""
    out: dict[str, Any] = {}
    for name, item in pairs:
        if name in out:
            raise click.BadParameter(f"given twice for {name!r}", param_hint=option)
        out[name] = item
    return out
