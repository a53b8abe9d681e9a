"""The heat profile of a traffic sample: what classification and recommendation work from.

Both readers fill it: the exact one (access-log files aggregated in DuckDB) and the
streaming one (Space-Saving, for unbounded input, where counts carry an error bound).
Rates are capacity units a second, per one-second bucket of the log's timestamps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from shardex.capacity import Ceiling

__all__ = ["HeatProfile", "HotStep", "KeyHeat", "Timeline"]


@dataclass(frozen=True, slots=True)
class KeyHeat:
    """The load of one partition key over the sample.

    - ``peak_units_per_s``: its busiest second, reads and writes together;
      ``peak_read_units_per_s`` / ``peak_write_units_per_s`` the busiest for each.
    - ``sustained_units_per_s``: the mean over the seconds it was active in.
    - ``peak_to_ceiling``: over its seconds, the largest of write units over the write
      ceiling and read units over the read ceiling (> 1: over one partition's ceiling).
    - ``error``: the most its units may be overcounted (Space-Saving; 0 when exact).
    """

    key: str
    units: float
    read_units: float
    write_units: float
    reads: int
    writes: int
    throttles: int
    active_seconds: int
    peak_units_per_s: float
    peak_read_units_per_s: float
    peak_write_units_per_s: float
    sustained_units_per_s: float
    peak_to_ceiling: float
    error: float = 0.0

    @property
    def requests(self) -> int:
        return self.reads + self.writes


@dataclass(frozen=True, slots=True)
class HotStep:
    """The hottest key of one time bucket (seconds ``start`` to ``end``, inclusive)."""

    start: int
    end: int
    key: str
    share: float


@dataclass(frozen=True, slots=True)
class HeatProfile:
    """The sample's totals, its heaviest keys, and which key was hottest when.

    ``top``: the heaviest keys by units, heaviest first; ``over``: keys whose peak
    came within the asked fraction of the ceiling, busiest first (they need shards);
    ``sequence``: the hottest key of each time bucket, in time order.
    ``distinct_keys`` is a lower bound when ``distinct_exact`` is False.
    """

    rows: int
    skipped_rows: int
    total_units: float
    requests: int
    throttles: int
    distinct_keys: int
    distinct_exact: bool
    first_second: int | None
    last_second: int | None
    top: list[KeyHeat]
    over: list[KeyHeat]
    sequence: list[HotStep]
    ceiling: Ceiling
    skipped_by_column: Mapping[str, int] = field(default_factory=dict)

    @property
    def seconds(self) -> int:
        """Seconds spanned by the sample, first to last inclusive (0 when empty)."""
        if self.first_second is None or self.last_second is None:
            return 0
        return self.last_second - self.first_second + 1

    def share(self, heat: KeyHeat) -> float:
        """The key's share of all units (0 when there were none)."""
        return heat.units / self.total_units if self.total_units > 0 else 0.0


@dataclass(frozen=True, slots=True)
class Timeline:
    """Units a second of some keys over time, in bins: ``rows[i][j]`` is key i in bin j.

    Each cell is the key's busiest second within the bin.
    """

    keys: list[str]
    start: int
    bin_seconds: int
    rows: list[list[float]]
