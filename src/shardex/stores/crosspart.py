"""The cross-partition write, the readers' ownership check and repair, for stores without
a transaction across partitions (Azure Table Storage, Cosmos DB).

A transaction there covers one partition, and an item's placement and its entry live in
different partitions (the placement under the item, the entry under its shard key), so
``place`` is several requests. The placement is the single source of truth; its
ETag-conditional replace (``If-Match``) is the write's one commit point. An entry is
written as one or more *rows* in its shard key's partition (Azure: an ascending row and
its mirror, in one entity group transaction; Cosmos DB: one document), each carrying the
token of the write that made it and a status:

- ``p`` pending: written before its write's commit; owned only if the placement says so;
- ``c`` committed: its write committed, and no later write has begun to move it away;
- ``m`` moving: a later write has begun to replace it; owned only if the placement says so.

A write with token T that places ``entry`` over ``expected`` (located with ETag E):

1. writes the new rows as pending(T), in one request to the new partition;
2. marks the old rows moving (``st`` = m, ``mv`` = T; one request to the old partition);
3. replaces the placement with ``If-Match: E`` (creates it when ``expected`` is None):
   the commit point. A failed condition means the write did not apply: its pending rows
   are deleted (when the placement does not own them) and ConditionFailed is raised;
4. deletes the old rows; 5. marks the new rows committed, ``If-Match`` on the ETags of
   step 1 (so a later write that has already marked them moving wins).

Steps 4 and 5 are tidying: once step 3 succeeded the write applied, and a failure after
it is not reported (the rows it leaves are checked by readers and removed by repair).
A timeout at step 3 raises Unavailable: the write may have applied, which the write loop
resolves by the token in the placement.

**Readers** (``Placer.owned``) keep a committed row as it is and check every other row
against the item's placement (one point read an item, per page): a row is kept only if
the placement's token is the row's and it names the row's shard key and position. Why a
committed row needs no check: it is marked committed (step 5) only after its write
committed, and only if unchanged since step 1, while every later write marks it moving
(step 2) before its own commit; so a committed row is always the one its placement names.
At every instant each placed item therefore has exactly one entry that readers keep, the
placement's, and none is kept for a deleted item: never two values, never none. A query
reads an item's rows at one instant and its placement at a later one, so where any of an
item's rows read is not committed (a write of it is under way), all of them are held
against the placement, the committed one too, and a row at the position of the
placement's entry that the placement no longer owns (the item written there again
meanwhile) stands for that entry: one read then keeps one entry of the item, where it
had kept two (a committed row read before the write marked it moving) or none.

**Repair** (``Placer.repair``) removes what crashed or failed writes left (pending and
moving rows), without racing writers still in flight: rows their placement owns are
marked committed; rows whose write was superseded (its token is in the placement's
history) are deleted; any other rows may belong to a write whose commit is still on its
way, so repair first *fences* them, replacing the placement with itself under
``If-Match`` (a new ETag, so no commit conditioned on the old one can land; for an item
never placed, a tombstone at version 0), and only then deletes them. Moving rows that
their placement still owns are fenced the same way before they are marked committed
again.

A store supplies its format and its requests as a ``Rows`` (``shardex.stores.azure.
placement``, ``shardex.stores.cosmos.placement``); ``Placer`` carries out the protocol.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from shardex.errors import (
    ConditionFailed,
    MalformedItem,
    NotFound,
    ShardexError,
    StoreError,
    Unavailable,
)
from shardex.model.entries import Placement, StoredEntry, history_after, new_token
from shardex.stores.metered import Recorder

__all__ = [
    "COMMITTED",
    "MOVING",
    "PENDING",
    "Placer",
    "RepairReport",
    "Rows",
    "located_etag",
    "owner_of",
]

PENDING, COMMITTED, MOVING = "p", "c", "m"

# An entry row's (or document's) fields, and the ETag it was read with.
Row = dict[str, Any]
ReadRow = tuple[Mapping[str, Any], str | None]


@dataclass(slots=True)
class RepairReport:
    """What ``repair`` found and did: rows checked, committed, deleted; placements fenced."""

    checked: int = 0
    committed: int = 0
    deleted: int = 0
    fenced: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)


def owner_of(row: Mapping[str, Any], placement: Placement | None, *,
             item_field: str = "id") -> bool:
    """True if ``placement`` names the write that made the entry row ``row`` (any status).

    ``item_field`` is the row's field that holds the item id.
    """
    if placement is None or placement.entry is None or placement.token != row.get("t"):
        return False
    entry = placement.entry
    return (entry.shard_key, entry.sort, entry.item_id) == (row.get("k"), row.get("s"),
                                                            row.get(item_field))


def located_etag(placement: Placement) -> str | None:
    """The ETag a placement was located with, while its version and token are unchanged."""
    located = dict(placement.located)
    if located.get("version") == placement.version and located.get("token") == placement.token:
        etag = located.get("etag")
        return etag if isinstance(etag, str) else None
    return None


class Rows(Protocol):
    """What a store supplies to ``Placer``: its row format and the protocol's requests.

    Every request goes through the store's request path (errors mapped, units metered on
    the key named). Row fields the protocol reads: ``k`` shard key, ``s`` sort, the item
    id (``item_field``), ``t`` token, ``st`` status.
    """

    item_field: str  # the field of a row that holds its item id
    log: logging.Logger

    async def locate(self, rec: Recorder, namespace: str, item_id: str) -> Placement | None:
        """One point read of the item's placement; its ETag in ``located``."""

    def new_rows(self, namespace: str, entry: StoredEntry, token: str) -> list[Row]:
        """The rows of ``entry`` written by ``token``, pending (checked: no request yet)."""

    def old_rows(self, namespace: str, entry: StoredEntry, token: str) -> list[Row]:
        """The keys of the rows that the write ``token`` made for ``entry``."""

    def key(self, row: Mapping[str, Any]) -> tuple[str, str]:
        """Where a row is: its partition and its key within it."""

    def group(self, row: Mapping[str, Any]) -> Hashable | None:
        """What the rows of one write of one entry share (None: not an entry row)."""

    def placement(self, namespace: str, item_id: str, version: int, entry: StoredEntry | None,
                  token: str, history: tuple[str, ...]) -> Row:
        """The placement of a write (a tombstone when ``entry`` is None), checked."""

    async def write_pending(self, rec: Recorder, shard_key: str,
                            rows: list[Row]) -> list[str | None]:
        """Write ``rows`` (insert or replace) in one request; their ETags."""

    async def mark_moving(self, rec: Recorder, shard_key: str, rows: list[Row],
                          token: str) -> None:
        """Set ``st`` = m and ``mv`` = ``token`` on ``rows``; NotFound if they are gone."""

    async def commit_rows(self, rec: Recorder, shard_key: str, rows: Sequence[Mapping[str, Any]],
                          etags: Sequence[str | None]) -> None:
        """Set ``st`` = c on ``rows``, each ``If-Match`` its ETag (None: unconditional)."""

    async def delete_rows(self, rec: Recorder, shard_key: str, rows: Sequence[Mapping[str, Any]],
                          etags: Sequence[str | None]) -> None:
        """Delete ``rows``, each ``If-Match`` its ETag (None: unconditional)."""

    async def create_placement(self, rec: Recorder, item_id: str, placement: Row) -> None:
        """Insert the placement; ConditionFailed if one exists."""

    async def replace_placement(self, rec: Recorder, item_id: str, placement: Row,
                                etag: str | None) -> None:
        """Replace the placement ``If-Match: etag`` (None: unconditional)."""


