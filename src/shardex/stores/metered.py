"""The one metering path: every request a store makes becomes one ``Usage`` event.

A store's public methods (``shardex.stores.base.Store``) hand each backend hook a
``Recorder``. The backend reports there only what each request consumed:

- ``rec.request(key, write=...)`` when it sends a request (a call may send several:
  a paged COUNT, a table-ownership check before a write);
- ``rec.charge(key, units, partition)`` for each key the request touched, with the units
  it took there (the memory store knows them exactly, and its physical partition);
- ``rec.share(units, weights)`` when the store reports one total for a multi-key write
  (a DynamoDB transaction): ``split_units`` shares it by weight, the one place that rule
  is written.

When the request ends the recorder emits one frozen ``Usage`` on the store's ``Meter``,
with its outcome (``ok``, ``conflict``, ``throttled``, ``unavailable``, ``ambiguous``,
``failed``, ``cancelled``) read from the error that ended it, if any. Everything that
counts subscribes to that meter and reads the same events: ``store.stats()``
(``shardex.stores.stats``), the windowed heat meter behind ``index.heat()``
(``shardex.heatmeter.meter``), and later exporters (Prometheus, OpenTelemetry, a live view).
A subscriber is a plain callable; it must be quick and must not raise, as it runs inside
the request path. Other event types flow through the same ``Meter.emit``, and subscribers
ignore types they do not know: ``Hedge`` says what became of a hedged read's copies
(each copy is also a request with its own ``Usage``), ``FanOutRead`` how many shard
keys one read of a logical key fans out to, and ``Skipped`` a malformed item a listing
left out (``Recorder.malformed``).

``Counts`` is the one counter record (named fields) the subscribers accumulate into.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, NamedTuple

from shardex.clock import Clock
from shardex.errors import ConditionFailed, MalformedItem, Throttled, Unavailable
from shardex.model.entries import Skipped

__all__ = [
    "Counts",
    "FanOutRead",
    "Hedge",
    "HedgeOutcome",
    "Meter",
    "Outcome",
    "Recorder",
    "Share",
    "Skipped",
    "Subscriber",
    "Usage",
    "collect_skipped",
    "collected",
    "detached",
    "quiet",
    "split_units",
]

log = logging.getLogger("shardex")
# the malformed items skipped by the reads of the call under way (``collect_skipped``)
_SKIPPED: ContextVar[list[Skipped] | None] = ContextVar("shardex_skipped", default=None)

Outcome = Literal["ok", "conflict", "throttled", "unavailable", "ambiguous", "failed",
                  "cancelled"]
HedgeOutcome = Literal["sent", "won", "cancelled"]


class Share(NamedTuple):
    """The part of one request that fell on one key: its units, and where the key lives.

    ``partition`` names the physical partition when the store knows it (the memory store
    with a fixed partition count); None means the key is its own partition, or unknown.
    """

    key: str
    units: float
    partition: str | None = None


class Usage(NamedTuple):
    """One request a store made: what it consumed, on which keys, how and when it ended.

    - ``key``: the key the request addressed, or the one that refused it (a throttle).
    - ``units``: capacity units consumed in all; ``shares`` says where (empty when the
      store reported nothing, as for a request that failed before it applied).
    - ``outcome``: ``ok``; ``conflict`` (a condition failed); ``throttled``;
      ``unavailable`` (failed before it applied); ``ambiguous`` (applied, then reported
      failure); ``failed`` (any other error); ``cancelled`` (the caller gave up).
    - ``start`` and ``end``: the store clock's monotonic seconds.
    - ``reason``: why a throttled request was throttled, as the store says
      (``Throttled.reason``: DynamoDB's ThrottlingReason, such as
      ``TableWriteKeyRangeThroughputExceeded``); None for any other outcome.

    An immutable named tuple: one is made for every request, on the hot path.
    """

    namespace: str
    key: str
    write: bool
    outcome: Outcome
    units: float
    shares: tuple[Share, ...]
    start: float
    end: float
    reason: str | None = None

    @property
    def latency(self) -> float:
        """Seconds from the request's start to its end."""
        return self.end - self.start


