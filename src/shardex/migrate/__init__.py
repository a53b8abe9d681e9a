"""Migrations: change a live value's layout through adjacent routing states, online.

One package serves every layout change of an index: a reshard (N or strategy), a tier
move (a reshard whose policy names another store: ``tiered``) and an adoption (an
application's plain index -> a sharded one: ``adopter``, a layout change of the ``copy``
kind, whose conduct ``shardex.adoption`` draws). They share one model and its parts:

- ``states``: the one state machine, pure: a move's states (``ORDER``) and a copy's
  (``COPY_ORDER``), the refusals of each step, ``ready_at`` after a change of conduct;
- ``base.MigrationRunner``: the options, the routing record read and stored by
  compare-and-set, the waits on the injected clock; ``Resharder`` and ``Adopter`` are it
  (``Resharder``'s steps in ``runner``, on ``reshard_base``: its indexes, records, reports);
- ``layouts``: where a migration's entries are and how its work is done, one
  ``Layouts`` a kind of change (``IndexLayouts``, ``tiered.TierLayouts``,
  ``adopting.AdoptionLayouts``: the plain index -> the sharded one);
- ``mover`` and ``work``: one mover over ``Layouts`` working units of two kinds (a range
  of a source key, a Scan segment of an adoption's source), one kind of work record for
  both, leased by compare-and-set, and ``work_units``, the loop in which a worker takes one;
- ``pace``: the one place a mover or a backfill sends a write (``paced``, AIMD), within
  the migration's one rate budget shared by every process (``budget``) under its live
  controls (``control``: pause, resume, throttle);
- ``verify``: both parity checks on one two-pass skeleton (``two_passes``);
- ``status``: ``shardex.reshard.status/1`` and ``shardex.adopt.status/1``, counted from
  the work records against a total fixed at start, with the runners holding leases;
- ``registry``: the record each index keeps of its migrations (``shardex migrations``);
- ``reporting``: what a reshard's runner reports as it goes (``Progress``, its gauges)
  and where its ``run`` stopped (``RunResult``);
- ``api.Migrations``: the programmatic API a loop (the autopilot) drives::

      async with Migrations(store, "orders", rate=250.0) as migrations:
          state = await migrations.start({"PENDING": ShardPolicy(16)})  # a batch of values
          while state.state != "verified":
              state = await migrations.step(30.0)   # at most 30 s of work, then back
          state = await migrations.complete(600.0)  # cutover, then retire the old layout
          # or: await migrations.rollback(), then step() until state.state == "stable"

  ``state()`` reads state, total, moved, remaining, parity, ``ready_at`` and runners from
  the routing and the work records. One migration per index at a time (a second start
  is refused until the first ends); a batch of values moves in one.

A reshard, state by state:

The routing record holds the state; every client follows it (``Routing.writing``: the
layout writes follow; ``Routing.read_keys``: the keys reads cover)::

    state       writers follow   readers read        the runner meanwhile
    stable      old              old
    read-both   old              old + new (union)
    write-new   new              union               moves entries old -> new
    verified    new              union               (parity report: no gaps)
    read-new    new              new                 (retention window)
    retired     new              new                 sweeps the old-only keys
    stable      new              new

A rollback swaps the layouts and enters the state whose conduct is the same or
adjacent: from ``read-both`` it is ``write-new`` toward the old layout, from
``write-new`` or ``verified`` it is ``read-both`` toward it (writers still on the new
layout, readers on the union), from ``read-new`` it is ``read-both`` (readers widen to
the union first); then the same states toward the old layout, with the mover moving
entries back. No rollback from ``retired`` on.

**No client acts on a state two steps behind.** A change of what clients do (the
layout written, the keys read, or the layout movers may move entries toward:
``states.conduct``) is stored by compare-and-set at wall time ``w``
(``Transition.changed_at``), and the next such change, or the mover, waits until
``w + lease + margin`` (``states.ready_at``). The routing is a lease
(``shardex.routing_record``): a client acting at ``t >= w + lease`` holds a copy read
after ``w``; the margin covers a request sent just before the lease ran out and still in
flight (a store request's timeout) and the skew between the clocks of the hosts that
run reshard commands. So at any instant the requests that land come from clients in at
most two adjacent states. A read that takes longer than its copy's lease checks the
routing again when it ends (``ShardedIndex``) and is read again (a scan: raises
RoutingStale) if it changed, so a read too spans at most two adjacent states.

**A read of both layouts reads them in order.** A reader does not read every key at
once: an entry the mover moves from a key not yet read onto a key already read would be
missed. Entries only move toward the layout writers follow (``ShardedIndex.relocate``
re-places them there, and only in the generation and states its mover belongs to), so
union readers read each position on the other layout's keys first, then on the written
layout's (``Routing.read_phases``; the fan-out holds back what it read of the second
beyond what it has read of the first): an entry moved in between is found on one of
them, and found on both, returned once. The movers' direction is part of the conduct,
so it never turns (a rollback) while readers of the other order may still read.

**Why each adjacent pair keeps every read complete** (the mover's moves are atomic per
entry: an entry is on exactly one key, the one its placement names):

- stable(old) and read-both: every writer writes the old layout and nothing moves, so
  every entry is on an old key; readers read the old keys or a superset of them.
- read-both and write-new: new entries land on old keys (read-both writers) or new ones
  (write-new writers), and every reader in either state reads the union. A write of an
  item that has an entry of the value keeps it on its key, of either layout
  (``write.decide.target_key``): the two states' writers had re-filed entries in opposite
  directions, and the two states' readers read the layouts in opposite orders, so a read
  missed an entry moved against its order between its phases. Nothing moves an entry
  between layouts in this pair: the mover starts only at ``ready_at`` after entering
  write-new, when no client is still in read-both, so no entry lands on an old-only key
  behind it; from then on writes re-file entries the mover's way (``write.decide.refiles``),
  so an entry the application re-sorts behind the mover's cursor is not left behind.
- write-new and verified: clients do the same in both (write new, read the union).
- verified and read-new: the mover is done and a parity check found every entry on a
  key of the new layout, and since ``ready_at`` of write-new no writer puts one on an
  old-only key, so the new keys alone hold every entry; union readers see them too.
- read-new and retired: clients do the same; the sweep moves (never deletes) anything
  still placed on an old-only key, which no reader needs since verification.
- retired and stable(new): clients do the same; the old layout is forgotten.
- rollback pairs are the same pairs with the layouts' roles swapped, plus read-new and
  the rollback's read-both (writers on the new layout, readers on new or the union: as
  stable(old) and read-both above, with the new layout as the one everyone writes).

**The mover** (``mover``) runs in write-new once ``ready_at`` has passed. It moves only
entries whose shard key changes, through ``ShardedIndex.relocate``: the index's write
loop, one conditional write per entry at the entry's own version, so an application
write racing it wins or is planned again on top, a delete is never undone, and an item
is never under two keys or none. It is idempotent, checkpointed after each page in work
unit records leased through the store (``work``), resumable by any process after any
crash, and paced so neither a source nor a target key takes more than ``rate`` units a
second from it (``units.allocate``), backing off on throttles (AIMD). The parity check
(``verify``) holds every row of both layouts against its item's placement; a gap sends
the mover round again. A store whose ``place`` is not atomic across keys stays correct
where its reads treat the placement as the truth: the parity check already does.

``states`` is the pure state machine; ``Resharder`` (``runner``) carries it out through
``Layouts`` (``layouts``): where entries are and how one moves (``IndexLayouts`` for a
shardex index); ``Adopter`` (``adopter``) carries out a copy's steps, its backfill the
same mover over ``AdoptionLayouts`` (``adopting``), its parity the same classification.
"""

from __future__ import annotations

from shardex.migrate.adopter import Adopter
from shardex.migrate.api import Migrations, MigrationState
from shardex.migrate.layouts import IndexLayouts, Layouts
from shardex.migrate.reshard_base import DEFAULT_MAX_AGE, DEFAULT_UNIT_LEASE
from shardex.migrate.runner import (
    DEFAULT_MARGIN,
    Progress,
    Resharder,
    RunResult,
    StartPlan,
    ValuePlan,
)
from shardex.migrate.states import ORDER, UNTIL, Until
from shardex.migrate.status import status_document
from shardex.migrate.units import DEFAULT_RATE, Unit
from shardex.transition import Gap, Parity, Transition

__all__ = [
    "Adopter",
    "DEFAULT_MARGIN",
    "DEFAULT_MAX_AGE",
    "DEFAULT_RATE",
    "DEFAULT_UNIT_LEASE",
    "Gap",
    "IndexLayouts",
    "Layouts",
    "MigrationState",
    "Migrations",
    "ORDER",
    "Parity",
    "Progress",
    "Resharder",
    "RunResult",
    "StartPlan",
    "Transition",
    "UNTIL",
    "Unit",
    "Until",
    "ValuePlan",
    "status_document",
]
