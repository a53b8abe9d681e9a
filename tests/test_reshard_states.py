"""The reshard state machine, pure: the order of states, the waits, rollbacks, refusals.

The property test walks random paths (forward steps, rollbacks from any state) and
checks, for every two consecutive routings, the condition the package docstring argues
from: readers of both states read every layout writers of either state write, and a
state whose readers drop a layout is entered only after the mover and a clean parity
report.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardex import InvalidRouting, Routing, ShardPolicy
from shardex.migrate import states
from shardex.transition import Gap, Parity, Transition

P = ShardPolicy
LEASE = 10.0
MARGIN = 2.0
T0 = 1_000.0


def started(**changes: ShardPolicy) -> Routing:
    return states.begin(Routing(overrides={"SHIPPED": P(2)}), changes or {"PENDING": P(8)},
                        default=None, values=(), reshard_id="r1", now=T0, margin=MARGIN)


def clean(at: float) -> Parity:
    return Parity(checked_at=at, entries=10)


def dirty(at: float) -> Parity:
    return Parity(checked_at=at, entries=10, missing=1,
                  examples=(Gap("missing", "PENDING", "o-1", "PENDING"),))


def step(routing: Routing, now: float, *, until: states.Until = "done", mover_done: bool = True,
         swept: bool = True) -> states.Step:
    return states.next_step(routing, now=now, lease=LEASE, until=until, mover_done=mover_done,
                            swept=swept, max_age=60.0)


def test_begin_records_the_reshard_in_read_both() -> None:
    routing = started()
    assert routing.state == "read-both"
    assert routing.version == 2
    assert routing.reshard == Transition(id="r1", started_at=T0, changed_at=T0, margin=MARGIN,
                                         values=("PENDING",))
    assert routing.writing.policy("PENDING") == P(1)  # writers still write the old layout
    assert routing.read_keys("PENDING")[-1] == "PENDING"  # readers read both
    assert Routing.from_json(routing.to_json()) == routing


def test_begin_refuses_no_change_and_a_second_reshard() -> None:
    with pytest.raises(InvalidRouting, match="no value changes"):
        started(SHIPPED=P(2))
    with pytest.raises(InvalidRouting, match="already in a transition"):
        states.begin(started(), {"PENDING": P(4)}, default=None, values=(), reshard_id="r2",
                     now=T0, margin=MARGIN)


def test_a_default_change_moves_the_values_named_and_the_overrides_it_affects() -> None:
    routing = states.begin(Routing(overrides={"SHIPPED": P(2)}), {"SHIPPED": None},
                           default=P(4, "random"), values=["PENDING", "SHIPPED"],
                           reshard_id="r1", now=T0, margin=MARGIN)
    assert routing.reshard is not None
    assert routing.reshard.values == ("PENDING", "SHIPPED")
    assert routing.policy("DELIVERED") == P(4, "random")


def test_the_forward_path_waits_the_lease_and_margin_after_each_change_of_conduct() -> None:
    routing = started()
    ready = T0 + LEASE + MARGIN
    assert step(routing, ready - 0.1) == states.Wait(ready, step(routing, T0).why)  # type: ignore[union-attr]
    advance = step(routing, ready)
    assert isinstance(advance, states.Advance)
    routing = advance.routing
    assert (routing.state, routing.version) == ("write-new", 3)
    assert routing.reshard is not None
    assert routing.reshard.changed_at == ready
    # the mover waits for every client to write the new layout
    assert isinstance(step(routing, ready + LEASE, mover_done=False), states.Wait)
    assert isinstance(step(routing, ready + LEASE + MARGIN, mover_done=False), states.Move)
    assert isinstance(step(routing, ready + LEASE + MARGIN), states.Verify)
    verified = states.after_verify(routing, clean(ready + 20), mover_done=True)
    assert (verified.state, verified.version) == ("verified", 4)
    assert verified.reshard is not None
    assert verified.reshard.changed_at == ready
    # the run said "reshard stopped at verified: reached verified"
    assert step(verified, ready + 21, until="verified") == states.Stop(
        "verified", "as far as this run goes (until verified)")
    cut = step(verified, ready + 21)
    assert isinstance(cut, states.Advance)
    assert cut.routing.state == "read-new"
    assert cut.routing.read_keys("PENDING") == [f"PENDING#{k}" for k in range(8)]
    retention = step(cut.routing, ready + 22)
    assert isinstance(retention, states.Advance)
    assert retention.routing.reshard is not None
    assert retention.routing.reshard.retire_after == ready + 22
    # retiring waits for the readers to have left the old layout
    assert isinstance(step(retention.routing, ready + 22), states.Wait)
    retired = step(retention.routing, ready + 21 + LEASE + MARGIN)
    assert isinstance(retired, states.Advance)
    assert retired.routing.state == "retired"
    assert step(retired.routing, ready + 40, swept=False) == states.Sweep()
    done = step(retired.routing, ready + 40)
    assert isinstance(done, states.Advance)
    assert done.routing == Routing(overrides={"SHIPPED": P(2), "PENDING": P(8)},
                                   version=retired.routing.version + 1)
    assert step(done.routing, ready + 41) == states.Stop(
        "done", "no reshard is under way: the routing is stable")


def test_a_parity_report_with_gaps_sends_the_mover_round_again() -> None:
    routing = step(started(), T0 + LEASE + MARGIN).routing  # type: ignore[union-attr]
    assert routing.reshard is not None
    mid_move = states.after_verify(routing, dirty(T0 + 30), mover_done=False)
    assert mid_move.state == "write-new"
    assert mid_move.reshard is not None
    assert mid_move.reshard.generation == 1
    again = states.after_verify(routing, dirty(T0 + 30), mover_done=True)
    assert again.state == "write-new"
    assert again.reshard is not None
    assert again.reshard.generation == 2
    verified = states.after_verify(routing, clean(T0 + 30), mover_done=True)
    back = states.after_verify(verified, dirty(T0 + 40), mover_done=True)
    assert back.state == "write-new"
    assert back.reshard is not None
    assert back.reshard.generation == 2


def test_a_cutover_needs_a_clean_fresh_report() -> None:
    routing = step(started(), T0 + LEASE + MARGIN).routing  # type: ignore[union-attr]
    refusal = states.cutover_refusal(routing, now=T0 + 50, max_age=60)
    assert refusal is not None
    assert "not verified" in refusal.why
    verified = states.after_verify(routing, clean(T0 + 50), mover_done=True)
    assert states.cutover_refusal(verified, now=T0 + 100, max_age=60) is None
    stale = states.cutover_refusal(verified, now=T0 + 111, max_age=60)
    assert stale is not None
    assert "older than --max-age" in stale.why
    assert isinstance(step(verified, T0 + 111), states.Verify)
    # a second cutover read "in read-new, not verified ... after a parity check with no
    # gaps", as if the check had failed
    for later in ("read-new", "retired"):
        moved = states._next(verified, later, T0 + 100, verified.reshard)
        again = states.cutover_refusal(moved, now=T0 + 101, max_age=60)
        assert again is not None
        assert again.why == (f"the reshard is in {later}: readers already read the target "
                             "layout alone; next: 'shardex reshard complete'")


@pytest.mark.parametrize(("state", "back"), [
    ("read-both", "write-new"),
    ("write-new", "read-both"),
    ("verified", "read-both"),
    ("read-new", "read-both"),
])
def test_a_rollback_enters_the_state_of_adjacent_conduct(state: str, back: str) -> None:
    routing = dataclasses.replace(started(), state=state)  # type: ignore[arg-type]
    rolled = states.reverse(routing, T0 + 1)
    assert rolled.state == back
    assert rolled.policy("PENDING") == P(1)
    assert rolled.previous is not None
    assert rolled.previous.policy("PENDING") == P(8)
    assert rolled.reshard is not None
    assert rolled.reshard.direction == "rollback"
    # writers keep their layout (or readers widen, or movers stop or turn): a change of
    # conduct, made only once every client acts on the last one
    old_w, old_r, old_m = states.conduct(routing)
    new_w, new_r, new_m = states.conduct(rolled)
    assert (old_w != new_w) + (old_r != new_r) <= 1
    assert (old_w, old_r, old_m) != (new_w, new_r, new_m)
    assert isinstance(states.rollback_step(routing, now=T0 + 1, lease=LEASE), states.Wait)
    assert isinstance(states.rollback_step(routing, now=T0 + LEASE + MARGIN, lease=LEASE),
                      states.Advance)


@pytest.mark.parametrize("case", ["retired", "rolling back", "stable"])
def test_rollback_is_refused_after_retired_while_rolling_back_and_without_a_reshard(
        case: str) -> None:
    routing = {"retired": dataclasses.replace(started(), state="retired"),
               "rolling back": states.reverse(started(), T0),
               "stable": Routing()}[case]
    refusal = states.rollback_refusal(routing)
    assert refusal is not None
    with pytest.raises(InvalidRouting, match=refusal.why[:20]):
        states.reverse(routing, T0)


def _reads(routing: Routing) -> set[object]:
    return set(states.conduct(routing)[1])


def _moves(routing: Routing) -> object:
    return states.conduct(routing)[2]


def _writes(routing: Routing) -> object:
    return states.conduct(routing)[0]


@settings(max_examples=300, deadline=None)
@given(choices=st.lists(st.tuples(st.booleans(), st.booleans(), st.integers(0, 3)),
                        min_size=1, max_size=30),
       target=st.sampled_from([P(8), P(1), P(3, "random"), P(4, "round_robin")]))
def test_every_pair_of_consecutive_states_keeps_reads_complete(
        choices: list[tuple[bool, bool, int]], target: ShardPolicy) -> None:
    routing = states.begin(Routing(overrides={"PENDING": P(2)}), {"PENDING": target},
                           default=None, values=(), reshard_id="r1", now=T0, margin=MARGIN)
    now = T0
    moved_and_clean = False
    for roll, gaps, hops in choices:
        now += LEASE + MARGIN + hops
        if roll and states.rollback_refusal(routing) is None:
            nxt = states.rollback_step(routing, now=now, lease=LEASE)
            assert isinstance(nxt, states.Advance)
            new = nxt.routing
            moved_and_clean = False
        else:
            decision = step(routing, now)
            if isinstance(decision, states.Stop):
                break
            if isinstance(decision, states.Move | states.Sweep):
                continue
            if isinstance(decision, states.Verify):
                parity = dirty(now) if gaps else clean(now)
                new = states.after_verify(routing, parity, mover_done=True)
                moved_and_clean = parity.clean
            else:
                assert isinstance(decision, states.Advance)
                new = decision.routing
        assert new.version == routing.version + 1
        assert Routing.from_json(new.to_json()) == new
        both = _reads(routing) & _reads(new)
        assert {_writes(routing), _writes(new)} <= both, (routing.state, new.state)
        if _reads(new) < _reads(routing):
            # readers drop a layout only once nothing is left on it
            assert moved_and_clean, (routing.state, new.state)
        if _moves(routing) is not None and _moves(new) is not None:
            # movers never turn round without a wait: union readers read the layout
            # entries move toward last (Routing.read_phases)
            assert _moves(routing) == _moves(new), (routing.state, new.state)
        for state in (routing, new):
            if _moves(state) is not None:
                assert _moves(state) == _writes(state)
        routing = new


def test_a_default_change_that_moves_no_named_value_says_to_name_them() -> None:
    """It said 'the layout asked for is the one in use', though the default differed."""
    with pytest.raises(InvalidRouting, match=r"no value changes: the default does, but no "
                                             r"value named \(--value, values=\) follows it"):
        states.begin(Routing(), {}, default=P(4), values=(), reshard_id="r1", now=T0,
                     margin=MARGIN)


def test_values_given_as_one_string_is_refused_not_split_into_letters() -> None:
    """values="PENDING" was taken letter by letter: the reshard moved 'D', 'E', 'G', ...
    and PENDING, which follows the default, was hidden once readers read the new layout
    alone."""
    with pytest.raises(InvalidRouting, match=r"values is a list of logical keys, got the "
                                             r"string 'PENDING' \(values=\['PENDING'\]"):
        states.begin(Routing(), {}, default=P(4), values="PENDING", reshard_id="r1",
                     now=T0, margin=MARGIN)
    with pytest.raises(InvalidRouting, match="values: 'A#1' is no logical key"):
        states.begin(Routing(), {}, default=P(4), values=["A#1"], reshard_id="r1",
                     now=T0, margin=MARGIN)
    moved = states.begin(Routing(), {}, default=P(4), values=["PENDING"], reshard_id="r1",
                         now=T0, margin=MARGIN)
    assert moved.reshard is not None
    assert moved.reshard.values == ("PENDING",)


@pytest.mark.parametrize("changes", [[("A", P(4))], None, "A"])
def test_changes_that_are_no_mapping_are_refused_by_name(changes: object) -> None:
    """A list of pairs raised AttributeError: 'list' object has no attribute 'items'."""
    with pytest.raises(InvalidRouting, match="changes is a mapping of logical key to "
                                             "ShardPolicy or None"):
        states.begin(Routing(), changes, default=None, values=(),  # type: ignore[arg-type]
                     reshard_id="r1", now=T0, margin=MARGIN)
