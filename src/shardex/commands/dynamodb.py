"""``shardex dynamodb``: create the tables the DynamoDB store uses."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

import click

from shardex.commands import output
from shardex.commands.params import count

__all__ = ["dynamodb"]

T = TypeVar("T")
# the AWS SDKs' endpoint variables, in the order botocore reads them
_ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL")


def _connection(region: str | None, endpoint_url: str | None,
                profile: str | None) -> dict[str, Any]:
    return {"region": region, "endpoint_url": endpoint_url, "profile": profile}


def _uri(table: str, region: str | None, endpoint_url: str | None, extra: str = "") -> str:
    options = [f"region={region}"] if region else []
    if endpoint_url:
        options.append(f"endpoint_url={endpoint_url}")
    if extra:
        options.append(extra)
    return f"dynamodb://{table}" + (f"?{'&'.join(options)}" if options else "")


def _connection_options(command: Any) -> Any:
    for option in reversed([
        click.option("--region", help="AWS region (default: the AWS environment or config)."),
        click.option("--endpoint-url", help="DynamoDB endpoint, e.g. http://127.0.0.1:8000 "
                                            "for DynamoDB Local (default: "
                                            "AWS_ENDPOINT_URL_DYNAMODB, then AWS_ENDPOINT_URL)."),
        click.option("--profile", help="AWS profile of the config files to use."),
        click.option("--billing", type=click.Choice(["on-demand", "provisioned"]),
                     default="on-demand", show_default=True),
        click.option("--read-units", type=count(1, 10**9),
                     help="Provisioned read capacity units."),
        click.option("--write-units", type=count(1, 10**9),
                     help="Provisioned write capacity units."),
    ]):
        command = option(command)
    return command


def _where(endpoint_url: str | None) -> str:
    """Where the table is made: the endpoint given or the one the environment names."""
    for variable in _ENDPOINT_VARIABLES:
        if endpoint_url is None and os.environ.get(variable):
            return f" at {os.environ[variable]} (from {variable})"
    return ""


def _run(what: str, work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` with a spinner: creating a table on AWS takes seconds to minutes."""
    with output.console(stderr=True).status(what, spinner="dots"):
        return asyncio.run(work)


@click.group()
def dynamodb() -> None:
    """Create the DynamoDB tables shardex uses (index-table mode, GSI-mode metadata)."""


@dynamodb.command("create-table")
@click.argument("table")
@_connection_options
def create_table(table: str, region: str | None, endpoint_url: str | None,
                 profile: str | None, billing: str, read_units: int | None,
                 write_units: int | None) -> None:
    """Create TABLE for index-table mode (pk S HASH, sk S RANGE) and wait until ACTIVE."""
    from shardex.stores.dynamodb.admin import create_index_table

    _run(f"creating {table} and waiting until it is ACTIVE...",
         create_index_table(table, billing=billing,  # type: ignore[arg-type]
                            read_units=read_units, write_units=write_units,
                            **_connection(region, endpoint_url, profile)))
    click.echo(f"created index table {table} ({billing}){_where(endpoint_url)}; store URI: "
               f"{_uri(table, region, endpoint_url)}")


@dynamodb.command("create-meta-table")
@click.argument("table")
@click.option("--name", help="Name of the metadata table (default: TABLE-shardex).")
@_connection_options
def create_meta_table(table: str, name: str | None, region: str | None,
                      endpoint_url: str | None, profile: str | None, billing: str,
                      read_units: int | None, write_units: int | None) -> None:
    """Create the table that holds the routing record of GSI-mode indexes on TABLE."""
    from shardex.stores.dynamodb.admin import create_meta_table as create

    meta = _run(f"creating the metadata table of {table} and waiting until it is ACTIVE...",
                create(table, name=name, billing=billing,  # type: ignore[arg-type]
                       read_units=read_units, write_units=write_units,
                       **_connection(region, endpoint_url, profile)))
    extra = "gsi=INDEX&key_attribute=A&sort_attribute=S&id_attribute=I"
    if name:
        extra += f"&meta_table={meta}"
    click.echo(f"created metadata table {meta} ({billing}){_where(endpoint_url)}; store URI: "
               f"{_uri(table, region, endpoint_url, extra)}")
