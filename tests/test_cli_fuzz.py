"""Fuzz the whole command line: Hypothesis draws arguments for every command of click's own
tree (so a new command or option is covered as soon as it exists) and runs each argv
in-process through ``shardex.cli.main``.

Every run must end in one of two ways: exit 0, or exit 1 or 2 with exactly one line on
stderr, ``error: ...`` (never a traceback: an exception escaping ``main`` fails the test);
a group given no command shows its help (exit 2).
Each drawn value knows whether it is one the command must refuse (a number past its
option's bounds or not finite, a logical key with the separator or a control character,
a choice that is not one, a file that does not exist); an argv holding one must not exit 0.

What runs, and what only parses:
- stores are ``memory://`` only, and the network is closed (any name lookup or connection
  off 127.0.0.1 fails), so nothing leaves the machine;
- ``demo`` (minutes of simulation at the largest arguments), ``serve`` (a server that runs
  until Ctrl-C), ``dynamodb``, ``azure`` and ``cosmos`` (they create tables in a real
  service; a new command of that kind joins ``PARSE_ONLY``) are
  exercised for argument parsing only: their body is replaced by a no-op, while every
  option's conversion, callback and the command line's conventions still run;
- options whose largest valid values would make a run long (``simulate --duration``,
  ``plan --verify-seconds``) draw small valid values and invalid ones, and ``--plot``
  draws only a path click refuses (a directory), so no run draws a picture.

CI draws a fixed, derandomized set of examples (a few seconds); ``SHARDEX_HYPOTHESIS=
explore`` draws new ones, many more.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import click
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shardex.cli import cli, main
from shardex.commands.params import STORE_URI, Duration, Finite

EXPLORE = os.environ.get("SHARDEX_HYPOTHESIS") == "explore"
PARSE_ONLY = ("demo", "serve", "dynamodb", "azure", "cosmos")
SKIPPED_OPTIONS = {"--verbose", "--help", "--version"}  # logging, help texts: not input
HOSTILE = ["", " ", "-", "--", "=", "#", "a#b", "P=", "=8", "x" * 3000, "\x1b[2J", "\u202e",
           "\udcff", "é", "PENDING", "orders", "1e308", "nan", "-1", "0", "{", "[]",
           "memory://", "memory://?seed=x", "memory://[", "foo://bar", "no-scheme"]


@dataclass(frozen=True)
class Drawn:
    """Tokens for one parameter, and whether the command must refuse them."""

    tokens: tuple[str, ...]
    bad: bool = False


def _files(root: Path) -> dict[str, tuple[Path, bool]]:
    """Input files by name, each with whether it exists."""
    deep = "[" * 50_000 + "]" * 50_000
    texts = {
        "access.csv": "timestamp,key,op,units,throttled\n"
                      + "".join(f"{1796014800 + s},PENDING#{k},write,700,{s % 2}\n"
                                for s in range(5) for k in range(2)),
        "access.jsonl": '{"timestamp": 1796014800, "key": "A", "op": "read", "units": 1}\n',
        "plan.json": json.dumps({"schema": "shardex.plan/1", "routing": {
            "format": "shardex.routing/1", "version": 1, "default": {"shards": 1},
            "overrides": {"PENDING": {"shards": 4, "strategy": "hash"}}}}),
        "routing.json": json.dumps({"default": {"shards": 1}, "overrides": {
            "P": {"shards": 2, "tier": "dedicated"}}}),
        "workload.toml": "duration = 5\n[values.PENDING]\nwrite = 1500\nitem_bytes = 200\n",
        "diagnosis.json": json.dumps({"schema": "shardex.diagnose/1", "top": [
            {"key": "PENDING", "peak_write_units_per_s": 1400.0}]}),
        "deep.json": deep,
        "deep.toml": f"a = {deep}\n",
        "garbage.bin": "\x00\xff\xfe garbage",
        "empty.txt": "",
    }
    out = {}
    for name, text in texts.items():
        path = root / name
        path.write_bytes(text.encode("utf-8", "surrogateescape"))
        out[name] = (path, True)
    out["missing"] = (root / "no" / "such.json", False)
    out["-"] = (Path("-"), True)  # standard input, where a command reads it
    return out


@dataclass(frozen=True)
class Pool:
    """The tokens an option may take: ``good`` ones (a run may succeed), ``bad`` ones (the
    command must refuse them) and ``odd`` ones (hostile, with no verdict)."""

    good: tuple[str, ...] = ()
    bad: tuple[str, ...] = ()
    odd: tuple[str, ...] = ()


def _number(kind: Any) -> Pool:
    """Values at and inside a numeric option's bounds, past them, and not numbers."""
    integer = isinstance(kind, click.IntRange)
    low, high = kind.min, kind.max
    good = [x for x in (low, high) if x is not None]
    if low is not None and high is not None:
        good.append((low + high) // 2 if integer else (low + high) / 2)
    if integer:
        bad = [str(low - 1)] if low is not None else []
        bad += [str(high + 1)] if high is not None else []
        bad += ["1.5", "x", "9" * 5000]
    else:
        bad = ["nan", "inf", "-inf", "1e400", "x"]
        bad += [repr(low - 1.0)] if low is not None else []
        bad += [repr(high * 10 + 1)] if high is not None else []
        if low is not None and kind.min_open:
            bad.append(repr(low))
            good.remove(low)
    return Pool(tuple(str(g) for g in good or [1]), tuple(bad))


# the tokens of options and arguments that are not told by their type, by parameter name
_BY_NAME = {
    "ceiling": Pool(("dynamodb", "azure-tables", "1000"), (), ("oracle", "-1", "nan")),
    "store": Pool(("memory://", "memory://?warm_write=40000"), (),
                  ("orders", "memory://[", "memory://?partitions=1000000000",
                   "memory://?warm_write=1e15")),
    "settings": Pool(("warm_write=40000", "split_delay_seconds=300"), (),
                     ("warm_write=1e15", "partitions=1000000000", "nosuch=1", "warm_write=nan",
                      "=", "warm_write")),
    "url": Pool(("http://127.0.0.1:9/metrics",), (), ("not a url",)),
    "attribute": Pool(("status",), (), ("",)),
    "table": Pool(("orders",), (), ("",)),
    "verify_seconds": Pool(("1", "5"), ("0", "x", "-3")),
    "duration": Pool(("1", "5"), ("0", "x", "-3")),  # simulate's: an hour is seconds of work
}


# the input files that suit a parameter, by its name (the others are drawn as odd ones)
_FITTING = {"files": ("access.csv", "access.jsonl", "-"), "path": ("plan.json", "routing.json"),
            "layout": ("plan.json", "routing.json"), "workload": ("workload.toml",),
            "source_file": ("diagnosis.json", "-")}


def _pool(param: click.Parameter, files: dict[str, tuple[Path, bool]]) -> Pool:
    """The pool of tokens for one value of ``param``."""
    kind = param.type
    name = param.name or ""
    if name == "plot":  # a directory: refused by click before any work
        return Pool(bad=(str(next(iter(files.values()))[0].parent),))
    if name in _BY_NAME and not isinstance(kind, Finite | Duration):
        return _BY_NAME[name]
    if isinstance(kind, click.Path) or name in ("files", "source_file"):
        fits = _FITTING.get(name, ())
        must_exist = getattr(kind, "exists", False)
        return Pool(tuple(str(files[f][0]) for f in fits),
                    tuple(str(p) for p, there in files.values() if not there and must_exist),
                    tuple(str(p) for f, (p, there) in files.items()
                          if f not in fits and (there or not must_exist)))
    if isinstance(kind, click.IntRange | Finite | click.FloatRange):
        return _number(kind)
    if isinstance(kind, Duration):
        return Pool(("1s", "15m", "2"), ("-1", "1e3", "99999999d", "nan", "5x"))
    if isinstance(kind, click.Choice):
        return Pool(tuple(str(c) for c in kind.choices), ("nosuch", "", "JSON"))
    if kind.name in ("VALUE", "NAME"):  # a logical key or an index name
        return Pool(("orders", "PENDING"), ("a#b", "", "x\x1b", "\udcff"))
    if kind is STORE_URI:
        return Pool(("memory://", "memory://?seed=1"), ("no-scheme", "memory://\x1b"),
                    ("memory://?seed=x", "memory://["))
    if "=" in kind.name:  # VALUE=N and kin
        return Pool(("PENDING=8", "SHIPPED=3"), ("P=8:", "#=2", "P\x07=2", "nokey", "P=nan"),
                    ("P=0", "P=2:random", "P=8@dedicated", "dedicated=memory://?seed=2",
                     "P=1e3", "P=4097"))
    return Pool(odd=tuple(HOSTILE))


def _tokens(pool: Pool, clean: bool) -> st.SearchStrategy[Drawn]:
    """One value from ``pool``: a good one in a clean run, any one otherwise."""
    choices = [st.sampled_from(pool.good).map(lambda t: Drawn((t,)))] if pool.good else []
    if not clean:
        choices += [st.sampled_from(pool.bad).map(lambda t: Drawn((t,), bad=True))] \
            if pool.bad else []
        choices += [st.sampled_from(pool.odd).map(lambda t: Drawn((t,)))] if pool.odd else []
    return st.one_of(choices) if choices else st.nothing()


def _argv(path: tuple[str, ...], command: click.Command, files: dict[str, tuple[Path, bool]],
          clean: bool) -> st.SearchStrategy[tuple[list[str], bool]]:
    """argv for ``command``: its path, some of its options, its arguments; and whether a
    value in it is one the command must refuse. A clean run draws good values only."""
    absent = st.just(Drawn(()))
    parts: list[st.SearchStrategy[Drawn]] = []
    for param in command.params:
        if isinstance(param, click.Option) and SKIPPED_OPTIONS & set(param.opts):
            continue
        if isinstance(param, click.Option) and (param.is_flag or param.count):
            parts.append(st.sampled_from([Drawn(()), Drawn((param.opts[0],))]))
            continue
        values = _tokens(_pool(param, files), clean)
        if isinstance(param, click.Argument):
            if param.nargs == -1:
                values = st.lists(values, min_size=1, max_size=2).map(lambda ds: Drawn(
                    tuple(t for d in ds for t in d.tokens), any(d.bad for d in ds)))
            parts.append(values)
            continue
        assert isinstance(param, click.Option)
        given = values.map(lambda d, flag=param.opts[0]: Drawn((flag, *d.tokens), d.bad))
        # an option is left out two times in three, unless it must be given
        parts.append(given if param.required else st.one_of(absent, absent, given))
    return st.tuples(*parts).flatmap(lambda drawn: st.permutations(
        [d for d in drawn if d.tokens]).map(lambda ds: (
            [*path, *(t for d in ds for t in d.tokens)], any(d.bad for d in ds))))


def _commands(command: click.Command, path: tuple[str, ...] = ()
              ) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            yield from _commands(sub, (*path, name))
    else:
        yield path, command


@contextlib.contextmanager
def no_network() -> Iterator[None]:
    """Any name lookup or connection off the loopback interface fails."""
    loopback = ("127.0.0.1", "::1", "localhost")
    lookup, connect = socket.getaddrinfo, socket.socket.connect

    def local_lookup(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in loopback:
            raise socket.gaierror(f"the fuzz test allows no network ({host!r})")
        return lookup(host, *args, **kwargs)

    def local_connect(self: socket.socket, address: Any) -> Any:
        if isinstance(address, tuple) and address[0] not in loopback:
            raise OSError(f"the fuzz test allows no network ({address!r})")
        return connect(self, address)

    with mock.patch.object(socket, "getaddrinfo", local_lookup), \
            mock.patch.object(socket.socket, "connect", local_connect):
        yield


def run(argv: list[str]) -> tuple[int, str, str]:
    """Run ``shardex ARGV`` in-process: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    stdin = io.TextIOWrapper(io.BytesIO(b"timestamp,key,op,units\n1796014800,A,write,1\n"))
    code: Any = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            mock.patch.object(sys, "stdin", stdin):
        try:
            main(argv)
        except SystemExit as done:
            code = done.code
    return (code if isinstance(code, int) else -1), out.getvalue(), err.getvalue()


def check(argv: list[str], must_refuse: bool, code: int, out: str, err: str) -> None:
    if code == 0:
        assert not must_refuse, f"{argv!r} exited 0 although a value must be refused:\n{err}"
        assert "error" not in err.lower(), (argv, err)
        return
    assert code in (1, 2), (argv, code, err)
    if code == 2 and err.startswith("Usage: ") and "\nCommands:\n" in err:
        return  # a group given no command shows its help
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, (argv, err)
    assert lines[0].startswith("error: "), (argv, err)


@pytest.fixture
def quiet_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("SHARDEX_STORE", "SHARDEX_INDEX", "SHARDEX_PROFILE", "SHARDEX_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config-home"))
    monkeypatch.setenv("COLUMNS", "200")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, bool]]:
    return _files(tmp_path_factory.mktemp("fuzz-files"))


def _nothing(*args: Any, **kwargs: Any) -> None:
    """The body of a command exercised for argument parsing only."""


COMMANDS = dict(_commands(cli))
JUNK = st.lists(st.sampled_from([*HOSTILE[:12], "reshard", "rehsard", "routing", "-h"]),
                min_size=1, max_size=3).map(lambda tokens: (tokens, False))


def fuzz(argvs: st.SearchStrategy[tuple[list[str], bool]], examples: int) -> Counter[int]:
    """Run ``examples`` argv drawn from ``argvs`` and check each; count the exit codes."""
    codes: Counter[int] = Counter()
    patches = contextlib.ExitStack()
    for path, command in COMMANDS.items():
        if path[0] in PARSE_ONLY:
            patches.enter_context(mock.patch.object(command, "callback", _nothing))

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(argvs)
    def one(drawn: tuple[list[str], bool]) -> None:
        argv, must_refuse = drawn
        if any(token in ("-h", "--help") for token in argv):
            return  # help texts print and exit 0 by design
        code, out, err = run(argv)
        check(argv, must_refuse, code, out, err)
        codes[code] += 1

    with patches, no_network():
        one()
    return codes


def test_the_tree_is_walked() -> None:
    assert len(COMMANDS) >= 20
    assert ("reshard", "start") in COMMANDS


# ``diagnose --engine spark`` runs Spark: its case joins the suite's one Spark session (the
# ``spark`` fixture, on the Spark tests' worker) instead of starting a JVM of its own
SPARK_COMMANDS = {("diagnose",)}


@pytest.mark.usefixtures("quiet_environment")
@pytest.mark.parametrize("path", [
    pytest.param(path, marks=[pytest.mark.spark, pytest.mark.xdist_group("spark")]
                 if path in SPARK_COMMANDS else ())
    for path in sorted(COMMANDS)], ids=" ".join)
def test_no_argv_makes_a_traceback_or_a_zero_exit_on_a_refusal(
        path: tuple[str, ...], files: dict[str, tuple[Path, bool]],
        request: pytest.FixtureRequest) -> None:
    if path in SPARK_COMMANDS:
        request.getfixturevalue("spark")
    argvs = st.booleans().flatmap(lambda clean: _argv(path, COMMANDS[path], files, clean))
    codes = fuzz(argvs, 300 if EXPLORE else 12)
    assert set(codes) - {0, 1, 2} == set()


@pytest.mark.usefixtures("quiet_environment")
def test_no_command_makes_a_traceback() -> None:
    codes = fuzz(JUNK, 300 if EXPLORE else 12)
    assert set(codes) == {2}
