"""The one place the autopilot reaches the migration runner.

Today that runner is ``shardex.reshard`` (``Resharder`` and its pure state machine
``states``); the one migration workflow (``shardex.migrate``) replaces it, and only this
module changes then. The simulation's model of a migration (``autopilot.migration``)
drives the same ``states``, and its shadow runs (``shardex.scenarios.shadow``) drive the
same ``Runner``.
"""

from __future__ import annotations

from shardex.migrate.units import allocate
from shardex.reshard import DEFAULT_MARGIN, DEFAULT_MAX_AGE, DEFAULT_RATE, Resharder, states
from shardex.routing_record import DEFAULT_LEASE

__all__ = ["DEFAULT_LEASE", "DEFAULT_MARGIN", "DEFAULT_MAX_AGE", "DEFAULT_RATE", "Runner",
           "allocate", "states"]

Runner = Resharder
