"""The columns a load mode adds to every staged row, as lazy Spark columns.

The mode's strategy (`spec.modes`) names the columns (`added_columns`, which `plan` shows
too) and their values (`added_values`): scd2 stages each source row as a version, upsert
with soft deletes stages `deleted_at` NULL. Here the names are checked against the
source's and the columns appended.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from hakiri.errors import TransformError
from hakiri.spec.load import LoadSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

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
                f"load mode {load.mode} adds the column {name!r} to every row, and the "
                f"source rows already have {taken[name.lower()]!r}",
                "rename the source column in a transform, or give the added column another "
                "name (valid_from_column, valid_to_column, is_current_column, deleted_at_column)",
            )
    values = load.strategy.added_values(frame, load, batch_time or datetime.now(UTC))
    return frame.withColumns({name: values[name].cast(kind) for name, kind in added})
