"""What ``shardex reshard run`` (and ``cutover``, ``complete``, ``rollback``) shows as it goes
and where it ended: ``Reporter``, a bar on a terminal or a plain line now and then, and
``finished``, the lines of a run's result and its next steps.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from shardex.commands.connection import given_tiers

__all__ = ["Reporter", "finished"]


class _Moved(ProgressColumn):
    """Entries moved of the total; blank while the total is not known (before the mover)."""

    def render(self, task: Task) -> Text:
        if task.total is None:
            return Text("")
        return Text(f"{task.completed:,.0f}/{task.total:,.0f} moved")


class Reporter:
    """Shows a reshard's progress: a bar on a terminal, a plain line now and then otherwise."""

    def __init__(self, out: Console, *, every: float = 5.0) -> None:
        self._out = out
        self._every = every
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._last: tuple[str, float] = ("", 0.0)
        self.heard = False  # a report came: the run says from now on what it waits for

    def __enter__(self) -> Reporter:
        if self._out.is_terminal:
            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), _Moved(),
                                 TextColumn("{task.fields[rate]}"), TimeRemainingColumn(),
                                 console=self._out, transient=True)
            self._bar.start()
            self._task = self._bar.add_task("reshard", total=None, rate="")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def __call__(self, progress: Any) -> None:
        self.heard = True
        rate = "" if progress.rate is None else f"{progress.rate:,.0f} entries/s"
        if self._bar is not None and self._task is not None:
            # a step that does not count entries (a wait, the parity check) leaves the counts
            counts = {} if progress.remaining is None else {
                "completed": progress.moved,
                "total": progress.total or progress.moved + progress.remaining}
            self._bar.update(self._task, description=f"{progress.state}: {progress.note}",
                             rate=rate, **counts)
            return
        line = f"{progress.state} ({progress.direction}): {progress.note}"
        if progress.remaining is not None:
            line += f"; moved {progress.moved:,}, remaining {progress.remaining:,}"
            if rate:
                line += f", {rate}"
            if progress.eta is not None:
                line += f", ETA {progress.eta:,.0f} s"
        now = time.monotonic()
        if progress.note != self._last[0] or now - self._last[1] >= self._every:
            self._out.print(line, highlight=False, soft_wrap=True)
            self._out.file.flush()  # a pipe reader waits on each line
            self._last = (progress.note, now)


def finished(out: Console, result: Any, uri: str, name: str) -> None:
    parity = result.parity
    out.print(f"reshard {result.ended} done: {result.why}" if result.ended else f"reshard "
              f"stopped at {result.state}: {result.why}", highlight=False, soft_wrap=True)
    if parity is not None:
        out.print(f"  parity: {parity.entries:,} entries checked, " + (
            "no gaps" if parity.clean else ", ".join(
                f"{n:,} {kind}" for kind, n in parity.counts().items() if n)), highlight=False)
    if result.swept:
        out.print(f"  the sweep moved {result.swept:,} entries left on retired keys")
    if result.cleared:
        out.print(f"  the sweep removed {result.cleared:,} copies the rollback left on the "
                  "tier it left (every entry had been moved back)")
    if (keys := result.swept_keys)[0] < keys[1]:  # else read as the whole sweep's count
        out.print(f"  this runner swept {keys[0]:,} of the {keys[1]:,} retired keys: other "
                  "runners swept the rest (their own lines count theirs)")
    for key, item in result.ghosts[:10]:
        out.print(f"  a row of {item!r} on retired key {key!r} has no placement: remove it "
                  "with the store's own tools", highlight=False)
    from shardex.migrate.status import next_steps

    steps = next_steps(result.routing, store=uri, index=name, stale=False,
                       tiers=given_tiers())
    if steps:
        out.print("next: " + " | ".join(steps), highlight=False, soft_wrap=True)
