"""The autopilot's metrics, through the official Prometheus client (``prometheus-client``).

``AutopilotMetrics(index, registry)`` is the loop's ``Gauges``: it registers, in the
registry given (``serve_prometheus``'s, so the store's metrics and these are one
endpoint), with the label ``index``:

==========================================  =========================================
``shardex_autopilot_leader``                1 while this process holds the lease
``shardex_autopilot_paused``                1 while the autopilot is paused
``shardex_autopilot_decisions_total``       decisions made, by ``action``
``shardex_autopilot_actions_total``         actions taken, by ``action`` and ``outcome``
``shardex_autopilot_heat_write_units``      the last write units a second read, by
                                            ``value`` (the ``top`` hottest keys only)
``shardex_autopilot_migration_state``       1 for the state of the migration under way
                                            (label ``state``; ``stable`` with none)
``shardex_autopilot_last_tick_seconds``     wall time of the last decision (a stale
                                            value is a loop that stopped)
==========================================  =========================================

Needs ``pip install 'shardex[metrics]'`` (MissingDependency names it).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Protocol

from shardex.autopilot.policy import Decision
from shardex.errors import MissingDependency

__all__ = ["AutopilotMetrics", "Gauges", "NoGauges"]

_STATES = ("stable", "read-both", "write-new", "verified", "read-new", "retired")


def _client() -> Any:
    try:
        import prometheus_client
    except ImportError as exc:
        raise MissingDependency("prometheus-client", "metrics") from exc
    return prometheus_client


class Gauges(Protocol):
    """Where the loop reports (``AutopilotMetrics``, or ``NoGauges``)."""

    def leader(self, held: bool) -> None: ...

    def paused(self, paused: bool) -> None: ...

    def decided(self, decision: Decision) -> None: ...

    def acted(self, action: str, outcome: str) -> None: ...

    def heat(self, key: str, write_units: float) -> None: ...

    def migration(self, state: str | None) -> None: ...


class NoGauges:
    """Gauges that report nowhere."""

    def leader(self, held: bool) -> None: ...

    def paused(self, paused: bool) -> None: ...

    def decided(self, decision: Decision) -> None: ...

    def acted(self, action: str, outcome: str) -> None: ...

    def heat(self, key: str, write_units: float) -> None: ...

    def migration(self, state: str | None) -> None: ...


class AutopilotMetrics:
    """The loop's gauges and counters for index ``index`` in ``registry`` (see module)."""

    def __init__(self, index: str, registry: Any, *, top: int = 20) -> None:
        client = _client()
        self.index = index
        self._top = top
        labels = ["index"]
        self._leader = client.Gauge("shardex_autopilot_leader", "1 while this process "
                                    "holds the autopilot's leader lease", labels,
                                    registry=registry)
        self._paused = client.Gauge("shardex_autopilot_paused", "1 while the autopilot is "
                                    "paused", labels, registry=registry)
        self._decisions = client.Counter("shardex_autopilot_decisions",
                                         "Decisions the autopilot's policy made",
                                         [*labels, "action"], registry=registry)
        self._actions = client.Counter("shardex_autopilot_actions",
                                       "Actions the autopilot took, by outcome",
                                       [*labels, "action", "outcome"], registry=registry)
        self._heat = client.Gauge("shardex_autopilot_heat_write_units", "The last write "
                                  "units a second the autopilot read for a key",
                                  [*labels, "value"], registry=registry)
        self._state = client.Gauge("shardex_autopilot_migration_state", "1 for the state "
                                   "of the migration under way", [*labels, "state"],
                                   registry=registry)
        self._tick = client.Gauge("shardex_autopilot_last_tick_seconds", "Wall time of "
                                  "the autopilot's last decision", labels, registry=registry)
        self._heats: dict[str, float] = {}
        self.leader(False)
        self.paused(False)
        self.migration(None)

    def leader(self, held: bool) -> None:
        self._leader.labels(self.index).set(1 if held else 0)

    def paused(self, paused: bool) -> None:
        self._paused.labels(self.index).set(1 if paused else 0)

    def decided(self, decision: Decision) -> None:
        self._decisions.labels(self.index, decision.action).inc()
        self._tick.labels(self.index).set(time.time())

    def acted(self, action: str, outcome: str) -> None:
        self._actions.labels(self.index, action, outcome).inc()

    def heat(self, key: str, write_units: float) -> None:
        """Keep the ``top`` hottest keys' series; the coolest past them loses its series."""
        self._heats[key] = write_units
        if len(self._heats) > self._top:
            coolest = min(self._heats, key=lambda k: self._heats[k])
            del self._heats[coolest]
            with contextlib.suppress(KeyError):  # never set: nothing to remove
                self._heat.remove(self.index, coolest)
        if key in self._heats:
            self._heat.labels(self.index, key).set(write_units)

    def migration(self, state: str | None) -> None:
        for name in _STATES:
            self._state.labels(self.index, name).set(1 if name == (state or "stable") else 0)
