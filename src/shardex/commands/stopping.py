"""SIGTERM stops a command as Ctrl-C does.

A container's stop, a service manager's and ``kill`` send SIGTERM, whose default ends
the process at once: a ``run`` left its units and its wait's mark to lapse (30 s by
default) and said nothing. ``sigterm_as_interrupt`` (around the whole command, in
``shardex.cli.main``) makes it a KeyboardInterrupt, through SIGINT's handler of the
moment; ``until_terminated`` (in ``run_noting``, which runs the migration commands'
requests) cancels the command's task on SIGTERM, as ``asyncio.run`` does on Ctrl-C, also
where SIGINT is ignored (a shell's background job), so that every ``finally`` gives back
what it holds before the KeyboardInterrupt is raised. ``terminated`` says whether SIGTERM
stopped the command: it exits 143 rather than Ctrl-C's 130.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager, suppress
from types import FrameType
from typing import Any, TypeVar

__all__ = ["sigterm_as_interrupt", "terminated", "until_terminated"]

T = TypeVar("T")

_received: list[int] = []  # the SIGTERMs the command running now received


def terminated() -> bool:
    """True once SIGTERM stopped the command that runs (or ran last) in this process."""
    return bool(_received)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While the block runs, SIGTERM does what Ctrl-C does: SIGINT's handler of the moment
    (``asyncio.run``'s cancels the main task), else KeyboardInterrupt. Outside the main
    thread (an application's own thread) nothing changes."""
    def interrupt(signum: int, frame: FrameType | None) -> None:
        _received.append(signum)
        handler = signal.getsignal(signal.SIGINT)
        if not callable(handler):  # ignored: SIGTERM still stops the command
            raise KeyboardInterrupt
        handler(signal.SIGINT, frame)

    _received.clear()
    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


async def until_terminated(work: Coroutine[Any, Any, T]) -> T:
    """``await work``; on SIGTERM, ``work`` is cancelled (its ``finally`` runs on the loop)
    and KeyboardInterrupt raised, whatever SIGINT's handler. Where the loop cannot watch
    signals (not the main thread), ``work`` alone."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(work)

    def stop() -> None:
        _received.append(signal.SIGTERM)
        task.cancel()

    watching, previous = False, signal.getsignal(signal.SIGTERM)
    with suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGTERM, stop)
        watching = True
    try:
        return await task
    except asyncio.CancelledError:
        if task.cancelled() and _received and not _cancelling():
            raise KeyboardInterrupt from None
        raise
    finally:
        if watching:
            loop.remove_signal_handler(signal.SIGTERM)
            if previous is not None:  # it leaves SIG_DFL: the command's own again
                signal.signal(signal.SIGTERM, previous)


def _cancelling() -> bool:
    """True when the task awaiting ``until_terminated`` is itself being cancelled (Ctrl-C
    through ``asyncio.run``): its CancelledError is its own, not SIGTERM's."""
    current = asyncio.current_task()
    return current is not None and current.cancelling() > 0

