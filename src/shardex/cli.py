"""The ``shardex`` command: one group, its subcommands in ``shardex.commands``, and the
conventions every command keeps (README's "Command line" section tells operators):

- ``-v``/``--verbose`` and ``--config-profile`` work anywhere: before the command or
  after it (every group and command takes them);
- every command with ``--json`` takes ``--output json|table`` too;
- ``--store``/``--index``/``--tier`` and the connection options fall back on
  ``SHARDEX_STORE``/``SHARDEX_INDEX`` and the config profile (``commands.config``);
- every number an option takes is finite (NaN and infinity are refused everywhere,
  whatever the option's declared type) and bounded (``commands.params``);
- a mistyped command, option or choice gets a "did you mean";
- every error is one line, ``error: ...``; exit 2 for usage (the command line or an
  input document is wrong, whatever the store holds), 1 when what the store holds
  refuses it or an operation fails, 130 on Ctrl-C, with one line of what the command
  leaves (``Interrupted``);
- SIGTERM (a container's or a service manager's stop) stops a command as Ctrl-C does,
  with the same line, and exits 143: a runner gives its units and its marks back rather
  than leave them to lapse.
"""

from __future__ import annotations

import functools
import logging
import signal
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import click
from rich.console import Console
from rich.text import Text

from shardex.commands import config, output
from shardex.commands.adopt import adopt
from shardex.commands.autopilot import autopilot
from shardex.commands.azure import azure
from shardex.commands.cosmos import cosmos
from shardex.commands.demo import demo
from shardex.commands.diagnose import diagnose
from shardex.commands.dynamodb import dynamodb
from shardex.commands.migrations import migrations
from shardex.commands.params import Choice, Duration, Finite
from shardex.commands.plan import plan
from shardex.commands.reshard import reshard
from shardex.commands.routing import routing
from shardex.commands.serve import serve
from shardex.commands.simulate import simulate
from shardex.commands.stopping import sigterm_as_interrupt, terminated
from shardex.errors import InvalidInput, ShardexError, StoreError, StoreInUse
from shardex.starting import loaded

__all__ = ["cli", "configure_logging", "main"]

_VERBOSE = "shardex.verbose"
_HANDLER = "shardex-cli"


def _verbose(ctx: click.Context, param: click.Parameter, value: int) -> None:
    if value:
        root = ctx.find_root()
        root.meta[_VERBOSE] = root.meta.get(_VERBOSE, 0) + value
        configure_logging(root.meta[_VERBOSE])


def _verbose_option() -> click.Option:
    return click.Option(["-v", "--verbose"], count=True, expose_value=False, callback=_verbose,
                        help="Log to stderr: -v what shardex does, -vv its details, -vvv the "
                             "drivers' too (botocore, azure, azure.cosmos); before or after the "
                             "command.")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="shardex")
def cli() -> None:
    """Cure hot partitions in partitioned key-value stores."""


def configure_logging(verbose: int) -> None:
    """Send log records to stderr: shardex's at INFO (1) or DEBUG (2), everyone's at 3.

    Called again with a higher count (``-v`` before and after the command), it moves the
    one handler rather than adding another.
    """
    if verbose <= 0:
        return
    shardex_logger, everyone = logging.getLogger("shardex"), logging.getLogger()
    for logger in (shardex_logger, everyone):
        for old in [h for h in logger.handlers if h.get_name() == _HANDLER]:
            logger.removeHandler(old)
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(_HANDLER)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    (everyone if verbose >= 3 else shardex_logger).addHandler(handler)
    shardex_logger.setLevel(logging.DEBUG if verbose >= 2 else logging.INFO)
    if verbose >= 3:
        everyone.setLevel(logging.DEBUG)


for _command in (adopt, autopilot, demo, diagnose, plan, dynamodb, azure, cosmos, migrations,
                 routing, reshard, simulate, serve):
    cli.add_command(_command)


def _commands(command: click.Command) -> Iterator[click.Command]:
    yield command
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            yield from _commands(sub)


class Interrupted(click.exceptions.Abort):
    """Ctrl-C stopped a command that says nothing of its own then: the one line of what
    it leaves (``_interrupted``)."""


# the commands that only read: Ctrl-C during one leaves everything as it was
_READS = frozenset({"status", "show", "list", "log", "plan", "diagnose", "simulate", "demo",
                    "serve"})
# where each group's state is read back after Ctrl-C stopped a write
_LOOK = {"reshard": "status", "adopt": "status", "routing": "show", "autopilot": "log"}


def _interrupted(ctx: click.Context) -> str:
    """What a command stopped by Ctrl-C leaves: nothing changed, or a write asked of the
    store that may yet apply (a store that has the request applies it whether or not
    anyone waits for the answer), and where to see which."""
    path = ctx.command_path
    if ctx.info_name in _READS:
        return f"interrupted: {path} stopped; it changes nothing"
    group = ctx.parent.info_name if ctx.parent is not None and ctx.parent.parent is not None \
        else None
    look = _LOOK.get(group or "")
    return (f"interrupted: {path} stopped before the store answered; what it asked may or "
            "may not have applied" + (f"; to see: {ctx.find_root().info_name} {group} {look}"
                                      if look else ""))


