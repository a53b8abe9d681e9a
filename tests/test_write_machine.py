"""The write machine's outcome and fencing rules, as Hypothesis properties of the pure machine.

No store and no event loop: a small model of one item's placement answers each action
the machine asks for (``next(observation) -> action``), with faults drawn by Hypothesis:
throttles, tries lost before they applied, tries that applied and then timed out,
other writers changing the item first, reads that fail. The end-to-end checks of the same
rules against real stores are in ``test_write_outcomes.py`` and ``test_dynamodb_writes.py``.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from shardex import (
    ConditionFailed,
    OutcomeUnknown,
    Routing,
    ShardexError,
    ShardPolicy,
    Throttled,
    Unavailable,
)
from shardex.model.entries import Placement, StoredEntry, history_after
from shardex.retry import RetryPolicy
from shardex.write import Delete, Job, Move, Put, WriteMachine, in_place
from shardex.write.decide import value_of
from shardex.write.steps import (
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
from shardex.write.topology import ONE_STORE

P = ShardPolicy
ITEM = "o-1"
LEASE = 10.0
ROUTING = Routing(overrides={"PENDING": P(4), "SHIPPED": P(2)})
RETRY = RetryPolicy(attempts=4, base=0.01, cap=0.1, deadline=None)
FAULTS = st.sampled_from(["ok", "ok", "ok", "throttled", "lost", "ambiguous", "raced",
                          "read-fails"])


def _key(routing: Routing, value: str) -> str:
    return routing.shard_key(value, ITEM)


@dataclass
class Model:
    """One item's placement in one store, and every write that applied to it."""

    placement: Placement | None
    applied: Counter[str] = field(default_factory=Counter)
    foreign: int = 0

    def place(self, action: Place) -> None:
        if self.placement != action.expected:
            raise ConditionFailed("scripted: the placement changed")
        self.placement = Placement(ITEM, action.version, action.entry, action.token,
                                   history_after(self.placement))
        self.applied[action.token] += 1

    def race(self) -> None:
        """Another writer puts the item under SHIPPED first."""
        self.foreign += 1
        version = 1 if self.placement is None else self.placement.version + 1
        self.place(Place(None, StoredEntry(_key(ROUTING, "SHIPPED"), "x", ITEM, {}, version),
                         version, self.placement, f"foreign{self.foreign}"))


@dataclass
class Run:
    """What one run of a machine did: its actions, and how it ended."""

    actions: list[object] = field(default_factory=list)
    observed: list[Observation] = field(default_factory=list)
    result: Done | None = None
    error: ShardexError | None = None


def drive(machine: WriteMachine, model: Model, faults: list[str], *,
          routings: list[tuple[float, Routing]] | None = None,
          held: dict[int, float] | None = None, paused: dict[int, float] | None = None) -> Run:
    """Answer ``machine``'s actions from ``model``, drawing one fault per request from
    ``faults`` (then "ok"). ``routings``: (from time, routing in force); ``held``: place
    number -> seconds the request waits before the driver's last check (a queue);
    ``paused``: seconds it waits after that check (the process paused)."""
    run = Run()
    now, places, draws = 0.0, 0, iter(faults)
    routings = routings or [(0.0, ROUTING)]
    read_at = 0.0

    def in_force(at: float) -> Routing:
        return [r for since, r in routings if since <= at][-1]

    observed: Observation = Start(now)
    for _ in range(500):
        try:
            action = machine.next(observed)
        except ShardexError as exc:
            run.error = exc
            return run
        run.actions.append(action)
        if len(run.actions) > 1:
            run.observed.append(observed)
        now += 0.001
        if isinstance(action, Done):
            run.result = action
            return run
        if isinstance(action, Route):
            if action.fresh or now - read_at > 1.0:
                read_at = now
            routing = in_force(read_at)
            observed = Routed(routing, Fence(routing.version, read_at, LEASE), now)
        elif isinstance(action, Sleep):
            now += action.seconds
            observed = Slept(now)
        elif isinstance(action, Locate):
            fault = next(draws, "ok")
            observed = Errored(Unavailable("scripted: no answer"), now) \
                if fault == "read-fails" else Located(model.placement, now)
        else:
            assert isinstance(action, Place)
            now += (held or {}).get(places, 0.0)
            places += 1
            fault = next(draws, "ok")
            if action.fence is not None and not action.fence.holds(
                    now, in_force(read_at).version, read_at, 0.9):
                observed = NotSent(now)
                continue
            now += (paused or {}).get(places - 1, 0.0)
            if fault == "raced":
                model.race()
            if fault in ("throttled", "lost"):
                error: ShardexError = Throttled("scripted", key="k", reason="scripted") \
                    if fault == "throttled" else Unavailable("scripted: lost")
                observed = Errored(error, now)
                continue
            try:
                model.place(action)
            except ConditionFailed as exc:
                observed = Errored(exc, now)
                continue
            observed = Errored(Unavailable("scripted: timed out after it applied"), now) \
                if fault == "ambiguous" else Placed(now, in_force(read_at).version, read_at)
    raise AssertionError("the machine never ended")


