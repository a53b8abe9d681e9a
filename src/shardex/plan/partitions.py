"""Where shard keys fall on a table's physical partitions, and what the busiest one takes.

Pure arithmetic, no I/O. A store hashes every partition key onto one of its physical
partitions, so shard keys that each fit a partition may still share one: 6 shard keys on
10 partitions all land apart in only 15% of placements. What one partition takes is the
sum of the shard keys that hash onto it plus its share of the load spread over the whole
table (one placement record per item written, by each item's own key).

DynamoDB does not publish its hash, so a placement is a draw: ``busiest_partition`` draws
``TRIALS`` placements with the simulator's own placement function (``sim.partitions.slot_of``,
over the index names ``NAME``, ``NAME~1``, ``NAME~2``, ..., kept per key:
``shardex.plan.draws``) and reports the busiest partition's load, expected (the mean
over placements) and at ``QUANTILE`` (the worst but 1%), with the placement at that
quantile named (``worst_namespace``), so a simulation of that very
placement checks it. ``Placements`` answers again as the loads change (``fit_shards``
growing one value's N), at the cost of the shard keys that changed. With ``partitions``
= 0 every key is its own partition (a table split for heat, or Azure Table Storage,
whose targets are per partition key): no key shares.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from shardex.errors import InvalidInput
from shardex.hashing import jump
from shardex.plan.draws import Draws, buckets_of, namespace_of
from shardex.routing import ShardPolicy
from shardex.sim.partitions import key_hash

__all__ = ["Busiest", "Placements", "QUANTILE", "TRIALS", "busiest_partition",
           "collision_free_odds", "placed", "quantile_trial", "shard_loads"]

TRIALS = 160
QUANTILE = 0.99


@dataclass(frozen=True, slots=True)
class Busiest:
    """The busiest partition's load over hash placements, in units a second.

    - ``partitions``: the partition count (0: every key its own); ``spread``: the units a
      second each partition takes of the load spread over the table.
    - ``expected``: the mean over placements of the busiest partition's load;
      ``worst``: its ``quantile`` (the p99: 99% of placements do no worse).
    - ``collision_free``: the share of placements in which no two shard keys share a
      partition; ``total``: the shard keys' load, all of it.
    - ``worst_namespace``: the index name whose placement is that quantile (the
      simulator places keys by it), and ``worst_keys`` the shard keys on its busiest
      partition, heaviest first; ``own``: the busiest partition of ``namespace`` itself;
      ``tops``: the busiest partition's load in each placement drawn, in order (none
      when every key is its own partition).
    """

    partitions: int
    keys: int
    spread: float
    expected: float
    worst: float
    quantile: float
    collision_free: float
    worst_namespace: str
    worst_keys: tuple[str, ...]
    own: float
    total: float = 0.0
    tops: tuple[float, ...] = ()

    @property
    def named(self) -> str:
        """``worst_keys`` as a verdict names them: the first four, then "..."."""
        return ", ".join(self.worst_keys[:4]) + (", ..." if len(self.worst_keys) > 4 else "")


def collision_free_odds(keys: int, partitions: int) -> float:
    """The chance that ``keys`` keys hashed uniformly onto ``partitions`` all land apart:
    ``P! / (P - K)! / P^K`` (1 when ``partitions`` is 0: every key its own)."""
    if partitions == 0 or keys <= 1:
        return 1.0
    odds = 1.0
    for i in range(keys):
        odds *= max(0, partitions - i) / partitions
    return odds


def placed(namespace: str, key: str, partitions: int) -> int:
    """``slot_of(namespace, key, partitions)`` (up to ``MOST`` partitions)."""
    return jump(key_hash(namespace, key), buckets_of(partitions))


class Placements:
    """``busiest_partition`` of one table, asked again as the loads change: each answer
    sums again only the partitions of the shard keys whose load changed (``Draws``), so
    growing one value's N costs its shard keys, not every key's."""

    def __init__(self, partitions: int, *, spread: float = 0.0, namespace: str = "index",
                 trials: int = TRIALS, quantile: float = QUANTILE) -> None:
        self.partitions, self.spread, self.namespace = partitions, spread, namespace
        self.trials, self.quantile = trials, quantile
        self._draws: Draws | None = None

    def busiest(self, loads: Mapping[str, float]) -> Busiest:
        """``busiest_partition(loads, ...)`` with the settings given (and its errors)."""
        partitions, trials, quantile = self.partitions, self.trials, self.quantile
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 0:
            raise InvalidInput(f"partitions must be an integer >= 0, got {partitions!r}")
        if trials < 1 or not 0 < quantile <= 1:
            raise InvalidInput(f"trials must be >= 1 and quantile in (0, 1], got {trials}, "
                               f"{quantile}")
        for key, units in loads.items():
            if not math.isfinite(units) or units < 0:
                raise InvalidInput(f"load of {key!r} must be a finite number >= 0, got "
                                   f"{units!r}")
        if partitions == 0:
            top = max(loads.items(), key=lambda kv: kv[1], default=("", 0.0))
            return Busiest(0, len(loads), 0.0, top[1], top[1], quantile, 1.0,
                           self.namespace, (top[0],) if top[0] else (), top[1],
                           sum(loads.values()))
        if self._draws is None:
            self._draws = Draws(partitions, spread=self.spread, namespace=self.namespace,
                                trials=trials)
        draws = self._draws
        draws.update(loads)
        return self._at(loads, quantile_trial(draws.tops, quantile))

    def at(self, loads: Mapping[str, float], trial: int) -> Busiest:
        """``busiest(loads)`` (asked just before, with these loads) as placement ``trial``
        has it: its busiest partition taken for the worst, where placements of other
        loads on the same table are judged together (``quantile_trial``)."""
        if self._draws is None:
            return self.busiest(loads)
        return self._at(loads, trial)

    def _at(self, loads: Mapping[str, float], trial: int) -> Busiest:
        draws, trials = self._draws, self.trials
        assert draws is not None
        worst = draws.tops[trial]
        hot = draws.row(trial).index(worst)
        return Busiest(
            partitions=self.partitions, keys=len(loads), spread=self.spread,
            expected=sum(draws.tops) / trials, worst=worst, quantile=self.quantile,
            collision_free=draws.apart / trials,
            worst_namespace=namespace_of(self.namespace, trial),
            worst_keys=tuple(sorted(draws.on(trial, hot), key=lambda k: -loads[k])),
            own=draws.tops[0], total=sum(loads.values()), tops=tuple(draws.tops))


def quantile_trial(tops: Sequence[float] | Sequence[tuple[float, float]],
                   quantile: float = QUANTILE) -> int:
    """The placement at ``quantile`` of ``tops`` (a load, or shares of ceilings compared
    in order, each placement drawn): the worst but ``1 - quantile`` of them (ties: the
    earlier one)."""
    ranked = sorted((top, trial) for trial, top in enumerate(tops))
    rank = min(len(tops) - 1, max(0, math.ceil(quantile * len(tops)) - 1))
    return ranked[rank][1]


def busiest_partition(loads: Mapping[str, float], partitions: int, *, spread: float = 0.0,
                      namespace: str = "index", trials: int = TRIALS,
                      quantile: float = QUANTILE) -> Busiest:
    """The busiest of ``partitions`` partitions when the shard keys of ``loads`` (shard key
    -> units a second) hash onto them, each partition also taking ``spread`` units a second.

    Draws ``trials`` placements (deterministic: the index names ``namespace``,
    ``namespace~1``, ...). Raises InvalidInput for a negative partition count or load,
    a trial count below 1, or a quantile outside (0, 1].
    """
    return Placements(partitions, spread=spread, namespace=namespace, trials=trials,
                      quantile=quantile).busiest(loads)


def shard_loads(per_key: Mapping[str, tuple[int, float]]) -> dict[str, float]:
    """Shard key -> units a second, from value -> (N, units a second of the value): each
    of a value's N shard keys takes an N-th (the hash strategy spreads items evenly)."""
    out: dict[str, float] = {}
    for value, (n, units) in per_key.items():
        for key in _shard_keys(value, n):
            out[key] = units / n
    return out


@lru_cache(maxsize=1 << 14, typed=True)
def _shard_keys(value: str, n: int) -> tuple[str, ...]:
    """``ShardPolicy(shards=n).shard_keys(value)``, kept: a plan asks for them each step."""
    return tuple(ShardPolicy(shards=n).shard_keys(value))
