"""The autopilot's settings (``AutopilotPolicy``), every field checked at construction,
and the policy file that gives them (``load_policy``, TOML): what an operator sets. The
decisions made from them are ``shardex.autopilot.policy``'s."""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from shardex.capacity import MAX_HEADROOM
from shardex.errors import InvalidPolicy, brief
from shardex.keys import validate_value
from shardex.routing import MAX_SHARDS, check_tier_name

__all__ = ["AutopilotPolicy", "load_policy"]

_NUMBERS = {"up", "down", "t_up", "t_down", "trend", "lead", "min_interval", "admit_share",
            "isolate_share", "headroom", "retain", "tick", "grow_factor", "settled",
            "admit_at", "veto"}
_COUNTS = {"max_migrations", "min_shards", "max_shards"}
# the fields in seconds, and the most any may be: a window, a wait or a tick longer than a
# month is a typing slip (a t_down of 1e308 asked a heat source for its whole past)
_SECONDS = ("t_up", "t_down", "trend", "lead", "min_interval", "retain", "tick", "veto")
MAX_SECONDS = 30 * 86_400.0


@dataclass(frozen=True, slots=True)
class AutopilotPolicy:
    """The autopilot's settings; every field checked at construction (InvalidPolicy).

    - ``up``/``down``: shares of a key's capacity (N x partition write ceiling),
      0 < down < up <= 1: grow above ``up`` sustained for ``t_up`` seconds, shrink when
      the peak over ``t_down`` seconds stays below ``down``; between them, nothing.
    - ``trend``: seconds of samples the load's trend is fitted on; ``lead``: seconds a
      grown layout takes to take writes (the runner's survey, read-both's lease and
      margin, write-new's cache TTL; a key's own ``KeyView.lead`` overrides it): a grow
      sizes for ``grow_factor`` (>= 1) x the load projected that far.
    - ``settled``: a shrink waits until the peak of the last ``t_up`` is at least this
      share of the peak over ``t_down`` (0 to 1).
    - ``min_interval``: seconds between a key's last change and its next migration.
    - ``veto``: seconds the autopilot leaves a key's N alone after an operator changed
      its layout: a migration of their own, or a rollback of the autopilot's (0: not at
      all).
    - ``max_migrations``: migrations under way at once on the table.
    - ``min_shards``/``max_shards``: the floor and ceiling on N; ``limits`` per value
      (value -> (floor, ceiling)) overrides them.
    - ``admit_share``: the admission budget bridging a grow, as a share of the old
      capacity; ``admit_at``: the share of capacity one sample may reach before the
      budget is set at once (``guard``); ``isolate_share``: the share of the table's
      write limit past which a key moves to ``tier`` (None: never isolate).
    - ``headroom``: the planner's multiplier on the peak; ``retain``: seconds a finished
      migration keeps the old layout (its retention window); ``tick``: seconds between
      decisions (and heat samples) of a loop or simulation.
    """

    up: float = 0.8
    down: float = 0.35
    t_up: float = 15.0
    t_down: float = 900.0
    trend: float = 30.0
    lead: float = 60.0
    grow_factor: float = 2.0
    settled: float = 0.8
    min_interval: float = 300.0
    max_migrations: int = 2
    min_shards: int = 1
    max_shards: int = 256
    limits: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    admit_share: float = 0.9
    admit_at: float = 0.9
    isolate_share: float = 0.5
    tier: str | None = None
    headroom: float = 1.5
    retain: float = 60.0
    tick: float = 5.0
    veto: float = 86_400.0

    def __post_init__(self) -> None:
        for name in sorted(_NUMBERS):
            value = getattr(self, name)
            # a float's range, not math.isfinite: an int past it overflows that and float()
            if isinstance(value, bool) or not isinstance(value, int | float) \
                    or not 0 <= value <= sys.float_info.max:
                raise InvalidPolicy(f"autopilot {name} must be a finite number >= 0, "
                                    f"got {brief(value)}")
            object.__setattr__(self, name, float(value))
        if not 0 < self.down < self.up <= 1:
            raise InvalidPolicy(f"autopilot thresholds need 0 < down < up <= 1, got down "
                                f"{self.down:g} and up {self.up:g}")
        for name in ("t_up", "t_down", "tick"):
            if getattr(self, name) <= 0:
                raise InvalidPolicy(f"autopilot {name} must be > 0 seconds")
        for name in _SECONDS:
            if getattr(self, name) > MAX_SECONDS:
                # (:g wrote 2592001 as 2.592e+06, as the bound itself reads)
                raise InvalidPolicy(f"autopilot {name} is in seconds, at most "
                                    f"{MAX_SECONDS:,.0f} (30 days), got "
                                    f"{getattr(self, name):,.15g}")
        if self.t_down < self.t_up:
            raise InvalidPolicy(f"autopilot t_down ({self.t_down:g} s) must be at least t_up "
                                f"({self.t_up:g} s): shrinking is the slower decision")
        for name in ("admit_share", "admit_at", "isolate_share"):
            if not 0 < getattr(self, name) <= 1:
                raise InvalidPolicy(f"autopilot {name} must be in (0, 1], got "
                                    f"{getattr(self, name):g}")
        if self.grow_factor < 1 or self.settled > 1:
            raise InvalidPolicy(f"autopilot needs grow_factor >= 1 and settled <= 1, got "
                                f"{self.grow_factor:g} and {self.settled:g}")
        if not 1 <= self.headroom <= MAX_HEADROOM:
            raise InvalidPolicy(f"autopilot headroom is a multiplier on the peak, 1 to "
                                f"{MAX_HEADROOM:g}, got {self.headroom:g}")
        for name in sorted(_COUNTS):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidPolicy(f"autopilot {name} must be an integer >= 1, "
                                    f"got {brief(value)}")
        if self.min_shards > self.max_shards or self.max_shards > MAX_SHARDS:
            raise InvalidPolicy(f"autopilot needs 1 <= min_shards <= max_shards <= "
                                f"{MAX_SHARDS}, got {brief(self.min_shards)} and "
                                f"{brief(self.max_shards)}")
        if self.tier is not None:
            check_tier_name(self.tier, "autopilot tier")
        limits: dict[str, tuple[int, int]] = {}
        for value, pair in dict(self.limits).items():
            try:
                validate_value(value)
            except ValueError as exc:
                raise InvalidPolicy(f"autopilot limits: {exc}") from None
            ok = isinstance(pair, tuple | list) and len(pair) == 2 and all(
                isinstance(n, int) and not isinstance(n, bool) for n in pair)
            if not ok or not 1 <= pair[0] <= pair[1] <= MAX_SHARDS:
                raise InvalidPolicy(f"autopilot limits of {value!r} must be (floor, ceiling) "
                                    f"with 1 <= floor <= ceiling <= {MAX_SHARDS}, "
                                    f"got {brief(pair)}")
            limits[value] = (pair[0], pair[1])
        object.__setattr__(self, "limits", MappingProxyType(limits))

    def bounds(self, key: str) -> tuple[int, int]:
        """The floor and ceiling on N for ``key``."""
        return self.limits.get(key, (self.min_shards, self.max_shards))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["limits"] = {value: list(pair) for value, pair in self.limits.items()}
        return out

    @classmethod
    def from_dict(cls, doc: Any, where: str = "policy") -> AutopilotPolicy:
        """Build a policy from a parsed TOML document: the settings at the top level (or in
        ``[autopilot]``), per-value floors and ceilings in ``[values.NAME]`` tables
        (``min_shards``, ``max_shards``). InvalidPolicy names the field at fault."""
        if isinstance(doc, Mapping) and isinstance(doc.get("autopilot"), Mapping):
            # [autopilot] with [values.NAME] beside it: both forms are documented (the
            # pair had been refused as "unknown setting(s) autopilot")
            outside = sorted(set(doc) - {"autopilot", "values"})
            if outside or ("values" in doc and "values" in doc["autopilot"]):
                raise InvalidPolicy(f"{where}: settings go in [autopilot] or at the top "
                                    "level, not both: "
                                    f"{', '.join(outside or ['values'])} outside it")
            doc = {**doc["autopilot"], **({"values": doc["values"]} if "values" in doc
                                          else {})}
        if not isinstance(doc, Mapping):
            raise InvalidPolicy(f"{where}: an autopilot policy must be a table of settings")
        known = {f.name for f in fields(cls)} - {"limits"}
        unknown = sorted(set(doc) - known - {"values"})
        if unknown:
            raise InvalidPolicy(f"{where}: unknown setting(s) {', '.join(unknown)}; known: "
                                f"{', '.join(sorted(known | {'values'}))}")
        settings = {name: doc[name] for name in known if name in doc}
        limits: dict[str, tuple[int, int]] = {}
        values = doc.get("values", {})
        if not isinstance(values, Mapping):
            raise InvalidPolicy(f"{where}: values must be tables of min_shards and max_shards")
        for value, body in values.items():
            stray = sorted(set(body) - {"min_shards", "max_shards"}) \
                if isinstance(body, Mapping) else []
            if not isinstance(body, Mapping) or stray:
                raise InvalidPolicy(f"{where}: values.{value} may set min_shards and "
                                    "max_shards only" + (f", not {', '.join(stray)}"
                                                         if stray else ""))
            limits[str(value)] = (body.get("min_shards", settings.get("min_shards", 1)),
                                  body.get("max_shards", settings.get("max_shards", 256)))
        try:
            return cls(**settings, limits=limits)
        except InvalidPolicy as exc:
            raise InvalidPolicy(f"{where}: {exc}") from None
        except TypeError as exc:  # a wrong type the checks above did not reach
            raise InvalidPolicy(f"{where}: {exc}") from None

    def replace(self, **changes: Any) -> AutopilotPolicy:
        return replace(self, **changes)


def load_policy(path: str | Path) -> AutopilotPolicy:
    """Read an autopilot policy file (TOML); InvalidPolicy names the file and the field."""
    name = str(path)
    try:
        doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as exc:  # TOMLDecodeError, not UTF-8, or an int of over 4,300 digits
        raise InvalidPolicy(f"{name}: is not valid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses once per level of nesting
        raise InvalidPolicy(f"{name}: is nested too deeply") from None
    return AutopilotPolicy.from_dict(doc, where=name)
