"""Fencing after landing: where a write that came back late left its entry.

``WriteMachine`` calls ``settle`` when a write's answer came back past the lease of the
routing it was planned under (``shardex.write`` has the argument). Generators over the
machine, as ``shardex.write.crossing``: they ask it for the routing, locates and places.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

from shardex.errors import ConditionFailed, OutcomeUnknown, ShardexError
from shardex.model.entries import Placement
from shardex.routing import Routing
from shardex.write.decide import Relocate, carry_token, derived, erase_token, in_place, value_of
from shardex.write.job import Job, Landing
from shardex.write.steps import Action, Observation, Place, Routed
from shardex.write.topology import Tier, crossing, named

if TYPE_CHECKING:
    from shardex.write.machine import WriteMachine

__all__ = ["MAX_SETTLES", "settle", "take_out", "take_out_older"]

T = TypeVar("T")
Steps = Generator[Action, Observation, T]
# re-placings of a write that landed on a layout no longer read, each itself landing late
MAX_SETTLES = 3


def settle(machine: WriteMachine, job: Job, landing: Landing, depth: int, token: str
           ) -> Steps[None]:
    """Return once the entry the write left is where the routing in force reads it.

    Called when the answer came back past the lease of the latest read that found the
    routing the write was planned under (before it, the write landed in that state or
    the next, which every reader of either reads: ``shardex.write`` says why). The
    routing is read again (strongly consistent, sent after the answer); if it moved (one
    version on, that state's mover and parity check may have passed the entry's key
    before it landed) and the entry is not where its writes go now, the entry is
    re-placed there (a settle, through this same machine), or the write
    ends OutcomeUnknown: it applied, and readers may not list it. An entry left in a
    store its value's readers no longer read, where the write's own token is the last
    word in the one they read (its confirmation, or its claim), is carried there.
    """
    yield from _settle(machine, job, landing, depth, token)
    if landing.erased is None and machine.topology.tiered:
        yield from take_out_older(machine, landing, token)


def take_out_older(machine: WriteMachine, landing: Landing, token: str) -> Steps[None]:
    """Once the entry ``landing`` left stands where readers read it: take out an older
    live row of the item in another store (a copy a rollback's mover made back while the
    write was in flight), which readers of that store would list too."""
    yield from _erase_copies(machine, landing, token, landing.entry.version, None)


def _settle(machine: WriteMachine, job: Job, landing: Landing, depth: int, token: str
            ) -> Steps[None]:
    planned = landing.planned
    try:
        fresh = yield from machine._route(fresh=True)
    except ShardexError as exc:
        machine.unknown(token, "it landed after its routing's lease", "reading the routing "
                        f"again to check where it landed failed ({exc})", exc)
    routing = fresh.routing
    if routing.version <= planned.routing.version:
        return  # it landed in the state it was planned in
    # one state on, every reader of either state reads it, but that state's mover and
    # parity check may have passed its key before it landed (it was in flight past the
    # margin): it is moved where that state's writes go, as two states on
    if landing.erased is not None:
        yield from _erase_copies(machine, landing, token, landing.erased,
                                 value_of(landing.entry))
        return
    entry = landing.entry
    value = value_of(entry)
    target = routing.writing.policy(value).tier
    if target == landing.tier and in_place(routing, value, entry.shard_key, job.item_id):
        return
    if target != landing.tier and (yield from _carry(machine, landing, target, fresh, token)):
        return
    if target != landing.tier and crossing(routing, value) not in (
            (target, landing.tier), (landing.tier, target)):
        machine.unknown(token, "it landed after its routing's lease", f"it landed on "
                        f"{named(landing.tier)}, which readers of {value!r} no longer read, "
                        "and no write moves an entry between stores outside a reshard")
    if depth >= MAX_SETTLES:
        machine.unknown(token, "it landed after its routing's lease", "re-placing it where "
                        "readers read kept landing late")
    item, source = job.item_id, entry.shard_key

    def plan(now: Routing) -> Relocate:
        return Relocate(item, value, source, job.draw(now, value), None, 0)

    settle = Job(item, value, None, plan, job.draw,
                 f"re-placing of {item!r} (its {job.what} landed late)",
                 derived(token, f"settle{depth}"))
    try:
        yield from machine._job(settle, depth + 1)
    except OutcomeUnknown:
        raise
    except ShardexError as exc:
        machine.unknown(token, "it landed after its routing's lease", f"re-placing it where "
                        f"readers read failed ({type(exc).__name__}: {exc})", exc)

def _erase_copies(machine: WriteMachine, landing: Landing, token: str, version: int,
                  value: str | None) -> Steps[None]:
    """Take out what a write that landed late left live elsewhere: a row of the item
    numbered below ``version`` (the write's), in another store than the one it landed
    in, of ``value`` (None: of any value). Such a row is a copy a rollback's mover made
    back while the write was in flight, of the entry the write replaced or erased, which
    readers of that store would list again (an item has one live entry). A row numbered
    as high is a later write's, or a mover's copy of this one: it stays."""
    try:
        for tier in machine.topology.stores:
            if tier != landing.tier:
                yield from take_out(machine, tier, None, version, erase_token(token),
                                    value=value)
    except ShardexError as exc:
        machine.unknown(token, "it landed after its routing's lease", f"taking out the copy "
                        f"a move left of the entry it replaced failed ({type(exc).__name__}: "
                        f"{exc})", exc)


def take_out(machine: WriteMachine, tier: Tier, row: Placement | None, version: int,
             token: str, *, value: str | None = None) -> Steps[None]:
    """Take the item's stale row out of ``tier``'s store: a tombstone at ``version`` (or
    the row's own, if higher) under ``token``, conditioned on the row as found (``row``:
    as the write located it; None: located now, and gone unless it is a live row of
    ``value``, or of any value if None, numbered below ``version``). A row changed since
    is looked at again: a live row numbered below ``version`` is still a stale copy (a
    mover's, of the item's older entry) and goes; anything else is a later write's."""
    for _ in range(machine._max_conflicts):
        if row is None:
            row = yield from machine._locate(tier)
            if row is None or row.entry is None or row.version >= version \
                    or (value is not None and value_of(row.entry) != value):
                return
        try:
            yield from machine._place(Place(tier, None, max(version, row.version), row, token))
            return
        except ConditionFailed:
            row = None


def _carry(machine: WriteMachine, landing: Landing, tier: Tier, fresh: Routed,
           token: str) -> Steps[bool]:
    """Place the entry ``landing`` left, late, in a store other than ``tier``'s (the
    one its value's writes go to now), into ``tier``'s, where what readers find hides
    it: the write's own confirmation or claim (a tombstone with its token), or an
    older row of the value (a copy a rollback's mover made back while the write was
    in flight; a write since would be numbered at least as high), or nothing (or an
    older tombstone) while the row it left is the last word in the index's own store,
    which arbitrates (an item whose value moved to a tier before it landed at home). Then
    take its row out of the store it landed in. True once carried (or found there),
    False if ``tier``'s placement is another write's, which the write does not override.
    """
    routing, entry = fresh.routing, landing.entry
    value, item = value_of(entry), machine.job.item_id
    try:
        here = yield from machine._locate(tier)
        carry = carry_token(token)
        if here is not None and here.entry is not None \
                and (token in here.chain or carry in here.chain):
            return True  # carried already (by a mover)
        hides = here is not None and (token in here.chain if here.entry is None else
                                      here.version < entry.version
                                      and value_of(here.entry) == value)
        if not hides:
            # else nothing there (or an older tombstone) while the last word at home,
            # which arbitrates, is the row it left, live and its own
            older = here is None or (here.entry is None and here.version < entry.version)
            if not older or landing.tier is not None or not machine.topology.arbiter:
                return False
            home = yield from machine._locate(None)
            if home is None or home.entry is None or home.token != token:
                return False
        key = entry.shard_key if in_place(routing, value, entry.shard_key, item) \
            else machine.job.draw(routing, value)
        version = entry.version if here is None else max(here.version, entry.version)
        carried = replace(entry, shard_key=key, version=version)
        # one token for the carry and the row's take-out: while a reshard moves the
        # value between the two, the take-out confirms the carry (``truth``)
        try:
            yield from machine._place(Place(tier, carried, version, here, carry,
                                            fresh.fence, key))
        except ConditionFailed:
            now = yield from machine._locate(tier)
            return now is not None and now.entry is not None
        left = yield from machine._locate(landing.tier)
        if left is not None and left.entry is not None and token in left.chain:
            with contextlib.suppress(ConditionFailed):
                yield from machine._place(Place(landing.tier, None, left.version, left,
                                                carry))
    except ShardexError as exc:
        machine.unknown(token, "it landed after its routing's lease", f"carrying it to "
                        f"{named(tier)}, where readers of {value!r} read, failed "
                        f"({type(exc).__name__}: {exc})", exc)
    return True
