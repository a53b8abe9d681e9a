"""The one place the autopilot reaches the migration runner.

Today that runner is ``shardex.reshard`` (``Resharder`` and its pure state machine
``states``); the one migration workflow (``shardex.migrate``) replaces it, and only this
module changes then. The simulation's model of a migration (``autopilot.migration``)
drives the same ``states``, and its shadow runs (``shardex.scenarios.shadow``) drive the
same ``Runner``; the loop (``autopilot.loop``) drives one ``Runner`` through every state,
one migration an index at a time (several keys may start together in one), and keeps
its own records as the runner keeps its work records (``Records``).
"""

from __future__ import annotations

from shardex.reshard import (
    DEFAULT_MARGIN,
    DEFAULT_MAX_AGE,
    DEFAULT_RATE,
    Resharder,
    RunResult,
    states,
)
from shardex.reshard.records import Records
from shardex.reshard.units import allocate
from shardex.routing_record import DEFAULT_LEASE

__all__ = ["DEFAULT_LEASE", "DEFAULT_MARGIN", "DEFAULT_MAX_AGE", "DEFAULT_RATE", "Records",
           "RunResult", "Runner", "allocate", "states"]

Runner = Resharder
