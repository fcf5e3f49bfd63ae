"""Files as a source: a batch is a file (or, for full-refresh modes, every file of the table).

`observe` and `plan_batches` read file names, sizes and hashes only; `read` hands the
batch's files to Spark (`file_reader.read_files`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hakiri.catalog.records import Batch
from hakiri.catalog.store import Catalog
from hakiri.errors import SourceDataError
from hakiri.sources.base import (
    BatchRead,
    SourceColumn,
    SourceFile,
    SourceObservation,
    TablePlan,
)
from hakiri.sources.file_batches import plan_file_batches, snapshot_files
from hakiri.sources.file_reader import PROVENANCE_COLUMNS, read_files, with_provenance
from hakiri.sources.files import inspect_files
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
        if not observed.files:
            pattern = table.path or config.path
            if config.on_miss == "fail":
                raise SourceDataError(
                    f"no file matches {pattern!r}", "check the path, or set on_miss = 'ignore'"
                )
            return TablePlan(
                notes=[f"{table.name}: no file matches {pattern!r}"],
                empty_source=config.on_miss == "alert",
            )
        committed = catalog.committed_hashes(self.spec.id, table.name)
        known = {b.batch_id for b in catalog.batches(self.spec.id) if b.table_name == table.name}
        batches = plan_file_batches(
            table.name, self.spec.load.mode, config, observed.files, committed, known
        )
        return TablePlan(batches=batches)

    def requests_per_read(self) -> int:
        return 1

    def read(self, spark: Any, batch: Batch) -> BatchRead:
        config = self.config
        files = self._files_of(batch)
        read = read_files(spark, self.root, config, files)
        frame = read.frame
        evidence = not (read.empty and config.columns is None)
        if config.provenance and evidence:
            frame = with_provenance(frame, self.root, files, batch.batch_id)
        guessing = config.columns is None and config.format != "parquet"
        return BatchRead(
            frame,
            read.verify,
            batch.file_path or batch.table_name,
            empty=read.empty,
            evidence=evidence,
            inferred=tuple(read.frame.dtypes) if guessing else (),
            taken_at=self._taken_at(files),
        )

    def _taken_at(self, files: list[SourceFile]) -> datetime | None:
        """The newest modification time of the batch's files (UTC, whole microseconds)."""
        times = [(self.root / f.path).stat().st_mtime for f in files]
        return datetime.fromtimestamp(max(times), UTC) if times else None

    def _files_of(self, batch: Batch) -> list[SourceFile]:
        if batch.kind == "snapshot":
            pairs = snapshot_files(batch.predicate)
        else:
            pairs = [(batch.file_path or "", batch.content_hash or "")]
        files = []
        for path, digest in pairs:
            full = Path(path) if Path(path).is_absolute() else self.root / path
            if not full.is_file():
                raise SourceDataError(
                    f"{path} disappeared before it was loaded",
                    "restore it, or apply again to re-plan",
                )
            files.append(SourceFile(path, full.stat().st_size, digest))
        return files
