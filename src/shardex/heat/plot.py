"""The heat map of a diagnosis: the top keys' busiest second over time (``plot`` extra)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from shardex.errors import InvalidInput
from shardex.heat.report import Diagnosis
from shardex.plotting import pyplot

__all__ = ["plot_heatmap"]


def plot_heatmap(diagnosis: Diagnosis, path: str | Path) -> Path:
    """Draw the top keys (rows) over time (columns) as a heat map of units/s; return ``path``.

    A cell is the key's busiest second in that time bin, coloured against one
    partition's write ceiling (the ceiling is the middle of the scale: red is over it).
    Needs a diagnosis made with ``timeline_bins`` > 0; raises MissingDependency
    without matplotlib, InvalidInput without a timeline.
    """
    timeline = diagnosis.timeline
    if timeline is None:
        raise InvalidInput("this diagnosis has no timeline: diagnose with timeline_bins > 0")
    plt = pyplot()
    from matplotlib.colors import TwoSlopeNorm
    ceiling = diagnosis.profile.ceiling.write_units
    rows = timeline.rows or [[0.0]]
    peak = max([ceiling * 2, *(v for row in rows for v in row)])
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.42 * max(1, len(timeline.keys))))
    width = max(1, len(rows[0]))
    image = ax.imshow(rows, aspect="auto", interpolation="nearest", cmap="RdYlBu_r",
                      norm=TwoSlopeNorm(vmin=0.0, vcenter=ceiling, vmax=peak),
                      extent=(0, width * timeline.bin_seconds, len(rows), 0))
    ax.set_yticks([i + 0.5 for i in range(len(timeline.keys))], labels=timeline.keys,
                  fontsize=8)
    start = datetime.fromtimestamp(timeline.start, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    ax.set_xlabel(f"seconds since {start} (bins of {timeline.bin_seconds} s)")
    res = diagnosis.profile.resolution
    busiest = "busiest second" if res == 1 else f"busiest {res} s period (its mean)"
    ax.set_title(f"{diagnosis.classification.kind}: {busiest} per bin, units/s "
                 f"(ceiling {ceiling:g}, {diagnosis.profile.ceiling.name})")
    fig.colorbar(image, ax=ax, label="units/s")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
