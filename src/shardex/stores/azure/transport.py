"""The HTTP transport the two Azure SDKs (Tables, Cosmos DB) send through: azure-core's
aiohttp transport, on a connector that aborts the TLS connections it drops
(``shardex.stores.connector``, which says why).
"""

from __future__ import annotations

from typing import Any

from shardex.stores.connector import aborting

__all__ = ["aio_transport", "with_transport"]


def aio_transport() -> Any:
    """A new ``AioHttpTransport`` owning a session on the aborting connector, made as
    azure-core makes its own session (no cookies, bodies left compressed, proxies from
    the environment). Call it with the event loop running."""
    import aiohttp
    from azure.core.pipeline.transport import AioHttpTransport

    session = aiohttp.ClientSession(connector=aborting(aiohttp.TCPConnector)(),
                                    cookie_jar=aiohttp.DummyCookieJar(),
                                    auto_decompress=False, trust_env=True)
    return AioHttpTransport(session=session, session_owner=True)


def with_transport(options: dict[str, Any]) -> dict[str, Any]:
    """A client's keyword arguments with ``transport`` set to a new ``aio_transport()``,
    unless the caller gave one."""
    return options if "transport" in options else {**options, "transport": aio_transport()}
