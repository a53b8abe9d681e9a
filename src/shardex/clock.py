"""The injected clock: monotonic time for timeouts and rates, wall time for leases.

Code that waits or measures takes a ``Clock`` and calls ``clock.now()``,
``clock.wall()`` and ``await clock.sleep(seconds)``, never ``time`` or ``asyncio.sleep``
directly, so tests run it on virtual time. ``LoopClock`` reads the running event loop:
real under ``asyncio.run``, virtual under ``shardex.run_virtual`` (whose loop lives in
``shardex.sim.clock``).

- ``now()``: monotonic seconds, for latencies, windows and deadlines inside one process.
- ``wall()``: seconds since the Unix epoch, the one time that several processes share
  (a lease written by one client and read by another must use it). A loop may provide
  its own wall clock with a ``wall()`` method; the virtual loop does, so that both
  clocks are virtual there and move together.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import Protocol

__all__ = ["Clock", "LoopClock"]


class Clock(Protocol):
    """A source of monotonic and wall time in seconds, and a way to wait on it."""

    def now(self) -> float: ...

    def wall(self) -> float: ...

    def sleep(self, seconds: float) -> Awaitable[None]: ...


class LoopClock:
    """The running event loop's clock: real under asyncio.run, virtual under run_virtual."""

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def wall(self) -> float:
        """Epoch seconds: the loop's own wall clock if it has one, else the system's."""
        try:
            loop_wall = getattr(asyncio.get_running_loop(), "wall", None)
        except RuntimeError:  # no running loop: plain synchronous code
            loop_wall = None
        return loop_wall() if callable(loop_wall) else time.time()

    def sleep(self, seconds: float) -> Awaitable[None]:
        # no coroutine of our own around it: sleeps are on the simulated store's hot
        # path; a loop may offer a leaner sleep (the virtual one: one future, no handle)
        if seconds > 0:
            lean = getattr(asyncio.get_running_loop(), "sleep_future", None)
            if lean is not None:
                result: Awaitable[None] = lean(seconds)
                return result
        return asyncio.sleep(max(0.0, seconds))
