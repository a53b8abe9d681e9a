"""What ``shardex serve`` shows: live heat documents from a meter or a Prometheus endpoint.

A feed's ``read()`` returns one ``shardex.serve/1`` document (docs/json.md): the logical
keys hottest first (by peak units a second), their shard keys, each one's units a second
over time against one partition's ceiling, throttles, and a reshard's progress.

- ``MeterFeed``: a running index's heat meter (``ShardedIndex(..., meter=True)``,
  ``index.meter``), in the same process: the meter's own windows and figures; with a
  ``MetricsRecorder`` beside it, the reshard progress the runner reports there. The
  meter counts on its event loop and the page is served from another thread: give
  ``loop`` (the index's running loop) and each snapshot is taken on it.
- ``PrometheusFeed``: a ``/metrics`` endpoint that ``shardex.metrics`` serves, scraped at
  each read; rates are the counters' differences between scrapes, kept for the last
  ``keep`` scrapes.
- ``FleetFeed`` (``shardex.web.fleet``): a Prometheus server, every process it scrapes.

``document`` builds the document all of them return.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import urllib.request
from collections import deque
from collections.abc import Callable
from itertools import pairwise
from typing import Any

from shardex.capacity import Ceiling, resolve_ceiling
from shardex.documents import SERVE_SCHEMA, rounded
from shardex.errors import InvalidInput, InvalidKey, MissingDependency, Unavailable
from shardex.heatmeter.meter import HeatMeter
from shardex.heatmeter.view import HeatSnapshot, KeyMeter
from shardex.keys import SEPARATOR, parse_shard_key
from shardex.metrics.labels import OTHER
from shardex.metrics.recorder import MetricsRecorder

__all__ = ["Feed", "INTERNAL", "MeterFeed", "PrometheusFeed", "document", "value_of"]

_SHOWN = 20  # keys of each level shown


class Feed:
    """A source of ``shardex.serve/1`` documents; ``read()`` is called per page poll."""

    source = ""

    def read(self) -> dict[str, Any]:
        raise NotImplementedError


# what the rows that are not shard keys stand for (shown apart from the shard keys)
INTERNAL = {
    "#placement": "placements: where each item's entry lives (one record an item, never "
                  "hot by itself)",
    "#record": "shardex's own records: routing, reshard plans and work units",
    "#owner": "the owner record: which index a table serves",
    OTHER: "keys without a label of their own: all but the heaviest, summed (bounded labels)",
}


def _internal(row: dict[str, Any], level: str) -> bool:
    key = row["key"]
    return key == OTHER or (level == "shard_key" and key.startswith(SEPARATOR))


def document(source: str, at: float, window: float | None, ceiling: Ceiling,
             values: list[dict[str, Any]], shard_keys: list[dict[str, Any]],
             timeline: dict[str, Any], totals: dict[str, Any],
             reshard: dict[str, Any] | None, *, feed: dict[str, Any]) -> dict[str, Any]:
    """A ``shardex.serve/1`` document from a feed's rows (see docs/json.md).

    Rows of the store's own records (``#placement``, ...) and of the unlabelled keys
    (``other``) go to ``internal``, apart from the logical and shard keys, and out of
    the charts.
    """
    internal = []
    for level, rows in (("value", values), ("shard_key", shard_keys)):
        for row in [r for r in rows if _internal(r, level)]:
            rows.remove(row)
            what = INTERNAL.get(row["key"], "a record of the store's own")
            if row["key"] == OTHER:  # one at each level: say which
                what = f"{'logical' if level == 'value' else 'shard'} {what}"
            internal.append({**row, "level": level, "what": what})
        shown = timeline.get("values" if level == "value" else "shard_keys", {})
        for key in [k for k in shown if k == OTHER or (level == "shard_key" and
                                                      k.startswith(SEPARATOR))]:
            del shown[key]
    # the shard keys summed under 'other' are not counted: a key's count is then a floor
    unlabelled = {r.get("index") for r in internal
                  if r["level"] == "shard_key" and r["key"] == OTHER}
    for row in values:
        row["shards"] = max(1, row.get("shards", 1))  # a key with traffic has a shard key
        row["shards_all_seen"] = row.get("index") not in unlabelled
    values.sort(key=_hottest)
    shard_keys.sort(key=_hottest)
    internal.sort(key=_hottest)
    for row in (*values, *shard_keys, *internal):
        peaks = (row["peak_units_per_s"], row.pop("peak_write_units_per_s"),
                 row.pop("peak_read_units_per_s"))
        row["peak_to_ceiling"] = None if peaks[0] is None else ceiling.peak_ratio(*peaks)
    doc: dict[str, Any] = rounded({
        "schema": SERVE_SCHEMA, "source": source, "feed": feed, "at": at, "window_s": window,
        "ceiling": {"name": ceiling.name, "write_units_per_s": ceiling.write_units,
                    "read_units_per_s": ceiling.read_units},
        "values": values[:_SHOWN], "shard_keys": shard_keys[:_SHOWN],
        "internal": internal[:_SHOWN], "timeline": timeline, "totals": totals,
        "reshard": reshard, "routing": None})
    return doc


def _hottest(row: dict[str, Any]) -> tuple[float, float, str]:
    """Hottest first: by peak units a second, then (no rate yet: one scrape) by units."""
    return -(row["peak_units_per_s"] or 0.0), -row.get("units", 0.0), row["key"]


# the runner's counts among its reshard series, by the document's names
_COUNTS = {"entries_moved": "moved", "entries_total": "total",
           "parity_mismatches": "mismatches"}


class MeterFeed(Feed):
    """Documents from a heat meter's snapshots (see module)."""

    def __init__(self, meter: HeatMeter, *, ceiling: str | float | Ceiling | None = None,
                 recorder: MetricsRecorder | None = None, index: str | None = None,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        if not isinstance(meter, HeatMeter):
            raise InvalidInput(f"MeterFeed reads a HeatMeter (index.meter), got "
                               f"{type(meter).__name__}")
        self._meter = meter
        # the metered store's own partition ceiling unless told
        self._ceiling = meter.ceiling if ceiling is None else resolve_ceiling(ceiling)
        self._recorder = recorder
        self._index = index
        self._loop = loop
        self.source = "meter"

    def _snapshot(self) -> HeatSnapshot:
        loop = self._loop
        if loop is None or not loop.is_running():
            return self._meter.snapshot()

        async def take() -> HeatSnapshot:
            return self._meter.snapshot()

        try:
            return asyncio.run_coroutine_threadsafe(take(), loop).result(timeout=10)
        except TimeoutError as exc:
            raise Unavailable("the index's event loop did not answer within 10 s") from exc

    def read(self) -> dict[str, Any]:
        snap = self._snapshot()

        def row(key: str, m: KeyMeter, now: float, **more: Any) -> dict[str, Any]:
            return {"key": key, "units_per_s": now, "peak_units_per_s": m.peak_units_per_s,
                    "peak_write_units_per_s": m.peak_write_units_per_s,
                    "peak_read_units_per_s": m.peak_read_units_per_s,
                    "requests": m.requests, "units": m.units, "throttles": m.throttles,
                    "latency_p99_ms": m.latency_p99_ms, **more}

        def last(line: list[tuple[float, float]]) -> float:
            # the rate of the window now open counts only once it has closed
            done = [rate for start, rate in line if start + snap.window <= snap.at]
            return done[-1] if done else 0.0

        shards: dict[str, int] = {}
        for value in snap.shard_values.values():
            shards[value] = shards.get(value, 0) + 1
        values = [row(key, m, last(snap.timeline.get(key, [])), shards=shards.get(key, 1))
                  for key, m in snap.values.items()]
        shard_keys = [row(key, m, last(snap.shard_timeline.get(key, [])),
                          value=snap.shard_values.get(key, key))
                      for key, m in snap.shard_keys.items()]
        shown = {r["key"] for r in sorted(values, key=lambda r: -r["peak_units_per_s"])[:8]}
        shown_shards = {r["key"] for r in sorted(
            shard_keys, key=lambda r: -r["peak_units_per_s"])[:8]}
        closed = [start for start in snap.windows if start + snap.window <= snap.at]
        timeline = {"starts": closed,
                    "values": {k: _aligned(closed, snap.timeline.get(k, []))
                               for k in sorted(shown)},
                    "shard_keys": {k: _aligned(closed, snap.shard_timeline.get(k, []))
                                   for k in sorted(shown_shards)}}
        # the store's own records and the keys past the meter's cap: ``internal`` rows,
        # out of the charts
        shard_keys += [row(bucket, m, last(snap.reserved_timeline.get(bucket, [])), value=bucket)
                       for bucket, m in snap.reserved.items()]
        if snap.other is not None:
            values.append(row(OTHER, snap.other, last(snap.timeline.get(OTHER, [])), shards=1))
        totals = {"requests": snap.totals.requests, "units": snap.totals.units,
                  "throttles": snap.totals.throttles}
        reshard = None
        if self._recorder is not None and self._index is not None:
            reshard = self._recorder.reshard(self._index).to_dict()
        return document(self.source, snap.at, snap.window, self._ceiling, values, shard_keys,
                        timeline, totals, reshard,
                        feed={"kind": "meter", "note": "this process's own index meter"})


def _aligned(starts: list[float], line: list[tuple[float, float]]) -> list[float]:
    """The rates of ``line`` at each window start (0 where the key had no traffic)."""
    rates = dict(line)
    return [rates.get(start, 0.0) for start in starts]


class PrometheusFeed(Feed):
    """Documents from scrapes of a shardex ``/metrics`` endpoint (see module).

    ``clock`` gives the seconds a scrape is stamped with (``time.monotonic``); ``index``
    keeps that index's series only (None: every index the endpoint counts).
    """

    def __init__(self, url: str, *, ceiling: str | float | Ceiling = "dynamodb",
                 keep: int = 120, clock: Callable[[], float] = time.monotonic,
                 index: str | None = None) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidInput(f"a Prometheus endpoint is an http(s):// URL, got {url!r}")
        try:
            from prometheus_client.parser import text_string_to_metric_families
        except ImportError as exc:
            raise MissingDependency("prometheus-client", "metrics") from exc
        self._parse = text_string_to_metric_families
        self._url = url
        self._ceiling = resolve_ceiling(ceiling)
        self._clock = clock
        self._scrapes: deque[tuple[float, dict[str, dict[str, list[float]]]]] = \
            deque(maxlen=max(2, keep))
        self._lock = threading.Lock()
        self._reshard: dict[str, Any] | None = None
        self._index = index
        self.source = url

    def probe(self) -> None:
        """Scrape once now, the first of the rates' two: InvalidInput for a URL that
        answers in another format (an HTML page); one that does not answer yet is taken
        (the process may start later), and the page says so until it does."""
        with contextlib.suppress(Unavailable):
            self.read()

    def _scrape(self) -> dict[str, dict[str, list[float]]]:
        """Cumulative [write units, read units, throttles, requests] per value and shard key."""
        try:
            with urllib.request.urlopen(self._url, timeout=5) as answer:
                text = answer.read().decode("utf-8")
        except OSError as exc:
            raise Unavailable(f"cannot scrape {self._url}: {exc}") from exc
        levels: dict[str, dict[str, list[float]]] = {"value": {}, "shard_key": {},
                                                     "total": {}}
        slot = {"units": 0, "throttles": 2, "requests": 3}
        # the index totals: each request once (the shard keys count one on every key it
        # touched, an entry's and its placement's: 302 requests for 202)
        whole = {f"shardex_{what}_total": at for what, at in slot.items()}
        reshard: dict[str, Any] = {}
        try:
            families = list(self._parse(text))
        except ValueError as exc:
            raise InvalidInput(
                f"{self._url} did not answer in the Prometheus text format ({exc}); give a "
                "process's /metrics endpoint, or a Prometheus server's base URL") from None
        for family in families:
            for sample in family.samples:
                name, labels = sample.name, sample.labels
                if self._index is not None and labels.get("index") != self._index:
                    continue
                if name.startswith("shardex_reshard_"):
                    field = name.removeprefix("shardex_reshard_")
                    reshard.setdefault("index", labels.get("index"))
                    if field == "state":
                        reshard["state"] = labels.get("state")
                    elif field == "version":
                        reshard[f"{labels.get('side')}_version"] = int(sample.value)
                    elif field in _COUNTS:  # counts: integers, as the fleet's are
                        reshard[_COUNTS[field]] = int(sample.value)
                    else:
                        reshard[field] = sample.value
                    continue
                if name in whole:
                    levels["total"].setdefault("", [0.0] * 4)[whole[name]] += sample.value
                    continue
                for level, prefix in (("value", "shardex_key_"),
                                      ("shard_key", "shardex_shard_key_")):
                    what = name.removeprefix(prefix).removesuffix("_total")
                    if name.startswith(prefix) and what in slot and level in labels:
                        figures = levels[level].setdefault(labels[level], [0.0] * 4)
                        index = slot[what] + (1 if what == "units" and
                                              labels.get("op") == "read" else 0)
                        figures[index] += sample.value
        self._reshard = reshard or None
        return levels

    def read(self) -> dict[str, Any]:
        levels = self._scrape()
        with self._lock:
            self._scrapes.append((self._clock(), levels))
            scrapes = list(self._scrapes)
        starts = [at for at, _ in scrapes[1:]]
        rows: dict[str, list[dict[str, Any]]] = {"value": [], "shard_key": []}
        lines: dict[str, dict[str, list[float]]] = {"value": {}, "shard_key": {}}
        for level in rows:
            for key, figures in levels[level].items():
                writes, reads = [], []
                for (t0, before), (t1, after) in pairwise(scrapes):
                    old = before[level].get(key, [0.0] * 4)
                    new = after[level].get(key, [0.0] * 4)
                    seconds = max(t1 - t0, 1e-9)
                    writes.append(max(0.0, new[0] - old[0]) / seconds)
                    reads.append(max(0.0, new[1] - old[1]) / seconds)
                rates = [w + r for w, r in zip(writes, reads, strict=True)]
                lines[level][key] = rates
                # one scrape has no rate: unknown (None), not a cold key's 0.0
                row = {"key": key, "units_per_s": rates[-1] if rates else None,
                       "peak_units_per_s": max(rates, default=None),
                       "peak_write_units_per_s": max(writes, default=None),
                       "peak_read_units_per_s": max(reads, default=None),
                       "requests": int(figures[3]), "units": figures[0] + figures[1],
                       "throttles": int(figures[2]), "latency_p99_ms": None}
                if level == "value":
                    row["shards"] = sum(1 for k in levels["shard_key"] if value_of(k) == key)
                else:
                    row["value"] = value_of(key)
                rows[level].append(row)
        hottest = {level: {r["key"] for r in sorted(rows[level], key=_hottest)[:8]}
                   for level in rows}
        timeline = {"starts": starts,
                    "values": {k: v for k, v in lines["value"].items() if k in hottest["value"]},
                    "shard_keys": {k: v for k, v in lines["shard_key"].items()
                                   if k in hottest["shard_key"]}}
        whole = levels["total"].get("", [0.0] * 4)
        totals = {"requests": int(whole[3]), "units": whole[0], "throttles": int(whole[2])}
        reshard = self._reshard
        if reshard is not None and reshard.get("total"):
            reshard["progress"] = min(1.0, reshard.get("moved", 0.0) / reshard["total"])
        # a point is the rate between two scrapes: none before the second (it read
        # "windows of 0.0 s" then, and until the third)
        window = scrapes[-1][0] - scrapes[-2][0] if len(scrapes) > 1 else None
        feed = {"kind": "endpoint", "url": self._url,
                "note": "one process's /metrics: other processes of the fleet are not in it"}
        return document(self.source, scrapes[-1][0], window, self._ceiling, rows["value"],
                        rows["shard_key"], timeline, totals, reshard, feed=feed)


def value_of(key: str) -> str:
    """The logical key of shard key ``key`` (itself when it is not a shard key)."""
    try:
        return parse_shard_key(key)[0]
    except InvalidKey:
        return key
