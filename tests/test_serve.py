"""``shardex serve``: the page in headless Chromium, its JSON document, its feeds, and
what it refuses (other hosts' names, writes, a URL that is no Prometheus).

The browser test loads the page served for a metered index after a run on virtual
time, checks that the hot key comes first and that the numbers are the meter's, and
keeps a screenshot in artifacts/ (git-ignored). scripts/test installs Debian's
chromium and chromium-driver; without them the test is skipped on a developer's machine
and fails in CI. The fleet (a real Prometheus) is tests/test_fleet_heat.py's.
"""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import signal
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import shardex
from shardex.cli import cli, main
from shardex.commands import serve as serve_command
from shardex.errors import InvalidInput, Unavailable
from shardex.heatmeter.meter import HeatMeter
from shardex.metrics import MetricsRecorder
from shardex.metrics.prometheus import serve_prometheus
from shardex.scenarios.traffic import orders_traffic
from shardex.web import Feed, HeatServer, MeterFeed, PrometheusFeed, RoutingWatch
from shardex.web.promql import PromQL, label_matchers
from shardex.web.server import host_allowed
from tests.chromium import ARTIFACTS, chromium, loaded


def metered_run(seconds: float = 20.0) -> tuple[shardex.Store, HeatMeter, MetricsRecorder]:
    """An orders index, PENDING at N=2, under traffic for ``seconds`` virtual seconds."""
    store = shardex.open_store("memory://?seed=4")
    meter = HeatMeter(store, windows=60)
    recorder = MetricsRecorder().attach(store)
    routing = shardex.Routing(overrides={"PENDING": shardex.ShardPolicy(shards=2)})

    async def main() -> None:
        async with shardex.ShardedIndex(store, "orders", routing, meter=meter) as index:
            await orders_traffic(index, rate=1500.0, duration=seconds)

    shardex.run_virtual(main())
    return store, meter, recorder


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


def test_the_document_is_the_meters() -> None:
    _, meter, recorder = metered_run(10.0)
    recorder.reshard("orders").update(state="write-new", moved=300, total=1200,
                                      from_version=1, to_version=2)
    with HeatServer(MeterFeed(meter, recorder=recorder, index="orders")) as server:
        assert server.url.startswith("http://127.0.0.1:")
        doc = get_json(server.url + "api/heat")
        with urllib.request.urlopen(server.url, timeout=10) as answer:
            assert b"shardex: live heat" in answer.read()
    snap = meter.snapshot()
    assert doc["schema"] == "shardex.serve/1"
    assert doc["values"][0]["key"] == "PENDING"
    pending = doc["values"][0]
    assert pending["peak_units_per_s"] == pytest.approx(snap.values["PENDING"].peak_units_per_s)
    assert pending["throttles"] == snap.values["PENDING"].throttles
    assert pending["shards"] == 2
    assert {r["key"] for r in doc["shard_keys"]} >= {"PENDING#0", "PENDING#1", "SHIPPED"}
    # the document's windows are the meter's closed ones: 10 here (the meter reads 10.2 s),
    # 9 in one fresh-clone run, whose meter read its time before the 10th had closed
    closed = [start for start in snap.windows if start + snap.window <= snap.at]
    assert doc["timeline"]["starts"] == closed
    assert len(closed) in (9, 10)
    assert doc["reshard"]["progress"] == 0.25
    assert doc["totals"]["requests"] == snap.totals.requests


