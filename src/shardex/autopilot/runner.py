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
           "DEFAULT_WORKERS", "MigrationState", "Migrations", "Records", "RunResult", "Runner",
           "allocate", "states"]

Runner = Resharder

# Work units the autopilot's runner moves at once: every source key of a migration of up
# to 16 keys, each at its share of the rate (``allocate``), where ``reshard run``'s one
# worker drains them one after another. A migration cures a hot key only once it ends,
# and one from 16 keys back to 1 took 16 times as long with one worker: on the
# simulator a square wave into a key of 50,000 entries was throttled 14.5% with one
# worker, 10.1% with a worker a source key.
DEFAULT_WORKERS = 16
