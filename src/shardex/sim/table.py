"""Table-level limits, and a resource (a table or its GSI) that admits or throttles requests.

Pure bookkeeping on the caller's clock, shared by both engines (see
``shardex.sim.partitions``). A table or GSI takes, in any one second:

- **on-demand**: at most ``min(quota, max, max(warm, peak_multiple x previous peak))``
  units, where the previous peak is the most it took in one second up to
  ``peak_window_seconds`` ago: a new table serves its warm throughput (4,000 write and
  12,000 read units) at once, and twice any peak it reached at least 30 minutes before.
  Past the quota DynamoDB reports ``AccountLimitExceeded``, past the configured maximum
  ``MaxOnDemandThroughputExceeded``; past the table's own peak its partitions throttle
  (``KeyRangeThroughputExceeded``).
- **provisioned**: what its token bucket holds: it refills at the provisioned rate and
  keeps up to ``burst_seconds`` (300) of unused capacity (``ProvisionedThroughputExceeded``).

``admit`` checks a request against every partition it touches and the
table-level limit, all or nothing: a refused request takes nothing, and its units
count as demand (heat) on the partitions it touched.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from shardex.capacity import throttle_reason
from shardex.sim.buckets import TokenBucket
from shardex.sim.partitions import EPSILON, Partition, PartitionMap
from shardex.sim.profiles import Profile

__all__ = ["Refusal", "Resource", "TableLimit", "admit", "check", "refuse", "take"]

KEY_RANGE = "KeyRangeThroughputExceeded"


class TableLimit:
    """What one table (or GSI) takes in a second, and which limit binds.

    ``written``/``read`` are the units taken in the current ``second``.
    """

    def __init__(self, profile: Profile, now: float = 0.0) -> None:
        self.profile = profile
        self.provisioned = profile.capacity == "provisioned"
        self.second = int(now)
        self.written = self.read = 0.0
        self.refused_write = self.refused_read = 0.0
        # (second, units) each time a second set a new peak, for the on-demand rule
        self._peaks: dict[bool, list[tuple[int, float]]] = {True: [], False: []}
        self._seen = {True: 0, False: 0}
        self._limits: dict[bool, tuple[float, str]] = {}  # this second's, once worked out
        self.buckets: dict[bool, TokenBucket] = {}
        if self.provisioned:
            for write, rate in ((True, profile.provisioned_write),
                                (False, profile.provisioned_read)):
                self.buckets[write] = TokenBucket(rate, rate * profile.burst_seconds,
                                                  rate * profile.initial_burst_seconds, now)
            if profile.shared_units:  # one capacity for reads and writes (Cosmos DB's RU/s)
                self.buckets[False] = self.buckets[True]

    def roll(self, second: int) -> None:
        """Close the seconds before ``second``: a busier second than any is a new peak."""
        if second <= self.second:
            return
        for write, taken in ((True, self.written), (False, self.read)):
            peaks = self._peaks[write]
            if taken > (peaks[-1][1] if peaks else 0.0):
                peaks.append((self.second, taken))
        self.second = second
        self.written = self.read = 0.0
        self.refused_write = self.refused_read = 0.0
        self._limits.clear()

    def previous_peak(self, write: bool) -> float:
        """The most taken in one second up to ``peak_window_seconds`` before this one."""
        peaks = self._peaks[write]
        cutoff = self.second - self.profile.peak_window_seconds
        seen = self._seen[write]
        while seen + 1 < len(peaks) and peaks[seen + 1][0] <= cutoff:
            seen += 1
        self._seen[write] = seen
        return peaks[seen][1] if peaks and peaks[seen][0] <= cutoff else 0.0

    def limit(self, write: bool) -> tuple[float, str]:
        """(units a second, the limit type that sets it) in the current second."""
        found = self._limits.get(write)
        if found is None:
            found = self._limits[write] = self._limit(write)
        return found

    def _limit(self, write: bool) -> tuple[float, str]:
        profile = self.profile
        if self.provisioned:
            rate = profile.provisioned_write if write else profile.provisioned_read
            return rate, "ProvisionedThroughputExceeded"
        warm, quota, most = ((profile.warm_write, profile.quota_write, profile.max_write)
                             if write else
                             (profile.warm_read, profile.quota_read, profile.max_read))
        served = max(warm, profile.peak_multiple * self.previous_peak(write))
        # on a tie the configured limits name it: a table warmed to its quota is held there
        return min((most, "MaxOnDemandThroughputExceeded"), (quota, "AccountLimitExceeded"),
                   (served, KEY_RANGE), key=lambda c: c[0])

    def room(self, write: bool, now: float, span: float = 0.0) -> tuple[float, str]:
        """(units the table may still take this second, the limit that would refuse more).

        ``span``: the seconds from ``now`` the units are spread over (the rate engine's
        second), during which a provisioned table's bucket refills.
        """
        if self.provisioned:
            return self.buckets[write].room(now, span), "ProvisionedThroughputExceeded"
        units, kind = self.limit(write)
        if self.profile.shared_units:
            return units - self.written - self.read, kind
        return units - (self.written if write else self.read), kind

    def take(self, units: float, write: bool, now: float, span: float = 0.0) -> None:
        """Take ``units`` (the caller checked ``room``)."""
        if write:
            self.written += units
        else:
            self.read += units
        if self.provisioned:
            self.buckets[write].consume(units, now, span)

    def refuse(self, units: float, write: bool) -> None:
        """Count ``units`` asked of the table and refused."""
        if write:
            self.refused_write += units
        else:
            self.refused_read += units


class Refusal(NamedTuple):
    """Why a request was throttled: where (a partition, or the whole table) and which limit."""

    resource: Resource
    partition: Partition | None
    limit: str
    write: bool

    @property
    def reason(self) -> str:
        """DynamoDB's ThrottlingReason: ``TableWriteKeyRangeThroughputExceeded``, ..."""
        return self.resource.reason(self.limit, write=self.write)

    def retry_after(self, units: float, now: float, *, strong: bool = True) -> float:
        """Seconds from ``now`` until ``units`` could be taken where they were refused.

        As Cosmos DB's ``x-ms-retry-after-ms`` says it, in whole milliseconds rounded up:
        the next second where a per-second ceiling refused them (it starts afresh then),
        the refill of a token bucket (a provisioned table's, a partition's share of it)
        where the bucket lacks them, the later of the two where both do. Pure arithmetic
        on the state at ``now``; nothing is taken.
        """
        next_second = math.floor(now) + 1.0 - now
        wait = 0.0
        part, write = self.partition, self.write
        if part is not None:
            if part.ceiling_room(write, strong) + EPSILON < units:
                wait = next_second
            bucket = part.share_write if write else part.share_read
        else:
            table = self.resource.table
            bucket = table.buckets.get(write) if table.provisioned else None
            if bucket is None and table.room(write, now)[0] + EPSILON < units:
                wait = next_second
        if bucket is not None and bucket.rate > 0:
            short = units - bucket.available(now)
            if short > EPSILON:
                wait = max(wait, short / bucket.rate)
        if wait <= 0.0:  # refused for units of several keys together: a second starts afresh
            wait = next_second
        return math.ceil(wait * 1000.0 - 1e-6) / 1000.0


