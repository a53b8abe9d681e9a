"""The Azure Table Storage store, ``azure-tables://TABLE?endpoint=URL``.

Also the Cosmos DB Table API, which the same client serves (tested on Azurite only).

- ``store``: ``AzureTablesStore``, its hooks, reads and records, and ``repair``;
- ``placement``: the rows and requests of the cross-partition write, the readers'
  ownership check and repair (``shardex.stores.crosspart``, which Cosmos DB shares);
- ``keys``: the reversible, order-preserving key encoding (published with vectors);
- ``codec``: entries, placements and records as entities (pure);
- ``client``: the adapter over ``azure.data.tables.aio``, credentials, error mapping;
- ``transport``: the HTTP transport both Azure SDKs send through (dropped TLS connections
  aborted);
- ``admin``: creating and deleting the table.

Why reads stay exact without cross-partition transactions. An entity group transaction
covers one partition, and an item's placement and its entry rows live in different
partitions, so a ``place`` is several requests with one commit point: the placement's
ETag-conditional replace. The placement is the single source of truth (it carries the
write's token and the tokens before it, as on every store). Entry rows carry the token
of the write that made them and a status; a row is *committed* only after its write
committed and while no later write has started to move it, so readers take committed
rows as they are and check every other row against its placement, keeping it only if
the placement names it. Each placed item then has exactly one row that readers keep, at
every instant and whatever crashed where: never two values, never none. Write outcomes
stay exact because a write applies at its commit alone: a failed condition there means
it did not apply (ConditionFailed), a timeout there that it may have (Unavailable, which
the write loop resolves by the token in the placement), and nothing after it changes the
outcome. ``repair`` removes what crashed writers left, fencing writes still in flight
first. ``shardex.stores.crosspart``'s docstring has the steps and the argument in full;
docs/azure.md the costs.

The driver is imported only when a store or adapter is built.
"""

from __future__ import annotations

from shardex.stores.azure.placement import RepairReport
from shardex.stores.azure.store import AzureTablesStore

__all__ = ["AzureTablesStore", "RepairReport"]
