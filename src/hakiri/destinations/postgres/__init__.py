"""PostgreSQL destination: inspect targets (no JVM), stage DataFrames, commit batches under a load spec."""

from hakiri.destinations.postgres.inspect import inspect_postgres_target, inspect_postgres_targets

__all__ = ["inspect_postgres_target", "inspect_postgres_targets"]
