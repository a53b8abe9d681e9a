"""``plan --verify`` simulates the load the plan sized, and the plan's words name what binds:
the probe's findings (item writes and a diagnosis's measured units in the verify, the read
limit and provisioned tables in the advice, Azure's accounts in the verdict, the cap on N),
each reproduced here first."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from shardex.cli import cli, main
from shardex.documents import DIAGNOSE_SCHEMA
from shardex.errors import InvalidInput
from shardex.plan import plan_shards
from shardex.scenarios.verify import verify_plan
from shardex.sim import profile

# the orders example of docs/diagnose.md, as `diagnose --json` measures it
ORDERS_MEASURED = {"PENDING": 2000.0, "SHIPPED": 800.0, "DELIVERED": 200.0, "CANCELLED": 100.0}


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), terminal_width=200)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def said(*args: str) -> str:
    code, out = invoke(*args)
    assert code == 0, out
    return " ".join(out.split())


def diagnosis(tmp_path: Path) -> str:
    path = tmp_path / "diagnosis.json"
    path.write_text(json.dumps({"schema": DIAGNOSE_SCHEMA, "top": [
        {"key": key, "peak_units_per_s": peak, "peak_write_units_per_s": peak}
        for key, peak in ORDERS_MEASURED.items()]}))
    return str(path)


def table_asked(verified: dict[str, object], resource: str, direction: str) -> float:
    tables = verified["tables"]
    assert isinstance(tables, list)
    found = next(t for t in tables if (t["resource"], t["direction"]) == (resource, direction))
    return float(found["peak_asked_per_s"])


# -- 1. the verify offers the load the plan sized ---------------------------------------------

def test_verify_writes_the_item_writes_the_plan_counted() -> None:
    """``--item-writes 1000`` for a peak of 3,000: the plan counts 1,000 placement records and
    1,000 locates; the verify wrote one of each per entry write (3,000), and a plan that
    keeps up simulated at 97.7%."""
    plan = plan_shards({"A": 3000.0}, item_writes=1000.0,
                       table=profile("dynamodb-on-demand", warm_write=30_000.0))
    assert plan.verdict is not None
    assert plan.table is not None
    assert plan.verdict.keeps_up
    verified = verify_plan(plan)
    assert table_asked(verified, "table", "write") == pytest.approx(
        plan.table.write_units_per_s, rel=1e-6)
    assert table_asked(verified, "table", "read") == pytest.approx(
        plan.table.read_units_per_s, rel=1e-6)
    assert verified["values"]["A"]["accepted_ratio"] >= 0.999
    assert verified["agrees"]


def test_verify_of_a_diagnosis_offers_its_measured_units(tmp_path: Path) -> None:
    """A diagnosis's units already hold each entry's size and amplification, and no
    placement record (shardex's own records are no logical keys; an unsharded table has
    none): the plan counts 3,100 units, and its verify offered 9,300 (a placement record
    of 2 units per unit measured), so 'keeps up' simulated at 70%."""
    code, out = invoke("plan", "--from", diagnosis(tmp_path), "--table", "warm_write=8000",
                       "--verify", "--json")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["verdict"]["keeps_up"]
    assert table_asked(doc["verify"], "table", "write") == pytest.approx(
        doc["table"]["write_units_per_s"], rel=1e-6) == pytest.approx(3100.0)
    assert min(v["accepted_ratio"] for v in doc["verify"]["values"].values()) >= 0.999
    assert doc["verify"]["agrees"]


def test_verify_of_a_diagnosis_with_item_writes_adds_their_placements(tmp_path: Path) -> None:
    code, out = invoke("plan", "--from", diagnosis(tmp_path), "--item-writes", "500",
                       "--table", "warm_write=8000", "--verify", "--json")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["table"]["write_units_per_s"] == pytest.approx(3100.0 + 500 * 2)
    assert table_asked(doc["verify"], "table", "write") == pytest.approx(
        doc["table"]["write_units_per_s"], rel=1e-6)
    assert table_asked(doc["verify"], "table", "read") == pytest.approx(500.0, rel=1e-6)
    assert doc["verify"]["agrees"]


# -- 4. N grows to at most 8x the per-key rule's, plus 2 ---------------------------------------

def test_n_never_passes_its_cap_of_8x_the_per_key_rule_plus_2() -> None:
    """The growth step (a third more) jumped from 266 to 354 past the cap of 290 (8 x 36
    + 2) that docs/simulate.md promises: the pre-warmed table advised PENDING=354."""
    plan = plan_shards({"PENDING": 6000.0}, item_bytes=1500)
    assert plan.verdict is not None
    base = 36  # 6,000 x 2 units x 2 (a transaction) x 1.5 over 1,000
    assert plan.values["PENDING"].shards <= 8 * base + 2
    assert plan.verdict.recommended_shards
    assert plan.verdict.recommended_shards["PENDING"] <= 8 * base + 2
    assert f"PENDING={plan.verdict.recommended_shards['PENDING']}" in " ".join(
        plan.verdict.reasons)


def test_fit_shards_tries_no_n_past_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """3 partitions, one value whose 3 shard keys crowd them: N grows 3, 4, 5, 6, 8, 10, 13,
    17, 22, and then to 26 (8 x 3 + 2), not 29."""
    import shardex.plan.verdict as verdict

    seen: list[int] = []
    real = verdict.shard_loads

    def spy(per_key: dict[str, tuple[int, float]]) -> dict[str, float]:
        seen.append(per_key["V"][0])
        return real(per_key)

    monkeypatch.setattr(verdict, "shard_loads", spy)
    verdict.fit_shards({"V": 1900.0}, {"V": 3}, partitions=3, ceiling=1000.0, spread=0.0,
                       headroom=1.5)
    assert max(seen) == 26


# -- 3. on Azure Table Storage the verdict speaks of storage accounts -------------------------

def test_an_azure_verdict_names_the_account_target_not_a_dynamodb_setting() -> None:
    """The plan said 'spread the index over 2 accounts', its verify 'warm_write of at least
    25,000 avoids it (past the per-table quota of 20,000: raise it too)': no setting of a
    storage account's target exists."""
    text = said("plan", "--peak", "A=5000", "--mode", "azure", "--verify",
                "--verify-seconds", "30")
    # 20,000 entity writes, 5,000 placements and 5,000 locates, x1.5: 45,000 of 20,000
    assert "spread the index over 3 accounts" in text
    verdict = text[text.index("verdict:"):]
    for word in ("warm_write", "warm_read", "provisioned_write", "per-table quota"):
        assert word not in verdict
    assert "the storage account's scalability target" in verdict
    assert "over at least 2 storage accounts" in verdict
    assert "plan and simulation agree" in verdict


