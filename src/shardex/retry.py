"""Retry policy: a small object whose decisions are plain functions.

``RetryPolicy.decide`` says whether, and after how long, a failed call is tried
again; ``call_with_retry`` carries that out with an injected clock, so tests run on
virtual time. Backoff is exponential with full jitter: ``uniform(0, min(cap,
base * 2**attempt))``, which spreads the retries of many clients hitting one throttled
partition instead of bunching them.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from shardex.clock import Clock
from shardex.errors import InvalidInput, Throttled, Unavailable, brief

__all__ = ["RetryPolicy", "call_with_retry"]

log = logging.getLogger("shardex")

T = TypeVar("T")
_DOUBLINGS = 1024  # the first exponent at which 2.0**k overflows a float


def _seconds(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(f"RetryPolicy.{name} must be a number of seconds, got {brief(value)}")
    try:
        number = float(value)
    except OverflowError:  # an int past any float
        number = math.inf
    if not 0 < number < math.inf:
        raise InvalidInput(f"RetryPolicy.{name} must be finite seconds > 0, got {brief(value)}")
    return number


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a throttled or unavailable call is retried.

    - ``attempts``: tries in all, the first included (an int >= 1).
    - ``base``/``cap``: backoff seconds, finite, 0 < base <= cap; attempt k waits
      uniform(0, min(cap, base * 2**k)).
    - ``deadline``: seconds (finite, > 0) after the first try past which no new try
      starts (None: none).
    - ``retry_on``: a tuple of the exception classes worth another try; anything else is
      raised at once.

    Bad fields raise InvalidInput naming the field.
    """

    attempts: int = 8
    base: float = 0.025
    cap: float = 1.0
    deadline: float | None = 10.0
    retry_on: tuple[type[BaseException], ...] = (Throttled, Unavailable)

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int) \
                or self.attempts < 1:
            raise InvalidInput(f"RetryPolicy.attempts must be an integer >= 1, "
                               f"got {brief(self.attempts)}")
        base = _seconds("base", self.base)
        if _seconds("cap", self.cap) < base:
            raise InvalidInput(f"RetryPolicy.cap must be at least base ({self.base!r}), "
                               f"got {self.cap!r}")
        if self.deadline is not None:
            _seconds("deadline", self.deadline)
        if not isinstance(self.retry_on, tuple) or not all(
                isinstance(kind, type) and issubclass(kind, BaseException)
                for kind in self.retry_on):
            raise InvalidInput(f"RetryPolicy.retry_on must be a tuple of exception classes, "
                               f"got {brief(self.retry_on)}")

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (0-based), full jitter."""
        # 2.0**1024 overflows a float; by then base * 2**k is past the cap (unless base
        # is below cap / 2**1023, which no backoff is)
        growth = 2.0**attempt if attempt < _DOUBLINGS else math.inf
        return rng.uniform(0.0, min(self.cap, self.base * growth))

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
