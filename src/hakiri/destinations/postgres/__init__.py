"""PostgreSQL destination: inspect targets (no JVM), stage DataFrames, commit batches under a load spec.

`PostgresDestination` and `gc` are imported on first use, so `plan` (which only
inspects) does not pay for the loading modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hakiri.destinations.postgres.inspect import inspect_postgres_target, inspect_postgres_targets

if TYPE_CHECKING:
    from hakiri.destinations.postgres.client import PostgresDestination
    from hakiri.destinations.postgres.garbage import gc

__all__ = ["PostgresDestination", "gc", "inspect_postgres_target", "inspect_postgres_targets"]


def __getattr__(name: str) -> Any:
    if name == "PostgresDestination":
        from hakiri.destinations.postgres.client import PostgresDestination

        return PostgresDestination
    if name == "gc":
        from hakiri.destinations.postgres.garbage import gc

        return gc
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
