"""An ordered set of entry positions, for the memory store's shard keys."""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator

from shardex.stores.base import Position

__all__ = ["SortedPositions"]


class SortedPositions:
    """Positions in order, in bounded chunks: inserts and deletes cost O(log n + chunk)."""

    __slots__ = ("_chunks", "_maxes")
    _HALF = 512

    def __init__(self) -> None:
        self._chunks: list[list[Position]] = []
        self._maxes: list[Position] = []

    def add(self, pos: Position) -> None:
        chunks, maxes = self._chunks, self._maxes
        if not maxes:
            chunks.append([pos])
            maxes.append(pos)
            return
        i = bisect_left(maxes, pos)
        if i == len(maxes):
            i -= 1
            chunk = chunks[i]
            chunk.append(pos)
            maxes[i] = pos
        else:
            chunk = chunks[i]
            insort(chunk, pos)
        if len(chunk) > 2 * self._HALF:
            tail = chunk[self._HALF:]
            del chunk[self._HALF:]
            maxes[i] = chunk[-1]
            chunks.insert(i + 1, tail)
            maxes.insert(i + 1, tail[-1])

    def remove(self, pos: Position) -> None:
        chunks, maxes = self._chunks, self._maxes
        i = bisect_left(maxes, pos)
        chunk = chunks[i]
        j = bisect_left(chunk, pos)
        del chunk[j]
        if not chunk:
            del chunks[i]
            del maxes[i]
        elif j == len(chunk):
            maxes[i] = chunk[-1]

    def beyond(self, after: Position | None, descending: bool) -> Iterator[Position]:
        """Yield the positions strictly beyond ``after`` in the direction asked."""
        chunks, maxes = self._chunks, self._maxes
        if not chunks:
            return
        if not descending:
            i = 0 if after is None else bisect_right(maxes, after)
            if i == len(chunks):
                return
            j = 0 if after is None else bisect_right(chunks[i], after)
            yield from chunks[i][j:]
            for k in range(i + 1, len(chunks)):
                yield from chunks[k]
            return
        i = len(chunks) - 1 if after is None else min(bisect_left(maxes, after), len(chunks) - 1)
        chunk = chunks[i]
        j = len(chunk) if after is None else bisect_left(chunk, after)
        yield from reversed(chunk[:j])
        for k in range(i - 1, -1, -1):
            yield from reversed(chunks[k])
