"""A small client of the Prometheus HTTP API (``/api/v1``): instant and range queries, targets.

``PromQL(url)`` asks the server at ``url`` (``http://host:9090``, with any path prefix a
proxy adds) over the standard library's HTTP client; answers are the API's JSON. Every
failure is a shardex error naming the server: Unavailable when it cannot be reached or
answers 5xx, InvalidInput when it refuses the query (4xx, with Prometheus's own reason)
or answers what is not the API's JSON (a URL that is not a Prometheus server).

``is_prometheus(url)`` tells whether ``url`` is a Prometheus server (its
``/api/v1/status/buildinfo`` answers), as opposed to one process's ``/metrics``.
"""

from __future__ import annotations

import json
import math
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from shardex.errors import InvalidInput, Unavailable
from shardex.stores.uri import split_url

__all__ = ["PromQL", "Series", "is_prometheus", "label_matchers", "seconds"]

# one PromQL label matcher: name, operator, double-quoted value (escapes allowed)
_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*')
_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_UNIT = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}

Series = tuple[dict[str, str], list[tuple[float, float]]]


def label_matchers(text: str) -> str:
    """Check PromQL label matchers (``job="orders", env=~"prod|eu"``); return them joined.

    Raises InvalidInput naming the part that is not a matcher: the text goes into every
    query the page makes, so nothing else may ride along.
    """
    if not isinstance(text, str):
        raise InvalidInput(f"label matchers are text, got {type(text).__name__}")
    body = text.strip().removeprefix("{").removesuffix("}").strip()
    if not body:
        return ""
    found, at = [], 0
    while at < len(body):
        match = _MATCHER.match(body, at)
        if match is None:
            raise InvalidInput(f"not a PromQL label matcher (name=\"value\", name=~\"regex\", "
                               f"...): {body[at:at + 60]!r}")
        found.append(f'{match[1]}{match[2]}"{match[3]}"')
        at = match.end()
        if at < len(body):
            if body[at] != ",":
                raise InvalidInput(f"label matchers are separated by commas: "
                                   f"{body[at:at + 60]!r}")
            at += 1
    return ",".join(found)


def seconds(duration: str) -> float:
    """A Prometheus duration (``15s``, ``1m30s``) in seconds; raises InvalidInput."""
    parts = _DURATION.findall(duration or "")
    if not parts or "".join(n + u for n, u in parts) != duration:
        raise InvalidInput(f"not a Prometheus duration: {duration!r}")
    return float(sum(int(n) * _UNIT[u] for n, u in parts))


class PromQL:
    """Queries the Prometheus server at ``url`` (see module); ``timeout`` in seconds."""

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidInput(f"a Prometheus server is an http(s):// URL, got {url!r}")
        split_url(url, "Prometheus URL")
        self.url = url.rstrip("/")
        self._timeout = timeout

    def _get(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        query = "?" + urllib.parse.urlencode(params) if params else ""
        where = f"{self.url}{path}"
        try:
            with urllib.request.urlopen(where + query, timeout=self._timeout) as answer:
                body = answer.read()
        except urllib.error.HTTPError as exc:
            reason = _reason(exc.read())
            if exc.code >= 500 and exc.code != 501:
                raise Unavailable(f"Prometheus at {self.url} answered {exc.code}: "
                                  f"{reason}") from exc
            raise InvalidInput(f"Prometheus at {self.url} refused {path} ({exc.code}): "
                               f"{reason}") from exc
        except (OSError, ValueError) as exc:
            raise Unavailable(f"cannot reach Prometheus at {self.url}: {exc}") from exc
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        if not isinstance(doc, dict) or doc.get("status") != "success" or "data" not in doc:
            raise InvalidInput(f"{where} did not answer as the Prometheus HTTP API does "
                               f"(is {self.url} a Prometheus server?)")
        return doc["data"]

    def instant(self, query: str, *, at: float | None = None) -> list[tuple[dict[str, str],
                                                                            float]]:
        """An instant query: each series' labels and value (NaN and infinities left out)."""
        params = {"query": query, **({} if at is None else {"time": f"{at:.3f}"})}
        data = self._get("/api/v1/query", params)
        out = []
        for row in _vector(data, query):
            value = _number(row.get("value"))
            if value is not None:
                out.append((dict(row.get("metric") or {}), value))
        return out

    def range(self, query: str, *, start: float, end: float, step: float) -> list[Series]:
        """A range query from ``start`` to ``end`` (seconds) every ``step`` seconds."""
        data = self._get("/api/v1/query_range", {
            "query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"})
        if not isinstance(data, dict) or data.get("resultType") != "matrix":
            raise InvalidInput(f"Prometheus at {self.url} answered {query!r} without a matrix")
        out = []
        for row in data.get("result") or []:
            points = [(float(p[0]), v) for p in row.get("values") or []
                      if (v := _number(p)) is not None]
            out.append((dict(row.get("metric") or {}), points))
        return out

    def targets(self) -> list[dict[str, Any]]:
        """The active scrape targets, as ``/api/v1/targets`` lists them."""
        data = self._get("/api/v1/targets", {"state": "active"})
        found = data.get("activeTargets") if isinstance(data, dict) else None
        return [t for t in found or [] if isinstance(t, dict)]

    def scrape_intervals(self) -> list[tuple[str, str, float]]:
        """Each active target's job, instance and scrape interval in seconds (a target
        whose interval is no Prometheus duration is left out)."""
        out = []
        for target in self.targets():
            labels = target.get("labels") or {}
            try:
                interval = seconds(str(target.get("scrapeInterval", "")))
            except InvalidInput:
                continue
            out.append((labels.get("job", ""), labels.get("instance", ""), interval))
        return out


def _vector(data: Any, query: str) -> list[dict[str, Any]]:
    if not isinstance(data, dict) or data.get("resultType") != "vector":
        raise InvalidInput(f"Prometheus answered {query!r} without a vector")
    return [row for row in data.get("result") or [] if isinstance(row, dict)]


def _number(pair: Any) -> float | None:
    try:
        value = float(pair[1])
    except (TypeError, ValueError, IndexError):
        return None
    return value if math.isfinite(value) else None


def _reason(body: bytes) -> str:
    try:
        doc = json.loads(body)
        return str(doc.get("error") or doc)[:300]
    except ValueError:
        return body.decode("utf-8", "replace").strip()[:300] or "no reason given"


def is_prometheus(url: str, *, timeout: float = 5.0) -> bool:
    """Whether ``url`` is a Prometheus server: its build information answers as the API does.

    A URL ending in ``/metrics`` is one process's endpoint and is not asked. Raises
    nothing: an unreachable server is found out by the first read, a URL that cannot be
    read by whoever reads it (``PromQL``, ``open_feed``).
    """
    try:
        if split_url(url, "Prometheus URL").path.rstrip("/").endswith("/metrics"):
            return False
        data = PromQL(url, timeout=timeout)._get("/api/v1/status/buildinfo")
    except (InvalidInput, Unavailable):
        return False
    return isinstance(data, dict) and "version" in data
