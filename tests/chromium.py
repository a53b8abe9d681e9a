"""Headless Chromium (Debian's chromium and chromium-driver) for the tests of the live page.

scripts/test installs both; without them a test is skipped on a developer's machine and
fails in CI (CI=true). ``chromium(folder)`` yields a Selenium driver whose profile lives
in ``folder``; ``screenshot(driver, name)`` keeps a PNG in artifacts/ (git-ignored).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
CHROMIUM = "/usr/bin/chromium"
DRIVER = "/usr/bin/chromedriver"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--window-size=1440,900"]


@contextmanager
def chromium(folder: Path, *, size: str = "1440,900") -> Iterator[Any]:
    """A headless Chromium driven by Selenium (skipped, or failed in CI, without it)."""
    if not (shutil.which(CHROMIUM) and shutil.which(DRIVER)):
        message = "chromium and chromium-driver are not installed (scripts/test installs them)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*FLAGS, f"--window-size={size}", f"--user-data-dir={folder / 'chromium'}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=DRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def loaded(driver: Any, url: str, *, timeout: float = 30.0) -> None:
    """Open ``url`` and wait until the page has drawn its first reading."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url)
    WebDriverWait(driver, timeout).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-loaded") == "yes")


def screenshot(driver: Any, name: str) -> Path:
    """Save the page as artifacts/NAME (a PNG) and return its path."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    assert driver.save_screenshot(str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return path
