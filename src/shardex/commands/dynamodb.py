"""``shardex dynamodb``: create the tables the DynamoDB store uses."""

from __future__ import annotations

import asyncio
from typing import Any

import click

__all__ = ["dynamodb"]


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
                                            "for DynamoDB Local."),
        click.option("--profile", help="AWS profile of the config files to use."),
        click.option("--billing", type=click.Choice(["on-demand", "provisioned"]),
                     default="on-demand", show_default=True),
        click.option("--read-units", type=click.IntRange(min=1),
                     help="Provisioned read capacity units."),
        click.option("--write-units", type=click.IntRange(min=1),
                     help="Provisioned write capacity units."),
    ]):
        command = option(command)
    return command


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

    asyncio.run(create_index_table(table, billing=billing,  # type: ignore[arg-type]
                                   read_units=read_units, write_units=write_units,
                                   **_connection(region, endpoint_url, profile)))
    click.echo(f"created index table {table} ({billing}); store URI: "
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

    meta = asyncio.run(create(table, name=name, billing=billing,  # type: ignore[arg-type]
                              read_units=read_units, write_units=write_units,
                              **_connection(region, endpoint_url, profile)))
    extra = "gsi=INDEX&key_attribute=A&sort_attribute=S&id_attribute=I"
    if name:
        extra += f"&meta_table={meta}"
    click.echo(f"created metadata table {meta} ({billing}); store URI: "
               f"{_uri(table, region, endpoint_url, extra)}")
