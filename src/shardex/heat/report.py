"""The diagnosis of an access log: its hot keys, why they are hot, and what to do about it.

``diagnose(paths)`` reads files exactly (DuckDB), ``diagnose_stream(lines)`` reads an
unbounded stream (Space-Saving); both classify the heat and recommend a strategy and
N per hot key, N from the planner's formula with the observed peaks:

- ``calculated_suffix``: low cardinality; shard the hot values by a hash of the item
  id (shardex's ``hash`` strategy), so a reader that knows the id finds its shard;
- ``random_suffix``: as above, but the hot values are never read in the sample, so
  nothing needs to find an entry's shard: spread writes as evenly as possible;
- ``dedicated_heavy_key``: one popular entity dominates; give it its own shards and
  limits, leave the other keys alone;
- ``time_bucket_plus_suffix``: sequential; the hot key moves with time, so shard
  every new time bucket key with a suffix;
- ``none``: no key's peak comes within the headroom of a partition's ceiling.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from shardex.capacity import Ceiling, resolve_ceiling
from shardex.errors import InvalidInput
from shardex.heat.classify import Classification, Thresholds, classify
from shardex.heat.profile import HeatProfile, KeyHeat, Timeline
from shardex.plan import shards_for
from shardex.routing import MAX_SHARDS

__all__ = [
    "Diagnosis",
    "Recommendation",
    "STRATEGIES",
    "diagnose",
    "diagnose_stream",
    "recommend",
    "shards_needed",
]

STRATEGIES = ("calculated_suffix", "random_suffix", "dedicated_heavy_key",
              "time_bucket_plus_suffix", "none")


@dataclass(frozen=True, slots=True)
class Recommendation:
    """What to do: a strategy (one of STRATEGIES), N per value to shard, and why."""

    strategy: str
    shards: dict[str, int]
    why: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def shards_needed(heat: KeyHeat, ceiling: Ceiling, headroom: float) -> int:
    """Return the N that keeps ``heat``'s peak reads and writes, times ``headroom``,
    under one partition's ceilings (at most 4096, the most a policy allows)."""
    needed = 1
    for peak, bound in ((heat.peak_write_units_per_s, ceiling.write_units),
                        (heat.peak_read_units_per_s, ceiling.read_units)):
        try:
            needed = max(needed, shards_for(peak, ceiling=bound, headroom=headroom))
        except InvalidInput:
            needed = MAX_SHARDS  # over the limit: a dedicated path is the only way out
    return needed


def _pct(share: float) -> str:
    return f"{100 * share:.1f}%"


def recommend(classification: Classification, profile: HeatProfile, *,
              headroom: float) -> Recommendation:
    """Recommend a strategy and N per hot key for ``profile`` classified as given."""
    shards = {h.key: n for h in profile.over
              if (n := shards_needed(h, profile.ceiling, headroom)) > 1}
    if not shards:
        return Recommendation("none", {}, (
            f"no key's peak comes within a headroom of {headroom:g}x of the per-partition "
            f"ceiling ({profile.ceiling.name}: {profile.ceiling.write_units:g} write, "
            f"{profile.ceiling.read_units:g} read units/s); nothing needs shards"))
    hot = ", ".join(f"{k} (N={n})" for k, n in shards.items())
    capped = [k for k, n in shards.items() if n >= MAX_SHARDS]
    note = (f"; {', '.join(capped)} would need more than {MAX_SHARDS} shards: isolate it on "
            "a dedicated path with its own admission limit") if capped else ""
    evidence = classification.evidence
    kind = classification.kind
    if kind == "sequential":
        return Recommendation("time_bucket_plus_suffix", shards, (
            f"the hot key moves along {evidence['ordering']} keys over time "
            f"({evidence['first_hot_key']} to {evidence['last_hot_key']}): each "
            "new bucket takes the whole load in turn, so add a suffix to every bucket key "
            f"(bucket#k, k from a hash of the item id) with N = {max(shards.values())}, and "
            f"read a bucket by fanning out over its N shards; observed: {hot}{note}"))
    if kind == "popular_entity":
        return Recommendation("dedicated_heavy_key", shards, (
            f"{evidence['top_key']} alone takes {_pct(evidence['top_key_share'])} of the units "
            f"among {evidence['distinct_keys']} keys: route it on a dedicated path with its own "
            f"shards and admission limit, and leave the other keys unsharded; {hot}{note}"))
    read = sum(h.reads for h in profile.over if h.key in shards)
    if kind == "low_cardinality" and read == 0:
        return Recommendation("random_suffix", shards, (
            f"few keys carry the load and the hot ones are never read in this sample, so "
            f"nothing needs to find an entry's shard from its id: a random suffix spreads "
            f"writes most evenly; bulk reads fan out over N; {hot}{note}"))
    lead = ("few keys carry most of the load" if kind == "low_cardinality" else
            "the load is spread over many keys, but some still exceed one partition")
    return Recommendation("calculated_suffix", shards, (
        f"{lead}: shard each hot value by a hash of the item id (a reader that knows the id "
        f"finds its shard; a listing fans out over N); cold values stay unsharded; "
        f"{hot}{note}"))


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """The profile, its classification and recommendation; ``to_dict`` is the JSON report.

    ``top`` is how many keys the report lists; ``timeline`` (when asked for) holds the
    top keys' busiest second per time bin, for the heat map.
    """

    profile: HeatProfile
    classification: Classification
    recommendation: Recommendation
    headroom: float
    top: int
    counters: int | None = None
    timeline: Timeline | None = None

    @property
    def keys(self) -> list[KeyHeat]:
        """The keys the report lists, heaviest first."""
        return self.profile.top[:self.top]

    def to_dict(self) -> dict[str, Any]:
        """``{"classification", "evidence", "top", "recommendation", "rows", "skipped_rows"}``."""
        profile = self.profile
        evidence = dict(self.classification.evidence)
        evidence["ceiling"] = profile.ceiling.name
        if profile.skipped_by_column:
            evidence["skipped_by_column"] = dict(profile.skipped_by_column)
        if self.counters is not None:
            evidence["space_saving"] = {
                "counters": self.counters,
                "max_error_units": profile.total_units / self.counters,
                "top_errors": {k.key: k.error for k in self.keys if k.error}}
        return {
            "classification": self.classification.kind,
            "evidence": evidence,
            "top": [{"key": k.key, "share": profile.share(k),
                     "peak_units_per_s": k.peak_units_per_s,
                     "sustained_units_per_s": k.sustained_units_per_s,
                     "throttles": k.throttles, "peak_to_ceiling": k.peak_to_ceiling}
                    for k in self.keys],
            "recommendation": self.recommendation.to_dict(),
            "rows": profile.rows,
            "skipped_rows": profile.skipped_rows,
        }


