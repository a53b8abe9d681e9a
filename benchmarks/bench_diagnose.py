"""Diagnose benchmark: ``shardex diagnose`` on a 10-million-row access log, and Space-Saving.

Run: .venv/bin/python benchmarks/bench_diagnose.py [--rows N] [--stream-keys N] [--no-spark]

1. Writes a 10-million-row access log (Parquet, then the same rows as CSV) with DuckDB
   into a temporary directory, removed at the end: 85% of requests on four order
   statuses, the rest on 100,000 tenants with a skewed (log-uniform) popularity, over
   one hour, reads and writes, sizes in bytes, 1% throttled.
2. Times ``shardex.heat.report.diagnose`` (what ``shardex diagnose FILE`` runs: reading,
   validating every row, per-key per-second aggregation, classification) and a plain
   DuckDB ``SELECT key, count(*) ... GROUP BY key`` over the same file, and prints the
   rows a second and the ratio of the two wall times.
3. Feeds the first keys of the log to a Space-Saving summary (1,000 counters), one
   ``add`` per key and batched through ``update``, and prints the updates a second, the
   largest overcount it made against exact counts, its bound N/m, and whether every key
   above N/m was kept.
4. Reads the first CSV lines as ``shardex diagnose --stream`` does (framing, the row
   rules in DuckDB batches, Space-Saving over logical keys) and prints the rows a second
   against the exact reader's over the same lines.
5. Runs ``diagnose --engine spark`` on the same Parquet and CSV files in Spark local
   mode (``--spark-master``, default ``local[2]``: two executor threads, as many as the
   machine has cores), after starting the session (its start is printed apart: a
   cluster's session is up before the job), checks that its report equals DuckDB's,
   prints both engines' rows a second, and the rows a second expected of a cluster
   (see ``spark_scaling``). ``--no-spark`` leaves it out.

Every figure is measured in this run; nothing here is asserted by the tests.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from pathlib import Path

import duckdb

from shardex.counters.spacesaving import SpaceSaving
from shardex.heat.report import diagnose, diagnose_stream

STATUSES = ["PENDING", "SHIPPED", "DELIVERED", "CANCELLED"]


def write_log(directory: Path, rows: int) -> tuple[Path, Path]:
    """Write the access log as Parquet and as CSV; return both paths."""
    parquet, csv = directory / "access.parquet", directory / "access.csv"
    con = duckdb.connect()
    # hash(i) gives every row its own reproducible pseudo-random draws
    con.execute(f"""
        COPY (
            SELECT 1796014800 + i * 3600.0 / {rows} AS timestamp,
                CASE WHEN hash(i) % 100 < 85
                    THEN {STATUSES!r}[1 + CAST(hash(i * 7) % 4 AS INTEGER)]
                    ELSE 'tenant-' || CAST(floor(pow(100000, (hash(i * 13) % 1000000) / 1e6))
                                           AS INTEGER)
                END AS key,
                CASE WHEN hash(i * 3) % 5 = 0 THEN 'read' ELSE 'write' END AS op,
                CAST(100 + hash(i * 5) % 5000 AS BIGINT) AS bytes,
                CAST(hash(i * 11) % 100 = 0 AS INTEGER) AS throttled
            FROM range({rows}) AS t(i)
        ) TO '{parquet}' (FORMAT parquet)""")
    con.execute(f"COPY (SELECT * FROM read_parquet('{parquet}')) TO '{csv}' (HEADER)")
    con.close()
    return parquet, csv


def plain_group_by(source: str) -> float:
    """Seconds of the plainest DuckDB aggregation over the same file."""
    con = duckdb.connect()
    start = time.perf_counter()
    con.execute(f"SELECT key, count(*) FROM {source} GROUP BY key").fetchall()
    seconds = time.perf_counter() - start
    con.close()
    return seconds


def bench_diagnose(path: Path, source: str, rows: int) -> float:
    """Time diagnose (DuckDB) on ``path``; return its rows a second."""
    start = time.perf_counter()
    result = diagnose([path])
    seconds = time.perf_counter() - start
    plain = plain_group_by(source)
    assert result.profile.rows == rows
    rec = result.recommendation
    print(f"  {path.suffix[1:]:8s} diagnose {seconds:6.2f} s = {rows / seconds / 1e6:5.2f} M rows/s"
          f" | plain GROUP BY key {plain:5.2f} s | ratio {seconds / plain:4.1f}x"
          f" | {result.classification.kind}, {rec.strategy} {rec.shards}")
    return rows / seconds


# The expected scaling of the Spark job with executors. Its first stage (read, validate,
# sum per file, key and second) is parallel over input files and splits, so it grows
# with executor cores; what follows works on the per-second aggregate (one row a key and
# second: far fewer rows), shuffled once, and a fixed number of small queries (about a
# second each on a warm cluster). A core of a cluster runs about as fast as a local[N]
# thread, less what shuffling over the network costs: EFFICIENCY.
EFFICIENCY = 0.75
CLUSTERS = ((4, 4), (10, 4), (50, 4))  # (executors, cores each)


def spark_scaling(rows_per_s: float, threads: int) -> str:
    """The rows a second expected of clusters, from local mode's rows a second."""
    per_core = rows_per_s / threads
    return "; ".join(f"{e} executors x {c} cores ~ {per_core * e * c * EFFICIENCY / 1e6:,.1f} M"
                     for e, c in CLUSTERS)


