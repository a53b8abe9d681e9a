"""memory://, the simulated partitioned store: capacity, faults, stats, options.

The store contract itself (compare-and-set, tombstones, order, pages, records, argument
checks) runs on every backend in tests/test_store_contract.py.

Everything runs on virtual time (``run_virtual``); nothing sleeps for real.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

import shardex.stores.memory
from shardex.capacity import entry_bytes, read_units
from shardex.clock import LoopClock
from shardex.errors import (
    ConditionFailed,
    InvalidInput,
    InvalidURI,
    StoreError,
    Throttled,
    Unavailable,
)
from shardex.keys import is_reserved
from shardex.model.entries import Placement, Position, StoredEntry
from shardex.sim.clock import run_virtual
from shardex.stores import open_store
from shardex.stores.memory import MemoryStore
from shardex.stores.stats import StoreStats
from shardex.stores.uri import StoreURI

T = TypeVar("T")
NS = "orders_by_status"
CLOCK = LoopClock()


def entry(key: str, sort: str, item_id: str, **attrs: Any) -> StoredEntry:
    return StoredEntry(shard_key=key, sort=sort, item_id=item_id, attrs=attrs)


def store(**options: Any) -> MemoryStore:
    options.setdefault("seed", 1)
    return MemoryStore(**options)


async def put(s: MemoryStore, e: StoredEntry, *, ns: str = NS) -> float:
    """Place ``e`` as the item's next version, whatever its current one is."""
    current = await s.locate(ns, e.item_id)
    version = current.version if current else 0
    return await s.place(ns, e.item_id, e, version=version + 1, expected=current)


async def patiently(call: Callable[[], Awaitable[T]]) -> T:
    """Retry ``call`` through injected faults (as the index's retry policy would)."""
    for _ in range(200):
        try:
            return await call()
        except (Throttled, Unavailable):
            await CLOCK.sleep(0.01)
    raise AssertionError("still failing after 200 attempts")


async def read_all(s: MemoryStore, key: str, *, descending: bool = False, limit: int = 1000,
                   ns: str = NS) -> list[StoredEntry]:
    out: list[StoredEntry] = []
    after: Position | None = None
    while True:
        page = await s.query(ns, key, after=after, descending=descending, limit=limit)
        out += page.entries
        if page.resume is None:
            return out
        after = page.resume


# -- entries: place, locate, query -----------------------------------------------------

def test_place_then_locate_and_query() -> None:
    async def main() -> None:
        s = store()
        e = entry("PENDING", "2026-11-30T05:00:00Z", "o-1", total=12)
        assert await s.locate(NS, "o-1") is None
        await s.place(NS, "o-1", e, version=1, expected=None)
        placement = await s.locate(NS, "o-1")
        assert placement is not None
        assert (placement.item_id, placement.version, placement.entry) == ("o-1", 1, e)
        page = await s.query(NS, "PENDING", after=None, descending=False, limit=10)
        assert page.entries == [e]
        assert page.resume is None
        assert await s.count(NS, "PENDING") == 1
        assert s.shard_keys(NS) == ["PENDING"]
    run_virtual(main())


def test_namespaces_are_separate_key_spaces() -> None:
    async def main() -> None:
        s = store()
        await s.place("a", "o-1", entry("K", "1", "o-1"), version=1, expected=None)
        await s.place("b", "o-1", entry("K", "2", "o-1"), version=5, expected=None)
        assert [e.sort for e in await read_all(s, "K", ns="a")] == ["1"]
        assert [e.sort for e in await read_all(s, "K", ns="b")] == ["2"]
        located = await s.locate("a", "o-1")
        assert located is not None
        assert located.version == 1
        assert await s.locate("c", "o-1") is None
    run_virtual(main())


def test_query_of_an_unknown_key_is_empty_and_costs_one_unit() -> None:
    async def main() -> None:
        s = store()
        page = await s.query(NS, "NOTHING", after=None, descending=False, limit=5)
        assert (page.entries, page.resume, page.units) == ([], None, 1.0)
        assert await s.count(NS, "NOTHING") == 0
    run_virtual(main())