class Resource:
    """One table or one GSI: its partitions and its table-level limit."""

    def __init__(self, profile: Profile, *, index: bool = False, now: float = 0.0) -> None:
        self.profile = profile
        self.index = index
        self.partitions = PartitionMap(profile, prefix="i" if index else "p", now=now)
        self.table = TableLimit(profile, now)

    @property
    def kind(self) -> str:
        return "index" if self.index else "table"

    def reason(self, limit: str, *, write: bool) -> str:
        """The throttle reason the store gives: DynamoDB's ThrottlingReason for ``limit``
        on this table or GSI, Cosmos DB's ``RequestRateTooLarge`` (a 429), Azure Table
        Storage's ``ServerBusy`` (a 503)."""
        store = self.profile.store
        if store == "cosmos":
            return "RequestRateTooLarge"
        if store == "azure-tables":
            return "ServerBusy"
        return throttle_reason(limit, write=write, index=self.index)


def check(parts: Sequence[tuple[Resource, Partition, float, int]], *, write: bool,
          strong: bool, now: float) -> Refusal | None:
    """Return why the request of ``parts`` would be throttled now, or None if it fits.

    ``parts``: ``(resource, partition, units, key h64)`` for each key the request touches
    (partitions rolled to the current second, as ``PartitionMap.at`` returns them).
    Keys on one partition must fit it together, and the units on one resource must fit
    its table-level limit. Nothing is taken.
    """
    second = int(now)
    if len(parts) == 1:
        resource, part, units, _ = parts[0]
        if part.room(write, strong, now) + EPSILON < units:
            return Refusal(resource, part, KEY_RANGE, write)
        resource.table.roll(second)
        room, kind = resource.table.room(write, now)
        return Refusal(resource, None, kind, write) if room + EPSILON < units else None
    if len(parts) == 2 and parts[0][1] is not parts[1][1]:
        # a place's usual two keys (its placement and its entry), on two partitions: the
        # loops below, without their sums
        (first, one, units_one, _), (second_res, two, units_two, _) = parts
        if one.room(write, strong, now) + EPSILON < units_one:
            return Refusal(first, one, KEY_RANGE, write)
        if two.room(write, strong, now) + EPSILON < units_two:
            return Refusal(second_res, two, KEY_RANGE, write)
        pairs = ((first, units_one + units_two),) if first is second_res \
            else ((first, units_one), (second_res, units_two))
        for resource, units in pairs:
            resource.table.roll(second)
            room, kind = resource.table.room(write, now)
            if room + EPSILON < units:
                return Refusal(resource, None, kind, write)
        return None
    needs: dict[Partition, float] = {}
    totals: dict[Resource, float] = {}
    for resource, part, units, _ in parts:
        needs[part] = needs.get(part, 0.0) + units
        totals[resource] = totals.get(resource, 0.0) + units
    for resource, part, _, _ in parts:
        if part.room(write, strong, now) + EPSILON < needs[part]:
            return Refusal(resource, part, KEY_RANGE, write)
    for resource, units in totals.items():
        resource.table.roll(second)
        room, kind = resource.table.room(write, now)
        if room + EPSILON < units:
            return Refusal(resource, None, kind, write)
    return None


def take(parts: Sequence[tuple[Resource, Partition, float, int]], *, write: bool,
         strong: bool, now: float) -> None:
    """Take the units of ``parts`` (``check`` said they fit)."""
    for resource, part, units, key in parts:
        part.take(units, write, strong, now, key)
        resource.table.take(units, write, now)


def refuse(parts: Sequence[tuple[Resource, Partition, float, int]], *, write: bool) -> None:
    """Count the units of a refused request as demand on its partitions and tables."""
    for resource, part, units, key in parts:
        part.refuse(units, write, key)
        resource.table.refuse(units, write)


def admit(parts: Sequence[tuple[Resource, Partition, float, int]], *, write: bool,
          strong: bool, now: float) -> Refusal | None:
    """Take a request's units from every partition and table it touches, or refuse it.

    All or nothing (see ``check``): a refused request takes nothing, and its units count
    as demand on its partitions and tables.
    """
    refusal = check(parts, write=write, strong=strong, now=now)
    if refusal is None:
        take(parts, write=write, strong=strong, now=now)
    else:
        refuse(parts, write=write)
    return refusal
