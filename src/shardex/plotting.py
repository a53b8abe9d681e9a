"""matplotlib, from the ``plot`` extra, for the commands that draw PNG files."""

from __future__ import annotations

from typing import Any

from shardex.errors import MissingDependency

__all__ = ["pyplot"]


def pyplot() -> Any:
    """Return ``matplotlib.pyplot`` on the file-only Agg backend.

    Raises MissingDependency naming the ``plot`` extra when matplotlib is missing; a
    command that will draw calls this before its work, so it fails before, not after.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise MissingDependency("matplotlib", "plot") from exc
    return plt
