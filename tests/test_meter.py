"""The one metering path on virtual time: events, the heat meter's windows, units,
throttles, latency and bounded memory, and store.stats() reading the same events."""

from __future__ import annotations

import asyncio
import json
import math
import random
from collections.abc import Mapping
from typing import Any

import pytest

import shardex
from shardex.errors import ConditionFailed, InvalidInput, Throttled, Unavailable
from shardex.heat import HeatMeter, LatencyHistogram
from shardex.heatmeter.meter import OTHER
from shardex.keys import placement_key, record_key
from shardex.model.entries import Placement, Position, Record, StoredEntry
from shardex.sim.clock import run_virtual
from shardex.stores.base import Capabilities, Store
from shardex.stores.metered import Meter, Recorder, Usage, split_units
from shardex.stores.uri import StoreURI


class Scripted(Store):
    """A store whose answers the test sets: each request waits ``latency`` and costs ``units``.

    A place shares its units equally between the shard key written and the placement.
    """

    scheme = "scripted"

    def __init__(self) -> None:
        super().__init__(capabilities=Capabilities())
        self.latency = 0.004
        self.units = 1.0
        self.throttle: set[str] = set()

    @classmethod
    def from_uri(cls, uri: StoreURI, **options: Any) -> Store:  # pragma: no cover
        return cls()

    async def _answer(self, rec: Recorder, key: str) -> None:
        rec.request(key)
        await self.clock.sleep(self.latency)
        if key in self.throttle:
            raise Throttled(f"{key} throttled", key=key)

    async def _locate(self, namespace: str, item_id: str, rec: Recorder) -> Placement | None:
        await self._answer(rec, placement_key(item_id))
        return None

    async def _place(self, namespace: str, item_id: str, entry: StoredEntry | None,
                     version: int, expected: Placement | None, token: str,
                     rec: Recorder) -> None:
        key = entry.shard_key if entry else placement_key(item_id)
        await self._answer(rec, key)
        rec.share(self.units, [(key, 1.0), (placement_key(item_id), 1.0)])

    async def _query(self, namespace: str, shard_key: str, after: Position | None,
                     until: Position | None, descending: bool, limit: int,
                     rec: Recorder) -> tuple[list[StoredEntry], Position | None]:
        await self._answer(rec, shard_key)
        rec.charge(shard_key, self.units)
        return [], None

    async def _count(self, namespace: str, shard_key: str, rec: Recorder) -> int:
        await self._answer(rec, shard_key)
        return 0

    async def _get_record(self, namespace: str, key: str, rec: Recorder) -> Record | None:
        await self._answer(rec, record_key(key))
        return None

    async def _put_record(self, namespace: str, key: str, body: Mapping[str, Any],
                          revision: int, expected: int | None, rec: Recorder) -> None:
        await self._answer(rec, record_key(key))

    async def _list_records(self, namespace: str, prefix: str,
                            rec: Recorder) -> dict[str, Record]:
        await self._answer(rec, record_key(prefix))
        return {}

    async def _delete_record(self, namespace: str, key: str, expected: int,
                             rec: Recorder) -> None:
        await self._answer(rec, record_key(key))


def entry(key: str, item: str = "i") -> StoredEntry:
    return StoredEntry(shard_key=key, sort="", item_id=item)


async def write_at(meter: HeatMeter, when: float, key: str, times: int) -> None:
    """Issue ``times`` writes to ``key`` starting at virtual second ``when``."""
    await asyncio.sleep(max(0.0, when - asyncio.get_running_loop().time()))
    for i in range(times):
        item = f"{key}-{when}-{i}"
        await meter.store.place("ix", item, entry(key, item), version=1, expected=None)


def test_per_second_windows_give_peaks_and_a_timeline() -> None:
    async def main() -> shardex.heat.HeatSnapshot:
        inner = Scripted()
        inner.latency, inner.units = 0.0001, 2.0
        meter = HeatMeter(inner)
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
    async def main() -> tuple[HeatMeter, BaseException]:
        inner = Scripted()
        inner.throttle = {"HOT"}
        meter = HeatMeter(inner)
        with pytest.raises(Throttled) as caught:
            await inner.query("ix", "HOT", after=None, descending=False, limit=5)
        await inner.query("ix", "COLD", after=None, descending=False, limit=5)
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

    async def main() -> HeatMeter:
        inner = Scripted()
        meter = HeatMeter(inner)
        for latency in samples:
            inner.latency = latency
            await inner.count("ix", "K")
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
    async def main() -> HeatMeter:
        inner = Scripted()
        inner.latency = 0.0001
        meter = HeatMeter(inner, windows=3)
        await write_at(meter, 0.0, "A", 100)
        for second in range(1, 8):
            await write_at(meter, float(second), "B", 1)
        return meter

    snap = run_virtual(main()).snapshot()
    assert len(snap.windows) <= 3
    assert "A" not in snap.timeline
    assert snap.values["A"].peak_write_units_per_s == pytest.approx(50.0)


