"""The planner's partition model and its one verdict: collision odds against a brute-force
count, the verdict against the simulation of its own table (issue 21's scenarios), Azure's
counting, the headroom input and the Cosmos DB plan."""

from __future__ import annotations

import itertools
import json
import math
import random

import pytest
from click.testing import CliRunner

from shardex.capacity import cosmos_read_units, cosmos_write_units
from shardex.cli import cli
from shardex.errors import InvalidInput
from shardex.plan import busiest_partition, collision_free_odds, plan_shards, shards_for
from shardex.plan.partitions import placed
from shardex.scenarios.simulate import simulate
from shardex.scenarios.verify import verify_plan
from shardex.scenarios.workload import workload_from_dict
from shardex.sim import profile
from shardex.sim.fluid import Flow, FluidEngine, Part
from shardex.sim.partitions import slot_of

ORDERS_1500 = {"PENDING": 1000.0, "SHIPPED": 300.0, "DELIVERED": 150.0, "CANCELLED": 50.0}
PROVISIONED_10K = profile("dynamodb-provisioned", provisioned_write=10_000.0,
                          provisioned_read=10_000.0)


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), terminal_width=200)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


# -- the partition model ------------------------------------------------------------------

@pytest.mark.parametrize(("keys", "partitions"), [(6, 10), (5, 8), (3, 4), (2, 2), (4, 3)])
def test_collision_odds_match_a_brute_force_count(keys: int, partitions: int) -> None:
    """Every way ``keys`` keys can land on ``partitions`` partitions, counted: the share
    with no two on one partition is the formula's (6 keys on 10 partitions: 15.12%)."""
    apart = sum(1 for placement in itertools.product(range(partitions), repeat=keys)
                if len(set(placement)) == keys)
    assert collision_free_odds(keys, partitions) == pytest.approx(apart / partitions**keys)
    if (keys, partitions) == (6, 10):
        assert apart / partitions**keys == pytest.approx(0.1512)
    # the placements the planner draws (the simulator's hash, over index names) agree
    found = busiest_partition({f"K#{i}": 100.0 for i in range(keys)}, partitions)
    odds = apart / partitions**keys
    spread = math.sqrt(odds * (1 - odds) / 160)
    assert abs(found.collision_free - odds) <= 4 * spread + 1e-9


def test_the_busiest_partition_matches_a_brute_force_distribution() -> None:
    """Keys of unequal load on 5 partitions, every placement counted: the drawn mean of the
    busiest partition is the exact mean, and the drawn p99 sits in the exact distribution's
    top few percent."""
    loads = {"A#0": 600.0, "A#1": 600.0, "A#2": 600.0, "B": 400.0, "C": 250.0, "D": 100.0}
    partitions, spread = 5, 50.0
    names = list(loads)
    tops = []
    for placement in itertools.product(range(partitions), repeat=len(names)):
        sums = [spread] * partitions
        for name, slot in zip(names, placement, strict=True):
            sums[slot] += loads[name]
        tops.append(max(sums))
    tops.sort()
    mean = sum(tops) / len(tops)
    deviation = math.sqrt(sum((t - mean) ** 2 for t in tops) / len(tops))
    found = busiest_partition(loads, partitions, spread=spread)
    assert abs(found.expected - mean) <= 4 * deviation / math.sqrt(160)
    at_or_below = sum(1 for t in tops if t <= found.worst) / len(tops)
    assert at_or_below >= 0.95
    assert found.worst in tops
    # the placement it names is that busiest partition: its keys add up to it
    assert sum(loads[k] for k in found.worst_keys) + spread == pytest.approx(found.worst)


def test_placements_are_the_simulators_own() -> None:
    rng = random.Random(7)
    for _ in range(500):
        key, partitions = f"V#{rng.randrange(10_000)}", rng.randint(1, 3000)
        assert placed("orders", key, partitions) == slot_of("orders", key, partitions)


def test_every_key_its_own_partition_shares_nothing() -> None:
    found = busiest_partition({"A": 900.0, "B": 300.0}, 0, spread=500.0)
    assert (found.worst, found.collision_free, found.worst_keys) == (900.0, 1.0, ("A",))


# -- one verdict: issue 21's scenarios --------------------------------------------------------