# -- 2. the table-limit advice names the limit that binds -------------------------------------

def test_the_read_limit_that_binds_is_named_with_its_own_setting() -> None:
    """10,000 item writes a second locate 10,000 read units, 15,000 with the headroom, over
    the GSI table's 12,000 warm_read; the advice said 'raise warm_write (warm throughput) to
    at least 15,000' with warm_write at 40,000."""
    text = said("plan", "--peak", "A=5000", "--peak", "B=5000", "--mode", "gsi",
                "--table", "warm_write=40000")
    binds = text[text.index("binds:"):text.index("partitions:")]
    assert "raise warm_read (warm throughput) to at least 15,000" in binds
    assert "warm_write" not in binds


def test_a_provisioned_table_is_labelled_and_advised_by_what_binds() -> None:
    """provisioned_read (3,000) binds: 2,100 locates x 1.5 = 3,150; the advice was to raise
    provisioned_write, already 20,000, to 12,600; the table was labelled on-demand."""
    text = said("plan", "--peak", "A=2000", "--peak", "B=100", "--table",
                "capacity=provisioned", "--table", "provisioned_write=20000", "--table",
                "adaptive=false", "--verify", "--verify-seconds", "30")
    binds = text[text.index("binds:"):text.index("partitions:")]
    assert "raise provisioned_read (provisioned capacity) to at least 3,150" in binds
    assert "provisioned_write" not in binds
    assert "dynamodb-on-demand" not in text
    assert "dynamodb-provisioned serves 20,000 at once (provisioned capacity)" in text
    assert "virtual s on dynamodb-provisioned" in text


