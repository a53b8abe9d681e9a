"""What the autopilot's state becomes from the stored routing, each tick (pure).

``settle`` folds into the leader's ``State`` what happened to the index since the last
tick, and says what to log of it (``Note``):

- **its migration ended**: each key's last change is now, and a key not at the layout
  the migration went to (rolled back between two ticks, or while the autopilot was
  paused, or set by hand since), where the autopilot did not roll it back itself, is
  an operator's veto;
- **an autopilot migration its state does not name** (its leader stopped between
  starting it and recording it): taken up, with the flaps its start made (a rollback
  counts none);
- **its migration rolled back** by anyone but itself (it records its own rollback in the
  state before it starts): an operator's veto;
- **an operator's own migration** of a key: its keys are as the operator sets them, a
  veto stamped each tick while it runs (so it lasts ``veto`` past its end), and their
  last change is its end (the autopilot had shrunk an operator's grow 0.8 s after it
  ended).

A vetoed key keeps its N for the policy's ``veto`` seconds (``view``: ``vetoed_until``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shardex.autopilot.policy import Action, KeyView, MigrationView, flaps_after
from shardex.autopilot.records import State
from shardex.autopilot.runner import states
from shardex.autopilot.settings import AutopilotPolicy
from shardex.routing import Routing

__all__ = ["ID_PREFIX", "Note", "settle", "started", "view"]

ID_PREFIX = "autopilot-"


@dataclass(frozen=True, slots=True)
class Note:
    """An action entry for the log: ``leader_only`` ones are not a dry run's to say."""

    action: str
    reason: str
    reshard: str | None
    details: Mapping[str, Any] = field(default_factory=dict)
    leader_only: bool = True


def view(key: str, routing: Routing, state: State, lease: float, veto: float) -> KeyView:
    """``key``'s layout, the migration of it under way and its remembered state (an
    operator's change of its layout holds its N for ``veto`` s)."""
    now_policy = routing.policy(key)
    meta, previous = routing.reshard, routing.previous
    migration = None
    if meta is not None and previous is not None and key in meta.values:
        before = previous.policy(key)
        follow = (states.ready_at(routing, lease) if routing.state == "write-new"
                  else meta.changed_at if routing.state in ("verified", "read-new", "retired")
                  else None)
        migration = MigrationView(before.shards, now_policy.shards, states.state_of(routing),
                                  meta.started_at, follow, before.tier, now_policy.tier)
    memory = state.key(key)
    return KeyView(now_policy.shards, now_policy.tier, migration, memory.last_change,
                   memory.budget, budget_since=memory.budget_since, flaps=memory.flaps,
                   vetoed_until=None if memory.vetoed_at is None else memory.vetoed_at + veto)


def started(policy: AutopilotPolicy, state: State, key: str, action: Action,
            at: float) -> State:
    """``state`` with ``key``'s flaps and last shrink once its migration started at ``at``."""
    memory = state.key(key)
    flaps, shrunk_at = flaps_after(policy, action, at, memory.flaps, memory.shrunk_at,
                                   memory.last_change)
    return state.with_key(key, flaps=flaps, shrunk_at=shrunk_at)


def settle(routing: Routing, state: State, now: float, *, policy: AutopilotPolicy,
           lease: float) -> tuple[State, list[Note]]:
    """``state`` with what happened to the index since the last tick folded in, and the
    notes to log of it (see the module)."""
    notes: list[Note] = []
    meta = routing.reshard
    ours = meta is not None and meta.id.startswith(ID_PREFIX)
    ended = state.reshard
    if ended is not None and (meta is None or meta.id != ended):
        for key in state.migrating:
            state = state.with_key(key, last_change=now)
        shards = {key: routing.policy(key).shards for key in state.migrating}
        notes.append(Note("end", "the migration ended: " + ", ".join(
            f"{key} at N={n}" for key, n in shards.items()), ended,
            {"shards": shards, "routing_version": routing.version}, leader_only=False))
        undone = tuple(key for key in state.migrating if key in state.targets and (
            routing.policy(key).shards, routing.policy(key).tier) != state.targets[key])
        if undone and state.rolled_back(ended) is None:
            state = _vetoed(dataclasses.replace(state, rollback=(ended, "operator")), ended,
                            undone, now, policy, notes, f"the autopilot's migration of "
                            f"{', '.join(undone)} ended with them not at its target "
                            "layout: an operator's doing")
        state = dataclasses.replace(state, reshard=None, migrating=(), targets={})
    if meta is None:
        return state, notes
    if ours and state.reshard != meta.id:
        back = meta.direction == "rollback"
        going = routing.previous if back and routing.previous is not None else routing
        state = dataclasses.replace(state, reshard=meta.id, migrating=meta.values,
                                    targets={key: (going.policy(key).shards,
                                                   going.policy(key).tier)
                                             for key in meta.values})
        for key in meta.values if not back else ():  # a rollback is no shrink: no flap
            moving = view(key, routing, state, lease, policy.veto).migration
            if moving is not None:
                state = started(policy, state, key, "grow" if moving.grows else "shrink",
                                meta.started_at)
        notes.append(Note("adopt", "took up the autopilot's migration of "
                          f"{', '.join(meta.values)} found in the routing ({routing.state}"
                          + (", rolling back" if back else "") + "): it drives it on",
                          meta.id))
    if ours and meta.direction == "rollback" and state.rolled_back(meta.id) is None:
        state = _vetoed(dataclasses.replace(state, rollback=(meta.id, "operator")), meta.id,
                        meta.values, now, policy, notes, f"the autopilot's migration of "
                        f"{', '.join(meta.values)} is being rolled back, and not by the "
                        "autopilot: an operator's doing")
    if not ours:
        first = any((state.key(key).vetoed_at or -math.inf) < meta.started_at
                    for key in meta.values)
        for key in meta.values:
            state = state.with_key(key, last_change=now)
        # vetoed from its start at the earliest: a tick stamps its time before it reads
        # the routing, and a migration begun in between was vetoed again the next tick
        state = _vetoed(state, meta.id, meta.values, max(now, meta.started_at), policy,
                        notes if first else [],
                        f"an operator's migration of {', '.join(meta.values)} is under way")
    return state, notes


def _vetoed(state: State, reshard: str, keys: tuple[str, ...], now: float,
            policy: AutopilotPolicy, notes: list[Note], what: str) -> State:
    """``state`` with ``keys`` vetoed from ``now``, and the note saying so on ``notes``."""
    for key in keys:
        state = state.with_key(key, vetoed_at=now)
    veto = policy.veto
    notes.append(Note("veto", what + (
        f"; the autopilot leaves their N as the operator leaves it for {veto:,.0f} s "
        "(policy veto), admission still holds a hot key below its capacity" if veto else
        "; policy veto is 0: the autopilot may migrate them again"), reshard,
        {"keys": list(keys), "until": now + veto}))
    return state
