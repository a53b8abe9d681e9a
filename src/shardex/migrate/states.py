"""The migration state machine: pure decisions from the routing, the time and what is done.

One set of states serves both kinds of layout change (``shardex.transition.Kind``): a
``move`` (a reshard, a tier move: ``ORDER``) and a ``copy`` (an adoption, whose
from-layout is the application's plain index and every item sits on both at once:
``COPY_ORDER``, a ``Transition`` of kind ``copy`` in ``Routing.adoption``; see
``shardex.adoption`` for its conduct). No I/O.

``begin`` makes the first routing of a reshard, ``next_step`` says what the runner
does next (wait, change the state, run the mover, verify, sweep, or stop),
``after_verify`` folds a parity report into the routing, ``reverse`` turns a reshard
into its rollback. ``begin_copy`` starts an adoption, ``copy_to`` takes it to its next
state, and the ``copy_*_refusal`` functions say why a step of it cannot be taken. Every
routing returned is one version later than the one given; the runner stores it with a
compare-and-set.

A state change that changes what clients do (the layout writes follow, or the keys reads
cover: ``conduct``) stamps ``changed_at``; the next such change, and the mover, may
start only at ``ready_at``: ``changed_at`` plus the routing's lease plus the reshard's
margin. Changes that leave the conduct as it was (recording a parity report, entering
``verified``, a rollback that swaps the labels of the same conduct) need no wait.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, Literal, NamedTuple, cast

from shardex.adoption import COPY_STATES, Adoption, CopyState
from shardex.errors import InvalidKey, InvalidRouting, brief
from shardex.keys import validate_value
from shardex.routing import Routing, ShardPolicy, State, begin_transition
from shardex.transition import Parity, Transition

__all__ = ["Advance", "COPY_ORDER", "Drop", "Move", "ORDER", "Refused", "Step", "Stop", "Sweep",
           "UNTIL", "Until", "Verify", "Wait", "after_verify", "begin", "begin_copy",
           "changed_values", "conduct", "copy_complete_step", "copy_cutover_refusal",
           "copy_rollback_refusal", "copy_start_refusal", "copy_to", "cutover_refusal", "finish",
           "next_step", "ready_at", "reverse", "rollback_refusal", "rollback_step", "state_of",
           "with_adoption", "with_retention"]

Until = Literal["read-both", "write-new", "verified", "read-new", "retired", "done"]
# the states of a reshard in the order it passes them; "done" is stable on the target
ORDER: tuple[str, ...] = ("read-both", "write-new", "verified", "read-new", "retired", "done")
UNTIL: tuple[str, ...] = ORDER
# the states of a copy in the order it passes them (the backfill runs in write-new); its
# rollback goes straight to "done", readers back on the plain index
COPY_ORDER: tuple[str, ...] = COPY_STATES
# states in which the mover may move entries (writers follow the target layout)
MOVING = frozenset({"write-new", "verified"})


class Wait(NamedTuple):
    """Nothing to do before ``until`` (wall seconds); ``why`` says what is awaited."""

    until: float
    why: str


class Advance(NamedTuple):
    """Store ``routing`` (compare-and-set on the routing record)."""

    routing: Routing
    why: str


class Move(NamedTuple):
    """Run the mover for the reshard's current generation until every unit is done."""


class Verify(NamedTuple):
    """Check parity and fold the report in with ``after_verify``."""


class Sweep(NamedTuple):
    """Move anything still on the keys only the layout being left has (``retired``)."""


class Drop(NamedTuple):
    """Drop the plain index a complete adoption left, then store ``routing`` (it says so)."""

    routing: Routing


class Stop(NamedTuple):
    """The runner stops here: ``reached`` is the state it ended in, ``why`` the reason."""

    reached: str
    why: str


Step = Wait | Advance | Move | Verify | Sweep | Stop


class Refused(NamedTuple):
    """A step the operator asked for cannot be taken now: ``why``, and what to run."""

    why: str


