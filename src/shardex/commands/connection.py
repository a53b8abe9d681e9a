"""Where a command's index lives: ``--store``, ``--index``, ``--tier`` and the connection
options ``--region``, ``--profile`` and ``--endpoint-url``.

``--store`` and ``--index`` fall back on ``SHARDEX_STORE`` and ``SHARDEX_INDEX``, then on
the config profile (``shardex.commands.config``), so a store URI is given once; so do
``--tier`` (the profile's ``tiers``) and the connection options (its ``region``,
``aws_profile`` and ``endpoint_url``). Every command that opens a store takes them
(``connection_options``) and opens the store through ``open_with``, so a DynamoDB store
named by a bare ``dynamodb://TABLE`` is reached the way the AWS command line reaches it.
Left out, the AWS SDK's own settings apply: ``AWS_REGION``/``AWS_DEFAULT_REGION``,
``AWS_PROFILE``, and the endpoint variables ``AWS_ENDPOINT_URL_DYNAMODB`` and
``AWS_ENDPOINT_URL`` (which ``scripts/dynamodb-local start`` exports for DynamoDB Local).
On an ``azure-tables://`` store ``--endpoint-url`` is the table service URL, on a
``cosmos://`` store the account URL; ``--region`` and ``--profile`` are DynamoDB's only,
and ``memory://`` takes none of them: given on the command line, a usage error says so;
from the config profile, they are left out.

``memory://`` lasts one process: ``lasting`` refuses it (and a ``memory://`` tier beside
a store that persists) for the commands whose state the next command reads.

A command runs its requests through ``run_noting``, which says when a store it asked
does not answer, rather than wait in silence for the timeouts.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from shardex.clock import LoopClock, answered
from shardex.commands import output
from shardex.commands.config import Setting
from shardex.commands.params import INDEX_NAME, STORE_URI, TIER_NAME, ValuePair, distinct
from shardex.commands.stopping import until_terminated
from shardex.stores import StoreURI, open_store
from shardex.stores.base import Store
from shardex.stores.metered import quiet

__all__ = ["Connection", "connection_options", "given_tiers", "index_option", "index_options",
           "lasting", "named_tiers", "open_with", "run_noting", "store_ceiling", "store_option",
           "tier_option"]

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")
QUIET = 2.0  # seconds of no answer before a command says so (then 4, 8, ... a minute apart)

_ENDPOINT_HELP = ("Store endpoint, e.g. http://127.0.0.1:8000 for DynamoDB Local (default: "
                  "AWS_ENDPOINT_URL_DYNAMODB, then AWS_ENDPOINT_URL, as the AWS SDKs read them; "
                  "for azure-tables://, the table service URL; for cosmos://, the account URL).")
_TIERS = "shardex.tiers"
_CONNECTION = (("region", "region"), ("profile", "aws_profile"),
               ("endpoint_url", "endpoint_url"))


@dataclass(frozen=True, slots=True)
class Connection:
    """The connection options given (None: not given); ``configured`` names those that
    came from the config profile, which a store that does not take them leaves out."""

    region: str | None = None
    profile: str | None = None
    endpoint_url: str | None = None
    configured: frozenset[str] = frozenset()

    def options(self, uri: str) -> dict[str, Any]:
        """The store options these give a store of ``uri``'s scheme; usage error if one
        given on the command line does not fit."""
        given = {name: value for name, value in (
            ("region", self.region), ("profile", self.profile),
            ("endpoint_url", self.endpoint_url)) if value is not None}
        if not given:
            return {}
        parsed = StoreURI.parse(uri)
        scheme = parsed.scheme
        if scheme == "dynamodb":
            return self._beside(parsed, given, {})
        if scheme in ("azure-tables", "cosmos"):
            given = {k: v for k, v in given.items()
                     if k == "endpoint_url" or k not in self.configured}
            if set(given) == {"endpoint_url"}:
                return self._beside(parsed, {"endpoint": given["endpoint_url"]},
                                    {"endpoint": "endpoint_url"})
        stray = sorted(set(given) - self.configured)
        if not stray:
            return {}
        option = "--" + stray[0].replace("_", "-")
        raise click.BadParameter(f"{scheme}:// stores take no {option}", param_hint=f"'{option}'")

    def _beside(self, uri: StoreURI, given: dict[str, Any],
                names: Mapping[str, str]) -> dict[str, Any]:
        """``given`` less what the URI names itself: the config profile's value gives way
        to the URI's; one from the command line that differs from it is a usage error
        (``names``: the URI option -> the connection setting, where they differ)."""
        kept = dict(given)
        for option, value in given.items():
            setting = names.get(option, option)
            if option not in uri.options:
                continue
            if setting in self.configured or uri.options[option] == value:
                del kept[option]
                continue
            flag = "--" + setting.replace("_", "-")
            raise click.BadParameter(
                f"{value!r} contradicts the store URI's {option}={uri.options[option]}: give "
                "one", param_hint=f"'{flag}'")
        return kept


def open_with(uri: str, connection: Connection) -> Store:
    """Build the store ``uri`` names, with the command line's connection options."""
    return open_store(uri, **connection.options(uri))


