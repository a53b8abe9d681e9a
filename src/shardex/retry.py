"""Retry and hedging policies: small objects whose decisions are plain functions.

``RetryPolicy.decide`` says whether, and after how long, a failed call is tried
again; ``call_with_retry`` carries that out with an injected clock, so tests run on
virtual time. Backoff is exponential with full jitter: ``uniform(0, min(cap,
base * 2**attempt))``, which spreads the retries of many clients hitting one throttled
partition instead of bunching them.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from shardex.clock import Clock
from shardex.errors import InvalidInput, Throttled, Unavailable

__all__ = ["HedgePolicy", "RetryPolicy", "call_hedged", "call_with_retry"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a throttled or unavailable call is retried.

    - ``attempts``: tries in all, the first included (>= 1).
    - ``base``/``cap``: backoff seconds; attempt k waits uniform(0, min(cap, base * 2**k)).
    - ``deadline``: seconds after the first try past which no new try starts (None: none).
    - ``retry_on``: the error classes worth another try; anything else is raised at once.
    """

    attempts: int = 8
    base: float = 0.025
    cap: float = 1.0
    deadline: float | None = 10.0
    retry_on: tuple[type[BaseException], ...] = (Throttled, Unavailable)

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise InvalidInput(f"RetryPolicy.attempts must be at least 1, got {self.attempts}")
        if self.base <= 0 or self.cap < self.base:
            raise InvalidInput(
                f"RetryPolicy needs 0 < base <= cap, got base={self.base} cap={self.cap}"
            )
        if self.deadline is not None and self.deadline <= 0:
            raise InvalidInput(f"RetryPolicy.deadline must be positive, got {self.deadline}")

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (0-based), full jitter."""
        return rng.uniform(0.0, min(self.cap, self.base * 2.0**attempt))

    def decide(self, attempt: int, elapsed: float, error: BaseException,
               rng: random.Random) -> float | None:
        """Return the wait before the next try, or None to give up and raise ``error``."""
        if not isinstance(error, self.retry_on) or attempt + 1 >= self.attempts:
            return None
        wait = self.backoff(attempt, rng)
        if self.deadline is not None and elapsed + wait >= self.deadline:
            return None
        return wait



async def call_with_retry(call: Callable[[], Awaitable[T]], policy: RetryPolicy, *,
                          clock: Clock, rng: random.Random, paced: bool = False) -> T:
    """Await ``call()`` until it succeeds or ``policy`` gives up; raise the last error.

    ``paced``: ``call`` waits for its own slot (an ``AdaptiveGate``, which slows down on
    each throttle), so a throttled try is sent again without a backoff of its own: two
    backoffs would stack. The policy still bounds the tries and the deadline.
    """
    started = clock.now()
    attempt = 0
    while True:
        try:
            return await call()
        except Exception as exc:
            wait = policy.decide(attempt, clock.now() - started, exc, rng)
            if wait is None:
                raise
            if paced and isinstance(exc, Throttled):
                wait = 0.0
        await clock.sleep(wait)
        attempt += 1


@dataclass(frozen=True, slots=True)
class HedgePolicy:
    """Send a second copy of a read that has not answered after ``delay`` seconds.

    The first answer wins and the other copy is cancelled. Reads are idempotent, so
    hedging trades a little extra read capacity for a shorter tail. ``max_hedges``
    bounds the extra copies per call.
    """

    delay: float = 0.05
    max_hedges: int = 1

    def __post_init__(self) -> None:
        if self.delay <= 0:
            raise InvalidInput(f"HedgePolicy.delay must be positive, got {self.delay}")
        if self.max_hedges < 1:
            raise InvalidInput(f"HedgePolicy.max_hedges must be at least 1, got {self.max_hedges}")


async def call_hedged(call: Callable[[], Awaitable[T]], policy: HedgePolicy | None, *,
                      clock: Clock) -> T:
    """Await ``call()``, starting up to ``policy.max_hedges`` copies after each ``delay``.

    The first copy to succeed wins; if every copy fails, the first failure is raised.
    """
    if policy is None:
        return await call()
    running: set[asyncio.Future[T]] = {asyncio.ensure_future(call())}
    launched = 1
    first_error: BaseException | None = None
    timer: asyncio.Future[None] | None = None
    try:
        while running:
            timer = None
            if launched <= policy.max_hedges:
                timer = asyncio.ensure_future(clock.sleep(policy.delay))
            waiting: set[asyncio.Future[Any]] = set(running)
            if timer is not None:
                waiting.add(timer)
            done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            for task in running & done:
                running.discard(task)
                error = task.exception()
                if error is None:
                    return task.result()
                first_error = first_error or error
            if timer is not None and timer in done and running:
                running.add(asyncio.ensure_future(call()))
                launched += 1
    finally:
        for future in (*running, timer):
            if future is not None and not future.done():
                future.cancel()
    assert first_error is not None
    raise first_error
