"""Test support shared by the helpers of the servers scripts/test starts (Azurite, the
Cosmos DB server): the endpoint a server exported, admin calls from any thread, and
answers made up in a server's place.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest
from click.testing import CliRunner

from shardex.cli import cli, main

T = TypeVar("T")


def shardex_stdout(*args: str) -> str:
    """Run ``shardex ARGS`` in this process against a server; assert it exits 0 and return
    what it printed on stdout alone (click's ``output`` holds stderr too)."""
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def shardex_error(capsys: pytest.CaptureFixture[str], *args: str,
                  code: int | None = None) -> str:
    """Run ``shardex ARGS`` through its entry point against a server; assert it exits with
    ``code`` (1 or 2 if None) and prints one line, ``error: ...``, and return that line,
    its whitespace collapsed."""
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    err = capsys.readouterr().err
    assert exited.value.code == code if code is not None else exited.value.code in (1, 2), err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err
    return " ".join(lines[0].split())


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


def sockets_left_by_cancelled_listings(monkeypatch: pytest.MonkeyPatch,
                                       store: Callable[[], Any], *, runs: int,
                                       when_sent: Callable[[], None] = lambda: None,
                                       after_run: Callable[[], None] = lambda: None
                                       ) -> list[str]:
    """What ``runs`` listings cancelled in flight leave open: the ``ResourceWarning``\\ s
    (and other unraisable errors) raised once each run's loop ended and the garbage
    collector ran.

    Each run (an ``asyncio.run`` of its own) opens an index of 8 shard keys on a new
    ``store()``, puts one entry and lists it; aiohttp's response of every shard request
    is held once sent, never read. Once all 8 are out, ``when_sent`` runs and the listing
    is cancelled, as by a caller giving up; the index closes and the loop ends. Then the
    collector runs, and ``after_run``.
    """
    from aiohttp import ClientResponse

    from shardex import Routing, ShardedIndex, ShardPolicy

    left: list[str] = []
    monkeypatch.setattr("sys.unraisablehook", lambda raised: left.append(
        repr(raised.exc_value)))
    start = ClientResponse.start
    listing: list[asyncio.Future[Any]] = []  # the listing while it runs
    sent = [0]  # its shard requests that went out

    async def start_held(self: ClientResponse, connection: Any) -> ClientResponse:
        if listing:
            sent[0] += 1
            if sent[0] == 8:
                when_sent()
                listing[0].cancel()
            await asyncio.Event().wait()
        return await start(self, connection)

    monkeypatch.setattr(ClientResponse, "start", start_held)

    async def cancelled_listing() -> int:
        index = ShardedIndex(store(), "orders", Routing(default=ShardPolicy(8)), hedge=None)
        async with index:
            await index.put("PENDING", "o-1")
            sent[0] = 0
            listing.append(asyncio.ensure_future(index.query("PENDING", limit=10)))
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(listing[0], 10)
            listing.clear()
        return sent[0]

    for _ in range(runs):
        assert asyncio.run(cancelled_listing()) == 8
        gc.collect()
        after_run()
    return left


def refused_to_connect() -> Exception:
    """azure-core's ServiceRequestError for a connection never made (nothing was sent)."""
    import aiohttp
    from azure.core import exceptions as azure_errors

    cause = aiohttp.ClientConnectorError(None, OSError(111, "refused"))  # type: ignore[arg-type]
    return azure_errors.ServiceRequestError("connection refused", error=cause)


def dropped_after_sending() -> Exception:
    """The same error for a connection the server dropped once the request went out."""
    import aiohttp
    from azure.core import exceptions as azure_errors

    cause = aiohttp.ServerDisconnectedError()
    return azure_errors.ServiceRequestError("Server disconnected", error=cause)
