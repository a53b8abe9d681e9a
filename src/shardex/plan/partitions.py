"""Where shard keys fall on a table's physical partitions, and what the busiest one takes.

Pure arithmetic, no I/O. A store hashes every partition key onto one of its physical
partitions, so shard keys that each fit a partition may still share one: 6 shard keys on
10 partitions all land apart in only 15% of placements. What one partition takes is the
sum of the shard keys that hash onto it plus its share of the load spread over the whole
table (one placement record per item written, by each item's own key).

DynamoDB does not publish its hash, so a placement is a draw: ``busiest_partition`` draws
``TRIALS`` placements with the simulator's own placement function (``sim.partitions.slot_of``,
computed here from each key's cached jump sequence, ``placed``, over the
index names ``NAME``, ``NAME~1``, ``NAME~2``, ...) and reports the busiest partition's
load, expected (the mean over placements) and at ``QUANTILE`` (the worst but 1%), with
the placement at that quantile named (``worst_namespace``), so a simulation of that very
placement checks it. With ``partitions`` = 0 every key is its own partition (a table split
for heat, or Azure Table Storage, whose targets are per partition key): no key shares.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from shardex.errors import InvalidInput
from shardex.routing import ShardPolicy
from shardex.sim.partitions import key_hash

__all__ = ["Busiest", "QUANTILE", "TRIALS", "busiest_partition", "collision_free_odds", "placed",
           "shard_loads"]

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
      partition, heaviest first; ``own``: the busiest partition of ``namespace`` itself.
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


def collision_free_odds(keys: int, partitions: int) -> float:
    """The chance that ``keys`` keys hashed uniformly onto ``partitions`` all land apart:
    ``P! / (P - K)! / P^K`` (1 when ``partitions`` is 0: every key its own)."""
    if partitions == 0 or keys <= 1:
        return 1.0
    odds = 1.0
    for i in range(keys):
        odds *= max(0, partitions - i) / partitions
    return odds


def _namespace(namespace: str, trial: int) -> str:
    return namespace if trial == 0 else f"{namespace}~{trial}"


_MASK64 = (1 << 64) - 1
_LCG = 2862933555777941757
# the most partitions a placement is drawn for
_MOST = 1 << 16


@lru_cache(maxsize=262_144)
def _jumps(namespace: str, key: str) -> tuple[int, ...]:
    """Every bucket ``jump_hash`` passes through for the key, up to ``_MOST`` buckets: its
    bucket for P partitions is the last below P (one hash serves every P)."""
    h, out = key_hash(namespace, key), []
    b, j = -1, 0
    while j < _MOST:
        b = j
        out.append(b)
        h = (h * _LCG + 1) & _MASK64
        j = int((b + 1) * (float(1 << 31) / float((h >> 33) + 1)))
    return tuple(out)


def placed(namespace: str, key: str, partitions: int) -> int:
    """``slot_of(namespace, key, partitions)``, from the key's cached jumps."""
    jumps = _jumps(namespace, key)
    return jumps[bisect.bisect_left(jumps, partitions) - 1]


@lru_cache(maxsize=65_536)
def _slots(namespace: str, key: str, partitions: int, trials: int) -> tuple[int, ...]:
    """The slot of ``key`` in each of ``trials`` placements (index names from
    ``namespace``)."""
    return tuple(placed(_namespace(namespace, t), key, partitions) for t in range(trials))


def busiest_partition(loads: Mapping[str, float], partitions: int, *, spread: float = 0.0,
                      namespace: str = "index", trials: int = TRIALS,
                      quantile: float = QUANTILE) -> Busiest:
    """The busiest of ``partitions`` partitions when the shard keys of ``loads`` (shard key
    -> units a second) hash onto them, each partition also taking ``spread`` units a second.

    Draws ``trials`` placements (deterministic: the index names ``namespace``,
    ``namespace~1``, ...). Raises InvalidInput for a negative partition count or load,
    a trial count below 1, or a quantile outside (0, 1].
    """
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 0:
        raise InvalidInput(f"partitions must be an integer >= 0, got {partitions!r}")
    if trials < 1 or not 0 < quantile <= 1:
        raise InvalidInput(f"trials must be >= 1 and quantile in (0, 1], got {trials}, "
                           f"{quantile}")
    for key, units in loads.items():
        if not math.isfinite(units) or units < 0:
            raise InvalidInput(f"load of {key!r} must be a finite number >= 0, got {units!r}")
    if partitions == 0:
        top = max(loads.items(), key=lambda kv: kv[1], default=("", 0.0))
        return Busiest(0, len(loads), 0.0, top[1], top[1], quantile, 1.0, namespace,
                       (top[0],) if top[0] else (), top[1], sum(loads.values()))
    keys = sorted(loads, key=lambda k: -loads[k])
    sums = [[spread] * partitions for _ in range(trials)]
    counts = [[0] * partitions for _ in range(trials)]
    for key in keys:
        load = loads[key]
        for trial, slot in enumerate(_slots(namespace, key, partitions, trials)):
            sums[trial][slot] += load
            counts[trial][slot] += 1
    draws = sorted((max(row), trial) for trial, row in enumerate(sums))
    apart = sum(1 for row in counts if max(row) <= 1)
    rank = min(trials - 1, max(0, math.ceil(quantile * trials) - 1))
    worst, trial = draws[rank]
    row = sums[trial]
    hot = row.index(max(row))
    return Busiest(
        partitions=partitions, keys=len(keys), spread=spread,
        expected=sum(load for load, _ in draws) / trials, worst=worst, quantile=quantile,
        collision_free=apart / trials, worst_namespace=_namespace(namespace, trial),
        worst_keys=tuple(k for k in keys
                         if _slots(namespace, k, partitions, trials)[trial] == hot),
        own=max(sums[0]), total=sum(loads.values()))


def shard_loads(per_key: Mapping[str, tuple[int, float]]) -> dict[str, float]:
    """Shard key -> units a second, from value -> (N, units a second of the value): each
    of a value's N shard keys takes an N-th (the hash strategy spreads items evenly)."""
    out: dict[str, float] = {}
    for value, (n, units) in per_key.items():
        for key in ShardPolicy(shards=n).shard_keys(value):
            out[key] = units / n
    return out