def _layout(routing: Routing) -> tuple[ShardPolicy, tuple[tuple[str, ShardPolicy], ...]]:
    return routing.default, tuple(routing.overrides.items())


def conduct(routing: Routing) -> tuple[object, frozenset[object], object]:
    """What clients do under ``routing``: the layout writes follow, the layouts reads cover,
    and the layout a mover may move entries toward (None: no mover may move).

    Readers read the layout entries move toward after the other one
    (``Routing.read_phases``), so a change of the movers' direction is a change of
    conduct too, and waits like one.
    """
    reads = {_layout(routing)}
    if routing.previous is not None and routing.state in ("read-both", "write-new", "verified"):
        reads.add(_layout(routing.previous))
    moves = _layout(routing.writing) if routing.state in MOVING else None
    return _layout(routing.writing), frozenset(reads), moves


def ready_at(routing: Routing | Adoption, lease: float) -> float:
    """Wall seconds from which every client acts on the last change of conduct (of the
    reshard in a routing, or of an adoption)."""
    meta = routing.migration if isinstance(routing, Adoption) else _meta(routing)
    return meta.changed_at + lease + meta.margin


def state_of(routing: Routing) -> State:
    """The routing's state (a Routing always has one once built)."""
    return cast(State, routing.state)


def _meta(routing: Routing) -> Transition:
    if routing.reshard is None:
        raise InvalidRouting(f"routing version {routing.version} has no reshard under way")
    return routing.reshard


def _next(routing: Routing, state: State, now: float, meta: Transition | None = None
          ) -> Routing:
    """``routing`` one version later in ``state`` with ``meta`` (default: its own).

    ``changed_at`` is stamped ``now`` if the conduct of clients changes.
    """
    meta = meta or _meta(routing)
    moved = dataclasses.replace(routing, state=state, version=routing.version + 1)
    stamp = now if conduct(moved) != conduct(routing) else meta.changed_at
    return dataclasses.replace(moved, reshard=dataclasses.replace(meta, changed_at=stamp))


def changed_values(current: Routing, target: Routing, values: Iterable[str]) -> list[str]:
    """The logical keys whose policy differs between the layouts: overrides and ``values``."""
    named = set(current.overrides) | set(target.overrides) | set(values)
    return sorted(v for v in named if current.policy(v) != target.policy(v))


def _named(values: Iterable[str]) -> list[str]:
    """``values`` as a list of logical keys; InvalidRouting for one string (it would be
    read letter by letter) or a name that is no logical key."""
    if isinstance(values, str | bytes):
        raise InvalidRouting(f"values is a list of logical keys, got the string {values!r} "
                             f"(values=[{values!r}] names one)")
    named = list(values)
    for value in named:
        try:
            validate_value(value)
        except InvalidKey as exc:
            raise InvalidRouting(f"values: {brief(value)} is no logical key: {exc}") from None
    return named


def begin(current: Routing, changes: Mapping[str, ShardPolicy | None], *,
          default: ShardPolicy | None, values: Iterable[str], reshard_id: str,
          now: float, margin: float) -> Routing:
    """The first routing of a reshard: ``read-both`` toward ``current`` with ``changes``.

    ``values`` names logical keys that follow the default and hold entries, when the
    default changes (the store cannot list the values an index holds). Raises
    InvalidRouting if a reshard is under way or nothing would change.
    """
    if current.in_transition:
        raise InvalidRouting(f"routing version {current.version} is already in a transition")
    target = begin_transition(current, changes, default=default)
    moving = changed_values(current, target, _named(values))
    if not moving:
        if target.default != current.default:
            raise InvalidRouting(
                "no value changes: the default does, but no value named (--value, values=) "
                "follows it; name each value that follows the default and holds entries "
                "(the store cannot list them), and the reshard moves them")
        raise InvalidRouting("the layout asked for is the one in use: no value changes")
    meta = Transition(id=reshard_id, started_at=now, changed_at=now, margin=margin,
                      values=tuple(moving))
    return dataclasses.replace(target, reshard=meta)


