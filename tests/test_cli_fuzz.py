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
  until Ctrl-C), ``dynamodb`` and ``azure`` (they create tables in a real service) are
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
PARSE_ONLY = ("demo", "serve", "dynamodb", "azure")
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


def _number(kind: Any) -> st.SearchStrategy[Drawn]:
    """Values at and past a numeric option's bounds, and ones that are not numbers."""
    integer = isinstance(kind, click.IntRange)
    low, high = kind.min, kind.max
    good = [x for x in (low, high) if x is not None]
    good += [(low + high) / 2 if not integer else (low + high) // 2] if good == [low, high] \
        else []
    if integer:
        bad = [str(low - 1)] if low is not None else []
        bad += [str(high + 1)] if high is not None else []
        bad += ["1.5", "x", "9" * 5000]
    else:
        bad = ["nan", "inf", "-inf", "1e400", "x"]
        bad += [repr(low - 1.0)] if low is not None else []
        bad += [repr(high * 10 + 1)] if high is not None else []
        bad += [repr(low)] if low is not None and kind.min_open else []
        good = [g for g in good if not (g == low and kind.min_open)]
    return st.one_of(st.sampled_from(good or [1]).map(lambda g: Drawn((str(g),))),
                     st.sampled_from(bad).map(lambda b: Drawn((b,), bad=True)))


def _value(param: click.Parameter, files: dict[str, tuple[Path, bool]],
           path: tuple[str, ...]) -> st.SearchStrategy[Drawn]:
    """A strategy for one value of ``param`` (a token, or a few for nargs=-1)."""
    kind = param.type
    name = param.name or ""
    some_file = st.sampled_from(sorted(files)).map(
        lambda f: Drawn((str(files[f][0]),), bad=not files[f][1]
                        and getattr(kind, "exists", False)))
    if name in ("plot",):
        return st.just(Drawn((str(next(iter(files.values()))[0].parent),), bad=True))
    if name == "verify_seconds" or (path == ("simulate",) and name == "duration"):
        return st.sampled_from([("1", False), ("5", False), ("0", True), ("x", True),
                                ("-3", True)]).map(lambda t: Drawn((t[0],), bad=t[1]))
    if isinstance(kind, click.Path) or name in ("files", "source_file"):
        if param.nargs == -1:
            return st.lists(some_file, min_size=1, max_size=2).map(
                lambda ds: Drawn(tuple(t for d in ds for t in d.tokens), any(d.bad for d in ds)))
        return some_file
    if isinstance(kind, click.IntRange | Finite | click.FloatRange):
        return _number(kind)
    if isinstance(kind, Duration):
        return st.sampled_from([("1s", False), ("15m", False), ("-1", True), ("1e3", True),
                                ("99999999d", True), ("nan", True), ("5x", True)]).map(
            lambda t: Drawn((t[0],), bad=t[1]))
    if isinstance(kind, click.Choice):
        return st.one_of(st.sampled_from([str(c) for c in kind.choices]).map(
            lambda c: Drawn((c,))), st.sampled_from(["nosuch", "", "JSON"]).map(
            lambda c: Drawn((c,), bad=True)))
    if kind.name in ("VALUE", "NAME"):  # a logical key or an index name
        return st.sampled_from([("orders", False), ("PENDING", False), ("a#b", True),
                                ("", True), ("x\x1b", True), ("\udcff", True)]).map(
            lambda t: Drawn((t[0],), bad=t[1]))
    if "=" in kind.name:  # VALUE=N and kin
        return st.sampled_from([("PENDING=8", False), ("P=2:random", False), ("P=8:", True),
                                ("#=2", True), ("P\x07=2", True), ("nokey", True),
                                ("P=0", False), ("P=8@dedicated", False), ("P=1e3", False),
                                ("dedicated=memory://", False), ("P=nan", True)]).map(
            lambda t: Drawn((t[0],), bad=t[1]))
    if name in ("uri", "store"):
        return st.sampled_from(["memory://", "memory://?seed=1", "memory://?seed=x",
                                "memory://[", "no-scheme", "memory://\x1b"]).map(
            lambda u: Drawn((u,), bad=u in ("no-scheme", "memory://\x1b")
                            and kind is STORE_URI))
    return st.sampled_from(HOSTILE).map(lambda s: Drawn((s,)))


def _argv(path: tuple[str, ...], command: click.Command,
          files: dict[str, tuple[Path, bool]]) -> st.SearchStrategy[tuple[list[str], bool]]:
    """argv for ``command``: its path, some of its options, its arguments; and whether a
    value in it is one the command must refuse."""
    parts: list[st.SearchStrategy[Drawn]] = []
    for param in command.params:
        if isinstance(param, click.Argument):
            parts.append(_value(param, files, path))
            continue
        assert isinstance(param, click.Option)
        if SKIPPED_OPTIONS & set(param.opts):
            continue
        flag = param.opts[0]
        if param.is_flag or param.count:
            option = st.sampled_from([Drawn(()), Drawn((flag,))])
        else:
            option = _value(param, files, path).map(
                lambda d, f=flag: Drawn((f, *d.tokens), d.bad))
            option = st.one_of(st.just(Drawn(())), option) if not param.required else option
        parts.append(option)
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


def _nothing(*args: Any, **kwargs: Any) -> None:
    """The body of a command exercised for argument parsing only."""


@pytest.mark.usefixtures("quiet_environment")
def test_no_argv_makes_a_traceback_or_a_zero_exit_on_a_refusal(tmp_path: Path) -> None:
    files = _files(tmp_path)
    commands = list(_commands(cli))
    assert len(commands) >= 20  # the tree was walked, not an empty group
    argvs = st.one_of(
        st.sampled_from(commands).flatmap(lambda pc: _argv(pc[0], pc[1], files)),
        # a mistyped command, or a group given odd tokens
        st.lists(st.sampled_from([*HOSTILE[:12], "reshard", "rehsard", "routing", "-h"]),
                 min_size=1, max_size=3).map(lambda tokens: (tokens, False)))
    patches = contextlib.ExitStack()
    for path, command in commands:
        if path[0] in PARSE_ONLY:
            patches.enter_context(mock.patch.object(command, "callback", _nothing))

    @settings(max_examples=3000 if EXPLORE else 150, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(argvs)
    def fuzz(drawn: tuple[list[str], bool]) -> None:
        argv, must_refuse = drawn
        if any(token in ("-h", "--help") for token in argv):
            return  # help texts print and exit 0 by design
        check(argv, must_refuse, *run(argv))

    with patches, no_network():
        fuzz()
