"""The ``shardex`` command: one group, its subcommands in ``shardex.commands``."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

import click
from rich.console import Console
from rich.text import Text

from shardex.commands.adopt import adopt
from shardex.commands.azure import azure
from shardex.commands.cosmos import cosmos
from shardex.commands.demo import demo
from shardex.commands.diagnose import diagnose
from shardex.commands.dynamodb import dynamodb
from shardex.commands.plan import plan
from shardex.commands.reshard import reshard
from shardex.commands.routing import routing
from shardex.commands.serve import serve
from shardex.commands.simulate import simulate
from shardex.errors import InvalidInput, ShardexError

__all__ = ["cli", "configure_logging", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="shardex")
@click.option("-v", "--verbose", count=True,
              help="Log to stderr: -v what shardex does, -vv its details, -vvv the drivers' "
                   "too (botocore, azure, azure.cosmos).")
def cli(verbose: int) -> None:
    """Cure hot partitions in partitioned key-value stores."""
    configure_logging(verbose)


def configure_logging(verbose: int) -> None:
    """Send log records to stderr: shardex's at INFO (1) or DEBUG (2), everyone's at 3."""
    if verbose <= 0:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    target = logging.getLogger() if verbose >= 3 else logging.getLogger("shardex")
    target.addHandler(handler)
    target.setLevel(logging.DEBUG if verbose >= 2 else logging.INFO)


cli.add_command(adopt)
cli.add_command(demo)
cli.add_command(diagnose)
cli.add_command(plan)
cli.add_command(dynamodb)
cli.add_command(azure)
cli.add_command(cosmos)
cli.add_command(routing)
cli.add_command(reshard)
cli.add_command(simulate)
cli.add_command(serve)


def _fail(message: str, code: int) -> None:
    # soft_wrap: the error stays one line, however narrow the terminal.
    Console(stderr=True, soft_wrap=True).print(
        Text.assemble(("error: ", "red"), " ".join(message.split())), highlight=False)
    sys.exit(code)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: every error prints as one line, ``error: ...``, never a traceback.

    Exit 2 for usage (a bad option, argument or input: click's usage errors and
    shardex's InvalidInput), 1 for an operation that failed (a store error, a missing
    extra, a file that cannot be written), 130 on Ctrl-C.
    """
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="shardex",
                 standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(130)
    except click.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        _fail(exc.format_message() + hint, 2)
    except click.ClickException as exc:
        _fail(exc.format_message(), 1)
    except InvalidInput as exc:
        _fail(str(exc), 2)
    except ShardexError as exc:
        _fail(str(exc), 1)
    except OSError as exc:
        _fail(f"{f'{exc.filename}: ' if exc.filename else ''}{exc.strerror or exc}", 1)


if __name__ == "__main__":
    main()
