"""The local web page of ``shardex serve``: a static page that polls a JSON endpoint.

``HeatServer(feed)`` serves, on 127.0.0.1 only, from a daemon thread of the standard
library's HTTP server:

- ``/``: the page (``page.html``, no dependencies: tables and SVG charts drawn by its
  own script), which polls ``/api/heat`` every ``every`` seconds;
- ``/api/heat``: the feed's ``shardex.serve/1`` document (docs/json.md), with the
  routing record's state when a ``RoutingWatch`` is given.

A feed error answers 503 with ``{"error": ...}``, and the page says so and keeps
polling. ``close()`` stops the server.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files
from typing import Any

from shardex.errors import InvalidInput, ShardexError
from shardex.web.feeds import Feed, RoutingWatch

__all__ = ["HeatServer"]


class HeatServer:
    """Serves ``feed`` on ``http://127.0.0.1:PORT/`` (port 0: a free one); see module."""

    def __init__(self, feed: Feed, *, port: int = 0, every: float = 2.0,
                 routing: RoutingWatch | None = None) -> None:
        if not isinstance(feed, Feed):
            raise InvalidInput(f"HeatServer serves a shardex.web Feed, got "
                               f"{type(feed).__name__}")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port < 65536:
            raise InvalidInput(f"port must be an integer from 0 to 65535, got {port!r}")
        if not 0.2 <= every <= 3600:
            raise InvalidInput(f"the page refreshes every 0.2 to 3600 s, got {every!r}")
        page = files("shardex.web").joinpath("page.html").read_text(encoding="utf-8")
        self.page = page.replace("__EVERY_MS__", str(int(every * 1000)))
        self.feed = feed
        self.routing = routing
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self._server.daemon_threads = True
        self.port: int = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/"
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="shardex-serve", daemon=True)
        self._thread.start()

    def document(self) -> dict[str, Any]:
        """The document ``/api/heat`` answers now."""
        doc = self.feed.read()
        if self.routing is not None:
            doc["routing"] = self.routing.read()
        return doc

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> HeatServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _handler(app: HeatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path in ("/", "/index.html"):
                self._send(200, "text/html; charset=utf-8", app.page.encode())
            elif path == "/api/heat":
                try:
                    status, body = 200, app.document()
                except ShardexError as exc:
                    status, body = 503, {"error": str(exc)}
                self._send(status, "application/json", json.dumps(body).encode())
            else:
                self._send(404, "text/plain", b"not found")

        def _send(self, status: int, kind: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # a poll every few seconds would flood the terminal

    return Handler
