"""The write of a value a reshard moves between two stores (S, the one it came from; T).

No transaction spans two stores, so while readers cover both layouts an item of the value
may have a placement in S and in T; ``truth`` says which holds. S serializes every
write: a write that lands in T is placed in T first, conditioned on T's placement, then
*confirmed* by a tombstone in S at the same version with the same token, conditioned on
S's placement as located; a write that lands in S is one conditional write in S (and
takes a stale row of another value out of T after it). Two writers that decided from the
same state meet on S's placement. A writer that replaces another's row in T that S has
not confirmed first rewrites S as it is under a token of its own (a *fence*): that
writer may be between its two steps, and its confirmation then fails instead of landing
over a row that is no longer its own; the row it replaces took no effect, so it is
replaced at the version decided (a move's: the entry's), however high its own was, and
the fenced writer decides again from the item as it was. A mover carries a row to the
other store under ``carry_token(row's token)``: that row was the item's truth, so
its write applied, and finds the carry's token as its own when its confirmation (or its
claim in the index's own store) fails on it. ``shardex.write`` has the whole argument.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypeVar

from shardex.errors import (
    CapabilityMissing,
    ConditionFailed,
    ShardexError,
    StoreError,
    Throttled,
    Unavailable,
)
from shardex.model.entries import NO_TOKEN, Placement, StoredEntry
from shardex.routing import Routing
from shardex.write.decide import (
    Delete,
    Move,
    Put,
    Refuse,
    Relocate,
    Skip,
    WriteRequest,
    carry_token,
    decide,
    derived,
    held_across,
    holder,
    relocating,
    truth,
    value_of,
    void_token,
)
from shardex.write.job import Claim, Job, Landing, may_have_applied
from shardex.write.steps import (
    Action,
    Done,
    Errored,
    Observation,
    Place,
    Placed,
    Routed,
    Sleep,
    read_back,
)
from shardex.write.topology import Tier, named

if TYPE_CHECKING:
    from shardex.write.machine import WriteMachine

__all__ = ["cross"]

T = TypeVar("T")
Steps = Generator[Action, Observation, T]


def cross(machine: WriteMachine, job: Job, token: str, tiers: tuple[Tier, Tier],
          first: Routed) -> Steps[tuple[Done, Claim | None, Landing | None]]:
    """The write of ``job`` while its value crosses from store ``tiers[0]`` (S) to
    ``tiers[1]`` (T): the outcome, the claim the index's own store must confirm (an
    item new to both made live in a tier's store), and where a live entry landed."""
    s, t = tiers
    value = job.value
    known = [first]
    claim: Claim | None = None
    landed: list[Landing] = []
    planned_for: Routed | None = None
    conflicts = failures = 0
    ambiguous: ShardexError | None = None
    started = machine._now
    # the tokens whose row in S is this write's: its own, and a carry of its row (a
    # rollback's mover carrying it back from T, or its own settle) with the tokens of the
    # rows it carried itself
    mine = {token, carry_token(token)}
    rows = _Rows()  # this write's rows in T
    while True:
        source = yield from machine._locate(s)
        target = yield from machine._locate(t)
        if planned_for is None:  # before any try: the token already on the item?
            carrying = next((p for p in (source, target) if p is not None
                             and token in p.chain), None)
            if carrying is not None:
                retried = machine.retried(job, token, carrying, first.routing)
                if retried is not None:
                    return retried, None, None
        if source is not None and not mine.isdisjoint(source.chain):
            # written in S, confirmed there, or carried there from T
            if not landed and planned_for is not None:
                # a try that timed out had landed: before the read that found it
                row = source if source.entry is not None else target
                if row is not None and row.entry is not None and token in row.chain:
                    landed.append(Landing(s if row is source else t, row.entry,
                                          read_back(machine._now), planned_for))
            return _done(landed), claim, _last(landed)
        held, in_target = held_across(source, target, value)
        if target is not None and target.token == token and in_target:
            if not landed and target.entry is not None and planned_for is not None:
                # a try that timed out had landed: before the read that found it
                landed.append(Landing(t, target.entry, read_back(machine._now), planned_for))
            rows.shown.append(True)  # the truth: readers list it
            step: Steps[object] = _confirmed(machine, Place(s, None, target.version, source,
                                                            token), landed)
        else:
            planned = known.pop() if known else (yield from machine._route())
            planned_for = planned
            request = job.plan(planned.routing)
            # a store beside S and T may hold the item, under a value that stays there: a
            # write here would make it live in two stores (as outside the move, refused)
            elsewhere: dict[Tier, Placement | None] = {}
            if not isinstance(request, Delete | Relocate):
                for tier in machine.topology.stores:
                    if tier not in (s, t):
                        elsewhere[tier] = yield from machine._locate(tier)
                _refuse_elsewhere({s: source, t: target, **elsewhere}, (s, t), request,
                                  planned.routing, job.what)
            into_target = planned.routing.writing.policy(value).tier == t
            # a put of an item T holds under the value stays in T, on its key, whatever
            # store the writer's state writes (as ``target_key`` keeps it in one store):
            # written in S by a read-both writer, it moved back while write-new readers
            # read S first, and a listing between their phases missed it
            kept = isinstance(request, Put) and in_target and held is not None \
                and held.entry is not None and value_of(held.entry) == value
            decision = _decide(request, held, in_target, into_target or kept,
                               planned.routing)
            if isinstance(decision, Skip):
                if target is not None and target.entry is not None and not in_target \
                        and value_of(target.entry) == value \
                        and (target.token in mine or isinstance(request, Relocate)):
                    yield from _take_out_stale(machine, s, t, source, target, token,
                                               strict=isinstance(request, Relocate))
                return Done(decision.result), None, None
            if isinstance(decision, Refuse):
                raise decision.error
            if in_target and not into_target and decision[0] is not None and not kept:
                _refuse_stranded(held, planned.routing, job.what)
            entry, version = decision
            if kept and entry is not None and held is not None and held.entry is not None:
                entry, into_target = replace(entry, shard_key=held.entry.shard_key), True
            placing = token
            if isinstance(request, Relocate) and held is not None and held.token is not None:
                # a move carries another write's row to the other store, under that
                # write's carry token: that write, if its confirmation or claim is still
                # to come, fails on the carry and knows it for its own
                placing = carry_token(_written_by(held))
                mine.add(placing)
            claim = None
            if entry is not None and (held is None or held.entry is None):
                # made live: numbered above its placement in every store (``_dead``)
                others = [source, target]
                for tier in machine.topology.stores:
                    if tier not in (s, t):
                        others.append(elsewhere[tier] if tier in elsewhere
                                      else (yield from machine._locate(tier)))
                floor = max([version, *(p.version + 1 for p in others if p)])
                claim = yield from _claim(machine, job, s, t, source, target, token, floor,
                                          into_target)
                version = version if claim is None else claim.version
            step = _place(machine, job, s, t, entry, version, source, target, placing,
                          into_target, planned, landed, rows, claimed=claim is not None)
        try:
            yield from step
        except _Held:
            # held past the lease of the routing it was planned under: it did not leave;
            # decide again under a routing read now
            known.append((yield from machine.replan()))
            continue
        except ConditionFailed as exc:
            conflicts += 1
            if conflicts >= machine._max_conflicts:
                raise ConditionFailed(f"gave up on the {job.what} after {conflicts} "
                                      f"conflicting writes of the item ({exc})") from exc
            continue
        except (Throttled, Unavailable) as exc:
            if may_have_applied(exc):
                ambiguous = ambiguous or exc
            wait = machine._retry.decide(failures, machine._now - started, exc, machine._rng)
            failures += 1
            if wait is None:
                # its confirmation failed; the row it left in T may be the item's truth
                # already (numbered above S's tombstone)
                if ambiguous is None and rows.shown \
                        and (yield from _stands(machine, s, t, token, mine, value, exc)):
                    return _done(landed), claim, _last(landed)
                if ambiguous is None:
                    if rows.shown and not any(rows.shown):
                        # every try was answered: its row in T never took effect
                        yield from _void_row(machine, t, token, rows.replaced, exc)
                    raise
                yield from _read_back(machine, s, t, token, mine, value, source, target,
                                      ambiguous, exc, rows)
                return _done(landed), claim, _last(landed)
            yield Sleep(wait)
            continue
        return _done(landed), claim, _last(landed)


