"""Test support shared by the helpers of the servers scripts/test starts (Azurite, the
Cosmos DB server): the endpoint a server exported, admin calls from any thread, and
answers made up in a server's place.
"""

from __future__ import annotations

import asyncio
import json
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


class Answer:
    """What a service answers in place of a request, below an Azure SDK's pipeline (its
    retry and error policies read it as they read the service's answer)."""

    def __init__(self, request: Any, status: int, reason: str, headers: dict[str, str],
                 body: Any) -> None:
        from azure.core.utils import CaseInsensitiveDict

        self.request = request
        self.status_code, self.reason = status, reason
        self.headers = CaseInsensitiveDict(headers)
        self.content_type = headers["Content-Type"]
        self._body = json.dumps(body).encode()

    def body(self) -> bytes:
        return self._body

    def text(self, encoding: str | None = None) -> str:
        return self._body.decode()

    async def load_body(self) -> None:
        return None

    def close(self) -> None:
        return None
