"""``python -m shardex``: the shardex command."""

from __future__ import annotations

from shardex.cli import main

main()
