"""Span helpers: a span around a block, the current trace id, and the context across threads."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

from opentelemetry import context, trace
from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from hakiri.observability.providers import tracer

__all__ = ["attached", "capture_context", "current_trace_id", "set_error", "span"]


@contextlib.contextmanager
def span(
    name: str, attributes: Mapping[str, AttributeValue | None] | None = None
) -> Iterator[Span]:
    """A span of hakiri's tracer, current inside the block. An exception leaving the block is
    recorded on it and sets its status to error. None attributes are left out (unknown)."""
    present = {k: v for k, v in (attributes or {}).items() if v is not None}
    with tracer().start_as_current_span(name, attributes=present) as current:
        yield current


def set_error(current: Span, description: str | None) -> None:
    """Mark a span failed when the failure was handled (no exception leaves its block)."""
    current.set_status(Status(StatusCode.ERROR, description))


def current_trace_id() -> str | None:
    """The trace id of the current span as 32 hex digits; None outside any trace."""
    found = trace.get_current_span().get_span_context()
    return trace.format_trace_id(found.trace_id) if found.is_valid else None


def capture_context() -> context.Context:
    """The current context, to hand to worker threads (OpenTelemetry's context is per thread)."""
    return context.get_current()


@contextlib.contextmanager
def attached(captured: context.Context) -> Iterator[None]:
    """Make `captured` current in this thread for the block: spans started in a worker become
    children of the span that was current where it was captured."""
    token = context.attach(captured)
    try:
        yield
    finally:
        context.detach(token)
