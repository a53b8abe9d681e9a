"""The CLI's edges: schemas on every --json, the hand-off into plan, logging, connections."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import shardex
from shardex.cli import cli, main
from shardex.commands.connection import Connection
from shardex.documents import rounded


def run(*args: str, stdin: str | None = None) -> str:
    result = CliRunner().invoke(cli, list(args), input=stdin, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def failing(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return int(exited.value.code or 0), " ".join(err.split())


def sharded_log(tmp_path: Path) -> Path:
    """PENDING at N=4, each shard 750 write units/s; SHIPPED at 300: PENDING needs N=5."""
    path = tmp_path / "access.csv"
    lines = ["timestamp,key,op,units,throttled"]
    for second in range(10):
        lines += [f"{1796014800 + second},PENDING#{shard},write,750,0" for shard in range(4)]
        lines.append(f"{1796014800 + second},SHIPPED,write,300,0")
        lines.append(f"{1796014800 + second},SHIPPED,read,40,0")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_every_json_output_names_its_schema(tmp_path: Path) -> None:
    log = sharded_log(tmp_path)
    documents = {
        "shardex.demo/1": run("demo", "--json", "--duration", "1", "--rate", "500"),
        "shardex.diagnose/1": run("diagnose", str(log), "--json"),
        "shardex.plan/1": run("plan", "--peak", "PENDING=10", "--json"),
        "shardex.routing-record/1": run("routing", "show", "--store", "memory://",
                                        "--index", "orders", "--json"),
    }
    for schema, text in documents.items():
        assert json.loads(text)["schema"] == schema


def test_plan_takes_a_diagnosis_as_it_is(tmp_path: Path) -> None:
    """diagnose --json -> plan --from -> reshard start --file, each taking the last's output
    as it is (routing set --file too: tests/test_cli_conventions.py, on DynamoDB Local)."""
    diagnosis = tmp_path / "diagnosis.json"
    diagnosis.write_text(run("diagnose", str(sharded_log(tmp_path)), "--json"))
    top = {row["key"]: row for row in json.loads(diagnosis.read_text())["top"]}
    assert top["PENDING"]["peak_write_units_per_s"] == 3000.0
    assert top["SHIPPED"]["peak_read_units_per_s"] == 40.0
    plan = json.loads(run("plan", "--from", str(diagnosis), "--json"))
    # 3,000 measured write units/s x 1.5 headroom over 1,000 a partition
    assert plan["values"]["PENDING"]["shards"] == 5
    assert plan["values"]["SHIPPED"]["shards"] == 1
    assert plan["values"]["PENDING"]["write_units_per_s"] == 3000.0
    assert plan["routing"]["overrides"] == {"PENDING": {"shards": 5, "strategy": "hash"}}
    piped = json.loads(run("plan", "--from", "-", "--json", stdin=diagnosis.read_text()))
    assert piped == plan
    text = run("plan", "--from", str(diagnosis))
    assert "measured" in text
    # a --peak given beside it wins for its value: 2,000 writes a second, 2 units each
    # in table mode (it was taken as 2,000 units, N=3), as plan --peak alone plans it
    assert json.loads(run("plan", "--from", str(diagnosis), "--peak", "SHIPPED=2000",
                          "--json"))["values"]["SHIPPED"]["shards"] == 6 == json.loads(
        run("plan", "--peak", "SHIPPED=2000", "--json"))["values"]["SHIPPED"]["shards"]
    document = tmp_path / "plan.json"
    document.write_text(json.dumps(plan))
    start = json.loads(run("reshard", "start", "--store", "memory://", "--index", "orders",
                           "--file", str(document), "--dry-run", "--json"))
    assert start["values"]["PENDING"]["to"] == {"shards": 5, "strategy": "hash"}
    # '-' reads standard input, as plan --from - does (it was 'File '-' does not exist')
    piped = json.loads(run("reshard", "start", "--store", "memory://", "--index", "orders",
                           "--file", "-", "--dry-run", "--json", stdin=json.dumps(plan)))
    assert piped["values"] == start["values"]


def test_plan_from_refuses_other_documents(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "plan.json"
    other.write_text(run("plan", "--peak", "PENDING=10", "--json"))
    code, message = failing(capsys, "plan", "--from", str(other))
    assert code == 2
    assert "is not a shardex.diagnose/1 document" in message
    diagnosis = tmp_path / "d.json"
    diagnosis.write_text(run("diagnose", str(sharded_log(tmp_path)), "--json"))
    code, message = failing(capsys, "plan", "--from", str(diagnosis), "--amplification", "2")
    assert code == 2
    assert "amplification included" in message


@pytest.fixture
def quiet_shardex_logger() -> object:
    logger = logging.getLogger("shardex")
    handlers, level = list(logger.handlers), logger.level
    yield logger
    logger.handlers[:] = handlers
    logger.setLevel(level)


def test_verbose_logs_what_shardex_does_to_stderr(quiet_shardex_logger: logging.Logger) -> None:
    result = CliRunner().invoke(cli, ["-v", "routing", "show", "--store", "memory://",
                                      "--index", "orders"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert quiet_shardex_logger.level == logging.INFO
    assert any(isinstance(h, logging.StreamHandler) for h in quiet_shardex_logger.handlers)
    CliRunner().invoke(cli, ["-vv", "plan", "--peak", "P=1"], catch_exceptions=False)
    assert quiet_shardex_logger.level == logging.DEBUG


def test_connection_options_reach_the_store_or_are_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert Connection().options("memory://") == {}
    assert Connection("eu-west-1", "ops", "http://127.0.0.1:8000").options("dynamodb://t") == {
        "region": "eu-west-1", "profile": "ops", "endpoint_url": "http://127.0.0.1:8000"}
    assert Connection(endpoint_url="http://127.0.0.1:10002/a").options(
        "azure-tables://t") == {"endpoint": "http://127.0.0.1:10002/a"}
    for args in (["--region", "eu-west-1"], ["--endpoint-url", "http://127.0.0.1:1"]):
        code, message = failing(capsys, "routing", "show", "--store", "memory://",
                                "--index", "orders", *args)
        assert code == 2
        assert f"memory:// stores take no {args[0]}" in message
    code, message = failing(capsys, "routing", "show", "--store", "azure-tables://orders",
                            "--index", "orders", "--profile", "ops")
    assert (code, "azure-tables:// stores take no --profile" in message) == (2, True)


@pytest.mark.parametrize(("uri", "said"), [
    ("dynamodb://orders?max_connections=abc",
     "dynamodb:// option max_connections='abc' is not a valid int"),
    ("dynamodb://orders?region=a&region=b",
     "store URI 'dynamodb://orders?region=a&region=b' repeats the option 'region'"),
    ("redis://orders", "unknown store scheme 'redis' in 'redis://orders'"),
    ("cosmos://orders", "cosmos:// needs a database and a container"),
])
def test_a_store_uri_the_store_refuses_is_the_options_fault_in_every_command(
        capsys: pytest.CaptureFixture[str], uri: str, said: str) -> None:
    """A bad option value of the URI said "error: dynamodb:// option ..." (the store's,
    at open), a repeated one "Invalid value for '--store'": one wording now, the option's,
    for what opening the store refuses of the URI, before the command does any work."""
    for command in (["routing", "show"], ["reshard", "status"]):
        code, message = failing(capsys, *command, "--store", uri, "--index", "orders")
        assert code == 2
        assert message.startswith(f"error: Invalid value for '--store': {said}"), message


def test_documents_round_once() -> None:
    assert rounded({"a": [0.1 + 0.2, 2.0, float("nan")]}) == {"a": [0.3, 2.0, None]}


def test_the_readme_async_block_runs_as_a_script(tmp_path: Path) -> None:
    import subprocess
    import sys

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    blocks = [b.split("```", 1)[0] for b in readme.split("```python\n")[1:]]
    script = next(b for b in blocks if "asyncio.run(main())" in b)
    path = tmp_path / "readme_example.py"
    path.write_text(script)
    ran = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                         timeout=120, check=False)
    assert ran.returncode == 0, ran.stderr
    assert "SHIPPED o-1" in ran.stdout


def test_an_autopilot_whose_heat_source_is_out_of_reach_fails_in_one_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The heat source is asked first, before the command announces its metrics page: a
    Prometheus out of reach fails the run in one line, not after a 'metrics:' line."""
    import socket

    with socket.socket() as probe:  # a port that refuses: bound, never listened on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        code, err = failing(capsys, "autopilot", "run", "--store", "memory://", "--index",
                            "orders", "--dry-run", "--metrics-port", "0", "--source",
                            f"prometheus://127.0.0.1:{port}")
    assert code == 1
    assert err.startswith(f"error: cannot reach Prometheus at http://127.0.0.1:{port}"), err


