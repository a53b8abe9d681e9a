"""What a reshard's runner reports as it goes (``Progress``, to its gauges) and where its
``run`` stopped (``RunResult``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from shardex.routing import Routing
from shardex.transition import Parity

__all__ = ["Gauges", "Progress", "Recorder", "RunResult"]


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a reshard is: state, entries moved and remaining of the total fixed at its
    start (from the work records), rate and what is awaited."""

    state: str
    direction: str
    moved: int
    remaining: int | None
    rate: float | None  # entries a second over the last report
    note: str = ""
    total: int | None = None  # fixed when the direction's first plan was made

    @property
    def eta(self) -> float | None:
        """Seconds until the remaining entries are moved at the current rate."""
        if self.remaining is None or not self.rate:
            return None
        return self.remaining / self.rate


@dataclass(slots=True)
class RunResult:
    """Where ``run`` stopped and why, what its sweeps and parity checks found, and
    (``ended``) the reshard it brought to its end, if it did."""

    state: str
    why: str
    routing: Routing
    parity: Parity | None = None
    swept: int = 0
    # rows a rolled-back move between tiers left on the tier it left, which its sweep
    # removed (moved back already: no entry of them was missing from the layout in use)
    cleared: int = 0
    ghosts: list[tuple[str, str]] = field(default_factory=list)
    swept_keys: tuple[int, int] = (0, 0)  # the retired keys this run swept, of how many
    ended: str | None = None  # the id of a reshard that ended in this run


class Gauges(Protocol):
    """Where a runner reports a reshard's progress (``shardex.metrics.ReshardProgress``)."""

    def update(self, *, state: str | None = None, moved: int | None = None,
               total: int | None = None, mismatches: int | None = None,
               from_version: int | None = None, to_version: int | None = None) -> None: ...


class Recorder(Protocol):
    """What hands out an index's gauges (``shardex.metrics.MetricsRecorder``)."""

    def reshard(self, index: str) -> Gauges: ...
