"""The text of ``shardex plan`` below its table: the lines that explain a value's N or
its fan-out, the table-level check, the partitions, the verdict and a verification."""

from __future__ import annotations

import math
from typing import Any

from shardex.commands.output import escape
from shardex.wording import counted

__all__ = ["budget_unit", "pool_lines", "print_verdict", "print_verified", "read_lines",
           "table_lines"]


def pool_lines(result: Any, latency: Any, source: str) -> list[str]:
    """A line for each value whose shard keys are more than the client sends at once,
    where that makes its first page's median a tenth slower or more."""
    lines = []
    for value, p in result.values.items():
        if p.fanout_pool is None:
            continue
        at_once = [1000.0 * latency.fanout_quantile(p.shards, q) for q in (0.5, 0.99)]
        if p.fanout_p50_ms < 1.1 * at_once[0]:
            continue
        lines.append(
            f"fan-out: {escape(value)}'s {p.shards:,} shard keys are read "
            f"{p.fanout_pool:,} at a time ({source}): a first page waits "
            f"{p.fanout_p50_ms:.1f}/{p.fanout_p99_ms:.1f} ms (p50/p99), where "
            f"{p.shards:,} at once would take {at_once[0]:.1f}/{at_once[1]:.1f}; "
            f"max_connections={p.shards} reads them at once (docs/reads.md)")
    return lines


def read_lines(result: Any) -> list[str]:
    """A line for each value whose N its measured reads set (above what its writes need)."""
    from shardex.plan import shards_for

    bound = result.ceiling
    lines = []
    for value, p in result.values.items():
        if p.read_shards is None or p.read_units_per_s is None:
            continue
        writes = shards_for(p.peak, ceiling=bound.write_units, units=p.units_per_item,
                            amplification=result.amplification, headroom=result.headroom)
        if p.read_shards <= writes:
            continue
        line = (f"{escape(value)}: N={p.shards} set by its reads ({p.read_units_per_s:,.0f} "
                f"read units/s x {result.headroom:g} headroom over "
                f"{bound.read_units:,.0f} a partition)")
        if p.shards > p.read_shards:
            line += (f": {p.read_shards} by that rule, {p.shards} where its shard keys "
                     "share partitions")
        lines.append(line + f"; its writes alone need {writes}")
    return lines


def _accounts(table: Any) -> int:
    needed: float = max(table.required_units_per_s / table.limit_write_units_per_s,
                        table.required_read_units_per_s / table.limit_read_units_per_s)
    return max(1, math.ceil(round(needed, 9)))


def budget_unit(result: Any) -> str:
    """What one budget of reads and writes counts: Azure Table Storage's entities, Cosmos
    DB's request units."""
    return "entities" if result.mode == "azure" else "RU"


def _load_line(result: Any, table: Any) -> str:
    """The table line: every unit the layout asks of the table, and what it serves."""
    if table.shared:
        # one budget for reads and writes: no read figure of its own
        asked = table.write_units_per_s + table.asked_read_units_per_s
        return (f"[bold]table[/]: {table.write_units_per_s:,.0f} {budget_unit(result)}/s of "
                f"writes (entries {table.entry_units_per_s:,.0f} + placements "
                f"{table.placement_units_per_s:,.0f} for {table.item_writes_per_s:,.0f} item "
                f"writes/s) and {table.asked_read_units_per_s:,.0f} of reads (the values' "
                f"{table.entry_read_units_per_s:,.0f}, locates {table.read_units_per_s:,.0f})"
                f" on one budget: {asked:,.0f} in all, {table.required_units_per_s:,.0f} with "
                f"the headroom; {table.profile} serves {table.limit_write_units_per_s:,.0f} "
                f"at once ({table.limited_by})")
    if result.mode == "gsi":
        # the GSI takes the entries and the table the placement records, each under a limit
        # of its own: their sum is no figure either limit meets
        load = (f"entries {table.entry_units_per_s:,.0f} write units/s on the GSI, placements "
                f"{table.placement_units_per_s:,.0f} on the table (for "
                f"{table.item_writes_per_s:,.0f} item writes/s), each against its own limit: "
                f"the busier {table.required_units_per_s:,.0f} with the headroom; "
                f"{table.profile} serves {table.limit_write_units_per_s:,.0f} at once each")
    else:
        load = (f"{table.write_units_per_s:,.0f} write units/s (entries "
                f"{table.entry_units_per_s:,.0f} + placements "
                f"{table.placement_units_per_s:,.0f} for {table.item_writes_per_s:,.0f} item "
                f"writes/s), {table.required_units_per_s:,.0f} with the headroom; "
                f"{table.profile} serves {table.limit_write_units_per_s:,.0f} at once")
    reads = f"{table.read_units_per_s:,.0f} read units/s locate the items"
    if table.entry_read_units_per_s:
        where = " on the GSI" if table.gsi else ""
        reads = (f"the values read {table.entry_read_units_per_s:,.0f} units/s{where} and "
                 f"{reads}, {table.required_read_units_per_s:,.0f} with the headroom"
                 + (" (the busier)" if table.gsi else ""))
    return (f"[bold]table[/]: {load} ({table.limited_by}); {reads} (of "
            f"{table.limit_read_units_per_s:,.0f})")


