"""The live metering written as access-log rows: what ``shardex diagnose`` reads.

``AccessLogWriter(store, "access.jsonl")`` subscribes to the store's meter and writes
one row for each key each request touched, in the access-log format
(docs/diagnose.md): ``timestamp`` (epoch seconds, the store clock's wall time when the
request ended: virtual under ``run_virtual``), ``key`` (the shard key), ``op``
(``read``/``write``), ``units`` (what the store reported that key consumed) and
``throttled`` (1 on the key that refused the request). JSON Lines by default, or CSV
(``fmt="csv"``, with its header). A request that failed before it reached the store
(``unavailable``) is left out, as ``store.stats()`` leaves it out; the store's own keys
(placements, records) too unless ``own_keys=True``. A path is opened line-buffered, so
``tail -f access.jsonl | shardex diagnose -`` sees each row as it is written; a stream
handed in is written as it is (and not closed). ``close()`` stops and closes the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Literal

from shardex.errors import InvalidInput
from shardex.keys import is_reserved
from shardex.stores.base import Store
from shardex.stores.metered import Share, Usage

__all__ = ["AccessLogWriter"]


class AccessLogWriter:
    """Writes a store's requests as access-log rows (see module)."""

    def __init__(self, store: Store, target: str | Path | IO[str], *,
                 fmt: Literal["jsonl", "csv"] = "jsonl", own_keys: bool = False) -> None:
        if not isinstance(store, Store):
            raise InvalidInput(f"AccessLogWriter writes a shardex Store's requests, got "
                               f"{type(store).__name__}")
        if fmt not in ("jsonl", "csv"):
            raise InvalidInput(f"access-log format must be 'jsonl' or 'csv', got {fmt!r}")
        self._owned = isinstance(target, str | Path)
        # held open until close(): the writer outlives any one block
        self._out: IO[str] = open(target, "a", encoding="utf-8", buffering=1) \
            if isinstance(target, str | Path) else target  # noqa: SIM115
        self._csv = fmt == "csv"
        self._own_keys = own_keys
        self._clock = store.clock
        self._store = store
        self.rows = 0
        if self._csv and (not self._owned or self._out.tell() == 0):
            self._out.write("timestamp,key,op,units,throttled\n")
        store.meter.subscribe(self)

    def __call__(self, event: object) -> None:
        if type(event) is not Usage:
            return
        usage: Usage = event
        if usage.outcome == "unavailable" or (usage.outcome == "cancelled"
                                              and not usage.shares):
            return
        at = f"{self._clock.wall():.3f}"
        op = "write" if usage.write else "read"
        throttled = usage.outcome == "throttled"
        write = self._out.write
        for key, units, _ in usage.shares or (Share(usage.key, 0.0),):
            if not self._own_keys and is_reserved(key):
                continue
            hit = 1 if throttled and key == usage.key else 0
            if self._csv:
                quoted = '"' + key.replace('"', '""') + '"' if any(
                    c in key for c in ',"\n\r') else key
                write(f"{at},{quoted},{op},{units:g},{hit}\n")
            else:
                write(f'{{"timestamp": {at}, "key": {json.dumps(key)}, "op": "{op}", '
                      f'"units": {units:g}, "throttled": {hit}}}\n')
            self.rows += 1

    def flush(self) -> None:
        self._out.flush()

    def close(self) -> None:
        """Stop writing; close the file if this writer opened it."""
        self._store.meter.unsubscribe(self)
        if self._owned:
            self._out.close()
        else:
            self._out.flush()

    def __enter__(self) -> AccessLogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
