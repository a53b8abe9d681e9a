"""DynamoDB over TLS, as a real endpoint is reached: DynamoDB Local behind a TLS proxy on
loopback (a certificate made for 127.0.0.1, trusted through ``AWS_CA_BUNDLE``)."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from shardex import Routing, ShardedIndex, ShardPolicy
from shardex.stores.dynamodb import DynamoDBStore
from tests import dynamodb_local
from tests.servers import sockets_left_by_cancelled_listings

pytestmark = pytest.mark.dynamodb


@dataclass
class Proxy:
    """A TLS front for DynamoDB Local on its own thread and event loop. ``pause`` stops
    its loop (it answers nothing, a TLS close_notify included) until ``resume``."""

    url: str
    loop: asyncio.AbstractEventLoop
    gate: threading.Event

    def pause(self) -> None:
        stopped = threading.Event()

        def hold() -> None:
            stopped.set()
            self.gate.wait()

        self.gate.clear()
        self.loop.call_soon_threadsafe(hold)
        stopped.wait()

    def resume(self) -> None:
        self.gate.set()


def _certificate(folder: Path) -> tuple[Path, Path]:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.fail("openssl is needed to make the proxy's certificate")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


@pytest.fixture
def tls_proxy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Proxy]:
    upstream = urlsplit(dynamodb_local.require_endpoint())
    cert, key = _certificate(tmp_path)
    monkeypatch.setenv("AWS_CA_BUNDLE", str(cert))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)

    streams: set[asyncio.StreamWriter] = set()  # every connection's, closed at the end

    async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        streams.add(writer)
        up_reader, up_writer = await asyncio.open_connection(upstream.hostname, upstream.port)
        streams.add(up_writer)
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(asyncio.start_server(forward, "127.0.0.1", 0,
                                                          ssl=context))
    port = server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    proxy = Proxy(f"https://127.0.0.1:{port}", loop, threading.Event())
    try:
        yield proxy
    finally:
        proxy.resume()

        async def stop() -> None:
            # a connection whose forward was still connecting upstream, or whose pipes
            # had not run their ends, would be left open past the loop's close
            server.close()
            for stream in streams:
                stream.transport.abort()
            tasks = [task for task in asyncio.all_tasks()
                     if task is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await server.wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_over_tls_a_listing_reads_and_writes_as_over_plain_http(tls_proxy: Proxy) -> None:
    table = dynamodb_local.create_index_table()

    async def main() -> list[str]:
        store = DynamoDBStore(table, endpoint_url=tls_proxy.url,
                              region=dynamodb_local.REGION)
        async with ShardedIndex(store, "orders", Routing(default=ShardPolicy(8))) as index:
            for i in range(12):
                await index.put("PENDING", f"o-{i:02d}", sort=f"{i:02d}")
            page = await index.query("PENDING", limit=5)
            rest = await index.query("PENDING", limit=100, cursor=page.cursor)
            return [e.item_id for e in [*page.items, *rest.items]]

    assert asyncio.run(main()) == [f"o-{i:02d}" for i in range(12)]


def test_reads_cancelled_in_flight_leave_no_socket_behind(
        tls_proxy: Proxy, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reads cancelled after their requests went out (a hedge that lost, a listing
    stopped early; here each shard's first request) make aiohttp drop their TLS
    connections. Closed gracefully, each waited for the server's close_notify (here the
    server is paused, as a real one is a round trip away) past the store's close and
    the loop's end, and its socket stayed open until the garbage collector met it: every
    run left its 8 shards' connections (16 ResourceWarnings a run, a transport and a
    socket each). The dropped connections are aborted: once ``asyncio.run`` returns,
    nothing is left open."""
    table = dynamodb_local.create_index_table()
    left = sockets_left_by_cancelled_listings(
        monkeypatch, lambda: DynamoDBStore(table, endpoint_url=tls_proxy.url,
                                           region=dynamodb_local.REGION),
        runs=2, when_sent=tls_proxy.pause, after_run=tls_proxy.resume)
    assert left == []
