"""The extras install drivers that agree with each other."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent


def extra(name: str) -> dict[str, Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found = [Requirement(r) for r in project["optional-dependencies"][name]]
    return {r.name: r for r in found}


def botocore_range(package: str) -> SpecifierSet:
    for text in importlib.metadata.requires(package) or []:
        requirement = Requirement(text)
        if requirement.name == "botocore" and requirement.marker is None:
            return requirement.specifier
    raise AssertionError(f"{package} does not require botocore")


def test_the_dynamodb_extra_pins_a_boto3_that_agrees_with_aiobotocore() -> None:
    """aiobotocore pins botocore; each boto3 needs the botocore of its own number, so the
    extra's boto3 range must lie inside aiobotocore's botocore range (what pip would
    otherwise find by backtracking, or break by a later `pip install boto3`)."""
    pins = extra("dynamodb")
    assert set(pins) == {"aiobotocore", "boto3"}
    installed = Version(importlib.metadata.version("aiobotocore"))
    assert installed in pins["aiobotocore"].specifier
    allowed = botocore_range("aiobotocore")
    boto3 = pins["boto3"].specifier
    lowest = min((s for s in boto3 if s.operator == ">="), key=lambda s: Version(s.version))
    highest = min((s for s in boto3 if s.operator == "<"), key=lambda s: Version(s.version))
    assert Version(lowest.version) in allowed
    assert allowed.contains(Version(highest.version)) is False
    # the boto3 installed beside it (from this extra) needs a botocore aiobotocore accepts
    assert Version(importlib.metadata.version("botocore")) in allowed
    assert Version(importlib.metadata.version("boto3")) in boto3
    assert Version(importlib.metadata.version("botocore")) in botocore_range("boto3")


def test_the_metrics_extra_names_the_official_clients() -> None:
    assert set(extra("metrics")) == {"prometheus-client", "opentelemetry-api",
                                     "opentelemetry-sdk"}