def machine(request: Put | Move | Delete, token: str = "mine") -> WriteMachine:
    def plan(routing: Routing) -> Put | Move | Delete:
        if isinstance(request, Put):
            return request._replace(fresh_key=_key(routing, request.value))
        if isinstance(request, Move):
            return request._replace(fresh_key=_key(routing, request.new))
        return request

    value = request.new if isinstance(request, Move) else request.value
    other = request.old if isinstance(request, Move) else None
    job = Job(ITEM, value, other, plan, lambda routing, of: _key(routing, of), "write", token)
    return WriteMachine(job, ONE_STORE, retry=RETRY, rng=random.Random(0), max_conflicts=4)


REQUESTS = st.sampled_from([
    Put("PENDING", ITEM, "s", {"n": 1}, None, ""),
    Put("PENDING", ITEM, None, {}, 3, ""),
    Move(ITEM, "PENDING", "SHIPPED", None, None, None, ""),
    Move(ITEM, "SHIPPED", "PENDING", "t", {"m": 2}, None, ""),
    Delete("PENDING", ITEM, None),
    Delete("SHIPPED", ITEM, 2),
])
STARTS = st.sampled_from([
    None,
    Placement(ITEM, 1, StoredEntry(_key(ROUTING, "PENDING"), "a", ITEM, {}, 1), "t1", ("",)),
    Placement(ITEM, 2, StoredEntry(_key(ROUTING, "SHIPPED"), "a", ITEM, {}, 2), "t2",
              ("", "t1")),
    Placement(ITEM, 2, None, "t2", ("", "t1")),
])


@settings(max_examples=200, deadline=None)
@given(request=REQUESTS, start=STARTS, faults=st.lists(FAULTS, max_size=12))
def test_every_outcome_is_true_to_what_applied(request: Put | Move | Delete,
                                               start: Placement | None,
                                               faults: list[str]) -> None:
    """ok: the write's token applied exactly once; an error other than OutcomeUnknown: it
    never applied; OutcomeUnknown: only after a try that may have applied; never twice."""
    model = Model(start)
    run = drive(machine(request), model, faults)
    applied = model.applied["mine"]
    assert applied <= 1, "a write applied twice"
    if run.result is not None:
        assert applied == (1 if run.result.result else 0)
    elif isinstance(run.error, OutcomeUnknown):
        assert run.error.token == "mine"
        assert "ambiguous" in faults or "lost" in faults or "read-fails" in faults
    else:
        assert applied == 0, f"reported {run.error!r} but applied"


@settings(max_examples=200, deadline=None)
@given(request=REQUESTS, start=STARTS, faults=st.lists(FAULTS, max_size=12))
def test_a_try_that_may_have_applied_is_read_back_before_anything_else(
        request: Put | Move | Delete, start: Placement | None, faults: list[str]) -> None:
    """After a place answered Unavailable (it may have applied), the next request is a read
    of the item: a try that may have applied is never planned again unread."""
    run = drive(machine(request), Model(start), faults)
    for i, (action, answer) in enumerate(zip(run.actions, run.observed, strict=False)):
        if isinstance(action, Place) and isinstance(answer, Errored) \
                and isinstance(answer.error, Unavailable):
            after = [a for a in run.actions[i + 1:] if not isinstance(a, Sleep | Route)]
            assert after, "ended without reading the item back"
            assert isinstance(after[0], Locate), after[0]