def test_the_autopilot_s_movers_share_the_budget_and_follow_the_controls(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    """The autopilot's runner is built with the migration's sharing, as 'reshard run''s
    is: built without it, 'reshard pause' and 'throttle' never reached its movers (a
    probe: 300 entries moved in the 30 s after a pause)."""
    import shardex.autopilot.runner as runners
    from shardex.migrate.budget import Sharing
    from shardex.migrate.control import FileSignal

    built: list[Any] = []

    def runner(*args: Any, **kwargs: Any) -> Any:
        built.append(kwargs.get("sharing"))
        raise shardex.errors.InvalidInput("built")

    monkeypatch.setattr(runners, "Runner", runner)
    flag = tmp_path / "hold"
    code, err = failing(capsys, "autopilot", "run", "--store", "memory://", "--index",
                        "orders", "--source", "meter", "--dry-run", "--throttle-file",
                        str(flag))
    assert (code, err) == (2, "error: built")
    assert len(built) == 1
    assert isinstance(built[0], Sharing)
    assert [type(s) for s in built[0].signals] == [FileSignal]


def test_a_rollback_s_movers_share_the_budget_and_follow_the_controls(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    """'reshard rollback' moves entries back: its runner is built with the migration's
    sharing, as 'reshard run''s is. It was built without: 'reshard pause' and 'throttle'
    never reached a rollback's movers, and two rollback processes each moved at --rate
    (and it took no --throttle-file, --budget-redis or --every)."""
    import shardex.migrate as migrate
    from shardex.migrate.budget import Sharing
    from shardex.migrate.control import FileSignal

    built: list[Any] = []

    def runner(*args: Any, **kwargs: Any) -> Any:
        built.append(kwargs.get("sharing"))
        raise shardex.errors.InvalidInput("built")

    monkeypatch.setattr(migrate, "Resharder", runner)
    code, err = failing(capsys, "reshard", "rollback", "--store",
                        "dynamodb://orders?region=us-east-1&endpoint_url=http://127.0.0.1:9",
                        "--index", "orders", "--throttle-file", str(tmp_path / "hold"),
                        "--every", "2")
    assert (code, err) == (2, "error: built")
    assert len(built) == 1
    assert isinstance(built[0], Sharing)
    assert [type(s) for s in built[0].signals] == [FileSignal]


@pytest.mark.parametrize(("argv", "named"), [
    (["plan", "--peak", "PENDING=100", "--store", "memory://["],
     "store URI 'memory://[' cannot be parsed"),
    (["autopilot", "run", "--store", "memory://", "--index", "orders", "--dry-run",
      "--source", "prometheus://["], "heat source 'prometheus://[' cannot be parsed"),
    (["autopilot", "run", "--store", "memory://", "--index", "orders", "--dry-run",
      "--source", "prometheus://127.0.0.1:99999"], "Port out of range"),
    (["serve", "--prometheus", "http://["], "Prometheus URL 'http://[' cannot be parsed"),
    (["diagnose", "s3a://[/logs", "--engine", "spark"], "log path 's3a://[/logs' cannot be"),
], ids=["plan", "autopilot", "autopilot-port", "serve", "diagnose"])
def test_a_url_urllib_cannot_read_is_refused_by_name(capsys: pytest.CaptureFixture[str],
                                                      argv: list[str], named: str) -> None:
    """An unclosed IPv6 bracket or a port out of range, where a URL is given: one line
    naming the text, not urllib's ValueError and its traceback (found by the CLI fuzz)."""
    code, err = failing(capsys, *argv)
    assert code in (1, 2)
    assert named in err, err


@pytest.mark.parametrize(("path", "named"), [
    ("s3a://[/logs", "log path 's3a://[/logs' cannot be"),
    ("s3a://bucket/logs", "give --format to read a URI with Spark"),
    ("missing.csv", "missing.csv: no such file"),
], ids=["unparsed", "no-format", "missing"])
def test_a_log_path_spark_cannot_read_is_refused_before_a_session_starts(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        path: str, named: str) -> None:
    """What can be told of the paths without Spark is told before its JVM starts: a
    path that could not be parsed took 15-20 s (a local Spark session started) to be
    refused in one line."""
    import shardex.heat.spark.session as session

    def no_session(*args: object, **kwargs: object) -> None:
        raise AssertionError("a Spark session was started")

    monkeypatch.setattr(session, "local_session", no_session)
    code, err = failing(capsys, "diagnose", path, "--engine", "spark")
    assert code in (1, 2)
    assert named in err, err


@pytest.mark.parametrize("argv", [
    ["routing", "show", "--index", "x", "--store",
     "dynamodb://orders?endpoint_url=http://[&region=us-east-1"],
    ["dynamodb", "create-table", "orders", "--region", "us-east-1", "--endpoint-url",
     "http://h:99999"],
    ["routing", "show", "--index", "x", "--store", "azure-tables://orders?endpoint=http://["],
    ["azure", "create-table", "orders", "--endpoint", "http://h:99999"],
    ["routing", "show", "--index", "x", "--store", "cosmos://db/c?endpoint=https://["],
    ["cosmos", "create-container", "db", "c", "--endpoint", "https://h:99999"],
], ids=["dynamodb", "dynamodb-create", "azure", "azure-create", "cosmos", "cosmos-create"])
def test_an_endpoint_urllib_cannot_read_is_refused_before_any_request(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        argv: list[str]) -> None:
    """A store's endpoint is read when the store is made: one line naming it, where
    before urllib's ValueError came out of the SDK (a traceback from ``azure
    create-table`` and ``dynamodb create-table``), or a port out of range read as a
    request that failed ("a write may or may not have applied")."""
    for variable in ("AZURE_STORAGE_CONNECTION_STRING", "COSMOS_CONNECTION_STRING"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT", "account")
    monkeypatch.setenv("AZURE_STORAGE_KEY", "a2V5")
    monkeypatch.setenv("COSMOS_KEY", "a2V5")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "local")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "local")
    code, err = failing(capsys, *argv)
    assert code in (1, 2)
    assert "endpoint" in err, err
    assert "cannot be parsed" in err, err


@pytest.mark.parametrize("command", [["demo"], ["simulate", "WORKLOAD"], ["diagnose", "LOG"]])
def test_a_plot_in_a_format_matplotlib_cannot_write_fails_before_the_run(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, command: list[str]) -> None:
    # matplotlib's "Format 'txt' is not supported" came out as a traceback after the run
    workload = tmp_path / "w.toml"
    workload.write_text("duration = 30\n[values.A]\nwrite = 1\n")
    log = tmp_path / "a.csv"
    log.write_text("timestamp,key,op,units\n2026-11-30T05:00:00Z,PENDING,write,1\n")
    args = [{"WORKLOAD": str(workload), "LOG": str(log)}.get(arg, arg) for arg in command]
    code, line = failing(capsys, *args, "--plot", str(tmp_path / "heat.txt"))
    assert code == 2
    assert f"--plot {tmp_path / 'heat.txt'}: matplotlib cannot write .txt files; name one of " \
           in line
    assert ".png" in line
    assert not (tmp_path / "heat.txt").exists()


def test_plan_from_a_diagnosis_names_the_file_and_row_of_a_bad_key(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"schema": "shardex.diagnose/1", "top": [
        {"key": "A", "peak_units_per_s": 10}, {"key": 7, "peak_units_per_s": 2000}]}))
    code, line = failing(capsys, "plan", "--from", str(path))
    assert code == 2
    assert f"{path}: top[1]: needs a key and its peak units" in line


