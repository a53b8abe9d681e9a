"""The autopilot: live heat in, safe reshards out (DESIGN.md 6b).

- ``policy``: the pure decision per logical key (grow, shrink, isolate, admit, none),
  with hysteresis, a dead band, an interval per key, a cap on migrations under way,
  floors and ceilings on N; every decision carries its reason and inputs.
- ``heat``: a key's heat over the policy's sliding windows, kept as samples arrive.
- ``sizing``: N for a peak from the planner (``shardex.plan.plan_shards``), cached.
- ``migration``: what a migration costs and how long it takes, state by state, driven by
  the runner's own pure state machine (the simulation's model of a reshard).
- ``runner``: the one place the autopilot reaches the migration runner.
- ``loop``: ``Autopilot``, the loop over a live index (leader lease, heat source, the
  policy, the runner driven through every state, the audit log, pause, dry run);
  ``drive``: its pure choice of the runner's next step; ``records``: its lease, control,
  state and log records in the index's store; ``sources``: where it reads heat
  (Prometheus, the meter, a file); ``metrics``: its Prometheus metrics.

``shardex simulate --autopilot`` runs the policy against the rate-level simulator on a
day of load (``shardex.scenarios.autopilot``); docs/autopilot.md has the figures.
"""

from __future__ import annotations

from shardex.autopilot.drive import NextMove, next_move
from shardex.autopilot.heat import HeatWindow
from shardex.autopilot.loop import Autopilot
from shardex.autopilot.policy import (
    ACTIONS,
    MAX_FLAPS,
    Action,
    Decision,
    KeyHeat,
    KeyView,
    MigrationView,
    Sizer,
    TableFacts,
    decide,
    flaps_after,
    guard,
    shrink_wait,
)
from shardex.autopilot.records import AutopilotRecords, Control, Lease, LogEntry, State
from shardex.autopilot.settings import AutopilotPolicy, load_policy
from shardex.autopilot.sizing import PlannerSizer, mode_of
from shardex.autopilot.sources import (
    BadHeatLines,
    FileHeat,
    HeatSample,
    HeatSource,
    MeterHeat,
    PrometheusHeat,
)

__all__ = [
    "ACTIONS",
    "Action",
    "Autopilot",
    "AutopilotPolicy",
    "AutopilotRecords",
    "BadHeatLines",
    "Control",
    "Decision",
    "FileHeat",
    "HeatSample",
    "HeatSource",
    "HeatWindow",
    "KeyHeat",
    "KeyView",
    "Lease",
    "LogEntry",
    "MAX_FLAPS",
    "MeterHeat",
    "MigrationView",
    "NextMove",
    "PlannerSizer",
    "PrometheusHeat",
    "Sizer",
    "State",
    "TableFacts",
    "decide",
    "flaps_after",
    "guard",
    "load_policy",
    "mode_of",
    "next_move",
    "shrink_wait",
]