@settings(max_examples=150, deadline=None)
@given(request=st.sampled_from([Put("PENDING", ITEM, "s", {}, None, ""),
                                Move(ITEM, "SHIPPED", "PENDING", None, None, None, "")]),
       pause=st.floats(0.0, 5 * LEASE), faults=st.lists(FAULTS, max_size=6))
def test_a_write_reported_ok_is_where_the_routing_in_force_reads_it(
        request: Put | Move, pause: float, faults: list[str]) -> None:
    """The layout of PENDING changes twice (4 shards -> 8 -> 16) a second after the write
    is planned; its request waits ``pause`` seconds before it lands. Reported ok, its
    entry is where the routing in force writes (and so reads) PENDING when the write
    ends, or its answer came back within the lease of the routing it was planned under
    (the whole lease: the 90% ``FENCE`` bounds when a place may be sent, not when its
    answer may come back; see ``shardex.write``)."""
    start = Placement(ITEM, 1, StoredEntry(_key(ROUTING, "SHIPPED"), "a", ITEM, {}, 1), "t1",
                      ("",))
    later = [(0.0, ROUTING),
             (1.0, Routing(overrides={"PENDING": P(8), "SHIPPED": P(2)}, version=2)),
             (1.5, Routing(overrides={"PENDING": P(16), "SHIPPED": P(2)}, version=3))]
    model = Model(start)
    run = drive(machine(request), model, faults, routings=later, paused={0: pause})
    if run.result is None or not run.result.result:
        return
    final = later[-1][1]
    placement = model.placement
    assert placement is not None
    assert placement.entry is not None
    last = max(i for i, a in enumerate(run.actions) if isinstance(a, Place))
    sent, answer = run.actions[last], run.observed[last]
    assert isinstance(sent, Place)
    assert sent.fence is not None
    if answer.at < sent.fence.read_at + LEASE:
        return  # answered within the lease: the reshard's own argument covers it
    if value_of(placement.entry) == "PENDING":
        assert in_place(final, "PENDING", placement.entry.shard_key, ITEM), placement


def test_a_write_held_past_its_fence_is_not_sent_and_planned_again() -> None:
    """A place the driver holds past the lease of the routing it was planned under comes
    back NotSent; the machine reads the routing again (fresh) and plans again under it."""
    model = Model(None)
    later = [(0.0, ROUTING),
             (1.0, Routing(overrides={"PENDING": P(8), "SHIPPED": P(2)}, version=2))]
    run = drive(machine(Put("PENDING", ITEM, "s", {}, None, "")), model, [],
                routings=later, held={0: 2 * LEASE})
    assert run.result == Done(True, _key(later[1][1], "PENDING"))
    routes = [a for a in run.actions if isinstance(a, Route)]
    assert Route(fresh=True) in routes
    assert model.applied["mine"] == 1
    assert model.placement is not None
    assert model.placement.entry is not None
    assert in_place(later[1][1], "PENDING", model.placement.entry.shard_key, ITEM)


def test_a_write_that_landed_past_its_lease_is_re_placed_where_readers_read() -> None:
    """Planned under PENDING over 4 shards, the request leaves in time and the process
    pauses before it lands, two leases later; by then PENDING has 16 shards. The machine
    reads the routing again and re-places the entry at its version (a settle) before it
    reports ok."""
    later = [(0.0, ROUTING),
             (1.0, Routing(overrides={"PENDING": P(8), "SHIPPED": P(2)}, version=2)),
             (1.5, Routing(overrides={"PENDING": P(16), "SHIPPED": P(2)}, version=3))]
    model = Model(None)
    run = drive(machine(Put("PENDING", ITEM, "s", {}, None, "")), model, [],
                routings=later, paused={0: 2 * LEASE})
    final = later[-1][1]
    places = [a for a in run.actions if isinstance(a, Place)]
    assert len(places) == 2
    assert places[0].entry is not None
    assert places[1].entry is not None
    assert places[0].entry.shard_key == _key(ROUTING, "PENDING")
    assert places[1].entry.shard_key == _key(final, "PENDING")
    assert places[1].version == places[0].version  # re-placed, not written again
    assert Route(fresh=True) in run.actions
    assert run.result is not None
    assert run.result.result
    assert model.placement is not None
    assert model.placement.entry == places[1].entry