@pytest.mark.parametrize("args", [["--store", "memory://?layout=gsi"],
                                  ["--mode", "gsi", "--table", "transaction_cost=2"]],
                         ids=["store", "table"])
def test_a_gsi_layout_of_a_table_profile_is_simulated_as_it_is_planned(
        args: list[str]) -> None:
    """The plan priced a GSI write at 1 (one UpdateItem, no transaction) and the
    simulation at the profile's transaction_cost (2): 'keeps up', then A 73.1% accepted,
    'plan and simulation disagree'."""
    code, out = invoke("plan", "--peak", "A=2000", *args, "--verify", "--verify-seconds",
                       "30", "--json")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["verdict"]["keeps_up"] is True
    assert doc["verify"]["agrees"] is True, doc["verify"]
    assert doc["verify"]["values"]["A"]["accepted_ratio"] == 1.0


def test_no_advice_names_a_value_at_or_below_the_setting_it_raises() -> None:
    for args in (["--peak", "A=5000", "--peak", "B=5000", "--mode", "gsi",
                  "--table", "warm_write=40000"],
                 ["--peak", "A=2000", "--peak", "B=100", "--table", "capacity=provisioned",
                  "--table", "provisioned_write=20000", "--table", "adaptive=false"],
                 ["--peak", "A=30000", "--table", "warm_write=20000"]):
        code, out = invoke("plan", *args, "--json")
        assert code == 0, out
        table = json.loads(out)["table"]
        for direction, asked in (("write", table["required_units_per_s"]),
                                 ("read", table["read_units_per_s"] * 1.5)):
            if asked > table[f"limit_{direction}_units_per_s"]:
                assert table["setting" if direction == "write" else "read_setting"].endswith(
                    f"_{direction}")


def test_the_gsi_table_line_gives_each_resource_its_own_load() -> None:
    """GSI mode: entries go to the GSI and placement records to the table, each under its
    own limit; the line read '20,000 write units/s (entries 10,000 + placements 10,000)
    ..., 15,000 with the headroom', the headroom figure below the total."""
    text = said("plan", "--peak", "A=5000", "--peak", "B=5000", "--mode", "gsi",
                "--table", "warm_write=40000")
    assert "20,000 write units/s" not in text
    assert "entries 10,000 write units/s on the GSI, placements 10,000 on the table (for " \
        "10,000 item writes/s), each against its own limit: the busier 15,000 with the " \
        "headroom" in text


def test_a_verdict_whose_reads_throttle_advises_the_read_setting_too() -> None:
    """14,000 locates a second over the GSI table's 12,000 warm_read: the verdict advised
    only 'pre-warming to warm_write=72,000', which leaves warm_read at 12,000."""
    plan = plan_shards({"A": 7000.0, "B": 7000.0}, mode="gsi",
                       table=profile("dynamodb-gsi", warm_write=40_000.0))
    assert plan.verdict is not None
    assert not plan.verdict.keeps_up
    assert plan.verdict.setting is not None
    assert plan.verdict.setting["warm_read"] == 21_000.0  # 14,000 x 1.5
    assert "warm_read=21,000" in " ".join(plan.verdict.reasons)
    advised = plan_shards({"A": 7000.0, "B": 7000.0}, mode="gsi", table=profile(
        "dynamodb-gsi", **plan.verdict.setting, quota_write=1e6, quota_read=1e6))
    assert advised.verdict is not None
    assert advised.verdict.keeps_up


def test_when_only_the_reads_throttle_only_the_read_setting_is_advised() -> None:
    plan = plan_shards({"A": 5000.0, "B": 5000.0}, mode="gsi", item_writes=13_000.0,
                       table=profile("dynamodb-gsi", warm_write=40_000.0))
    assert plan.verdict is not None
    assert plan.verdict.summary.startswith("throttles: the reads that locate items")
    assert plan.verdict.setting == {"warm_read": 19_500.0}
    assert "pre-warming to warm_read=19,500 avoids it" in plan.verdict.reasons
    assert verify_plan(plan, seconds=30)["agrees"]


