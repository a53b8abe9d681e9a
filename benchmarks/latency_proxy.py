"""A TCP proxy on 127.0.0.1 that holds every chunk a client sends for a fixed delay.

Benchmarks put it in front of DynamoDB Local or Azurite to give each request the round
trip of a distant store: a request (one chunk or a few, sent together) reaches the server
``delay`` seconds after it left, in order, on every connection; answers come back at
once. Run in a process of its own (``proxied``), so its work is not the client's CPU.

    with proxied("http://127.0.0.1:8000", 0.020) as url: ...   # url: the proxy's endpoint

or ``python benchmarks/latency_proxy.py UPSTREAM_URL DELAY_MS`` (prints its URL).
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import Iterator
from urllib.parse import urlsplit


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                delay: float) -> None:
    loop = asyncio.get_running_loop()
    held: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def release() -> None:
        while True:
            due, chunk = await held.get()
            if not chunk:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(chunk)
            await writer.drain()
        writer.close()

    releasing = asyncio.ensure_future(release())
    try:
        while chunk := await reader.read(1 << 16):
            held.put_nowait((loop.time() + delay, chunk))
    except ConnectionError:
        pass
    held.put_nowait((0.0, b""))
    with contextlib.suppress(ConnectionError):
        await releasing


async def serve(upstream: str, delay: float) -> None:
    """Proxy 127.0.0.1:<free port> to ``upstream`` (host:port); print the port, run forever."""
    host, _, port = upstream.rpartition(":")

    async def connected(client_in: asyncio.StreamReader,
                        client_out: asyncio.StreamWriter) -> None:
        server_in, server_out = await asyncio.open_connection(host, int(port))
        await asyncio.gather(_pipe(client_in, server_out, delay),
                             _pipe(server_in, client_out, 0.0), return_exceptions=True)

    server = await asyncio.start_server(connected, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


@contextlib.contextmanager
def proxied(url: str, delay: float) -> Iterator[str]:
    """Run the proxy in a child process for the duration; yield the URL to use instead.

    With ``delay`` 0 no proxy is started and ``url`` is yielded as it is.
    """
    if delay <= 0:
        yield url
        return
    parts = urlsplit(url)
    child = subprocess.Popen([sys.executable, __file__, parts.netloc, str(delay * 1000)],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        yield parts._replace(netloc=f"127.0.0.1:{port}").geturl()
    finally:
        child.terminate()
        child.wait(timeout=10)


if __name__ == "__main__":
    target = sys.argv[1].split("//")[-1].rstrip("/")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(target, float(sys.argv[2]) / 1000))
