"""A migration's status documents: pure, from the routing and the work records.

``shardex.reshard.status/1`` (``status_document``): ``index``, ``store``, ``state``,
``direction``, ``reshard_id``, ``routing_version``, ``values`` (per value: ``from`` and
``to`` policies, ``total``, ``moved``, ``remaining`` (null until the mover's plan
exists), ``entries`` (surveyed by the current plan)), ``total``/``moved``/``remaining``
over every value (the total fixed when the direction's first plan was made, the counts
from the unit records), ``parity``
(null or the last report: ``checked_at`` as ISO 8601 UTC, ``age_s``, ``entries``, the
four gap counts and ``examples``), ``units`` (``total``, ``done``, ``leased``),
``runners`` (each worker holding a lease now: ``owner``, ``units``, ``expires_at``,
and ``waiting``: null, or with the controls (``with_controls``) what a runner that
holds no unit waits for between steps, ``expires_at`` its mark's),
``ready_at`` and ``retire_after`` (ISO 8601 or null) and ``next_steps``.

``shardex.adopt.status/1`` (``adopt_status_document``): ``index``, ``store``,
``adoption_id``, ``state`` (``none``, ``dual-write``, ``read-new``, ``complete`` or
``rolled-back``), ``routing_version``, ``source`` (``kind``, ``name``, ``attribute``)
and ``reads`` (``source`` or ``new``), ``values`` (per value named or seen: its policy
``shards``/``strategy`` and ``items`` the backfill saw), ``progress`` (``segments``,
``segments_done``, ``segments_leased``, ``items_total`` (the base table's item count
fixed when the backfill was planned, null before), ``items_scanned``,
``items_updated``, ``items_raced``, ``items_unresolved``, ``items_remaining``, ``rate``
(items a second, over the backfill so far), ``eta_s`` (at that rate; null while no runner
works)), ``runners``, ``parity``, ``ready_at``, ``retire_after``,
``drop_source``, ``dropped`` and ``next_steps``.

Next steps never suggest ``run`` while a runner holds a lease, or (``with_controls``)
waits between steps: they suggest watching it.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from shardex.adoption import Adoption
from shardex.documents import rounded
from shardex.migrate.states import ready_at, state_of
from shardex.migrate.units import Backfilled, Unit, tally
from shardex.migrate.work import Claim, Runner, runners
from shardex.routing import Routing
from shardex.transition import Parity

__all__ = ["ADOPT_STATUS_SCHEMA", "STATUS_SCHEMA", "adopt_next_steps",
           "adopt_status_document", "held_by_others", "iso", "next_steps", "resume_first",
           "status_document", "with_controls"]

STATUS_SCHEMA = "shardex.reshard.status/1"
ADOPT_STATUS_SCHEMA = "shardex.adopt.status/1"


def iso(wall: float | None) -> str | None:
    """Wall seconds as ISO 8601 UTC text (None stays None)."""
    if wall is None:
        return None
    return datetime.fromtimestamp(wall, UTC).isoformat(timespec="seconds").replace(
        "+00:00", "Z")


def _commands(verb: str, store: str, index: str, steps: list[tuple[str, str]],
              tiers: Mapping[str, str] | None = None) -> list[str]:
    """``steps`` as commands on ``index`` of ``store``, each naming every tier's store as
    ``--tier NAME=URI`` (a command of a reshard into a tier is refused without it)."""
    where = f"--store {shlex.quote(store)} --index {shlex.quote(index)}" + "".join(
        f" --tier {shlex.quote(f'{tier}={uri}')}" for tier, uri in (tiers or {}).items())
    return [f"shardex {verb} {name} {where}{extra}" for name, extra in steps]


def _watching(steps: list[tuple[str, str]], running: bool) -> list[tuple[str, str]]:
    """``steps`` with ``run`` replaced by watching the runner that holds the work now."""
    if not running:
        return steps
    # the runner takes the next step itself (a cutover, a complete once the window has
    # passed): watching it comes first, whatever the step
    watched = [("status", " --watch") if name == "run" else (name, extra)
               for name, extra in steps]
    return watched if ("status", " --watch") in watched else [("status", " --watch"),
                                                               *watched]


def resume_first(doc: dict[str, Any], kind: str) -> dict[str, Any]:
    """``doc``, a status document with its ``controls``, with ``resume`` leading its next
    steps while the controls pause the movers and a step would move entries (``run``, or
    watching a runner): until then no runner moves any, running or started. A paused
    runner holds no unit, but it keeps its slice of the budget (at 0): while one does,
    watching it replaces starting another."""
    controls, steps = doc.get("controls"), doc["next_steps"]
    run, watch = f"shardex {kind} run ", f"shardex {kind} status "
    if not (controls and controls["paused"]
            and any(step.startswith((run, watch)) for step in steps)):
        return doc
    if controls.get("budget", {}).get("slices"):
        steps = _watched(doc, kind)
    doc["next_steps"] = [*_commands(kind, doc["store"], doc["index"], [("resume", "")],
                                    doc.get("tiers")), *steps]
    return doc


def _watched(doc: dict[str, Any], kind: str) -> list[str]:
    """``doc``'s next steps with ``run`` replaced by watching the runner there is."""
    run = f"shardex {kind} run "
    watch = _commands(kind, doc["store"], doc["index"], [("status", " --watch")],
                      doc.get("tiers"))[0]
    return list(dict.fromkeys([watch, *(watch if step.startswith(run) else step
                                        for step in doc["next_steps"])]))