class Hedge(NamedTuple):
    """What became of one copy of a hedged read of shard key ``key``.

    - ``sent``: a copy beyond the first was sent (its request is a ``Usage`` as well);
    - ``won``: a copy beyond the first answered first;
    - ``cancelled``: the reader stopped waiting for a copy (another answered first).
      The copy is left to finish, as the store does the work and charges it anyway;
      ``units`` is what it consumed (0 if it failed), and ``at`` when it finished.

    ``units`` is 0 for ``sent`` and ``won``; ``at`` is the store clock's seconds.
    """

    namespace: str
    key: str
    outcome: HedgeOutcome
    units: float
    at: float


class FanOutRead(NamedTuple):
    """One read of logical key ``value`` fanned out to ``width`` shard keys at once.

    ``kind``: ``page`` (a query page), ``scan`` or ``count``; ``at``: the store
    clock's seconds. Each shard read is also a request with its own ``Usage``.
    """

    namespace: str
    value: str
    width: int
    kind: str
    at: float


Subscriber = Callable[[Any], None]
_new = tuple.__new__


@dataclass(slots=True)
class Counts:
    """Requests, units and throttles of one key, one partition or one store: the counter record.

    A throttled request counts as a request and a throttle, with the units it consumed
    (0 for every store that shardex knows). ``hedges_*`` count the ``Hedge`` events of
    hedged reads, and ``cancelled_units`` the units of the copies no one waited for
    (already counted in ``read_units`` too).
    """

    read_requests: int = 0
    write_requests: int = 0
    read_units: float = 0.0
    write_units: float = 0.0
    read_throttles: int = 0
    write_throttles: int = 0
    hedges_sent: int = 0
    hedges_won: int = 0
    hedges_cancelled: int = 0
    cancelled_units: float = 0.0

    def count(self, write: bool, units: float, throttled: bool) -> None:
        """Count one request."""
        if write:
            self.write_requests += 1
            self.write_units += units
            if throttled:
                self.write_throttles += 1
        else:
            self.read_requests += 1
            self.read_units += units
            if throttled:
                self.read_throttles += 1

    def hedge(self, outcome: HedgeOutcome, units: float) -> None:
        """Count one ``Hedge`` event."""
        if outcome == "sent":
            self.hedges_sent += 1
        elif outcome == "won":
            self.hedges_won += 1
        else:
            self.hedges_cancelled += 1
            self.cancelled_units += units

    @property
    def requests(self) -> int:
        return self.read_requests + self.write_requests

    @property
    def units(self) -> float:
        return self.read_units + self.write_units

    @property
    def throttles(self) -> int:
        return self.read_throttles + self.write_throttles

    def absorb(self, other: Counts) -> None:
        """Add the counts of ``other`` to these."""
        self.read_requests += other.read_requests
        self.write_requests += other.write_requests
        self.read_units += other.read_units
        self.write_units += other.write_units
        self.read_throttles += other.read_throttles
        self.write_throttles += other.write_throttles
        self.hedges_sent += other.hedges_sent
        self.hedges_won += other.hedges_won
        self.hedges_cancelled += other.hedges_cancelled
        self.cancelled_units += other.cancelled_units