@pytest.mark.parametrize(("measured", "per_item"), [("cosmos", 1.0), ("dynamodb", None)])
def test_a_diagnosis_planned_on_cosmos_counts_its_units_once(
        tmp_path: Path, measured: str, per_item: float | None) -> None:
    """'plan --from D --mode cosmos' multiplied the measured units by 4.95 RU an item
    again while its header said '1 unit an item'. A diagnosis made against Cosmos DB's
    ceiling measured request units: planned as they are. One made against DynamoDB's
    measured write units: taken as 1 KB items, each its request units on Cosmos DB,
    and the header says so."""
    path = tmp_path / "diagnosis.json"
    path.write_text(json.dumps({"schema": DIAGNOSE_SCHEMA, "ceiling": {"name": measured},
                                "top": [{"key": "PENDING", "peak_units_per_s": 2000.0,
                                         "peak_write_units_per_s": 2000.0}]}))
    code, out = invoke("plan", "--from", str(path), "--mode", "cosmos", "--json")
    assert code == 0, out
    value = json.loads(out)["values"]["PENDING"]
    if per_item is not None:
        assert value["write_units_per_s"] == pytest.approx(2000.0)
    else:
        assert value["write_units_per_s"] == pytest.approx(2000.0 * value["units_per_item"])
        assert value["units_per_item"] > 1
    text = said("plan", "--from", str(path), "--mode", "cosmos")
    assert "1 unit an item" not in text
    assert ("as this store's request units" if measured == "cosmos"
            else "taken as DynamoDB write units") in text, text


@pytest.mark.parametrize("reads", [6000.0, 8000.0, 12_000.0])
def test_reads_that_crowd_a_partition_are_told_the_read_setting_that_spreads_them(
        reads: float) -> None:
    """8,000 read units a second of PENDING on a new table's 4 partitions: N=4 shard keys
    share a partition in 89% of placements, the busiest takes 8,025 at the p99 of its
    3,000, and the verdict said it throttles but named no setting that avoids it (a
    table read limit alone had one). A table of more partitions spreads the keys:
    warm_read sets how many it starts with, and the simulation there keeps up."""
    plan = plan_shards({"PENDING": 100.0}, read_peaks={"PENDING": reads})
    assert plan.verdict is not None
    assert not plan.verdict.keeps_up
    assert plan.verdict.setting is not None
    warm_read = plan.verdict.setting["warm_read"]
    advice = [r for r in plan.verdict.reasons if f"warm_read={warm_read:,.0f}" in r]
    assert advice, plan.verdict.reasons
    assert "avoids it" in advice[0], plan.verdict.reasons
    advised = plan_shards({"PENDING": 100.0}, read_peaks={"PENDING": reads},
                          table=profile("dynamodb-on-demand", **plan.verdict.setting))
    assert advised.verdict is not None
    assert advised.verdict.keeps_up, advised.verdict.reasons
    verified = verify_plan(advised, seconds=30)
    assert verified["agrees"], verified


def test_no_read_setting_is_said_to_avoid_reads_that_crowd_a_table_of_given_partitions(
        ) -> None:
    # --partitions 4 is a fact of the table: a read setting raises its read limit (past
    # 12,000 with the headroom) but leaves its 4 partitions, which the keys crowd
    plan = plan_shards({"PENDING": 100.0}, read_peaks={"PENDING": 8000.0}, partitions=4)
    assert plan.verdict is not None
    assert not plan.verdict.keeps_up
    assert not any("avoids it" in reason for reason in plan.verdict.reasons), \
        plan.verdict.reasons


def test_a_provisioned_table_is_told_the_read_capacity_past_its_quota() -> None:
    # the search tried provisioned_read past the quota of 40,000, which the profile
    # refused: 'plan' failed with "provisioned_read (138000) is over the per-table quota"
    plan = plan_shards({"PENDING": 100.0}, read_peaks={"PENDING": 90_000.0},
                       table=profile("dynamodb-provisioned", provisioned_write=4000.0,
                                     provisioned_read=12_000.0))
    assert plan.verdict is not None
    assert plan.verdict.setting is not None
    read = plan.verdict.setting["provisioned_read"]
    assert read > 40_000
    assert any(f"provisioning provisioned_read={read:,.0f} (past the per-table quota of "
               "40,000: request an increase) avoids it" in r for r in plan.verdict.reasons)


