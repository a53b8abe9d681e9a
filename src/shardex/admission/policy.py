"""Admission budgets: how much of each logical key's traffic may reach the store.

Pure: nothing here does I/O or reads a clock; every decision takes ``now`` (seconds).

A ``Budget`` is a token bucket of ``burst`` units refilled at ``rate`` units a second,
kept as one number, the bucket's *theoretical arrival time* ``tat``: the time at which
it would be full again (the generic cell rate algorithm). Over any T seconds a budget
admits at most ``rate * T + burst`` units, and over a long run at most ``rate``.

Priorities share one budget: ``reserve[p]`` is the share of the burst that a request
of priority ``p`` must leave in the bucket for higher priorities, so when the budget
runs short a batch job's writes (``low``) stop first and a dashboard's reads (``high``)
go on.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, cast, get_args

from shardex.errors import InvalidInput, InvalidKey, InvalidPolicy, brief
from shardex.keys import validate_value

__all__ = [
    "ADMISSION_FORMAT",
    "AdmissionPolicy",
    "Budget",
    "Counts",
    "Grant",
    "MODES",
    "Mode",
    "OPS",
    "Op",
    "PRIORITIES",
    "Priority",
]

Priority = Literal["low", "normal", "high"]
PRIORITIES: tuple[Priority, ...] = get_args(Priority)
Op = Literal["read", "write"]
OPS: tuple[Op, ...] = get_args(Op)
Mode = Literal["wait", "reject"]
MODES: tuple[Mode, ...] = get_args(Mode)
Counts = Literal["units", "requests"]
_COUNTS: tuple[Counts, ...] = get_args(Counts)
ADMISSION_FORMAT = "shardex.admission/1"

# Float sums of units and time stamps lose digits; without the slack a request
# arriving exactly when its units have refilled would be refused.
_SLACK = 1e-9  # units, and seconds of waiting
_CLOCK_SLACK = 1e-12  # relative to the clock's reading


def check_number(where: str, value: Any, *, minimum: float, open_low: bool = False,
            maximum: float = math.inf, open_high: bool = False) -> float:
    """Return ``value`` as a float if it is a finite number in range; else InvalidPolicy.

    An int too large for a float (past about 1.8e308) is out of range.
    """
    try:
        number = float(value) if not isinstance(value, bool) and isinstance(
            value, int | float) else math.nan
    except OverflowError:  # an int past any float
        number = math.nan
    ok = (math.isfinite(number)
          and (number > minimum if open_low else number >= minimum)
          and (number < maximum if open_high else number <= maximum))
    if not ok:
        low = f"> {minimum:g}" if open_low else f">= {minimum:g}"
        high = "" if maximum == math.inf else (
            f" and < {maximum:g}" if open_high else f" and <= {maximum:g}")
        raise InvalidPolicy(f"{where} must be a finite number {low}{high}, got {brief(value)}")
    return number


def check_choice(where: str, value: Any, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise InvalidPolicy(f"{where} must be one of {', '.join(choices)}, got {brief(value)}")
    return value


@dataclass(frozen=True, slots=True)
class Grant:
    """The answer of a budget to one request.

    ``admitted`` says whether it may go; if not, ``retry_after`` is the seconds until
    the same request would be admitted (None: never). ``tat`` is the bucket's state
    after the decision (unchanged when refused).
    """

    admitted: bool
    retry_after: float | None
    tat: float


@dataclass(frozen=True, slots=True)
class Budget:
    """One logical key's admission budget.

    - ``rate``: units (or requests, see ``counts``) a second, > 0.
    - ``burst``: units admitted at once on top of the rate, > 0 (None: one second of
      ``rate``). A request larger than what its priority may use is never admitted.
    - ``mode``: on excess, ``wait`` until admitted, up to ``max_wait`` seconds in all
      (then refuse), or ``reject`` at once.
    - ``max_wait``: seconds, >= 0.
    - ``reserve``: per priority (``low``, ``normal``), the share of the burst in [0, 1)
      that the request must leave for higher priorities; ``low`` keeps back at least
      as much as ``normal``. ``high`` uses the whole burst.
    - ``counts``: ``units`` charges a request its capacity units, ``requests`` one.
    - ``read_cost``: what a read is charged per unit (or request), >= 0: 0 leaves
      reads out of the budget, 1/3 weighs them as a DynamoDB partition does (3,000
      read units against 1,000 write units a second).

    Bad fields raise InvalidPolicy naming the field.
    """

    rate: float
    burst: float | None = None
    mode: Mode = "wait"
    max_wait: float = 1.0
    reserve: Mapping[Priority, float] = field(default_factory=dict)
    counts: Counts = "units"
    read_cost: float = 1.0

    def __post_init__(self) -> None:
        check_number("Budget.rate", self.rate, minimum=0.0, open_low=True)
        if self.burst is not None:
            # a bucket of 0 units admits no request (each asks for more than 0)
            check_number("Budget.burst", self.burst, minimum=0.0, open_low=True)
        check_choice("Budget.mode", self.mode, MODES)
        check_number("Budget.max_wait", self.max_wait, minimum=0.0)
        check_choice("Budget.counts", self.counts, _COUNTS)
        check_number("Budget.read_cost", self.read_cost, minimum=0.0)
        if not isinstance(self.reserve, Mapping):
            raise InvalidPolicy(
                f"Budget.reserve must be a mapping of priority to share, got {brief(self.reserve)}")
        for priority, share in self.reserve.items():
            check_choice("Budget.reserve key", priority, PRIORITIES[:-1])
            check_number(f"Budget.reserve[{priority!r}]", share, minimum=0.0, maximum=1.0,
                    open_high=True)
        if self.reserve.get("low", 0.0) < self.reserve.get("normal", 0.0):
            raise InvalidPolicy(
                f"Budget.reserve['low'] ({self.reserve.get('low', 0.0)}) must be at least "
                f"Budget.reserve['normal'] ({self.reserve['normal']}): a lower priority "
                "keeps back at least as much as a higher one")
        # A read-only private copy: changing the caller's dict must not change a live budget.
        object.__setattr__(self, "reserve", MappingProxyType(
            {p: float(self.reserve[p]) for p in PRIORITIES if p in self.reserve}))

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_dict(), sort_keys=True))

    # -- decisions -------------------------------------------------------------------

    @property
    def burst_units(self) -> float:
        """The bucket's size in units: ``burst``, or one second of ``rate`` when unset."""
        return self.rate if self.burst is None else self.burst

    def usable(self, priority: Priority) -> float:
        """Units of the bucket a request of ``priority`` may draw on."""
        return self.burst_units * (1.0 - self.reserve.get(priority, 0.0))

    def cost(self, units: float, op: Op) -> float:
        """What one request of ``units`` capacity units is charged against this budget."""
        charged = units if self.counts == "units" else 1.0
        return charged * self.read_cost if op == "read" else charged

    def take(self, tat: float, now: float, cost: float, priority: Priority) -> Grant:
        """Decide a request of ``cost`` units at ``now`` against a bucket in state ``tat``.

        Admitted when, after taking ``cost``, the bucket still holds the share that
        ``priority`` must leave for higher ones; then ``tat`` moves on by
        ``cost / rate``. A fresh bucket (full) has any ``tat`` <= ``now``.
        """
        usable = self.usable(priority)
        if cost > usable + _SLACK:
            return Grant(False, None, tat)
        after = max(tat, now) + cost / self.rate
        excess = after - now - usable / self.rate
        if excess <= _CLOCK_SLACK * max(1.0, abs(now)):
            return Grant(True, 0.0, after)
        return Grant(False, excess, tat)

    def decide(self, retry_after: float | None, waited: float) -> float | None:
        """After a refusal: the seconds to wait before asking again, or None to refuse.

        ``retry_after`` is the budget's answer, ``waited`` the seconds this request has
        already waited. A request waits only in ``wait`` mode and never past ``max_wait``.
        """
        if retry_after is None or self.mode == "reject":
            return None
        if waited + retry_after > self.max_wait + _SLACK:
            return None
        return retry_after

    # -- documents -------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {"rate": self.rate, "burst": self.burst, "mode": self.mode,
                "max_wait": self.max_wait, "reserve": dict(self.reserve),
                "counts": self.counts, "read_cost": self.read_cost}

    @classmethod
    def from_dict(cls, doc: Any, where: str = "budget") -> Budget:
        """Build a budget from its document; raise InvalidPolicy naming the bad field."""
        fields = _object(doc, where, required={"rate"},
                         optional={"burst", "mode", "max_wait", "reserve", "counts",
                                   "read_cost"})
        try:
            return cls(**fields)
        except InvalidPolicy as exc:
            raise InvalidPolicy(f"{where}: {exc}") from exc


