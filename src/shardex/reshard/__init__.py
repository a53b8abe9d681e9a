"""Online reshard: the names of ``shardex.migrate`` a reshard is driven by, kept importable."""

from __future__ import annotations

from shardex.migrate import (
    DEFAULT_MARGIN,
    DEFAULT_MAX_AGE,
    DEFAULT_RATE,
    DEFAULT_UNIT_LEASE,
    ORDER,
    UNTIL,
    Gap,
    IndexLayouts,
    Layouts,
    Parity,
    Progress,
    Resharder,
    RunResult,
    StartPlan,
    Transition,
    Unit,
    Until,
    ValuePlan,
    states,
    status_document,
)

__all__ = ["DEFAULT_MARGIN", "DEFAULT_MAX_AGE", "DEFAULT_RATE", "DEFAULT_UNIT_LEASE", "Gap",
           "IndexLayouts", "Layouts", "ORDER", "Parity", "Progress", "Resharder", "RunResult",
           "StartPlan", "Transition", "UNTIL", "Unit", "Until", "ValuePlan", "states",
           "status_document"]
