"""Click parameter types for the shardex command: bounded numbers, durations, logical keys,
and the options that name a value, ``VALUE=N[:strategy][@tier]`` and kin.

Every number an option takes is finite and lies between two bounds (``number``,
``count``, ``Duration``); every logical key, index name and tier name given on the
command line is checked as the API checks it, and a control character in one is refused
(a terminal cannot show it back; a document given with ``--file`` may still hold any
text the API takes). A bad option is refused by click itself, as a usage error naming
the option (exit 2); ``shardex.cli.main`` prints it as one line.
"""

from __future__ import annotations

import difflib
import math
import re
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from shardex.capacity import MAX_HEADROOM
from shardex.errors import InvalidInput
from shardex.keys import validate_value
from shardex.model.values import MAX_ITEM_BYTES
from shardex.routing import ShardPolicy, check_tier_name
from shardex.stores import check_store_uri

__all__ = ["COUNT", "Choice", "DAY", "Duration", "Finite", "HEADROOM", "INDEX_NAME", "ITEM_BYTES",
           "LEASE", "LOGICAL_KEY", "MARGIN", "MAX_AGE", "NUMBER", "PLOT", "POLICY", "RATE",
           "RETAIN", "SETTLE", "STORE_URI", "TIER_NAME", "UNIT_LEASE", "ValuePair", "WORKERS",
           "count", "distinct", "given", "no_control", "number"]


_INTEGER = re.compile(r"[+-]?[0-9]+")
# a decimal number as it is written on a command line: float() takes "1_000" and digits
# of other scripts too, which no one means as a rate
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


class Finite(click.FloatRange):
    """A float within click's range, and never NaN or infinite (which every range admits:
    NaN compares false with any bound)."""

    name = "number"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(number, param, ctx)

    def _describe_range(self) -> str:
        # click describes a range without bounds as "x<=None" in a command's help
        return "" if self.min is None and self.max is None else super()._describe_range()


def number(low: float, high: float, *, low_open: bool = False) -> Finite:
    """A finite float from ``low`` (above it with ``low_open``) to ``high``."""
    return Finite(min=low, max=high, min_open=low_open)


def count(low: int, high: int) -> click.IntRange:
    """An integer from ``low`` to ``high``."""
    return click.IntRange(min=low, max=high)


class Choice(click.Choice):  # type: ignore[type-arg]
    """click's Choice, with a "did you mean" for a value close to one of the choices."""

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as exc:
            near = difflib.get_close_matches(str(value), [str(c) for c in self.choices], n=1)
            if not near:
                raise
            self.fail(f"{exc.message} Did you mean {near[0]!r}?", param, ctx)


class _Number(click.ParamType):  # type: ignore[type-arg]
    """A finite number, as ``float`` (``integer``: an integer, as ``int``), for the number
    inside ``VALUE=X``; the code that uses it checks its range."""

    def __init__(self, *, integer: bool = False) -> None:
        self.integer = integer
        self.name = "integer" if integer else "number"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        text = str(value).strip()
        try:
            if self.integer:
                if _INTEGER.fullmatch(text) is None:  # int() takes "1_0" and other digits too
                    raise ValueError(text)
                return int(text)
            got = float(text)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not {'an integer' if self.integer else 'a number'}",
                      param, ctx)
        if not math.isfinite(got):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        if _DECIMAL.fullmatch(text) is None:
            self.fail(f"{value!r} is not a number", param, ctx)
        return got


_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*")


def _seconds(seconds: float) -> str:
    for unit in ("d", "h", "m"):
        if seconds >= _UNITS[unit] and seconds % _UNITS[unit] == 0:
            return f"{seconds / _UNITS[unit]:g}{unit}"
    return f"{seconds:g}s"


class Duration(click.ParamType):  # type: ignore[type-arg]
    """Seconds from ``low`` to ``high``, written ``90``, ``90s``, ``15m``, ``2h`` or ``1d``."""

    name = "DURATION"

    def __init__(self, low: float, high: float) -> None:
        self.low = low
        self.high = high

    def describe(self) -> str:
        """The range, as ``--help`` shows it."""
        return f"{_seconds(self.low)}<=x<={_seconds(self.high)}"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            seconds = float(value)
        else:
            match = _DURATION.fullmatch(str(value))
            if match is None:
                self.fail(f"expected a duration such as 90s, 15m, 2h or 1d, got {value!r}",
                          param, ctx)
            seconds = float(match[1]) * _UNITS[match[2]]
        if not self.low <= seconds <= self.high:  # also false for an overflow to infinity
            self.fail(f"{value!r} is not in the range {self.describe()}", param, ctx)
        return seconds


def no_control(text: str, kind: str) -> str:
    """Return ``text``; InvalidInput naming ``kind`` if it holds a control character."""
    for char in text:
        if unicodedata.category(char) == "Cc":
            raise InvalidInput(f"{kind} {text!r} holds a control character "
                               f"(U+{ord(char):04X}), which the command line does not take")
    return text


