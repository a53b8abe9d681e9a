"""The one place the autopilot reaches the migration runner.

The runner is ``shardex.migrate``'s: ``Resharder`` (as ``Runner``) and its pure state
machine ``states``, and ``Migrations``, the programmatic API (start, step with a bounded
budget, state from the work records, rollback, complete) a loop drives. The simulation's
model of a migration (``autopilot.migration``) drives the same ``states``, and its shadow
runs (``shardex.scenarios.shadow``) drive the same ``Runner``.
"""

from __future__ import annotations

from shardex.migrate import (
           DEFAULT_MARGIN,
           DEFAULT_MAX_AGE,
           DEFAULT_RATE,
           Migrations,
           Resharder,
           states,
)
from shardex.migrate import MigrationState as MigrationState
from shardex.migrate.units import allocate
from shardex.routing_record import DEFAULT_LEASE

__all__ = ["DEFAULT_LEASE", "DEFAULT_MARGIN", "DEFAULT_MAX_AGE", "DEFAULT_RATE",
           "MigrationState", "Migrations", "Runner", "allocate", "states"]

Runner = Resharder
