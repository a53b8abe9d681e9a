"""The simulator against DynamoDB's documented behaviour: each test names its source.

Every figure checked here is the one the cited page gives (1,000 write units a second a
partition, 300 s of burst, 900 s in AWS's worked example, 4,000 write units for a new
on-demand table, ...). Where a request-level run would need hundreds of thousands of
requests, the items are made large (a 100 KB item is 100 write units) so the documented
unit rates are reached with few requests; everything runs on virtual time.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any

import pytest

from shardex.capacity import (
    DYNAMODB_PARTITION_BYTES,
    THROTTLE_EXCEPTIONS,
    entry_bytes,
    throttle_reason,
)
from shardex.errors import InvalidInput, StoreError, Throttled
from shardex.model.entries import StoredEntry
from shardex.sim import profile
from shardex.sim.clock import run_virtual
from shardex.sim.table import TableLimit
from shardex.stores.memory import MemoryStore
from tests.test_memory_store import CLOCK, NS, entry

KB = 1024


def blob_for(units: int) -> str:
    """A blob that makes an entry cost exactly ``units`` write units."""
    size = units * KB - 120
    assert math.ceil(entry_bytes(entry("K#00", "s-000000", "i-0000000", blob="x" * size))
                     / KB) == units
    return "x" * size


class Offer:
    """Writes offered at a rate, counted per second: accepted, throttled, and why."""

    def __init__(self) -> None:
        self.accepted: dict[int, int] = {}
        self.throttled: dict[int, int] = {}
        self.reasons: dict[str, int] = {}
        self.first_throttle: float | None = None

    async def run(self, store: MemoryStore, rate: float, seconds: float,
                  make: Callable[[int], tuple[str, StoredEntry]], *, start: int = 0) -> None:
        tasks = []
        t0 = CLOCK.now()
        for i in range(round(rate * seconds)):
            await CLOCK.sleep(max(0.0, t0 + i / rate - CLOCK.now()))
            tasks.append(asyncio.ensure_future(self.one(store, *make(start + i), t0)))
        await asyncio.gather(*tasks)

    async def one(self, store: MemoryStore, item: str, new: StoredEntry, t0: float) -> None:
        try:
            current = await store.locate(NS, item)
            version = current.version if current is not None else 0
            await store.place(NS, item, new, version=version + 1, expected=current)
        except Throttled as exc:
            second = int(CLOCK.now() - t0)
            self.throttled[second] = self.throttled.get(second, 0) + 1
            self.reasons[exc.reason or ""] = self.reasons.get(exc.reason or "", 0) + 1
            if self.first_throttle is None:
                self.first_throttle = CLOCK.now() - t0
        else:
            second = int(CLOCK.now() - t0)
            self.accepted[second] = self.accepted.get(second, 0) + 1


def memory(**options: Any) -> MemoryStore:
    options.setdefault("seed", 1)
    options.setdefault("latency_median_ms", 1.0)
    options.setdefault("latency_p99_ms", 1.0)
    options.setdefault("latency_per_kb_ms", 0.0)
    return MemoryStore(**options)


# -- burst ------------------------------------------------------------------------------

def test_burst_never_takes_a_partition_past_its_per_second_maximum() -> None:
    """Source: "Burst and adaptive capacity", Amazon DynamoDB Developer Guide
    (docs.aws.amazon.com/amazondynamodb/latest/developerguide/burst-adaptive-capacity.html),
    and AWS re:Post, "How does DynamoDB handle spiky workloads in short intervals"
    (repost.aws/knowledge-center/dynamodb-spiky-workloads-short-intervals): DynamoDB keeps
    up to 300 seconds of unused capacity as burst, yet "burst capacity can't alleviate
    partition-level throttling": a partition takes at most 1,000 write units a second.

    A key idle for 300 s, then offered a 10 s spike of 20,000 write units a second (20x the
    maximum) on a provisioned table with 300 s of burst saved, is accepted at 1,000 write
    units a second, every second.
    """
    units = 100  # a 100 KB item: 20,000 units a second is 200 writes
    blob = blob_for(units)

    async def main() -> Offer:
        store = memory(profile="dynamodb-provisioned", provisioned_write=1000.0,
                       transaction_cost=1.0)
        await CLOCK.sleep(300.0)  # idle: the table saves 300 s of its 1,000 units
        offer = Offer()
        await offer.run(store, 200.0, 10.0,
                        lambda i: (f"i-{i:07d}", entry("HOT", f"s-{i:06d}", f"i-{i:07d}",
                                                       blob=blob)))
        return offer

    offer = run_virtual(main())
    assert sum(offer.accepted.values()) == pytest.approx(10 * 1000 / (units + 1), abs=10)
    for second, accepted in offer.accepted.items():
        # each accepted write: the entry (100 units) and its placement (1 unit)
        assert accepted * units <= 1000, second
    assert set(offer.reasons) == {"TableWriteKeyRangeThroughputExceeded"}


@pytest.mark.parametrize("initial_burst_seconds", [0.0, 1.0, 300.0])
def test_a_provisioned_table_s_partitions_start_with_their_shares(
        initial_burst_seconds: float) -> None:
    """Without adaptive capacity each of the table's first partitions has its share of the
    provisioned units (and of their burst), and the first tokens of its share when it
    was made, as the table sharing out at each partition made left them; made in one
    pass (shared out at each partition, a table of 4,000 took 4.9 s, and `shardex plan
    --verify --partitions 100000` an hour)."""
    from dataclasses import replace

    from shardex.sim.partitions import PartitionMap

    base = replace(profile("dynamodb-provisioned"), adaptive=False, provisioned_write=1200.0,
                   provisioned_read=600.0, initial_burst_seconds=initial_burst_seconds)
    for count in (1, 3, 40):
        parts = list(PartitionMap(replace(base, partitions=count), now=2.5).partitions())
        assert len(parts) == count
        for made, part in enumerate(parts, start=1):
            for bucket, total in ((part.share_write, 1200.0), (part.share_read, 600.0)):
                assert bucket is not None
                share = total / count
                assert (bucket.rate, bucket.capacity, bucket.updated) \
                    == (share, share * base.burst_seconds, 2)
                assert bucket.tokens == min(total / made * initial_burst_seconds,
                                            share * base.burst_seconds)


@pytest.mark.parametrize(("options", "reason"), [
    ({"provisioned_read": 150.0}, "TableReadProvisionedThroughputExceeded"),
    # without adaptive capacity, a partition's share of a 600 RCU table over 4 partitions
    ({"provisioned_read": 600.0, "partitions": 4, "adaptive": False},
     "TableReadKeyRangeThroughputExceeded"),
])
def test_a_provisioned_shares_burst_lasts_as_long_as_awss_worked_example(
        options: dict[str, Any], reason: str) -> None:
    """Source: AWS re:Post, "How does DynamoDB handle spiky workloads in short intervals"
    (repost.aws/knowledge-center/dynamodb-spiky-workloads-short-intervals): a table
    provisioned at 150 RCU, unused for 5 minutes, has 45,000 read units of burst (150 x
    300); a load of 200 read units a second lasts 45,000 / (200 - 150) = 900 seconds; and
    "Burst and adaptive capacity" (burst-adaptive-capacity.html): up to 300 seconds of
    unused capacity are kept.

    Reads of 200 KB (50 read units, strongly consistent) four times a second, after 300 s
    idle, on a share of 150 RCU (the whole table, or one partition's share of a table
    without adaptive capacity): the first throttle comes at 900 s.
    """
    async def main() -> tuple[float | None, int]:
        store = memory(profile="dynamodb-provisioned", provisioned_write=1000.0,
                       initial_burst_seconds=0.0, split_delay_seconds=math.inf, **options)
        blob = "r" * (50 * 4096 - 200)
        await CLOCK.sleep(300.0)
        await store.place(NS, "big", entry("K", "a", "big", blob=blob), version=1,
                          expected=None)
        start = CLOCK.now()
        first: float | None = None
        accepted = 0
        for i in range(4 * 1000):
            await CLOCK.sleep(max(0.0, start + i / 4 - CLOCK.now()))
            try:
                page = await store.query(NS, "K", after=None, descending=False, limit=1)
            except Throttled:
                first = CLOCK.now() - start
                break
            assert page.units == 50.0
            accepted += 1
        assert store.stats(NS).throttle_reasons == {reason: 1}
        return first, accepted

    first, accepted = run_virtual(main())
    assert first == pytest.approx(900.0, abs=2.0)
    assert accepted == pytest.approx(4 * 900, abs=8)


# -- table-level limits -------------------------------------------------------------------

def _drive(limit: TableLimit, offered: float, seconds: range) -> list[float]:
    """Offer ``offered`` write units in each of ``seconds``; return what each took."""
    taken = []
    for second in seconds:
        limit.roll(second)
        room, _ = limit.room(True, float(second))
        took = min(offered, room)
        limit.take(took, True, float(second))
        taken.append(took)
    return taken


def test_a_new_on_demand_table_serves_4000_writes_then_twice_its_previous_peak() -> None:
    """Source: "Pre-warming a table for on-demand capacity mode", Amazon DynamoDB Developer
    Guide (docs.aws.amazon.com/amazondynamodb/latest/developerguide/
    pre-warming-on-demand-capacity-mode.html): "New on-demand tables will be able to
    sustain up to 4,000 writes per second and 12,000 reads per second ... throttling can
    still occur if the throughput exceeds twice the previous peak within the same 30
    minutes"; and "DynamoDB on-demand capacity mode" (on-demand-capacity-mode.html).

    Offered 10,000 write units a second from the start: 4,000 at once; the peak of 4,000
    counts after 30 minutes, and the table then serves 8,000; after another 30 minutes
    10,000, all of it.
    """
    limit = TableLimit(profile(), 0.0)
    assert limit.limit(False) == (12_000.0, "KeyRangeThroughputExceeded")
    taken = _drive(limit, 10_000.0, range(3700))
    assert set(taken[:1800]) == {4000.0}
    assert set(taken[1800:3600]) == {8000.0}
    assert taken[3600:] == [10_000.0] * 100


def test_the_on_demand_table_limit_is_the_quota_or_the_configured_maximum() -> None:
    """Source: "Quotas in Amazon DynamoDB", Amazon DynamoDB Developer Guide
    (docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html): per
    table, by default, 40,000 read request units and 40,000 write request units; and
    "DynamoDB maximum throughput for on-demand tables"
    (on-demand-capacity-mode-max-throughput.html): requests past a configured maximum
    are throttled. The ThrottlingReason names the limit (API_ThrottlingReason.html).
    """
    warm = TableLimit(profile(warm_write=60_000.0), 0.0)
    assert warm.limit(True) == (40_000.0, "AccountLimitExceeded")
    assert _drive(warm, 50_000.0, range(3)) == [40_000.0] * 3
    capped = TableLimit(profile(warm_write=60_000.0, max_write=5000.0), 0.0)
    assert capped.limit(True) == (5000.0, "MaxOnDemandThroughputExceeded")
    assert profile().quota_write == profile().quota_read == 40_000.0


def test_a_new_on_demand_table_throttles_a_spread_load_past_4000_write_units() -> None:
    """Source: "Pre-warming a table for on-demand capacity mode", Amazon DynamoDB Developer
    Guide (pre-warming-on-demand-capacity-mode.html): a new on-demand table sustains up to
    4,000 writes a second; "Understanding DynamoDB warm throughput in different
    scenarios" (warm-throughput-scenarios.html): "A new on-demand table starts with a warm
    throughput of 12,000 read units per second and 4,000 write units per second".

    6,000 write units a second over 60 keys that never collide (each its own partition):
    the table takes 4,000 a second, and names its limit; warmed to 10,000 it takes all.
    """
    units = 50
    blob = blob_for(units)

    def run(**options: Any) -> Offer:
        async def main() -> Offer:
            store = memory(partitions=0, transaction_cost=1.0, **options)
            offer = Offer()
            await offer.run(store, 6000.0 / units, 5.0, lambda i: (
                f"i-{i:07d}", entry(f"K#{i % 60:02d}", f"s-{i:06d}", f"i-{i:07d}",
                                    blob=blob)))
            return offer
        return run_virtual(main())

    cold = run()
    for second in range(5):
        assert cold.accepted[second] * (units + 1) <= 4000.0
        assert cold.accepted[second] * (units + 1) > 3800.0
    assert set(cold.reasons) == {"TableWriteKeyRangeThroughputExceeded"}
    warm = run(warm_write=10_000.0)
    assert warm.throttled == {}


# -- split for heat, adaptive capacity ----------------------------------------------------

def split_run(make: Callable[[int], tuple[str, StoredEntry]], *, delay: float = 5.0,
              seconds: float = 12.0, rate: float = 15.0,
              **options: Any) -> tuple[Offer, MemoryStore]:
    async def main() -> tuple[Offer, MemoryStore]:
        options.setdefault("partitions", 0)
        store = memory(write_ceiling=10.0, transaction_cost=1.0, split_delay_seconds=delay,
                       **options)
        offer = Offer()
        await offer.run(store, rate, seconds, make)
        return offer, store
    return run_virtual(main())


def test_a_hot_key_splits_for_heat_after_the_delay_by_sort_value() -> None:
    """Source: "Burst and adaptive capacity", Amazon DynamoDB Developer Guide
    (burst-adaptive-capacity.html, "Isolate frequently accessed items"): adaptive
    capacity rebalances partitions so hot items do not share one, and "can also break up
    an item collection into segments by sort key"; no timing is published, and in AWS's
    own single-key test ("Scaling DynamoDB: How partitions, hot keys, and split for heat
    impact performance (Part 2)", aws.amazon.com/blogs/database) the rate stayed flat
    for the first 10 minutes: the delay is configurable, 600 s by default.

    One key written at spread sort values, 1.5x its partition's ceiling: throttled for
    the first 5 s (the delay set here), then split by sort value and served whole.
    """
    assert profile().split_delay_seconds == 600.0
    offer, store = split_run(lambda i: (f"i{i}", entry("HOT", f"{(i * 7919) % 10007:05d}",
                                                       f"i{i}")))
    for second in range(5):
        assert offer.accepted[second] <= 10
    assert all(offer.throttled.get(second, 0) == 0 for second in range(7, 12))
    assert sum(offer.accepted.get(second, 0) for second in range(7, 12)) == 75
    parts = {p.name for p in store.resources[0].partitions.partitions()}
    assert {"HOT~0", "HOT~1"} <= parts


def test_a_key_whose_sort_value_only_rises_never_splits_for_heat() -> None:
    """Source: "Burst and adaptive capacity", Amazon DynamoDB Developer Guide
    (burst-adaptive-capacity.html, "Isolate frequently accessed items"): an item
    collection is broken up by sort key "as long as the item collection isn't traffic
    that is tracked by a monotonic increase or decrease of the sort key".

    The same load, written at rising sort values (a timestamp): never more than the
    partition's 10 units a second, however long it stays hot.
    """
    offer, store = split_run(lambda i: (f"i{i}", entry("HOT", f"{i:08d}", f"i{i}")))
    assert all(accepted <= 10 for accepted in offer.accepted.values())
    assert sum(offer.throttled.values()) > 50
    assert store.partition_of(NS, "HOT") == "HOT"  # its own partition, never split


def test_split_for_heat_never_goes_below_one_item() -> None:
    """Source: "Burst and adaptive capacity", Amazon DynamoDB Developer Guide
    (burst-adaptive-capacity.html): with consistently high traffic to a single item,
    adaptive capacity "might rebalance your data so that a partition contains only that
    single, frequently accessed item", which then gets at most the partition maximum.

    One item rewritten 15 times a second on a 10-unit partition: 10 a second, always.
    """
    offer, _ = split_run(lambda i: ("only", entry("HOT", "same", "only", n=i)))
    assert all(accepted <= 10 for accepted in offer.accepted.values())
    assert sum(offer.throttled.values()) > 50


def test_keys_sharing_a_partition_are_split_apart_after_the_delay() -> None:
    """Source: "Burst and adaptive capacity", Amazon DynamoDB Developer Guide
    (burst-adaptive-capacity.html, "Isolate frequently accessed items"): "adaptive
    capacity rebalances your partitions such that frequently accessed items don't reside
    on the same partition".

    Two keys on one partition of a GSI (the index's own partitions: nothing else shares
    them), 8 writes a second each against its 10: throttled until the partition has been
    hot for the delay, then split between the two and never throttled again.
    """
    def make(i: int) -> tuple[str, StoredEntry]:
        return f"i{i}", entry("A" if i % 2 else "B", f"{i:08d}", f"i{i}")

    offer, store = split_run(make, rate=16.0, profile="dynamodb-gsi", partitions=1)
    assert all(offer.throttled.get(second, 0) > 0 for second in range(5))
    assert all(offer.throttled.get(second, 0) == 0 for second in range(6, 12))
    index = store.resources[1].partitions
    assert [p.name for p in index.partitions()] == ["i0", "i0.1"]
    assert store.partition_of(NS, "A") != store.partition_of(NS, "B")


def test_adaptive_capacity_lifts_a_hot_partition_only_up_to_the_partition_maximum() -> None:
    """Source: "Burst and adaptive capacity", Amazon DynamoDB Developer Guide
    (burst-adaptive-capacity.html): adaptive capacity lets hot partitions take more,
    "provided that traffic does not exceed your table's total provisioned capacity or the
    partition maximum capacity" (1,000 write units a second).

    A provisioned table of 2,000 write units over 4 partitions (a share of 500 each), one
    key offered 1,500 write units a second: 1,000 a second with adaptive capacity, its
    share of 500 without.
    """
    units = 50
    blob = blob_for(units)

    def run(adaptive: bool) -> Offer:
        async def main() -> Offer:
            store = memory(profile="dynamodb-provisioned", provisioned_write=2000.0,
                           partitions=4, adaptive=adaptive, transaction_cost=1.0,
                           initial_burst_seconds=0.0, split_delay_seconds=math.inf)
            offer = Offer()
            await offer.run(store, 1500.0 / units, 6.0, lambda i: (
                f"i-{i:07d}", entry("HOT", f"s-{i:06d}", f"i-{i:07d}", blob=blob)))
            return offer
        return run_virtual(main())

    boosted, shared = run(True), run(False)
    for second in range(1, 6):
        assert 15 <= boosted.accepted[second] <= 1000 // units
        assert shared.accepted[second] <= 500 // units + 1
    assert sum(boosted.accepted.values()) > 1.8 * sum(shared.accepted.values())


# -- GSI mode ----------------------------------------------------------------------------

def test_gsi_mode_writes_once_and_a_throttled_index_rejects_the_base_write() -> None:
    """Source: "Understanding Global Secondary Index (GSI) write throttling and back
    pressure in DynamoDB", Amazon DynamoDB Developer Guide
    (docs.aws.amazon.com/amazondynamodb/latest/developerguide/gsi-throttling.html): "If a
    GSI doesn't have sufficient capacity to handle these updates, DynamoDB throttles
    writes to the base table"; the ThrottlingReason names the index
    (``IndexWriteKeyRangeThroughputExceeded``, API_ThrottlingReason.html). An index entry
    is written by the item's own write, not a transaction: it costs once.
    """
    async def main() -> None:
        store = memory(profile="dynamodb-gsi", write_ceiling=4.0, partitions=0)
        assert await store.place(NS, "o-1", entry("PENDING", "a", "o-1"), version=1,
                                 expected=None) == 2.0  # the item, and its index entry
        for i in range(2, 5):
            await store.place(NS, f"o-{i}", entry("PENDING", str(i), f"o-{i}"), version=1,
                              expected=None)
        with pytest.raises(Throttled) as caught:
            await store.place(NS, "o-9", entry("PENDING", "z", "o-9"), version=1,
                              expected=None)
        assert caught.value.reason == "IndexWriteKeyRangeThroughputExceeded"
        assert "ProvisionedThroughputExceededException" in str(caught.value)
        assert await store.locate(NS, "o-9") is None  # the base write did not apply
        stats = store.stats(NS)
        assert stats.throttle_reasons == {"IndexWriteKeyRangeThroughputExceeded": 1}
        assert stats.by_key["#placement#"].write_units == 4.0
        assert not store.capabilities.consistent_reads
    run_virtual(main())


# -- reads ---------------------------------------------------------------------------------

def test_a_partition_serves_eventually_consistent_reads_at_one_and_a_half_its_ceiling() -> None:
    """Source: "Scaling DynamoDB: How partitions, hot keys, and split for heat impact
    performance (Part 2: Querying)", AWS Database Blog
    (aws.amazon.com/blogs/database/part-2-scaling-dynamodb-how-partitions-hot-keys-and-
    split-for-heat-impact-performance/): one partition served 4,500 read units a second
    of eventually consistent queries, 9,000 queries, where 3,000 units would give 6,000:
    a partition's three replicas all serve them. Strongly consistent reads get 3,000.
    """
    async def main(consistent: bool) -> int:
        store = memory(consistent=consistent, partitions=0)
        # 100 units strong, 50 eventual (the entry under 400 KB with its placement record)
        blob = "e" * (100 * 4096 - 600)
        await store.place(NS, "big", entry("K", "a", "big", blob=blob), version=1,
                          expected=None)
        await CLOCK.sleep(2.0)
        served = 0

        async def read() -> None:
            nonlocal served
            try:
                await store.query(NS, "K", after=None, descending=False, limit=1)
                served += 1
            except Throttled:
                pass

        start = CLOCK.now()
        tasks = []
        for i in range(400):
            await CLOCK.sleep(max(0.0, start + i / 200 - CLOCK.now()))
            tasks.append(asyncio.ensure_future(read()))
        await asyncio.gather(*tasks)
        assert set(store.stats(NS).throttle_reasons) == {"TableReadKeyRangeThroughputExceeded"}
        return served

    assert run_virtual(main(False)) == pytest.approx(2 * 4500 / 50, abs=2)
    assert run_virtual(main(True)) == pytest.approx(2 * 3000 / 100, abs=2)
    assert profile().eventual_read_factor * profile().read_ceiling == 4500.0


# -- size ----------------------------------------------------------------------------------

def test_a_partition_splits_past_10_gb_and_an_lsi_caps_an_item_collection() -> None:
    """Source: "Scaling DynamoDB ... (Part 3: Summary and best practices)", AWS Database
    Blog: a table adds partitions when "a partition gets close to 10 GB in size"; and
    "Local secondary indexes", Amazon DynamoDB Developer Guide (LSI.html, "Item
    collection size limit"): with an LSI an item collection holds at most 10 GB
    (ItemCollectionSizeLimitExceededException). Scaled here to 20 KB a partition.
    """
    assert profile().partition_bytes == DYNAMODB_PARTITION_BYTES == 10 * 1024**3
    blob = "s" * 2000

    async def fill(store: MemoryStore, keys: int) -> None:
        for i in range(30):
            await store.place(NS, f"i{i}", entry(f"K{i % keys}", f"{i:04d}", f"i{i}",
                                                 blob=blob), version=1, expected=None)
            await CLOCK.sleep(0.5)

    async def main() -> None:
        store = memory(partitions=1, partition_bytes=20_000.0, split_delay_seconds=math.inf)
        await fill(store, 4)
        assert len(store.resources[0].partitions) >= 2
        lsi = memory(partitions=1, partition_bytes=20_000.0, lsi=True)
        with pytest.raises(StoreError, match="ItemCollectionSizeLimitExceededException"):
            await fill(lsi, 1)
    run_virtual(main())


# -- throttle reasons ------------------------------------------------------------------------

def test_throttle_reasons_are_dynamodbs_and_are_counted_by_reason() -> None:
    """Source: "ThrottlingReason", Amazon DynamoDB API Reference
    (docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_ThrottlingReason.html): a
    reason is ResourceType + OperationType + LimitType (Table|Index, Read|Write,
    ProvisionedThroughputExceeded | AccountLimitExceeded | KeyRangeThroughputExceeded |
    MaxOnDemandThroughputExceeded); and "Diagnosing throttling"
    (throttling-diagnosing-workflow.html): the exceptions are
    ProvisionedThroughputExceededException, RequestLimitExceeded and ThrottlingException
    (a transaction: TransactionCanceledException, code ThrottlingError).
    """
    assert throttle_reason("KeyRangeThroughputExceeded", write=True) == \
        "TableWriteKeyRangeThroughputExceeded"
    assert throttle_reason("AccountLimitExceeded", write=True, index=True) == \
        "IndexWriteAccountLimitExceeded"
    assert throttle_reason("ProvisionedThroughputExceeded", write=False) == \
        "TableReadProvisionedThroughputExceeded"
    assert THROTTLE_EXCEPTIONS == {
        "KeyRangeThroughputExceeded": "ProvisionedThroughputExceededException",
        "ProvisionedThroughputExceeded": "ProvisionedThroughputExceededException",
        "AccountLimitExceeded": "RequestLimitExceeded",
        "MaxOnDemandThroughputExceeded": "ThrottlingException"}
    with pytest.raises(InvalidInput, match="unknown throttle limit"):
        throttle_reason("TooHot", write=True)

    async def main() -> dict[str, int]:
        store = memory(partitions=0, max_write=3.0, transaction_cost=1.0)
        results = await asyncio.gather(*(
            store.place(NS, f"o{i}", entry(f"K{i}", "a", f"o{i}"), version=1, expected=None)
            for i in range(4)), return_exceptions=True)
        throttled = [r for r in results if isinstance(r, Throttled)]
        assert len(throttled) == 3
        assert "TransactionCanceledException (ThrottlingError): TableWriteMaxOnDemand" \
               "ThroughputExceeded" in str(throttled[0])
        with pytest.raises(Throttled, match="ThrottlingException: TableWriteMaxOnDemand"):
            await store.put_record(NS, "r", {"x": "y" * 2000}, expected=None)  # no transaction
        return store.stats(NS).throttle_reasons

    assert run_virtual(main()) == {"TableWriteMaxOnDemandThroughputExceeded": 4}


def test_cosmos_reads_and_writes_draw_on_one_budget() -> None:
    """A Cosmos DB physical partition serves 10,000 RU a second, and a container its
    provisioned RU/s, to reads and writes together: the model gave each direction a
    budget of its own, so 6,000 RU of writes and 6,000 of reads a second were all served."""
    from shardex.sim.partitions import Partition, _Ceilings

    cosmos = profile("cosmos", provisioned_write=20_000.0)
    assert cosmos.provisioned_read == 20_000.0  # one figure for both
    part = Partition(None, (0, ""), _Ceilings(cosmos), 0)
    part.take(6000.0, True, False, 0.0, 1)
    assert part.room(False, False, 0.0) == pytest.approx(4000.0)
    assert part.ceiling_room(False, True) == pytest.approx(4000.0)
    part.take(4000.0, False, False, 0.0, 1)
    assert part.room(True, True, 0.0) == pytest.approx(0.0)
    table = TableLimit(cosmos, 0.0)  # over the engine's second: its RU/s, no burst saved
    table.take(15_000.0, True, 0.0, 1.0)
    assert table.room(False, 0.0, 1.0)[0] == pytest.approx(5000.0)
    dynamodb = Partition(None, (0, ""), _Ceilings(profile("dynamodb-provisioned")), 0)
    dynamodb.take(1000.0, True, True, 0.0, 1)
    assert dynamodb.room(False, True, 0.0) == pytest.approx(3000.0)  # apart on DynamoDB
    with pytest.raises(InvalidInput, match="reads and writes draw on one budget"):
        profile("cosmos", provisioned_write=20_000.0, provisioned_read=10_000.0)