def test_each_setting_past_its_quota_says_so_beside_it() -> None:
    """The write setting's quota was said after the shard counts, and the read setting's
    beside it: 'warm_write=92,000 (92 partitions) and warm_read=45,000 (past the
    per-table quota ...) avoids it, with PENDING=3; past the per-table quota ...'."""
    plan = plan_shards({"PENDING": 500.0}, item_writes=30_000.0)
    assert plan.verdict is not None
    assert plan.verdict.setting is not None
    write, read = plan.verdict.setting["warm_write"], plan.verdict.setting["warm_read"]
    assert write > 40_000
    assert read > 40_000
    quota = "past the per-table quota of 40,000: request an increase"
    advice = [r for r in plan.verdict.reasons if r.startswith("pre-warming to")]
    assert advice == [f"pre-warming to warm_write={write:,.0f} ({write / 1000:,.0f} "
                      f"partitions; {quota}) and warm_read={read:,.0f} ({quota}) avoids it, "
                      f"with PENDING={plan.verdict.recommended_shards['PENDING']}"]


@pytest.mark.parametrize(("peaks", "reads", "name", "table"), [
    ({"PENDING": 100.0, "SHIPPED": 2000.0}, {"PENDING": 40_000.0}, "dynamodb-on-demand", {}),
    ({"PENDING": 2000.0}, {"PENDING": 40_000.0}, "dynamodb-provisioned",
     {"provisioned_write": 4000.0, "provisioned_read": 12_000.0}),
    ({"PENDING": 500.0, "SHIPPED": 2000.0}, {"SHIPPED": 12_000.0}, "dynamodb-gsi", {}),
    ({"PENDING": 100.0, "SHIPPED": 2000.0}, {"PENDING": 12_000.0, "SHIPPED": 1000.0},
     "dynamodb-gsi", {}),
])
def test_the_setting_a_verdict_says_avoids_the_throttling_does(
        peaks: dict[str, float], reads: dict[str, float], name: str,
        table: dict[str, float]) -> None:
    """A verdict said 'pre-warming to warm_write=17,000 (17 partitions) and
    warm_read=63,150 avoids it' where the plan of that table throttled: the read setting
    served the table's read limit, and the values' reads crowded its partitions (33 of
    172 settings advised over drawn workloads). The read setting is now sized for them,
    the writes checked again with the N the reads grow (more partitions, fewer keys on
    each, can crowd the writes), and the plan of the table it sets keeps up."""
    plan = plan_shards(peaks, read_peaks=reads, mode="gsi" if name == "dynamodb-gsi"
                       else "table", table=profile(name, **table))
    assert plan.verdict is not None
    assert not plan.verdict.keeps_up
    setting = plan.verdict.setting
    assert setting is not None, plan.verdict.reasons
    assert any("avoids it" in reason for reason in plan.verdict.reasons)
    quotas = {"quota_write": 1e7, "quota_read": 1e7}
    advised = plan_shards(peaks, read_peaks=reads, mode="gsi" if name == "dynamodb-gsi"
                          else "table", table=profile(name, **{**table, **setting, **quotas}))
    assert advised.verdict is not None
    assert advised.verdict.keeps_up, advised.verdict.reasons
    assert {v: p.shards for v, p in advised.values.items()} == \
        dict(plan.verdict.recommended_shards)


def test_writes_and_reads_of_the_same_keys_are_judged_at_one_placement() -> None:
    """GSI writes at their own p99 placement took 909 of a partition's 1,000 units, reads
    at theirs 2,977 of 3,000: 'keeps up'. The simulation at the reads' p99 placement,
    where the same keys' writes crowded a partition, accepted 89.6% of PENDING#0's
    writes: plan and simulation disagreed. Each is now judged at the placement at the
    p99 of the nearest either comes to its ceiling, the simulation's too."""
    plan = plan_shards({"PENDING": 100.0, "SHIPPED": 2000.0, "DELIVERED": 100.0},
                       read_peaks={"PENDING": 1000.0, "SHIPPED": 5000.0, "DELIVERED": 1000.0},
                       mode="gsi", table=profile("dynamodb-gsi", warm_write=5000.0))
    assert len({p.busiest.worst_namespace for p in plan.partitions}) == 1
    verified = verify_plan(plan, seconds=120)
    assert verified["agrees"], (plan.verdict, verified["verdict"])


