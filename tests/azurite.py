"""Test support for Azurite: the endpoint scripts/test started, fresh tables, stores.

scripts/test starts Azurite (table service, in memory) and exports
``SHARDEX_AZURITE_ENDPOINT`` and ``AZURE_STORAGE_CONNECTION_STRING`` (Azurite's public
development account). Without them the Azure tests are skipped on a developer's machine
and fail in CI (CI=true), so CI never skips them silently.
"""

from __future__ import annotations

import uuid
from typing import Any

from shardex.stores.azure import AzureTablesStore
from shardex.stores.azure.admin import create_table
from tests.servers import require, run_aside

ENDPOINT_VARIABLE = "SHARDEX_AZURITE_ENDPOINT"


def require_endpoint() -> str:
    """Return the Azurite endpoint; skip the test without one (fail it in CI)."""
    return require(ENDPOINT_VARIABLE, "starts Azurite")


def unique_table() -> str:
    """A new table's name (Azure: letters and digits, starting with a letter)."""
    return f"shardex{uuid.uuid4().hex[:16]}"


def new_table() -> str:
    """Create a fresh table on Azurite (from any thread or loop) and return its name."""
    url = require_endpoint()
    name = unique_table()
    run_aside(lambda: create_table(name, endpoint=url))
    return name


def table_store(**options: Any) -> AzureTablesStore:
    """A store on a new table of its own."""
    url = require_endpoint()
    return AzureTablesStore(new_table(), endpoint=url, **options)
