"""Context destination: the project's local Delta Lake store (one Delta table per target)."""

from hakiri.destinations.context.inspect import inspect_context_target

__all__ = ["inspect_context_target"]