def run_noting(work: Callable[[], Coroutine[Any, Any, T]], *,
               until: Callable[[], bool] | None = None) -> T:
    """``asyncio.run(work())``; while a store it asked does not answer, say so on stderr
    after 2 s, then 4, 8, ... up to a minute apart, as long as ``until`` (if given) is
    not True: a run says it in its own progress once it reports.

    On a store that takes requests and never answers, status, start and the controls
    had waited in silence for their timeouts and tries (30 s a request on DynamoDB,
    minutes in all).
    """
    def stderr(note: str) -> None:
        output.console(stderr=True).print(f"{note}; still waiting (Ctrl-C stops)",
                                          highlight=False)

    async def guarded() -> T:
        try:
            return await work()
        except SystemExit as exc:
            # rich ends the process this way when stdout's reader went (``| head``):
            # raised in a task, asyncio would log it as a task's error, traceback and all
            raise _Exiting(exc.code) from None

    async def main() -> T:
        clock = LoopClock()
        return await until_terminated(answered(
            guarded(), clock, QUIET, stderr, quiet=lambda: quiet(clock.now()), until=until,
            tick=QUIET / 4))

    try:
        return asyncio.run(main())
    except _Exiting as exc:
        raise SystemExit(exc.code) from None


class _Exiting(Exception):
    """A SystemExit carried out of the event loop as an ordinary error."""

    def __init__(self, code: object) -> None:
        super().__init__(code)
        self.code = code


