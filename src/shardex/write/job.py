"""What one logical write is, and what its steps leave behind: plain values.

``Job`` is the write as the index hands it down; ``Claim`` a write the index's own store
must confirm; ``Landing`` where a write left a live entry, which fencing checks;
``Backoff`` what the machine asks of a retry policy.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import NamedTuple, Protocol

from shardex.errors import ConditionFailed, RoutingStale, ShardexError, Throttled, Unavailable
from shardex.model.entries import Placement, StoredEntry
from shardex.routing import Routing
from shardex.write.decide import WriteRequest
from shardex.write.steps import Placed, Routed
from shardex.write.topology import Tier

__all__ = ["Backoff", "Claim", "Job", "Landing", "dead_placement", "did_not_apply",
           "held_too_often", "may_have_applied"]



class Backoff(Protocol):
    """How long to wait before another try (``shardex.RetryPolicy`` is one): None to stop."""

    def decide(self, attempt: int, elapsed: float, error: BaseException,
               rng: random.Random) -> float | None: ...


class Job(NamedTuple):
    """One logical write of ``item_id`` under ``value``.

    ``other`` is the value a move leaves (None: not a move). ``plan(routing)`` builds the
    request under a routing (drawing a new entry's shard key there); ``draw(routing,
    value)`` draws the shard key a new entry of ``value`` takes under ``routing``.
    ``what`` names the write in errors; ``token`` is its identity.
    """

    item_id: str
    value: str
    other: str | None
    plan: Callable[[Routing], WriteRequest]
    draw: Callable[[Routing, str], str]
    what: str
    token: str


class Claim(NamedTuple):
    """A write that another store must confirm (``arbiter``: the index's own store, for
    an item made live in a tier's store; the store a crossing value comes from, for an
    item of it written in the other): the item's placement there as located before
    (``main``), the write's ``version`` and ``token``; ``tier`` is the store the write
    went to, ``before`` the version of the placement its row replaced there (0: none),
    which the tombstone that takes the row out if it loses keeps (``WriteMachine._confirm``)."""

    main: Placement | None
    version: int
    token: str
    tier: Tier
    arbiter: Tier = None
    before: int = 0


class Landing(NamedTuple):
    """Where a write left a live entry: ``entry`` in ``tier``'s store, as ``placed`` said,
    planned under ``planned``. ``erased``: the write was a tombstone at that version over
    ``entry`` (a delete in a store of several, whose copies elsewhere it must not leave
    live)."""

    tier: Tier
    entry: StoredEntry
    placed: Placed
    planned: Routed
    erased: int | None = None


def dead_placement(item_id: str, found: dict[Tier, Placement | None]) -> Placement | None:
    """The item as a write that makes it live decides from, when no store holds it live:
    a tombstone at the newest version of any store's placement (None: never placed).

    So a write that makes an item live in one store numbers it above every placement it
    has anywhere, and the two stores of a value a reshard moves compare versions
    meaningfully (``truth``) whatever store each was written in, by whatever value.
    """
    placed = [p for p in found.values() if p is not None]
    if not placed:
        return None
    return Placement(item_id, max(p.version for p in placed), None)


def may_have_applied(error: BaseException) -> bool:
    """True if a try of a write that failed with ``error`` may have applied: the store
    could not be reached or did not answer, and does not know it failed before it could."""
    return isinstance(error, Unavailable) and error.may_have_applied


def did_not_apply(error: ShardexError, what: str) -> ShardexError:
    """The error to raise for a write that failed, once a read showed it had not landed."""
    message = f"{what} did not apply (the item was read back after an ambiguous try): {error}"
    if isinstance(error, Throttled):
        return Throttled(message, key=error.key, reason=error.reason)
    if isinstance(error, Unavailable | ConditionFailed):
        return type(error)(message)
    return error


def held_too_often(job: Job, planned: Routed, held: int) -> RoutingStale:
    # a lease shorter than a write takes would hold it, and plan it again, forever
    return RoutingStale(f"the {job.what} was held past the routing's lease "
                        f"({planned.fence.lease:g} s) {held} times in a row, each time planned "
                        f"again under a fresh read of the routing; it did not apply (a lease "
                        f"shorter than a write takes? the routing record sets it)")
