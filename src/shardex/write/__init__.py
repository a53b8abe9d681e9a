"""The write engine: one pure machine decides every write, one thin driver does its I/O.

Every write of an index goes through here: ``put``, ``move`` and ``delete``, a reshard
mover's ``relocate``, an adoption's backfill (``put``), a tier move's writes and
confirmations, and the engine's own re-placing of a write that landed late (below).
``WriteMachine`` (``machine``) is sans-I/O, as h11's ``next_event`` and tenacity's
``iter``: ``machine.next(observation) -> action``, where an action is a request
(``Route``, ``Locate``, ``Place``), a wait (``Sleep``) or the end (``Done``), and the
write's error is raised from ``next``. ``WriteEngine`` (``driver``) carries the actions
out against the index's stores. What a write touches is handed down as a value: the
``Job`` (the item, the request planned under a routing, the token) and the index's
``Topology`` (its stores by tier, which one arbitrates); nothing calls back into the
index.

**Outcomes** (Jepsen's): the call returns (ok), raises an error that means the write did
not apply (fail), or raises ``OutcomeUnknown`` (it may have). Each logical write has one
token (``token=`` lets the caller choose it), sent with each of its tries; the store
records the token of the write that left each placement and the 4 before it. A try that
failed ambiguously (``Unavailable``) is settled one way everywhere: the item's placement
is read back and ``decide.resolve`` says from its tokens whether the try applied, did
not, or cannot be told; the last is the only ``OutcomeUnknown``. A try that may have
applied is never planned again, and once any try was ambiguous every later failure of
the write is read back the same way before it is reported.

**Fencing: no write reported ok is missing from the reads of the routing in force when
it lands** (nor from any later one, until another write changes the item). A write is
planned under the client's copy of the routing, read (strongly consistently) by a read
sent at ``r``; the layout writes follow in that copy's state picks the store and shard
key. The routing is a lease (``shardex.routing_record``): a reshard waits ``lease +
margin`` after each change of what clients do before the next (``shardex.reshard``), so
at any time before ``r + lease`` the stored routing is in the copy's state or the next,
and every reader of either reads what a writer of either writes there (the reshard's
pairwise argument). Two checks hold each write to that window:

1. *At send*: a place carries the copy it was planned under (``Fence``). The driver checks
   the clock at the last moment before the request leaves, after any wait (an adaptive
   gate's queue, a backoff): it is sent only within ``FENCE`` (90%) of the lease of the
   latest read that found that routing version (the copy planned with, or a newer read
   of the same version); one held longer is not sent (``NotSent``) and the write is
   planned again under a routing read now. Cost: a clock read.
2. *After landing*: an answer back within the lease of that read (by the same rule)
   proves the write landed in the planned state or the next: done, no request.
   Otherwise (the process paused between the check and the request, or the request took
   that long) the routing is read again by a read sent after the answer: if it has not
   moved, done (one version on, that state's mover and parity check may have passed the
   entry's key before it landed); if the entry is where the routing's writes now put it
   (store and shard key), done; else it is re-placed there (a *settle*: a ``Relocate`` at the
   entry's version, conditioned on the item's placement, through this same machine and
   its own two checks) before the write reports ok. An entry left in a store its
   value's readers no longer read is carried to the one they read when what they find
   there hides it (the write's own confirmation or claim, or an older copy a rollback's
   mover made back meanwhile), and a late tombstone takes out such copies of what it
   erased (``shardex.write.settle``). Cost, only then: one routing read, and for an
   entry left on a layout no longer written one locate and one place. A crossing write
   takes effect when its confirmation lands in S: the confirmation is sent within the
   row's fence, and its answer is the landing this check times.

The steady state (no reshard, answers within the lease) costs what it did: no request
more. What this assumes: the runner's waits and the clients' leases are measured on
clocks that run at the same rate within the margin (monotonic clocks, no agreement on
wall time); a request that has left lands within ``margin`` of being sent, or its sender
lives to read the answer; a runner stores a state within the margin of stamping it. Left
over: a process that pauses after its send-time check, sends late and dies before the
answer leaves an entry where listings may miss it (``get`` finds it; the item's next
write re-places it). A settle that cannot be made (the store stays unreachable, or the
entry landed in a store its value left outside a tier move) ends the write
``OutcomeUnknown``: it applied, and its message says where the entry is.

**Across stores** (tiers, ``shardex.tiers``): an item has one live entry, in the store of
the tier its value is on; ``decide.holder`` names it from the item's placement in every
store, and reads (``get``), writes and a reshard's parity check all ask it. The index's
own store arbitrates: a write that makes an item live in a tier's store from nothing
there is placed in the tier, then *confirmed* in the own store by a tombstone at its
version and token, conditioned on the own store's placement as located; a writer that
makes the item live in the own store meanwhile is conditioned on the same placement, so
of two clients creating one item on two stores exactly one wins there, and the other
takes its row back out and decides again. A write that makes an item live numbers it
above its placement in every store, so versions compare across stores. While a reshard
moves a value between two stores, the store it came from (S) serializes every write of
its items (``crossing``): a write to the other (T) is placed in T, then confirmed in S;
a write of another value over such an item in T is confirmed in S the same way (and
takes its row back out if it loses there); a write in S that leaves the moving value's
row in T stale takes that row out. Until the reshard ends, a row of the moving value
that the truth of S and T does not name (in the states readers read both) or that lies
in the store the value is not on (in the others) is a copy a move left, no entry.
"""

from __future__ import annotations

from shardex.write.decide import (
    Delete,
    Move,
    Outcome,
    Put,
    Relocate,
    WriteRequest,
    arbitrated,
    decide,
    holder,
    in_place,
    resolve,
    truth,
    void,
)
from shardex.write.driver import WriteEngine
from shardex.write.job import Job
from shardex.write.machine import WriteMachine
from shardex.write.topology import Topology, crossing

__all__ = ["Delete", "Job", "Move", "Outcome", "Put", "Relocate", "Topology", "WriteEngine",
           "WriteMachine", "WriteRequest", "arbitrated", "crossing", "decide", "holder",
           "in_place", "resolve", "truth", "void"]
