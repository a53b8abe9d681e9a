"""The pure half of an ordered fan-out: shard streams, what is safe to merge, and shares.

No I/O here: ``shardex.fanout`` sends the requests and hands each page to its stream
(``_ShardStream.accept``); these functions decide what the merge may take and what to ask
each shard for.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import math
from bisect import bisect_right
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from shardex.model.entries import Position, QueryPage, StoredEntry, beyond

__all__ = ["EVERYTHING", "GROWTH", "Reach", "Reader", "ShardStream", "ahead_of", "merge_safe",
           "newest_per_item", "reach", "share", "sized", "trailing", "within"]

_MIN_FIRST_PAGE = 4
_SHORT = 0.003  # how often a page may need a second round trip to some shard
GROWTH = 4  # each further request of a shard asks this many times its last
_SPREAD = 3.0  # a second phase's request asks this many standard deviations over its count


@dataclass(slots=True, eq=False)
class ShardStream:
    """One shard key read forward from a position, one request at a time.

    ``page_size`` is what its next request asks for, ``asked`` what its last one did;
    ``pending`` is the request in flight (at most one), ``failed`` the error of the last
    one when nobody waited for it (a read ahead), so that a page needing the shard asks
    again. ``generation`` grows on ``restart``: a request sent before it is not accepted.
    ``then``: the stream is of a listing's second phase (``shardex.fanout.page``);
    ``got`` entries it returned where the first phase had read ``beside`` (``sized``);
    ``sent``: when the request in flight was sent. ``reader`` reads the shard where the
    fan-out's own store does not (``Reader``).
    """

    key: str
    after: Position | None
    page_size: int
    buffer: list[StoredEntry] = field(default_factory=list)
    exhausted: bool = False
    asked: int = 0
    pending: asyncio.Task[None] | None = None
    failed: BaseException | None = None
    generation: int = 0
    then: bool = False
    got: int = 0
    beside: int = 0
    sent: float = 0.0
    reader: Reader | None = None
    # the malformed items its requests read ahead left out, for the page that takes
    # what they read (a read ahead collects for no call: ``metered.detached``)
    skipped: list[Any] = field(default_factory=list)

    def accept(self, page: QueryPage, max_page: int) -> None:
        self.buffer.extend(page.entries)
        self.after = page.resume
        self.exhausted = page.resume is None
        self.page_size = min(max_page, self.page_size * GROWTH)

    def restart(self, after: Position | None, page_size: int) -> None:
        """Forget what was read, and the request in flight: read again from ``after``."""
        self.stop()
        self.generation += 1
        self.after = after
        self.buffer.clear()
        self.skipped.clear()  # read again, they are skipped (and reported) again
        self.exhausted = False
        self.failed = None
        self.page_size = page_size

    def stop(self) -> None:
        """Cancel the request in flight, if any (the store still charges what it read)."""
        if self.pending is not None:
            self.pending.cancel()
            self.pending = None

    def covers(self, bound: Position, descending: bool) -> bool:
        """True if this shard has been read up to ``bound`` (or to its end)."""
        if self.exhausted or self.after is None:
            return self.exhausted
        return self.after <= bound if descending else self.after >= bound

    def clip(self, bound: Position, descending: bool) -> None:
        """A page read up to ``bound`` (``Store.query``'s ``until``) that ended there leaves
        the stream at ``bound``, not at its end: it reads on from there. Anything read
        beyond ``bound`` is forgotten, to be read again from there."""
        if self.exhausted or (self.after is not None
                              and beyond(self.after, bound, descending)):
            del self.buffer[_safe(self, bound, descending):]
            self.after, self.exhausted = bound, False


# how far a set of streams has been read: (bounded, position). (False, None): every stream
# is read to its end, so nothing bounds it; (True, None): one has not been read at all.
Reach = tuple[bool, Position | None]
EVERYTHING: Reach = (False, None)

# A shard read somewhere other than the fan-out's store (a second phase on another store,
# ``shardex.tierreads``): (key, after, descending, limit, until, hedged) -> its page, read
# up to ``until`` (how far the first phase had been read; None: to the end) and no further.
Reader = Callable[[str, Position | None, bool, int, Position | None, bool],
                  Awaitable[QueryPage]]


def reach(streams: Sequence[ShardStream], descending: bool) -> Reach:
    """The position up to which every stream of ``streams`` not exhausted has been read."""
    bound: Position | None = None
    for stream in streams:
        if stream.exhausted:
            continue
        if stream.after is None:
            return True, None
        if bound is None or (stream.after > bound if descending else stream.after < bound):
            bound = stream.after
    return (False, None) if bound is None else (True, bound)


def ahead_of(stream: ShardStream, held: Reach, descending: bool) -> bool:
    """True if ``held`` reaches beyond where ``stream`` has been read (or it has no bound)."""
    bounded, bound = held
    if stream.exhausted:
        return False
    if not bounded:
        return True
    return bound is not None and not stream.covers(bound, descending)


def _safe(stream: ShardStream, bound: Position | None, descending: bool) -> int:
    """How many of the stream's buffered entries lie at or before ``bound``.

    A union listing asks it of every stream as each request lands (some 125 times a
    listing of 2,000 entries): the whole buffer and none are answered from its ends
    (0.2 us), and a search compares positions as they are (1.2 us; a sort-key object
    made at each step took 2.1 us a call).
    """
    buffer = stream.buffer
    if bound is None or not buffer:
        return len(buffer)
    if descending:
        if buffer[-1].position >= bound:
            return len(buffer)
        if buffer[0].position < bound:
            return 0
        low, high = 0, len(buffer)
        while low < high:  # the first entry beyond (below) the bound
            middle = (low + high) // 2
            if buffer[middle].position < bound:
                high = middle
            else:
                low = middle + 1
        return low
    if buffer[-1].position <= bound:
        return len(buffer)
    if buffer[0].position > bound:
        return 0
    return bisect_right(buffer, bound, key=_position)


def _position(entry: StoredEntry) -> Position:
    return entry.position


def _run(buffer: list[StoredEntry], safe: int,
         tag: int) -> Iterator[tuple[Position, int, StoredEntry]]:
    for entry in islice(buffer, safe):
        yield entry.position, tag, entry


def within(streams: Sequence[ShardStream], after: Position | None, bound: Position,
           descending: bool) -> int:
    """How many entries the buffers of ``streams`` hold beyond ``after``, up to ``bound``."""
    total = 0
    for stream in streams:
        total += _safe(stream, bound, descending)
        if after is not None:
            total -= _safe(stream, after, descending)
    return total


def sized(stream: ShardStream, beside: int, keys: int = 0) -> int:
    """What a stream of a second phase asks for, to be read as far as the first phase,
    which holds ``beside`` entries over that stretch.

    The store reads no further than the first phase (``until``), so what it asks for
    is what the request likely reads: what it returned where the first phase had read
    as much before (its ``got`` per ``beside``), with a margin of three standard
    deviations (short, it takes another round trip), never more than its ``page_size``.
    With nothing learnt yet, what an even spread over the listing's ``keys`` keys puts
    there (a whole page without ``keys``). A request's size is what the hedger learns
    its latency by (``shardex.hedging``): asked for a whole page, each would seem a
    whole page's read.
    """
    if not stream.beside:
        if not keys or stream.asked:
            # an even spread asked too little once (the stream has not learnt: it fell
            # short of the bound): the phases are unevenly filled, a whole page now
            return stream.page_size
        # nothing learnt yet: as many as an even spread over the listing's ``keys`` keys
        expect = beside / keys
    else:
        expect = beside * stream.got / stream.beside
    # the count is about Poisson: the mean and three standard deviations
    wanted = int(expect + _SPREAD * math.sqrt(expect)) + 1
    return max(_MIN_FIRST_PAGE, min(stream.page_size, wanted))


def trailing(lead: Sequence[ShardStream], rest: Sequence[ShardStream],
             dry: Sequence[ShardStream], remaining: int, descending: bool) -> list[ShardStream]:
    """The first phase's requests in flight a page waits for before it reads ``dry``.

    ``dry`` are streams of the second phase ``rest`` that the page needs, read short of
    how far the first phase ``lead`` has been read. Asked now, they read only up to that
    bound; when the first-phase stream at the bound has a request in flight, its landing
    moves the bound, and the second phase is asked again. If what lies up to the bound
    (the entries both phases hold there, and what each of ``dry`` found beside as many
    before: ``sized``'s estimate) will not fill the ``remaining`` entries of the page,
    the page waits for that request and then asks the second phase once: the same round
    trips, without a request on every second-phase key for a sliver. Empty: ask ``dry``
    now.
    """
    bounded, bound = reach(lead, descending)
    if not bounded or bound is None:
        return []
    holding = [s for s in lead if not s.exhausted and s.after == bound]
    if not holding or any(s.pending is None for s in holding):
        return []  # nothing in flight moves the bound
    found = float(within(lead, None, bound, descending) + within(rest, None, bound, descending))
    for stream in dry:
        if not stream.beside:
            return []  # nothing learnt of the second phase yet: read it now
        found += within(lead, stream.after, bound, descending) * stream.got / stream.beside
        if found >= remaining:
            return []
    return holding


def merge_safe(live: list[ShardStream], out: list[StoredEntry], limit: int,
               descending: bool, bound: Position | None) -> int:
    """Move the buffered entries that are safe to order from ``live`` onto ``out``.

    An entry is safe when no shard still to be read can hold one before it: up to
    ``bound`` (None: every shard is read to its end), which the caller works out from
    how far each shard not yet exhausted has been read (``reach``).
    The safe runs are merged lazily, so a page takes only what it returns from buffers
    that may hold many pages. Once ``out`` holds ``limit`` entries, only copies of its
    last entry (mid-reshard duplicates) are still taken, so they are not mistaken for
    more. Returns how many entries were consumed.
    """
    runs = [_run(s.buffer, _safe(s, bound, descending), i) for i, s in enumerate(live)]
    consumed = [0] * len(live)
    last = out[-1].position if out else None
    for position, tag, entry in heapq.merge(*runs, reverse=descending):
        if position == last:
            if entry.version > out[-1].version:
                out[-1] = entry
        elif len(out) >= limit:
            break
        else:
            out.append(entry)
            last = position
        consumed[tag] += 1
    for stream, taken in zip(live, consumed, strict=True):
        del stream.buffer[:taken]
    return sum(consumed)


def newest_per_item(entries: list[StoredEntry]) -> list[StoredEntry]:
    """``entries`` (one union page, in order) with one entry per item: its newest.

    An item has one entry at a time, but a page of two layouts reads their keys at two
    instants: a write that gave the item a new position on the key read second, after
    its old one was read on the other, shows it at both (a put in ``write-new`` listed
    an item twice, and a count said 61 of 60). The older is what that write replaced.
    """
    if len({entry.item_id for entry in entries}) == len(entries):
        return entries  # no item twice (nearly every page): no versions to compare
    newest: dict[str, StoredEntry] = {}
    for entry in entries:
        seen = newest.get(entry.item_id)
        if seen is None or entry.version > seen.version:
            newest[entry.item_id] = entry
    return [entry for entry in entries if newest[entry.item_id] is entry]


@functools.lru_cache(maxsize=1024)
def share(limit: int, shards: int, max_page: int) -> int:
    """What to ask each of ``shards`` shards for, first, to fill a page of ``limit``.

    A shard's count among the page's ``limit + 1`` first entries (the one past the end
    says whether there is more) is binomial. The share is the smallest count that
    every shard stays below with probability 1 - ``_SHORT``, so that one round trip
    per shard almost always fills the page: a second one doubles a page's latency.
    """
    wanted = limit + 1
    if shards == 1:
        return max(1, min(wanted, max_page))
    p = 1.0 / shards
    ratio = p / (1.0 - p)
    pmf = (1.0 - p) ** wanted  # P(count == 0)
    below = 0.0
    count = 0
    while count < wanted and shards * (1.0 - below - pmf) > _SHORT:
        below += pmf
        pmf *= (wanted - count) / (count + 1) * ratio
        count += 1
    return min(wanted, max_page, max(_MIN_FIRST_PAGE, count + 1))
