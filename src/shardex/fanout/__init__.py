"""Concurrent fan-out reads over a value's shard keys, and their merge.

Each shard is read lazily, page by page, only as far as the merge needs: a page of
``limit`` asks each of N shards for its share (``merge.share``: a count no shard exceeds
among the page's first entries, but rarely), a shard is asked again only when the merge
has used up what it returned, together with every shard the page will likely use up,
and each further request of a shard is four times the size of its last (up to the store's
page). Requests are bounded by a semaphore, retried on throttling with
backoff and jitter, hedged (``shardex.hedging``; not a request read ahead, which nobody
waits for when it is sent), and a shard that still fails fails
the whole read with ``IncompleteRead``: nothing partial is returned as if it were whole.

**Pages of one listing do not read an entry twice.** A page ends inside what its
shards returned: the entries read beyond it, where each shard's read stopped and its
request in flight are kept in memory as the page's *continuation*
(``shardex.fanout.listing``), under the page's cursor position and the layout it was read
in. The next page with that cursor resumes each shard where it stopped and starts from
the entries kept, so a full listing reads each entry once and each shard with growing
requests, as a hand-rolled gather does. The cursor itself holds only the position in
the merged order (``shardex.cursor``), so it stays valid anywhere; a continuation is
only a saving, and is not used (the page is read from the cursor's position on every
shard, as before) when the layout changed since (a reshard step: another routing
version), when it is older than ``CONTINUATION_TTL`` seconds, in another process, or
after the cursor was used once already. A shard written through this store since its
entries were kept is read again from the cursor's position, so a page never misses or
resurrects this process's own writes; writes of other processes may show up to
``CONTINUATION_TTL`` seconds late (the staleness a DynamoDB GSI allows anyway).

**A listing the caller continues reads ahead** (``shardex.fanout.listing`` says when and
how far, and why by measurement): a shard asks for its next request before the merge
runs it dry, so its round trips overlap the caller's work and the other shards' as a
gather's do, within a bound on what a listing holds. A first page never reads ahead, and
asks each shard only for its share, unless its caller says it reads the listing to its
end (``to_end``: ``ShardedIndex.pages``, a scan mid-reshard).

**While a reshard moves entries** from one layout's keys to another's, a listing reads
its shards in two phases (``first``, the keys entries move away from, then ``keys``, the
keys they move to: ``Routing.read_phases``), and keeps, resumes and reads ahead its
continuations as a stable listing does. A scan or count of such a value lists it the
same way, in the store's pages (``FanOut.listing``), not each phase to its end. Why no
entry present throughout the listing is missed or listed twice, however entries move
between its pages or while a page's requests are in flight:

- *The order.* A request of a second-phase stream is sent only once every first-phase
  stream's requests have read past where it starts, and it reads no further than they
  had read when it was sent (its ``bound``: ``Store.query``'s ``until``), reading on
  from there later. So every position ``p`` is read on a second-phase key by a request sent after a
  first-phase request that read ``p`` had landed. What a stream keeps (in a page, in a
  continuation, or landed ahead) is what it read then; resuming does not change when.
- *No miss.* The mover moves an entry atomically, from a first-phase key to a
  second-phase key, never back (the movers' direction is part of the routing's conduct:
  a rollback swaps the phases, and a continuation is resumed only in the layout and
  phases it was read in). If the entry at ``p`` moved before the first-phase read of
  ``p``, it was on its second-phase key when the later second-phase read of ``p``
  read it; if after, the first-phase read found it. A stream kept from an earlier
  page counts as read when it was read, and that order is all the argument needs.
- *No duplicate.* Found on both keys, the copies share the position ``(sort, item_id)``
  and are merged into one (the newer version). The merge returns an entry only when
  every stream has been read past it (``reach``), so both copies are in buffers when
  the first is returned and the second is taken with it; a later request of a stream
  reads only beyond where it stopped, past every entry already returned.
- *An item written meanwhile.* An entry written during the listing is not one present
  throughout: a write that gives an item a new position on a second-phase key after
  its old position was read on a first-phase key would show it twice, so a page keeps
  one entry per item, its newest (``merge.newest_per_item``). Across pages, as across
  a stable layout's (or a DynamoDB Query's) pages, an item moved during the listing
  may show at its old and new positions: the listing is no snapshot.
- *This process's own writes* (its own mover, or the application) restart every stream
  of a two-phase continuation from the cursor: what the second phase kept rests on
  what the first phase read, so neither is read again alone.
- *Layouts.* A continuation is resumed only under the routing version it was read in,
  and its data was read while this client held that version: by the routing's lease,
  the store's routing was at most one state further meanwhile, which every union state
  reads the same way (``shardex.reshard``).

A second phase asks for what it likely finds up to the bound (``merge.sized``, learnt
from what it found before beside the first phase's count), and the store reads no row
beyond it: a listing nothing moves under reads each entry once. The first phase reads
two requests further than an eager caller's shards do (``listing.reads_ahead``), and a
second phase asks once the first's requests sent together have landed, as far as they
read (``_read_ahead``): the second trails the first by one round trip, which is the
order's price. A page waiting for the second phase
likewise waits first for the first phase's request in flight at the bound, unless what
lies up to the bound already fills it (``merge.trailing``): asked at once, every
second-phase key read a sliver, 11 requests more than a stable listing's 32 on DynamoDB
Local (2,000 entries, 4 -> 16 keys), and then again after that landing. So a full union
listing waits for the first phase's round trips (fewer keys, more entries each, than the
larger layout's), one of the second's after the first page's (a first page reads no
further) and one after the first phase's last: ``benchmarks/bench_union.py`` prints that
floor.
The second phase may be on another store (``page``'s ``second``: a value moving between
tiers, ``shardex.tierreads``): the order and the argument are the same.

``FanOut`` builds on ``reads.ShardReads``: one shard read, bounded, hedged and retried,
and the reads in arrival order (``stream``) and counts (``count``) that merge nothing.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from shardex.admission import AdaptiveGate
from shardex.clock import Clock
from shardex.errors import IncompleteRead
from shardex.fanout.listing import (
    CONTINUATION_TTL,
    Continuations,
    Listing,
    ahead_size,
    first_size,
    reads_ahead,
)
from shardex.fanout.merge import (
    EVERYTHING,
    Reach,
    Reader,
    ShardStream,
    ahead_of,
    merge_safe,
    newest_per_item,
    reach,
    share,
    sized,
    trailing,
    within,
)
from shardex.fanout.reads import ShardReads
from shardex.hedging import HedgePolicy
from shardex.model.entries import Position, StoredEntry
from shardex.retry import RetryPolicy
from shardex.stores.base import Malformed, Store
from shardex.stores.metered import collected, detached

__all__ = ["CONTINUATION_TTL", "FanOut", "MergedPage"]


@dataclass(frozen=True, slots=True)
class MergedPage:
    """Entries of one merged page, and whether any entry lies beyond them. ``kept``: the
    page resumed a kept continuation, so it may hold entries read before it was asked
    for (another process's write acknowledged meanwhile may be missing from them)."""

    entries: list[StoredEntry]
    more: bool
    kept: bool = False


class FanOut(ShardReads):
    """Reads the shards of one index's values concurrently, under one concurrency bound.

    The bound is ``max_concurrency`` or the store's client pool (``Store.connections``),
    whichever is smaller; with neither (None, on memory://), every request is sent at
    once. ``hedge`` None turns hedging off. ``malformed`` says what a shard read does
    with an item the store cannot read as an entry (``Store.query``). Call ``close``
    when done: it stops the requests and copies still running and the watch on the
    store's writes.
    """

    def __init__(self, store: Store, namespace: str, *, retry: RetryPolicy,
                 hedge: HedgePolicy | None, max_concurrency: int | None, clock: Clock,
                 rng: random.Random, gate: AdaptiveGate | None = None,
                 malformed: Malformed = "raise") -> None:
        super().__init__(store, namespace, retry=retry, hedge=hedge,
                         max_concurrency=max_concurrency, clock=clock, rng=rng, gate=gate,
                         malformed=malformed)
        self._reading: set[asyncio.Task[None]] = set()
        self._listings = Continuations(namespace)
        self._watching = [store]
        store.meter.subscribe(self._listings.written)

    def watch(self, store: Store) -> None:
        """Restart kept listings whose shards ``store`` writes too (``page``'s ``second``)."""
        if store not in self._watching:
            self._watching.append(store)
            store.meter.subscribe(self._listings.written)

    def abandon(self, value: str, descending: bool, position: Position) -> None:
        """Forget the listing kept for the page after ``position``: nobody continues it."""
        self._listings.abandon(value, descending, position)

    async def close(self) -> None:
        """Stop the requests and hedged copies still running; forget every continuation."""
        for store in self._watching:
            store.meter.unsubscribe(self._listings.written)
        self._listings.close()
        running = [*self._abandoned, *self._reading]
        self._abandoned, self._reading = set(), set()
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)

    # -- one request per shard at a time, for ordered pages ----------------------------

    def _fetch(self, stream: ShardStream, descending: bool, listing: Listing,
               ahead: bool = False, bound: Reach = EVERYTHING) -> None:
        """Send ``stream``'s next request; it adds its page to the stream when it lands.

        Nobody has to wait for it: a page that needs the shard waits (``_landing``), a
        request read ahead lands in the listing kept for the next page. Its failure is
        kept on the stream (``failed``), not raised, for whichever page needs the shard.
        ``bound`` (a stream of a listing's second phase) is how far its first phase had
        been read when the request was sent: the store reads up to it and no further
        (``Store.query``'s ``until``), and the stream reads on from it later (the module's
        safety argument).
        """
        if listing.ahead:
            stream.page_size = ahead_size(stream, listing, self._max_page)
        key, after, size, generation = stream.key, stream.after, stream.page_size, \
            stream.generation
        reader = stream.reader
        reading, listings, clock = self._reading, self._listings, self._clock
        beside, until = 0, None
        if bound[0]:
            assert bound[1] is not None
            until = bound[1]
            beside = within(listing.streams[:listing.lead], after, until, descending)
            size = sized(stream, beside, len(listing.streams))

        async def read() -> None:
            # the bookkeeping of a landing is here, not in a done callback: one loop
            # callback fewer on every request
            sent = clock.now()
            try:
                # a request read ahead is not hedged: nobody waits for it when it is
                # sent, and a copy of a store page costs as much as the page
                page = await (self._query(key, after, descending, size, not ahead, until)
                              if reader is None
                              else reader(key, after, descending, size, until, not ahead))
            except asyncio.CancelledError:
                if stream.generation == generation:
                    stream.pending = None
                raise
            except Exception as exc:
                if stream.generation == generation:
                    stream.pending, stream.failed = None, exc
                return
            finally:
                reading.discard(task)
            if stream.generation != generation:
                return  # restarted meanwhile: this page is of what was read before
            stream.pending = None
            listing.latency = clock.now() - sent
            held = len(stream.buffer)
            stream.accept(page, self._max_page)
            if page.skipped:  # for the page that ends next (``collected``)
                stream.skipped.extend(page.skipped)
            if bound[0]:
                assert bound[1] is not None
                stream.clip(bound[1], descending)
                if stream.covers(bound[1], descending):  # read to the bound: learn from it
                    stream.got += len(stream.buffer) - held
                    stream.beside += beside
            if listing.waiting:  # kept for its next page: what it holds is bounded
                listings.landed(listing, len(stream.buffer) - held)
            if listing.ahead:
                # a landing of the first phase lets the second read further
                self._read_ahead(listing, descending, [*listing.streams[listing.lead:], stream]
                                 if listing.lead and not stream.then else [stream], sent)

        stream.asked, stream.failed, stream.sent = size, None, clock.now()
        # what a request skips is reported by the page that ends after it landed (through
        # its stream), not collected by the call that sent it: a read ahead serves a later
        # page, and a page may return before a request it sent has landed
        task = asyncio.get_running_loop().create_task(read(), context=detached())
        stream.pending = task
        reading.add(task)

    def _read_ahead(self, listing: Listing, descending: bool,
                    streams: Sequence[ShardStream], since: float | None = None) -> None:
        """Send the next request of each of ``streams`` that reads ahead now (``reads_ahead``).

        A stream of the second phase reads only up to how far the first has been read,
        and not while a request of the first sent at or before ``since`` (by default,
        now) is in flight: that one lands sooner than a request sent now would, and moves
        the bound, so the second phase asks once, as far as the first's requests sent
        together read, not one round trip for each of their landings.
        """
        lead = listing.streams[:listing.lead]
        held = reach(lead, descending) if lead else EVERYTHING
        cut = (self._clock.now() if since is None else since) + listing.latency / 4
        trailing = any(s.pending is not None and s.sent <= cut for s in lead)
        for stream in streams:
            if stream.then and (trailing or not ahead_of(stream, held, descending)):
                continue
            if reads_ahead(stream, listing) and self._listings.room():
                self._fetch(stream, descending, listing, ahead=True,
                            bound=held if stream.then else EVERYTHING)

    async def _landing(self, value: str, listing: Listing,
                       waiting: Sequence[ShardStream]) -> None:
        """Wait for the requests of ``waiting``; raise IncompleteRead if one failed for good."""
        tasks = [s.pending for s in waiting if s.pending is not None]
        if tasks:
            await asyncio.wait(tasks)
        failed: dict[str, BaseException] = {}
        for stream in waiting:
            if stream.failed is not None:
                if not isinstance(stream.failed, self._retry.retry_on):
                    raise stream.failed
                failed[stream.key] = stream.failed
        if failed:
            raise IncompleteRead(value, failed) from next(iter(failed.values()))

    # -- ordered pages ---------------------------------------------------------------

    async def page(self, value: str, keys: Sequence[str], *, after: Position | None,
                   descending: bool, limit: int, first: Sequence[str] = (),
                   layout: object = None, to_end: bool = False,
                   second: Reader | None = None) -> MergedPage:
        """Merge the shards ``first`` and ``keys`` into the next ``limit`` entries beyond ``after``.

        Entries come in ``(sort, item_id)`` order (descending if asked); an entry found
        on two shards (mid-reshard) is returned once, its newest version, and so is an
        item found at two positions (``newest_per_item``: written anew between the reads
        of its two keys). ``more`` is
        exact: True only if an entry lies beyond the page. Each position is read on the
        shards ``first`` before it is read on ``keys`` (a key may be in both). ``layout``
        names the layout the keys belong to (the routing's version): a continuation is
        resumed only in the layout and phases it was read in. ``second`` reads the shards
        ``keys`` where this fan-out's store does not (a value moving between two stores,
        ``shardex.tierreads``): the order above holds across the two. ``to_end``:
        the caller reads the listing to its end, so a new listing asks each shard for a
        store page from its first request (``listing.first_size``; the second phase's
        requests read no further than the first phase has been read, ``until``) and
        reads ahead from its first page on.
        """
        self._fanned_out(value, len({*first, *keys}) if first else len(keys), "page")
        max_page, lead = self._max_page, len(first)
        shares = (share(limit, lead, max_page) if lead else 0,
                  share(limit, len(keys), max_page))
        phases = (tuple(first), tuple(keys))
        listing, now = None, self._clock.now()
        if after is not None:
            listing = self._listings.resume((value, descending, after, layout), phases,
                                            shares, now)
        kept = listing is not None
        if listing is None:
            sizes = shares
            if to_end:  # the second phase too: the store reads it only as far as the first
                width, room = lead + len(keys), self._listings.left()
                sizes = (first_size(shares[0], width, max_page, room) if lead else 0,
                         first_size(shares[1], width, max_page, room))
            listing = Listing(phases, [ShardStream(key, after, sizes[0]) for key in first]
                              + [ShardStream(key, after, sizes[1], then=bool(lead),
                                             reader=second) for key in keys],
                              lead=lead, ahead=to_end, eager=to_end)
        else:
            # the caller continues: its shards read ahead from now on, eagerly if it came
            # back sooner than a request takes
            listing.interval = now - listing.made
            listing.ahead, listing.eager = True, listing.interval < listing.latency
        listing.low = shares[1]
        streams = listing.streams
        out: list[StoredEntry] = []
        try:
            while True:
                waiting = self._waiting(listing, descending)
                if waiting and waiting[0].then:
                    lead = listing.lead
                    behind = trailing(streams[:lead], streams[lead:], waiting,
                                      limit - len(out), descending)
                    if behind:  # the bound moves soon: ask the second phase after that
                        # (a request of them that fails is asked again when it is needed)
                        await asyncio.wait([s.pending for s in behind if s.pending])
                        continue
                if waiting:
                    # One round trip for every shard this page will likely use up, not one
                    # after another as each runs dry.
                    self._refill(listing, descending, limit - len(out))
                    if listing.ahead:  # and whatever reads ahead now, not after the wait
                        self._read_ahead(listing, descending, streams)
                    await self._landing(value, listing, waiting)
                    continue
                live = [s for s in streams if s.buffer]
                if not live:
                    break
                bounded, bound = reach(streams, descending)
                assert bound is not None or not bounded
                taken = merge_safe(live, out, limit, descending, bound)
                if len(out) >= limit and (taken == 0 or not self._waiting(listing,
                                                                         descending)):
                    break
        except BaseException:
            listing.stop()
            raise
        if lead:
            out = newest_per_item(out)
        for stream in streams:  # what requests read ahead skipped: on this page
            if stream.skipped:
                collected(stream.skipped)
                stream.skipped.clear()
        more = any(s.buffer for s in streams)
        if not more:
            listing.stop()
            return MergedPage(entries=out, more=more, kept=kept)
        if listing.ahead:
            self._read_ahead(listing, descending, streams)
        self._listings.keep((value, descending, out[-1].position, layout), listing,
                            self._clock.now())
        return MergedPage(entries=out, more=True, kept=kept)

    @staticmethod
    def _waiting(listing: Listing, descending: bool) -> list[ShardStream]:
        """The streams a page waits for: each of the first phase that ran dry, or, when
        none did, each of the second that ran dry short of how far the first was read."""
        lead = listing.streams[:listing.lead]
        waiting = [s for s in lead if not s.buffer and not s.exhausted]
        if waiting:
            return waiting
        rest = listing.streams[listing.lead:]
        if not lead:
            return [s for s in rest if not s.buffer and not s.exhausted]
        held = reach(lead, descending)
        return [s for s in rest if not s.buffer and ahead_of(s, held, descending)]

    def _refill(self, listing: Listing, descending: bool, remaining: int) -> None:
        """Ask every shard the page will likely use up (below its share of ``remaining``)."""
        width, max_page, lead = len(listing.streams), self._max_page, listing.lead
        low = share(remaining, width - lead, max_page)
        low_lead = share(remaining, lead, max_page) if lead else 0
        for stream in listing.streams[:lead]:
            if stream.pending is None and not stream.exhausted \
                    and len(stream.buffer) < low_lead:
                self._fetch(stream, descending, listing)
        held = reach(listing.streams[:lead], descending) if lead else EVERYTHING
        for stream in listing.streams[lead:]:
            if stream.pending is None and len(stream.buffer) < low \
                    and ahead_of(stream, held, descending):
                self._fetch(stream, descending, listing, bound=held)

    # -- a full listing ------------------------------------------------------------

    async def listing(self, value: str, keys: Sequence[str], *, first: Sequence[str],
                      layout: object, second: Reader | None = None
                      ) -> AsyncIterator[StoredEntry]:
        """Yield every entry of the shards ``first`` and ``keys`` (two phases, mid-reshard)
        in ``(sort, item_id)`` order, an entry found on two shards once.

        A full listing in the store's pages (``page``): each page resumes the last one's
        continuation and its shards read ahead, so it costs about what a listing of one
        layout does, and the module's safety argument holds across its pages as across a
        caller's: no entry present throughout is missed or yielded twice, however entries
        move meanwhile. Raises IncompleteRead if a shard could not be read.
        """
        after: Position | None = None
        while True:
            merged = await self.page(value, keys, first=first, after=after, descending=False,
                                     limit=self._max_page, layout=layout, to_end=True,
                                     second=second)
            for entry in merged.entries:
                yield entry
            if not merged.more:
                return
            after = merged.entries[-1].position
