"""Store counters: requests, units and throttles per shard key, per partition, per second."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KeyStats", "StoreStats", "is_reserved", "key_stats"]

# Counter slots: read and write requests, read and write units, read and write throttles;
# a namespace's totals add unavailable and ambiguous requests.
RREQ, WREQ, RU, WU, RT, WT, UNAVAILABLE, AMBIGUOUS = range(8)


def is_reserved(key: str) -> bool:
    """Return whether ``key`` is a store's own key (placement, record), not a shard key."""
    return key.startswith("#")



@dataclass(frozen=True, slots=True)
class KeyStats:
    """Requests, units consumed and throttles of one key, one partition, or a whole store.

    A throttled request counts as a request and a throttle, with 0 units. ``requests``
    is ``read_requests + write_requests``.
    """

    requests: int = 0
    read_units: float = 0.0
    write_units: float = 0.0
    read_throttles: int = 0
    write_throttles: int = 0
    read_requests: int = 0
    write_requests: int = 0

    @property
    def throttles(self) -> int:
        """Read and write throttles together."""
        return self.read_throttles + self.write_throttles

    def __add__(self, other: KeyStats) -> KeyStats:
        return KeyStats(self.requests + other.requests, self.read_units + other.read_units,
                        self.write_units + other.write_units,
                        self.read_throttles + other.read_throttles,
                        self.write_throttles + other.write_throttles,
                        self.read_requests + other.read_requests,
                        self.write_requests + other.write_requests)


def key_stats(counts: list[float]) -> KeyStats:
    return KeyStats(int(counts[RREQ] + counts[WREQ]), counts[RU], counts[WU],
                    int(counts[RT]), int(counts[WT]), int(counts[RREQ]), int(counts[WREQ]))


@dataclass(frozen=True, slots=True)
class StoreStats:
    """A snapshot of a MemoryStore's counters (one namespace, or all of them summed).

    - ``by_key``: shard key -> KeyStats. Reserved keys are included: all placement keys
      count together under ``"#placement#"``, records as ``"#record#<key>"``;
      ``shard_keys()`` lists the others.
    - ``by_partition``: physical partition -> KeyStats; ``"p7"`` when the store has a
      fixed number of partitions, else the key itself (as in ``by_key``).
    - ``timeline``: shard key -> second -> accepted write units in that second;
      ``throttle_timeline``: shard key -> second -> throttled writes. Seconds count
      from the first request after the store was built or its stats reset.
    - ``totals``: each request once; ``unavailable``: requests that failed with an
      injected Unavailable before applying (not in ``totals``); ``ambiguous``: writes
      applied that raised Unavailable anyway; ``elapsed``: seconds from the first
      request to the last.
    """

    by_key: dict[str, KeyStats]
    by_partition: dict[str, KeyStats]
    timeline: dict[str, dict[int, float]]
    throttle_timeline: dict[str, dict[int, float]]
    totals: KeyStats
    unavailable: int = 0
    ambiguous: int = 0
    elapsed: float = 0.0

    @staticmethod
    def reserved(key: str) -> bool:
        """Return whether ``key`` is a placement or record key rather than a shard key."""
        return is_reserved(key)

    def shard_keys(self) -> list[str]:
        """Return the keys of ``by_key`` that are not reserved, sorted."""
        return sorted(k for k in self.by_key if not is_reserved(k))
