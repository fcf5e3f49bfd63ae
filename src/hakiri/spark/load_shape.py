"""The columns a load mode adds to every staged row, as lazy Spark columns.

scd2 stages each source row as a version: its key (a hash of the row for
`key = "row_hash"`), `valid_from` (the row's change time, else the batch's time),
`valid_to` NULL and `is_current` true; the destination then places the versions in
the history (see `destinations/postgres/history.py`). upsert with soft deletes
stages `deleted_at` NULL, so a key that returns is undeleted by the upsert itself.

The names and types come from `LoadSpec.added_columns`, which `plan` shows too.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from hakiri.errors import TransformError
from hakiri.guards.spark_types import quoted_name
from hakiri.spec.load import ROW_HASH, ROW_HASH_COLUMN, LoadMode, LoadSpec

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["shape_for_load"]


def shape_for_load(frame: DataFrame, load: LoadSpec, batch_time: datetime | None) -> DataFrame:
    """`frame` with the mode's added columns after its own (unchanged when the mode adds none)."""
    added = load.added_columns()
    if not added:
        return frame
    taken = {c.lower(): c for c in frame.columns}
    for name, _ in added:
        if name.lower() in taken:
            raise TransformError(
                f"load mode {load.mode.value} adds the column {name!r} to every row, and the "
                f"source rows already have {taken[name.lower()]!r}",
                "rename the source column in a transform, or give the added column another "
                "name (valid_from_column, valid_to_column, is_current_column, deleted_at_column)",
            )
    values = _values(frame, load, batch_time or datetime.now(UTC))
    return frame.withColumns({name: values[name].cast(kind) for name, kind in added})


def _values(frame: DataFrame, load: LoadSpec, batch_time: datetime) -> dict[str, Column]:
    from pyspark.sql import functions as F

    none = F.lit(None)
    if load.mode is not LoadMode.SCD2:
        return {load.deleted_at_column: none}
    values: dict[str, Column] = {}
    if load.key == ROW_HASH:
        # Values only (not names), as text: a declared rename keeps every record's hash.
        cells = [F.col(quoted_name(c)).cast("string") for c in frame.columns]
        values[ROW_HASH_COLUMN] = F.sha2(F.to_json(F.array(*cells)), 256)
    # As text: hakiri's sessions read timestamps in UTC (a datetime would go through the
    # Python process's local zone).
    utc = batch_time.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ")
    taken: Any = F.lit(utc).cast("timestamp")
    if load.change_time_column is not None:
        column = _column(frame, load.change_time_column)
        # A row without a change time starts at the batch's time.
        taken = F.coalesce(F.col(quoted_name(column)).cast("timestamp"), taken)
    values[load.valid_from_column] = taken
    values[load.valid_to_column] = none
    values[load.is_current_column] = F.lit(True)
    return values


def _column(frame: DataFrame, name: str) -> str:
    found = next((c for c in frame.columns if c.lower() == name.lower()), None)
    if found is None:
        raise TransformError(
            f"change_time_column {name!r} is not a column of the rows "
            f"(they have: {', '.join(frame.columns)})",
            "name the column that says when a row changed, or select it in the transforms",
        )
    return found
