"""Every snippet of README.md and docs/*.md runs as written (tests/doc_snippets.py reads them).

Each doc is one test: its blocks run in order, as a reader would type them, in a fresh
directory that holds the checkout's ``examples/``, ``benchmarks/`` and ``src/``, with
``shardex`` and ``python`` on PATH (the ones of this environment, as README's install
command leaves them) and no ``.venv``. Shell blocks run in bash and must exit 0 (or the
``exit`` a comment declares); transcripts run their ``$`` lines and compare what each prints
with what the doc shows; Python blocks run as programs (a block that defines ``test_``
functions runs under pytest); an ``output`` block is compared with what the block before it
printed. Shapes, not figures, are compared unless a comment says the run is deterministic.

Stand-ins the test provides, so no snippet needs an account or a server of its own:

- ``pip install ...`` checks that what it names is installed here (every extra shardex
  declares, with the packages each requires): the test does not install.
- ``scripts/dynamodb-local``, ``scripts/azurite``, ``scripts/cosmos`` and ``scripts/redis``
  (``run CMD``, ``start``, ``stop``) hand CMD the server scripts/test started rather than
  start another; ``dynamodb://`` URIs reach DynamoDB Local through
  ``AWS_ENDPOINT_URL_DYNAMODB``, ``azure-tables://`` Azurite through
  ``AZURE_STORAGE_CONNECTION_STRING``, ``cosmos://`` the Cosmos DB server through
  ``COSMOS_ENDPOINT``/``COSMOS_KEY``.

Each ``##`` section of a doc is a test of its own (in a directory of its own), so xdist
spreads them; a section's blocks share files and the doc's file-wide comments.

Excluded, each by a ``skip`` comment in its doc that names why: ``scripts/test`` (the whole
suite, this test among it), the AWS CLI steps that need an AWS account (and the commands
that read what they download), a Spark job on YARN and S3, ``tail -f`` (runs until
Ctrl-C), and lists of benchmarks that run for minutes. Long commands that take bounds (the
demo, simulations, benchmarks with ``--quick`` or sizes, the examples) run through the
``sub`` comment their doc declares. Output shown without the command that printed it (the
figures of a benchmark's or the autopilot's day-long run, in prose) is not compared.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import textwrap
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from shardex.cli import cli
from tests import azurite, cosmos_server, dynamodb_local
from tests.doc_snippets import (
    DOCS,
    ROOT,
    Directive,
    DirectiveError,
    Snippet,
    read_doc,
    read_parts,
    shape_mismatch,
    substitute,
    synopsis_commands,
)
from tests.servers import require

SHARED = ("examples", "benchmarks", "src")
DEFAULT_TIMEOUT = 60.0
MARK = "<<<doc-test rc "

# The servers a doc's text implies, and how to reach each.
IMPLIED = {"dynamodb": ("dynamodb://", "dynamodb-local", "dynamodb create-table"),
           "azure": ("azure-tables://", "scripts/azurite", "azure create-table"),
           "cosmos": ("cosmos://", "scripts/cosmos", "cosmos create-container")}
REQUIRE = {"dynamodb": dynamodb_local.require_endpoint,
           "azure": azurite.require_endpoint,
           "cosmos": cosmos_server.require_endpoint,
           "redis": lambda: require("SHARDEX_REDIS_URL", "starts redis-server"),
           "prometheus": lambda: require("SHARDEX_PROMETHEUS_URL", "starts Prometheus")}

PIP = '''\
"""doc-test's pip: `pip install` checks that what it names is installed; it installs nothing."""
import re, sys
import importlib.metadata as md
from packaging.requirements import Requirement

args = [a for a in sys.argv[1:] if not a.startswith("-")]
if not args or args[0] != "install":
    sys.exit("doc-test pip: only `pip install` is known here")
