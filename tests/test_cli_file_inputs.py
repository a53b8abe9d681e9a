"""Files the CLI reads (workloads, diagnoses, policies, heat lines), however malformed: one
line, ``error: ...``, naming the file and the field or line at fault, exit 2, no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import shardex
from shardex.cli import cli, main

_WORKLOAD = "duration = 30\n[values.A]\nwrite = 1\n"


def fails(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Run the command as a user does; its exit code and its one error line."""
    with pytest.raises(SystemExit) as done:
        main(list(args))
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err[-2000:]
    assert lines[0].startswith("error: "), lines[0]
    code = done.value.code
    return int(code) if isinstance(code, int) else 1, lines[0]


def _diagnosis(key: str, **row: object) -> str:
    return json.dumps({"schema": "shardex.diagnose/1", "totals": {"seconds": 10},
                       "top": [{"key": key, "peak_units_per_s": 2000, **row}]})


@pytest.mark.parametrize(("text", "field"), [
    ('[values.B]\nwrite = 1\n[[moves]]\nfrom = ["A"]\nto = "B"\nrate = 1\n', "moves[0].from"),
    ('[values.B]\nwrite = 1\n[[moves]]\nfrom = "A"\nto = {x = 1}\nrate = 1\n', "moves[0].to"),
    ("[values.B]\nwrite = 1\n[[moves]]\nfrom = 1\nto = \"B\"\nrate = 1\n", "moves[0].from"),
    ("[[moves]]\nfrom = \"A\"\nto = \"A\"\nrate = [[0, 1" + "0" * 500 + "]]\n",
     "moves[0].rate[0] rate"),
], ids=["from-list", "to-table", "from-int", "rate-huge"])
def test_a_wrongly_typed_move_is_refused_naming_it(capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path, text: str,
                                                    field: str) -> None:
    path = tmp_path / "m1.toml"
    path.write_text(_WORKLOAD + text)
    code, line = fails(capsys, "simulate", str(path))
    assert code == 2
    assert line.startswith(f"error: {path}: {field}: "), line


@pytest.mark.parametrize("moves", ["5", '"AB"', "{from = \"A\"}"])
def test_moves_that_are_not_a_list_of_tables_are_refused(capsys: pytest.CaptureFixture[str],
                                                         tmp_path: Path, moves: str) -> None:
    path = tmp_path / "m2.toml"
    path.write_text(f"moves = {moves}\n{_WORKLOAD}")
    code, line = fails(capsys, "simulate", str(path))
    assert code == 2
    assert line.startswith(f"error: {path}: moves"), line


@pytest.mark.parametrize(("name", "text", "field"), [
    ("big.json", '{"schema":"shardex.diagnose/1","top":[{"key":"A","peak_units_per_s":1'
     + "0" * 4400 + "}]}", "is not valid JSON"),
    ("big.toml", "duration = 1" + "0" * 5000 + "\n[values.A]\nwrite = 1\n", "is not valid TOML"),
    ("wide.toml", "duration = 1" + "0" * 400 + "\n[values.A]\nwrite = 1\n", "duration"),
    ("wide.json", _diagnosis("A", shards=10**400), "top[0].shards"),
    ("step.toml", "[values.A]\nwrite = [[0, 1], 5" + "0" * 4000 + "]\n", "values.A.write[1]"),
    ("s.toml", _WORKLOAD + "shards = 5000\n", "values.A.shards: must be an integer from 1 to "
     "4096, got 5000"),
    ("s.json", _diagnosis("A", shards=5000), "top[0].shards: must be an integer from 1 to "
     "4096"),
], ids=["json-digits", "toml-digits", "toml-float-overflow", "json-float-overflow", "repr",
        "toml-shards", "json-shards"])
