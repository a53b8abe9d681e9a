"""What the loop does next with the migration it drives: a pure decision from the routing.

``next_move(routing, reshard, now)`` reads the stored routing (the runner's state travels
in it) and says which of the runner's steps comes next, so a loop that restarts after a
crash, or a new leader, picks the migration up wherever it stopped:

===========  ===================================================================
state        next
===========  ===================================================================
read-both,   ``run`` (the runner drives to ``verified``: writers follow the new
write-new    layout, the mover moves, parity is checked)
verified     ``cutover`` (readers read the new layout alone) with a clean report,
             else ``run`` (checked again)
read-new     ``retain`` (the retention window starts), ``wait`` until it passes,
             then ``complete`` (retired, the sweep, stable on the new layout)
retired      ``complete``
rollback     ``rollback`` (the runner drives the rollback to its end)
===========  ===================================================================

``done`` once the routing holds no migration ``reshard``: it ended, or is another's.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from shardex.routing import Routing

__all__ = ["MoveKind", "NextMove", "next_move"]

MoveKind = Literal["run", "cutover", "retain", "wait", "complete", "rollback", "done"]


class NextMove(NamedTuple):
    """The runner's next step (``kind``), and until when to wait (``wait``)."""

    kind: MoveKind
    why: str
    until: float = 0.0


def next_move(routing: Routing, reshard: str, now: float) -> NextMove:
    """The next step of migration ``reshard`` as ``routing`` stands at wall time ``now``."""
    meta = routing.reshard
    if meta is None or meta.id != reshard:
        return NextMove("done", "the migration is no longer under way")
    if meta.direction == "rollback":
        return NextMove("rollback", "the migration rolls back: drive it to its end")
    state = routing.state
    if state in ("read-both", "write-new"):
        return NextMove("run", f"{state}: drive the migration to verified")
    if state == "verified":
        if meta.parity is not None and meta.parity.clean:
            return NextMove("cutover", "parity holds: readers read the new layout alone")
        return NextMove("run", "verified without a clean report: check parity again")
    if state == "read-new":
        if meta.retire_after is None:
            return NextMove("retain", "the retention window starts")
        if now < meta.retire_after:
            return NextMove("wait", "the retention window to pass", meta.retire_after)
        return NextMove("complete", "the retention window passed: retire the old layout")
    return NextMove("complete", "retire the old layout")
