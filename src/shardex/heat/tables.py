"""From per-second heat to a HeatProfile: the tables, queries and figures both engines run.

The sources' per-second heat (``aggregate.per_second``, their valid rows of their
major time kind) is one union; from it, the same SQL on every engine:

- ``heat``: per key and bucket of ``resolution`` seconds;
- ``keymap``: each key holding the separator, its logical key, shard number, and
  whether it is one of shardex's own records (counted apart, never ranked);
- ``lsec``: per logical key and bucket (shard keys rolled up);
- ``parts``: per shard key of a rolled-up value; ``keys``: per logical key, the
  figures a KeyHeat carries.

An engine is reached through ``Engine``: it materializes a table, defines a view,
holds a list of keys, and returns a query's rows. DuckDB (``heat.logs``) and Spark
(``heat.spark``) adapt to it; everything here, the numbers turned into KeyHeat,
HeatStep and HeatProfile included, is shared.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from shardex.capacity import Ceiling
from shardex.heat.aggregate import Dialect, Tally, logical_sql, number, reserved_sql
from shardex.heat.profile import (
    COVER_SLACK,
    HeatProfile,
    HotStep,
    KeyHeat,
    Timeline,
    reserved_note,
)

__all__ = ["Engine", "HeatTables", "key_heat"]

# the columns of a key's heat, as key_heat reads them
_HEAT = ("key, units, ru, wu, reads, writes, thr, secs, peak, peak_r, peak_w, peak_ok, ratio, "
         "shards, partitions, hot_r, hot_w")
_EMPTY = ("SELECT CAST(NULL AS STRING) AS key, CAST(NULL AS BIGINT) AS sec, 0 AS reads, "
          "0 AS writes, CAST(0 AS DOUBLE) AS ru, CAST(0 AS DOUBLE) AS wu, 0 AS thr, "
          "CAST(0 AS DOUBLE) AS tu WHERE false")


class Engine(Protocol):
    """What the shared tables need of an SQL engine."""

    dialect: Dialect

    def table(self, name: str, select: str) -> None:
        """Materialize ``select`` as ``name`` (replacing one of that name)."""

    def view(self, name: str, select: str) -> None:
        """Define ``name`` as ``select`` (the engine may materialize it)."""

    def keys(self, name: str, keys: Sequence[str]) -> None:
        """Hold ``keys`` as the one-column (``key``) table ``name``."""

    def rows(self, select: str) -> list[tuple[Any, ...]]:
        """The rows of ``select``."""


class HeatTables:
    """The profile of per-second heat held by an engine (see the module).

    ``parts`` are the selects of each source's per-second heat (columns key, sec,
    reads, writes, ru, wu, thr, tu); ``tally`` what the readers counted.
    """

    def __init__(self, engine: Engine, tally: Tally, parts: Sequence[str]) -> None:
        self.engine = engine
        self.tally = tally
        self._parts = list(parts)
        self._reserved = (0, 0.0, 0)
        self._built = False

    def add(self, select: str) -> None:
        """Add a source's per-second heat."""
        self._parts.append(select)
        self._built = False

    def build(self) -> None:
        """Make the heat, keymap and lsec tables (once for the sources added so far)."""
        if self._built:
            return
        e, res = self.engine, self.tally.resolution
        union = " UNION ALL ".join(self._parts) if self._parts else _EMPTY
        if len(self._parts) <= 1 and res == 1:  # one source: one row per key and second
            e.view("heat", union)
        else:
            sec = "sec" if res == 1 else f"CAST(floor(sec / {res}) AS BIGINT) * {res}"
            e.table("heat", f"""
                SELECT key, {sec} AS sec, sum(reads) AS reads, sum(writes) AS writes,
                    sum(ru) AS ru, sum(wu) AS wu, sum(thr) AS thr, sum(tu) AS tu
                FROM ({union}) u GROUP BY 1, 2""")
        # Only keys holding the separator can be shard keys or shardex's own records; the
        # others stand for themselves, so the common unsharded log is not copied again.
        logical, shard = logical_sql("key")
        e.table("keymap", f"""
            SELECT key, {logical} AS logical, {shard} AS shard, {reserved_sql("key")} AS reserved
            FROM (SELECT DISTINCT key FROM heat WHERE contains(key, '#')) d""")
        requests, units, keys = e.rows("""
            SELECT coalesce(sum(reads + writes), 0), coalesce(sum(ru + wu), 0),
                count(DISTINCT key)
            FROM heat WHERE key IN (SELECT key FROM keymap WHERE reserved)""")[0]
        self._reserved = (int(requests), float(units), int(keys))
        e.table("rolled", "SELECT DISTINCT logical FROM keymap WHERE shard IS NOT NULL")
        e.view("lsec", """
            SELECT key, sec, reads, writes, ru, wu, thr, tu FROM heat h
            WHERE NOT EXISTS (SELECT 1 FROM keymap m
                              WHERE m.key = h.key AND (m.reserved OR m.shard IS NOT NULL))
                AND NOT EXISTS (SELECT 1 FROM rolled r WHERE r.logical = h.key)
            UNION ALL
            SELECT coalesce(m.logical, h.key) AS key, h.sec, sum(h.reads), sum(h.writes),
                sum(h.ru), sum(h.wu), sum(h.thr), sum(h.tu)
            FROM heat h LEFT JOIN keymap m ON m.key = h.key
            WHERE m.shard IS NOT NULL OR h.key IN (SELECT logical FROM rolled)
            GROUP BY 1, 2""")
        self._built = True

    def profile(self, *, ceiling: Ceiling, top: int = 10, min_ratio: float = 1.0,
                min_throttles: int | None = None, buckets: int = 24, over_limit: int = 100,
                per_shard: bool = False, cover: float = 0.8) -> HeatProfile:
        """Return the heat profile over logical keys (shard keys rolled up).

        ``top``: the heaviest logical keys by units; ``over``: those whose busiest
        partition reaches ``min_ratio`` of ``ceiling``, or that had at least
        ``min_throttles`` throttled requests (at most ``over_limit``); the hottest
        key of each of up to ``buckets`` time buckets; with ``per_shard`` each top
        key's shard keys as its parts; ``keys_to_cover``: how many keys, heaviest first,
        carry ``cover`` of the units, over every key.
        """
        self.build()
        e, tally = self.engine, self.tally
        res = tally.resolution
        # Ceiling.ratio, in SQL: one budget for both, or each on its own figure
        ratio = f"max((wu + ru) / {number(ceiling.write_units)})" if ceiling.shared else \
            f"max(greatest(wu / {number(ceiling.write_units)}, " \
            f"ru / {number(ceiling.read_units)}))"
        # the partition keys of the rolled-up logical keys: their shard keys, and a plain
        # key of the same value (written while the value had one shard)
        e.table("parts", f"""
            SELECT h.key, coalesce(m.logical, h.key) AS logical, m.shard,
                sum(ru + wu) AS units, sum(ru) AS ru, sum(wu) AS wu, sum(reads) AS reads,
                sum(writes) AS writes, sum(thr) AS thr, count(*) AS secs,
                max(ru + wu) AS peak, max(ru) AS peak_r, max(wu) AS peak_w,
                max(ru + wu - tu) AS peak_ok, {ratio} AS ratio,
                1 AS shards, 1 AS partitions, max(ru) AS hot_r, max(wu) AS hot_w
            FROM heat h LEFT JOIN keymap m ON m.key = h.key
            WHERE m.shard IS NOT NULL OR h.key IN (SELECT logical FROM rolled)
            GROUP BY 1, 2, 3""")
        e.table("keys", f"""
            WITH l AS (
                SELECT key, sum(ru + wu) AS units, sum(ru) AS ru, sum(wu) AS wu,
                    sum(reads) AS reads, sum(writes) AS writes, sum(thr) AS thr,
                    count(*) AS secs, min(sec) AS first_sec, max(sec) AS last_sec,
                    max(ru + wu) AS peak, max(ru) AS peak_r, max(wu) AS peak_w,
                    max(ru + wu - tu) AS peak_ok, {ratio} AS own
                FROM lsec GROUP BY key),
            p AS (
                SELECT logical AS key, max(ratio) AS ratio,
                    CASE WHEN max(shard) IS NULL THEN 1 ELSE greatest(max(shard) + 1, 2) END
                        AS shards,
                    count(*) AS partitions, max(peak_r) AS hot_r, max(peak_w) AS hot_w
                FROM parts GROUP BY logical)
            SELECT l.*, coalesce(p.ratio, l.own) AS ratio, coalesce(p.shards, 1) AS shards,
                coalesce(p.partitions, 1) AS partitions, coalesce(p.hot_r, l.peak_r) AS hot_r,
                coalesce(p.hot_w, l.peak_w) AS hot_w
            FROM l LEFT JOIN p ON p.key = l.key""")
        units, requests, throttles, distinct, first, last = e.rows("""
            SELECT coalesce(sum(units), 0), coalesce(sum(reads + writes), 0),
                coalesce(sum(thr), 0), count(*), min(first_sec), max(last_sec)
            FROM keys""")[0]
        covering = None
        if units and float(units) > 0:
            # the keys whose running sum, heaviest first, is still short of the share, and one
            short = e.rows(f"""
                SELECT count(*) FROM (
                    SELECT sum(units) OVER (ORDER BY units DESC, key
                                            ROWS UNBOUNDED PRECEDING) AS running FROM keys) r
                WHERE running < {number((cover - COVER_SLACK) * float(units))}""")[0][0]
            covering = min(int(short) + 1, int(distinct))
        top_rows = e.rows(f"SELECT {_HEAT} FROM keys ORDER BY units DESC, key "
                          f"LIMIT {max(0, int(top))}")
        floor = 1 << 62 if min_throttles is None else int(min_throttles)
        over_rows = e.rows(f"SELECT {_HEAT} FROM keys WHERE ratio >= {number(min_ratio * res)} "
                           f"OR thr >= {floor} ORDER BY ratio DESC, key "
                           f"LIMIT {int(over_limit)}")
        parts: dict[str, list[KeyHeat]] = {}
        if per_shard and top_rows:
            e.keys("picked", [str(r[0]) for r in top_rows])
            for row in e.rows(f"SELECT logical, {_HEAT} FROM parts WHERE logical IN "
                              "(SELECT key FROM picked) ORDER BY units DESC, key"):
                parts.setdefault(str(row[0]), []).append(key_heat(row[1:], res))
            for row in top_rows:  # a key not rolled up is its own one partition
                if str(row[0]) not in parts:
                    parts[str(row[0])] = [key_heat(row, res)]
        return HeatProfile(
            rows=tally.rows, skipped_rows=tally.skipped_rows, total_units=float(units),
            requests=int(requests), throttles=int(throttles), distinct_keys=int(distinct),
            distinct_exact=True, first_second=None if first is None else int(first),
            last_second=None if last is None else int(last) + res - 1,
            top=[key_heat(r, res, tuple(parts.get(str(r[0]), ()))) for r in top_rows],
            over=[key_heat(r, res) for r in over_rows],
            sequence=self._sequence(first, last, buckets), ceiling=ceiling,
            skipped_by_column=dict(tally.skipped_by_column), resolution=res,
            time_kinds=tally.time_kinds(), sources=tuple(tally.formats),
            notes=tuple(self._notes()), unattributed_reads=tally.unattributed_reads,
            cover=cover, keys_to_cover=covering)

    def _notes(self) -> list[str]:
        said = list(self.tally.notes)
        if self._reserved[2]:
            said.append(reserved_note(*self._reserved))
        res = self.tally.resolution
        if res > 1:
            said.append(f"rates are means over {res} s buckets (the coarsest "
                        "source's period): a second's peak within one may be higher")
        return said

    def _sequence(self, first: Any, last: Any, buckets: int) -> list[HotStep]:
        if first is None:
            return []
        res = self.tally.resolution
        span = int(last) + res - int(first)
        count = max(1, min(buckets, span // res))
        steps = []
        for bucket, key, share in self.engine.rows(f"""
                WITH b AS (
                    SELECT CAST(floor((sec - {int(first)}) * {count} / {span}) AS BIGINT)
                        AS bucket, key, sum(ru + wu) AS u
                    FROM lsec GROUP BY 1, 2),
                r AS (
                    SELECT bucket, key, u, sum(u) OVER (PARTITION BY bucket) AS whole,
                        row_number() OVER (PARTITION BY bucket ORDER BY u DESC, key) AS place
                    FROM b)
                SELECT bucket, key, CASE WHEN whole > 0 THEN u / whole ELSE 0 END
                FROM r WHERE place = 1 ORDER BY bucket"""):
            start = int(first) + (int(bucket) * span) // count
            end = int(first) + ((int(bucket) + 1) * span) // count - 1
            steps.append(HotStep(start, end, str(key), float(share)))
        return steps

    def timeline(self, keys: Sequence[str], *, bins: int = 120) -> Timeline:
        """Return each logical key's busiest second in each of up to ``bins`` time bins."""
        self.build()
        res = self.tally.resolution
        first, last = self.engine.rows("SELECT min(sec), max(sec) FROM lsec")[0]
        if first is None or not keys:
            return Timeline(list(keys), 0, res, [[] for _ in keys])
        span = int(last) + res - int(first)
        width = max(res, -(-span // max(1, bins)) // res * res)
        count = -(-span // width)
        found = {k: [0.0] * count for k in keys}
        self.engine.keys("picked", list(keys))
        for key, j, peak in self.engine.rows(f"""
                SELECT key, CAST(floor((sec - {int(first)}) / {width}) AS BIGINT), max(ru + wu)
                FROM lsec WHERE key IN (SELECT key FROM picked) GROUP BY 1, 2"""):
            found[str(key)][int(j)] = float(peak) / res
        return Timeline(list(keys), int(first), width, [found[k] for k in keys])


def key_heat(row: Sequence[Any], res: int, parts: tuple[KeyHeat, ...] = ()) -> KeyHeat:
    """The KeyHeat of a row of ``keys`` or ``parts`` (its ``_HEAT`` columns)."""
    (key, units, ru, wu, reads, writes, thr, secs, peak, peak_r, peak_w, peak_ok, ratio,
     shards, partitions, hot_r, hot_w) = row
    seconds = int(secs) * res
    return KeyHeat(key=str(key), units=float(units), read_units=float(ru),
                   write_units=float(wu), reads=int(reads), writes=int(writes),
                   throttles=int(thr), active_seconds=seconds,
                   peak_units_per_s=float(peak) / res, peak_read_units_per_s=float(peak_r) / res,
                   peak_write_units_per_s=float(peak_w) / res,
                   sustained_units_per_s=float(units) / seconds if seconds else 0.0,
                   peak_to_ceiling=float(ratio) / res, shards=int(shards),
                   partitions=int(partitions), hottest_read_units_per_s=float(hot_r) / res,
                   hottest_write_units_per_s=float(hot_w) / res,
                   peak_accepted_units_per_s=float(peak_ok) / res, parts=parts)
