"""The application's plain index an adoption moves from, read as a store.

The store contract knows nothing of adoption: a backend that can read a plain index
of the application's says so with a method of its own (``DynamoDBStore.plain_index``,
``follow_application_sort``), and this module maps an ``Adoption`` onto it, for the
readers of an index (``ShardedIndex``) and for the migration that adopts it.
"""

from __future__ import annotations

from shardex.adoption import Adoption
from shardex.errors import CapabilityMissing, InvalidInput
from shardex.stores.base import Store

__all__ = ["follow", "source_store"]


def source_store(store: Store, adoption: Adoption) -> Store:
    """A read-only store on the index ``adoption`` moves from, beside ``store``'s index.

    Readers of an index whose adoption reads the old index (``reads_source``) read a
    value ``V`` from it as the one shard key ``V``. Not opened: the caller opens and
    closes it. Raises CapabilityMissing for a store that cannot adopt an index,
    InvalidInput for a GSI adopted into an index table or the other way round.
    """
    from shardex.stores.dynamodb import DynamoDBStore

    if not isinstance(store, DynamoDBStore):
        raise CapabilityMissing(f"{store.uri} cannot adopt an existing index "
                                f"({adoption.kind} {adoption.source!r})")
    if (adoption.kind == "gsi") != store.gsi_mode:
        raise InvalidInput(f"{store.uri}: a GSI is adopted into a GSI-mode store, an index "
                           "table into an index-table-mode one")
    if adoption.kind == "gsi":
        return store.plain_index(adoption.source, adoption.attribute)
    return store.plain_index(adoption.source, adoption.attribute,
                             id_attribute=adoption.id_attribute,
                             sort_attribute=adoption.sort_attribute)


def follow(store: Store, adoption: Adoption) -> None:
    """Adjust ``store`` to an index adopted from the application's (a GSI's own sort).

    Called by ``ShardedIndex`` when its routing records an adoption: an adopted GSI's
    sort attribute is the application's (``DynamoDBStore.follow_application_sort``).
    Other stores have nothing to adjust.
    """
    if adoption.kind == "gsi" and store.scheme == "dynamodb":
        from shardex.stores.dynamodb import DynamoDBStore

        if isinstance(store, DynamoDBStore):
            store.follow_application_sort()
