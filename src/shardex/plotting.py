"""matplotlib, from the ``plot`` extra, for the commands that draw PNG files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shardex.errors import InvalidInput, MissingDependency

__all__ = ["plot_target", "pyplot"]


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


def _writable(path: Path) -> None:
    """InvalidInput unless ``path`` can be written now: a file there is opened to append
    (nothing changed), a new one made and taken away again. A folder the system refuses
    (``/proc``, read-only, not ours) had failed the command after all its work."""
    try:
        if path.exists():
            with path.open("ab"):
                pass
        else:
            with path.open("xb"):
                pass
            path.unlink()
    except OSError as exc:
        raise InvalidInput(f"--plot {path}: cannot be written ({exc.strerror or exc})") \
            from None


def plot_target(path: Path) -> None:
    """Check, before a command's work, that matplotlib can draw to ``path``: the ``plot``
    extra is installed (``pyplot``) and it writes the format of the file's suffix (none:
    PNG). Raises InvalidInput naming the formats it writes."""
    if not path.name or path.is_dir():
        raise InvalidInput(f"--plot {str(path)!r}: give the name of a file to write")
    if not path.parent.is_dir():
        raise InvalidInput(f"--plot {path}: the folder {path.parent} does not exist")
    _writable(path)
    pyplot()
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    suffix = path.suffix[1:].lower()
    if suffix and suffix not in formats:
        raise InvalidInput(f"--plot {path}: matplotlib cannot write .{suffix} files; name "
                           f"one of {', '.join(f'.{f}' for f in sorted(formats))}")