def _refuse_elsewhere(found: dict[Tier, Placement | None], crossing: tuple[Tier, Tier],
                      request: WriteRequest, routing: Routing, what: str) -> None:
    """Raise if a store other than the two the value crosses between holds the item's live
    entry (``holder`` of every store's placement): CapabilityMissing, as for a write of
    a value that stays in its store, or ConditionFailed for a move from a value the item
    is not under. A put there was acknowledged and the item listed under both values
    for good."""
    held = holder(found, routing)
    if held is None or held[0] in crossing:
        return
    where, placement = held
    assert placement.entry is not None
    under = value_of(placement.entry)
    stray = isinstance(request, Move) and under != request.old
    raise (ConditionFailed if stray else CapabilityMissing)(
        f"the {what} cannot apply: the item has its entry under {under!r} on {named(where)}"
        + ("" if stray else ", and no write spans two stores; delete it there first"))


class _Held(Exception):
    """A place held past its fence: not sent."""


@dataclass
class _Rows:
    """The rows a crossing write placed in T: for each, True if it was the item's truth
    as it landed (over S's older tombstone, or nothing in S: readers list it); and the
    version of the placement in T that the first replaced (or, before one landed, that
    the last try sent would replace), which a row that took no effect goes back to as
    it is taken out (a write that failed leaves no version)."""

    shown: list[bool] = field(default_factory=list)
    replaced: int = 0


