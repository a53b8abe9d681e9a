"""The plot of a live reshard (needs the ``plot`` extra: matplotlib).

Top: accepted write units a second per shard key, the old keys drawn bold, against the
partition ceiling, with the reshard's states marked. Bottom: the write units the mover
spent a second on the keys it drained (left axis), and throttled write requests a
second over all keys (right axis).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from shardex.keys import parse_shard_key
from shardex.plotting import pyplot
from shardex.scenarios.resharding import ReshardDemo

__all__ = ["plot_reshard"]


def _steps(series: Mapping[int, float], end: int) -> tuple[list[int], list[float]]:
    seconds = list(range(end + 1))
    return seconds, [series.get(s, 0.0) for s in seconds]


def plot_reshard(demo: ReshardDemo, path: str | Path) -> Path:
    """Draw the write rates, throttles and mover of ``demo`` to ``path`` (PNG)."""
    plt = pyplot()
    run = demo.result
    end = int(run.duration) + 1
    fig, (rates, below) = plt.subplots(2, 1, figsize=(11, 7.5), sharex=True,
                                       gridspec_kw={"height_ratios": [3, 2]})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    groups: dict[str, list[str]] = {}
    for key in sorted(run.timeline):
        groups.setdefault(parse_shard_key(key)[0], []).append(key)
    for (value, keys), color in zip(sorted(groups.items()), colors, strict=False):
        new = [k for k in keys if parse_shard_key(k)[1] is not None]
        old = [k for k in keys if parse_shard_key(k)[1] is None]
        for i, key in enumerate(new):
            rates.step(*_steps(run.timeline[key], end), where="post", color=color, lw=0.8,
                       alpha=0.6, label=None if i else f"{value}#k ({len(new)} new keys)")
        for key in old:
            rates.step(*_steps(run.timeline[key], end), where="post", color=color, lw=2.2,
                       label=f"{value} (old key)")
    rates.axhline(demo.ceiling, color="red", ls="--", lw=1,
                  label=f"partition ceiling ({demo.ceiling:g})")
    for ax in (rates, below):
        ax.axvspan(demo.started, demo.finished, color="grey", alpha=0.08)
        for _, _, at in demo.states:
            ax.axvline(at, color="grey", ls=":", lw=0.9)
    marks: list[list[tuple[float, str]]] = []
    for state, _, at in demo.states:  # states entered within a second share one label
        if marks and at - marks[-1][0][0] < 1.0:
            marks[-1].append((at, state))
        else:
            marks.append([(at, state)])
    for entered in marks:
        rates.text(entered[0][0], 1.01, ", ".join(state for _, state in entered),
                   transform=rates.get_xaxis_transform(), rotation=35, fontsize=7,
                   ha="left", va="bottom")
    rates.set_ylabel("accepted write units/s")
    rates.set_ylim(bottom=0)
    rates.legend(loc="upper right", fontsize=7)
    rates.grid(alpha=0.3)
    rates.set_title("orders_by_status resharded live: write units/s per shard key",
                    pad=38)
    for key, seconds in sorted(demo.mover_units.items()):
        below.step(*_steps(seconds, end), where="post", lw=1.6,
                   label=f"mover's write units/s draining {key}")
    below.axhline(demo.mover_rate, color="tab:green", ls="--", lw=1,
                  label=f"mover's rate on one key ({demo.mover_rate:g})")
    below.axhline(demo.ceiling, color="red", ls="--", lw=1, label="partition ceiling")
    below.set_ylabel("mover: write units/s")
    below.set_xlabel("virtual seconds (shaded: the reshard)")
    below.set_ylim(0, demo.ceiling * 1.15)
    below.grid(alpha=0.3)
    throttled: dict[int, float] = {}
    for counts in run.throttle_timeline.values():
        for second, n in counts.items():
            throttled[second] = throttled.get(second, 0) + n
    right = below.twinx()
    right.step(*_steps(throttled, end), where="post", color="tab:red", lw=1, alpha=0.7,
               label="throttled write requests/s, all keys (right)")
    right.set_ylabel("throttled requests/s", color="tab:red")
    right.set_ylim(bottom=0)
    lines = below.get_legend_handles_labels()
    more = right.get_legend_handles_labels()
    below.legend(lines[0] + more[0], lines[1] + more[1], loc="upper right", fontsize=7)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
