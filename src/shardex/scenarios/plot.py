"""Plots of scenario runs (needs the ``plot`` extra: matplotlib)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from shardex.errors import MissingDependency
from shardex.scenarios.orders import RunResult

__all__ = ["plot_write_rates"]


def plot_write_rates(runs: Sequence[RunResult], path: str | Path, *,
                     ceiling: float = 1000.0) -> Path:
    """Draw accepted write units a second per shard key over time, one panel per run."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise MissingDependency("matplotlib", "plot") from exc
    fig, axes = plt.subplots(len(runs), 1, figsize=(10, 3.6 * len(runs)), sharex=True,
                             squeeze=False)
    for ax, run in zip(axes[:, 0], runs, strict=True):
        for key in sorted(run.timeline, key=lambda k: -sum(run.timeline[k].values())):
            series = run.timeline[key]
            seconds = sorted(series)
            hot = key.split("#")[0] in ("PENDING", "SHIPPED")
            ax.plot(seconds, [series[s] for s in seconds], lw=1.4 if hot else 0.8,
                    alpha=0.9 if hot else 0.6,
                    label=key if len(run.timeline) <= 8 or not key.count("#") else None)
        ax.axhline(ceiling, color="red", ls="--", lw=1, label=f"partition ceiling ({ceiling:g})")
        ax.set_title(f"{run.layout}: accepted write units/s per shard key")
        ax.set_ylabel("write units/s")
        ax.legend(loc="upper right", fontsize=7, ncol=2)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("virtual seconds")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