def _at(state: str) -> int:
    return ORDER.index("done" if state == "stable" else state)


def next_step(routing: Routing, *, now: float, lease: float, until: Until,
              mover_done: bool, swept: bool, max_age: float) -> Step:
    """What the runner does next with a reshard in ``routing``, stopping at ``until``.

    ``mover_done`` says every work unit of the current generation is done, ``swept``
    that the ``retired`` sweep found nothing left; ``max_age`` bounds the age (seconds)
    of the parity report a cutover relies on.
    """
    if routing.reshard is None:
        return Stop("done", "no reshard is under way: the routing is stable")
    state = state_of(routing)
    meta = routing.reshard
    if _at(state) >= _at(until):
        return Stop(state, f"as far as this run goes (until {until})")
    ready = ready_at(routing, lease)
    waiting = Wait(ready, "every client to act on the last change (the routing's lease "
                          "and the margin)")
    if state == "read-both":
        return waiting if now < ready else Advance(
            _next(routing, "write-new", now), "writers follow the target layout")
    if state == "write-new":
        if now < ready:
            return waiting
        return Verify() if mover_done else Move()
    if state == "verified":
        refusal = cutover_refusal(routing, now=now, max_age=max_age)
        if refusal is not None:
            return Verify()
        return waiting if now < ready else Advance(
            _next(routing, "read-new", now), "readers read the target layout alone")
    if state == "read-new":
        if meta.retire_after is None:
            return Advance(with_retention(routing, now, meta.retain),
                           "the retention window starts")
        if now < meta.retire_after:
            return Wait(meta.retire_after, "the retention window to pass")
        return waiting if now < ready else Advance(
            _next(routing, "retired", now), "the layout being left is retired")
    # retired
    if not swept:
        return Sweep()
    return Advance(finish(routing), "the reshard is done: the routing is stable")


def after_verify(routing: Routing, parity: Parity, *, mover_done: bool) -> Routing:
    """``routing`` with ``parity`` recorded, one version later.

    In ``write-new``, a clean report once the mover is done enters ``verified``; a
    report with gaps once the mover is done starts another generation of it (in
    ``verified`` it also returns to ``write-new``, which clients do the same way).
    Otherwise the report is only recorded.
    """
    meta = _meta(routing)
    state = state_of(routing)
    if state in MOVING and not parity.clean and mover_done:
        return _next(routing, "write-new", meta.changed_at, dataclasses.replace(
            meta, parity=parity, generation=meta.generation + 1))
    recorded = dataclasses.replace(meta, parity=parity)
    if state == "write-new" and mover_done:
        return _next(routing, "verified", meta.changed_at, recorded)
    return _next(routing, state, meta.changed_at, recorded)


def cutover_refusal(routing: Routing, *, now: float, max_age: float) -> Refused | None:
    """Why readers may not move to the target layout alone yet (None: they may)."""
    meta = _meta(routing)
    if routing.state in ("read-new", "retired"):
        return Refused(f"the reshard is in {routing.state}: readers already read the target "
                       "layout alone; next: 'shardex reshard complete'")
    if routing.state != "verified":
        return Refused(f"the reshard is in {routing.state}, not verified: readers move to the "
                       "target layout alone only after a parity check with no gaps")
    parity = meta.parity
    if parity is None or not parity.clean:
        return Refused("the last parity report has gaps: run 'shardex reshard verify'")
    return _stale(parity, now=now, max_age=max_age, verb="reshard")


def _stale(parity: Parity, *, now: float, max_age: float, verb: str) -> Refused | None:
    if now - parity.checked_at > max_age:
        return Refused(f"the last parity report is {now - parity.checked_at:.0f} s old, older "
                       f"than --max-age {max_age:g} s: run 'shardex {verb} verify' again")
    return None


def with_retention(routing: Routing, now: float, retain: float) -> Routing:
    """``routing`` with the retention window of ``retain`` seconds from ``now`` recorded."""
    meta = _meta(routing)
    return _next(routing, state_of(routing), meta.changed_at,
                 dataclasses.replace(meta, retain=retain, retire_after=now + retain))


