"""The ``shardex`` command: one group, its subcommands in ``shardex.commands``."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click
from rich.console import Console
from rich.text import Text

from shardex.commands.demo import demo
from shardex.commands.diagnose import diagnose
from shardex.commands.dynamodb import dynamodb
from shardex.commands.plan import plan
from shardex.commands.routing import routing
from shardex.errors import ShardexError

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="shardex")
def cli() -> None:
    """Cure hot partitions in partitioned key-value stores."""


cli.add_command(demo)
cli.add_command(diagnose)
cli.add_command(plan)
cli.add_command(dynamodb)
cli.add_command(routing)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: shardex errors print as one clear line, not a traceback."""
    try:
        cli.main(args=list(argv) if argv is not None else None, standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(130)
    except click.ClickException as exc:
        # One line, like every other error: click's own usage block is for --help.
        Console(stderr=True, soft_wrap=True).print(
            Text.assemble(("error: ", "red"), exc.format_message()), highlight=False)
        sys.exit(exc.exit_code)
    except ShardexError as exc:
        # soft_wrap: the error stays one line, however narrow the terminal.
        Console(stderr=True, soft_wrap=True).print(
            Text.assemble(("error: ", "red"), str(exc)), highlight=False)
        sys.exit(2)


if __name__ == "__main__":
    main()
