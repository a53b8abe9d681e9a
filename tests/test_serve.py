"""``shardex serve``: the page in headless Chromium, its JSON document, its feeds.

The browser test loads the page served for a metered index after a run on virtual
time, checks that the hot key comes first and that the numbers are the meter's, and
keeps a screenshot in artifacts/ (git-ignored). scripts/test installs Debian's
chromium and chromium-driver; without them the test is skipped on a developer's machine
and fails in CI.
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import shardex
from shardex.cli import cli, main
from shardex.metrics import MetricsRecorder
from shardex.metrics.prometheus import serve_prometheus
from shardex.scenarios.traffic import orders_traffic
from shardex.stores.heat import HeatMeter
from shardex.web import HeatServer, MeterFeed, PrometheusFeed

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "artifacts"
CHROMIUM = "/usr/bin/chromium"
DRIVER = "/usr/bin/chromedriver"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--window-size=1440,900"]


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
    assert len(doc["timeline"]["starts"]) == 10  # the closed windows
    assert doc["reshard"]["progress"] == 0.25
    assert doc["totals"]["requests"] == snap.totals.requests


def test_the_prometheus_feed_reads_rates_between_scrapes() -> None:
    store, _, recorder = metered_run(5.0)
    ticks = iter([100.0, 110.0])
    with serve_prometheus(recorder) as metrics:
        feed = PrometheusFeed(metrics.url, clock=lambda: next(ticks))
        first = feed.read()
        assert first["values"][0]["units_per_s"] == 0.0  # one scrape: no rate yet

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


def test_serve_json_and_its_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    _, _, recorder = metered_run(3.0)
    with serve_prometheus(recorder) as metrics:
        result = CliRunner().invoke(cli, ["serve", "--prometheus", metrics.url, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["schema"] == "shardex.serve/1"
    for args, message in ((["serve"], "give one source"),
                          (["serve", "--demo", "--store", "memory://"], "go together"),
                          (["serve", "--prometheus", "ftp://x"], "http(s)://")):
        with pytest.raises(SystemExit) as exited:
            main(args)
        assert exited.value.code == 2
        assert message in capsys.readouterr().err


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    if not (shutil.which(CHROMIUM) and shutil.which(DRIVER)):
        message = "chromium and chromium-driver are not installed (scripts/test installs them)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*FLAGS, f"--user-data-dir={tmp_path / 'chromium'}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=DRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def test_the_page_in_headless_chromium(browser: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    _, meter, recorder = metered_run()
    recorder.reshard("orders").update(state="write-new", moved=450, total=1200,
                                      from_version=1, to_version=2)
    snap = meter.snapshot()
    with HeatServer(MeterFeed(meter, recorder=recorder, index="orders")) as server:
        browser.get(server.url)
        WebDriverWait(browser, 30).until(
            lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-loaded") == "yes")
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
