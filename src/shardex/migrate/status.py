"""The reshard status document, ``shardex.reshard.status/1``: pure, from the routing and units.

Fields: ``index``, ``store``, ``state``, ``direction``, ``reshard_id``,
``routing_version``, ``values`` (per value: ``from`` and ``to`` policies, ``moved``,
``remaining`` (null until the mover's plan exists), ``entries``), ``parity`` (null or
the last report: ``checked_at`` as ISO 8601 UTC, ``age_s``, ``entries``, the four gap
counts and ``examples``), ``units`` (``total``, ``done``, ``leased``), ``ready_at`` and
``retire_after`` (ISO 8601 or null) and ``next_steps`` (the commands to run next).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from shardex.documents import rounded
from shardex.migrate.states import ready_at, state_of
from shardex.migrate.units import Unit
from shardex.routing import Routing

__all__ = ["STATUS_SCHEMA", "iso", "next_steps", "status_document"]

STATUS_SCHEMA = "shardex.reshard.status/1"


def iso(wall: float | None) -> str | None:
    """Wall seconds as ISO 8601 UTC text (None stays None)."""
    if wall is None:
        return None
    return datetime.fromtimestamp(wall, UTC).isoformat(timespec="seconds").replace(
        "+00:00", "Z")


def next_steps(routing: Routing, *, store: str, index: str, stale: bool) -> list[str]:
    """The commands an operator runs next, in the order to consider them."""
    meta = routing.reshard
    where = f"--store {shlex.quote(store)} --index {shlex.quote(index)}"

    def command(name: str, extra: str = "") -> str:
        return f"shardex reshard {name} {where}{extra}"

    if meta is None:
        return []
    if meta.direction == "rollback" or routing.state == "retired":
        return [command("run", " --until done")]
    if routing.state == "verified":
        return [*([command("verify")] if stale else []), command("cutover"),
                command("rollback")]
    if routing.state == "read-new":
        return [command("complete"), command("rollback")]
    return [command("run"), command("rollback")]


def status_document(routing: Routing, units: Sequence[Unit], *, index: str, store: str,
                    lease: float, now: float, max_age: float) -> dict[str, Any]:
    """The ``shardex.reshard.status/1`` document of ``index`` at wall time ``now``."""
    meta = routing.reshard
    doc: dict[str, Any] = {"schema": STATUS_SCHEMA, "index": index, "store": store,
                           "state": state_of(routing), "routing_version": routing.version,
                           "direction": None, "reshard_id": None, "values": {},
                           "parity": None, "units": {"total": 0, "done": 0, "leased": 0},
                           "ready_at": None, "retire_after": None, "next_steps": []}
    if meta is None or routing.previous is None:
        out: dict[str, Any] = rounded(doc)
        return out
    current = [u for u in units if u.generation == meta.generation]
    planned = bool(current)
    for value in meta.values:
        mine = [u for u in units if u.value == value and u.direction == meta.direction]
        doc["values"][value] = {
            "from": routing.previous.policy(value).to_dict(),
            "to": routing.policy(value).to_dict(),
            "moved": sum(u.moved for u in mine),
            "remaining": sum(u.remaining for u in current if u.value == value)
            if planned else None,
            "entries": sum(u.entries for u in current if u.value == value) if planned else None,
        }
    parity = meta.parity
    if parity is not None:
        doc["parity"] = {"checked_at": iso(parity.checked_at),
                         "age_s": max(0.0, now - parity.checked_at),
                         "entries": parity.entries, **parity.counts(),
                         "examples": [gap.to_dict() for gap in parity.examples]}
    doc.update(
        direction=meta.direction, reshard_id=meta.id,
        units={"total": len(current), "done": sum(u.done for u in current),
               "leased": sum(1 for u in current if not u.done and u.owner is not None
                             and u.expires > now)},
        ready_at=iso(ready_at(routing, lease)), retire_after=iso(meta.retire_after),
        next_steps=next_steps(routing, store=store, index=index,
                              stale=parity is None or now - parity.checked_at > max_age))
    result: dict[str, Any] = rounded(doc)
    return result
