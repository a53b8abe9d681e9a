"""The adaptive send rate (AIMD per shard key): pure decisions, and the gate on virtual time."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from shardex.admission import AdaptiveGate, AdaptiveRate, RateState
from shardex.errors import InvalidInput, InvalidPolicy, Throttled, Unavailable
from shardex.scenarios.hotkey import FleetRun, run_fleet
from shardex.sim.clock import run_virtual
from shardex.stores.memory import MemoryStore


def _steady(policy: AdaptiveRate, rate: float, seconds: float) -> tuple[RateState, float]:
    """Send at ``rate`` for ``seconds``; return the state and the time."""
    state, now = RateState(), 0.0
    for _ in range(int(rate * seconds)):
        delay, state = policy.send(state, now, 1.0)
        assert delay == 0.0
        now += 1.0 / rate
    return state, now


def test_a_key_is_not_paced_until_the_store_first_throttles_it() -> None:
    policy = AdaptiveRate(decrease=0.5)
    state, now = _steady(policy, 100, 5)
    assert state.rate is None
    assert policy.measured(state, now) == pytest.approx(100, rel=0.05)
    assert policy.succeeded(state, now) == state
    cut = policy.throttled(state, now)
    assert cut.rate == pytest.approx(50, rel=0.05)


def test_a_throttle_cuts_once_per_cooldown_and_never_below_the_floor() -> None:
    policy = AdaptiveRate(decrease=0.5, cooldown=0.2, floor=10)
    state = RateState(rate=100)
    state = policy.throttled(state, 1.0)
    assert state.rate == 50
    assert policy.throttled(state, 1.1) == state  # an answer to a request sent before the cut
    state = policy.throttled(state, 1.25)
    assert state.rate == 25
    for step in range(10):
        state = policy.throttled(state, 2.0 + step)
    assert state.rate == 10


def test_the_rate_rises_by_increase_a_second_without_throttles_up_to_the_ceiling() -> None:
    policy = AdaptiveRate(increase=20, ceiling=200)
    state = policy.throttled(RateState(rate=100), 0.0)  # 70
    state = policy.succeeded(state, 0.5)
    assert state.rate == pytest.approx(80)
    state = policy.succeeded(state, 2.0)
    assert state.rate == pytest.approx(110)
    state = policy.succeeded(state, 100.0)
    assert state.rate == 200


def test_a_paced_key_spaces_its_requests_by_cost_over_rate() -> None:
    policy = AdaptiveRate()
    state = RateState(rate=10)
    delays = []
    for cost in (1.0, 1.0, 2.0, 1.0):
        delay, state = policy.send(state, 5.0, cost)
        delays.append(delay)
    assert delays == pytest.approx([0.0, 0.1, 0.2, 0.4])
    delay, _ = policy.send(state, 6.0, 1.0)
    assert delay == 0.0


@pytest.mark.parametrize(("fields", "named"), [
    ({"increase": -1}, "increase"), ({"decrease": 0}, "decrease"), ({"decrease": 1}, "decrease"),
    ({"floor": 0}, "floor"), ({"ceiling": 0.5}, "ceiling"), ({"cooldown": -1}, "cooldown"),
    ({"smoothing": 0}, "smoothing"), ({"increase": "fast"}, "increase"),
])
def test_bad_adaptive_rates_are_refused_naming_the_field(fields: dict[str, Any],
                                                         named: str) -> None:
    with pytest.raises(InvalidPolicy, match=f"AdaptiveRate.{named}"):
        AdaptiveRate(**fields)


def test_the_gate_learns_from_outcomes_and_passes_errors_on() -> None:
    async def main() -> None:
        gate = AdaptiveGate(AdaptiveRate(decrease=0.5, floor=1))
        for _ in range(10):
            await gate.call("k#1", lambda: asyncio.sleep(0.01), cost=1)
        assert gate.rate("k#1") is None

        async def throttled() -> None:
            raise Throttled("k#1 throttled", key="k#1")

        async def unavailable() -> None:
            raise Unavailable("down")

        with pytest.raises(Throttled):
            await gate.call("k#1", throttled)
        paced = gate.rate("k#1")
        assert paced is not None
        with pytest.raises(Unavailable):
            await gate.call("k#1", unavailable)
        assert gate.rate("k#1") == paced
        assert gate.rates() == {"k#1": paced}
        assert gate.rate("other") is None
        with pytest.raises(InvalidInput, match="cost"):
            await gate.send("k#1", cost=0)

    run_virtual(main())


def test_a_fleet_of_gates_converges_on_a_partitions_ceiling() -> None:
    def fleet(adaptive: AdaptiveRate | None) -> FleetRun:
        # A write costs 2 of the partition's 1,000 units a second: 500 writes a second.
        # The key is its own partition (partitions=0): nothing else shares its ceiling.
        return run_virtual(run_fleet(MemoryStore(seed=3, partitions=0), adaptive=adaptive,
                                     clients=4, workers=8, duration=20.0, seed=3))

    plain, adaptive = fleet(None), fleet(AdaptiveRate())
    assert adaptive.wasted < 0.1 < plain.wasted
    assert adaptive.failed == 0
    assert adaptive.accepted_per_s > 0.8 * 500
    assert all(rate is not None for rate in adaptive.rates)
    assert 0.5 * 500 < sum(rate or 0.0 for rate in adaptive.rates) < 2 * 500


def test_a_fleet_needs_clients_writers_and_time() -> None:
    with pytest.raises(InvalidInput, match="clients"):
        run_virtual(run_fleet(MemoryStore(), adaptive=None, clients=0))