def finish(routing: Routing) -> Routing:
    """The target layout alone, stable, one version later."""
    return Routing(default=routing.default, overrides=routing.overrides,
                   version=routing.version + 1, adoption=routing.adoption)


def rollback_refusal(routing: Routing) -> Refused | None:
    """Why the reshard in ``routing`` cannot be rolled back (None: it can)."""
    if routing.reshard is None:
        return Refused("no reshard is under way (a finished reshard is not rolled back: "
                       "start another one toward the layout you want)")
    if routing.reshard.direction == "rollback":
        return Refused("the reshard is already rolling back: 'shardex reshard run' finishes it")
    if routing.state == "retired":
        return Refused("the reshard has retired the old layout; it can no longer be rolled "
                       "back: start another reshard toward the layout you want")
    return None


def reverse(routing: Routing, now: float) -> Routing:
    """The rollback of the reshard in ``routing``: toward the layout it leaves, one version on.

    The layouts swap (the old one becomes the target) and the state is the one whose
    conduct is adjacent: ``read-both`` becomes ``write-new`` (writers already follow
    the old layout), ``write-new`` and ``verified`` become ``read-both`` (writers still
    follow the new one, readers the union), and ``read-new`` becomes ``read-both``
    (readers go back to the union first). Raises InvalidRouting when
    ``rollback_refusal`` says why not.
    """
    refusal = rollback_refusal(routing)
    if refusal is not None:
        raise InvalidRouting(refusal.why)
    meta = _meta(routing)
    assert routing.previous is not None
    old = routing.previous
    back = Routing(default=old.default, overrides=old.overrides, version=routing.version + 1,
                   previous=Routing(default=routing.default, overrides=routing.overrides,
                                    version=routing.version),
                   state="write-new" if routing.state == "read-both" else "read-both",
                   adoption=routing.adoption)
    stamp = now if conduct(back) != conduct(routing) else meta.changed_at
    return dataclasses.replace(back, reshard=dataclasses.replace(
        meta, direction="rollback", changed_at=stamp, generation=meta.generation + 1,
        parity=None, retain=0.0, retire_after=None))


def rollback_step(routing: Routing, *, now: float, lease: float) -> Wait | Advance:
    """The first step of a rollback: store ``reverse(routing)``, or wait until it is safe.

    A rollback that widens what readers read (from ``read-new``) is a change of conduct
    and waits for ``ready_at`` like any other; the others change no client's conduct.
    Raises InvalidRouting when ``rollback_refusal`` says why not.
    """
    back = reverse(routing, now)
    if conduct(back) != conduct(routing) and now < ready_at(routing, lease):
        return Wait(ready_at(routing, lease), "every client to act on the last change before "
                                              "readers widen again")
    return Advance(back, "the reshard rolls back toward the layout it left")


# -- a copy (an adoption) --------------------------------------------------------------

def copy_start_refusal(current: Routing) -> Refused | None:
    """Why an adoption cannot start on an index with routing ``current`` (None: it can)."""
    adoption = current.adoption
    if current.in_transition:
        return Refused("a reshard is under way; finish it before adopting")
    if adoption is not None and adoption.active:
        return Refused(f"adoption {adoption.id} is already {adoption.stage}: run "
                       "'shardex adopt status'")
    if adoption is not None and adoption.stage == "complete":
        return Refused(f"adoption {adoption.id} is complete; the index reads its own entries "
                       "already")
    return None


def begin_copy(current: Routing, adoption: Adoption, sets: Mapping[str, ShardPolicy]
               ) -> Routing:
    """The first routing of an adoption: ``current`` with ``sets`` and ``adoption`` (in
    ``write-new``), one version later. Raises InvalidRouting when
    ``copy_start_refusal`` says why not."""
    refusal = copy_start_refusal(current)
    if refusal is not None:
        raise InvalidRouting(refusal.why)
    return Routing(default=current.default, overrides={**current.overrides, **sets},
                   version=current.version + 1, adoption=adoption)


