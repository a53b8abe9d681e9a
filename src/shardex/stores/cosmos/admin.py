"""Creating and deleting the Cosmos DB container shardex uses.

``create_container`` and ``delete_container`` take the connection arguments of
CosmosStore (``endpoint``, ``credential``, ``connection_string``, or the environment).
Errors are mapped like the store's; a container that already exists raises
ConditionFailed.
"""

from __future__ import annotations

from typing import Any

from shardex.errors import ConditionFailed, InvalidInput
from shardex.stores.cosmos.client import (
    check_names,
    client_options,
    close_client,
    connection_settings,
    import_sdk,
    mapped_errors,
)

__all__ = ["PARTITION_KEY_PATH", "create_container", "delete_container"]

PARTITION_KEY_PATH = "/pk"


async def create_container(database: str, container: str, *, throughput: int | None = None,
                           **connection: Any) -> str:
    """Create ``container`` (and ``database`` if absent), partitioned by ``/pk``.

    ``throughput`` is the container's provisioned RU/s (None: the account's default, or
    serverless). Returns the endpoint. ConditionFailed if the container exists.
    """
    check_names(database, container)
    if throughput is not None and (type(throughput) is not int or throughput < 400):
        raise InvalidInput(f"throughput must be an integer of RU/s >= 400, got {throughput!r}")
    aio = import_sdk()
    from azure.cosmos import PartitionKey

    endpoint, credential = connection_settings(connection.get("endpoint"),
                                               connection.get("credential"),
                                               connection.get("connection_string"))
    where = f"container {database}/{container}"
    client = aio.CosmosClient(endpoint, credential=credential, **client_options(5.0, 30.0))
    try:
        try:
            with mapped_errors("create", where, endpoint):
                db = await client.create_database_if_not_exists(database)
        except ConditionFailed:
            # the SDK reads, then creates: another client created the database between
            # the two (409), and it exists as asked
            db = client.get_database_client(database)
        try:
            with mapped_errors("create", where, endpoint):
                await db.create_container(container,
                                          partition_key=PartitionKey(path=PARTITION_KEY_PATH),
                                          offer_throughput=throughput)
        except ConditionFailed as exc:
            raise ConditionFailed(f"{where} already exists at {endpoint}") from exc
    finally:
        await close_client(client)
    return endpoint


async def delete_container(database: str, container: str, **connection: Any) -> None:
    """Delete ``container`` of ``database``."""
    aio = import_sdk()
    endpoint, credential = connection_settings(connection.get("endpoint"),
                                               connection.get("credential"),
                                               connection.get("connection_string"))
    client = aio.CosmosClient(endpoint, credential=credential, **client_options(5.0, 30.0))
    try:
        with mapped_errors("delete", f"container {database}/{container}", endpoint):
            await client.get_database_client(database).delete_container(container)
    finally:
        await close_client(client)
