"""The diagnosis of a heat source: its hot keys, why they are hot, and what to do about it.

``diagnose(paths)`` reads files exactly (DuckDB, or Spark: ``engine="spark"``),
``diagnose_stream(lines)`` reads an unbounded stream (Space-Saving),
``diagnose_reader`` reports on a stream being read (the live view); all classify
the heat and recommend a strategy and N per hot logical key (shard keys rolled up:
``PENDING#0`` ... ``PENDING#3`` are ``PENDING`` at N=4):

- ``calculated_suffix``: low cardinality; shard the hot values by a hash of the item
  id (shardex's ``hash`` strategy), so a reader that knows the id finds its shard;
- ``random_suffix``: as above, but the hot values are never read in the sample, so
  nothing needs to find an entry's shard: spread writes as evenly as possible. Only
  from a sample that tells reads from writes and gives every read its key: a
  Contributor Insights report mixes them, and CloudTrail names no key for a Query or
  a Scan, so neither can show that a key is never read, and gets ``calculated_suffix``;
- ``dedicated_heavy_key``: one popular entity dominates; give it its own shards and
  limits, leave the other keys alone;
- ``time_bucket_plus_suffix``: sequential; the hot key moves with time, so shard
  every new time bucket key with a suffix;
- ``none``: no key comes within the headroom of a partition's ceiling, and none was
  throttled enough to count.

A key's N is the planner's formula on its observed peaks: the larger of its total
spread evenly and its busiest partition scaled to all of its shards (an uneven
spread stays uneven when N grows), against the read and the write ceiling. A key
throttled on at least ``throttle_min`` requests and ``throttle_share`` of them, well
beyond what the other keys' throttles per unit would give it, gets shards even below
the ceiling: its partition takes less than the nominal ceiling, so N is sized on the
units it accepted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shardex.admission import AdmissionPolicy, Budget
from shardex.capacity import MAX_HEADROOM, Ceiling, resolve_ceiling
from shardex.documents import DIAGNOSE_SCHEMA, rounded
from shardex.errors import InvalidInput
from shardex.heat.classify import Classification, Thresholds, classify
from shardex.heat.profile import HeatProfile, KeyHeat, Timeline
from shardex.heat.sources import ENGINES, Options
from shardex.keys import value_fault
from shardex.plan import shards_for
from shardex.routing import MAX_SHARDS, Routing, ShardPolicy, Strategy
from shardex.wording import counted

__all__ = [
    "Change",
    "DEDICATED_TIER",
    "Diagnosis",
    "Recommendation",
    "STRATEGIES",
    "diagnose",
    "diagnose_reader",
    "diagnose_stream",
    "recommend",
    "rest_budget",
    "shards_needed",
    "throttle_shards",
]

STRATEGIES = ("calculated_suffix", "random_suffix", "dedicated_heavy_key",
              "time_bucket_plus_suffix", "none")
# the tier a popular entity is isolated on: ShardedIndex(..., tiers={DEDICATED_TIER: ...})
DEDICATED_TIER = "dedicated"
_POLICY: dict[str, Strategy] = {"calculated_suffix": "hash", "random_suffix": "random",
           "dedicated_heavy_key": "hash", "time_bucket_plus_suffix": "hash"}


@dataclass(frozen=True, slots=True)
class Change:
    """One logical key's N: from what its shard keys show to what it needs, and why
    (``peak``: its load against the ceiling; ``throttles``: throttled below it).

    ``heat`` is the key's figures, so that a hand-off (``plan --from``, ``simulate``)
    sees every key the recommendation names, in ``top`` or not.
    """

    key: str
    current: int
    shards: int
    reason: str
    heat: KeyHeat | None = None

    def to_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"key": self.key, "from": self.current, "to": self.shards,
                                 "reason": self.reason}
        if self.heat is not None:
            entry.update(units=self.heat.units,
                         peak_units_per_s=self.heat.peak_units_per_s,
                         peak_write_units_per_s=self.heat.peak_write_units_per_s,
                         peak_read_units_per_s=self.heat.peak_read_units_per_s,
                         sustained_units_per_s=self.heat.sustained_units_per_s)
        return entry

    def __str__(self) -> str:
        return f"{self.key}: N={self.current} \u2192 {self.shards}"


@dataclass(frozen=True, slots=True)
class Recommendation:
    """What to do: a strategy (one of STRATEGIES), N per value to shard, and why.

    ``shards`` maps each logical key that needs more shards to its N; ``changes``
    says from what N, and why. ``unroutable`` holds the keys of ``shards`` that no
    routing override can name, as they cannot be logical keys (a key read from another
    table's log may hold ``#`` or be too long), each with why: ``routing`` leaves them out.
    """

    strategy: str
    shards: dict[str, int]
    why: str
    changes: tuple[Change, ...] = ()
    isolate: str | None = None
    admission: AdmissionPolicy | None = None
    unroutable: dict[str, str] = field(default_factory=dict)

    def routing(self) -> Routing:
        """The routing that carries the recommendation out (shardex.routing/1 overrides;
        for a time-bucket key space, the default policy every new bucket gets; the
        isolated key of a popular entity on tier ``DEDICATED_TIER``)."""
        if not self.shards:
            return Routing()
        strategy = _POLICY.get(self.strategy, "hash")
        if self.strategy == "time_bucket_plus_suffix":
            return Routing(default=ShardPolicy(shards=max(self.shards.values()),
                                               strategy=strategy))
        return Routing(overrides={
            k: ShardPolicy(shards=n, strategy=strategy,
                           tier=DEDICATED_TIER if k == self.isolate else None)
            for k, n in self.shards.items() if k not in self.unroutable})

    def isolation(self) -> dict[str, Any] | None:
        """The isolated key, its tier and N (a popular entity's), or None."""
        if self.isolate is None:
            return None
        return {"key": self.isolate, "tier": DEDICATED_TIER,
                "shards": self.shards.get(self.isolate, 1)}

    def to_dict(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "shards": dict(self.shards),
                "changes": [c.to_dict() for c in self.changes],
                "why": self.why,
                # only where a key cannot be routed: other reports keep their shape
                **({"unroutable": dict(self.unroutable)} if self.unroutable else {})}


def rest_budget(ceiling: Ceiling, headroom: float, exempt: Sequence[str]) -> AdmissionPolicy:
    """The admission budget for every key but ``exempt`` (the isolated and sharded ones).

    A key alone may take a partition's write ceiling over the headroom, halved because
    the index charges an entry's own write units while an index-table placement spends
    twice that; excess waits up to a second, then is refused. Reads weigh as the
    partition weighs them (write ceiling over read ceiling).
    """
    rate = ceiling.write_units / headroom / 2
    return AdmissionPolicy(
        default=Budget(rate=rate, burst=rate, mode="wait", max_wait=1.0,
                       read_cost=min(1.0, ceiling.write_units / ceiling.read_units)),
        overrides=dict.fromkeys(exempt))


def shards_needed(heat: KeyHeat, ceiling: Ceiling, headroom: float) -> int:
    """Return the N that keeps ``heat``'s peak reads and writes, times ``headroom``,
    under one partition's ceilings (at most 4096, the most a policy allows).

    For a sharded key the busiest partition counts too, scaled to all its shards; where
    reads and writes share ``ceiling``, its busiest second of both, which
    ``heat.peak_to_ceiling`` measures against ``ceiling`` (the profile's).
    """
    needed = 1
    sides = [
        (heat.peak_write_units_per_s, heat.hottest_write_units_per_s, ceiling.write_units),
        (heat.peak_read_units_per_s, heat.hottest_read_units_per_s, ceiling.read_units)]
    if ceiling.shared:
        # one budget: a second's reads and writes together, on the busiest shard key the
        # busiest second of both (its ratio to this ceiling: a read peak and a write
        # peak may fall in different seconds, and their sum overstated it)
        sides = [(heat.peak_units_per_s, heat.peak_to_ceiling * ceiling.write_units,
                  ceiling.write_units)]
    for total, hottest, bound in sides:
        for load in (total, heat.shards * hottest):
            try:
                needed = max(needed, shards_for(load, ceiling=bound, headroom=headroom))
            except InvalidInput:
                needed = MAX_SHARDS  # over the limit: a dedicated path is the only way out
    return needed


def throttle_shards(heat: KeyHeat, headroom: float, thresholds: Thresholds, *,
                    rest: tuple[int, float, int] = (0, 0.0, 0)) -> int | None:
    """Return the N a throttled key needs, or None when its throttles do not count.

    They count when there are at least ``throttle_min`` of them, at least
    ``throttle_share`` of its requests (when its requests are known), and they are its
    own: more than ``throttle_ratio`` times what the rest of the sample's throttle rate
    would give it, and five standard deviations above that (so that among thousands of
    keys chance alone does not pick one). ``rest`` is the other keys' throttles, units
    and requests; the rate is per request when both sides' requests are known, else
    per unit. Throttles spread evenly over every key (a table-wide limit) are not the
    key's, and more shards would not help.

    Its partitions accepted at most ``peak_accepted_units_per_s``: that is taken as
    what they can take, and N is the smallest that fits the offered peak times
    ``headroom`` (twice the current N when nothing was accepted to size from).
    """
    throttles = heat.throttles
    if throttles < thresholds.throttle_min or (
            heat.requests and throttles / heat.requests < thresholds.throttle_share):
        return None
    rest_throttles, rest_units, rest_requests = rest
    if heat.requests and rest_requests:
        expected = rest_throttles / rest_requests * heat.requests
    else:
        expected = rest_throttles / rest_units * heat.units if rest_units > 0 else 0.0
    if throttles < thresholds.throttle_ratio * expected \
            or throttles - expected < 5 * math.sqrt(expected):
        return None
    current = heat.shards
    offered, accepted = heat.peak_units_per_s, heat.peak_accepted_units_per_s
    if accepted > 0:  # what the partitions took, even all that was offered (retried)
        needed = math.ceil(round(current * offered * headroom / accepted, 9))
    else:
        needed = 2 * current
    return min(MAX_SHARDS, max(needed, current + 1))


def _pct(share: float) -> str:
    return f"{100 * share:.1f}%"


def _unroutable(keys: Iterable[str]) -> dict[str, str]:
    """The keys that cannot be logical keys, so no routing override can name them, and why."""
    return {key: fault for key in keys if (fault := value_fault(key)) is not None}


def _gapped(heat: KeyHeat) -> bool:
    """Whether ``heat``'s shard numbers leave most of 0..N-1 unseen: fewer than half of
    them, as the keys of a single-table design (``USER#1``, ``USER#1000``) show, where a
    shardex layout's hot key shows its N shards. From N=16 on: a small layout's sample
    may miss a shard or two of a key that is hot."""
    return heat.shards >= _GAPPED_FROM and 2 * heat.partitions < heat.shards


_GAPPED_FROM = 16


def _gap_note(heat: KeyHeat, headroom: float) -> str:
    busiest = heat.peak_to_ceiling
    return (f"{heat.key} is not sized: its partition keys carry shard numbers with gaps "
            f"({heat.partitions:,} of {heat.shards:,} seen, up to {heat.key}#{heat.shards - 1}):"
            f" not a shardex layout's shards 0..N-1 but, most likely, keys of their own (a "
            f"single-table design's {heat.key}#id), so no N is recommended for {heat.key}; "
            f"its busiest partition key reaches {_pct(busiest)} of the ceiling"
            + (f" (over it with a headroom of {headroom:g}x: that key needs a layout of its "
               "own, which diagnose cannot route)" if busiest * headroom > 1 else "")
            + " (--per-shard lists its keys)")


def _listed(changes: Sequence[Change]) -> str:
    return ", ".join(f"{c.key} (N={c.shards})" if c.current == 1 else
                     f"{c.key} (N={c.current} \u2192 {c.shards})" for c in changes)


def recommend(classification: Classification, profile: HeatProfile, *, headroom: float,
              thresholds: Thresholds | None = None) -> Recommendation:
    """Recommend a strategy and N per hot logical key for ``profile`` classified as given."""
    limits = thresholds or Thresholds()
    changes: list[Change] = []
    throttled: list[KeyHeat] = []
    gapped = [heat for heat in profile.over if _gapped(heat)]
    for heat in profile.over:
        if heat in gapped:
            continue
        by_peak = shards_needed(heat, profile.ceiling, headroom)
        rest = (profile.throttles - heat.throttles, profile.total_units - heat.units,
                profile.requests - heat.requests)
        by_throttles = throttle_shards(heat, headroom, limits, rest=rest) or 0
        needed = max(by_peak, by_throttles)
        if needed > heat.shards:
            reason = "peak" if by_peak > heat.shards else "throttles"
            changes.append(Change(heat.key, heat.shards, needed, reason, heat))
            if reason == "throttles":
                throttled.append(heat)
    shards = {c.key: c.shards for c in changes}
    bound = profile.ceiling
    unsized = "".join(f"; {_gap_note(heat, headroom)}" for heat in gapped)
    if not shards:
        checked = (f"within a headroom of {headroom:g}x of the per-partition ceiling "
                   f"({bound.name}: {bound.write_units:g} write, {bound.read_units:g} read "
                   f"units/s), and none was throttled on {limits.throttle_min}+ requests "
                   f"({_pct(limits.throttle_share)} of its own)")
        if gapped:
            return Recommendation("none", {}, (
                f"no key that can be sized comes {checked}{unsized}"))
        return Recommendation("none", {}, (
            f"no key's peak comes {checked}; nothing needs shards"))
    hot = _listed(changes)
    capped = [c.key for c in changes if c.shards >= MAX_SHARDS]
    note = (f"; {', '.join(capped)} would need more than {MAX_SHARDS} shards: isolate it on "
            "a dedicated path with its own admission limit") if capped else ""
    note += unsized
    evidence = classification.evidence
    kind = classification.kind
    # a time-bucket routing is a default policy, which names no key
    unroutable = {} if kind == "sequential" else _unroutable(shards)
    for key, why in unroutable.items():
        note += (f"; {key} gets no routing override, as it cannot be a logical key ({why}): "
                 "a key of another table or layout is sharded there, by hand")
    for heat in throttled:
        note += (f"; {heat.key} was throttled on {heat.throttles:,}"
                 + (f" of {heat.requests:,} requests ({_pct(heat.throttles / heat.requests)})"
                    if heat.requests else " requests")
                 + f" while its busiest partition reached {_pct(heat.peak_to_ceiling)} of the "
                 "ceiling: it takes less than the nominal ceiling (provisioned capacity, a "
                 "GSI's back-pressure, or bursts within a second), so N is sized on the "
                 "units it accepted")
    if kind == "sequential":
        return Recommendation("time_bucket_plus_suffix", shards, (
            f"the hot key moves along {evidence['ordering']} keys over time "
            f"({evidence['first_hot_key']} to {evidence['last_hot_key']}): each "
            "new bucket takes the whole load in turn, so add a suffix to every bucket key "
            f"(bucket#k, k from a hash of the item id) with N = {max(shards.values())}, and "
            f"read a bucket by fanning out over its N shards; observed: {hot}{note}"),
            tuple(changes))
    if kind == "popular_entity":
        top = str(evidence["top_key"])
        isolate = top if top in shards and top not in unroutable else None
        admission = rest_budget(bound, headroom, sorted(set(shards) - set(unroutable)))
        budget = admission.default
        assert budget is not None
        return Recommendation("dedicated_heavy_key", shards, (
            f"{top} alone takes {_pct(evidence['top_key_share'])} of the units "
            f"among {'' if profile.distinct_exact else 'at least '}"
            f"{counted(profile.distinct_keys, 'key')}: route it on a dedicated path with its own "
            f"shards and admission limit, and leave the other keys unsharded"
            + (f" (tier {DEDICATED_TIER!r}, N={shards[top]}: a store of its own, with its own "
               "capacity)" if isolate else "")
            + f"; every other key gets an admission budget of {budget.rate:g} units/s, so no "
            f"neighbour can fill a partition again; {hot}{note}"),
            tuple(changes), isolate=isolate, admission=admission, unroutable=unroutable)
    read = sum(h.reads for h in profile.over if h.key in shards)
    if kind == "low_cardinality" and read == 0 and profile.reads_ruled_out:
        return Recommendation("random_suffix", shards, (
            f"few keys carry the load and the hot ones are never read in this sample, so "
            f"nothing needs to find an entry's shard from its id: a random suffix spreads "
            f"writes most evenly; bulk reads fan out over N; {hot}{note}"), tuple(changes),
            unroutable=unroutable)
    lead = ("few keys carry most of the load" if kind == "low_cardinality" else
            "the load is spread over many keys, but some still exceed one partition")
    either = ("a hash of the item id keeps each entry findable by its id either way (a "
              "random suffix spreads writes a little more evenly, but only if nothing ever "
              "reads these keys by item id)")
    mixed = "" if profile.reads_told_apart else (
        "; the Contributor Insights report counts reads and writes together, so it cannot "
        f"tell whether the hot keys are read: {either}")
    if profile.unattributed_reads and read == 0:
        mixed += (f"; {profile.unattributed_reads:,} Query/Scan requests name no key in "
                  "CloudTrail, so reads of the hot keys could not be attributed: " + either)
    return Recommendation("calculated_suffix", shards, (
        f"{lead}: shard each hot value by a hash of the item id (a reader that knows the id "
        f"finds its shard; a listing fans out over N); cold values stay unsharded; "
        f"{hot}{note}{mixed}"), tuple(changes), unroutable=unroutable)


def _entry(profile: HeatProfile, heat: KeyHeat, part: bool = False) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "key": heat.key, "share": profile.share(heat), "units": heat.units,
        "requests": heat.requests, "peak_units_per_s": heat.peak_units_per_s,
        "peak_write_units_per_s": heat.peak_write_units_per_s,
        "peak_read_units_per_s": heat.peak_read_units_per_s,
        "sustained_units_per_s": heat.sustained_units_per_s, "throttles": heat.throttles,
        "peak_to_ceiling": heat.peak_to_ceiling}
    if not part:
        entry["shards"] = heat.shards
        if heat.error:
            entry["error_units"] = heat.error
        if heat.parts:
            entry["shard_keys"] = [_entry(profile, p, True) for p in heat.parts]
    return entry


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
    extra: dict[str, Any] = field(default_factory=dict)

    def nothing_read(self) -> str | None:
        """Why no row was left to diagnose (every row skipped, or none there), or None.

        A report of no rows would say that nothing needs shards with nothing to show
        for it: the command refuses it with this reason instead.
        """
        profile = self.profile
        if profile.rows:
            return None
        if profile.skipped_rows:
            by_column = ", ".join(f"{c}: {n:,}"
                                  for c, n in sorted(profile.skipped_by_column.items()))
            return (f"all {profile.skipped_rows:,} rows were malformed and skipped "
                    f"(--skip-bad; {by_column})" if by_column else
                    f"all {profile.skipped_rows:,} rows were malformed and skipped (--skip-bad)")
        if "insights" in profile.sources:
            return "the input holds no rows (a Contributor Insights report of no contributors)"
        return "the input holds no rows (a header only, or no requests of the table)"

    @property
    def keys(self) -> list[KeyHeat]:
        """The keys the report lists, heaviest first."""
        return self.profile.top[:self.top]

    def to_dict(self) -> dict[str, Any]:
        """The report as a ``shardex.diagnose/1`` document (docs/json.md), rounded once."""
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
        bound = profile.ceiling
        doc: dict[str, Any] = rounded({
            "schema": DIAGNOSE_SCHEMA,
            "source": {"formats": list(profile.sources), "time_units": list(profile.time_kinds),
                       "resolution_s": profile.resolution, "notes": list(profile.notes)},
            "ceiling": {"name": bound.name, "write_units_per_s": bound.write_units,
                        "read_units_per_s": bound.read_units},
            "headroom": self.headroom,
            "totals": {"units": profile.total_units, "requests": profile.requests,
                       "throttles": profile.throttles, "keys": profile.distinct_keys,
                       "keys_exact": profile.distinct_exact, "seconds": profile.seconds,
                       "first_second": profile.first_second,
                       "last_second": profile.last_second},
            "classification": self.classification.kind,
            "evidence": evidence,
            "top": [_entry(profile, k) for k in self.keys],
            "recommendation": self.recommendation.to_dict(),
            "routing": self.recommendation.routing().to_dict(),
            # only where a popular entity is isolated: other reports keep their shape
            **({} if self.recommendation.admission is None else {
                "isolation": self.recommendation.isolation(),
                "admission": self.recommendation.admission.to_dict()}),
            "rows": profile.rows,
            "skipped_rows": profile.skipped_rows,
            **self.extra,
        })
        return doc


def _check(top: int, headroom: float) -> None:
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise InvalidInput(f"top must be an integer >= 1, got {top!r}")
    if isinstance(headroom, bool) or not isinstance(headroom, int | float) \
            or not 0 < headroom <= MAX_HEADROOM:
        raise InvalidInput(f"headroom must be a number > 0 and at most {MAX_HEADROOM:g}, "
                           f"got {headroom!r}")


def _conclude(profile: HeatProfile, limits: Thresholds, headroom: float, top: int,
              **more: Any) -> Diagnosis:
    classification = classify(profile, limits)
    return Diagnosis(profile, classification,
                     recommend(classification, profile, headroom=headroom, thresholds=limits),
                     float(headroom), top, **more)


def diagnose(paths: Sequence[str | Path], *, fmt: str | None = None, skip_bad: bool = False,
             eventual: bool = False, ceiling: str | float | Ceiling = "dynamodb",
             headroom: float = 1.5, top: int = 10, thresholds: Thresholds | None = None,
             timeline_bins: int = 0, threads: int | None = None,
             options: Options | None = None, per_shard: bool = False,
             engine: str = "duckdb", spark: Any = None,
             spark_conf: dict[str, str] | None = None) -> Diagnosis:
    """Diagnose heat sources exactly: what ``shardex diagnose FILE...`` runs.

    ``engine`` aggregates with ``duckdb`` (in this process; ``threads`` caps it) or
    ``spark`` (``shardex.heat.spark``: the session ``spark``, or a local one with
    ``spark_conf``, stopped at the end); both follow ``shardex.heat.aggregate``, and
    the classification and recommendation are the same code. ``options`` carries the
    source choices (``fmt``, ``skip_bad`` and ``eventual`` are shorthands);
    ``timeline_bins`` > 0 also keeps the top keys' timeline for a heat map;
    ``per_shard`` lists each top key's shard keys. Raises InvalidLog for a malformed
    file or row (see ``shardex.heat.logs``), InvalidInput for bad options,
    MissingDependency without the engine's extra (duckdb: ``diagnose``; pyspark:
    ``spark``).
    """
    from shardex.heat.rows import interruptible

    _check(top, headroom)
    if engine not in ENGINES:
        raise InvalidInput(f"unknown engine {engine!r}; use one of {', '.join(ENGINES)}")
    bound = resolve_ceiling(ceiling)
    limits = thresholds or Thresholds()
    if options is None:
        options = Options(fmt=fmt, skip_bad=skip_bad, eventual=eventual)
    logs: Any
    with interruptible():
        if engine == "spark":
            from shardex.heat.spark import read_spark

            logs = read_spark(paths, options=options, spark=spark, conf=spark_conf)
        else:
            from shardex.heat.logs import read_logs

            logs = read_logs(paths, threads=threads, options=options)
        with logs:
            profile = logs.profile(ceiling=bound, top=max(top, limits.top_keys),
                                   min_ratio=1.0 / headroom, min_throttles=limits.throttle_min,
                                   buckets=limits.buckets, per_shard=per_shard,
                                   cover=limits.top_share)
            timeline = logs.timeline([k.key for k in profile.top[:top]],
                                     bins=timeline_bins) if timeline_bins > 0 else None
    return _conclude(profile, limits, headroom, top, timeline=timeline)


def diagnose_reader(reader: Any, *, headroom: float = 1.5, top: int = 10,
                    thresholds: Thresholds | None = None, per_shard: bool = False,
                    extra: dict[str, Any] | None = None) -> Diagnosis:
    """Diagnose what a ``StreamReader`` has counted so far (it may go on reading)."""
    _check(top, headroom)
    limits = thresholds or Thresholds()
    profile = reader.profile(top=max(top, limits.top_keys), min_ratio=1.0 / headroom,
                             min_throttles=limits.throttle_min, buckets=limits.buckets,
                             per_shard=per_shard, cover=limits.top_share)
    return _conclude(profile, limits, headroom, top, counters=reader.heat.counters,
                     extra=dict(extra or {}))


def diagnose_stream(lines: Iterable[str], *, fmt: str | None = None, name: str = "<stdin>",
                    skip_bad: bool = False, eventual: bool = False,
                    ceiling: str | float | Ceiling = "dynamodb", headroom: float = 1.5,
                    top: int = 10, counters: int = 1000, thresholds: Thresholds | None = None,
                    per_shard: bool = False) -> Diagnosis:
    """Diagnose an unbounded stream of log lines in bounded memory (Space-Saving).

    ``fmt`` is csv or jsonl (None: told by the first line). Units per key are upper
    bounds within ``total / counters`` (the evidence has the bound); see
    ``shardex.heat.stream``. Raises as ``diagnose`` does.
    """
    from shardex.heat.stream import StreamReader

    _check(top, headroom)
    reader = StreamReader(ceiling=resolve_ceiling(ceiling), fmt=fmt, name=name,
                          skip_bad=skip_bad, eventual=eventual, counters=counters)
    try:
        reader.feed(lines)
        reader.finish()
        return diagnose_reader(reader, headroom=headroom, top=top, thresholds=thresholds,
                               per_shard=per_shard)
    finally:
        reader.close()
