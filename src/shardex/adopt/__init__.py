"""Adopting an application's plain, hot GSI into a shardex-sharded one, online.

The application has a GSI on a raw attribute (``status-index`` on ``status``); its hot
value throttles the GSI and, by back-pressure, the base table. Adoption is the reshard
workflow with the old GSI as the source layout (``shardex.adoption`` draws the states
and argues why every read stays complete), carried out by ``Adopter``:

1. ``start``: the new GSI (on the shard attribute) is created if missing and awaited;
   the routing record gets an ``Adoption`` in ``dual-write``: writers add the shard
   attribute (``index.key_attributes``), readers read the old GSI, which is complete.
2. ``run``: once every client writes the shard attribute (the routing's lease and the
   margin after start), the backfill (``backfill``) gives every older item its shard
   attribute: a parallel Scan whose segments are leased through records (``segments``,
   as the reshard's work units are), one conditional UpdateItem per item that lacks a
   correct one, paced per shard key with AIMD (the reshard mover's ``Pace``).
3. ``verify`` (``verify``): per value, the old GSI against the union of the value's
   shard keys, each gap read again after a settle delay and confirmed on the item.
4. ``cutover``: readers read the new GSI; refused unless the backfill is done and the
   last verify is clean and fresh. ``complete``: after the retention window and once no
   reader reads the old GSI, the adoption is complete, and the old GSI is dropped if
   asked. ``rollback`` before ``complete``: readers read the old GSI again.
5. ``status``: ``shardex.adopt.status/1`` (``status``).
"""

from __future__ import annotations

from shardex.adopt.runner import DEFAULT_SEGMENTS, Adopter, AdoptPlan, Backfilled
from shardex.adopt.status import STATUS_SCHEMA, status_document
from shardex.adoption import Adoption

__all__ = ["AdoptPlan", "Adopter", "Adoption", "Backfilled", "DEFAULT_SEGMENTS",
           "STATUS_SCHEMA", "status_document"]
