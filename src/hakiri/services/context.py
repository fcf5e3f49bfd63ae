"""`hakiri context …`: list, read and maintain the Delta tables of the project's context store.

Reading is JVM-free: delta-rs reads the transaction logs and data files (`tables`, `show`,
`history`). `optimize` rewrites data, so Spark does it (delta-spark, in the executors);
`vacuum` only lists and deletes files, with delta-rs. Every store the project
uses is searched: `[context] path`, plus any pipeline's own destination `config.path`.
Reads touch only what they need (stats for `tables`, the first N rows for `show`).
"""

from __future__ import annotations

import base64
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from hakiri.destinations.context.commit import commit_metadata
from hakiri.destinations.context.inspect import (
    is_delta_table,
    list_tables,
    retention_hours,
    table_columns,
    table_read_error,
    table_row_count,
)
from hakiri.errors import HakiriError
from hakiri.spec.connections import context_store_path
from hakiri.spec.loader import Project, display_path, load_project

__all__ = [
    "ContextTable",
    "context_stores",
    "list_context_tables",
    "open_version",
    "optimize_table",
    "repair_tables",
    "show_table",
    "stores_of",
    "table_history",
    "vacuum_table",
]


@dataclass(frozen=True)
class ContextTable:
    """One Delta table of a context store: `<store>/<name>`."""

    name: str
    store: Path

    @property
    def path(self) -> Path:
        return self.store / self.name


def context_stores(root: Path, env: Mapping[str, str] | None = None) -> list[Path]:
    """The project's store first, then every distinct store a pipeline overrides it with."""
    return stores_of(load_project(root, os.environ if env is None else env))


def stores_of(project: Project) -> list[Path]:
    """`context_stores` of a project already loaded."""
    candidates = [project.root / project.settings.context.path] + [
        context_store_path(project.root, project.settings, spec)
        for spec in project.pipelines.values()
    ]
    return list(dict.fromkeys(p.resolve() for p in candidates))


