"""Cut a table's pending input into batches with deterministic ids.

A file batch is one file, identified by its content; a snapshot batch (truncate,
blue_green: the whole table is replaced) is every file of the table at once,
identified by the fingerprint of the set. Same input, same id: that is what lets
the destination's ledger recognise a batch committed before a crash.

A queued batch is bound to the bytes it was planned from. When its file changed or
vanished before it committed, `retired_file_batches` ends it as superseded or gone, and
the current content is planned as a batch of its own, so each content version that
loads contributes its rows once and a version that never loaded contributes nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping, Sequence

from hakiri.catalog.records import Batch, BatchStatus, NewBatch, Retirement
from hakiri.errors import SourceDataError
from hakiri.sources.base import Reload, SourceFile, latest_committed
from hakiri.spec.load import LoadMode, ModeName
from hakiri.spec.modes import strategy_of
from hakiri.spec.pipeline import FilesConfig


def file_batch_id(table: str, content_hash: str, after: str | None = None) -> str:
    """`file:<table>:<sha256>`; content loaded again after `after` (a file edited back to
    bytes it held before) gets `file:<table>:<sha256>:<digest of after>`."""
    base = f"file:{table}:{content_hash.removeprefix('sha256:')}"
    return base if after is None else f"{base}:{_digest(after)[:16]}"


def snapshot_batch_id(table: str, files: Sequence[SourceFile], after: str | None = None) -> str:
    """`snapshot:<table>:<digest of the (path, hash) pairs>`, and of `after` when the same
    files come back after another snapshot loaded."""
    listing = json.dumps(sorted((f.path, f.content_hash) for f in files))
    if after is not None:
        listing += f"\nafter {after}"
    return f"snapshot:{table}:{_digest(listing)}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def snapshot_files(batch: NewBatch | str | None) -> list[tuple[str, str]]:
    """The (path, hash) pairs a snapshot batch was planned with (kept in its predicate)."""
    predicate = batch.predicate if isinstance(batch, NewBatch) else batch
    return [tuple(pair) for pair in json.loads(predicate or "[]")]  # type: ignore[misc]


def short_hash(content_hash: str) -> str:
    """`sha256:0123456789ab`: enough of a content hash to tell versions apart in a message."""
    algorithm, _, digest = content_hash.partition(":")
    return f"{algorithm}:{digest[:12]}" if digest else content_hash[:12]


def gone_reason(path: str) -> str:
    return f"{path} is gone (deleted, moved, or no longer matched) before it was loaded"


def changed_reason(path: str, planned: str, now: str) -> str:
    return (
        f"{path} changed before it was loaded (planned from {short_hash(planned)}, "
        f"now {short_hash(now)}): its current content loads as a new batch"
    )


def snapshot_changed_reason(table: str, what: str) -> str:
    return (
        f"the files of {table} changed before the snapshot was loaded ({what}): "
        "the current files load as a new snapshot"
    )


def retired_file_batches(
    table: str, mode: LoadMode | ModeName, files: Sequence[SourceFile], queued: Sequence[Batch]
) -> list[Retirement]:
    """The table's queued batches (pending or failed) whose files are no longer what they
    were planned from: superseded when the content changed, gone when it vanished."""
    now = {f.path: f.content_hash for f in files}
    retired = []
    for batch in queued:
        if batch.table_name != table or not batch.status.queued:
            continue  # processing: its run holds it (a dead run's claim is released first)
        if batch.kind == "snapshot" and strategy_of(mode).snapshot:
            if dict(snapshot_files(batch.predicate)) == now:
                continue
            if not files:
                reason = f"every file of {table} is gone before the snapshot was loaded"
                retired.append(Retirement(batch.batch_id, BatchStatus.GONE, reason))
                continue
            planned = dict(snapshot_files(batch.predicate))
            reason = snapshot_changed_reason(table, _delta(planned, now))
            retired.append(Retirement(batch.batch_id, BatchStatus.SUPERSEDED, reason))
        elif batch.kind == "file" and batch.file_path is not None:
            current = now.get(batch.file_path)
            if current is None:
                retired.append(
                    Retirement(batch.batch_id, BatchStatus.GONE, gone_reason(batch.file_path))
                )
            elif current != batch.content_hash:
                reason = changed_reason(batch.file_path, batch.content_hash or "", current)
                retired.append(Retirement(batch.batch_id, BatchStatus.SUPERSEDED, reason))
    return retired


def _delta(planned: Mapping[str, str], now: Mapping[str, str]) -> str:
    """`a.csv changed, c.csv new, b.csv gone`: how a table's files differ from a snapshot's."""
    parts = [
        *(f"{p} changed" for p in sorted(planned) if p in now and now[p] != planned[p]),
        *(f"{p} new" for p in sorted(now) if p not in planned),
        *(f"{p} gone" for p in sorted(planned) if p not in now),
    ]
    shown = ", ".join(parts[:5]) + (f" and {len(parts) - 5} more" if len(parts) > 5 else "")
    return shown


def plan_file_batches(
    table: str,
    mode: LoadMode | ModeName,
    config: FilesConfig,
    files: Sequence[SourceFile],
    committed: Mapping[str, str],
    known: Collection[str] = (),
    history: Sequence[Batch] = (),
) -> list[NewBatch]:
    """Batches for the files not yet loaded; `committed` maps path -> hash already loaded,
    `known` holds the ids of the table's batches already in the catalog (whatever their
    status: the catalog keeps, never re-adds, a batch it has), `history` the table's
    batches (to tell what loaded last).

    Content that loaded before gets an id of its own when it comes back after something
    else loaded: a snapshot of files as they were two loads ago, a file edited back. Its
    id names the batch it follows, so the ledger, which has the first load's id, lets it
    through, and the target follows the files again."""
    if strategy_of(mode).snapshot:
        if (
            not files
        ):  # nothing to replace the table with: never empty it on a glob that matched nothing
            return []
        pairs = sorted([f.path, f.content_hash] for f in files)

        def same_files(batch: Batch) -> bool:
            return sorted(map(list, snapshot_files(batch.predicate))) == pairs

        latest = latest_committed(history, "snapshot")
        if latest is not None and same_files(latest):
            return []  # the table's files are as they were when last loaded
        if any(b.kind == "snapshot" and b.status.unfinished and same_files(b) for b in history):
            return []  # queued already
        batch_id = snapshot_batch_id(table, files)
        if batch_id in known and latest is not None:  # these files loaded before another set
            batch_id = snapshot_batch_id(table, files, after=latest.batch_id)
        if batch_id in known:
            return []
        return [
            NewBatch(
                batch_id,
                table,
                "snapshot",
                predicate=json.dumps(pairs),
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
        if any(
            b.kind == "file"
            and b.status.unfinished
            and (b.file_path, b.content_hash) == (f.path, f.content_hash)
            for b in history
        ):
            continue  # queued already
        batch_id = file_batch_id(table, f.content_hash)
        previous = latest_committed(history, "file", f.path) if loaded is not None else None
        if batch_id in known and previous is not None:
            # the file changed back to bytes it held (or another file held) before: loaded again
            batch_id = file_batch_id(table, f.content_hash, after=previous.batch_id)
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


def reloadable_files(
    pipeline_id: str, committed: Sequence[Batch], files: Sequence[SourceFile]
) -> Reload:
    """Of a lost target's committed batches, those whose files still hold what was loaded:
    each file batch whose file is unchanged, the newest snapshot when its files all are (a
    snapshot of other files is planned as new work anyway); the rest is lost."""
    now = {f.path: f.content_hash for f in files}
    again: list[Batch] = []
    lost: list[str] = []
    latest = latest_committed(committed, "snapshot")
    if latest is not None and all(now.get(p) == h for p, h in snapshot_files(latest.predicate)):
        again.append(latest)
    elif latest is not None and not files:
        lost.append("no file matches the path any more")
    for batch in (b for b in committed if b.kind == "file" and b.file_path is not None):
        if now.get(batch.file_path) == batch.content_hash:
            again.append(batch)
        else:
            what = "is gone" if batch.file_path not in now else "changed since it was loaded"
            lost.append(f"{batch.file_path} {what}")
    hint = (
        f"put the files back, or run `hakiri apply {pipeline_id} --restore-partial` to reload "
        "what the files still hold"
        if lost
        else None
    )
    return Reload(tuple(sorted(again, key=lambda b: b.seq)), tuple(lost), hint)
