"""The write decision, the outcome resolution and the truth across stores: pure functions.

Pure: ``decide`` and ``resolve`` read no store and raise nothing; they return values
(immutable named tuples and an enum, cheap on the write path).

``decide(request, current, routing)`` says what a write does to an item whose placement
is ``current``:

- ``Write(entry, version, expected)``: place ``entry`` (None: delete) at ``version``,
  conditioned on the placement being still ``expected`` (``current`` as located);
- ``Skip(result)``: nothing to write; the call returns ``result`` (False when a newer
  write or the item's absence makes it moot);
- ``Refuse(error)``: the request cannot apply to the item as it is; raise ``error``.

A ``Relocate`` is a reshard's move of an entry onto the layout writes now follow: it
keeps the entry's version (so the application's own ordering is untouched), applies
only while the entry is still on the shard key the mover found it on, and is skipped
when the entry is already where the layout wants it. Without a reshard it is a
*settle*: the write engine's own re-placing of an entry that landed on a layout the
readers no longer read (``shardex.write`` explains when), in whatever state.

``resolve(expected, token, found)`` says whether a write whose try failed ambiguously
(a timeout: it may have landed) applied, from the placement ``found`` after it:
``APPLIED`` if the write's token is the placement's or in its history; ``NOT_APPLIED``
if its history shows another write directly after ``expected``'s (the try was
conditioned on ``expected``, so once another write replaced it, the try can never land),
or if the placement is still ``expected`` on a store where a failed request is settled
when it fails; ``NOT_YET`` if it is still ``expected`` where a request may land late
(the network or the service held it: not landed so far, which a try sent again with the
same token and condition may settle, but no proof it never will); ``UNKNOWN`` when the
history does not reach back that far. Identity, never equal content: another client's
identical write is not mistaken for one's own.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from shardex.errors import ConditionFailed, InvalidInput, ShardexError
from shardex.keys import stored_value
from shardex.model.entries import MAX_VERSION, NO_TOKEN, Placement, StoredEntry
from shardex.routing import Routing
from shardex.write.topology import crossing, moved

__all__ = ["Decision", "Delete", "Move", "Outcome", "Put", "RELOCATING", "Refuse", "Relocate",
           "Skip", "Write", "WriteRequest", "arbitrated", "carry_token", "decide", "derived",
           "erase_token", "held_across", "holder", "in_place", "refiles", "relocating",
           "resolve", "target_key", "truth", "value_of", "void", "void_token"]


class Put(NamedTuple):
    """Write the item's entry under ``value`` (moving it there from wherever it is).

    ``sort`` None keeps the sort the item's entry has ('' for a new entry).
    ``fresh_key`` is the shard key a new entry of ``value`` would take under the routing
    (the index draws it: a random or round-robin choice is not the decision's to make).
    """

    value: str
    item_id: str
    sort: str | None
    attrs: Mapping[str, Any]
    version: int | None
    fresh_key: str


class Move(NamedTuple):
    """Move the item's entry from ``old`` to ``new``; ``sort``/``attrs`` None keep its own."""

    item_id: str
    old: str
    new: str
    sort: str | None
    attrs: Mapping[str, Any] | None
    version: int | None
    fresh_key: str


class Delete(NamedTuple):
    """Delete the item's entry if it is under ``value``."""

    value: str
    item_id: str
    version: int | None


class Relocate(NamedTuple):
    """Re-place the item's entry of ``value``, found on ``source``, onto ``fresh_key``.

    A reshard's mover sends it, for generation ``generation`` of reshard ``reshard``. It
    applies only while the routing is still in that generation, in a state where the
    mover works (``RELOCATING``), the entry still on ``source`` and not already on a key
    the layout writes follow would give it; the entry keeps its version (at least 1).
    ``fresh_key`` is the key the layout gives a new entry. ``reshard`` None is a settle
    (the write engine's own): it applies in any state.
    """

    item_id: str
    value: str
    source: str
    fresh_key: str
    reshard: str | None
    generation: int
    version: None = None


# the states in which a reshard's entries move: the mover's, and the sweep of retired keys
RELOCATING = frozenset({"write-new", "verified", "retired"})


WriteRequest = Put | Move | Delete | Relocate


class Write(NamedTuple):
    """Place ``entry`` (None: a tombstone) at ``version`` if the placement is still ``expected``."""

    entry: StoredEntry | None
    version: int
    expected: Placement | None


class Skip(NamedTuple):
    """Write nothing; the call returns ``result``."""

    result: bool


@dataclass(frozen=True, slots=True)
class Refuse:
    """Write nothing; the call raises ``error``, an exception of ``kind`` with ``message``.

    The decision holds no exception object: one raised from a frame that still holds it
    would form a reference cycle (exception, traceback, frame) that keeps everything the
    frame references alive until the garbage collector runs.
    """

    kind: type[ShardexError]
    message: str

    @property
    def error(self) -> ShardexError:
        """A new exception to raise."""
        return self.kind(self.message)


Decision = Write | Skip | Refuse


def value_of(entry: StoredEntry) -> str:
    """The logical key of a stored entry (its shard key's value); MalformedItem for a
    shard key shardex does not write (``shardex.keys.stored_value``)."""
    return stored_value(entry.shard_key, entry.item_id)


def target_key(whole: Routing, value: str, fresh_key: str, current: str | None, *,
               refile: bool = False) -> str:
    """The shard key a write of ``value`` puts the item's entry on (``current``: the key
    its entry is on now, None if it has none; ``fresh_key``: a new entry's).

    An entry already on one of the value's current shards stays there: for the random
    strategies a re-put must not wander, and for hash it is the same key anyway. While
    readers read both layouts of one store, an entry on a key of either stays there too,
    unless ``refile`` (``refiles``: the mover's own states, once no client can still be
    in ``read-both``): then it goes where the mover would take it. A writer had re-filed
    entries on its own layout's key in every state, so clients of ``read-both`` and
    ``write-new`` (each within its routing's lease) moved entries both ways, and a union
    read missed one moved against its order (``shardex.migrate``). Re-filing once the
    mover runs keeps an entry re-sorted behind the mover's cursor from being left behind.
    """
    if current is None:
        return fresh_key
    routing, key = whole.writing, current
    if routing.is_current_key(value, key) and routing.policy(value).strategy != "hash":
        return key
    previous = whole.previous
    if not refile and previous is not None and whole.reads_both(value) \
            and previous.policy(value).tier == whole.policy(value).tier \
            and (whole.policy(value).has_key(value, key)
                 or previous.policy(value).has_key(value, key)):
        return key
    return fresh_key


def refiles(routing: Routing, lease: float, wall: float) -> bool:
    """True if a write at wall time ``wall`` may re-file an entry onto the layout written
    (``target_key``): in the mover's states, once every client acts on them (the mover's
    own start, ``ready_at``: ``changed_at`` + the routing's ``lease`` + the margin), when
    writers and readers all read the layouts in the order the re-file goes."""
    meta = routing.reshard
    return meta is not None and routing.state in RELOCATING \
        and wall >= meta.changed_at + lease + meta.margin


def in_place(routing: Routing, value: str, shard_key: str, item_id: str) -> bool:
    """True if an entry of ``value`` on ``shard_key`` is where ``routing``'s writes put it.

    Under ``hash`` that is the item's own shard; under ``random`` and ``round_robin``
    any of the value's shard keys.
    """
    policy = routing.writing.policy(value)
    if policy.strategy == "hash":
        return shard_key == routing.writing.shard_key(value, item_id)
    return policy.has_key(value, shard_key)


def relocating(routing: Routing, request: Relocate) -> bool:
    """True while ``routing`` is in the reshard generation ``request`` belongs to, moving
    (always, for a settle)."""
    if request.reshard is None:
        return True
    meta = routing.reshard
    return meta is not None and meta.id == request.reshard \
        and meta.generation == request.generation and routing.state in RELOCATING


def decide(request: WriteRequest, current: Placement | None, routing: Routing, *,
           refile: bool = False) -> Decision:
    """Decide what ``request`` does to an item whose placement is ``current``.

    Writes follow ``routing.writing``: the layout writes follow in the routing's state;
    an item's entry is re-filed there mid-reshard only with ``refile`` (``target_key``).
    """
    whole, routing = routing, routing.writing
    held = 0 if current is None else current.version
    if isinstance(request, Relocate):
        entry = None if current is None else current.entry
        if not relocating(whole, request) or entry is None \
                or entry.shard_key != request.source \
                or in_place(routing, request.value, entry.shard_key, request.item_id):
            return Skip(False)  # moved, deleted or re-written since the mover saw it
        return Write(replace(entry, shard_key=request.fresh_key, version=max(1, held)),
                     max(1, held), current)
    if request.version is not None and request.version <= held:
        return Skip(False)  # a newer write already placed (or deleted) this item
    entry = None if current is None else current.entry
    if request.version is None and held >= MAX_VERSION:
        return Refuse(InvalidInput, f"item {request.item_id!r} is at the highest version, "
                                    "10**38 - 1, so no write can follow it (one without "
                                    "version= stores the item's version plus one, one with "
                                    "version= must be above it)")
    version = held + 1 if request.version is None else request.version
    item_id = request.item_id
    if isinstance(request, Put):
        sort = request.sort
        if sort is None:
            sort = "" if entry is None else entry.sort
        return Write(StoredEntry(
            shard_key=target_key(whole, request.value, request.fresh_key,
                                 None if entry is None else entry.shard_key, refile=refile),
            sort=sort, item_id=item_id, attrs=request.attrs, version=version),
            version, current)
    if isinstance(request, Move):
        if entry is None or value_of(entry) != request.old:
            where = "no entry" if entry is None else f"its entry under {value_of(entry)!r}"
            return Refuse(ConditionFailed, f"cannot move {item_id!r} from {request.old!r} to "
                                           f"{request.new!r}: the item has {where}")
        return Write(StoredEntry(
            shard_key=target_key(whole, request.new, request.fresh_key, entry.shard_key,
                                 refile=refile),
            sort=entry.sort if request.sort is None else request.sort, item_id=item_id,
            attrs=entry.attrs if request.attrs is None else request.attrs, version=version),
            version, current)
    if entry is None or value_of(entry) != request.value:
        return Skip(False)
    return Write(None, version, current)


class Outcome(enum.Enum):
    """Whether a write whose try failed ambiguously applied: what ``resolve`` finds."""

    APPLIED = "applied"
    NOT_APPLIED = "not applied"
    NOT_YET = "not applied yet"
    UNKNOWN = "unknown"


def resolve(expected: Placement | None, token: str, found: Placement | None, *,
            foreign_writes: bool = False, late_writes: bool = False) -> Outcome:
    """Say whether the write ``token``, tried on ``expected``, applied, from ``found`` after.

    ``found`` is the item's placement read after the try (None: never placed).
    ``foreign_writes`` is the store's capability: there the application writes the
    items too and leaves no token, so a state no token wrote is only known unchanged
    when it is found exactly as located, attribute for attribute. ``late_writes`` too:
    there a try found not landed may still land (``NOT_YET``).
    """
    if found is not None and (found.token == token or token in found.history):
        return Outcome.APPLIED
    if found == expected:
        return Outcome.NOT_YET if late_writes else Outcome.NOT_APPLIED
    mark = NO_TOKEN if expected is None or expected.token is None else expected.token
    if foreign_writes and mark == NO_TOKEN:
        return Outcome.UNKNOWN
    chain = (NO_TOKEN,) if found is None else found.chain
    # the try could only land directly after ``mark``, and whatever follows it there is
    # not this write
    return Outcome.NOT_APPLIED if mark in chain else Outcome.UNKNOWN


def void(main: Placement | None, placement: Placement) -> bool:
    """True if the index's own store's placement ``main`` says a tier's ``placement`` is
    not the item's: ``main`` is live, or it is a newer tombstone that no write of
    ``placement``'s chain left (a write made live in the tier lost to a write in the own
    store, and stopped before taking its row back out; the item was deleted there
    since). ``shardex.write`` says why the index's own store arbitrates.

    Newer, not as new: a write made live in a tier is numbered above the own store's
    placement it is confirmed on, so only a later write there outnumbers it, while a
    tombstone that removes a row a move left behind keeps that row's version. A
    tombstone that took out a write's row when it lost in the tier that serialized it
    (``void_token``) deleted nothing: it says what the placement before that write said,
    which is nothing against a row whose chain it led to (the row that write lost to,
    such as a rollback's copy, numbered below the loser).
    """
    if main is None:
        return False
    if main.entry is not None:
        return True
    if main.version <= placement.version or (main.token or NO_TOKEN) in placement.chain:
        return False
    before = _before_void(main)
    return before is None or (before != NO_TOKEN and before not in placement.chain)


def derived(token: str, tag: str) -> str:
    """A token of its own for a step of the write ``token`` (a round, a fence, a cleanup)."""
    return hashlib.blake2b(f"{token}/{tag}".encode(), digest_size=16).hexdigest()


def void_token(token: str) -> str:
    """The token of the tombstone that takes out the row of the write ``token`` when it
    lost in the store that arbitrates it: ``void`` reads it back from a placement."""
    return derived(token, "void")


def carry_token(token: str) -> str:
    """The token under which the row of the write ``token`` is carried to another store
    (a move's, or the write's own settle): the write, whose confirmation or claim then
    fails on it, reads it back as its own (``shardex.write.crossing``)."""
    return derived(token, "carry")


def erase_token(token: str) -> str:
    """The token of the tombstone with which the write ``token``, once it stands where
    readers read it, takes out an older live row of the item in another store (a copy a
    rollback's mover made while the write was in flight): ``truth`` reads it back."""
    return derived(token, "erase")


def _before_void(placement: Placement) -> str | None:
    """The token of the placement before the write whose row ``placement`` took out as
    void (NO_TOKEN: there was none), if it is such a tombstone and its history reaches
    back that far; else None."""
    chain = placement.chain
    for i in range(len(chain) - 2, 0, -1):
        if void_token(chain[i]) == placement.token:
            return chain[i - 1]
    return None


def truth(source: Placement | None, target: Placement | None) -> tuple[Placement | None, bool]:
    """The item's placement that holds, of S's ``source`` and T's ``target`` while a value
    moves between two stores (``shardex.write`` says why); True if T's.

    S's tombstone as new as T's placement holds, unless a write of T's chain left it:
    its own token (a move's take-out, a carry's), or the tombstone with which a write
    that stands in T took out an older copy in S (``erase_token``), which deleted
    nothing of it (it had read as the item deleted: a put said ok and was never listed).
    """
    if source is not None and source.entry is not None:
        return source, False
    if target is None:
        return source, False
    if source is None or target.version > source.version:
        return target, True
    if target.version == source.version and source.token is not None and (
            source.token in target.chain
            or any(erase_token(token) == source.token for token in target.chain)):
        return target, True
    return source, False


def arbitrated(found: Mapping[str | None, Placement | None]) -> Placement | None:
    """The item's live placement of its placement in each tier's store (``found``; the
    index's own store under None), or None: the own store's if live, else the newest
    live one it does not say is void (``void``)."""
    main = found.get(None)
    if main is not None and main.entry is not None:
        return main
    live = [p for tier, p in found.items() if tier is not None and p is not None
            and p.entry is not None and not void(main, p)]
    return max(live, key=lambda p: p.version) if live else None


def held_across(source: Placement | None, target: Placement | None, value: str
                ) -> tuple[Placement | None, bool]:
    """``truth`` of S's ``source`` and T's ``target`` for an item while ``value`` crosses
    from S to T, and True if T's: a live row of another value in T holds too when S
    holds no live entry (its writes need not have passed through S)."""
    held, in_target = truth(source, target)
    if (held is None or held.entry is None) and target is not None \
            and target.entry is not None and value_of(target.entry) != value:
        return target, True
    return held, in_target


def holder(found: Mapping[str | None, Placement | None], routing: Routing
           ) -> tuple[str | None, Placement] | None:
    """The store whose placement holds the item's live entry, and that placement; None if
    the item has no live entry. ``found`` is its placement in each store (None: the
    index's own) as located under ``routing``.

    While a value crosses between two stores (``crossing``), ``held_across`` of the two
    decides when it finds a live entry, and a live row of the value it did not pick is
    a copy a move left behind, no entry of the item. Outside those states a live row of a
    value the reshard moves, in the store the value is not in, is such a copy too. Of
    what is left, the index's own store arbitrates (``arbitrated``).
    """
    meta = routing.reshard
    values = () if meta is None or routing.previous is None else meta.values
    copies: set[str | None] = set()
    for value in values:
        pair = crossing(routing, value)
        if pair is not None:
            held, in_target = held_across(found.get(pair[0]), found.get(pair[1]), value)
            if held is not None and held.entry is not None:
                return (pair[1] if in_target else pair[0]), held
        stores = pair or moved(routing, value)
        if stores is None:
            continue
        home = None if pair is not None else routing.policy(value).tier
        for tier in stores:
            p = found.get(tier)
            if p is not None and p.entry is not None and value_of(p.entry) == value \
                    and (pair is not None or tier != home):
                copies.add(tier)
    kept = {tier: (replace(p, entry=None) if tier in copies and p is not None else p)
            for tier, p in found.items()}
    chosen = arbitrated(kept)
    if chosen is None:
        return None
    return next(tier for tier, p in kept.items() if p is chosen), chosen