def _void_row(machine: WriteMachine, t: Tier, token: str, replaced: int,
              error: ShardexError) -> Steps[None]:
    """Take out of T the row of the write ``token``, whose every try was answered and
    ran out with ``error`` after the row landed: S never confirmed it, and it was never
    the item's truth. Left, readers of T alone (from ``read-new``) list it, and a move
    of the value out of T carries it over the item's truth. Raises OutcomeUnknown if
    the row stays."""
    try:
        now_t = yield from machine._locate(t)
        if now_t is not None and now_t.token == token and now_t.entry is not None:
            yield from machine._place(Place(t, None, max(1, replaced), now_t,
                                            void_token(token)))
    except ConditionFailed:
        return  # written over since: another write's row now
    except ShardexError as exc:
        machine.unknown(token, f"its row landed in {named(t)}, and its tries ran out "
                        f"({type(error).__name__}: {error})", f"taking the row out, which "
                        f"never took effect, failed ({type(exc).__name__}: {exc})", exc)


def _confirmed(machine: WriteMachine, place: Place, landed: list[Landing]) -> Steps[None]:
    """Send the confirmation ``place`` in S: the write takes effect (readers of both
    stores hold T's row against S) when it lands, so that is when fencing checks it
    landed (the entry landed in T before)."""
    confirmed = yield from _sent(machine, place)
    if landed and landed[-1].tier != place.tier:
        landed[-1] = landed[-1]._replace(placed=confirmed)


def _last(landed: list[Landing]) -> Landing | None:
    return landed[-1] if landed else None


def _done(landed: list[Landing]) -> Done:
    return Done(True, landed[-1].entry.shard_key if landed else None)


