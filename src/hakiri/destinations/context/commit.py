"""The one place that talks to delta-rs for writing: commits of staged Parquet files, merges, and
the translation of delta-rs and filesystem failures into one-line HakiriErrors.

Every commit carries the batch's app transaction, `Transaction(app_id, 1)` with
`app_id = hakiri:<project>:<pipeline>:<target table>:<batch id>`, recorded in the
same log entry as the rows; `DeltaTable.transaction_version(app_id)` is then the
load ledger: a batch whose app id is in a table's log is in that table. delta-rs
does not refuse a second commit with a known app id by itself, so the caller checks
first (the engine's pipeline lease keeps two commits of one batch from racing).

Data files are Spark's staged part files, renamed into the table directory
(`<batch hash>-<staging area>-<n>.parquet`) and committed as `AddAction`s with
`numRecords` stats. Files moved but never committed (a crash in between) are
invisible to every reader; a full vacuum (`hakiri context vacuum`, which must run
delta-rs's `vacuum(full=True)` to see files the log never mentioned) deletes
them once they are older than the table's retention.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

from hakiri.destinations.base import LoadRequest
from hakiri.errors import DestinationUnreachable, HakiriError, LoadError

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable
    from deltalake.transaction import AddAction, CommitProperties

__all__ = [
    "MovedFiles",
    "app_id",
    "batch_metadata",
    "check_staged_schema",
    "commit_files",
    "delta_errors",
    "is_committed",
    "live_files",
    "merge_rows",
    "move_into_table",
    "open_table",
    "staged_arrow_schema",
]

# Keys of a commit's custom metadata (shown by `hakiri context history`).
BATCH_KEY = "hakiri.batch_id"
PIPELINE_KEY = "hakiri.pipeline_id"
RUN_KEY = "hakiri.run_id"
PROJECT_KEY = "hakiri.project"
WATERMARK_KEY = "hakiri.watermark"
WATERMARK_COLUMN_KEY = "hakiri.watermark_column"

_EVOLUTION_HINT = (
    "`hakiri apply` evolves the table to the source's columns before it stages a batch "
    "(schema_policy); apply again, or make the pipeline's transforms produce the table's columns"
)


def app_id(request: LoadRequest) -> str:
    """The batch's Delta app transaction id: one per (project, pipeline, target table, batch).

    The target table is part of it (as it is of the PostgreSQL ledger's key) because one
    quarantine table may take the records of several tables of a pipeline."""
    return ":".join(
        ("hakiri", request.project, request.pipeline_id, request.target_table, request.batch_id)
    )


def batch_metadata(request: LoadRequest, **extra: str) -> dict[str, str]:
    """The commit's custom metadata: who wrote this version, for which batch."""
    return {
        BATCH_KEY: request.batch_id,
        PIPELINE_KEY: request.pipeline_id,
        RUN_KEY: request.run_id,
        PROJECT_KEY: request.project,
        **extra,
    }


def _properties(request: LoadRequest, metadata: dict[str, str]) -> CommitProperties:
    from deltalake.transaction import CommitProperties, Transaction

    return CommitProperties(
        custom_metadata=metadata, app_transactions=[Transaction(app_id(request), 1)]
    )


# ------------------------------------------------------------------ errors


@contextmanager
def delta_errors(
    location: Path, action: str, *, reading: bool = False, what: str = "the Delta table at"
) -> Iterator[None]:
    """delta-rs and filesystem failures inside the block become one-line HakiriErrors naming
    the path ("cannot <action> <what> <location>: <reason>"): DestinationUnreachable when
    reading, LoadError when writing."""
    try:
        yield
    except HakiriError:
        raise
    except Exception as exc:
        raise _translate(exc, location, f"{action} {what}", reading) from exc


def _translate(exc: Exception, location: Path, action: str, reading: bool) -> HakiriError:
    from deltalake.exceptions import CommitFailedError, DeltaProtocolError, SchemaMismatchError

    reason = f"cannot {action} {location}: {_first_line(exc)}"
    if isinstance(exc, CommitFailedError):
        return LoadError(
            reason,
            "another writer committed to the table at the same time; apply again "
            "(the table was left at its previous version)",
        )
    if isinstance(exc, SchemaMismatchError):
        return LoadError(reason, _EVOLUTION_HINT)
    if isinstance(exc, DeltaProtocolError):
        return LoadError(
            reason,
            "the table uses a Delta feature hakiri's writer (delta-rs) does not support; "
            "load into a new table",
        )
    if isinstance(exc, PermissionError):
        return LoadError(reason, f"let hakiri's user read and write {location.parent}")
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return LoadError(reason, "free some disk space (or vacuum old versions), then apply again")
    if reading:
        return DestinationUnreachable(
            reason,
            "the context store's transaction log is damaged; restore it, or move the table "
            "away to rebuild it",
        )
    return LoadError(reason, "rerun with --debug for the details; the table kept its last version")


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0].strip() if lines else type(exc).__name__


