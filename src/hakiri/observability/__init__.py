"""OpenTelemetry: tracer and meter setup from the OTEL_* environment, span helpers, run metrics.

The lowest layer next to `hakiri.errors`: it imports only the standard library and
opentelemetry, so any layer may trace.
"""

from hakiri.observability.metrics import RunMetrics
from hakiri.observability.providers import (
    configure,
    exporters_from_env,
    meter,
    shutdown,
    tracer,
)
from hakiri.observability.spans import (
    attached,
    capture_context,
    current_trace_id,
    set_error,
    span,
)

__all__ = [
    "RunMetrics",
    "attached",
    "capture_context",
    "configure",
    "current_trace_id",
    "exporters_from_env",
    "meter",
    "set_error",
    "shutdown",
    "span",
    "tracer",
]
