"""Test support for the Cosmos DB server: the endpoint scripts/test started, fresh containers.

scripts/test starts @vercel/cosmosdb-server (scripts/cosmos) and exports
``SHARDEX_COSMOS_ENDPOINT``, ``COSMOS_ENDPOINT`` and ``COSMOS_KEY``. Without them the
Cosmos DB tests are skipped on a developer's machine and fail in CI (CI=true), so CI never
skips them silently. The server reports a charge of 1 for every request, so the stores
here meter the documented estimate (``charges="estimated"``) unless told otherwise.
"""

from __future__ import annotations

import uuid
from typing import Any

from shardex.stores.cosmos import CosmosStore
from shardex.stores.cosmos.admin import create_container
from tests.servers import require, run_aside

ENDPOINT_VARIABLE = "SHARDEX_COSMOS_ENDPOINT"
DATABASE = "shardex"


def require_endpoint() -> str:
    """Return the server's endpoint; skip the test without one (fail it in CI)."""
    return require(ENDPOINT_VARIABLE, "starts the Cosmos DB server (scripts/cosmos)")


def unique_container() -> str:
    return f"c{uuid.uuid4().hex[:16]}"


def new_container() -> str:
    """Create a fresh container (from any thread or loop) and return its name."""
    url = require_endpoint()
    name = unique_container()
    run_aside(lambda: create_container(DATABASE, name, endpoint=url))
    return name


def container_store(**options: Any) -> CosmosStore:
    """A store on a new container of its own."""
    url = require_endpoint()
    options.setdefault("charges", "estimated")
    return CosmosStore(DATABASE, new_container(), endpoint=url, **options)