def test_a_provisioned_table_without_adaptive_capacity_needs_partitions_to_plan(
        capsys: pytest.CaptureFixture[str]) -> None:
    # 'plan --mode cosmos --partitions 0' read "keeps up" (every key its own partition at
    # the full ceiling), where its simulation ('--verify') refused the table: a
    # provisioned one without adaptive capacity shares its capacity over its partitions
    # and the error said 'without adaptive capacity a provisioned table needs a partition
    # count', not naming the setting or the profile, to someone planning Cosmos DB
    with pytest.raises(InvalidInput, match="does not model a cosmos table"):
        plan_shards({"PENDING": 300.0}, mode="cosmos", partitions=0)
    for args in (["--mode", "cosmos", "--partitions", "0"],
                 ["--store", "memory://?profile=cosmos&partitions=0"]):
        with pytest.raises(SystemExit) as exited:
            main(["plan", "--peak", "PENDING=300", *args])
        assert exited.value.code == 2
        out, err = capsys.readouterr()
        assert out == ""
        assert len(err.splitlines()) == 1
        # --store's, refused as opening that store refuses it, naming the option
        assert err.startswith("error: Invalid value for --store: memory://?profile=cosmos&"
                              "partitions=0: partitions=0" if "--store" in args else
                              "error: partitions=0")
        assert "(every key its own partition) does not model a cosmos table" in err
        assert "give partitions > 0" in err


# -- 2. whatever the table, the plan's verdict is its own simulation's ------------------------

# CI draws the same few plans every run; SHARDEX_HYPOTHESIS=explore draws 500 new ones (500
# drawn so, and 1,020 by a script drawing alike: every verdict agreed)
EXPLORE = os.environ.get("SHARDEX_HYPOTHESIS") == "explore"
_PEAK = st.floats(min_value=30.0, max_value=20_000.0).map(lambda x: round(x, 1))


@st.composite
def _plans(draw: st.DrawFn) -> dict[str, Any]:
    """The arguments of a plan: a mode and a table of it, one to four values' peaks, and
    maybe item writes, measured reads, a headroom, eventual reads and an item size."""
    mode = draw(st.sampled_from(["table", "gsi", "azure", "cosmos"]))
    peaks = draw(st.dictionaries(st.sampled_from(["PENDING", "SHIPPED", "A", "B"]), _PEAK,
                                 min_size=1, max_size=4))
    args: dict[str, Any] = {"peaks": peaks, "mode": mode}
    if mode == "table":
        args["table"] = draw(st.sampled_from([
            None, profile("dynamodb-on-demand", warm_write=4000.0),
            profile("dynamodb-on-demand", warm_write=40_000.0),
            profile("dynamodb-provisioned", provisioned_write=5000.0, provisioned_read=1000.0),
            profile("dynamodb-provisioned", provisioned_write=40_000.0,
                    provisioned_read=12_000.0)]))
        args["consistent"] = draw(st.booleans())
    elif mode == "gsi":
        args["table"] = draw(st.sampled_from([None, profile("dynamodb-gsi", warm_write=4000.0)]))
    elif mode == "cosmos":
        units = draw(st.sampled_from([10_000.0, 40_000.0]))
        args["table"] = profile("cosmos", provisioned_write=units, provisioned_read=units)
    if draw(st.booleans()):
        args["item_writes"] = round(sum(peaks.values()) * draw(st.floats(0.3, 1.0)), 1)
    if draw(st.booleans()):
        args["read_peaks"] = draw(st.dictionaries(st.sampled_from(sorted(peaks)), _PEAK))
    args["headroom"] = draw(st.sampled_from([1.0, 1.5, 2.0]))
    args["item_bytes"] = draw(st.sampled_from([200, 1024, 3000]))
    return args


