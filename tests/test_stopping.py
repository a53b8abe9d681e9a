"""SIGTERM stops a command as Ctrl-C does (``shardex.commands.stopping``); the runner's
own case, a process on DynamoDB Local, is in ``tests/test_reshard_dynamodb.py``."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from shardex.commands.stopping import sigterm_as_interrupt, terminated, until_terminated


def _terminate() -> None:
    """SIGTERM to this process; its handler runs before the call returns."""
    os.kill(os.getpid(), signal.SIGTERM)
    signal.sigtimedwait([], 0)
    raise AssertionError("SIGTERM did not interrupt")


def test_sigterm_is_an_interrupt_while_a_command_runs_and_only_then() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with sigterm_as_interrupt():
        assert not terminated()
        with pytest.raises(KeyboardInterrupt):
            _terminate()
    assert terminated()
    assert signal.getsignal(signal.SIGTERM) is before


def test_sigterm_with_sigint_ignored_still_interrupts() -> None:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with pytest.raises(KeyboardInterrupt), sigterm_as_interrupt():
            _terminate()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert terminated()


def test_until_terminated_cancels_the_work_and_lets_its_finally_run() -> None:
    events: list[str] = []

    async def work() -> None:
        try:
            events.append("started")
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.Event().wait()  # forever, but for the signal
        finally:
            await asyncio.sleep(0)  # a finally that awaits, as giving a lease back does
            events.append("cleaned up")

    async def main() -> None:
        await until_terminated(work())

    before = signal.getsignal(signal.SIGTERM)
    with sigterm_as_interrupt(), pytest.raises(KeyboardInterrupt):
        asyncio.run(main())
    assert events == ["started", "cleaned up"]
    assert terminated()
    assert signal.getsignal(signal.SIGTERM) is before


def test_until_terminated_without_sigterm_is_the_work_alone() -> None:
    async def work() -> int:
        await asyncio.sleep(0)
        return 7

    async def main() -> int:
        return await until_terminated(work())

    with sigterm_as_interrupt():
        assert asyncio.run(main()) == 7
    assert not terminated()
