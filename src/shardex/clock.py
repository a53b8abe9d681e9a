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

Waiting on a store that may never answer: ``settled`` (a future, or a clock tick),
``within`` (a request bounded in time), ``carried`` (work a cancel waits for, within a
bound) and ``answered`` (a wait that says, now and then, that the store has not answered).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, Protocol, TypeVar

from shardex.errors import Unavailable

__all__ = ["Clock", "GOODBYE", "LoopClock", "alongside", "answered", "carried", "running_loop",
           "settled", "taken", "within"]

T = TypeVar("T")
GOODBYE = 2.0  # seconds a stopping process waits for each of its last store requests


class Clock(Protocol):
    """A source of monotonic and wall time in seconds, and a way to wait on it."""

    def now(self) -> float: ...

    def wall(self) -> float: ...

    def sleep(self, seconds: float) -> Awaitable[None]: ...


# The loop found running last (weakly: a closed loop is not kept alive), as
# asyncio.get_running_loop makes a getpid system call each time (so that a forked child
# does not see its parent's loop), about a microsecond, and a simulated request reads
# the clock several times. A loop runs in this thread while its run_forever has set its
# _thread_id to this thread's; a fork forgets it.
_last: list[Callable[[], Any]] = [lambda: None]
_ident = threading.get_ident
os.register_at_fork(after_in_child=lambda: _last.__setitem__(0, lambda: None))


def running_loop() -> asyncio.AbstractEventLoop:
    """``asyncio.get_running_loop()``, without its system call for the loop found last.

    Raises RuntimeError when no loop runs in this thread, as asyncio's does.
    """
    loop = _last[0]()
    if loop is not None and getattr(loop, "_thread_id", None) == _ident():
        found: asyncio.AbstractEventLoop = loop
        return found
    found = asyncio.get_running_loop()
    with contextlib.suppress(TypeError):  # a loop that takes no weak reference
        _last[0] = weakref.ref(found)
    return found


class LoopClock:
    """The running event loop's clock: real under asyncio.run, virtual under run_virtual."""

    def now(self) -> float:
        # running_loop's check, inline: the simulated store reads the clock several
        # times a request
        loop = _last[0]()
        if loop is None or getattr(loop, "_thread_id", None) != _ident():
            loop = running_loop()
        now: float = loop.time()
        return now

    def wall(self) -> float:
        """Epoch seconds: the loop's own wall clock if it has one, else the system's."""
        try:
            loop_wall = getattr(running_loop(), "wall", None)
        except RuntimeError:  # no running loop: plain synchronous code
            loop_wall = None
        return loop_wall() if callable(loop_wall) else time.time()

    def sleep(self, seconds: float) -> Awaitable[None]:
        # no coroutine of our own around it: sleeps are on the simulated store's hot
        # path; a loop may offer a leaner sleep (the virtual one: one future, no handle)
        if seconds > 0:
            loop = _last[0]()
            if loop is None or getattr(loop, "_thread_id", None) != _ident():
                loop = running_loop()
            lean = getattr(loop, "sleep_future", None)
            if lean is not None:
                result: Awaitable[None] = lean(seconds)
                return result
        return asyncio.sleep(max(0.0, seconds))


async def settled(future: asyncio.Future[Any], clock: Clock, seconds: float) -> bool:
    """Wait for ``future`` at most ``seconds`` on ``clock``; True if it is done (it is
    not cancelled when the time is up)."""
    timer = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait((future, timer), return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
    return future.done()


def taken(future: asyncio.Future[Any]) -> None:
    """A done callback that reads a cancelled future's end (its exception, if any), so
    that asyncio does not report it as never retrieved."""
    if not future.cancelled():
        future.exception()


@contextlib.asynccontextmanager
async def alongside(work: Coroutine[Any, Any, Any]) -> AsyncIterator[None]:
    """Run ``work`` as a task while the body runs; cancel it as the body ends and wait
    for its end (an exception it ended with, other than the cancel, is raised): a
    renewal or a progress report must not outlive what it serves."""
    task = asyncio.ensure_future(work)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def within(clock: Clock, seconds: float, work: Awaitable[T], what: str) -> T:
    """``work``'s result, or Unavailable naming ``what`` (``work`` cancelled) once it has
    taken ``seconds`` on ``clock``.

    For what a stopping process does on its way out (a checkpoint, a lease given back):
    on a store that takes requests and never answers, Ctrl-C waited as long as the
    store's timeouts and tries (minutes).
    """
    task = asyncio.ensure_future(work)
    if not await settled(task, clock, seconds):
        task.cancel()
        task.add_done_callback(taken)
        raise Unavailable(f"{what}: no answer within {seconds:g} s")
    return task.result()


async def carried(work: Coroutine[Any, Any, T], clock: Clock, seconds: float) -> T:
    """``work``'s result; if the caller is cancelled meanwhile, ``work`` is still waited
    for, ``seconds`` at most on ``clock`` (then cancelled), before the cancel goes on.

    For what must not be cut in two by Ctrl-C (the log entries of a migration just
    started), within a bound a store that does not answer cannot stretch.
    """
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if not await settled(task, clock, seconds):
            task.cancel()
            task.add_done_callback(taken)
        raise


async def answered(read: Awaitable[T], clock: Clock, every: float,
                   say: Callable[[str], None], *, quiet: Callable[[], float] | None = None,
                   until: Callable[[], bool] | None = None, tick: float | None = None) -> T:
    """``read``'s result; while the store does not answer it, ``say`` so, after ``every``
    seconds, then twice as long, and so on up to a minute apart.

    A store that takes requests and never answers had a run fall silent until its
    requests had timed out and been tried again (about 12 minutes on DynamoDB).

    ``quiet`` says how long the store has not answered (default: since ``read`` was
    asked); once it answers again the notes start over. Looked at every ``tick``
    seconds (default ``every``); ``until`` True: say nothing more (someone else says it).
    """
    asked, say_at = clock.now(), every
    waited = quiet or (lambda: clock.now() - asked)
    reading = asyncio.ensure_future(read)
    try:
        while not await settled(reading, clock, tick or every):
            if until is not None and until():
                return await reading
            silent = waited()
            if silent < every:
                say_at = every
            elif silent >= say_at:
                say(f"no answer from the store for {silent:.0f} s")
                say_at = min(2 * say_at, say_at + 60.0)
        return reading.result()
    finally:
        if not reading.done():
            reading.add_done_callback(taken)
            reading.cancel()
            # its own way out (a checkpoint, a lease given back) is part of this wait
            await asyncio.wait({reading})
