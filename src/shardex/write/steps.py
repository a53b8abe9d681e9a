"""What the write machine asks for (actions) and what the driver tells it (observations).

Plain immutable values. Stores are named by tier (None: the index's own store), so the
machine never holds a store: the driver maps each name to its ``Store``. Observations
carry ``at``, the driver's clock when they were made, so the machine decides from time
without reading a clock.
"""

from __future__ import annotations

from typing import NamedTuple

from shardex.errors import ShardexError
from shardex.model.entries import Placement, StoredEntry
from shardex.routing import Routing

__all__ = ["Action", "Done", "Errored", "FENCE", "Fence", "Locate", "Located", "NotSent",
           "Observation", "Place", "Placed", "Route", "Routed", "Sleep", "Slept", "Start",
           "read_back"]

# a place is sent only within this share of the lease of the latest read that found the
# routing it was planned under: it then lands within the lease (the rest is the
# request's own time), and one held longer is planned again under a fresh read
FENCE = 0.9


# -- actions ---------------------------------------------------------------------------

class Route(NamedTuple):
    """The routing to act on: the client's copy, re-read if older than its TTL (served
    while its lease holds if that fails); ``fresh``: re-read now, strongly consistently,
    by a read sent after this action (an error if that read fails)."""

    fresh: bool = False


class Locate(NamedTuple):
    """The item's placement in ``tier``'s store (strongly consistent)."""

    tier: str | None


class Fence(NamedTuple):
    """The copy of the routing a write was planned under: its ``version``, when the read
    that loaded it was sent (``read_at``), and its ``lease``."""

    version: int
    read_at: float
    lease: float

    def holds(self, at: float, version: int, read_at: float, share: float = 1.0) -> bool:
        """True if ``at`` is within ``share`` of the lease of the latest read that found
        the routing at this version: the one planned under, or the client's copy
        (``version``, read at ``read_at``) when it is still the same version."""
        latest = read_at if version == self.version and read_at > self.read_at \
            else self.read_at
        return at < latest + self.lease * share


class Place(NamedTuple):
    """Place ``entry`` (None: a tombstone) at ``version`` in ``tier``'s store if the item's
    placement there is still ``expected``, with ``token``.

    ``fence``: the routing copy the place was planned under; the driver sends it only
    while ``fence.holds(now, ..., FENCE)`` for the client's copy as it then is, and
    answers NotSent instead (None: no bound). ``pace``: the shard key an adaptive gate
    paces it on (None: not paced).
    """

    tier: str | None
    entry: StoredEntry | None
    version: int
    expected: Placement | None
    token: str
    fence: Fence | None = None
    pace: str | None = None


class Sleep(NamedTuple):
    """Wait ``seconds`` (a backoff)."""

    seconds: float


class Done(NamedTuple):
    """The write is over: the call returns ``result``; ``shard_key`` is where the entry the
    write left is (None: no entry, or the write changed nothing)."""

    result: bool
    shard_key: str | None = None


Action = Route | Locate | Place | Sleep | Done


# -- observations ----------------------------------------------------------------------

class Start(NamedTuple):
    """The first observation: the clock when the write began."""

    at: float


class Routed(NamedTuple):
    """The routing to act on: ``fence`` says when the read that loaded it was sent and its
    lease. ``at`` None (here and in ``Located``): the clock is not read for an answer
    that no decision times (the machine keeps the last time it was told). ``refile``:
    writes may re-file entries onto the layout written (``decide.refiles``, when read)."""

    routing: Routing
    fence: Fence
    at: float | None = None
    refile: bool = False

    @property
    def read_at(self) -> float:
        return self.fence.read_at

    @property
    def lease(self) -> float:
        return self.fence.lease


class Located(NamedTuple):
    placement: Placement | None
    at: float | None = None


class Placed(NamedTuple):
    """The place applied; ``version`` and ``read_at``: the client's copy of the routing as
    the answer came back (its version, and when the read that loaded it was sent)."""

    at: float
    version: int
    read_at: float


def read_back(at: float) -> Placed:
    """A try found applied by a read-back at ``at``: landed by then, as fencing takes it
    (no copy of the routing answered with it)."""
    return Placed(at, -1, at)


class NotSent(NamedTuple):
    """The place was held (a queue, a pacing gate) past its fence and not sent."""

    at: float


class Slept(NamedTuple):
    """The wait is over; ``routed``: the routing copy the client serves now, if within its
    TTL (the answer a Route would get at once), so a retry needs no Route of its own."""

    at: float
    routed: Routed | None = None


class Errored(NamedTuple):
    """The action failed with ``error`` (a place: it did not apply, except Unavailable,
    after which it may have, unless the store says it did not)."""

    error: ShardexError
    at: float


Observation = Start | Routed | Located | Placed | NotSent | Slept | Errored
