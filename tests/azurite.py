"""Test support for Azurite: the endpoint scripts/test started, fresh tables, stores.

scripts/test starts Azurite (table service, in memory) and exports
``SHARDEX_AZURITE_ENDPOINT`` and ``AZURE_STORAGE_CONNECTION_STRING`` (Azurite's public
development account). Without them the Azure tests are skipped on a developer's machine
and fail in CI (CI=true), so CI never skips them silently.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any

import pytest

from shardex.stores.azure import AzureTablesStore
from shardex.stores.azure.admin import create_table

ENDPOINT_VARIABLE = "SHARDEX_AZURITE_ENDPOINT"


def require_endpoint() -> str:
    """Return the Azurite endpoint; skip the test without one (fail it in CI)."""
    url = os.environ.get(ENDPOINT_VARIABLE)
    if not url:
        message = (f"{ENDPOINT_VARIABLE} is not set: run the tests with scripts/test, which "
                   "starts Azurite")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return url


def unique_table() -> str:
    """A new table's name (Azure: letters and digits, starting with a letter)."""
    return f"shardex{uuid.uuid4().hex[:16]}"


def new_table() -> str:
    """Create a fresh table on Azurite (from any thread or loop) and return its name."""
    url = require_endpoint()
    name = unique_table()

    async def create() -> None:
        await create_table(name, endpoint=url)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(create())
    else:  # called inside a running loop: create it in a loop of its own
        import threading

        errors: list[BaseException] = []

        def work() -> None:
            try:
                asyncio.run(create())
            except BaseException as exc:  # handed to the caller's thread
                errors.append(exc)

        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
        if errors:
            raise errors[0]
    return name


def table_store(**options: Any) -> AzureTablesStore:
    """A store on a new table of its own."""
    url = require_endpoint()
    return AzureTablesStore(new_table(), endpoint=url, **options)