def table_lines(result: Any) -> list[str]:
    """The table-level check in words: every write the layout makes, and which limit binds."""
    table = result.table
    if table is None:
        return []
    sharded = [escape(v) for v, p in result.values.items() if p.sharded]
    lines = [_load_line(result, table)]
    # name each limit that binds with the setting that raises it, and a value past it
    fixes = []
    for binds, setting, why, needed, quota in (
            (table.write_binds, table.setting, table.limited_by, table.required_units_per_s,
             table.quota_write_units_per_s),
            (table.read_binds, table.read_setting, table.read_limited_by,
             table.required_read_units_per_s, table.quota_read_units_per_s)):
        if not binds:
            continue
        fix = f"raise {setting} ({why}) to at least {math.ceil(round(needed, 6)):,}"
        if needed > quota and not setting.startswith("quota_"):
            fix += (f", past the per-table quota of {quota:,.0f}: request a quota increase "
                    "too")
        fixes.append(fix)
    fix = "; ".join(fixes)
    if result.mode == "azure":
        # a storage account's scalability target is fixed: no setting raises it
        fix = (f"a storage account serves about {table.limit_write_units_per_s:,.0f} entities "
               f"a second; spread the index over {_accounts(table):,} accounts or lower the load")
    binds = {
        "partition": f"[bold]binds[/]: the partition ceiling ({', '.join(sharded)} sharded), "
                     "not the table's limit",
        "table": f"[bold red]binds[/]: the table, not a partition: no N helps; {fix}",
        "both": f"[bold red]binds[/]: both: the partition ceiling ({', '.join(sharded)} "
                f"sharded) and the table; {fix}",
        "none": "[bold]binds[/]: neither: every value fits one partition, and the table's "
                "limit takes the load",
    }
    return [*lines, binds[table.binds]]


def print_verdict(console: Any, result: Any) -> None:
    """The partitions, the verdict, its reasons and the assumptions it rests on."""
    for part in result.partitions:
        b = part.busiest
        what = "GSI" if part.resource == "index" else "table"
        count = (counted(part.partitions, "partition") if part.partitions else
                 "every partition key its own partition")
        reads = part.direction == "read"
        shared = result.profile.shared_units  # the writes' partitions take the reads too
        line = (f"[bold]partitions[/]: the {what} has {count}, {part.ceiling:,.0f} "
                + (f"{budget_unit(result)}/s each, reads and writes alike" if shared else
                   f"{part.direction} units/s each"))
        if part.partitions:
            line += (f"; {counted(b.keys, 'shard key')} "
                     f"{'hashes' if b.keys == 1 else 'hash'} onto "
                     f"{'it' if part.partitions == 1 else 'them'} (all apart in "
                     f"{100 * b.collision_free:.0f}% of the placements drawn), each "
                     f"partition takes {part.spread:,.0f} of "
                     f"{'locates' if reads else 'placement records'}"
                     f"{' and locates' if shared and part.spread else ''}; the busiest takes "
                     f"{b.expected:,.0f} {'read units ' if reads else ''}expected, "
                     f"{b.worst:,.0f} at the p99")
            if b.worst_keys:  # else it takes its share of the spread load alone
                line += f" ({escape(b.named)})"
        else:
            line += f"; the busiest shard key takes {b.worst:,.0f}"
        console.print(line, highlight=False)
    verdict = result.verdict
    if verdict is None:
        return
    style = "green" if verdict.keeps_up else "red"
    console.print(f"[bold {style}]plan[/]: {escape(verdict.summary)}", highlight=False)
    for reason in (*verdict.reasons[1:], *verdict.notes):
        console.print(f"  - {escape(reason)}", highlight=False)
    if verdict.assumptions:
        console.print("  assumed (set with --table NAME=VALUE): "
                      + "; ".join(escape(a) for a in verdict.assumptions), highlight=False)


def print_verified(console: Any, verified: dict[str, Any]) -> None:
    ok = verified["verdict"]["ok"]
    console.print(
        f"[bold]verify[/] (simulate, {verified['duration_s']:,} virtual s on "
        f"{verified['profile']['name']}, the p99 placement of the shard keys (index name "
        f"{escape(verified['namespace'])!r}), each value at its peak): "
        + ", ".join(f"{escape(value)} {100 * v['accepted_ratio']:.1f}% accepted"
                    for value, v in verified["values"].items()), highlight=False)
    for line in verified["watched"]:
        console.print(f"  - {escape(line)}", highlight=False)
    console.print(f"[bold {'green' if ok else 'red'}]verdict[/]: "
                  f"{escape(verified['verdict']['summary'])}", highlight=False)
    agree = verified["agrees"]
    console.print(f"[bold {'green' if agree else 'red'}]plan and simulation "
                  f"{'agree' if agree else 'disagree'}[/]", highlight=False)
