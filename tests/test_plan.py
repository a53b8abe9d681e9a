"""The planner: N at the edges of its formula, the read-side cost of N, and ``shardex plan``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from shardex.capacity import CEILINGS, Ceiling, read_units, resolve_ceiling
from shardex.cli import cli, main
from shardex.errors import InvalidInput, InvalidKey
from shardex.plan import plan_shards, sharded_routing, shards_for
from shardex.plan.shards import PROFILE_OF_MODE
from shardex.routing import ShardPolicy
from shardex.sim.latency import LatencyModel
from shardex.sim.profiles import profile
from tests.servers import shardex_error


def shards(peak: float, **options: object) -> int:
    """N at an amplification of 1 (GSI mode), unless the options say otherwise, by the
    per-key rule alone (every key its own partition: none shares)."""
    options = {"mode": "gsi", "partitions": 0, **options}
    return plan_shards({"V": peak}, **options).values["V"].shards  # type: ignore[arg-type]


def test_exactly_at_the_ceiling_one_shard_just_above_two() -> None:
    assert shards(1000, headroom=1.0) == 1
    assert shards(1000.001, headroom=1.0) == 2
    assert shards(2000, headroom=1.0) == 2
    assert shards(2000.5, headroom=1.0) == 3


def test_cold_values_stay_unsharded() -> None:
    plan = plan_shards({"PENDING": 6000, "DELIVERED": 100, "CANCELLED": 0})
    assert plan.values["DELIVERED"].shards == plan.values["CANCELLED"].shards == 1
    # index-table mode by default: 6,000 x 2 (a transaction) x 1.5 over 1,000
    assert plan.routing().overrides == {"PENDING": ShardPolicy(shards=18)}


def test_float_noise_does_not_add_a_shard() -> None:
    # 3000 * 1.1 is 3300.0000000000005 in floating point: exactly three partitions of 1,100
    assert 3000 * 1.1 / 1100 > 3
    assert shards(3000, ceiling="1100", headroom=1.1) == 3
    assert shards(100, ceiling="110", headroom=1.1) == 1
    assert shards(6000, headroom=1.5) == 9
    assert shards(700, headroom=1.3) == 1  # 910 units


def test_item_size_and_amplification_multiply() -> None:
    plan = plan_shards({"PENDING": 6000, "SHIPPED": 2500}, item_bytes=1500, amplification=2,
                       headroom=1.5)
    pending = plan.values["PENDING"]
    assert pending.units_per_item == 2.0  # 1,500 bytes: two started KB
    assert pending.write_units_per_s == 24_000.0
    assert pending.required_units_per_s == 36_000.0
    assert pending.shards == 36
    assert plan.values["SHIPPED"].shards == 15
    assert pending.units_per_shard_per_s == pytest.approx(24_000 / 36)
    assert shards(1000, item_bytes=1024, headroom=1) == 1
    assert shards(1000, item_bytes=1025, headroom=1) == 2


def test_the_4096_shard_limit() -> None:
    assert shards(4_096_000, headroom=1.0) == 4096
    with pytest.raises(InvalidInput, match="4,096"):
        shards(4_096_001, headroom=1.0)


def test_read_side_cost_of_n() -> None:
    model = LatencyModel(4.0, 25.0)
    plan = plan_shards({"PENDING": 3500}, item_bytes=1000, headroom=1.0, latency=model, mode="gsi")
    p = plan.values["PENDING"]
    assert p.shards == 4
    assert (p.queries_per_listing, p.pages_per_shard, p.listing_read_units) == (4, 1, None)
    assert p.fanout_p50_ms == pytest.approx(1000 * model.fanout_quantile(4, 0.5))
    assert p.fanout_p99_ms == pytest.approx(1000 * model.fanout_quantile(4, 0.99))
    assert p.fanout_p50_ms > 4.0  # the slowest of four waits longer than one request
    cold = plan_shards({"X": 1}, latency=model, mode="gsi").values["X"]
    assert cold.fanout_p50_ms == pytest.approx(4.0)
    assert cold.fanout_p99_ms == pytest.approx(25.0)


@pytest.mark.parametrize(("mode", "units"), [
    ("table", 2500.0),  # 10 pages of 1,000 KB entries, 250 strong read units each
    ("gsi", 1250.0),  # a GSI query reads eventually consistent: half
    ("azure", 10_000.0),  # Azure Table Storage counts each entity read
    ("cosmos", 10_000.0),  # about what point reads of the items cost: 1 RU a 1 KB item
])
def test_a_listing_is_priced_in_its_stores_own_units(mode: str, units: float) -> None:
    """It was priced at DynamoDB's strongly consistent read units in every mode: 2,500
    for a GSI whose queries cost half that, for Azure's 10,000 entities and Cosmos DB's
    10,000 RU. Each is what the simulator's store charges those pages."""
    plan = plan_shards({"A": 100}, item_bytes=1024, listing_items=10_000, mode=mode)
    value = plan.values["A"]
    assert value.pages_per_shard * value.shards == 10
    assert value.listing_read_units == units
    model = profile(PROFILE_OF_MODE[mode])
    assert value.listing_read_units == 10 * model.read_cost(1000 * 1024, 1000, model.consistent)


