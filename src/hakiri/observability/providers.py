"""hakiri's tracer and meter providers, built once per process from the OTEL_* environment.

hakiri keeps its providers to itself instead of installing them as OpenTelemetry's
globals: a global provider can be set only once per process, while tests (and a
process that embeds hakiri) need to swap them. The providers are always the SDK's,
so a run has a real trace id even when nothing is exported. Until `configure` runs,
`tracer()` and `meter()` fall back to the global API (a no-op unless the embedding
application installed providers).

The SDK and the exporters are imported only inside `configure`: `hakiri --help`
and `hakiri plan` never pay for them.
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry import metrics, trace

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricReader
    from opentelemetry.sdk.trace import SpanProcessor

__all__ = ["INSTRUMENTATION_NAME", "configure", "exporters_from_env", "meter", "shutdown", "tracer"]

INSTRUMENTATION_NAME = "hakiri"
DEFAULT_SERVICE_NAME = "hakiri"
EXPORT_TIMEOUT_ENV = "HAKIRI_OTLP_TIMEOUT"
DEFAULT_EXPORT_TIMEOUT = 2.0

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Providers:
    tracer_provider: trace.TracerProvider
    meter_provider: metrics.MeterProvider
    tracer: trace.Tracer
    meter: metrics.Meter

    def shutdown(self) -> None:
        # The no-op providers of OTEL_SDK_DISABLED have nothing to flush.
        for provider in (self.tracer_provider, self.meter_provider):
            close = getattr(provider, "shutdown", None)
            if close is not None:
                close()


_lock = threading.Lock()
_providers: _Providers | None = None


def configure(
    env: Mapping[str, str],
    *,
    span_processors: Iterable[SpanProcessor] = (),
    metric_readers: Iterable[MetricReader] = (),
) -> None:
    """Build hakiri's providers from `env`, once: later calls change nothing (until `shutdown`).

    `span_processors` and `metric_readers` come on top of what the environment asks
    for; tests attach an InMemorySpanExporter or an InMemoryMetricReader this way.
    """
    global _providers
    with _lock:
        if _providers is None:
            _providers = _build(env, list(span_processors), list(metric_readers))


def shutdown() -> None:
    """Flush and close the providers; runs at process exit, so a short `hakiri apply` still
    exports. A later `configure` builds new ones."""
    global _providers
    with _lock:
        providers, _providers = _providers, None
    if providers is not None:
        providers.shutdown()


atexit.register(shutdown)


def tracer() -> trace.Tracer:
    providers = _providers
    return providers.tracer if providers else trace.get_tracer(INSTRUMENTATION_NAME)


def meter() -> metrics.Meter:
    providers = _providers
    return providers.meter if providers else metrics.get_meter(INSTRUMENTATION_NAME)


def _build(
    env: Mapping[str, str],
    span_processors: list[SpanProcessor],
    metric_readers: list[MetricReader],
) -> _Providers:
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        no_traces, no_metrics = trace.NoOpTracerProvider(), metrics.NoOpMeterProvider()
        return _Providers(
            no_traces,
            no_metrics,
            no_traces.get_tracer(INSTRUMENTATION_NAME),
            no_metrics.get_meter(INSTRUMENTATION_NAME),
        )
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = _resource(env)
    # `shutdown` (at exit, or before a test builds new ones) closes them, once.
    tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    for exporter in exporters_from_env(env, "traces"):
        tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    for processor in span_processors:
        tracer_provider.add_span_processor(processor)
    readers = [PeriodicExportingMetricReader(e) for e in exporters_from_env(env, "metrics")]
    meter_provider = MeterProvider(
        resource=resource, metric_readers=[*readers, *metric_readers], shutdown_on_exit=False
    )
    endpoints = tuple(
        e for signal in ("traces", "metrics") if (e := _otlp_endpoint(env, signal)) is not None
    )
    if endpoints:
        _quiet_exporter_logs(env, endpoints)
    return _Providers(
        tracer_provider,
        meter_provider,
        tracer_provider.get_tracer(INSTRUMENTATION_NAME),
        meter_provider.get_meter(INSTRUMENTATION_NAME),
    )


def _resource(env: Mapping[str, str]) -> Any:
    """`Resource.create()` reads OTEL_RESOURCE_ATTRIBUTES; the service is OTEL_SERVICE_NAME,
    else a `service.name` given there, else `hakiri`."""
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource

    detected = Resource.create()
    name = env.get("OTEL_SERVICE_NAME") or str(detected.attributes.get(SERVICE_NAME, ""))
    if not name or name.startswith("unknown_service"):  # the SDK's placeholder
        name = DEFAULT_SERVICE_NAME
    return detected.merge(Resource({SERVICE_NAME: name}))


def exporters_from_env(env: Mapping[str, str], signal: str) -> list[Any]:
    """The exporters OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER name (default `otlp`).

    `otlp` exports only when an endpoint is set: with no collector configured, a
    plain `hakiri apply` sends nothing anywhere.
    """
    variable = f"OTEL_{signal.upper()}_EXPORTER"
    names = [n.strip().lower() for n in env.get(variable, "otlp").split(",") if n.strip()]
    exporters = []
    for name in names:
        if name == "otlp":
            endpoint = _otlp_endpoint(env, signal)
            if endpoint:
                exporters.append(_otlp_exporter(signal, endpoint, export_timeout(env)))
        elif name == "console":
            exporters.append(_console_exporter(signal))
        elif name != "none":
            _log.warning("%s=%s is not supported (otlp, console or none): ignored", variable, name)
    return exporters


def _otlp_endpoint(env: Mapping[str, str], signal: str) -> str | None:
    """OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT as given, else OTEL_EXPORTER_OTLP_ENDPOINT + /v1/<signal>."""
    upper = signal.upper()
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    endpoint = env.get(f"OTEL_EXPORTER_OTLP_{upper}_ENDPOINT") or (
        f"{base.rstrip('/')}/v1/{signal}" if base else None
    )
    for variable in ("OTEL_EXPORTER_OTLP_PROTOCOL", f"OTEL_EXPORTER_OTLP_{upper}_PROTOCOL"):
        protocol = env.get(variable, "http/protobuf")
        if endpoint and protocol != "http/protobuf":  # grpc's port would fail every export
            _log.warning("%s=%s: hakiri exports OTLP over http/protobuf only", variable, protocol)
    return endpoint


def _otlp_exporter(signal: str, endpoint: str, timeout: float | None) -> Any:
    # Headers, compression and TLS files: the exporter reads the standard
    # OTEL_EXPORTER_OTLP_* variables of the process itself. `timeout` bounds an export,
    # retries included (None: OTEL_EXPORTER_OTLP_TIMEOUT, read by the exporter).
    if signal == "traces":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=endpoint, timeout=timeout)
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    return OTLPMetricExporter(endpoint=endpoint, timeout=timeout)


def export_timeout(env: Mapping[str, str]) -> float | None:
    """Seconds an OTLP export may take, retries included: HAKIRI_OTLP_TIMEOUT (default 2),
    unless OTEL_EXPORTER_OTLP_TIMEOUT is set (then None: the exporter reads that)."""
    if env.get("OTEL_EXPORTER_OTLP_TIMEOUT"):
        return None
    text = env.get(EXPORT_TIMEOUT_ENV, "").strip()
    try:
        return max(0.1, float(text)) if text else DEFAULT_EXPORT_TIMEOUT
    except ValueError:
        _log.warning(
            "%s=%r is not a number of seconds: %gs used",
            EXPORT_TIMEOUT_ENV,
            text,
            DEFAULT_EXPORT_TIMEOUT,
        )
        return DEFAULT_EXPORT_TIMEOUT


class _ExportFailures(logging.Handler):
    """Takes the OpenTelemetry SDK's and exporters' warnings (a retry, then a failure, per
    batch and per signal): the user hears once per process that the collector did not take
    hakiri's telemetry, instead of a dozen lines while the run works."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.endpoints: tuple[str, ...] = ()
        self.timeout: float | None = DEFAULT_EXPORT_TIMEOUT
        self.said = False

    def emit(self, record: logging.LogRecord) -> None:
        if self.said:
            return
        self.said = True
        where = ", ".join(dict.fromkeys(self.endpoints)) or "the configured endpoint"
        sys.stderr.write(
            f"warning: could not export traces or metrics to the OpenTelemetry collector at "
            f"{where} (unreachable or refusing): each export gives up after "
            + (
                f"{self.timeout:g} s ({EXPORT_TIMEOUT_ENV})"
                if self.timeout
                else "OTEL_EXPORTER_OTLP_TIMEOUT"
            )
            + "; --debug shows every attempt\n"
        )


_failures = _ExportFailures()
_QUIETED = ("opentelemetry.exporter.otlp", "opentelemetry.sdk")


def _quiet_exporter_logs(env: Mapping[str, str], endpoints: tuple[str, ...]) -> None:
    if env.get("HAKIRI_DEBUG") == "1":
        return  # --debug: every retry and failure as the SDK logs it
    _failures.endpoints, _failures.timeout = endpoints, export_timeout(env)
    for name in _QUIETED:
        logger = logging.getLogger(name)
        if _failures not in logger.handlers:
            logger.addHandler(_failures)
        logger.propagate = False


def _console_exporter(signal: str) -> Any:
    # stderr: stdout carries `--json` output.
    if signal == "traces":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(out=sys.stderr)
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

    return ConsoleMetricExporter(out=sys.stderr)
