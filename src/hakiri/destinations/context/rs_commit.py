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

__all__ = ["append_files", "merge_files"]


def _properties(request: LoadRequest, metadata: dict[str, str]) -> CommitProperties:
    """The batch's app transaction, and hakiri's metadata as `userMetadata` (the key
    `commit.commit_metadata` reads back, as from a delta-spark commit)."""
    from deltalake.transaction import CommitProperties, Transaction

    return CommitProperties(
        custom_metadata={"userMetadata": user_metadata(metadata)},
        app_transactions=[Transaction(app_id(request), TXN_VERSION)],
    )


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
) -> int:
    """delta-rs's MERGE of the staged rows into the table on `key` (a match gets every staged
    column, the rest is inserted), streamed from the Parquet files; the rows inserted or
    updated. A missing table is created from the files instead."""
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
        if [name for name in dataset.schema.names if name not in key]:
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
