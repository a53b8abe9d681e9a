"""Reshard progress as gauges: the hook a reshard runner reports to as it goes.

``MetricsRecorder.reshard(index)`` returns the ``ReshardProgress`` of one index; a
runner calls ``update`` at each step (any field it knows, the others stay) and the
exporters show:

- ``shardex_reshard_state{index, state}``: 1 for the state the reshard is in (``stable``,
  ``read-both``, ``write-new``, ``verified``, ``read-new``, ``retired``, or
  ``rolled-back``: the states of DESIGN.md's layout change);
- ``shardex_reshard_entries_moved`` / ``shardex_reshard_entries_total`` and
  ``shardex_reshard_progress`` (their ratio, 0 to 1; 1 when there is nothing to move);
- ``shardex_reshard_parity_mismatches``: entries the last parity check found apart;
- ``shardex_reshard_version{index, side}``: the routing versions it goes from and to.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from shardex.errors import InvalidInput
from shardex.routing import STATES

if TYPE_CHECKING:
    from shardex.metrics.recorder import Family

__all__ = ["GAUGE_STATES", "ReshardProgress"]

# the states the gauge shows: a routing's, and where a rolled-back reshard ended
GAUGE_STATES: tuple[str, ...] = (*STATES, "rolled-back")


def _count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput(f"reshard progress: {name} must be an integer >= 0, got {value!r}")
    return value


class ReshardProgress:
    """The progress of one index's reshard (see module); safe to update from any thread."""

    def __init__(self, index: str, lock: threading.Lock) -> None:
        self.index = index
        self._lock = lock
        self.state = "stable"
        self.moved = 0
        self.total = 0
        self.mismatches = 0
        self.from_version: int | None = None
        self.to_version: int | None = None

    def update(self, *, state: str | None = None, moved: int | None = None,
               total: int | None = None, mismatches: int | None = None,
               from_version: int | None = None, to_version: int | None = None) -> None:
        """Report what is known now; fields left out keep their value.

        Raises InvalidInput for a state not in ``GAUGE_STATES``, or a count that is not
        an integer >= 0.
        """
        if state is not None and state not in GAUGE_STATES:
            # it went out as shardex_reshard_state{state="bogus"}
            raise InvalidInput(f"reshard progress: state must be one of "
                               f"{', '.join(GAUGE_STATES)}, got {state!r}")
        counts = {name: _count(name, value) for name, value in (
            ("moved", moved), ("total", total), ("mismatches", mismatches),
            ("from_version", from_version), ("to_version", to_version)) if value is not None}
        with self._lock:
            if state is not None:
                self.state = state
            for name, value in counts.items():
                setattr(self, name, value)

    @property
    def ratio(self) -> float:
        """Entries moved over entries to move (1.0 when there are none)."""
        return min(1.0, self.moved / self.total) if self.total else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "state": self.state, "moved": self.moved,
                "total": self.total, "progress": self.ratio, "mismatches": self.mismatches,
                "from_version": self.from_version, "to_version": self.to_version}

    @staticmethod
    def families(progress: Sequence[tuple[str, ReshardProgress]]) -> Iterator[Family]:
        """The gauges of every index's reshard (the caller holds the lock)."""
        from shardex.metrics.recorder import Family, Sample

        def gauge(name: str, text: str, samples: Iterator[Sample]) -> Family:
            return Family(name, "gauge", text, tuple(samples))

        yield gauge("shardex_reshard_state", "1 for the state the index's reshard is in.",
                    (Sample({"index": n, "state": p.state}, 1.0) for n, p in progress))
        yield gauge("shardex_reshard_entries_moved", "Entries the reshard has moved.",
                    (Sample({"index": n}, float(p.moved)) for n, p in progress))
        yield gauge("shardex_reshard_entries_total", "Entries the reshard has to move.",
                    (Sample({"index": n}, float(p.total)) for n, p in progress))
        yield gauge("shardex_reshard_progress", "Entries moved over entries to move.",
                    (Sample({"index": n}, p.ratio) for n, p in progress))
        yield gauge("shardex_reshard_parity_mismatches",
                    "Entries the last parity check found apart.",
                    (Sample({"index": n}, float(p.mismatches)) for n, p in progress))
        yield gauge("shardex_reshard_version", "The routing versions the reshard goes between.",
                    (Sample({"index": n, "side": side}, float(version))
                     for n, p in progress
                     for side, version in (("from", p.from_version), ("to", p.to_version))
                     if version is not None))