def test_a_provisioned_table_of_10000_throttles_and_the_simulation_agrees() -> None:
    """Issue 21: 6 shard keys on a provisioned table of 10,000 (10 partitions) were planned
    as if each had a partition; ``plan`` said the table keeps up and the simulation
    accepted 64%. Now the plan says it throttles, why, and what avoids it."""
    plan = plan_shards(ORDERS_1500, table=PROVISIONED_10K)
    assert plan.verdict is not None
    assert not plan.verdict.keeps_up
    assert plan.partitions[0].busiest.collision_free < 0.2
    assert "splits it for heat" in " ".join(plan.verdict.reasons)
    assert any("split_delay_seconds=600" in a for a in plan.verdict.assumptions)
    assert plan.verdict.setting is not None
    setting = plan.verdict.setting["provisioned_write"]
    verified = verify_plan(plan, seconds=120)
    assert verified["agrees"]
    assert not verified["verdict"]["ok"]
    # provisioned as it advises, the plan keeps up and its simulation takes every write
    advised = plan_shards(ORDERS_1500, table=PROVISIONED_10K.replace(
        provisioned_write=setting))
    assert advised.verdict is not None
    assert advised.verdict.keeps_up
    verified = verify_plan(advised, seconds=120)
    assert verified["agrees"]
    assert min(v["accepted_ratio"] for v in verified["values"].values()) >= 0.999


def test_the_plan_names_the_split_it_waits_for_and_verify_runs_long_enough() -> None:
    plan = plan_shards(ORDERS_1500, table=PROVISIONED_10K.replace(split_delay_seconds=60.0))
    assert plan.verdict is not None
    assert plan.verdict.expects == ("split",)
    assert plan.verdict.watch_seconds == 300.0  # the split after 60 s, and then some
    short = verify_plan(plan, seconds=30)
    assert any("too short to see the split" in line for line in short["watched"])
    whole = verify_plan(plan)
    assert whole["duration_s"] == 300
    assert whole["partitions"]["table"]["last"] > whole["partitions"]["table"]["first"]


def test_the_readme_plan_explains_a_new_table_and_holds_when_warmed() -> None:
    code, out = invoke("plan", "--peak", "PENDING=6000", "--peak", "SHIPPED=2500",
                       "--item-bytes", "1500", "--headroom", "1.5")
    assert code == 0
    assert "plan: throttles: the table's writes (51,000 units/s at the peak)" in out
    assert "pre-warming to warm_write=" in out
    assert "peak_window_seconds=1800" in out


# -- Azure --------------------------------------------------------------------------------

def test_azure_verify_counts_the_entity_writes_plan_counts() -> None:
    """Issue 21: in Azure mode ``--verify`` counted 1 entity write where ``plan`` counts 4,
    and accepted ~98% of a load the plan put 25% over the account. Now both count 4 entity
    writes an entry and one placement an item, each partition key its own partition, and
    the account's target serves the locates too (every request counts against it), and
    refuses locates and writes alike: at a share p of each accepted, 5,000p locates and
    the 25,000p^2 writes of the operations located fill its 20,000, so p = 0.8, and an
    operation lands when its locate and its writes do: 64% (the locates had been served
    before the writes: 60%, every refusal a write's)."""
    peaks = {"PENDING": 3500.0, "SHIPPED": 1000.0, "DELIVERED": 400.0, "CANCELLED": 100.0}
    plan = plan_shards(peaks, mode="azure")
    assert plan.table is not None
    assert plan.table.write_units_per_s == 5000 * 4 + 5000  # 25,000 of the account's 20,000
    assert plan.verdict is not None
    assert not plan.verdict.keeps_up
    assert plan.partitions[0].partitions == 0
    verified = verify_plan(plan, seconds=30)
    assert verified["agrees"]
    table = next(t for t in verified["tables"] if t["direction"] == "both")
    assert table["peak_asked_per_s"] == pytest.approx(30_000.0, rel=1e-6)
    for value in verified["values"].values():
        assert value["accepted_ratio"] == pytest.approx(0.64, abs=0.005)
    assert set(verified["throttles"]) == {"ServerBusy"}


def test_azure_plan_fits_each_partition_key_on_its_own() -> None:
    plan = plan_shards({"PENDING": 1000.0, "SHIPPED": 400.0}, mode="azure")
    assert plan.values["PENDING"].shards == 3  # 1,000 x 4 x 1.5 over 2,000
    assert plan.verdict is not None
    assert plan.verdict.keeps_up
    assert verify_plan(plan, seconds=30)["agrees"]


