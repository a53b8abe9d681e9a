"""The latency model of a store request: lognormal, plus a transfer time per KB.

Pure: sampling takes the caller's ``random.Random``, so a seeded run is reproducible.
All results are in seconds; parameters are in milliseconds, as latencies are quoted.
"""

from __future__ import annotations

import heapq
import math
import random
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from statistics import NormalDist

from shardex.errors import InvalidInput, brief

__all__ = ["LatencyModel"]

_Z99 = NormalDist().inv_cdf(0.99)  # 2.3263...
_STANDARD = NormalDist()
_BELOW_ONE = math.nextafter(1.0, 0.0)
# fan-outs a pooled quantile draws (fewer for the widest: at most _POOLED_SAMPLES requests)
_POOLED_DRAWS, _POOLED_SAMPLES = 400, 400_000


def _number(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not -sys.float_info.max <= value <= sys.float_info.max:  # NaN and inf fail too
        raise InvalidInput(f"{name} must be a finite number of milliseconds, "
                           f"got {brief(value)}")
    return float(value)


def _probability(q: float) -> float:
    if isinstance(q, bool) or not isinstance(q, int | float) or not 0.0 < q < 1.0:
        raise InvalidInput(f"quantile q must be a number strictly between 0 and 1, got {q!r}")
    return float(q)


@dataclass(frozen=True, slots=True)
class LatencyModel:
    """Request latency: lognormal with the given median and 99th percentile, plus transfer.

    ``sigma = ln(p99 / median) / 2.3263`` (the 0.99 quantile of the standard normal),
    so ``quantile(0.5)`` is the median and ``quantile(0.99)`` the p99 exactly. A
    request moving ``nbytes`` adds ``per_kb_ms * nbytes / 1024``. Raises InvalidInput
    unless ``median_ms > 0``, ``p99_ms >= median_ms`` and ``per_kb_ms >= 0``.
    """

    median_ms: float = 4.0
    p99_ms: float = 25.0
    per_kb_ms: float = 0.01
    _mu: float = field(init=False, repr=False, compare=False)
    _sigma: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        median = _number("latency median_ms", self.median_ms)
        p99 = _number("latency p99_ms", self.p99_ms)
        per_kb = _number("latency per_kb_ms", self.per_kb_ms)
        if median <= 0:
            raise InvalidInput(f"latency median_ms must be > 0, got {self.median_ms!r}")
        if p99 < median:
            raise InvalidInput(
                f"latency p99_ms ({self.p99_ms!r}) must be >= median_ms ({self.median_ms!r})"
            )
        if per_kb < 0:
            raise InvalidInput(f"latency per_kb_ms must be >= 0, got {self.per_kb_ms!r}")
        object.__setattr__(self, "_mu", math.log(median / 1000.0))
        object.__setattr__(self, "_sigma", math.log(p99 / median) / _Z99)

    @property
    def sigma(self) -> float:
        """The standard deviation of the latency's logarithm."""
        return self._sigma

    def transfer(self, nbytes: int) -> float:
        """Return the seconds spent moving ``nbytes`` bytes."""
        return self.per_kb_ms * nbytes / 1_024_000.0

    def sample(self, rng: random.Random, nbytes: int = 0) -> float:
        """Draw one request's latency in seconds, moving ``nbytes`` bytes."""
        latency = math.exp(rng.gauss(self._mu, self._sigma))
        if nbytes:
            latency += self.per_kb_ms * nbytes / 1_024_000.0
        return latency

    def quantile(self, q: float, nbytes: int = 0) -> float:
        """Return the ``q``-quantile (0 < q < 1) of the latency in seconds."""
        z = _STANDARD.inv_cdf(_probability(q))
        return math.exp(self._mu + self._sigma * z) + self.transfer(nbytes)

    def fanout_quantile(self, n: int, q: float, nbytes: int = 0) -> float:
        """Return the ``q``-quantile of the slowest of ``n`` independent requests, in seconds.

        The maximum of ``n`` samples stays below ``t`` with probability ``F(t) ** n``,
        so this is ``quantile(q ** (1 / n))``: the latency a fan-out over ``n`` shards
        waits for. Non-decreasing in ``n``; raises InvalidInput unless ``n >= 1``.
        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InvalidInput(f"fan-out width n must be an integer >= 1, got {n!r}")
        # For very wide fan-outs q ** (1/n) rounds to 1.0, where the quantile is infinite.
        return self.quantile(min(_probability(q) ** (1.0 / n), _BELOW_ONE), nbytes)

    def pooled_quantile(self, n: int, pool: int, q: float) -> float:
        """Return the ``q``-quantile, in seconds, of a fan-out of ``n`` requests sent
        through a client that carries ``pool`` at once: each connection sends the next
        request as its answer lands (``fanout_quantile`` when ``n <= pool``).

        No closed form: the quantile of fan-outs drawn on a fixed seed (400, fewer
        above 1,000 requests), the same figure every call. Raises InvalidInput unless
        ``n`` and ``pool`` are integers >= 1.
        """
        for name, count in (("fan-out width n", n), ("pool", pool)):
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise InvalidInput(f"{name} must be an integer >= 1, got {count!r}")
        if n <= pool:
            return self.fanout_quantile(n, q)
        draws = _pooled_draws(self, n, pool)
        at = _probability(q) * (len(draws) - 1)
        low = int(at)
        high = min(low + 1, len(draws) - 1)
        # never below every request at once (the same draws through a pool only wait
        # longer), which the draws' own noise in the tail could put it under
        return max(draws[low] + (draws[high] - draws[low]) * (at - low),
                   self.fanout_quantile(n, q))


@lru_cache(maxsize=64)
def _pooled_draws(model: LatencyModel, n: int, pool: int) -> list[float]:
    """The sorted times of fan-outs of ``n`` requests through ``pool`` connections."""
    rng = random.Random(f"pooled {n} {pool}")
    mu, sigma, gauss, exp = model._mu, model.sigma, rng.gauss, math.exp
    out = []
    for _ in range(max(50, min(_POOLED_DRAWS, _POOLED_SAMPLES // n))):
        free = [0.0] * pool  # when each connection is next free
        for _ in range(n):
            heapq.heapreplace(free, free[0] + exp(gauss(mu, sigma)))
        out.append(max(free))
    out.sort()
    return out
