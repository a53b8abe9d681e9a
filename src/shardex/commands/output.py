"""The console every command prints through, tables that wrap instead of being cut, and
``--output json|table`` beside every ``--json``."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import click
from rich.console import Console, RenderableType
from rich.markup import escape as _markup_escape
from rich.table import Table
from rich.text import Text

__all__ = ["Column", "OUTPUTS", "add_output_option", "console", "escape", "table", "tables"]

_PIPED_WIDTH = 160
_KEY_SHARE = 3  # a key column takes at most a third of the width, then folds


# C0 controls, DEL and C1 controls: a terminal acts on them (ESC clears the screen)
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")


def escape(text: str) -> str:
    """``text`` from the data (a key, a value, a file's name) to print in rich markup: its
    markup escaped, and each control character shown as its escape (``\\x1b``), not sent
    to the terminal."""
    return _markup_escape(_CONTROLS.sub(lambda m: repr(m.group())[1:-1], text))


def console(*, stderr: bool = False) -> Console:
    """Return a rich console; piped output gets a width at which tables are not cut.

    A terminal's own width (or COLUMNS) is kept; rich's 80-column default for pipes
    and files would cut the wider tables.
    """
    out = Console(stderr=stderr)
    if not out.is_terminal and "COLUMNS" not in os.environ:
        out = Console(stderr=stderr, width=_PIPED_WIDTH)
    return out


@dataclass(frozen=True, slots=True)
class Column:
    """A table column: its header (words may wrap) and how its cells line up."""

    header: str
    justify: Literal["left", "right"] = "right"


def _width(cell: str) -> int:
    return Text.from_markup(cell).cell_len


def tables(columns: Sequence[Column], rows: Sequence[Sequence[str]], *, width: int,
           keys: int = 1) -> list[Table]:
    """Lay ``rows`` (cells in rich markup) out in tables no wider than ``width``.

    The columns that do not fit go on to a further table that repeats the first
    ``keys`` columns, so no column is cut and no number is shortened; a key column
    wider than a third of ``width`` folds its text onto further lines.
    """
    cells = [max((_width(row[i]) for row in rows), default=0) for i in range(len(columns))]
    needs = [max(len(c.header), n) for c, n in zip(columns, cells, strict=True)]
    if 1 + sum(n + 3 for n in needs) > width:  # too wide: headers wrap at their words
        needs = [max([n, *(len(word) for word in c.header.split())])
                 for c, n in zip(columns, cells, strict=True)]
    cap = max(12, width // _KEY_SHARE)
    needs[:keys] = [min(n, cap) for n in needs[:keys]]
    fixed = 1 + sum(n + 3 for n in needs[:keys])  # a border, and padding + border a column
    groups: list[list[int]] = []
    used = width  # start a group at once
    for i in range(keys, len(columns)):
        if used + needs[i] + 3 > width and (not groups or groups[-1]):
            groups.append([])
            used = fixed
        groups[-1].append(i)
        used += needs[i] + 3
    out = []
    for group in groups or [[]]:
        shown = Table(show_header=True, header_style="bold")
        for i in [*range(keys), *group]:
            # a fixed width: headers wrap at their words, cells fit (keys fold beyond it)
            shown.add_column(columns[i].header, justify=columns[i].justify, overflow="fold",
                             min_width=needs[i], max_width=needs[i])
        for row in rows:
            shown.add_row(*(Text.from_markup(row[i]) for i in [*range(keys), *group]))
        out.append(shown)
    return out


def table(out: Console, columns: Sequence[Column], rows: Sequence[Sequence[str]], *,
          keys: int = 1) -> RenderableType:
    """Return ``rows`` as one renderable that fits ``out``'s width (see ``tables``)."""
    from rich.console import Group

    return Group(*tables(columns, rows, width=out.width, keys=keys))


OUTPUTS = ("json", "table")


def add_output_option(command: click.Command) -> None:
    """Give ``command``, which has ``--json`` (``as_json``), ``--output json|table`` beside it.

    ``--output`` also comes from the config profile's ``output``; there ``--json`` on the
    command line wins, while ``--json --output table`` on it is a usage error.
    """
    from click.core import ParameterSource

    from shardex.commands.config import Setting

    callback = command.callback
    assert callback is not None

    @functools.wraps(callback)
    def wrapped(*args: Any, output: str | None, **kwargs: Any) -> Any:
        source = click.get_current_context().get_parameter_source("output")
        if output is not None and not (kwargs["as_json"]
                                       and source is not ParameterSource.COMMANDLINE):
            if kwargs["as_json"] and output != "json":
                raise click.BadParameter(f"{output} contradicts --json", param_hint="'--output'")
            kwargs["as_json"] = output == "json"
        return callback(*args, **kwargs)

    command.callback = wrapped
    command.params.append(Setting(
        ["--output"], setting="output", type=click.Choice(OUTPUTS), default=None,
        help="json (as --json) or table (text; the default)."))