def test_a_spread_sort_key_keeps_splitting() -> None:
    """Issue 21: a hot key with spread sort values split once, then never again."""
    engine = FluidEngine(profile(partitions=0, split_delay_seconds=5.0))
    key = engine.key("HOT", rising=False)
    accepted = [engine.step(s, [Flow(3500.0, True, (Part(0, key, 1.0),))])[0].accepted
                for s in range(16)]
    assert accepted[0] == 1000.0
    assert accepted[-1] == 3500.0  # four partitions and more: split inside each half
    assert len(engine.resources[0].partitions) >= 4


def test_a_sliver_of_a_throttle_is_no_reason_printed() -> None:
    workload = workload_from_dict({"duration": 5, "values": {"A": {"write": 100.0}}})
    from shardex.routing import Routing

    run = simulate(workload, Routing(), profile(partitions=0))
    run.throttles["TableWriteKeyRangeThroughputExceeded"] = 1e-9
    assert run.to_dict()["throttles"] == {}


# -- the headroom input -------------------------------------------------------------------

@pytest.mark.parametrize("command", [
    ["plan", "--peak", "PENDING=6000"],
    ["diagnose", "access.csv"],
])
@pytest.mark.parametrize("headroom", ["0.25", "0", "-1", "nan", "100.5", "1e308", "inf"])
def test_a_headroom_below_1_is_refused_in_one_line(command: list[str], headroom: str) -> None:
    """Issue 21: ``--headroom 0.25`` was taken as a 0.25x multiplier, sizing shards at 357%
    of the ceiling without a word; ``--headroom 1e308`` sharded every key, one at a tenth
    of its ceiling, to 4,096 keys."""
    result = CliRunner().invoke(cli, [*command, "--headroom", headroom])
    assert result.exit_code == 2
    assert "headroom is a multiplier on the peak, from 1 to 100" in result.output
    if headroom == "0.25":
        assert "for 25% to spare give 1.25" in result.output


def test_the_library_refuses_a_headroom_below_1_too() -> None:
    with pytest.raises(InvalidInput, match="headroom"):
        shards_for(6000, ceiling=1000, headroom=0.25)
    with pytest.raises(InvalidInput, match="headroom"):
        plan_shards({"PENDING": 6000}, headroom=0.5)
    assert shards_for(6000, ceiling=1000, headroom=1.25) == 8


# -- Cosmos DB ----------------------------------------------------------------------------

def test_cosmos_request_units_follow_the_documented_table() -> None:
    assert cosmos_write_units(1024) == 4.95
    assert cosmos_write_units(1025) == 6.29
    assert cosmos_write_units(8 * 1024) == 7.04
    assert cosmos_read_units(1024) == 1.0
    assert cosmos_read_units(100 * 1024) == 9.95
    assert cosmos_read_units(1024, consistent=True) == 2.0
    with pytest.raises(InvalidInput, match="2 MB"):
        cosmos_write_units(3 * 1024 * 1024)


