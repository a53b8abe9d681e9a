"""The options of ``memory://``: names, types, defaults and ranges, checked once.

Options come as keywords to ``MemoryStore`` or as ``memory://?name=value``; keywords
win. ``profile`` names the capacity model (``shardex.sim.profiles``); every setting of
a profile is an option too and overrides the profile's value. A bad keyword raises
InvalidInput naming the option; a bad URI option (or URI options that do not fit
together) raises InvalidURI.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlencode

from shardex.capacity import QUERY_PAGE_BYTES
from shardex.errors import InvalidInput, InvalidURI, brief
from shardex.sim.profiles import DEFAULT_PROFILE, PROFILES, Profile
from shardex.sim.profiles import profile as make_profile
from shardex.stores.uri import StoreURI

__all__ = ["CAPACITY_OPTIONS", "OPTIONS", "capacity_from_uri", "check_option", "memory_uri",
           "options_from_uri", "resolve_profile"]

_PROBABILITY = (0.0, 1.0, "a probability from 0 to 1")
# option -> (type, default, lowest, highest, what a valid value is): the store's own
OPTIONS: dict[str, tuple[type, Any, float, float, str]] = {
    "latency_median_ms": (float, 4.0, 1e-9, math.inf, "> 0 ms"),
    "latency_p99_ms": (float, 25.0, 1e-9, math.inf, "> 0 ms"),
    "latency_per_kb_ms": (float, 0.01, 0.0, math.inf, ">= 0 ms"),
    "max_page_bytes": (int, QUERY_PAGE_BYTES, 1, math.inf,
                       "an integer >= 1 of at most 4,000 digits"),
    "throttle_rate": (float, 0.0, *_PROBABILITY),
    "unavailable_rate": (float, 0.0, *_PROBABILITY),
    "ambiguous_rate": (float, 0.0, *_PROBABILITY),
    "seed": (int, None, -math.inf, math.inf, "an integer of at most 4,000 digits, or None"),
}
# an int option is written into the store's URI, and Python prints at most 4,300 digits
_INT_LIMIT = 10**4000
_KINDS = {bool: "true or false", str: "text", int: "an integer of at most 4,000 digits",
          float: "a number within a float's range"}
# the settings of a capacity profile, each an option that overrides the profile's value
CAPACITY_OPTIONS: dict[str, type] = {
    f.name: (str if f.name in ("capacity", "layout", "unit", "store") else
             int if f.name == "partitions" else
             bool if f.name in ("adaptive", "lsi", "consistent", "shared_units") else float)
    for f in dataclasses.fields(Profile) if f.name != "name"}


def check_option(name: str, value: Any) -> Any:
    """Return ``value`` if it suits the store option ``name``; raise InvalidInput naming it.

    A capacity option is checked for its type here and for its range by the profile.
    """
    if name == "profile":
        if not isinstance(value, str) or value not in PROFILES:
            raise InvalidInput(f"memory:// option profile must be one of "
                               f"{', '.join(PROFILES)}, got {brief(value)}")
        return value
    if name in CAPACITY_OPTIONS:
        kind = CAPACITY_OPTIONS[name]
        if kind is bool or kind is str:
            ok = isinstance(value, kind)
        else:
            ok = not isinstance(value, bool) and isinstance(
                value, int if kind is int else int | float) and _sized(value, kind)
        if not ok and not (name == "partitions" and value is None):
            raise InvalidInput(f"memory:// option {name} must be {_KINDS[kind]}, "
                               f"got {brief(value)}")
        return value
    kind, _, low, high, what = OPTIONS[name]
    if name == "seed" and value is None:
        return value
    ok = not isinstance(value, bool) and isinstance(value, int if kind is int else int | float)
    # a seed may be any int the URI can spell (random.Random takes any)
    ok = ok and _sized(value, kind) and low <= value <= high \
        and (kind is int or math.isfinite(value))
    if not ok:
        raise InvalidInput(f"memory:// option {name} must be {what}, got {brief(value)}")
    return value


def _sized(value: int | float, kind: type) -> bool:
    """Whether an option of ``kind`` (int or float) can hold the number ``value``: an int
    of at most 4,000 digits (the store's URI prints it), or a float (any, infinity too:
    the range is checked apart) or an int a float can hold."""
    if kind is int:
        return -_INT_LIMIT < value < _INT_LIMIT
    try:
        float(value)
    except OverflowError:
        return False
    return True


def resolve_profile(name: str, settings: Mapping[str, Any]) -> Profile:
    """The profile ``name`` with the capacity options in ``settings`` applied."""
    try:
        return make_profile(name, **settings)
    except InvalidInput as exc:
        raise InvalidInput(f"memory:// {exc}") from exc


def options_from_uri(uri: StoreURI, options: Mapping[str, Any],
                     build: Callable[..., Any]) -> Any:
    """Call ``build(**settings)`` with the URI's options under the keyword ``options``."""
    known = {*OPTIONS, *CAPACITY_OPTIONS, "profile"}
    unknown = sorted(set(options) - known - {"clock"})
    if unknown:
        raise InvalidInput(f"memory:// does not know the option(s) {', '.join(unknown)}; "
                           f"known: clock, {', '.join(sorted(known))}")
    if uri.location or uri.path:
        raise InvalidURI(f"memory:// takes options only, no location or path: {uri.raw!r}")
    from_uri = uri.take({"profile": str, **CAPACITY_OPTIONS,
                         **{name: spec[0] for name, spec in OPTIONS.items()}})
    for name, value in options.items():
        if name != "clock":
            check_option(name, value)
    # a keyword out of range is the caller's error, not the URI's; keywords that fit only
    # with the URI's settings (burst_seconds there, initial_burst_seconds here) fit
    name = options.get("profile", from_uri.get("profile", DEFAULT_PROFILE))
    given = {key: value for key, value in options.items() if key in CAPACITY_OPTIONS}
    try:
        resolve_profile(name, {**{key: value for key, value in from_uri.items()
                                  if key in CAPACITY_OPTIONS}, **given})
    except InvalidInput:
        if "profile" not in options:
            try:
                resolve_profile(name, {})
            except InvalidInput as exc:  # the URI's profile name: the URI's fault
                raise InvalidURI(f"{uri.raw or 'memory://'}: {exc}") from exc
        resolve_profile(name, given)  # raises when the keywords alone are at fault
    try:
        for name, value in from_uri.items():
            if name not in options:
                check_option(name, value)
        return build(**{**from_uri, **options})
    except InvalidInput as exc:
        if not from_uri:
            raise
        # a URI option out of range, or URI options that do not fit together
        raise InvalidURI(f"{uri.raw or 'memory://'}: {exc}") from exc