def with_controls(doc: dict[str, Any], controls: dict[str, Any] | None, kind: str, *,
                  gone: str | None = None) -> dict[str, Any]:
    """``doc`` with its migration's ``controls`` (``migration_status``): the runners
    waiting between steps (their marks in the budget record, but ``gone``'s) listed as
    runners, with what they wait for, and watched rather than ``run`` again; ``resume``
    first while the controls pause the movers (``resume_first``)."""
    doc["controls"] = controls
    waits = [] if controls is None else controls["budget"].get("waits", [])
    listed = {runner["owner"] for runner in doc["runners"]}
    added = [{"owner": w["owner"], "units": [], "expires_at": iso(w["expires"]),
              "waiting": w["reason"]}
             for w in waits if w["owner"] != gone and w["owner"] not in listed]
    if added:
        doc["runners"] = sorted([*doc["runners"], *added], key=lambda r: r["owner"])
        doc["next_steps"] = _watched(doc, kind)
    return resume_first(doc, kind)


def held_by_others(units: Sequence[Unit], now: float, worker: str) -> str | None:
    """Why runner ``worker`` moves nothing at wall time ``now`` while units are left: every
    one is leased by other runners (one killed by SIGKILL holds its lease till it lapses);
    None if it holds one or one is free. The run's output had said "moving entries", 0 a
    second."""
    left = [u for u in units if not u.done]
    if not left or any(u.free(now) or u.owner == worker for u in left):
        return None
    last = max(left, key=lambda u: u.expires)
    owners = ", ".join(sorted({u.owner for u in left if u.owner is not None}))
    return (f"waiting: the {len(left)} unit(s) left are leased by {owners} (until "
            f"{iso(last.expires)} unless renewed: a runner that stopped lets its lease "
            "lapse then, and this one takes its units over)")


def _parity(parity: Parity | None, now: float) -> dict[str, Any] | None:
    if parity is None:
        return None
    return {"checked_at": iso(parity.checked_at), "age_s": max(0.0, now - parity.checked_at),
            "entries": parity.entries, **parity.counts(),
            "examples": [gap.to_dict() for gap in parity.examples]}


def _runners(found: list[Runner]) -> list[dict[str, Any]]:
    return [{"owner": r.owner, "units": list(r.units), "expires_at": iso(r.expires),
             "waiting": None} for r in found]


def _retained(retire_after: float | None, now: float | None) -> str:
    """What a ``complete`` step says while a retention window runs (``complete`` changes
    nothing before ``retire_after``): from when it does something."""
    if retire_after is None or now is None or now >= retire_after:
        return ""
    return f" (from {iso(retire_after)}, when the retention ends)"


def next_steps(routing: Routing, *, store: str, index: str, stale: bool,
               running: bool = False, tiers: Mapping[str, str] | None = None,
               now: float | None = None) -> list[str]:
    """The commands an operator runs next, in the order to consider them (``running``:
    a runner holds work now, so watch it rather than start another; ``tiers``: the tier
    stores each command names, ``--tier NAME=URI``; ``now``: wall time, to say when a
    retention window ends)."""
    meta = routing.reshard
    if meta is None:
        return []
    steps: list[tuple[str, str]] = [("run", ""), ("rollback", "")]
    if meta.direction == "rollback" or routing.state == "retired":
        steps = [("run", " --until done")]
    elif routing.state == "verified":
        steps = [*([("verify", "")] if stale else []), ("cutover", ""), ("rollback", "")]
    elif routing.state == "read-new":
        steps = [("complete", _retained(meta.retire_after, now)), ("rollback", "")]
    return _commands("reshard", store, index, _watching(steps, running), tiers)


