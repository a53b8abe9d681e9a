"""The adoption status document, ``shardex.adopt.status/1``: pure, from the routing and segments.

Fields: ``index``, ``store``, ``adoption_id``, ``state`` (``none``, ``dual-write``,
``read-new``, ``complete`` or ``rolled-back``), ``routing_version``, ``source`` (``kind``,
``name``, ``attribute``) and ``reads`` (``source`` or ``new``), ``values`` (per value
named or seen: its policy ``shards``/``strategy`` and ``items`` the backfill saw),
``progress`` (``segments``, ``segments_done``, ``segments_leased``, ``items_scanned``,
``items_updated``, ``items_raced``, ``items_unresolved``, ``items_remaining`` (the base
table's item count, as DynamoDB last counted it, less those scanned), ``rate`` (items a
second), ``eta_s``), ``parity`` (null or ``checked_at``, ``age_s``, ``entries``, the four
gap counts and ``examples``), ``ready_at``, ``retire_after``, ``drop_source``,
``dropped`` and ``next_steps``.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from shardex.adoption import Adoption, adoption_ready_at
from shardex.documents import rounded
from shardex.migrate.status import iso
from shardex.routing import Routing

__all__ = ["STATUS_SCHEMA", "adopt_next_steps", "status_document"]

STATUS_SCHEMA = "shardex.adopt.status/1"


def adopt_next_steps(adoption: Adoption | None, *, store: str, index: str, backfilled: bool,
                     stale: bool) -> list[str]:
    """The commands an operator runs next, in the order to consider them."""
    where = f"--store {shlex.quote(store)} --index {shlex.quote(index)}"

    def command(name: str, extra: str = "") -> str:
        return f"shardex adopt {name} {where}{extra}"

    if adoption is None or adoption.state == "rolled-back":
        source = ""
        if adoption is not None:
            source = (f" --from-gsi {adoption.source}" if adoption.kind == "gsi" else
                      f" --from-table {adoption.source} --base-table {adoption.base} "
                      f"--id-attribute {adoption.id_attribute} --sort-attribute "
                      f"{adoption.sort_attribute}") + f" --from-attribute {adoption.attribute}"
        return [command("start", source + " --set VALUE=N")]
    if adoption.state == "complete":
        return [] if adoption.dropped or not adoption.drop_source else [
            command("complete", " --drop-old-index")]
    if adoption.state == "read-new":
        return [command("complete", " [--retain DURATION] [--drop-old-index]"),
                command("rollback")]
    parity = adoption.parity
    if not backfilled:
        return [command("run"), command("rollback")]
    if parity is None or stale:
        return [command("verify"), command("rollback")]
    if not parity.clean:
        return [command("run"), command("verify"), command("rollback")]
    return [command("cutover"), command("rollback")]


def status_document(routing: Routing, segments: Sequence[Any], *, index: str, store: str,
                    lease: float, now: float, max_age: float, items: int) -> dict[str, Any]:
    """The ``shardex.adopt.status/1`` document of ``index`` at wall time ``now``.

    ``segments`` are the backfill's segment records; ``items`` the base table's count.
    """
    adoption = routing.adoption
    scanned = sum(s.scanned for s in segments)
    done = sum(1 for s in segments if s.done)
    finished = bool(segments) and done == len(segments)
    started = [s.started_at for s in segments if s.started_at is not None]
    saved = [s.saved_at for s in segments if s.saved_at is not None]
    elapsed = (max(saved) - min(started)) if started and saved else 0.0
    rate = scanned / elapsed if elapsed > 0 else None
    remaining = 0 if finished else max(0, items - scanned)
    seen: dict[str, int] = {}
    for segment in segments:
        for value, count in segment.values.items():
            seen[value] = seen.get(value, 0) + count
    parity = None if adoption is None else adoption.parity
    stale = parity is None or now - parity.checked_at > max_age
    doc: dict[str, Any] = {
        "schema": STATUS_SCHEMA, "index": index, "store": store,
        "adoption_id": None if adoption is None else adoption.id,
        "state": "none" if adoption is None else adoption.state,
        "routing_version": routing.version,
        "source": None if adoption is None else {
            "kind": adoption.kind, "name": adoption.source, "attribute": adoption.attribute},
        "reads": "new" if adoption is None or not adoption.reads_source else "source",
        "values": {value: {**routing.policy(value).to_dict(), "items": seen.get(value)}
                   for value in sorted(set(routing.overrides) | set(seen)
                                       | set(() if adoption is None else adoption.values))},
        "progress": {
            "segments": len(segments), "segments_done": done,
            "segments_leased": sum(1 for s in segments if s.leased_at(now)),
            "items_scanned": scanned, "items_updated": sum(s.updated for s in segments),
            "items_raced": sum(s.raced for s in segments),
            "items_unresolved": sum(s.unresolved for s in segments),
            "items_remaining": remaining, "rate": rate,
            "eta_s": 0.0 if finished else (remaining / rate if rate else None)},
        "parity": None if parity is None else {
            "checked_at": iso(parity.checked_at), "age_s": max(0.0, now - parity.checked_at),
            "entries": parity.entries, **parity.counts(),
            "examples": [gap.to_dict() for gap in parity.examples]},
        "ready_at": None if adoption is None else iso(adoption_ready_at(adoption, lease)),
        "retire_after": None if adoption is None else iso(adoption.retire_after),
        "drop_source": False if adoption is None else adoption.drop_source,
        "dropped": False if adoption is None else adoption.dropped,
        "next_steps": adopt_next_steps(adoption, store=store, index=index,
                                       backfilled=finished, stale=stale),
    }
    result: dict[str, Any] = rounded(doc)
    return result
