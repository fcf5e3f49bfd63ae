"""incremental_watermark in the context store: the mark lives in the table's own commit log.

Each incremental commit carries the new high-water mark in its metadata (`userMetadata`)
(`hakiri.watermark`, with `hakiri.watermark_column`, `hakiri.project` and
`hakiri.pipeline_id`), in the same log entry as the rows, so the rows and the
mark commit together. The current mark is that of the newest commit of this
pipeline (and project) that has one for the same column. Without one (a first
run, or a log whose old entries were cleaned up), the mark is MAX(column) of the
table, so rows already there are not loaded again; an empty or missing table
has no mark and every row is new.

The filter runs in Spark when the batch is STAGED (`col > mark`): the engine
holds the pipeline's lease from staging to commit, so the mark cannot move in
between. The new mark, the largest value staged, is computed then too and
recorded in the staging area for the commit to write.

Marks are strings, as Spark casts them: timestamps with an explicit offset
('2024-05-01 12:00:00.000000Z'), so they read back the same in any session time zone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hakiri.destinations.base import LoadRequest
from hakiri.destinations.context.commit import (
    PIPELINE_KEY,
    PROJECT_KEY,
    WATERMARK_COLUMN_KEY,
    WATERMARK_KEY,
    commit_metadata,
    delta_errors,
)
from hakiri.errors import LoadError
from hakiri.guards.spark_types import quoted_name

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType

__all__ = ["Watermark", "keep_after_mark", "mark_of_staged", "read_mark"]

_ORDERED = ("byte", "short", "integer", "long", "float", "double", "decimal", "date", "timestamp")
_TIMESTAMP_FORMAT = "yyyy-MM-dd HH:mm:ss.SSSSSSXXX"


@dataclass(frozen=True)
class Watermark:
    """What staging decided for an incremental batch: the mark it filtered by, and the next one."""

    column: str
    previous: str | None  # rows <= this were skipped; None: no mark, every row was staged
    mark: str | None  # the mark after this batch: max(staged column), else `previous`

    def as_dict(self) -> dict[str, Any]:
        return {"column": self.column, "previous": self.previous, "mark": self.mark}

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> Watermark:
        return cls(document["column"], document.get("previous"), document.get("mark"))


def read_mark(
    spark: SparkSession, table: DeltaTable | None, location: Path, request: LoadRequest
) -> str | None:
    """The mark of this pipeline for this table: from the log, else MAX(column) of the table."""
    if table is None:
        return None
    column = _column(request)
    with delta_errors(location, "read the history of", reading=True):
        history = table.history()
    # Newest first, whatever order delta-rs lists them in.
    for entry in sorted(history, key=lambda e: e.get("version", -1), reverse=True):
        found = commit_metadata(entry)
        if (
            found.get(PROJECT_KEY) == request.project
            and found.get(PIPELINE_KEY) == request.pipeline_id
            and found.get(WATERMARK_COLUMN_KEY) == column
            and found.get(WATERMARK_KEY) is not None
        ):
            return str(found[WATERMARK_KEY])
    return _table_max(spark, table, location, column)


def _table_max(spark: SparkSession, table: DeltaTable, location: Path, column: str) -> str | None:
    from hakiri.destinations.context.tables import frame_of
    from hakiri.spark.errors import spark_errors

    frame = frame_of(spark, table, location)
    if column not in frame.columns:
        raise LoadError(
            f"watermark_column {column!r} does not exist in the Delta table at {location}",
            "fix `watermark_column`, or rebuild the table with that column",
        )
    with spark_errors(
        f"reading MAX({column}) of the Delta table at {location}", fallback=LoadError
    ):
        return _max_of(frame, column)


def keep_after_mark(frame: DataFrame, request: LoadRequest, mark: str | None) -> DataFrame:
    """The rows whose watermark column is past `mark` (all rows when there is no mark)."""
    from pyspark.sql import functions as F

    column = _column(request)
    data_type = _checked_type(frame, column)
    if mark is None:
        return frame
    return frame.where(F.col(quoted_name(column)) > F.lit(mark).cast(data_type))


def mark_of_staged(staged: DataFrame, column: str, previous: str | None) -> Watermark:
    """The new mark: the largest staged value (one aggregate over the staged Parquet)."""
    from hakiri.spark.errors import spark_errors

    with spark_errors(f"reading MAX({column}) of the staged rows", fallback=LoadError):
        newest = _max_of(staged, column)
    return Watermark(column, previous, newest if newest is not None else previous)


def _max_of(frame: DataFrame, column: str) -> str | None:
    """MAX(column) as text: one aggregate row comes to the driver, never the rows."""
    from pyspark.sql import functions as F

    newest = F.max(F.col(quoted_name(column)))
    row = frame.agg(_as_text(newest, frame.schema[column].dataType)).first()
    return None if row is None or row[0] is None else str(row[0])


def _as_text(value: Column, data_type: DataType) -> Column:
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampType

    if isinstance(data_type, TimestampType):
        return F.date_format(value, _TIMESTAMP_FORMAT)
    return value.cast("string")


def _checked_type(frame: DataFrame, column: str) -> DataType:
    from hakiri.destinations.context.staging import delta_type_name

    if column not in frame.columns:
        raise LoadError(
            f"watermark_column {column!r} is not among the rows to load",
            "select that column in the pipeline's transforms, or fix `watermark_column`",
        )
    data_type = frame.schema[column].dataType
    name = delta_type_name(data_type) or data_type.simpleString()
    if not name.startswith(_ORDERED) and name != "string":
        raise LoadError(
            f"watermark_column {column!r} has type {name}, which has no order to filter by",
            "use a number, date, timestamp or text column as `watermark_column`",
        )
    return data_type


def _column(request: LoadRequest) -> str:
    column = request.load.watermark_column
    if not column:
        raise LoadError(
            f"load mode incremental_watermark into {request.target_table} needs `watermark_column`",
            "set `watermark_column` (e.g. updated_at) in [pipeline.load]",
        )
    return column
