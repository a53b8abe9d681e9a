"""``RequestCycle``, the base of ``MemoryStore``: the cycle every request goes through.

Every request waits a sampled latency on the store's clock (``_send``, ``_arrive``),
then applies atomically at that instant: injected faults are drawn (``_inject``,
``_ambiguous``), capacity is taken from the simulated table (its partitions and
table-level limit, ``shardex.sim``, by the store's capacity profile) or refused with
DynamoDB's words (``_take``, ``_throttled``), and what the request consumed is reported
on the ``Recorder`` it hands in, exactly per key and with its partition.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Mapping
from typing import Any

from shardex.capacity import QUERY_PAGE_ITEMS, THROTTLE_EXCEPTIONS
from shardex.clock import Clock
from shardex.errors import InvalidInput, Throttled, Unavailable
from shardex.sim.latency import LatencyModel
from shardex.sim.partitions import Partition, Slot
from shardex.sim.profiles import Profile
from shardex.sim.table import Refusal, Resource, admit
from shardex.stores.base import Capabilities, Store
from shardex.stores.metered import Recorder

__all__ = ["RequestCycle"]

_LIMIT_TEXT = {
    "KeyRangeThroughputExceeded": "its warm throughput, up to twice its previous peak",
    "AccountLimitExceeded": "the per-table quota",
    "MaxOnDemandThroughputExceeded": "its configured maximum throughput",
    "ProvisionedThroughputExceeded": "its provisioned capacity, with burst",
}


class RequestCycle(Store):
    """The request cycle of the simulated store under ``profile``, with the store's
    ``settings`` (``MemoryStore``'s options: latency, injected faults, seed)."""

    def __init__(self, profile: Profile, settings: Mapping[str, Any], *,
                 clock: Clock | None) -> None:
        self.profile = profile
        super().__init__(capabilities=Capabilities(consistent_reads=profile.consistent,
                                                   max_page=QUERY_PAGE_ITEMS,
                                                   late_writes=False), clock=clock)
        try:
            self._latency = LatencyModel(settings["latency_median_ms"],
                                         settings["latency_p99_ms"],
                                         settings["latency_per_kb_ms"])
        except InvalidInput as exc:
            raise InvalidInput(f"memory:// options latency_*_ms: {exc}") from exc
        self._throttle_rate = float(settings["throttle_rate"])
        self._unavailable_rate = float(settings["unavailable_rate"])
        self._ambiguous_rate = float(settings["ambiguous_rate"])
        self._faulty = bool(self._throttle_rate or self._unavailable_rate)
        self._rng = random.Random(settings["seed"])
        self._said: dict[tuple[Any, ...], tuple[str, str]] = {}  # (message, reason)
        self._cosmos = profile.store == "cosmos"

    def _send(self, rec: Recorder, nbytes: int) -> Awaitable[None]:
        """Send a request: the wait of one sampled latency, after which it applies (no
        coroutine of its own: the hot requests read the clock after it themselves)."""
        rec.request()
        return self.clock.sleep(self._latency.sample(self._rng, nbytes))

    async def _arrive(self, rec: Recorder, nbytes: int) -> float:
        """Send a request: wait one sampled latency; return the instant it applies at."""
        await self._send(rec, nbytes)
        return self.clock.now()

    def _inject(self, rec: Recorder, namespace: str, key: str, *, write: bool) -> None:
        """Raise the injected Unavailable or Throttled, each with its probability."""
        if self._unavailable_rate and self._rng.random() < self._unavailable_rate:
            raise Unavailable(f"{key}: the store did not answer (injected); not applied")
        if self._throttle_rate and self._rng.random() < self._throttle_rate:
            rec.charge(key, 0.0, None)
            raise Throttled(f"{key} throttled (injected fault)", key=key, reason="injected")

    def _ambiguous(self, key: str) -> None:
        if self._ambiguous_rate and self._rng.random() < self._ambiguous_rate:
            raise Unavailable(f"{key}: the request timed out (injected); "
                              "the write may have been applied")

    def _throttled(self, refusal: Refusal, key: str, units: float, now: float, *,
                   strong: bool = True, transaction: bool = False) -> Throttled:
        """The Throttled error of ``refusal``, in DynamoDB's words, for ``key``.

        Under the ``cosmos`` profile it carries ``retry_after`` (the service's
        ``x-ms-retry-after-ms``): when ``units`` could be taken there again.
        """
        # a hot key is refused thousands of times a second in the same words
        said = (key, refusal.partition, refusal.resource, refusal.limit, refusal.write, strong,
                transaction, refusal.resource.table.limit(refusal.write)[0]
                if refusal.partition is None else 0.0)
        words = self._said.get(said)
        if words is None:
            if len(self._said) > 4096:
                self._said.clear()
            words = self._said[said] = (self._message(refusal, key, strong, transaction),
                                        refusal.reason)
        after = refusal.retry_after(units, now, strong=strong) if self._cosmos else None
        return Throttled(words[0], key=key, reason=words[1], retry_after=after)

    def _message(self, refusal: Refusal, key: str, strong: bool, transaction: bool) -> str:
        profile, write = self.profile, refusal.write
        kind = "write" if write else "read"
        exception = ("TransactionCanceledException (ThrottlingError)" if transaction
                     else THROTTLE_EXCEPTIONS[refusal.limit])
        if refusal.partition is not None:
            ceiling = (profile.write_ceiling if write else profile.read_ceiling
                       if strong else profile.read_ceiling * profile.eventual_read_factor)
            where = f"{key} (partition {refusal.partition.name or key})"
            detail = f"over the partition's {kind} ceiling of {ceiling:g} units a second"
        else:
            units, _ = refusal.resource.table.limit(write)
            what = refusal.resource.kind
            where = f"{key} ({what})"
            detail = (f"over the {what}'s {kind} limit of {units:g} units a second "
                      f"({_LIMIT_TEXT[refusal.limit]})")
        return f"{where} throttled: {exception}: {refusal.reason}, {detail}"

    def _take(self, rec: Recorder, resource: Resource, key: str, slot: Slot, h: int,
              sort: str, units: float, now: float, *, write: bool,
              strong: bool = True) -> Partition:
        """Take ``units`` for one key from its partition and table, or raise Throttled."""
        part = resource.partitions.at(slot, h, sort, int(now))
        refusal = admit(((resource, part, units, h),), write=write, strong=strong, now=now)
        if refusal is not None:
            rec.charge(key, 0.0, part.name)
            raise self._throttled(refusal, key, units, now, strong=strong)
        rec.charge(key, units, part.name)
        return part
