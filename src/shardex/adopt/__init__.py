"""Adopting a plain index: the names of ``shardex.migrate`` an adoption is driven by."""

from __future__ import annotations

from shardex.adoption import Adoption
from shardex.migrate.adopt_status import STATUS_SCHEMA
from shardex.migrate.adopt_status import status_document as status_document
from shardex.migrate.adopter import DEFAULT_SEGMENTS, Adopter, AdoptPlan, Backfilled

__all__ = ["AdoptPlan", "Adopter", "Adoption", "Backfilled", "DEFAULT_SEGMENTS",
           "STATUS_SCHEMA", "status_document"]
