"""Client adapters that fail on purpose: crashes between a write's steps, throttles, timeouts.

``Faulty`` wraps a store's real adapter (Azure Tables' ``TablesClient``, Cosmos DB's
``ContainerClient``: both have one ``call(operation, **params)``); ``faulty(inner)``
builds the one that fits the adapter. ``crash_at(n, after=...)`` makes the n-th call from now
raise ``Crash`` (a BaseException, as a killed process: nothing after it runs) before the
request is sent, or after it applied; ``pause_before(operation)`` holds the next such
call until released; ``answer_at(n, error)`` lets the n-th call apply and answers it
with ``error``; ``rates(throttle=, ambiguous=)`` injects Throttled before a request
and Unavailable after one applied, drawn from a seeded generator.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from shardex.errors import Throttled, Unavailable
from shardex.stores.azure.client import TablesClient
from shardex.stores.cosmos.client import ContainerClient

__all__ = ["Crash", "Faulty", "FaultyContainer", "FaultyTables", "faulty"]


class Crash(BaseException):
    """The process died here (raised by Faulty; nothing in shardex catches it)."""


class Faulty:
    """A real adapter, with faults on demand (see the module docstring)."""

    def __init__(self, inner: Any, *, seed: int = 0) -> None:
        self.inner = inner
        self.endpoint = inner.endpoint
        self.table = inner.table
        self.calls: list[str] = []
        self._crash: tuple[int, bool] | None = None
        self._pause: tuple[str, asyncio.Event, asyncio.Event] | None = None
        self._throttle = self._ambiguous = 0.0
        self._timeouts = self._stalled = 0
        self._answer: tuple[int, BaseException] | None = None
        self._rng = random.Random(seed)

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()

    def crash_at(self, n: int, *, after: bool) -> None:
        """Crash on the n-th call from now (1: the next), before sending it or after."""
        self._crash = (len(self.calls) + n, after)

    def pause_before(self, operation: str) -> tuple[asyncio.Event, asyncio.Event]:
        """Hold the next ``operation``; returns (reached, release) events."""
        reached, release = asyncio.Event(), asyncio.Event()
        self._pause = (operation, reached, release)
        return reached, release

    def time_out(self, calls: int) -> None:
        """The next call applies and then times out, and the ``calls - 1`` after it time
        out before they are sent (a server that stalls for a while)."""
        self._timeouts = self._stalled = calls

    def answer_at(self, n: int, error: BaseException) -> None:
        """The n-th call from now is sent and applies, and then ``error`` is its answer
        (an error the service did not send: a proxy's page, or a refusal after all)."""
        self._answer = (len(self.calls) + n, error)

    def rates(self, *, throttle: float = 0.0, ambiguous: float = 0.0) -> None:
        self._throttle, self._ambiguous = throttle, ambiguous

    async def call(self, operation: str, **params: Any) -> Any:
        self.calls.append(operation)
        crash, self._crash = self._crash, None
        if crash is not None and crash[0] != len(self.calls):
            self._crash = crash
            crash = None
        if self._pause is not None and self._pause[0] == operation:
            _, reached, release = self._pause
            self._pause = None
            reached.set()
            await release.wait()
        if crash is not None and not crash[1]:
            raise Crash(f"before {operation}")
        if self._timeouts:
            first, self._timeouts = self._timeouts == self._stalled, self._timeouts - 1
            if first:  # sent, applied, then timed out
                await self.inner.call(operation, **params)
                raise Unavailable(f"injected timeout after {operation} applied")
            raise Unavailable(f"injected timeout before {operation} was sent")
        if self._rng.random() < self._throttle:
            raise Throttled(f"injected throttle of {operation}", reason="injected")
        result = await self.inner.call(operation, **params)
        if crash is not None:
            raise Crash(f"after {operation}")
        if self._answer is not None and self._answer[0] == len(self.calls):
            error, self._answer = self._answer[1], None
            raise error
        if operation != "query" and operation != "get" and self._rng.random() < self._ambiguous:
            raise Unavailable(f"injected timeout after {operation} applied")
        return result


class FaultyTables(Faulty, TablesClient):
    """The real Azure Tables adapter, with faults on demand."""


class FaultyContainer(Faulty, ContainerClient):
    """The real Cosmos DB adapter, with faults on demand."""


def faulty(inner: TablesClient | ContainerClient, *, seed: int = 0) -> Faulty:
    """``inner`` wrapped in the Faulty that is an adapter of its kind."""
    kind = FaultyTables if isinstance(inner, TablesClient) else FaultyContainer
    return kind(inner, seed=seed)
