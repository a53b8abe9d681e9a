"""Admission control: per-key budgets in front of the store, and an adaptive client rate.

- ``Budget`` and ``AdmissionPolicy`` (``policy``): pure decisions, per logical key.
- ``LocalBudgets`` and ``SharedBudgets`` (``budgets``): where the budgets' usage is kept,
  in this process or in Redis for a fleet.
- ``Admission`` (``admit``): ``await admission.admit(value, units=..., op=..., priority=...)``.
- ``AdaptiveRate`` and ``AdaptiveGate`` (``adaptive``): AIMD pacing per shard key.
"""

from __future__ import annotations

from shardex.admission.adaptive import AdaptiveGate, AdaptiveRate, RateState
from shardex.admission.admit import Admission, AdmissionCounts
from shardex.admission.budgets import BudgetState, LocalBudgets, SharedBudgets, moving_window
from shardex.admission.policy import (
    ADMISSION_FORMAT,
    PRIORITIES,
    AdmissionPolicy,
    Budget,
    Grant,
    Mode,
    Op,
    Priority,
)

__all__ = [
    "ADMISSION_FORMAT",
    "AdaptiveGate",
    "AdaptiveRate",
    "Admission",
    "AdmissionCounts",
    "AdmissionPolicy",
    "Budget",
    "BudgetState",
    "Grant",
    "LocalBudgets",
    "Mode",
    "Op",
    "PRIORITIES",
    "Priority",
    "RateState",
    "SharedBudgets",
    "moving_window",
]
