"""The write loop: carries out ``shardex.writes.decide`` until a write's outcome is known.

Every logical write (one ``put``, ``move`` or ``delete``) gets one token
(``new_token``), sent with each of its tries, so the item's placement says whether it
applied. The loop locates the item, decides, and places, conditioned on the placement
as located:

- ``ConditionFailed`` from a try: another writer got there first; locate and decide
  again from the new state.
- ``Throttled`` from a try: it did not apply; back off (``RetryPolicy``) and send the
  same write again.
- ``Unavailable`` from a try (a timeout, a dropped connection): it may have applied.
  Before anything else the loop locates the item and resolves the try
  (``shardex.writes.resolve``): applied, the call returns True; not applied, it decides
  again (a try that may have applied is never planned again); unknown,
  ``OutcomeUnknown``. Once any try was ambiguous, every later failure of the write is
  resolved the same way, so a first try that landed is never reported as failed
  because its retries were throttled.

With an ``AdaptiveGate`` each try waits for its shard key's slot, and a throttled try
is sent again in the gate's next slot without a backoff of its own (the gate has just
slowed down).

An index with tiers (``shardex.tiers``) has one loop per tier's store; ``elsewhere``
says whether an item that has no entry in this store has one on another tier, which a
``put`` or ``move`` refuses (no write spans two stores). The index's own store
arbitrates which store an item lives in (``arbiter``): a write that makes an item live
in a tier's store from nothing there (a new item, or one deleted there) is placed in
the tier, then *confirmed* in the index's own store by a tombstone at the same version
with the same token, conditioned on that store's placement as located before. A writer
that makes the item live in the index's own store meanwhile is conditioned on the same
placement, so of two clients creating one item on two stores at once exactly one wins
there; the other takes its row back out of the tier and decides again (and is refused:
the item is now elsewhere). Writes of an item already live in the tier need no
confirmation: no other store can make it live while it is (their ``elsewhere`` sees it).

So every error the loop raises, except ``OutcomeUnknown``, means the write did not
apply. ``OutcomeUnknown`` is raised only when the store stays unreachable for the
locate, or more writes of the item landed since than its placement remembers.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import NamedTuple, NoReturn, TypeVar

from shardex.admission import AdaptiveGate
from shardex.clock import Clock
from shardex.errors import (
    CapabilityMissing,
    ConditionFailed,
    OutcomeUnknown,
    ShardexError,
    StoreError,
    Throttled,
    Unavailable,
)
from shardex.keys import parse_shard_key
from shardex.retry import RetryPolicy, call_with_retry
from shardex.routing import Routing
from shardex.stores.base import Placement, Store, new_token
from shardex.writes import (
    Delete,
    Outcome,
    Refuse,
    Relocate,
    Skip,
    Write,
    WriteRequest,
    decide,
    resolve,
)

__all__ = ["Claim", "Writer", "confirm"]

T = TypeVar("T")


class Claim(NamedTuple):
    """A write that made an item live in a tier's store: what the index's own store
    (the arbiter) must confirm. ``main`` is the arbiter's placement as located before
    the tier's write; ``version`` and ``token`` the write's."""

    main: Placement | None
    version: int
    token: str


async def confirm(arbiter: Store, store: Store, namespace: str, item_id: str, claim: Claim,
                  *, retry: RetryPolicy, clock: Clock, rng: random.Random, what: str) -> bool:
    """Confirm in ``arbiter`` a write that made the item live in ``store``; False if it lost.

    A lost write's row is taken back out of ``store`` (it is void: the arbiter holds the
    item elsewhere). Raises OutcomeUnknown when the arbiter stays unreachable: the write
    stands while nothing else made the item live meanwhile.
    """
    def retried(call: Callable[[], Awaitable[T]]) -> Awaitable[T]:
        return call_with_retry(call, retry, clock=clock, rng=rng)

    cause: StoreError | None = None
    try:
        await retried(lambda: arbiter.place(namespace, item_id, None, version=claim.version,
                                            expected=claim.main, token=claim.token))
        return True
    except ConditionFailed:
        pass  # another write reached the arbiter first, or a try of this one did
    except (Throttled, Unavailable) as exc:
        cause = exc
    found = claim.main
    try:
        found = await retried(lambda: arbiter.locate(namespace, item_id))
    except StoreError as exc:
        cause = exc
    if found is not None and claim.token in found.chain:
        return True
    if cause is not None and found == claim.main:
        _unknown(what, item_id, claim.token, cause, "confirming it in the index's own store "
                 "failed, and a write there could still win over it", cause)
    try:
        here = await retried(lambda: store.locate(namespace, item_id))
        # this write lost: its row, and any written over it here since, is void
        if here is not None and here.entry is not None and claim.token in here.chain:
            with contextlib.suppress(ConditionFailed):
                await retried(lambda: store.place(namespace, item_id, None,
                                                  version=here.version, expected=here,
                                                  token=new_token()))
    except StoreError as exc:
        _unknown(what, item_id, claim.token, exc, "another write made the item live elsewhere "
                 "first, and taking this one's row back out failed", exc)
    return False


def _unknown(what: str, item_id: str, token: str, ambiguous: ShardexError, why: str,
             cause: BaseException | None) -> NoReturn:
    raise OutcomeUnknown(
        f"{what} may have applied: a try failed after it was sent ({ambiguous}), and "
        f"shardex could not find out whether it landed: {why}. The write's token is "
        f"{token}: it applied if the item's placement carries it (Store.locate); "
        f"index.get({item_id!r}) shows the item's entry as it is now",
        item_id=item_id, token=token) from cause


def _did_not_apply(error: ShardexError, what: str) -> ShardexError:
    """The error to raise for a write that failed, once a read showed it had not landed."""
    message = f"{what} did not apply (the item was read back after an ambiguous try): {error}"
    if isinstance(error, Throttled):
        return Throttled(message, key=error.key, reason=error.reason)
    if isinstance(error, Unavailable | ConditionFailed):
        return type(error)(message)
    return error


class Writer:
    """Writes the items of index ``namespace`` on ``store``, one logical write per ``write``.

    ``retry`` paces tries that were throttled or unavailable (and the locates);
    ``max_conflicts`` bounds how many times a write is planned again after other
    writers changed the item first. ``gate`` paces each try per shard key.
    ``elsewhere(item_id, current, routing)`` (an index with tiers) returns where else
    the item has its entry (a description) when ``current``, its placement here, is not
    it, or None; ``arbiter`` (a tier's writer) is the index's own store, where a write
    that makes an item live in the tier is confirmed.
    """

    def __init__(self, store: Store, namespace: str, *, retry: RetryPolicy, clock: Clock,
                 rng: random.Random, max_conflicts: int, gate: AdaptiveGate | None = None,
                 elsewhere: Callable[[str, Placement | None, Routing],
                                     Awaitable[str | None]] | None = None,
                 arbiter: Store | None = None) -> None:
        self._store = store
        self._gate = gate
        self._elsewhere = elsewhere
        self._arbiter = arbiter
        self._namespace = namespace
        self._retry = retry
        self._clock = clock
        self._rng = rng
        self._max_conflicts = max_conflicts

    async def _locate(self, item_id: str, store: Store | None = None) -> Placement | None:
        store, namespace = store or self._store, self._namespace
        return await call_with_retry(lambda: store.locate(namespace, item_id), self._retry,
                                     clock=self._clock, rng=self._rng)

    async def write(self, item_id: str, plan: Callable[[Routing], WriteRequest],
                    routing: Callable[[], Awaitable[Routing]], what: str) -> bool:
        """Carry out one logical write of ``item_id``; return what the call returns.

        ``plan(routing)`` builds the request under a routing (its fresh shard key is
        drawn there); ``routing()`` returns the routing writes follow now (it raises
        RoutingStale when that cannot be known). ``what`` names the write in errors.
        """
        for _ in range(self._max_conflicts):
            result, claim = await self._write(item_id, plan, routing, what)
            if claim is None or self._arbiter is None or await confirm(
                    self._arbiter, self._store, self._namespace, item_id, claim,
                    retry=self._retry, clock=self._clock, rng=self._rng, what=what):
                return result
        raise ConditionFailed(f"gave up on the {what} after {self._max_conflicts} writes of "
                              "the item to other stores won over it")

    async def _write(self, item_id: str, plan: Callable[[Routing], WriteRequest],
                     routing: Callable[[], Awaitable[Routing]], what: str
                     ) -> tuple[bool, Claim | None]:
        """The write loop in this store: the result, and what the arbiter must confirm."""
        token = new_token()
        claim: Claim | None = None
        foreign = self._store.capabilities.foreign_writes
        ambiguous: ShardexError | None = None  # the first try that may have applied
        give_up: ShardexError | None = None
        tried: Write | None = None
        planned: Routing | None = None
        conflicts = failures = 0
        started = self._clock.now()
        resend = False
        while True:
            if resend:
                resend = await routing() is planned
            if not resend:
                try:
                    current = await self._locate(item_id)
                except StoreError as exc:
                    if ambiguous is None:
                        raise
                    self._unknown(what, item_id, token, ambiguous, f"reading it back failed "
                                  f"({type(exc).__name__}: {exc})", exc)
                if ambiguous is not None and tried is not None:
                    outcome = resolve(tried.expected, token, current, foreign_writes=foreign)
                    if outcome is Outcome.APPLIED:
                        return True, claim
                    if outcome is Outcome.UNKNOWN:
                        self._unknown(what, item_id, token, ambiguous, "the item's placement "
                                      "no longer reaches back to the state it was tried on",
                                      None)
                if give_up is not None:
                    raise _did_not_apply(give_up, what) if ambiguous is not None else give_up
                planned = await routing()
                request = plan(planned)
                if self._elsewhere is not None and not isinstance(request, Delete | Relocate):
                    other = await self._elsewhere(item_id, current, planned)
                    if other is not None:
                        raise CapabilityMissing(
                            f"the {what} cannot apply: the item has its entry {other}, and no "
                            "write spans two stores; delete it there first")
                decision = decide(request, current, planned)
                if isinstance(decision, Skip):
                    return decision.result, None
                if isinstance(decision, Refuse):
                    raise decision.error
                tried = decision
                claim = None
                if self._arbiter is not None and tried.entry is not None \
                        and (current is None or current.entry is None):
                    main = await self._locate(item_id, self._arbiter)
                    if main is not None and main.entry is not None:
                        raise CapabilityMissing(  # made live there since ``elsewhere`` looked
                            f"the {what} cannot apply: the item has its entry under "
                            f"{parse_shard_key(main.entry.shard_key)[0]!r} on the index's own "
                            "store, and no write spans two stores; delete it there first")
                    if main is not None and request.version is not None \
                            and request.version <= main.version:
                        return False, None  # a newer write placed (or deleted) the item there
                    if main is not None and main.version >= tried.version:
                        version = main.version + 1
                        tried = tried._replace(entry=replace(tried.entry, version=version),
                                               version=version)
                    claim = Claim(main, tried.version, token)
            resend = False
            assert tried is not None
            try:
                await self._place(item_id, tried, token)
            except ConditionFailed as exc:
                conflicts += 1
                if conflicts >= self._max_conflicts:
                    give_up = ConditionFailed(f"gave up on the {what} after {conflicts} "
                                              f"conflicting writes of the item ({exc})")
                    if ambiguous is None:
                        raise give_up from exc
                continue  # another writer changed the item first: decide again from it
            except (Throttled, Unavailable) as exc:
                if isinstance(exc, Unavailable) and ambiguous is None:
                    ambiguous = exc
                wait = self._retry.decide(failures, self._clock.now() - started, exc, self._rng)
                failures += 1
                if wait is None:
                    if ambiguous is None:
                        raise
                    give_up = exc
                    continue  # find out whether an earlier try landed before raising
                if self._gate is not None and isinstance(exc, Throttled):
                    wait = 0.0  # the gate paces the next try: no second backoff on top
                await self._clock.sleep(wait)
                resend = ambiguous is None  # a clean throttle: the same write again
                continue
            except ShardexError as exc:
                if ambiguous is None:
                    raise
                give_up = exc
                continue
            return True, claim

    async def _place(self, item_id: str, tried: Write, token: str) -> None:
        store, namespace = self._store, self._namespace

        def place() -> Awaitable[float]:
            return store.place(namespace, item_id, tried.entry, version=tried.version,
                               expected=tried.expected, token=token)

        if self._gate is None:
            await place()
            return
        landing = tried.entry if tried.entry is not None else \
            (None if tried.expected is None else tried.expected.entry)
        if landing is None:
            await place()  # a tombstone of a never-placed item: no shard key to pace
            return
        await self._gate.call(landing.shard_key, place)

    def _unknown(self, what: str, item_id: str, token: str, ambiguous: ShardexError,
                 why: str, cause: BaseException | None) -> NoReturn:
        _unknown(what, item_id, token, ambiguous, why, cause)