def test_distinct_keys_are_capped() -> None:
    async def main() -> HeatMeter:
        inner = Scripted()
        inner.latency = 0.0001
        meter = HeatMeter(inner, max_keys=3, windows=2)
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


def test_a_hot_key_takes_the_place_of_the_lightest_busy_one() -> None:
    """Every tracked key stays busy (none idle for the retained windows), and a new key
    is far hotter than all of them: at the end of its first window it takes the place of
    the tracked key of the smallest peak, and ``hot`` lists it first. It had counted
    under #other for good, and ``hot`` listed the tenants without it (a probe: 10,000
    tenants written every 30 s beside a key at 3,000 units a second)."""
    async def main() -> HeatMeter:
        inner = Scripted()
        inner.latency = 0.0001
        meter = HeatMeter(inner, max_keys=4, windows=10)
        for second in range(6):
            for key in ("A", "B", "C", "D"):
                await write_at(meter, second + 0.01, key, 1 + (key == "A"))
            if second >= 3:
                await write_at(meter, second + 0.02, "VIRAL", 40)
        return meter

    meter = run_virtual(main())
    snap = meter.snapshot()
    assert "VIRAL" in snap.values
    assert snap.values["VIRAL"].peak_units_per_s == pytest.approx(20.0)  # 40 half-units
    assert len(snap.values) == 4
    assert "A" in snap.values  # the busiest tenant keeps its place
    assert meter.hot(top=1)[0].value == "VIRAL"
    assert snap.other is not None


def test_snapshot_exports_as_json() -> None:
    async def main() -> HeatMeter:
        meter = HeatMeter(Scripted())
        await meter.store.place("ix", "o-1", entry("PENDING#3", "o-1"), version=1,
                                expected=None)
        await meter.store.put_record("ix", "routing", {}, expected=None)
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
        HeatMeter(Scripted(), **options)


# -- the one path: recorder, events, subscribers ---------------------------------------------

class Events:
    """A subscriber that keeps every request's event (and ignores other kinds, as any must)."""

    def __init__(self, store: Store) -> None:
        self.seen: list[Usage] = []
        store.meter.subscribe(self.keep)

    def keep(self, event: object) -> None:
        if type(event) is Usage:
            self.seen.append(event)


def test_split_units_is_by_weight_and_equal_without_weights() -> None:
    assert split_units(6.0, [("a", 1.0), ("b", 2.0)]) == [("a", 2.0), ("b", 4.0)]
    assert split_units(3.0, [("a", 0.0), ("b", 0.0), ("c", 0.0)]) == [
        ("a", 1.0), ("b", 1.0), ("c", 1.0)]


def test_the_meter_hands_every_event_to_every_subscriber_until_unsubscribed() -> None:
    meter, first, second = Meter(), [], []  # type: ignore[var-annotated]
    meter.subscribe(first.append)
    meter.subscribe(second.append)
    meter.emit("a")
    meter.unsubscribe(first.append)
    meter.unsubscribe(first.append)  # unknown: ignored
    meter.emit("b")
    assert (first, second) == (["a"], ["a", "b"])


def test_each_request_is_one_event_with_its_outcome() -> None:
    async def main() -> list[Usage]:
        store = Scripted()
        events = Events(store)
        store.throttle = {"HOT"}
        await store.place("ix", "o-1", entry("K", "o-1"), version=1, expected=None)
        with pytest.raises(Throttled):
            await store.query("ix", "HOT", after=None, descending=False, limit=1)
        with pytest.raises(InvalidInput):  # refused before any request: no event
            await store.query("ix", "HOT", after=None, descending=False, limit=0)
        return events.seen

    ok, throttled = run_virtual(main())
    assert (ok.outcome, ok.write, ok.key, ok.units) == ("ok", True, "K", 1.0)
    assert [(s.key, s.units) for s in ok.shares] == [("K", 0.5), ("#placement#o-1", 0.5)]
    assert ok.latency == pytest.approx(0.004)
    assert (throttled.outcome, throttled.key, throttled.shares) == ("throttled", "HOT", ())


