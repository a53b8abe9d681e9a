"""Clocks: the running loop's time, and an event loop whose time is virtual.

Code that waits takes a ``Clock`` and calls ``clock.now()`` and ``await clock.sleep()``.
``LoopClock`` reads the running event loop; under ``run_virtual`` that loop is a
``VirtualTimeLoop``, whose time jumps to the next timer whenever nothing is ready to
run, so hours of simulated traffic pass in seconds and tests never sleep for real.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

__all__ = ["Clock", "LoopClock", "VirtualTimeLoop", "run_virtual"]

T = TypeVar("T")


class Clock(Protocol):
    """A source of monotonic time in seconds, and a way to wait on it."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class LoopClock:
    """The running event loop's clock: real under asyncio.run, virtual under run_virtual."""

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class _VirtualSelector(selectors.DefaultSelector):
    """A selector that, instead of blocking for ``timeout``, moves virtual time on by it.

    Real file descriptors (the loop's self-pipe) are still polled, without waiting.
    When nothing at all is scheduled (timeout None) it blocks for real, as a loop
    waiting only on I/O or another thread must.
    """

    def __init__(self, loop: VirtualTimeLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout == 0:
            # Callbacks are ready: skip the poll. Wake-ups from other threads are
            # seen once the loop runs out of work, before time moves on.
            return []
        ready = super().select(0)
        if ready:
            return ready
        if timeout is None:
            return super().select(None)
        if timeout > 0:
            self._loop.advance(timeout)
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose ``time()`` is virtual and jumps to the next due timer.

    Only for in-process work: a request to a real server would see its timeouts fire
    at once.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._virtual_now = float(start)
        super().__init__(selector=_VirtualSelector(self))

    def time(self) -> float:
        return self._virtual_now

    def advance(self, seconds: float) -> None:
        """Move virtual time forward by ``seconds``."""
        self._virtual_now += seconds


def run_virtual(main: Coroutine[Any, Any, T], *, start: float = 0.0) -> T:
    """Run ``main`` to completion on a fresh VirtualTimeLoop and return its result."""
    with asyncio.Runner(loop_factory=lambda: VirtualTimeLoop(start)) as runner:
        return runner.run(main)
