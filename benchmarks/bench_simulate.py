"""Simulate benchmark: an hour at 50,000 writes a second on the rate engine, against the
request-level store.

Run: .venv/bin/python benchmarks/bench_simulate.py [--quick]

1. Wall time of ``simulate`` for an hour of a four-value workload at 50,000 entry writes a
   second (180 million writes, each with its placement record and locate), sharded as
   ``plan`` says, on a table warmed (and its quota raised) to take it.
2. The baseline, measured in the same run: the same workload, scaled to a tenth of the
   rate for a few seconds, pushed request by request through ``memory://`` (``replay``),
   in writes simulated per wall-clock second; from it, what the hour would take that way.
Every figure is measured in this run; ratios compare numbers from this run only.
"""

from __future__ import annotations

import argparse
import time

from shardex.plan import plan_shards
from shardex.scenarios.replay import replay
from shardex.scenarios.simulate import simulate
from shardex.scenarios.workload import workload_from_dict
from shardex.sim import profile
from shardex.sim.clock import run_virtual

RATES = {"PENDING": 30_000.0, "SHIPPED": 15_000.0, "DELIVERED": 4_000.0, "CANCELLED": 1_000.0}
TABLE = {"warm_write": 250_000.0, "quota_write": 300_000.0, "warm_read": 150_000.0,
         "quota_read": 150_000.0}


def workload(scale: float, seconds: int) -> dict[str, object]:
    return {"duration": seconds,
            "values": {value: {"write": rate * scale, "item_bytes": 200, "read": 10 * scale,
                               "page": 100} for value, rate in RATES.items()}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="simulate 10 minutes, not 60")
    args = parser.parse_args()
    seconds = 600 if args.quick else 3600
    routing = plan_shards(RATES, item_bytes=200).routing()
    shards = {v: routing.policy(v).shards for v in RATES}

    start, cpu = time.perf_counter(), time.process_time()
    run = simulate(workload_from_dict(workload(1.0, seconds)), routing, profile(**TABLE))
    rate_wall, rate_cpu = time.perf_counter() - start, time.process_time() - cpu
    writes = sum(c.offered for c in run.values.values())
    accepted = sum(c.accepted for c in run.values.values())

    slice_seconds, scale = 3, 0.1
    start, cpu = time.perf_counter(), time.process_time()
    baseline = run_virtual(replay(workload_from_dict(workload(scale, slice_seconds)), routing,
                                  **TABLE))
    request_wall, request_cpu = time.perf_counter() - start, time.process_time() - cpu
    request_writes = sum(baseline.offered.values())
    per_wall_second = request_writes / request_cpu
    projected = writes / per_wall_second  # CPU seconds

    print(f"simulate: {seconds:,} virtual s at {sum(RATES.values()):,.0f} entry writes/s, "
          f"shards {shards}, {run.partitions['table'][1]} partitions at the end")
    print(f"  rate engine     {rate_wall:8.1f} s wall, {rate_cpu:6.1f} s CPU for {writes:,.0f} "
          f"writes ({writes / rate_cpu:,.0f} writes per CPU second), {accepted / writes:.2%} "
          f"accepted; verdict: {run.verdict()}")
    print(f"  request level   {request_wall:8.1f} s wall, {request_cpu:6.1f} s CPU for "
          f"{request_writes:,} writes ({per_wall_second:,.0f} writes per CPU second; "
          f"{slice_seconds} s at {scale:g}x the rate)")
    print(f"  the same writes request by request would take about {projected / 3600:,.1f} h of "
          f"CPU; rate engine / request level speed-up: {projected / rate_cpu:,.0f}x")


if __name__ == "__main__":
    main()