def list_context_tables(root: Path, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Every table of every store: version, rows and size from the log, the last commit."""
    stores = context_stores(root, env)
    tables = [
        _summary(ContextTable(name, store)) for store in stores for name in list_tables(store)
    ]
    return {"stores": [str(s) for s in stores], "tables": tables}


def show_table(
    root: Path,
    table: str,
    limit: int = 20,
    version: int | None = None,
    store: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The first `limit` rows of a table (at `version`, else the latest); never reads the whole table."""
    found = _find(root, table, store, env)
    delta = open_version(found, version)
    at = delta.version()
    try:
        # One thread, no readahead: reads stop at `limit` rows, and no scan thread is left
        # calling delta-rs's Python filesystem handler when the interpreter exits (that
        # crashed the process about one run in three).
        head = delta.to_pyarrow_dataset().head(
            limit, use_threads=False, batch_readahead=0, fragment_readahead=0
        )
    except FileNotFoundError as exc:
        raise HakiriError(
            f"cannot read version {at} of `{found.name}`: a data file is missing ({_first_line(exc)})",
            "a vacuum removed files this version needs; pick a newer version "
            f"(`hakiri context history {found.name}`)",
        ) from None
    except Exception as exc:  # unsupported table features, unreadable parquet...
        raise HakiriError(
            f"cannot read the rows of `{found.name}` at {display_path(found.path)}: {_first_line(exc)}",
            "rerun with --debug for the details",
        ) from None
    return {
        "table": found.name,
        "path": str(found.path),
        "version": at,
        "rows_total": table_row_count(delta),
        "columns": [
            {"name": c.name, "type": c.type, "nullable": c.nullable} for c in table_columns(delta)
        ],
        "rows": [{k: _json_value(v) for k, v in row.items()} for row in head.to_pylist()],
    }


def table_history(
    root: Path,
    table: str,
    limit: int | None = 20,
    store: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The table's commits, newest first, with hakiri's own commit metadata (`hakiri.*` keys)."""
    found = _find(root, table, store, env)
    delta = open_version(found)
    try:
        entries = delta.history(limit)
    except Exception as exc:
        raise table_read_error(found.path, exc) from None
    versions = [
        {
            "version": entry.get("version"),
            "timestamp": _iso_from_ms(entry.get("timestamp")),
            "operation": entry.get("operation"),
            "parameters": _json_value(entry.get("operationParameters") or {}),
            "metrics": _json_value(entry.get("operationMetrics") or {}),
            "metadata": {k: _json_value(v) for k, v in sorted(commit_metadata(entry).items())},
        }
        for entry in entries
    ]
    versions.sort(key=lambda v: v["version"] if v["version"] is not None else -1, reverse=True)
    return {"table": found.name, "path": str(found.path), "versions": versions}


def optimize_table(
    root: Path, table: str, store: Path | None = None, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Compact small files into bigger ones (Delta's OPTIMIZE, run by Spark in the executors);
    a new version when anything was rewritten. A table of one file starts no JVM."""
    found = _find(root, table, store, env)
    delta = open_version(found)
    version_before, files_before = delta.version(), _file_count(delta)
    added = removed = 0
    if files_before > 1:
        added, removed = _compact(root, found, env)
        delta = open_version(found)
    return {
        "table": found.name,
        "path": str(found.path),
        "version_before": version_before,
        "version": delta.version(),
        "files_before": files_before,
        "files_after": _file_count(delta),
        "files_added": added,
        "files_removed": removed,
    }


def _compact(root: Path, found: ContextTable, env: Mapping[str, str] | None) -> tuple[int, int]:
    """Delta's `OPTIMIZE` (bin-packing compaction), run by Spark: (files added, files removed)."""
    from hakiri.destinations.context.merge import delta_table_sql
    from hakiri.engine.run_context import RunContext
    from hakiri.services.apply import LazySpark
    from hakiri.spark.errors import spark_errors

    variables = os.environ if env is None else env
    project = load_project(root, variables)
    if RunContext.of(project, variables).supports("context_maintenance").status != "works":
        return _compact_by_delta_rs(found)
    spark = LazySpark(project, delta=True, env=variables)
    try:
        with spark_errors(f"optimizing `{found.name}` ({display_path(found.path)})"):
            rows = spark.get().sql(f"OPTIMIZE {delta_table_sql(found.path)}").collect()
            metrics = rows[0] if rows else None
    finally:
        spark.stop()
    done = metrics["metrics"] if metrics is not None else None
    if done is None:
        return 0, 0
    return int(done["numFilesAdded"] or 0), int(done["numFilesRemoved"] or 0)


def _compact_by_delta_rs(found: ContextTable) -> tuple[int, int]:
    """delta-rs's bin-packing compaction, for an engine without Delta's OPTIMIZE (Sail): one
    new version, as OPTIMIZE makes; (files added, files removed)."""
    from hakiri.destinations.context.commit import delta_errors

    with delta_errors(found.path, "optimize"):
        metrics = open_version(found).optimize.compact()
    return int(metrics.get("numFilesAdded", 0)), int(metrics.get("numFilesRemoved", 0))


def vacuum_table(
    root: Path,
    table: str,
    retain_hours: int,
    dry_run: bool = False,
    force: bool = False,
    store: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Delete data files no version newer than `retain_hours` needs (only list them with dry_run).

    Refuses a retention below the table's own (`delta.deletedFileRetentionDuration`, 168h by
    default) unless `force`: readers and time travel may still need those files.
    """
    found = _find(root, table, store, env)
    delta = open_version(found)
    retention = retention_hours(delta)
    if not force and retention is not None and retain_hours < retention:
        raise HakiriError(
            f"refusing to vacuum `{found.name}` keeping only {retain_hours}h: the table keeps "
            f"removed files for {retention:g}h ({display_path(found.path)})",
            "older versions (time travel) and running readers may still need those files; "
            f"pass --retain-hours {math.ceil(retention)}, or --force if you are sure",
        )
    try:
        files = delta.vacuum(
            retention_hours=retain_hours,
            dry_run=dry_run,
            enforce_retention_duration=not force,
            # full: also files no commit ever referenced (moved in by a load that crashed
            # before its commit), not only files that later versions removed.
            full=True,
        )
    except Exception as exc:
        raise _maintenance_error("vacuum", found, exc) from None
    return {
        "table": found.name,
        "path": str(found.path),
        "dry_run": dry_run,
        "retain_hours": retain_hours,
        "table_retention_hours": retention,
        "version": delta.version(),
        "files": sorted(files),
    }


def repair_tables(
    root: Path,
    tables: list[str],
    dry_run: bool = False,
    store: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Rewrite the `string collate UTF8_BINARY` columns an earlier hakiri recorded in tables'
    logs as `string`, in place, every version kept (`destinations.context.repair`); `tables`
    empty: every table of every store. One entry per table looked at."""
    from hakiri.destinations.context.repair import repair_collated_strings

    if tables:
        found = [_find(root, name, store, env) for name in tables]
    else:
        found = [
            ContextTable(name, s) for s in context_stores(root, env) for name in list_tables(s)
        ]
    done = []
    for table in found:
        repair = repair_collated_strings(table.path, dry_run=dry_run)
        if repair.changed and not dry_run:
            open_version(table)  # delta-rs reads it now, or says what else is wrong
        done.append(
            {
                "table": table.name,
                "path": str(table.path),
                "dry_run": dry_run,
                "columns": sorted(repair.columns),
                "log_entries": repair.entries,
                "originals": str(repair.kept_in) if repair.kept_in else None,
            }
        )
    return done


def _json_value(value: Any) -> Any:
    """A value read from Delta as JSON: datetimes ISO, decimals as strings, bytes as base64."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_json_value(v) for v in value]
    return str(value)


# ---------------------------------------------------------------- finding and opening tables


def _find(
    root: Path, table: str, store: Path | None, env: Mapping[str, str] | None
) -> ContextTable:
    stores = context_stores(root, env)
    if store is not None:
        chosen = store if store.is_absolute() else (Path(root) / store)
        stores = [chosen.resolve()]
    usable = table and "/" not in table and "\\" not in table and not table.startswith(("_", "."))
    matches = [s for s in stores if usable and is_delta_table(s / table)]
    if len(matches) == 1:
        return ContextTable(table, matches[0])
    where = ", ".join(display_path(s) for s in stores)
    if matches:
        raise HakiriError(
            f"table `{table}` is in {len(matches)} context stores ({where})",
            "pass --store PATH to pick one",
        )
    existing = sorted({name for s in stores for name in list_tables(s)})
    raise HakiriError(
        f"no table `{table}` in the context store ({where})",
        f"the tables are: {', '.join(existing)}"
        if existing
        else "the store has no tables yet; `hakiri apply` writes them",
    )


def open_version(found: ContextTable, version: int | None = None) -> Any:
    """The table at `version` (the latest when None), or an error naming the latest."""
    from deltalake import DeltaTable

    try:
        delta = DeltaTable(found.path)
    except Exception as exc:  # DeltaError, OSError... for a damaged log
        raise table_read_error(found.path, exc) from None
    latest = delta.version()
    if version is None or version == latest:
        return delta
    if version > latest:
        raise HakiriError(
            f"table `{found.name}` has no version {version} (the latest is {latest})",
            f"`hakiri context history {found.name}` lists its versions",
        )
    try:
        delta.load_as_version(version)
    except Exception as exc:
        raise HakiriError(
            f"version {version} of `{found.name}` can no longer be read: {_first_line(exc)}",
            f"its log entries were cleaned up; `hakiri context history {found.name}` "
            "lists the versions still there",
        ) from None
    return delta


def _summary(found: ContextTable) -> dict[str, Any]:
    document: dict[str, Any] = {
        "name": found.name,
        "store": str(found.store),
        "path": str(found.path),
        "version": None,
        "rows": None,
        "files": None,
        "size_bytes": None,
        "last_commit_at": None,
        "last_operation": None,
        "error": None,
    }
    try:
        delta = open_version(found)
        actions = delta.get_add_actions(flatten=False)
        last = delta.history(1)
    except HakiriError as exc:  # one damaged table must not hide the others
        document["error"] = exc.reason
        return document
    except Exception as exc:
        document["error"] = table_read_error(found.path, exc).reason
        return document
    document.update(
        version=delta.version(),
        rows=table_row_count(delta),
        files=actions.num_rows,
        size_bytes=int(sum(actions.column("size_bytes").to_pylist())) if actions.num_rows else 0,
        last_commit_at=_iso_from_ms(last[0].get("timestamp")) if last else None,
        last_operation=last[0].get("operation") if last else None,
    )
    return document


def _file_count(delta: Any) -> int:
    return int(delta.get_add_actions(flatten=False).num_rows)


def _maintenance_error(verb: str, found: ContextTable, exc: BaseException) -> HakiriError:
    if type(exc).__name__ == "CommitFailedError":
        hint = "another writer committed to the table meanwhile; rerun the command"
    elif verb == "vacuum" and "retention" in str(exc).lower():
        hint = "pass --force to vacuum below the table's retention"
    else:
        hint = "rerun with --debug for the details"
    return HakiriError(
        f"cannot {verb} `{found.name}` ({display_path(found.path)}): {_first_line(exc)}", hint
    )


def _iso_from_ms(ms: Any) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(int(ms) / 1000, UTC).isoformat()


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0].strip() if lines else type(exc).__name__
