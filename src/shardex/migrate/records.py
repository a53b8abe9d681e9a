"""Leased work records of a long operation (a reshard's units, an adoption's segments).

``Records`` is what both keep in the index's own store: record reads and writes retried
under a patient policy, each write a compare-and-set on the revision the writer read,
so two workers that read the same record meet on it and one of them loses.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from shardex.clock import Clock
from shardex.errors import ConditionFailed
from shardex.migrate.layouts import PATIENT
from shardex.retry import RetryPolicy, call_with_retry
from shardex.stores.base import Record, Store

__all__ = ["Records"]

T = TypeVar("T")


class Records:
    """Records of index ``namespace`` in ``store``, read and written under ``retry``."""

    def __init__(self, store: Store, namespace: str, *, clock: Clock,
                 rng: random.Random | None = None, retry: RetryPolicy = PATIENT) -> None:
        self.store = store
        self.namespace = namespace
        self._clock = clock
        self._rng = rng or random.Random()
        self._retry = retry

    def _retrying(self, call: Callable[[], Awaitable[T]]) -> Awaitable[T]:
        return call_with_retry(call, self._retry, clock=self._clock, rng=self._rng)

    def _where(self, key: str) -> str:
        return f"record {key!r} of index {self.namespace!r} in {self.store.uri}"

    async def _list(self, prefix: str) -> dict[str, Record]:
        store, namespace = self.store, self.namespace
        return await self._retrying(lambda: store.list_records(namespace, prefix))

    async def _get(self, key: str) -> Record | None:
        store, namespace = self.store, self.namespace
        found: Record | None = await self._retrying(lambda: store.get_record(namespace, key))
        return found

    async def _put(self, key: str, body: Mapping[str, Any], expected: int | None) -> int | None:
        """Write a record at ``expected``; None if another writer got there first."""
        store, namespace = self.store, self.namespace
        try:
            return await self._retrying(
                lambda: store.put_record(namespace, key, body, expected=expected))
        except ConditionFailed:
            return None
