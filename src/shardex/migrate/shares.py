"""The budget's record and the pure rules that share a migration's rate out.

``BudgetState`` is the record ``migrate/ID/budget`` (the last cut, each process's
``Slice``, the ``Hold`` of a process an outside signal holds, and the runners waiting
between steps); ``lease``, ``release``, ``cut`` and ``effective_rate`` change and read it,
``SpendWindow`` and ``window_wait`` keep a process to its slice on each key, and
``budget_document`` is what status shows. ``shardex.migrate.budget`` is the async side
that reads and writes the record (and explains the sharing).
"""

from __future__ import annotations

import json
import math
import re
from collections import deque
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from shardex.errors import MalformedItem

__all__ = ["BudgetPolicy", "BudgetState", "Hold", "Need", "Slice", "SpendWindow",
           "budget_document", "cut", "effective_rate", "fits", "held_until", "lease", "release",
           "unblocked_at", "window_wait"]

_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class BudgetPolicy:
    """How a migration's budget is shared and adapted.

    - ``term``: seconds a slice is leased for (renewed every third of it).
    - ``window``: seconds over which a slice (and the rate) holds: the load is measured
      per second.
    - ``skew``: seconds the clocks of the hosts running movers may disagree.
    - ``grain``: the smallest slice worth having (about one write's units): with more
      processes than ``rate / grain``, the extra ones wait for a slice. A process whose
      write costs more records what it needs (``BudgetState.needs``), which the grain in
      force grows to while it lasts.
    - ``decrease``: the factor a throttle cuts the rate by; ``increase``: the share of the
      set rate it grows back by each second; ``cooldown``: seconds after a cut in which
      throttles (answers to requests sent before it) do not cut again; ``floor``: the
      share of the set rate a cut never goes below.
    """

    term: float = 3.0
    window: float = 1.0
    skew: float = 0.25
    grain: float = 2.0
    decrease: float = 0.5
    increase: float = 0.05
    cooldown: float = 1.0
    floor: float = 0.01

    @property
    def linger(self) -> float:
        """Seconds a claim outlives its lease: its owner may still spend it that long."""
        return self.window + self.skew


@dataclass(frozen=True, slots=True)
class Slice:
    """One process's slice: ``share`` units a second on each shard key until ``expires``,
    or, with ``keys``, the share on each key it names and nothing on the others.

    ``prior`` is a larger share given up on every key, still claimed until ``prior_until``
    (wall s); ``priors`` the same on one key each (key: (share, until)).
    """

    share: float
    expires: float
    prior: float = 0.0
    prior_until: float = 0.0
    keys: Mapping[str, float] | None = None
    priors: Mapping[str, tuple[float, float]] = field(default_factory=dict)

    def live(self, now: float) -> bool:
        return now < self.expires

    def covers(self, key: str) -> bool:
        """True if the slice holds a share on ``key`` (every key, without ``keys``)."""
        return self.keys is None or key in self.keys

    def on(self, key: str | None) -> float:
        """The share on ``key`` (None: a key no slice names)."""
        if self.keys is None:
            return self.share
        return 0.0 if key is None else self.keys.get(key, 0.0)

    def claim(self, now: float, linger: float, key: str | None = None) -> float:
        """What the slice may still be spending on ``key`` at ``now`` (None: on a key it
        does not name)."""
        current = self.on(key) if now < self.expires + linger else 0.0
        prior = self.prior if now < self.prior_until else 0.0
        if key is not None and key in self.priors:
            share, until = self.priors[key]
            prior = max(prior, share if now < until else 0.0)
        return max(current, prior)

    def lingers(self, now: float, linger: float) -> bool:
        """True while it may still be spending on some key."""
        return (self.claim(now, linger) > 0
                or any(self.claim(now, linger, key) > 0 for key in (*(self.keys or ()),
                                                                    *self.priors)))

    def named(self) -> set[str]:
        """The keys it names, with a share or a prior."""
        return {*(self.keys or ()), *self.priors}


@dataclass(frozen=True, slots=True)
class Hold:
    """Why a process's movers stand still (its outside signal), recorded until ``expires``."""

    reason: str
    expires: float


