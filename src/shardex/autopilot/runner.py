"""The one place the autopilot reaches the migration runner.

The runner is ``shardex.migrate``'s: ``Resharder`` (as ``Runner``) and its pure state
machine ``states``, and ``Migrations``, the programmatic API (start a batch, step with a
bounded budget, state from the work records, rollback, complete) a loop may drive. The
simulation's model of a migration (``autopilot.migration``) drives the same ``states``,
and its shadow runs (``shardex.scenarios.shadow``) drive the same ``Runner``; the loop
(``autopilot.loop``) drives one ``Runner`` through every state, one migration an index
at a time (several keys may start together in one), and keeps its own records as the
runner keeps its work records (``Records``).
"""

from __future__ import annotations

from shardex.migrate import (
    DEFAULT_MARGIN,
    DEFAULT_MAX_AGE,
    DEFAULT_RATE,
    Migrations,
    MigrationState,
    Resharder,
    RunResult,
    states,
)
from shardex.migrate.units import allocate
from shardex.migrate.work import Records
from shardex.routing_record import DEFAULT_LEASE

__all__ = ["DEFAULT_LEASE", "DEFAULT_MARGIN", "DEFAULT_MAX_AGE", "DEFAULT_RATE",
           "MigrationState", "Migrations", "Records", "RunResult", "Runner", "allocate",
           "states"]

Runner = Resharder
