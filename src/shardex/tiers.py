"""The stores of a tiered index: its own store and one store per named tier.

A policy may name a tier (``ShardPolicy(shards=32, tier="dedicated")``): the entries of
that value, and their items' placements, live in the tier's store, any store URI (its
own DynamoDB table with its own capacity, a ``memory://`` store in a simulation). The
routing record, the reshard's work records and every value without a tier stay in the
index's own store (tier None).

An item has one entry per index, so one live placement, in the store of the tier its
entry is in: writes of a value locate, decide and place in the value's tier with the
same conditional, token-carrying write as everywhere else. The index's own store
arbitrates which store an item lives in (``shardex.write``): a write that makes an
item live in a tier's store is confirmed there, so two writers creating one item on
two stores meet on one condition; ``shardex.write.arbitrated`` reads an item's
placements that way.
An item whose entry is on one store is not written under a value of another in one
step (no transaction spans two stores): ``put`` and ``move`` refuse it with
CapabilityMissing, naming where it is; moving a whole value between tiers is a reshard
(``shardex.reshard``), during which the value's items may have a placement in both
stores and ``shardex.write.truth`` says which holds (``crossing`` names the two tiers).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

from shardex.errors import (
    InvalidInput,
    InvalidPolicy,
    InvalidRouting,
    ShardexError,
)
from shardex.model.entries import Placement
from shardex.routing import Routing, check_tier_name
from shardex.stores import open_store
from shardex.stores.base import Store
from shardex.write.topology import Topology, crossing

Retrying = Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]

__all__ = ["TierStores", "identity"]


class TierStores:
    """The index's own store (tier None) and the store of each tier in ``tiers``.

    ``tiers`` maps tier names to a Store or a store URI. Raises InvalidInput naming
    ``tiers[name]`` for a bad name, a value that is neither or a tier that is the
    index's own store; a URI that cannot be opened raises what ``open_store`` raises
    (InvalidURI, MissingDependency, ...), naming ``tiers[name]`` where it can.
    """

    def __init__(self, main: Store, tiers: Mapping[str, Store | str] | None) -> None:
        self.main = main
        self._stores: dict[str | None, Store] = {None: main}
        if tiers is None:
            return
        if not isinstance(tiers, Mapping):
            raise InvalidInput(f"tiers must be a mapping of tier name to store or store URI, "
                               f"got {type(tiers).__name__}")
        for name, store in tiers.items():
            try:
                check_tier_name(name, "tier name")
            except InvalidPolicy as exc:
                raise InvalidInput(f"tiers: {exc}") from None
            if isinstance(store, str):
                try:
                    store = open_store(store)
                except ShardexError as exc:
                    named = _named(exc, f"tiers[{name!r}]")
                    if named is exc:
                        raise
                    raise named from exc
            elif not isinstance(store, Store):
                raise InvalidInput(f"tiers[{name!r}] must be a Store or a store URI, "
                                   f"got {store!r}")
            # one store's data named twice (the same table by two URIs): a move onto it
            # would find its copies where the entries are, and a rollback's sweep remove
            # them, the entries themselves
            if store is main or store.holds == main.holds:
                raise InvalidInput(f"tiers[{name!r}] is the index's own store ({store.uri}); "
                                   "a tier is another store (leave the tier out of the "
                                   "policy instead)")
            for other, known in self._stores.items():
                if other is not None and known.holds == store.holds:
                    raise InvalidInput(f"tiers[{name!r}] and tiers[{other!r}] are one store "
                                       f"({store.uri}); each tier is a store of its own")
            self._stores[name] = store

    @property
    def arbiter(self) -> Store | None:
        """The store that arbitrates which store an item lives in: the index's own, where
        it writes its own entries (a GSI-mode table's items are the application's)."""
        return None if self.main.capabilities.foreign_writes else self.main

    @property
    def names(self) -> list[str]:
        """The tier names, sorted (the index's own store left out)."""
        return sorted(name for name in self._stores if name is not None)

    def __iter__(self) -> Iterator[tuple[str | None, Store]]:
        return iter(self._stores.items())

    def store(self, tier: str | None) -> Store:
        """The store of ``tier``; InvalidRouting if the index has none of that name."""
        store = self._stores.get(tier)
        if store is None:
            raise InvalidRouting(self._unknown({tier} if tier else set()))
        return store

    def check(self, routing: Routing) -> None:
        """Raise InvalidRouting if ``routing`` names a tier this index has no store for."""
        unknown = routing.tiers() - set(self._stores)
        if unknown:
            raise InvalidRouting(self._unknown(unknown))

    def _unknown(self, names: set[str]) -> str:
        given = ", ".join(map(repr, self.names)) or "none"
        first = sorted(names)[0]
        return (f"the routing names tier(s) {', '.join(map(repr, sorted(names)))} (a "
                f"ShardPolicy's tier, '@NAME'), but the index has no store for them: pass "
                f"tiers={{name: store or URI}}, on the command line --tier {first}=URI "
                f"(tiers given: {given})")

    def tier_of(self, routing: Routing, value: str) -> str | None:
        """The tier ``value`` is written and read on under ``routing`` (the new layout's
        once readers read it alone). Raises InvalidRouting for a tier the index has no
        store for."""
        tier = routing.policy(value).tier
        self.store(tier)
        return tier

    def crossing(self, routing: Routing, value: str) -> tuple[str | None, str | None] | None:
        """(origin, other) while readers of ``value`` cover two tiers, else None
        (``shardex.write.crossing``). Raises InvalidRouting for a tier without a store."""
        tiers = crossing(routing, value)
        if tiers is not None:
            for tier in tiers:
                self.store(tier)
        return tiers

    def topology(self) -> Topology:
        """The stores as the write engine sees them: by tier, and who arbitrates."""
        return Topology(tuple(self._stores), arbiter=self.arbiter is not None,
                        foreign=frozenset(name for name, store in self._stores.items()
                                          if store.capabilities.foreign_writes),
                        late=frozenset(name for name, store in self._stores.items()
                                       if store.capabilities.late_writes),
                        unknown=self._unknown)

    async def locate(self, namespace: str, item_id: str, retrying: Retrying
                     ) -> dict[str | None, Placement | None]:
        """The item's placement in each tier's store."""
        return {tier: await _locate(store, namespace, item_id, retrying)
                for tier, store in self._stores.items()}

    async def open(self) -> None:
        """Open every tier's store (not the index's own); errors name ``tiers[name]``."""
        opened: list[Store] = []
        try:
            for name, store in self._stores.items():
                if name is None:
                    continue
                try:
                    await store.open()
                except ShardexError as exc:
                    named = _named(exc, f"tiers[{name!r}] ({store.uri})")
                    if named is exc:
                        raise
                    raise named from exc
                opened.append(store)
        except BaseException:
            for store in opened:
                await store.close()
            raise

    async def close(self) -> None:
        for name, store in self._stores.items():
            if name is not None:
                await store.close()


async def _locate(store: Store, namespace: str, item_id: str,
                  retrying: Retrying) -> Placement | None:
    found: Placement | None = await retrying(lambda: store.locate(namespace, item_id))
    return found


def identity(store: Store) -> str | None:
    """The data ``store`` names, as text that means the same in every process (its
    ``holds``: a service's endpoint and table); None for a simulated store, whose data is
    the object's own."""
    holds = store.holds
    if isinstance(holds, tuple) and holds and all(isinstance(part, str) for part in holds):
        return " ".join(holds)
    return None


def _named(exc: ShardexError, where: str) -> ShardexError:
    """``exc`` again, of the same class where it can be built from a message, naming ``where``."""
    try:
        return type(exc)(f"{where}: {exc}")
    except TypeError:
        return exc
