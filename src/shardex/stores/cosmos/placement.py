"""The cross-partition write of the Cosmos DB store, the readers' ownership check, and repair.

A transactional batch covers one logical partition, and an item's placement and its
entry live in different ones (the placement under the item, the entry under its shard
key), so ``place`` is several requests with one commit point: the placement's
ETag-conditional replace. This is the Azure Tables store's protocol
(``shardex.stores.azure.placement``, whose docstring has the argument in full), on
Cosmos DB's terms: one document an entry (Cosmos DB reads in either order, so there are
no mirror rows), a ``patch`` to flip a status. A write with token T that places
``entry`` over ``expected`` (located with ETag E):

1. upserts the new entry document as pending(T) in its shard key's partition;
2. marks the old entry document moving (a patch: ``st`` = m, ``mv`` = T);
3. replaces the placement with ``If-Match: E`` (creates it when ``expected`` is None):
   the commit point. A failed condition means the write did not apply: its pending
   document is deleted (when the placement does not own it) and ConditionFailed raised;
4. deletes the old entry document; 5. marks the new one committed, ``If-Match`` on the
   ETag of step 1 (so a later write that has already marked it moving wins).

Steps 4 and 5 only tidy: once step 3 succeeded the write applied. A timeout at step 3
raises Unavailable (it may have applied), which the write loop resolves by the token in
the placement. Readers keep committed documents as they are and check every other one
against its item's placement; repair commits, or fences and deletes, what crashed writers
left (a fence replaces the placement with itself under ``If-Match``, so no commit
conditioned on its old ETag lands).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from shardex.errors import ConditionFailed, NotFound, StoreError, Unavailable
from shardex.keys import placement_key
from shardex.stores.azure.placement import RepairReport
from shardex.stores.base import Placement, StoredEntry, history_after, new_token
from shardex.stores.cosmos import codec
from shardex.stores.metered import Recorder

__all__ = ["Call", "Placer", "RepairReport"]

log = logging.getLogger("shardex.cosmos")

# The store's request path: ``await call(rec, key, operation, write, **params)`` sends
# one request, maps its errors, meters its request units on ``key`` and returns its value.
Call = Callable[..., Awaitable[Any]]
_COMMIT = [{"op": "set", "path": "/st", "value": codec.COMMITTED}]


def located_etag(placement: Placement) -> str | None:
    """The ETag a placement was located with, while its version and token are unchanged."""
    located = dict(placement.located)
    if located.get("version") == placement.version and located.get("token") == placement.token:
        etag = located.get("etag")
        return etag if isinstance(etag, str) else None
    return None


class Placer:
    """Carries out ``place``, the ownership check and repair for one store's container."""

    def __init__(self, call: Call) -> None:
        self._call = call

    async def locate(self, rec: Recorder, namespace: str, item_id: str) -> Placement | None:
        doc = await self._call(rec, placement_key(item_id), "get", False,
                               partition=codec.placement_partition(namespace, item_id),
                               id=codec.PLACEMENT_ID)
        return None if doc is None else codec.placement_from_doc(item_id, doc)

    # -- the write ------------------------------------------------------------------

    async def place(self, rec: Recorder, namespace: str, item_id: str,
                    entry: StoredEntry | None, version: int, expected: Placement | None,
                    token: str) -> None:
        etag = None
        if expected is not None:
            etag = located_etag(expected) or await self._current_etag(rec, namespace, expected)
        old = expected.entry if expected is not None else None
        old_ref = None if old is None or expected is None or expected.token is None else \
            (old.shard_key, codec.entry_partition(namespace, old.shard_key),
             codec.entry_id(old.sort, old.item_id, expected.token))
        new = None if entry is None else codec.entry_doc(
            codec.entry_partition(namespace, entry.shard_key), entry, token)
        if new is not None and old_ref is not None and (new["pk"], new["id"]) == old_ref[1:]:
            old_ref = None  # the same write again over its own document: nothing to move
        placement = codec.placement_doc(codec.placement_partition(namespace, item_id),
                                        item_id, version, entry, token,
                                        history_after(expected))
        pending = None
        if new is not None and entry is not None:
            pending = (await self._call(rec, entry.shard_key, "upsert", True, doc=new))["_etag"]
        try:
            if old_ref is not None:
                await self._mark_moving(rec, old_ref, token)
        except StoreError:
            await self._abandon(rec, new, item_id)
            raise
        try:
            if etag is None:
                await self._call(rec, placement_key(item_id), "create", True, doc=placement)
            else:
                await self._call(rec, placement_key(item_id), "replace", True, doc=placement,
                                 etag=etag)
        except ConditionFailed:
            if not await self._landed_before(rec, namespace, item_id, token, new):
                raise
        except StoreError as exc:
            if not isinstance(exc, Unavailable):  # refused before it ran: it never will
                await self._abandon(rec, new, item_id)
            raise
        if old_ref is not None:
            await self._tidy(rec, old_ref[0], "delete the old entry of", item_id, "delete",
                             partition=old_ref[1], id=old_ref[2])
        if new is not None:
            await self._tidy(rec, new["k"], "commit the entry of", item_id, "patch",
                             partition=new["pk"], id=new["id"], operations=_COMMIT,
                             etag=pending)

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

    async def _mark_moving(self, rec: Recorder, old: tuple[str, str, str], token: str) -> None:
        shard_key, partition, id = old
        try:
            await self._call(rec, shard_key, "patch", True, partition=partition, id=id,
                             operations=[{"op": "set", "path": "/st", "value": codec.MOVING},
                                         {"op": "set", "path": "/mv", "value": token}])
        except NotFound:
            # gone: the placement moved on (the commit fails below) or lost it, and a
            # write that replaces the placement heals the item
            log.warning("the entry %s of the placement being replaced is missing", id)

    async def _landed_before(self, rec: Recorder, namespace: str, item_id: str, token: str,
                             new: dict[str, Any] | None) -> bool:
        """After a failed commit: True if this very write had landed (a retried request).

        Otherwise the write did not apply, and its pending document, which the placement
        does not own, is deleted (best effort; repair removes what is left).
        """
        try:
            current = await self.locate(rec, namespace, item_id)
        except StoreError:
            return False
        if current is not None and current.token == token and (
                current.entry is None if new is None else codec.owner_of(new, current)):
            return True
        if new is None or not codec.owner_of(new, current):
            await self._abandon(rec, new, item_id)
        return False

    async def _abandon(self, rec: Recorder, new: dict[str, Any] | None, item_id: str) -> None:
        """Delete the pending document of a write whose commit was refused or never sent."""
        if new is not None:
            await self._tidy(rec, new["k"], "remove the pending entry of", item_id, "delete",
                             partition=new["pk"], id=new["id"])

    async def _tidy(self, rec: Recorder, shard_key: str, what: str, item_id: str,
                    operation: str, **params: Any) -> None:
        """A request after the commit point: its failure changes no outcome, only tidiness."""
        try:
            await self._call(rec, shard_key, operation, True, **params)
        except (ConditionFailed, NotFound):
            pass  # a later write or repair got there first
        except StoreError as exc:
            log.info("could not %s item %r (readers check it; repair removes it): %s",
                     what, item_id, exc)

    # -- the readers' check ---------------------------------------------------------

    async def owned(self, rec: Recorder, namespace: str,
                    docs: Iterable[Mapping[str, Any]]) -> list[bool]:
        """For each entry document: does its placement own it? Committed ones need no read."""
        placements: dict[str, Placement | None] = {}
        verdicts = []
        for doc in docs:
            if doc.get("st") == codec.COMMITTED:
                verdicts.append(True)
                continue
            item_id = doc.get("i")
            if not isinstance(item_id, str):
                verdicts.append(False)
                continue
            if item_id not in placements:
                placements[item_id] = await self.locate(rec, namespace, item_id)
            verdicts.append(codec.owner_of(doc, placements[item_id]))
        return verdicts

    # -- repair ---------------------------------------------------------------------

    async def repair_docs(self, rec: Recorder, namespace: str,
                          docs: Iterable[Mapping[str, Any]], report: RepairReport) -> None:
        """Commit, or fence and delete, the entry documents ``docs`` not committed."""
        for doc in docs:
            report.checked += 1
            try:
                await self._repair(rec, namespace, doc, report)
            except (ConditionFailed, NotFound):
                report.skipped += 1  # a writer changed it meanwhile: next run
            except StoreError as exc:
                report.errors.append(f"{doc.get('id')}: {exc}")

    async def _repair(self, rec: Recorder, namespace: str, doc: Mapping[str, Any],
                      report: RepairReport) -> None:
        item_id, shard_key = str(doc.get("i")), str(doc.get("k"))
        where = {"partition": doc["pk"], "id": doc["id"], "etag": doc.get("_etag")}
        current = await self.locate(rec, namespace, item_id)
        if codec.owner_of(doc, current):
            if doc.get("st") == codec.MOVING:
                assert current is not None
                await self._fence(rec, namespace, item_id, current)
                report.fenced += 1
            await self._call(rec, shard_key, "patch", True, operations=_COMMIT, **where)
            report.committed += 1
            return
        if current is None or doc.get("t") not in current.chain:
            await self._fence(rec, namespace, item_id, current)
            report.fenced += 1
        await self._call(rec, shard_key, "delete", True, **where)
        report.deleted += 1

    async def _fence(self, rec: Recorder, namespace: str, item_id: str,
                     current: Placement | None) -> None:
        """Give the placement a new ETag, so no write conditioned on the old one commits."""
        partition = codec.placement_partition(namespace, item_id)
        if current is None:
            doc = codec.placement_doc(partition, item_id, 0, None, new_token(),
                                      history_after(None))
            await self._call(rec, placement_key(item_id), "create", True, doc=doc)
            return
        doc = codec.placement_doc(partition, item_id, current.version, current.entry,
                                  current.token or new_token(), current.history)
        await self._call(rec, placement_key(item_id), "replace", True, doc=doc,
                         etag=located_etag(current))
