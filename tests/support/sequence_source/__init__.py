"""A source connector written outside hakiri, to show what adding one takes: this package and
one `sources.kinds.register` (the `sequence_connector()` block). Nothing in hakiri's planner,
engine, services or destinations knows its name.

`connector = "sequence"`: each table is the numbers 1..`rows` with a name per number, made on
the engine (`spark.range`: no row passes through the driver). `incremental = "id"` keeps a
numeric cursor, so raising `rows` loads only the new numbers; without a cursor the table is
one snapshot, loaded again when `rows` or `prefix` changes.

    source = { connector = "sequence", config = { rows = 5, prefix = "n" } }
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import Field

from hakiri.catalog.records import Batch, NewBatch
from hakiri.catalog.store import Catalog
from hakiri.sources import kinds
from hakiri.sources.base import (
    BatchRead,
    Reload,
    Source,
    SourceColumn,
    SourceKind,
    SourceObservation,
    TablePlan,
)
from hakiri.sources.cursors.batches import check_cursor_fits_mode, plan_table, reload_from_source
from hakiri.sources.cursors.ranges import CursorBounds, CursorColumn, CursorRange
from hakiri.spec.base import SpecModel
from hakiri.spec.pipeline import CursorKind, PipelineSpec, TableSpec
from hakiri.spec.project import ProjectFile

NAME = "sequence"
_CURSOR_TYPE = "bigint"  # the cursors' vocabulary (PostgreSQL's type names)


class SequenceConfig(SpecModel):
    rows: int = Field(ge=0, description="The table holds the numbers 1..rows.")
    prefix: str = Field("n", description="Each name is the prefix and the number.")


class SequenceSource:
    has_cursors = True

    def __init__(self, spec: PipelineSpec, config: SequenceConfig) -> None:
        self.spec, self.config = spec, config

    def observe(self, table: TableSpec, cursor: dict[str, Any] | None = None) -> SourceObservation:
        columns = (SourceColumn("id", "bigint"), SourceColumn("name", "string"))
        return SourceObservation(table.name, columns=columns, estimated_rows=self.config.rows)

    def _cursor(self, table: TableSpec) -> CursorColumn | None:
        incremental = table.incremental or self.spec.incremental
        if incremental is None:
            return None
        return CursorColumn.resolve(incremental, _CURSOR_TYPE, f"sequence {table.name}")

    def plan_batches(self, table: TableSpec, catalog: Catalog) -> TablePlan:
        cursor = self._cursor(table)
        check_cursor_fits_mode(self.spec, cursor, f"pipeline `{self.spec.id}`")
        existing = [b for b in catalog.batches(self.spec.id) if b.table_name == table.name]
        return plan_table(
            self.spec,
            table,
            cursor,
            catalog.get_cursor(self.spec.id, table.name),
            existing,
            lambda: CursorBounds(
                _CURSOR_TYPE, 1 if self.config.rows else None, self.config.rows or None
            ),
            lambda: f"{self.config.rows}:{self.config.prefix}",
        )

    def read(self, spark: Any, batch: Batch) -> BatchRead:
        from pyspark.sql import functions as F

        frame = spark.range(1, self.config.rows + 1)
        label = batch.table_name
        if batch.kind == "chunk" and batch.predicate:
            chunk = CursorRange.from_predicate(batch.predicate)
            frame = frame.where(_within(F.col("id"), chunk))
            label += f" ({chunk.describe()})"
        frame = frame.select(
            F.col("id").cast("bigint").alias("id"),
            F.concat(F.lit(self.config.prefix), F.col("id").cast("string")).alias("name"),
        )
        return BatchRead(frame, label=label, expected_rows=self.config.rows)

    def requests_per_read(self) -> int:
        return 0

    def reloadable(
        self, table: TableSpec, committed: Sequence[Batch], upcoming: Sequence[Batch | NewBatch]
    ) -> Reload:
        return reload_from_source(committed)

    def refresh(self) -> None:
        pass


def _within(column: Any, chunk: CursorRange) -> Any:
    condition = column.isNotNull()
    if chunk.lo is not None:
        lo = int(chunk.lo)
        condition &= column >= lo if chunk.lo_inclusive else column > lo
    if chunk.hi is not None:
        hi = int(chunk.hi)
        condition &= column <= hi if chunk.hi_inclusive else column < hi
    return condition


def _open(root: Path, settings: ProjectFile, spec: PipelineSpec, env: Mapping[str, str]) -> Source:
    config = spec.source.config
    assert isinstance(config, SequenceConfig)
    return SequenceSource(spec, config)


def _lineage(
    root: Path, settings: ProjectFile, spec: PipelineSpec, table: TableSpec, env: Mapping[str, str]
) -> list[tuple[str, str]]:
    return [("sequence", table.name)]


SEQUENCE = SourceKind(
    name=NAME,
    config=SequenceConfig,
    open=_open,
    cursor_kinds=frozenset({CursorKind.NUMERIC}),
    lineage=_lineage,
)


@contextmanager
def sequence_connector() -> Iterator[None]:
    """The connector registered for the block's length."""
    kinds.register(SEQUENCE)
    try:
        yield
    finally:
        kinds.unregister(NAME)


__all__ = ["SEQUENCE", "SequenceConfig", "SequenceSource", "sequence_connector"]
