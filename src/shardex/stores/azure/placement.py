"""The cross-partition write of the Azure Tables store, the readers' ownership check, and repair.

An entity group transaction covers one partition, and an item's placement and its entry
rows live in different partitions, so ``place`` is several requests. The placement
entity is the single source of truth; its ETag-conditional replace (``If-Match``) is the
write's one commit point. Every entry row carries the token of the write that made it
and a status:

- ``p`` pending: written before its write's commit; owned only if the placement says so;
- ``c`` committed: its write committed, and no later write has begun to move it away;
- ``m`` moving: a later write has begun to replace it; owned only if the placement says so.

A write with token T that places ``entry`` over ``expected`` (located with ETag E):

1. upserts the new row pair (ascending and mirror) as pending(T), in one transaction of
   the new partition;
2. marks the old row pair moving (one transaction of the old partition);
3. replaces the placement with ``If-Match: E`` (inserts it when ``expected`` is None):
   the commit point. A failed condition means the write did not apply: its pending rows
   are deleted (when the placement does not own them) and ConditionFailed is raised;
4. deletes the old row pair; 5. marks the new row pair committed, ``If-Match`` on the
   ETags of step 1 (so a later write that has already marked it moving wins).

Steps 4 and 5 are tidying: once step 3 succeeded the write applied, and a failure after
it is not reported (the rows it leaves are checked by readers and removed by repair).
A timeout at step 3 raises Unavailable: the write may have applied, which the write loop
resolves by the token in the placement.

**Readers** (``owned``) keep a committed row as it is and check every other row against
the item's placement (one point read an item, per page): a row is kept only if the
placement's token is the row's and it names the row's shard key and position. Why a
committed row needs no check: it is marked committed (step 5) only after its write
committed, and only if unchanged since step 1, while every later write marks it moving
(step 2) before its own commit; so a committed row is always the one its placement names.
At every instant each placed item therefore has exactly one row pair that readers keep,
the placement's, and none is kept for a deleted item: never two values, never none.

**Repair** (``repair``) removes what crashed or failed writes left (pending and moving
rows), without racing writers still in flight: a row its placement owns is marked
committed; a row whose write was superseded (its token is in the placement's history) is
deleted; any other row may belong to a write whose commit is still on its way, so repair
first *fences* it, replacing the placement with itself under ``If-Match`` (a new ETag, so
no commit conditioned on the old one can land; for an item never placed, a tombstone at
version 0), and only then deletes the row. A moving row that its placement still owns is
fenced the same way before it is marked committed again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from shardex.errors import ConditionFailed, NotFound, StoreError, Unavailable
from shardex.keys import placement_key
from shardex.stores.azure import codec, keys
from shardex.stores.azure.client import Row
from shardex.stores.base import Placement, StoredEntry, history_after, new_token
from shardex.stores.metered import Recorder

__all__ = ["Call", "Placer", "RepairReport", "owner_of"]

log = logging.getLogger("shardex.azure")

# The store's request path: ``await call(rec, key, operation, units, write, **params)``
# sends one request, maps its errors and reports ``units`` entities on ``key``.
Call = Callable[..., Awaitable[Any]]


@dataclass(slots=True)
class RepairReport:
    """What ``repair`` found and did: rows checked, committed, deleted; placements fenced."""

    checked: int = 0
    committed: int = 0
    deleted: int = 0
    fenced: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)


def owner_of(row: Mapping[str, Any], placement: Placement | None) -> bool:
    """True if ``placement`` names the write that made the entry row ``row`` (any status)."""
    if placement is None or placement.entry is None or placement.token != row.get("t"):
        return False
    entry = placement.entry
    return (entry.shard_key, entry.sort, entry.item_id) == (row.get("k"), row.get("s"),
                                                            row.get("id"))


def _etag(placement: Placement) -> str | None:
    """The ETag a placement was located with, while its version and token are unchanged."""
    located = dict(placement.located)
    if located.get("version") == placement.version and located.get("token") == placement.token:
        etag = located.get("etag")
        return etag if isinstance(etag, str) else None
    return None


class Placer:
    """Carries out ``place``, the ownership check and repair for one store's table."""

    def __init__(self, call: Call) -> None:
        self._call = call

    async def locate(self, rec: Recorder, namespace: str, item_id: str) -> Placement | None:
        partition = keys.placement_partition(namespace, item_id)
        found: Row | None = await self._call(rec, placement_key(item_id), "get", 1.0, False,
                                             partition=partition, row=codec.PLACEMENT_ROW)
        return None if found is None else codec.placement_from_entity(item_id, *found)

    # -- the write ------------------------------------------------------------------

    async def place(self, rec: Recorder, namespace: str, item_id: str,
                    entry: StoredEntry | None, version: int, expected: Placement | None,
                    token: str) -> None:
        etag = None
        if expected is not None:
            etag = _etag(expected) or await self._current_etag(rec, namespace, expected)
        old = expected.entry if expected is not None else None
        old_rows = None if old is None or expected is None or expected.token is None else \
            self._pair(namespace, old, expected.token)
        new_rows = None if entry is None else codec.entry_rows(
            keys.entry_partition(namespace, entry.shard_key), entry, token)
        if new_rows is not None and old_rows is not None \
                and new_rows[0]["RowKey"] == old_rows[0]["RowKey"] \
                and new_rows[0]["PartitionKey"] == old_rows[0]["PartitionKey"]:
            old_rows = None  # the same write again over its own rows: nothing to move away
        pending: list[str | None] = []
        if new_rows is not None and entry is not None:
            pending = await self._call(rec, entry.shard_key, "transact", 2.0, True,
                                       operations=[("upsert", row, None) for row in new_rows])
        placement = codec.placement_entity(keys.placement_partition(namespace, item_id),
                                           item_id, version, entry, token,
                                           history_after(expected))
        try:
            if old_rows is not None and old is not None:
                await self._mark_moving(rec, old.shard_key, old_rows, token)
        except StoreError:
            await self._abandon(rec, entry, new_rows, item_id)
            raise
        try:
            if etag is None:
                await self._call(rec, placement_key(item_id), "create", 1.0, True,
                                 entity=placement)
            else:
                await self._call(rec, placement_key(item_id), "update", 1.0, True,
                                 entity=placement, etag=etag, merge=False)
        except ConditionFailed:
            if not await self._landed_before(rec, namespace, item_id, entry, token, new_rows):
                raise
        except StoreError as exc:
            if not isinstance(exc, Unavailable):  # refused before it ran: it never will
                await self._abandon(rec, entry, new_rows, item_id)
            raise
        if old_rows is not None and old is not None:
            await self._tidy(rec, old.shard_key, "delete old rows of",
                             [("delete", row, None) for row in old_rows], item_id)
        if new_rows is not None and entry is not None:
            await self._tidy(rec, entry.shard_key, "commit the rows of",
                             [("merge", {**_keys(row), "st": codec.COMMITTED}, etag_)
                              for row, etag_ in zip(new_rows, pending, strict=True)], item_id)

    def _pair(self, namespace: str, entry: StoredEntry, token: str) -> list[dict[str, Any]]:
        partition = keys.entry_partition(namespace, entry.shard_key)
        return [{"PartitionKey": partition,
                 "RowKey": keys.row_key(entry.sort, entry.item_id, token, descending=d)}
                for d in (False, True)]

    async def _current_etag(self, rec: Recorder, namespace: str, expected: Placement) -> str:
        """The ETag of the placement if it still has the expected version and token."""
        current = await self.locate(rec, namespace, expected.item_id)
        if current is None or (current.version, current.token) != (expected.version,
                                                                   expected.token):
            raise ConditionFailed(f"the placement of item {expected.item_id!r} is no longer "
                                  f"at version {expected.version} by write {expected.token!r}")
        etag = _etag(current)
        assert etag is not None
        return etag

    async def _mark_moving(self, rec: Recorder, shard_key: str, rows: list[dict[str, Any]],
                           token: str) -> None:
        try:
            await self._call(rec, shard_key, "transact", 2.0, True,
                             operations=[("merge", {**row, "st": codec.MOVING, "mv": token},
                                          None) for row in rows])
        except NotFound:
            # the rows are gone: the placement moved on (the commit fails below) or lost
            # them, and a write that replaces it heals the item
            log.warning("the entry rows %s of the placement being replaced are missing",
                        rows[0]["RowKey"])

    async def _landed_before(self, rec: Recorder, namespace: str, item_id: str,
                             entry: StoredEntry | None, token: str,
                             new_rows: list[dict[str, Any]] | None) -> bool:
        """After a failed commit: True if this very write had landed (a retried request).

        Otherwise the write did not apply: its pending rows, which the placement does not
        own, are deleted (best effort; repair removes what is left).
        """
        try:
            current = await self.locate(rec, namespace, item_id)
        except StoreError:
            return False
        if current is not None and current.token == token and (
                current.entry is None if new_rows is None else owner_of(new_rows[0], current)):
            return True
        if current is None or new_rows is None or not owner_of(new_rows[0], current):
            await self._abandon(rec, entry, new_rows, item_id)
        return False

    async def _abandon(self, rec: Recorder, entry: StoredEntry | None,
                       new_rows: list[dict[str, Any]] | None, item_id: str) -> None:
        """Delete the pending rows of a write whose commit was refused or never sent."""
        if new_rows is not None and entry is not None:
            await self._tidy(rec, entry.shard_key, "remove the pending rows of",
                             [("delete", _keys(row), None) for row in new_rows], item_id)

    async def _tidy(self, rec: Recorder, shard_key: str, what: str,
                    operations: list[tuple[str, dict[str, Any], str | None]],
                    item_id: str) -> None:
        """A request after the commit point: its failure changes no outcome, only tidiness."""
        try:
            await self._call(rec, shard_key, "transact", float(len(operations)), True,
                             operations=operations)
        except (ConditionFailed, NotFound):
            pass  # a later write or repair got there first
        except StoreError as exc:
            log.info("could not %s item %r (readers check them; repair removes them): %s",
                     what, item_id, exc)

    # -- the readers' check ---------------------------------------------------------

    async def owned(self, rec: Recorder, namespace: str, rows: Iterable[dict[str, Any]]
                    ) -> list[bool]:
        """For each entry row: does its placement own it? Committed rows need no read."""
        placements: dict[str, Placement | None] = {}
        verdicts = []
        for row in rows:
            if row.get("st") == codec.COMMITTED:
                verdicts.append(True)
                continue
            item_id = row.get("id")
            if not isinstance(item_id, str):
                verdicts.append(False)
                continue
            if item_id not in placements:
                placements[item_id] = await self.locate(rec, namespace, item_id)
            verdicts.append(owner_of(row, placements[item_id]))
        return verdicts

    # -- repair ---------------------------------------------------------------------

    async def repair_rows(self, rec: Recorder, namespace: str, rows: list[Row],
                          report: RepairReport) -> None:
        """Commit, or fence and delete, the uncommitted entry rows ``rows`` (see the module)."""
        pairs: dict[tuple[str, str, str], list[Row]] = {}
        for row in rows:
            props = row[0]
            try:
                position = keys.decode_position(props["RowKey"])
            except (KeyError, StoreError, ValueError):
                report.skipped += 1
                continue
            pairs.setdefault((props["PartitionKey"], props.get("t", ""), repr(position)),
                             []).append(row)
        for pair in pairs.values():
            report.checked += len(pair)
            try:
                await self._repair_pair(rec, namespace, pair, report)
            except (ConditionFailed, NotFound):
                report.skipped += len(pair)  # a writer changed it meanwhile: next run
            except StoreError as exc:
                report.errors.append(f"{pair[0][0].get('RowKey')}: {exc}")

    async def _repair_pair(self, rec: Recorder, namespace: str, pair: list[Row],
                           report: RepairReport) -> None:
        props = pair[0][0]
        item_id, shard_key = str(props.get("id")), str(props.get("k"))
        current = await self.locate(rec, namespace, item_id)
        operations: list[tuple[str, dict[str, Any], str | None]]
        if owner_of(props, current):
            if any(row[0].get("st") == codec.MOVING for row in pair):
                assert current is not None
                await self._fence(rec, namespace, item_id, current)
                report.fenced += 1
            operations = [("merge", {**_keys(row[0]), "st": codec.COMMITTED}, row[1])
                          for row in pair]
            await self._call(rec, shard_key, "transact", float(len(pair)), True,
                             operations=operations)
            report.committed += len(pair)
            return
        superseded = current is not None and props.get("t") in current.chain
        if not superseded:
            await self._fence(rec, namespace, item_id, current)
            report.fenced += 1
        await self._call(rec, shard_key, "transact", float(len(pair)), True,
                         operations=[("delete", _keys(row[0]), row[1]) for row in pair])
        report.deleted += len(pair)

    async def _fence(self, rec: Recorder, namespace: str, item_id: str,
                     current: Placement | None) -> None:
        """Give the placement a new ETag, so no write conditioned on the old one commits."""
        partition = keys.placement_partition(namespace, item_id)
        if current is None:
            entity = codec.placement_entity(partition, item_id, 0, None, new_token(),
                                            history_after(None))
            await self._call(rec, placement_key(item_id), "create", 1.0, True, entity=entity)
            return
        etag = _etag(current)
        entity = codec.placement_entity(partition, item_id, current.version, current.entry,
                                        current.token or new_token(), current.history)
        await self._call(rec, placement_key(item_id), "update", 1.0, True, entity=entity,
                         etag=etag, merge=False)


def _keys(row: Mapping[str, Any]) -> dict[str, Any]:
    return {"PartitionKey": row["PartitionKey"], "RowKey": row["RowKey"]}
