"""The simulator's Cosmos DB profile throttles as the service does: a 429 that says when.

Cosmos DB answers a request over its partition's RU/s with 429 and ``x-ms-retry-after-ms``,
which the Cosmos store hands on as ``Throttled.retry_after`` and ``RetryPolicy`` waits at
least. ``memory://?profile=cosmos`` does the same: the hint is the soonest instant the
refused units fit again, to the millisecond: a retry then is admitted, one a little
sooner is not.
"""

from __future__ import annotations

import asyncio

import pytest

import shardex
from shardex.model.entries import StoredEntry
from shardex.stores.base import Store

# one partition's 40 RU/s taken by a few puts; latency of a nanosecond, so that the
# instants a test sleeps to are the instants its requests land at
HOT = ("memory://?profile=cosmos&write_ceiling=40&provisioned_write=40&seed=3"
       "&latency_median_ms=0.000001&latency_p99_ms=0.000002&latency_per_kb_ms=0")


async def _until_throttled(store: Store, start: int = 0) -> tuple[shardex.Throttled, int]:
    """Put items on one shard key until the store refuses one; that error, the next item."""
    for i in range(start, start + 1000):
        try:
            await store.place("ix", f"o-{i}", StoredEntry("HOT", f"{i:04d}", f"o-{i}"),
                              version=1, expected=None)
        except shardex.Throttled as throttled:
            return throttled, i
    raise AssertionError("1,000 puts on one shard key were never throttled")


@pytest.mark.shardex_virtual(store=HOT)
async def test_a_cosmos_throttle_says_when_the_units_fit_again(shardex_store: Store) -> None:
    async with shardex_store as store:
        for round_ in range(3):
            throttled, i = await _until_throttled(store, start=round_ * 1000)
            assert throttled.reason == "RequestRateTooLarge"
            after = throttled.retry_after
            assert after is not None
            assert 0.0 < after <= 1.0
            assert round(after * 1000) == pytest.approx(after * 1000)  # whole milliseconds
            # a little sooner is still refused (and a refusal takes nothing) ...
            await asyncio.sleep(max(0.0, after - 0.005))
            with pytest.raises(shardex.Throttled):
                await store.place("ix", f"o-{i}", StoredEntry("HOT", f"{i:04d}", f"o-{i}"),
                                  version=1, expected=None)
            # ... and once the hint has passed, the same put is admitted
            await asyncio.sleep(0.01)
            await store.place("ix", f"o-{i}", StoredEntry("HOT", f"{i:04d}", f"o-{i}"),
                              version=1, expected=None)


@pytest.mark.shardex_virtual(store=HOT.replace("cosmos", "dynamodb-provisioned"))
async def test_other_profiles_give_no_hint(shardex_store: Store) -> None:
    async with shardex_store as store:
        throttled, _ = await _until_throttled(store)
        assert throttled.retry_after is None


@pytest.mark.shardex_virtual(store=HOT)
async def test_an_index_on_the_cosmos_profile_waits_out_the_hint(shardex_store: Store) -> None:
    policy = shardex.RetryPolicy(attempts=3, base=0.001, cap=0.002, deadline=None)
    async with shardex.ShardedIndex(shardex_store, "ix", retry=policy) as index:
        # a few puts fill the partition's second; with backoff of milliseconds, three
        # attempts get a put through only by waiting the hint
        for i in range(12):
            await index.put("HOT", f"o-{i}")
        assert await index.count("HOT") == 12
        assert shardex_store.stats("ix").totals.write_throttles > 0