class Placer:
    """Carries out ``place``, the ownership check and repair over one store's ``Rows``."""

    def __init__(self, rows: Rows) -> None:
        self._rows = rows

    async def locate(self, rec: Recorder, namespace: str, item_id: str) -> Placement | None:
        """One point read of the item's placement."""
        return await self._rows.locate(rec, namespace, item_id)

    def _owns(self, row: Mapping[str, Any], placement: Placement | None) -> bool:
        return owner_of(row, placement, item_field=self._rows.item_field)

    # -- the write ------------------------------------------------------------------

    async def place(self, rec: Recorder, namespace: str, item_id: str,
                    entry: StoredEntry | None, version: int, expected: Placement | None,
                    token: str) -> None:
        """Steps 1 to 5 of the module docstring: up to five requests, one commit point."""
        fmt = self._rows
        old = expected.entry if expected is not None else None
        old_rows = None if old is None or expected is None or expected.token is None else \
            fmt.old_rows(namespace, old, expected.token)
        new_rows = None if entry is None else fmt.new_rows(namespace, entry, token)
        if new_rows is not None and old_rows is not None \
                and fmt.key(new_rows[0]) == fmt.key(old_rows[0]):
            old_rows = None  # the same write again over its own rows: nothing to move away
        placement = fmt.placement(namespace, item_id, version, entry, token,
                                  history_after(expected))
        try:
            etag = None
            if expected is not None:
                etag = located_etag(expected) or await self._current_etag(rec, namespace,
                                                                          expected)
            pending: list[str | None] = []
            if new_rows is not None and entry is not None:
                pending = await fmt.write_pending(rec, entry.shard_key, new_rows)
            missing = False
            try:
                if old_rows is not None and old is not None:
                    missing = await self._mark_moving(rec, old.shard_key, old_rows, token)
            except StoreError:
                await self._abandon(rec, entry, new_rows, item_id)
                raise
        except Unavailable as exc:
            # the commit (step 3) was not sent: the write did not apply, whatever landed
            raise Unavailable(f"{exc} (before the write's commit was sent: it did not "
                              "apply)", may_have_applied=False) from exc
        try:
            if etag is None:
                await fmt.create_placement(rec, item_id, placement)
            else:
                await fmt.replace_placement(rec, item_id, placement, etag)
        except ConditionFailed:
            if not await self._landed_before(rec, namespace, item_id, entry, token, new_rows):
                raise
        except StoreError as exc:
            if not isinstance(exc, Unavailable):  # refused before it ran: it never will
                await self._abandon(rec, entry, new_rows, item_id)
            raise
        if missing and old_rows is not None:
            # committed over a placement whose rows were gone (not a race another write
            # won: then the commit fails, and the write is planned again): it heals them
            fmt.log.warning("the entry rows %s of the placement this write replaced were "
                            "missing", fmt.key(old_rows[0])[1])
        if old_rows is not None and old is not None:
            await self._tidy("delete the old rows of", item_id, fmt.delete_rows(
                rec, old.shard_key, old_rows, [None] * len(old_rows)))
        if new_rows is not None and entry is not None:
            await self._tidy("commit the rows of", item_id, fmt.commit_rows(
                rec, entry.shard_key, new_rows, pending))

    async def _current_etag(self, rec: Recorder, namespace: str, expected: Placement) -> str:
        """The ETag of the placement if it still has the expected version and token."""
        current = await self.locate(rec, namespace, expected.item_id)
        if current is None or (current.version, current.token) != (expected.version,
                                                                   expected.token):
            raise ConditionFailed(f"the placement of item {expected.item_id!r} is no longer "
                                  f"at version {expected.version} by write {expected.token!r}")
        etag = located_etag(current)
        assert etag is not None
        return etag

    async def _mark_moving(self, rec: Recorder, shard_key: str, rows: list[Row],
                           token: str) -> bool:
        """Mark the rows of the placement being replaced; True if they are gone: the
        placement moved on (the commit fails) or lost them (the commit heals the item)."""
        try:
            await self._rows.mark_moving(rec, shard_key, rows, token)
        except NotFound:
            return True
        return False

    async def _landed_before(self, rec: Recorder, namespace: str, item_id: str,
                             entry: StoredEntry | None, token: str,
                             new_rows: list[Row] | None) -> bool:
        """After a failed commit: True if this very write had landed (a retried request).

        Otherwise the write did not apply: its pending rows, which the placement does not
        own, are deleted (best effort; repair removes what is left).
        """
        try:
            current = await self.locate(rec, namespace, item_id)
        except StoreError:
            return False
        if current is not None and current.token == token and (
                current.entry is None if new_rows is None else self._owns(new_rows[0], current)):
            return True
        if new_rows is None or not self._owns(new_rows[0], current):
            await self._abandon(rec, entry, new_rows, item_id)
        return False

    async def _abandon(self, rec: Recorder, entry: StoredEntry | None,
                       new_rows: list[Row] | None, item_id: str) -> None:
        """Delete the pending rows of a write whose commit was refused or never sent."""
        if new_rows is not None and entry is not None:
            await self._tidy("remove the pending rows of", item_id, self._rows.delete_rows(
                rec, entry.shard_key, new_rows, [None] * len(new_rows)))

    async def _tidy(self, what: str, item_id: str, request: Awaitable[None]) -> None:
        """A request after the commit point: its failure changes no outcome, only tidiness."""
        try:
            await request
        except (ConditionFailed, NotFound):
            pass  # a later write or repair got there first
        except ShardexError as exc:
            # any: a 400 (InvalidInput, not a StoreError) after the commit had failed a
            # write that applied (a probe, on Azurite and the Cosmos DB server)
            self._rows.log.info("could not %s item %r (readers check them; repair removes "
                                "them): %s", what, item_id, exc)

    # -- the readers' check ---------------------------------------------------------

    async def owned(self, rec: Recorder, namespace: str, rows: Iterable[Mapping[str, Any]]
                    ) -> list[bool | StoredEntry]:
        """For each entry row (one query's): True if readers keep it, False if not, or the
        placement's entry, which the row stands for.

        A committed row of an item none of whose rows here is in a write's hands needs no
        read. An item with a row not committed is being written, and the query read its
        rows at one instant and its placement is read at a later one: all its rows are
        held against the placement, a committed one too (read before the write marked it
        moving, it is no longer the one the placement names: kept, it listed the item
        twice). Where none is owned but the placement's entry is at the position of one
        of them, written there again meanwhile, that row stands for the placement's entry:
        the item was at that position throughout (dropped, it was missed).
        """
        rows = list(rows)
        field = self._rows.item_field
        busy = {row.get(field) for row in rows if row.get("st") != COMMITTED}
        placements: dict[str, Placement | None] = {}
        verdicts: list[bool | StoredEntry] = []
        for row in rows:
            item_id = row.get(field)
            if item_id not in busy:
                verdicts.append(row.get("st") == COMMITTED)
                continue
            if not isinstance(item_id, str):
                verdicts.append(False)
                continue
            if item_id not in placements:
                placements[item_id] = await self.locate(rec, namespace, item_id)
            verdicts.append(self._owns(row, placements[item_id]))
        for item_id, placement in placements.items():
            entry = None if placement is None else placement.entry
            mine = [i for i, row in enumerate(rows) if row.get(field) == item_id]
            if entry is None or any(verdicts[i] is True for i in mine):
                continue
            for i in mine:
                if (rows[i].get("k"), rows[i].get("s")) == (entry.shard_key, entry.sort):
                    verdicts[i] = entry
                    break
        return verdicts

    async def entries(self, rec: Recorder, namespace: str, rows: Sequence[Mapping[str, Any]],
                      decode: Callable[[Mapping[str, Any]], StoredEntry],
                      id_of: Callable[[Mapping[str, Any]], str]) -> list[StoredEntry]:
        """The entries readers list of ``rows`` (one query's, in order), as ``owned``
        judges them, each kept row made an entry by ``decode``; a row not in an entry's
        shape is the item's fault, reported to ``rec`` under ``id_of``'s item id (raised,
        or left out when the read skips such items)."""
        entries = []
        for row, kept in zip(rows, await self.owned(rec, namespace, rows), strict=True):
            if kept is False:
                continue
            if kept is not True:  # the placement's entry, which the row stands for
                entries.append(kept)
                continue
            try:
                entries.append(decode(row))
            except MalformedItem as exc:
                rec.malformed(exc, id_of(row))
        return entries

    # -- repair ---------------------------------------------------------------------

    async def repair(self, rec: Recorder, namespace: str, rows: Iterable[ReadRow],
                     report: RepairReport) -> None:
        """Commit, or fence and delete, the uncommitted entry rows ``rows`` (see the module).

        ``rows`` are ``(fields, etag)`` as read; the rows of one write of one entry are
        repaired together.
        """
        groups: dict[Hashable, list[ReadRow]] = {}
        for row in rows:
            group = self._rows.group(row[0])
            if group is None:
                report.skipped += 1
                continue
            groups.setdefault(group, []).append(row)
        for found in groups.values():
            report.checked += len(found)
            try:
                await self._repair(rec, namespace, found, report)
            except (ConditionFailed, NotFound):
                report.skipped += len(found)  # a writer changed it meanwhile: next run
            except StoreError as exc:
                report.errors.append(f"{self._rows.key(found[0][0])[1]}: {exc}")

    async def _repair(self, rec: Recorder, namespace: str, found: list[ReadRow],
                      report: RepairReport) -> None:
        fmt = self._rows
        fields = found[0][0]
        item_id, shard_key = str(fields.get(fmt.item_field)), str(fields.get("k"))
        rows, etags = [row for row, _ in found], [etag for _, etag in found]
        current = await self.locate(rec, namespace, item_id)
        if self._owns(fields, current):
            if any(row.get("st") == MOVING for row in rows):
                assert current is not None
                await self._fence(rec, namespace, item_id, current)
                report.fenced += 1
            await fmt.commit_rows(rec, shard_key, rows, etags)
            report.committed += len(rows)
            return
        superseded = current is not None and fields.get("t") in current.chain
        if not superseded:
            await self._fence(rec, namespace, item_id, current)
            report.fenced += 1
        await fmt.delete_rows(rec, shard_key, rows, etags)
        report.deleted += len(rows)

    async def _fence(self, rec: Recorder, namespace: str, item_id: str,
                     current: Placement | None) -> None:
        """Give the placement a new ETag, so no write conditioned on the old one commits."""
        fmt = self._rows
        if current is None:
            await fmt.create_placement(rec, item_id, fmt.placement(
                namespace, item_id, 0, None, new_token(), history_after(None)))
            return
        await fmt.replace_placement(rec, item_id, fmt.placement(
            namespace, item_id, current.version, current.entry, current.token or new_token(),
            current.history), located_etag(current))
