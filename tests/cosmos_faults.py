"""A Cosmos DB ContainerClient that fails on purpose: crashes between a write's steps,
429s and timeouts, as ``tests.azure_faults.Faulty`` does for Azure (the same class, over
the Cosmos DB adapter: both adapters have one ``call(operation, **params)``).
"""

from __future__ import annotations

from shardex.stores.cosmos.client import ContainerClient
from tests.azure_faults import Crash
from tests.azure_faults import Faulty as _Faulty

__all__ = ["Crash", "Faulty"]


class Faulty(_Faulty, ContainerClient):  # type: ignore[misc]
    """The real Cosmos DB adapter with faults on demand (``tests.azure_faults.Faulty``)."""