missing = []
for spec in args[1:]:
    name, extras = re.fullmatch(r"([^\\[]+)(?:\\[(.*)\\])?", spec).groups()
    name = "shardex" if name == "." else name
    try:
        md.version(name)
    except md.PackageNotFoundError:
        missing.append(spec)
        continue
    known = set(md.metadata(name).get_all("Provides-Extra") or ())
    for extra in filter(None, (extras or "").split(",")):
        if extra not in known:
            sys.exit(f"doc-test pip: {name} has no extra {extra!r} (it has {sorted(known)})")
        for line in md.requires(name) or ():
            requirement = Requirement(line)
            if requirement.marker and requirement.marker.evaluate({"extra": extra}):
                try:
                    md.version(requirement.name)
                except md.PackageNotFoundError:
                    missing.append(f"{requirement.name} (of {name}[{extra}])")
if missing:
    sys.exit(f"doc-test pip: not installed here: {', '.join(missing)}")
print("doc-test pip: already installed:", " ".join(args[1:]))
'''

SERVER_SCRIPT = '''\
#!/usr/bin/env bash
# doc-test's stand-in for scripts/{name}: the server scripts/test started, not another
case "${{1:-}}" in
  run) shift; exec "$@" ;;
  start) echo "export {exports}" ;;
  stop|install) ;;
  *) echo "usage: $0 run CMD... | start | stop" >&2; exit 2 ;;
esac
'''
EXPORTS = {"dynamodb-local": ("SHARDEX_DYNAMODB_ENDPOINT", "AWS_ENDPOINT_URL_DYNAMODB",
                              "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                              "AWS_DEFAULT_REGION"),
           "azurite": ("SHARDEX_AZURITE_ENDPOINT", "AZURE_STORAGE_CONNECTION_STRING"),
           "cosmos": ("SHARDEX_COSMOS_ENDPOINT", "COSMOS_ENDPOINT", "COSMOS_KEY"),
           "redis": ("SHARDEX_REDIS_URL",)}

ASYNC_RUNNER = '''\
import shardex

async def _doc_test_main() -> None:
{body}

