"""What a store can do (``Capabilities``): fixed when the store is built."""

from __future__ import annotations

from dataclasses import dataclass

from shardex.errors import InvalidInput
from shardex.model.values import DYNAMODB_VALUES, MAX_ITEM_BYTES, ValueRules

__all__ = ["Capabilities"]


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a store can do; fixed when the store is built, read by the code that needs it.

    - ``consistent_reads``: a query sees every write acknowledged before it began
      (False for DynamoDB GSIs, which are eventually consistent).
    - ``max_page``: the most entries one query call returns (>= 1).
    - ``foreign_writes``: something other than shardex writes the items too (the
      application, in DynamoDB GSI mode), so a placement may change without a token.
    - ``writes_sort``: shardex writes the entry's sort; False when the sort attribute is
      the application's own, which shardex reads and never writes.
    - ``max_item_bytes``: the largest item the store holds (DynamoDB: 400 KB).
    - ``values``: the attribute values the store holds (``shardex.model.values``):
      DynamoDB's by default, Azure's EDM types besides on Azure Table Storage.
    - ``late_writes``: a write whose request failed ambiguously (a timeout, a dropped
      connection) may still land after the failure (the network or the service held
      it), so a read that finds the item unchanged does not show that it never will
      (False for memory://, whose failed requests are settled when they fail).
    """

    consistent_reads: bool = True
    max_page: int = 1000
    foreign_writes: bool = False
    writes_sort: bool = True
    max_item_bytes: int = MAX_ITEM_BYTES
    values: ValueRules = DYNAMODB_VALUES
    late_writes: bool = True

    def __post_init__(self) -> None:
        if type(self.max_page) is not int or self.max_page < 1:
            raise InvalidInput(f"capabilities max_page must be an integer >= 1, "
                               f"got {self.max_page!r}")