def test_listing_pages_and_read_units() -> None:
    plan = plan_shards({"PENDING": 3500}, item_bytes=1000, headroom=1.0, listing_items=10_000,
                       mode="gsi")
    p = plan.values["PENDING"]
    # 2,500 entries a shard, 1,048 would fit a 1 MB page, but a page holds at most 1,000
    # entries: pages of 1,000, 1,000 and 500 entries, each read eventually consistent (a
    # GSI's queries are, whatever the caller asks)
    assert p.pages_per_shard == 3
    assert p.queries_per_listing == 12
    per_shard = 2 * read_units(1_000_000, False) + read_units(500_000, False)
    assert p.listing_read_units == 4 * per_shard
    eventual = plan_shards({"PENDING": 3500}, item_bytes=1000, headroom=1.0,
                           listing_items=10_000, consistent=False, mode="gsi").values["PENDING"]
    assert eventual.listing_read_units == p.listing_read_units
    strong, weak = (plan_shards({"PENDING": 3500}, item_bytes=1000, listing_items=10_000,
                                consistent=consistent).values["PENDING"]
                    for consistent in (True, False))
    assert weak.listing_read_units == strong.listing_read_units / 2
    empty = plan_shards({"PENDING": 3500}, headroom=1.0, listing_items=0,
                        mode="gsi").values["PENDING"]
    assert (empty.queries_per_listing, empty.listing_read_units) == (4, 2.0)
    projected = plan_shards({"PENDING": 3500}, item_bytes=1000, read_item_bytes=100,
                            headroom=1.0, listing_items=10_000, mode="gsi").values["PENDING"]
    # 10,485 projected entries would fit 1 MB: the 1,000-entry page binds, 3 pages a shard
    assert projected.queries_per_listing == 12
    small = plan_shards({"PENDING": 3500}, item_bytes=1000, read_item_bytes=100,
                        headroom=1.0, listing_items=4000, mode="gsi").values["PENDING"]
    assert small.queries_per_listing == 4