def status_document(routing: Routing, units: Sequence[Unit], *, index: str, store: str,
                    lease: float, now: float, max_age: float,
                    gone: str | None = None,
                    tiers: Mapping[str, str] | None = None,
                    sweeps: tuple[int, Sequence[Claim]] | None = None) -> dict[str, Any]:
    """The ``shardex.reshard.status/1`` document of ``index`` at wall time ``now``;
    ``gone`` names a worker that has stopped (a run cut short): its leases, which lapse
    unused, neither count as a runner nor keep ``run`` out of the next steps. ``tiers``:
    the tier stores as the caller names them (name to URI), which every next step names.
    ``sweeps``: in ``retired``, the keys the sweep sweeps and the claims of those begun
    (``Resharder.sweeps``)."""
    meta = routing.reshard
    doc: dict[str, Any] = {"schema": STATUS_SCHEMA, "index": index, "store": store,
                           "tiers": dict(tiers or {}),
                           "state": state_of(routing), "routing_version": routing.version,
                           "direction": None, "reshard_id": None, "values": {},
                           "total": None, "moved": 0, "remaining": None,
                           "parity": None, "units": {"total": 0, "done": 0, "leased": 0},
                           "runners": [], "ready_at": None, "retire_after": None,
                           "sweep": None, "adoption": None, "next_steps": []}
    if meta is None or routing.previous is None:
        adoption = routing.adoption
        if adoption is not None and adoption.active:
            # no reshard, but not a stable index either: one begins once the adoption ends
            doc["adoption"] = {"id": adoption.id, "stage": adoption.stage}
            doc["next_steps"] = _commands("adopt", store, index, [("status", "")])
        out: dict[str, Any] = rounded(doc)
        return out
    current = [u for u in units if u.generation == meta.generation]
    for value in meta.values:
        total, moved, remaining = tally([u for u in units if u.value == value],
                                        meta.direction)
        here = [u for u in current if u.value == value]
        doc["values"][value] = {"from": routing.previous.policy(value).to_dict(),
                                "to": routing.policy(value).to_dict(), "total": total,
                                "moved": moved, "remaining": remaining,
                                "entries": sum(u.entries for u in here) if current else None}
    total, moved, remaining = tally(list(units), meta.direction)
    active = runners(current, now, gone)
    doc.update(
        direction=meta.direction, reshard_id=meta.id, total=total, moved=moved,
        remaining=remaining, parity=_parity(meta.parity, now), runners=_runners(active),
        units={"total": len(current), "done": sum(u.done for u in current),
               "leased": sum(u.leased_at(now) for u in current)},
        ready_at=iso(ready_at(routing, lease)), retire_after=iso(meta.retire_after),
        sweep=None if sweeps is None or routing.state != "retired" else {
            "keys": sweeps[0], "swept": sum(c.done for c in sweeps[1]),
            "sweeping": sum(not c.done and c.expires > now for c in sweeps[1])},
        next_steps=next_steps(routing, store=store, index=index, running=bool(active),
                              stale=meta.parity is None
                              or now - meta.parity.checked_at > max_age, tiers=tiers,
                              now=now))
    result: dict[str, Any] = rounded(doc)
    return result


