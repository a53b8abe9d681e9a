"""The live view of a stream: lines fed to a StreamReader, a refresh every few seconds.

``watch`` is the loop: it waits for lines on a Feed no longer than until the next
refresh is due (on an injected clock), feeds what arrived to the reader, and calls
``refresh`` every ``every`` seconds, so a quiet ``tail -f`` still refreshes. At the
end of input it finishes the reader and returns; an interrupt (Ctrl-C) passes
through to the caller, which still has the reader to report from.

A Feed hands over the lines that arrived: ``ThreadFeed`` reads a pipe or terminal
in a daemon thread (a read that blocks cannot time out otherwise); ``FileFeed``
reads a regular file, which never blocks. Tests feed scripted lines on a fake clock.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import IO, Protocol

from shardex.errors import InvalidInput, InvalidLog

__all__ = ["Feed", "FileFeed", "ThreadFeed", "watch"]

_CHUNK = 5_000  # lines handed over at most per call


class Feed(Protocol):
    """Where the lines of a stream come from."""

    def next(self, timeout: float) -> list[str] | None:
        """The lines that arrived within ``timeout`` seconds (maybe none); None at the end."""


class FileFeed:
    """The lines of a regular file (or any stream that never blocks), a chunk at a time."""

    def __init__(self, stream: IO[str], name: str, *, chunk: int = _CHUNK) -> None:
        self._stream = stream
        self._name = name
        self._chunk = chunk

    def next(self, timeout: float) -> list[str] | None:
        try:
            lines = self._stream.readlines(self._chunk * 64)
        except UnicodeDecodeError as exc:
            raise InvalidLog(f"is not UTF-8 text: {exc.reason}", path=self._name) from exc
        return lines or None


class ThreadFeed:
    """The lines of a pipe or terminal, read by a daemon thread into a queue.

    The thread ends at the end of input; a process that ends while it waits for a
    line (Ctrl-C) does not wait for it.
    """

    def __init__(self, stream: IO[str], name: str, *, chunk: int = _CHUNK) -> None:
        self._lines: queue.Queue[str | BaseException | None] = queue.Queue(maxsize=100_000)
        self._name = name
        self._chunk = chunk
        self._done = False
        threading.Thread(target=self._read, args=(stream,), daemon=True,
                         name="shardex-stdin").start()

    def _read(self, stream: IO[str]) -> None:
        try:
            for line in stream:
                self._lines.put(line)
        except (UnicodeDecodeError, OSError, ValueError) as exc:
            self._lines.put(exc)
        self._lines.put(None)

    def next(self, timeout: float) -> list[str] | None:
        if self._done:
            return None
        lines: list[str] = []
        try:
            item = self._lines.get(timeout=max(0.0, timeout)) if timeout > 0 else \
                self._lines.get_nowait()
            while True:
                if item is None:
                    self._done = True
                    return lines or None
                if isinstance(item, BaseException):
                    raise InvalidLog(f"cannot be read: {item}", path=self._name) from item
                lines.append(item)
                if len(lines) >= self._chunk:
                    return lines
                item = self._lines.get_nowait()
        except queue.Empty:
            return lines


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
