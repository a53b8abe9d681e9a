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
    shard key can be done. ``kept``: the source keys that are filled too (from random
    or round-robin keys into hashed ones, the keys both layouts have), of ``landing``
    keys a move may land on (``Layouts.kept``)."""

    value: str
    source: ShardPolicy
    target: ShardPolicy
    entries: int
    to_move: int
    busiest: int = 0
    sources: int = 1
    targets: int = 1
    units: float | None = None
    kept: int = 0
    landing: int = 0

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
        rates = [(v, _drain(v, rate, workers) / v.cost) for v in self.values.values()]
        alone = sum(v.to_move / moves for v, moves in rates)
        busiest = max((v.busiest / moves for v, moves in rates), default=0.0)
        return max(busiest, alone / max(1, workers))


def _drain(value: ValuePlan, rate: float, workers: int) -> float:
    """The write units a second one source key of ``value`` drains at, ``workers`` source
    keys at once: its share of the rate (``allocate``), and where the source keys are
    filled too (``kept``), what the moves landing on it from the others draining at once
    leave of the rate (each spreads its moves over the keys it may land on but its own):
    from random keys 4 -> 8 with four workers, the estimate had said 5.4 s where the move
    took 8.2 s."""
    share = allocate(rate, sources=value.sources, targets=value.targets)
    if value.kept and value.landing > 1:
        others = (min(workers, value.sources) - 1) / max(1, value.sources - 1)
        taken = others * ((value.kept - 1) / (value.landing - 1)
                          + (value.sources - value.kept) / value.landing)
        share = min(share, rate / (1 + taken))
    return share