class _PlotFile(click.Path):
    """The file ``--plot`` draws to: click's Path, with an empty name refused as given
    (click would hand the command ``Path('.')``, named back to the user as '.')."""

    def __init__(self) -> None:
        super().__init__(dir_okay=False, writable=True, path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        if value == "":
            self.fail("'': give the name of a file to write", param, ctx)
        return super().convert(value, param, ctx)


PLOT = _PlotFile()


class _Name(click.ParamType):  # type: ignore[type-arg]
    """Text checked by ``check`` (InvalidInput names the fault), without control characters."""

    def __init__(self, name: str, kind: str, check: Callable[[str], Any]) -> None:
        self.name = name
        self.kind = kind
        self.check = check

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> str:
        text = str(value)
        try:
            self.check(text)
            return no_control(text, self.kind)
        except InvalidInput as exc:
            self.fail(str(exc), param, ctx)


def _index_name(text: str) -> None:
    validate_value(text, "index name")


def _store_uri(text: str) -> None:
    # what opening the store would refuse of the URI itself, refused here as the option's
    # (its scheme, options and their types), before the command does any work; no
    # driver, credentials or connection needed
    check_store_uri(text)


LOGICAL_KEY = _Name("VALUE", "logical key", validate_value)
STORE_URI = _Name("URI", "store URI", _store_uri)
INDEX_NAME = _Name("NAME", "index name", _index_name)
TIER_NAME = _Name("TIER", "tier name", lambda text: check_tier_name(text, "tier name"))


class _Policy(click.ParamType):  # type: ignore[type-arg]
    """``N``, ``N:strategy``, either with ``@tier`` after it, as a ShardPolicy."""

    name = "N[:strategy][@tier]"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> ShardPolicy:
        if isinstance(value, ShardPolicy):
            return value
        text, at, tier = str(value).partition("@")
        shards, colon, strategy = text.partition(":")
        if _INTEGER.fullmatch(shards) is None or (colon and not strategy):
            self.fail(f"expected N, N:strategy or either with @tier, got {value!r}", param, ctx)
        try:
            return ShardPolicy(shards=int(shards), strategy=strategy or "hash",  # type: ignore[arg-type]
                               tier=no_control(tier, "tier name") if at else None)
        except InvalidInput as exc:
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
        if isinstance(value, float) and 1 <= value <= MAX_HEADROOM:
            return value
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not 1 <= number <= MAX_HEADROOM:
            hint = (f"; for {100 * number:g}% to spare give {1 + number:g}"
                    if 0 < number < 1 else "")
            self.fail(f"the headroom is a multiplier on the peak, from 1 to {MAX_HEADROOM:g} "
                      f"(1.5: 50% to spare), got {value}{hint}", param, ctx)
        return number


NUMBER = _Number()
HEADROOM = _Headroom()
COUNT = _Number(integer=True)
POLICY = _Policy()


class ValuePair(click.ParamType):  # type: ignore[type-arg]
    """``VALUE=X``, as ``(value, X)``, ``X`` converted by ``inner``.

    The name before ``=`` is checked by ``key`` (default: a logical key, as the API
    checks one). It ends at the last ``=`` (a logical key may hold one), or at the first
    with ``first`` (``X`` may hold some: a store URI's query).
    """

    def __init__(self, inner: click.ParamType, shape: str,  # type: ignore[type-arg]
                 example: str, *, first: bool = False,
                 key: click.ParamType = LOGICAL_KEY) -> None:  # type: ignore[type-arg]
        self.inner = inner
        self.example = example
        self.name = shape
        self.first = first
        self.key = key

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> tuple[str, Any]:
        if isinstance(value, tuple):
            return value
        text = str(value)
        name, sep, rest = text.partition("=") if self.first else text.rpartition("=")
        if not sep or not name:
            self.fail(f"expected {self.name}, e.g. {self.example}, got {value!r}", param, ctx)
        if name != name.strip():  # a stray space would name another value than meant
            self.fail(f"{name!r} has spaces around it; write {self.name} with none",
                      param, ctx)
        return self.key.convert(name, param, ctx), self.inner.convert(rest, param, ctx)


def given(name: str) -> bool:
    """Whether option ``name`` of the running command was given (on the command line, by
    its environment variable or by the config profile) rather than left at its default."""
    source = click.get_current_context().get_parameter_source(name)
    return source is not None and source is not ParameterSource.DEFAULT


def distinct(pairs: Sequence[tuple[str, Any]], option: str) -> dict[str, Any]:
    """Return ``pairs`` as a dict; a value given twice is a usage error naming ``option``."""
    out: dict[str, Any] = {}
    for name, item in pairs:
        if name in out:
            raise click.BadParameter(f"given twice for {name!r}", param_hint=f"'{option}'")
        out[name] = item
    return out


ITEM_BYTES = MAX_ITEM_BYTES

# The bounds the reshard and adopt commands share. A margin covers the longest request
# and the clock skew between hosts beyond the routing's lease: never nothing.
DAY = 86_400.0
MARGIN = Duration(0.1, DAY)
LEASE = Duration(0.1, DAY)
MAX_AGE = Duration(0.0, 30 * DAY)
RETAIN = Duration(0.0, 365 * DAY)
SETTLE = Duration(0.0, 3600.0)
RATE = number(0.0, 1e6, low_open=True)  # write units a second on one key
UNIT_LEASE = number(0.1, DAY)
WORKERS = count(1, 1024)  # units worked at once by one process
