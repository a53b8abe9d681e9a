"""Every migration recorded for an index: one record per reshard or adoption, for listing.

A migration's start writes ``migration/ID`` (its kind, values and start time) among the
index's own records (a store holds its indexes' records apart, and a DynamoDB table in
index-table mode holds one index alone, so the record lives with its index); when it
ends the runner notes how (``stable`` or ``rolled-back``; an adoption's routing keeps
its end state itself). ``migrations`` lists those of the indexes named with the state
each is in now: the live state from the index's routing record while it is under way,
the noted end after. Its writes are retried patiently and best effort: a listing never
fails a migration. Clean-ups of work records leave these alone (another prefix).
"""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass
from typing import Any, Literal

from shardex.clock import Clock
from shardex.errors import MalformedItem, ShardexError
from shardex.migrate.layouts import PATIENT
from shardex.migrate.states import state_of
from shardex.retry import call_with_retry
from shardex.routing import Routing
from shardex.routing_record import RoutingRecord
from shardex.stores.base import Store

__all__ = ["Listed", "finish_migration", "migrations", "record_migration"]

_PREFIX = "migration/"
Kind = Literal["reshard", "adoption"]


@dataclass(frozen=True, slots=True)
class Listed:
    """One migration of a store: index, kind, id, state now, values and times (wall s)."""

    index: str
    kind: str
    id: str
    state: str
    values: tuple[str, ...]
    started_at: float
    ended_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "kind": self.kind, "id": self.id, "state": self.state,
                "values": list(self.values), "started_at": self.started_at,
                "ended_at": self.ended_at}


def _key(migration: str) -> str:
    return f"{_PREFIX}{migration}"


async def record_migration(store: Store, index: str, kind: Kind, migration: str,
                           values: tuple[str, ...] | list[str], *, clock: Clock,
                           rng: random.Random) -> None:
    """Record that ``migration`` of ``index`` started (once: a second call is a no-op).

    Retried under a patient policy; a store that still refuses leaves the migration
    unlisted rather than failing it.
    """
    body = {"kind": kind, "id": migration, "values": list(values), "started_at": clock.wall(),
            "ended": None, "ended_at": None}
    with contextlib.suppress(ShardexError):  # ConditionFailed: recorded already (a resumed start)
        await call_with_retry(lambda: store.put_record(index, _key(migration), body,
                                                       expected=None),
                              PATIENT, clock=clock, rng=rng)


async def finish_migration(store: Store, index: str, migration: str, how: str, *,
                           clock: Clock, rng: random.Random) -> None:
    """Note how ``migration`` ended, once (best effort: a lost note shows as ``ended``)."""
    async def note() -> None:
        found = await store.get_record(index, _key(migration))
        if found is not None and found.body.get("ended") is None:
            await store.put_record(index, _key(migration),
                                   {**found.body, "ended": how, "ended_at": clock.wall()},
                                   expected=found.revision)

    with contextlib.suppress(ShardexError):
        await call_with_retry(note, PATIENT, clock=clock, rng=rng)


def _state(routing: Routing | None, kind: str, migration: str, ended: Any) -> str:
    if routing is not None and kind == "adoption" and routing.adoption is not None \
            and routing.adoption.id == migration:
        return routing.adoption.stage
    if routing is not None and routing.reshard is not None and routing.reshard.id == migration:
        return f"{state_of(routing)} ({routing.reshard.direction})"
    return ended if isinstance(ended, str) else "ended"


async def migrations(store: Store, indexes: list[str] | tuple[str, ...]) -> list[Listed]:
    """Every migration recorded for ``indexes`` in ``store``, oldest first, with its state now."""
    listed = []
    for index in dict.fromkeys(indexes):
        routing = (await RoutingRecord(store, index).read())[0]
        for key, record in (await store.list_records(index, _PREFIX)).items():
            body = record.body
            try:
                kind, migration = str(body["kind"]), str(body["id"])
                values, started = tuple(map(str, body["values"])), float(body["started_at"])
                ended_at = None if body.get("ended_at") is None else float(body["ended_at"])
            except (KeyError, TypeError, ValueError) as exc:
                raise MalformedItem(f"record {key!r} of index {index!r} in {store.uri} is not "
                                    f"a migration ({type(exc).__name__}: {exc})") from None
            listed.append(Listed(index, kind, migration,
                                 _state(routing, kind, migration, body.get("ended")),
                                 values, started, ended_at))
    return sorted(listed, key=lambda m: (m.started_at, m.index, m.id))
