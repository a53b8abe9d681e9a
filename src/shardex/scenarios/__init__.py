"""Workload generators and scenario runs that drive an index on the simulated store."""

from __future__ import annotations

from shardex.scenarios.demo_runs import run_demo
from shardex.scenarios.orders import OrdersLoad, RunResult, run_orders

__all__ = ["OrdersLoad", "RunResult", "run_demo", "run_orders"]
