"""A blocking facade over ShardedIndex, for code that is not async.

It runs one event loop in a private thread and hands each call to it, so it works
from plain scripts, threads and notebooks alike (where a loop may already run).
Every method has the meaning, arguments and errors of its ShardedIndex namesake.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import weakref
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterator, Mapping
from types import TracebackType
from typing import Any, TypeVar

from shardex.admission import Admission, Priority
from shardex.capacity import Ceiling
from shardex.errors import InvalidInput, brief
from shardex.heatmeter.meter import HeatMeter
from shardex.heatmeter.view import HotView
from shardex.index import ShardedIndex
from shardex.reads import Entry, Order, Page
from shardex.routing import Routing
from shardex.sim.clock import VirtualTimeLoop
from shardex.stores.base import Store

__all__ = ["SyncShardedIndex"]

T = TypeVar("T")


class SyncShardedIndex:
    """``with SyncShardedIndex(store, name, routing) as index: index.put(...)``.

    Keyword ``options`` are those of ShardedIndex. ``loop_factory`` makes the private
    loop (a ``VirtualTimeLoop`` runs the facade on virtual time); InvalidInput if it is
    not callable or makes no event loop.
    """

    def __init__(self, store: Store | str, name: str, routing: Routing | None = None, *,
                 loop_factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop,
                 **options: Any) -> None:
        if not callable(loop_factory):
            raise InvalidInput(f"SyncShardedIndex loop_factory must be a callable that makes "
                               f"an event loop, got {brief(loop_factory)}")
        self.index = ShardedIndex(store, name, routing, **options)
        self._loop = loop_factory()
        if not isinstance(self._loop, asyncio.AbstractEventLoop):
            raise InvalidInput(f"SyncShardedIndex loop_factory must make an event loop, "
                               f"got {brief(self._loop)}")
        if isinstance(self._loop, VirtualTimeLoop):
            self._loop.pace()
        self._thread = threading.Thread(target=self._loop.run_forever,
                                        name=f"shardex-{name}", daemon=True)
        self._thread.start()
        self._listings: weakref.WeakSet[AsyncGenerator[Any, None]] = weakref.WeakSet()
        self._opened = False

    def _usable(self) -> None:
        """InvalidInput, in the facade's words, unless it is open."""
        if self._loop.is_closed():
            raise InvalidInput(f"SyncShardedIndex {self.index.name!r} is closed; build a "
                               "new one to use the index again")
        if not self._opened:
            raise InvalidInput(f"SyncShardedIndex {self.index.name!r} is not open; use "
                               "'with index:' (or index.open())")

    def _call(self, coro: Coroutine[Any, Any, T], *, unopened: bool = False) -> T:
        """Run ``coro`` on the private loop and return its result; an index not open
        refuses it, unless ``unopened`` (the open's own call, and the close's)."""
        if self._loop.is_closed() or not (unopened or self._opened):
            coro.close()
            self._usable()  # raises, in the facade's words
        try:
            if isinstance(self._loop, VirtualTimeLoop):  # time moves while the call runs
                return self._loop.submit(coro).result()
            return asyncio.run_coroutine_threadsafe(coro, self._loop).result()
        except concurrent.futures.CancelledError:
            # another thread closed the facade while this call waited on a listing
            raise InvalidInput(f"SyncShardedIndex {self.index.name!r} was closed while this "
                               "call ran (by another thread); build a new one to use the "
                               "index again") from None

    def open(self) -> None:
        self._call(self.index.open(), unopened=True)
        self._opened = True

    def close(self) -> None:
        """Close the index and its listings still open, and stop the private loop; the
        facade is unusable after."""
        if self._loop.is_closed():
            return
        try:
            for items in list(self._listings):  # a scan or pages left half read
                with contextlib.suppress(Exception):
                    self._call(items.aclose(), unopened=True)
            self._call(self.index.close(), unopened=True)  # lets the calls under way end
        finally:
            self._opened = False
            # what other threads still wait on (a scan's next page): ended, not frozen
            # with the loop (their threads waited for good)
            with contextlib.suppress(Exception):
                self._call(_cancel_others(), unopened=True)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    def __enter__(self) -> SyncShardedIndex:
        try:
            self.open()
        except BaseException:
            with contextlib.suppress(Exception):  # the open's error is the one to see
                self.close()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def routing(self) -> Routing:
        self._usable()
        return self.index.routing

    @property
    def routing_lease(self) -> float:
        self._usable()
        return self.index.routing_lease

    def refresh_routing(self) -> Routing:
        return self._call(self.index.refresh_routing())

    @property
    def store(self) -> Store:
        return self.index.store

    @property
    def tiers(self) -> dict[str, Store]:
        return self.index.tiers

    @property
    def admission(self) -> Admission | None:
        return self.index.admission

    @property
    def meter(self) -> HeatMeter | None:
        return self.index.meter

    def send_rates(self) -> dict[str, float | None]:
        async def on_loop() -> dict[str, float | None]:  # the gates are the loop's
            return self.index.send_rates()

        return self._call(on_loop())

    def heat(self, top: int = 10, *, ceiling: str | float | Ceiling | None = None) -> HotView:
        async def on_loop() -> HotView:  # the meter counts on the loop's thread
            return self.index.heat(top, ceiling=ceiling)

        return self._call(on_loop())

    def key_attributes(self, value: str, item_id: str, sort: str | None = None, *,
                       current: str | None = None) -> dict[str, Any]:
        async def on_loop() -> dict[str, Any]:
            return self.index.key_attributes(value, item_id, sort, current=current)

        return self._call(on_loop())

    def put(self, value: str, item_id: str, *, sort: str | None = None,
            attrs: Mapping[str, Any] | None = None, version: int | None = None,
            priority: Priority = "normal", token: str | None = None) -> bool:
        return self._call(self.index.put(value, item_id, sort=sort, attrs=attrs,
                                         version=version, priority=priority, token=token))

    def move(self, item_id: str, *, old: str, new: str, sort: str | None = None,
             attrs: Mapping[str, Any] | None = None, version: int | None = None,
             priority: Priority = "normal", token: str | None = None) -> bool:
        return self._call(self.index.move(item_id, old=old, new=new, sort=sort, attrs=attrs,
                                          version=version, priority=priority, token=token))

    def delete(self, value: str, item_id: str, *, version: int | None = None,
               priority: Priority = "normal", token: str | None = None) -> bool:
        return self._call(self.index.delete(value, item_id, version=version,
                                            priority=priority, token=token))

    def get(self, item_id: str) -> Entry | None:
        return self._call(self.index.get(item_id))

    def query(self, value: str, *, limit: int = 100, order: Order = "asc",
              cursor: str | None = None, priority: Priority = "normal") -> Page:
        return self._call(self.index.query(value, limit=limit, order=order, cursor=cursor,
                                           priority=priority))

    def pages(self, value: str, *, limit: int = 100, order: Order = "asc",
              cursor: str | None = None, priority: Priority = "normal") -> Iterator[Page]:
        yield from self._iterate(self.index.pages(value, limit=limit, order=order,
                                                  cursor=cursor, priority=priority))

    def count(self, value: str, *, priority: Priority = "normal") -> int:
        return self._call(self.index.count(value, priority=priority))

    def scan(self, value: str, *, priority: Priority = "normal") -> Iterator[Entry]:
        yield from self._iterate(self.index.scan(value, priority=priority))

    def _iterate(self, items: AsyncGenerator[T, None]) -> Iterator[T]:
        self._listings.add(items)
        try:
            while True:
                try:
                    yield self._call(items.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            self._listings.discard(items)
            if not self._loop.is_closed():  # else close() closed it
                self._call(items.aclose(), unopened=True)


async def _cancel_others() -> None:
    """Cancel every task of the running loop but this one, and wait for them to end."""
    others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)
