"""Fleet-wide heat from a Prometheus server: every process that exports shardex metrics, summed.

``FleetFeed(url)`` reads ``shardex.serve/1`` documents by PromQL from a Prometheus server
that scrapes the application processes and reshard runners (each one's
``shardex.metrics.serve_prometheus``, or ``shardex reshard run --metrics-port``):

- rates: ``sum by (index, value, op) (rate(shardex_key_units_total[W]))`` and the same
  per shard key, over the last ``history`` seconds by a range query (the charts show
  the past, not only what arrived since the page loaded), ``W`` four scrape intervals
  (the targets' own, from ``/api/v1/targets``; 15 s when none is known yet);
- counts (units, requests, throttles): each process's counters at their last sample
  within ``history``, summed: a process that exited within it still counts, as one
  that restarted on the same address counts from its restart;
- targets: the ``(job, instance)`` pairs whose ``shardex_requests_total`` was seen
  within ``history``, and how many of them are up now;
- a reshard runner's gauges (``shardex_reshard_*``), while a runner is up.

``index`` keeps one index (its ``index`` label), ``match`` adds PromQL label matchers
(``job="orders-api"``) to every selector. ``clock`` gives wall seconds (``time.time``):
Prometheus stamps samples with wall time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from typing import Any

from shardex.capacity import Ceiling, resolve_ceiling
from shardex.errors import InvalidInput
from shardex.stores.uri import split_url
from shardex.web.feeds import Feed, PrometheusFeed, document, value_of
from shardex.web.promql import PromQL, is_prometheus, label_matchers

__all__ = ["FleetFeed", "open_feed"]

_HOTTEST = 8        # keys of each level drawn in the charts
_TARGETS_EVERY = 60.0  # seconds between reads of /api/v1/targets (a large fleet's is large)
_DEFAULT_INTERVAL = 15.0


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _tagged(parts: Iterable[tuple[str, str]]) -> str:
    """``A or B or ...`` with each part's series labelled ``figure="name"``."""
    return " or ".join(f'label_replace({query}, "figure", "{name}", "", "")'
                       for name, query in parts)


