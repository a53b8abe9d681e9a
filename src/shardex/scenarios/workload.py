"""Workloads for ``shardex simulate``: values with their rates over time, from TOML or diagnose.

A workload file (TOML, read with the standard library's ``tomllib``)::

    duration = 3600                  # seconds simulated

    [table]                          # the capacity model: a profile and its settings
    profile = "dynamodb-on-demand"   # or dynamodb-provisioned, dynamodb-gsi, azure-tables
    warm_write = 50000               # any setting of shardex.sim.profiles.Profile

    [values.PENDING]
    write = 5000                     # entries written a second (new items); or steps:
                                     # [[0, 1000], [600, 5000]] = 1,000 from 0 s, 5,000 from 600 s
    delete = 0                       # entries deleted a second
    read = 10                        # fan-out page reads a second
    page = 100                       # entries a page read asks for
    item_bytes = 1024                # an entry's bytes as written
    read_item_bytes = 1024           # ... and as read (its projection)
    sort = "rising"                  # the sort values of its writes: rising or spread
    bursts = [{at = 600, seconds = 10, write = 20000}]   # extra load for a while

    [[moves]]                        # items moving from one value to another
    from = "PENDING"
    to = "SHIPPED"
    rate = 2000                      # a second; a number or steps, like write

A ``shardex.diagnose/1`` document is a workload too: each of its top logical keys
offers its measured units a second on its shard keys for the sample's seconds, without
placements (the log measured what was written): its writes as write units against the
write ceiling (``peak_write_units_per_s``) and its reads as read units against the read
ceiling (``peak_read_units_per_s``), each at its own peak; ``--rate sustained`` splits
``sustained_units_per_s`` in the peaks' proportion. A row without that split (a diagnosis
written before rows held it) offers ``peak_units_per_s`` (or ``sustained_units_per_s``),
reads and writes together, as write units (the stricter ceiling).
A key that cannot be a logical key (diagnose lists it under
``recommendation.unroutable``: a key of another table or layout) is left out, and
``Workload.notes`` names it (``measured_keys``, which ``plan --from`` reads too).

Every error names the file and the field: InvalidInput.
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shardex.documents import DIAGNOSE_SCHEMA
from shardex.errors import InvalidInput, brief
from shardex.keys import validate_value, value_fault
from shardex.model.values import MAX_ITEM_BYTES
from shardex.routing import MAX_SHARDS
from shardex.sim.profiles import DEFAULT_PROFILE

__all__ = ["Measured", "Move", "Schedule", "ValueLoad", "Workload", "load_workload",
           "measured_keys", "workload_from_dict"]

_VALUE_FIELDS = {"write", "delete", "read", "page", "item_bytes", "read_item_bytes", "sort",
                 "bursts", "write_units", "read_units", "shards"}
_MAX_SECONDS = 7 * 24 * 3600
_MAX_RATE = 1e9


@dataclass(frozen=True, slots=True)
class Schedule:
    """A rate over time: ``steps`` of ``(from second, rate)``, plus ``bursts`` of
    ``(from second, seconds, extra rate)`` added on top while they last."""

    steps: tuple[tuple[float, float], ...] = ((0.0, 0.0),)
    bursts: tuple[tuple[float, float, float], ...] = ()

    def at(self, second: float) -> float:
        """The rate in the second that starts at ``second``."""
        rate = 0.0
        for start, value in self.steps:
            if start > second:
                break
            rate = value
        for start, seconds, extra in self.bursts:
            if start <= second < start + seconds:
                rate += extra
        return rate

    def peak(self) -> float:
        """The highest rate it reaches."""
        points = {start for start, _ in self.steps} | {b[0] for b in self.bursts}
        return max((self.at(point) for point in points), default=0.0)

    @property
    def idle(self) -> bool:
        return self.peak() <= 0.0


@dataclass(frozen=True, slots=True)
class ValueLoad:
    """The load of one logical key: writes, deletes and reads a second, and its entries.

    ``write_units`` (from a diagnose document) replaces ``write``: units a second on its
    shard keys as measured, with no placement records. ``read_units``: read units a second
    as measured, spread over its shard keys against the read ceiling (strongly
    consistent: as diagnose and plan size them), one unit a read. ``shards`` is its N, if
    known.
    """

    value: str
    write: Schedule = field(default_factory=Schedule)
    delete: Schedule = field(default_factory=Schedule)
    read: Schedule = field(default_factory=Schedule)
    page: int = 100
    item_bytes: int = 1024
    read_item_bytes: int = 1024
    rising: bool = True
    write_units: Schedule | None = None
    shards: int | None = None
    read_units: Schedule | None = None


@dataclass(frozen=True, slots=True)
class Move:
    """Items moving from ``source`` to ``target`` at ``rate`` a second (one write each)."""

    source: str
    target: str
    rate: Schedule


@dataclass(frozen=True, slots=True)
class Workload:
    """What ``shardex simulate`` offers the simulated table, second by second.

    ``table`` holds the capacity settings the workload asks for (``profile`` among them);
    the command line may change them. ``origin`` names where it came from; ``notes``
    what a diagnosis held that the workload leaves out, and why. ``item_writes``: items
    written a second, each with one placement record and the locate before it, when they
    are not one an operation (a put, a delete, a move): a plan's ``--item-writes``, spread
    over the operations; None, one an operation.
    """

    duration: int
    values: Mapping[str, ValueLoad]
    moves: tuple[Move, ...] = ()
    table: Mapping[str, Any] = field(default_factory=dict)
    origin: str = "workload"
    notes: tuple[str, ...] = ()
    item_writes: Schedule | None = None

    @property
    def profile(self) -> str:
        name = self.table.get("profile", DEFAULT_PROFILE)
        return str(name)

    def unrun(self) -> list[str]:
        """Notes naming the bursts and steps that start at or past ``duration`` (a run of
        it never reaches them: a slip in the file, or a ``--duration`` that cut it)."""
        schedules = [(f"{load.value}'s {name}", getattr(load, name))
                     for load in self.values.values()
                     for name in ("write", "delete", "read", "write_units", "read_units")]
        schedules += [(f"the move {move.source} -> {move.target}", move.rate)
                      for move in self.moves]
        notes = []
        for what, schedule in schedules:
            if schedule is None:
                continue
            late = [f"a burst at {start:g} s" for start, _, _ in schedule.bursts
                    if start >= self.duration]
            late += [f"a step at {start:g} s" for start, _ in schedule.steps
                     if start >= self.duration]
            if late:
                notes.append(f"{what}: {', '.join(late)} past the run's {self.duration:,} s "
                             f"(not run)")
        return notes


def _fail(where: str, message: str) -> InvalidInput:
    return InvalidInput(f"{where}: {message}")


def _number(where: str, value: Any, *, integer: bool = False, least: float = 0.0,
            most: float = _MAX_RATE) -> float:
    ok = not isinstance(value, bool) and isinstance(value, int if integer else int | float)
    # compared first: an int too big for a float overflows math.isfinite
    if not ok or not least <= value <= most or not math.isfinite(value):
        kind = "an integer" if integer else "a number"
        raise _fail(where, f"must be {kind} from {least:g} to {most:g}, got {brief(value)}")
    return float(value)


def _schedule(where: str, value: Any, bursts: Any = (), name: str = "write") -> Schedule:
    if isinstance(value, list):
        steps = []
        for i, step in enumerate(value):
            if not (isinstance(step, list) and len(step) == 2):
                raise _fail(f"{where}[{i}]", f"must be [second, rate], got {brief(step)}")
            steps.append((_number(f"{where}[{i}] second", step[0]),
                          _number(f"{where}[{i}] rate", step[1])))
        if not steps:
            raise _fail(where, "needs at least one [second, rate] step")
        starts = [start for start, _ in steps]
        if starts != sorted(starts) or len(set(starts)) != len(starts):
            raise _fail(where, "steps must be in order of their seconds, each once")
        plan = tuple(steps)
    else:
        plan = ((0.0, _number(where, value)),)
    extra = []
    for i, burst in enumerate(bursts):
        at = f"{where.rpartition('.')[0]}.bursts[{i}]"
        if not isinstance(burst, Mapping) or set(burst) - {"at", "seconds", "write", "read",
                                                            "delete", "write_units",
                                                            "read_units"}:
            raise _fail(at, "must be a table of at, seconds and a rate (write, read, ...)")
        if name in burst:
            extra.append((_number(f"{at}.at", burst.get("at")),
                          _number(f"{at}.seconds", burst.get("seconds"), least=1e-9),
                          _number(f"{at}.{name}", burst[name])))
    return Schedule(plan, tuple(extra))


def _value(where: str, value: str, doc: Any) -> ValueLoad:
    if not isinstance(doc, Mapping):
        raise _fail(where, f"must be a table, got {brief(doc)}")
    unknown = sorted(set(doc) - _VALUE_FIELDS)
    if unknown:
        raise _fail(where, f"unknown field(s) {', '.join(unknown)}; known: "
                           f"{', '.join(sorted(_VALUE_FIELDS))}")
    try:
        validate_value(value)
    except InvalidInput as exc:
        raise _fail(where, str(exc)) from exc
    bursts = doc.get("bursts", [])
    if not isinstance(bursts, list):
        raise _fail(f"{where}.bursts", "must be a list of tables")
    sort = doc.get("sort", "rising")
    if sort not in ("rising", "spread"):
        raise _fail(f"{where}.sort", f"must be rising or spread, got {brief(sort)}")
    size = int(_number(f"{where}.item_bytes", doc.get("item_bytes", 1024), integer=True,
                       least=1, most=MAX_ITEM_BYTES))
    shards = doc.get("shards")
    return ValueLoad(
        value=value,
        write=_schedule(f"{where}.write", doc.get("write", 0), bursts, "write"),
        delete=_schedule(f"{where}.delete", doc.get("delete", 0), bursts, "delete"),
        read=_schedule(f"{where}.read", doc.get("read", 0), bursts, "read"),
        page=int(_number(f"{where}.page", doc.get("page", 100), integer=True, least=1)),
        item_bytes=size,
        read_item_bytes=int(_number(f"{where}.read_item_bytes",
                                    doc.get("read_item_bytes", size), integer=True, least=1,
                                    most=MAX_ITEM_BYTES)),
        rising=sort == "rising",
        write_units=None if "write_units" not in doc else _schedule(
            f"{where}.write_units", doc["write_units"], bursts, "write_units"),
        shards=None if shards is None else _shards(f"{where}.shards", shards),
        read_units=None if "read_units" not in doc else _schedule(
            f"{where}.read_units", doc["read_units"], bursts, "read_units"))


def _shards(where: str, value: Any) -> int:
    return int(_number(where, value, integer=True, least=1, most=MAX_SHARDS))


def _table(where: str, table: Any) -> dict[str, Any]:
    """The ``[table]`` settings (checked with ``--store``'s over them, where they are used:
    some fit only together, as burst_seconds and initial_burst_seconds)."""
    if not isinstance(table, Mapping):
        raise _fail(where, "must be a table of capacity settings")
    return dict(table)


def workload_from_dict(doc: Any, *, origin: str = "workload") -> Workload:
    """Build a workload from a parsed TOML document (or a ``shardex.diagnose/1`` one)."""
    if isinstance(doc, Mapping) and doc.get("schema") == DIAGNOSE_SCHEMA:
        return _from_diagnosis(doc, origin)
    if not isinstance(doc, Mapping):
        raise _fail(origin, "a workload must be a table")
    unknown = sorted(set(doc) - {"duration", "table", "values", "moves"})
    if unknown:
        raise _fail(origin, f"unknown field(s) {', '.join(unknown)}; known: duration, table, "
                            "values, moves")
    duration = _number(f"{origin}: duration", doc.get("duration", 600), integer=True, least=1,
                       most=_MAX_SECONDS)
    values_doc = doc.get("values")
    if not isinstance(values_doc, Mapping) or not values_doc:
        raise _fail(origin, "needs a [values.NAME] table for at least one value")
    values = {str(name): _value(f"{origin}: values.{name}", str(name), body)
              for name, body in values_doc.items()}
    moves_doc = doc.get("moves", [])
    if not isinstance(moves_doc, list):
        raise _fail(f"{origin}: moves", "must be a list of [[moves]] tables")
    moves = []
    for i, move in enumerate(moves_doc):
        where = f"{origin}: moves[{i}]"
        if not isinstance(move, Mapping) or set(move) != {"from", "to", "rate"}:
            raise _fail(where, "must be a table of from, to and rate")
        for end in ("from", "to"):
            if not isinstance(move[end], str) or move[end] not in values:
                raise _fail(f"{where}.{end}", f"{brief(move[end])} is not one of the values")
        rate = _schedule(f"{where}.rate", move["rate"])
        if move["to"] == move["from"]:  # it would count both ends, and move nothing
            raise _fail(f"{where}.to", f"{brief(move['to'])} is its from: a move goes from one "
                                       "value to another")
        moves.append(Move(move["from"], move["to"], rate))
    table = _table(f"{origin}: table", doc.get("table", {}))
    return Workload(int(duration), values, tuple(moves), table, origin)


@dataclass(frozen=True, slots=True)
class Measured:
    """The keys of a ``shardex.diagnose/1`` document that a plan or a simulation can take.

    ``rows`` are ``(where, row)``: each row an object of the document with a ``key`` that
    is a logical key, ``where`` naming it (``top[2]``); ``notes`` say what was left out,
    and why.
    """

    rows: tuple[tuple[str, Mapping[str, Any]], ...]
    notes: tuple[str, ...] = ()


def _shown(key: str) -> str:
    """A key in a note: as it is, its head when it is long, its repr when it is no
    printable text (a NUL, a lone surrogate)."""
    if not key.isprintable() or key.encode("utf-8", "replace").decode() != key:
        return brief(key)
    return key if len(key) <= 64 else f"{key[:32]}... ({len(key):,} characters)"


def measured_keys(doc: Mapping[str, Any], origin: str, *, verb: str,
                  bad_row: str = "must be an object with a key") -> Measured:
    """The keys of diagnosis ``doc`` (read from ``origin``) that can be ``verb`` (planned,
    simulated): those of ``top`` that are logical keys.

    A key that cannot be a logical key (``recommendation.unroutable`` lists such a key
    when it needs shards: a key of another table or layout) is left out with a note
    naming it, as diagnose itself gives it no routing override. A row that is no object
    with a text key raises InvalidInput naming ``origin`` and the row (``bad_row`` says
    what it needs); so does a document with no key left.
    """
    top = doc.get("top")
    if not isinstance(top, list):
        raise _fail(origin, f"top must be a list of the keys' rows, got {brief(top)}")
    if not top:
        raise _fail(origin, "the diagnosis lists no keys (top is empty)")
    rows: list[tuple[str, Mapping[str, Any]]] = []
    notes: list[str] = []
    first: dict[str, str] = {}  # key -> the row that listed it
    for i, row in enumerate(top):
        where = f"top[{i}]"
        if not isinstance(row, Mapping) or not isinstance(row.get("key"), str):
            raise _fail(f"{origin}: {where}", bad_row)
        if row["key"] in first:  # the later row had won, its figures planned alone
            raise _fail(f"{origin}: {where}", f"lists {_shown(row['key'])} again "
                        f"({first[row['key']]} did): a key is one row")
        first[row["key"]] = where
        _shards(f"{origin}: {where}.shards", row.get("shards", 1))
        fault = value_fault(row["key"])
        if fault is not None:
            notes.append(f"{_shown(row['key'])} is not {verb}: it cannot be a logical key "
                         f"({fault}), so no routing shards it (a key of another table or "
                         "layout is sharded there, by hand)")
            continue
        rows.append((where, row))
    seen = {row["key"] for _, row in rows} | {row["key"] for row in top}
    recommendation = doc.get("recommendation")
    changes = recommendation.get("changes") if isinstance(recommendation, Mapping) else None
    missing: list[str] = []
    for i, change in enumerate(changes if isinstance(changes, list) else []):
        key = change.get("key") if isinstance(change, Mapping) else None
        if not isinstance(key, str) or key in seen:
            continue
        seen.add(key)
        fault = value_fault(key)
        if fault is not None:
            notes.append(f"{_shown(key)} is not {verb}: it cannot be a logical key ({fault}), "
                         "so no routing shards it")
            continue
        if "peak_units_per_s" not in change:  # a diagnosis written before changes held it
            missing.append(key)
            continue
        rows.append((f"recommendation.changes[{i}]", {**change, "shards": change.get("from", 1)}))
    if missing:
        notes.append(f"{', '.join(_shown(k) for k in missing)} need shards by the diagnosis, "
                     f"but it holds no figures of them beyond its top: not {verb} (shardex "
                     "diagnose --top lists more)")
    if not rows:
        raise _fail(origin, f"the diagnosis lists no key that can be {verb}: "
                            + "; ".join(notes))
    return Measured(tuple(rows), (*notes, *_left_out(doc, verb)))


def _left_out(doc: Mapping[str, Any], verb: str) -> list[str]:
    """A note on the load of the keys a diagnosis counted but does not list (in ``top``
    or ``recommendation.changes``): its totals less the units of the keys it lists."""
    totals = doc.get("totals")
    top = doc.get("top")
    if not isinstance(totals, Mapping) or not isinstance(top, list):
        return []
    figures = [x for x in (totals.get(name) for name in ("keys", "units", "seconds"))
               if not isinstance(x, bool) and isinstance(x, int | float)]
    if len(figures) != 3:
        return []
    keys, units, seconds = (float(x) for x in figures)
    listed = {row["key"]: row.get("units") for row in top
              if isinstance(row, Mapping) and isinstance(row.get("key"), str)}
    recommendation = doc.get("recommendation")
    changes = recommendation.get("changes") if isinstance(recommendation, Mapping) else None
    for change in changes if isinstance(changes, list) else []:
        if isinstance(change, Mapping) and isinstance(change.get("key"), str):
            listed.setdefault(change["key"], change.get("units"))
    counted = [u for u in listed.values()
               if not isinstance(u, bool) and isinstance(u, int | float)]
    others = int(keys) - len(listed)
    rest = units - sum(counted)
    if others <= 0 or rest <= 0 or len(counted) < len(listed):
        return []
    lower = "" if totals.get("keys_exact", True) else "+"
    share = rest / units
    mean = rest / seconds if seconds else 0.0
    return [f"{others:,}{lower} {'key' if others == 1 else 'keys'} beyond the diagnosis's top "
            f"are not {verb}: {100 * share:.2f}% of its units ({mean:,.1f} units/s on "
            f"average over its {int(seconds):,} s); none needs shards by the diagnosis, but "
            "their load is not in the table's figures here (shardex diagnose --top lists "
            "more)"]


def _from_diagnosis(doc: Mapping[str, Any], origin: str, *, rate: str = "peak") -> Workload:
    totals = doc.get("totals") or {}
    measured = measured_keys(doc, origin, verb="simulated")
    seconds = totals.get("seconds") if isinstance(totals, Mapping) else None
    duration = int(_number(f"{origin}: totals.seconds", seconds if seconds else 60,
                           integer=True, least=1, most=_MAX_SECONDS))
    values = {}
    uneven: list[str] = []
    for i, row in measured.rows:
        where = f"{origin}: {i}"
        units = _number(f"{where}.{rate}_units_per_s", row.get(f"{rate}_units_per_s"))
        shards = _shards(f"{where}.shards", row.get("shards", 1))
        writes, reads = _split(where, row, units, rate)
        values[row["key"]] = ValueLoad(
            value=row["key"], write_units=Schedule(((0.0, writes),)), shards=shards,
            read_units=None if reads is None else Schedule(((0.0, reads),)))
        uneven += _uneven(doc, row, shards, units)
    return Workload(duration, values, (), {}, origin, (*measured.notes, *uneven))


def _uneven(doc: Mapping[str, Any], row: Mapping[str, Any], shards: int,
            units: float) -> list[str]:
    """A note on a key already sharded whose busiest shard the diagnosis measured well
    above an even share: the simulation spreads its units evenly over its shards, so it
    shows less than the busiest took (it read "ok" for a shard at 150% of a partition)."""
    ceiling = doc.get("ceiling")
    bound = ceiling.get("write_units_per_s") if isinstance(ceiling, Mapping) else None
    ratio = row.get("peak_to_ceiling")
    if shards < 2 or not all(isinstance(x, int | float) and not isinstance(x, bool)
                             for x in (bound, ratio)):
        return []
    assert isinstance(bound, int | float)
    assert isinstance(ratio, int | float)
    busiest = ratio * bound
    if busiest <= 1.1 * units / shards:
        return []
    return [f"{row['key']}: the diagnosis measured its busiest of {shards} shards at "
            f"{busiest:,.0f} units/s ({100 * ratio:.0f}% of a partition), where this simulation "
            f"spreads its {units:,.0f} units/s evenly ({units / shards:,.0f} a shard): it shows "
            "less than that shard took (shardex diagnose --per-shard lists each shard; "
            "shardex plan --from sizes N on the busiest)"]


def _split(where: str, row: Mapping[str, Any], units: float,
           rate: str) -> tuple[float, float | None]:
    """(write units, read units) a second a diagnosis's ``row`` offers at ``rate``: its
    peaks of each (``sustained``: ``units`` in their proportion), or ``units`` all as
    writes and no reads when the row does not split them."""
    if "peak_write_units_per_s" not in row or "peak_read_units_per_s" not in row:
        return units, None
    writes = _number(f"{where}.peak_write_units_per_s", row["peak_write_units_per_s"])
    reads = _number(f"{where}.peak_read_units_per_s", row["peak_read_units_per_s"])
    if rate == "peak":
        return writes, reads
    both = writes + reads
    if not both:
        return units, 0.0
    return units * writes / both, units * reads / both


def load_workload(path: str | Path, *, rate: str = "peak") -> Workload:
    """Read a workload file: TOML, or a ``shardex.diagnose/1`` JSON document.

    ``rate`` picks the diagnose figure to offer: ``peak`` or ``sustained``. Raises
    InvalidInput naming the file and field at fault; OSError when it cannot be read.
    """
    name = str(path)
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _fail(name, f"is not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    text = text.removeprefix("\ufeff")  # a byte order mark, as some editors write
    if not text.strip():
        raise _fail(name, "is empty: a workload is TOML, or a diagnosis document "
                          "(shardex diagnose --json)")
    first = text.lstrip()[:1]
    doc: Any = None
    if first in ("{", "["):  # JSON; or, from '[', a TOML table header
        try:
            doc = json.loads(text)
        except ValueError as exc:  # JSONDecodeError, or an int of over 4,300 digits
            if first == "{":
                raise _fail(name, f"is not valid JSON: {exc}") from exc
        except RecursionError:
            if first == "{":
                raise _fail(name, "is nested too deeply") from None
    if doc is not None:
        if not isinstance(doc, Mapping) or doc.get("schema") != DIAGNOSE_SCHEMA:
            raise _fail(name, f"a JSON workload must be a {DIAGNOSE_SCHEMA} document "
                              "(shardex diagnose --json)")
        return _from_diagnosis(doc, name, rate=rate)
    try:
        parsed = tomllib.loads(text)
    except ValueError as exc:  # TOMLDecodeError, or an int of over 4,300 digits
        raise _fail(name, f"is not valid TOML: {exc}") from exc
    except RecursionError:  # tomllib recurses once per level of nesting
        raise _fail(name, "is nested too deeply") from None
    if rate != "peak":
        raise _fail(name, f"is a TOML workload, which gives its own rates: --rate {rate} "
                          "picks a figure of a diagnosis document (shardex diagnose --json)")
    return workload_from_dict(parsed, origin=name)
