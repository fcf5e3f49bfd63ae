"""One pipeline's source, as the runner sees it: plan a table's batches, read one batch.

Files: a batch is a file (or, for full-refresh modes, every file of the table).
PostgreSQL tables: a batch is a cursor range (a backfill chunk or an incremental
delta) or the whole table (no cursor, or a full-refresh mode); see `engine.chunks`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hakiri.catalog.records import Batch
from hakiri.catalog.store import Catalog
from hakiri.engine.batches import plan_file_batches, snapshot_files
from hakiri.engine.chunks import TablePlan, check_cursor_fits_mode, incremental_of, plan_table
from hakiri.errors import SourceDataError
from hakiri.sources.base import SourceFile
from hakiri.sources.cursors import CursorColumn, CursorRange
from hakiri.sources.file_reader import with_provenance
from hakiri.sources.files import inspect_files
from hakiri.sources.postgres import CursorBounds, cursor_bounds, table_fingerprint
from hakiri.spec.connections import postgres_url
from hakiri.spec.load import LoadMode
from hakiri.spec.loader import Project
from hakiri.spec.pipeline import FilesSource, PipelineSpec, PostgresSource, TableSpec

__all__ = ["BatchRead", "SourceReader"]


def _nothing_left_out() -> int:
    return 0


@dataclass
class BatchRead:
    frame: Any  # a lazy Spark DataFrame
    # After the frame was consumed (staged): the malformed records the read left out, or raises
    # (files: `FileRead.verify`; a table read leaves nothing out).
    verify: Callable[[], int] = _nothing_left_out
    label: str = ""  # names the batch in messages: a file, or `table (predicate)`
    empty: bool = False  # files: no file of the batch holds a data record
    # False for an empty batch whose columns were not declared: it tells nothing of its columns.
    evidence: bool = True
    # (name, Spark type) of the columns whose type Spark inferred from the values (files without
    # declared `columns`, except Parquet): a guess, see `engine.evidence`.
    inferred: tuple[tuple[str, str], ...] = ()


class SourceReader:
    def __init__(
        self,
        project: Project,
        spec: PipelineSpec,
        catalog: Catalog,
        env: Mapping[str, str],
        read_files: Callable[..., Any],
    ) -> None:
        self.project, self.spec, self.catalog, self.env = project, spec, catalog, env
        self.read_files = read_files
        self._cursors: dict[str, CursorColumn | None] = {}
        self._url: str | None = None

    @property
    def is_table_source(self) -> bool:
        return isinstance(self.spec.source, PostgresSource)

    # ------------------------------------------------------------------ planning

    def plan(self, table: TableSpec) -> TablePlan:
        if isinstance(self.spec.source, FilesSource):
            return self._plan_files(table)
        return self._plan_table(table)

    def _plan_files(self, table: TableSpec) -> TablePlan:
        assert isinstance(self.spec.source, FilesSource)
        config = self.spec.source.config
        observed = inspect_files(self.project.root, config, table)
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
        committed = self.catalog.committed_hashes(self.spec.id, table.name)
        batches = plan_file_batches(
            table.name, self.spec.load.mode, config, observed.files, committed
        )
        return TablePlan(batches=batches)

    def _plan_table(self, table: TableSpec) -> TablePlan:
        where = f"source table {self._config.schema_name}.{table.name}"
        seen: list[CursorBounds] = []

        def bounds() -> CursorBounds:
            if not seen:
                column = self._cursor_column_name(table)
                assert column is not None
                seen.append(cursor_bounds(self.url, self._config.schema_name, table.name, column))
            return seen[0]

        cursor = self.cursor(table, bounds)
        check_cursor_fits_mode(self.spec, cursor, f"pipeline `{self.spec.id}` ({where})")
        existing = [b for b in self.catalog.batches(self.spec.id) if b.table_name == table.name]
        return plan_table(
            self.spec,
            table,
            cursor,
            self.catalog.get_cursor(self.spec.id, table.name),
            existing,
            bounds,
            lambda: table_fingerprint(self.url, self._config.schema_name, table.name),
        )

    def cursor(
        self, table: TableSpec, bounds: Callable[[], CursorBounds] | None = None
    ) -> CursorColumn | None:
        """The table's cursor with its discovered type; None without `incremental`."""
        if table.name not in self._cursors:
            incremental = incremental_of(self.spec, table)
            if incremental is None:
                self._cursors[table.name] = None
            else:
                column = self._cursor_column_name(table)
                assert column is not None
                pg_type = (
                    bounds().pg_type
                    if bounds is not None
                    else cursor_bounds(
                        self.url, self._config.schema_name, table.name, column
                    ).pg_type
                )
                where = f"source table {self._config.schema_name}.{table.name}"
                self._cursors[table.name] = CursorColumn.resolve(incremental, pg_type, where)
        return self._cursors[table.name]

    def _cursor_column_name(self, table: TableSpec) -> str | None:
        incremental = incremental_of(self.spec, table)
        if incremental is None:
            return None
        return incremental if isinstance(incremental, str) else incremental.column

    # ------------------------------------------------------------------ reading

    def requests_per_read(self) -> int:
        """Source queries one batch read issues: what `rate_budget` counts."""
        if isinstance(self.spec.source, PostgresSource):
            return self.spec.source.config.num_partitions
        return 1

    def read(self, spark: Any, batch: Batch) -> BatchRead:
        if isinstance(self.spec.source, FilesSource):
            return self._read_files(spark, batch)
        return self._read_table(spark, batch)

    def _read_files(self, spark: Any, batch: Batch) -> BatchRead:
        assert isinstance(self.spec.source, FilesSource)
        config = self.spec.source.config
        files = self._files_of(batch)
        read = self.read_files(spark, self.project.root, config, files)
        frame = read.frame
        evidence = not (read.empty and config.columns is None)
        if config.provenance and evidence:
            frame = with_provenance(frame, self.project.root, files, batch.batch_id)
        guessing = config.columns is None and config.format != "parquet"
        return BatchRead(
            frame,
            read.verify,
            batch.file_path or batch.table_name,
            empty=read.empty,
            evidence=evidence,
            inferred=tuple(read.frame.dtypes) if guessing else (),
        )

    def _read_table(self, spark: Any, batch: Batch) -> BatchRead:
        from hakiri.sources.table_reader import latest_per_key, read_table

        config = self._config
        chunk = CursorRange.from_predicate(batch.predicate) if batch.kind == "chunk" else None
        split = self._split(batch.table_name, chunk)
        frame = read_table(
            spark,
            self.url,
            config,
            batch.table_name,
            chunk.where_sql() if chunk else None,
            split,
        )
        table = next(t for t in self.spec.table_specs() if t.name == batch.table_name)
        cursor = self.cursor(table)
        key = self.spec.load.upsert_key
        if cursor is not None and cursor.lag_seconds and key and self.spec.mode is LoadMode.UPSERT:
            # The lag window re-reads rows; a key may also appear twice within it.
            frame = latest_per_key(frame, key, cursor.column)
        label = f"{config.schema_name}.{batch.table_name}"
        if chunk is not None:
            label += f" ({chunk.describe()})"
        return BatchRead(frame, label=label)

    def _split(self, table: str, chunk: CursorRange | None) -> Any:
        from hakiri.sources.table_reader import PartitionSplit

        config = self._config
        if config.num_partitions <= 1:
            return None
        column = config.partition_column or (chunk.column if chunk else None)
        if column is None:
            return None
        if chunk is not None and column == chunk.column and None not in (chunk.lo, chunk.hi):
            return PartitionSplit(column, str(chunk.lo), str(chunk.hi), config.num_partitions)
        found = cursor_bounds(self.url, config.schema_name, table, column)
        if found.low is None:
            return None
        return PartitionSplit(column, str(found.low), str(found.high), config.num_partitions)

    def _files_of(self, batch: Batch) -> list[SourceFile]:
        if batch.kind == "snapshot":
            pairs = snapshot_files(batch.predicate)
        else:
            pairs = [(batch.file_path or "", batch.content_hash or "")]
        root = self.project.root
        files = []
        for path, digest in pairs:
            full = Path(path) if Path(path).is_absolute() else root / path
            if not full.is_file():
                raise SourceDataError(
                    f"{path} disappeared before it was loaded",
                    "restore it, or apply again to re-plan",
                )
            files.append(SourceFile(path, full.stat().st_size, digest))
        return files

    # ------------------------------------------------------------------ connection

    @property
    def _config(self) -> Any:
        assert isinstance(self.spec.source, PostgresSource)
        return self.spec.source.config

    @property
    def url(self) -> str:
        if self._url is None:
            self._url = postgres_url(self.project.settings, self._config, self.env)
        return self._url