def connection_options(command: F) -> F:
    """Add --region, --profile and --endpoint-url; the command gets ``connection=``."""
    @functools.wraps(command)
    def wrapped(*args: Any, region: str | None, profile: str | None,
                endpoint_url: str | None, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        for option, value in (("--region", region), ("--profile", profile),
                              ("--endpoint-url", endpoint_url)):
            if value is not None and not value.strip():
                # an empty one would stand for the URI's own, which it hides
                raise click.BadParameter("empty; leave it out to use the store URI's or the "
                                         "environment's", param_hint=f"'{option}'")
        configured = frozenset(name for name, _ in _CONNECTION
                               if ctx.get_parameter_source(name) is ParameterSource.DEFAULT_MAP)
        return command(*args, connection=Connection(region, profile, endpoint_url, configured),
                       **kwargs)

    for option in (
            click.option("--endpoint-url", metavar="URL", cls=Setting, setting="endpoint_url",
                         help=_ENDPOINT_HELP),
            click.option("--profile", cls=Setting, setting="aws_profile",
                         help="AWS profile of the config files to use (default: AWS_PROFILE; "
                              "not shardex's --config-profile)."),
            click.option("--region", cls=Setting, setting="region",
                         help="AWS region (default: AWS_REGION, AWS_DEFAULT_REGION or the "
                              "AWS config).")):
        wrapped = option(wrapped)
    return wrapped  # type: ignore[return-value]


def store_option(help: str) -> Callable[[F], F]:
    """``--store URI`` (as ``uri``), required, from ``SHARDEX_STORE`` or the config profile."""
    return click.option("--store", "uri", cls=Setting, setting="store", envvar="SHARDEX_STORE",
                        show_envvar=True, required=True, type=STORE_URI, help=help)


def index_option() -> Callable[[F], F]:
    """``--index NAME`` (as ``name``), required, from ``SHARDEX_INDEX`` or the config profile."""
    return click.option("--index", "name", cls=Setting, setting="index",
                        envvar="SHARDEX_INDEX", show_envvar=True, required=True,
                        type=INDEX_NAME, help="Index name.")


def _keep_tiers(ctx: click.Context, param: click.Parameter,
                value: tuple[tuple[str, str], ...]) -> None:
    ctx.meta[_TIERS] = distinct(value, "--tier")


def index_options(*, tiers: bool = False,
                  store_help: str = "Store URI, e.g. dynamodb://TABLE?region=eu-west-1."
                  ) -> Callable[[F], F]:
    """``--store``, ``--index`` (as ``name``), the connection options and with ``tiers``
    ``--tier NAME=URI`` (read back with ``given_tiers``)."""
    def add(command: F) -> F:
        if tiers:
            command = tier_option()(command)
        command = connection_options(index_option()(command))
        return store_option(store_help)(command)
    return add


def tier_option(help_text: str = "The store of a tier the routing names (a policy's "
                "@NAME); give every tier the index reads or writes.") -> Callable[[F], F]:
    """``--tier NAME=URI``, repeated (read back with ``given_tiers``)."""
    return click.option(
        "--tier", "tiers", multiple=True, metavar="NAME=URI", expose_value=False,
        callback=_keep_tiers, cls=Setting, setting="tiers",
        type=ValuePair(STORE_URI, "NAME=URI", "dedicated=dynamodb://orders-heavy",
                       first=True, key=TIER_NAME), help=help_text)


def given_tiers() -> dict[str, str]:
    """The ``--tier`` stores of the command being run."""
    return dict(click.get_current_context().meta.get(_TIERS, {}))


def named_tiers(named: Iterable[str | None], option: str, *, where: str = "names tier") -> None:
    """Refuse (usage, naming ``option`` and ``where`` in it) a tier the layout names that
    ``--tier`` does not give."""
    tiers = given_tiers()
    unknown = sorted({tier for tier in named if tier is not None} - set(tiers))
    if unknown:
        raise click.BadParameter(
            f"{where} {unknown[0]!r}, which has no store: give --tier {unknown[0]}=URI "
            f"(tiers given: {', '.join(map(repr, sorted(tiers))) or 'none'})",
            param_hint=f"'{option}'")


def store_ceiling(uri: str | None) -> str:
    """The partition ceiling (a name ``shardex.capacity.resolve_ceiling`` knows) of the
    store ``uri`` names: its own for azure-tables:// and cosmos://, else DynamoDB's (which
    memory:// models), and DynamoDB's without a store."""
    scheme = None if uri is None else StoreURI.parse(uri).scheme
    return scheme if scheme in ("azure-tables", "cosmos") else "dynamodb"


def _memory(uri: str) -> bool:
    return StoreURI.parse(uri).scheme == "memory"


def lasting(uri: str, what: str | None, tiers: Mapping[str, str] | None = None, *,
            offers_dry_run: bool = False) -> None:
    """Refuse ``memory://`` where state must outlive the process (usage error).

    ``what`` names the command that records state (None: the command only reads, and
    only a ``memory://`` tier beside a store that persists is refused); with
    ``offers_dry_run`` the error says a dry run may use it.
    """
    tiers = given_tiers() if tiers is None else tiers
    for name, tier in tiers.items():
        if _memory(tier) and not _memory(uri):
            raise click.BadParameter(
                f"tier {name!r} on memory:// would last one process, while the index's "
                "store and its routing record outlive it: give a store that persists",
                param_hint="'--tier'")
    if what is None:
        return
    for option, where in [("--store", uri), *(("--tier", t) for t in tiers.values())]:
        if _memory(where):
            raise click.BadParameter(
                f"memory:// lasts one process, and '{what}' records state the next command "
                "reads: give a store that persists (dynamodb://, azure-tables://, cosmos://)"
                + (", or --dry-run" if offers_dry_run else ""), param_hint=f"'{option}'")
