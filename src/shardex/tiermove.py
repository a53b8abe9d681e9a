"""Writes and reads of a value that a reshard moves between two tiers' stores.

No transaction spans two stores, so while readers cover both layouts (``read-both``,
``write-new``, ``verified``) an item of the value may have a placement in the store it
leaves (S) and in the store it goes to (T). Which one is the item's truth is decided
from the two placements alone (``truth``):

- a live entry in S is the truth (T holds at most a stale copy);
- otherwise T's placement is, if S has none, or T's version is higher, or it is the
  same version and S's tombstone carries a token of T's chain (the *confirmation*);
- otherwise S's (a tombstone, or never placed).

**S serializes every write.** A write that lands in T (a ``write-new`` client's, or the
mover's) is placed in T first, conditioned on T's placement, then *confirmed* by a
tombstone in S at the same version with the same token, conditioned on S's placement as
located; a write that lands in S (a ``read-both`` client's) is one conditional write in
S. Two writers that decided from the same state therefore meet on S's placement: the
second fails its condition there and decides again from the new state. A writer that
replaces another writer's row in T that S has not confirmed first rewrites S as it is
under a new token (a *fence*): that writer may be between its two steps, and its
confirmation then fails instead of landing over a row that is no longer its own. A T
write whose confirmation failed is superseded by what S now says (a live entry, or a tombstone at a
version at least as high). One whose writer stopped between the two steps (its caller
had an unknown outcome) is void while S still holds the item live, and stands once the
item had moved to T (it is then the highest version there). The mover moves an
entry the same way at its own version (T, then S's tombstone), so a move and an
application write of the same item also meet on S. When S is a tier's store, a write
that makes an item new to both S and T live is also confirmed in the index's own store
(``shardex.writer.confirm``), which arbitrates new items whatever moves; a write that
would leave a row of a value that does not move behind in T is refused.

**Reads** read S's keys, then T's, and hold every row found in T against both
placements (``truth``): a stale or unconfirmed copy in T is replaced by the truth
(S's live entry, which a write moved there after S was read) or dropped. So a read
misses no entry wherever the writes and the mover put it, and returns no entry the
truth has deleted. Outside the union states a value is on one tier only: writes and
reads go to its store as everywhere else, and the parity check before ``read-new``
holds every row of both stores against the truth.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import NamedTuple

from shardex.clock import Clock
from shardex.errors import (
    CapabilityMissing,
    ConditionFailed,
    OutcomeUnknown,
    RoutingStale,
    ShardexError,
    Throttled,
    Unavailable,
)
from shardex.fanout import FanOut
from shardex.keys import parse_shard_key
from shardex.retry import RetryPolicy, call_with_retry
from shardex.routing import Routing
from shardex.stores.base import Placement, Position, Store, StoredEntry, new_token
from shardex.tiers import TierStores, arbitrated, truth
from shardex.writer import Claim, Writer, confirm
from shardex.writes import RELOCATING, Refuse, Relocate, Skip, WriteRequest, decide

__all__ = ["CrossTier", "TierReads", "TierWrites", "arbitrated", "truth"]


class _Landed(NamedTuple):
    """A write that made an item live in a tier's store (T's if ``into_target``, else
    S's), new to both: the claim the index's own store must confirm."""

    claim: Claim
    into_target: bool


class CrossTier:
    """One value's writes and reads while a reshard moves it between two stores.

    ``source`` (S) is the store of the tier the reshard moved the value from when it
    began (a rollback moves it back there, S keeps its role), ``target`` (T) the other;
    ``target_tier`` is T's tier name (None: the index's own store). A writer whose
    layout puts the value in T writes T and confirms in S; the others write S. The
    mover moves an entry into the store writes go to from the other. ``retry`` paces
    throttled and unavailable tries and locates.
    """

    def __init__(self, value: str, source: Store, target: Store, target_tier: str | None,
                 namespace: str, *, main: Store | None, retry: RetryPolicy, clock: Clock,
                 rng: random.Random, max_conflicts: int) -> None:
        self.value = value
        self._source = source
        self._target = target
        # S arbitrates the value's items; when S is a tier's store, the index's own store
        # (T or a third) still arbitrates an item new to both (see ``shardex.writer``)
        self._arbiter = None if source is main else main  # None: no arbiter but S
        self._target_tier = target_tier
        self._namespace = namespace
        self._retry = retry
        self._clock = clock
        self._rng = rng
        self._max_conflicts = max_conflicts

    async def _locate(self, store: Store, item_id: str) -> Placement | None:
        namespace = self._namespace
        found: Placement | None = await call_with_retry(
            lambda: store.locate(namespace, item_id), self._retry, clock=self._clock,
            rng=self._rng)
        return found

    async def placements(self, item_id: str) -> tuple[Placement | None, Placement | None]:
        """The item's placements in S and in T (S first: see the module's reads)."""
        source = await self._locate(self._source, item_id)
        return source, await self._locate(self._target, item_id)

    # -- writes ----------------------------------------------------------------------

    async def write(self, item_id: str, plan: Callable[[Routing], WriteRequest],
                    routing: Callable[[], Awaitable[Routing]], what: str) -> bool:
        """Carry out one logical write of ``item_id`` (``shardex.writer.Writer.write``'s terms)."""
        for _ in range(self._max_conflicts):
            result, claim = await self._write(item_id, plan, routing, what)
            if claim is None or self._arbiter is None or await confirm(
                    self._arbiter, self._target if claim.into_target else self._source,
                    self._namespace, item_id, claim.claim, retry=self._retry,
                    clock=self._clock, rng=self._rng, what=what):
                return result
        raise ConditionFailed(f"gave up on the {what} after {self._max_conflicts} writes of "
                              "the item to other stores won over it")

    async def _write(self, item_id: str, plan: Callable[[Routing], WriteRequest],
                     routing: Callable[[], Awaitable[Routing]], what: str
                     ) -> tuple[bool, _Landed | None]:
        """The write in S and T: the result, and what the index's own store must confirm."""
        token = new_token()
        landed: _Landed | None = None
        conflicts = failures = 0
        ambiguous: ShardexError | None = None
        started = self._clock.now()
        while True:
            source, target = await self.placements(item_id)
            if source is not None and (source.token == token or token in source.history):
                return True, landed  # written in S, or confirmed there
            held, in_target = truth(source, target)
            if self._arbiter is self._target and target is not None \
                    and target.entry is not None and _value_of(target.entry) != self.value:
                # T is the index's own store: another value's entry there is the item's
                held, in_target = target, True
            if target is not None and target.token == token and in_target:
                step = self._confirm(item_id, target, source, token)  # T landed, S did not
            else:
                now = await routing()
                request = plan(now)
                into_target = now.writing.policy(self.value).tier == self._target_tier
                decision = _decide(request, held, in_target, into_target, now)
                if isinstance(decision, Skip):
                    return decision.result, None
                if isinstance(decision, Refuse):
                    raise decision.error
                if in_target and not into_target and decision[0] is not None:
                    _refuse_stranded(held, now, what)
                entry, version = decision
                landed = None
                if entry is not None and (held is None or held.entry is None):
                    floor = max([version, *(p.version for p in (source, target) if p)])
                    landed = await self._claim(item_id, target, token, floor, into_target,
                                               what)
                    version = version if landed is None else landed.claim.version
                step = self._place(item_id, entry, version, source, target, token,
                                   into_target, claimed=landed is not None)
            try:
                await step
            except ConditionFailed as exc:
                conflicts += 1
                if conflicts >= self._max_conflicts:
                    raise ConditionFailed(f"gave up on the {what} after {conflicts} "
                                          f"conflicting writes of the item ({exc})") from exc
                continue
            except (Throttled, Unavailable) as exc:
                if isinstance(exc, Unavailable):
                    ambiguous = ambiguous or exc
                wait = self._retry.decide(failures, self._clock.now() - started, exc, self._rng)
                failures += 1
                if wait is None:
                    if ambiguous is None:
                        raise
                    raise OutcomeUnknown(
                        f"{what} may have applied: a try failed after it was sent "
                        f"({ambiguous}) and the store stayed unreachable; its token is {token}",
                        item_id=item_id, token=token) from exc
                await self._clock.sleep(wait)
                continue
            return True, landed

    async def _claim(self, item_id: str, target: Placement | None, token: str, version: int,
                     into_target: bool, what: str) -> _Landed | None:
        """What the index's own store must confirm of a write that makes the item live in
        a tier's store, new to both S and T (None: S or the write's store is that store).

        Raises CapabilityMissing if the item is live there (a third store) under another
        value."""
        arbiter = self._arbiter
        if arbiter is None or arbiter is (self._target if into_target else self._source):
            return None
        main = target if arbiter is self._target else await self._locate(arbiter, item_id)
        if main is not None and main.entry is not None and arbiter is not self._target:
            raise CapabilityMissing(
                f"the {what} cannot apply: the item has its entry under "
                f"{_value_of(main.entry)!r} in the index's own store, and no write spans "
                "two stores; delete it there first")
        version = max(version, 1 if main is None else main.version + 1)
        return _Landed(Claim(main, version, token), into_target)

    async def _place(self, item_id: str, entry: StoredEntry | None, version: int,
                     source: Placement | None, target: Placement | None, token: str,
                     into_target: bool, *, claimed: bool = False) -> None:
        namespace = self._namespace
        if not into_target:
            version = max(version, 0 if source is None else source.version)
            await self._source.place(namespace, item_id, _at(entry, version), version=version,
                                     expected=source, token=token)
            # a claim confirmed in T removes T's row itself
            if not claimed and target is not None and target.entry is not None and (
                    entry is None or _value_of(target.entry) != self.value):
                # T's row is now stale. One of this value stays while a put moves the item
                # here (union readers hold it against the truth, see reads); a delete's, or
                # another value's (whose readers read T alone), goes: a reader that misses
                # it misses an item no longer there
                with contextlib.suppress(ConditionFailed):
                    await call_with_retry(
                        lambda: self._target.place(namespace, item_id, None,
                                                   version=max(version, target.version),
                                                   expected=target, token=new_token()),
                        self._retry, clock=self._clock, rng=self._rng)
            return
        if source is not None and target is not None and target.token != token \
                and not truth(source, target)[1]:
            source = await self._fence(item_id, source)
        version = max([version, *(p.version for p in (source, target) if p is not None)])
        await self._target.place(namespace, item_id, _at(entry, version), version=version,
                                 expected=target, token=token)
        await self._source.place(namespace, item_id, None, version=version, expected=source,
                                 token=token)

    async def _fence(self, item_id: str, source: Placement) -> Placement:
        """Rewrite S's placement as it is under a new token, so that no confirmation
        pending on it can land any more; return it as it now is.

        T holds another writer's row that S has not confirmed: its writer may still be
        between its two steps, and would confirm it after this write replaced it in T
        (the write would be lost). Once S has changed, that confirmation fails and its
        writer decides again. ConditionFailed if S changed since it was located.
        """
        fence = new_token()
        await self._source.place(self._namespace, item_id, source.entry,
                                 version=source.version, expected=source, token=fence)
        fenced = await self._locate(self._source, item_id)
        if fenced is None or fenced.token != fence:
            raise ConditionFailed(f"item {item_id!r} was written in {self._source.uri} "
                                  "while its row in the other store was being replaced")
        return fenced

    async def _confirm(self, item_id: str, target: Placement, source: Placement | None,
                       token: str) -> None:
        await self._source.place(self._namespace, item_id, None, version=target.version,
                                 expected=source, token=token)

    # -- reads -----------------------------------------------------------------------

    async def held(self, rows: Sequence[StoredEntry]) -> list[StoredEntry]:
        """The truth of each item of ``rows`` read in T: its live entry, wherever it is."""
        pairs = await asyncio.gather(*(self.placements(row.item_id) for row in rows))
        out = []
        for source, target in pairs:
            placement, _ = truth(source, target)
            if placement is not None and placement.entry is not None \
                    and _value_of(placement.entry) == self.value:
                out.append(placement.entry)
        return out

    async def page(self, source: FanOut, source_keys: Sequence[str], target: FanOut,
                   target_keys: Sequence[str], *, after: Position | None, descending: bool,
                   limit: int) -> tuple[list[StoredEntry], bool]:
        """The next ``limit`` entries beyond ``after``, and whether any lies beyond them."""
        value = self.value
        out: list[StoredEntry] = []
        seen: set[str] = set()
        position = after
        while True:
            need = limit - len(out)
            # S is read before T at every position: no continuation read earlier
            first = await source.page(value, source_keys, after=position,
                                      descending=descending, limit=need, fresh=True)
            then = await target.page(value, target_keys, after=position,
                                     descending=descending, limit=need, fresh=True)
            # a phase with more beyond its page bounds what this round may return
            bounds = [page.entries[-1].position for page in (first, then)
                      if page.more and page.entries]
            bound = (max(bounds) if descending else min(bounds)) if bounds else None
            found = {e.item_id: e for e in [*first.entries, *await self.held(then.entries)]}
            ready = sorted((e for e in found.values() if e.item_id not in seen
                            and _beyond(e.position, position, descending)
                            and (bound is None or not _beyond(e.position, bound, descending))),
                           key=lambda e: e.position, reverse=descending)
            taken = ready[:need]
            out += taken
            seen.update(e.item_id for e in taken)
            more = first.more or then.more or len(ready) > need
            if len(out) >= limit or not more or (bound is None and not taken):
                return out, more
            position = bound if bound is not None else taken[-1].position

    async def stream(self, source: FanOut, source_keys: Sequence[str], target: FanOut,
                     target_keys: Sequence[str]) -> AsyncIterator[StoredEntry]:
        """Every entry of the value, S's keys first, T's rows held against the truth."""
        seen: set[str] = set()
        async for entry in source.stream(self.value, source_keys, dedupe=True):
            seen.add(entry.item_id)
            yield entry
        batch: list[StoredEntry] = []
        async for row in target.stream(self.value, target_keys, dedupe=True):
            batch.append(row)
            if len(batch) >= 64:
                for entry in await self._fresh(batch, seen):
                    yield entry
                batch = []
        for entry in await self._fresh(batch, seen):
            yield entry

    async def _fresh(self, rows: list[StoredEntry], seen: set[str]) -> list[StoredEntry]:
        out = [e for e in await self.held(rows) if e.item_id not in seen]
        seen.update(e.item_id for e in out)
        return out


class TierWrites:
    """The writes of a tiered index: a value's on its tier's write loop, a moving value's
    through its ``CrossTier``. ``routing()`` is the routing writes follow now."""

    def __init__(self, tiers: TierStores, writers: Mapping[str | None, Writer],
                 crossing: Callable[[Routing, str], CrossTier | None],
                 routing: Callable[[], Awaitable[Routing]], name: str) -> None:
        self._tiers = tiers
        self._writers = writers
        self._crossing = crossing
        self._routing = routing
        self._name = name

    async def write(self, value: str, item_id: str, plan: Callable[[Routing], WriteRequest],
                    what: str, *, other: str | None = None) -> bool:
        """One logical write of ``item_id`` under ``value`` (``other``: the value a move
        leaves). Raises CapabilityMissing for a move between tiers."""
        routing = await self._routing()
        crossing = self._crossing(routing, value)
        if crossing is not None and other in (None, value):
            return await crossing.write(item_id, plan, self._routing, what)
        tier = self._tiers.tier_of(routing, value)
        if other is not None and (self._tiers.tier_of(routing, other) != tier
                                  or crossing is not None
                                  or self._crossing(routing, other) is not None):
            raise CapabilityMissing(
                f"the {what} cannot apply: {other!r} and {value!r} are on different tiers "
                "and no write spans two stores; delete the entry and put it under the new value")

        known: list[Routing] = [routing]

        async def current() -> Routing:
            # the routing read above serves the loop's first decision: one read, not two
            latest = known.pop() if known else await self._routing()
            # a reshard that just began moving the value still writes where it was
            if latest.writing.policy(value).tier != tier:
                raise RoutingStale(f"index {self._name!r}: a reshard began moving {value!r} "
                                   f"between tiers while its {what} ran; it did not apply: "
                                   "write it again")
            return latest

        return await self._writers[tier].write(item_id, plan, current, what)


class TierReads:
    """The reads of a tiered index: a value on its tier's fan-out, a moving value on two.

    ``fanouts`` holds each tier's fan-out; ``crossing(routing, value)`` is the value's
    ``CrossTier`` while a reshard moves it between tiers (None otherwise).
    """

    def __init__(self, tiers: TierStores, fanouts: Mapping[str | None, FanOut],
                 crossing: Callable[[Routing, str], CrossTier | None]) -> None:
        self._tiers = tiers
        self._fanouts = fanouts
        self._crossing = crossing

    def _cross(self, routing: Routing, value: str
               ) -> tuple[CrossTier, FanOut, list[str], FanOut, list[str]] | None:
        """A moving value's reader: S's fan-out and keys, then T's."""
        crossing = self._crossing(routing, value)
        tiers = self._tiers.crossing(routing, value)
        if crossing is None or tiers is None or routing.previous is None:
            return None
        keys = {p.tier: p.shard_keys(value)
                for p in (routing.previous.policy(value), routing.policy(value))}
        origin, other = tiers
        return (crossing, self._fanouts[origin], keys[origin], self._fanouts[other],
                keys[other])

    def held(self, routing: Routing | None, found: Mapping[str | None, Placement | None]
             ) -> Placement | None:
        """The live placement that holds of an item's placement in each tier (``found``).

        An item has one, but while a value moves between tiers it may have one in both
        stores: ``truth`` says which holds. Elsewhere the newest live one.
        """
        meta = None if routing is None else routing.reshard
        for value in () if meta is None else meta.values:
            assert routing is not None
            tiers = self._tiers.crossing(routing, value)
            if tiers is not None:
                placement, _ = truth(found.get(tiers[0]), found.get(tiers[1]))
                if placement is not None and placement.entry is not None:
                    return placement
        return arbitrated(found)

    def _on(self, routing: Routing, value: str) -> FanOut:
        return self._fanouts[self._tiers.tier_of(routing, value)]

    async def page(self, routing: Routing, value: str, *, after: Position | None,
                   descending: bool, limit: int) -> tuple[list[StoredEntry], bool]:
        """The next ``limit`` entries of ``value`` beyond ``after``, and whether more lie beyond."""
        cross = self._cross(routing, value)
        if cross is not None:
            crossing, *phases = cross
            return await crossing.page(*phases, after=after,  # type: ignore[arg-type]
                                       descending=descending, limit=limit)
        first, then = routing.read_phases(value)
        merged = await self._on(routing, value).page(value, then, first=first, after=after,
                                                     descending=descending, limit=limit,
                                                     layout=routing.version)
        return merged.entries, merged.more

    def stream(self, routing: Routing, value: str) -> AsyncIterator[StoredEntry]:
        """Every entry of ``value``, in arrival order, an item found twice once."""
        cross = self._cross(routing, value)
        if cross is not None:
            return cross[0].stream(*cross[1:])
        first, then = routing.read_phases(value)
        return self._on(routing, value).stream(value, then, first=first,
                                               dedupe=routing.reads_both(value))

    async def count(self, routing: Routing, value: str) -> int:
        """How many entries ``value`` has (mid-reshard: an item found twice counted once)."""
        first, then = routing.read_phases(value)
        if first or self._cross(routing, value) is not None:
            return len({e.item_id async for e in self.stream(routing, value)})
        return await self._on(routing, value).count(value, then)


def _decide(request: WriteRequest, held: Placement | None, in_target: bool,
            into_target: bool, routing: Routing) -> Skip | Refuse | tuple[StoredEntry | None, int]:
    """What ``request`` does to an item whose truth is ``held``: the entry and version.

    A move (``Relocate``) applies to an entry still held on its source key in the store
    writes do not go to.
    """
    if isinstance(request, Relocate):
        entry = None if held is None else held.entry
        if in_target == into_target or held is None or entry is None \
                or entry.shard_key != request.source:
            return Skip(False)  # moved, deleted or re-written since the mover saw it
        meta = routing.reshard
        if meta is None or routing.state not in RELOCATING \
                or (meta.id, meta.generation) != (request.reshard, request.generation):
            return Skip(False)
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
    other = _value_of(held.entry)
    previous = routing.previous
    if previous is not None and previous.policy(other).tier != routing.policy(other).tier:
        return  # a value that moves too: its readers hold T's rows against the truth
    raise CapabilityMissing(
        f"the {what} cannot apply: the item has its entry under {other!r} in another "
        "store than the one this write goes to, and no write spans two stores; delete "
        "it there first")


def _value_of(entry: StoredEntry) -> str:
    return parse_shard_key(entry.shard_key)[0]


def _at(entry: StoredEntry | None, version: int) -> StoredEntry | None:
    if entry is None or entry.version == version:
        return entry
    return replace(entry, version=version)


def _beyond(position: Position, after: Position | None, descending: bool) -> bool:
    if after is None:
        return True
    return position < after if descending else position > after