def test_many_entries_in_one_key_page_in_order_after_inserts_and_deletes() -> None:
    """Crosses the sorted index's chunk boundaries with random inserts and deletes."""
    async def main() -> None:
        s = store(write_ceiling=1e9, read_ceiling=1e9)
        rng = random.Random(3)
        live: dict[str, str] = {}
        for _ in range(4000):
            item = f"i{rng.randrange(3000)}"
            if item in live and rng.random() < 0.3:
                current = await s.locate(NS, item)
                assert current is not None
                await s.place(NS, item, None, version=current.version + 1,
                              expected=current)
                del live[item]
            else:
                live[item] = f"{rng.randrange(500):03d}"
                await put(s, entry("K", live[item], item))
        expected = sorted((sort, item) for item, sort in live.items())
        got = [e.position for e in await read_all(s, "K", limit=97)]
        assert got == expected
        got_down = [e.position for e in await read_all(s, "K", descending=True, limit=1000)]
        assert got_down == expected[::-1]
        assert await s.count(NS, "K") == len(expected)
    run_virtual(main())


def test_thirty_thousand_entries_in_one_shard_key() -> None:
    async def main() -> None:
        s = store(write_ceiling=1e9, read_ceiling=1e9)
        for i in range(30_000):
            await s.place(NS, f"o{i}", entry("HOT", f"{(i * 7919) % 30_000:06d}", f"o{i}"),
                          version=1, expected=None)
        got = await read_all(s, "HOT")
        assert len(got) == 30_000
        assert [e.position for e in got] == sorted(e.position for e in got)
        assert await s.count(NS, "HOT") == 30_000
    run_virtual(main())


def test_query_page_stops_at_one_megabyte() -> None:
    async def main() -> None:
        s = store(write_ceiling=1e9, read_ceiling=1e9)
        blob = "x" * 10_000
        for i in range(250):
            await put(s, entry("BIG", f"{i:04d}", f"o{i}", blob=blob))
        size = entry_bytes(entry("BIG", "0000", "o0", blob=blob))
        page = await s.query(NS, "BIG", after=None, descending=False, limit=1000)
        assert len(page.entries) == 1_048_576 // size
        assert page.resume == page.entries[-1].position
        assert page.units == read_units(len(page.entries) * size)  # rounded once, over the sum
        assert len(await read_all(s, "BIG")) == 250
    run_virtual(main())


def test_query_page_returns_one_entry_larger_than_the_page_cap() -> None:
    async def main() -> None:
        s = store(max_page_bytes=100)
        for i in range(3):
            await put(s, entry("K", f"{i}", f"o{i}", blob="y" * 500))
        page = await s.query(NS, "K", after=None, descending=False, limit=10)
        assert len(page.entries) == 1
        assert page.resume == ("0", "o0")
        assert len(await read_all(s, "K")) == 3
    run_virtual(main())


def test_query_limit_is_capped_at_max_page() -> None:
    async def main() -> None:
        s = store(write_ceiling=1e9, read_ceiling=1e9)
        for i in range(1200):
            await put(s, entry("K", f"{i:05d}", f"o{i}"))
        page = await s.query(NS, "K", after=None, descending=False, limit=5000)
        assert len(page.entries) == s.capabilities.max_page == 1000
        assert page.resume is not None
    run_virtual(main())


def test_read_units_are_halved_for_eventually_consistent_queries() -> None:
    async def main() -> None:
        strong, eventual = store(), store(consistent=False)
        for s in (strong, eventual):
            for i in range(3):
                await put(s, entry("K", f"{i}", f"o{i}", blob="z" * 3000))
        page = await strong.query(NS, "K", after=None, descending=False, limit=10)
        assert page.units == 3.0  # about 9 KB read: three 4 KB units
        page = await eventual.query(NS, "K", after=None, descending=False, limit=10)
        assert page.units == 1.5
        assert strong.capabilities.consistent_reads
        assert not eventual.capabilities.consistent_reads
    run_virtual(main())


