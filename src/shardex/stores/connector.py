"""The aiohttp connector every HTTP backend sends through: it aborts the TLS connections
it drops.

aiohttp drops a connection when a request on it ends early: cancelled in flight (a hedge
that lost, a listing stopped early, a batch read stopped by another batch's error) or
failed midway. Over TLS it closes that connection gracefully, which waits for the
server's close_notify, and it stops tracking the connection, so closing the client later
does not end it. If the event loop ends first (``asyncio.run`` returning right after the
store closed, as every CLI command and most scripts do), the socket under it is never
closed: a file descriptor held until the garbage collector meets it, with a
``ResourceWarning``. Measured: of 30 runs that cancelled a listing on the Cosmos DB
server and closed, 10 left such sockets; on DynamoDB over TLS, with the server a few
milliseconds away as a real one is, every run left all 8 of its shards' connections
open. A connection dropped mid-request has nothing left to say, and aiohttp already
aborts its TLS connections when the session closes (``ssl_shutdown_timeout=0``, its
default): the connector here aborts the ones it drops alike, at once.

Used by the Azure SDKs' transport (``shardex.stores.azure.transport``) and by the
aiobotocore clients shardex builds (``shardex.stores.dynamodb.client``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["aborting"]


_MADE: dict[type[Any], type[Any]] = {}


def aborting(connector: type[Any]) -> type[Any]:
    """``connector`` (aiohttp's ``TCPConnector`` or a subclass) that aborts each TLS
    connection it drops rather than wait for the server's close_notify (one class for
    each ``connector``)."""
    made = _MADE.get(connector)
    if made is None:
        made = _MADE[connector] = _aborting(connector)
    return made


def _aborting(connector: type[Any]) -> type[Any]:
    class Aborting(connector):  # type: ignore[misc]
        # ``_release`` is aiohttp's (3.x) internal hand-back of a connection; were it
        # renamed, this would no longer be called and connections would close as aiohttp
        # closes them
        def _release(self, key: Any, protocol: Any, *, should_close: bool = False) -> None:
            if key.is_ssl and (should_close or protocol.should_close or self.force_close):
                protocol.abort()
            super()._release(key, protocol, should_close=should_close)

    Aborting.__name__ = Aborting.__qualname__ = f"Aborting{connector.__name__}"
    return Aborting
