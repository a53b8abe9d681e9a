"""The Cosmos DB (NoSQL API) store, ``cosmos://DATABASE/CONTAINER?endpoint=URL``.

- ``store``: ``CosmosStore``, its hooks, reads, records, request charges and ``repair``;
- ``placement``: the documents and requests of the cross-partition write, the readers'
  ownership check and repair (``shardex.stores.crosspart``, shared with Azure Tables);
- ``codec``: entries, placements and records as documents, and their keys (pure);
- ``client``: the adapter over ``azure.cosmos.aio``, credentials, the error boundary;
- ``admin``: creating and deleting the container.

An item's placement and its entry live in different logical partitions (the entry
under its shard key, which is the point of sharding), and a transactional batch covers
one logical partition, so a write is the Azure Tables store's protocol: several requests
with one commit point, the placement's ETag-conditional replace, and readers that keep
committed documents and check the others against their placement
(``shardex.stores.crosspart``'s docstring has the argument). Keys and attribute values use
the Azure store's pure encodings (``shardex.stores.azure.keys`` and ``codec``), so the
two Microsoft stores share one key order and one value format.

The driver is imported only when a store or adapter is built.
"""

from __future__ import annotations

from shardex.stores.cosmos.placement import RepairReport
from shardex.stores.cosmos.store import ChargeTally, CosmosStore

__all__ = ["ChargeTally", "CosmosStore", "RepairReport"]
