"""Files as a source: a batch is a file (or, for full-refresh modes, every file of the table).

`observe` and `plan_batches` read file names, sizes and hashes only; `read` hands the
batch's files to Spark (`reader.read_files`).

A batch is bound to the bytes it was planned from: `read` hashes each file again before
Spark reads it (unless this process hashed it for the plan and its stat has not changed
since: `files.remembered_hash`), and the read's `verify` (after staging, before the commit) checks that
nothing changed while Spark read it. A file that changed or vanished raises
`SourceChanged`, which the engine turns into a superseded or gone batch.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hakiri.catalog.records import Batch, NewBatch
from hakiri.catalog.store import Catalog
from hakiri.errors import HakiriError, SourceChanged, SourceDataError
from hakiri.sources.base import (
    BatchRead,
    Compared,
    Reload,
    SourceColumn,
    SourceFile,
    SourceObservation,
    TablePlan,
    commit_order,
    listed,
    whole_batch,
)
from hakiri.sources.files.batches import (
    changed_reason,
    gone_reason,
    plan_file_batches,
    reloadable_files,
    retired_file_batches,
    snapshot_changed_reason,
    snapshot_files,
)
from hakiri.sources.files.inspect import (
    FileStamp,
    estimate_records,
    hash_file,
    inspect_files,
    json_array_files,
    remembered_hash,
)
from hakiri.sources.files.needs import provenance_capability
from hakiri.sources.files.reader import PROVENANCE_COLUMNS, read_files, with_provenance
from hakiri.spark.engines import engine_of_session, refusal_message, support
from hakiri.spec.pipeline import FilesConfig, PipelineSpec, TableSpec
from hakiri.spec.project import ProjectFile

__all__ = ["FileSource"]


class FileSource:
    has_cursors = False

    def __init__(self, root: Path, spec: PipelineSpec, config: FilesConfig) -> None:
        self.root, self.spec, self.config = root, spec, config
        # Each table's files are listed and hashed once per source, and a source is made per
        # plan or run: `observe` and `plan_batches` see the same files, read once.
        self._inspected: dict[str, SourceObservation] = {}

    def _inspect(self, table: TableSpec) -> SourceObservation:
        if table.name not in self._inspected:
            self._inspected[table.name] = inspect_files(self.root, self.config, table)
        return self._inspected[table.name]

    @classmethod
    def from_spec(
        cls, root: Path, settings: ProjectFile, spec: PipelineSpec, env: Mapping[str, str]
    ) -> FileSource:
        assert isinstance(spec.source.config, FilesConfig)
        return cls(root, spec, spec.source.config)

    def observe(self, table: TableSpec, cursor: dict[str, Any] | None = None) -> SourceObservation:
        observed = self._inspect(table)
        if not self.config.provenance or observed.columns is None:
            return observed
        # `read` adds the provenance columns to every batch: they reach the target too.
        extra = tuple(SourceColumn(name, "string") for name in PROVENANCE_COLUMNS)
        return replace(observed, columns=(*observed.columns, *extra))

    def plan_batches(self, table: TableSpec, catalog: Catalog) -> TablePlan:
        config = self.config
        observed = self._inspect(table)
        mine = [b for b in catalog.batches(self.spec.id) if b.table_name == table.name]
        retire = retired_file_batches(table.name, self.spec.load.mode, observed.files, mine)
        if not observed.files:
            pattern = table.path or config.path
            if config.on_miss == "fail":
                raise SourceDataError(
                    f"no file matches {pattern!r}", "check the path, or set on_miss = 'ignore'"
                )
            missed = f"{table.name}: no file matches {pattern!r}"
            alert = missed if config.on_miss == "alert" else None
            if not mine:  # not once: a typo or a missing mount, whatever on_miss says
                return TablePlan(
                    notes=[f"path {pattern!r} has never matched a file"],
                    never_matched=True,
                    empty_source=alert,
                    retire=retire,
                )
            return TablePlan(notes=[missed], empty_source=alert, retire=retire)
        committed = catalog.committed_hashes(self.spec.id, table.name)
        # A retired batch is history: its content, current again, is planned (queued) anew.
        leaving = {r.batch_id for r in retire}
        known = {b.batch_id for b in mine if not b.status.retired and b.batch_id not in leaving}
        batches = plan_file_batches(
            table.name, self.spec.load.mode, config, observed.files, committed, known, mine
        )
        return TablePlan(batches=batches, retire=retire)

    def requests_per_read(self) -> int:
        return 1

    def shape_needs(self, table: TableSpec) -> list[tuple[str, str]]:
        """(capability, file) for what the table's files need of the engine by their shape,
        from a peek at each: a JSON file that is one array (`spark.engines`)."""
        files = self._inspect(table).files
        return [
            ("json_array_source", path) for path in json_array_files(self.root, self.config, files)
        ]

    def reloadable(
        self, table: TableSpec, committed: Sequence[Batch], upcoming: Sequence[Batch | NewBatch]
    ) -> Reload:
        return reloadable_files(self.spec.id, committed, self._inspect(table).files)

    def refresh(self) -> None:
        self._inspected.clear()

    def compared(self, table: TableSpec, committed: Callable[[], Sequence[Batch]]) -> Compared:
        """A snapshot mode's target holds the files as they are now: one read of them all. A
        target loaded file by file holds the files recorded as loaded, folded as the mode
        folds them, so each must still hold the bytes that loaded (a restore's own rule)."""
        load = self.spec.load
        strategy = load.strategy
        files = self.observe(table).files
        if strategy.snapshot or strategy.detects_deletes(load):
            pairs = [(f.path, f.content_hash) for f in files]
            return Compared((whole_batch(self.spec.id, table.name, "snapshot", json.dumps(pairs)),))
        loaded = [b for b in committed() if b.kind == "file"]
        if not loaded:
            raise HakiriError(
                f"nothing of {table.name} has been loaded yet: there is nothing to compare",
                f"run `hakiri apply {self.spec.id}` first",
            )
        found = reloadable_files(self.spec.id, loaded, files)
        if found.lost:
            raise HakiriError(
                f"`hakiri diff` compares {table.name} with the files that made it, and not all "
                f"are as they were loaded: {listed(found.lost)}",
                "put the files back to compare, or check the load with `hakiri runs`",
            )
        ordered = sorted(found.batches, key=commit_order)
        key = strategy.merge_key(load)
        if key:
            return Compared(tuple(ordered), fold_by=tuple(key))
        pairs = [(b.file_path or "", b.content_hash or "") for b in ordered]
        return Compared((whole_batch(self.spec.id, table.name, "snapshot", json.dumps(pairs)),))

    def read(self, spark: Any, batch: Batch) -> BatchRead:
        config = self.config
        files, stamps = self._bound_files(batch)
        named = False  # the read names each row's file's hash itself (`read_files`)
        if config.provenance and len(files) > 1:
            capability = provenance_capability(config)
            _refuse_on(spark, capability, batch.table_name)
            named = _path_of(spark, capability) == "neutral"
        read = read_files(spark, self.root, config, files, file_hashes=named)
        frame = read.frame
        evidence = not (read.empty and config.columns is None)
        if config.changes == "debezium" and evidence:  # events, reduced to changed rows
            from hakiri.sources.cdc.debezium import debezium_changes

            where = batch.file_path or batch.table_name
            frame = debezium_changes(frame, self.spec.load.upsert_key or [], where)
        if config.provenance and evidence:
            frame = with_provenance(frame, self.root, files, batch.batch_id)
        guessing = config.columns is None and config.format != "parquet"

        def verify() -> int:
            # A file that changed while Spark read it explains any bad record it showed.
            self._still_bound(batch, files, stamps)
            return read.verify()

        return BatchRead(
            frame,
            verify,
            batch.file_path or batch.table_name,
            empty=read.empty,
            on_empty=config.on_empty,
            evidence=evidence,
            inferred=tuple(
                (name, type_) for name, type_ in frame.dtypes if name not in PROVENANCE_COLUMNS
            )
            if guessing and config.changes is None
            else (),
            taken_at=_taken_at(stamps),
            explain=_explained_changes(read.explain) if config.changes else read.explain,
            expected_rows=None
            if config.changes
            else estimate_records(config, [self._full(f.path) for f in files]),
        )

    def _full(self, path: str) -> Path:
        return Path(path) if Path(path).is_absolute() else self.root / path

    def _bound_files(self, batch: Batch) -> tuple[list[SourceFile], list[FileStamp]]:
        """The batch's files, each checked to hold the bytes the batch was planned from
        (the plan's hash when this process took it and the file's stat is unchanged, else
        hashed again now), with their stamps for `_still_bound`."""
        if batch.kind == "snapshot":
            pairs = snapshot_files(batch.predicate)
        else:
            pairs = [(batch.file_path or "", batch.content_hash or "")]
        files, stamps = [], []
        for path, digest in pairs:
            full = self._full(path)
            stamp = FileStamp.of(full)
            # Hashed by this process's plan, unchanged since: the plan's hash is the binding.
            current = None if stamp is None else remembered_hash(full, stamp) or self._hash(full)
            if current != digest:
                raise self._changed(batch, path, digest, current)
            assert stamp is not None
            files.append(SourceFile(path, stamp.size, digest))
            stamps.append(stamp)
        return files, stamps

    def _still_bound(self, batch: Batch, files: list[SourceFile], stamps: list[FileStamp]) -> None:
        """After Spark read the files: raise SourceChanged if one changed meanwhile."""
        for file, stamp in zip(files, stamps, strict=True):
            full = self._full(file.path)
            if stamp.same_file(FileStamp.of(full)):
                continue
            current = self._hash(full)
            if current != file.content_hash:
                raise self._changed(batch, file.path, file.content_hash, current)

    @staticmethod
    def _hash(full: Path) -> str | None:
        try:
            return hash_file(full)
        except FileNotFoundError:
            return None

    def _changed(self, batch: Batch, path: str, planned: str, now: str | None) -> SourceChanged:
        if batch.kind == "snapshot":
            what = f"{path} gone" if now is None else f"{path} changed"
            return SourceChanged(
                snapshot_changed_reason(batch.table_name, what), status="superseded"
            )
        if now is None:
            return SourceChanged(gone_reason(path), status="gone")
        return SourceChanged(changed_reason(path, planned, now), status="superseded")


def _taken_at(stamps: list[FileStamp]) -> datetime | None:
    """The newest modification time of the batch's files (UTC, whole microseconds)."""
    times = [stamp.mtime_ns / 1e9 for stamp in stamps]
    return datetime.fromtimestamp(max(times), UTC) if times else None


def _path_of(spark: Any, capability: str) -> str:
    """'works' (the engine's own) or 'neutral' (hakiri's path) for the session's engine."""
    return support(engine_of_session(spark), capability).status


def _refuse_on(spark: Any, capability: str, table: str) -> None:
    """A SourceDataError, before anything is read, when the session's engine refuses this."""
    refused = refusal_message(engine_of_session(spark), capability, table)
    if refused is not None:
        raise SourceDataError(*refused)


def _explained_changes(
    explain: Callable[[BaseException], Exception | None],
) -> Callable[[BaseException], Exception | None]:
    """A change event the engine refused (a truncate) first, then what the reader explains."""
    from hakiri.sources.task_errors import task_error

    def explained(exc: BaseException) -> Exception | None:
        return task_error(exc) or explain(exc)

    return explained