def unroutable_log(tmp_path: Path) -> Path:
    """PENDING and A#B#3 (a key of another layout, no logical key) both over the ceiling."""
    path = tmp_path / "access.csv"
    lines = ["timestamp,key,op,units"]
    for second in range(10):
        lines += [f"{1796014800 + second},PENDING,write,3000",
                  f"{1796014800 + second},A#B#3,write,2000",
                  f"{1796014800 + second},{'K' * 1100},write,2000"]
    path.write_text("\n".join(lines) + "\n")
    return path


def planned_from(diagnosis: Path) -> tuple[dict[str, Any], str, str]:
    """``plan --from diagnosis``: its JSON document, its notes joined, and its text."""
    plan = json.loads(run("plan", "--from", str(diagnosis), "--json"))
    return plan, " ".join(plan["notes"]), " ".join(run("plan", "--from", str(diagnosis)).split())


def test_plan_from_skips_the_keys_a_diagnosis_found_unroutable(tmp_path: Path) -> None:
    diagnosis = tmp_path / "d.json"
    diagnosis.write_text(run("diagnose", str(unroutable_log(tmp_path)), "--json"))
    assert set(json.loads(diagnosis.read_text())["recommendation"]["unroutable"]) == {
        "A#B#3", "K" * 1100}
    plan, notes, text = planned_from(diagnosis)
    assert plan["schema"] == "shardex.plan/1"
    assert list(plan["values"]) == ["PENDING"]
    assert plan["values"]["PENDING"]["shards"] == 5
    assert "A#B#3" in notes
    assert "contains the separator '#'" in notes
    assert "1100 bytes" in notes
    assert "note: A#B#3 is not planned" in text