# ------------------------------------------------------------------ reading the log


def open_table(location: Path, version: int | None = None) -> DeltaTable | None:
    """The Delta table at `location`; None when it has no committed log yet."""
    from hakiri.destinations.context.inspect import is_delta_table

    if not is_delta_table(location):
        return None
    from deltalake import DeltaTable

    with delta_errors(location, "read", reading=True):
        return DeltaTable(str(location), version=version)


def is_committed(location: Path, request: LoadRequest) -> bool:
    """Is the batch's app transaction in the table's log?"""
    table = open_table(location)
    if table is None:
        return False
    with delta_errors(location, "read", reading=True):
        return table.transaction_version(app_id(request)) is not None


def live_files(table: DeltaTable, location: Path) -> list[Path]:
    """The data files of the table's current version, as local paths."""
    with delta_errors(location, "read", reading=True):
        uris = table.file_uris()
    # delta-rs returns local files as percent-encoded absolute paths.
    return [Path(unquote(uri)) for uri in uris]


# ------------------------------------------------------------------ schemas


def staged_arrow_schema(files: Sequence[Path]) -> pa.Schema:
    """The Arrow schema of the staged Parquet files, without Spark's metadata, every field
    nullable (a context table's columns all are; see `staging.staged_columns`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pq.read_schema(files[0]).remove_metadata()
    return pa.schema([_nullable(field) for field in schema])


def _nullable(field: pa.Field) -> pa.Field:
    import pyarrow as pa

    kind = field.type
    if pa.types.is_struct(kind):
        kind = pa.struct([_nullable(kind.field(i)) for i in range(kind.num_fields)])
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
        kind = pa.list_(_nullable(kind.value_field))
    elif pa.types.is_map(kind):
        kind = pa.map_(kind.key_type, _nullable(kind.item_field).type)
    return pa.field(field.name, kind, nullable=True)


def check_staged_schema(table: DeltaTable, staged: pa.Schema, location: Path) -> None:
    """The staged columns must be the table's columns (by name, any order), with the same types,
    or some of them: a column the source no longer sends (after schema evolution) is absent
    from the staged files, and Delta readers see NULL for a column a data file does not have.
    The commit keeps the table's full schema either way."""
    from deltalake import Schema

    from hakiri.destinations.context.inspect import table_columns, type_name

    with delta_errors(location, "read", reading=True):
        current = {c.name: c.type for c in table_columns(table)}
    with delta_errors(location, "convert the staged rows for"):
        incoming = {field.name: type_name(field.type) for field in Schema.from_arrow(staged).fields}
    extra = [name for name in incoming if name not in current]
    changed = [
        f"{name} {current[name]} -> {incoming[name]}"
        for name in current
        if name in incoming and current[name] != incoming[name]
    ]
    if not extra and not changed:
        return
    missing = [name for name in current if name not in incoming]
    parts = []
    if extra:
        parts.append("new columns " + ", ".join(extra))
    if missing:
        parts.append("missing columns " + ", ".join(missing))
    if changed:
        parts.append("changed types " + ", ".join(changed))
    raise LoadError(
        f"the staged rows do not match the columns of the Delta table at {location}: "
        + "; ".join(parts),
        _EVOLUTION_HINT,
    )


