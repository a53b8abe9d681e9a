"""Backends, chosen by URI: ``open_store("memory://")``, ``dynamodb://TABLE?...``,
``azure-tables://TABLE?endpoint=URL``, ``cosmos://DATABASE/CONTAINER?endpoint=URL``.

The URI is parsed once into a ``StoreURI``; the scheme picks a backend from one
explicit table, and the backend's module (with its driver) is imported only then.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from shardex.errors import InvalidURI
from shardex.stores.base import Store
from shardex.stores.uri import StoreURI

__all__ = ["BACKENDS", "StoreURI", "check_store_uri", "open_store"]

# scheme -> "module:class"; the module is imported when a store of that scheme opens.
BACKENDS: Mapping[str, str] = {
    "memory": "shardex.stores.memory:MemoryStore",
    "dynamodb": "shardex.stores.dynamodb:DynamoDBStore",
    "azure-tables": "shardex.stores.azure:AzureTablesStore",
    "cosmos": "shardex.stores.cosmos:CosmosStore",
}


def open_store(uri: str = "memory://", **options: Any) -> Store:
    """Build the store a URI names; keyword ``options`` override the URI's query options.

    Nothing is connected until the store (or an index on it) is opened. Raises
    InvalidURI for an unknown scheme or option, MissingDependency when the backend's
    driver is not installed.
    """
    parsed = StoreURI.parse(uri)
    return _backend(parsed).from_uri(parsed, **options)


def check_store_uri(uri: str) -> StoreURI:
    """Parse ``uri`` and refuse what opening it would refuse of the URI itself (its scheme,
    location and options: InvalidURI; InvalidInput for a memory:// table its settings
    cannot make), without building a client: no driver, credentials or connection needed.
    For a command that reads a store's URI without opening it (``plan --store``)."""
    parsed = StoreURI.parse(uri)
    _backend(parsed).check_uri(parsed)
    return parsed


def _backend(parsed: StoreURI) -> type[Store]:
    """The store class of ``parsed``'s scheme; InvalidURI naming the known ones."""
    target = BACKENDS.get(parsed.scheme)
    if target is None:
        raise InvalidURI(
            f"unknown store scheme {parsed.scheme!r} in {parsed.raw!r}; "
            f"known: {', '.join(f'{s}://' for s in sorted(BACKENDS))}"
        )
    module_name, _, class_name = target.partition(":")
    backend: type[Store] = getattr(importlib.import_module(module_name), class_name)
    return backend
