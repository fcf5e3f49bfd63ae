"""`observability.configure`: which exporters the OTEL_* environment selects, and what a span gets."""

from __future__ import annotations

import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, InMemoryMetricReader
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hakiri import observability
from hakiri.observability import current_trace_id, exporters_from_env, span


@pytest.fixture(autouse=True)
def fresh_providers() -> Iterator[None]:
    observability.shutdown()  # whatever an earlier test configured
    yield
    observability.shutdown()


def test_nothing_is_exported_by_default() -> None:
    assert exporters_from_env({}, "traces") == []
    assert exporters_from_env({}, "metrics") == []


def test_an_otlp_endpoint_exports_both_signals_over_http() -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"}
    [traces] = exporters_from_env(env, "traces")
    [metrics] = exporters_from_env(env, "metrics")
    assert isinstance(traces, OTLPSpanExporter)
    assert traces._endpoint == "http://collector:4318/v1/traces"
    assert isinstance(metrics, OTLPMetricExporter)
    assert metrics._endpoint == "http://collector:4318/v1/metrics"


def test_a_signal_endpoint_is_used_as_given() -> None:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://traces.example.com/ingest",
    }
    [traces] = exporters_from_env(env, "traces")
    assert traces._endpoint == "https://traces.example.com/ingest"


def test_console_and_none() -> None:
    env = {"OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "none"}
    [traces] = exporters_from_env(env, "traces")
    assert isinstance(traces, ConsoleSpanExporter)
    assert exporters_from_env(env, "metrics") == []
    both = {"OTEL_METRICS_EXPORTER": "console,otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}
    assert [type(e) for e in exporters_from_env(both, "metrics")] == [
        ConsoleMetricExporter,
        OTLPMetricExporter,
    ]
    none = {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}
    assert exporters_from_env(none, "traces") == []


def test_an_unknown_exporter_is_ignored_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    assert exporters_from_env({"OTEL_TRACES_EXPORTER": "zipkin"}, "traces") == []
    assert "OTEL_TRACES_EXPORTER=zipkin is not supported" in caplog.text


def test_grpc_is_named_as_unsupported(caplog: pytest.LogCaptureFixture) -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    assert len(exporters_from_env(env, "traces")) == 1
    assert "OTEL_EXPORTER_OTLP_PROTOCOL=grpc: hakiri exports OTLP over http/protobuf only" in (
        caplog.text
    )


def test_a_span_has_a_trace_id_even_with_no_exporter() -> None:
    observability.configure({})
    assert current_trace_id() is None
    with span("outer", {"k": 1, "unknown": None}):
        trace_id = current_trace_id()
        assert trace_id is not None and len(trace_id) == 32
        int(trace_id, 16)


def test_configure_twice_keeps_the_first_providers() -> None:
    first = InMemorySpanExporter()
    observability.configure({}, span_processors=[SimpleSpanProcessor(first)])
    second = InMemorySpanExporter()
    observability.configure({}, span_processors=[SimpleSpanProcessor(second)])
    with span("once"):
        pass
    assert [s.name for s in first.get_finished_spans()] == ["once"]
    assert second.get_finished_spans() == ()


def test_spans_carry_the_service_name_and_exceptions() -> None:
    exporter = InMemorySpanExporter()
    observability.configure(
        {"OTEL_SERVICE_NAME": "etl-nightly"}, span_processors=[SimpleSpanProcessor(exporter)]
    )
    with pytest.raises(ValueError), span("failing", {"hakiri.pipeline_id": "p"}):
        raise ValueError("boom")
    [failed] = exporter.get_finished_spans()
    assert failed.resource.attributes["service.name"] == "etl-nightly"
    assert failed.attributes == {"hakiri.pipeline_id": "p"}
    assert not failed.status.is_ok
    assert [e.name for e in failed.events] == ["exception"]


def test_the_service_is_called_hakiri_by_default() -> None:
    exporter = InMemorySpanExporter()
    observability.configure({}, span_processors=[SimpleSpanProcessor(exporter)])
    with span("s"):
        pass
    [done] = exporter.get_finished_spans()
    assert done.resource.attributes["service.name"] == "hakiri"


def test_sdk_disabled_records_nothing() -> None:
    exporter = InMemorySpanExporter()
    reader = InMemoryMetricReader()
    observability.configure(
        {"OTEL_SDK_DISABLED": "true"},
        span_processors=[SimpleSpanProcessor(exporter)],
        metric_readers=[reader],
    )
    with span("ignored"):
        assert current_trace_id() is None
    observability.RunMetrics("p").chunk_committed(rows=5, quarantined=0, lag_seconds=1.0)
    assert exporter.get_finished_spans() == ()
    assert reader.get_metrics_data() is None


def test_a_worker_thread_continues_the_trace_it_is_handed() -> None:
    exporter = InMemorySpanExporter()
    observability.configure({}, span_processors=[SimpleSpanProcessor(exporter)])
    with span("run"):
        captured = observability.capture_context()

        def work() -> None:
            with observability.attached(captured), span("chunk"):
                pass

        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
    chunk, run = exporter.get_finished_spans()
    assert chunk.parent is not None and chunk.parent.span_id == run.context.span_id


def test_the_process_exit_exports_what_is_left_to_the_collector() -> None:
    """A short `hakiri apply` ends long before the batch processor's timer: exit flushes it."""
    received: list[str] = []

    class Collector(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            received.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    script = (
        "import sys\n"
        "from hakiri import observability as o\n"
        "o.configure({'OTEL_EXPORTER_OTLP_ENDPOINT': sys.argv[1]})\n"
        "with o.span('short'):\n"
        "    pass\n"
        "o.RunMetrics('p').run_finished(seconds=1.5, status='success')\n"
    )
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        result = subprocess.run(
            [sys.executable, "-c", script, endpoint], capture_output=True, text=True, timeout=60
        )
    finally:
        server.shutdown()
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert sorted(received) == ["/v1/metrics", "/v1/traces"]


def test_an_export_is_bounded_by_hakiri_otlp_timeout() -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}
    [traces] = exporters_from_env(env, "traces")
    assert traces._client._timeout == 2.0  # hakiri's default, retries included
    [traces] = exporters_from_env({**env, "HAKIRI_OTLP_TIMEOUT": "0.5"}, "traces")
    assert traces._client._timeout == 0.5


def test_an_unreachable_collector_is_one_warning_line_at_most() -> None:
    """A process that exports to a port nobody listens on: the SDK's retry and failure logs
    (a dozen lines) become one warning, and the process still exits 0."""
    import socket

    with socket.socket() as probe:  # a free port, closed again: connections are refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = (
        "from hakiri import observability\n"
        "from hakiri.observability import RunMetrics, span\n"
        f"observability.configure({{'OTEL_EXPORTER_OTLP_ENDPOINT': 'http://127.0.0.1:{port}'}})\n"
        "with span('hakiri.run', {}):\n"
        "    pass\n"
        "RunMetrics('p').run_finished(1.0, 'success')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(
        f"warning: could not export traces or metrics to the OpenTelemetry collector at "
        f"http://127.0.0.1:{port}/v1/traces"
    )
