"""Pytest support for an application's own tests: shardex on virtual time.

``memory://`` runs on the event loop's clock: under ``asyncio.run`` that is real time,
so a test that writes a few thousand entries, or waits out a routing lease, takes as
long as it would in production. On ``shardex.run_virtual`` the clock jumps to the next
timer whenever nothing is ready, and the same test takes milliseconds.

pytest loads this module by itself once shardex is installed (an entry point; ``-p
no:shardex`` turns it off). It changes nothing until a test asks for it:

- ``@pytest.mark.shardex_virtual`` on an ``async def`` test runs it on virtual time
  (``run_virtual``): ``await asyncio.sleep(3600)`` returns at once, and every store,
  index and meter in it reads the virtual clock;
- the ``shardex_store`` fixture: a fresh ``memory://`` store (its URI options from
  ``@pytest.mark.shardex_virtual(store="memory://?throttle_rate=0.1")``);
- the ``virtual`` fixture: ``virtual(coroutine)`` runs a coroutine on virtual time from
  a plain test and returns its result.

The test body alone runs on the virtual loop, a fresh one for each test: its fixtures are
plain ``def`` fixtures (an ``async def`` fixture would need a loop that outlives it,
and pytest refuses one no plugin runs). Open an index in the test, or in an ``async
with`` helper the test calls.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from shardex.sim.clock import run_virtual
from shardex.stores import open_store
from shardex.stores.base import Store

__all__ = ["pytest_configure", "pytest_pyfunc_call", "shardex_store", "virtual"]

T = TypeVar("T")
_MARK = "shardex_virtual"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{_MARK}(store='memory://'): run this async test on shardex's virtual "
                   "clock (shardex.run_virtual); store= sets the shardex_store fixture's URI")


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run an ``async def`` test marked ``shardex_virtual`` to completion on virtual time."""
    if pyfuncitem.get_closest_marker(_MARK) is None:
        return None
    test = pyfuncitem.obj
    if not inspect.iscoroutinefunction(test):
        raise pytest.UsageError(f"{pyfuncitem.nodeid}: @pytest.mark.{_MARK} is for async "
                                "def tests")
    names = pyfuncitem._fixtureinfo.argnames
    run_virtual(test(**{name: pyfuncitem.funcargs[name] for name in names}))
    return True


@pytest.fixture
def shardex_store(request: pytest.FixtureRequest) -> Store:
    """A fresh ``memory://`` store (URI from the test's ``shardex_virtual(store=...)``)."""
    marker = request.node.get_closest_marker(_MARK)
    uri = marker.kwargs.get("store", "memory://") if marker is not None else "memory://"
    return open_store(uri)


@pytest.fixture
def virtual() -> Callable[[Coroutine[Any, Any, T]], T]:
    """``virtual(main())``: run a coroutine on virtual time and return its result."""
    return run_virtual