def adopt_next_steps(adoption: Adoption | None, *, store: str, index: str, backfilled: bool,
                     stale: bool, running: bool = False, now: float | None = None
                     ) -> list[str]:
    """The commands an operator runs next, in the order to consider them (``now`` as
    ``next_steps``')."""
    steps: list[tuple[str, str]] = [("cutover", ""), ("rollback", "")]
    parity = None if adoption is None else adoption.migration.parity
    if adoption is None or adoption.stage == "rolled-back":
        # what start needs (it refuses a start without them): placeholders when no
        # adoption of the index was recorded to name them
        source = " --from-gsi INDEX --from-attribute ATTRIBUTE"
        if adoption is not None:
            source = (f" --from-gsi {adoption.source}" if adoption.kind == "gsi" else
                      f" --from-table {adoption.source} --base-table {adoption.base} "
                      f"--id-attribute {adoption.id_attribute} --sort-attribute "
                      f"{adoption.sort_attribute}") + f" --from-attribute {adoption.attribute}"
        steps = [("start", source + " --set VALUE=N")]
    elif adoption.stage == "complete":  # the old index is the operator's to drop
        steps = [] if adoption.dropped else [("complete", " --drop-old-index")]
    elif adoption.stage == "read-new":
        retained = _retained(adoption.migration.retire_after, now)
        steps = [("complete", retained or " [--retain DURATION] [--drop-old-index]"),
                 ("rollback", "")]
    elif not backfilled:
        steps = [("run", ""), ("rollback", "")]
    elif parity is None or stale:
        steps = [("verify", ""), ("rollback", "")]
    elif not parity.clean:
        steps = [("run", ""), ("verify", ""), ("rollback", "")]
    return _commands("adopt", store, index, _watching(steps, running))


def past_count(total: int) -> str:
    """What a backfill that scanned more than ``total`` items (the table's item count when
    it was planned) says of that count."""
    return (f"more than the {total:,} items the table counted when the backfill was planned "
            "(DynamoDB refreshes that count about every six hours)")


def adopt_status_document(routing: Routing, segments: Sequence[Unit], *, index: str,
                          store: str, lease: float, now: float, max_age: float,
                          items: int | None, gone: str | None = None) -> dict[str, Any]:
    """The ``shardex.adopt.status/1`` document of ``index`` at wall time ``now``.

    ``segments`` are the backfill's segment records; ``items`` the item count fixed when
    the backfill was planned (None: not planned yet); ``gone`` as ``status_document``'s.
    """
    adoption = routing.adoption
    counts = Backfilled.of(list(segments))
    scanned, finished = counts.scanned, counts.finished
    started = [s.started_at for s in segments if s.started_at is not None]
    saved = [s.saved_at for s in segments if s.saved_at is not None]
    elapsed = (max(saved) - min(started)) if started and saved else 0.0
    rate = scanned / elapsed if elapsed > 0 else None
    # past the count (DescribeTable's, which DynamoDB refreshes about every six hours, on a
    # table that grew since): how many remain is not known
    remaining = 0 if finished else None if items is None or scanned >= items \
        else items - scanned
    seen: dict[str, int] = {}
    for segment in segments:
        for value, count in segment.values.items():
            seen[value] = seen.get(value, 0) + count
    meta = None if adoption is None else adoption.migration
    parity = None if meta is None else meta.parity
    active = runners(list(segments), now, gone)
    doc: dict[str, Any] = {
        "schema": ADOPT_STATUS_SCHEMA, "index": index, "store": store,
        "adoption_id": None if adoption is None else adoption.id,
        "state": "none" if adoption is None else adoption.stage,
        "routing_version": routing.version,
        "source": None if adoption is None else {
            "kind": adoption.kind, "name": adoption.source, "attribute": adoption.attribute},
        "reads": "new" if adoption is None or not adoption.reads_source else "source",
        "values": {value: {**routing.policy(value).to_dict(), "items": seen.get(value)}
                   for value in sorted(set(routing.overrides) | set(seen)
                                       | set(() if meta is None else meta.values))},
        "progress": {
            "segments": counts.segments, "segments_done": counts.done,
            "segments_leased": sum(1 for s in segments if s.leased_at(now)),
            "items_total": items, "items_scanned": scanned, "items_updated": counts.updated,
            "items_raced": counts.raced, "items_unresolved": counts.unresolved,
            "items_remaining": remaining, "rate": rate,
            # at the rate so far, while a runner works (with none, nothing moves)
            "eta_s": 0.0 if finished else (remaining / rate if rate and active
                                           and remaining is not None else None)},
        "runners": _runners(active), "parity": _parity(parity, now),
        "ready_at": None if adoption is None else iso(ready_at(adoption, lease)),
        "retire_after": None if meta is None else iso(meta.retire_after),
        "drop_source": False if adoption is None else adoption.drop_source,
        "dropped": False if adoption is None else adoption.dropped,
        "next_steps": adopt_next_steps(
            adoption, store=store, index=index, backfilled=finished, running=bool(active),
            stale=parity is None or now - parity.checked_at > max_age, now=now),
    }
    result: dict[str, Any] = rounded(doc)
    return result