@dataclass(frozen=True, slots=True)
class Need:
    """The units one write of a process costs beyond its share, waited for ``since`` (wall
    s), recorded until ``expires``."""

    units: float
    since: float
    expires: float


@dataclass(frozen=True, slots=True)
class BudgetState:
    """The budget record: the last cut (AIMD), every process's slice, the processes that
    an outside signal of their own holds (``holds``), and the runners waiting between a
    migration's steps (``waits``: for their clients to act on a change, say), each with
    what it waits for, and the processes whose next write costs more than their share
    (``needs``; all three absent from older records)."""

    cut_rate: float | None = None
    cut_at: float = 0.0
    slices: Mapping[str, Slice] = field(default_factory=dict)
    holds: Mapping[str, Hold] = field(default_factory=dict)
    waits: Mapping[str, Hold] = field(default_factory=dict)
    needs: Mapping[str, Need] = field(default_factory=dict)

    def grain(self, now: float, policy: BudgetPolicy) -> float:
        """The smallest share handed out at ``now``: the policy's grain, or the largest
        live need (a write must fit in one share: ``fits``)."""
        return max([policy.grain, *(n.units for n in self.needs.values() if n.expires > now)])

    def needy(self, now: float) -> dict[str, float]:
        """The processes with a live need, and since when: seated first, the longest
        waiting first (``lease``)."""
        return {o: n.since for o, n in self.needs.items() if n.expires > now}

    def needing(self, owner: str, need: tuple[float, float] | None, now: float, term: float
                ) -> BudgetState | None:
        """The state with ``owner``'s need (units, since when) renewed for ``term`` (None:
        it needs nothing more) and the lapsed ones dropped; None if that changes nothing
        (the same need renewed within the last third of a term)."""
        needs = _renewed(self.needs, owner, None if need is None
                         else Need(*need, _ceil(now + term)), now, term)
        return None if needs is None else replace(self, needs=needs)

    def to_body(self) -> dict[str, Any]:
        # a slice's list is what a runner of an earlier release reads: for one with keys,
        # its largest share and prior on every key, which that runner leaves room for
        return {"cut_rate": self.cut_rate, "cut_at": self.cut_at,
                "slices": {owner: [s.share, s.expires,
                                   max([s.prior, *(p for p, _ in s.priors.values())]),
                                   max([s.prior_until, *(u for _, u in s.priors.values())])]
                           for owner, s in sorted(self.slices.items())},
                "keyed": {owner: {"keys": None if s.keys is None else _packed(s.keys),
                                  "prior": [s.prior, s.prior_until],
                                  "priors": _packed({k: list(p) for k, p in s.priors.items()})}
                          for owner, s in sorted(self.slices.items())
                          if s.keys is not None or s.priors},
                "holds": {owner: [h.reason, h.expires]
                          for owner, h in sorted(self.holds.items())},
                "waits": {owner: [w.reason, w.expires]
                          for owner, w in sorted(self.waits.items())},
                "needs": {owner: [n.units, n.since, n.expires]
                          for owner, n in sorted(self.needs.items())}}

    def holding(self, owner: str, reason: str | None, now: float, term: float
                ) -> BudgetState | None:
        """The state with ``owner``'s hold renewed for ``term`` (None: its hold ended) and
        the lapsed ones dropped; None if that changes nothing that status shows (a
        renewal within the last third of a term)."""
        holds = _renewed(self.holds, owner, None if reason is None
                         else Hold(reason, now + term), now, term)
        return None if holds is None else replace(self, holds=holds)

    def waiting(self, owner: str, reason: str | None, now: float, term: float
                ) -> BudgetState | None:
        """``holding`` for ``owner``'s wait between steps (None: it waits no more)."""
        waits = _renewed(self.waits, owner, None if reason is None
                         else Hold(reason, now + term), now, term)
        return None if waits is None else replace(self, waits=waits)

    @classmethod
    def from_body(cls, body: Mapping[str, Any], where: str) -> BudgetState:
        """Read a budget record; MalformedItem naming it if it is damaged."""
        try:
            cut_rate = body["cut_rate"]
            slices = {}
            for owner, values in dict(body["slices"]).items():
                share, expires, prior, prior_until = _floats(values, 4)
                slices[str(owner)] = Slice(share, expires, prior, prior_until)
            for owner, keyed in dict(body.get("keyed") or {}).items():
                base, keys = slices[str(owner)], keyed["keys"]
                prior, prior_until = _floats(keyed["prior"], 2)
                slices[str(owner)] = replace(
                    base, prior=prior, prior_until=prior_until,
                    keys=None if keys is None else {k: float(v)
                                                    for k, v in _unpacked(keys).items()},
                    priors={k: (float(p), float(u))
                            for k, (p, u) in _unpacked(keyed["priors"]).items()})
            holds, waits = ({str(owner): Hold(str(reason), float(expires))
                             for owner, (reason, expires) in dict(body.get(kind) or {}).items()}
                            for kind in ("holds", "waits"))
            needs = {str(owner): Need(*_floats(values, 3))
                     for owner, values in dict(body.get("needs") or {}).items()}
            return cls(cut_rate=None if cut_rate is None else float(cut_rate),
                       cut_at=float(body["cut_at"]), slices=slices, holds=holds, waits=waits,
                       needs=needs)
        except (KeyError, TypeError, ValueError) as exc:
            raise MalformedItem(f"{where} is not a migration's budget record "
                                f"({type(exc).__name__}: {exc}); delete it: the running "
                                "movers write it again") from None


