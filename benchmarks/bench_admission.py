"""Admission benchmark: the throttled requests a fleet wastes on one hot key, with and without AIMD.

Run: .venv/bin/python benchmarks/bench_admission.py [--quick] [--clients N] [--workers N]

Several clients write one hot shard key of a ``memory://`` store (1,000 write units a
second per partition, a placement costs 2: a ceiling of 500 writes a second) as fast as
their writers can, on virtual time, retrying throttled writes with shardex's
``RetryPolicy`` (``shardex.scenarios.hotkey``). Each client stands for a process of a
fleet, with an ``AdaptiveGate`` of its own. The same seeded run is made twice, plain
and adaptive; the wasted (throttled) requests, the accepted writes a second and the
writes that failed after their retries are compared. Every figure is from this run.
"""

from __future__ import annotations

import argparse
import time

from shardex.admission import AdaptiveRate
from shardex.scenarios.hotkey import FleetRun, run_fleet
from shardex.sim.clock import run_virtual
from shardex.stores.memory import MemoryStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a shorter run, for a smoke test")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--workers", type=int, default=8, help="concurrent writers per client")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    duration = 10.0 if args.quick else 60.0
    print(f"{args.clients} clients x {args.workers} writers on one hot key of memory://, "
          f"{duration:g} virtual s, ceiling 500 writes/s (1,000 units/s, 2 units a write)")
    print(f"  {'run':10} {'requests':>9} {'throttled':>9} {'wasted':>7} {'accepted/s':>10} "
          f"{'failed':>7} {'wall':>6}")
    runs: dict[str, FleetRun] = {}
    for label, adaptive in (("plain", None), ("adaptive", AdaptiveRate())):
        started = time.perf_counter()
        run = runs[label] = run_virtual(run_fleet(
            MemoryStore(seed=args.seed), adaptive=adaptive, clients=args.clients,
            workers=args.workers, duration=duration, seed=args.seed))
        wall = time.perf_counter() - started
        print(f"  {label:10} {run.sent:9,} {run.throttled:9,} {100 * run.wasted:6.1f}% "
              f"{run.accepted_per_s:10,.0f} {run.failed:7,} {wall:5.1f}s")
    paced = [rate for rate in runs["adaptive"].rates if rate is not None]
    print(f"  adaptive clients' rates at the end: {sum(paced):,.0f} writes/s in all "
          f"({len(paced)} of {args.clients} paced)")
    plain, adaptive_run = runs["plain"], runs["adaptive"]
    print("  throttled requests adaptive/plain: "
          f"{adaptive_run.throttled / max(1, plain.throttled):.3f}")
    print("  accepted writes/s adaptive/plain: "
          f"{adaptive_run.accepted_per_s / plain.accepted_per_s:.2f}")


if __name__ == "__main__":
    main()
