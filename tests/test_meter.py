"""The metered store on virtual time: windows, units, throttles, latency, bounded memory."""

from __future__ import annotations

import asyncio
import json
import math
import random
from collections.abc import Mapping
from typing import Any

import pytest

import shardex
from shardex.errors import InvalidInput, Throttled
from shardex.heat import LatencyHistogram, MeteredStore
from shardex.heat.meter import OTHER
from shardex.sim.clock import LoopClock, run_virtual
from shardex.stores.base import Placement, Position, QueryPage, Record, Store, StoredEntry
from shardex.stores.uri import StoreURI


class Scripted(Store):
    """A store whose answers the test sets: each call waits ``latency`` and costs ``units``."""

    scheme = "scripted"

    def __init__(self) -> None:
        super().__init__()
        self.latency = 0.004
        self.units = 1.0
        self.throttle: set[str] = set()
        self.clock = LoopClock()

    @classmethod
    def from_uri(cls, uri: StoreURI, **options: Any) -> Store:  # pragma: no cover
        return cls()

    async def _answer(self, key: str) -> None:
        await self.clock.sleep(self.latency)
        if key in self.throttle:
            raise Throttled(f"{key} throttled", key=key)

    async def locate(self, namespace: str, item_id: str) -> Placement | None:
        await self._answer("#placement#" + item_id)
        return None

    async def place(self, namespace: str, item_id: str, entry: StoredEntry | None, *,
                    version: int, expected: int | None) -> float:
        await self._answer(entry.shard_key if entry else "#placement#" + item_id)
        return self.units

    async def query(self, namespace: str, shard_key: str, *, after: Position | None,
                    descending: bool, limit: int) -> QueryPage:
        await self._answer(shard_key)
        return QueryPage([], None, self.units)

    async def count(self, namespace: str, shard_key: str) -> int:
        await self._answer(shard_key)
        return 0

    async def get_record(self, namespace: str, key: str) -> Record | None:
        await self._answer("#record#" + key)
        return None

    async def put_record(self, namespace: str, key: str, body: Mapping[str, Any], *,
                         expected: int | None) -> int:
        await self._answer("#record#" + key)
        return 1


def entry(key: str, item: str = "i") -> StoredEntry:
    return StoredEntry(shard_key=key, sort="", item_id=item)


async def write_at(meter: MeteredStore, when: float, key: str, times: int) -> None:
    """Issue ``times`` writes to ``key`` starting at virtual second ``when``."""
    await asyncio.sleep(max(0.0, when - asyncio.get_running_loop().time()))
    for i in range(times):
        await meter.place("ix", f"{key}-{when}-{i}", entry(key), version=1, expected=None)


def test_per_second_windows_give_peaks_and_a_timeline() -> None:
    async def main() -> shardex.heat.HeatSnapshot:
        inner = Scripted()
        inner.latency, inner.units = 0.0001, 2.0
        meter = MeteredStore(inner)
        await write_at(meter, 0.0, "PENDING#0", 300)
        await write_at(meter, 1.0, "PENDING#1", 700)
        await write_at(meter, 1.5, "PENDING#0", 100)
        await write_at(meter, 3.0, "SHIPPED", 50)
        return meter.snapshot()

    snap = run_virtual(main())
    pending = snap.values["PENDING"]
    # second 1 holds 800 writes of which each counts its own key's share of 2 units
    weight = 1 / 2  # the shard key and the placement record share a write's units
    assert pending.writes == 1100
    assert pending.write_units == pytest.approx(1100 * 2 * weight)
    assert pending.peak_write_units_per_s == pytest.approx(800 * 2 * weight)
    assert snap.shard_keys["PENDING#1"].peak_write_units_per_s == pytest.approx(700.0)
    assert snap.shard_keys["PENDING#0"].peak_write_units_per_s == pytest.approx(300.0)
    assert dict(snap.timeline["PENDING"]) == pytest.approx({0.0: 300.0, 1.0: 800.0})
    assert snap.values["SHIPPED"].peak_units_per_s == pytest.approx(50.0)
    assert snap.reserved["#placement"].write_units == pytest.approx(1150 * 2 * weight)
    assert "#placement" not in snap.values
    assert snap.totals.writes == 1150
    assert snap.totals.peak_write_units_per_s == pytest.approx(1600.0)
    hot = snap.hot(top=1)
    assert [k.value for k in hot] == ["PENDING"]
    assert hot[0].peak_to_ceiling == pytest.approx(0.8)
    assert (hot[0].hottest_shard_key, hot[0].shards) == ("PENDING#1", 2)
    assert hot[0].hottest_shard_to_ceiling == pytest.approx(0.7)


