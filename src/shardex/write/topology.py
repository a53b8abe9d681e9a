"""What a write may touch, as a value: the stores of an index by tier, and who arbitrates.

Pure. ``Topology`` names every store an index has (None: its own store; else a tier's
name), whether its own store arbitrates which store an item lives in (it does where it
writes its own entries: a DynamoDB GSI-mode table's items are the application's), and
which stores the application writes too (GSI mode). ``crossing`` says whether a value
moves between two stores in a routing's state, and which is the one it came from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from shardex.errors import InvalidRouting
from shardex.routing import UNION_STATES, Routing

__all__ = ["ONE_STORE", "Topology", "crossing", "moved", "moving", "named"]

Tier = str | None


@dataclass(frozen=True, slots=True)
class Topology:
    """The stores of an index by tier (None first: its own), and what each can do.

    ``arbiter``: the index's own store arbitrates items across stores. ``foreign``: the
    stores whose items the application writes too. ``late``: the stores where a write
    that failed ambiguously may still land after (``Capabilities.late_writes``).
    ``unknown(names)`` words the error for a routing that names tiers the index has no
    store for.
    """

    stores: tuple[Tier, ...] = (None,)
    arbiter: bool = True
    foreign: frozenset[Tier] = frozenset()
    late: frozenset[Tier] = frozenset()
    unknown: Callable[[set[str]], str] | None = None

    @property
    def tiered(self) -> bool:
        """True if the index has a store besides its own."""
        return len(self.stores) > 1

    def check(self, tier: Tier) -> Tier:
        """``tier`` if the index has a store for it; InvalidRouting otherwise."""
        if tier not in self.stores:
            names = {tier} if tier is not None else set()
            raise InvalidRouting(self.unknown(names) if self.unknown is not None else
                                 f"the routing names tier {tier!r}, and the index has no "
                                 "store for it")
        return tier


ONE_STORE = Topology()


def crossing(routing: Routing, value: str) -> tuple[Tier, Tier] | None:
    """(origin, other) while readers of ``value`` cover two stores, else None.

    The states where reads cover both layouts. The origin (S) is the store the reshard
    moved the value from when it began: the previous layout's, or in a rollback the
    layout's own; the other is T.
    """
    if routing.state not in UNION_STATES:
        return None
    return moved(routing, value)


def moved(routing: Routing, value: str) -> tuple[Tier, Tier] | None:
    """(origin, other) while the reshard in ``routing`` moves ``value`` between two stores,
    in any of its states (``crossing`` is the union states alone), else None.

    Until the reshard ends, rows its moves left in the store that no longer holds the
    value may still be there (a rollback's are swept in ``retired``): which of the two
    placements holds is ``shardex.write.truth``'s to say, in every state.
    """
    previous = routing.previous
    if previous is None:
        return None
    was, tier = previous.policy(value).tier, routing.policy(value).tier
    if was == tier:
        return None
    if routing.reshard is not None and routing.reshard.direction == "rollback":
        return tier, was
    return was, tier


def moving(routing: Routing) -> dict[str, tuple[Tier, Tier]]:
    """Every value the reshard in ``routing`` moves between two stores: its (S, T)."""
    meta = routing.reshard
    values = () if meta is None else meta.values
    pairs = {value: moved(routing, value) for value in values}
    return {value: pair for value, pair in pairs.items() if pair is not None}


def named(tier: Tier) -> str:
    """``tier``'s store as messages name it."""
    return "the index's own store" if tier is None else f"tier {tier!r}"
