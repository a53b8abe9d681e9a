"""Why the heat concentrates: low cardinality, a sequential range, one popular entity, or not.

Pure decisions over a HeatProfile, tried in this order, each with its evidence:

1. ``sequential``: the hottest key moves along an ordered key space over time. The
   sample is cut into time buckets; each bucket's hottest key is taken; those keys
   must all be orderable the same way (ISO dates or times, numbers, or one common
   prefix followed by either), the hottest key must carry a real share of its bucket
   (``bucket_share`` on average), the run of hottest keys must take at least
   ``sequence_steps`` distinct values, and its steps must go forward (non-decreasing
   in the key order) in at least ``monotone`` of the changes.
2. ``popular_entity``: many distinct keys (``many_keys``), one dominant: the top key
   takes ``dominant_share`` of all units and ``dominance`` times the second key's.
3. ``low_cardinality``: few keys carry most of the load: the top ``top_keys`` keys
   carry ``top_share`` of all units.
4. ``uniform`` otherwise.

Throttles are evidence too (``throttle_min`` throttled requests, ``throttle_share``
of a key's requests, ``throttle_ratio`` times the rest's throttles per unit): the
recommendation gives such a key shards even below the ceiling (see
``shardex.heat.report``). Evidence numbers are kept as computed; JSON
documents round them once (``shardex.documents.rounded``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from shardex.errors import InvalidInput
from shardex.heat.profile import HeatProfile

__all__ = ["Classification", "KINDS", "Thresholds", "classify", "order_key"]

KINDS = ("sequential", "popular_entity", "low_cardinality", "uniform")

_DATE = re.compile(r"^(?P<prefix>.*?)(?P<tail>\d{4}-\d{2}-\d{2}"
                   r"(?:[T ]\d{2}(?::\d{2}(?::\d{2}(?:\.\d+)?)?)?)?(?:Z|[+-]\d{2}:?\d{2})?)$")
_NUMBER = re.compile(r"^(?P<prefix>.*?)(?P<tail>\d+)$")
# shares are sums of floats: a share exactly at a threshold must not miss it by 1e-16
_SLACK = 1e-9


@dataclass(frozen=True, slots=True)
class Thresholds:
    """The knobs of classification (see the module for what each decides)."""

    top_keys: int = 10
    top_share: float = 0.8
    many_keys: int = 20
    dominant_share: float = 0.25
    dominance: float = 4.0
    buckets: int = 24
    sequence_steps: int = 3
    monotone: float = 0.8
    bucket_share: float = 0.3
    throttle_min: int = 10
    throttle_share: float = 0.01
    throttle_ratio: float = 2.0

    def __post_init__(self) -> None:
        for name in ("top_share", "dominant_share", "monotone", "bucket_share",
                     "throttle_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise InvalidInput(f"threshold {name} must be between 0 and 1")
        for name in ("top_keys", "many_keys", "buckets", "sequence_steps", "throttle_min"):
            if getattr(self, name) < 1:
                raise InvalidInput(f"threshold {name} must be at least 1")
        if self.dominance < 1:
            raise InvalidInput("threshold dominance must be at least 1")
        if self.throttle_ratio < 1:
            raise InvalidInput("threshold throttle_ratio must be at least 1")


@dataclass(frozen=True, slots=True)
class Classification:
    """The kind of heat (one of KINDS) and the numbers that decided it."""

    kind: str
    evidence: dict[str, Any]


def order_key(key: str) -> tuple[str, str, Any] | None:
    """Return ``(kind, prefix, position)`` placing ``key`` in an ordered key space, or None.

    ``2026-11-30`` and ``orders-2026-11-30T05`` are dates (ordered by their ISO text),
    ``17`` and ``batch-17`` numbers (ordered numerically), each after its prefix.
    """
    match = _DATE.match(key)
    if match:
        return "date", match["prefix"], match["tail"]
    match = _NUMBER.match(key)
    if match:
        return "number", match["prefix"], int(match["tail"])
    return None


def _sequential(profile: HeatProfile, t: Thresholds) -> dict[str, Any] | None:
    steps = profile.sequence
    if len(steps) < t.sequence_steps:
        return None
    runs = [steps[0].key]
    for step in steps[1:]:
        if step.key != runs[-1]:
            runs.append(step.key)
    distinct = len(set(runs))
    mean_share = sum(s.share for s in steps) / len(steps)
    if distinct < t.sequence_steps or mean_share < t.bucket_share:
        return None
    places = [order_key(k) for k in runs]
    if any(p is None for p in places):
        return None
    kinds = {(p[0], p[1]) for p in places if p is not None}
    if len(kinds) != 1:
        return None
    positions = [p[2] for p in places if p is not None]
    forward = sum(1 for a, b in pairwise(positions) if b > a)
    changes = len(positions) - 1
    if forward / changes < t.monotone or positions[-1] <= positions[0]:
        return None
    kind, prefix = next(iter(kinds))
    return {"hot_key_sequence": runs[:24] + (["..."] if len(runs) > 24 else []),
            "first_hot_key": runs[0], "last_hot_key": runs[-1],
            "distinct_hot_keys": distinct, "forward_steps": forward, "steps": changes,
            "ordering": kind, "prefix": prefix, "buckets": len(steps),
            "bucket_seconds": max(1, steps[0].end - steps[0].start + 1),
            "mean_hot_key_bucket_share": mean_share}


def _covering(shares: list[float], share: float) -> int | None:
    covered = 0.0
    for i, part in enumerate(shares):
        covered += part
        if covered >= share - _SLACK:
            return i + 1
    return None


def classify(profile: HeatProfile, thresholds: Thresholds | None = None) -> Classification:
    """Classify the heat of ``profile``; the evidence says which numbers decided it."""
    t = thresholds or Thresholds()
    top = profile.top
    shares = [profile.sure_share(k) for k in top]
    head = sum(shares[:t.top_keys])
    # over every key where the profile counted them for this share, else over its top
    needed = profile.keys_to_cover if profile.cover == t.top_share \
        and profile.keys_to_cover is not None else _covering(shares, t.top_share)
    common: dict[str, Any] = {
        "distinct_keys": profile.distinct_keys,
        "distinct_keys_exact": profile.distinct_exact,
        "total_units": profile.total_units,
        "seconds": profile.seconds,
        "top_key": top[0].key if top else None,
        "top_key_share": shares[0] if shares else 0.0,
        f"top_{t.top_keys}_share": float(head),
        f"keys_for_{round(100 * t.top_share)}pct": needed,
    }
    sequence = _sequential(profile, t)
    if sequence is not None:
        return Classification("sequential", {**common, **sequence})
    second = shares[1] if len(shares) > 1 else 0.0
    if profile.distinct_keys >= t.many_keys and shares \
            and shares[0] >= t.dominant_share - _SLACK \
            and shares[0] >= t.dominance * second - _SLACK:
        ratio = shares[0] / second if second > 0 else None
        return Classification("popular_entity", {
            **common, "second_key": top[1].key if len(top) > 1 else None,
            "second_key_share": second,
            "dominance": ratio})
    if shares and head >= t.top_share - _SLACK:
        return Classification("low_cardinality", common)
    return Classification("uniform", common)
