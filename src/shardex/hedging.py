"""Hedged reads: a second copy of a slow shard read, sent after an adaptive delay, on a budget.

A fan-out waits for its slowest shard, so one slow request in N sets the latency of
the whole read. Hedging, as in Dean and Barroso's "The Tail at Scale", sends a second
copy of a request that has not answered after a high percentile of its kind's latency
(the 96.5th by default), and takes whichever copy answers first. Reads are idempotent, so the only
cost is the extra requests: each copy is counted and charged like any other request.

- ``HedgePolicy`` is the small frozen policy: a fixed ``delay``, or by default one that
  follows the observed latency (the ``quantile`` of the last ``window`` shard reads of
  the same size class: a page of 1,000 entries is slower than a page of 10), and a
  ``budget`` of extra copies per read, weighted by the entries each asks for (0.05: at
  most 5% more requests than reads of one size, and 5% more entries read, so units,
  whatever the mix of sizes: a copy of a page of 1,000 costs what 1,000 reads of one
  entry earn; a reader saves up at most 10 copies of its mean read, plus what its
  reads in flight earned).
  A read still out a little after its copy gets another (up to ``max_hedges``, each
  ``spacing`` x the delay after the one before): such a copy is sent only when every
  earlier one is still slow, which is rare, so it costs little, and it gives the slowest
  request of a wide fan-out, which the whole read waits for, another independent
  chance. On the heavy-tailed latency model of the benchmarks (median 4 ms, p99 40 ms),
  one copy at p96 allows a 64-way first page a p99 of 1.23x one request's; copies at
  p96.5, 1.25x and 1.5x that delay allow 0.97x, for 4.3% more requests.
  The latencies are the reader's own (one index's shard reads): an index is what
  shares a latency profile, as its entries' size sets how long a page takes.
- ``Hedger`` holds what one reader has learned: recent latencies per size class, and
  the budget's balance. Its decisions (``delay``, ``spend``) are plain functions of
  that state.
- ``call_hedged`` is the thin loop that carries them out on an injected clock. The
  delay counts from when the first copy is sent (not while it waits for a slot under
  the concurrency bound). When one copy answers, the reader stops waiting for the
  others; they are left to finish rather than cancelled, since the store does the work
  and charges for it either way (DynamoDB charges a request the client gave up on),
  and a finished copy reports the units it really consumed.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from shardex.clock import Clock, LoopClock
from shardex.errors import InvalidInput, brief

__all__ = ["Copy", "HedgePolicy", "HedgeReport", "Hedger", "call_hedged"]

T = TypeVar("T")
_WARMUP = 20  # samples of a size class before its quantile is trusted
_BURST = 10.0  # hedges the budget may save up during a quiet spell
_REFRESH = 16  # new samples of a class between two computations of its quantile
_MEAN_WINDOW = 64  # reads the mean read size mostly follows


_MAX_DELAY = 3600.0  # seconds: no read waits an hour for its first copy
_MAX_WINDOW = 65_536  # samples: each quantile sorts them all


def _fraction(name: str, value: object, *, low: float, high: float,
              upper: str | None = None) -> float:
    try:
        number = float(value) if not isinstance(value, bool) and isinstance(
            value, int | float) else math.nan
    except OverflowError:  # an int past any float
        number = math.nan
    if not low < number <= high:
        raise InvalidInput(f"HedgePolicy.{name} must be a number in ({low:g}, "
                           f"{upper or f'{high:g}]'}, got {brief(value)}")
    return number


@dataclass(frozen=True, slots=True)
class HedgePolicy:
    """When a slow shard read gets another copy, and how many copies it may cost.

    - ``delay``: seconds after which a copy is sent, at most 3,600; None (the default)
      follows the reader's observed latency, the ``quantile`` of recent reads of the
      same size. Until a size has 20 samples, reads of that size are not hedged.
    - ``quantile``: the latency quantile the adaptive delay follows. None (the
      default) is ``1 - 0.7 * budget``, 0.965 for the default budget: later than the
      budget's own quantile, so that the copies ask for about 4.3% (3.5% first copies,
      the rest further ones) and the budget keeps a reserve for a wide fan-out's burst
      of slow shards.
    - ``budget``: extra copies per read, at most, over time, each weighted by the
      entries it asks for (0.05: 5% more entries read, so 5% more requests than reads
      of one size). A reader saves up at most 10 copies of its mean read in a quiet
      spell.
    - ``max_hedges``: copies of one read beyond the first (3).
    - ``spacing``: a further copy is sent ``spacing`` x the delay after the one before
      (0.25), if every copy sent is still out.
    - ``window``: recent reads kept per size class for the quantile (512), from 20 to
      65,536; at least twice the most reads the reader has had in flight at once (up
      to 65,536), since a fan-out's reads answer fastest first: the last 512 answers of
      a fan-out of 1,024 are its slowest half, and a quantile of them comes late.

    Raises InvalidInput naming the field at fault.
    """

    delay: float | None = None
    quantile: float | None = None
    budget: float = 0.05
    max_hedges: int = 3
    spacing: float = 0.25
    window: int = 512

    def __post_init__(self) -> None:
        if self.delay is not None:
            _fraction("delay", self.delay, low=0.0, high=_MAX_DELAY)
        if self.quantile is not None:
            if self.quantile == 1.0:  # True too; False is refused by _fraction below
                raise InvalidInput(f"HedgePolicy.quantile must be a number in (0, 1), got "
                                   f"{brief(self.quantile)}")
            _fraction("quantile", self.quantile, low=0.0, high=1.0, upper="1)")
        _fraction("budget", self.budget, low=0.0, high=math.inf)
        _fraction("spacing", self.spacing, low=0.0, high=100.0)
        for name, least, most in (("max_hedges", 1, None), ("window", _WARMUP, _MAX_WINDOW)):
            number = getattr(self, name)
            if isinstance(number, bool) or not isinstance(number, int) or number < least \
                    or (most is not None and number > most):
                raise InvalidInput(f"HedgePolicy.{name} must be an integer " + (
                    f">= {least}" if most is None else f"from {least} to {most:,}")
                    + f", got {brief(number)}")


class _Latencies:
    """The last ``window`` latencies of one size class, and their cached quantile."""

    __slots__ = ("fresh", "samples", "value")

    def __init__(self, window: int) -> None:
        self.samples: deque[float] = deque(maxlen=window)
        self.fresh = 0
        self.value: float | None = None

    def widen(self, window: int) -> None:
        """Keep at least ``window`` latencies from now on."""
        if window > (self.samples.maxlen or 0):
            self.samples = deque(self.samples, maxlen=window)

    def quantile(self, q: float) -> float | None:
        if len(self.samples) < _WARMUP:
            return None
        if self.value is None or self.fresh >= max(_REFRESH, len(self.samples) // 32):
            ordered = sorted(self.samples)
            self.value = ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]
            self.fresh = 0
        return self.value


class Hedger:
    """What one reader has learned for hedging: latencies per size class, budget balance."""

    def __init__(self, policy: HedgePolicy) -> None:
        self.policy = policy
        self.quantile = policy.quantile if policy.quantile is not None else \
            max(0.5, 1.0 - 0.7 * policy.budget)
        self._classes: dict[int, _Latencies] = {}
        self._balance = 0.0  # entries the budget may still ask for in copies
        self._out = 0  # entries asked for by the reads sent and not yet answered
        self._flight = 0  # reads sent and not yet answered
        self._window = policy.window  # latencies kept per class: twice the widest burst
        self._mean = 0.0  # the recent mean size of a read, in entries

    @staticmethod
    def size_class(size: int) -> int:
        """Reads asking for 2**(k-1) to 2**k - 1 entries share class k."""
        return max(1, size).bit_length()

    def observe(self, size: int, seconds: float) -> None:
        """Record the latency of one read copy that asked for ``size`` entries."""
        if self.policy.delay is not None:
            return
        key = self.size_class(size)
        found = self._classes.get(key)
        if found is None:
            found = self._classes[key] = _Latencies(self._window)
        elif found.samples.maxlen != self._window:
            found.widen(self._window)
        found.samples.append(seconds)
        found.fresh += 1

    def delay(self, size: int) -> float | None:
        """Seconds to wait before hedging a read of ``size`` entries; None: do not hedge."""
        if self.policy.delay is not None:
            return self.policy.delay
        found = self._classes.get(self.size_class(size))
        return None if found is None else found.quantile(self.quantile)

    def earn(self, size: int) -> None:
        """A read of ``size`` entries is sent: the budget grows by ``policy.budget`` x ``size``.

        The balance is counted in entries asked for, so a copy of a page of 1,000 costs
        what a thousand pages of one earn, and copies add at most ``budget`` to the
        units read, whatever mix of sizes a reader asks for. It is capped at what a quiet
        spell may save (10 copies of a read of the mean size) plus what the reads in
        flight earned: a fan-out of 1,024 shards sends them all at once, and its copies
        are paid by its own reads, not capped at 10 (1% of them).
        """
        size = max(1, size)
        self._out += size
        self._flight += 1
        if 2 * self._flight > self._window:
            self._window = min(_MAX_WINDOW, 2 * self._flight)
        self._mean += (size - self._mean) / (_MEAN_WINDOW if self._mean else 1)
        self._balance = min(_BURST * self._mean + self.policy.budget * self._out,
                            self._balance + self.policy.budget * size)

    def done(self, size: int) -> None:
        """A read of ``size`` entries sent (``earn``) is answered, or given up."""
        self._out -= max(1, size)
        self._flight -= 1

    def spend(self, size: int) -> bool:
        """Pay for a copy of a read of ``size`` entries; False when the budget cannot."""
        size = max(1, size)
        if self._balance < size:
            return False
        self._balance -= size
        return True


class Copy:
    """One copy of a hedged read, as its sender sees it.

    The sender calls ``left(release)`` once the copy has left (past any concurrency
    bound), handing over how to give back what the copy holds there: a copy the reader
    stops waiting for gives its slot back at once, and finishes outside the bound.
    """

    __slots__ = ("_on_left", "_release", "started")

    def __init__(self, on_left: Callable[[], None] | None = None) -> None:
        self.started = False
        self._release: Callable[[], None] | None = None
        self._on_left = on_left

    def left(self, release: Callable[[], None] | None = None) -> None:
        self._release = release
        if not self.started:
            self.started = True
            if self._on_left is not None:
                self._on_left()

    def abandon(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()


class HedgeReport(Protocol):
    """Where ``call_hedged`` reports the copies of one read."""

    def sent(self) -> None:
        """A copy beyond the first was sent."""

    def won(self) -> None:
        """A copy beyond the first answered first."""

    def abandoned(self, copy: asyncio.Future[Any]) -> None:
        """The reader stopped waiting for ``copy``, which is left to finish."""


async def call_hedged(send: Callable[[Copy | None], Awaitable[T]], hedger: Hedger,
                      size: int, *, clock: Clock, report: HedgeReport) -> T:
    """Await one read of ``size`` entries, hedged as ``hedger`` decides.

    ``send(copy)`` sends one copy and calls ``copy.left`` (when a copy is given) once
    it has left. The first copy to succeed wins; if every copy fails, the first
    failure is raised. If the caller is cancelled, every copy is.
    """
    hedger.earn(size)
    try:
        delay = hedger.delay(size)
        if delay is None:
            return await send(None)
        return await _Hedged(send, hedger, delay, size, clock, report).run()
    finally:
        hedger.done(size)


class _Hedged(Generic[T]):
    """The copies of one hedged read: a timer that sends them, callbacks that decide.

    Most reads answer before the delay, so the common path is kept to one task (the
    first copy), one future and one timer: on the event loop's own clock (``LoopClock``,
    the default) the timer is a loop timer, with no task, event or sleep of its own;
    on another clock, a task that sleeps on it.
    """

    def __init__(self, send: Callable[[Copy | None], Awaitable[T]], hedger: Hedger,
                 delay: float, size: int, clock: Clock, report: HedgeReport) -> None:
        loop = asyncio.get_running_loop()
        self._send = send
        self._hedger = hedger
        self._delay = delay
        self._size = size
        self._clock = clock
        self._report = report
        self._loop = loop if type(clock) is LoopClock else None
        self._outcome: asyncio.Future[T] = loop.create_future()
        self._states: list[Copy] = []
        self._running: list[asyncio.Future[T]] = []
        self._first: asyncio.Future[T] | None = None
        self._first_error: BaseException | None = None
        self._timer: asyncio.TimerHandle | asyncio.Future[None] | None = None
        self._sent = 0

    async def run(self) -> T:
        self._first = self._launch(self._arm)
        try:
            return await self._outcome
        except BaseException:
            # the caller was cancelled (every copy is), or every copy failed (none runs)
            for copy in self._running:
                copy.cancel()
            self._running = []
            raise
        finally:
            # dropped as they end: a cancelled timer task's traceback holds this read,
            # and each copy's state calls back into it; a cycle left here would keep the
            # whole read (and what it reads into) for the garbage collector
            timer, self._timer = self._timer, None
            if timer is not None:
                timer.cancel()
            states, self._states = self._states, []
            for state in states:
                state.abandon()
            for copy in self._running:
                self._report.abandoned(copy)

    def _launch(self, on_left: Callable[[], None] | None = None) -> asyncio.Future[T]:
        self._states.append(Copy(on_left))
        copy = asyncio.ensure_future(self._send(self._states[-1]))
        self._running.append(copy)
        copy.add_done_callback(self._answered)
        return copy

    def _arm(self) -> None:
        # the delay counts from when the first copy left, not while it waited for a slot
        if self._outcome.done():
            return
        if self._loop is not None:
            self._timer = self._loop.call_later(self._delay, self._fire)
        else:
            self._timer = asyncio.ensure_future(self._ticks())

    def _another(self) -> bool:
        """Send one more copy if every one sent is still out and the budget pays for it.

        True if a further one may follow, ``spacing`` x the delay later.
        """
        if self._outcome.done() or not self._running or \
                not self._hedger.spend(self._size):
            return False
        self._sent += 1
        self._report.sent()
        self._launch()
        return self._sent < self._hedger.policy.max_hedges

    def _fire(self) -> None:
        assert self._loop is not None
        if self._another():
            self._timer = self._loop.call_later(self._delay * self._hedger.policy.spacing,
                                                self._fire)

    async def _ticks(self) -> None:
        await self._clock.sleep(self._delay)
        while self._another():
            await self._clock.sleep(self._delay * self._hedger.policy.spacing)

    def _answered(self, copy: asyncio.Future[T]) -> None:
        if copy in self._running:
            self._running.remove(copy)
        if self._outcome.done() or copy.cancelled():
            return
        error = copy.exception()
        if error is None:
            if copy is not self._first:
                self._report.won()
            self._outcome.set_result(copy.result())
            return
        self._first_error = self._first_error or error
        if not self._running:
            self._outcome.set_exception(self._first_error)
