"""Inspect a target in the local Delta Lake context store: columns from the Delta schema, rows from file stats.

Read-only and JVM-free: delta-rs reads the transaction log; no data file is opened.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hakiri.destinations.base import TargetColumn, TargetObservation
from hakiri.errors import DestinationUnreachable

__all__ = [
    "inspect_context_target",
    "is_delta_table",
    "list_tables",
    "retention_hours",
    "table_columns",
    "table_read_error",
    "table_row_count",
    "type_name",
]

# Delta's default for delta.deletedFileRetentionDuration ("interval 1 week").
DEFAULT_RETENTION_HOURS = 168.0
_INTERVAL = re.compile(r"^\s*interval\s+(\d+(?:\.\d+)?)\s+([a-z]+?)s?\s*$", re.IGNORECASE)
_HOURS_PER_UNIT = {
    "nanosecond": 1 / 3.6e12,
    "microsecond": 1 / 3.6e9,
    "millisecond": 1 / 3.6e6,
    "second": 1 / 3600,
    "minute": 1 / 60,
    "hour": 1.0,
    "day": 24.0,
    "week": 168.0,
}

# A commit (00000000000000000000.json) or a checkpoint: the log has committed something.
_LOG_ENTRY = re.compile(r"^\d{20}\.(json|checkpoint\..*parquet)$")


def inspect_context_target(store_path: Path, table: str) -> TargetObservation:
    """What the Delta table at `store_path/table` looks like now (exists=False without a transaction log)."""
    location = Path(store_path) / table
    log = location / "_delta_log"
    if not log.exists() or (
        log.is_dir() and not any(_LOG_ENTRY.match(p.name) for p in log.iterdir())
    ):
        # No log, or a log with no commit yet (a first write that never finished): nothing is there.
        return TargetObservation(table=table, schema=None, exists=False)

    from deltalake import DeltaTable

    try:
        delta = DeltaTable(location)
        columns = tuple(
            TargetColumn(field.name, type_name(field.type), field.nullable)
            for field in delta.schema().fields
        )
        row_estimate = _row_count(delta)
        identity = f"delta:{delta.metadata().id}"
    except Exception as exc:  # delta-rs raises DeltaError, OSError, ValueError... for a damaged log
        raise table_read_error(location, exc) from None
    return TargetObservation(
        table=table,
        schema=None,
        exists=True,
        columns=columns,
        row_estimate=row_estimate,
        identity=identity,
    )


def type_name(type_: Any) -> str:
    """A deltalake schema type as text: Delta's names, nested ones written like Spark's
    (array<long>, map<string,double>, struct<a:long>)."""
    kind = type_.type
    if kind == "array":
        return f"array<{type_name(type_.element_type)}>"
    if kind == "map":
        return f"map<{type_name(type_.key_type)},{type_name(type_.value_type)}>"
    if kind == "struct":
        return "struct<" + ",".join(f"{f.name}:{type_name(f.type)}" for f in type_.fields) + ">"
    return str(kind)


def _row_count(delta: Any) -> int | None:
    """Sum of numRecords over the live files; None when any file was committed without stats."""
    actions = delta.get_add_actions(flatten=False)
    if actions.num_rows == 0:
        return 0
    if "num_records" not in actions.column_names:
        return None
    counts = actions.column("num_records").to_pylist()
    if any(count is None for count in counts):
        return None
    return int(sum(counts))


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0].strip() if lines else type(exc).__name__


def is_delta_table(location: Path) -> bool:
    """True when `location` has a transaction log with at least one commit (or checkpoint)."""
    log = Path(location) / "_delta_log"
    return log.is_dir() and any(_LOG_ENTRY.match(p.name) for p in log.iterdir())


def list_tables(store_path: Path) -> list[str]:
    """Names of the Delta tables directly under `store_path`, sorted.

    Directories starting with `_` or `.` (e.g. `_staging`) are the store's own, never tables.
    """
    store = Path(store_path)
    if not store.is_dir():
        return []
    return sorted(
        p.name
        for p in store.iterdir()
        if p.is_dir() and not p.name.startswith(("_", ".")) and is_delta_table(p)
    )


def table_columns(delta: Any) -> tuple[TargetColumn, ...]:
    """The columns of an open DeltaTable, with Delta's type names."""
    return tuple(
        TargetColumn(field.name, type_name(field.type), field.nullable)
        for field in delta.schema().fields
    )


def table_row_count(delta: Any) -> int | None:
    """Rows of an open DeltaTable from its file stats; None when a file has no stats."""
    return _row_count(delta)


def table_read_error(location: Path, exc: BaseException) -> DestinationUnreachable:
    """The error for a Delta table whose log delta-rs cannot read: a log hakiri can repair
    (text columns recorded as collated strings) says how; anything else is a damaged log."""
    from hakiri.destinations.context.repair import is_collation_error

    message = _first_line(exc)
    if is_collation_error(str(exc)):
        return DestinationUnreachable(
            f"cannot read the Delta table at {location}: its log records text columns as "
            "`string collate UTF8_BINARY`, a Spark type delta-rs does not read",
            f"`hakiri context repair {Path(location).name}` rewrites them as `string` in place, "
            "keeping every row and version (the table was written by an earlier hakiri on Spark)",
        )
    return DestinationUnreachable(
        f"cannot read the Delta table at {location}: {message}",
        "the context store's transaction log is damaged; restore it, or move the table away to rebuild it",
    )


def retention_hours(delta: Any) -> float | None:
    """The table's delta.deletedFileRetentionDuration in hours (None when it cannot be parsed)."""
    setting = delta.metadata().configuration.get("delta.deletedFileRetentionDuration")
    if setting is None:
        return DEFAULT_RETENTION_HOURS
    match = _INTERVAL.match(setting)
    if match is None or match.group(2).lower() not in _HOURS_PER_UNIT:
        return None  # delta-rs still enforces it
    return float(match.group(1)) * _HOURS_PER_UNIT[match.group(2).lower()]
