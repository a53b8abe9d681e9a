"""Inputs refused at the edge: every case the command line once took, now one line and a
non-zero exit naming what is wrong, before any store is touched.

Each case is one a user met (issue 23): numbers out of range or not finite, tier names
no ``--tier`` gives, values the API would refuse, a ``memory://`` tier beside a store
that persists, and nested input that blew the stack.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shardex.cli import main

STORE = ["--store", "memory://", "--index", "orders"]
# a DynamoDB endpoint on the discard port: refused before any request is made
DYNAMODB = ["--store", "dynamodb://orders?region=us-east-1&endpoint_url=http://127.0.0.1:9",
            "--index", "orders"]


def refused(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Run ``shardex ARGS`` in-process; return its exit code and its one stderr line."""
    with pytest.raises(SystemExit) as done:
        main(list(args))
    code = done.value.code
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err
    return (code if isinstance(code, int) else -1), lines[0]


CASES: dict[str, tuple[list[str], str]] = {
    "--margin 0": (["reshard", "start", *STORE, "--set", "P=8", "--margin", "0", "--dry-run"],
                   "'--margin': '0' is not in the range 0.1s<=x<=1d"),
    "--margin 99999999d": (["reshard", "start", *STORE, "--set", "P=8", "--margin",
                            "99999999d", "--dry-run"],
                           "'--margin': '99999999d' is not in the range"),
    "--margin past a float": (["adopt", "start", *STORE, "--from-gsi", "g", "--from-attribute",
                               "a", "--margin", "9" * 400 + "d"], "'--margin'"),
    "--workers 100000000": (["reshard", "run", *STORE, "--workers", "100000000"],
                            "'--workers': 100000000 is not in the range 1<=x<=1024"),
    "--every nan": (["reshard", "run", *STORE, "--every", "nan"],
                    "'--every': 'nan' is not a finite number"),
    "--every inf on the live page": (["serve", "--demo", "--every", "inf", "--json"],
                                     "'--every': 'inf' is not a finite number"),
    "serve --demo --rate 1e308": (["serve", "--demo", "--rate", "1e308", "--json"],
                                  "'--rate': 1e+308 is not in the range 0<x<=1000000"),
    "demo --duration 1e9": (["demo", "--duration", "1e9"], "'--duration'"),
    "demo --seed -1": (["demo", "--seed", "-1"], "'--seed'"),
    "diagnose --top 0": (["diagnose", "x.csv", "--top", "0"], "'--top'"),
    "a headroom of nan": (["diagnose", "x.csv", "--headroom", "nan"], "'--headroom'"),
    "--set PENDING=8@nosuch": (["reshard", "start", *STORE, "--set", "PENDING=8@nosuch",
                                "--dry-run"], "names tier 'nosuch', which has no store: give "
                                              "--tier nosuch=URI (tiers given: none)"),
    "--override PENDING=8@nosuch": (["routing", "set", *STORE, "--override",
                                     "PENDING=8@nosuch"], "names tier 'nosuch'"),
    "--default 2@nosuch": (["reshard", "start", *STORE, "--default", "2@nosuch", "--dry-run"],
                           "'--default': names tier 'nosuch'"),
    "--set PENDING=8:": (["reshard", "start", *STORE, "--set", "PENDING=8:", "--dry-run"],
                         "expected N, N:strategy or either with @tier, got '8:'"),
    "--set PENDING=8_0": (["reshard", "start", *STORE, "--set", "PENDING=8_0", "--dry-run"],
                          "got '8_0'"),
    "--set with an empty tier": (["routing", "set", *STORE, "--override", "P=8@"],
                                 "tier name"),
    "a control character in a value": (["reshard", "start", *STORE, "--set", "PEN\x1bDING=8",
                                        "--dry-run"], "holds a control character (U+001B)"),
    "a control character in --value": (["reshard", "start", *STORE, "--default", "2",
                                        "--value", "A\x07", "--dry-run"], "(U+0007)"),
    "a control character in an index name": (["routing", "show", "--store", "memory://",
                                              "--index", "ix\x7f"], "(U+007F)"),
    "a control character in a store URI": (["routing", "show", "--store", "memory://\x1b[2J",
                                            "--index", "ix"], "store URI"),
    "a separator in --remove": (["routing", "set", *STORE, "--remove", "A#1"], "separator"),
    "a lone surrogate from undecodable argv": (["routing", "set", *STORE, "--override",
                                                "P\udcff=2"], "unpaired surrogate"),
    "--tier NAME=memory:// for a DynamoDB index": (
        ["reshard", "status", *DYNAMODB, "--tier", "dedicated=memory://"],
        "'--tier': tier 'dedicated' on memory:// would last one process"),
    "--tier with a bad name": (["reshard", "status", *DYNAMODB, "--tier", "-x=memory://"],
                               "tier name"),
    "plan --partitions 1000000000": (["plan", "--peak", "P=100", "--partitions", "1000000000"],
                                     "'--partitions'"),
    "a table of 10^12 partitions": (["plan", "--peak", "P=100", "--table", "warm_write=1e15"],
                                    "at most 100,000 are modelled"),
    "simulate on 10^9 partitions": (["simulate", "w.toml", "--store",
                                     "memory://?partitions=1000000000"],
                                    "at most 100,000 are modelled"),
    "plan --amplification inf": (["plan", "--peak", "P=1", "--amplification", "inf"],
                                 "finite"),
    "plan --latency-p99-ms nan": (["plan", "--peak", "P=1", "--latency-p99-ms", "nan"],
                                  "finite"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_refused_at_the_edge(case: str, capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.csv").write_text("timestamp,key,op,units\n1796014800,A,write,1\n")
    (tmp_path / "w.toml").write_text("duration = 5\n[values.P]\nwrite = 10\n")
    args, words = CASES[case]
    code, line = refused(capsys, *args)
    assert code == 2, line
    assert words in line, line


def test_a_deeply_nested_workload_or_layout_is_refused(capsys: pytest.CaptureFixture[str],
                                                       tmp_path: Path) -> None:
    deep_toml = tmp_path / "deep.toml"
    deep_toml.write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    code, line = refused(capsys, "simulate", str(deep_toml))
    assert (code, "nested too deeply" in line) == (2, True), line
    deep_json = tmp_path / "deep.json"
    deep_json.write_text("[" * 100_000 + "]" * 100_000)
    workload = Path(__file__).resolve().parent.parent / "examples" / "orders_workload.toml"
    code, line = refused(capsys, "simulate", str(workload), "--layout", str(deep_json))
    assert (code, "nested too deeply" in line) == (2, True), line
    code, line = refused(capsys, "reshard", "start", *STORE, "--file", str(deep_json),
                         "--dry-run")
    assert (code, "nested too deeply" in line) == (2, True), line
    # a log: a CloudTrail document, and a JSON line read as a stream
    code, line = refused(capsys, "diagnose", str(deep_json), "--format", "cloudtrail")
    assert (code, "nested too deeply" in line) == (2, True), line
    deep_line = tmp_path / "deep.jsonl"
    deep_line.write_text('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    code, line = refused(capsys, "diagnose", str(deep_line), "--stream", "--json")
    assert code == 2, line


def test_memory_is_refused_where_state_must_outlive_the_process(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, line = refused(capsys, "reshard", "start", *STORE, "--set", "PENDING=8")
    assert code == 2
    assert ("'--store': memory:// lasts one process, and 'reshard start' records state the "
            "next command reads: give a store that persists (dynamodb://, azure-tables://, "
            "cosmos://), or --dry-run") in line
    # the controls named 'reshard paused', 'adopt set' (the words of their report)
    for command in (["routing", "set", "--override", "P=2"], ["reshard", "run"],
                    ["reshard", "verify"], ["reshard", "cutover"], ["reshard", "complete"],
                    ["reshard", "rollback"], ["reshard", "pause"], ["reshard", "resume"],
                    ["adopt", "throttle", "--rate", "5"]):
        code, line = refused(capsys, *command, *STORE)
        assert (code, f"'{' '.join(command[:2])}' records state" in line) == (2, True), line
    # a dry run records nothing, and reading is harmless: both take memory://
    main(["reshard", "start", *STORE, "--set", "PENDING=8", "--dry-run", "--json"])
    assert '"dry_run": true' in capsys.readouterr().out
    main(["reshard", "status", *STORE])
    assert "no reshard under way" in capsys.readouterr().out


def test_reshard_start_and_routing_name_the_store_as_given(
        capsys: pytest.CaptureFixture[str]) -> None:
    """They named the store as they opened it (``azure-tables://orders1?endpoint=...`` on
    Azurite, its options reordered on memory://) where status names it as given."""
    given = "memory://?seed=3&partitions=2"
    where = ["--store", given, "--index", "orders", "--set", "PENDING=4", "--dry-run"]
    main(["reshard", "start", *where])
    assert capsys.readouterr().out.startswith(f"index 'orders' in {given}: would start ")
    main(["reshard", "start", *where, "--json"])
    assert json.loads(capsys.readouterr().out)["store"] == given
    main(["routing", "show", *where[:4], "--json"])
    assert json.loads(capsys.readouterr().out)["store"] == given