shardex.run_virtual(_doc_test_main())
'''


@dataclass
class Ran:
    """What a block printed (stdout and stderr together, as a terminal shows them)."""

    output: str
    code: int


def _environment(workdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "COV_", "SHARDEX_STORE", "SHARDEX_INDEX",
                                "SHARDEX_PROFILE", "SHARDEX_CONFIG", "VIRTUAL_ENV"))}
    shims = workdir / ".doc-test-bin"
    env["PATH"] = os.pathsep.join((str(shims), str(Path(sys.executable).parent),
                                   env.get("PATH", "/usr/bin:/bin")))
    env["HOME"] = str(workdir / ".home")
    env["XDG_CONFIG_HOME"] = str(workdir / ".home" / ".config")
    env["COLUMNS"] = "100"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if env.get("SHARDEX_DYNAMODB_ENDPOINT"):
        env["AWS_ENDPOINT_URL_DYNAMODB"] = env["SHARDEX_DYNAMODB_ENDPOINT"]
        env.setdefault("AWS_ACCESS_KEY_ID", "local")
        env.setdefault("AWS_SECRET_ACCESS_KEY", "local")
        env.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    if env.get("SHARDEX_COSMOS_ENDPOINT"):
        env.setdefault("COSMOS_ENDPOINT", env["SHARDEX_COSMOS_ENDPOINT"])
    return env


def _prepare(workdir: Path) -> None:
    for name in SHARED:
        (workdir / name).symlink_to(ROOT / name)
    shims = workdir / ".doc-test-bin"
    shims.mkdir()
    pip = shims / "pip"
    pip.write_text(f"#!{sys.executable}\n{PIP}")
    pip.chmod(0o755)
    scripts = workdir / "scripts"
    scripts.mkdir()
    for name, variables in EXPORTS.items():
        exports = " ".join(f'{v}=\\"${{{v}:-}}\\"' for v in variables)
        script = scripts / name
        script.write_text(SERVER_SCRIPT.format(name=name, exports=exports))
        script.chmod(0o755)
    (workdir / ".home" / ".config").mkdir(parents=True)
    aws = workdir / ".home" / ".aws"  # the AWS profiles the docs name, on the local server
    aws.mkdir()
    (aws / "config").write_text("[default]\nregion = us-east-1\n"
                                "[profile prod]\nregion = eu-west-1\n")
    (aws / "credentials").write_text("[default]\naws_access_key_id = local\n"
                                     "aws_secret_access_key = local\n[prod]\n"
                                     "aws_access_key_id = local\naws_secret_access_key = local\n")


class DocRun:
    """One doc's blocks run in order in one directory."""

    def __init__(self, workdir: Path, env: dict[str, str]) -> None:
        self.workdir = workdir
        self.env = env
        self.values = {"uid": uuid.uuid4().hex[:10], **env}
        self.last: Ran | None = None
        self.last_snippet: Snippet | None = None

    def bash(self, script: str, snippet: Snippet, env: dict[str, str]) -> Ran:
        limit = float((snippet.args("timeout") or [DEFAULT_TIMEOUT])[-1])
        started = time.monotonic()
        try:
            done = subprocess.run(["bash", "-c", script], cwd=self.workdir, env=env,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, timeout=limit)
            print(f"{snippet.where}: {time.monotonic() - started:.1f} s")  # shown with -s
        except subprocess.TimeoutExpired as exc:
            shown = exc.output if isinstance(exc.output, str) else (exc.output or b"").decode()
            pytest.fail(f"{snippet.where}: still running after {limit:g} s:\n{shown[-3000:]}")
        return Ran(done.stdout, done.returncode)

    def block_env(self, snippet: Snippet) -> dict[str, str]:
        env = dict(self.env)
        for args in snippet.args("env"):
            name, _, value = args.partition("=")
            env[name] = substitute(value, snippet, self.values) if "{" in value else value
        return env

    def setup(self, snippet: Snippet, env: dict[str, str], verb: str = "setup") -> None:
        """Run the block's ``setup`` (or ``check``) commands; each must exit 0."""
        for command in snippet.args(verb):
            command = command.replace("{uid}", self.values["uid"])
            ran = self.bash(command, snippet, env)
            assert ran.code == 0, (f"{snippet.where}: {verb} {command!r} exited {ran.code}:\n"
                                   f"{ran.output[-3000:]}")

    def run(self, snippet: Snippet) -> None:
        kind = snippet.kind
        if snippet.has("skip") or kind == "data":
            return
        text = substitute(snippet.text, snippet, self.values)
        if kind == "file":
            target = self.workdir / snippet.args("file")[-1]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            self.setup(snippet, self.block_env(snippet), "check")
            return
        if kind == "output":
            self.compare(snippet, text)
            return
        env = self.block_env(snippet)
        self.setup(snippet, env)
        if snippet.has("synopsis"):
            self.synopsis(snippet, text)
            return
        if kind == "command":
            ran = self.bash("set -eo pipefail\n" + text, snippet, env)
            self.check_exit(snippet, ran)
        elif kind == "transcript":
            ran = self.transcript(snippet, text, env)
        else:
            ran = self.python(snippet, text, env)
        self.setup(snippet, env, "check")
        self.last, self.last_snippet = ran, snippet

    def check_exit(self, snippet: Snippet, ran: Ran) -> None:
        wanted = int((snippet.args("exit") or ["0"])[-1])
        assert ran.code == wanted, (f"{snippet.where}: exited {ran.code}, not {wanted}:\n"
                                    f"{ran.output[-4000:]}")

    def python(self, snippet: Snippet, text: str, env: dict[str, str]) -> Ran:
        body = "\n".join([*snippet.args("prelude"), text])
        if snippet.has("async"):
            body = ASYNC_RUNNER.format(body=textwrap.indent(body, "    "))
        name = f"{'test_' if 'def test_' in body else ''}snippet_{snippet.line}.py"
        (self.workdir / name).write_text(body)
        command = (f"python -m pytest -q -p no:cacheprovider {name}" if name.startswith("test_")
                   else f"python {name}")
        ran = self.bash(command, snippet, env)
        self.check_exit(snippet, ran)
        return ran

    def transcript(self, snippet: Snippet, text: str, env: dict[str, str]) -> Ran:
        """Run each ``$`` line in one shell; check each one's output and exit."""
        steps: list[tuple[str, str]] = []
        for line in text.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], ""))
            elif steps and steps[-1][0].endswith("\\") and not steps[-1][1]:
                steps[-1] = (steps[-1][0] + "\n" + line, "")
            elif steps:
                steps[-1] = (steps[-1][0], steps[-1][1] + line + "\n")
        # $? is the last command's, as at a prompt: the markers between keep it
        script = "__rc=0\n" + "".join(
            f"echo '{MARK}{k}'; (exit $__rc)\n{command}\n__rc=$?; echo '{MARK}'$__rc\n"
            for k, (command, _) in enumerate(steps))
        ran = self.bash(script, snippet, env)
        outputs = ran.output.split(MARK)
        exact = snippet.has("exact")
        for k, (command, shown) in enumerate(steps):
            assert 2 * k + 2 < len(outputs), (f"{snippet.where}: the shell stopped before "
                                              f"{command!r}:\n{ran.output[-3000:]}")
            printed = outputs[2 * k + 1].split("\n", 1)[1]
            code = int(outputs[2 * k + 2].split("\n", 1)[0])
            refused = shown.lstrip().startswith("error:")
            wanted = int((snippet.args("exit") or ["0"])[-1]) if k == len(steps) - 1 else 0
            assert (code != 0) if refused else (code == wanted), (
                f"{snippet.where}: {command!r} exited {code}:\n{printed[-4000:]}")
            if shown.strip():
                mismatch = shape_mismatch(shown, printed, exact=exact)
                assert mismatch is None, (f"{snippet.where}: {command!r} printed what the "
                                          f"doc does not show: {mismatch}\n{printed[-4000:]}")
        return Ran(outputs[-1] if outputs else "", 0)

    def compare(self, snippet: Snippet, shown: str) -> None:
        if self.last is None or self.last_snippet is None:
            pytest.fail(f"{snippet.where}: an output block with no block run before it")
        mismatch = shape_mismatch(shown, self.last.output, exact=snippet.has("exact"))
        assert mismatch is None, (f"{snippet.where}: {self.last_snippet.where} printed what "
                                  f"the doc does not show: {mismatch}\n"
                                  f"{self.last.output[-4000:]}")

    def synopsis(self, snippet: Snippet, text: str) -> None:
        """Every command a synopsis shows exists, with every option it names."""
        for words, options in synopsis_commands(text):
            command: click.Command = cli
            for word in words[1:]:
                if not isinstance(command, click.Group):
                    break  # an argument
                found = command.get_command(click.Context(command), word)
                assert found is not None, f"{snippet.where}: {' '.join(words)}: no such command"
                command = found
            # a group run with options alone runs its `run` (shardex autopilot --store ...)
            default = (command.get_command(click.Context(command), "run")
                       if isinstance(command, click.Group) else None)
            known = {name for each in (command, default) if each is not None
                     for param in each.params
                     for name in (*param.opts, *param.secondary_opts)} | {"-h", "--help"}
            unknown = sorted(set(options) - known)
            assert not unknown, f"{snippet.where}: {' '.join(words)} has no option {unknown}"


def _servers(snippets: list[Snippet]) -> set[str]:
    needed: set[str] = set()
    for snippet in snippets:
        if snippet.has("skip") or snippet.kind in ("data", "output"):
            continue
        needed.update(name for args in snippet.args("servers") for name in args.split())
        needed.update(name for name, marks in IMPLIED.items()
                      if any(mark in snippet.text for mark in marks))
    return needed


PARTS = read_parts()


@pytest.mark.parametrize("snippets", [snippets for _, snippets in PARTS],
                         ids=[name for name, _ in PARTS])
def test_doc_snippets_run(snippets: list[Snippet], tmp_path: Path) -> None:
    for server in sorted(_servers(snippets)):
        REQUIRE[server]()
    _prepare(tmp_path)
    run = DocRun(tmp_path, _environment(tmp_path))
    for snippet in snippets:
        run.run(snippet)


def test_no_doc_command_needs_the_test_environment() -> None:
    """No snippet runs ``.venv/bin/...`` (scripts/test makes it) or scripts/test's own state."""
    found = [f"{s.where}: {line.strip()}" for path in DOCS for s in read_doc(path)
             if s.kind in ("command", "transcript", "python") and not s.has("skip")
             for line in s.text.splitlines() if ".venv/" in line or ".cache/" in line]
    assert not found, "\n".join(found)


def test_every_skip_names_its_reason_and_skips_are_rare() -> None:
    snippets = [s for path in DOCS for s in read_doc(path)]
    runnable = [s for s in snippets if s.kind in ("command", "transcript", "python")]
    skipped = [s for s in runnable if s.has("skip")]
    assert all(s.args("skip")[-1].strip("()") for s in skipped)
    assert len(skipped) <= len(runnable) // 4, shlex.join(s.where for s in skipped)


def test_the_shape_check_fails_on_other_words_and_frees_numbers_only() -> None:
    shown = "plan: 1,920 rows ...\n┃ PENDING │ 64.6% │ 1 → 3 │\nnext: shardex run --store URI"
    printed = ("intro\nplan: 7 rows and more\n│ PENDING   │  12.0% │ 1 → 4 │\n"
               "next: shardex run --store URI")
    assert shape_mismatch(shown, printed) is None
    assert shape_mismatch(shown, printed.replace("PENDING", "SHIPPED")) is not None
    assert shape_mismatch(shown, printed, exact=True) is not None
    assert shape_mismatch("a (...) b", "a (any words here) b") is None
    assert shape_mismatch("b ... a", "a b") is not None  # order counts


def test_a_doc_test_comment_is_read_strictly() -> None:
    with pytest.raises(DirectiveError, match="names its reason"):
        Directive.parse("skip", "x.md:1")
    with pytest.raises(DirectiveError, match="unknown doc-test verb"):
        Directive.parse("skipp (why)", "x.md:1")
    sub = Directive.parse("sub shardex demo => shardex demo --duration {uid}", "x.md:2")
    snippet = Snippet("x.md", 3, "sh", "shardex demo\n", (sub,))
    assert substitute(snippet.text, snippet, {"uid": "7"}) == "shardex demo --duration 7\n"
    missing = Snippet("x.md", 3, "sh", "shardex plan\n", snippet.directives)
    with pytest.raises(DirectiveError, match="not in the block"):
        substitute(missing.text, missing, {"uid": "7"})


def test_every_json_schema_shardex_prints_is_documented() -> None:
    """Each ``shardex.NAME/N`` the source names is in docs/json.md's table or in the doc
    it points to (``shardex.autopilot.log/1`` was in neither)."""
    import re

    root = Path(__file__).parent.parent
    named = {m for path in (root / "src" / "shardex").rglob("*.py")
             for m in re.findall(r'"(shardex\.[a-z.-]+/\d+)"', path.read_text())}
    assert len(named) > 15
    index = (root / "docs" / "json.md").read_text()
    docs = {path.name: path.read_text() for path in (root / "docs").glob("*.md")}
    undocumented = sorted(s for s in named if not any(
        f"`{s}`" in text for text in docs.values()))
    assert not undocumented
    assert "`shardex.autopilot.log/1`" in index
