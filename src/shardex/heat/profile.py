"""The heat profile of a traffic sample: what classification and recommendation work from.

Both readers fill it: the exact one (files aggregated in DuckDB) and the streaming
one (Space-Saving, for unbounded input, where counts carry an error bound). Keys are
logical keys: the shard keys of a sharded value (``PENDING#0`` ... ``PENDING#3``) are
rolled up under it (``PENDING``), each kept as a part. Rates are capacity units a
second, per bucket of ``resolution`` seconds of the timestamps (1 for request logs;
a Contributor Insights report's period).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from shardex.capacity import Ceiling
from shardex.wording import counted

__all__ = ["HeatProfile", "HotStep", "KeyHeat", "Timeline", "reserved_note"]


@dataclass(frozen=True, slots=True)
class KeyHeat:
    """The load of one logical key (or, as a part, of one shard key) over the sample.

    - ``peak_units_per_s``: its busiest second, reads and writes together;
      ``peak_read_units_per_s`` / ``peak_write_units_per_s`` the busiest for each.
    - ``sustained_units_per_s``: the mean over the seconds it was active in.
    - ``peak_to_ceiling``: over its seconds, the largest of write units over the write
      ceiling and read units over the read ceiling (> 1: over one partition's ceiling);
      their sum over it where reads and writes draw on one budget (``Ceiling.ratio``).
    - ``error``: the most its units may be overcounted (Space-Saving; 0 when exact).

    Rolled up over its shard keys: the peaks are of the logical key's total (all its
    shards in one second); ``peak_to_ceiling`` and ``hottest_*`` are of its busiest
    partition key (each shard key is its own partition); ``shards`` is the N its
    shard keys show (1 when unsuffixed; else the highest shard number + 1, at least
    2), ``partitions`` the partition keys seen; ``peak_accepted_units_per_s`` counts
    only requests that were not throttled; ``parts`` holds each shard key's own heat
    when asked for (``--per-shard``).
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
    shards: int = 1
    partitions: int = 1
    hottest_read_units_per_s: float = 0.0
    hottest_write_units_per_s: float = 0.0
    peak_accepted_units_per_s: float = 0.0
    parts: tuple[KeyHeat, ...] = ()

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
    ``distinct_keys`` (logical keys) is a lower bound when ``distinct_exact`` is False.
    ``time_kinds`` names the kinds of timestamps read (``epoch milliseconds``, ...),
    ``sources`` the formats, ``notes`` what a source cannot see or had to assume.
    ``keys_to_cover`` is how many keys, heaviest first, carry ``cover`` of the units,
    counted over every key (not ``top`` alone; None: not counted, or no units), and
    ``unattributed_reads`` the read requests a source could not give a key.
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
    resolution: int = 1
    time_kinds: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    unattributed_reads: int = 0
    cover: float = 0.8
    keys_to_cover: int | None = None

    @property
    def seconds(self) -> int:
        """Seconds spanned by the sample, first to last inclusive (0 when empty)."""
        if self.first_second is None or self.last_second is None:
            return 0
        return self.last_second - self.first_second + 1

    @property
    def reads_told_apart(self) -> bool:
        """Whether the sample tells reads from writes. A Contributor Insights report does
        not: its rules count the capacity consumed (or the throttles) of both together, so
        a key's reads cannot be known from it, and 0 reads does not mean never read."""
        return "insights" not in self.sources

    @property
    def reads_ruled_out(self) -> bool:
        """Whether 0 reads of a key means that it was never read: the sample tells reads
        apart and gave every read request its key (CloudTrail cannot give a Query's or
        a Scan's, ``unattributed_reads``)."""
        return self.reads_told_apart and not self.unattributed_reads

    def share(self, heat: KeyHeat) -> float:
        """The key's share of all units (0 when there were none)."""
        return heat.units / self.total_units if self.total_units > 0 else 0.0

    def sure_share(self, heat: KeyHeat) -> float:
        """The share the key surely took: its units less their error bound (the same as
        ``share`` when counted exactly). Space-Saving's counts sum to every unit, so its
        m counters' upper bounds read as m keys taking all of a uniform load."""
        return (heat.units - heat.error) / self.total_units if self.total_units > 0 else 0.0


@dataclass(frozen=True, slots=True)
class Timeline:
    """Units a second of some keys over time, in bins: ``rows[i][j]`` is key i in bin j.

    Each cell is the key's busiest second (or resolution bucket) within the bin.
    """

    keys: list[str]
    start: int
    bin_seconds: int
    rows: list[list[float]]


# shares are sums of floats: a share exactly at a threshold must not miss it by 1e-16
COVER_SLACK = 1e-9


def keys_to_cover(units: Sequence[float], cover: float,
                  total: float | None = None) -> int | None:
    """How many of ``units`` (every key's, heaviest first) carry ``cover`` of their sum,
    or of ``total`` when they are only some keys' (None when there are none, or when
    those of ``units`` do not carry it)."""
    whole = sum(units) if total is None else total
    if whole <= 0:
        return None
    running = 0.0
    for i, amount in enumerate(units):
        running += amount
        if running >= (cover - COVER_SLACK) * whole:
            return i + 1
    return len(units) if total is None else None


def reserved_note(requests: int, units: float, keys: int) -> str:
    """What a profile says of shardex's own records, which it leaves out of its keys."""
    return (f"shardex's own records (#placement#..., #record#...): "
            f"{counted(requests, 'request')}, {counted(units, 'unit', shown=f'{units:,.0f}')}"
            f" over {counted(keys, 'partition key')}, left out of the key ranking "
            "(one partition key an item, never a hot value)")