class FleetFeed(Feed):
    """Documents of a whole fleet's heat from a Prometheus server (see module)."""

    def __init__(self, url: str, *, ceiling: str | float | Ceiling = "dynamodb",
                 index: str | None = None, match: str = "", history: float = 900.0,
                 points: int = 240, clock: Callable[[], float] = time.time,
                 timeout: float = 10.0) -> None:
        if isinstance(history, bool) or not isinstance(history, int | float) \
                or not math.isfinite(history) or not 10 <= history <= 7 * 86400:
            raise InvalidInput(f"history must be 10 s to 7 days, got {history!r}")
        if isinstance(points, bool) or not isinstance(points, int) or not 2 <= points <= 2000:
            raise InvalidInput(f"points must be an integer from 2 to 2000, got {points!r}")
        if index is not None and (not isinstance(index, str) or not index):
            raise InvalidInput(f"index must be non-empty text, got {index!r}")
        self._api = PromQL(url, timeout=timeout)
        self._ceiling = resolve_ceiling(ceiling)
        self._match = label_matchers(match)
        self._selector = ",".join(p for p in (
            None if index is None else f"index={_quote(index)}", self._match) if p)
        self._history = float(history)
        self._points = points
        self._clock = clock
        self._interval: tuple[float, float] | None = None  # (read at, seconds)
        self.source = self._api.url

    def _s(self, metric: str) -> str:
        return f"{metric}{{{self._selector}}}"

    def _scrape_interval(self, now: float, seen: set[tuple[str, str]]) -> float:
        """The longest scrape interval among the exporters (read once a minute)."""
        if self._interval is not None and now - self._interval[0] < _TARGETS_EVERY:
            return self._interval[1]
        found, every = [], []  # the exporters' intervals, and every target's
        for job, instance, interval in self._api.scrape_intervals():
            every.append(interval)
            if (job, instance) in seen:
                found.append(interval)
        # none seen within the history: the server's own intervals, not a default of
        # 15 s whose rate window (60 s) reached past a short history
        interval = max(found or every, default=_DEFAULT_INTERVAL)
        if found:  # until an exporter is seen, ask again at the next read
            self._interval = (now, interval)
        return interval

    def read(self) -> dict[str, Any]:
        api, history = self._api, self._history
        now = self._clock()
        span = f"[{history:.0f}s]"
        seen = {(m.get("job", ""), m.get("instance", "")) for m, _ in api.instant(
            f"group by (job, instance) (last_over_time({self._s('shardex_requests_total')}"
            f"{span}))", at=now)}
        up = {(m.get("job", ""), m.get("instance", "")) for m, _ in api.instant(
            f"up{{{self._match}}} == 1", at=now)}
        interval = self._scrape_interval(now, seen)
        window = min(max(4.0, 4 * interval), history)  # no rate from before the history
        step = max(interval, history / self._points)
        end = math.floor(now / step) * step
        n = max(2, int(history // step))
        starts = [end - step * (n - 1 - i) for i in range(n)]
        rows: dict[str, list[dict[str, Any]]] = {}
        lines: dict[str, dict[tuple[str, str], list[float]]] = {}
        for level, metric in (("value", "shardex_key_"), ("shard_key", "shardex_shard_key_")):
            rates = api.range(f"sum by (index, {level}, op) (rate("
                              f"{self._s(metric + 'units_total')}[{window:.0f}s]))",
                              start=starts[0], end=end, step=step)
            counts = api.instant(_tagged(
                (what, f"sum by (index, {level}) (last_over_time("
                       f"{self._s(metric + what + '_total')}{span}))")
                for what in ("units", "requests", "throttles")), at=now)
            rows[level], lines[level] = self._rows(level, starts, step, rates, counts)
        shards: dict[tuple[str, str], int] = {}
        for row in rows["shard_key"]:
            if row["value"] is not None:
                pair = (row["index"], row["value"])
                shards[pair] = shards.get(pair, 0) + 1
        for row in rows["value"]:
            row["shards"] = shards.get((row["index"], row["key"]), 1)
        indexes = sorted({r["index"] for level in rows.values() for r in level})
        several = len(indexes) > 1

        def drawn(level: str) -> dict[str, list[float]]:
            hottest = sorted(rows[level], key=lambda r: -r["peak_units_per_s"])[:_HOTTEST]
            return {(f"{r['index']}/{r['key']}" if several else r["key"]):
                    lines[level][(r["index"], r["key"])] for r in hottest}

        timeline = {"starts": starts, "values": drawn("value"), "shard_keys": drawn("shard_key")}
        totals = {"requests": 0, "units": 0.0, "throttles": 0}
        for labels, value in api.instant(_tagged(
                (what, f"sum(last_over_time({self._s('shardex_' + what + '_total')}{span}))")
                for what in ("requests", "units", "throttles")), at=now):
            figure = labels.get("figure", "")
            totals[figure] = value if figure == "units" else round(value)
        feed = {"kind": "prometheus", "url": api.url, "selector": self._selector,
                "targets_seen": len(seen), "targets_up": len(seen & up),
                "targets": [{"job": job, "instance": instance, "up": (job, instance) in up}
                            for job, instance in sorted(seen)][:50],
                "scrape_interval_s": interval, "rate_window_s": window, "step_s": step,
                "history_s": history, "indexes": indexes}
        return document(self.source, end, window, self._ceiling, rows["value"],
                        rows["shard_key"], timeline, totals, self._reshard(now), feed=feed)

    def _rows(self, level: str, starts: list[float], step: float,
              rates: list[tuple[dict[str, str], list[tuple[float, float]]]],
              counts: list[tuple[dict[str, str], float]]
              ) -> tuple[list[dict[str, Any]], dict[tuple[str, str], list[float]]]:
        """One level's rows (every key counted within the history) and rate lines."""
        first = starts[0]
        by_op: dict[tuple[str, str], dict[str, list[float]]] = {}
        for labels, points in rates:
            pair = (labels.get("index", ""), labels.get(level, ""))
            line = by_op.setdefault(pair, {}).setdefault(labels.get("op", "write"),
                                                         [0.0] * len(starts))
            for at, rate in points:
                i = round((at - first) / step)
                if 0 <= i < len(line):
                    line[i] += rate
        figures: dict[tuple[str, str], dict[str, float]] = {}
        for labels, value in counts:
            pair = (labels.get("index", ""), labels.get(level, ""))
            figures.setdefault(pair, {})[labels.get("figure", "")] = value
        out, lines = [], {}
        for pair in sorted(set(by_op) | set(figures)):
            ops = by_op.get(pair, {})
            zero = [0.0] * len(starts)
            writes, reads = ops.get("write", zero), ops.get("read", zero)
            total = [w + r for w, r in zip(writes, reads, strict=True)]
            lines[pair] = total
            got = figures.get(pair, {})
            row: dict[str, Any] = {
                "key": pair[1], "index": pair[0], "units_per_s": total[-1],
                "peak_units_per_s": max(total), "peak_write_units_per_s": max(writes),
                "peak_read_units_per_s": max(reads), "requests": round(got.get("requests", 0)),
                "units": got.get("units", 0.0), "throttles": round(got.get("throttles", 0)),
                "latency_p99_ms": None}
            if level == "shard_key":
                row["value"] = value_of(pair[1])
            out.append(row)
        return out, lines

    def _reshard(self, now: float) -> dict[str, Any] | None:
        """A running reshard's gauges (the first index not stable), or None."""
        states = self._api.instant(
            f"max by (index, state) ({self._s('shardex_reshard_state')}) > 0", at=now)
        if not states:
            return None
        states.sort(key=lambda s: (s[0].get("state") == "stable", s[0].get("index", "")))
        index = states[0][0].get("index", "")
        which = f"{self._selector},index={_quote(index)}".lstrip(",")
        figures = {labels.get("figure", ""): value for labels, value in self._api.instant(
            _tagged((name, f"max(shardex_reshard_{metric}{{{which}}})") for name, metric in (
                ("moved", "entries_moved"), ("total", "entries_total"),
                ("mismatches", "parity_mismatches"))), at=now)}
        versions = {labels.get("side", ""): round(value) for labels, value in self._api.instant(
            f"max by (side) (shardex_reshard_version{{{which}}})", at=now)}
        moved, total = round(figures.get("moved", 0)), round(figures.get("total", 0))
        return {"index": index, "state": states[0][0].get("state"), "moved": moved,
                "total": total, "progress": min(1.0, moved / total) if total else 1.0,
                "mismatches": round(figures.get("mismatches", 0)),
                "from_version": versions.get("from"), "to_version": versions.get("to")}


def open_feed(url: str, *, ceiling: str | float | Ceiling = "dynamodb",
              index: str | None = None, match: str = "", history: float = 900.0) -> Feed:
    """The feed ``url`` needs: ``FleetFeed`` when it is a Prometheus server (its HTTP API
    answers), else ``PrometheusFeed`` (one process's ``/metrics``, scraped directly).

    ``match`` selects series of a Prometheus server only: with an endpoint it raises
    InvalidInput, as does a URL that is not http(s):// or that urllib cannot read, and an
    endpoint that answers in another format than Prometheus text (``probe``).
    """
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise InvalidInput(f"a Prometheus server or endpoint is an http(s):// URL, got {url!r}")
    split_url(url, "Prometheus URL")  # InvalidURI for one urllib cannot read
    if is_prometheus(url):
        return FleetFeed(url, ceiling=ceiling, index=index, match=match, history=history)
    if label_matchers(match):
        raise InvalidInput(f"{url} is not a Prometheus server (its /api/v1 does not answer): "
                           "label matchers select series of a Prometheus server, not of one "
                           "process's /metrics")
    feed = PrometheusFeed(url, ceiling=ceiling, index=index)
    feed.probe()  # an HTML page is refused now, not shown as an error on the page
    return feed
