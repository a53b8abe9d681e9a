"""The routing lease (memory://, virtual time): refreshed in the background, refused when stale.

A client acts only on a routing it read within the lease; the routing-given check runs
once, at open; two clients storing the same next routing have one winner.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

import shardex
from shardex import Routing, RoutingStale, ShardPolicy, Unavailable
from shardex.index import store_routing
from shardex.model.entries import Record
from shardex.routing import begin_transition
from shardex.sim.clock import run_virtual
from shardex.stores.memory import MemoryStore
from shardex.stores.metered import Recorder

PENDING8 = Routing(overrides={"PENDING": ShardPolicy(shards=8)})


class Flaky(MemoryStore):
    """A memory store whose record reads can be switched off, and whose writes can time out."""

    def __init__(self, **options: Any) -> None:
        super().__init__(seed=3, **options)
        self.records_down = False
        self.ambiguous_records = 0

    async def _get_record(self, namespace: str, key: str, rec: Recorder) -> Record | None:
        if self.records_down:
            raise Unavailable("scripted: the record cannot be read")
        return await super()._get_record(namespace, key, rec)

    async def _put_record(self, namespace: str, key: str, body: Any, revision: int,
                          expected: int | None, rec: Recorder) -> None:
        await super()._put_record(namespace, key, body, revision, expected, rec)
        if self.ambiguous_records:
            self.ambiguous_records -= 1
            raise Unavailable("scripted: timed out after it applied")


def test_an_open_index_follows_a_change_made_elsewhere_without_being_asked() -> None:
    async def main() -> None:
        store = MemoryStore(seed=1)
        async with shardex.ShardedIndex(store, "orders", routing_ttl=1.0) as reader, \
                shardex.ShardedIndex(store, "orders", routing_ttl=1.0) as writer:
            assert reader.routing.version == 1
            await store_routing(writer, Routing(overrides=PENDING8.overrides, version=2))
            await store.clock.sleep(1.5)
            assert reader.routing.version == 2  # refreshed in the background
            assert reader.routing_lease == 15.0

    run_virtual(main())


def test_a_client_that_cannot_refresh_stops_when_the_lease_runs_out() -> None:
    async def main() -> None:
        store = Flaky()
        async with shardex.ShardedIndex(store, "orders", PENDING8, routing_ttl=2.0,
                                        routing_lease=10.0) as index:
            await index.put("PENDING", "o-1", sort="a")
            store.records_down = True
            await store.clock.sleep(6.0)
            # past the TTL, within the lease: the cached routing still serves
            assert await index.put("PENDING", "o-2", sort="b")
            assert await index.count("PENDING") == 2
            await store.clock.sleep(5.0)
            for call in (index.put("PENDING", "o-3"), index.count("PENDING"),
                         index.query("PENDING"), index.delete("PENDING", "o-1"),
                         index.move("o-1", old="PENDING", new="SHIPPED")):
                with pytest.raises(RoutingStale, match=r"longer than its 10 s lease.*"
                                                       r"Unavailable: scripted"):
                    await call
            with pytest.raises(RoutingStale):
                index.key_attributes("PENDING", "o-1", sort="a")
            assert (await store.locate("orders", "o-1")) is not None
            store.records_down = False
            await store.clock.sleep(3.0)  # the background refresh succeeds again
            assert await index.count("PENDING") == 2

    run_virtual(main())


def leased(store: MemoryStore, retry: shardex.RetryPolicy) -> shardex.ShardedIndex:
    """An index of ``store`` whose routing is re-read every 2 s and held for 10 s, its
    record read under ``retry`` (seeded: the backoff is the same each run)."""
    return shardex.ShardedIndex(store, "orders", PENDING8, routing_ttl=2.0, routing_lease=10.0,
                                retry=retry, seed=1)


def test_within_the_lease_a_call_does_not_wait_out_a_failing_refresh() -> None:
    # A call past the TTL re-reads the record first; when that read fails, the cached
    # routing serves at once while the lease holds, as the retries go on behind: a call
    # made within the lease that waited for them failed with RoutingStale once they ran
    # past it (2 of 300 runs of the test above, by its random backoff)
    slow = shardex.RetryPolicy(attempts=8, base=1.0, cap=1.0, deadline=None)

    async def main() -> None:
        store = Flaky()
        async with leased(store, slow) as index:
            await index.put("PENDING", "o-1")
            store.records_down = True
            for at in (3.0, 5.5, 7.0, 8.0, 8.8):  # within the fence, 0.9 of the lease
                await store.clock.sleep(at - store.clock.now())
                assert await index.put("PENDING", f"o-{at}")
                assert await index.count("PENDING") >= 2
                assert store.clock.now() - at < 0.1  # no retries waited for
            await store.clock.sleep(10.5 - store.clock.now())
            with pytest.raises(RoutingStale, match="Unavailable: scripted"):
                await index.count("PENDING")
            store.records_down = False
            assert await index.count("PENDING") == 6

    run_virtual(main())


def test_a_refresh_failing_again_after_one_succeeded_behind_a_caller_is_logged_again(
        caplog: pytest.LogCaptureFixture) -> None:
    # the refresh a caller stopped waiting for succeeds behind it: the next failure of
    # the background refresh is news, and logged (once per kind of failure in a row)
    quick = shardex.RetryPolicy(attempts=3, base=0.1, cap=0.1, deadline=None)

    async def main() -> None:
        store = Flaky()
        async with leased(store, quick) as index:
            store.records_down = True
            await store.clock.sleep(3.0)  # the refresh at 2 s failed
            assert caplog.text.count("refreshing the routing failed") == 1
            await store.clock.sleep(0.5)
            assert await index.count("PENDING") == 0  # its refresh's first try fails
            store.records_down = False
            await store.clock.sleep(0.3)  # and its second succeeds
            assert index.routing.version == 1
            store.records_down = True
            await store.clock.sleep(1.5)  # the background refresh near 4 s fails
            assert caplog.text.count("refreshing the routing failed") == 2

    with caplog.at_level(logging.WARNING, logger="shardex"):
        run_virtual(main())


def test_a_failing_refresh_is_logged_whoever_saw_its_first_try_fail(
        caplog: pytest.LogCaptureFixture) -> None:
    # the background refresh at 2 s fails its first try; a call at 2.05 s, past the TTL,
    # joins it and is served the cached routing; the refresh's failure is still logged
    retry = shardex.RetryPolicy(attempts=3, base=0.5, cap=0.5, deadline=None)

    async def main() -> None:
        store = Flaky()
        async with leased(store, retry) as index:
            store.records_down = True
            await store.clock.sleep(2.05)
            assert await index.count("PENDING") == 0
            assert store.clock.now() < 2.1
            await store.clock.sleep(1.5)  # the refresh's retries have failed by now
            assert caplog.text.count("refreshing the routing failed") == 1

    with caplog.at_level(logging.WARNING, logger="shardex"):
        run_virtual(main())


def test_the_routing_given_is_checked_once_at_open(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        store = MemoryStore(seed=1)
        async with shardex.ShardedIndex(store, "orders", PENDING8):
            pass
        other = Routing(overrides={"PENDING": ShardPolicy(shards=2)})
        # refused, not 'the stored routing is used' (the warning's words)
        with pytest.raises(shardex.RoutingConflict, match="version 1; refused "
                                                          r"\(strict_routing\)\. Change"):
            async with shardex.ShardedIndex(store, "orders", other, strict_routing=True):
                pass
        with caplog.at_level(logging.WARNING, logger="shardex"):
            async with shardex.ShardedIndex(store, "orders", other, routing_ttl=0.5) as loose, \
                    shardex.ShardedIndex(store, "orders", PENDING8, strict_routing=True,
                                         routing_ttl=0.5) as strict, \
                    shardex.ShardedIndex(store, "orders") as runner:
                # a reshard elsewhere changes the routing: strict clients follow it
                await store_routing(runner, begin_transition(PENDING8,
                    {"PENDING": ShardPolicy(shards=16)}))
                for _ in range(20):
                    await store.clock.sleep(0.5)
                    await loose.count("PENDING")
                    await strict.count("PENDING")
                assert strict.routing.version == 2
        assert caplog.text.count("the routing given differs") == 1

    run_virtual(main())


def test_a_routing_update_that_timed_out_but_landed_is_recognised_by_its_token() -> None:
    async def main() -> None:
        store = Flaky()
        async with shardex.ShardedIndex(store, "orders") as one, \
                shardex.ShardedIndex(store, "orders") as two:
            store.ambiguous_records = 1
            await store_routing(one, Routing(overrides=PENDING8.overrides, version=2))
            assert one.routing.version == 2
            # the same content from another client is another update: it loses
            with pytest.raises(shardex.ConditionFailed):
                await store_routing(two, Routing(overrides=PENDING8.overrides, version=2))

    run_virtual(main())


class SlowToOpen(MemoryStore):
    """A memory store whose first ``throttled`` connection probes are throttled."""

    def __init__(self, throttled: int) -> None:
        super().__init__(seed=3)
        self.throttled = throttled

    async def _connect(self) -> None:
        if self.throttled:
            self.throttled -= 1
            raise shardex.Throttled("scripted: the probe is throttled", reason="scripted")
        await super()._connect()


def test_a_throttled_probe_at_open_is_tried_again_under_the_retry_policy() -> None:
    async def main() -> None:
        index = shardex.ShardedIndex(SlowToOpen(throttled=2), "orders", PENDING8, seed=1,
                                     retry=shardex.RetryPolicy(attempts=3, base=0.01))
        async with index:
            await index.put("PENDING", "o1")
        closed = shardex.ShardedIndex(SlowToOpen(throttled=3), "orders", PENDING8, seed=1,
                                      retry=shardex.RetryPolicy(attempts=3, base=0.01))
        with pytest.raises(shardex.Throttled, match="probe is throttled"):
            await closed.open()

    run_virtual(main())