def test_cosmos_plan_sizes_n_against_10000_ru_a_partition() -> None:
    code, out = invoke("plan", "--mode", "cosmos", "--peak", "PENDING=4000",
                       "--peak", "SHIPPED=500", "--table", "provisioned_write=200000",
                       "--table", "provisioned_read=200000", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["ceiling"]["write_units_per_s"] == 10_000
    pending = doc["values"]["PENDING"]
    assert pending["units_per_item"] == 4.95  # a 1 KB write, documented
    # 4,000 x 4.95 RU x 2 (written, then committed) x 1.5 over 10,000 RU: 6 at least
    assert pending["shards"] >= 6
    assert doc["partitions"][0]["partitions"] == 20
    verdict = doc["verdict"]
    for container in (200_000.0, verdict["setting"] and verdict["setting"]["provisioned_write"]):
        if not container:
            continue
        plan = plan_shards({"PENDING": 4000.0, "SHIPPED": 500.0}, mode="cosmos",
                           table=profile("cosmos", provisioned_write=container,
                                         provisioned_read=container))
        verified = verify_plan(plan, seconds=30)
        assert verified["agrees"]
        assert verified["profile"]["name"] == "cosmos"
        assert set(verified["throttles"]) <= {"RequestRateTooLarge"}


def test_one_partition_and_one_shard_key_are_singular() -> None:
    """'the table has 1 partitions ...; 1 shard keys hash onto them'."""
    code, out = invoke("plan", "--peak", "PENDING=5", "--partitions", "1")
    assert code == 0, out
    text = " ".join(out.split())
    assert "the table has 1 partition, 1,000 write units/s each; 1 shard key hashes onto it" \
        in text


def test_a_p99_partition_at_its_ceiling_is_not_sized_and_the_verdict_says_so() -> None:
    """At the p99 of placements two of V0's three shard keys share a GSI partition: 1,000
    of its 1,000 write units. The plan keeps up, but 'sized' said true (it asked the
    headroom of the average partition only) and nothing said the margin was gone; a
    request-by-request run there refused 0.4% of the writes (a probe)."""
    plan = plan_shards({"V0": 1500}, item_bytes=100, mode="gsi", headroom=1.2,
                       table=profile("dynamodb-gsi", warm_write=40000, warm_read=40000))
    assert plan.values["V0"].shards == 3
    assert plan.verdict.keeps_up
    gsi = next(p for p in plan.partitions if p.resource == "index")
    assert gsi.busiest.worst == pytest.approx(1000.0)
    assert gsi.fits
    assert not gsi.sized
    assert any("its GSI's busiest partition at the p99 of placements takes 1,000 of its "
               "1,000 units/s (100%), less than the 1.2x headroom" in note
               for note in plan.verdict.notes), plan.verdict.notes
    roomy = plan_shards({"V0": 1500}, item_bytes=100, mode="gsi", headroom=1.2,
                        table=profile("dynamodb-gsi", warm_write=40000, warm_read=40000,
                                      partitions=0))
    assert not [note for note in roomy.verdict.notes if "p99 of placements" in note]


def test_a_partition_that_takes_placement_records_alone_names_no_empty_keys() -> None:
    """A value with reads alone puts no write on its shard key: the busiest partition for
    writes takes placement records alone, and the plan said so with an empty list of
    keys ('at the p99 ()', '( and 10,000 of placement records)')."""
    code, out = invoke("plan", "--item-writes", "20000", "--read-peak", "SHIPPED=3")
    assert code == 0
    words = " ".join(out.split())
    assert "()" not in words
    assert "( and" not in words
    assert "of placement records; the busiest takes 10,000 expected, 10,000 at the p99 " \
           "partitions:" in words  # the line ends there; the reads' line follows
    assert "at the p99 of placements (10,000 of placement records) of its 1,000" in words
    assert "5,003 at the p99 (SHIPPED)" in words


def test_a_table_that_serves_the_peak_but_not_its_headroom_is_noted() -> None:
    """7,500 writes a second ask 30,000 write units of a table warmed to 40,000: it keeps
    up at the peak, and the plan's own sizing line said 'binds: ... raise warm_write to at
    least 45,000' (the 1.5x headroom) where the verdict, 'keeps up', said nothing of it."""
    plan = plan_shards({"A": 7500}, partitions=0,
                       table=profile("dynamodb-on-demand", warm_write=40_000))
    assert plan.verdict.keeps_up
    assert "it keeps up at the peak, but the table's writes with the 1.5x headroom (45,000 " \
        "units/s) are past what it serves at once (40,000: warm throughput): a peak that " \
        "much higher throttles, whatever N; warm_write of at least 45,000 leaves the margin " \
        "(past the per-table quota of 40,000: request an increase)" in plan.verdict.notes, \
        plan.verdict.notes
    roomy = plan_shards({"A": 7500}, partitions=0, table=profile(
        "dynamodb-on-demand", warm_write=45_000, quota_write=45_000))
    assert roomy.verdict.keeps_up
    assert not [note for note in roomy.verdict.notes if "table's writes" in note]
    reads = plan_shards({"A": 3000}, item_writes=10_000.0, partitions=0, table=profile(
        "dynamodb-on-demand", warm_write=40_000, warm_read=12_000))
    assert reads.verdict.keeps_up
    assert any(note.startswith("it keeps up at the peak, but the reads that locate items "
                               "with the 1.5x headroom (15,000 units/s) are past the "
                               "table's 12,000") for note in reads.verdict.notes), \
        reads.verdict.notes
