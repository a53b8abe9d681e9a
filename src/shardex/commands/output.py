"""The console every command prints through."""

from __future__ import annotations

import os

from rich.console import Console

__all__ = ["console"]

_PIPED_WIDTH = 160


def console(*, stderr: bool = False) -> Console:
    """Return a rich console; piped output gets a width at which tables are not cut.

    A terminal's own width (or COLUMNS) is kept; rich's 80-column default for pipes
    and files would cut the wider tables.
    """
    out = Console(stderr=stderr)
    if not out.is_terminal and "COLUMNS" not in os.environ:
        out = Console(stderr=stderr, width=_PIPED_WIDTH)
    return out
