"""Retry policy: a small object whose decisions are plain functions.

``RetryPolicy.decide`` says whether, and after how long, a failed call is tried
again; ``call_with_retry`` carries that out with an injected clock, so tests run on
virtual time. Backoff is exponential with full jitter: ``uniform(0, min(cap,
base * 2**attempt))``, which spreads the retries of many clients hitting one throttled
partition instead of bunching them.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from shardex.clock import Clock
from shardex.errors import InvalidInput, Throttled, Unavailable

__all__ = ["RetryPolicy", "call_with_retry"]

log = logging.getLogger("shardex")

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
        """Return the wait before the next try, or None to give up and raise ``error``.

        A throttle that names its own wait (``Throttled.retry_after``) waits at least that.
        """
        if not isinstance(error, self.retry_on) or attempt + 1 >= self.attempts:
            return None
        wait = self.backoff(attempt, rng)
        if isinstance(error, Throttled) and error.retry_after is not None:
            wait = max(wait, error.retry_after)
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
            log.debug("try %d failed (%s); retrying in %.3f s", attempt + 1, exc, wait)
        await clock.sleep(wait)
        attempt += 1
