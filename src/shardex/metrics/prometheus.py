"""A Prometheus endpoint for a ``MetricsRecorder``, through the official client.

``PrometheusCollector`` is a custom collector (``prometheus_client``): each scrape reads
the recorder's snapshot, so the figures are the recorder's own and the label sets are
the bounded ones it keeps. ``serve_prometheus`` registers it in a registry of its own
and serves ``/metrics`` on 127.0.0.1 (port 0: a free one) from a daemon thread;
``MetricsServer.close`` stops it. Needs ``pip install 'shardex[metrics]'``.

A process that exits between two scrapes loses what it counted since the last one: a
short-lived process (``shardex reshard run``) gives ``final_scrape`` seconds, and
``close`` then waits, if anything scrapes it at all, for one more scrape to begin and its
answer to be written out (a process that exits while the answer is on its way loses it
as surely as one that exits before the scrape), for at most twice the last interval
between scrapes plus 5 s (a busy scraper is late, a busy process slow to answer) and
never longer than ``final_scrape``.
"""

from __future__ import annotations

import math
import threading
import time
import wsgiref.simple_server
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from shardex.errors import InvalidInput, MissingDependency
from shardex.metrics.recorder import Family, MetricsRecorder

__all__ = ["MetricsServer", "PrometheusCollector", "Scrapes", "serve_prometheus"]


def _client() -> Any:
    try:
        import prometheus_client
        import prometheus_client.core
        import prometheus_client.exposition
        import prometheus_client.registry
    except ImportError as exc:
        raise MissingDependency("prometheus-client", "metrics") from exc
    return prometheus_client


class Scrapes:
    """When the last scrapes began and which was last answered in full (monotonic
    seconds); a waiter for the next one answered."""

    _LATE = 5.0  # seconds a scrape may come late, or its answer take, past two intervals

    def __init__(self) -> None:
        self._times: deque[float] = deque(maxlen=2)
        self._served = -math.inf  # when the last scrape answered in full began
        self._changed = threading.Condition()

    def seen(self) -> float:
        """A scrape begins (before it reads any figure); returns its start for ``served``."""
        with self._changed:
            began = time.monotonic()
            self._times.append(began)
            self._changed.notify_all()
            return began

    @property
    def answered(self) -> float | None:
        """When the last scrape answered in full began, or None before any."""
        return None if self._served == -math.inf else self._served

    def served(self, began: float) -> None:
        """The scrape that began at ``began`` has its whole answer written out."""
        with self._changed:
            self._served = max(self._served, began)
            self._changed.notify_all()

    def wait_next(self, most: float) -> bool:
        """Wait for a scrape that begins from now on to be answered in full: at most
        ``most`` seconds, or twice the last interval between scrapes plus 5 s if shorter;
        none if nothing ever scraped. Returns whether one was."""
        with self._changed:
            if not self._times or most <= 0:
                return False
            if len(self._times) == 2:
                most = min(most, 2 * (self._times[1] - self._times[0]) + self._LATE)
            since = time.monotonic()
            return self._changed.wait_for(lambda: self._served > since, timeout=most)


class _Answer:
    """A scrape's answer as the WSGI server writes it: tells ``Scrapes`` once written."""

    def __init__(self, body: Iterable[bytes], scrapes: Scrapes, began: float) -> None:
        self._inner = body
        self._body = iter(body)
        self._scrapes = scrapes
        self._began = began
        self._whole = False

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        try:
            return next(self._body)
        except StopIteration:
            self._whole = True  # the server wrote every part before asking for more
            raise

    def close(self) -> None:  # the server calls it once the answer is out, or failed
        closing = getattr(self._inner, "close", None)  # WSGI: the app's own close first
        if closing is not None:
            closing()
        if self._whole:
            self._scrapes.served(self._began)


def _counted(app: Any, scrapes: Scrapes) -> Any:
    """``app`` (a WSGI application) telling ``scrapes`` when each request begins and
    when its answer has been written in full."""
    def counted(environ: Any, start_response: Any) -> _Answer:
        began = scrapes.seen()
        return _Answer(app(environ, start_response), scrapes, began)
    return counted


class PrometheusCollector:
    """Turns a recorder's metric families into Prometheus ones at each scrape."""

    def __init__(self, recorder: MetricsRecorder) -> None:
        if not isinstance(recorder, MetricsRecorder):
            raise InvalidInput(f"PrometheusCollector reads a MetricsRecorder, got "
                               f"{type(recorder).__name__}")
        self._core = _client().core
        self._recorder = recorder
        self.scrapes = Scrapes()

    def _family(self, family: Family) -> Any:
        core = self._core
        names = sorted({name for s in family.samples for name in s.labels})
        kinds = {"counter": core.CounterMetricFamily, "gauge": core.GaugeMetricFamily,
                 "histogram": core.HistogramMetricFamily}
        made = kinds[family.kind](family.name, family.help, labels=names, unit=family.unit)
        for sample in family.samples:
            values = [sample.labels.get(name, "") for name in names]
            if family.kind == "histogram":
                made.add_metric(values, [(_le(b), float(n)) for b, n in sample.buckets],
                                sample.value)
            else:
                made.add_metric(values, sample.value)
        return made

    def collect(self) -> Iterator[Any]:
        for family in self._recorder.snapshot():
            yield self._family(family)

    def describe(self) -> list[Any]:
        return []  # no fixed set: the registry must not collect at registration


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)


class MetricsServer:
    """A running ``/metrics`` endpoint: its ``url``, ``port``, ``registry``; ``close()``."""

    def __init__(self, server: Any, thread: Any, registry: Any, *,
                 scrapes: Scrapes | None = None, final_scrape: float = 0.0) -> None:
        self._server = server
        self._thread = thread
        self._scrapes = scrapes or Scrapes()
        self._final = final_scrape
        self.registry = registry
        self.port: int = server.server_port
        self.url = f"http://127.0.0.1:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving (after one more scrape, given ``final_scrape``: see module) and
        wait for the server's thread."""
        self._scrapes.wait_next(self._final)
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Quiet(wsgiref.simple_server.WSGIRequestHandler):
    """Answers without a line on stderr per request."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve_prometheus(recorder: MetricsRecorder, *, port: int = 0,
                     final_scrape: float = 0.0) -> MetricsServer:
    """Serve ``recorder``'s metrics at ``http://127.0.0.1:PORT/metrics`` (0: a free port).

    ``final_scrape`` > 0: ``close`` waits for one more scrape, up to that many seconds
    (see module). Raises MissingDependency without prometheus-client, OSError if the
    port is taken, InvalidInput for a bad port or wait.
    """
    client = _client()
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port < 65536:
        raise InvalidInput(f"port must be an integer from 0 to 65535, got {port!r}")
    if isinstance(final_scrape, bool) or not isinstance(final_scrape, int | float) \
            or not 0 <= final_scrape <= 600:
        raise InvalidInput(f"final_scrape must be 0 to 600 seconds, got {final_scrape!r}")
    registry = client.registry.CollectorRegistry(auto_describe=False)
    collector = PrometheusCollector(recorder)
    registry.register(collector)
    exposition = client.exposition
    server = wsgiref.simple_server.make_server(
        "127.0.0.1", port, _counted(exposition.make_wsgi_app(registry), collector.scrapes),
        exposition.ThreadingWSGIServer, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, name="shardex-metrics",
                              daemon=True)
    thread.start()
    return MetricsServer(server, thread, registry, scrapes=collector.scrapes,
                         final_scrape=final_scrape)