def test_outcomes_follow_the_error_and_what_the_request_consumed() -> None:
    clock_now = iter(range(100))

    class Clock:
        def now(self) -> float:
            return float(next(clock_now))

        def wall(self) -> float:  # pragma: no cover - not read here
            return 0.0

        async def sleep(self, seconds: float) -> None:  # pragma: no cover
            return None

    meter, seen = Meter(), []  # type: ignore[var-annotated]
    meter.subscribe(seen.append)

    def run(error: BaseException | None, *, charged: bool, requests: int = 1) -> None:
        try:
            with Recorder(meter, Clock(), "ix", "K", True) as rec:
                for _ in range(requests):
                    rec.request()
                    if charged:
                        rec.charge("K", 1.0)
                if error is not None:
                    raise error
        except BaseException:
            pass

    run(None, charged=True, requests=3)
    run(ConditionFailed("x"), charged=True)
    run(Throttled("x", key="K#2"), charged=False)
    run(Unavailable("x"), charged=False)
    run(Unavailable("x"), charged=True)
    run(asyncio.CancelledError(), charged=False)
    run(RuntimeError("x"), charged=False)
    run(InvalidInput("x"), charged=False, requests=0)
    outcomes = [(u.outcome, u.key) for u in seen]
    assert outcomes == [("ok", "K")] * 3 + [
        ("conflict", "K"), ("throttled", "K#2"), ("unavailable", "K"), ("ambiguous", "K"),
        ("cancelled", "K"), ("failed", "K")]


def test_stats_and_the_heat_meter_read_the_same_events() -> None:
    """One path: what the memory store reports per request is what both count."""
    async def main() -> tuple[list[Usage], Any, HeatMeter]:
        store = shardex.open_store("memory://", seed=3, partitions=4)
        events = Events(store)
        meter = HeatMeter(store)
        routing = shardex.Routing(overrides={"PENDING": shardex.ShardPolicy(shards=4)})
        async with shardex.ShardedIndex(store, "orders", routing) as index:
            for i in range(40):
                await index.put("PENDING", f"o-{i}", sort=f"{i:04d}")
            for i in range(0, 40, 4):
                await index.move(f"o-{i}", old="PENDING", new="SHIPPED")
            await index.query("PENDING", limit=50)
        return events.seen, store.stats("orders"), meter  # type: ignore[attr-defined]

    seen, stats, meter = run_virtual(main())
    snap = meter.snapshot()
    placements = [u for u in seen if u.write and u.outcome == "ok"
                  and any(s.key.startswith("#placement#") for s in u.shares)]
    assert placements
    for usage in placements:
        assert usage.units == pytest.approx(sum(s.units for s in usage.shares))
        assert all(s.partition is not None and s.partition.startswith("p")
                   for s in usage.shares)
    for key, counted in stats.by_key.items():
        by_events = sum(s.units for u in seen if u.namespace == "orders" for s in u.shares
                        if (s.key.startswith("#placement#") and key == "#placement#")
                        or s.key == key)
        assert counted.read_units + counted.write_units == pytest.approx(by_events), key
        if not key.startswith("#"):
            assert snap.shard_keys[key].units == pytest.approx(by_events), key
    assert stats.totals.requests == len([u for u in seen if u.namespace == "orders"])
    assert snap.totals.requests == len(seen)


# -- on a ShardedIndex over the memory store ---------------------------------------------------

def test_index_heat_ranks_the_memory_stores_hot_values() -> None:
    async def main() -> shardex.ShardedIndex:
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
        return index

    index = run_virtual(main())
    assert index.meter is not None
    assert index.meter.store is index.store
    hot = index.heat(top=2)
    assert [k.value for k in hot] == ["PENDING", "SHIPPED"]
    assert hot.get("PENDING") is not None
    assert hot[0].shards == 4
    assert index.meter.snapshot().reserved["#placement"].writes == 400 + 100 + 50 + 1


