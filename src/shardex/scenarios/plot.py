"""Plots of scenario runs (needs the ``plot`` extra: matplotlib)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

from shardex.keys import parse_shard_key
from shardex.plotting import pyplot
from shardex.scenarios.orders import RunResult
from shardex.scenarios.simulate import Simulation

__all__ = ["plot_simulation", "plot_write_rates"]


def plot_write_rates(runs: Sequence[RunResult], path: str | Path, *,
                     ceiling: float = 1000.0) -> Path:
    """Draw accepted write units a second per shard key over time, one panel per run."""
    plt = pyplot()
    fig, axes = plt.subplots(len(runs), 1, figsize=(10, 3.6 * len(runs)), sharex=True,
                             squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, run in zip(axes[:, 0], runs, strict=True):
        groups: dict[str, list[str]] = {}
        for key in sorted(run.timeline):
            groups.setdefault(parse_shard_key(key)[0], []).append(key)
        for (value, keys), color in zip(sorted(groups.items()), colors, strict=False):
            for i, key in enumerate(keys):
                series = run.timeline[key]
                seconds = [s for s in range(int(run.duration)) if s in series]
                rates = [series[s] for s in seconds]
                if seconds:  # a step plot needs the last second's right edge too
                    seconds.append(seconds[-1] + 1)
                    rates.append(rates[-1])
                ax.plot(seconds, rates, color=color,
                        drawstyle="steps-post", lw=1.2, alpha=0.8,
                        label=None if i else f"{value} ({len(keys)} shard key"
                                             f"{'s' if len(keys) > 1 else ''})")
        ax.axhline(ceiling, color="red", ls="--", lw=1, label=f"partition ceiling ({ceiling:g})")
        ax.set_title(f"{run.layout}: accepted write units/s per shard key")
        ax.set_ylabel("write units/s")
        ax.set_ylim(bottom=0)
        ax.legend(loc="upper right", fontsize=8)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("virtual seconds")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def plot_simulation(result: Simulation, path: str | Path) -> Path:
    """Draw a simulated run: offered and accepted writes a second per value, and each
    table's units used against its limit."""
    plt = pyplot()
    tables = [t for t in result.tables if max(t.asked, default=0.0) > 0]
    fig, axes = plt.subplots(2, 1, figsize=(10, 7.5), sharex=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    seconds = list(range(result.duration))
    top, bottom = axes
    for (value, (offered, accepted)), color in zip(result.timeline.items(), colors,
                                                   strict=False):
        top.plot(seconds, offered, color=color, ls=":", lw=1.2,
                 label=f"{value} offered (N={result.shards(value)})")
        top.plot(seconds, accepted, color=color, lw=1.4, label=f"{value} accepted")
    top.set_title("entry writes a second, per logical key")
    top.set_ylabel("writes/s")
    top.set_ylim(bottom=0)
    top.legend(loc="upper right", fontsize=8, ncol=2)
    top.grid(alpha=0.3)
    for table, color in zip(tables, colors, strict=False):
        name = f"{table.resource} {'writes' if table.write else 'reads'}"
        bottom.plot(seconds, table.asked, color=color, ls=":", lw=1.2, label=f"{name} asked")
        bottom.plot(seconds, table.used, color=color, lw=1.4, label=f"{name} used")
        bottom.plot(seconds, table.limit, color=color, ls="--", lw=1, label=f"{name} limit")
    bottom.set_title(f"table-level units a second ({result.profile.name})")
    bottom.set_ylabel("units/s")
    bottom.set_xlabel("virtual seconds")
    bottom.set_ylim(bottom=0)
    bottom.legend(loc="upper right", fontsize=8, ncol=3)
    bottom.grid(alpha=0.3)
    fig.suptitle("\n".join(textwrap.wrap(result.verdict(), 130)), fontsize=9)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
