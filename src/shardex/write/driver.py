"""The thin async driver: carries a write machine's actions out against the stores.

``WriteEngine`` holds what every write of one index shares (its stores by tier, its
routing record, its adaptive gates, clock, retry policy and random generator) and runs
one ``WriteMachine`` per logical write: each action is one request (or a wait), each
answer an observation stamped with the clock. Nothing is decided here.

**A connection for each request, and one kept for the routing.** A store's client carries
``Store.connections`` requests at once (its pool) and queues the rest. The engine sends at
most one fewer of its data requests (locates and places) to a store at once, and queues
the others itself, so that (1) a place's fence is checked once it has a connection, when
its request really leaves, not before a wait in the pool that the fence could not see,
and (2) the routing record's read, which takes no slot, always finds a free connection:
it is sent when it is asked for, and comes back young. Queued behind hundreds of data
requests it came back older than a short lease, and every write read the routing again.
Neither weakens the fence: a place is still checked (``Fence.holds``) at the last moment
before it leaves and again when its answer comes back, and a routing read's age still
counts from when it was asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
from collections.abc import Mapping
from typing import Any

from shardex.admission import AdaptiveGate
from shardex.clock import Clock
from shardex.errors import ShardexError
from shardex.retry import RetryPolicy
from shardex.routing import Routing
from shardex.routing_record import RoutingRecord
from shardex.stores.base import Store
from shardex.write.decide import refiles
from shardex.write.job import Job
from shardex.write.machine import WriteMachine
from shardex.write.steps import (
    FENCE,
    Done,
    Errored,
    Fence,
    Locate,
    Located,
    NotSent,
    Observation,
    Place,
    Placed,
    Route,
    Routed,
    Sleep,
    Slept,
    Start,
)
from shardex.write.topology import Tier, Topology

__all__ = ["WriteEngine"]

# tuple.__new__ builds an observation without its named tuple's Python-level __new__:
# the hot loop makes several for every try of a write
_new = tuple.__new__


class _Held(Exception):
    """A place that waited (in a gate) past its fence: it is not sent."""


class WriteEngine:
    """Runs the writes of index ``namespace``: one machine per write, its I/O done here.

    ``stores`` maps each tier (None: the index's own store) to its store; ``record`` is
    the index's routing record (the routing writes act on); ``gates`` the adaptive gate
    of each tier's writes, if the index paces them.
    """

    def __init__(self, stores: Mapping[Tier, Store], namespace: str, *,
                 record: RoutingRecord, topology: Topology, retry: RetryPolicy, clock: Clock,
                 rng: random.Random, max_conflicts: int,
                 gates: Mapping[Tier, AdaptiveGate] | None = None) -> None:
        self._stores = dict(stores)
        self._namespace = namespace
        self._record = record
        self.topology = topology
        self._retry = retry
        self._clock = clock
        self._rng = rng
        self._max_conflicts = max_conflicts
        self._gates = dict(gates or {})
        self._routed: Routed | None = None  # the last answer to a Route: reused while it holds
        self._slots = {tier: slots for tier, store in self._stores.items()
                       if (slots := _slots(store)) is not None}

    def machine(self, job: Job) -> WriteMachine:
        """A machine for ``job`` on this index's stores (for tests that drive one by hand)."""
        return WriteMachine(job, self.topology, retry=self._retry, rng=self._rng,
                            max_conflicts=self._max_conflicts, paced=bool(self._gates))

    async def write(self, job: Job) -> Done:
        """Carry out ``job``; return how it ended, or raise the error it ended with."""
        machine = self.machine(job)
        clock = self._clock
        observed: Observation = Start(clock.now())
        # the type of each action picks its request (one comparison each, on the hot path)
        while True:
            action: Any = machine.next(observed)
            kind = type(action)
            if kind is Place:
                if (action.pace is None or self._gates.get(action.tier) is None) \
                        and action.tier not in self._slots:
                    # _place's unpaced path, inline: one coroutine less for each try of a
                    # place, as a throttled one is tried again and again
                    fence, record = action.fence, self._record
                    if fence is not None and not fence.holds(
                            clock.now(), record.routing.version, record.loaded_at, FENCE):
                        observed = NotSent(clock.now())
                        continue
                    try:
                        # a refusal returned, not raised: a hot key's throttled tries
                        # build no traceback (Store.try_place)
                        outcome = await self._stores[action.tier].try_place(
                            self._namespace, job.item_id, action.entry,
                            version=action.version, expected=action.expected,
                            token=action.token)
                    except ShardexError as exc:
                        outcome = exc
                    observed = _new(Errored, (outcome, clock.now())) \
                        if isinstance(outcome, ShardexError) else self._placed()
                else:
                    observed = await self._place(job.item_id, action)
            elif kind is Locate:
                try:
                    slots = self._slots.get(action.tier)
                    if slots is None:  # no pool to wait on: no context of its own
                        found = await self._stores[action.tier].locate(self._namespace,
                                                                       job.item_id)
                    else:
                        async with slots:
                            found = await self._stores[action.tier].locate(self._namespace,
                                                                           job.item_id)
                except ShardexError as exc:
                    observed = _new(Errored, (exc, clock.now()))
                else:
                    observed = _new(Located, (found, None))
            elif kind is Route:
                # the copy within its TTL (most Routes) is answered without a coroutine
                observed = (None if action.fresh else self._served()) \
                    or await self._route(action.fresh)
            elif kind is Sleep:
                await clock.sleep(action.seconds)
                observed = _new(Slept, (clock.now(), self._served()))
            else:
                done: Done = action
                return done

    def _served(self) -> Routed | None:
        """The routing copy within its TTL, or None: the same answer while the copy is
        the same one."""
        record = self._record
        routing, routed = record.served(), self._routed
        if routing is None:
            return None
        if routed is None or routed.routing is not routing \
                or routed.fence.read_at != record.loaded_at \
                or routed.fence.lease != record.lease:
            routed = self._routed = self._routed_as(routing)
        return routed

    async def _route(self, fresh: bool) -> Observation:
        """A routing read (``fresh``), or the copy the record serves, read if expired."""
        record, clock = self._record, self._clock
        try:
            if fresh:
                sent = clock.now()
                routing = await record.refresh()
                if record.loaded_at < sent:  # joined a read sent before: read again
                    routing = await record.refresh()
            else:
                routing = await record.current()
        except ShardexError as exc:
            return Errored(exc, clock.now())
        return self._routed_as(routing)

    def _routed_as(self, routing: Routing) -> Routed:
        """``routing`` as the record serves it now, and whether writes may re-file."""
        record = self._record
        return Routed(routing, Fence(routing.version, record.loaded_at, record.lease),
                      refile=routing.reshard is not None
                      and refiles(routing, record.lease, self._clock.wall()))

    async def _place(self, item_id: str, action: Place) -> Observation:
        clock, store, fence, record = self._clock, self._stores[action.tier], action.fence, \
            self._record

        async def send() -> float:
            async with self._slot(action.tier):
                # the last moment before the request leaves: after any wait in a gate, and
                # once it has a connection
                if fence is not None and not fence.holds(clock.now(), record.routing.version,
                                                         record.loaded_at, FENCE):
                    raise _Held()
                return await store.place(self._namespace, item_id, action.entry,
                                         version=action.version, expected=action.expected,
                                         token=action.token)

        gate = self._gates.get(action.tier) if action.pace is not None else None
        try:
            if gate is None or action.pace is None:
                await send()
            else:
                await gate.call(action.pace, send)
        except _Held:
            return NotSent(clock.now())
        except ShardexError as exc:
            return Errored(exc, clock.now())
        return self._placed()

    def _slot(self, tier: Tier) -> contextlib.AbstractAsyncContextManager[Any]:
        """One of ``tier``'s store's connections for a data request (a no-op where the
        store names no pool)."""
        slots = self._slots.get(tier)
        return _NO_SLOT if slots is None else slots

    def _placed(self) -> Placed:
        """What a place that landed observed: now, and the routing copy's version and read."""
        record, now = self._record, self._clock.now()
        if not record.loaded:  # the index closed meanwhile: no copy to vouch for the lease
            return Placed(now, -1, -math.inf)
        return _new(Placed, (now, record.routing.version, record.loaded_at))


_NO_SLOT = contextlib.nullcontext()


def _slots(store: Store) -> asyncio.Semaphore | None:
    """The data requests the engine sends ``store`` at once: its client's pool but one,
    kept for the routing record's read (None: no pool named, no bound)."""
    pool = store.connections
    return None if pool is None else asyncio.Semaphore(max(1, pool - 1))
