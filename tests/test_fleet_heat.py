"""Fleet-wide heat through a real Prometheus: two writer processes and a reshard runner.

Prometheus (scripts/prometheus: 1 s scrapes, file-based discovery) scrapes two
application processes that write to one DynamoDB Local index table and the
``shardex reshard run --metrics-port 0`` that reshards it under their writes;
``shardex serve --prometheus URL`` shows them. The page's ``/api/heat`` must agree with
the stores' own counters summed over every process (within 5%), including the runner's
after it exits; its charts must hold what happened before it started; it must keep the
routing and migration from the store once the runner is gone. Headless Chromium keeps
screenshots of the page during the reshard and after the runner exits in artifacts/.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

import shardex
from shardex.cli import main
from shardex.web import FleetFeed
from shardex.web.promql import PromQL
from tests import dynamodb_local, prometheus_server
from tests.chromium import ARTIFACTS, chromium, loaded, screenshot

pytestmark = pytest.mark.prometheus

ROOT = Path(__file__).resolve().parent.parent
WRITE_RATE, WRITE_SECONDS = 20, 15  # operations a second per writer, for so long


class Child:
    """A process of the test's, its output read line by line (a thread per stream)."""

    def __init__(self, *args: str) -> None:
        self.args = args
        self.proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env={**os.environ})
        self._out: queue.Queue[str] = queue.Queue()
        self._err: queue.Queue[str] = queue.Queue()
        self.err_text: list[str] = []
        self._pumps = [threading.Thread(target=self._pump, args=(stream, into), daemon=True)
                       for stream, into in ((self.proc.stdout, self._out),
                                            (self.proc.stderr, self._err))]
        for pump in self._pumps:
            pump.start()

    def _pump(self, stream: Any, into: queue.Queue[str]) -> None:
        for line in stream:
            into.put(line)
            if into is self._err:
                self.err_text.append(line)

    def line(self, *, err: bool = False, containing: str = "", timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        source = self._err if err else self._out
        while True:
            try:
                line = source.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no line with {containing!r} from {self.args[:3]} in "
                                     f"{timeout:g} s; stderr: {''.join(self.err_text)}") from None
            if containing in line:
                return line.strip()

    def json(self, timeout: float = 60.0) -> Any:
        return json.loads(self.line(containing="{", timeout=timeout))

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text)
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        for pump in self._pumps:  # each ends at its stream's end, the process gone
            pump.join(timeout=10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def address(url: str) -> str:
    """``host:port`` of an http:// URL."""
    return url.split("//", 1)[1].split("/", 1)[0]


LATEST: list[Any] = [None]  # the last document read, for a failure's message


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=60) as answer:
        LATEST[0] = json.loads(answer.read())
    return LATEST[0]


def shown() -> Any:
    """What the last document said of its source, routing and reshard."""
    doc = LATEST[0] or {}
    return {k: doc.get(k) for k in ("feed", "routing", "reshard", "error")}


def fill(uri: str, name: str, entries: int) -> None:
    """The index's routing record (a 1 s lease, so the reshard's steps are short) and
    ``entries`` PENDING entries to move."""
    async def put() -> None:
        async with shardex.ShardedIndex(uri, name, routing_lease=1.0) as index:
            for start in range(0, entries, 50):
                await asyncio.gather(*(index.put("PENDING", f"seed-{i:05d}", sort=f"{i:05d}")
                                       for i in range(start, min(entries, start + 50))))

    asyncio.run(put())


def summed(counts: list[dict[str, Any]]) -> dict[str, Any]:
    """Counters of several processes added up."""
    total: dict[str, Any] = {"requests": 0, "units": 0.0, "throttles": 0, "by_value": {}}
    for c in counts:
        for field in ("requests", "units", "throttles"):
            total[field] += c[field]
        for value, figures in c["by_value"].items():
            slot = total["by_value"].setdefault(value, {"requests": 0, "units": 0.0})
            slot["requests"] += figures["requests"]
            slot["units"] += figures["units"]
    return total


