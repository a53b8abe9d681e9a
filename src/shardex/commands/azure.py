"""``shardex azure``: create the table the Azure Tables store uses, and repair an index."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import click

from shardex.commands import output
from shardex.commands.params import INDEX_NAME

__all__ = ["azure"]

REPAIR_SCHEMA = "shardex.azure-repair/1"


def _endpoint_option(command: Any) -> Any:
    return click.option(
        "--endpoint", help="Table service URL, e.g. http://127.0.0.1:10002/devstoreaccount1 "
                           "for Azurite (default: from AZURE_STORAGE_CONNECTION_STRING or "
                           "AZURE_STORAGE_ACCOUNT).")(command)


def _uri(table: str, endpoint: str) -> str:
    return f"azure-tables://{table}?endpoint={endpoint}"


@click.group()
def azure() -> None:
    """Create the Azure table shardex uses; repair what crashed writers left.

    Credentials come from AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT and
    AZURE_STORAGE_KEY, never from the command line.
    """


@azure.command("create-table")
@click.argument("table")
@_endpoint_option
def create_table(table: str, endpoint: str | None) -> None:
    """Create TABLE (every index on it keeps its own partition keys)."""
    from shardex.stores.azure.admin import create_table as create

    where = asyncio.run(create(table, endpoint=endpoint))
    click.echo(f"created table {table}; store URI: {_uri(table, where)}")


@azure.command()
@click.argument("table")
@click.option("--index", "name", required=True, type=INDEX_NAME, help="Index name.")
@click.option("--shard-key", "shard_keys", multiple=True,
              help="Repair only this shard key (repeat); default: the whole index.")
@_endpoint_option
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def repair(table: str, name: str, shard_keys: tuple[str, ...], endpoint: str | None,
           as_json: bool) -> None:
    """Commit or remove the rows that failed or crashed writes of index NAME left.

    Safe while writers run: a write still in flight is fenced first and planned again.
    """
    from shardex.stores.azure import AzureTablesStore

    async def run() -> Any:
        store = AzureTablesStore(table, endpoint=endpoint)
        async with store:
            return await store.repair(name, shard_keys=list(shard_keys) or None)

    with output.console(stderr=True).status(f"repairing index {name} of {table}...",
                                            spinner="dots"):
        report = asyncio.run(run())
    if as_json:
        click.echo(json.dumps({"schema": REPAIR_SCHEMA, "table": table, "index": name,
                               **dataclasses.asdict(report)}, indent=2))
    else:
        click.echo(f"{name}: checked {report.checked} rows not committed; committed "
                   f"{report.committed}, deleted {report.deleted}, fenced {report.fenced} "
                   f"placements, skipped {report.skipped} (changed meanwhile)")
        for error in report.errors:
            click.echo(f"  could not repair {error}")
    if report.errors:  # the report says which; the exit code and one line say that some failed
        raise click.ClickException(f"{len(report.errors)} row(s) of index {name!r} could not be "
                                   "repaired (listed above); run the repair again")
