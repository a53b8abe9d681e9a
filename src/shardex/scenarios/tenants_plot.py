"""The tenants scenario drawn: per mode, accepted writes and the neighbours' throttles."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from shardex.plotting import pyplot
from shardex.scenarios.tenants import TenantsRun

__all__ = ["plot_tenants"]


def plot_tenants(runs: Sequence[TenantsRun], path: str | Path) -> Path:
    """One panel per mode: the heavy tenant's and the neighbours' accepted writes a
    second, and the neighbours' throttled requests a second, over virtual time."""
    plt = pyplot()
    fig, axes = plt.subplots(len(runs), 1, figsize=(10, 3.2 * len(runs)), sharex=True,
                             squeeze=False)
    top = max((max(series.values(), default=0) for run in runs for series in (
        run.heavy_timeline, run.neighbour_timeline, run.throttle_timeline)), default=0)
    for ax, run in zip(axes[:, 0], runs, strict=True):
        seconds = list(range(int(run.load.duration) + 1))
        for series, label, color, style in (
                (run.heavy_timeline, f"{run.load.heavy_tenant} accepted", "tab:blue", "-"),
                (run.neighbour_timeline, f"its {len(run.neighbours)} neighbours accepted",
                 "tab:green", "-"),
                (run.throttle_timeline, "neighbours' throttled requests", "tab:red", "--")):
            ax.plot(seconds, [series.get(s, 0) for s in seconds], color=color, ls=style,
                    drawstyle="steps-post", lw=1.3, label=label)
        ax.axvspan(run.load.warmup_s, run.load.warmup_s + run.load.burst_s, color="0.9",
                   label="burst")
        summary = run.summary()
        ax.set_title(f"{run.mode}: neighbours' throttled share "
                     f"{100 * summary['neighbour_throttled_ratio']:.1f}%, write p99 "
                     f"{summary['neighbour_write_p99_ms']:.0f} ms")
        ax.set_ylabel("per second")
        ax.set_ylim(0, 1.15 * top + 1)
        ax.legend(loc="upper right", fontsize=8)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("virtual seconds")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