def copy_to(adoption: Adoption, state: CopyState, now: float, **changes: Any) -> Adoption:
    """``adoption`` in ``state``, its migration with ``changes``; ``changed_at`` is stamped
    ``now`` if readers change index (the copy's conduct: writers write both throughout)."""
    migration = dataclasses.replace(adoption.migration, **changes)
    moved = dataclasses.replace(adoption, state=state, migration=migration)
    if moved.reads_source != adoption.reads_source:
        moved = dataclasses.replace(moved, migration=dataclasses.replace(migration,
                                                                         changed_at=now))
    return moved


def copy_cutover_refusal(adoption: Adoption | None, *, now: float, max_age: float,
                         backfilled: bool) -> Refused | None:
    """Why readers may not move to the sharded index yet (None: they may)."""
    if adoption is None or not adoption.active:
        return Refused("no adoption is under way: start one with 'shardex adopt start'")
    if adoption.state != "write-new":
        return Refused(f"the adoption is in {adoption.stage}: readers already read the new "
                       "index")
    if not backfilled:
        return Refused("the backfill has not finished: run 'shardex adopt run', then "
                       "'shardex adopt verify'")
    parity = adoption.migration.parity
    if parity is None:
        return Refused("no parity report yet: run 'shardex adopt verify' first")
    if not parity.clean:
        gaps = ", ".join(f"{n} {kind}" for kind, n in parity.counts().items() if n)
        return Refused(f"the last parity report has gaps ({gaps}): run 'shardex adopt run' "
                       "and 'shardex adopt verify' again")
    return _stale(parity, now=now, max_age=max_age, verb="adopt")


def copy_rollback_refusal(adoption: Adoption | None) -> Refused | None:
    """Why the adoption cannot be rolled back (None: it can)."""
    if adoption is None:
        return Refused("no adoption is under way")
    if adoption.stage == "complete":
        return Refused("the adoption is complete; it can no longer be rolled back")
    if adoption.stage == "rolled-back":
        return Refused("the adoption is already rolled back: readers read the old index")
    return None


def with_adoption(routing: Routing, adoption: Adoption) -> Routing:
    """``routing`` one version later, with ``adoption``."""
    return dataclasses.replace(routing, version=routing.version + 1, adoption=adoption)


def copy_complete_step(routing: Routing, *, now: float, lease: float, retain: float | None,
                       drop: bool) -> Wait | Advance | Drop | Stop:
    """What ``adopt complete`` does next with the adoption in ``routing`` (in read-new or
    complete): record the retention window (``retain`` seconds from ``now``, None: the
    one asked before) and whether to ``drop`` the plain index, wait for it to pass and
    for no reader to read the plain index, complete, then drop it if asked."""
    adoption = routing.adoption
    assert adoption is not None
    meta = adoption.migration
    if adoption.state == "read-new":
        if meta.retire_after is None or (retain is not None and retain != meta.retain) \
                or (drop and not adoption.drop_source):
            window = meta.retain if retain is None else retain
            after = now + window if meta.retire_after is None or retain is not None \
                else meta.retire_after
            kept = copy_to(adoption, "read-new", now, retain=window, retire_after=after)
            return Advance(with_adoption(routing, dataclasses.replace(
                kept, drop_source=adoption.drop_source or drop)), "the retention window starts")
        if now < (meta.retire_after or 0.0):
            return Stop("read-new", "the retention window has not passed")
        if now < ready_at(adoption, lease):
            return Wait(ready_at(adoption, lease), f"no reader to read {adoption.source!r}")
        return Advance(with_adoption(routing, copy_to(adoption, "done", now)), "complete")
    if (adoption.drop_source or drop) and not adoption.dropped:
        return Drop(with_adoption(routing, dataclasses.replace(adoption, drop_source=True,
                                                               dropped=True)))
    return Stop(adoption.stage, "complete")
