"""The options of ``memory://``: names, types, defaults and ranges, checked once.

Options come as keywords to ``MemoryStore`` or as ``memory://?name=value``; keywords
win. A bad keyword raises InvalidInput naming the option; a bad URI option (or URI
options that do not fit together) raises InvalidURI.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlencode

from shardex.capacity import QUERY_PAGE_BYTES
from shardex.errors import InvalidInput, InvalidURI
from shardex.stores.uri import StoreURI

__all__ = ["OPTIONS", "check_option", "memory_uri", "options_from_uri"]

_PROBABILITY = (0.0, 1.0, "a probability from 0 to 1")
# option -> (type, default, lowest, highest, what a valid value is)
OPTIONS: dict[str, tuple[type, Any, float, float, str]] = {
    "partitions": (int, 0, 0, math.inf, "an integer >= 0"),
    "write_ceiling": (float, 1000.0, 1e-9, math.inf, "> 0 units/s"),
    "read_ceiling": (float, 3000.0, 1e-9, math.inf, "> 0 units/s"),
    "burst_seconds": (float, 300.0, 1.0, math.inf, ">= 1 second"),
    "initial_burst_seconds": (float, 1.0, 0.0, math.inf, ">= 0 seconds"),
    "transaction_cost": (float, 2.0, 1.0, math.inf, ">= 1"),
    "consistent": (bool, True, 0, 1, "true or false"),
    "latency_median_ms": (float, 4.0, 1e-9, math.inf, "> 0 ms"),
    "latency_p99_ms": (float, 25.0, 1e-9, math.inf, "> 0 ms"),
    "latency_per_kb_ms": (float, 0.01, 0.0, math.inf, ">= 0 ms"),
    "max_page_bytes": (int, QUERY_PAGE_BYTES, 1, math.inf, "an integer >= 1"),
    "throttle_rate": (float, 0.0, *_PROBABILITY),
    "unavailable_rate": (float, 0.0, *_PROBABILITY),
    "ambiguous_rate": (float, 0.0, *_PROBABILITY),
    "seed": (int, None, -math.inf, math.inf, "an integer or None"),
}


def check_option(name: str, value: Any) -> Any:
    """Return ``value`` if it suits the option ``name``; raise InvalidInput naming it."""
    kind, _, low, high, what = OPTIONS[name]
    if name == "seed" and value is None:
        return value
    if kind is bool:
        ok = isinstance(value, bool)
    else:
        ok = not isinstance(value, bool) and isinstance(value, int if kind is int else int | float)
        ok = ok and low <= value <= high and math.isfinite(value)
    if not ok:
        raise InvalidInput(f"memory:// option {name} must be {what}, got {value!r}")
    return value


def options_from_uri(uri: StoreURI, options: Mapping[str, Any],
                     build: Callable[..., Any]) -> Any:
    """Call ``build(**settings)`` with the URI's options under the keyword ``options``."""
    unknown = sorted(set(options) - set(OPTIONS) - {"clock"})
    if unknown:
        raise InvalidInput(f"memory:// does not know the option(s) {', '.join(unknown)}; "
                           f"known: clock, {', '.join(sorted(OPTIONS))}")
    if uri.location or uri.path:
        raise InvalidURI(f"memory:// takes options only, no location or path: {uri.raw!r}")
    from_uri = uri.take({name: spec[0] for name, spec in OPTIONS.items()})
    for name, value in options.items():
        if name != "clock":
            check_option(name, value)
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


def memory_uri(settings: Mapping[str, Any]) -> str:
    """``memory://`` with the options that differ from their defaults."""
    changed = sorted((name, str(value).lower() if isinstance(value, bool) else str(value))
                     for name, value in settings.items() if value != OPTIONS[name][1])
    return "memory://" + (f"?{urlencode(changed)}" if changed else "")
