"""What ``shardex plan --from`` takes from a ``shardex.diagnose/1`` document: each key's
measured peaks, the notes on what it leaves out, the least N a recommendation resting on
more than a peak sets, the bucket planned for time buckets hot one at a time, and the
load measured beside the keys planned."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any, NamedTuple

import click

from shardex.errors import InvalidInput
from shardex.routing import MAX_SHARDS

__all__ = ["Diagnosed", "MODE_OF_CEILING", "UNITS_OF_MODE", "measured_peaks"]


# the planner's mode of the store a diagnosis's named ceiling is
MODE_OF_CEILING = {"cosmos": "cosmos", "azure-tables": "azure"}
UNITS_OF_MODE = {"cosmos": "Cosmos DB's request units",
                  "azure": "Azure Table Storage's entities"}


class Diagnosed(NamedTuple):
    """What ``plan --from`` takes from a diagnosis (``measured_peaks``)."""

    peaks: dict[str, float]
    reads: dict[str, float]
    notes: tuple[str, ...]
    against: str | None
    floors: dict[str, int]
    bucket: str | None
    left_out: float


def measured_peaks(path: str) -> Diagnosed:
    """The peak write units a second of each key a ``shardex.diagnose/1`` document lists,
    its peak read units a second (``peak_read_units_per_s``, for the keys whose row has
    it: a diagnosis written before rows held it has none), notes on what it leaves out
    (``shardex.scenarios.workload.measured_keys``: a key that cannot be a logical key is
    not planned), the ceiling it was made against (whose store's units it measured:
    ``cosmos``, request units; else write units), the least N of each key whose
    recommendation rests on more than its peak (``_floors``), and, for sequential keys
    (time buckets, one hot at a time), the bucket planned for all (``_one_bucket``).

    ``-`` reads standard input. A document of another kind, or one that lists no key, is
    a usage error naming --from.
    """
    from shardex.documents import DIAGNOSE_SCHEMA
    from shardex.scenarios.workload import measured_keys

    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
        doc = json.loads(text.removeprefix("\ufeff"))  # a byte order mark: some editors
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise click.BadParameter(f"{path}: {exc}", param_hint="--from") from None
    if not isinstance(doc, dict) or doc.get("schema") != DIAGNOSE_SCHEMA:
        raise click.BadParameter(f"{path} is not a {DIAGNOSE_SCHEMA} document (shardex "
                                 "diagnose --json)", param_hint="--from")
    try:
        measured = measured_keys(doc, path, verb="planned",
                                 bad_row="needs a key and its peak units")
    except InvalidInput as exc:
        raise click.BadParameter(str(exc), param_hint="--from") from None
    peaks: dict[str, float] = {}
    reads: dict[str, float] = {}
    for where, row in measured.rows:
        field = "peak_write_units_per_s" if "peak_write_units_per_s" in row \
            else "peak_units_per_s"
        figure = row.get(field)
        if isinstance(figure, bool) or not isinstance(figure, int | float):
            raise click.BadParameter(f"{path}: {where} needs a key and its peak units",
                                     param_hint="--from")
        if not 0 <= figure < math.inf:  # NaN too
            raise click.BadParameter(f"{path}: {where}.{field} must be a finite number of "
                                     f"units a second >= 0, got {figure!r}",
                                     param_hint="--from")
        peaks[row["key"]] = float(figure)
        if "peak_read_units_per_s" in row:
            read = row["peak_read_units_per_s"]
            if isinstance(read, bool) or not isinstance(read, int | float):
                raise click.BadParameter(f"{path}: {where}.peak_read_units_per_s must be a "
                                         f"number, got {read!r}", param_hint="--from")
            reads[row["key"]] = float(read)
    ceiling = doc.get("ceiling")
    name = ceiling.get("name") if isinstance(ceiling, dict) else None
    floors, why = _floors(doc, path, peaks)
    left_out = _left_out_units(doc, peaks)
    bucket, said = _one_bucket(doc, peaks, reads, floors)
    return Diagnosed(peaks, reads, (*measured.notes, *why, *said),
                      name if isinstance(name, str) else None, floors, bucket, left_out)


def _left_out_units(doc: dict[str, Any], peaks: dict[str, float]) -> float:
    """The write units a second a diagnosis measured beside the keys planned: the peaks of
    the keys it lists that cannot be logical keys (another table's or layout's), and the
    mean of those beyond its top. The table serves them too; the plan's figures leave
    them out, and its verdict says so (it read "keeps up" for 1,680 units/s of a table
    the notes' own figures put at 11,500)."""
    listed: dict[str, Any] = {}
    recommendation = doc.get("recommendation")
    changes = recommendation.get("changes") if isinstance(recommendation, dict) else None
    for row in [*(doc.get("top") or ()), *(changes if isinstance(changes, list) else ())]:
        if isinstance(row, dict) and isinstance(row.get("key"), str):
            listed.setdefault(row["key"], row)

    def number(row: Any, *names: str) -> float:
        for name in names:
            value = row.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool) \
                    and math.isfinite(value) and value > 0:
                return float(value)
        return 0.0

    out = sum(number(row, "peak_write_units_per_s", "peak_units_per_s")
              for key, row in listed.items() if key not in peaks)
    totals = doc.get("totals")
    if isinstance(totals, dict):
        units, seconds = number(totals, "units"), number(totals, "seconds")
        rest = units - sum(number(row, "units") for row in listed.values())
        if seconds and rest > 0 and all(number(row, "units") for row in listed.values()):
            out += rest / seconds
    return out


