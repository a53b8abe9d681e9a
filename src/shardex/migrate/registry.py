"""Every migration recorded in a store: one record per reshard or adoption, for listing.

A migration's start writes ``migration/INDEX/ID`` (its index, kind, values and start
time) in the store's ``shardex-migrations`` namespace, beside its own records; when it
ends the runner notes how (``stable`` or ``rolled-back``; an adoption's routing keeps
its end state itself). ``migrations`` lists them all with the state each is in now: the
live state from its index's routing record while it is under way, the noted end after.
Writes are best effort past the start: a listing never blocks or fails a migration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from shardex.errors import ConditionFailed, MalformedItem, ShardexError
from shardex.migrate.states import state_of
from shardex.routing import Routing
from shardex.routing_record import RoutingRecord
from shardex.stores.base import Store

__all__ = ["MIGRATIONS", "Listed", "finish_migration", "migrations", "record_migration"]

MIGRATIONS = "shardex-migrations"  # the namespace: index records use prefixes it never has
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


def _key(index: str, migration: str) -> str:
    return f"{_PREFIX}{index}/{migration}"


async def record_migration(store: Store, index: str, kind: Kind, migration: str,
                           values: tuple[str, ...] | list[str], now: float) -> None:
    """Record that ``migration`` of ``index`` started (once: a second call is a no-op)."""
    body = {"index": index, "kind": kind, "id": migration, "values": list(values),
            "started_at": now, "ended": None, "ended_at": None}
    try:
        await store.put_record(MIGRATIONS, _key(index, migration), body, expected=None)
    except ConditionFailed:
        return  # recorded already (a start resumed after a crash)


async def finish_migration(store: Store, index: str, migration: str, how: str,
                           now: float) -> None:
    """Note how ``migration`` ended (best effort: a lost note shows as ``ended``)."""
    try:
        found = await store.get_record(MIGRATIONS, _key(index, migration))
        if found is None:
            return
        await store.put_record(MIGRATIONS, _key(index, migration),
                               {**found.body, "ended": how, "ended_at": now},
                               expected=found.revision)
    except ShardexError:
        return


def _state(routing: Routing | None, kind: str, migration: str, ended: Any) -> str:
    if routing is not None and kind == "adoption" and routing.adoption is not None \
            and routing.adoption.id == migration:
        return routing.adoption.state
    if routing is not None and routing.reshard is not None and routing.reshard.id == migration:
        return f"{state_of(routing)} ({routing.reshard.direction})"
    return ended if isinstance(ended, str) else "ended"


async def migrations(store: Store) -> list[Listed]:
    """Every migration recorded in ``store``, oldest first, with the state it is in now."""
    found = await store.list_records(MIGRATIONS, _PREFIX)
    routings: dict[str, Routing | None] = {}
    listed = []
    for key, record in found.items():
        body = record.body
        try:
            index, kind, migration = str(body["index"]), str(body["kind"]), str(body["id"])
            values, started = tuple(map(str, body["values"])), float(body["started_at"])
            ended_at = None if body.get("ended_at") is None else float(body["ended_at"])
        except (KeyError, TypeError, ValueError) as exc:
            raise MalformedItem(f"record {key!r} of {MIGRATIONS!r} in {store.uri} is not a "
                                f"migration ({type(exc).__name__}: {exc})") from None
        if index not in routings:
            routings[index] = (await RoutingRecord(store, index).read())[0]
        listed.append(Listed(index, kind, migration,
                             _state(routings[index], kind, migration, body.get("ended")),
                             values, started, ended_at))
    return sorted(listed, key=lambda m: (m.started_at, m.index, m.id))