@settings(max_examples=500 if EXPLORE else 6)
@given(_plans())
def test_the_verdict_is_what_its_own_simulation_says(args: dict[str, Any]) -> None:
    """A plan that keeps up simulates without a throttle, and one that throttles simulates
    throttled (``verify_plan``'s ``agrees``): over modes, table sizes and capacity modes,
    item writes, measured reads, headrooms, eventual reads and item sizes, not only the
    cases above. The planner once said "keeps up" where its own simulation throttled."""
    args = dict(args)
    plan = plan_shards(args.pop("peaks"), **args)
    verified = verify_plan(plan)
    assert verified["agrees"], (plan.verdict.summary if plan.verdict else None,
                                verified["verdict"]["summary"])


def _diagnosed(tmp_path: Path, rows: list[str]) -> str:
    log = tmp_path / "log.csv"
    log.write_text("\n".join(rows) + "\n")
    out = tmp_path / "diagnosis.json"
    out.write_text(said("diagnose", str(log), "--json"))
    return str(out)


def test_a_diagnosis_of_uneven_shards_or_throttles_is_planned_at_its_n(tmp_path: Path) -> None:
    """What the diagnosis measured beyond each key's peak was dropped: a key already on 4
    shards, its busiest at 150% of a partition, was planned at N=3 (fewer than it has) and
    a key throttled on 20% of its requests at half the ceiling at N=1, each "keeps up",
    where the diagnosis recommends 9 and 2. The plan takes the diagnosis's N as its
    least, and says why."""
    start = 1796014800
    uneven = ["timestamp,key,op,units"]
    for s in range(30):
        uneven += [f"{start + s},PENDING#0,write,100"] * 15
        uneven += [f"{start + s},PENDING#{k},write,100" for k in (1, 2, 3)]
        uneven += [f"{start + s},SHIPPED,write,100"] * 3
    throttled = ["timestamp,key,op,units,throttled"]
    for s in range(10):
        throttled += [f"{start + s},A,write,1,{int(i < 100)}" for i in range(500)]
        throttled += [f"{start + s},K{j},write,1,0" for j in range(30) for _ in range(20)]
    for rows, key, n, why in ((uneven, "PENDING", 9, "busiest shard"),
                              (throttled, "A", 2, "throttled")):
        path = _diagnosed(tmp_path, rows)
        doc = json.loads(said("plan", "--from", path, "--partitions", "0", "--verify",
                              "--json"))
        assert doc["values"][key]["shards"] == n, doc["values"][key]
        assert any(key in note and why in note for note in doc["notes"]), doc["notes"]
        text = said("plan", "--from", path, "--partitions", "0")
        assert f"note: {key}: N at least {n}" in text, text
    # simulated at its 4 shards, evenly: it says so beside its verdict
    text = said("simulate", _diagnosed(tmp_path, uneven), "--store", "memory://?partitions=0")
    assert ("note: PENDING: the diagnosis measured its busiest of 4 shards at 1,500 units/s "
            "(150% of a partition)") in text, text


def test_a_margin_the_quota_binds_names_the_quota_not_the_setting_given() -> None:
    """warm_write 81,000 past the quota of 40,000: the note said "warm_write of at least
    51,000 leaves the margin", below the 81,000 given; the quota binds, as the binds line
    said."""
    text = said("plan", "--peak", "PENDING=6000", "--peak", "SHIPPED=2500", "--table",
                "warm_write=81000", "--table", "warm_read=12750")
    assert "warm_write of at least" not in text, text
    assert ("quota_write (the per-table quota) of at least 51,000 leaves the margin: request "
            "an increase") in text, text


def test_reads_past_the_table_name_their_setting_beside_a_write_margin() -> None:
    """The reads that locate items past the table's read limit, the writes within theirs
    but short of the headroom, the partition count given: the verdict named no setting
    (its search for one asked the writes' headroom too), where warm_read=30,000 keeps
    up."""
    args = ("plan", "--peak", "A=20000", "--partitions", "0", "--table",
            "quota_write=1000000", "--table", "warm_write=100000")
    doc = json.loads(said(*args, "--json"))
    assert doc["verdict"]["setting"] is not None, doc["verdict"]
    assert "pre-warming to warm_read=30,000 avoids it" in said(*args)
    again = json.loads(said(*args, "--table", "warm_read=30000", "--verify", "--json"))
    assert again["verdict"]["keeps_up"]
    assert again["verify"]["agrees"]


