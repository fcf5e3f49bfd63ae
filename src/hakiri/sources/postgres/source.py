"""A PostgreSQL table as a source: a batch is a cursor range (a backfill chunk or an incremental
delta) or the whole table (no cursor, or a full-refresh mode); see `sources.cursors.batches`.

`observe` and `plan_batches` run small read-only queries (catalog, statistics, MIN/MAX of
the cursor, and for a whole-table batch a digest of its rows); `read` is a Spark JDBC read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hakiri.catalog.records import Batch, NewBatch
from hakiri.catalog.store import Catalog
from hakiri.sources.base import (
    BatchRead,
    Compared,
    Reload,
    SourceObservation,
    TablePlan,
    whole_batch,
)
from hakiri.sources.cursors.batches import (
    check_cursor_fits_mode,
    incremental_of,
    plan_table,
    reload_from_source,
)
from hakiri.sources.cursors.ranges import CursorBounds, CursorColumn, CursorRange
from hakiri.sources.postgres.inspect import (
    cursor_bounds,
    inspect_postgres_table,
    table_fingerprint,
)
from hakiri.spec.connections import postgres_url
from hakiri.spec.pipeline import PipelineSpec, PostgresSourceConfig, TableSpec
from hakiri.spec.project import ProjectFile

__all__ = ["TableSource"]


class TableSource:
    has_cursors = True

    def __init__(
        self,
        settings: ProjectFile,
        spec: PipelineSpec,
        config: PostgresSourceConfig,
        env: Mapping[str, str],
    ) -> None:
        self.settings, self.spec, self.config, self.env = settings, spec, config, env
        self._cursors: dict[str, CursorColumn | None] = {}
        self._url: str | None = None

    @classmethod
    def from_spec(
        cls, root: Path, settings: ProjectFile, spec: PipelineSpec, env: Mapping[str, str]
    ) -> TableSource:
        assert isinstance(spec.source.config, PostgresSourceConfig)
        return cls(settings, spec, spec.source.config, env)

    @property
    def url(self) -> str:
        if self._url is None:
            self._url = postgres_url(self.settings, self.config, self.env)
        return self._url

    # ------------------------------------------------------------------ observing and planning

    def observe(self, table: TableSpec, cursor: dict[str, Any] | None = None) -> SourceObservation:
        column = self._cursor_column_name(table)
        # Rows past everything already planned into chunks are new data; a cursor stored for
        # another column says nothing about this one (the whole table is new).
        value = (
            cursor.get("planned_to")
            if column and cursor is not None and cursor.get("column") == column
            else None
        )
        return inspect_postgres_table(self.url, self.config.schema_name, table.name, column, value)

    def plan_batches(self, table: TableSpec, catalog: Catalog) -> TablePlan:
        where = f"source table {self.config.schema_name}.{table.name}"
        seen: list[CursorBounds] = []

        def bounds() -> CursorBounds:
            if not seen:
                column = self._cursor_column_name(table)
                assert column is not None
                seen.append(cursor_bounds(self.url, self.config.schema_name, table.name, column))
            return seen[0]

        cursor = self.cursor(table, bounds)
        check_cursor_fits_mode(self.spec, cursor, f"pipeline `{self.spec.id}` ({where})")
        existing = [b for b in catalog.batches(self.spec.id) if b.table_name == table.name]
        return plan_table(
            self.spec,
            table,
            cursor,
            catalog.get_cursor(self.spec.id, table.name),
            existing,
            bounds,
            lambda: table_fingerprint(self.url, self.config.schema_name, table.name),
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
                    bounds().type_name
                    if bounds is not None
                    else cursor_bounds(
                        self.url, self.config.schema_name, table.name, column
                    ).type_name
                )
                where = f"source table {self.config.schema_name}.{table.name}"
                self._cursors[table.name] = CursorColumn.resolve(incremental, pg_type, where)
        return self._cursors[table.name]

    def _cursor_column_name(self, table: TableSpec) -> str | None:
        incremental = incremental_of(self.spec, table)
        if incremental is None:
            return None
        return incremental if isinstance(incremental, str) else incremental.column

    # ------------------------------------------------------------------ reading

    def compared(self, table: TableSpec, committed: Callable[[], Sequence[Batch]]) -> Compared:
        """The table as it is now, read whole; its server can sum it itself."""
        return Compared(
            (whole_batch(self.spec.id, table.name, "snapshot", None),),
            native=(self.url, self.config.schema_name, table.name),
        )

    def reloadable(
        self, table: TableSpec, committed: Sequence[Batch], upcoming: Sequence[Batch | NewBatch]
    ) -> Reload:
        """Every chunk read again, and the newest snapshot: the table as it is now. A history
        (scd2) made of several snapshots loses the versions the older ones closed."""
        again = reload_from_source(committed)
        snapshots = sum(b.kind == "snapshot" for b in committed)
        if "history" not in self.spec.load.strategy.needs or snapshots < 2:
            return again
        return Reload(
            again.batches,
            (
                f"the versions {snapshots - 1} earlier snapshot(s) of {table.name} closed: the "
                "source holds only its rows as they are now",
            ),
            f"run `hakiri apply {self.spec.id} --restore-partial` to start the history again "
            "from the rows as they are now, or restore the table from a backup",
        )

    def requests_per_read(self) -> int:
        return self.config.num_partitions

    def refresh(self) -> None:
        self._cursors.clear()

    def read(self, spark: Any, batch: Batch) -> BatchRead:
        from hakiri.sources.postgres.reader import latest_per_key, read_table

        config = self.config
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
        key = self.spec.load.strategy.merge_key(self.spec.load)
        if cursor is not None and cursor.lag_seconds and key:
            # The lag window re-reads rows; a key may also appear twice within it.
            frame = latest_per_key(frame, key, cursor.column)
        label = f"{config.schema_name}.{batch.table_name}"
        if chunk is not None:
            label += f" ({chunk.describe()})"
        return BatchRead(frame, label=label)

    def _split(self, table: str, chunk: CursorRange | None) -> Any:
        from hakiri.sources.postgres.reader import PartitionSplit

        config = self.config
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