@pytest.mark.parametrize(("peaks", "options", "match"), [
    ({"PENDING": -1}, {}, "peak must be"),
    ({"PENDING": float("nan")}, {}, "peak must be"),
    ({"PENDING": 10}, {"headroom": 0}, "headroom"),
    ({"PENDING": 10}, {"headroom": -1.5}, "headroom"),
    ({"PENDING": 10}, {"item_bytes": 0}, "item bytes"),
    ({"PENDING": 10}, {"read_item_bytes": -3}, "read item bytes"),
    ({"PENDING": 10}, {"amplification": 0}, "amplification"),
    ({"PENDING": 10}, {"ceiling": "oracle"}, "unknown ceiling"),
    ({"PENDING": 10}, {"ceiling": 0}, "ceiling"),
    ({"PENDING": 10}, {"listing_items": {"SHIPPED": 5}}, "no peak"),
    ({"PENDING": 10}, {"listing_items": -1}, "listing size"),
    ({"PENDING": 10}, {"mode": "lsi"}, "unknown mode"),
    ({}, {}, "at least one value"),
])
def test_bad_input_is_refused(peaks: dict[str, float], options: dict[str, object],
                              match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        plan_shards(peaks, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["PEN#DING", "", "a\x00b"])
def test_a_value_that_cannot_be_a_logical_key(value: str) -> None:
    with pytest.raises(InvalidKey):
        plan_shards({value: 10})


def test_ceilings_by_name_or_number() -> None:
    assert resolve_ceiling("dynamodb") is CEILINGS["dynamodb"]
    assert resolve_ceiling(" Cosmos ") is CEILINGS["cosmos"]
    custom = resolve_ceiling("2500")
    assert (custom.write_units, custom.read_units) == (2500.0, 2500.0)
    assert resolve_ceiling(custom) is custom
    assert shards(6000, ceiling="azure-tables", headroom=1.0) == 3
    assert shards(6000, ceiling=Ceiling("x", 600.0, 600.0, "u"), headroom=1.0) == 10
    for bad in ("-5", "inf", "nan", True):
        with pytest.raises(InvalidInput):
            resolve_ceiling(bad)  # type: ignore[arg-type]


def test_the_older_helpers_still_work() -> None:
    assert shards_for(6000, ceiling=1000.0) == 9
    routing = sharded_routing({"PENDING": 6000, "DELIVERED": 10}, ceiling=1000.0)
    assert routing.overrides == {"PENDING": ShardPolicy(shards=9)}


# -- shardex plan ----------------------------------------------------------------------------

def test_cli_json_gives_n_and_costs_per_value() -> None:
    result = CliRunner().invoke(cli, ["plan", "--peak", "PENDING=6000", "--peak", "SHIPPED=2500",
                                      "--peak", "DELIVERED=300", "--item-bytes", "1500",
                                      "--ceiling", "dynamodb", "--headroom", "1.5", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["schema"] == "shardex.plan/1"
    assert (doc["mode"], doc["amplification"], doc["amplification_from"]) == ("table", 2.0, "mode")
    values = doc["values"]
    assert list(values) == ["PENDING", "SHIPPED", "DELIVERED"]
    assert values["PENDING"]["shards"] == 36  # 6,000 x 2 units x 2 (transaction) x 1.5 / 1,000
    assert values["SHIPPED"]["shards"] == 15
    assert values["DELIVERED"]["shards"] == 2
    for value in values.values():
        assert isinstance(value["units_per_item"], float)
        assert isinstance(value["write_units_per_s"], float)
        assert isinstance(value["queries_per_listing"], int)
        assert value["fanout_p99_ms"] >= value["fanout_p50_ms"] > 0
        assert value["shard_load"] <= round(1 / 1.5, 4)  # no shard above its ceiling
    assert doc["routing"]["format"] == "shardex.routing/1"
    assert doc["routing"]["overrides"]["PENDING"] == {"shards": 36, "strategy": "hash"}


def test_the_readme_example_keeps_every_shard_under_its_ceiling() -> None:
    import re
    from pathlib import Path

    readme = (Path(__file__).parent.parent / "README.md").read_text()
    command = re.search(r"^shardex (plan .*)$", readme, re.MULTILINE)
    assert command is not None
    result = CliRunner().invoke(cli, [*command[1].split(), "--json"])
    assert result.exit_code == 0, result.output
    for plan in json.loads(result.stdout)["values"].values():
        assert plan["shard_load"] < 1.0


@pytest.mark.parametrize(("args", "mode", "shards", "said"), [
    ([], "table", 18, "table mode (assumed"),
    (["--mode", "gsi"], "gsi", 9, "gsi mode (--mode)"),
    (["--store", "dynamodb://orders?gsi=by_status&key_attribute=s&sort_attribute=t"
      "&id_attribute=i"], "gsi", 9, "gsi mode (from --store)"),
    (["--store", "dynamodb://orders-index?region=eu-west-1"], "table", 18,
     "table mode (from --store)"),
    (["--store", "memory://"], "table", 18, "table mode (from --store)"),
    (["--mode", "gsi", "--amplification", "3"], "gsi", 27, "amplification 3 (given)"),
    # Azure: 4 entity writes a write, against 2,000 entities a second a partition
    (["--store", "azure-tables://orders?endpoint=http://127.0.0.1:10002/devstoreaccount1"],
     "azure", 18, "amplification 4 (Azure Table Storage"),
    (["--mode", "azure", "--ceiling", "dynamodb"], "azure", 36, "ceiling dynamodb"),
])
def test_the_mode_sets_the_amplification_and_says_so(args: list[str], mode: str, shards: int,
                                                      said: str) -> None:
    runner = CliRunner()
    doc = json.loads(runner.invoke(cli, ["plan", "--peak", "PENDING=6000", *args,
                                         "--json"]).stdout)
    assert (doc["mode"], doc["values"]["PENDING"]["shards"]) == (mode, shards)
    text = runner.invoke(cli, ["plan", "--peak", "PENDING=6000", *args], terminal_width=200)
    assert said in " ".join(text.stdout.split())


def test_cli_options_reach_the_planner() -> None:
    result = CliRunner().invoke(cli, ["plan", "--peak", "PENDING=6000", "--amplification", "2",
                                      "--listing-items", "PENDING=50000", "--latency-median-ms",
                                      "8", "--latency-p99-ms", "40", "--json"])
    assert result.exit_code == 0, result.output
    pending = json.loads(result.stdout)["values"]["PENDING"]
    assert pending["shards"] == 18
    assert pending["listing_items"] == 50_000
    assert pending["queries_per_listing"] > 18
    assert pending["fanout_p50_ms"] == round(1000 * LatencyModel(8, 40).fanout_quantile(18, 0.5),
                                             4)  # rounded once, to 4 places


def test_cli_table() -> None:
    result = CliRunner().invoke(cli, ["plan", "--peak", "PENDING=6000", "--peak",
                                      "DELIVERED=300", "--mode", "gsi"], terminal_width=200)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    pending = next(line for line in lines if "PENDING" in line)
    assert pending.split("│")[5].strip() == "9"  # the N column
    assert "dynamodb" in result.stdout


@pytest.mark.parametrize("width", [80, 60, 40])
def test_cli_table_wraps_instead_of_cutting(monkeypatch: pytest.MonkeyPatch, width: int) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    result = CliRunner().invoke(cli, ["plan", "--peak", "PENDING=6000", "--peak", "SHIPPED=2500",
                                      "--item-bytes", "1500", "--listing-items", "50000"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert all(len(line) <= width for line in out.splitlines())
    assert "\u2026" not in out  # nothing shortened with an ellipsis
    words = " ".join(out.split())
    for header in ("peak", "units/item", "WU/s", "per", "shard", "queries", "listing", "RU",
                   "fan-out", "p50/p99", "ms"):
        assert header in words
    for cell in ("6,000", "24,000", "36", "667 (67%)", "18,324.0", "20.5/60.6"):
        assert cell in words


@pytest.mark.parametrize(("args", "message"), [
    (["--peak", "PENDING=abc"], "'abc' is not a number"),
    (["--peak", "PENDING"], "VALUE=NUMBER"),
    (["--peak", "=5"], "VALUE=NUMBER"),
    (["--peak", "PENDING=-5"], "peak must be"),
    (["--peak", "PENDING=5", "--peak", "PENDING=6"], "twice"),
    (["--peak", "PENDING=5", "--ceiling", "oracle"], "unknown ceiling"),
    (["--peak", "PENDING=5", "--headroom", "0"], "headroom"),
    (["--peak", "PENDING=5", "--headroom", "-1"], "headroom"),
    (["--peak", "PENDING=5", "--item-bytes", "0"], "'--item-bytes'"),
    (["--peak", "PEN#DING=5"], "separator"),
    (["--peak", " PENDING=5"], "'--peak': ' PENDING' has spaces around it"),
    (["--peak", "PENDING =5"], "'--peak': 'PENDING ' has spaces around it"),
    (["--peak", "PENDING=1_000"], "'--peak': '1_000' is not a number"),
    (["--peak", "PENDING=\u0661\u0660"], "'--peak': '\u0661\u0660' is not a number"),
    (["--peak", "PENDING=5", "--listing-items", "x"], "not an integer"),
    (["--peak", "PENDING=5", "--listing-items", "5", "--listing-items", "P=4"], "once"),
    (["--peak", "PENDING=5", "--store", "orders"], "not a store URI"),
    (["--peak", "PENDING=5", "--mode", "table", "--store", "dynamodb://orders?gsi=g"],
     "contradicts"),
    # refused as opening the store would refuse it: planned, a mistyped option planned
    # another mode (index= for gsi=) or pool (max_conections) than the store's
    (["--peak", "PENDING=5", "--store", "redis://orders"],
     "--store: unknown store scheme 'redis' in 'redis://orders'; known: azure-tables://"),
    (["--peak", "PENDING=5", "--store", "dynamodb://orders?max_conections=1024"],
     "--store: dynamodb:// does not know the option(s) max_conections; known: "),
    (["--peak", "PENDING=5", "--store", "dynamodb://orders?index=byStatus"],
     "--store: dynamodb:// does not know the option(s) index; known: "),
    (["--peak", "PENDING=5", "--store", "dynamodb://t"], "table 't' is not a DynamoDB table"),
    (["--peak", "PENDING=5", "--store", "azure-tables://orders?read_timeout=soon"],
     "azure-tables:// option read_timeout='soon' is not a valid float"),
    (["--peak", "PENDING=5", "--store", "cosmos://orders"], "cosmos:// needs a database and"),
    # the values too, which plan took where opening the store refused them
    (["--peak", "PENDING=5", "--store", "cosmos://o/e?charges=bad"],
     "--store: charges must be one of reported, estimated, got 'bad'"),
    (["--peak", "PENDING=5", "--store", "cosmos://o/e?connect_timeout=nan"],
     "--store: connect_timeout must be a number of seconds above 0"),
    (["--peak", "PENDING=5", "--store", "cosmos://o/e?endpoint=ftp://x"],
     "--store: Cosmos DB endpoint 'ftp://x' is not an http:// or https:// URL"),
    (["--peak", "PENDING=5", "--store", "azure-tables://orders?read_timeout=-5"],
     "--store: read_timeout must be a number of seconds above 0"),
    (["--peak", "PENDING=5", "--store", "dynamodb://orders?read_timeout=-5"],
     "--store: dynamodb:// option read_timeout must be a number of seconds above 0"),
    (["--peak", "PENDING=5", "--store", "dynamodb://orders?endpoint_url=notaurl"],
     "--store: endpoint_url 'notaurl' is not an http:// or https:// URL"),
    (["--peak", "PENDING=5", "--mode", "lsi"], "'lsi' is not one of"),
    # each planned one layout and described another (taken before)
    (["--peak", "PENDING=5", "--table", "layout=gsi"],
     "--table: layout=gsi contradicts table mode, whose layout is table: the mode sets it"),
    (["--peak", "PENDING=5", "--mode", "table", "--table", "unit=ru"],
     "--table: unit=ru contradicts table mode, whose unit is capacity"),
    (["--peak", "PENDING=5", "--mode", "cosmos", "--table", "unit=capacity"],
     "--table: unit=capacity contradicts cosmos mode, whose unit is ru"),
    (["--peak", "PENDING=5", "--table", "store=azure-tables"],
     "--table: store=azure-tables contradicts table mode, whose store is dynamodb"),
    (["--peak", "PENDING=5", "--bogus"], "No such option"),
    ([], "give each value's peak (--peak VALUE=WRITES_PER_S) or a diagnosis (--from FILE)"),
    (["--from", "missing.json"], "missing.json"),
    (["--from", "pyproject.toml"], "pyproject.toml"),
])
def test_cli_bad_input_is_one_clear_line_and_exit_2(
        capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as done:
        main(["plan", *args])
    assert done.value.code == 2
    err = " ".join(capsys.readouterr().err.split())  # undo the console's wrapping
    assert err.startswith("error: ")
    assert message in err
    assert "Traceback" not in err


def test_an_azure_table_that_cannot_keep_up_is_told_the_account_limit() -> None:
    text = CliRunner().invoke(cli, ["plan", "--mode", "azure", "--peak", "PENDING=3000"],
                              terminal_width=200)
    said = " ".join(text.stdout.split())
    assert "storage account serves about 20,000 entities a second" in said
    assert "over 2 accounts" in said


@pytest.mark.parametrize(("peak", "shown", "needs"), [
    (1e308, "1e+308", "needs more shards than a float can count"),
    (6e7, "60,000,000", "needs 6,000,000 shards"),
    (5e4 + 0.5, "50,000.5", "needs 5,001 shards"),
], ids=["overflow", "finite", "fraction"])
def test_a_peak_past_the_shard_limit_says_what_it_needs_and_why(peak: float, shown: str,
                                                                 needs: str) -> None:
    """An overflow read 'needs inf shards'; the message names the factors too, each
    written out (it read 'a peak of 5e+06 ... needs 7.5e+03 shards')."""
    with pytest.raises(InvalidInput) as refused:
        shards_for(peak, ceiling=1000.0, headroom=100.0)
    assert f"a peak of {shown} a second, 1 write unit(s) each, x100 headroom, {needs} of " \
        "1,000 units/s, over the limit of 4,096" in str(refused.value)


def test_a_measured_peak_past_the_shard_limit_is_not_called_writes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """plan --from a diagnosis whose key measured 5e6 write units a second said 'a peak of
    5e+06 writes/s (x1 units, ...)': the diagnosis measures write units, not writes."""
    from tests.test_plan_reads import diagnosed

    diagnosis = diagnosed(tmp_path)
    doc = json.loads(diagnosis.read_text())
    doc["top"][0]["peak_write_units_per_s"] = 5e6
    diagnosis.write_text(json.dumps(doc))
    said = shardex_error(capsys, "plan", "--from", str(diagnosis), code=2)
    assert "writes/s" not in said
    assert f"{doc['top'][0]['key']}: a peak of 5,000,000 a second, 1 write unit(s) each" in said


def test_a_fan_out_wider_than_the_clients_pool_is_priced_through_it() -> None:
    """N = 900 was priced as 900 requests at once (48.5 ms at the p50), where the client
    shardex builds for DynamoDB sends 64 at a time (some 99 ms)."""
    model = LatencyModel(4.0, 25.0)
    wide = plan_shards({"A": 30_000}, latency=model, pool=16).values["A"]
    assert (wide.shards, wide.fanout_pool) == (90, 16)
    assert wide.fanout_p50_ms == pytest.approx(1000 * model.pooled_quantile(90, 16, 0.5))
    assert wide.fanout_p50_ms > 1.5 * 1000 * model.fanout_quantile(90, 0.5)
    narrow = plan_shards({"A": 30_000}, latency=model, pool=100).values["A"]
    assert (narrow.shards, narrow.fanout_pool) == (90, None)
    assert narrow.fanout_p50_ms == pytest.approx(1000 * model.fanout_quantile(90, 0.5))
    with pytest.raises(InvalidInput, match="pool must be an integer >= 1"):
        plan_shards({"A": 1}, pool=0)

    def plan(*args: str, json_: bool = False) -> tuple[int, str]:
        result = CliRunner().invoke(cli, ["plan", "--peak", "A=30000", *args,
                                          *(["--json"] if json_ else [])])
        return result.exit_code, result.output.replace("\n", " ")

    # 90 keys through DynamoDB's 64: priced so, and said only where it costs a tenth
    assert json.loads(plan(json_=True)[1])["values"]["A"]["fanout_pool"] == 64
    assert "fan-out:" not in plan()[1]
    # the Azure SDK's 100 carry them at once
    assert json.loads(plan("--mode", "azure", json_=True)[1])["values"]["A"][
        "fanout_pool"] is None
    code, out = plan("--store", "dynamodb://orders?max_connections=16")
    assert code == 0
    assert "fan-out: A's 90 shard keys are read 16 at a time (max_connections in --store): a " \
        "first page waits" in out
    assert "max_connections=90 reads them at once" in out
    code, out = plan("--store", "dynamodb://orders?max_connections=5000")
    assert code == 2
    assert "Invalid value for --store: dynamodb:// option max_connections must be a whole " \
        "number from 1 to 4096, got 5000" in out
    # as opening the store says it
    assert "Invalid value for --store: dynamodb:// option max_connections='many' is not a " \
        "valid int" in plan("--store", "dynamodb://orders?max_connections=many")[1]


def test_a_store_uri_is_checked_without_its_driver_credentials_or_a_connection(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``plan --store`` checks the URI as opening the store would (above), but builds no
    client: it plans offline, for a store whose driver is not installed and whose
    credentials are not in this environment."""
    for name in ("AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY",
                 "COSMOS_KEY", "COSMOS_ENDPOINT", "COSMOS_CONNECTION_STRING"):
        monkeypatch.delenv(name, raising=False)
    for driver in ("aiobotocore", "aiobotocore.session", "botocore", "boto3", "azure.data.tables",
                   "azure.data.tables.aio", "azure.cosmos", "azure.cosmos.aio"):
        monkeypatch.setitem(sys.modules, driver, None)  # importing it raises ImportError
    for uri, mode in [("dynamodb://orders?gsi=byStatus&key_attribute=status"
                       "&sort_attribute=created&id_attribute=id&max_connections=128", "gsi"),
                      ("azure-tables://orders?endpoint=http://127.0.0.1:10002/acct", "azure"),
                      ("cosmos://shop/orders", "cosmos")]:
        main(["plan", "--peak", "PENDING=3000", "--store", uri])
        assert capsys.readouterr().out.startswith(f"plan: {mode} mode (from --store)")


def test_the_help_names_every_mode_s_amplification() -> None:
    """'plan --help' left Cosmos DB's default out ('table 2, gsi 1, azure 4')."""
    from shardex.plan import AMPLIFICATION

    shown = " ".join(CliRunner().invoke(cli, ["plan", "--help"]).output.split())
    assert ", ".join(f"{mode} {value:g}" for mode, value in AMPLIFICATION.items()) in shown


def test_a_cosmos_plan_prices_its_locates_as_the_store_meters_them() -> None:
    """plan --mode cosmos priced each placement read at 2 RU (Strong) beside listings at
    Session's 1, where the store meters the same read at 1 RU: 3,000 item writes a second
    read 6,000 RU of locates."""
    result = CliRunner().invoke(cli, ["plan", "--peak", "PENDING=3000", "--item-bytes",
                                      "1000", "--mode", "cosmos", "--json"])
    table = json.loads(result.stdout)["table"]
    assert table["item_writes_per_s"] == 3000.0
    assert table["read_units_per_s"] == 3000.0


def test_a_plan_on_one_budget_reports_the_read_ceiling_it_planned_with() -> None:
    """plan --store cosmos://... --ceiling dynamodb said '1000 RU/s a partition, reads and
    writes alike' and planned so, while its JSON gave 3,000 read units a partition."""
    result = CliRunner().invoke(cli, ["plan", "--peak", "PENDING=3000", "--store",
                                      "cosmos://orders/entries", "--ceiling", "dynamodb",
                                      "--json"])
    ceiling = json.loads(result.stdout)["ceiling"]
    assert (ceiling["write_units_per_s"], ceiling["read_units_per_s"]) == (1000.0, 1000.0)
