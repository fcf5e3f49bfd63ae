"""A batch's identity in a Delta table, the load ledger read from the log (delta-rs, in the
driver: no Spark job), schema checks, and delta-rs and filesystem failures as one-line
HakiriErrors. The writes themselves are `writes` (delta-spark) and `rs_commit` (delta-rs).

Every commit carries the batch's transaction identity, Delta's `txnAppId` with
`app_id = hakiri:<project>:<pipeline>:<target table>:<batch id>` and `txnVersion` 1,
recorded in the same log entry as the rows. Delta skips a write whose identity is
already in the log, and `DeltaTable.transaction_version(app_id)` (delta-rs) is the
load ledger: a batch whose app id is in a table's log is in that table. hakiri's own
metadata (batch, pipeline, run, project, watermark) is the commit's `userMetadata`,
a JSON object (`commit_metadata` reads it back).

Data files are written by Spark straight into the table directory; files of a write
that failed before its commit are invisible to every reader, and `hakiri context
vacuum` deletes them once they are older than the table's retention.
"""

from __future__ import annotations

import errno
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from hakiri.destinations.base import LoadRequest
from hakiri.errors import DestinationUnreachable, HakiriError, LoadError

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable

__all__ = [
    "app_id",
    "batch_metadata",
    "check_staged_schema",
    "commit_metadata",
    "delta_errors",
    "delta_uri",
    "is_committed",
    "live_files",
    "open_table",
    "staged_arrow_schema",
    "user_metadata",
    "without_control_columns",
]

# Keys of a commit's custom metadata (shown by `hakiri context history`).
BATCH_KEY = "hakiri.batch_id"
PIPELINE_KEY = "hakiri.pipeline_id"
RUN_KEY = "hakiri.run_id"
PROJECT_KEY = "hakiri.project"
WATERMARK_KEY = "hakiri.watermark"
WATERMARK_COLUMN_KEY = "hakiri.watermark_column"
# Every batch is one transaction of its own app id: version 1, whatever the batch.
TXN_VERSION = 1

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
        from hakiri.destinations.context.inspect import table_read_error
        from hakiri.destinations.context.repair import is_collation_error

        if is_collation_error(str(exc)):
            return table_read_error(location, exc)
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


def without_control_columns(
    staged: pa.Schema, mode: str, control: Sequence[str], location: Path
) -> pa.Schema:
    """The staged columns that are the table's: without the load mode's control columns
    (cdc_mirror's op), which tell the write what to do and must have been staged."""
    import pyarrow as pa

    missing = [name for name in control if name not in staged.names]
    if missing:
        raise LoadError(
            f"load mode {mode}: the rows staged for {location} lack {', '.join(missing)}",
            "they say what to do with each row and come from the mode's source: keep them "
            "through the pipeline's transforms",
        )
    return pa.schema([field for field in staged if field.name not in control])


def delta_uri(location: Path) -> str:
    """A table path for Spark: explicitly file:, whatever the cluster's default filesystem is."""
    return "file://" + str(location.resolve())


def user_metadata(metadata: dict[str, str]) -> str:
    """hakiri's commit metadata as Delta's `userMetadata` (a JSON object)."""
    return json.dumps(metadata, sort_keys=True)


def commit_metadata(entry: Mapping[str, Any]) -> dict[str, Any]:
    """hakiri's metadata (`hakiri.*` keys) of a commit, as delta-rs's `history()` lists it: in
    `userMetadata` (delta-spark's commits) or as keys of the commit itself (tables written by
    hakiri's earlier delta-rs writer)."""
    found = {k: v for k, v in entry.items() if k.startswith("hakiri.")}
    text = entry.get("userMetadata")
    if isinstance(text, str) and text.startswith("{"):
        try:
            document = json.loads(text)
        except ValueError:
            document = {}
        if isinstance(document, dict):
            found.update({k: v for k, v in document.items() if str(k).startswith("hakiri.")})
    return found
