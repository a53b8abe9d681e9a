"""Listings kept between their pages (continuations), and when a shard of one reads ahead.

A page of an ordered listing ends inside what its shards returned. The entries read
beyond it, where each shard's read stopped, and each shard's request in flight are kept
here under the page's last position (and the layout it was read in), so that the next
page with that cursor resumes them: a full listing reads each entry once. Once a caller
continues a listing (a page resumed from one), its shards *read ahead*: a shard whose
buffer holds less than its last request asks for its next one at once, while the
caller consumes what it has, instead of when the merge runs it dry.

**When a shard reads ahead.** From a listing's second page on, a shard asks for its next
request before the merge runs it dry, so it lands while the caller consumes what is
there: for a caller slower than the store, once the shard holds less than a quarter of
its last request or than a page may take from it, asking four times its last; for a
caller that comes back sooner than a request takes, as soon as it holds less than its
last request, asking for what the caller takes from it in two round trips
(``ahead_size``: the store's page for a caller that comes straight back), so every shard
keeps a request in flight and their round trips overlap as a gather's do. A page that
must wait for a shard sends every request that reads ahead at that moment too, not
after its wait. What a listing holds stays bounded: about four times what a slow caller
consumed plus a page, at most two requests a shard (two store pages), and
``MAX_KEPT_ENTRIES`` in all.

A first page never reads ahead, so a caller who wants only that page pays for that
page; that costs a full listing one round trip beyond a gather's when a shard's share
does not cover what the gather's last request of it was short of. A caller who says it
reads the listing to its end (``to_end``) does not pay it: its first page asks each shard
for a store page (``first_size``) and reads ahead. Why, by measurement
(``benchmarks/bench_reads.py --latency``, 1,250 entries a shard): at 20 ms a request, a
listing in pages of 1,000 that refilled each shard when it ran dry waited for one round
trip after another, 1.9x the time of a gather that reads every shard at once, and in
pages of 100, 5.7x; growing four-fold from the first page's share, 1.38x and 2.15x;
reading ahead, 1.38x for both, that one round trip; read to the end, 1.00x.

Pure bookkeeping and decisions; ``shardex.fanout`` sends the requests.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from shardex.fanout.merge import GROWTH, ShardStream
from shardex.model.entries import Position
from shardex.stores.metered import Usage

__all__ = ["CONTINUATION_TTL", "Continuations", "Listing", "Phases", "Where", "ahead_size",
           "first_size", "reads_ahead"]

CONTINUATION_TTL = 5.0
MAX_CONTINUATIONS = 64
MAX_KEPT_ENTRIES = 200_000
MAX_SHARED = 4096  # positions remembered as two listings' (then forgotten all at once)

# value, descending, the cursor's position, the layout the page was read in
Where = tuple[str, bool, Position, Any]
# the shard keys of a listing: those read first at each position, then the others
Phases = tuple[tuple[str, ...], tuple[str, ...]]


@dataclass(slots=True, eq=False)
class Listing:
    """The shard streams of one listing, carried from page to page.

    ``keys`` are its phases (``FanOut.page``'s ``first`` and ``keys``): ``streams`` holds
    one stream for each key of the first phase, then one for each of the second (a key
    in both has two), and ``lead`` says how many are of the first.
    ``ahead``: the caller continued it, so its shards read ahead; ``eager``: the caller
    came back for its last page (``interval`` after the one before) sooner than a request
    takes (``latency``: how long its last request took, sent to landed); ``low``: what
    its last page asked each shard for. ``kept``: entries
    buffered while it waits for its next page (counted against ``MAX_KEPT_ENTRIES``);
    ``made``: when it was kept; ``written``: shard keys this process wrote since.
    """

    keys: Phases
    streams: list[ShardStream]
    ahead: bool = False
    eager: bool = False
    low: int = 1
    latency: float = 0.0
    interval: float = 0.0
    made: float = 0.0
    kept: int = 0
    waiting: bool = False
    written: set[str] = field(default_factory=set)
    lead: int = 0

    def stop(self) -> None:
        """Cancel every request in flight: nobody will read this listing further."""
        for stream in self.streams:
            stream.stop()


def reads_ahead(stream: ShardStream, listing: Listing) -> bool:
    """True if ``stream``, of a listing being read ahead, should send its next request now.

    For a caller slower than the store (``listing.eager`` False), once the stream holds
    less than a quarter of what its last request asked for, or less than a page may
    take from it (``listing.low``): the next request, four times the last, lands while
    the caller consumes the rest, and the listing holds about four times what its caller
    consumed plus a page, as when each shard was read again only once dry. For a caller
    faster than the store, as soon as it holds less than its last request: every shard
    keeps a request in flight, so their round trips overlap as a gather's do, instead of
    each costing the caller a wait of its own; a shard then holds at most two requests.
    A stream of a listing's first phase (``listing.lead``) reads on while it holds less
    than three of its requests, whatever the caller: the second phase reads a position
    only after the first has, so the first stays ahead (four requests at most held), and
    the further ahead it is, the more each request of the second phase reads (one
    request ahead, a union listing of 20,000 entries in pages of 100 took 80 requests
    where two take 68, in the same round trips; on DynamoDB Local pages() 64, now 53).
    """
    if stream.exhausted or stream.pending is not None or stream.failed is not None:
        return False
    held = len(stream.buffer)
    if listing.lead > 0 and not stream.then:
        # a first phase reads two requests further than an eager caller's shard: how far
        # it has read bounds the second phase, which asks only once it has landed
        return held < 3 * stream.asked
    if listing.eager:
        return held < stream.asked
    return held < max(listing.low, stream.asked // GROWTH)


def ahead_size(stream: ShardStream, listing: Listing, max_page: int) -> int:
    """What ``stream``'s next request asks for, in a listing its caller continues.

    For a caller slower than the store, four times its last (``stream.page_size``). For
    a caller faster than the store, what the caller takes from the shard while one
    request is in flight, twice over, so that the next request is sent before the
    shard runs dry and the caller never waits for two round trips in a row: about
    ``latency / interval`` pages of ``low`` entries (up to the store's page; all of it
    for a caller that comes straight back). Growing four-fold instead, a shard of 1,250
    entries read in pages of 100 took 17, 68, 272 and 1,000 entries: five round trips
    one after another where a gather takes two.
    """
    if not listing.eager:
        return stream.page_size
    pages = listing.latency / max(listing.interval, listing.latency / max_page, 1e-9)
    return min(max_page, max(stream.page_size, math.ceil(2 * pages * listing.low)))


def first_size(share: int, width: int, max_page: int, room: int) -> int:
    """What the first request of each of ``width`` shards asks for, in a listing its
    caller reads to its end (``FanOut.page``'s ``to_end``).

    The store's page, as a gather's first request does, so the listing takes the
    gather's round trips (a first page of shares costs one more wherever a share does
    not cover what a shard's last store page is short of), at the same read units: the
    caller reads every entry anyway. Bounded by what the read-ahead may hold: the
    shards' first requests and their next ones (two each) fit in ``room`` entries, and
    never less than ``share``.
    """
    return max(share, min(max_page, room // (2 * max(1, width))))


# outcomes of a write request that wrote nothing: no listing's shard changed
_UNWRITTEN = frozenset({"throttled", "conflict", "unavailable", "cancelled"})


class Continuations:
    """The listings of one fan-out that wait for their next page, oldest first, bounded.

    At most ``MAX_CONTINUATIONS`` listings and ``MAX_KEPT_ENTRIES`` buffered entries
    (the oldest go first, their requests in flight cancelled); one older than
    ``CONTINUATION_TTL`` seconds is not resumed.
    """

    def __init__(self, namespace: str) -> None:
        self._namespace = namespace
        self._listings: OrderedDict[Where, Listing] = OrderedDict()
        self._watched: dict[str, set[Where]] = {}
        # positions two listings' pages ended at, and when: none is kept there within
        # the TTL, which a continuation outlives nowhere
        self._shared: dict[Where, float] = {}
        self.kept = 0

    def __len__(self) -> int:
        return len(self._listings)

    def listings(self) -> list[Listing]:
        return list(self._listings.values())

    def keep(self, where: Where, listing: Listing, now: float) -> None:
        """Keep ``listing`` for the page after ``where``; forget the expired and the oldest.

        Two listings whose pages end at the same position (of the same value, order and
        layout) would share one continuation, and a listing resumed from another's holds
        what that one read, maybe before an entry present throughout its own life was
        there (another process's write: 3 of 300 missed in a tier move). Neither is kept:
        both read their next page from the cursor."""
        other = self._forget(where)
        if other is not None:
            other.stop()
        shared = now - self._shared.get(where, -math.inf) <= CONTINUATION_TTL
        if shared or (other is not None and now - other.made <= CONTINUATION_TTL):
            if len(self._shared) >= MAX_SHARED:
                self._shared.clear()
            self._shared[where] = now  # a third listing there is not kept either
            listing.stop()
            return
        while self._listings:
            oldest = next(iter(self._listings.values()))
            if now - oldest.made <= CONTINUATION_TTL:
                break
            self.drop(next(iter(self._listings)))
        listing.made, listing.waiting, listing.written = now, True, set()
        listing.kept = sum(len(s.buffer) for s in listing.streams)
        self._listings[where] = listing
        self.kept += listing.kept
        for stream in listing.streams:
            self._watched.setdefault(stream.key, set()).add(where)
        while self._listings and (len(self._listings) > MAX_CONTINUATIONS
                                  or self.kept > MAX_KEPT_ENTRIES):
            self.drop(next(iter(self._listings)))

    def resume(self, where: Where, keys: Phases, shares: tuple[int, int],
               now: float) -> Listing | None:
        """The listing kept for ``where``, if it can still serve; each is resumed once.

        ``shares`` is what a page asks each shard of the first phase and of the second
        for, at least. A shard this process wrote since is read again from ``where``'s
        position, and every shard of a listing read in two phases is (what its second
        phase read rests on what its first read before); a listing of other shard keys
        or phases, or older than the TTL, is dropped.
        """
        found = self._forget(where)
        if found is None:
            return None
        if found.keys != keys or now - found.made > CONTINUATION_TTL:
            found.stop()
            return None
        restart = bool(found.written) and found.lead > 0
        for i, stream in enumerate(found.streams):
            share = shares[0] if i < found.lead else shares[1]
            if restart or stream.key in found.written:
                stream.restart(where[2], share)
            else:
                stream.page_size = max(stream.page_size, share)
        return found

    def landed(self, listing: Listing, entries: int) -> None:
        """Count ``entries`` that landed in ``listing`` while it is kept (``waiting``)."""
        listing.kept += entries
        self.kept += entries

    def room(self) -> bool:
        """True while kept listings may grow: read-ahead stops at the bound."""
        return self.kept < MAX_KEPT_ENTRIES

    def left(self) -> int:
        """Entries kept listings may still hold before read-ahead stops."""
        return max(0, MAX_KEPT_ENTRIES - self.kept)

    def abandon(self, value: str, descending: bool, position: Position) -> None:
        """Drop the listing kept for the page after ``position`` of ``value``, in any
        layout: its caller stopped (what it buffered would hold room others read into)."""
        for where in [w for w in self._listings if w[:3] == (value, descending, position)]:
            self.drop(where)

    def drop(self, where: Where) -> None:
        found = self._forget(where)
        if found is not None:
            found.stop()

    def _forget(self, where: Where) -> Listing | None:
        found = self._listings.pop(where, None)
        if found is not None:
            found.waiting = False
            self.kept -= found.kept
            for stream in found.streams:
                watchers = self._watched.get(stream.key)
                if watchers is not None:
                    watchers.discard(where)
                    if not watchers:
                        del self._watched[stream.key]
        return found

    def written(self, event: object) -> None:
        """Mark the listings whose shards the store just wrote (a meter subscriber)."""
        if not self._watched or type(event) is not Usage or not event.write or \
                event.outcome in _UNWRITTEN or event.namespace != self._namespace:
            return
        for part in event.shares:
            for where in self._watched.get(part.key, ()):
                self._listings[where].written.add(part.key)

    def close(self) -> None:
        """Forget every listing and cancel their requests in flight."""
        for listing in self._listings.values():
            listing.stop()
        self._listings.clear()
        self._watched.clear()
        self._shared.clear()
        self.kept = 0