def _one_bucket(doc: dict[str, Any], peaks: dict[str, float], reads: dict[str, float],
                floors: dict[str, int]) -> tuple[str | None, list[str]]:
    """For a diagnosis of sequential keys (``time_bucket_plus_suffix``: time buckets hot
    one at a time, ``evidence.hot_key_sequence``), keep the hottest bucket alone in
    ``peaks`` (and ``reads``, ``floors``): its N is the routing's default, which every
    bucket takes, the ones to come too. Each past bucket had been planned as an override
    of its own, tomorrow's left at N=1, and their peaks, which never overlapped, summed
    at the table (24 buckets of 1,500 units/s read as 36,000 at once)."""
    recommendation = doc.get("recommendation")
    evidence = doc.get("evidence")
    if not isinstance(recommendation, dict) or not isinstance(evidence, dict) \
            or recommendation.get("strategy") != "time_bucket_plus_suffix":
        return None, []
    sequence = evidence.get("hot_key_sequence")
    buckets = [key for key in sequence if key in peaks] if isinstance(sequence, list) else []
    if not buckets:
        return None, []
    hottest = max(buckets, key=lambda key: (peaks[key], key))
    for key in buckets:
        if key != hottest:
            del peaks[key]
            reads.pop(key, None)
            floors.pop(key, None)
    return hottest, [f"the diagnosis found sequential keys, time buckets hot one at a time "
                     f"({len(buckets)} of them, {buckets[0]} to {buckets[-1]}): planned as "
                     f"one bucket at the hottest one's peak ({hottest}, "
                     f"{peaks[hottest]:,.0f} units/s); the routing's default gives every "
                     "bucket its N, the ones to come too"]


def _floors(doc: dict[str, Any], path: str,
            peaks: dict[str, float]) -> tuple[dict[str, int], list[str]]:
    """The N a diagnosis recommends for a key where its peak alone would size less, and
    why: a key throttled below the nominal ceiling (what its partitions accepted sizes
    N), or one already sharded whose busiest shard counts for all of them (a spread that
    uneven stays so at any N). A peak spread evenly, which is all the plan and its
    simulation see, would be planned on fewer (it was: N=3 for a key on 4 shards, its
    busiest at 150% of a partition)."""
    recommendation = doc.get("recommendation")
    changes = recommendation.get("changes") if isinstance(recommendation, dict) else None
    rows = {row.get("key"): row for row in doc.get("top") or () if isinstance(row, dict)}
    floors: dict[str, int] = {}
    notes: list[str] = []
    for i, change in enumerate(changes if isinstance(changes, list) else ()):
        if not isinstance(change, dict) or change.get("key") not in peaks:
            continue
        key, start, n = change["key"], change.get("from"), change.get("to")
        if not all(isinstance(x, int) and not isinstance(x, bool) and 1 <= x <= MAX_SHARDS
                   for x in (start, n)):
            raise click.BadParameter(f"{path}: recommendation.changes[{i}] needs 'from' and "
                                     f"'to' shard counts from 1 to {MAX_SHARDS}",
                                     param_hint="--from")
        assert isinstance(start, int)
        assert isinstance(n, int)
        row = rows.get(key) or {}
        if change.get("reason") == "throttles":
            why = (f"it was throttled at {peaks[key]:,.0f} units/s, below the nominal "
                   "ceiling, so what its partitions accepted sizes N")
        elif start > 1:
            busiest = row.get("peak_to_ceiling")
            took = f"{100 * busiest:.0f}% of a partition" if isinstance(
                busiest, int | float) and not isinstance(busiest, bool) else "the most"
            why = (f"the busiest shard of its {start} took {took}, and a spread that uneven "
                   "stays so at any N")
        else:
            continue  # sized on its peak alone, as the plan sizes it
        floors[key] = n
        notes.append(f"{key}: N at least {n}, as the diagnosis recommends: {why} (the plan "
                     "and its simulation spread the peak evenly)")
    return floors, notes