def _read_back(machine: WriteMachine, s: Tier, t: Tier, token: str, mine: set[str],
               value: str, source: Placement | None, target: Placement | None,
               ambiguous: ShardexError, error: ShardexError, rows: _Rows) -> Steps[None]:
    """Settle a write whose tries ran out after one may have applied: return if it
    applied (S carries one of ``mine``, its tokens, or its row in T is the item's truth),
    raise ``error`` if no try can have landed (S and T are as the last try found them,
    and carry no token of it) or if its row landed in T and never took effect (S is as
    the write decided from, and no row of it was the truth when it landed, ``rows``:
    its row is taken out, after S is fenced so that no confirmation of it still on its
    way lands), else OutcomeUnknown."""
    try:
        now_s = yield from machine._locate(s)
        now_t = yield from machine._locate(t)
    except StoreError as exc:
        machine.unknown(token, ambiguous, f"reading it back failed ({type(exc).__name__}: "
                        f"{exc})", exc)
    if _applied(now_s, now_t, token, mine, value, live=True):
        return
    if not any(rows.shown) and now_t is not None and now_t.token == token \
            and now_t.entry is not None and now_s is not None \
            and _as_decided(now_s, source, token):
        try:
            yield from _fence(machine, s, now_s, token)
            yield from machine._place(Place(t, None, max(1, rows.replaced), now_t,
                                            void_token(token)))
        except ShardexError as exc:
            machine.unknown(token, ambiguous, f"its row landed in {named(t)} and never took "
                            f"effect, and taking it out failed ({type(exc).__name__}: {exc})",
                            exc)
        raise error
    if now_s == source and now_t == target and not (now_t is not None
                                                    and not mine.isdisjoint(now_t.chain)):
        raise error
    machine.unknown(token, ambiguous, "the placements in the two stores no longer show "
                    "whether it landed")


def _as_decided(now: Placement, source: Placement | None, token: str) -> bool:
    """True if S's placement ``now`` is ``source``, the one the write decided from, or
    that one rewritten by the write's own fence."""
    if source is None:
        return False
    if now == source:
        return True
    return now.token == _fence_token(token, source) and now.entry == source.entry \
        and now.version == source.version and now.history[-1:] == (source.token or NO_TOKEN,)


def _stands(machine: WriteMachine, s: Tier, t: Tier, token: str, mine: set[str],
            value: str, error: ShardexError) -> Steps[bool]:
    """True if the write ``token``, whose tries ran out with ``error`` after its row
    landed in T, applied all the same: S carries it, or its row in T is the item's truth
    (readers list it), so that ``error`` would be a false fail. OutcomeUnknown if the
    stores cannot be read."""
    try:
        now_s = yield from machine._locate(s)
        now_t = yield from machine._locate(t)
    except StoreError as exc:
        machine.unknown(token, error, f"its row landed in {named(t)} and its confirmation "
                        f"failed; reading them back failed ({type(exc).__name__}: {exc})",
                        exc)
    return _applied(now_s, now_t, token, mine, value)


def _applied(now_s: Placement | None, now_t: Placement | None, token: str, mine: set[str],
             value: str, *, live: bool = False) -> bool:
    """True if S's placement ``now_s`` carries one of ``mine`` (the write's tokens), or
    T's ``now_t`` is the write's own row (``live``: with an entry) and the item's truth
    (readers list it)."""
    if now_s is not None and not mine.isdisjoint(now_s.chain):
        return True
    if now_t is None or now_t.token != token or (live and now_t.entry is None):
        return False
    held, in_target = held_across(now_s, now_t, value)
    return in_target and held is now_t


def _fence_token(token: str, source: Placement) -> str:
    """The token with which the write ``token`` fences S's placement ``source``, marked
    as a fence's (``_FENCE``): a move that carries the row reads past it whose it is."""
    return _FENCE + derived(token, f"fence{source.version}")[:36 - len(_FENCE)]


_FENCE = "fence-"