def test_the_prometheus_feed_reads_rates_between_scrapes() -> None:
    store, _, recorder = metered_run(5.0)
    ticks = iter([100.0, 110.0])
    with serve_prometheus(recorder) as metrics:
        feed = PrometheusFeed(metrics.url, clock=lambda: next(ticks))
        first = feed.read()
        # one scrape: no rate yet, unknown (it read 0.0, a hot key as cold; and every
        # peak 0.0 sorted the keys by name), the busiest by units first
        assert first["values"][0]["key"] == "PENDING"
        assert {r["units_per_s"] for r in first["values"] + first["shard_keys"]} == {None}
        assert {r["peak_to_ceiling"] for r in first["values"]} == {None}
        assert first["window_s"] is None  # it read 0.0 s, and after a second scrape too

        async def more() -> None:
            async with shardex.ShardedIndex(store, "orders") as index:
                await orders_traffic(index, rate=400.0, duration=2.0, seed=9)

        shardex.run_virtual(more())
        second = feed.read()
    before = {r["key"]: r["units"] for r in first["values"]}
    after = {r["key"]: r for r in second["values"]}
    assert after["PENDING"]["units_per_s"] == pytest.approx(
        (after["PENDING"]["units"] - before["PENDING"]) / 10.0)
    assert second["values"][0]["key"] == "PENDING"
    assert second["timeline"]["starts"] == [110.0]
    assert second["window_s"] == 10.0
    # each request once, as store.stats() counts (the shard keys' sums counted a write on
    # its entry's key and on its placement: 302 requests for 202, a probe)
    stats = store.stats()
    assert second["totals"]["requests"] == stats.totals.requests
    assert second["totals"]["units"] == pytest.approx(stats.totals.read_units
                                                      + stats.totals.write_units)
    assert second["totals"]["throttles"] == stats.totals.throttles


