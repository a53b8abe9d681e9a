"""The values' measured reads in a plan: the floor they set on N, and N grown for their partitions.

Pure arithmetic, no I/O. A value read at ``read`` units a second (as the store charged
them: a diagnosis's ``peak_read_units_per_s``) spreads a listing's reads over its N shard
keys, so it needs the smallest N with::

    read * headroom <= N * read_ceiling

and, as its writes do, N grows while the busiest partition's reads at the p99 of hash
placements pass the partition's read ceiling (``fit_reads``, on
``shardex.plan.verdict.fit_shards``). Where no N fits the table's partitions, the read
setting that starts the table with enough of them does
(``shardex.plan.verdict.recommend``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from shardex.errors import InvalidInput
from shardex.plan.partitions import TRIALS
from shardex.plan.verdict import fit_shards, partition_ceiling
from shardex.routing import MAX_SHARDS
from shardex.sim.profiles import Profile

__all__ = ["checked_read_peaks", "fit_reads", "read_shards"]


def checked_read_peaks(read_peaks: Mapping[str, float] | None,
                       peaks: Mapping[str, float]) -> dict[str, float]:
    """``read_peaks`` checked: a mapping of values of ``peaks`` to finite numbers >= 0
    (``{}`` for None). Raises InvalidInput naming the value at fault."""
    if read_peaks is None:
        return {}
    if not isinstance(read_peaks, Mapping):
        raise InvalidInput(f"read peaks must map values to read units a second, got "
                           f"{read_peaks!r}")
    unknown = sorted(set(read_peaks) - set(peaks), key=str)
    if unknown:
        raise InvalidInput(f"read peak given for {', '.join(map(repr, unknown))}, which has "
                           "no peak")
    out = {}
    for value, read in read_peaks.items():
        if isinstance(read, bool) or not isinstance(read, int | float) \
                or not math.isfinite(read) or read < 0:
            raise InvalidInput(f"read peak of {value!r} must be a finite number >= 0 (read "
                               f"units a second), got {read!r}")
        out[value] = float(read)
    return out


def read_shards(value: str, read: float, ceiling: float, headroom: float) -> int:
    """The smallest N with ``read x headroom <= N x ceiling`` (``shards_for``'s rule, float
    noise rounded away). Raises InvalidInput when that is more than 4096."""
    ratio = read * headroom / ceiling
    if not ratio <= MAX_SHARDS:
        raise InvalidInput(f"{value}: a read peak of {read:g} read units/s (x{headroom:g} "
                           f"headroom) needs more than {MAX_SHARDS} shards of "
                           f"{ceiling:g} read units/s; isolate this key on a dedicated path "
                           "instead")
    return max(1, math.ceil(round(ratio, 9)))


def fit_reads(model: Profile, reads: Mapping[str, float], base: Mapping[str, int],
              shards: Mapping[str, int], *, count: int, locates: float, headroom: float,
              namespace: str, trials: int = TRIALS) -> tuple[dict[str, int], bool]:
    """N grown from ``shards`` (to at most ``widest_shards`` of ``base``, the per-key rule's)
    until the busiest of ``count`` partitions' reads fit (``fit_shards`` on the read
    ceiling; ``locates``, read units a second, spread over the table but in the GSI
    layout, whose entries are read on the GSI), with the headroom or else at the peak;
    ``shards`` as they are when no N fits.

    ``reads``: value -> its read units a second (the values that read). Returns (N per
    value of ``shards``, whether the reads fit with the headroom).
    """
    ceiling = partition_ceiling(model, count, write=False)
    spread = 0.0 if model.layout == "gsi" or not count else locates / count
    for margin in dict.fromkeys((headroom, 1.0)):
        grown, fits = fit_shards(reads, {v: base[v] for v in reads}, partitions=count,
                                 ceiling=ceiling, spread=spread, headroom=margin,
                                 namespace=namespace, trials=trials,
                                 start={v: shards[v] for v in reads})
        if fits:
            return {**shards, **grown}, margin == headroom
    return dict(shards), False