def _written_by(placement: Placement) -> str:
    """The token of the write whose entry ``placement`` holds: its own, or, where fences
    rewrote it as it was, the one before them. A move carried a row its own fence had
    rewritten (its first carry throttled) under the carry of the fence's token, and the
    write, whose claim then failed on the carry, took it for another's and said False
    with its entry live."""
    for token in reversed(placement.chain):
        if not token.startswith(_FENCE):
            return token or str(placement.token)
    return str(placement.token)


def _take_out_stale(machine: WriteMachine, s: Tier, t: Tier, source: Placement | None,
                    target: Placement, token: str, *, strict: bool) -> Steps[None]:
    """Take a live row of the moving value out of T that the item's truth does not name:
    this write's own (it landed, and its confirmation failed on a write in S since), or,
    for a move, another's (a move whose confirmation failed, a writer that stopped
    between its two steps; the parity check sends such moves, ``TierLayouts.mend``, for
    the rows it finds extra). Readers of T alone (from
    ``read-new``) would list it, and the parity check finds it extra. It is taken out
    only after S is fenced: a writer between its two steps (this one's own confirmation
    still on its way, too) then fails and decides again.
    A row or placement changed since leaves it (another write's now). A store's refusal
    is raised for a move (``strict``: its mover tries it again, and the row goes then),
    and leaves the row for a write, whose outcome is decided (the parity check's mend
    takes it out while the reshard runs)."""
    if source is None:
        return
    try:
        # fenced even for its own row: a confirmation of it may still be on its way
        yield from _fence(machine, s, source, token)
        yield from machine._place(Place(t, None, target.version, target,
                                        derived(token, "stale")))
    except ConditionFailed:
        return
    except ShardexError:
        if strict:
            raise


def _claim(machine: WriteMachine, job: Job, s: Tier, t: Tier, source: Placement | None,
           target: Placement | None, token: str, version: int, into_target: bool
           ) -> Steps[Claim | None]:
    """What the index's own store must confirm of a write that makes the item live in a
    tier's store, new to both S and T (None: S or the write's store is that store).

    Raises CapabilityMissing if the item is live there (a third store) under another
    value."""
    if s is None or not machine.topology.arbiter or (into_target and t is None):
        return None
    main = target if t is None else (yield from machine._locate(None))
    if main is not None and main.entry is not None and t is not None:
        raise CapabilityMissing(
            f"the {job.what} cannot apply: the item has its entry under "
            f"{value_of(main.entry)!r} in the index's own store, and no write spans "
            "two stores; delete it there first")
    version = max(version, 1 if main is None else main.version + 1)
    row = target if into_target else source
    return Claim(main, version, token, t if into_target else s,
                 before=0 if row is None else row.version)


def _place(machine: WriteMachine, job: Job, s: Tier, t: Tier, entry: StoredEntry | None,
           version: int, source: Placement | None, target: Placement | None, token: str,
           into_target: bool, planned: Routed, landed: list[Landing], rows: _Rows, *,
           claimed: bool = False) -> Steps[None]:
    """Carry out one decided write of a crossing item, noting in ``landed`` where a live
    entry landed as soon as it did."""
    fence = planned.fence
    pace = None if entry is None else entry.shard_key
    if not into_target:
        version = max(version, 0 if source is None else source.version)
        placed = yield from _sent(machine, Place(s, _at(entry, version), version, source, token,
                                                 fence, pace))
        if entry is not None:
            landed.append(Landing(s, _at(entry, version) or entry, placed, planned))
        # a claim confirmed in T removes T's row itself
        if not claimed and target is not None and target.entry is not None and (
                entry is None or value_of(target.entry) != job.value):
            # T's row is now stale. One of this value stays while a put moves the item
            # here (union readers hold it against the truth); a delete's, or another
            # value's (whose readers read T alone), goes
            with contextlib.suppress(ConditionFailed):
                yield from machine._place(Place(t, None, max(version, target.version), target,
                                                derived(token, "stale")))
        return
    if source is not None and target is not None and target.token != token \
            and not truth(source, target)[1]:
        source = yield from _fence(machine, s, source, token)
    # S's version is the floor (its tombstone must not go below what it erased); T's row
    # is replaced whatever its version: one S has not confirmed took no effect, and its
    # version taken would be one the application never wrote (a move keeps the entry's,
    # a write the one it decided)
    version = max(version, 0 if source is None else source.version)
    if not rows.shown:  # what its first row replaces (an earlier try's row: nothing)
        rows.replaced = 0 if target is None or target.token == token else target.version
    placed = yield from _sent(machine, Place(t, _at(entry, version), version, target, token,
                                             fence, pace))
    # the item's truth at once where S holds nothing, or an older tombstone (``truth``)
    rows.shown.append(source is None or (source.entry is None and version > source.version))
    if entry is not None:
        landed.append(Landing(t, _at(entry, version) or entry, placed, planned))
    # sent within the lease of the routing it was planned under, as the row was
    yield from _confirmed(machine, Place(s, None, version, source, token, fence), landed)