def five_hot_keys(tmp_path: Path) -> Path:
    """A to E each at 2,000 write units/s (each needs N=3), and 20 cold keys at 10."""
    path = tmp_path / "five.csv"
    lines = ["timestamp,key,op,units"]
    for second in range(10):
        lines += [f"{1796014800 + second},{key},write,2000" for key in "ABCDE"]
        lines += [f"{1796014800 + second},cold-{i},write,10" for i in range(20)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_plan_from_plans_every_key_the_recommendation_names(tmp_path: Path) -> None:
    diagnosis = tmp_path / "d.json"
    diagnosis.write_text(run("diagnose", str(five_hot_keys(tmp_path)), "--top", "2", "--json"))
    doc = json.loads(diagnosis.read_text())
    assert [row["key"] for row in doc["top"]] == ["A", "B"]
    assert doc["recommendation"]["shards"] == dict.fromkeys("ABCDE", 3)
    plan, notes, text = planned_from(diagnosis)
    assert {value: p["shards"] for value, p in plan["values"].items()} == dict.fromkeys("ABCDE",
                                                                                      3)
    assert plan["routing"]["overrides"].keys() == set("ABCDE")
    # the cold keys beyond top are not planned, and the plan says how much load that is
    assert "20 keys beyond the diagnosis's top are not planned" in notes
    assert "1.96% of its units" in notes
    assert "200.0 units/s" in notes
    assert "note: 20 keys beyond the diagnosis's top are not planned" in text


def test_simulate_offers_every_key_the_recommendation_names(tmp_path: Path) -> None:
    diagnosis = tmp_path / "d.json"
    diagnosis.write_text(run("diagnose", str(five_hot_keys(tmp_path)), "--top", "2", "--json"))
    doc = json.loads(run("simulate", str(diagnosis), "--duration", "5", "--json"))
    assert set(doc["values"]) == set("ABCDE")
    assert doc["values"]["E"]["offered_writes_per_s"] == 2000.0
    assert doc["values"]["E"]["shards"] == 1
    assert "20 keys beyond the diagnosis's top are not simulated" in " ".join(doc["notes"])


def test_ctrl_c_on_the_autopilot_says_where_it_stops(capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    """Ctrl-C stops the autopilot with one line, as it does a reshard's run: it had exited
    130 without a word (a probe)."""
    from shardex.autopilot import Autopilot

    async def interrupted(self: Autopilot, **_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(Autopilot, "run", interrupted)
    heat = tmp_path / "heat.jsonl"
    heat.write_text('{"t": 1, "key": "PENDING", "write_units": 10, "span": 5}\n')
    code, err = failing(capsys, "autopilot", "run", "--store", "memory://", "--index",
                        "orders", "--source", f"file:{heat}", "--dry-run")
    assert code == 130
    assert err.startswith("interrupted: the autopilot of index 'orders' stopped"), err
    # the command to paste: the store quoted, the source and --dry-run kept (a probe: a
    # URI with '&' broke it, and a dry run's line would have started a leader)
    assert f"to go on: shardex autopilot run --store memory:// --index orders --source " \
        f"file:{heat} --dry-run" in err, err


def test_a_profile_given_to_plan_table_is_refused_for_what_it_is(
        capsys: pytest.CaptureFixture[str]) -> None:
    """'--table profile=nosuch' is in SETTING=VALUE form: it said it was not (a probe)."""
    code, err = failing(capsys, "plan", "--peak", "PENDING=100", "--table", "profile=nosuch")
    assert code == 2
    assert "profile is no --table setting: the profile is the one --mode names" in err


def test_a_plot_path_the_system_refuses_is_refused_before_any_work(
        capsys: pytest.CaptureFixture[str]) -> None:
    """--plot /proc/x.png (a folder that exists, where no file can be made) exited 1 after
    the whole simulation; a missing folder exited 2 at once (a probe)."""
    code, err = failing(capsys, "simulate", "examples/orders_workload.toml", "--duration",
                        "5", "--plot", "/proc/x.png")
    assert (code, err) == (2, "error: --plot /proc/x.png: cannot be written (No such file "
                              "or directory)")


def test_simulate_autopilot_refuses_a_diagnosis_it_would_run_as_no_load(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A diagnosis's keys carry measured units, which the autopilot's runs do not take: a
    key at twice its partition ran as no load at all, 0 writes and "ok" in all three runs
    (a probe's note). It is refused, saying what to run instead."""
    log = tmp_path / "heat.csv"
    log.write_text("timestamp,key,op,units\n" + "".join(
        f"{1796014800 + second},P,write,40\n" for second in range(60) for _ in range(50)))
    diagnosis = tmp_path / "diagnosis.json"
    result = CliRunner().invoke(cli, ["diagnose", str(log), "--json"])
    assert result.exit_code == 0, result.output
    diagnosis.write_text(result.stdout)
    code, err = failing(capsys, "simulate", str(diagnosis), "--autopilot", "--duration", "60")
    assert code == 2
    assert f"{diagnosis} is a diagnosis: its keys (P) carry measured units" in err


# a store no request reaches: the commands' work is replaced before it connects
_NOWHERE = ("--store", "dynamodb://orders", "--endpoint-url", "http://127.0.0.1:9", "--region",
            "us-east-1", "--index", "o")


def _interrupt(*_: object, **__: object) -> Any:
    raise KeyboardInterrupt


def test_ctrl_c_on_a_control_says_it_may_have_applied_and_where_to_look(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C on a one-shot command printed click's blank line and exited 130 without a
    word (stop 45's found-not-fixed): a pause asked of a store that had not answered
    yet may still land, and the operator is not told where to look."""
    monkeypatch.setattr("shardex.commands.controls.run_noting", _interrupt)
    code, err = failing(capsys, "reshard", "pause", *_NOWHERE)
    assert code == 130
    assert err == ("interrupted: shardex reshard pause stopped before the store answered; "
                   "what it asked may or may not have applied; to see: shardex reshard "
                   "status"), err


def test_ctrl_c_on_a_read_says_it_changed_nothing(capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shardex.commands.routing.run_noting", _interrupt)
    code, err = failing(capsys, "routing", "show", "--store", "memory://", "--index", "o")
    assert code == 130
    assert err == "interrupted: shardex routing show stopped; it changes nothing", err


def test_ctrl_c_on_a_routing_change_points_at_routing_show(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shardex.commands.routing.run_noting", _interrupt)
    code, err = failing(capsys, "routing", "set", *_NOWHERE, "--default", "4")
    assert code == 130
    assert err.endswith("may or may not have applied; to see: shardex routing show"), err


def test_ctrl_c_on_a_status_read_once_says_it_changed_nothing(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A status read once said "stopped watching" on Ctrl-C, though it watched nothing;
    watched (--watch), it still does."""
    monkeypatch.setattr("shardex.commands.reshard._run", _interrupt)
    code, err = failing(capsys, "reshard", "status", *_NOWHERE)
    assert (code, err) == (130, "interrupted: shardex reshard status stopped; it changes "
                                "nothing")
    code, err = failing(capsys, "reshard", "status", *_NOWHERE, "--watch")
    assert (code, err) == (130, "stopped watching: the reshard goes on as it was")


def test_control_characters_of_a_key_are_shown_not_sent_to_the_terminal(
        tmp_path: Path) -> None:
    """A log's key with an escape sequence cleared the screen and coloured what followed;
    the table and the classification line show it escaped (rich markup in it too)."""
    log = tmp_path / "log.csv"
    log.write_text("timestamp,key,op,units\n1796014800,\x1b[2J\x1b[31mEVIL[b],write,1\n")
    result = CliRunner().invoke(cli, ["diagnose", str(log)])
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output
    assert "top_key=\\x1b[2J\\x1b[31mEVIL[b]" in result.output, result.output
    assert "│ \\x1b[2J\\x1b[31mEVIL[b] │" in result.output


@pytest.mark.parametrize(("args", "said"), [
    (["serve", "--demo", "--json", "--ceiling", ""], "unknown ceiling ''"),
    (["serve", "--prometheus", "http://127.0.0.1:9/metrics", "--rate", "5", "--json"],
     "--rate is the demo's writes a second: give it with --demo"),
    (["plan", "--peak", "A=10", "--ceiling", "1e-300"],
     "ceiling must be a number of units/s from 0.001 to 1e9, got '1e-300'"),
    (["plan", "--peak", "A=10", "--ceiling", "99999999999999999999999"],
     "ceiling must be a number of units/s from 0.001 to 1e9"),
], ids=["serve empty ceiling", "serve rate without demo", "tiny ceiling", "huge ceiling"])
def test_options_a_command_would_drop_or_misread_are_refused(
        capsys: pytest.CaptureFixture[str], args: list[str], said: str) -> None:
    """``serve --ceiling ''`` took the default, ``serve --prometheus ... --rate`` ignored
    the demo's rate, and a ceiling of 1e-300 units/s made a diagnosis whose ceiling read
    0.0 and whose keys each 'needed' 4,096 shards: each is one line and exit 2 now."""
    code, err = failing(capsys, *args)
    assert code == 2
    assert said in err, err


def test_diagnose_refuses_a_ceiling_out_of_range_and_autopilot_a_folder_of_heat(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = failing(capsys, "diagnose", str(sharded_log(tmp_path)), "--ceiling", "1e-300")
    assert (code, "from 0.001 to 1e9" in err) == (2, True), err
    code, err = failing(capsys, "autopilot", "run", "--store", "memory://", "--index", "x",
                        "--source", f"file:{tmp_path}", "--duration", "1", "--dry-run")
    assert code == 2
    assert "is a folder, not a file of samples" in err, err