# ------------------------------------------------------------------ writing


@dataclass
class MovedFiles:
    """Staged part files renamed into a table directory, not committed yet."""

    location: Path
    actions: list[AddAction]

    def remove(self) -> None:
        """Delete the moved files again (their commit never happened)."""
        for action in self.actions:
            with contextlib.suppress(OSError):
                (self.location / unquote(action.path)).unlink()


def move_into_table(
    files: Sequence[Path], location: Path, request: LoadRequest, staging: str
) -> MovedFiles:
    """Rename the staged part files that hold rows into the table directory; their AddActions.

    Files without rows are left behind (they are deleted with the staging area)."""
    import pyarrow.parquet as pq
    from deltalake.transaction import AddAction

    batch = hashlib.sha256(app_id(request).encode()).hexdigest()[:16]
    moved = MovedFiles(location, [])
    with delta_errors(location, "add files to"):
        location.mkdir(parents=True, exist_ok=True)
        try:
            for n, source in enumerate(files):
                rows = pq.read_metadata(source).num_rows
                if rows == 0:
                    continue
                name = f"{batch}-{staging}-{n:05d}.parquet"  # URI-safe: no encoding needed
                target = location / name
                os.replace(source, target)
                stat = target.stat()
                moved.actions.append(
                    AddAction(
                        path=name,
                        size=stat.st_size,
                        partition_values={},
                        modification_time=int(stat.st_mtime * 1000),
                        data_change=True,
                        stats=json.dumps({"numRecords": rows}),
                    )
                )
        except BaseException:
            moved.remove()
            raise
    return moved


def commit_files(
    location: Path,
    table: DeltaTable | None,
    moved: MovedFiles,
    schema: pa.Schema,
    *,
    overwrite: bool,
    request: LoadRequest,
    metadata: dict[str, str],
) -> None:
    """ONE commit: create the table with the files, or add them to it (`overwrite`: in place of
    every file of the current version), with the batch's app transaction."""
    properties = _properties(request, metadata)
    with delta_errors(location, "commit to"):
        if table is None:
            from deltalake import Schema
            from deltalake.transaction import create_table_with_add_actions

            create_table_with_add_actions(
                str(location),
                Schema.from_arrow(schema),
                moved.actions,
                mode="error",
                commit_properties=properties,
            )
        else:
            table.create_write_transaction(
                list(moved.actions),
                "overwrite" if overwrite else "append",
                table.schema(),
                commit_properties=properties,
            )


def merge_rows(
    table: DeltaTable,
    location: Path,
    files: Sequence[Path],
    key: Sequence[str],
    request: LoadRequest,
    metadata: dict[str, str],
) -> int:
    """MERGE the staged rows into the table on `key` (update every staged column of a match,
    insert the rest), streamed from the Parquet files into delta-rs; the rows inserted or updated.

    Table columns the staged files lack are left alone in matched rows and NULL in inserted
    ones; with nothing but the key staged, matched rows are not touched at all."""
    import pyarrow.dataset as ds

    predicate = " AND ".join(f"t.{_quoted(k)} = s.{_quoted(k)}" for k in key)
    with delta_errors(location, "merge into"):
        dataset = ds.dataset([str(f) for f in files], format="parquet")
        merger = table.merge(
            source=dataset.scanner().to_reader(),
            predicate=predicate,
            source_alias="s",
            target_alias="t",
            commit_properties=_properties(request, metadata),
        )
        if [name for name in dataset.schema.names if name not in key]:
            merger = merger.when_matched_update_all()
        metrics = merger.when_not_matched_insert_all().execute()
    return int(metrics.get("num_target_rows_inserted", 0)) + int(
        metrics.get("num_target_rows_updated", 0)
    )


def _quoted(name: str) -> str:
    """A column name as a SQL identifier for delta-rs (DataFusion): double-quoted, exact case."""
    return '"' + name.replace('"', '""') + '"'
