"""OpenTelemetry: tracer and meter setup from the OTEL_* environment, span helpers."""
