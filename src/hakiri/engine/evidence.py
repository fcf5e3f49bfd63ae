"""What a batch says about its columns' types, and what it does not.

A files source without declared `columns` has its types inferred by Spark from
the values in the batch. Where there are no values, there is nothing to infer
from: a header-only CSV reads every column as string, and so does a column that
is empty (or all NULL) throughout a file. Such a type is a guess, not a change of
the source, so it must never drive schema evolution (a "type change", an added
text column) and never be accepted into the target:

- a batch with no data record at all is shaped like the target (`shape_like_target`):
  it loads 0 rows through the load mode as any empty batch does (the empty-source
  guard of truncate and blue_green included), with no schema event;
- a guessed column with no value in a batch that has rows (`settle_unvalued`) takes
  the target's type (all of its values are NULL, which fit any column), and a new
  one is left out until a batch brings a value for it, as dlt does.

Declared columns, Parquet footers and table sources carry real types: none of
this applies to them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from hakiri.destinations.base import TargetColumn
from hakiri.guards.expressions import UnsafeExpression
from hakiri.guards.spark_types import quoted_name
from hakiri.guards.spark_types import spark_type as known_type
from hakiri.planner.types import compare_types, destination_type, target_type_as_spark
from hakiri.spec.transforms import CastStep, TransformStep

__all__ = ["guessed_columns", "settle_unvalued", "shape_like_target"]


def guessed_columns(
    read_types: Sequence[tuple[str, str]], frame: Any, transforms: Iterable[TransformStep]
) -> frozenset[str]:
    """Columns of `frame` (after transforms) whose type is still the one Spark inferred:
    the same name and type as read, and not cast by a transform step."""
    cast = {name for step in transforms if isinstance(step, CastStep) for name in step.columns}
    read = set(read_types)
    return frozenset(name for name, type_ in frame.dtypes if (name, type_) in read) - cast


def shape_like_target(frame: Any, target: Sequence[TargetColumn], destination_kind: str) -> Any:
    """An empty frame with the target's columns and types (a column whose type has no Spark
    equivalent is left out: with no rows, no column is needed but the ones the load mode names)."""
    from pyspark.sql import functions as F

    columns = []
    for column in target:
        spark_type = _spark_type(column, destination_kind)
        if spark_type is not None:
            columns.append(F.lit(None).cast(spark_type).alias(column.name))
    return frame.sparkSession.range(0).select(*columns)


def settle_unvalued(
    frame: Any,
    target: Sequence[TargetColumn],
    guessed: frozenset[str],
    destination_kind: str,
) -> Any:
    """`frame` with its valueless guessed columns settled: cast to the target's type, or
    dropped when the target lacks them. Counts values (one Spark aggregation) only when a
    guessed column would change the target; the common batch costs nothing."""
    from pyspark.sql import functions as F

    by_name = {column.name: column for column in target}
    suspects = [
        field.name
        for field in frame.schema.fields
        if field.name in guessed
        and _would_change(field.dataType.simpleString(), by_name.get(field.name), destination_kind)
    ]
    if not suspects:
        return frame
    counts = frame.agg(
        *[F.count(F.col(quoted_name(name))).alias(f"_{i}") for i, name in enumerate(suspects)]
    ).first()
    unvalued = [
        name for i, name in enumerate(suspects) if counts is not None and counts[f"_{i}"] == 0
    ]
    drop = []
    for name in unvalued:
        current = by_name.get(name)
        spark_type = _spark_type(current, destination_kind) if current is not None else None
        if current is None:
            drop.append(name)
        elif spark_type is not None:
            frame = frame.withColumn(name, F.lit(None).cast(spark_type))
    return frame.drop(*drop) if drop else frame


def _would_change(spark_type: str, current: TargetColumn | None, destination_kind: str) -> bool:
    if current is None:
        return True  # a new column: evolution would add it with a guessed type
    wanted = destination_type(spark_type, destination_kind) or spark_type
    return compare_types(wanted, current.type) not in ("same", "fits")


def _spark_type(column: TargetColumn, destination_kind: str) -> str | None:
    spark_type = target_type_as_spark(destination_kind, column.type)
    if spark_type is None:
        return None
    try:
        known_type(spark_type)  # a type Spark knows, read without asking an engine
    except UnsafeExpression:
        return None
    # uuid reads as string, which stages as text: a NULL of it would not load into uuid.
    staged = destination_type(spark_type, destination_kind) or spark_type
    return None if compare_types(staged, column.type) == "incompatible" else spark_type
