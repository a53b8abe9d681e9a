"""The store protocol: the one small async interface every backend implements.

A store knows nothing of sharding. It keeps *entries* under partition keys (shard keys,
opaque to it) ordered by ``(sort, item_id)``, knows where each item's entry is (its
*placement*, which carries a write version), and keeps small *records* (the routing
document) with compare-and-set writes. Every driver error is mapped at the store's
boundary to a class of ``shardex.errors`` with the driver's exception chained.

An item has at most one entry per index, as an item has one value of an indexed
attribute: placing it again moves it.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, ClassVar

from shardex.errors import CapabilityMissing, InvalidInput
from shardex.stores.uri import StoreURI

__all__ = [
    "Capabilities",
    "Placement",
    "Position",
    "QueryPage",
    "Record",
    "Store",
    "StoredEntry",
    "check_place",
]

# A position in a shard's order: (sort, item_id). Entries are ordered by it, by code
# point (which is also UTF-8 byte order, DynamoDB's order for string keys).
Position = tuple[str, str]


@dataclass(frozen=True, slots=True)
class StoredEntry:
    """One index row as a store keeps it."""

    shard_key: str
    sort: str
    item_id: str
    attrs: Mapping[str, Any] = field(default_factory=dict)
    version: int = 1

    @property
    def position(self) -> Position:
        return (self.sort, self.item_id)


@dataclass(frozen=True, slots=True)
class Placement:
    """Where an item's entry is, and the version of the last write that placed it.

    ``entry`` is None for a tombstone: the item was deleted at ``version``, and an
    older late write must not bring it back.
    """

    item_id: str
    version: int
    entry: StoredEntry | None


@dataclass(frozen=True, slots=True)
class QueryPage:
    """One page of a shard, in the order asked for.

    ``resume`` is the position to pass as ``after`` for the next page, or None when
    the shard holds nothing beyond this page. ``units`` is the read capacity consumed.
    """

    entries: list[StoredEntry]
    resume: Position | None
    units: float = 0.0


@dataclass(frozen=True, slots=True)
class Record:
    """A small metadata document and its revision, for compare-and-set writes."""

    body: Mapping[str, Any]
    revision: int


def check_place(item_id: str, entry: StoredEntry | None, version: int,
                expected: int | None) -> None:
    """Refuse ``place`` arguments no store may accept, with InvalidInput naming the fault.

    The entry must carry the item's id and a shard key that is not reserved (reserved
    keys start with ``#``), and ``version`` must be an integer above ``expected``.
    """
    if entry is not None and (entry.item_id != item_id or not entry.shard_key
                              or entry.shard_key.startswith("#")):
        raise InvalidInput(f"entry {entry!r} cannot be placed as item {item_id!r}: its item "
                           "id must match, its shard key be non-empty, not start with '#'")
    if type(version) is not int or version <= (expected or 0):
        raise InvalidInput(f"version {version!r} of item {item_id!r} must be an integer "
                           f"greater than the expected version {expected!r}")


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a store can do; checked once, when an index is built on it.

    - ``atomic_place``: a placement moves an entry and records it in one atomic write.
    - ``consistent_reads``: a query sees every write acknowledged before it began
      (False for DynamoDB GSIs, which are eventually consistent).
    - ``max_page``: the most entries one query call returns.
    """

    atomic_place: bool = True
    consistent_reads: bool = True
    max_page: int = 1000

    def require(self, store: str, what: str, needed: bool, why: str) -> None:
        """Raise CapabilityMissing naming ``what`` unless the capability is present."""
        if not needed:
            raise CapabilityMissing(f"store {store} cannot do {what}: {why}")


class Store(abc.ABC):
    """The async protocol of a backend. ``namespace`` is the index name.

    Use as ``async with store:`` or call ``open``/``close``; opening is counted, so
    several indexes may share one store and the last ``close`` releases it.
    """

    scheme: ClassVar[str]
    capabilities: Capabilities = Capabilities()

    def __init__(self) -> None:
        self._opened = 0

    @classmethod
    @abc.abstractmethod
    def from_uri(cls, uri: StoreURI, **options: Any) -> Store:
        """Build the store from a parsed URI; keyword options override the URI's."""

    async def open(self) -> None:
        """Connect (the first time) and check that what the store needs exists."""
        if self._opened == 0:
            await self._connect()
        self._opened += 1

    async def close(self) -> None:
        """Release the connection when the last user closes."""
        if self._opened == 0:
            return
        self._opened -= 1
        if self._opened == 0:
            await self._disconnect()

    async def __aenter__(self) -> Store:
        await self.open()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def _connect(self) -> None:  # noqa: B027 - optional hook
        """Open connections; override in stores that have any."""

    async def _disconnect(self) -> None:  # noqa: B027 - optional hook
        """Close connections; override in stores that have any."""

    @property
    def uri(self) -> str:
        """A URI that names this store, without secrets."""
        return f"{self.scheme}://"

    # -- entries -------------------------------------------------------------------

    @abc.abstractmethod
    async def locate(self, namespace: str, item_id: str) -> Placement | None:
        """Return the item's placement (possibly a tombstone), or None if never placed."""

    @abc.abstractmethod
    async def place(self, namespace: str, item_id: str, entry: StoredEntry | None, *,
                    version: int, expected: int | None) -> float:
        """Atomically replace the item's entry with ``entry`` (None deletes it).

        The write applies only if the item's placement version is ``expected`` (None:
        never placed); otherwise ConditionFailed is raised and nothing changes. The old
        entry is removed, ``entry`` written, and the placement recorded at ``version``
        (a tombstone when ``entry`` is None). Returns the write units consumed.
        """

    @abc.abstractmethod
    async def query(self, namespace: str, shard_key: str, *, after: Position | None,
                    descending: bool, limit: int) -> QueryPage:
        """Return up to ``limit`` entries of ``shard_key`` strictly beyond ``after``.

        Entries come in ``(sort, item_id)`` order, descending if asked. A page may hold
        fewer than ``limit`` entries while ``resume`` is still set (a size-capped page).
        """

    @abc.abstractmethod
    async def count(self, namespace: str, shard_key: str) -> int:
        """Return how many entries ``shard_key`` holds."""

    def key_attributes(self, shard_key: str, sort: str, item_id: str) -> dict[str, Any]:
        """Return the attributes an application adds to its own item to index it.

        Only stores that index the application's items (DynamoDB GSI mode) have them;
        the others write their own entries and raise CapabilityMissing.
        """
        raise CapabilityMissing(f"store {self.uri} writes its own entries: there are no key "
                                "attributes for an application to add to its items")

    # -- records ---------------------------------------------------------------------

    @abc.abstractmethod
    async def get_record(self, namespace: str, key: str) -> Record | None:
        """Return the record ``key`` of ``namespace``, or None if there is none."""

    @abc.abstractmethod
    async def put_record(self, namespace: str, key: str, body: Mapping[str, Any], *,
                         expected: int | None) -> int:
        """Write a record if its revision is ``expected`` (None: absent); return the new one.

        Raises ConditionFailed, changing nothing, when another writer got there first.
        """
