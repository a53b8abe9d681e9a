"""``shardex demo --reshard``: the orders scenario resharded live under the sale's load.

One run (virtual time, the command's default load: a fifth of the plain demo's, the
ceiling scaled with it, so PENDING still takes five times a partition's ceiling) checks
what the demo shows and the throttling check of the reshard: every listing matched the
ground truth, the keys the reshard created never throttled, and the mover never spent
more than its rate on a key, nor drew a throttle on the keys it drained. (At half that
load the planned keys' own busiest seconds reach the ceiling now and then, mover or not:
the plan's headroom is thinner against a second's spread when a key takes 30 writes a
second.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from shardex.cli import cli

# one worker runs the module, so its one run of the demo (a module fixture) serves both tests
pytestmark = pytest.mark.xdist_group("reshard-demo")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    plot = tmp_path_factory.mktemp("demo") / "reshard.png"
    # half a virtual second before the reshard and half after: the reshard itself (some 24
    # virtual s under the sale's load) is the run, and its checks are the same at 2 s
    result = CliRunner().invoke(cli, ["demo", "--reshard", "--json", "--duration", "1",
                                      "--plot", str(plot)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), plot


def test_the_demo_shows_throttling_before_during_and_after_and_every_listing_right(
        demo: tuple[dict[str, Any], Path]) -> None:
    doc, plot = demo
    assert doc["schema"] == "shardex.demo.reshard/1"
    assert doc["ceiling_write_units_per_s"] == 200.0
    phases = doc["phases"]
    assert list(phases) == ["before", "during", "after"]
    assert phases["before"]["throttled_ratio"] > 0.5  # unsharded under the sale
    assert phases["after"]["throttled_ratio"] == 0.0
    assert phases["after"]["failed_writes"] == 0
    assert all(p["listing_complete"] for p in phases.values())
    assert doc["listing_complete"]
    assert doc["listings_checked"] > 50
    assert doc["problems"] == []
    reshard = doc["reshard"]
    assert [s["state"] for s in reshard["states"]] == [
        "read-both", "write-new", "verified", "read-new", "retired", "stable"]
    assert reshard["from"]["PENDING"] == 1
    assert reshard["to"]["PENDING"] > 8
    assert reshard["moved"] > 0
    assert reshard["parity"]["missing"] == reshard["parity"]["extra"] == 0
    assert plot.stat().st_size > 20_000
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_key_throttles_because_of_the_mover(demo: tuple[dict[str, Any], Path]) -> None:
    reshard = demo[0]["reshard"]
    # the keys the reshard created carry the application's load and the mover's moves:
    # sized by the plan, with the mover held to a share of the ceiling, none throttles
    assert reshard["throttled_requests_on_new_keys"] == 0
    assert reshard["throttled_requests_on_new_keys_while_moving_there"] == 0
    # the mover spends at most its rate on the key it drains (a second's bin may catch one
    # move more: 4 units), and the key does not throttle
    assert reshard["mover_peak_units_per_s_on_one_key"] <= reshard["mover_rate_units_per_s"] + 4
    assert reshard["mover_rate_units_per_s"] <= demo[0]["ceiling_write_units_per_s"] / 2
    assert reshard["throttled_requests_on_drained_keys_while_moving"] == 0
