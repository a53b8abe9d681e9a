"""The live view of a stream: lines fed to a StreamReader, a refresh every few seconds.

``watch`` is the loop: it waits for lines on a Feed no longer than until the next
refresh is due (on an injected clock), feeds what arrived to the reader, and calls
``refresh`` every ``every`` seconds, so a quiet ``tail -f`` still refreshes. At the
end of input it finishes the reader and returns; an interrupt (Ctrl-C) passes
through to the caller, which still has the reader to report from.

A Feed hands over the lines that arrived: ``PipeFeed`` waits on a pipe or terminal
with ``select`` (so a quiet input still lets the view refresh); ``FileFeed`` reads
a regular file, or any stream that never blocks. Tests feed scripted lines on a
fake clock.
"""

from __future__ import annotations

import codecs
import io
import os
import select
import time
from collections.abc import Callable
from typing import IO, Protocol

from shardex.errors import InvalidInput, InvalidLog

__all__ = ["Feed", "FileFeed", "PipeFeed", "watch"]

_CHUNK = 5_000  # lines handed over at most per call


class Feed(Protocol):
    """Where the lines of a stream come from."""

    def next(self, timeout: float) -> list[str] | None:
        """The lines that arrived within ``timeout`` seconds (maybe none); None at the end."""


class _Lines:
    """Bytes in, lines out: UTF-8 decoded as the bytes come (a character split between two
    reads is kept for the next); the last line may lack its newline. A byte that is not
    UTF-8 is named by its offset and its line (InvalidLog), as a file's check names it."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._pending = ""
        self.lines: list[str] = []
        self._offset = 0  # bytes taken before this read
        self._newlines = 0  # of them, newlines (never inside a multi-byte character)

    def take(self, data: bytes) -> None:
        """Take one read's bytes; ``b""`` is the end of input."""
        kept = len(self._decoder.getstate()[0])  # the bytes of a split character
        try:
            text = self._pending + self._decoder.decode(data, final=not data)
        except UnicodeDecodeError as exc:  # its offsets count the kept bytes first
            before = data[:max(0, exc.start - kept)]
            raise InvalidLog(f"is not UTF-8 text ({exc.reason} at byte "
                             f"{self._offset - kept + exc.start})", path=self._name,
                             line=self._newlines + before.count(b"\n") + 1) from exc
        self._offset += len(data)
        self._newlines += data.count(b"\n")
        *complete, last = text.split("\n")
        self.lines.extend(line + "\n" for line in complete)
        if data:
            self._pending = last
        elif last:  # the end of input: the last line had no newline
            self.lines.append(last)
            self._pending = ""


class FileFeed:
    """The lines of a regular file (or any stream that never blocks), a chunk at a time:
    a binary stream's bytes decoded as UTF-8 (``_Lines``), a text stream's lines as its
    own decoding gives them (an embedder's text-only stdin, a test's)."""

    def __init__(self, stream: IO[bytes] | IO[str], name: str, *,
                 chunk: int = _CHUNK) -> None:
        self._stream = stream
        self._name = name
        self._chunk = chunk
        self._lines = _Lines(name)
        self._done = False

    def next(self, timeout: float) -> list[str] | None:
        if isinstance(self._stream, io.TextIOBase):
            try:
                text: list[str] = self._stream.readlines(self._chunk * 64)
            except UnicodeDecodeError as exc:
                raise InvalidLog(f"is not UTF-8 text: {exc.reason}", path=self._name) from exc
            return text or None
        lines = self._lines
        while not self._done and len(lines.lines) < self._chunk:
            data = self._stream.read(1 << 16)
            assert isinstance(data, bytes)
            lines.take(data)
            self._done = not data
        if not lines.lines and self._done:
            return None
        taken, lines.lines = lines.lines[:self._chunk], lines.lines[self._chunk:]
        return taken


class PipeFeed:
    """The lines of a pipe or terminal, waited for with ``select`` and read unbuffered.

    No thread: a wait that times out returns what arrived, and Ctrl-C interrupts it.
    """

    def __init__(self, fd: int, name: str, *, chunk: int = _CHUNK) -> None:
        self._fd = fd
        self._chunk = chunk
        self._lines = _Lines(name)
        self._done = False

    def next(self, timeout: float) -> list[str] | None:
        deadline = time.monotonic() + max(0.0, timeout)
        lines = self._lines
        while not self._done and len(lines.lines) < self._chunk:
            wait = deadline - time.monotonic()
            ready, _, _ = select.select([self._fd], [], [], max(0.0, wait))
            if not ready:
                break
            data = os.read(self._fd, 1 << 16)
            lines.take(data)
            if not data:
                self._done = True
            elif wait <= 0:
                break
        if not lines.lines and self._done:
            return None
        taken, lines.lines = lines.lines[:self._chunk], lines.lines[self._chunk:]
        return taken


class _Reader(Protocol):
    def feed(self, lines: list[str]) -> None: ...

    def flush(self) -> None: ...

    def finish(self) -> None: ...


def watch(feed: Feed, reader: _Reader, *, every: float, clock: Callable[[], float],
          refresh: Callable[[], None]) -> None:
    """Feed ``reader`` from ``feed`` until the end of input, calling ``refresh`` (after a
    flush) every ``every`` seconds of ``clock``; a refresh that fell behind is skipped,
    not repeated. Raises InvalidInput for ``every`` <= 0, and what the reader raises."""
    if not every > 0:
        raise InvalidInput(f"--every must be a number of seconds > 0, got {every!r}")
    due = clock() + every
    while True:
        lines = feed.next(max(0.0, due - clock()))
        if lines is None:
            reader.finish()
            return
        if lines:
            reader.feed(lines)
        now = clock()
        if now >= due:
            reader.flush()
            refresh()
            due += every
            if due <= now:
                due = now + every
