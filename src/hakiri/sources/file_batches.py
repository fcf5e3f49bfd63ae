"""Cut a table's pending input into batches with deterministic ids.

A file batch is one file, identified by its content; a snapshot batch (truncate,
blue_green: the whole table is replaced) is every file of the table at once,
identified by the fingerprint of the set. Same input, same id: that is what lets
the destination's ledger recognise a batch committed before a crash.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping, Sequence

from hakiri.catalog.records import NewBatch
from hakiri.errors import SourceDataError
from hakiri.sources.base import SourceFile
from hakiri.spec.load import LoadMode
from hakiri.spec.pipeline import FilesConfig

SNAPSHOT_MODES = (LoadMode.TRUNCATE, LoadMode.BLUE_GREEN)


def file_batch_id(table: str, content_hash: str) -> str:
    return f"file:{table}:{content_hash.removeprefix('sha256:')}"


def snapshot_batch_id(table: str, files: Sequence[SourceFile]) -> str:
    listing = json.dumps(sorted((f.path, f.content_hash) for f in files))
    return f"snapshot:{table}:{hashlib.sha256(listing.encode()).hexdigest()}"


def snapshot_files(batch: NewBatch | str | None) -> list[tuple[str, str]]:
    """The (path, hash) pairs a snapshot batch was planned with (kept in its predicate)."""
    predicate = batch.predicate if isinstance(batch, NewBatch) else batch
    return [tuple(pair) for pair in json.loads(predicate or "[]")]  # type: ignore[misc]


def plan_file_batches(
    table: str,
    mode: LoadMode,
    config: FilesConfig,
    files: Sequence[SourceFile],
    committed: Mapping[str, str],
    known: Collection[str] = (),
) -> list[NewBatch]:
    """Batches for the files not yet loaded; `committed` maps path -> hash already loaded,
    `known` holds the ids of the table's batches already in the catalog (whatever their
    status: the catalog keeps, never re-adds, a batch it has)."""
    if mode in SNAPSHOT_MODES:
        if (
            not files
        ):  # nothing to replace the table with: never empty it because a glob matched nothing
            return []
        batch_id = snapshot_batch_id(table, files)
        if batch_id in known:  # the table's files are as they were when last loaded
            return []
        listing = json.dumps(sorted([f.path, f.content_hash] for f in files))
        return [
            NewBatch(
                batch_id,
                table,
                "snapshot",
                predicate=listing,
                size_bytes=sum(f.size for f in files),
            )
        ]
    batches: list[NewBatch] = []
    for f in files:
        loaded = committed.get(f.path)
        if loaded == f.content_hash:
            continue
        if loaded is not None and config.on_change == "ignore":
            continue
        if loaded is not None and config.on_change == "error":
            raise SourceDataError(
                f"{f.path} changed after it was loaded (on_change = 'error')",
                "restore the file, or set on_change = 'reload' (load it again) or 'ignore'",
            )
        batch_id = file_batch_id(table, f.content_hash)
        if batch_id in known or any(b.batch_id == batch_id for b in batches):
            continue  # the same bytes under another name: loaded (or queued) once
        batches.append(
            NewBatch(
                batch_id,
                table,
                "file",
                f.path,
                f.content_hash,
                size_bytes=f.size,
            )
        )
    return batches
