"""``shardex cosmos``: create the container the Cosmos DB store uses, and repair an index."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import click

from shardex.commands import output
from shardex.commands.params import INDEX_NAME, count

__all__ = ["cosmos"]

REPAIR_SCHEMA = "shardex.cosmos-repair/1"


def _endpoint_option(command: Any) -> Any:
    return click.option(
        "--endpoint", help="Account URL, e.g. https://ACCOUNT.documents.azure.com:443/ "
                           "(default: COSMOS_ENDPOINT, or the AccountEndpoint of "
                           "COSMOS_CONNECTION_STRING).")(command)


@click.group()
def cosmos() -> None:
    """Create the Cosmos DB container shardex uses; repair what crashed writers left.

    Credentials come from COSMOS_KEY (the account key) or COSMOS_CONNECTION_STRING, never
    from the command line.
    """


@cosmos.command("create-container")
@click.argument("database")
@click.argument("container")
@_endpoint_option
@click.option("--throughput", type=count(400, 1_000_000), default=None,
              help="Provisioned RU/s of the container (default: the account's default).")
def create_container(database: str, container: str, endpoint: str | None,
                     throughput: int | None) -> None:
    """Create CONTAINER in DATABASE (created if absent), partitioned by /pk."""
    from shardex.stores.cosmos.admin import create_container as create

    where = asyncio.run(create(database, container, throughput=throughput,
                               endpoint=endpoint))
    click.echo(f"created container {database}/{container} (partition key /pk); store URI: "
               f"cosmos://{database}/{container}?endpoint={where}")


@cosmos.command()
@click.argument("database")
@click.argument("container")
@click.option("--index", "name", required=True, type=INDEX_NAME, help="Index name.")
@click.option("--shard-key", "shard_keys", multiple=True,
              help="Repair only this shard key (repeat); default: the whole index.")
@_endpoint_option
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def repair(database: str, container: str, name: str, shard_keys: tuple[str, ...],
           endpoint: str | None, as_json: bool) -> None:
    """Commit or remove the entries that failed or crashed writes of index NAME left.

    Safe while writers run: a write still in flight is fenced first and planned again.
    """
    from shardex.stores.cosmos import CosmosStore

    async def run() -> Any:
        store = CosmosStore(database, container, endpoint=endpoint)
        async with store:
            return await store.repair(name, shard_keys=list(shard_keys) or None)

    with output.console(stderr=True).status(f"repairing index {name} of "
                                            f"{database}/{container}...", spinner="dots"):
        report = asyncio.run(run())
    if as_json:
        click.echo(json.dumps({"schema": REPAIR_SCHEMA, "database": database,
                               "container": container, "index": name,
                               **dataclasses.asdict(report)}, indent=2))
    else:
        click.echo(f"{name}: checked {report.checked} entries not committed; committed "
                   f"{report.committed}, deleted {report.deleted}, fenced {report.fenced} "
                   f"placements, skipped {report.skipped} (changed meanwhile)")
        for error in report.errors:
            click.echo(f"  could not repair {error}")
    if report.errors:  # the report says which; the exit code and one line say that some failed
        raise click.ClickException(f"{len(report.errors)} entr(y/ies) of index {name!r} could "
                                   "not be repaired (listed above); run the repair again")
