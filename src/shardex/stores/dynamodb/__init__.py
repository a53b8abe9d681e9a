"""The DynamoDB store, ``dynamodb://``: index-table mode and GSI mode over one async core.

- ``store``: ``DynamoDBStore``, the store's hooks, the table-ownership check and the
  request path that maps errors and reports consumed capacity;
- ``layout``: what both modes share (the Layout interface, paged COUNT, key schemas);
- ``table``: index-table mode, shardex's own table; ``gsi``: GSI mode, the
  application's items and index;
- ``codec``: entries, placements and records as DynamoDB items (pure);
- ``client``: the aiobotocore and boto3 adapters and the mapping of driver errors;
- ``admin``: creating the tables and waiting until they are ACTIVE.

The driver is imported only when a store or adapter is built.
"""

from __future__ import annotations

from shardex.stores.dynamodb.store import DynamoDBStore

__all__ = ["DynamoDBStore"]