def test_a_value_on_a_tier_is_heat_of_the_index_against_its_own_store_s_ceiling() -> None:
    """index.heat() and the meter counted the index's own store alone: 50 puts to a tenant
    on its dedicated tier left it out, and every key was weighed against DynamoDB's
    ceiling whatever its store (an Azure tier's 2,000 entities a second, shared)."""
    from shardex.capacity import CEILINGS
    from shardex.stores.memory import MemoryStore

    class AzureLike(MemoryStore):
        scheme = "azure-tables"  # a memory store of Azure's kind, for its ceiling

    async def main() -> shardex.ShardedIndex:
        own, dedicated = MemoryStore(seed=1), AzureLike(seed=2)
        routing = shardex.Routing(overrides={
            "tenant-42": shardex.ShardPolicy(shards=2, tier="dedicated")})
        index = shardex.ShardedIndex(own, "t", routing, tiers={"dedicated": dedicated},
                                     meter=True)
        async with index:
            for i in range(50):
                await index.put("tenant-42", f"e-{i}")
                await index.put("small", f"s-{i}")
        return index

    index = run_virtual(main())
    assert index.meter is not None
    snapshot = index.meter.snapshot()
    assert set(snapshot.values) == {"tenant-42", "small"}
    tiered = {k for k in snapshot.shard_keys if k.startswith("dedicated:")}
    assert tiered == {"dedicated:tenant-42#0", "dedicated:tenant-42#1"}
    assert {snapshot.shard_values[k] for k in tiered} == {"tenant-42"}
    hot = index.heat()
    assert hot.ceiling == CEILINGS["dynamodb"]  # the index's own store's
    tenant, small = hot.get("tenant-42"), hot.get("small")
    assert tenant is not None
    assert small is not None
    assert tenant.hottest_shard_key.startswith("dedicated:")
    meters = snapshot.shard_keys
    assert tenant.hottest_shard_to_ceiling == pytest.approx(
        meters[tenant.hottest_shard_key].peak_to(CEILINGS["azure-tables"]))
    assert tenant.peak_to_ceiling == pytest.approx(
        snapshot.values["tenant-42"].peak_to(CEILINGS["azure-tables"]))
    assert small.peak_to_ceiling == pytest.approx(
        snapshot.values["small"].peak_to(CEILINGS["dynamodb"]))
    # a ceiling given is every key's
    given = index.heat(ceiling="cosmos").get("tenant-42")
    assert given is not None
    assert given.peak_to_ceiling == pytest.approx(
        snapshot.values["tenant-42"].peak_to(CEILINGS["cosmos"]))
    tier_meter = index.tiers["dedicated"].meter
    subscribed = len(tier_meter.subscribers)
    index.meter.close()
    assert len(tier_meter.subscribers) == subscribed - 1


def test_heat_needs_metering() -> None:
    index = shardex.ShardedIndex("memory://", "orders")
    assert index.meter is None
    with pytest.raises(InvalidInput, match="not metered"):
        index.heat()
    store = shardex.open_store("memory://")
    meter = HeatMeter(store)
    assert shardex.ShardedIndex(store, "orders", meter=meter).meter is meter
    with pytest.raises(InvalidInput, match="meter"):
        shardex.ShardedIndex(shardex.open_store("memory://"), "orders", meter=meter)
    assert shardex.ShardedIndex(store, "orders", meter=meter).heat().keys == []
    meter.close()
    assert meter not in store.meter.subscribers


def test_a_keys_peak_is_weighed_against_a_ceiling_its_reads_and_writes_share() -> None:
    """A key whose busiest second read 6,000 RU and wrote 6,000 is at 120% of a Cosmos DB
    partition (one budget for both), where the view said 60%; on DynamoDB each is weighed
    against its own ceiling."""
    from shardex.capacity import CEILINGS
    from shardex.heatmeter.view import KeyMeter

    meter = KeyMeter(peak_units_per_s=12_000.0, peak_read_units_per_s=6000.0,
                     peak_write_units_per_s=6000.0)
    assert meter.peak_to(CEILINGS["cosmos"]) == pytest.approx(1.2)
    assert meter.peak_to(CEILINGS["dynamodb"]) == pytest.approx(6.0)


def test_the_pages_feed_weighs_a_shared_ceiling_the_same_way() -> None:
    from shardex.capacity import CEILINGS
    from shardex.web.feeds import document

    def row() -> dict[str, Any]:
        return {"key": "A", "peak_units_per_s": 12_000.0, "peak_read_units_per_s": 6000.0,
                "peak_write_units_per_s": 6000.0}

    for name, ratio in (("cosmos", 1.2), ("dynamodb", 6.0)):
        doc = document("test", 0.0, 60.0, CEILINGS[name], [row()], [], {}, {}, None,
                       feed={})
        assert doc["values"][0]["peak_to_ceiling"] == pytest.approx(ratio)