# a key numbered as shard keys are (``P#12``): its stem and number, no leading zero
_NUMBERED = re.compile(r"(.*?)(0|[1-9][0-9]*)")
_RUN = 3  # the fewest consecutive keys a record keeps as one run


def _packed(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` (key: value) as the record keeps them: ``runs``, each ``[stem, first,
    last, value]`` for keys ``stem + n`` (n from first to last) of one value, and the
    other keys as they are (``keys``). A slice of a reshard to 512 keys names them in a
    few runs: one by one, eight processes' slices took 10 KB at 32 keys each."""
    numbered: dict[tuple[str, str], list[int]] = {}
    keys: dict[str, Any] = {}
    for key, value in values.items():
        found = _NUMBERED.fullmatch(key)
        if found is None:
            keys[key] = value
        else:
            numbered.setdefault((found[1], json.dumps(value)), []).append(int(found[2]))
    runs: list[list[Any]] = []
    for (stem, value), numbers in sorted(numbered.items()):
        numbers.sort()
        start = 0
        for end in range(1, len(numbers) + 1):
            if end < len(numbers) and numbers[end] == numbers[end - 1] + 1:
                continue
            if end - start >= _RUN:
                runs.append([stem, numbers[start], numbers[end - 1], json.loads(value)])
            else:
                keys.update((f"{stem}{n}", json.loads(value)) for n in numbers[start:end])
            start = end
    return {"keys": dict(sorted(keys.items())), "runs": runs}


def _unpacked(packed: Mapping[str, Any]) -> dict[str, Any]:
    """The keys and values ``_packed`` keeps."""
    values = {str(key): value for key, value in dict(packed["keys"]).items()}
    for stem, first, last, value in packed["runs"]:
        if not isinstance(stem, str) or not isinstance(first, int) \
                or not isinstance(last, int) or last - first > 1 << 16:
            raise ValueError(f"a run of keys {stem!r} from {first!r} to {last!r}")
        values.update((f"{stem}{n}", value) for n in range(first, last + 1))
    return values


def _floats(values: Iterable[Any], count: int) -> tuple[float, ...]:
    found = tuple(float(v) for v in values)
    if len(found) != count:
        raise ValueError(f"{count} numbers expected, found {len(found)}")
    return found


_Mark = TypeVar("_Mark", Hold, Need)


def _renewed(marks: Mapping[str, _Mark], owner: str, mark: _Mark | None, now: float,
             term: float) -> dict[str, _Mark] | None:
    """``marks`` with ``owner``'s replaced by ``mark``, renewed until its ``expires``
    (None: it ended), and the lapsed ones dropped; None if that changes nothing status
    shows (the same mark but its expiry, renewed within the last third of a term)."""
    kept = {o: m for o, m in marks.items() if o != owner and m.expires > now}
    mine = marks.get(owner)
    if mark is not None:
        if mine is not None and replace(mine, expires=mark.expires) == mark \
                and mine.expires - now > term * 2 / 3:
            return None
        kept[owner] = mark
    elif mine is None and len(kept) == len(marks):
        return None
    return kept


def effective_rate(state: BudgetState, rate: float, now: float, policy: BudgetPolicy) -> float:
    """The rate in force at ``now``: ``rate`` (the set rate), or less after a recent cut."""
    if rate <= 0 or state.cut_rate is None:
        return max(rate, 0.0)
    grown = state.cut_rate + policy.increase * rate * max(0.0, now - state.cut_at)
    return min(rate, grown)


def cut(state: BudgetState, rate: float, now: float, policy: BudgetPolicy) -> BudgetState | None:
    """The state after a throttle at ``now``; None within ``cooldown`` of the last cut."""
    if state.cut_rate is not None and now - state.cut_at < policy.cooldown:
        return None
    current = effective_rate(state, rate, now, policy)
    return replace(state, cut_rate=max(policy.floor * rate, current * policy.decrease),
                   cut_at=now)


def lease(state: BudgetState, owner: str, rate: float, now: float, policy: BudgetPolicy,
          keys: Collection[str] | None = None) -> tuple[BudgetState, float]:
    """Lease (or renew) ``owner``'s slice of ``rate`` at ``now``: the new state and its
    share (with ``keys``, the largest of its shares on them).

    Without ``keys`` the slice holds one share on every shard key; with them, a share on
    each key named and nothing on the others, so processes that write different keys
    (the units of different source keys) each take the whole rate on theirs. A share is
    the fair one (the rate in force over the live processes on that key, every process
    for a slice of every key, at most ``rate / grain`` of them, by name) but never more
    than the others' claims on the key leave of the set rate ``rate``, so the claims on
    a key never add up to more than it (after a cut, each process comes down to its
    share of the rate in force as it renews). A share smaller than the owner's current
    one on a key keeps that claimed for ``linger`` seconds. Slices whose claims ended are
    dropped.
    """
    linger = policy.linger
    slices = {o: s for o, s in state.slices.items()
              if o != owner and (s.live(now) or s.lingers(now, linger))}
    available = effective_rate(state, rate, now, policy)
    live = {o: s for o, s in slices.items() if s.live(now)}
    grain, needy = state.grain(now, policy), state.needy(now)

    def share_on(key: str | None, sharing: Iterable[str]) -> float:
        fair = _fair(owner, sharing, available, grain, needy)
        others = sum(s.claim(now, linger, key) for s in slices.values())
        # the claims stay within the set rate; a cut lowers each share at its renewal
        # without stalling the ones that renew first (a cut adapts the load, the set
        # rate bounds it)
        return _floor(max(0.0, min(fair, rate - others)))

    expires = _ceil(now + policy.term)
    if keys is None:  # on every key: the most claimed one bounds it
        named = set().union(*(s.named() for s in slices.values()))
        share = min(share_on(key, live) for key in (None, *named))
        mine = Slice(share, expires)
    else:
        shares = {key: share_on(key, (o for o, s in live.items() if s.covers(key)))
                  for key in sorted(set(keys))}
        share = max(shares.values(), default=0.0)
        mine = Slice(share, expires, keys=shares)
    slices[owner] = _given_up(state.slices.get(owner), mine, now, linger)
    return replace(state, slices=slices), share


def _fair(owner: str, sharing: Iterable[str], available: float, grain: float,
          needy: Mapping[str, float]) -> float:
    """``owner``'s fair share of a key beside the live processes ``sharing`` it: the rate
    in force over them all, at most ``available / grain`` of them, the ``needy`` first
    (the longest waiting first), then by name (the others wait for a seat)."""
    seats = max(1, math.floor(available / grain + _EPS))
    ranked = sorted([*sharing, owner],
                    key=lambda o: (o not in needy, needy.get(o, 0.0), o))
    return available / min(len(ranked), seats) if ranked.index(owner) < seats else 0.0


def _given_up(old: Slice | None, new: Slice, now: float, linger: float) -> Slice:
    """``new`` with what ``old`` claimed beyond it still claimed for ``linger`` seconds
    (its owner may have spent it in the last window), and ``old``'s priors that last."""
    if old is None:
        return new
    prior, prior_until = (old.prior, old.prior_until) if now < old.prior_until else (0.0, 0.0)
    priors = {key: p for key, p in old.priors.items() if now < p[1]}
    current, until = now < old.expires + linger, _ceil(now + linger)
    if current and old.keys is None:
        if new.keys is not None or new.share < old.share - _EPS:
            prior, prior_until = max(prior, old.share), until
    elif current and old.keys is not None:
        for key, share in old.keys.items():
            if new.on(key) < share - _EPS:
                priors[key] = (max(share, priors.get(key, (0.0, 0.0))[0]), until)
    return replace(new, prior=prior, prior_until=prior_until, priors=priors)


def _floor(units: float) -> float:
    """A share as the record keeps it, to a thousandth of a unit, rounded down (the owner
    takes no more than it records): a key's share had taken 18 digits, a slice's
    record many of them (``lease``)."""
    return math.floor(units * 1000) / 1000


def _ceil(when: float) -> float:
    """A claim's end as the record keeps it, to the millisecond, rounded up (later)."""
    return math.ceil(when * 1000) / 1000


def unblocked_at(state: BudgetState, owner: str, rate: float, now: float,
                 policy: BudgetPolicy) -> float | None:
    """When ``owner``, holding less than its fair share on a key its slice names (the
    others' claims in its way), may take more: the first end after ``now`` of another
    slice's claim on such a key (a prior given up, a lapsed slice's last window); None if
    it holds its fair share on every key, or no claim in its way ends (it renews as
    usual). Renewing then, a process joining a key another holds took 2.1 s to 2.9 s to
    get its half; renewing at its own pace, up to a third of a term later."""
    mine = state.slices.get(owner)
    if mine is None or not mine.live(now):
        return None
    available = effective_rate(state, rate, now, policy)
    grain, needy = state.grain(now, policy), state.needy(now)
    others = {o: s for o, s in state.slices.items() if o != owner}
    keys = list(mine.keys) if mine.keys is not None else [None]
    ends: list[float] = []
    for key in keys:
        fair = _fair(owner, (o for o, s in others.items()
                             if s.live(now) and (key is None or s.covers(key))),
                     available, grain, needy)
        if mine.on(key) >= min(fair, rate) - _EPS:
            continue
        for s in others.values():
            ends += [s.prior_until, s.expires + policy.linger]
            if key is not None and key in s.priors:
                ends.append(s.priors[key][1])
    later = [end for end in ends if end > now]
    return min(later) if later else None


def release(state: BudgetState, owner: str, now: float, policy: BudgetPolicy) -> BudgetState:
    """``owner`` gives its slice up: still claimed for ``linger`` seconds, then gone; its
    hold and its need, if any, go with it."""
    state = state.holding(owner, None, now, policy.term) or state
    state = state.needing(owner, None, now, policy.term) or state
    mine = state.slices.get(owner)
    if mine is None:
        return state
    gone = _given_up(mine, Slice(0.0, now, keys={}), now, policy.linger)
    return replace(state, slices={**state.slices, owner: gone})


class SpendWindow:
    """What was spent on one key (wall or clock seconds, units), oldest first, while it
    counts against a limit (``held_until``), with its running total: ``wait`` says how
    long until a cost fits, ``add`` records a spend. The budget keeps one a key, and a
    unit's pace one (``shardex.migrate.pace``)."""

    __slots__ = ("_dearest", "_in_order", "_spent", "span", "total")

    def __init__(self, span: float) -> None:
        self.span = span
        self._spent: deque[tuple[float, float]] = deque()
        self.total = 0.0
        # since the window was last empty: the dearest spend, and whether every spend
        # came no earlier than the one before (then, with none dearer than the limit,
        # they stop counting in the order they came: held_until is at + span)
        self._dearest = 0.0
        self._in_order = True

    def wait(self, now: float, cost: float, limit: float) -> float:
        """Seconds until ``cost`` more fits in ``limit`` units per ``span`` at ``now``
        (``window_wait``'s rule); what no longer counts is dropped."""
        if limit <= 0:
            return math.inf
        spent, span = self._spent, self.span
        while spent and held_until(*spent[0], limit, span) <= now:
            self.total -= spent.popleft()[1]
        total = self.total
        if not spent or total + cost <= limit + _EPS:
            return 0.0
        if self._in_order and self._dearest <= limit:
            # a pace waiting asks this again and again: no sort of the window
            left = total
            for at, units in spent:
                left -= units
                if left + cost <= limit + _EPS or left <= _EPS:
                    return max(_EPS, at + span - now)
        for until, units in sorted((held_until(at, units, limit, span), units)
                                   for at, units in spent):
            total -= units
            if total + cost <= limit + _EPS or total <= _EPS:
                return max(_EPS, until - now)
        return span  # unreachable: the loop empties the window

    def add(self, now: float, cost: float) -> None:
        spent = self._spent
        if not spent:
            self._dearest, self._in_order = cost, True
        else:
            self._dearest = max(self._dearest, cost)
            self._in_order = self._in_order and now >= spent[-1][0]
        spent.append((now, cost))
        self.total += cost

    def counts(self, now: float, limit: float) -> bool:
        """True while its newest spend still counts against ``limit``."""
        return bool(self._spent) and held_until(*self._spent[-1], limit, self.span) > now


def fits(cost: float, limit: float, rate: float) -> bool:
    """True if a write of ``cost`` units may go within a share of ``limit`` units a second
    at the set ``rate``: it costs no more than the share, or more than the rate itself
    and the share is the whole rate (no other process may spend on the key; the write
    counts for ``cost / limit`` seconds, ``window_wait``). A write dearer than its share
    sent alone put the difference over the rate in its second, beside the other
    processes' shares: its process waits for a larger one instead (``needs``)."""
    return cost <= limit + _EPS or (cost > rate and limit >= rate - _EPS)


def window_wait(spent: Iterable[tuple[float, float]], now: float, cost: float, limit: float,
                window: float) -> float:
    """Seconds until ``cost`` more fits in ``limit`` units per ``window`` at ``now``.

    ``spent`` is (wall time, units) of what was spent, oldest first; what was spent in
    ``(now - window, now]`` counts. ``inf`` while ``limit`` is 0. A cost larger than
    ``limit`` goes alone, once the window is empty, and counts for ``cost / limit``
    seconds (``held_until``): a rate below one write's cost spaces the writes out to it
    (going alone once a window, they had put 4 units a second on a key at 0.5).
    """
    found = SpendWindow(window)
    for at, units in spent:
        found.add(at, units)
    return found.wait(now, cost, limit)


def held_until(at: float, cost: float, limit: float, window: float) -> float:
    """Until when ``cost`` units spent at ``at`` count against ``limit`` a ``window``."""
    return at + max(window, cost * window / limit) if limit > 0 else math.inf


def budget_document(state: BudgetState, rate: float, now: float,
                    policy: BudgetPolicy | None = None) -> dict[str, Any]:
    """The budget as ``status`` shows it: the rate in force and the live slices (each
    with its largest ``share`` and its ``least``, on the number of ``keys`` it holds one
    on; None: on every key)."""
    policy = policy or BudgetPolicy()
    return {"rate": rate, "in_force": effective_rate(state, rate, now, policy),
            "cut_at": state.cut_at if state.cut_rate is not None else None,
            "slices": [{"owner": owner, "share": s.share, "expires": s.expires,
                        "keys": None if s.keys is None else len(s.keys),
                        "least": min(s.keys.values(), default=0.0) if s.keys else s.share}
                       for owner, s in sorted(state.slices.items()) if s.live(now)],
            "holds": [{"owner": owner, "reason": h.reason, "expires": h.expires}
                      for owner, h in sorted(state.holds.items()) if h.expires > now],
            "waits": [{"owner": owner, "reason": w.reason, "expires": w.expires}
                      for owner, w in sorted(state.waits.items()) if w.expires > now],
            "needs": [{"owner": owner, "units": n.units, "since": n.since,
                       "expires": n.expires}
                      for owner, n in sorted(state.needs.items()) if n.expires > now]}
