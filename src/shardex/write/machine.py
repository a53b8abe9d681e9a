"""The write machine: decides every next step of one logical write from what it observed.

Sans-I/O, as h11's ``next_event`` and tenacity's ``iter``: ``WriteMachine.next(observation)``
returns the next ``Action`` (route, locate, place, sleep, done) and raises the error the
write ends with. ``shardex.write.driver`` carries the actions out; ``shardex.write``'s
docstring is the design (outcomes, ambiguity, arbitration across stores, fencing).

Inside, one generator per protocol yields actions and receives observations:
``_job`` picks the path (one store, or a value crossing two stores), confirms a claim in
the index's own store, and checks where the write landed (``shardex.write.settle``);
``_in_store`` is the write in one store; ``shardex.write.crossing`` the write of a
crossing value.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Generator
from dataclasses import replace
from typing import NamedTuple, NoReturn, TypeVar

from shardex.errors import (
    CapabilityMissing,
    ConditionFailed,
    InvalidInput,
    OutcomeUnknown,
    RoutingStale,
    ShardexError,
    StoreError,
    Throttled,
    Unavailable,
)
from shardex.model.entries import Placement
from shardex.routing import Routing
from shardex.write.crossing import cross
from shardex.write.decide import (
    Delete,
    Move,
    Outcome,
    Refuse,
    Relocate,
    Skip,
    Write,
    carry_token,
    decide,
    derived,
    holder,
    resolve,
    value_of,
    void_token,
)
from shardex.write.job import (
    Backoff,
    Claim,
    Job,
    Landing,
    dead_placement,
    did_not_apply,
    held_too_often,
    may_have_applied,
)
from shardex.write.settle import settle, take_out, take_out_older
from shardex.write.steps import (
    Action,
    Done,
    Errored,
    Locate,
    Located,
    NotSent,
    Observation,
    Place,
    Placed,
    Route,
    Routed,
    Sleep,
    Slept,
    Start,
    read_back,
)
from shardex.write.topology import Tier, Topology, crossing, moving, named

__all__ = ["WriteMachine"]

T = TypeVar("T")
Steps = Generator[Action, Observation, T]
# the actions every write asks for, made once
_ROUTE, _FRESH, _LOCATE_MAIN = Route(), Route(fresh=True), Locate(None)
# tuple.__new__: a named tuple without its Python-level __new__ (a backoff each throttle)
_new = tuple.__new__
# the errors a retry policy paces (a tuple: ``A | B`` would build a union at each check)
_RETRIED = (Throttled, Unavailable)
_MAX_HELD = 16  # places held past their lease in a row before a write gives up
class _Survey(NamedTuple):
    """What ``_survey`` found: ``elsewhere`` describes the store that holds the item's live
    entry when it is not the one written (the write is refused); ``here`` is the
    placement written over as the decision takes it (a tombstone of a copy a move left,
    no entry of the item); ``found`` the placements located, by store. ``confirm``: the
    store a crossing value comes from, where the write must be confirmed (an item of
    that value written in the other store); ``copy``: a row of a crossing value that
    the write leaves stale, to take out after it."""

    elsewhere: str | None
    here: Placement | None
    found: dict[Tier, Placement | None]
    confirm: tuple[Tier] | None = None
    copy: tuple[Tier, Placement] | None = None
    value: str | None = None  # the value of the entry ``elsewhere`` holds


class WriteMachine:
    """One logical write (``job``) over the stores of ``topology``.

    ``retry`` paces throttled and unavailable tries (``rng`` draws their jitter);
    ``max_conflicts`` bounds how many times the write is planned again after other
    writers changed the item first; ``paced``: an adaptive gate paces each place, so a
    throttled one is sent again in the gate's next slot without a backoff of its own.
    Feed ``next`` a ``Start`` first, then what each action observed.
    """

    def __init__(self, job: Job, topology: Topology, *, retry: Backoff,
                 rng: random.Random, max_conflicts: int, paced: bool = False) -> None:
        self.job = job
        self.topology = topology
        self._retry = retry
        self._rng = rng
        self._max_conflicts = max_conflicts
        self._paced = paced
        self._now = 0.0
        self._steps: Steps[Done] | None = None
        self._ended = False

    def next(self, observation: Observation) -> Action:
        """The action after ``observation``; raises the error the write ends with."""
        if observation.at is not None:
            self._now = observation.at
        steps = self._steps
        if steps is None:
            if not isinstance(observation, Start) or self._ended:
                raise TypeError("a write machine starts with a Start observation, once")
            steps = self._steps = self._job(self.job, 0)
            observation = None  # type: ignore[assignment]  # a generator starts on None
        try:
            return steps.send(observation)
        except StopIteration as stop:
            # ended: drop the generator, whose frame held this machine (no cycle is left
            # for the garbage collector: a write is made many times a second)
            self._steps, self._ended = None, True
            done: Done = stop.value
            return done
        except BaseException:
            self._steps, self._ended = None, True
            raise

    # -- the write, whatever its path -------------------------------------------------

    def _job(self, job: Job, depth: int) -> Steps[Done]:
        for round_ in range(self._max_conflicts):
            # a claim that lost in the own store took its row back out: the next round is
            # another write, with a token of its own
            token = job.token if round_ == 0 else derived(job.token, f"round{round_}")
            observed = yield _ROUTE
            if type(observed) is not Routed:
                assert isinstance(observed, Errored)
                raise observed.error
            routed = observed
            path = self._path(routed.routing, job)
            if isinstance(path, tuple):
                done, claim, landing = yield from cross(self, job, token, path, routed)
            else:
                done, claim, landing = yield from self._in_store(job, token, path, routed)
            if claim is not None and not (yield from self._confirm(job, claim)):
                continue
            if landing is not None and not landing.planned.fence.holds(
                    landing.placed.at, landing.placed.version, landing.placed.read_at):
                yield from settle(self, job, landing, depth, token)  # landed late: where?
            elif landing is not None and landing.erased is None and self.topology.tiered \
                    and moving(landing.planned.routing):
                # while values move between stores, a mover may have copied the item's
                # older entry into another store as this write was in flight
                yield from take_out_older(self, landing, token)
            return done
        raise ConditionFailed(f"gave up on the {job.what} after {self._max_conflicts} writes "
                              "of the item to other stores won over it")

    def retried(self, job: Job, token: str, found: Placement, routing: Routing
                ) -> Done | None:
        """Before any try of ``job``: ``token`` is already on the item (``found``, its
        placement). The retry of the item's last write (an application trying again after
        OutcomeUnknown) is ok, as it applied; another write with a token the item carries
        is refused (InvalidInput), changing nothing: its outcome would be read from the
        other write's. None for a mover's carry, which the engine tells apart itself."""
        request = job.plan(routing)
        if isinstance(request, Relocate):
            return None
        entry = found.entry
        if found.token == token:
            if isinstance(request, Delete):
                same = entry is None
            else:
                value = request.new if isinstance(request, Move) else request.value
                same = entry is not None and value_of(entry) == value and (
                    request.sort is None or entry.sort == request.sort)
            if same:
                return Done(True)
        raise InvalidInput(
            f"token {token!r} is already on item {job.item_id!r}: "
            + ("the write that left the item as it is" if found.token == token else
               "an earlier write") + " applied with it; a token names one write, so give "
            f"this {job.what} one of its own (the same token only retries that write)")

    def _path(self, routing: Routing, job: Job) -> Tier | tuple[Tier, Tier]:
        """The store the write goes to, or (S, T) for a value a reshard moves between two."""
        topology = self.topology
        tiers = crossing(routing, job.value)
        if tiers is not None:
            for tier in tiers:
                topology.check(tier)
            if job.other in (None, job.value):
                return tiers
        tier = topology.check(routing.policy(job.value).tier)
        if job.other is not None and (
                topology.check(routing.policy(job.other).tier) != tier
                or tiers is not None or crossing(routing, job.other) is not None):
            raise CapabilityMissing(
                f"the {job.what} cannot apply: {job.other!r} and {job.value!r} are on different "
                "tiers and no write spans two stores; delete the entry and put it under the "
                "new value")
        return tier

    # -- requests, retried -------------------------------------------------------------

    def _route(self, fresh: bool = False) -> Steps[Routed]:
        observed = yield _FRESH if fresh else _ROUTE
        if isinstance(observed, Errored):
            raise observed.error
        assert isinstance(observed, Routed)
        return observed

    def replan(self) -> Steps[Routed]:
        """The routing to plan again under, once a place waited past its fence: read now,
        or the copy while its lease holds if that read fails (RoutingStale after)."""
        observed = yield _FRESH
        if isinstance(observed, Routed):
            return observed
        return (yield from self._route())

    def _retried(self, action: Action) -> Steps[Observation]:
        """Observe ``action``, sent again after a backoff while it is throttled or
        unavailable and the retry policy allows: the last observation."""
        started, attempt = self._now, 0
        while True:
            observed = yield action
            if not isinstance(observed, Errored) \
                    or not isinstance(observed.error, _RETRIED):
                return observed
            wait = self._retry.decide(attempt, observed.at - started, observed.error, self._rng)
            if wait is None:
                return observed
            yield Sleep(wait)
            attempt += 1

    def _locate(self, tier: Tier) -> Steps[Placement | None]:
        """The item's placement in ``tier``'s store; raises the last error."""
        observed = yield from self._retried(_LOCATE_MAIN if tier is None else Locate(tier))
        if isinstance(observed, Errored):
            raise observed.error
        assert isinstance(observed, Located)
        return observed.placement

    def _place(self, place: Place, *, retried: bool = True) -> Steps[Placed]:
        """``place`` (sent again while throttled or unavailable if ``retried``); raises the
        last error. Only for places whose retries cannot apply twice: conditioned on a
        placement the place itself changes."""
        observed = yield from (self._retried(place) if retried else self._once(place))
        if isinstance(observed, Errored):
            raise observed.error
        if isinstance(observed, NotSent):
            raise RoutingStale(f"the {self.job.what} waited past its routing's lease")
        assert isinstance(observed, Placed)
        return observed

    def _once(self, action: Action) -> Steps[Observation]:
        observed = yield action
        return observed

    def unknown(self, token: str, ambiguous: ShardexError | str, why: str,
                cause: BaseException | None = None) -> NoReturn:
        """Raise OutcomeUnknown for the write ``token``: ``ambiguous`` is the try that may
        have applied (or what happened), ``why`` why shardex could not find out."""
        item = self.job.item_id
        raise OutcomeUnknown(
            f"{self.job.what} may have applied: a try failed after it was sent ({ambiguous}), "
            f"and shardex could not find out whether it landed: {why}. The write's token is "
            f"{token}: it applied if the item's placement carries it (Store.locate); "
            f"index.get({item!r}) shows the item's entry as it is now",
            item_id=item, token=token) from cause

    # -- the write in one store ----------------------------------------------------------

    def _routed_for(self, job: Job, tier: Tier, known: list[Routed]) -> Steps[Routed]:
        """The routing to plan under: ``known``'s first if any; RoutingStale if the value's
        writes no longer go to ``tier`` (a reshard began moving it between stores)."""
        routed = known.pop() if known else (yield from self._route())
        if routed.routing.writing.policy(job.value).tier != tier:
            raise RoutingStale(f"a reshard began moving {job.value!r} between tiers while its "
                               f"{job.what} ran; it did not apply: write it again")
        return routed

    def _in_store(self, job: Job, token: str, tier: Tier, first: Routed
                  ) -> Steps[tuple[Done, Claim | None, Landing | None]]:
        """Locate, decide and place in ``tier``'s store until the outcome is known.

        A write that makes the item live in a tier's store from nothing there returns
        the claim the index's own store must confirm.
        """
        topology = self.topology
        foreign = tier in topology.foreign
        arbitrated = topology.arbiter and tier is not None and topology.tiered
        known = [first]
        claim: Claim | None = None
        copy: tuple[Tier, Placement] | None = None
        ambiguous: ShardexError | None = None  # the first try that may have applied
        give_up: ShardexError | None = None
        tried: Write | None = None
        planned: Routed | None = None
        conflicts = failures = held = 0
        started = self._now
        resend = False
        place: Place | None = None
        while True:
            if resend:
                assert planned is not None
                routed = yield from self._routed_for(job, tier, known)
                # the same routing (the copy, or a read of it since) plans the same write
                resend = routed.routing is planned.routing or routed.routing == planned.routing
            if not resend:
                try:
                    observed = yield _LOCATE_MAIN if tier is None else Locate(tier)
                    if type(observed) is Located:
                        current = observed.placement
                    else:  # the rare path: a read that failed, tried again
                        current = yield from self._locate(tier)
                except StoreError as exc:
                    if ambiguous is None:
                        raise
                    self.unknown(token, ambiguous, f"reading it back failed "
                                 f"({type(exc).__name__}: {exc})", exc)
                # (the token and the history apart: ``chain`` builds a tuple, every write)
                if planned is None and current is not None and (
                        current.token == token or token in current.history):
                    retried = self.retried(job, token, current, first.routing)
                    if retried is not None:
                        return retried, None, None
                if ambiguous is not None and tried is not None:
                    outcome = resolve(tried.expected, token, current, foreign_writes=foreign,
                                      late_writes=tier in topology.late)
                    if outcome is Outcome.APPLIED:
                        assert planned is not None
                        landing = self._landing(tier, tried, read_back(self._now), planned)
                        if copy is not None:
                            yield from self._take_out(token, copy, tried.version)
                        return _done(tried), claim, landing
                    if outcome is Outcome.UNKNOWN:
                        self.unknown(token, ambiguous, "the item's placement no longer reaches "
                                     "back to the state it was tried on")
                    if outcome is Outcome.NOT_YET and give_up is not None:
                        # not landed when read, but a try sent before may land yet: only
                        # another write of the item, or the item read again later, can say
                        self.unknown(token, ambiguous, "the item's placement is still the one "
                                     "it was tried on, and a try sent before may still land "
                                     "(a request the network or the store held)")
                if give_up is not None:
                    raise did_not_apply(give_up, job.what) if ambiguous is not None \
                        else give_up
                planned = yield from self._routed_for(job, tier, known)
                request = job.plan(planned.routing)
                survey = None
                here, copy = current, None
                if topology.tiered and not isinstance(request, Delete | Relocate):
                    survey = yield from self._survey(tier, current, planned.routing)
                    if survey.elsewhere is not None:  # a move from where it is not fails
                        stray = isinstance(request, Move) and survey.value != request.old
                        raise (ConditionFailed if stray else CapabilityMissing)(
                            f"the {job.what} cannot apply: the item has its entry "
                            f"{survey.elsewhere}" + ("" if stray else ", and no write spans "
                                                     "two stores; delete it there first"))
                    here, copy = survey.here, survey.copy
                decision = decide(request, here, planned.routing, refile=planned.refile)
                if isinstance(decision, Skip):
                    return Done(decision.result), None, None
                if isinstance(decision, Refuse):
                    raise decision.error
                # conditioned on the placement as it is, whatever it was taken for
                tried = decision if here is current else decision._replace(expected=current)
                claim = None
                if survey is not None and arbitrated and tried.entry is not None \
                        and (here is None or here.entry is None):
                    # the survey found the own store's placement: no store held the item
                    main = survey.found[None]
                    if main is not None and request.version is not None \
                            and request.version <= main.version:
                        return Done(False), None, None  # a newer write placed it there
                    if main is not None and main.version >= tried.version:
                        version = main.version + 1
                        tried = tried._replace(entry=replace(tried.entry, version=version),
                                               version=version)
                    claim = Claim(main, tried.version, token, tier,
                                  before=0 if current is None else current.version)
                elif survey is not None and survey.confirm is not None \
                        and tried.entry is not None:
                    # S serializes the crossing value's writers: confirm there (at a version
                    # S's placement does not outnumber, so the two stores' truth is this)
                    arbiter = survey.confirm[0]
                    source = survey.found[arbiter]
                    if source is not None and source.version > tried.version:
                        tried = tried._replace(entry=replace(tried.entry, version=source.version),
                                               version=source.version)
                    claim = Claim(source, tried.version, token, tier, arbiter,
                                  before=0 if current is None else current.version)
                place = None
            resend = False
            assert tried is not None
            assert planned is not None
            if place is None:  # a clean throttle sends the same place again
                place = self._send(tier, tried, token, planned)
            observed = yield place
            if isinstance(observed, Placed):
                landing = self._landing(tier, tried, observed, planned)
                if copy is not None:
                    yield from self._take_out(token, copy, tried.version)
                return _done(tried), claim, landing
            if isinstance(observed, NotSent):
                # held past the lease of the routing it was planned under: plan it again
                # under a routing read now (it did not leave, so it did not apply); a read
                # that finds the same routing sends the same place, under its own lease
                held += 1
                if held >= _MAX_HELD:
                    give_up = held_too_often(job, planned, held)
                    if ambiguous is None:
                        raise give_up
                    resend = False
                    continue  # find out whether an earlier try landed before raising
                known.append((yield from self.replan()))
                resend = ambiguous is None
                continue
            held = 0
            assert isinstance(observed, Errored)
            error = observed.error
            if isinstance(error, ConditionFailed):
                conflicts += 1
                if conflicts >= self._max_conflicts:
                    give_up = ConditionFailed(f"gave up on the {job.what} after {conflicts} "
                                              f"conflicting writes of the item ({error})")
                    if ambiguous is None:
                        raise give_up from error
                continue  # another writer changed the item first: decide again from it
            if isinstance(error, _RETRIED):
                if ambiguous is None and may_have_applied(error):
                    ambiguous = error
                wait = self._retry.decide(failures, self._now - started, error, self._rng)
                failures += 1
                if wait is None:
                    if ambiguous is None:
                        raise error
                    give_up = error
                    continue  # find out whether an earlier try landed before raising
                if self._paced and isinstance(error, Throttled):
                    wait = 0.0  # the gate paces the next try: no second backoff on top
                slept = yield _new(Sleep, (wait,))
                resend = ambiguous is None  # a clean throttle: the same write again
                if resend and type(slept) is Slept and slept.routed is not None:
                    known.append(slept.routed)  # the copy served now: no Route to ask
                continue
            if ambiguous is None:
                raise error
            give_up = error

    def _landing(self, tier: Tier, tried: Write, placed: Placed, planned: Routed
                 ) -> Landing | None:
        """What fencing checks of ``tried`` once placed: where its live entry landed; for
        a tombstone over a live entry in a store of several, the entry it erased."""
        if tried.entry is not None:
            return Landing(tier, tried.entry, placed, planned)
        gone = tried.expected
        if self.topology.tiered and gone is not None and gone.entry is not None:
            return Landing(tier, gone.entry, placed, planned, tried.version)
        return None

    def _send(self, tier: Tier, tried: Write, token: str, planned: Routed) -> Place:
        """The place of ``tried``, sent only within the fence of the routing it was planned
        under, paced on the key it lands on (or leaves, for a tombstone)."""
        landing = tried.entry if tried.entry is not None else \
            (None if tried.expected is None else tried.expected.entry)
        return Place(tier, tried.entry, tried.version, tried.expected, token,
                     planned.fence, None if landing is None else landing.shard_key)

    def _survey(self, tier: Tier, current: Placement | None, routing: Routing
                ) -> Steps[_Survey]:
        """Where else the item may live, before a write that may make it live in ``tier``'s
        store (``current``: its placement there).

        A live row of a value that stays in its store is the item's entry: no other store
        is read. Otherwise every store is, and ``holder`` says which one holds the item.
        """
        found: dict[Tier, Placement | None] = {tier: current}
        if current is not None and current.entry is not None \
                and value_of(current.entry) not in moving(routing):
            return _Survey(None, current, found)
        for other in self.topology.stores:
            if other != tier:
                found[other] = yield from self._locate(other)
        held = holder(found, routing)
        if held is not None and held[0] != tier:
            where, placement = held
            assert placement.entry is not None
            value = value_of(placement.entry)
            return _Survey(f"under {value!r} on {named(where)}", current, found, value=value)
        here = current if held is not None else dead_placement(self.job.item_id, found)
        confirm: tuple[Tier] | None = None
        copy: tuple[Tier, Placement] | None = None
        for value, (s, t) in moving(routing).items():
            if crossing(routing, value) is None or tier not in (s, t):
                continue
            if tier == t and here is not None and here.entry is not None \
                    and value_of(here.entry) == value:
                # an item of the crossing value, in T: its writers in S serialize on S
                confirm = (s,)
            elif tier == s:
                row = found.get(t)
                if row is not None and row.entry is not None and value_of(row.entry) == value:
                    copy = (t, row)  # the crossing value's row left in T: it goes after
        return _Survey(None, here, found, confirm, copy)

    # -- the index's own store arbitrates ------------------------------------------------

    def _confirm(self, job: Job, claim: Claim) -> Steps[bool]:
        """Confirm a write in ``claim.arbiter``'s store (a tombstone at its version and
        token, conditioned on the placement there as located before it); False if it
        lost (its row is then taken back out: it is void).

        Raises OutcomeUnknown when that store stays unreachable: the write stands while
        nothing else made the item live meanwhile.
        """
        arbiter = claim.arbiter
        cause: StoreError | None = None
        observed = yield from self._retried(Place(arbiter, None, claim.version, claim.main,
                                                  claim.token))
        if isinstance(observed, Placed):
            return True
        assert isinstance(observed, Errored)
        if isinstance(observed.error, _RETRIED):
            cause = observed.error
        elif not isinstance(observed.error, ConditionFailed):
            raise observed.error
        # ConditionFailed: another write reached that store first, or a try of this one
        found = claim.main
        try:
            found = yield from self._locate(arbiter)
        except StoreError as exc:
            cause = exc
        if found is not None and (claim.token in found.chain
                                  or carry_token(claim.token) in found.chain):
            return True  # confirmed, or its row carried here by a move (``crossing``)
        if cause is not None and found == claim.main:
            self.unknown(claim.token, cause, f"confirming it in {named(arbiter)} failed, and "
                         "a write there could still win over it", cause)
        try:
            here = yield from self._locate(claim.tier)
            # this write lost: its row, and any written over it here since, is void. Its
            # own row goes at the version of what it replaced: a write that took no
            # effect leaves no version behind (a put at 12 that lost left the item at 12,
            # and said False when it decided again, as did a put at 11 after it)
            if here is not None and here.entry is not None and claim.token in here.chain:
                version = max(1, claim.before) if here.token == claim.token \
                    else here.version
                with contextlib.suppress(ConditionFailed):
                    yield from self._place(Place(claim.tier, None, version, here,
                                                 void_token(claim.token)))
        except StoreError as exc:
            self.unknown(claim.token, exc, "another write made the item live elsewhere first, "
                         "and taking this one's row back out failed", exc)
        return False

    def _take_out(self, token: str, copy: tuple[Tier, Placement], version: int) -> Steps[None]:
        """Take out a row of a crossing value that a write of another value left stale (its
        readers read that store alone once the value's move ends), conditioned on its
        placement as located. Changed since, it is looked at again: a live row numbered
        below ``version`` (the write's) is still a stale copy (a mover's, copying the
        item's older entry back meanwhile) and goes; a newer one is a later write's."""
        tier, row = copy
        try:
            yield from take_out(self, tier, row, version, derived(token, "copy"))
        except StoreError as exc:
            self.unknown(token, "it applied", f"taking out the row it left stale on "
                         f"{named(tier)} failed ({type(exc).__name__}: {exc})", exc)


def _done(tried: Write) -> Done:
    return Done(True, None if tried.entry is None else tried.entry.shard_key)