def test_a_throttle_is_counted_and_reraised_unchanged() -> None:
    async def main() -> tuple[MeteredStore, BaseException]:
        inner = Scripted()
        inner.throttle = {"HOT"}
        meter = MeteredStore(inner)
        with pytest.raises(Throttled) as caught:
            await meter.query("ix", "HOT", after=None, descending=False, limit=5)
        await meter.query("ix", "COLD", after=None, descending=False, limit=5)
        return meter, caught.value

    meter, error = run_virtual(main())
    assert str(error) == "HOT throttled"
    assert error.key == "HOT"  # type: ignore[attr-defined]
    snap = meter.snapshot()
    assert (snap.values["HOT"].read_throttles, snap.values["HOT"].read_units) == (1, 0.0)
    assert (snap.values["COLD"].read_throttles, snap.values["COLD"].read_units) == (0, 1.0)
    assert snap.totals.throttles == 1
    assert snap.totals.requests == 2


def test_latency_quantiles_come_from_the_histogram_within_a_bucket() -> None:
    rng = random.Random(11)
    samples = [rng.lognormvariate(math.log(0.004), 0.8) for _ in range(2000)]

    async def main() -> MeteredStore:
        inner = Scripted()
        meter = MeteredStore(inner)
        for latency in samples:
            inner.latency = latency
            await meter.count("ix", "K")
        return meter

    snap = run_virtual(main()).snapshot()
    ordered = sorted(samples)
    step = LatencyHistogram().ratio
    for q, got in ((0.5, snap.values["K"].latency_p50_ms), (0.99, snap.values["K"].latency_p99_ms)):
        exact = 1000 * ordered[math.ceil(q * len(ordered)) - 1]
        assert got is not None
        assert exact / math.sqrt(step) <= got <= exact * math.sqrt(step) * (1 + 1e-9), q
    assert snap.values["K"].latency_max_ms == pytest.approx(1000 * max(samples))


def test_histogram_quantiles_edges() -> None:
    hist = LatencyHistogram()
    assert hist.quantile(0.5) is None
    for seconds in (0.001, 0.001, 0.002, 10.0):
        hist.record(seconds)
    assert hist.quantile(0.0) == pytest.approx(0.001, rel=0.13)
    assert hist.quantile(1.0) == pytest.approx(10.0, rel=0.13)
    other = LatencyHistogram()
    other.record(5000.0)  # beyond the last bound
    hist.merge(other)
    assert hist.quantile(1.0) == 5000.0
    with pytest.raises(InvalidInput):
        hist.quantile(1.5)


def test_old_windows_leave_the_timeline_but_peaks_stay() -> None:
    async def main() -> MeteredStore:
        inner = Scripted()
        inner.latency = 0.0001
        meter = MeteredStore(inner, windows=3)
        await write_at(meter, 0.0, "A", 100)
        for second in range(1, 8):
            await write_at(meter, float(second), "B", 1)
        return meter

    snap = run_virtual(main()).snapshot()
    assert len(snap.windows) <= 3
    assert "A" not in snap.timeline
    assert snap.values["A"].peak_write_units_per_s == pytest.approx(50.0)


