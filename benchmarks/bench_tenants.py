"""Tenants benchmark: one tenant's 20x burst against its partition's neighbours, three ways.

Run: .venv/bin/python benchmarks/bench_tenants.py [--quick] [--seed N]

200 tenants write their events to one ``memory://`` store of 20 partitions (150 write
units a second each, a placement costs 2), so about ten tenants share each partition.
One tenant bursts from 5 to 100 writes a second for a minute (``--quick``: 15 s). The
same seeded schedule runs with no protection (``none``), with an admission budget for
every tenant (``admission``), and with the heavy tenant isolated on a dedicated tier
plus the budgets for the rest (``isolation``): ``shardex.scenarios.tenants``. The
neighbours are the tenants whose key shares the heavy tenant's partition. Ratios are
against ``none`` in the same run; the target is a neighbours' throttled share under 1%
with isolation.
"""

from __future__ import annotations

import argparse
import time

from shardex.scenarios.tenants import MODES, TenantsLoad, run_tenants
from shardex.sim.clock import run_virtual


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a shorter burst, for a smoke test")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    load = TenantsLoad(burst_s=15.0 if args.quick else 60.0)
    print(f"{load.tenants} tenants on {load.partitions} partitions of {load.write_ceiling:g} "
          f"write units/s; {load.heavy_tenant} bursts {load.heavy_per_s:g} -> "
          f"{load.heavy_per_s * load.burst_factor:g} writes/s for {load.burst_s:g} virtual s")
    print(f"  {'mode':10} {'nbr p99 ms':>10} {'nbr thr':>8} {'heavy off/s':>11} "
          f"{'heavy acc/s':>11} {'refused':>8} {'throttled':>9} {'failed':>7} {'wall s':>6}")
    summaries = {}
    for mode in MODES:
        started = time.perf_counter()
        run = run_virtual(run_tenants(load, mode, seed=args.seed)).summary()
        summaries[mode] = run
        print(f"  {mode:10} {run['neighbour_write_p99_ms']:>10.1f} "
              f"{100 * run['neighbour_throttled_ratio']:>7.2f}% "
              f"{run['heavy_offered_per_s']:>11.1f} {run['heavy_accepted_per_s']:>11.1f} "
              f"{run['admission_rejected']:>8,} {run['throttled_requests']:>9,} "
              f"{run['failed_writes']:>7,} {time.perf_counter() - started:>6.1f}")
    base = summaries["none"]
    for mode in ("admission", "isolation"):
        run = summaries[mode]
        throttled = run["throttled_requests"] / max(1, base["throttled_requests"])
        print(f"  {mode}/none: neighbours' p99 "
              f"{run['neighbour_write_p99_ms'] / base['neighbour_write_p99_ms']:.3f}, "
              f"throttled requests {throttled:.3f}, "
              f"heavy accepted {run['heavy_accepted_per_s'] / base['heavy_accepted_per_s']:.2f}")
    share = summaries["isolation"]["neighbour_throttled_ratio"]
    print(f"  isolation: neighbours' throttled share {100 * share:.2f}% "
          f"({'under' if share < 0.01 else 'NOT under'} the 1% target)")


if __name__ == "__main__":
    main()
