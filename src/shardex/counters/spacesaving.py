"""Space-Saving: the heaviest keys of an unbounded stream in ``m`` counters, with error bounds.

Metwally, Agrawal and El Abbadi's algorithm, weighted. A monitored key's counter grows
by the weight; an unmonitored key takes over the smallest counter ``c_min``, starting
at ``c_min + weight`` with error ``c_min``. With ``N`` the total weight added:

- every reported key has ``count - error <= true count <= count``;
- the counts sum to ``N``, so the smallest counter, and every error, is at most ``N / m``;
- any key whose true count exceeds ``N / m`` is monitored (it cannot have been evicted).

The counters sit in an indexed min-heap, so an update costs O(log m); the heaviest keys
rest at the leaves, where an update is O(1). ``update`` folds a batch through a
``Counter`` first (still Space-Saving, on the batch's weighted stream).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice

from shardex.errors import InvalidInput

__all__ = ["Counted", "SpaceSaving"]

_BATCH = 65_536


@dataclass(frozen=True, slots=True)
class Counted:
    """One monitored key: ``count - error <= true count <= count``."""

    key: str
    count: float
    error: float

    @property
    def lower(self) -> float:
        """The guaranteed part of the count: the true count is at least this."""
        return self.count - self.error


class SpaceSaving:
    """A Space-Saving summary of weighted keys in ``counters`` (m) counters.

    ``add(key, weight)`` is O(log m); ``top(n)`` returns the heaviest keys by count.
    Weights must be finite and >= 0; raises InvalidInput otherwise, and for m < 1.
    """

    __slots__ = ("_counts", "_errors", "_keys", "_m", "_pos", "_total")

    def __init__(self, counters: int) -> None:
        if isinstance(counters, bool) or not isinstance(counters, int) or counters < 1:
            raise InvalidInput(f"Space-Saving needs at least 1 counter, got {counters!r}")
        self._m = counters
        self._keys: list[str] = []
        self._counts: list[float] = []
        self._errors: list[float] = []
        self._pos: dict[str, int] = {}
        self._total = 0.0

    @property
    def counters(self) -> int:
        """m, the number of counters."""
        return self._m

    @property
    def total(self) -> float:
        """N, the total weight added."""
        return self._total

    @property
    def threshold(self) -> float:
        """N / m: every key with a larger true count is monitored; no error exceeds it."""
        return self._total / self._m

    @property
    def full(self) -> bool:
        """Whether every counter is in use (a new key now evicts the smallest)."""
        return len(self._keys) == self._m

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._pos

    def __iter__(self) -> Iterator[Counted]:
        return iter(self.top())

    def get(self, key: str) -> Counted | None:
        """Return the counter of ``key``, or None when it is not monitored."""
        i = self._pos.get(key)
        if i is None:
            return None
        return Counted(key, self._counts[i], self._errors[i])

    def add(self, key: str, weight: float = 1.0) -> str | None:
        """Add ``weight`` to ``key``; return the key it evicted, if any."""
        if not 0.0 <= weight < math.inf:  # also refuses NaN
            raise InvalidInput(f"Space-Saving weights must be finite and >= 0, got {weight!r}")
        self._total += weight
        i = self._pos.get(key)
        if i is not None:
            self._counts[i] += weight
            self._sift_down(i)
            return None
        if len(self._keys) < self._m:
            i = len(self._keys)
            self._keys.append(key)
            self._counts.append(weight)
            self._errors.append(0.0)
            self._pos[key] = i
            self._sift_up(i)
            return None
        evicted = self._keys[0]
        del self._pos[evicted]
        floor = self._counts[0]
        self._keys[0] = key
        self._counts[0] = floor + weight
        self._errors[0] = floor
        self._pos[key] = 0
        self._sift_down(0)
        return evicted

    def scale(self, factor: float) -> None:
        """Multiply every count, error and the total by ``factor`` (0 < factor <= 1): the
        summary of a decayed stream, as forward decay ages every weight at once. The
        order of the counts, and so the heap, stays as it is."""
        if not 0.0 < factor <= 1.0:
            raise InvalidInput(f"Space-Saving scales by a factor in (0, 1], got {factor!r}")
        self._counts = [count * factor for count in self._counts]
        self._errors = [error * factor for error in self._errors]
        self._total *= factor

    def update(self, keys: Iterable[str]) -> None:
        """Add 1 for each key of ``keys``, folding batches through a Counter first."""
        it = iter(keys)
        while batch := Counter(islice(it, _BATCH)):
            for key, weight in batch.items():
                self.add(key, float(weight))

    def top(self, n: int | None = None) -> list[Counted]:
        """Return the ``n`` (default: all) monitored keys by count, heaviest first."""
        order = sorted(range(len(self._keys)),
                       key=lambda i: (-self._counts[i], self._keys[i]))
        if n is not None:
            order = order[:max(0, n)]
        return [Counted(self._keys[i], self._counts[i], self._errors[i]) for i in order]

    def guaranteed(self) -> list[Counted]:
        """Return the keys whose true count surely exceeds N / m, heaviest first."""
        threshold = self.threshold
        return [c for c in self.top() if c.lower > threshold]

    # -- the indexed min-heap on counts -----------------------------------------------
    # A sift moves the one counter that changed and shifts the others by one slot each
    # (a "hole"), rather than swapping pairs: half the writes on the hot path.

    def _sift_up(self, i: int) -> None:
        keys, counts, errors, pos = self._keys, self._counts, self._errors, self._pos
        key, count, error = keys[i], counts[i], errors[i]
        while i:
            parent = (i - 1) >> 1
            if counts[parent] <= count:
                break
            keys[i], counts[i], errors[i] = keys[parent], counts[parent], errors[parent]
            pos[keys[i]] = i
            i = parent
        keys[i], counts[i], errors[i] = key, count, error
        pos[key] = i

    def _sift_down(self, i: int) -> None:
        keys, counts, errors, pos = self._keys, self._counts, self._errors, self._pos
        size = len(counts)
        key, count, error = keys[i], counts[i], errors[i]
        while True:
            child = 2 * i + 1
            if child >= size:
                break
            if child + 1 < size and counts[child + 1] < counts[child]:
                child += 1
            if count <= counts[child]:
                break
            keys[i], counts[i], errors[i] = keys[child], counts[child], errors[child]
            pos[keys[i]] = i
            i = child
        keys[i], counts[i], errors[i] = key, count, error
        pos[key] = i
