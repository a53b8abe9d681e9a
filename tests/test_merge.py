"""The fan-out's merge of shard streams (``shardex.fanout.merge``): what is safe to order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from shardex.fanout.merge import ShardStream, merge_safe, within
from shardex.model.entries import Position, StoredEntry

_SORTS = st.text("abc", max_size=2)


def _stream(positions: list[Position], descending: bool) -> ShardStream:
    ordered = sorted(set(positions), reverse=descending)
    return ShardStream("K", None, 10, buffer=[
        StoredEntry(shard_key="K", sort=sort, item_id=item) for sort, item in ordered])


@given(st.lists(st.tuples(_SORTS, _SORTS), max_size=12), st.tuples(_SORTS, _SORTS),
       st.none() | st.tuples(_SORTS, _SORTS), st.booleans())
def test_within_counts_the_buffered_entries_between_after_and_the_bound(
        positions: list[Position], bound: Position, after: Position | None,
        descending: bool) -> None:
    """As the definition says, in either order: the entries at or before ``bound`` (in
    the listing's order), less those at or before ``after``; from a buffer's ends
    (all, none) or by a search."""
    stream = _stream(positions, descending)

    def upto(limit: Position) -> int:
        return sum(1 for e in stream.buffer
                   if (e.position >= limit if descending else e.position <= limit))

    expected = upto(bound) - (upto(after) if after is not None else 0)
    assert within([stream], after, bound, descending) == expected


@given(st.lists(st.lists(st.tuples(_SORTS, _SORTS), max_size=8), min_size=1, max_size=4),
       st.tuples(_SORTS, _SORTS), st.integers(1, 20), st.booleans())
def test_merge_safe_orders_what_no_shard_can_precede(
        shards: list[list[Position]], bound: Position, limit: int, descending: bool) -> None:
    """The merge takes, in order, the buffered entries at or before the bound, up to
    ``limit`` (one per position: a copy of the same position on two keys is one entry),
    and leaves the rest buffered."""
    live = [_stream(positions, descending) for positions in shards]
    everything = [e for s in live for e in s.buffer]
    safe = sorted({e.position for e in everything
                   if (e.position >= bound if descending else e.position <= bound)},
                  reverse=descending)
    out: list[StoredEntry] = []
    taken = merge_safe(live, out, limit, descending, bound)
    assert [e.position for e in out] == safe[:limit]
    assert taken + sum(len(s.buffer) for s in live) == len(everything)