def memory_uri(profile: str, capacity: Mapping[str, Any], settings: Mapping[str, Any]) -> str:
    """``memory://`` with the profile (unless the default), the capacity options given, and
    the store options that differ from their defaults."""
    def text(value: Any) -> str:
        return str(value).lower() if isinstance(value, bool) else str(value)

    changed = [("profile", profile)] if profile != DEFAULT_PROFILE else []
    changed += [(name, text(value)) for name, value in capacity.items()]
    changed += [(name, text(value)) for name, value in settings.items()
                if value != OPTIONS[name][1]]
    changed.sort()
    return "memory://" + (f"?{urlencode(changed)}" if changed else "")


def capacity_from_uri(uri: StoreURI, *, resolve: bool = True
                      ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The capacity options (``profile`` among them) and store options of a ``memory://``
    URI, typed and checked; InvalidURI names a bad one.

    With ``resolve`` False each option is checked alone, not as a profile with the URI's
    others: for settings that go over another profile, which checks them all together.
    """
    if uri.scheme != "memory":
        raise InvalidURI(f"a capacity model is given as memory://?profile=...&option=..., "
                         f"got {uri.raw!r}")
    taken = uri.take({"profile": str, **CAPACITY_OPTIONS,
                      **{name: spec[0] for name, spec in OPTIONS.items()}})
    try:
        for name, value in taken.items():
            check_option(name, value)
        capacity = {k: v for k, v in taken.items() if k in CAPACITY_OPTIONS or k == "profile"}
        if resolve:
            resolve_profile(capacity.get("profile", DEFAULT_PROFILE),
                            {k: v for k, v in capacity.items() if k != "profile"})
    except InvalidInput as exc:
        raise InvalidURI(f"{uri.raw}: {exc}") from exc
    return capacity, {k: v for k, v in taken.items() if k in OPTIONS}
