"""Where a command's store lives: ``--region``, ``--profile`` and ``--endpoint-url``.

Every command that opens a store takes them (``connection_options``) and opens the
store through ``open_with``, so a DynamoDB store named by a bare ``dynamodb://TABLE``
is reached the way the AWS command line reaches it. Left out, the AWS SDK's own
settings apply: ``AWS_REGION``/``AWS_DEFAULT_REGION``, ``AWS_PROFILE``, and the endpoint
variables ``AWS_ENDPOINT_URL_DYNAMODB`` and ``AWS_ENDPOINT_URL`` (which
``scripts/dynamodb-local start`` exports for DynamoDB Local). On an ``azure-tables://``
store ``--endpoint-url`` is the table service URL, on a ``cosmos://`` store the account
URL; ``--region`` and ``--profile`` are
DynamoDB's only, and ``memory://`` takes none of them: a usage error says so.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from shardex.stores import StoreURI, open_store
from shardex.stores.base import Store

__all__ = ["Connection", "connection_options", "open_with"]

F = TypeVar("F", bound=Callable[..., Any])

_ENDPOINT_HELP = ("Store endpoint, e.g. http://127.0.0.1:8000 for DynamoDB Local (default: "
                  "AWS_ENDPOINT_URL_DYNAMODB, then AWS_ENDPOINT_URL, as the AWS SDKs read them; "
                  "for azure-tables://, the table service URL; for cosmos://, the account URL).")


@dataclass(frozen=True, slots=True)
class Connection:
    """The connection options given on the command line (None: not given)."""

    region: str | None = None
    profile: str | None = None
    endpoint_url: str | None = None

    def options(self, uri: str) -> dict[str, Any]:
        """The store options these give a store of ``uri``'s scheme; usage error if none fit."""
        given = {name: value for name, value in (
            ("region", self.region), ("profile", self.profile),
            ("endpoint_url", self.endpoint_url)) if value is not None}
        if not given:
            return {}
        scheme = StoreURI.parse(uri).scheme
        if scheme == "dynamodb":
            return given
        if scheme in ("azure-tables", "cosmos") and set(given) == {"endpoint_url"}:
            return {"endpoint": given["endpoint_url"]}
        option = "--" + sorted(given)[0].replace("_", "-")
        raise click.BadParameter(f"{scheme}:// stores take no {option}", param_hint=option)


def open_with(uri: str, connection: Connection) -> Store:
    """Build the store ``uri`` names, with the command line's connection options."""
    return open_store(uri, **connection.options(uri))


def connection_options(command: F) -> F:
    """Add --region, --profile and --endpoint-url; the command gets ``connection=``."""
    @functools.wraps(command)
    def wrapped(*args: Any, region: str | None, profile: str | None,
                endpoint_url: str | None, **kwargs: Any) -> Any:
        return command(*args, connection=Connection(region, profile, endpoint_url), **kwargs)

    for option in (
            click.option("--endpoint-url", metavar="URL", help=_ENDPOINT_HELP),
            click.option("--profile", help="AWS profile of the config files to use "
                                           "(default: AWS_PROFILE)."),
            click.option("--region", help="AWS region (default: AWS_REGION, "
                                          "AWS_DEFAULT_REGION or the AWS config).")):
        wrapped = option(wrapped)
    return wrapped  # type: ignore[return-value]
