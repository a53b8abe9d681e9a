"""The ``shardex`` command, driven as a user drives it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from shardex.cli import cli

# one virtual second at 3,000 orders a second: the unsharded layout throttles most writes and
# fails some, the sharded one none, and it accepts three times as many (two seconds cost
# twice the CPU to show the same)
SMALL = ["--duration", "1", "--rate", "3000"]


@pytest.fixture(scope="module")
def seeded_demo() -> str:
    """What ``demo --json --seed 4`` prints: one run serves the layout comparison and is
    the first of the reproducibility check's two (both on one worker, by their group)."""
    result = CliRunner().invoke(cli, ["demo", "--json", "--seed", "4", *SMALL])
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.xdist_group("cli-demo")
def test_demo_json_compares_the_two_layouts(seeded_demo: str) -> None:
    runs = {run["layout"]: run for run in json.loads(seeded_demo)["runs"]}
    assert set(runs) == {"unsharded", "sharded"}
    for run in runs.values():
        for key, kind in [("offered_writes_per_s", float), ("accepted_writes_per_s", float),
                          ("throttled_ratio", float), ("failed_writes", int),
                          ("write_p99_ms", float), ("read_p99_ms", float),
                          ("hedged_read_ratio", float), ("listing_complete", bool)]:
            assert isinstance(run[key], kind), key
        assert run["listing_complete"] is True
        assert run["hedged_read_ratio"] <= 0.05
    unsharded, sharded = runs["unsharded"], runs["sharded"]
    assert unsharded["offered_writes_per_s"] == sharded["offered_writes_per_s"]
    assert unsharded["throttled_ratio"] > 0.5
    assert unsharded["failed_writes"] > 0
    assert sharded["failed_writes"] == 0
    assert sharded["throttled_ratio"] < 0.01
    assert sharded["accepted_writes_per_s"] > 2 * unsharded["accepted_writes_per_s"]
    assert sharded["shards"]["PENDING"] > 1
    assert sharded["shards"]["DELIVERED"] == 1


@pytest.mark.xdist_group("cli-demo")
def test_demo_is_reproducible_for_a_seed(seeded_demo: str) -> None:
    again = CliRunner().invoke(cli, ["demo", "--json", "--seed", "4", *SMALL]).stdout
    assert again == seeded_demo


def test_demo_prints_a_table_and_a_plot(tmp_path: Path) -> None:
    plot = tmp_path / "rates.png"
    result = CliRunner().invoke(cli, ["demo", "--plot", str(plot), *SMALL])
    assert result.exit_code == 0, result.output
    for label in ("write calls/s accepted", "entry writes/s per status", "throttled share",
                  "writes failed after retries",
                  "every listing matched ground truth", "unsharded", "sharded"):
        assert label in result.output
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("args", [["--duration", "-1"], ["--rate", "0"]])
def test_demo_refuses_bad_load_with_one_clear_line(args: list[str]) -> None:
    done = subprocess.run([sys.executable, "-m", "shardex.cli", "demo", *args],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: Invalid value for '{args[0]}'")  # the option's name
    assert len(done.stderr.splitlines()) == 1
    assert "Traceback" not in done.stderr
