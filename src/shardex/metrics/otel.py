"""OpenTelemetry metrics for a ``MetricsRecorder``, through the official API.

``OpenTelemetryExporter(recorder, meter_provider)`` creates, on a meter named
``shardex``, one asynchronous instrument per counter and gauge of the recorder, whose
callbacks read the recorder's snapshot when the SDK collects (``shardex_key_units`` is
``shardex.key.units``; the same bounded attributes as the Prometheus labels), and
three histograms recorded as requests happen (the recorder tells the exporter, with
the labels it counts under): ``shardex.request.duration`` per index and op,
``shardex.key.request.duration`` per logical key label, and ``shardex.fanout.width``.
Without ``meter_provider`` the global one is used (``opentelemetry.metrics``), so an
application's own SDK set-up (OTLP, Prometheus reader, ...) carries shardex's figures.
Needs ``pip install 'shardex[metrics]'``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from shardex.errors import InvalidInput, MissingDependency
from shardex.metrics.recorder import LATENCY_BUCKETS, WIDTH_BUCKETS, Family, MetricsRecorder

__all__ = ["OpenTelemetryExporter"]

# the recorder's families that are histograms; the exporter records its own
_HISTOGRAMS = ("request_seconds", "fanout_width")


def _api() -> Any:
    try:
        from opentelemetry import metrics
    except ImportError as exc:
        raise MissingDependency("opentelemetry-api", "metrics") from exc
    return metrics


def otel_name(family: str) -> str:
    """``shardex_key_units`` -> ``shardex.key.units``."""
    return family.replace("_", ".").replace("shard.key", "shard_key")


class OpenTelemetryExporter:
    """Reports a recorder's figures as OpenTelemetry instruments (see module)."""

    def __init__(self, recorder: MetricsRecorder, meter_provider: Any = None) -> None:
        if not isinstance(recorder, MetricsRecorder):
            raise InvalidInput(f"OpenTelemetryExporter reads a MetricsRecorder, got "
                               f"{type(recorder).__name__}")
        api = _api()
        from shardex import __version__

        provider = meter_provider if meter_provider is not None else api.get_meter_provider()
        meter = provider.get_meter("shardex", __version__)
        self._recorder = recorder
        for family in recorder.snapshot():
            if family.name.endswith(_HISTOGRAMS):
                continue
            make = meter.create_observable_counter if family.kind == "counter" \
                else meter.create_observable_gauge
            make(otel_name(family.name), callbacks=[self._callback(family.name, api)],
                 description=family.help, unit=family.unit or "1")
        self._duration = meter.create_histogram(
            "shardex.request.duration", unit="s", description="Request latency per index.",
            explicit_bucket_boundaries_advisory=list(LATENCY_BUCKETS))
        self._key_duration = meter.create_histogram(
            "shardex.key.request.duration", unit="s",
            description="Request latency per logical key (the top keys; the rest: other).",
            explicit_bucket_boundaries_advisory=list(LATENCY_BUCKETS))
        self._width = meter.create_histogram(
            "shardex.fanout.width", unit="1",
            description="Shard keys one fan-out read reads.",
            explicit_bucket_boundaries_advisory=list(WIDTH_BUCKETS))
        recorder.listen(self)

    def _callback(self, name: str, api: Any) -> Callable[[Any], Iterable[Any]]:
        def observe(options: Any) -> Iterable[Any]:
            family: Family | None = next(
                (f for f in self._recorder.snapshot() if f.name == name), None)
            samples = () if family is None else family.samples
            return [api.Observation(s.value, dict(s.labels)) for s in samples]

        return observe

    # -- the recorder's listener -------------------------------------------------------

    def request(self, index: str, value: str | None, write: bool, seconds: float) -> None:
        op = "write" if write else "read"
        if value is None:
            self._duration.record(seconds, {"index": index, "op": op})
        else:
            self._key_duration.record(seconds, {"index": index, "value": value, "op": op})

    def fanout(self, index: str, width: int) -> None:
        self._width.record(width, {"index": index})
