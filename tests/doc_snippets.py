"""The fenced code blocks of README.md and docs/*.md, and the checks tests/test_docs.py makes.

A block's language says what it is: ``sh``, ``bash``, ``shell`` and ``console`` blocks are
commands, ``python`` blocks are programs, and a block with no language whose first line
starts with ``$ `` is a transcript (``$ COMMAND`` lines, each followed by what it prints).
Other blocks (TOML, JSON, CSV, tables) are shown data, unless a directive names them.

A doc steers the test with HTML comments, invisible on the rendered page:

- ``<!-- doc-test: VERB ARGS -->`` on the lines before a block applies to that block;
- ``<!-- doc-test-file: VERB ARGS -->`` anywhere applies to every block of the file after it.

Verbs:

- ``skip (REASON)``: the block is not run; the reason is required (e.g. it needs an AWS
  account).
- ``file NAME``: the block is a file a later command reads; it is written to NAME.
- ``output``: the block is what the block before it printed; its shape is checked.
- ``exact``: with ``output`` (or a transcript), numbers must match too (a deterministic run).
- ``exit N``: the block's (last) command exits N.
- ``sub OLD => NEW``: replace OLD by NEW before running (and in output blocks, before
  comparing): bounded arguments for long runs, a local server's URL, unique names.
  ``{uid}`` in NEW is unique per run of the doc, ``${VAR}`` the variable of the environment.
- ``env NAME=VALUE``: set for the block's commands.
- ``servers NAME...``: servers the block needs (dynamodb, azure, cosmos, redis, prometheus)
  beyond those its text names (``dynamodb://``, ``azure-tables://``, ``cosmos://``, the
  scripts that start them).
- ``setup COMMAND``: a shell command run before the block (creating a table the doc assumes).
- ``check COMMAND``: a shell command run after the block that must exit 0 (for a ``file``:
  the command that reads it, where the doc shows the file but not the command).
- ``prelude CODE``: a line of Python run before a ``python`` block (the objects the prose
  around a fragment names).
- ``async``: the ``python`` block is the body of an async function (it awaits at the top
  level, as an application's coroutine would); it runs on virtual time.
- ``synopsis``: the block lists a command's forms; each option it names must be one the
  command's ``--help`` lists.
- ``timeout SECONDS``: the block's limit (60 s unless said).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))

FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)\s*$")
DIRECTIVE = re.compile(r"^\s*<!--\s*doc-test(?P<file>-file)?:\s*(?P<body>.*?)\s*-->\s*$")
VERBS = frozenset({"skip", "file", "output", "exact", "exit", "sub", "env", "servers", "setup",
                   "check", "prelude", "async", "synopsis", "timeout"})
COMMANDS = frozenset({"sh", "bash", "shell", "console"})
SERVERS = frozenset({"dynamodb", "azure", "cosmos", "redis", "prometheus"})


class DirectiveError(ValueError):
    """A doc-test comment that the test cannot read (named with its file and line)."""


@dataclass(frozen=True)
class Directive:
    verb: str
    args: str
    where: str
    file_wide: bool = False

    @staticmethod
    def parse(body: str, where: str, file_wide: bool = False) -> Directive:
        verb, _, args = body.partition(" ")
        if verb not in VERBS:
            raise DirectiveError(f"{where}: unknown doc-test verb {verb!r}")
        args = args.strip()
        if verb == "skip" and not re.fullmatch(r"\(.+\)", args):
            raise DirectiveError(f"{where}: a skip names its reason: skip (REASON)")
        if verb == "sub" and " => " not in args:
            raise DirectiveError(f"{where}: sub OLD => NEW")
        if verb == "servers" and not set(args.split()) <= SERVERS:
            raise DirectiveError(f"{where}: servers are some of {sorted(SERVERS)}")
        return Directive(verb, args, where, file_wide)


@dataclass(frozen=True)
class Snippet:
    """One fenced block, with the directives that apply to it (the file's, then its own)."""

    doc: str
    line: int
    lang: str
    text: str
    directives: tuple[Directive, ...] = field(default=())
    section: str = ""

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"

    def has(self, verb: str) -> bool:
        return any(d.verb == verb for d in self.directives)

    def args(self, verb: str) -> list[str]:
        return [d.args for d in self.directives if d.verb == verb]

    @property
    def kind(self) -> str:
        """``command``, ``transcript``, ``python``, ``file``, ``output`` or ``data``."""
        if self.has("file"):
            return "file"
        if self.has("output"):
            return "output"
        if self.lang in COMMANDS:
            if self.lang == "console" or self.text.lstrip().startswith("$ "):
                return "transcript"
            return "command"
        if self.lang in ("", "text") and self.text.lstrip().startswith("$ "):
            return "transcript"
        if self.lang == "python":
            return "python"
        return "data"


def read_doc(path: Path) -> list[Snippet]:
    """The snippets of one Markdown file, in order."""
    doc = path.relative_to(ROOT).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    file_wide: list[Directive] = []
    pending: list[Directive] = []
    snippets: list[Snippet] = []
    section = ""
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("## "):
            section = line[3:].strip()
        directive = DIRECTIVE.match(line)
        fence = FENCE.match(line)
        if directive:
            parsed = Directive.parse(directive["body"], f"{doc}:{index + 1}",
                                     bool(directive["file"]))
            (file_wide if directive["file"] else pending).append(parsed)
        elif fence:
            end = index + 1
            while end < len(lines) and not re.fullmatch(r" *```\s*", lines[end]):
                end += 1
            if end == len(lines):
                raise DirectiveError(f"{doc}:{index + 1}: a fence that is never closed")
            indent = len(fence["indent"])
            body = "\n".join(text[indent:] if text[:indent].strip() == "" else text
                             for text in lines[index + 1:end])
            snippets.append(Snippet(doc, index + 1, fence["lang"], body + "\n",
                                    (*file_wide, *pending), section))
            pending = []
            index = end
        elif line.strip() and pending and not line.lstrip().startswith("<!--"):
            raise DirectiveError(f"{pending[0].where}: a doc-test comment must stand right "
                                 "before its block")
        index += 1
    return snippets


RUNS = frozenset({"command", "transcript", "python", "file", "output"})


def read_parts() -> list[tuple[str, list[Snippet]]]:
    """Every doc's snippets in parts a test each: one a ``##`` section (an output block
    stays with the block it shows), named ``DOC#section``; parts with nothing to run are left
    out. Sections of a doc share nothing but its file-wide comments."""
    parts: list[tuple[str, list[Snippet]]] = []
    for path in DOCS:
        current: list[Snippet] = []
        for snippet in read_doc(path):
            if current and snippet.section != current[-1].section and snippet.kind != "output":
                parts.append((_part_name(current[0]), current))
                current = []
            current.append(snippet)
        if current:
            parts.append((_part_name(current[0]), current))
    return [(name, snippets) for name, snippets in parts
            if any(s.kind in RUNS and not s.has("skip") for s in snippets)]


def _part_name(snippet: Snippet) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", snippet.section.lower()).strip("-")
    return f"{snippet.doc}#{slug or 'top'}"


def substitute(text: str, snippet: Snippet, values: dict[str, str]) -> str:
    """``text`` with the snippet's ``sub`` directives applied (``{uid}``, ``${VAR}`` filled)."""
    for directive in snippet.directives:
        if directive.verb != "sub":
            continue
        old, _, new = directive.args.partition(" => ")
        old = old.replace("{uid}", values["uid"])
        new = new.replace("{uid}", values["uid"])
        new = re.sub(r"\$\{(\w+)\}", lambda m: values.get(m[1], ""), new)
        if old not in text and not directive.file_wide:
            raise DirectiveError(f"{snippet.where}: sub {old!r}: not in the block")
        text = text.replace(old, new)
    return text


# --- the shape of an output ---------------------------------------------------------------

_BOX = re.compile(r"[\u2500-\u257f]")
_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")


def _tokens(text: str) -> list[str]:
    """Words, without table borders or the shell quotes around a word."""
    return [word.strip("'\"") or word for word in _BOX.sub(" ", text).split()]


def _pattern(piece: str, exact: bool) -> str:
    """Text of a doc's output as a pattern: numbers free unless ``exact``."""
    if exact:
        return re.escape(piece)
    parts: list[str] = []
    at = 0
    for number in _NUMBER.finditer(piece):
        parts.append(re.escape(piece[at:number.start()]))
        parts.append(r"[-+]?(?:\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?|nan|inf)")
        at = number.end()
    parts.append(re.escape(piece[at:]))
    return "".join(parts)


def _segments(expected: str, exact: bool) -> list[list[tuple[str, re.Pattern[str]]]]:
    """The doc's words (with their patterns) in runs, split where the doc elides (``...``)."""
    segments: list[list[tuple[str, re.Pattern[str]]]] = [[]]
    for token in _tokens(expected):
        pieces = re.split(r"\.\.\.|…", token)
        for k, piece in enumerate(pieces):
            if k:
                segments.append([])
            if piece:
                head = ".*" if k else ""
                tail = ".*" if k < len(pieces) - 1 else ""
                segments[-1].append((piece, re.compile(head + _pattern(piece, exact) + tail)))
    return [segment for segment in segments if segment]


def shape_mismatch(expected: str, actual: str, *, exact: bool = False) -> str | None:
    """Where ``actual`` departs from the shape ``expected`` shows, or None if it fits.

    Both are compared as words (whitespace and table borders ignored, so line wrapping and
    column widths may differ). Numbers may differ unless ``exact``; ``...`` in the doc stands
    for any text (words, or the rest of a word). Each run of words between two ``...`` must
    appear, in order, as consecutive words of the output.
    """
    words = _tokens(actual)
    at = 0
    for segment in _segments(expected, exact):
        patterns = [pattern for _, pattern in segment]
        found = next((start for start in range(at, len(words) - len(patterns) + 1)
                      if all(p.fullmatch(words[start + k]) for k, p in enumerate(patterns))),
                     None)
        if found is None:
            best = _longest_prefix(patterns, words, at)
            shown = " ".join(word for word, _ in segment[:best + 1])
            return f"no match for the doc's words {shown[-200:]!r} after word {at} of the output"
        at = found + len(patterns)
    return None


def _longest_prefix(patterns: list[re.Pattern[str]], words: list[str], at: int) -> int:
    best = 0
    for start in range(at, len(words)):
        length = 0
        while (length < len(patterns) and start + length < len(words)
               and patterns[length].fullmatch(words[start + length])):
            length += 1
        best = max(best, length)
    return best


# --- synopses -----------------------------------------------------------------------------

def synopsis_commands(text: str) -> list[tuple[list[str], list[str]]]:
    """Each form of a synopsis as (the command's words, the options it names)."""
    forms: list[tuple[list[str], list[str]]] = []
    for line in text.replace("\\\n", " ").splitlines():
        line = line.split("  #")[0].strip()
        if not line:
            continue
        words = line.split()
        if words[0] == "shardex":
            command: list[str] = []
            for word in words:
                if not re.fullmatch(r"[a-z][a-z-]*", word):
                    break
                command.append(word)
            forms.append((command, []))
        if forms:
            forms[-1][1].extend(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", line))
    return forms