def _sent(machine: WriteMachine, place: Place) -> Steps[Placed]:
    """``place`` sent once; its error raised (the crossing's loop decides what follows)."""
    observed = yield place
    if isinstance(observed, Placed):
        return observed
    if isinstance(observed, Errored):
        raise observed.error
    raise _Held()


def _fence(machine: WriteMachine, s: Tier, source: Placement, token: str
           ) -> Steps[Placement]:
    """Rewrite S's placement as it is under a token of its own, so that no confirmation
    pending on it can land any more; return it as it now is.

    T holds another writer's row that S has not confirmed: its writer may still be
    between its two steps, and would confirm it after this write replaced it in T
    (the write would be lost). Once S has changed, that confirmation fails and its
    writer decides again. ConditionFailed if S changed since it was located.
    """
    fence = _fence_token(token, source)
    yield from _sent(machine, Place(s, source.entry, source.version, source, fence))
    fenced = yield from machine._locate(s)
    if fenced is None or fenced.token != fence:
        raise ConditionFailed(f"item {machine.job.item_id!r} was written in the store it "
                              "moves from while its row in the other store was being replaced")
    return fenced


def _decide(request: WriteRequest, held: Placement | None, in_target: bool,
            into_target: bool, routing: Routing
            ) -> Skip | Refuse | tuple[StoredEntry | None, int]:
    """What ``request`` does to an item whose truth is ``held``: the entry and version.

    A move (``Relocate``) applies to an entry still held on its source key in the store
    writes do not go to.
    """
    if isinstance(request, Relocate):
        entry = None if held is None else held.entry
        if in_target == into_target or held is None or entry is None \
                or entry.shard_key != request.source or not relocating(routing, request):
            return Skip(False)  # moved, deleted or re-written since the mover saw it
        return replace(entry, shard_key=request.fresh_key), max(1, held.version)
    decision = decide(request, held, routing)
    if isinstance(decision, Skip | Refuse):
        return decision
    return decision.entry, decision.version


def _refuse_stranded(held: Placement | None, routing: Routing, what: str) -> None:
    """Raise CapabilityMissing for a write into S of an item live in T under a value that
    does not move: that value's readers read T alone, so the row the write would leave
    behind in T would list the item twice (the same refusal as between two tiers)."""
    if held is None or held.entry is None:
        return
    other = value_of(held.entry)
    previous = routing.previous
    if previous is not None and previous.policy(other).tier != routing.policy(other).tier:
        return  # a value that moves too: its readers hold T's rows against the truth
    raise CapabilityMissing(
        f"the {what} cannot apply: the item has its entry under {other!r} in another "
        "store than the one this write goes to, and no write spans two stores; delete "
        "it there first")


def _at(entry: StoredEntry | None, version: int) -> StoredEntry | None:
    if entry is None or entry.version == version:
        return entry
    return replace(entry, version=version)