def test_a_diagnosis_of_another_stores_units_planned_in_table_mode_says_so(
        tmp_path: Path) -> None:
    """Made against the cosmos ceiling (request units), planned in the assumed table mode
    as DynamoDB write units with no word (diagnose said N=2, plan N=9)."""
    rows = ["timestamp,key,op,units"]
    for second in range(20):
        rows += [f"{1796014800 + second},A,write,100"] * 60
    log = tmp_path / "rw.csv"
    log.write_text("\n".join(rows) + "\n")
    path = tmp_path / "d.json"
    path.write_text(said("diagnose", str(log), "--ceiling", "cosmos", "--json"))
    doc = json.loads(said("plan", "--from", str(path), "--json"))
    assert any("made against the cosmos ceiling, in Cosmos DB's request units, and is "
               "planned here in table mode as DynamoDB write units; --mode cosmos" in note
               for note in doc["notes"]), doc.get("notes")
    doc = json.loads(said("plan", "--from", str(path), "--mode", "cosmos", "--json"))
    assert not any("made against" in note for note in doc.get("notes", [])), doc["notes"]


def test_a_diagnosis_of_time_buckets_plans_one_bucket_as_the_default(tmp_path: Path) -> None:
    """24 dates, each hot for 100 s at 1,500 units/s, one after another: the plan gave
    each past date an override (the next date left at N=1) and summed the 24 peaks,
    which never overlapped, into 36,000 units/s at once, past the table. It plans one
    bucket, the hottest, as the routing's default, every bucket's N."""
    import datetime

    rows = ["timestamp,key,op,units"]
    for second in range(2400):
        day = datetime.date(2026, 11, 1) + datetime.timedelta(days=second // 100)
        rows += [f"{1796014800 + second},{day.isoformat()},write,100"] * 15
    path = _diagnosed(tmp_path, rows)
    diagnosed = json.loads(Path(path).read_text())
    assert diagnosed["recommendation"]["strategy"] == "time_bucket_plus_suffix"
    doc = json.loads(said("plan", "--from", path, "--table", "warm_write=40000", "--json"))
    assert doc["routing"]["overrides"] == {}
    assert doc["routing"]["default"]["shards"] == diagnosed["routing"]["default"]["shards"] == 3
    assert doc["table"]["write_units_per_s"] == 1500.0
    assert doc["verdict"]["keeps_up"]
    assert any("time buckets hot one at a time (24 of them, 2026-11-01 to 2026-11-24)" in note
               for note in doc["notes"]), doc["notes"]


def test_keys_that_peak_apart_are_said_to_be_summed_at_the_table(tmp_path: Path) -> None:
    rows = ["timestamp,key,op,units"]
    for second in range(60):
        rows += [f"{1796014800 + second},{'A' if second < 30 else 'B'},write,100"] * 30
    text = said("plan", "--from", _diagnosed(tmp_path, rows))
    assert "throttles: the table's writes (6,000 units/s at the peak)" in text, text
    assert "note: the table's figures add each key's own peak, as if every key peaked in " \
        "the same second" in text, text


def test_a_verdict_with_measured_load_left_out_says_so(tmp_path: Path) -> None:
    """PENDING beside USER#abc (no logical key) and a 1,100-byte key, each at 2,000
    units/s: the notes said two were left out, and the verdict read 'keeps up' for a
    table of 2,000 units/s where it takes 6,000. It qualifies itself now."""
    rows = ["timestamp,key,op,units"]
    for second in range(10):
        for key in ("PENDING", "USER#abc", "k" * 1100):
            rows += [f"{1796014800 + second},{key},write,100"] * 20
    path = _diagnosed(tmp_path, rows)
    doc = json.loads(said("plan", "--from", path, "--json"))
    assert doc["verdict"]["summary"] == (
        "keeps up for the keys planned; 4,000 write units/s measured beside them are not "
        "in these figures (the notes name them)")
    whole = tmp_path / "whole.csv"
    whole.write_text("\n".join(r for r in rows if "USER" not in r and "kkk" not in r) + "\n")
    out = tmp_path / "whole.json"
    out.write_text(said("diagnose", str(whole), "--json"))
    assert json.loads(said("plan", "--from", str(out), "--json"))["verdict"]["summary"] \
        == "keeps up"
