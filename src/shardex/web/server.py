"""The local web page of ``shardex serve``: a static page that polls a JSON endpoint.

``HeatServer(feed)`` serves, on 127.0.0.1 only, from a daemon thread of the standard
library's HTTP server:

- ``/``: the page (``page.html``, no dependencies: tables and SVG charts drawn by its
  own script), which polls ``/api/heat`` every ``every`` seconds;
- ``/api/heat``: the feed's ``shardex.serve/1`` document (docs/json.md), with the
  routing record's state and migration when a ``RoutingWatch`` is given.

A feed error answers 503 with ``{"error": ...}`` and, when the store could be read,
its ``routing``: the page says so, keeps the routing and migration lines, and keeps
polling. ``close()`` stops the server.

It only reads: GET and HEAD, nothing else (405). It answers only requests whose
``Host`` header names the address it listens on (``127.0.0.1``) or ``localhost``, any
port, and refuses others with 421: a page of another site that a DNS-rebinding attack
points at 127.0.0.1 could otherwise read the hot keys and the routing record.
"""

from __future__ import annotations

import contextlib
import html
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files
from typing import Any

from shardex.documents import SERVE_SCHEMA
from shardex.errors import InvalidInput, ShardexError
from shardex.web.feeds import Feed
from shardex.web.routing import RoutingWatch

__all__ = ["HeatServer", "host_allowed", "with_routing"]

_HOSTS = frozenset({"127.0.0.1", "localhost"})


def with_routing(doc: dict[str, Any], routing: Any) -> dict[str, Any]:
    """``doc`` (a feed's document) with the routing record ``routing`` reads, or, when the
    store cannot be read, ``routing_error`` saying why: the heat still shows."""
    if routing is not None:
        try:
            doc["routing"] = routing.read()
        except ShardexError as exc:
            doc["routing_error"] = str(exc)
    return doc


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
        self.page = page.replace("__EVERY_MS__", str(int(every * 1000))).replace(
            "__SOURCE__", html.escape("this process's own index meter"
                                      if feed.source in ("", "meter") else feed.source,
                                      quote=False))
        self.feed = feed
        self.routing = routing
        self._share = every / 2
        self._answering = threading.Lock()
        self._answered: tuple[float, int, dict[str, Any]] | None = None
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self._server.daemon_threads = True
        self.port: int = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/"
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="shardex-serve", daemon=True)
        self._thread.start()

    def answer(self) -> tuple[int, dict[str, Any]]:
        """``/api/heat``'s status and body: 200 and the document, or 503 and the error,
        with the routing record when only the feed failed. Requests within half a
        refresh of one another share one reading (many open pages, one feed read)."""
        with self._answering:
            now = time.monotonic()
            if self._answered is None or now - self._answered[0] >= self._share:
                self._answered = (now, *self._read())
            return self._answered[1], self._answered[2]

    def _read(self) -> tuple[int, dict[str, Any]]:
        try:
            doc = self.feed.read()
        except ShardexError as exc:
            failed: dict[str, Any] = {"schema": SERVE_SCHEMA, "error": str(exc),
                                      "source": self.feed.source, "routing": None}
            if self.routing is not None:
                with contextlib.suppress(ShardexError):
                    failed["routing"] = self.routing.read()
            return 503, failed
        return 200, with_routing(doc, self.routing)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> HeatServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def host_allowed(host: str | None) -> bool:
    """Whether a ``Host`` header names this server: 127.0.0.1 or localhost, any port."""
    if not host:
        return False
    name, _, port = host.strip().lower().rpartition(":")
    if not name or (port and not port.isdigit()):
        name = host.strip().lower()  # no port given
    return name in _HOSTS


def _handler(app: HeatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._get(head=False)

        def do_HEAD(self) -> None:
            self._get(head=True)

        def _get(self, *, head: bool) -> None:
            if not host_allowed(self.headers.get("Host")):
                self._send(421, "text/plain; charset=utf-8",
                           b"this page answers only at 127.0.0.1 or localhost", head=head)
                return
            path = self.path.split("?", 1)[0]
            if path in ("/", "/index.html"):
                self._send(200, "text/html; charset=utf-8", app.page.encode(), head=head)
            elif path == "/api/heat":
                status, body = app.answer()
                self._send(status, "application/json", json.dumps(body).encode(), head=head)
            else:
                self._send(404, "text/plain; charset=utf-8", b"not found", head=head)

        def _refuse(self) -> None:
            self.send_response(405)
            self.send_header("Allow", "GET, HEAD")
            body = b"read-only: GET and HEAD only"
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse

        def __getattr__(self, name: str) -> Any:
            # any other method (TRACE, CONNECT, PROPFIND, ...) is refused alike: the base
            # handler answered 501 with its own HTML page
            if name.startswith("do_"):
                return self._refuse
            raise AttributeError(name)

        def _send(self, status: int, kind: str, body: bytes, *, head: bool) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("X-Frame-Options", "DENY")
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # a poll every few seconds would flood the terminal

    return Handler