def test_distinct_keys_are_capped() -> None:
    async def main() -> MeteredStore:
        inner = Scripted()
        inner.latency = 0.0001
        meter = MeteredStore(inner, max_keys=3, windows=2)
        for i, key in enumerate(["A", "B", "C", "D", "E", "D", "D"]):
            await write_at(meter, i * 0.01, key, 1)
        await write_at(meter, 5.0, "F", 1)  # A..C are idle by now: they make room
        return meter

    snap = run_virtual(main()).snapshot()
    assert set(snap.values) == {"F"}
    assert snap.other is not None
    assert snap.other.writes == 7  # D and E overflowed, then A, B and C were folded in
    assert [c.key for c in snap.overflow][:2] == ["D", "E"]
    assert snap.overflow[0].count == pytest.approx(1.5)  # three writes of half a unit
    assert OTHER not in snap.shard_keys


def test_snapshot_exports_as_json() -> None:
    async def main() -> MeteredStore:
        meter = MeteredStore(Scripted())
        await meter.place("ix", "o-1", entry("PENDING#3", "o-1"), version=1, expected=None)
        await meter.put_record("ix", "routing", {}, expected=None)
        return meter

    meter = run_virtual(main())
    doc = json.loads(meter.snapshot().to_json())
    assert doc["values"]["PENDING"]["writes"] == 1
    assert doc["shard_keys"]["PENDING#3"]["write_units"] == pytest.approx(0.5)
    assert doc["reserved"]["#record"]["writes"] == 1
    assert doc["timeline"]["PENDING"] == [[0.0, 0.5]]
    hot = json.loads(meter.hot(ceiling="cosmos").to_json())
    assert hot["ceiling"]["name"] == "cosmos"
    assert hot["hot"][0]["value"] == "PENDING"


@pytest.mark.parametrize(("options", "match"), [
    ({"window": 0}, "window"), ({"windows": 0}, "windows"), ({"max_keys": 0}, "max_keys"),
    ({"latency_bounds": [2.0, 1.0]}, "increasing"),
])
def test_bad_options_are_refused(options: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        MeteredStore(Scripted(), **options)


# -- on a ShardedIndex over the memory store ---------------------------------------------------

def test_index_heat_matches_the_memory_stores_own_counters() -> None:
    async def main() -> tuple[shardex.ShardedIndex, Any]:
        store = shardex.open_store("memory://", seed=3)
        routing = shardex.Routing(overrides={"PENDING": shardex.ShardPolicy(shards=4)})
        index = shardex.ShardedIndex(store, "orders", routing, meter=True)
        async with index:
            for i in range(400):
                await index.put("PENDING", f"o-{i}", sort=f"{i:04d}")
            for i in range(0, 400, 4):
                await index.move(f"o-{i}", old="PENDING", new="SHIPPED")
            for i in range(0, 400, 8):
                await index.move(f"o-{i}", old="SHIPPED", new="DELIVERED")
            await index.query("PENDING", limit=50)
            await index.delete("DELIVERED", "o-0")
        return index, store.stats("orders")  # type: ignore[attr-defined]

    index, stats = run_virtual(main())
    assert isinstance(index.store, MeteredStore)
    snap = index.store.snapshot()
    for key, counted in stats.by_key.items():
        if key.startswith("#"):
            continue
        metered = snap.shard_keys[key]
        assert metered.write_units == pytest.approx(counted.write_units), key
        assert metered.read_units == pytest.approx(counted.read_units), key
        assert metered.requests == counted.requests, key
    hot = index.heat(top=2)
    assert [k.value for k in hot] == ["PENDING", "SHIPPED"]
    assert hot.get("PENDING") is not None
    assert hot[0].shards == 4


def test_heat_needs_metering() -> None:
    index = shardex.ShardedIndex("memory://", "orders")
    with pytest.raises(InvalidInput, match="not metered"):
        index.heat()
    store = shardex.open_store("memory://")
    meter = MeteredStore(store)
    assert shardex.ShardedIndex(store, "orders", meter=meter).store is meter
    with pytest.raises(InvalidInput, match="meter"):
        shardex.ShardedIndex(shardex.open_store("memory://"), "orders", meter=meter)
    assert shardex.ShardedIndex(meter, "orders").heat().keys == []
