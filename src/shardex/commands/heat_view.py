"""How a diagnosis reads on a console: its summary, the key table, and the recommendation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console, Group, RenderableType
from rich.text import Text

from shardex.commands import output
from shardex.commands.output import escape
from shardex.documents import rounded
from shardex.wording import counted

if TYPE_CHECKING:
    from shardex.heat.profile import KeyHeat
    from shardex.heat.report import Diagnosis

__all__ = ["figure", "frame", "print_report"]

_COLUMNS = [output.Column("key", "left"), *(output.Column(name) for name in (
    "share", "peak u/s", "sustained u/s", "peak/ceiling", "throttles", "N"))]


def figure(value: float) -> str:
    """``value`` as the report prints it: rounded as the JSON rounds it (``rounded``), a
    large one whole with thousands separators, a small one with its decimals (4.5, 0.5),
    so that the text never hides a figure the JSON shows."""
    shown = rounded(float(value))
    if shown is None:
        return str(value)
    return f"{shown:,.0f}" if abs(shown) >= _WHOLE_FROM else f"{shown:.3g}"


# from here on a figure's fraction is noise beside it
_WHOLE_FROM = 100


def _summary(result: Diagnosis) -> str:
    profile = result.profile
    bound = profile.ceiling
    kinds = ", ".join(profile.time_kinds) or "none read"
    keys = f"{profile.distinct_keys:,}{'' if profile.distinct_exact else '+'}"
    text = (f"[bold]{counted(profile.rows, 'row')}[/], "
            f"{counted(profile.distinct_keys, 'key', shown=keys)}, {profile.seconds:,} s, "
            f"{counted(profile.total_units, 'unit', shown=figure(profile.total_units))}, "
            f"{profile.throttles:,} throttled; ceiling "
            f"{escape(bound.name)}: {bound.write_units:g} write / {bound.read_units:g} read "
            f"units/s; timestamps: {kinds}")
    if profile.skipped_rows:
        text += (f"; [yellow]{profile.skipped_rows:,} malformed rows skipped[/] ("
                 + ", ".join(f"{c}: {n}" for c, n in sorted(profile.skipped_by_column.items()))
                 + ")")
    return text


def _row(result: Diagnosis, heat: KeyHeat, *, part: bool = False) -> list[str]:
    ratio = heat.peak_to_ceiling
    if part:
        n = ""
    else:
        need = result.recommendation.shards.get(heat.key)
        n = f"{heat.shards} \u2192 [bold]{need}[/]" if need else str(heat.shards)
    return [("  \u2514 " if part else "") + escape(heat.key),
            f"{100 * result.profile.share(heat):.1f}%", figure(heat.peak_units_per_s),
            f"{heat.sustained_units_per_s:,.1f}",
            f"[red]{ratio:.2f}[/]" if ratio > 1 else f"{ratio:.2f}", f"{heat.throttles:,}", n]


def _table(console: Console, result: Diagnosis) -> RenderableType:
    rows = []
    for heat in result.keys:
        rows.append(_row(result, heat))
        if heat.parts != () and [p.key for p in heat.parts] != [heat.key]:
            rows.extend(_row(result, part, part=True) for part in heat.parts)
    return output.table(console, _COLUMNS, rows)


def frame(console: Console, result: Diagnosis, heading: str) -> RenderableType:
    """One refresh of the live view: a heading, the summary and the key table."""
    return Group(Text(heading, style="bold"), Text.from_markup(_summary(result)),
                 _table(console, result))


def print_report(console: Console, result: Diagnosis) -> None:
    """Print the whole report: summary, notes, key table, classification, recommendation."""
    console.print(_summary(result), highlight=False)
    for note in result.profile.notes:
        console.print(f"note: {note}", markup=False, highlight=False)
    console.print(_table(console, result))
    evidence = rounded(result.classification.evidence)
    shown = {k: v for k, v in evidence.items() if k not in ("hot_key_sequence",)}
    console.print(f"[bold]classification[/]: {result.classification.kind}  "
                  + escape(", ".join(f"{k}={v}" for k, v in shown.items())), highlight=False)
    if "hot_key_sequence" in evidence:
        console.print("  hot key over time: " + " -> ".join(evidence["hot_key_sequence"]),
                      markup=False, highlight=False)
    rec = result.recommendation
    console.print(f"[bold]recommendation[/]: {rec.strategy}", highlight=False)
    for change in rec.changes:
        console.print(f"  {change}" + ("  (throttled below the ceiling)"
                                       if change.reason == "throttles" else ""),
                      markup=False, highlight=False)
    console.print(f"  {rec.why}", markup=False, highlight=False)