def test_count_charges_one_request_per_page() -> None:
    async def main() -> None:
        s = store(max_page_bytes=1000)
        for i in range(50):
            await put(s, entry("K", f"{i:03d}", f"o{i:02d}"))
        total = 50 * entry_bytes(entry("K", "000", "o00"))
        s.reset_stats()
        assert await s.count(NS, "K") == 50
        stats = s.stats(NS).by_key["K"]
        assert stats.read_requests == -(-total // 1000)
        assert stats.read_units == stats.read_requests  # each page is under 4 KB
    run_virtual(main())


def test_place_returns_transaction_write_units() -> None:
    async def main() -> None:
        s = store()
        small = entry("PENDING", "a", "o-1")
        # placement record and entry: one unit each, doubled as a transaction
        assert await s.place(NS, "o-1", small, version=1, expected=None) == 4.0

        async def here() -> Placement | None:
            return await s.locate(NS, "o-1")

        # placement, delete of the old entry, the new entry
        assert await s.place(NS, "o-1", entry("SHIPPED", "b", "o-1"), version=2,
                             expected=await here()) == 6.0
        big = entry("SHIPPED", "c", "o-1", blob="q" * 2500)
        assert 2048 < entry_bytes(big) <= 3072
        # one key, one request: the delete of the small row and the put of the big one
        assert await s.place(NS, "o-1", big, version=3, expected=await here()) == 2 * (1 + 1 + 3)
        assert await s.place(NS, "o-1", None, version=4, expected=await here()) == 2 * (1 + 3)
        plain = store(transaction_cost=1.0)
        assert await plain.place(NS, "o-1", small, version=1, expected=None) == 2.0
        stats = s.stats(NS)
        assert stats.totals.write_units == 4 + 6 + 10 + 8
        assert stats.by_key["#placement#"].write_units == 8.0
    run_virtual(main())


def test_a_failed_condition_consumes_only_the_placement_units() -> None:
    async def main() -> None:
        s = store()
        await s.place(NS, "o-1", entry("PENDING", "a", "o-1"), version=1, expected=None)
        before = s.stats(NS)
        with pytest.raises(ConditionFailed):
            await s.place(NS, "o-1", entry("SHIPPED", "b", "o-1"), version=3,
                          expected=Placement("o-1", 2, None, "stale"))
        after = s.stats(NS)
        assert after.by_key["#placement#"].write_units == (
            before.by_key["#placement#"].write_units + 2.0)
        assert after.by_key["PENDING"] == before.by_key["PENDING"]
        assert "SHIPPED" not in after.by_key
    run_virtual(main())


def test_put_record_copies_the_body_it_is_given() -> None:
    async def main() -> None:
        s = store()
        body: dict[str, Any] = {"overrides": {"PENDING": 8}}
        await s.put_record(NS, "routing", body, expected=None)
        body["overrides"]["PENDING"] = 1
        record = await s.get_record(NS, "routing")
        assert record is not None
        assert record.body == {"overrides": {"PENDING": 8}}
    run_virtual(main())


def test_try_place_returns_the_throttle_that_place_raises_and_counts_it_alike() -> None:
    """A partition short of units refuses a place: ``place`` raises Throttled, and
    ``try_place`` (the write engine's) returns the same refusal, with the same counts in
    ``stats()``; applied, both return the units written."""
    async def main() -> None:
        raised, returned = store(write_ceiling=2.0), store(write_ceiling=2.0)
        refusals: list[tuple[str | None, str | None, str]] = []
        for i in range(6):
            e = entry("K", f"{i:03d}", f"o{i}")
            try:
                units = await raised.place(NS, f"o{i}", e, version=1, expected=None)
            except Throttled as exc:
                refusals.append((exc.key, exc.reason, str(exc)))
            else:
                outcome = await returned.try_place(NS, f"o{i}", e, version=1, expected=None)
                assert outcome == units
                continue
            outcome = await returned.try_place(NS, f"o{i}", e, version=1, expected=None)
            assert isinstance(outcome, Throttled)
            assert outcome.__traceback__ is None  # never raised
            assert (outcome.key, outcome.reason, str(outcome)) == refusals[-1]
        assert refusals  # the ceiling refused some
        counted, stats = returned.stats(NS), raised.stats(NS)
        assert (counted.by_key, counted.totals, counted.throttle_reasons) \
            == (stats.by_key, stats.totals, stats.throttle_reasons)
        assert [e.item_id for e in await read_all(returned, "K")] \
            == [e.item_id for e in await read_all(raised, "K")]
        with pytest.raises(InvalidInput, match="version"):
            await returned.try_place(NS, "o9", entry("K", "9", "o9"), version=0,
                                     expected=None)
    run_virtual(main())


def test_a_store_that_overrides_place_is_tried_through_it() -> None:
    """``try_place`` of a store that wraps ``place`` calls the wrapper, and returns the
    ShardexError it raises; the wrapper's own call of ``place`` reaches the store."""
    class Counting(MemoryStore):
        calls = 0

        async def place(self, namespace: str, item_id: str, entry: StoredEntry | None, *,
                        version: int, expected: Placement | None,
                        token: str | None = None) -> float:
            Counting.calls += 1
            if item_id == "refused":
                raise ConditionFailed("refused by the wrapper")
            return await super().place(namespace, item_id, entry, version=version,
                                       expected=expected, token=token)

    async def main() -> None:
        s = Counting(seed=1)
        units = await s.try_place(NS, "o1", entry("K", "1", "o1"), version=1, expected=None)
        assert units == await store().place(NS, "o1", entry("K", "1", "o1"), version=1,
                                            expected=None)
        refused = await s.try_place(NS, "refused", entry("K", "2", "refused"), version=1,
                                    expected=None)
        assert isinstance(refused, ConditionFailed)
        assert Counting.calls == 2
        assert [e.item_id for e in await read_all(s, "K")] == ["o1"]
    run_virtual(main())


# -- injected faults --------------------------------------------------------------------

def test_injected_throttles_apply_nothing() -> None:
    async def main() -> None:
        s = store(throttle_rate=0.4, seed=11)
        placed, refusals = set(), set()
        for i in range(60):
            try:
                await s.place(NS, f"o{i}", entry("K", f"{i:03d}", f"o{i}"), version=1,
                              expected=None)
                placed.add(f"o{i}")
            except Throttled as exc:
                refusals.add((exc.key, exc.reason))
        assert refusals == {("K", "injected")}
        assert 10 < len(placed) < 50
        entries = await patiently(lambda: read_all(s, "K"))
        assert {e.item_id for e in entries} == placed
        stats = s.stats(NS)
        assert stats.by_key["K"].write_throttles == 60 - len(placed)
    run_virtual(main())


def test_every_request_kind_can_be_throttled_by_injection() -> None:
    async def main() -> None:
        s = store(throttle_rate=1.0)
        calls: list[Awaitable[Any]] = [
            s.locate(NS, "o"), s.place(NS, "o", None, version=1, expected=None),
            s.query(NS, "K", after=None, descending=False, limit=1), s.count(NS, "K"),
            s.get_record(NS, "r"), s.put_record(NS, "r", {}, expected=None),
            s.list_records(NS, "r"), s.delete_record(NS, "r", expected=1)]
        for call in calls:
            with pytest.raises(Throttled, match="injected"):
                await call
        stats = s.stats()
        assert stats.totals.requests == 8
        assert stats.totals.throttles == 8
        assert stats.totals.read_units == stats.totals.write_units == 0.0
    run_virtual(main())


def test_injected_unavailability_applies_nothing() -> None:
    async def main() -> None:
        s = store(unavailable_rate=0.5, seed=4)
        placed = set()
        failures: list[str] = []
        for i in range(40):
            try:
                await s.place(NS, f"o{i}", entry("K", f"{i:03d}", f"o{i}"), version=1,
                              expected=None)
                placed.add(f"o{i}")
            except Unavailable as exc:
                failures.append(str(exc))
        assert all("not applied" in message for message in failures)
        for call in (lambda: s.locate(NS, "o"), lambda: s.count(NS, "K"),
                     lambda: s.get_record(NS, "r")):
            await patiently(call)
        assert 0 < len(failures) < 40
        entries = await patiently(lambda: read_all(s, "K"))
        assert {e.item_id for e in entries} == placed
        assert s.stats(NS).unavailable >= len(failures)
    run_virtual(main())


def test_ambiguous_writes_are_applied_and_still_raise() -> None:
    async def main() -> None:
        s = store(ambiguous_rate=1.0)
        with pytest.raises(Unavailable, match="may have been applied"):
            await s.place(NS, "o-1", entry("K", "a", "o-1"), version=1, expected=None)
        placement = await s.locate(NS, "o-1")  # reads are never ambiguous
        assert placement is not None
        assert placement.version == 1
        assert [e.item_id for e in await read_all(s, "K")] == ["o-1"]
        with pytest.raises(Unavailable, match="may have been applied"):
            await s.put_record(NS, "r", {"a": 1}, expected=None)
        record = await s.get_record(NS, "r")
        assert record is not None
        assert record.revision == 1
        # the retry of an applied write meets its own write
        with pytest.raises(ConditionFailed):
            await s.place(NS, "o-1", entry("K", "a", "o-1"), version=1, expected=None)
        assert s.stats(NS).ambiguous == 2
    run_virtual(main())


def test_faults_are_reproducible_with_a_seed() -> None:
    async def outcomes(seed: int) -> list[str]:
        s = store(seed=seed, throttle_rate=0.2, unavailable_rate=0.2, ambiguous_rate=0.2)
        out = []
        for i in range(50):
            try:
                await s.place(NS, f"o{i}", entry("K", "s", f"o{i}"), version=1, expected=None)
                out.append("ok")
            except StoreError as exc:
                out.append(type(exc).__name__)
        out.append(f"{CLOCK.now():.9f}")
        return out

    assert run_virtual(outcomes(5)) == run_virtual(outcomes(5))
    assert run_virtual(outcomes(5)) != run_virtual(outcomes(6))


# -- stats --------------------------------------------------------------------------------

def test_counters_and_timeline() -> None:
    async def main() -> None:
        s = store(partitions=0)  # every key its own partition
        for i in range(3):
            await s.place(NS, f"o{i}", entry("A", f"{i}", f"o{i}"), version=1, expected=None)
        await CLOCK.sleep(2.5)
        for i in range(3, 5):
            await s.place(NS, f"o{i}", entry("A", f"{i}", f"o{i}"), version=1, expected=None)
        await s.place("other", "o0", entry("A", "0", "o0"), version=1, expected=None)
        await s.query(NS, "A", after=None, descending=False, limit=10)
        await s.put_record(NS, "routing", {}, expected=None)

        stats = s.stats(NS)
        a = stats.by_key["A"]
        assert (a.write_requests, a.write_units, a.read_requests, a.read_units) == (5, 10, 1, 1)
        assert a.requests == 6
        assert a.throttles == 0
        assert stats.by_key["#placement#"].write_units == 10
        assert stats.by_key["#record#routing"].write_requests == 1
        assert stats.by_partition == stats.by_key
        assert stats.timeline["A"] == {0: 6.0, 2: 4.0}
        assert stats.throttle_timeline == {}
        assert stats.shard_keys() == ["A"]
        assert StoreStats.reserved("#placement#")
        assert not StoreStats.reserved("A")
        assert stats.totals.requests == 5 + 1 + 1
        assert stats.totals.write_units == 5 * 4 + 1
        assert stats.elapsed > 2.5

        everything = s.stats()
        assert everything.by_key["A"].write_requests == 6
        assert everything.timeline["A"][2] == 6.0
        assert s.stats("nobody").by_key == {}

        s.reset_stats()
        assert s.stats(NS).by_key == {}
        assert s.stats(NS).totals.requests == 0
        await CLOCK.sleep(10.0)
        await s.place(NS, "o9", entry("A", "9", "o9"), version=1, expected=None)
        assert s.stats(NS).timeline == {"A": {0: 2.0}, "#placement#": {0: 2.0}}
    run_virtual(main())


def test_is_reserved() -> None:
    assert is_reserved("#placement#o-1")
    assert is_reserved("#record#routing")
    assert not is_reserved("PENDING#3")


# -- options and URIs --------------------------------------------------------------------

def test_shared_units_is_a_switch_in_a_uri_as_the_profile_takes_it() -> None:
    """'?shared_units=true' was refused as not a float, and 1.0 by the profile as not a
    bool: no value of the option passed."""
    s = MemoryStore.from_uri(StoreURI.parse(
        "memory://?shared_units=true&read_ceiling=1000&warm_read=4000"))
    assert "shared_units=true" in s.uri
    with pytest.raises(shardex.InvalidInput, match="shared_units='2' is not a valid bool"):
        MemoryStore.from_uri(StoreURI.parse("memory://?shared_units=2"))


def test_from_uri_reads_options_and_keywords_override_them() -> None:
    s = MemoryStore.from_uri(StoreURI.parse("memory://?write_ceiling=500&seed=3&consistent=no"))
    assert s.uri == "memory://?consistent=false&seed=3&write_ceiling=500.0"
    assert not s.capabilities.consistent_reads
    s = MemoryStore.from_uri(StoreURI.parse("memory://?write_ceiling=500"), write_ceiling=700.0)
    assert s.uri == "memory://?write_ceiling=700.0"
    assert MemoryStore().uri == "memory://"
    opened = open_store("memory://?partitions=4&throttle_rate=0.1", seed=2)
    assert isinstance(opened, MemoryStore)
    assert opened.uri == "memory://?partitions=4&seed=2&throttle_rate=0.1"


def test_a_store_rebuilt_from_its_uri_behaves_the_same() -> None:
    s = store(write_ceiling=10.0, partitions=3, latency_p99_ms=9.0)
    again = open_store(s.uri)
    assert isinstance(again, MemoryStore)
    assert again.uri == s.uri
    assert again.partition_of(NS, "X") == s.partition_of(NS, "X")


@pytest.mark.parametrize(("uri", "words"), [
    ("memory://?ceiling=5", "does not know the option"),
    ("memory://?write_ceiling=lots", "write_ceiling='lots' is not a valid float"),
    ("memory://?write_ceiling=0", "write_ceiling must be >= 1e-9"),
    ("memory://?partitions=-1", "partitions must be an integer >= 0"),
    ("memory://?partitions=2.5", "partitions"),
    ("memory://?profile=dynamodb-provisioned&burst_seconds=0.5", "burst_seconds must be >= 1"),
    ("memory://?burst_seconds=60", "burst_seconds is a setting of a table of provisioned "
                                   "capacity, and this one is on-demand"),
    ("memory://?throttle_rate=1.5", "throttle_rate must be a probability"),
    ("memory://?consistent=maybe", "consistent"),
    ("memory://?seed=x", "seed"),
    ("memory://?write_ceiling=nan", "write_ceiling must be >= 1e-9 units/s, got nan"),
    ("memory://?write_ceiling=1e-200", "write_ceiling must be >= 1e-9 units/s, got 1e-200"),
    ("memory://?latency_median_ms=30", "p99_ms"),
    ("memory://?burst_seconds=2&initial_burst_seconds=3", "initial_burst_seconds"),
    ("memory://somewhere", "no location or path"),
])
def test_from_uri_refuses_bad_options_with_clear_errors(uri: str, words: str) -> None:
    with pytest.raises(InvalidURI, match=words):
        open_store(uri)


@pytest.mark.parametrize(("options", "words"), [
    ({"ceiling": 5}, "does not know the option"),
    ({"write_ceiling": "5"}, "write_ceiling"),
    ({"partitions": True}, "partitions"),
    ({"consistent": 1}, "consistent"),
    ({"max_page_bytes": 0}, "max_page_bytes"),
    ({"transaction_cost": 0.5}, "transaction_cost"),
    ({"ambiguous_rate": -0.1}, "ambiguous_rate"),
    ({"unavailable_rate": 2}, "unavailable_rate"),
    ({"latency_per_kb_ms": -1.0}, "latency_per_kb_ms"),
    ({"seed": 1.5}, "seed"),
])
def test_keyword_options_are_checked_too(options: dict[str, Any], words: str) -> None:
    with pytest.raises(InvalidInput, match=words) as caught:
        open_store("memory://", **options)
    assert not isinstance(caught.value, InvalidURI)


def test_an_invalid_keyword_overrides_a_valid_uri_option() -> None:
    with pytest.raises(InvalidInput, match="write_ceiling") as caught:
        open_store("memory://?write_ceiling=5&seed=1", write_ceiling=-1.0)
    assert not isinstance(caught.value, InvalidURI)
    assert isinstance(open_store("memory://?write_ceiling=-1", write_ceiling=5.0), MemoryStore)


def test_memory_all_is_sorted_and_public() -> None:
    names = shardex.stores.memory.__all__
    assert names == sorted(names)
    assert all(hasattr(shardex.stores.memory, name) for name in names)


def test_the_store_opens_and_closes_as_a_context() -> None:
    async def main() -> None:
        async with open_store("memory://") as s:
            await s.put_record(NS, "r", {"a": 1}, expected=None)
            assert (await s.get_record(NS, "r")) is not None
    run_virtual(main())
