"""A Prometheus endpoint for a ``MetricsRecorder``, through the official client.

``PrometheusCollector`` is a custom collector (``prometheus_client``): each scrape reads
the recorder's snapshot, so the figures are the recorder's own and the label sets are
the bounded ones it keeps. ``serve_prometheus`` registers it in a registry of its own
and serves ``/metrics`` on 127.0.0.1 (port 0: a free one) from a daemon thread;
``MetricsServer.close`` stops it. Needs ``pip install 'shardex[metrics]'``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from shardex.errors import InvalidInput, MissingDependency
from shardex.metrics.recorder import Family, MetricsRecorder

__all__ = ["MetricsServer", "PrometheusCollector", "serve_prometheus"]


def _client() -> Any:
    try:
        import prometheus_client
        import prometheus_client.core
        import prometheus_client.registry
    except ImportError as exc:
        raise MissingDependency("prometheus-client", "metrics") from exc
    return prometheus_client


class PrometheusCollector:
    """Turns a recorder's metric families into Prometheus ones at each scrape."""

    def __init__(self, recorder: MetricsRecorder) -> None:
        if not isinstance(recorder, MetricsRecorder):
            raise InvalidInput(f"PrometheusCollector reads a MetricsRecorder, got "
                               f"{type(recorder).__name__}")
        self._core = _client().core
        self._recorder = recorder

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

    def __init__(self, server: Any, thread: Any, registry: Any) -> None:
        self._server = server
        self._thread = thread
        self.registry = registry
        self.port: int = server.server_port
        self.url = f"http://127.0.0.1:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving and wait for the server's thread."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve_prometheus(recorder: MetricsRecorder, *, port: int = 0) -> MetricsServer:
    """Serve ``recorder``'s metrics at ``http://127.0.0.1:PORT/metrics`` (0: a free port).

    Raises MissingDependency without prometheus-client, OSError if the port is taken.
    """
    client = _client()
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port < 65536:
        raise InvalidInput(f"port must be an integer from 0 to 65535, got {port!r}")
    registry = client.registry.CollectorRegistry(auto_describe=False)
    registry.register(PrometheusCollector(recorder))
    server, thread = client.start_http_server(port, addr="127.0.0.1", registry=registry)
    return MetricsServer(server, thread, registry)
