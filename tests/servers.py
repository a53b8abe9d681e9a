"""Test support shared by the helpers of the servers scripts/test starts (Azurite, the
Cosmos DB server): the endpoint a server exported, and admin calls from any thread.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

T = TypeVar("T")


def require(variable: str, started_by: str) -> str:
    """The endpoint in ``variable``; skip the test without one (fail it in CI=true)."""
    url = os.environ.get(variable)
    if not url:
        message = f"{variable} is not set: run the tests with scripts/test, which {started_by}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return url


def run_aside(work: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run the coroutine ``work()`` makes in a loop of its own, in a thread of its own.

    For admin calls (creating a table or a container) from any caller, one inside a
    running loop included; what it raises is raised here.
    """
    results: list[T] = []
    errors: list[BaseException] = []

    def main() -> None:
        try:
            results.append(asyncio.run(work()))
        except BaseException as exc:  # handed to the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=main)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return results[0]
