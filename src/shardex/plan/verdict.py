"""The plan's partitions and its one verdict: does the table, as given, keep up at the peak?

Pure arithmetic, no I/O. ``fit_shards`` grows the N of the hottest values until the
busiest partition, at the p99 of hash placements (``shardex.plan.partitions``), stays
under its ceiling with the headroom; ``judge`` then gives the verdict at the peak
itself: ``keeps up``, or ``throttles`` with every reason (the table's limit, a partition
that shared keys overload), what the store does then (split for heat, the on-demand
table's growth: assumptions, named with their settings) and the setting that avoids it
(warm throughput or provisioned capacity, found by planning again on a larger table).

The verdict is the one the simulation of the same table gives: ``plan --verify`` runs
the placement at the p99 (``Busiest.worst_namespace``), each value at its peak, for
``Verdict.watch_seconds``: long enough to see the split or growth the verdict expects.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from shardex.plan.partitions import (
    TRIALS,
    Busiest,
    Placements,
    quantile_trial,
    shard_loads,
)
from shardex.routing import MAX_SHARDS
from shardex.sim.profiles import ASSUMPTIONS, MAX_PARTITIONS, Profile
from shardex.wording import counted

__all__ = ["Fit", "PartitionPlan", "Verdict", "fit_shards", "fits", "judge", "least_partitions",
           "partition_ceiling", "recommend", "resources", "widest_shards", "with_setting"]

# a float sum of units lands a hair past a ceiling it exactly fills
_EPSILON = 1e-6
_GROWTH_STEPS = 40
# N grows to at most this many times the per-key rule's (plus 2)
_WIDEST = 8
# seconds the verify runs past what it waits for, to see the table after it
_AFTER = 180.0
_STEADY_SECONDS = 300.0


@dataclass(frozen=True, slots=True)
class PartitionPlan:
    """The partitions of one resource (``table``, or the GSI ``index``) at the peak, in one
    ``direction``: ``write`` (the entries), or ``read`` (the values' measured reads).

    ``ceiling``: units a second of that direction one partition takes (its share of a
    provisioned table without adaptive capacity, if less); ``spread``: the units each
    takes of the load spread over the table (placement records, or the reads that locate
    them); ``busiest``: over hash placements at the peak; ``fits``: at its p99;
    ``sized``: with the headroom too (``fits``).
    """

    resource: str
    partitions: int
    ceiling: float
    spread: float
    busiest: Busiest
    headroom: float
    direction: str = "write"

    @property
    def fits(self) -> bool:
        """Whether the busiest partition at the p99 of placements takes the peak."""
        return self.busiest.worst <= self.ceiling * (1 + _EPSILON)

    @property
    def sized(self) -> bool:
        """Whether it also leaves the headroom: the average partition (``fits``, the
        function) and the busiest at the p99 of placements too (it had asked the average
        alone, and said so of a p99 partition at 1,000 of its 1,000 units)."""
        return fits(self.busiest, self.ceiling, self.headroom) and \
            self.busiest.worst * self.headroom <= self.ceiling * (1 + _EPSILON)

    def to_dict(self) -> dict[str, Any]:
        b = self.busiest
        return {"resource": self.resource, "direction": self.direction,
                "partitions": self.partitions,
                "ceiling_units_per_s": self.ceiling, "spread_units_per_s": self.spread,
                "busiest_expected_units_per_s": b.expected,
                "busiest_p99_units_per_s": b.worst,
                "headroom": self.headroom, "sized": self.sized,
                "collision_free": b.collision_free, "placements_drawn": TRIALS,
                "p99_placement": b.worst_namespace, "p99_busiest_keys": list(b.worst_keys),
                "fits": self.fits}


@dataclass(frozen=True, slots=True)
class Verdict:
    """``keeps_up`` at the peak on the table as given, and why not.

    - ``summary``: ``keeps up`` or ``throttles: <the first reason>``;
    - ``reasons``: every throttle, then what the store does about it and what avoids it;
      ``notes``: what holds but leaves no margin (the headroom);
    - ``assumptions``: the settings of figures no store documents that the answer rests
      on, with their values (``split_delay_seconds=600``);
    - ``setting``: what to set so that it keeps up (``{"warm_write": 45000.0}``), or None;
    - ``expects``: what the store would do to end the throttling (``split``, ``growth``)
      and ``watch_seconds`` how long a simulation must run to see it.
    """

    keeps_up: bool
    summary: str
    reasons: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    assumptions: tuple[str, ...] = ()
    setting: Mapping[str, float] | None = None
    expects: tuple[str, ...] = ()
    watch_seconds: float = _STEADY_SECONDS
    recommended_shards: Mapping[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"keeps_up": self.keeps_up, "summary": self.summary,
                "reasons": list(self.reasons), "notes": list(self.notes),
                "assumptions": list(self.assumptions),
                "setting": None if self.setting is None else dict(self.setting),
                "recommended_shards": dict(self.recommended_shards),
                "expects": list(self.expects), "watch_seconds": self.watch_seconds}


def partition_ceiling(model: Profile, partitions: int, *, write: bool = True) -> float:
    """Write (``write``) or strongly consistent read units a second one partition takes:
    the ceiling, or its share of a provisioned table without adaptive capacity when that
    is less."""
    ceiling = model.write_ceiling if write else model.read_ceiling
    if model.capacity == "provisioned" and not model.adaptive and partitions > 0:
        provisioned = model.provisioned_write if write else model.provisioned_read
        return min(ceiling, provisioned / partitions)
    return ceiling


def fits(found: Busiest, ceiling: float, headroom: float) -> bool:
    """Whether a busiest partition is sized: at the p99 of placements it takes the peak,
    and the average partition takes the peak times the headroom (growth and bursts; each
    shard key has its headroom from the per-key rule, the p99 is the margin for where the
    hash puts the keys)."""
    mean = found.spread + found.total / found.partitions if found.partitions else 0.0
    return found.worst <= ceiling * (1 + _EPSILON) and \
        mean * headroom <= ceiling * (1 + _EPSILON)


def fit_shards(units: Mapping[str, float], base: Mapping[str, int], *, partitions: int,
               ceiling: float, spread: float, headroom: float, namespace: str = "index",
               trials: int = TRIALS, start: Mapping[str, int] | None = None
               ) -> tuple[dict[str, int], bool]:
    """Grow the N of ``base`` (from ``start``, if given) until the busiest of
    ``partitions`` partitions ``fits`` (each N to at most 8x its base, plus 2: past that a
    larger table is the cure).

    ``units``: value -> its entry units a second at the peak; ``spread``: units a second
    every partition takes besides. Returns (N per value, whether it fits); when no N
    fits (the table is too small for its load, whatever N), ``base`` unchanged.
    """
    shards = dict(start if start is not None else base)
    if partitions == 0:
        return shards, all(units[v] / shards[v] * headroom <= ceiling * (1 + _EPSILON)
                           for v in units)
    if (sum(units.values()) / partitions + spread) * headroom > ceiling:
        return dict(base), False
    # each step grows one value's N: the placements sum again only its partitions
    placements = Placements(partitions, spread=spread, namespace=namespace, trials=trials)
    for _ in range(_GROWTH_STEPS):
        found = placements.busiest(shard_loads({v: (shards[v], units[v]) for v in units}))
        if fits(found, ceiling, headroom):
            return shards, True
        hottest = max(units, key=lambda v: units[v] / shards[v])
        # keys already a small share of the room left: more of them barely helps; and a
        # fan-out read of many more shards than the per-key rule asks costs more than a
        # larger table does
        widest = widest_shards(base[hottest])
        if units[hottest] / shards[hottest] < (ceiling - spread) / 16 \
                or shards[hottest] >= widest:
            break
        # a third more, but never past the widest (the step jumped 266 to 354 over 290)
        shards[hottest] = min(widest, shards[hottest] + max(1, shards[hottest] // 3))
    return dict(base), False


def widest_shards(base: int) -> int:
    """The most shards ``fit_shards`` grows a value to whose per-key rule gives ``base``:
    8x, plus 2 (so a value of one shard may still grow to ten), at most 4096."""
    return min(MAX_SHARDS, _WIDEST * base + 2)


def resources(model: Profile, units: Mapping[str, float], shards: Mapping[str, int], *,
              placements: float, headroom: float, namespace: str = "index",
              partitions: int | None = None, reads: Mapping[str, float] | None = None,
              locates: float = 0.0, trials: int = TRIALS) -> list[PartitionPlan]:
    """The partitions of each resource the layout writes to, at the peak and with the
    headroom: the table (entries and placement records spread over it), or in the GSI
    layout the GSI (entries) and the table (placement records); then, when ``reads``
    (value -> its measured read units a second) has any, the same resources' reads: the
    values' reads where their entries are, and the ``locates`` (read units a second)
    spread over the table.

    One placement of the shard keys serves them all: each is judged at the placement at
    the p99 of the nearest any of them comes to its ceiling, drawn alike (a placement
    whose writes fit at their own p99 and whose reads fit at theirs may crowd one
    partition's writes where it crowds another's reads: a simulation at the reads' p99
    placement throttled the writes of a plan that kept up). ``trials``: the placements
    drawn.
    """
    count = model.initial_partitions if partitions is None else partitions
    drawn: list[tuple[str, str, float, float, dict[str, float], Placements]] = []
    directions: list[tuple[str, Mapping[str, float], float]] = [("write", units, placements)]
    if reads is not None and any(reads.values()):
        directions.append(("read", reads, locates))
    for direction, loads_of, spread_units in directions:
        ceiling = partition_ceiling(model, count, write=direction == "write")
        spread = spread_units / count if count else 0.0
        if model.layout == "gsi":
            pairs = [("index", loads_of, 0.0), ("table", {}, spread)]
        else:
            pairs = [("table", loads_of, spread)]
        for name, loads, share in pairs:
            if direction == "read" and not any(loads.values()) and not share:
                continue  # a resource no read reaches
            drawn.append((name, direction, ceiling, share, shard_loads(
                {v: (shards[v], loads[v]) for v in loads}), Placements(
                    count, spread=share, namespace=namespace, trials=trials)))
    found = [placed.busiest(loads) for *_, loads, placed in drawn]
    if count and len(found) > 1:
        # the nearest any comes to its ceiling in each placement, then the sum of all,
        # which orders the placements where one load spread over the table is nearest
        shares = [[top / ceiling for top in busiest.tops]
                  for busiest, (_, _, ceiling, *_) in zip(found, drawn, strict=True)]
        trial = quantile_trial([(max(each), sum(each)) for each in zip(*shares, strict=True)])
        found = [placed.at(loads, trial) for *_, loads, placed in drawn]
    return [PartitionPlan(name, count, ceiling, share, busiest, headroom, direction)
            for (name, direction, ceiling, share, *_), busiest in zip(drawn, found,
                                                                    strict=True)]


def with_setting(model: Profile, name: str, value: float) -> Profile:
    """``model`` with capacity setting ``name`` (``warm_write``, ``provisioned_read``, ...)
    at ``value``, its per-table quota raised to it where it is past it (advice past the
    quota says to raise it too)."""
    quota = "quota_write" if name.endswith("_write") else "quota_read"
    return model.replace(**{name: value, quota: max(getattr(model, quota), value)})


# how a table of a given profile is planned: N per value with which it keeps up (the
# writes' partitions, and the reads' too when the second argument says so), or None;
# the third argument is the placements drawn per try
Fit = Callable[[Profile, bool, int], dict[str, int] | None]


def recommend(model: Profile, fit: Fit, *, total: float, headroom: float, write: bool = True
              ) -> tuple[str, float, dict[str, int]] | None:
    """The least capacity setting of ``write``'s direction, ``warm_write`` or
    ``warm_read`` on demand (``provisioned_write``, ``provisioned_read``), that starts a
    table ``fit`` plans keeping up with the headroom at the p99 of placements: (setting,
    value, N per value there). ``fit`` checks the writes' partitions for a write setting,
    the reads' too for a read one (more partitions hold fewer keys each, which can crowd
    the writes).

    ``total``: every unit a second of that direction the table serves, which the setting
    serves too. None when the partition count is given (a fact of the table), on Azure
    (no setting raises a storage account's target), or when no table up to 8x the quota
    does.
    """
    if model.partitions is not None or model.store == "azure-tables":
        return None
    name = model.limit_setting(write)
    ceiling = model.write_ceiling if write else model.read_ceiling
    quota = model.quota_write if write else model.quota_read
    least = max(model.initial_partitions + 1, math.ceil(round(total * headroom / ceiling, 9)))
    most = math.ceil(8 * min(quota, 1e6) / ceiling)

    def attempt(count: int, trials: int) -> dict[str, int] | None:
        return fit(with_setting(model, name, count * ceiling), not write, trials)

    found = least_partitions(least, most, attempt)
    if found is None:
        return None
    return name, found[0] * ceiling, found[1]


def least_partitions(least: int, most: int,
                     attempt: Callable[[int, int], dict[str, int] | None]
                     ) -> tuple[int, dict[str, int]] | None:
    """The least partition count from ``least`` up (to ``most``, at most MAX_PARTITIONS)
    at which ``attempt(count, trials)`` finds N per value that fits, and that N; None if
    none does (or ``least`` is past what the model places: each try would draw millions
    of placements).

    It grows the count geometrically to one that fits, then halves the gap to the least
    that does, on half the placements; the answer is then checked on all of them.
    """
    if least > MAX_PARTITIONS:
        return None
    most = min(max(least, most), MAX_PARTITIONS)
    failed, count, found = least - 1, least, None
    while count <= most:
        found = attempt(count, TRIALS // 2)
        if found is not None:
            break
        failed, count = count, max(count + 1, math.ceil(count * 1.5))
    if found is None:
        return None
    while count - failed > max(1, count // 10):
        middle = (failed + count) // 2
        shards = attempt(middle, TRIALS // 2)
        if shards is None:
            failed = middle
        else:
            count, found = middle, shards
    while count <= most:
        checked = attempt(count, TRIALS)
        if checked is not None:
            return count, checked
        count = max(count + 1, math.ceil(count * 1.1))
    return None


def _sized(shards: Mapping[str, int]) -> str:
    """N per value as a verdict names it: the sharded ones (``N=1`` if none is)."""
    return ", ".join(f"{v}={n}" for v, n in shards.items() if n > 1) or "N=1"


def _assumed(model: Profile, *names: str) -> tuple[str, ...]:
    return tuple(f"{name}={getattr(model, name):g} ({ASSUMPTIONS[name]})" for name in names)


def _no_margin(part: PartitionPlan) -> str:
    """The note on a partition that takes the peak at the p99 of placements without the
    headroom: it keeps up, but items hash onto shard keys unevenly from second to
    second, and a partition planned this near its ceiling refuses some of them (a
    request-by-request run at a p99 partition of 1,000 of 1,000 write units: 0.4% to
    0.6% of the writes refused, and retried)."""
    b = part.busiest
    reads = part.direction == "read"
    where = ("its GSI's" if part.resource == "index" else "its") + " busiest partition"
    return (f"it keeps up at the peak, but {where} at the p99 of placements takes "
            f"{b.worst:,.0f} of its {part.ceiling:,.0f} {'read ' if reads else ''}units/s "
            f"({100 * b.worst / part.ceiling:.0f}%), less than the {part.headroom:g}x "
            "headroom: " + ("items hash onto shard keys unevenly from second to second"
                            if not reads else "reads vary from second to second")
            + ", so a partition this near its ceiling refuses a fraction of a percent of "
            "them (retried); a larger N, or a table of more partitions, leaves the margin")


def _table_margin(model: Profile, write: bool, needed: float, limit: float, limited_by: str,
                  headroom: float, reads_are: str) -> str:
    """The note on a table limit that takes the peak but not its headroom (the plan's
    ``binds`` line asks the setting of it): what it serves, and what leaves the margin."""
    unit = model.unit_word
    asked = "reads and writes" if model.shared_units else "writes"
    what = (f"the table's {asked} with the {headroom:g}x headroom ({needed:,.0f} {unit}/s) are "
            f"past what it serves at once ({limit:,.0f}: {limited_by})" if write else
            f"{reads_are} with the {headroom:g}x headroom ({needed:,.0f} {unit}/s) are past "
            f"the table's {limit:,.0f}")
    if model.store == "azure-tables":
        fix = ("a storage account's target is fixed: spread the index over "
               f"{max(2, math.ceil(round(needed / limit, 9))):,} accounts or lower the load")
    else:
        quota = model.quota_write if write else model.quota_read
        least = f"{math.ceil(round(needed, 6)):,}"
        setting = getattr(model, model.limit_setting(write), None)
        if isinstance(setting, int | float) and setting >= needed:
            # the setting given serves it already: the quota binds
            fix = (f"{'quota_write' if write or model.shared_units else 'quota_read'} (the "
                   f"per-table quota) of at least {least} leaves the margin: request an "
                   "increase")
        else:
            fix = (model.limit_setting(write) + f" of at least {least} leaves the margin"
                   + (f" (past the per-table quota of {quota:,.0f}: request an increase)"
                      if needed > quota else ""))
    return (f"it keeps up at the peak, but {what}: a peak that much higher throttles, "
            f"whatever N; {fix}")


def judge(model: Profile, parts: list[PartitionPlan], *, table_units: float,
          table_limit: float, limited_by: str, read_units: float, read_limit: float,
          headroom: float, fitted: bool,
          recommendation: tuple[str, float] | None,
          read_recommendation: tuple[str, float] | None = None,
          advised_shards: Mapping[str, int] | None = None,
          planned: Mapping[str, int] | None = None,
          reads_are: str = "the reads that locate items") -> Verdict:
    """The verdict at the peak on the table as given (see the module's docstring).

    ``table_units``: every write unit a second the layout makes at the table level,
    against ``table_limit`` (set by ``limited_by``); ``read_units``/``read_limit`` the
    same for the reads (``reads_are`` names them: the locates of items, and the values'
    measured reads when there are any); ``fitted``: whether N fits with the headroom.
    ``recommendation``: the write setting and its value (``recommend``);
    ``read_recommendation``: the read setting and its value, when the reads need one;
    ``advised_shards``: N per value on the table the settings start, as its own plan
    sizes it, when that plan keeps up (None: no setting is said to avoid it);
    ``planned``: N per value on the table as given.
    """
    reasons: list[str] = []
    notes: list[str] = []
    assumed: list[str] = []
    expects: list[str] = []
    watch = _STEADY_SECONDS
    # one budget (Cosmos DB's RU): the table's units are its reads and writes
    asked = "reads and writes" if model.shared_units else "writes"
    if table_units > table_limit * (1 + _EPSILON):
        reasons.append(f"the table's {asked} ({table_units:,.0f} units/s at the peak) are "
                       f"past what it serves at once ({table_limit:,.0f}: {limited_by}), "
                       "whatever N")
        if model.capacity == "on-demand" and limited_by == "warm throughput":
            reasons.append(f"an on-demand table serves up to {model.peak_multiple:g}x a peak "
                           f"it reached {model.peak_window_seconds:,.0f} s before: it throttles"
                           " until it has grown to the load")
            assumed += _assumed(model, "peak_window_seconds")
            expects.append("growth")
            watch = max(watch, model.peak_window_seconds + _AFTER)
        elif model.capacity == "provisioned":
            assumed += _assumed(model, "initial_burst_seconds")
    if read_units > read_limit * (1 + _EPSILON):
        reasons.append(f"{reads_are} ({read_units:,.0f} units/s) are past "
                       f"the table's {read_limit:,.0f}")
    for part in parts:
        if part.fits:
            continue
        b = part.busiest
        over = 1.0 - b.collision_free if b.keys > 1 else 1.0
        where = "its GSI's" if part.resource == "index" else "its"
        of_reads = part.direction == "read"
        # what the busiest takes: its shard keys, and its share of the spread load (a
        # partition that takes no shard key's load takes that alone)
        takes = [b.named] if b.worst_keys else []
        if part.spread:
            takes.append(f"{part.spread:,.0f} of "
                         f"{'locates' if of_reads else 'placement records'}")
        reasons.append(
            f"{where} {counted(part.partitions, 'partition')} "
            f"{'takes' if part.partitions == 1 else 'take'} the "
            f"{'reads of the ' if of_reads else ''}shard keys hashed onto "
            f"{'it' if part.partitions == 1 else 'them'}: the "
            f"busiest takes {b.expected:,.0f} {'read ' if of_reads else ''}units/s expected, "
            f"{b.worst:,.0f} at the p99 of placements"
            + (f" ({' and '.join(takes)})" if takes else "")
            + f" of its {part.ceiling:,.0f}; shard keys share a partition in {100 * over:.0f}%"
              " of placements")
        if math.isfinite(model.split_delay_seconds) and len(b.worst_keys) + (
                part.spread > 0) >= 2:
            reasons.append(
                f"the shard keys on a partition past its ceiling throttle until the store "
                f"splits it for heat, after {model.split_delay_seconds:,.0f} s at "
                f"{100 * model.split_heat:.0f}% of its ceiling (assumed)")
            assumed += _assumed(model, "split_delay_seconds", "split_heat")
            expects.append("split")
            watch = max(watch, model.split_delay_seconds + _AFTER)
        else:
            reasons.append("the store does not split it for heat: they throttle for as "
                           "long as the load lasts")
    if not reasons and not fitted:
        notes.append(f"it keeps up at the peak, but the busiest partition's expected load "
                     f"leaves less than the {headroom:g}x headroom")
    elif not reasons:
        notes += [_no_margin(part) for part in parts if part.fits and not part.sized]
    if not reasons:
        for write, units, limit in ((True, table_units, table_limit),
                                    (False, read_units, read_limit)):
            if units * headroom > limit * (1 + _EPSILON):
                notes.append(_table_margin(model, write, units * headroom, limit,
                                           limited_by, headroom, reads_are))
    setting: dict[str, float] | None = None
    shards: dict[str, int] = {}
    word = "pre-warming to" if model.capacity == "on-demand" else "provisioning"
    reads, read_setting = "", {}
    if read_recommendation is not None and reasons:
        read_name, read_value = read_recommendation
        read_setting = {read_name: read_value}
        reads = f"{read_name}={read_value:,.0f}" + (
            f" (past the per-table quota of {model.quota_read:,.0f}: request an increase)"
            if read_value > model.quota_read else "")
    if recommendation is not None and advised_shards is not None and (reasons or not fitted):
        name, value = recommendation
        setting = {name: value, **read_setting}
        shards = dict(advised_shards)
        partitions = max([value / model.write_ceiling]
                         + [units / model.read_ceiling for units in read_setting.values()])
        # each setting past its quota says so beside it, as the read setting does
        (reasons if reasons else notes).append(
            f"{word} {name}={value:,.0f} ({partitions:,.0f} partitions"
            + (f"; past the per-table quota of {model.quota_write:,.0f}: request an increase"
               if value > model.quota_write else "") + ")"
            + (f" and {reads}" if reads else "") + f" avoids it, with {_sized(shards)}")
    elif read_setting and advised_shards is not None and recommendation is None:
        # the reads are all of it (the table's read limit, partitions their keys crowd,
        # where a table of more partitions spreads them): their own setting avoids it,
        # the writes' would not
        same = dict(advised_shards) == dict(planned or {})
        setting, shards = read_setting, dict(advised_shards)
        reasons.append(f"{word} {reads} avoids it"
                       + ("" if same else f", with {_sized(shards)}"))
    elif recommendation is None and reasons and model.partitions is None \
            and table_units * headroom / model.write_ceiling > MAX_PARTITIONS:
        reasons.append(f"a table that takes it has more than {MAX_PARTITIONS:,} partitions, "
                       "past what the planner models: no pre-warmed size is proposed")
    keeps = not any(not p.fits for p in parts) and table_units <= table_limit * (
        1 + _EPSILON) and read_units <= read_limit * (1 + _EPSILON)
    summary = "keeps up" if keeps else "throttles: " + reasons[0]
    return Verdict(keeps_up=keeps, summary=summary, reasons=tuple(reasons),
                   notes=tuple(notes), assumptions=tuple(dict.fromkeys(assumed)),
                   setting=setting, expects=tuple(dict.fromkeys(expects)),
                   watch_seconds=watch, recommended_shards=shards)