def within(page: float, truth: float, share: float = 0.05) -> bool:
    return abs(page - truth) <= share * truth


@pytest.mark.dynamodb
def test_the_page_sums_a_fleet_through_prometheus(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    url, folder = prometheus_server.require()
    endpoint = dynamodb_local.require_endpoint()
    table = dynamodb_local.create_index_table()
    uri = f"dynamodb://{table}?region={dynamodb_local.REGION}&endpoint_url={endpoint}"
    name = f"orders_{uuid.uuid4().hex[:8]}"
    where = ["--store", uri, "--index", name]
    fill(uri, name, 40)
    main(["reshard", "start", *where, "--set", "PENDING=4", "--margin", "0.1"])
    # the mover holds until the page has seen it move with the writers' rates: started
    # at once, it could finish its 40 entries before the rates' second scrape
    main(["reshard", "pause", *where])
    assert "read-both" in capsys.readouterr().out
    fleet = prometheus_server.unique_fleet()
    api = PromQL(url)
    wait_for = prometheus_server.wait_for
    with prometheus_server.scraped(folder, fleet) as targets, ExitStack() as stack:
        # every process starts at once: each takes seconds to import its drivers
        writers = [Child("-m", "tests.fleet_app", "writer", uri, name, f"w{i}", str(WRITE_RATE),
                         str(WRITE_SECONDS)) for i in range(2)]
        # a slow mover, so the page sees it move: 8 write units a second on any one shard
        # key, the key it drains (PENDING) included, so some 4 entries a second in all
        runner = Child("-m", "tests.fleet_app", "runner", str(tmp_path / "runner.json"),
                       "reshard", "run", *where, "--metrics-port", "0", "--unit-lease", "1",
                       "--rate", "8", "--every", "0")
        serve = Child("-m", "shardex", "serve", "--prometheus", url, *where,
                      "--match", f'fleet="{fleet}"', "--history", "2m", "--every", "1",
                      "--port", "0")
        for child in (*writers, runner, serve):
            stack.callback(child.close)
        for child in writers:
            targets.add(address(child.json()["metrics"]))
        targets.add(address(runner.line(err=True, containing="metrics: ").split()[-1]))
        wait_for("the first scrapes", lambda: prometheus_server.targets_up(
            api, fleet, targets.addresses) or None)
        for child in writers:
            child.send("go\n")
        page = serve.line(containing="serving the live heat").split(" on ")[-1].split()[0]
        heat = page + "api/heat"

        with chromium(tmp_path) as browser:
            during = wait_for("the page during the move", lambda: d if (
                d := get_json(heat))["reshard"] and d["reshard"]["state"] == "write-new"
                and d["reshard"]["total"] > 0
                and d["routing"]["migration"]["state"] == "write-new"
                # the paused runner keeps its budget slice: no second runner is suggested
                # (the slice, renewed every third of its term, can lapse for a moment on a
                # loaded machine, and a status read then rightly counts no runner)
                and not any(" run " in step for step in d["routing"]["migration"]["next_steps"])
                and d["feed"]["targets_seen"] == 3 and d["values"]
                # rates show from a series' second scrape on: until then every peak is 0
                and d["values"][0]["peak_units_per_s"] > 0 else None, seen=shown,
                timeout=60, every=1.0)
            assert during["schema"] == "shardex.serve/1"
            assert during["feed"]["kind"] == "prometheus"
            assert during["values"][0]["key"] == "PENDING"
            paused = during["routing"]["migration"]
            assert re.match(r"paused by \S+@\S+ \(shardex reshard pause\)",
                            paused["controls"]), paused["controls"]
            assert paused["next_steps"][0].startswith("shardex reshard resume --store")
            loaded(browser, page)
            wait_for("the page to show the runner", lambda: browser.execute_script(
                "const e = document.getElementById('reshard-state');"
                "const p = document.getElementById('reshard-progress');"
                "const c = document.getElementById('migration-controls');"
                "return e && e.textContent === 'write-new' && p.textContent.endsWith('%')"
                " && c && c.textContent.startsWith('paused') ? true : null;"))
            screenshot(browser, "fleet-during-reshard.png")
            main(["reshard", "resume", *where])

            assert runner.proc.wait(timeout=90) == 0, "".join(runner.err_text)
            runner_address = targets.addresses[2]
            after = wait_for("the page after the runner exits", lambda: d if (
                d := get_json(heat))["reshard"] is None
                and {t["instance"]: t["up"] for t in d["feed"]["targets"]}.get(runner_address)
                is False and d["routing"]["migration"] is not None
                and d["routing"]["migration"]["state"] == "verified" else None, seen=shown,
                timeout=60, every=1.0)
            assert after["feed"]["targets_seen"] == 3  # the runner still counts
            assert after["routing"]["in_transition"]
            wait_for("the page to keep the store's lines", lambda: browser.execute_script(
                "const e = document.getElementById('migration-state');"
                "return e && e.textContent === 'verified' && "
                "document.getElementById('reshard').textContent.includes('none reports now')"
                " ? true : null;"))
            screenshot(browser, "fleet-after-runner.png")

        done = [child.json(timeout=WRITE_SECONDS + 60) for child in writers]
        finished = max(d["done_at"] for d in done)
        writer_addresses = set(targets.addresses[:2])
        scraped_at = f'timestamp(up{{fleet="{fleet}"}} == 1)'  # the last good scrape
        wait_for("a scrape of every writer after its last write", lambda: True if sum(
            value > finished + 0.2 for labels, value in api.instant(scraped_at)
            if labels["instance"] in writer_addresses) == 2 else None, timeout=60)
        doc = get_json(heat)
        # a feed made now reads the past from Prometheus: nothing of it was seen before
        fresh = FleetFeed(url, index=name, match=f'fleet="{fleet}"', history=120).read()
        per_instance = {labels["instance"]: round(value) for labels, value in api.instant(
            f'sum by (instance) (last_over_time(shardex_requests_total{{fleet="{fleet}"}}[2m]))')}
        rule = api.instant(f'index_value_op:shardex_key_units:rate1m{{index="{name}",'
                           'value="PENDING",op="write"}')

    runner_counts = json.loads((tmp_path / "runner.json").read_text())
    truth = summed([d["stats"] for d in done] + runner_counts)
    rows = {r["key"]: r for r in doc["values"] + doc["internal"]}
    ARTIFACTS.mkdir(exist_ok=True)  # the page against the stores' counters, to read
    (ARTIFACTS / "fleet-heat.json").write_text(json.dumps({
        "totals": {f: {"page": doc["totals"][f], "stores": truth[f]}
                   for f in ("requests", "units")},
        "keys": {k: {f: {"page": rows[k][f], "stores": v[f]} for f in ("requests", "units")}
                 for k, v in sorted(truth["by_value"].items()) if k in rows}}, indent=1))
    assert runner_counts
    assert runner_counts[0]["requests"] > 0
    page_totals = doc["totals"]
    # each process's requests as Prometheus last saw them against its store's own count
    processes = {"writers": {a: (per_instance.get(a), d["stats"]["requests"])
                             for a, d in zip(targets.addresses[:2], done, strict=True)},
                 "runner": (per_instance.get(targets.addresses[2]),
                            sum(c["requests"] for c in runner_counts))}
    assert within(page_totals["requests"], truth["requests"]), (page_totals, truth, processes)
    assert within(page_totals["units"], truth["units"]), (page_totals, truth)
    rows = {r["key"]: r for r in doc["values"]}
    for value in ("PENDING", "SHIPPED", "DELIVERED"):
        expected = truth["by_value"][value]
        assert within(rows[value]["units"], expected["units"]), (value, rows[value], expected)
        assert within(rows[value]["requests"], expected["requests"]), (value, rows[value])
    assert rows["PENDING"]["shards"] == 5  # PENDING, and PENDING#0 to #3 after the reshard
    internal = {r["key"]: r for r in doc["internal"]}
    assert within(internal["#placement"]["units"], truth["by_value"]["#placement"]["units"]), (
        processes, [c["by_value"]["#placement"] for c in runner_counts],
        [d["stats"]["by_value"]["#placement"] for d in done])
    assert not any(r["key"].startswith("#") for r in doc["shard_keys"])
    # the charts: two minutes of history, PENDING's traffic well before the feed was made
    starts, line = fresh["timeline"]["starts"], fresh["timeline"]["values"]["PENDING"]
    assert starts[-1] - starts[0] >= 100
    busy = [at for at, rate in zip(starts, line, strict=True) if rate > 0]
    assert busy
    # rate() shows a series from its second sample on: the first busy bin comes a scrape
    # or two (1 s each) after the first write, and the feed follows the last write's scrape
    assert fresh["at"] - busy[0] >= WRITE_SECONDS - 2, (fresh["at"], busy)
    assert rule  # the recording rules load and fill
    assert rule[0][1] > 0


def memory_process(seed: int) -> tuple[shardex.Store, Any]:
    """A memory store after a few virtual seconds of orders, with its metrics recorder."""
    from shardex.metrics import MetricsRecorder
    from shardex.scenarios.traffic import orders_traffic

    store = shardex.open_store(f"memory://?seed={seed}")
    recorder = MetricsRecorder().attach(store)

    async def run() -> None:
        async with shardex.ShardedIndex(store, "orders") as index:
            await orders_traffic(index, rate=600.0, duration=3.0, seed=seed)

    shardex.run_virtual(run())
    return store, recorder


def test_serve_reads_a_prometheus_server_as_one_fleet(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Two endpoints in this process, their counts fixed: the sums are exact."""
    from shardex.metrics.prometheus import serve_prometheus

    url, folder = prometheus_server.require()
    api = PromQL(url)
    fleet = prometheus_server.unique_fleet()
    processes = [memory_process(seed) for seed in (1, 2)]
    with prometheus_server.scraped(folder, fleet) as targets, ExitStack() as stack:
        for _, recorder in processes:
            targets.add(address(stack.enter_context(serve_prometheus(recorder)).url))
        scraped_at = f'timestamp(up{{fleet="{fleet}"}} == 1)'
        since = time.time()
        prometheus_server.wait_for("two good scrapes of each", lambda: True if sum(
            value > since for _, value in api.instant(scraped_at)) == 2 else None)
        main(["serve", "--prometheus", url, "--match", f'fleet="{fleet}"', "--json"])
        doc = json.loads(capsys.readouterr().out)
        with pytest.raises(SystemExit) as exited:
            main(["serve", "--prometheus", url, "--match", "fleet=nope"])
        assert exited.value.code == 2
        assert "not a PromQL label matcher" in capsys.readouterr().err
    stats = [store.stats() for store, _ in processes]
    assert doc["feed"]["kind"] == "prometheus"
    assert (doc["feed"]["targets_seen"], doc["feed"]["targets_up"]) == (2, 2)
    assert doc["totals"]["requests"] == sum(s.totals.requests for s in stats)
    assert doc["totals"]["units"] == pytest.approx(
        sum(s.totals.read_units + s.totals.write_units for s in stats))
    pending = next(r for r in doc["values"] if r["key"] == "PENDING")
    assert pending["units"] == pytest.approx(sum(
        k.read_units + k.write_units for s in stats for key, k in s.by_key.items()
        if key == "PENDING"))
    assert pending["requests"] == sum(s.by_key["PENDING"].requests for s in stats)
    assert {r["key"] for r in doc["internal"]} >= {"#placement"}