@dataclass(frozen=True)
class AdmissionPolicy:
    """Budgets per logical key: ``default`` for every key, ``overrides`` for some.

    A key whose budget is None (no default, or an override of None) is not limited.
    Keys of ``overrides`` are validated as logical keys.
    """

    default: Budget | None = None
    overrides: Mapping[str, Budget | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.default is not None and not isinstance(self.default, Budget):
            raise InvalidPolicy(
                f"AdmissionPolicy.default must be a Budget or None, got {brief(self.default)}")
        if not isinstance(self.overrides, Mapping):
            raise InvalidPolicy("AdmissionPolicy.overrides must be a mapping, got "
                                f"{type(self.overrides).__name__}")
        for value, budget in self.overrides.items():
            try:
                validate_value(value)
            except InvalidKey as exc:
                raise InvalidPolicy(f"AdmissionPolicy.overrides: {exc}") from exc
            if budget is not None and not isinstance(budget, Budget):
                raise InvalidPolicy(f"AdmissionPolicy.overrides[{value!r}] must be a Budget "
                                    f"or None, got {brief(budget)}")
        object.__setattr__(self, "overrides",
                           MappingProxyType(dict(sorted(self.overrides.items()))))

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_dict(), sort_keys=True))

    def budget(self, value: str) -> Budget | None:
        """Return the budget of logical key ``value`` (None: not limited)."""
        try:
            return self.overrides.get(value, self.default)
        except TypeError:  # unhashable: no value at all
            raise InvalidInput(f"a value is text, got {brief(value)}") from None

    def budgets(self) -> list[Budget]:
        """Every budget the policy names, the default first."""
        named = [self.default, *self.overrides.values()]
        return [budget for budget in named if budget is not None]

    def to_dict(self) -> dict[str, Any]:
        def doc(budget: Budget | None) -> dict[str, Any] | None:
            return None if budget is None else budget.to_dict()

        return {"format": ADMISSION_FORMAT, "default": doc(self.default),
                "overrides": {value: doc(b) for value, b in self.overrides.items()}}

    @classmethod
    def from_dict(cls, doc: Any, where: str = "admission") -> AdmissionPolicy:
        """Build a policy from ``to_dict``'s document; raise InvalidPolicy naming the field."""
        fields = _object(doc, where, required={"format"}, optional={"default", "overrides"})
        if fields["format"] != ADMISSION_FORMAT:
            raise InvalidPolicy(f"{where}.format must be {ADMISSION_FORMAT!r}, "
                                f"got {brief(fields['format'])}")
        raw = fields.get("overrides", {})
        if not isinstance(raw, dict):
            raise InvalidPolicy(f"{where}.overrides: expected an object, got {type(raw).__name__}")

        def budget(part: Any, at: str) -> Budget | None:
            return None if part is None else Budget.from_dict(part, at)

        default = budget(fields.get("default"), f"{where}.default")
        overrides = {value: budget(part, f"{where}.overrides[{value!r}]")
                     for value, part in raw.items()}
        try:
            return cls(default=default, overrides=overrides)
        except InvalidPolicy as exc:
            raise InvalidPolicy(f"{where}: {exc}") from exc


def _object(doc: Any, where: str, *, required: set[str], optional: set[str]) -> dict[str, Any]:
    """Return ``doc`` if it is an object with the fields named; else InvalidPolicy."""
    if not isinstance(doc, dict):
        raise InvalidPolicy(f"{where}: expected an object, got {type(doc).__name__}")
    fields = cast(dict[str, Any], doc)
    unknown = sorted(map(str, set(fields) - required - optional))
    missing = sorted(required - set(fields))
    if unknown or missing:
        raise InvalidPolicy(f"{where}: " + "; ".join(
            [f"unknown field(s) {', '.join(map(repr, unknown))}"] * bool(unknown)
            + [f"missing field(s) {', '.join(map(repr, missing))}"] * bool(missing)))
    return fields
