"""The command line's conventions, as an operator meets them: a store URI given once (an
environment variable or a config profile), ``--output`` beside ``--json``, ``-v``
anywhere, "did you mean", and one exit-code rule (2 usage, 1 refused by state)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

import shardex
from shardex.cli import main
from tests import dynamodb_local as local


@pytest.fixture(autouse=True)
def no_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No SHARDEX_* variable from the caller's shell, and a config home of this test's own."""
    for name in ("SHARDEX_STORE", "SHARDEX_INDEX", "SHARDEX_PROFILE", "SHARDEX_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config-home"))


def ok(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    main(list(args))
    captured = capsys.readouterr()
    assert "error" not in captured.err, captured.err
    return captured.out


def failing(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(list(args))
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err
    code = done.value.code
    return (code if isinstance(code, int) else -1), " ".join(lines[0].split())


def config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config-home" / "shardex" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def shown(out: str) -> tuple[str, str]:
    doc = json.loads(out)
    return doc["store"], doc["index"]


def test_the_store_and_index_come_from_the_environment(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARDEX_STORE", "memory://?seed=3")
    monkeypatch.setenv("SHARDEX_INDEX", "orders")
    assert shown(ok(capsys, "routing", "show", "--json")) == ("memory://?seed=3", "orders")
    # the command line wins over the environment
    assert shown(ok(capsys, "routing", "show", "--json", "--index", "other"))[1] == "other"
    monkeypatch.delenv("SHARDEX_STORE")
    code, line = failing(capsys, "routing", "show")
    assert code == 2
    assert ("Missing option '--store': give it, or set SHARDEX_STORE or store in a config "
            "profile") in line


def test_a_config_profile_gives_what_the_environment_does_not(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    config(tmp_path, '[default]\nstore = "memory://?seed=1"\nindex = "orders"\n'
                     'region = "eu-west-1"\n\n'
                     '[prod]\nstore = "memory://?seed=2"\nindex = "orders_by_status"\n'
                     'output = "json"\n')
    # [default] applies; its region does not fit memory:// and is left out, unasked
    assert "index 'orders' in memory://?seed=1 has no routing record" in ok(capsys, "routing",
                                                                           "show")
    assert shown(ok(capsys, "routing", "show", "--json")) == ("memory://?seed=1", "orders")
    # a profile named anywhere on the command line, its output setting included
    for args in (["--config-profile", "prod", "routing", "show"],
                 ["routing", "show", "--config-profile", "prod"]):
        assert shown(ok(capsys, *args)) == ("memory://?seed=2", "orders_by_status")
    monkeypatch.setenv("SHARDEX_PROFILE", "prod")
    assert shown(ok(capsys, "routing", "show"))[1] == "orders_by_status"
    # the environment wins over the profile, the command line over both
    monkeypatch.setenv("SHARDEX_INDEX", "from_env")
    assert shown(ok(capsys, "routing", "show"))[1] == "from_env"
    assert shown(ok(capsys, "routing", "show", "--index", "given"))[1] == "given"
    # --output table on the command line wins over the profile's json
    assert "has no routing record" in ok(capsys, "routing", "show", "--output", "table")
    # a --region given on the command line still does not fit memory://
    code, line = failing(capsys, "routing", "show", "--region", "eu-west-1")
    assert (code, "memory:// stores take no --region" in line) == (2, True)


def test_a_mistake_in_another_profile_does_not_stop_the_one_in_force(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A typo in [staging] had failed every command, whichever profile it read: only the
    profile in force is checked (as the AWS command line reads only its own)."""
    path = config(tmp_path, 'stray = "not a table"\n[default]\nstore = "memory://"\n'
                            'index = "orders"\n[staging]\nstroe = "memory://"\n'
                            '[broken]\nstore = 7\n')
    main(["routing", "show", "--json"])
    assert '"index": "orders"' in capsys.readouterr().out
    code, line = failing(capsys, "routing", "show", "--config-profile", "staging")
    assert code == 2
    assert f"config file {path}: profile [staging] has no setting 'stroe'" in line
    code, line = failing(capsys, "routing", "show", "--config-profile", "broken")
    assert (code, "[broken] store must be" in line) == (2, True), line
    code, line = failing(capsys, "routing", "show", "--config-profile", "stray")
    assert (code, "'stray' must be a profile table" in line) == (2, True), line


def test_a_bad_value_names_where_it_came_from(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    """A bad value from the config file was blamed on SHARDEX_INDEX (click names an
    option's environment variable whatever gave the value), and the file went unnamed;
    one from the command line named the variable too (a probe)."""
    path = config(tmp_path, '[default]\nindex = "a#b"\n[prod]\noutput = "yaml"\n')
    code, line = failing(capsys, "routing", "show", "--store", "memory://")
    assert code == 2
    assert f"Invalid value for '--index' (from index in [default] of config file {path}): " \
           "index name 'a#b' contains the separator" in line
    code, line = failing(capsys, "routing", "show", "--store", "memory://", "--index", "i",
                         "--config-profile", "prod")
    assert f"'--output' (from output in [prod] of config file {path}): 'yaml'" in line
    monkeypatch.setenv("SHARDEX_INDEX", "c#d")
    code, line = failing(capsys, "routing", "show", "--store", "memory://")
    assert "Invalid value for '--index' (from SHARDEX_INDEX): index name" in line
    code, line = failing(capsys, "routing", "show", "--store", "memory://", "--index", "e#f")
    assert "Invalid value for '--index': index name 'e#f'" in line


def test_a_bad_config_is_refused_naming_the_file(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    path = config(tmp_path, '[default]\nstroe = "memory://"\n')
    code, line = failing(capsys, "routing", "show", "--index", "ix")
    assert code == 2
    assert f"config file {path}: profile [default] has no setting 'stroe' (did you mean " \
           "'store'?)" in line
    config(tmp_path, '[default]\nstore = "memory://"\n')
    code, line = failing(capsys, "plan", "--peak", "P=1", "--config-profile", "nope")
    assert (code, f"config file {path} has no profile [nope]; it has: default" in line) == \
        (2, True)
    elsewhere = tmp_path / "elsewhere.toml"
    monkeypatch.setenv("SHARDEX_CONFIG", str(elsewhere))
    code, line = failing(capsys, "routing", "show", "--index", "ix")
    assert (code, f"config file {elsewhere} does not exist" in line) == (2, True)
    elsewhere.write_text("[default]\nstore = " + "[" * 50_000 + "]" * 50_000 + "\n")
    code, line = failing(capsys, "routing", "show", "--index", "ix")
    assert (code, "nested too deeply" in line) == (2, True)
    elsewhere.write_text('[default]\nstore = 7\n')
    code, line = failing(capsys, "routing", "show", "--index", "ix")
    assert (code, "[default] store must be the index's store URI (--store), got 7" in line) \
        == (2, True)


def test_tiers_come_from_the_profile(capsys: pytest.CaptureFixture[str],
                                     tmp_path: Path) -> None:
    config(tmp_path, '[default]\nstore = "memory://"\nindex = "orders"\n'
                     'tiers = { dedicated = "memory://?seed=9" }\n')
    out = ok(capsys, "reshard", "start", "--set", "BIG=4@dedicated", "--dry-run", "--json")
    assert json.loads(out)["values"]["BIG"]["to"] == {"shards": 4, "strategy": "hash",
                                                      "tier": "dedicated"}


def test_a_profile_gives_options_that_take_several_values(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # migrations list takes --index more than once: the README's own profile failed it
    # with "Invalid value for '--index' (env var: 'SHARDEX_INDEX'): Value must be an iterable"
    config(tmp_path, '[default]\nstore = "memory://"\nindex = "orders"\n')
    listed = json.loads(ok(capsys, "migrations", "list", "--json"))
    assert (listed["schema"], listed["migrations"]) == ("shardex.migrations.list/1", [])


def test_migrations_list_without_an_index_lists_every_index_the_store_holds(
        capsys: pytest.CaptureFixture[str]) -> None:
    # every store names its indexes (Store.indexes; on Azurite and the Cosmos DB server:
    # tests/listed_indexes.py); a new memory:// store holds none
    assert ok(capsys, "migrations", "list", "--store", "memory://") == \
        "no index has written to memory:// yet: no migrations recorded\n"


def test_tiers_in_a_profile_must_be_a_table(capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    path = config(tmp_path, '[default]\nstore = "memory://"\nindex = "orders"\n'
                            'tiers = "dedicated=memory://"\n')
    code, line = failing(capsys, "reshard", "start", "--set", "BIG=4@dedicated", "--dry-run")
    assert code == 2
    assert f"config file {path}: [default] tiers must be a table of tier name = store URI " \
           "(--tier)" in line


def test_output_json_or_table_beside_json(capsys: pytest.CaptureFixture[str]) -> None:
    store = ["--store", "memory://", "--index", "orders"]
    as_json = ok(capsys, "routing", "show", *store, "--json")
    assert ok(capsys, "routing", "show", *store, "--output", "json") == as_json
    assert ok(capsys, "routing", "show", *store, "--output", "table") == \
        ok(capsys, "routing", "show", *store)
    assert json.loads(ok(capsys, "plan", "--peak", "P=10", "--output", "json"))["schema"] == \
        "shardex.plan/1"
    code, line = failing(capsys, "routing", "show", *store, "--json", "--output", "table")
    assert (code, "'--output': table contradicts --json" in line) == (2, True)
    code, line = failing(capsys, "routing", "show", *store, "--output", "yaml")
    assert (code, "'yaml' is not one of 'json', 'table'" in line) == (2, True)
    # a command that prints text only says so, rather than a bare refusal
    code, line = failing(capsys, "reshard", "run", *store, "--output", "json")
    assert code == 2
    assert "'shardex reshard run' prints text only: it has no --json or --output" in line


@pytest.fixture
def shardex_logging() -> Iterator[None]:
    loggers = [logging.getLogger("shardex"), logging.getLogger()]
    saved = [(list(logger.handlers), logger.level) for logger in loggers]
    yield
    for logger, (handlers, level) in zip(loggers, saved, strict=True):
        logger.handlers[:] = handlers
        logger.setLevel(level)


def ours(logger: logging.Logger) -> list[logging.Handler]:
    return [h for h in logger.handlers if h.get_name() == "shardex-cli"]


@pytest.mark.usefixtures("shardex_logging")
def test_verbose_anywhere_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    shardex_logger = logging.getLogger("shardex")
    ok(capsys, "routing", "show", "--store", "memory://", "--index", "orders", "-v")
    assert shardex_logger.level == logging.INFO
    assert len(ours(shardex_logger)) == 1
    # once before the command and once after it: -vv, with one handler still
    ok(capsys, "-v", "routing", "-v", "show", "--store", "memory://", "--index", "orders")
    assert shardex_logger.level == logging.DEBUG
    assert len(ours(shardex_logger)) == 1
    ok(capsys, "plan", "--peak", "P=1", "-vvv")
    assert ours(shardex_logger) == []
    assert len(ours(logging.getLogger())) == 1


@pytest.mark.parametrize(("args", "words"), [
    (["rehsard"], "No such command 'rehsard'. Did you mean 'reshard'?"),
    (["reshard", "stat"], "Did you mean one of: 'start', 'status'?"),
    (["plan", "--peek", "P=1"], "No such option '--peek'. Did you mean '--peak'?"),
    (["reshard", "run", "--store", "memory://", "--index", "ix", "--until", "verifed"],
     "'verifed' is not one of 'read-both', 'write-new', 'verified', 'read-new', 'retired', "
     "'done'. Did you mean 'verified'?"),
    (["demo", "--scenario", "tenant"], "Did you mean 'tenants'?"),
])
def test_did_you_mean_in_one_line(capsys: pytest.CaptureFixture[str], args: list[str],
                                  words: str) -> None:
    code, line = failing(capsys, *args)
    assert (code, words in line) == (2, True), line


def test_a_group_without_a_command_shows_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    for args in ([], ["reshard"]):
        with pytest.raises(SystemExit) as done:
            main(args)
        assert done.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith(f"Usage: shardex {' '.join(args)}".rstrip() + " [OPTIONS]"), err
        assert "Commands:" in err


# -- one exit-code rule, on a store that outlives each command --------------------------


@pytest.mark.dynamodb
def test_routing_set_takes_a_plan_as_it_is_and_state_refusals_exit_1(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    local.require_endpoint()
    store = ["--store", local.table_store().uri, "--index", "orders"]
    plan = tmp_path / "plan.json"
    plan.write_text(ok(capsys, "plan", "--peak", "PENDING=6000", "--json"))
    shards = json.loads(plan.read_text())["values"]["PENDING"]["shards"]
    assert f"PENDING: 1 -> {shards} shard(s), hash" in ok(capsys, "routing", "set", *store,
                                                           "--file", str(plan))
    record = tmp_path / "record.json"
    record.write_text(ok(capsys, "routing", "show", *store, "--json"))
    assert json.loads(record.read_text())["routing"]["overrides"]["PENDING"]["shards"] == shards
    # refused by what the store holds: exit 1, whichever command meets it
    for args, words in [
        (["routing", "set", *store, "--file", str(record)], "nothing to change"),
        (["routing", "set", *store, "--override", "PENDING=2"], "reshard start"),
        (["reshard", "start", *store, "--set", f"PENDING={shards}"], "no value changes"),
        (["reshard", "start", *store, "--file", str(plan)], "no value changes"),
        (["reshard", "cutover", *store], "has no reshard under way"),
        (["reshard", "rollback", *store], "no reshard"),
    ]:
        code, line = failing(capsys, *args)
        assert (code, words in line) == (1, True), (args, line)
    # refused whatever the store holds: exit 2
    for args, words in [
        (["routing", "set", *store, "--default", "4"], "routing set keeps the default policy"),
        (["reshard", "start", *store, "--set", "PENDING=4@dedicated"], "names tier"),
        (["reshard", "start", *store, "--set", "PENDING=4", "--margin", "0"], "'--margin'"),
    ]:
        code, line = failing(capsys, *args)
        assert (code, words in line) == (2, True), (args, line)
    # {} was taken as a whole layout naming no value: every sharded value back to one key
    for empty in ("{}", '{"routing": {}}', '{"version": 2}'):
        (tmp_path / "empty.json").write_text(empty)
        for command in (["reshard", "start"], ["routing", "set"]):
            code, line = failing(capsys, *command, *store, "--file", str(tmp_path / "empty.json"),
                                 *(["--dry-run"] if command[0] == "reshard" else []))
            assert (code, "names no layout (neither default nor overrides)" in line) == \
                (2, True), (empty, command, line)
    # a plan for another value is a whole layout too: the sharded value it leaves out
    # goes back to the default, and the steps say why
    other = tmp_path / "other.json"
    other.write_text(ok(capsys, "plan", "--peak", "SHIPPED=2500", "--json"))
    text = "".join(ok(capsys, "reshard", "start", *store, "--file", str(other),
                      "--dry-run").split())  # as the console folds it: no spaces
    assert f"PENDING:{shards}shard(s),hash->1shard(s)" in text, text
    assert f"tomove(notin{other}:backtothedefault)" in text, text
    assert text.count("(notin") == 1  # the planned value carries no such note
    # a diagnosis names the keys it recommends for, not those it saw sharded and left
    # alone: they stay as they are (PENDING went back to one shard key, SHIPPED 4 -> 1)
    diagnosis = tmp_path / "diagnosis.json"
    diagnosis.write_text(json.dumps({"schema": "shardex.diagnose/1", "routing": {
        "default": {"shards": 1}, "overrides": {"SHIPPED": {"shards": 3}}}}))
    text = "".join(ok(capsys, "reshard", "start", *store, "--file", str(diagnosis),
                      "--dry-run").split())
    assert "SHIPPED:1shard(s),hash->3shard(s)" in text, text
    assert "PENDING" not in text, text


def test_no_help_describes_a_range_without_bounds() -> None:
    """Every float option is a finite number; one without bounds read "[x<=None]"."""
    from click.testing import CliRunner

    from shardex.cli import cli

    def commands(group: click.Group, path: list[str]) -> Iterator[list[str]]:
        for name, command in group.commands.items():
            yield [*path, name]
            if isinstance(command, click.Group):
                yield from commands(command, [*path, name])

    for words in commands(cli, []):
        shown = CliRunner().invoke(cli, [*words, "--help"], terminal_width=200)
        assert shown.exit_code == 0, (words, shown.output)
        assert "None]" not in shown.output, (words, shown.output)


@pytest.mark.parametrize("command", [
    ["status"], ["start", "--from-gsi", "old", "--from-attribute", "status", "--set", "A=4",
                 "--dry-run"],
    ["run"], ["verify"], ["cutover"], ["complete"], ["rollback"]],
    ids=lambda c: c[0])
def test_adopt_commands_open_their_store_with_the_connection_options(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        command: list[str]) -> None:
    """They had no --region, --profile or --endpoint-url (the docs say every command that
    opens a store does), and a config profile's were dropped."""
    from shardex.migrate.adopter import Adopter

    async def opened(self: Adopter) -> None:
        raise shardex.StoreError(f"opened at {self.store.client.endpoint}")

    monkeypatch.setattr(Adopter, "__aenter__", opened)
    store = ("dynamodb://orders?gsi=sharded&key_attribute=status_shard&"
             "sort_attribute=created&id_attribute=id")
    code, line = failing(capsys, "adopt", *command, "--store", store, "--index", "orders",
                         "--region", "eu-west-1", "--endpoint-url", "http://127.0.0.1:9")
    assert (code, line) == (1, "error: opened at http://127.0.0.1:9")


@pytest.mark.parametrize(("args", "fault"), [
    (["autopilot", "log", "--store", "memory://", "--index", "i", "--key", "a#b"],
     "logical key 'a#b' contains the separator '#'"),
    (["autopilot", "log", "--store", "memory://", "--index", "i", "--key", ""],
     "logical key must not be empty"),
    (["plan", "--peak", "A=5000", "--ceiling", ""], "unknown ceiling ''"),
    (["autopilot", "run", "--store", "memory://", "--index", "i", "--dry-run", "--duration",
      "1", "--source", "meter", "--ceiling", ""], "unknown ceiling ''"),
    (["routing", "show", "--store", "memory://", "--index", "i", "--config-profile", ""],
     "--config-profile: a profile name, not an empty one"),
], ids=["key #", "key empty", "plan ceiling", "autopilot ceiling", "config-profile"])
def test_an_empty_or_unroutable_value_is_refused_not_taken(
        capsys: pytest.CaptureFixture[str], args: list[str], fault: str) -> None:
    """Each was taken: autopilot log --key unchecked, an empty --ceiling as the default,
    an empty --config-profile as [default]."""
    code, line = failing(capsys, *args)
    assert code == 2
    assert fault in line, line


def test_a_config_file_that_is_a_directory_is_named_as_one(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    """It was said not to exist."""
    monkeypatch.setenv("SHARDEX_CONFIG", str(tmp_path))
    code, line = failing(capsys, "routing", "show", "--store", "memory://", "--index", "i")
    assert (code, line) == (2, f"error: config file {tmp_path} is a directory")


UNREACHED = "dynamodb://orders?region=us-east-1&endpoint_url=http://127.0.0.1:9"


@pytest.mark.parametrize(("args", "fault"), [
    (["routing", "set", "--override", "A=4", "--override", "A=5"],
     "Invalid value for '--override': given twice for 'A'"),
    (["routing", "set", "--override", "A=4", "--remove", "A"],
     "'A' is given to --override and to --remove: give one"),
    (["routing", "set", "--default", "2@nope"],
     "Invalid value for '--default': names tier 'nope', which has no store"),
    (["adopt", "start", "--from-gsi", "old", "--from-attribute", "status", "--set", "A=4@t"],
     "'A' names tier 't': an adoption shards values in the new GSI's own store"),
    (["reshard", "start", "--set", "A=4", "--value", "B"],
     "--value names values that follow the default, for a change of it: give --default"),
], ids=["override twice", "override and remove", "default tier", "adopt tier",
        "value without default"])
def test_contradictions_are_refused_before_the_store_is_reached(
        capsys: pytest.CaptureFixture[str], args: list[str], fault: str) -> None:
    """They went to the store (which, here, cannot be reached): --remove was dropped for
    the --override of the same value, the later --override won, a tier without a store,
    adopt start, which takes no tiers, took one, and reshard start ignored --value where
    the default does not change."""
    store = UNREACHED.replace("orders?", "orders?gsi=sharded&key_attribute=k&"
                              "sort_attribute=s&id_attribute=i&") if args[0] == "adopt" \
        else UNREACHED
    code, line = failing(capsys, *args, "--store", store, "--index", "orders")
    assert code == 2
    assert fault in line, line


@pytest.mark.parametrize(("args", "fault"), [
    (["demo", "--reshard", "--duration", "1", "--rate", "4"],
     "Invalid value for '--rate': with --reshard at least 50"),
    (["demo", "--reshard", "--duration", "1", "--rate", "1e-300"],
     "Invalid value for '--rate': with --reshard at least 50"),
    (["plan", "--peak", "A=5", "--ceiling", "1e-200"],
     "ceiling must be a number of units/s from 0.001 to 1e9, got '1e-200'"),
], ids=["reshard rate 4", "reshard rate tiny", "ceiling tiny"])
def test_a_value_below_what_the_model_takes_is_refused_naming_the_bound(
        capsys: pytest.CaptureFixture[str], args: list[str], fault: str) -> None:
    """A --rate of 4 with --reshard failed inside the run on the routing record's throttle
    (exit 1); 1e-300 was refused as a write_ceiling '> 0' of 2e-301, as was a ceiling of
    1e-200, which is above 0."""
    code, line = failing(capsys, *args)
    assert code == 2
    assert fault in line, line


@pytest.mark.parametrize(("args", "fault"), [
    (["--throttle-file", ""], "Invalid value for '--throttle-file': a file's path, not an "
                              "empty one"),
    (["--throttle-query", " ", "--throttle-above", "5", "--prometheus", "http://127.0.0.1:9"],
     "Invalid value for '--throttle-query': a PromQL query, not an empty one"),
], ids=["file", "query"])
def test_an_empty_throttle_signal_is_refused_before_the_store_is_reached(
        capsys: pytest.CaptureFixture[str], args: list[str], fault: str) -> None:
    """Both reached the store; an empty query would have failed at every ask, and a
    failed ask holds the movers."""
    code, line = failing(capsys, "reshard", "run", *args, "--store", UNREACHED, "--index",
                         "orders")
    assert code == 2
    assert fault in line, line


def test_a_drivers_warning_stays_off_stderr_without_verbose() -> None:
    """The Cosmos DB SDK's 'Marking https://... unavailable for Read' came out beside the
    command's one error line, through Python's last-resort handler (in a process of its
    own: pytest's log capture would stand in for that handler here)."""
    program = (
        "import logging, sys\n"
        "from shardex.cli import main\n"
        "try:\n"
        "    main(['plan', '--peak', 'A=100', '--json'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "for name in ('azure.cosmos', 'botocore.endpoint', 'urllib3.connectionpool',\n"
        "             'shardex.routing_record'):\n"  # 'refreshing the routing failed: ...'
        "    logging.getLogger(name).warning('Marking https://127.0.0.1:9/ unavailable')\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert '"schema": "shardex.plan/1"' in done.stdout
    assert done.stderr == ""


@pytest.mark.parametrize("option", ["--region", "--profile", "--endpoint-url"])
def test_an_empty_connection_option_is_refused(capsys: pytest.CaptureFixture[str],
                                               option: str) -> None:
    """An empty --region hid the URI's region, and the error then asked for one."""
    code, line = failing(capsys, "routing", "show", "--store", UNREACHED, "--index", "orders",
                         option, "")
    assert (code, line) == (2, f"error: Invalid value for '{option}': empty; leave it out to "
                               "use the store URI's or the environment's (see 'shardex "
                               "routing show --help')")


@pytest.mark.parametrize(("args", "fault"), [
    (["--table", "latency_median_ms=500"], "latency_median_ms is no capacity setting"),
    (["--table", "seed=3"], "seed is no capacity setting"),
    (["--table", "partitions=5", "--table", "partitions=6"],
     "Invalid value for --table: partitions is given twice"),
    (["--partitions", "3", "--table", "partitions=5"],
     "--partitions and --table partitions=N both set the table's partitions: give one"),
    (["--latency-median-ms", "50", "--latency-p99-ms", "10"],
     "Invalid value for --latency-p99-ms: latency p99_ms (10.0) must be >= median_ms (50.0)"),
    (["--eventual"], "--eventual prices a full listing's pages: give --listing-items with it"),
    (["--read-item-bytes", "300"],
     "--read-item-bytes prices a full listing's pages: give --listing-items with it"),
    (["--mode", "gsi", "--listing-items", "10000", "--eventual"],
     "--eventual: a GSI's queries are always eventually consistent, and its listings are "
     "priced so"),
    (["--mode", "azure", "--listing-items", "10000", "--eventual"],
     "--eventual: Azure Table Storage counts a listing's entities, whatever its "
     "consistency"),
    (["--mode", "cosmos", "--listing-items", "10000", "--eventual"],
     "--eventual: Cosmos DB reads at its account's consistency, not a request's"),
], ids=["latency setting", "seed setting", "twice", "partitions both", "latency order",
        "eventual without a listing", "read size without a listing", "eventual on a GSI",
        "eventual on Azure", "eventual on Cosmos DB"])
def test_plan_refuses_settings_it_would_not_use_or_that_contradict(
        capsys: pytest.CaptureFixture[str], args: list[str], fault: str) -> None:
    """The first two were taken and ignored, as --eventual and --read-item-bytes were
    without a listing to price, and --eventual where the store prices a listing the same
    either way; 'twice' named a store URI nobody gave; --partitions silently won over
    --table's; the latency error named no option."""
    code, line = failing(capsys, "plan", "--peak", "A=3000", *args)
    assert code == 2
    assert fault in line, line


@pytest.mark.parametrize(("args", "fault"), [
    (["--store", UNREACHED, "--region", "eu-west-1"],
     "Invalid value for '--region': 'eu-west-1' contradicts the store URI's region=us-east-1"),
    (["--store", UNREACHED, "--endpoint-url", "http://127.0.0.1:8"],
     "'http://127.0.0.1:8' contradicts the store URI's endpoint_url=http://127.0.0.1:9"),
], ids=["region", "endpoint"])
def test_a_connection_option_that_contradicts_the_uri_is_refused(
        capsys: pytest.CaptureFixture[str], args: list[str], fault: str) -> None:
    """The command line's silently replaced the URI's."""
    code, line = failing(capsys, "routing", "show", "--index", "orders", *args)
    assert code == 2
    assert fault in line, line


@pytest.mark.parametrize("until", [[], ["--until", "verified"], ["--until", "read-both"]],
                         ids=["default", "verified", "read-both"])
def test_reshard_run_refuses_a_max_age_no_cutover_of_it_reads(
        capsys: pytest.CaptureFixture[str], until: list[str]) -> None:
    """Only a cutover reads it; a run that stops before one took it and went unread."""
    code, line = failing(capsys, "reshard", "run", "--store", UNREACHED, "--index", "orders",
                         *until, "--max-age", "60")
    assert code == 2
    assert "--max-age bounds the parity report a cutover relies on" in line, line


def test_a_default_change_says_which_values_it_moves_and_what_others_risk(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A default change moves the values named by --value alone (the store cannot list
    the others): the start said nothing of it, and a value left unnamed was hidden."""
    out = " ".join(ok(capsys, "reshard", "start", "--store", "memory://", "--index", "i",
                      "--default", "2", "--value", "A", "--value", "B", "--dry-run").split())
    assert "the default changes: of the values that follow it, the reshard moves 'A', 'B' " \
        "(named by --value) alone; any other that holds entries stays on the old shard keys " \
        "and is hidden once readers read the new layout alone: name each one" in out, out
    plain = ok(capsys, "reshard", "start", "--store", "memory://", "--index", "i", "--set",
               "A=2", "--dry-run")
    assert "the default changes" not in plain


@pytest.mark.parametrize("args", [["reshard", "status"], ["reshard", "status", "--watch"]])
def test_a_reader_that_goes_away_ends_the_command_quietly(args: list[str]) -> None:
    """'reshard status | head -1' printed a traceback through asyncio ('Task exception was
    never retrieved ... SystemExit: 1'): rich ends a process whose stdout's reader went
    with SystemExit, which raised in a task asyncio logs as that task's error."""
    command = [sys.executable, "-m", "shardex", *args, "--store", "memory://", "--index",
               "orders"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as done:
        assert done.stdout is not None
        done.stdout.close()  # the reader goes before the command writes
        _, err = done.communicate(timeout=120)
    assert err == ""
    assert done.returncode == 1


def test_ctrl_c_while_the_command_loads_says_one_line(tmp_path: Path) -> None:
    """Ctrl-C in the second the command line takes to import the library printed a
    traceback through the imports ('from shardex.cli import main ... KeyboardInterrupt').
    A script named as the command takes Ctrl-C half-way through its imports."""
    script = tmp_path / "shardex"
    script.write_text("import os, signal\n"
                      "import shardex.starting\n"
                      "os.kill(os.getpid(), signal.SIGINT)\n"
                      "import shardex.cli\n"
                      "print('loaded on')\n")
    import signal

    # the command's own start: Ctrl-C as a terminal gives it, whatever this process was
    # given (a run started in the background of a script ignores SIGINT, and so would
    # the child, which the module then leaves alone)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, check=False,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert (done.returncode, done.stdout) == (130, "")
    assert done.stderr == "interrupted: shardex stopped as it started; nothing was done\n"
    # once main runs, Ctrl-C is its own again (KeyboardInterrupt, its one line)

    from shardex import starting

    before = signal.signal(signal.SIGINT, starting._stopped)
    try:
        main(["plan", "--peak", "A=100", "--json"])
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)