def test_serve_json_and_its_usage_errors(capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """--json of one process's /metrics scrapes twice, --every apart, for its rates: it
    scraped once and printed every rate and peak as 0.0."""
    monkeypatch.setattr(serve_command, "_pause", lambda stop, seconds: None)
    _, _, recorder = metered_run(3.0)
    with serve_prometheus(recorder) as metrics:
        result = CliRunner().invoke(cli, ["serve", "--prometheus", metrics.url, "--json"])
        assert result.exit_code == 0, result.output
        doc = json.loads(result.stdout)
        assert doc["schema"] == "shardex.serve/1"
        assert doc["feed"]["kind"] == "endpoint"  # one process, and the page says so
        assert doc["window_s"] is not None
        assert all(isinstance(r["units_per_s"], float) for r in doc["values"])
        refusals = [
            (["serve"], "give one source"),
            # the demo refuses what names a store or series, once (it said --store needs
            # --index, then with --index that --index is not for --demo), and took the
            # connection options the README says a store that cannot use refuses
            (["serve", "--demo", "--store", "memory://"], "--store is for --prometheus"),
            (["serve", "--demo", "--store", "memory://", "--index", "orders"],
             "--store is for --prometheus"),
            (["serve", "--demo", "--index", "orders"], "--index is for --prometheus"),
            (["serve", "--demo", "--history", "30m"], "--history is for --prometheus"),
            (["serve", "--demo", "--region", "eu-west-1"], "--region is for --prometheus"),
            (["serve", "--demo", "--endpoint-url", "http://127.0.0.1:1"],
             "--endpoint-url is for --prometheus"),
            (["serve", "--prometheus", metrics.url, "--store", "memory://"],
             "--store needs --index"),
            (["serve", "--prometheus", "ftp://x"], "http(s)://"),
            (["serve", "--prometheus", metrics.url, "--match", 'job="x"'],
             "is not a Prometheus server"),
            (["serve", "--prometheus", metrics.url, "--history", "soon"], "duration"),
            # taken without a word, where --match beside it was refused
            (["serve", "--prometheus", metrics.url, "--history", "1m"],
             "--history reaches back on a Prometheus server")]
        for args, message in refusals:
            with pytest.raises(SystemExit) as exited:
                main(args)
            assert exited.value.code == 2, args
            err = capsys.readouterr().err
            assert message in err, (args, err)
            assert len(err.strip().splitlines()) == 1, err


def test_the_demos_one_document_shows_its_traffic() -> None:
    """``serve --demo --json`` read its feed as the traffic started: no value and no
    shard key, only the routing record's reads (a probe's finding)."""
    result = CliRunner().invoke(cli, ["serve", "--demo", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert {row["key"] for row in doc["values"]} >= {"PENDING", "SHIPPED"}
    assert doc["shard_keys"]
    assert max(row["units_per_s"] for row in doc["values"]) > 0


def test_the_demos_document_waits_for_traffic_that_comes_late(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Read a fixed 1.5 s after the demo said it was ready, the document showed every rate
    0 when its first writes came more than half a second late (a loaded host: 1 suite run
    in 34 on one core); it waits for a closed window of its traffic."""
    import shardex.scenarios.traffic as traffic

    real, first = traffic.orders_traffic, [True]

    async def late(*args: Any, **kwargs: Any) -> Any:
        if first[0]:
            first[0] = False
            await asyncio.sleep(1.2)  # as a starved thread would start it
        return await real(*args, **kwargs)

    monkeypatch.setattr(traffic, "orders_traffic", late)
    result = CliRunner().invoke(cli, ["serve", "--demo", "--json"])
    assert result.exit_code == 0, result.output
    assert max(row["units_per_s"] for row in json.loads(result.stdout)["values"]) > 0


@pytest.mark.parametrize("json_or_page", [["--json"], ["--port", "0"]], ids=["json", "page"])
def test_a_url_that_is_neither_prometheus_nor_metrics_is_one_line(
        capsys: pytest.CaptureFixture[str], json_or_page: list[str]) -> None:
    """The page of another server (HTML, not the text format): no ValueError traceback;
    and refused when serving the page too, which started and showed the error forever."""
    _, meter, _ = metered_run(2.0)
    with HeatServer(MeterFeed(meter)) as other, pytest.raises(SystemExit) as exited:
        main(["serve", "--prometheus", other.url, *json_or_page])
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert err.startswith("error: ")
    assert "did not answer in the Prometheus text format" in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_port_in_use_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    """'error: Address already in use' named neither the port nor the option (8765 by
    default, never typed)."""
    _, meter, _ = metered_run(1.0)
    with HeatServer(MeterFeed(meter)) as taken, pytest.raises(SystemExit) as exited:
        main(["serve", "--demo", "--port", str(taken.port)])
    assert exited.value.code == 1
    assert capsys.readouterr().err == (f"error: 127.0.0.1:{taken.port}: Address already in "
                                       "use (--port; 0 picks a free one)\n")


def request(server: HeatServer, method: str, path: str, host: str | None) -> tuple[int, bytes]:
    """Send one request with the ``Host`` header given (None: none at all)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection.putrequest(method, path, skip_host=True)
        if host is not None:
            connection.putheader("Host", host)
        connection.endheaders()
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


def test_the_page_answers_only_its_own_host_and_only_reads() -> None:
    _, meter, _ = metered_run(2.0)
    with HeatServer(MeterFeed(meter)) as server:
        own = f"127.0.0.1:{server.port}"
        for host in (own, f"localhost:{server.port}", "localhost", "LOCALHOST:1"):
            status, body = request(server, "GET", "/api/heat", host)
            assert status == 200, host
            assert json.loads(body)["schema"] == "shardex.serve/1"
        # a DNS-rebinding page reaches 127.0.0.1 under its own name: refused
        for host in ("attacker.example", f"attacker.example:{server.port}",
                     "127.0.0.1.attacker.example", "", None):
            for path in ("/", "/api/heat"):
                status, body = request(server, "GET", path, host)
                assert status == 421, (host, path)
                assert b"PENDING" not in body
        for method in ("POST", "PUT", "DELETE", "PATCH", "TRACE", "CONNECT", "PROPFIND", "FOO"):
            assert request(server, method, "/api/heat", own)[0] == 405, method
        assert request(server, "HEAD", "/", own) == (200, b"")
    assert not host_allowed("[::1]:80")


class Failing(Feed):
    source = "nowhere"

    def read(self) -> dict[str, Any]:
        raise Unavailable("cannot scrape nowhere")


def test_a_failed_feed_keeps_the_routing_lines() -> None:
    watch = RoutingWatch("memory://", "orders", every=60)
    with HeatServer(Failing(), routing=watch) as server:
        status, body = request(server, "GET", "/api/heat", f"127.0.0.1:{server.port}")
    doc = json.loads(body)
    assert status == 503
    assert doc["error"] == "cannot scrape nowhere"
    assert doc["routing"] == {"index": "orders", "stored": False, "migration": None}


def test_json_shows_the_heat_and_why_the_routing_is_missing_as_the_page_does(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """--json with a store that does not answer failed ('error: open on table ...', exit
    1) where the page showed the heat and routing_error."""
    monkeypatch.setattr(serve_command, "_pause", lambda stop, seconds: None)
    _, _, recorder = metered_run(3.0)
    nowhere = "azure-tables://orders?endpoint=http://127.0.0.1:1/devstoreaccount1"
    with serve_prometheus(recorder) as metrics:
        result = CliRunner().invoke(cli, ["serve", "--prometheus", metrics.url, "--store",
                                          nowhere, "--index", "orders", "--json"],
                                    env={"AZURE_STORAGE_CONNECTION_STRING": "",
                                         "AZURE_STORAGE_ACCOUNT": "devstoreaccount1",
                                         "AZURE_STORAGE_KEY": base64.b64encode(
                                             b"k" * 64).decode()})
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["values"]
    assert "routing" not in doc or doc["routing"] is None
    assert "127.0.0.1:1" in doc["routing_error"], doc["routing_error"]


def test_internal_rows_stand_apart_from_shard_keys() -> None:
    """The store's own records (#placement, ...) and unlabelled keys are not shard keys."""
    store, _, _ = metered_run(3.0)
    recorder = MetricsRecorder(top=2).attach(store)

    async def more() -> None:
        async with shardex.ShardedIndex(store, "orders") as index:
            await orders_traffic(index, rate=400.0, duration=2.0, seed=3)

    shardex.run_virtual(more())
    with serve_prometheus(recorder) as metrics:
        feed = PrometheusFeed(metrics.url)
        feed.read()
        doc = feed.read()
    internal = {(row["key"], row["level"]): row for row in doc["internal"]}
    assert "placements" in internal["#placement", "shard_key"]["what"]
    # top=2: the other statuses sum there, at each level, which the page tells apart
    assert internal["#other", "value"]["what"].startswith("logical keys without a label")
    assert internal["#other", "shard_key"]["what"].startswith("shard keys without a label")
    # the shard keys under '#other' are not counted: a key's count is a floor (PENDING at
    # N=8 read 3, a key 0)
    assert {(r["shards"] >= 1, r["shards_all_seen"]) for r in doc["values"]} == {(True, False)}
    assert not any(r["key"].startswith("#") for r in doc["values"] + doc["shard_keys"])
    assert not any(k.startswith("#") for k in doc["timeline"]["shard_keys"])
    assert "#other" not in doc["timeline"]["values"]  # the charts draw keys alone


def test_the_meter_feed_shows_the_stores_own_records_and_other_apart() -> None:
    """The meter's reserved buckets (#placement, ...) and its key cap's ``other`` are on
    the page as ``internal`` rows, as the Prometheus feed shows them (they were left out)."""
    store = shardex.open_store("memory://?seed=4")
    meter = HeatMeter(store, windows=60, max_keys=2)

    async def main() -> None:
        async with shardex.ShardedIndex(store, "orders", meter=meter) as index:
            await orders_traffic(index, rate=600.0, duration=3.0)

    shardex.run_virtual(main())
    snap = meter.snapshot()
    assert snap.reserved
    assert snap.other is not None
    doc = MeterFeed(meter).read()
    internal = {(row["level"], row["key"]): row for row in doc["internal"]}
    for bucket, counted in snap.reserved.items():
        row = internal[("shard_key", bucket)]
        assert row["units"] == pytest.approx(counted.units)
        assert row["requests"] == counted.requests
        # windowed like the keys: a peak and a rate now, not zeros beside the requests
        assert row["peak_units_per_s"] == pytest.approx(counted.peak_units_per_s)
        assert row["peak_units_per_s"] > 0
    placement = internal[("shard_key", "#placement")]
    assert 0 < placement["units_per_s"] <= placement["peak_units_per_s"]
    assert "placements" in internal[("shard_key", "#placement")]["what"]
    assert internal[("value", "#other")]["units"] == pytest.approx(snap.other.units)
    assert not any(r["key"].startswith("#") for r in doc["values"] + doc["shard_keys"])


@pytest.mark.parametrize(("text", "joined"), [
    ('job="orders"', 'job="orders"'),
    ('{job="orders", env=~"prod|eu"}', 'job="orders",env=~"prod|eu"'),
    ('a!="x\\"y"', 'a!="x\\"y"'),
    ("", ""),
])
def test_label_matchers_are_checked(text: str, joined: str) -> None:
    assert label_matchers(text) == joined


@pytest.mark.parametrize("text", ['job="a"} or up{', "job=orders", 'job="a" env="b"',
                                  '1a="b"', 'job="a",,'])
def test_label_matchers_refuse_anything_else(text: str) -> None:
    with pytest.raises(InvalidInput):
        label_matchers(text)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    with chromium(tmp_path) as driver:
        yield driver


def test_the_page_in_headless_chromium(browser: Any) -> None:
    from selenium.webdriver.common.by import By

    _, meter, recorder = metered_run()
    recorder.reshard("orders").update(state="write-new", moved=450, total=1200,
                                      from_version=1, to_version=2)
    snap = meter.snapshot()
    with HeatServer(MeterFeed(meter, recorder=recorder, index="orders")) as server:
        loaded(browser, server.url)
        # read the tables in one script: the page redraws them at every poll
        page = browser.execute_script("""
            const rows = (sel) => [...document.querySelectorAll(sel + " tbody tr")].map(
                (tr) => ({key: tr.dataset.key, cells: Object.fromEntries([...tr.cells].map(
                    (td) => [td.className.split(" ")[0], td.textContent]))}));
            const text = (id) => document.getElementById(id).textContent;
            return {values: rows("#values"), shards: rows("#shard-keys"),
                    progress: text("reshard-progress"), state: text("reshard-state"),
                    throttles: text("total-throttles")};""")
        keys = [row["key"] for row in page["values"]]
        assert keys[0] == "PENDING"  # the hot key first
        assert set(keys) == set(snap.values)

        def number(row: dict[str, Any], name: str) -> float:
            return float(row["cells"][name].replace(",", ""))

        for row in page["values"]:
            meter_row = snap.values[row["key"]]
            assert number(row, "peak") == pytest.approx(meter_row.peak_units_per_s, abs=0.05)
            assert number(row, "throttles") == meter_row.throttles
            assert number(row, "requests") == meter_row.requests
        hottest = max(snap.shard_keys, key=lambda k: snap.shard_keys[k].peak_units_per_s)
        assert page["shards"][0]["key"] == hottest
        assert page["progress"] == "38%"
        assert page["state"] == "write-new"
        assert page["throttles"] == f"{snap.totals.throttles:,}"
        lines = browser.find_elements(By.CSS_SELECTOR, "#values-chart polyline")
        assert len(lines) == len(snap.values)
        ARTIFACTS.mkdir(exist_ok=True)
        assert browser.save_screenshot(str(ARTIFACTS / "serve.png"))
    assert (ARTIFACTS / "serve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_page_s_next_steps_watch_a_runner_waiting_between_steps() -> None:
    """The page's migration lines are `reshard status`'s: a runner waiting for its
    clients (its mark in the budget record) is watched, not `run` again (the page had
    composed the status without the runners' waits)."""
    from shardex.migrate import states
    from shardex.web.routing import _migration, _page_status

    stored = states.begin(shardex.Routing(), {"PENDING": shardex.ShardPolicy(4)},
                          default=None, values=(), reshard_id="r1", now=90.0, margin=5.0)
    waits = [{"owner": "vm:1:a", "reason": "waiting until 2026-12-05T10:00:00Z for every "
              "client to act on the last change", "expires": 130.0}]
    controls = {"recorded": True, "paused": False, "rate": 20.0, "summary": "moving",
                "budget": {"rate": 20.0, "in_force": 20.0, "slices": [], "holds": [],
                           "waits": waits}}
    page = _migration(_page_status(stored, [], controls, index="orders", uri="s",
                                   lease=15.0, now=100.0))
    assert page is not None
    assert page["next_steps"][0] == "shardex reshard status --store s --index orders --watch"
    idle = _migration(_page_status(stored, [], {**controls, "budget": {
        **controls["budget"], "waits": []}}, index="orders", uri="s", lease=15.0, now=100.0))
    assert idle is not None
    assert idle["next_steps"][0] == "shardex reshard run --store s --index orders"


def test_the_page_s_next_steps_name_the_tiers_stores() -> None:
    """A reshard into a tier: the page's next steps left out --tier, and the command
    they named is refused without it. `serve --tier` gives them, as every reshard
    command takes them; without --store it is a usage error."""
    from shardex.migrate import states
    from shardex.web.routing import _migration, _page_status

    stored = states.begin(shardex.Routing(), {"BIG": shardex.ShardPolicy(4, tier="hot")},
                          default=None, values=(), reshard_id="r1", now=90.0, margin=5.0)
    page = _migration(_page_status(stored, [], None, index="orders", uri="s", lease=15.0,
                                   now=100.0, tiers={"hot": "dynamodb://heavy"}))
    assert page is not None
    assert page["next_steps"] == [
        f"shardex reshard {verb} --store s --index orders --tier hot=dynamodb://heavy"
        for verb in ("run", "rollback")]
    # the migration line named 'BIG 1 -> 4', where status says '... 4 shard(s), hash on
    # tier 'hot''
    assert page["values"] == {"BIG": {"from": 1, "to": 4, "from_tier": None, "to_tier": "hot"}}
    result = CliRunner().invoke(cli, ["serve", "--demo", "--tier", "hot=dynamodb://heavy"])
    assert result.exit_code == 2
    assert "--tier needs --store" in result.output


def test_a_chart_of_a_light_load_labels_each_line_of_its_scale(browser: Any) -> None:
    """Under a load of less than a unit a second (a mover at --rate 3, by hand on DynamoDB
    Local) the scale's lines read 0, 0, 1, 1, 1: they were rounded to whole units."""
    _, meter, recorder = metered_run()
    with HeatServer(MeterFeed(meter, recorder=recorder, index="orders")) as server:
        loaded(browser, server.url)
        labels = browser.execute_script("""
            chart("values-chart", "values-legend", [0, 1, 2], {"A": [0, 0.2, 0.5]}, 1000,
                  false);
            return [...document.querySelectorAll("#values-chart text")]
                .map((t) => t.textContent).filter((t) => /^[0-9.,]+$/.test(t));""")
    assert labels == ["0", "0.25", "0.5", "0.75", "1"], labels


def test_the_page_s_ceiling_is_the_store_s_own() -> None:
    """`serve --store azure-tables://...` compared the heat to DynamoDB's 1,000 write
    units a partition (seen in a screenshot of a reshard on Azurite): without --ceiling
    the page takes the ceiling of the store's kind."""
    from shardex.commands.connection import store_ceiling

    assert store_ceiling("azure-tables://orders?endpoint=http://127.0.0.1:1/x") == \
        "azure-tables"
    assert store_ceiling("cosmos://db/entries") == "cosmos"
    assert store_ceiling("dynamodb://orders") == "dynamodb"
    assert store_ceiling("memory://") == "dynamodb"
    assert store_ceiling(None) == "dynamodb"


def test_serve_stopped_by_sigterm_says_so_and_exits_143(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """serve exited 0 without a word on SIGTERM and on Ctrl-C (it caught the interrupt in
    its wait), where the README's one exit-code rule gives 143 (130) and the line of
    what the command leaves. The signal comes once serve waits, with the page up."""
    serving, waiting = threading.Event(), threading.Event()
    enter = HeatServer.__enter__

    def entered(self: HeatServer) -> HeatServer:
        server = enter(self)
        serving.set()
        return server

    class Event(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            if serving.is_set() and threading.current_thread() is threading.main_thread():
                waiting.set()  # serve's own wait, the page up
            return super().wait(timeout)

    monkeypatch.setattr(HeatServer, "__enter__", entered)
    monkeypatch.setattr(threading, "Event", Event)
    done = threading.Event()  # serve ended first: no signal for the test process

    def stop() -> None:
        if waiting.wait(60) and not done.is_set():
            # as `kill` may: the signal lands on another thread than the one that waits
            # (an hour-long wait went on, unwoken, for minutes)
            sent.append(time.monotonic())
            signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

    sent: list[float] = []
    stopper = threading.Thread(target=stop)
    stopper.start()
    try:
        with pytest.raises(SystemExit) as exited:
            main(["serve", "--demo", "--port", "0"])
        assert time.monotonic() - sent[0] < 10.0  # heard within seconds (old: 28 s)
    finally:
        done.set()
        waiting.set()
        stopper.join()
    assert exited.value.code == 143
    assert capsys.readouterr().err == "interrupted: shardex serve stopped; it changes nothing\n"


class _QuietPrometheus(PromQL):
    """A Prometheus API that scrapes its targets every second and has no shardex series
    within the history (its exporters stopped a while ago)."""

    def __init__(self) -> None:
        super().__init__("http://127.0.0.1:1")

    def targets(self) -> list[dict[str, Any]]:
        return [{"labels": {"job": "orders", "instance": "a:1"}, "scrapeInterval": "1s"}]

    def instant(self, query: str, at: float | None = None) -> list[Any]:
        return []

    def range(self, query: str, *, start: float, end: float, step: float) -> list[Any]:
        return []


@pytest.mark.parametrize(("targets", "window"), [(True, 4.0), (False, 10.0)],
                         ids=["the server's interval", "no target"])
def test_a_fleet_s_rate_window_stays_within_its_history(targets: bool, window: float) -> None:
    """--history 10s with no exporter seen in it: the interval fell back to 15 s, the rate
    window to 60 s, past the history, and a row said 59 units/s now beside 0 units."""
    from shardex.web import FleetFeed

    feed = FleetFeed("http://127.0.0.1:1", history=10)
    api = _QuietPrometheus()
    if not targets:
        api.targets = list  # type: ignore[method-assign]
    feed._api = api  # type: ignore[assignment]
    assert feed.read()["feed"]["rate_window_s"] == window


def test_one_window_draws_points_and_control_characters_show(browser: Any) -> None:
    """Just after a start the timeline has one point, and a line of one point drew an
    empty chart ('0 s ... 0 s'); keys 'a<newline>b' and 'tab<tab>here' read as 'a b' and
    'tab here'. Before the first reading, the page names its source."""
    from selenium.webdriver.common.by import By

    store = shardex.open_store("memory://?seed=4")
    meter = HeatMeter(store, windows=60)

    async def main() -> None:
        async with shardex.ShardedIndex(store, "orders", meter=meter) as index:
            for i in range(30):  # within the first one-second window, which closes
                for key in ("a\nb", "tab\there"):
                    await index.put(key, f"o-{i}")
                await asyncio.sleep(0.03)
            await asyncio.sleep(0.3)

    shardex.run_virtual(main())
    with HeatServer(MeterFeed(meter, index="orders")) as server:
        assert "waiting for the first reading of this process's own index meter" in \
            server.page
        loaded(browser, server.url)
        keys = browser.execute_script("""return [...document.querySelectorAll(
            "#values tbody td.key")].map((td) => td.textContent);""")
        assert sorted(keys) == ["a\\nb", "tab\\there"], keys
        points = browser.find_elements(By.CSS_SELECTOR, "#values-chart circle")
        assert len(points) == 2  # one window: a point each
        assert not browser.find_elements(By.CSS_SELECTOR, "#values-chart polyline")
        ARTIFACTS.mkdir(exist_ok=True)
        assert browser.save_screenshot(str(ARTIFACTS / "serve-one-window.png"))
