"""Adopting a plain index: the names of ``shardex.migrate`` an adoption is driven by."""

from __future__ import annotations

from shardex.adoption import Adoption
from shardex.migrate.adopter import DEFAULT_SEGMENTS, Adopter, AdoptPlan, Backfilled
from shardex.migrate.status import ADOPT_STATUS_SCHEMA as STATUS_SCHEMA
from shardex.migrate.status import adopt_status_document as status_document

__all__ = ["AdoptPlan", "Adopter", "Adoption", "Backfilled", "DEFAULT_SEGMENTS",
           "STATUS_SCHEMA", "status_document"]
