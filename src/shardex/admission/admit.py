"""The admission gate: the one async call a write or read makes before it reaches the store.

``Admission.admit`` looks up the logical key's budget, asks the budget state to take
the request's units and, when refused, lets ``Budget.decide`` choose between waiting
(on the injected clock) and refusing with ``AdmissionRejected``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from types import TracebackType

from shardex.admission.budgets import BudgetState, LocalBudgets
from shardex.admission.policy import OPS, PRIORITIES, AdmissionPolicy, Op, Priority
from shardex.clock import Clock, LoopClock
from shardex.errors import AdmissionRejected, InvalidInput, InvalidPolicy
from shardex.keys import validate_value

__all__ = ["Admission", "AdmissionCounts"]


@dataclass(slots=True)
class AdmissionCounts:
    """What admission did with one logical key's requests (this process only).

    ``admitted`` requests went on, ``admitted_units`` is what they were charged (a key
    without a budget: their units), ``waited`` requests waited on the budget first,
    admitted or refused after (a take's own round trip is no wait), ``wait_seconds`` in
    all; ``rejected`` were refused.
    """

    admitted: int = 0
    admitted_units: float = 0.0
    waited: int = 0
    wait_seconds: float = 0.0
    rejected: int = 0


class Admission:
    """Per-key admission control in front of a store.

    ``policy`` names each logical key's budget; ``budgets`` keeps their usage
    (``LocalBudgets`` on ``clock`` by default; ``SharedBudgets`` for a fleet). Each
    budget is checked against the state when the policy is set, so a budget the state
    cannot keep fails then, with InvalidPolicy naming the field.
    Use as ``async with admission:`` or call ``open``/``close``.
    """

    def __init__(self, policy: AdmissionPolicy, *, budgets: BudgetState | None = None,
                 clock: Clock | None = None) -> None:
        self._clock = clock or LoopClock()
        if budgets is not None and not isinstance(budgets, BudgetState):
            raise InvalidInput(f"budgets must be a BudgetState, got {budgets!r}")
        self._budgets = budgets or LocalBudgets(self._clock)
        self._counts: dict[str, AdmissionCounts] = {}
        self.policy = policy

    @classmethod
    def given(cls, given: AdmissionPolicy | Admission | None,
              clock: Clock) -> tuple[Admission | None, bool]:
        """An index's admission from its ``admission=`` argument, and whether it owns it.

        A policy becomes an Admission on ``clock`` that the index opens and closes; an
        Admission is used as it is (its owner opens it). Raises InvalidInput otherwise.
        """
        if given is None or isinstance(given, Admission):
            return given, False
        if isinstance(given, AdmissionPolicy):
            return cls(given, clock=clock), True
        raise InvalidInput(f"admission must be a shardex.admission.AdmissionPolicy, an "
                           f"Admission or None, got {given!r}")

    @property
    def policy(self) -> AdmissionPolicy:
        """The budgets in force; set a new policy to change them on a live index."""
        return self._policy

    @policy.setter
    def policy(self, policy: AdmissionPolicy) -> None:
        if not isinstance(policy, AdmissionPolicy):
            raise InvalidPolicy(f"policy must be an AdmissionPolicy, got {policy!r}")
        for budget in policy.budgets():
            self._budgets.check(budget)
        self._policy = policy

    @property
    def budgets(self) -> BudgetState:
        return self._budgets

    async def open(self) -> None:
        await self._budgets.open()

    async def close(self) -> None:
        await self._budgets.close()

    async def __aenter__(self) -> Admission:
        await self.open()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def admit(self, value: str, *, units: float = 1.0, op: Op = "write",
                    priority: Priority = "normal") -> float:
        """Return once a request of ``units`` capacity units on ``value`` may go to the store.

        Returns the seconds it waited. Raises AdmissionRejected (carrying the key and the
        retry-after) when the budget refuses it: at once in ``reject`` mode, after up to
        ``max_wait`` seconds in ``wait`` mode, at once if it can never fit. Raises
        InvalidInput for a bad ``units``, ``op`` or ``priority`` and InvalidKey for a
        bad ``value``; Unavailable if shared budgets cannot be reached.
        """
        validate_value(value)
        if isinstance(units, bool) or not isinstance(units, int | float) \
                or not math.isfinite(units) or units <= 0:
            raise InvalidInput(f"units must be a finite number > 0, got {units!r}")
        if op not in OPS:
            raise InvalidInput(f"op must be one of {', '.join(OPS)}, got {op!r}")
        if priority not in PRIORITIES:
            raise InvalidInput(f"priority must be one of {', '.join(PRIORITIES)}, got {priority!r}")
        budget = self._policy.budget(value)
        counts = self._counts.get(value)
        if counts is None:
            counts = self._counts[value] = AdmissionCounts()
        cost = 0.0 if budget is None else budget.cost(units, op)
        started = self._clock.now()
        slept = False  # a take's own round trip (Redis, the event loop) is no wait
        while cost > 0:
            assert budget is not None
            retry_after = await self._budgets.take(value, cost, budget, priority)
            waited = self._clock.now() - started
            if retry_after == 0.0:
                break
            wait = budget.decide(retry_after, waited)
            if wait is None:
                counts.rejected += 1
                if slept:  # it waited before it was refused: its caller lost that time
                    counts.waited += 1
                    counts.wait_seconds += waited
                raise AdmissionRejected(value, retry_after=retry_after, op=op, units=units,
                                        priority=priority,
                                        reason=_why(retry_after, budget.mode, waited))
            await self._clock.sleep(wait)
            slept = True
        waited = self._clock.now() - started if slept else 0.0
        counts.admitted += 1
        # an unlimited key is charged nothing; its units are still what went on
        counts.admitted_units += units if budget is None else cost
        if slept:
            counts.waited += 1
            counts.wait_seconds += waited
        return waited

    def counts(self) -> dict[str, AdmissionCounts]:
        """Return a copy of what admission did, per logical key, since it was made."""
        return {key: replace(c) for key, c in self._counts.items()}


def _why(retry_after: float | None, mode: str, waited: float) -> str:
    if retry_after is None:
        return "it asks for more than its budget lets its priority use"
    if mode == "reject":
        return "budget exhausted"
    return f"budget exhausted, and waiting longer than max_wait (waited {waited:.3g} s)"
