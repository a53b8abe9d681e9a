"""Small generated access logs for the heat tests: one per kind of heat, in any format."""

from __future__ import annotations

import csv
import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

Row = Mapping[str, Any]
BASE = 1_796_014_800  # 2026-11-30T05:00:00Z
COLUMNS = ("timestamp", "key", "op", "units", "bytes", "throttled")


def write_log(path: Path, rows: Sequence[Row], *, columns: Sequence[str] | None = None,
              text: bool = False) -> Path:
    """Write ``rows`` in the format of ``path``'s extension; return ``path``.

    CSV writes every column in ``columns`` (default: those the rows use), empty when a
    row lacks it; JSON Lines writes each row's own fields; Parquet writes typed
    columns, or all text when ``text`` (so a bad value can sit in a numeric column).
    """
    names = list(columns or [c for c in COLUMNS if any(c in r for r in rows)])
    suffix = path.suffix
    if suffix == ".csv":
        with path.open("w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out)
            writer.writerow(names)
            for row in rows:
                writer.writerow(["" if row.get(c) is None else row[c] for c in names])
    elif suffix == ".jsonl":
        with path.open("w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(dict(row)) + "\n")
    elif suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        data = {c: [None if r.get(c) is None else (str(r[c]) if text else r[c]) for r in rows]
                for c in names}
        pq.write_table(pa.table(data), path)
    else:  # pragma: no cover - a test asked for an unknown format
        raise AssertionError(path)
    return path


def low_cardinality(*, reads: bool = True, seconds: int = 60) -> list[Row]:
    """Orders by status: PENDING peaks at 2,000 write units/s, SHIPPED at 800."""
    rows: list[Row] = []
    for s in range(seconds):
        for key, count in (("PENDING", 20), ("SHIPPED", 8), ("DELIVERED", 2), ("CANCELLED", 1)):
            for i in range(count):
                rows.append({"timestamp": BASE + s + i / 100, "key": key, "op": "write",
                             "units": 100})
        if reads:
            rows.append({"timestamp": BASE + s + 0.5, "key": "PENDING", "op": "read",
                         "units": 10})
    return rows


def sequential(*, prefix: str = "", days: int = 4) -> list[Row]:
    """Orders by date: each day's key takes that day's writes (3,000 units/s at its peak)."""
    rows: list[Row] = []
    rng = random.Random(3)
    for day in range(days):
        key = f"{prefix}2026-11-{27 + day:02d}"
        for hour in range(24):
            t0 = BASE + day * 86_400 + hour * 3600
            for i in range(30):
                rows.append({"timestamp": t0 + i / 100, "key": key, "op": "write", "units": 100})
            rows.append({"timestamp": t0 + 5, "key": f"user-{rng.randrange(50)}", "op": "write",
                         "units": 1})
    return rows


def counters(*, batches: int = 5) -> list[Row]:
    """Writes keyed by an increasing batch counter: batch-7, batch-8, ..."""
    rows: list[Row] = []
    for b in range(batches):
        for s in range(20):
            for i in range(12):
                rows.append({"timestamp": BASE + b * 20 + s + i / 20, "key": f"batch-{7 + b}",
                             "op": "write", "units": 100})
    return rows


def popular_entity(*, tenants: int = 200, seconds: int = 30) -> list[Row]:
    """Tenants: tenant-42 takes half of all units (2,500 units/s); the rest spread thin."""
    rows: list[Row] = []
    rng = random.Random(5)
    for s in range(seconds):
        for i in range(25):
            rows.append({"timestamp": BASE + s + i / 50, "key": "tenant-42", "op": "write",
                         "units": 100})
            rows.append({"timestamp": BASE + s + i / 50,
                         "key": f"tenant-{rng.randrange(tenants) + 1000}",
                         "op": "read", "bytes": 409_600})
    return rows


def uniform(*, keys: int = 500, rows_count: int = 3000) -> list[Row]:
    """Many keys, none above a few percent: no hot key."""
    rng = random.Random(9)
    return [{"timestamp": BASE + i / 100, "key": f"item-{rng.randrange(keys)}",
             "op": rng.choice(("read", "write")), "bytes": rng.randrange(100, 5000),
             "throttled": 0} for i in range(rows_count)]
