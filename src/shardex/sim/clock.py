"""Virtual time: an event loop whose clock jumps to the next timer, and ``run_virtual``.

Code takes a ``shardex.clock.Clock``; ``LoopClock`` reads the running loop, and under
``run_virtual`` that loop is a ``VirtualTimeLoop``, whose time jumps to the next timer
whenever nothing is ready to run, so hours of simulated traffic pass in seconds and
tests never sleep for real. Its wall clock is virtual too: it starts at ``wall_start``
(epoch seconds) and moves with the monotonic one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import heapq
import selectors
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from shardex.clock import Clock, LoopClock
from shardex.errors import InvalidInput, brief

__all__ = ["VIRTUAL_WALL_START", "VirtualClock", "VirtualTimeLoop", "loop_clock", "run_virtual"]

T = TypeVar("T")
_new_handle = object.__new__


# 2026-11-30T05:00:00Z: a fixed virtual epoch, so runs on virtual time are reproducible.
VIRTUAL_WALL_START = 1_796_014_800.0


class _VirtualSelector(selectors.DefaultSelector):
    """A selector that, instead of blocking for ``timeout``, moves virtual time on by it.

    Real file descriptors (the loop's self-pipe) are still polled, without waiting.
    When nothing at all is scheduled (timeout None) it blocks for real, as a loop
    waiting only on I/O or another thread must; so does a paced loop that no caller is
    waiting on (see ``VirtualTimeLoop.pace``).
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
        if timeout is None or (timeout > 0 and self._loop.held_still()):
            return super().select(None)
        if timeout > 0:
            self._loop.advance(timeout)
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose ``time()`` is virtual and jumps to the next due timer.

    Only for in-process work: a request to a real server would see its timeouts fire
    at once.

    A simulation wakes on timers hundreds of thousands of times, so the loop keeps them
    lean: its heap holds the due times alone (floats, compared faster than tuples), each
    with the handles and futures due then in the order they were set (equal times fire
    in that order), ``sleep_future`` is a sleep that is one
    future and one heap entry (``shardex.clock.LoopClock.sleep`` uses it), and the
    selector is polled only when a file descriptor other than the loop's own wake-up
    pipe is registered, or another thread woke the loop.
    """

    def __init__(self, start: float = 0.0, wall_start: float = VIRTUAL_WALL_START) -> None:
        self._virtual_now = float(start)
        self._wall_offset = float(wall_start) - float(start)
        self._paced = False
        self._waiting = 0
        self._waiting_lock = threading.Lock()
        self._times: list[float] = []  # a heap of the times something is due at
        self._due: dict[float, list[Any]] = {}  # time -> what is due then, in order set
        self._woken = False
        selector = _VirtualSelector(self)
        super().__init__(selector=selector)
        self._fds = selector._fd_to_key  # type: ignore[attr-defined]  # registered: self-pipe

    def pace(self) -> None:
        """Let time move only while a call from another thread runs on it (``submit``).

        A loop run in a thread of its own for a blocking facade would otherwise race
        through virtual time between calls, firing background timers (a routing refresh)
        as fast as the CPU allows.
        """
        self._paced = True

    def submit(self, main: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``main`` on the loop from another thread (``run_coroutine_threadsafe``); on
        a paced loop time moves while it runs and stands still before it starts and from
        the moment it ends, both on the loop's own thread: a caller that marked its wait
        from its own thread let the loop race through the routing's refreshes until that
        thread was scheduled again (minutes of virtual time a call on a busy machine)."""
        async def running() -> T:
            with self._waiting_lock:
                self._waiting += 1
            try:
                return await main
            finally:
                with self._waiting_lock:
                    self._waiting -= 1

        call = running()
        try:
            return asyncio.run_coroutine_threadsafe(call, self)
        except BaseException:
            call.close()
            main.close()
            raise

    def held_still(self) -> bool:
        """True when the loop is paced and nobody waits on it: time must not move."""
        return self._paced and self._waiting == 0

    def time(self) -> float:
        return self._virtual_now

    def wall(self) -> float:
        """Virtual epoch seconds: ``wall_start`` plus the virtual time elapsed."""
        return self._virtual_now + self._wall_offset

    def advance(self, seconds: float) -> None:
        """Move virtual time forward by ``seconds``."""
        self._virtual_now += seconds

    # -- timers ------------------------------------------------------------------------

    def call_at(self, when: float, callback: Callable[..., object], *args: Any,  # type: ignore[override]
                context: Any = None) -> asyncio.TimerHandle:
        if when is None:
            raise TypeError("when cannot be None")
        base: Any = self
        base._check_closed()
        timer = asyncio.TimerHandle(when, callback, args, self, context)
        self._at(when, timer)
        timer._scheduled = True  # type: ignore[attr-defined]  # counts its cancel
        return timer

    def call_soon(self, callback: Callable[..., object], *args: Any,  # type: ignore[override]
                  context: Any = None) -> asyncio.Handle:
        """``BaseEventLoop.call_soon`` less its checks outside debug mode: every wake-up
        of a task on a timer comes through here."""
        base: Any = self
        if base._debug or base._closed:  # the base loop's checks and errors
            return super().call_soon(callback, *args, context=context)
        # Handle.__init__ less its frame and its get_debug call (not in debug mode here)
        handle: Any = _new_handle(asyncio.Handle)
        handle._context, handle._loop, handle._callback, handle._args, handle._cancelled, \
            handle._repr, handle._source_traceback = \
            contextvars.copy_context() if context is None else context, self, callback, \
            args, False, None, None
        base._ready.append(handle)
        return handle  # type: ignore[no-any-return]

    def sleep_future(self, seconds: float) -> asyncio.Future[None]:
        """A future that is done ``seconds`` from now (> 0): ``asyncio.sleep`` less its
        coroutine and timer handle. Cancelling it leaves a heap entry that does nothing."""
        future: asyncio.Future[None] = asyncio.Future(loop=self)  # create_future's own
        when = self._virtual_now + seconds
        due = self._due.get(when)
        if due is None:  # _at's, inline: most sleeps are a simulated request's
            self._due[when] = [future]
            heapq.heappush(self._times, when)
        else:
            due.append(future)
        return future

    def _at(self, when: float, what: Any) -> None:
        """Set ``what`` (a TimerHandle, or a future to set done) due at ``when``."""
        due = self._due.get(when)
        if due is None:
            self._due[when] = [what]
            heapq.heappush(self._times, when)
        else:
            due.append(what)

    def _write_to_self(self) -> None:
        self._woken = True  # another thread (or a signal) woke the loop: poll before a jump
        super()._write_to_self()  # type: ignore[misc]

    def _run_once(self) -> None:
        """Iterations until the loop is stopping: due timers, then the ready callbacks;
        time jumps when idle.

        As ``BaseEventLoop._run_once`` on the loop's own timer heap, looped here rather
        than by ``run_forever`` (which stops once ``_stopping`` is set, checked here after
        each iteration as there): a simulation iterates once or twice a request, so what
        every iteration reads is held in locals (``_drop_cancelled`` keeps the heap and
        the map the same objects).
        """
        base: Any = self  # the base loop's private state, which typeshed does not declare
        times, due, ready = self._times, self._due, base._ready
        popleft, heappop, timer_type = ready.popleft, heapq.heappop, asyncio.TimerHandle
        resolution, fds = base._clock_resolution, self._fds
        while True:
            if base._timer_cancelled_count and len(times) > 100 \
                    and base._timer_cancelled_count * 2 > len(times):
                self._drop_cancelled()
            if ready or base._stopping:
                timeout: float | None = 0.0
            elif times:
                timeout = times[0] - self._virtual_now
                if timeout < 0.0:
                    timeout = 0.0
            else:
                timeout = None
            # held_still and the selector's map, read inline: this runs for every wake-up
            if timeout != 0.0 and (self._woken or timeout is None
                                   or (self._paced and self._waiting == 0)
                                   or len(fds) > 1):
                self._woken = False
                base._process_events(base._selector.select(timeout))
            elif timeout:
                self._virtual_now = times[0]  # exactly: a sum could fall a hair short
            end = self._virtual_now + resolution
            while times and times[0] < end:
                for handle in due.pop(heappop(times)):
                    if type(handle) is timer_type:
                        handle._scheduled = False  # type: ignore[attr-defined]
                        if handle.cancelled():
                            base._timer_cancelled_count -= 1
                        else:
                            ready.append(handle)
                    elif not handle.done():
                        handle.set_result(None)  # its waiter is called soon, this iteration
            if base._debug:
                for _ in range(len(ready)):
                    handle = popleft()
                    if not handle._cancelled:
                        base._current_handle = handle
                        try:
                            handle._run()
                        finally:
                            base._current_handle = None
            else:
                for _ in range(len(ready)):
                    handle = popleft()
                    if handle._cancelled:
                        continue
                    # Handle._run, inline: one frame less for every wake-up
                    try:
                        handle._context.run(handle._callback, *handle._args)
                    except (SystemExit, KeyboardInterrupt):
                        raise
                    except BaseException as exc:
                        self._failed(handle, exc)
            if base._stopping:
                return

    def _drop_cancelled(self) -> None:
        """Take the cancelled timer handles out of the heap (most of it is cancelled), in
        place: ``_run_once`` holds the heap and the map."""
        base: Any = self
        kept_due: dict[float, list[Any]] = {}
        for when, handles in self._due.items():
            kept = []
            for handle in handles:
                if type(handle) is asyncio.TimerHandle and handle.cancelled():
                    handle._scheduled = False  # type: ignore[attr-defined]
                else:
                    kept.append(handle)
            if kept:
                kept_due[when] = kept
        self._due.clear()
        self._due.update(kept_due)
        self._times[:] = kept_due
        heapq.heapify(self._times)
        base._timer_cancelled_count = 0

    def _failed(self, handle: asyncio.Handle, exc: BaseException) -> None:
        """Report a callback that raised, as ``Handle._run`` does."""
        base: Any = handle
        self.call_exception_handler({
            "message": f"Exception in callback {base._callback!r}{base._args!r}",
            "exception": exc, "handle": handle})


class VirtualClock(LoopClock):
    """The clock of one ``VirtualTimeLoop``, given: ``LoopClock`` without finding the
    running loop at each call.

    For the objects of one simulated run, made on that loop and used on it alone (a
    simulated request reads the clock several times); elsewhere use ``LoopClock``.
    """

    __slots__ = ("_loop",)

    def __init__(self, loop: VirtualTimeLoop) -> None:
        self._loop = loop

    def now(self) -> float:
        return self._loop._virtual_now

    def wall(self) -> float:
        return self._loop.wall()

    def sleep(self, seconds: float) -> Awaitable[None]:
        if seconds > 0:
            return self._loop.sleep_future(seconds)
        return asyncio.sleep(max(0.0, seconds))


def loop_clock() -> Clock:
    """The running loop's clock: a ``VirtualClock`` on a ``VirtualTimeLoop``, else a
    ``LoopClock``."""
    loop = asyncio.get_running_loop()
    return VirtualClock(loop) if isinstance(loop, VirtualTimeLoop) else LoopClock()


def run_virtual(main: Coroutine[Any, Any, T], *, start: float = 0.0,
                wall_start: float = VIRTUAL_WALL_START) -> T:
    """Run ``main`` to completion on a fresh VirtualTimeLoop and return its result.

    InvalidInput, before any loop is made, when ``main`` is not a coroutine (a coroutine
    function not called, say)."""
    if not asyncio.iscoroutine(main):
        raise InvalidInput(f"run_virtual runs a coroutine, as run_virtual(main()), got "
                           f"{brief(main)}")
    result: list[T] = []

    async def kept() -> None:
        # the task's result stays out of the task: leaving, asyncio.Runner puts SIGINT's
        # handler back, and Python's signal module formats the handler it replaces (which
        # holds the task) into an error it drops: a repr of the whole result (0.1 s of
        # CPU for a demo run's)
        result.append(await main)

    with asyncio.Runner(loop_factory=lambda: VirtualTimeLoop(start, wall_start)) as runner:
        runner.run(kept())
    return result[0]
