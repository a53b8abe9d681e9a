"""What the store says of an index while the page runs: its routing record and migration.

``RoutingWatch(uri, index)`` reads, at most every ``every`` seconds, the routing record
of ``index`` in the store at ``uri`` and, while a reshard is recorded there, its work
units and controls: the migration's state, entries moved and remaining, the last parity
check, whether its movers are paused (or their rate) and the next steps
(``shardex.reshard.status/1``, abridged). These come from the store, not from a runner's
metrics, so the page keeps them when a runner exits. Each read opens the store as a
short-lived client and only reads (``get_record`` and listings).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["RoutingWatch"]

_MAX_AGE = 900.0  # seconds past which a parity report counts as stale, as `reshard status`


class RoutingWatch:
    """The routing record and migration of ``index`` in the store at ``uri`` (see module)."""

    def __init__(self, uri: str, index: str, *, every: float = 5.0,
                 options: Mapping[str, Any] | None = None,
                 tiers: Mapping[str, str] | None = None) -> None:
        self._uri = uri
        self._index = index
        self._tiers = dict(tiers or {})  # the tier stores the next steps name
        self._every = every
        self._options = dict(options or {})
        self._read_at = -float("inf")
        self._last: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def read(self) -> dict[str, Any] | None:
        """The last reading, read again when it is ``every`` seconds old.

        Raises the store's error (a ShardexError) when it cannot be read.
        """
        with self._lock:
            if time.monotonic() - self._read_at < self._every:
                return self._last
            self._read_at = time.monotonic()
            self._last = asyncio.run(self._fetch())
            return self._last

    async def _fetch(self) -> dict[str, Any]:
        from shardex.migrate.budget import migration_status
        from shardex.migrate.work import WorkRecords
        from shardex.routing_record import RoutingRecord
        from shardex.stores import open_store

        store = open_store(self._uri, **self._options)
        async with store:
            stored, _, lease = await RoutingRecord(store, self._index).read()
            if stored is None:
                return {"index": self._index, "stored": False, "migration": None}
            units, controls = [], None
            if stored.reshard is not None:
                records = WorkRecords(store, self._index, stored.reshard.id, clock=store.clock)
                units = [unit for unit, _ in (await records.units()).values()]
                controls = await migration_status(store, self._index, stored.reshard.id,
                                                  clock=store.clock)
            now = store.clock.wall()
        previous = stored.previous
        status = _page_status(stored, units, controls, index=self._index, uri=self._uri,
                             lease=lease, now=now, tiers=self._tiers)
        return {"index": self._index, "stored": True, "version": stored.version,
                "in_transition": previous is not None,
                "from_version": None if previous is None else previous.version,
                "overrides": {v: p.shards for v, p in stored.overrides.items()},
                "previous_overrides": None if previous is None else {
                    v: p.shards for v, p in previous.overrides.items()},
                "migration": _migration(status)}


def _page_status(stored: Any, units: list[Any], controls: dict[str, Any] | None, *,
                index: str, uri: str, lease: float, now: float,
                tiers: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The reshard's status document as ``reshard status`` makes it: with its controls,
    a runner waiting between steps listed, and the next steps that follow (naming the
    ``tiers``' stores)."""
    from shardex.migrate.status import with_controls
    from shardex.reshard import status_document

    return with_controls(status_document(stored, units, index=index, store=uri, lease=lease,
                                         now=now, max_age=_MAX_AGE, tiers=tiers), controls,
                         "reshard")


def _migration(status: dict[str, Any]) -> dict[str, Any] | None:
    """The status document, abridged to what the page shows (None: no reshard recorded)."""
    if status["reshard_id"] is None:
        return None
    values = status["values"]
    remaining = [v["remaining"] for v in values.values()]
    parity = status["parity"]
    return {"reshard_id": status["reshard_id"], "state": status["state"],
            "direction": status["direction"],
            "values": {value: {"from": v["from"]["shards"], "to": v["to"]["shards"],
                               "from_tier": v["from"].get("tier"),
                               "to_tier": v["to"].get("tier")}
                       for value, v in values.items()},
            "moved": sum(v["moved"] for v in values.values()),
            "remaining": None if None in remaining else sum(remaining),
            "units": status["units"],
            "parity": None if parity is None else {
                k: parity[k] for k in ("checked_at", "age_s", "entries", "missing", "extra",
                                       "misplaced", "mismatched")},
            "controls": status["controls"]["summary"] if status["controls"]
            and status["controls"]["recorded"] else None,
            "next_steps": status["next_steps"]}