def split_units(units: float, weights: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    """Share ``units`` over keys in proportion to their weights: the one rule for it.

    DynamoDB reports one total for a transaction; it charges each item by its size, so
    weights that are the items' own write units give each key its exact part. Weights
    that are all zero share equally.
    """
    whole = sum(weight for _, weight in weights)
    if whole <= 0:
        return [(key, units / len(weights)) for key, _ in weights]
    return [(key, units * weight / whole) for key, weight in weights]


class Meter:
    """The event hub of one store: subscribers receive every event it emits, in order.

    It also knows whether the store answers (``quiet``): how many requests are in
    flight, and since when the store has been asked without an answer.
    """

    __slots__ = ("__weakref__", "_since", "_subscribers", "in_flight")

    def __init__(self) -> None:
        self._subscribers: tuple[Subscriber, ...] = ()
        self.in_flight = 0  # requests sent and not ended
        # when a request went out with no answer since (None: the store has answered
        # every request that ended, or was asked nothing)
        self._since: float | None = None
        _METERS.add(self)

    def quiet(self, now: float) -> float:
        """Seconds the store has been asked without answering (0: it answers).

        Counted from the first request sent since its last answer, on the store's clock
        (``now``), through the tries a request that timed out or found no connection is
        given: those ended without an answer. An answer is any reply, a throttle or a
        refused condition too; a request cancelled with nothing else in flight ends the
        wait (nobody waits on the store then).
        """
        return 0.0 if self._since is None else max(0.0, now - self._since)

    def sent(self, now: float) -> None:
        """A request went out at ``now`` (``Recorder.request``; ``Store.open`` for its
        connection's checks, which no ``Usage`` reports)."""
        if self._since is None:
            self._since = now
        self.in_flight += 1

    def ended(self, outcome: Outcome, now: float) -> None:
        """A request sent before ended at ``now`` with ``outcome``."""
        self.in_flight -= 1
        if outcome in _ANSWERS:
            self._since = now if self.in_flight else None
        elif outcome == "cancelled" and not self.in_flight:
            self._since = None

    @contextlib.contextmanager
    def asked(self, clock: Clock) -> Iterator[None]:
        """Count the request made inside for ``quiet``, though no ``Usage`` reports it: a
        store's connection checks (``Store.open``), an adoption's own Scan, UpdateItem
        and DescribeTable. An error raised inside (mapped to shardex's) says how it ended:
        Unavailable is no answer, a cancel ends the wait, any other error is an answer."""
        self.sent(clock.now())
        outcome: Outcome = "failed"
        try:
            yield
            outcome = "ok"
        except Unavailable:
            outcome = "unavailable"
            raise
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        finally:
            self.ended(outcome, clock.now())

    def subscribe(self, subscriber: Subscriber) -> None:
        """Call ``subscriber(event)`` for every event from now on."""
        self._subscribers += (subscriber,)

    def unsubscribe(self, subscriber: Subscriber) -> None:
        """Stop calling ``subscriber``; unknown subscribers are ignored."""
        self._subscribers = tuple(s for s in self._subscribers if s != subscriber)

    @property
    def subscribers(self) -> tuple[Subscriber, ...]:
        return self._subscribers

    def emit(self, event: Any) -> None:
        """Hand ``event`` to every subscriber."""
        for subscriber in self._subscribers:
            subscriber(event)


# every store's meter in this process (a command line watches them all: ``quiet``)
_METERS: weakref.WeakSet[Meter] = weakref.WeakSet()
# the outcomes of a request the store replied to
_ANSWERS = frozenset({"ok", "conflict", "throttled", "failed"})


def quiet(now: float) -> float:
    """The longest any store of this process has been asked without answering, in seconds
    (``Meter.quiet``; ``now`` on the stores' clock)."""
    return max((meter.quiet(now) for meter in list(_METERS)), default=0.0)


@contextlib.contextmanager
def collect_skipped() -> Iterator[list[Skipped]]:
    """Collect the malformed items the reads of this call skip, in the list it yields.

    The reads of a call spread over tasks (one per shard, hedged copies): each task
    started inside the ``with`` appends to the same list. For a coroutine's own use
    (``ShardedIndex.query`` fills ``Page.skipped`` with it), not an async generator's.
    """
    found: list[Skipped] = []
    token = _SKIPPED.set(found)
    try:
        yield found
    finally:
        _SKIPPED.reset(token)


def collected(skipped: Sequence[Skipped]) -> None:
    """Put ``skipped`` (what a request read ahead left out) on the call under way, if it
    collects (``collect_skipped``): the page that takes the entries read ahead reports
    the malformed items their reads skipped."""
    found = _SKIPPED.get()
    if found is not None:
        found.extend(skipped)


def detached() -> contextvars.Context:
    """A copy of the current context in which reads collect their skipped items for no call.

    For a request sent ahead of any call that will return its entries (a listing's read
    ahead): what it skips is still counted and logged, but not put on the page of the
    call that happened to send it, which has returned already.
    """
    context = contextvars.copy_context()
    context.run(_SKIPPED.set, None)
    return context


class Recorder:
    """What one call of a store's public method consumed, request by request.

    Made by ``Store`` for each call and used as a context manager around the backend's
    hook: on exit it emits the request in flight, with the outcome the exception (if
    any) gives it. Nothing is emitted for a call that sent no request. ``skip``: the
    call leaves malformed items out of its listing (``malformed``) rather than raise.
    """

    __slots__ = ("_clock", "_key", "_meter", "_namespace", "_shares", "_skip", "_start",
                 "_units", "_used", "_write", "read", "skipped", "written")

    def __init__(self, meter: Meter, clock: Clock, namespace: str, key: str,
                 write: bool, skip: bool = False) -> None:
        self._meter = meter
        self._clock = clock
        self._namespace = namespace
        self._key = key
        self._write = write
        self._skip = skip
        self._shares: list[Share] = []
        self._units = 0.0
        self._start = 0.0
        self._used = False
        self.read = 0.0  # read units consumed by the whole call
        self.written = 0.0  # write units consumed by the whole call
        self.skipped: list[Skipped] = []  # malformed items the call left out

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._used:
            self._end(exc)

    def refused(self, exc: BaseException) -> None:
        """End the request in flight with ``exc``, a refusal the store returned rather than
        raised, as ``__exit__`` would have ended it (which then reports nothing more)."""
        if self._used:
            self._end(exc)
            self._used = False

    def _end(self, exc: BaseException | None) -> None:
        reason = None
        if exc is None:
            outcome: Outcome = "ok"
        elif isinstance(exc, Throttled):
            if exc.key is not None:
                self._key = exc.key
            outcome, reason = "throttled", exc.reason
            if reason is None:
                reason = "unknown"
        elif isinstance(exc, ConditionFailed):
            outcome = "conflict"
        elif isinstance(exc, Unavailable):
            outcome = "ambiguous" if self._shares else "unavailable"
        elif isinstance(exc, asyncio.CancelledError):
            outcome = "cancelled"
        else:
            outcome = "failed"
        self._emit(outcome, reason)

    def request(self, key: str | None = None, *, write: bool | None = None) -> None:
        """Mark that a request is sent now (ending the one before it, which succeeded)."""
        if self._used:
            self._emit("ok")
            self._shares = []
            self._units = 0.0
        self._used = True
        self._start = start = self._clock.now()
        meter = self._meter  # Meter.sent, inline: one call less on every request
        if meter._since is None:
            meter._since = start
        meter.in_flight += 1
        if key is not None:
            self._key = key
        if write is not None:
            self._write = write

    def charge(self, key: str, units: float, partition: str | None = None) -> None:
        """Report ``units`` consumed on ``key`` by the request in flight."""
        if not self._used:
            self.request()
        # tuple.__new__ builds the named tuple without its Python-level __new__: this
        # runs for every key of every request
        self._shares.append(_new(Share, (key, units, partition)))
        self._units += units

    def charges(self, shares: Sequence[tuple[str, float, str | None]]) -> None:
        """Report several ``(key, units, partition)`` at once (``charge`` for each)."""
        if not self._used:
            self.request()
        append = self._shares.append
        for share in shares:
            append(_new(Share, share))
            self._units += share[1]

    def malformed(self, error: MalformedItem, item_id: str) -> None:
        """A listed item the store cannot read as an entry: raise, or leave it out.

        Raises MalformedItem naming the item and the shard key read (and the option that
        skips such items), unless the call skips them: then the item is left out of the
        page, kept in ``skipped``, logged as a warning and emitted on the meter as a
        ``Skipped`` event, which ``store.stats()`` and the metrics count. Never silent.
        """
        key = self._key
        if not self._skip:
            raise MalformedItem(f"{error} (listed under shard key {key!r}; "
                                "ShardedIndex(..., malformed='skip') leaves such items out "
                                "and reports them)", item_id=item_id, key=key) from error
        skipped = _new(Skipped, (self._namespace, key, item_id, str(error),
                                 self._clock.now()))
        self.skipped.append(skipped)
        collected = _SKIPPED.get()
        if collected is not None:
            collected.append(skipped)
        log.warning("skipped a malformed item listed under shard key %r: %s", key, error)
        self._meter.emit(skipped)

    def share(self, units: float, weights: Sequence[tuple[str, float]]) -> None:
        """Report one total for the request in flight, shared over keys by weight."""
        for key, part in split_units(units, weights):
            self.charge(key, part)

    def _emit(self, outcome: Outcome, reason: str | None = None) -> None:
        if self._write:
            self.written += self._units
        else:
            self.read += self._units
        end = self._clock.now()
        meter = self._meter
        meter.in_flight -= 1  # Meter.ended, inline: one call less on every request
        if outcome in _ANSWERS:
            meter._since = end if meter.in_flight else None
        elif outcome == "cancelled" and not meter.in_flight:
            meter._since = None
        usage = _new(Usage, (self._namespace, self._key, self._write, outcome, self._units,
                             tuple(self._shares), self._start, end, reason))
        for subscriber in meter._subscribers:  # Meter.emit, less two calls a request
            subscriber(usage)
