"""Test support for the Prometheus server scripts/test starts: its URL, scrape targets, waits.

scripts/prometheus starts Debian's prometheus on 127.0.0.1 with a 1 s scrape interval,
shardex's recording rules, and file-based service discovery, and exports
``SHARDEX_PROMETHEUS_URL`` and ``SHARDEX_PROMETHEUS_TARGETS`` (the folder it watches).
Without them the tests are skipped on a developer's machine and fail in CI (CI=true),
so CI never skips them silently.

``scraped(addresses, fleet=...)`` writes a target file for the test (each target
labelled ``fleet``, so that tests running at once tell their series apart) and removes
it after; Prometheus picks it up without a restart.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pytest

from shardex.web.promql import PromQL

URL_VARIABLE = "SHARDEX_PROMETHEUS_URL"
TARGETS_VARIABLE = "SHARDEX_PROMETHEUS_TARGETS"
T = TypeVar("T")


def require() -> tuple[str, Path]:
    """The server's URL and its targets folder; skip the test without them (fail it in CI)."""
    url, targets = os.environ.get(URL_VARIABLE), os.environ.get(TARGETS_VARIABLE)
    if not url or not targets:
        message = (f"{URL_VARIABLE} and {TARGETS_VARIABLE} are not set: run the tests with "
                   "scripts/test (or scripts/prometheus run ...), which starts Prometheus")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return url, Path(targets)


def unique_fleet() -> str:
    return f"fleet-{uuid.uuid4().hex[:10]}"


class Targets:
    """The scrape targets of one test: one file_sd file, rewritten as targets come and go."""

    def __init__(self, folder: Path, fleet: str) -> None:
        self.fleet = fleet
        self._path = folder / f"{fleet}.json"
        self._addresses: list[str] = []

    @property
    def addresses(self) -> list[str]:
        """The ``host:port`` of each target, in the order added."""
        return list(self._addresses)

    def add(self, address: str) -> None:
        self._addresses.append(address)
        self._write()

    def _write(self) -> None:
        doc = [{"targets": list(self._addresses), "labels": {"fleet": self.fleet}}]
        # written whole, then renamed: Prometheus never reads half a file
        partial = self._path.with_suffix(".part")
        partial.write_text(json.dumps(doc), encoding="utf-8")
        partial.replace(self._path)

    def remove(self) -> None:
        self._path.unlink(missing_ok=True)


@contextmanager
def scraped(folder: Path, fleet: str) -> Iterator[Targets]:
    """Targets labelled ``fleet`` that Prometheus scrapes until the block ends."""
    targets = Targets(folder, fleet)
    try:
        yield targets
    finally:
        targets.remove()


def wait_for(what: str, check: Callable[[], T | None], *, timeout: float = 30.0,
             every: float = 0.25, seen: Callable[[], object] | None = None) -> T:
    """Poll ``check`` until it returns something other than None (a real server's pace);
    ``seen`` tells what was last seen when it times out."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            last = "" if seen is None else f"; last seen: {seen()}"
            raise AssertionError(f"waited {timeout:g} s for {what}{last}")
        time.sleep(every)


def targets_up(api: PromQL, fleet: str, addresses: Sequence[str]) -> bool:
    """Whether Prometheus has scraped every one of ``addresses`` of ``fleet`` successfully."""
    up = {labels.get("instance") for labels, value in api.instant(f'up{{fleet="{fleet}"}}')
          if value == 1}
    return set(addresses) <= up
