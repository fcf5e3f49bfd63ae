"""Commits by delta-rs, in the hakiri process: the context store's path on an engine whose Delta
writer does not keep Delta's transaction identity (Sail 0.7 ignores txnAppId/txnVersion).

The engine has already staged the batch as Parquet (`staging`). Append and overwrite rename
the staged files into the table directory and commit them in ONE metadata-only Delta commit
carrying the batch's app transaction (`commit.app_id`, version 1) and hakiri's metadata; an
upsert is delta-rs's MERGE of the staged files, carrying the same. So the ledger
(`commit.is_committed`, delta-rs's `transaction_version`) reads the same on every engine, and a
retried batch finds its id in the log exactly as after a delta-spark commit.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from hakiri.destinations.base import LoadRequest
from hakiri.destinations.context.commit import (
    TXN_VERSION,
    app_id,
    delta_errors,
    open_table,
    staged_arrow_schema,
    user_metadata,
)

if TYPE_CHECKING:
    from deltalake.transaction import CommitProperties

__all__ = ["append_files", "append_frame", "merge_files", "merge_frame"]


def _properties(request: LoadRequest, metadata: dict[str, str]) -> CommitProperties:
    """The batch's app transaction, and hakiri's metadata as `userMetadata` (the key
    `commit.commit_metadata` reads back, as from a delta-spark commit)."""
    return _identity(app_id(request), TXN_VERSION, user_metadata(metadata))


def commit_properties(metadata: dict[str, str]) -> CommitProperties:
    """hakiri's metadata as a delta-rs commit's `userMetadata`, for a commit that is no batch's
    (a schema change)."""
    from deltalake.transaction import CommitProperties

    return CommitProperties(custom_metadata={"userMetadata": user_metadata(metadata)})


def _identity(app: str, version: int, metadata_json: str) -> CommitProperties:
    from deltalake.transaction import CommitProperties, Transaction

    return CommitProperties(
        custom_metadata={"userMetadata": metadata_json},
        app_transactions=[Transaction(app, version)],
    )


def _spill(frame: Any, store: Path) -> Path:
    """The frame's rows written as Parquet by the engine into a directory of the store's
    staging area (a merge's source must not read the table the merge changes)."""
    import uuid

    from hakiri.destinations.context.staging import STAGING_DIR, write_parquet

    directory = store / STAGING_DIR / f"merge-{uuid.uuid4().hex[:16]}"
    write_parquet(frame, directory, f"staging the rows for {store}")
    return directory


def append_frame(
    frame: Any,
    location: Path,
    *,
    overwrite: bool,
    request: LoadRequest,
    metadata: dict[str, str],
) -> None:
    """`append_files` for rows in a DataFrame: the engine stages them, delta-rs commits."""
    from hakiri.destinations.context.staging import StagingArea

    directory = _spill(frame, location.parent)
    try:
        files = StagingArea.part_files(directory)
        append_files(location, files, overwrite=overwrite, request=request, metadata=metadata)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def merge_frame(
    source: Any,
    location: Path,
    condition: str,
    clauses: Sequence[tuple[str, str | None, dict[str, str] | None]],
    identity: tuple[str, int, str],
) -> dict[str, int]:
    """delta-rs's MERGE of `source` (alias s) into the table at `location` (alias t) ON
    `condition`, with `clauses` (kind, condition, assignments) in order, carrying `identity`
    (app id, version, userMetadata); Delta's metrics under delta-spark's names."""
    import pyarrow.dataset as ds

    from hakiri.destinations.context.staging import StagingArea

    table = open_table(location)
    if table is None:
        raise ValueError(f"no Delta table at {location} to merge into")
    directory = _spill(source, location.parent)
    try:
        files = [str(f) for f in StagingArea.part_files(directory)]
        with delta_errors(location, "merge into"):
            merger = table.merge(
                source=ds.dataset(files, format="parquet").scanner().to_reader(),
                predicate=condition,
                source_alias="s",
                target_alias="t",
                commit_properties=_identity(*identity),
            )
            for kind, when, assignments in clauses:
                merger = _clause(merger, kind, when, assignments)
            metrics = merger.execute()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return {
        "num_inserted_rows": int(metrics.get("num_target_rows_inserted", 0)),
        "num_updated_rows": int(metrics.get("num_target_rows_updated", 0)),
        "num_deleted_rows": int(metrics.get("num_target_rows_deleted", 0)),
    }


def _clause(merger: Any, kind: str, when: str | None, assignments: dict[str, str] | None) -> Any:
    if kind == "matched_update":
        return merger.when_matched_update(updates=assignments, predicate=when)
    if kind == "matched_delete":
        return merger.when_matched_delete(predicate=when)
    if kind == "not_matched_insert":
        return merger.when_not_matched_insert(updates=assignments, predicate=when)
    if kind == "not_matched_by_source_update":
        return merger.when_not_matched_by_source_update(updates=assignments, predicate=when)
    if kind == "not_matched_by_source_delete":
        return merger.when_not_matched_by_source_delete(predicate=when)
    raise ValueError(f"unknown MERGE clause {kind}")


@dataclass
class _Moved:
    """Staged files renamed into a table directory, not committed yet."""

    location: Path
    actions: list[Any] = field(default_factory=list)

    def remove(self) -> None:
        """Delete the moved files again (their commit never happened)."""
        for action in self.actions:
            with contextlib.suppress(OSError):
                (self.location / unquote(action.path)).unlink()


def _move_into_table(files: Sequence[Path], location: Path, request: LoadRequest) -> _Moved:
    """Rename the staged files that hold rows into the table directory; their AddActions.
    Files without rows stay behind (deleted with the staging area)."""
    import pyarrow.parquet as pq
    from deltalake.transaction import AddAction

    batch = hashlib.sha256(app_id(request).encode()).hexdigest()[:16]
    moved = _Moved(location)
    with delta_errors(location, "add files to"):
        location.mkdir(parents=True, exist_ok=True)
        try:
            for n, source in enumerate(files):
                rows = pq.read_metadata(source).num_rows
                if rows == 0:
                    continue
                name = f"{batch}-{source.parent.parent.name}-{n:05d}.parquet"  # URI-safe
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


def append_files(
    location: Path,
    files: Sequence[Path],
    *,
    overwrite: bool,
    request: LoadRequest,
    metadata: dict[str, str],
) -> None:
    """ONE commit: the staged files added to the table (`overwrite`: in place of every file of
    the current version), creating a missing table, with the batch's app transaction."""
    table = open_table(location)
    schema = staged_arrow_schema(files) if files else None
    moved = _move_into_table(files, location, request)
    properties = _properties(request, metadata)
    try:
        with delta_errors(location, "commit to"):
            if table is None:
                from deltalake import Schema
                from deltalake.transaction import create_table_with_add_actions

                if schema is None:
                    raise ValueError("a new table needs at least one staged file")
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
    except BaseException:
        moved.remove()
        raise


def merge_files(
    location: Path,
    files: Sequence[Path],
    key: Sequence[str],
    request: LoadRequest,
    metadata: dict[str, str],
    *,
    update: bool = True,
) -> int:
    """delta-rs's MERGE of the staged rows into the table on `key` (a match gets every staged
    column, or is left alone without `update`; the rest is inserted), streamed from the Parquet
    files; the rows inserted or updated. A missing table is created from the files instead."""
    import pyarrow.dataset as ds

    table = open_table(location)
    if table is None:
        append_files(location, files, overwrite=False, request=request, metadata=metadata)
        return int(sum(_rows(f) for f in files))
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
        if update and [name for name in dataset.schema.names if name not in key]:
            merger = merger.when_matched_update_all()
        metrics = merger.when_not_matched_insert_all().execute()
    return int(metrics.get("num_target_rows_inserted", 0)) + int(
        metrics.get("num_target_rows_updated", 0)
    )


def _rows(path: Path) -> int:
    import pyarrow.parquet as pq

    return int(pq.read_metadata(path).num_rows)


def _quoted(name: str) -> str:
    """A column name as a SQL identifier for delta-rs (DataFusion): double-quoted, exact case."""
    return '"' + name.replace('"', '""') + '"'