def bench_spark(paths: list[tuple[Path, float]], rows: int, master: str) -> None:
    """Time diagnose --engine spark on each file beside DuckDB's rows a second."""
    from shardex.heat.spark import local_session

    start = time.perf_counter()
    spark = local_session(master, {"spark.sql.shuffle.partitions": "16"})
    print(f"  session {master} started in {time.perf_counter() - start:.1f} s "
          f"(JVM start; not in the rates below)")
    threads = spark.sparkContext.defaultParallelism
    try:
        for path, duck_rate in paths:
            start = time.perf_counter()
            result = diagnose([path], engine="spark", spark=spark)
            seconds = time.perf_counter() - start
            same = result.to_dict() == diagnose([path]).to_dict()
            rate = rows / seconds
            print(f"  {path.suffix[1:]:8s} spark {master} {seconds:6.2f} s = "
                  f"{rate / 1e6:5.2f} M rows/s | duckdb {duck_rate / 1e6:5.2f} M rows/s | "
                  f"duckdb/spark {duck_rate / rate:4.1f}x | same report: {same}")
            print(f"           expected on a cluster ({EFFICIENCY:.0%} of a local thread a core):"
                  f" {spark_scaling(rate, threads)} rows/s")
    finally:
        spark.stop()


def bench_space_saving(parquet: Path, count: int, counters: int) -> None:
    con = duckdb.connect()
    keys = [row[0] for row in con.execute(
        f"SELECT key FROM read_parquet('{parquet}') LIMIT {count}").fetchall()]
    con.close()
    truth = Counter(keys)
    for label, feed in (("add() per key", _one_by_one), ("update() batched", _batched)):
        summary = SpaceSaving(counters)
        start = time.perf_counter()
        feed(summary, keys)
        seconds = time.perf_counter() - start
        threshold = summary.threshold
        counted = summary.top()
        over = max(c.count - truth[c.key] for c in counted)
        wrong = sum(1 for c in counted if not c.count - c.error <= truth[c.key] <= c.count)
        heavy = [k for k, n in truth.items() if n > threshold]
        kept = sum(1 for k in heavy if k in summary)
        print(f"  {label:17s} {len(keys) / seconds / 1e6:5.2f} M updates/s | largest overcount "
              f"{over:,.0f} (bound N/m = {threshold:,.0f}; {wrong} keys outside their bounds) | "
              f"keys above N/m kept: {kept} of {len(heavy)}")
    print(f"  stream: {len(keys):,} keys, {len(truth):,} distinct, {counters:,} counters")


def bench_stream(csv: Path, count: int, directory: Path) -> None:
    with csv.open() as text:
        lines = [line for _, line in zip(range(count + 1), text, strict=False)]
    part = directory / "first.csv"
    part.write_text("".join(lines))
    start = time.perf_counter()
    streamed = diagnose_stream(lines, fmt="csv")
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    exact = diagnose([part])
    exact_seconds = time.perf_counter() - start
    assert streamed.profile.rows == exact.profile.rows == count
    print(f"  {count:,} CSV lines: stream {count / seconds / 1e3:6.0f} k rows/s | exact "
          f"{count / exact_seconds / 1e3:6.0f} k rows/s | ratio {seconds / exact_seconds:4.1f}x"
          f" | same top keys: {[k.key for k in streamed.keys] == [k.key for k in exact.keys]}")


def _one_by_one(summary: SpaceSaving, keys: list[str]) -> None:
    add = summary.add
    for key in keys:
        add(key)


def _batched(summary: SpaceSaving, keys: list[str]) -> None:
    summary.update(keys)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows in the access log")
    parser.add_argument("--stream-keys", type=int, default=2_000_000,
                        help="keys fed to the Space-Saving summary")
    parser.add_argument("--counters", type=int, default=1000, help="Space-Saving counters")
    parser.add_argument("--stream-rows", type=int, default=1_000_000,
                        help="CSV lines read by the streaming reader")
    parser.add_argument("--no-spark", action="store_true", help="leave the Spark engine out")
    parser.add_argument("--spark-master", default="local[2]",
                        help="the Spark master of the Spark runs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="shardex-bench-") as tmp:
        start = time.perf_counter()
        parquet, csv = write_log(Path(tmp), args.rows)
        sizes = (f"Parquet {parquet.stat().st_size / 1e6:.0f} MB, "
                 f"CSV {csv.stat().st_size / 1e6:.0f} MB")
        print(f"access log: {args.rows:,} rows written in {time.perf_counter() - start:.1f} s "
              f"({sizes})")
        print("shardex diagnose (read, validate every row, aggregate per key and second, "
              "classify):")
        rates = [(parquet, bench_diagnose(parquet, f"read_parquet('{parquet}')", args.rows)),
                 (csv, bench_diagnose(csv, f"read_csv('{csv}')", args.rows))]
        print("Space-Saving:")
        bench_space_saving(parquet, args.stream_keys, args.counters)
        print("streaming reader (--stream, stdin):")
        bench_stream(csv, min(args.stream_rows, args.rows), Path(tmp))
        if not args.no_spark:
            print("diagnose --engine spark (the same files, local mode):")
            bench_spark(rates, args.rows, args.spark_master)


if __name__ == "__main__":
    main()