def _interruptible(command: click.Command) -> None:
    """Ctrl-C during ``command`` (one with no words of its own for it) ends in its one
    line rather than click's blank one."""
    callback = command.callback
    if callback is None:
        return

    @functools.wraps(callback)
    def interruptible(*args: Any, **kwargs: Any) -> Any:
        try:
            return callback(*args, **kwargs)
        except KeyboardInterrupt:
            raise Interrupted(_interrupted(click.get_current_context())) from None

    command.callback = interruptible


def _keep_conventions(root: click.Group) -> None:
    """Give every group and command of ``root`` the conventions of the module docstring."""
    for command in _commands(root):
        command.params += [_verbose_option(), config.profile_option()]
        if not isinstance(command, click.Group):
            _interruptible(command)
        if any(param.name == "as_json" for param in command.params):
            output.add_output_option(command)
        for param in command.params:
            kind = param.type
            if isinstance(kind, click.FloatRange) and not isinstance(kind, Finite):
                param.type = Finite(min=kind.min, max=kind.max, min_open=kind.min_open,
                                    max_open=kind.max_open, clamp=kind.clamp)
            elif isinstance(kind, click.types.FloatParamType) and not isinstance(kind, Finite):
                param.type = Finite()
            elif isinstance(kind, click.Choice) and not isinstance(kind, Choice):
                param.type = Choice(kind.choices, case_sensitive=kind.case_sensitive)
            elif isinstance(kind, Duration) and isinstance(param, click.Option):
                param.help = f"{param.help or ''}  [{kind.describe()}]".strip()


_keep_conventions(cli)


def _fail(message: str, code: int) -> None:
    # soft_wrap: the error stays one line, however narrow the terminal.
    Console(stderr=True, soft_wrap=True).print(
        Text.assemble(("error: ", "red"), " ".join(message.split())), highlight=False)
    sys.exit(code)


def _usage(exc: click.UsageError) -> str:
    """A usage error's line, with what the shardex conventions add to click's wording."""
    ctx: Any = exc.ctx
    message = exc.format_message()
    if isinstance(exc, click.NoSuchOption) and ctx is not None \
            and exc.option_name in ("--output", "--json"):
        message = (f"'{ctx.command_path}' prints text only: it has no --json or --output "
                   "(the commands with --json take --output json|table)")
    elif isinstance(exc, click.MissingParameter) and isinstance(exc.param, config.Setting):
        variable = exc.param.envvar if isinstance(exc.param.envvar, str) else None
        message = (f"Missing option '{exc.param.opts[0]}': give it, or set "
                   + (f"{variable} or " if variable else "")
                   + f"{exc.param.setting} in a config profile ({config.config_path()[0]})")
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    return message + hint


# the store drivers' loggers, and shardex's own: their warnings (the Cosmos DB SDK marks
# an endpoint it cannot reach unavailable; a routing refresh fails while the store is
# away, and the next one succeeds) are not the command's output, which says what matters
_DRIVERS = ("azure", "botocore", "aiobotocore", "urllib3", "shardex")


def _quiet_drivers() -> None:
    """Keep log records off stderr unless ``-v`` (shardex's) or ``-vvv`` (everyone's)
    sends them there: with no handler of their own, Python's last-resort handler prints
    warnings beside the command's one error line, or after its success."""
    for name in _DRIVERS:
        logger = logging.getLogger(name)
        if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
            logger.addHandler(logging.NullHandler())


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: every error prints as one line, ``error: ...``, never a traceback.

    Exit 2 for usage (a bad option, argument or input document: click's usage errors and
    shardex's InvalidInput), 1 when the store's state refuses the command (StoreInUse
    among them: a table or GSI that serves another index) or an operation fails (a store
    error, a missing extra, a file that cannot be written), 130 on Ctrl-C.
    A group given no command prints its help and exits 2.
    """
    _quiet_drivers()
    loaded()  # Ctrl-C from here on is the command's to say (``shardex.starting``)
    try:
        with sigterm_as_interrupt():
            code = cli.main(args=list(argv) if argv is not None else None,
                            prog_name="shardex", standalone_mode=False)
    except click.exceptions.Abort as exc:
        if isinstance(exc, Interrupted):
            Console(stderr=True, soft_wrap=True).print(str(exc), highlight=False)
        sys.exit(128 + signal.SIGTERM if terminated() else 130)
    except click.exceptions.NoArgsIsHelpError as exc:
        exc.show()
        sys.exit(2)
    except click.UsageError as exc:
        _fail(_usage(exc), 2)
    except click.ClickException as exc:
        _fail(exc.format_message(), exc.exit_code or 1)
    except InvalidInput as exc:  # what the store holds refuses it (1), or the input (2)
        _fail(str(exc), 1 if isinstance(exc, StoreInUse | StoreError) else 2)
    except ShardexError as exc:
        _fail(str(exc), 1)
    except OSError as exc:
        _fail(f"{f'{exc.filename}: ' if exc.filename else ''}{exc.strerror or exc}", 1)
    if isinstance(code, int) and code:  # ctx.exit(code) in standalone_mode=False
        sys.exit(code)


if __name__ == "__main__":
    main()
