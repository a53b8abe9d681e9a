"""What a reshard's ``start`` found and would do: per value, the entries and the moves, the
keys that give and take them, and how long the move takes at a rate per shard key."""

from __future__ import annotations

from dataclasses import dataclass

from shardex.migrate.units import allocate
from shardex.routing import Routing, ShardPolicy

__all__ = ["StartPlan", "ValuePlan"]


@dataclass(frozen=True, slots=True)
class ValuePlan:
    """One value of a reshard: its policy before and after, entries read and to move, the
    most of them one source key gives (``busiest``), the keys the mover drains
    (``sources``) and fills (``targets``, ``Layouts.flow``), and the write units the moves
    cost (``units``; None: two a move): what bounds how soon a mover held to a rate per
    shard key can be done."""

    value: str
    source: ShardPolicy
    target: ShardPolicy
    entries: int
    to_move: int
    busiest: int = 0
    sources: int = 1
    targets: int = 1
    units: float | None = None

    @property
    def cost(self) -> float:
        """The write units a move costs on the key it leaves, on average: two for an
        entry of up to 1 KB moved by a transaction, twice that between tiers (a write on
        each store), more for larger entries."""
        if self.units is None or not self.to_move:
            return 2.0
        return self.units / self.to_move


@dataclass(frozen=True, slots=True)
class StartPlan:
    """What ``start`` found and did: the routing it stores (or would), per value, the steps."""

    routing: Routing
    values: dict[str, ValuePlan]
    stored: bool

    @property
    def to_move(self) -> int:
        return sum(v.to_move for v in self.values.values())

    @property
    def sources(self) -> int:
        """The source keys entries leave, of every value: the workers that move them all at
        once (the units of one key move one after another)."""
        return sum(v.sources for v in self.values.values())

    def move_seconds(self, rate: float, workers: int = 1) -> float:
        """About how long a mover held to ``rate`` write units a second on any shard key
        takes with ``workers`` work units at once (``run``'s ``--workers``), each move at
        what it costs (``ValuePlan.cost``). A worker drains one source key at a time, at
        the key's share of the rate (``allocate``: what keeps every target key within it
        when all the sources drain at once); with a worker for each source key, the
        busiest source key's moves at its share."""
        if not rate:
            return 0.0
        rates = [(v, allocate(rate, sources=v.sources, targets=v.targets) / v.cost)
                 for v in self.values.values()]
        alone = sum(v.to_move / moves for v, moves in rates)
        busiest = max((v.busiest / moves for v, moves in rates), default=0.0)
        return max(busiest, alone / max(1, workers))