def _check(top: int, headroom: float) -> None:
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise InvalidInput(f"top must be an integer >= 1, got {top!r}")
    if isinstance(headroom, bool) or not isinstance(headroom, int | float) \
            or not math.isfinite(headroom) or headroom <= 0:
        raise InvalidInput(f"headroom must be a finite number > 0, got {headroom!r}")


def diagnose(paths: Sequence[str | Path], *, fmt: str | None = None, skip_bad: bool = False,
             eventual: bool = False, ceiling: str | float | Ceiling = "dynamodb",
             headroom: float = 1.5, top: int = 10, thresholds: Thresholds | None = None,
             timeline_bins: int = 0, threads: int | None = None) -> Diagnosis:
    """Diagnose access-log files exactly (DuckDB): what ``shardex diagnose FILE...`` runs.

    ``timeline_bins`` > 0 also keeps the top keys' timeline for a heat map. Raises
    InvalidLog for a malformed file or row (see ``shardex.heat.logs``), InvalidInput
    for bad options, MissingDependency without duckdb.
    """
    from shardex.heat.logs import read_logs

    _check(top, headroom)
    bound = resolve_ceiling(ceiling)
    limits = thresholds or Thresholds()
    with read_logs(paths, fmt=fmt, skip_bad=skip_bad, eventual=eventual,
                   threads=threads) as logs:
        profile = logs.profile(ceiling=bound, top=max(top, limits.top_keys),
                               min_ratio=1.0 / headroom, buckets=limits.buckets)
        timeline = logs.timeline([k.key for k in profile.top[:top]], bins=timeline_bins) \
            if timeline_bins > 0 else None
    classification = classify(profile, limits)
    return Diagnosis(profile, classification,
                     recommend(classification, profile, headroom=headroom), float(headroom),
                     top, timeline=timeline)


def diagnose_stream(lines: Iterable[str], *, fmt: str = "csv", name: str = "<stdin>",
                    skip_bad: bool = False, eventual: bool = False,
                    ceiling: str | float | Ceiling = "dynamodb", headroom: float = 1.5,
                    top: int = 10, counters: int = 1000,
                    thresholds: Thresholds | None = None) -> Diagnosis:
    """Diagnose an unbounded stream of log lines in bounded memory (Space-Saving).

    Units per key are upper bounds within ``total / counters`` (the evidence has the
    bound); see ``shardex.heat.stream``. Raises as ``diagnose`` does.
    """
    from shardex.heat.stream import read_stream

    _check(top, headroom)
    bound = resolve_ceiling(ceiling)
    limits = thresholds or Thresholds()
    heat, skipped, by_column = read_stream(lines, fmt=fmt, name=name, skip_bad=skip_bad,
                                           eventual=eventual, counters=counters, ceiling=bound)
    profile = heat.profile(top=max(top, limits.top_keys), min_ratio=1.0 / headroom,
                           buckets=limits.buckets, skipped_rows=skipped,
                           skipped_by_column=by_column)
    classification = classify(profile, limits)
    return Diagnosis(profile, classification,
                     recommend(classification, profile, headroom=headroom), float(headroom),
                     top, counters=counters)
