"""The reshard stateful test on memory:// (virtual time, injected throttles and timeouts).

``tests/reshard_machine.py`` describes the machine; ``test_reshard_dynamodb.py`` runs a
smaller one on DynamoDB Local in both modes.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

import shardex
from shardex.sim.clock import VirtualTimeLoop
from tests.reshard_machine import machine

OnMemory = machine(
    lambda seed: shardex.open_store("memory://", seed=seed, throttle_rate=0.05,
                                    ambiguous_rate=0.02),
    VirtualTimeLoop)
OnMemory.TestCase.settings = settings(
    max_examples=50, stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
TestReshardOnMemory = OnMemory.TestCase