def test_a_number_too_long_or_large_is_refused_naming_the_file(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, text: str,
        field: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    code, line = fails(capsys, "simulate", str(path))
    assert code == 2
    assert line.startswith(f"error: {path}: {field}"), line
    assert len(line) < 600, line


@pytest.mark.parametrize(("key", "fault"), [
    ("A#B", "separator"), ("", "must not be empty"), ("A\x00", "NUL"),
    ("a" * 3000, "3000 bytes"), ("#placement#x", "separator"), ("A\ud800", "surrogate"),
], ids=["separator", "empty", "nul", "long", "reserved", "surrogate"])
@pytest.mark.parametrize("autopilot", [False, True], ids=["simulate", "autopilot"])
def test_a_diagnosis_key_that_is_no_logical_key_is_refused(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, key: str, fault: str,
        autopilot: bool) -> None:
    path = tmp_path / "hash.json"
    path.write_text(_diagnosis(key, shards=1))
    code, line = fails(capsys, "simulate", *(["--autopilot"] if autopilot else []), str(path),
                       "--duration", "5")
    assert code == 2
    # a key that is no logical key is left out with a note; with none left, it is refused
    assert line.startswith(f"error: {path}: the diagnosis lists no key that can be "
                           "simulated: "), line
    assert "it cannot be a logical key (logical key" in line
    assert fault in line


@pytest.mark.parametrize(("table", "fault"), [
    ("foo = 1", "unknown profile setting(s) foo"),
    ('profile = "nope"', "unknown profile 'nope'"),
    ('warm_write = "x"', "warm_write must be"),
    ("x = 1", "unknown profile setting(s) x"),
])
@pytest.mark.parametrize("autopilot", [False, True], ids=["simulate", "autopilot"])
def test_a_bad_table_setting_is_refused_naming_the_file(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, table: str, fault: str,
        autopilot: bool) -> None:
    path = tmp_path / "t.toml"
    path.write_text(f"duration = 30\n[table]\n{table}\n[values.A]\nwrite = 1\n")
    code, line = fails(capsys, "simulate", *(["--autopilot"] if autopilot else []), str(path))
    assert code == 2
    assert line.startswith(f"error: {path}: table: "), line
    assert fault in line


@pytest.mark.parametrize(("text", "fault"), [
    ("x = " + "[" * 5000 + "]" * 5000 + "\n", "is nested too deeply"),
    ("tick = 1" + "0" * 5000 + "\n", "is not valid TOML"),
    ("tick = 1" + "0" * 400 + "\n", "autopilot tick must be a finite number >= 0, got an int "
     "of 401 digits"),
    ("max_shards = 1" + "0" * 400 + "\n", "autopilot needs 1 <= min_shards <= max_shards "
     "<= 4096, got 1 and an int of 401 digits"),
], ids=["deep", "digits", "float-overflow", "long-count"])
def test_a_policy_too_deep_or_long_to_read_is_refused_in_one_line(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, fault: str) -> None:
    workload, policy = tmp_path / "w.toml", tmp_path / "deep.toml"
    workload.write_text(_WORKLOAD)
    policy.write_text(text)
    code, line = fails(capsys, "simulate", "--autopilot", str(workload), "--policy",
                       str(policy), "--duration", "30")
    assert code == 2
    assert line.startswith(f"error: {policy}: {fault}"), line


@pytest.mark.parametrize(("line", "fault"), [
    ("[" * 100_000 + "]" * 100_000, "(nested too deeply)"),
    ('{"t": 1' + "0" * 400 + ', "key": "A", "write_units": 1}', "(t, write_units and"),
], ids=["deep", "float-overflow"])
def test_a_heat_line_too_deep_or_long_is_a_bad_line_logged_and_skipped(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, line: str, fault: str) -> None:
    """Like any other line that is no heat sample: the tick logs 'heat fail' naming the
    file and line, and the run goes on (a run of 10 ms: one tick)."""
    heat = tmp_path / "heat.jsonl"
    heat.write_text(line + "\n")
    main(["autopilot", "run", "--store", "memory://", "--index", "i", "--source",
          f"file:{heat}", "--dry-run", "--duration", "0.01"])
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err[-2000:]
    assert not err.strip(), err[-2000:]
    assert f"heat fail: file {heat}: BadHeatLines: {heat}:1: not a heat sample " \
           f"{fault}" in " ".join(out.split()), out


def test_table_settings_that_fit_only_with_the_stores_are_taken(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # checked alone, [table] initial_burst_seconds 600 was over the default burst of 300
    path = tmp_path / "t.toml"
    path.write_text('duration = 10\n[table]\nprofile = "dynamodb-provisioned"\n'
                    "initial_burst_seconds = 600\n[values.A]\nwrite = 100\n")
    main(["simulate", str(path), "--store", "memory://?burst_seconds=900", "--json"])
    assert json.loads(capsys.readouterr().out)["schema"] == "shardex.simulate/1"
    code, line = fails(capsys, "simulate", str(path))
    assert code == 2
    assert line.startswith(f"error: {path}: table: "), line


def test_store_settings_that_fit_only_with_the_tables_are_taken(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """--store's settings were checked alone first, over the default profile: a write
    ceiling that gives a cosmos table 20,000 partitions gave DynamoDB's 200,000."""
    path = tmp_path / "t.toml"
    path.write_text('duration = 5\n[table]\nprofile = "cosmos"\nprovisioned_write = 2e8\n'
                    "[values.A]\nwrite = 100\n")
    main(["simulate", str(path), "--store", "memory://?write_ceiling=10000", "--json"])
    assert json.loads(capsys.readouterr().out)["schema"] == "shardex.simulate/1"
    path.write_text("duration = 5\n[table]\nwarm_write = 2e8\nquota_write = 2e8\n"
                    "[values.A]\nwrite = 100\n")
    code, line = fails(capsys, "simulate", str(path), "--store", "memory://?write_ceiling=1000")
    assert code == 2
    assert "200,000 partitions" in line, line


def test_a_setting_of_the_other_capacity_mode_is_refused(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """It was taken and ignored: a plan given provisioned_write was of an on-demand
    table, as a simulation given warm_write on a provisioned one served its provisioned
    capacity."""
    code, line = fails(capsys, "plan", "--peak", "A=3000", "--table",
                       "provisioned_write=20000")
    assert code == 2
    assert "provisioned_write is a setting of a table of provisioned capacity, and this one " \
        "is on-demand: give capacity=provisioned with it, or leave it out" in line, line
    main(["plan", "--peak", "A=3000", "--table", "capacity=provisioned", "--table",
          "provisioned_write=20000", "--json"])
    assert json.loads(capsys.readouterr().out)["schema"] == "shardex.plan/1"
    path = tmp_path / "t.toml"
    path.write_text('duration = 5\n[table]\nprofile = "dynamodb-provisioned"\n'
                    "warm_write = 40000\nmax_write = 50000\n[values.A]\nwrite = 100\n")
    code, line = fails(capsys, "simulate", str(path))
    assert code == 2
    assert "max_write, warm_write are settings of a table of on-demand capacity, and this " \
        "one is provisioned" in line, line


@pytest.mark.parametrize(("mode", "refused"), [("cosmos", False), ("table", True)])
def test_plan_table_settings_are_checked_over_the_modes_profile(
        capsys: pytest.CaptureFixture[str], mode: str, refused: bool) -> None:
    """They were checked over DynamoDB's profile whatever the mode, then over the mode's."""
    setting = "provisioned_write=2e8" if mode == "cosmos" else "warm_write=2e8"
    args = ["plan", "--peak", "PENDING=3000", "--mode", mode, "--table", setting]
    if refused:
        code, line = fails(capsys, *args)
        assert code == 2
        assert "profile dynamodb-on-demand: the table would start with 200,000" in line, line
    else:
        main([*args, "--json"])
        assert json.loads(capsys.readouterr().out)["mode"] == "cosmos"


def test_store_keywords_that_fit_only_with_the_uris_settings_are_taken() -> None:
    store = shardex.open_store("memory://?profile=dynamodb-provisioned&burst_seconds=900",
                               initial_burst_seconds=600)
    assert store.profile.initial_burst_seconds == 600
    with pytest.raises(shardex.InvalidInput):
        shardex.open_store("memory://?profile=dynamodb-provisioned", initial_burst_seconds=600)


@pytest.mark.parametrize(("plot", "fault"), [
    # click's Path made '' into '.', and the message named that
    ("", "Invalid value for '--plot': '': give the name of a file to write "
         "(see 'shardex {command} --help')"),
    ("missing/x.png", "--plot {tmp}/missing/x.png: the folder {tmp}/missing does not exist"),
], ids=["empty", "no folder"])
@pytest.mark.parametrize("command", ["simulate", "demo", "diagnose"])
def test_a_plot_that_cannot_be_written_is_refused_before_the_run(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        command: str, plot: str, fault: str) -> None:
    """An empty --plot ran and then said 'plot written to .'; one in a missing folder
    failed after the run (a whole demo) at exit 1, not naming --plot."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "w.toml").write_text(_WORKLOAD)
    (tmp_path / "log.csv").write_text("timestamp,key,op,units\n2026-11-30T05:00:00Z,A,write,2\n")
    given = {"simulate": ["w.toml"], "demo": ["--duration", "1"], "diagnose": ["log.csv"]}
    target = plot if not plot else str(tmp_path / plot)
    code, line = fails(capsys, command, *given[command], "--plot", target)
    assert (code, line) == (2, "error: " + fault.format(tmp=tmp_path, command=command))


@pytest.mark.parametrize("autopilot", [[], ["--autopilot"]], ids=["static", "autopilot"])
@pytest.mark.parametrize("value", ["NOPE", "a"])
def test_simulate_refuses_a_set_of_a_value_the_workload_does_not_have(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, value: str,
        autopilot: list[str]) -> None:
    """It was ignored: a mistyped value ('a' for 'A') left N as it was, silently."""
    path = tmp_path / "w.toml"
    path.write_text(_WORKLOAD)
    code, line = fails(capsys, "simulate", str(path), *autopilot, "--set", f"{value}=3")
    assert code == 2
    assert line.startswith(f"error: Invalid value for --set: {value!r} is no value of "
                           f"{path} (its values: A)"), line


@pytest.mark.parametrize("autopilot", [[], ["--autopilot"]], ids=["static", "autopilot"])
def test_simulate_refuses_a_layout_for_none_of_the_workloads_values(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, autopilot: list[str]) -> None:
    """It ran every value at N=1, unsaid (a plan of another workload); a layout that
    shards one of its values among others runs."""
    path, layout = tmp_path / "w.toml", tmp_path / "layout.json"
    path.write_text(_WORKLOAD)
    routing = {"format": "shardex.routing/1", "version": 1,
               "default": {"shards": 1, "strategy": "hash"},
               "overrides": {"PENDING": {"shards": 4, "strategy": "hash"}}}
    layout.write_text(json.dumps(routing))
    code, line = fails(capsys, "simulate", str(path), *autopilot, "--layout", str(layout),
                       "--duration", "30")
    assert code == 2
    assert line.startswith(f"error: Invalid value for --layout: {layout} shards 'PENDING', "
                           f"none of which is a value of {path} (its values: A)"), line
    routing["overrides"]["A"] = {"shards": 2, "strategy": "hash"}
    layout.write_text(json.dumps(routing))
    result = CliRunner().invoke(cli, ["simulate", str(path), "--layout", str(layout),
                                      "--duration", "5", "--json"])
    assert json.loads(result.stdout)["values"]["A"]["shards"] == 2, result.output


@pytest.mark.parametrize(("args", "fault"), [
    (["simulate", "{w}", "--seed", "5"], "--seed is for --autopilot"),
    (["simulate", "{w}", "--rate", "sustained"],
     "{w}: is a TOML workload, which gives its own rates: --rate sustained"),
    (["diagnose", "{log}", "--counters", "5"], "--counters goes with --stream or '-'"),
    (["diagnose", "{log}", "--every", "5"], "--every goes with --stream or '-'"),
    (["diagnose", "{log}", "--table", "orders"],
     "--table reads cloudtrail input, and none of the files is (csv)"),
    (["diagnose", "{log}", "--item-bytes", "100"],
     "--item-bytes reads cloudtrail input, and none of the files is (csv)"),
    (["diagnose", "{log}", "--period", "60"],
     "--period reads insights input, and none of the files is (csv)"),
    (["demo", "--autopilot", "--duration", "5"], "--autopilot takes --json and --seed only"),
    (["demo", "--scenario", "tenants", "--duration", "1"],
     "--reshard, --rate and --duration belong to the orders scenario"),
    (["plan", "--peak", "A=3000", "--verify-seconds", "10"],
     "--verify-seconds sets the run --verify makes: give --verify"),
    (["simulate", "--autopilot", "--set", "NOPE=3", "--duration", "30"],
     "'NOPE' is no value of the autopilot's day (its values: shop-anchor"),
], ids=["simulate seed", "simulate rate", "diagnose counters", "diagnose every",
        "cloudtrail table", "cloudtrail item bytes", "insights period", "demo autopilot",
        "demo tenants", "plan verify", "autopilot day set"])
def test_an_option_the_input_has_no_use_for_is_refused_not_ignored(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str],
        fault: str) -> None:
    """Each ran as if it had not been given."""
    names = {"w": str(tmp_path / "w.toml"), "log": str(tmp_path / "log.csv")}
    (tmp_path / "w.toml").write_text(_WORKLOAD)
    (tmp_path / "log.csv").write_text("timestamp,key,op,units\n2026-11-30T05:00:00Z,A,write,2\n")
    code, line = fails(capsys, *(arg.format(**names) for arg in args))
    assert code == 2
    assert fault.format(**names) in line, line


@pytest.mark.parametrize("autopilot", [[], ["--autopilot"]], ids=["static", "autopilot"])
@pytest.mark.parametrize("n", ["0", "100000"])
def test_simulate_refuses_an_n_no_routing_takes(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path, n: str,
                                                autopilot: list[str]) -> None:
    """--autopilot took --set A=0 and ran it as N=1; the static run refused it."""
    path = tmp_path / "w.toml"
    path.write_text(_WORKLOAD)
    code, line = fails(capsys, "simulate", str(path), *autopilot, "--set", f"A={n}")
    assert code == 2
    assert line.startswith("error: Invalid value for --set: A: "), line
    assert "shards" in line, line


def test_simulate_autopilot_refuses_a_rate_for_the_built_in_day(
        capsys: pytest.CaptureFixture[str]) -> None:
    """--rate chooses a diagnosis's peak or sustained rate: the built-in day has neither."""
    code, line = fails(capsys, "simulate", "--autopilot", "--rate", "sustained")
    assert code == 2
    assert "--rate is for a WORKLOAD that is a diagnosis" in line, line


def test_autopilot_refuses_a_policy_tier_without_its_store_naming_the_file(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A policy's tier with no --tier ran (its isolation could not have landed)."""
    policy, heat = tmp_path / "p.toml", tmp_path / "heat.jsonl"
    policy.write_text('tier = "hot"\n')
    heat.write_text("")
    code, line = fails(capsys, "autopilot", "--store", "memory://", "--index", "i",
                       "--source", f"file:{heat}", "--policy", str(policy), "--dry-run",
                       "--duration", "0.01")
    assert code == 2
    assert line.startswith(f"error: Invalid value for '--policy': {policy}: tier 'hot', "
                           "which has no store: give --tier hot=URI"), line


def test_an_autopilot_word_that_is_no_command_is_named(
        capsys: pytest.CaptureFixture[str]) -> None:
    """'autopilot recommend --help' printed run's help: any first word ran 'run'."""
    code, line = fails(capsys, "autopilot", "recommend", "--help")
    assert (code, line.split(" (see")[0]) == (2, "error: No such command 'recommend'.")


@pytest.mark.parametrize(("text", "field"), [
    ("", "is empty: a workload is TOML, or a diagnosis document"),
    (" \n\n", "is empty"),
    ("[1, 2]", "a JSON workload must be a shardex.diagnose/1 document"),
    ('["A"]\n', "a JSON workload must be a shardex.diagnose/1 document"),
    ("[values.A\nwrite = 1\n", "is not valid TOML"),
], ids=["empty", "blank", "array", "array-of-text", "toml-header"])
def test_an_empty_or_json_array_workload_is_named_so(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "w.json"
    path.write_text(text)
    code, line = fails(capsys, "simulate", str(path))
    assert code == 2
    assert line.startswith(f"error: {path}: {field}"), line


def test_a_diagnosis_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    """As diagnose reads logs with one: simulate's workload and plan --from alike."""
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf"
                     + _diagnosis("A", shards=1, peak_units_per_s=100).encode())
    for args in (["simulate", str(path), "--duration", "5", "--json"],
                 ["plan", "--from", str(path), "--json"]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["schema"].startswith("shardex.")
