"""A Prometheus endpoint for a ``MetricsRecorder``, through the official client.

``PrometheusCollector`` is a custom collector (``prometheus_client``): each scrape reads
the recorder's snapshot, so the figures are the recorder's own and the label sets are
the bounded ones it keeps. ``serve_prometheus`` registers it in a registry of its own
and serves ``/metrics`` on 127.0.0.1 (port 0: a free one) from a daemon thread;
``MetricsServer.close`` stops it. Needs ``pip install 'shardex[metrics]'``.

A process that exits between two scrapes loses what it counted since the last one: a
short-lived process (``shardex reshard run``) gives ``final_scrape`` seconds, and
``close`` then waits for one more scrape, if anything scrapes it at all, for at most
twice the last interval between scrapes and never longer than ``final_scrape``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

from shardex.errors import InvalidInput, MissingDependency
from shardex.metrics.recorder import Family, MetricsRecorder

__all__ = ["MetricsServer", "PrometheusCollector", "Scrapes", "serve_prometheus"]


def _client() -> Any:
    try:
        import prometheus_client
        import prometheus_client.core
        import prometheus_client.registry
    except ImportError as exc:
        raise MissingDependency("prometheus-client", "metrics") from exc
    return prometheus_client


class Scrapes:
    """When the last scrapes began (monotonic seconds); a waiter for the next one."""

    def __init__(self) -> None:
        self._times: deque[float] = deque(maxlen=2)
        self._changed = threading.Condition()

    def seen(self) -> None:
        with self._changed:
            self._times.append(time.monotonic())
            self._changed.notify_all()

    def wait_next(self, most: float) -> bool:
        """Wait for a scrape to begin from now on: at most ``most`` seconds, or twice the
        last interval between scrapes if shorter; none if nothing ever scraped. Returns
        whether one began."""
        with self._changed:
            if not self._times or most <= 0:
                return False
            if len(self._times) == 2:
                most = min(most, 2 * (self._times[1] - self._times[0]))
            since = time.monotonic()
            return self._changed.wait_for(lambda: self._times[-1] > since, timeout=most)


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
        self.scrapes.seen()
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
    server, thread = client.start_http_server(port, addr="127.0.0.1", registry=registry)
    return MetricsServer(server, thread, registry, scrapes=collector.scrapes,
                         final_scrape=final_scrape)
