"""Metrics from the one metering path: bounded labels, the figures against store.stats(),
a scraped Prometheus endpoint, OpenTelemetry instruments, reshard gauges, and the
metering written as an access log that diagnose reads."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import threading
import time
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

import shardex
from shardex.errors import InvalidInput, ShardexError
from shardex.metrics import OTHER, AccessLogWriter, MetricsRecorder, TopKeys
from shardex.metrics.prometheus import serve_prometheus
from shardex.stores.stats import StoreStats

HOT_URI = "memory://?throttle_rate=0.05&seed=3"


async def traffic(index: shardex.ShardedIndex, writes: dict[str, int], reads: int) -> None:
    """Writes per value, interleaved, then ``reads`` listings of the heaviest value."""
    rng = random.Random(7)
    plan = [value for value, n in writes.items() for _ in range(n)]
    rng.shuffle(plan)

    async def put(i: int, value: str) -> None:
        # a write throttled past its retries is counted as throttles all the same
        with contextlib.suppress(ShardexError):
            await index.put(value, f"item-{i}", sort=f"{i:06d}")

    await asyncio.gather(*(put(i, value) for i, value in enumerate(plan)))
    hot = max(writes, key=writes.__getitem__)
    for _ in range(reads):
        await index.query(hot, limit=50)
    await index.count(hot)


def run_index(store: shardex.Store, writes: dict[str, int], *, reads: int = 5,
              shards: int = 4) -> None:
    routing = shardex.Routing(overrides={max(writes, key=writes.__getitem__):
                                         shardex.ShardPolicy(shards=shards)})

    async def main() -> None:
        async with shardex.ShardedIndex(store, "orders", routing, hedge=None) as index:
            await traffic(index, writes, reads)

    shardex.run_virtual(main())


def scraped(url: str) -> dict[str, list[Any]]:
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    families: dict[str, list[Any]] = defaultdict(list)
    for family in text_string_to_metric_families(text):
        families[family.name].extend(family.samples)
    return families


def by_labels(samples: list[Any], name: str, *keys: str) -> dict[tuple[str, ...], float]:
    out: dict[tuple[str, ...], float] = defaultdict(float)
    for sample in samples:
        if sample.name == name:
            out[tuple(sample.labels[k] for k in keys)] += sample.value
    return dict(out)


def test_top_keys_name_at_most_k_and_the_heavy_ones() -> None:
    rng = random.Random(1)
    keys = TopKeys(5, counters=64)
    labels: set[str] = set()
    # 10,000 keys of Zipf-like weights; heavy-0..heavy-2 far above the rest
    for i in range(50_000):
        if i % 4 == 0:
            key = f"heavy-{i % 3}"
        else:
            key = f"k-{int(rng.paretovariate(1.0)) % 10_000}-{rng.randrange(10_000)}"
        labels.add(keys.label(key, 1.0))
        if i % 5_000 == 0:
            keys.rebalance()
    keys.rebalance()
    assert len(keys.named) <= 5
    assert {"heavy-0", "heavy-1", "heavy-2"} <= keys.named
    assert len(labels) <= 5 + 1 + len(keys.named) + 3  # names ever given stay few
    with pytest.raises(InvalidInput):
        TopKeys(0)
    with pytest.raises(InvalidInput):
        TopKeys(10, counters=5)


def test_top_keys_swap_only_a_surely_heavier_key() -> None:
    keys = TopKeys(2, counters=8)
    assert keys.label("a", 10) == "a"
    assert keys.label("b", 10) == "b"
    assert keys.label("c", 11) == OTHER
    assert keys.rebalance() == []  # heavier, but not by the margin: no flapping
    keys.label("c", 1)
    assert keys.rebalance() == []  # 12 <= 1.25 x 10
    keys.label("c", 20)
    assert keys.rebalance() == [("c", "a")]
    assert keys.named == {"b", "c"}


def test_recorder_figures_equal_store_stats() -> None:
    store = shardex.open_store(HOT_URI)
    recorder = MetricsRecorder(top=10).attach(store)
    run_index(store, {"PENDING": 600, "SHIPPED": 150, "CANCELLED": 20})
    stats: StoreStats = store.stats()
    figures = recorder.figures()
    requests = defaultdict(float)
    for sample in figures["shardex_requests"]:
        if sample["labels"]["outcome"] != "unavailable":
            requests[sample["labels"]["op"]] += sample["value"]
    assert requests["write"] == stats.totals.write_requests
    assert requests["read"] == stats.totals.read_requests
    units = {s["labels"]["op"]: s["value"] for s in figures["shardex_units"]}
    assert units["write"] == pytest.approx(stats.totals.write_units)
    assert units["read"] == pytest.approx(stats.totals.read_units)
    throttles = sum(s["value"] for s in figures["shardex_throttles"])
    assert throttles == stats.totals.throttles > 0
    reasons: dict[str, float] = defaultdict(float)
    for sample in figures["shardex_throttles"]:
        reasons[sample["labels"]["reason"]] += sample["value"]
    assert reasons == stats.throttle_reasons
    assert "injected" in reasons
    shard_requests = defaultdict(float)
    for sample in figures["shardex_shard_key_requests"]:
        shard_requests[sample["labels"]["shard_key"]] += sample["value"]
    for key in stats.shard_keys():
        assert shard_requests[key] == stats.by_key[key].requests, key
    assert shard_requests["#placement"] == stats.by_key["#placement#"].requests
    value_units = defaultdict(float)
    for sample in figures["shardex_key_units"]:
        value_units[sample["labels"]["value"]] += sample["value"]
    pending = sum(stats.by_key[k].read_units + stats.by_key[k].write_units
                  for k in stats.shard_keys() if k.startswith("PENDING"))
    assert value_units["PENDING"] == pytest.approx(pending)
    widths = figures["shardex_fanout_width"]
    assert widths[0]["count"] == 6  # five pages and a count, of PENDING's 4 shard keys
    assert widths[0]["value"] == 24.0


def test_many_keys_keep_the_label_set_bounded_and_the_sums_whole() -> None:
    store = shardex.open_store("memory://?seed=2")
    recorder = MetricsRecorder(top=8).attach(store)
    writes = {f"tenant-{i}": 1 for i in range(3_000)}
    writes.update({"HOT-A": 400, "HOT-B": 300})
    run_index(store, writes, reads=0)
    named = recorder.snapshot() and recorder.label_of("orders", "HOT-B")
    assert named == "HOT-B"  # surely heavier than the tenants named at first sight
    # from now on its requests count under its own name
    run_index(store, {"HOT-A": 40, "HOT-B": 30, "tenant-new": 1}, reads=0)
    stats = store.stats()
    with serve_prometheus(recorder) as server:
        families = scraped(server.url)
    keys = by_labels(families["shardex_key_requests"], "shardex_key_requests_total",
                     "value")
    assert len(keys) <= 8 + 1
    assert {("HOT-A",), ("HOT-B",), (OTHER,)} <= set(keys)
    shard_keys = by_labels(families["shardex_shard_key_requests"],
                           "shardex_shard_key_requests_total", "shard_key")
    assert len(shard_keys) <= 8 + 1 + 3  # and the store's own keys, by kind
    everything = sum(v.requests for k, v in stats.by_key.items() if not k.startswith("#"))
    assert sum(v for (k,), v in shard_keys.items()
               if not k.startswith("#") or k == OTHER) == everything
    assert sum(keys.values()) == everything


def test_a_key_named_other_has_its_own_series() -> None:
    """The keys without a label of their own summed under 'other', which is a logical
    key too: its 20 requests were added to two other keys' 5. The bucket is '#other',
    which no logical key can be."""
    store = shardex.open_store("memory://?partitions=0")
    recorder = MetricsRecorder(top=2).attach(store)
    run_index(store, {"other": 20, "PENDING": 5, "SHIPPED": 3, "DELIVERED": 2}, reads=0)
    with serve_prometheus(recorder) as server:
        families = scraped(server.url)
    keys = by_labels(families["shardex_key_requests"], "shardex_key_requests_total",
                     "value")
    by_value: dict[str, float] = {}
    for key, counted in store.stats().by_key.items():
        if not key.startswith("#"):
            value = key.partition("#")[0]
            by_value[value] = by_value.get(value, 0) + counted.requests
    assert OTHER == "#other"
    assert keys[("other",)] == by_value["other"] > 0
    assert sum(n for (k,), n in keys.items() if k != "other") == \
        sum(n for v, n in by_value.items() if v != "other")


def test_prometheus_endpoint_figures_match_store_stats() -> None:
    store = shardex.open_store(HOT_URI)
    recorder = MetricsRecorder(top=10).attach(store)
    run_index(store, {"PENDING": 500, "SHIPPED": 100})
    stats = store.stats()
    with serve_prometheus(recorder) as server:
        assert server.url.startswith("http://127.0.0.1:")
        families = scraped(server.url)
    writes = by_labels(families["shardex_requests"], "shardex_requests_total", "op",
                       "outcome")
    assert sum(v for (op, outcome), v in writes.items()
               if op == "write" and outcome != "unavailable") == stats.totals.write_requests
    shard = by_labels(families["shardex_shard_key_units"], "shardex_shard_key_units_total",
                      "shard_key", "op")
    for key in stats.shard_keys():
        assert shard.get((key, "write"), 0.0) == pytest.approx(stats.by_key[key].write_units)
    throttled = by_labels(families["shardex_shard_key_throttles"],
                          "shardex_shard_key_throttles_total", "shard_key")
    for key in stats.shard_keys():
        assert throttled.get((key,), 0.0) == stats.by_key[key].throttles, key
    counts = by_labels(families["shardex_request_seconds"], "shardex_request_seconds_count",
                       "op")
    assert counts[("write",)] == stats.totals.write_requests
    assert by_labels(families["shardex_fanout_width"], "shardex_fanout_width_count",
                     "index") == {("orders",): 6.0}


def test_opentelemetry_instruments_carry_the_same_figures() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from shardex.metrics.otel import OpenTelemetryExporter

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    store = shardex.open_store(HOT_URI)
    recorder = MetricsRecorder(top=10).attach(store)
    OpenTelemetryExporter(recorder, provider)
    run_index(store, {"PENDING": 300, "SHIPPED": 50})
    stats = store.stats()
    data = reader.get_metrics_data()
    metrics = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics
               for m in sm.metrics}
    key_units = {(p.attributes["value"], p.attributes["op"]): p.value
                 for p in metrics["shardex.key.units"].data.data_points}
    pending = sum(stats.by_key[k].write_units for k in stats.shard_keys()
                  if k.startswith("PENDING"))
    assert key_units[("PENDING", "write")] == pytest.approx(pending)
    durations = {p.attributes["op"]: p.count
                 for p in metrics["shardex.request.duration"].data.data_points}
    assert durations["write"] == stats.totals.write_requests + stats.unavailable
    throttles = sum(p.value for p in metrics["shardex.throttles"].data.data_points)
    assert throttles == stats.totals.throttles
    widths = metrics["shardex.fanout.width"].data.data_points
    assert [p.count for p in widths] == [6]
    provider.shutdown()


def test_reshard_progress_gauges() -> None:
    recorder = MetricsRecorder()
    progress = recorder.reshard("orders")
    progress.update(state="write-new", moved=250, total=1_000, from_version=3, to_version=4)
    with serve_prometheus(recorder) as server:
        families = scraped(server.url)
    assert by_labels(families["shardex_reshard_state"], "shardex_reshard_state",
                     "index", "state") == {("orders", "write-new"): 1.0}
    assert by_labels(families["shardex_reshard_progress"], "shardex_reshard_progress",
                     "index") == {("orders",): 0.25}
    assert by_labels(families["shardex_reshard_version"], "shardex_reshard_version",
                     "side") == {("from",): 3.0, ("to",): 4.0}
    progress.update(state="verified", moved=1_000, mismatches=0)
    assert progress.to_dict()["progress"] == 1.0
    assert recorder.reshard("orders") is progress
    for bad in ({"moved": -1}, {"state": ""}, {"total": 1.5}, {"state": "bogus"},
                {"state": "dual-write"}):
        with pytest.raises(InvalidInput):
            progress.update(**bad)
    for state in ("stable", "read-both", "write-new", "verified", "read-new", "retired",
                  "rolled-back"):  # the states docs/metrics.md lists
        progress.update(state=state)
    assert progress.to_dict()["state"] == "rolled-back"


def test_access_log_of_the_live_meter_is_what_diagnose_reads(tmp_path: Path) -> None:
    from shardex.heat.report import diagnose

    store = shardex.open_store(HOT_URI)
    log = tmp_path / "access.jsonl"
    with AccessLogWriter(store, log) as writer:
        run_index(store, {"PENDING": 400, "SHIPPED": 100}, reads=2)
    stats = store.stats()
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(rows) == writer.rows
    assert {row["op"] for row in rows} == {"read", "write"}
    assert all(row["timestamp"] >= shardex.sim.clock.VIRTUAL_WALL_START for row in rows)
    report = diagnose([str(log)]).to_dict()
    top = {row["key"]: row for row in report["top"]}
    assert top["PENDING"]["shards"] == 4
    shard_units = sum(stats.by_key[k].read_units + stats.by_key[k].write_units
                      for k in stats.shard_keys() if k.startswith("PENDING"))
    assert top["PENDING"]["units"] == pytest.approx(shard_units)
    shard_throttles = sum(stats.by_key[k].throttles for k in stats.shard_keys())
    assert report["totals"]["throttles"] == shard_throttles
    csv_log = tmp_path / "access.csv"
    store = shardex.open_store("memory://")
    with AccessLogWriter(store, csv_log, fmt="csv"):
        run_index(store, {"PENDING": 20}, reads=0)
    assert csv_log.read_text().startswith("timestamp,key,op,units,throttled\n")
    assert diagnose([str(csv_log)]).profile.rows > 20
    with pytest.raises(InvalidInput):
        AccessLogWriter(store, tmp_path / "x", fmt="parquet")  # type: ignore[arg-type]


def test_a_final_scrape_counts_once_its_answer_is_written_out() -> None:
    """``close`` with ``final_scrape`` returns once a scrape begun after it was answered in
    full: a process exiting while the answer is on its way would lose it."""
    from shardex.metrics.prometheus import Scrapes, _counted

    scrapes = Scrapes()
    app = _counted(lambda environ, start: [b"a", b"b"], scrapes)
    cut = app({}, None)
    assert next(cut) == b"a"
    cut.close()  # the server gave up mid-answer (the peer went away)
    assert scrapes.answered is None
    whole = app({}, None)
    assert list(whole) == [b"a", b"b"]
    whole.close()
    assert scrapes.answered is not None
    assert scrapes.wait_next(0.0) is False  # no waiting asked
    store = shardex.open_store(HOT_URI)
    recorder = MetricsRecorder().attach(store)
    run_index(store, {"PENDING": 20})
    server = serve_prometheus(recorder, final_scrape=30.0)
    scraped(server.url)
    stop = threading.Event()
    bodies: list[dict[str, Any]] = []

    def scraper() -> None:  # scrapes until the server is gone, as Prometheus would
        while not stop.is_set():
            try:
                bodies.append(scraped(server.url))
            except OSError:
                return

    thread = threading.Thread(target=scraper, daemon=True)
    run_index(store, {"PENDING": 5})  # counted after the first scrape
    thread.start()
    began = time.monotonic()
    server.close()
    assert time.monotonic() - began < 30.0  # a scrape answered, not the wait's end
    stop.set()
    thread.join(timeout=10)
    writes = by_labels(bodies[-1]["shardex_requests"], "shardex_requests_total", "op",
                       "outcome")
    assert sum(v for (op, _), v in writes.items() if op == "write") == \
        store.stats().totals.write_requests


def test_a_key_hot_late_in_a_long_process_gets_its_name() -> None:
    """21 keys at 780 units a second for 100 s, 20 of them named; then one at 3,000 a
    second, read every second. Ranked by the weight since the start it was still under
    'other' 30 s on (a probe): weights decay (half-life 30 s), and it is named within
    20 s, the lightest named key giving its name up."""
    clock = [0.0]
    keys = TopKeys(20, now=lambda: clock[0])
    for second in range(130):
        clock[0] = float(second)
        for k in range(21):
            keys.label(f"steady-{k}", 780.0)
        if second >= 100:
            keys.label("VIRAL", 3000.0)
        keys.rebalance()
        if "VIRAL" in keys.named:
            break
    assert "VIRAL" in keys.named, keys.named
    assert clock[0] - 100 <= 20, clock[0]
    assert len(keys.named) == 20
    with pytest.raises(InvalidInput, match="half-life"):
        TopKeys(2, half_life=0)


def test_the_recorder_ages_weights_on_the_clock_of_its_events() -> None:
    """On virtual time: three keys at 20 puts a second for 100 s (two named), then one at
    80 a second; the recorder ages by the requests' own times, so it is named within
    20 s of virtual time (a few real milliseconds)."""
    async def main() -> float | None:
        store = shardex.open_store("memory://?profile=unlimited")
        recorder = MetricsRecorder(top=2).attach(store)
        async with shardex.ShardedIndex(store, "ix", seed=1, hedge=None) as index:
            for second in range(130):
                hot = second >= 100
                for n in range(80 if hot else 0):
                    await index.put("VIRAL", f"v-{second}-{n}")
                for key in ("K0", "K1", "K2"):
                    for n in range(20):
                        await index.put(key, f"{key}-{n}")
                labels = {s.labels.get("value") for family in recorder.snapshot()
                          if family.name == "shardex_key_units" for s in family.samples}
                if "VIRAL" in labels:
                    return second - 100
                await asyncio.sleep(1)
        return None

    named = shardex.run_virtual(main())
    assert named is not None
    assert named <= 20
