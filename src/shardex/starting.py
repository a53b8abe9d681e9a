"""Ctrl-C while the ``shardex`` command loads: one line, exit 130, not a traceback.

The command line imports the library (a second or so) before ``shardex.cli.main`` can
catch anything: a Ctrl-C then ended the process with a traceback through the imports.
Imported first by the package, this sets a SIGINT handler for that time when the
process is the ``shardex`` command (its script, by name), and ``loaded`` puts Python's
own back once ``main`` handles Ctrl-C itself. A program that imports shardex is left
alone.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

__all__ = ["loaded"]


def _stopped(signum: int, frame: FrameType | None) -> None:
    sys.stderr.write("interrupted: shardex stopped as it started; nothing was done\n")
    sys.stderr.flush()
    os._exit(130)


def loaded() -> None:
    """Hand Ctrl-C back to Python (KeyboardInterrupt), if this module had taken it."""
    if signal.getsignal(signal.SIGINT) is _stopped:
        signal.signal(signal.SIGINT, signal.default_int_handler)


if os.path.basename(sys.argv[0] if sys.argv else "") == "shardex" \
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, _stopped)
