"""Creating and deleting the Azure table shardex uses.

``create_table`` and ``delete_table`` take the connection arguments of AzureTablesStore
(``endpoint``, ``credential``, ``connection_string``, or the environment). Errors are
mapped like the store's; a table that already exists raises ConditionFailed.
"""

from __future__ import annotations

from typing import Any

from shardex.errors import ConditionFailed, NotFound
from shardex.stores.azure.client import _import_sdk, connection_settings, map_error
from shardex.stores.azure.store import check_table_name

__all__ = ["create_table", "delete_table"]


async def _run(table: str, action: str, connection: dict[str, Any]) -> str:
    check_table_name(table)
    aio = _import_sdk()
    endpoint, credential = connection_settings(connection.get("endpoint"),
                                               connection.get("credential"),
                                               connection.get("connection_string"))
    async with aio.TableServiceClient(endpoint, credential=credential,
                                      retry_total=0) as service:
        try:
            if action == "create":
                await service.create_table(table)
            else:
                await service.delete_table(table)
        except Exception as exc:
            error = map_error(exc, operation=f"{action} table", table=table, endpoint=endpoint)
            if action == "create" and isinstance(error, ConditionFailed):
                raise ConditionFailed(f"table {table!r} already exists at {endpoint}") from exc
            if action == "create" and isinstance(error, NotFound):
                # what a create finds missing is the account the endpoint names
                raise NotFound(f"create table {table!r}: {endpoint} answers that its account "
                               "does not exist (ResourceNotFound): check the account in the "
                               "endpoint") from exc
            raise error from exc
    return endpoint


async def create_table(table: str, **connection: Any) -> str:
    """Create ``table``; return the endpoint it was created at. ConditionFailed if it exists."""
    return await _run(table, "create", connection)


async def delete_table(table: str, **connection: Any) -> None:
    """Delete ``table`` (Azure finishes the deletion in the background)."""
    await _run(table, "delete", connection)
