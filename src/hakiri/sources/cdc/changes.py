"""A range of a table's changes, reduced in the engine.

The range's events (`ranges.events_of`: the row after each change, or the key that went
away, with the change's commit LSN and order) come either from the hakiri process, which
peeked and decoded the range once for every table of the pipeline (`ranges.RangeEvents`,
handed to the engine as a local relation: `changes_frame`), or, for a range too large to
hold there, from an engine task of this table that peeks and decodes it (`read_changes`).
Peeking leaves the slot where it was: it moves only after the target committed
(`slot.advance_slot`), so a crash reads the range again.

The engine then reduces the events to the net effect on each key (`net_changes`): the last
event wins, and a large value the WAL left out of an update (unchanged TOAST) is taken
from the key's earlier event in the range that had it, or else left to the target.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hakiri.errors import SourceUnreachable
from hakiri.guards.spark_types import quoted_name
from hakiri.sources.cdc.ranges import LSN_COLUMN, SEQ_COLUMN, event_columns
from hakiri.sources.task_errors import carried
from hakiri.spec.modes.cdc_mirror import OP_COLUMN, UNCHANGED_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "LSN_COLUMN",
    "SEQ_COLUMN",
    "changes_frame",
    "net_changes",
    "read_changes",
]

# Spark types of PostgreSQL's fixed-width types: their values are never left out of the WAL.
_FIXED_WIDTH = frozenset(
    {"boolean", "tinyint", "smallint", "int", "bigint", "float", "double", "date", "timestamp"}
)


def read_changes(
    spark: Any,
    url: str,
    slot: str,
    publication: str,
    table: tuple[str, str],
    lsn_range: tuple[int, int],
    columns: Sequence[tuple[str, str]],
    key: Sequence[str],
) -> DataFrame:
    """The net changes of `table` committed in `lsn_range` ([start, end)), as rows of
    `columns` (name, Spark type) with the op and unchanged control columns, read by an
    engine task."""
    names = [name for name, _ in columns]
    text = ", ".join(f"{quoted_name(n)} string" for n in event_columns(names))
    task = _RangeRead(url, slot, publication, table, lsn_range, names, list(key))
    events = spark.range(0, 1, 1, 1).mapInArrow(task, text)
    return net_changes(_typed(events, columns), columns, key)


def changes_frame(
    spark: Any, events: Any, columns: Sequence[tuple[str, str]], key: Sequence[str]
) -> DataFrame:
    """The net changes of a table's `events` (an Arrow table of `ranges.event_columns`, all
    text, decoded in the hakiri process), as `read_changes` makes them."""
    names = [name for name, _ in columns]
    schema = ", ".join(f"{quoted_name(n)} string" for n in event_columns(names))
    frame = spark.createDataFrame(events.select(event_columns(names)), schema=schema)
    return net_changes(_typed(frame, columns), columns, key)


def _typed(events: DataFrame, columns: Sequence[tuple[str, str]]) -> DataFrame:
    from pyspark.sql import functions as F

    return events.select(
        F.col(OP_COLUMN),
        F.col(LSN_COLUMN).cast("bigint").alias(LSN_COLUMN),
        F.col(SEQ_COLUMN).cast("bigint").alias(SEQ_COLUMN),
        F.col(UNCHANGED_COLUMN),
        *[F.col(quoted_name(n)).cast(kind).alias(n) for n, kind in columns],
    )


def net_changes(
    events: DataFrame, columns: Sequence[tuple[str, str]], key: Sequence[str]
) -> DataFrame:
    """One row per key: its last event, unchanged values carried from the key's earlier
    events in the range where they were present."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    keys = [F.col(quoted_name(k)) for k in key]
    ordered = Window.partitionBy(*keys).orderBy(F.col(LSN_COLUMN), F.col(SEQ_COLUMN))
    so_far = ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    unchanged = F.from_json(F.col(UNCHANGED_COLUMN), "array<string>")
    out: list[Any] = []
    still: list[Any] = []
    for name, kind in columns:
        column = F.col(quoted_name(name))
        if name in key or kind in _FIXED_WIDTH:  # only variable-width values are TOASTed
            out.append(column.alias(name))
            continue
        present = F.coalesce(~F.array_contains(unchanged, name), F.lit(True))
        carried = F.last(F.when(present, F.struct(column.alias("v"))), ignorenulls=True).over(
            so_far
        )
        out.append(F.when(present, column).otherwise(carried.getField("v")).alias(name))
        still.append(F.when(~present & carried.isNull(), F.lit(json.dumps(name))))
    listed = F.concat_ws(",", *still) if still else F.lit("")
    left_out = F.when(listed != "", F.concat(F.lit("["), listed, F.lit("]")))
    latest = Window.partitionBy(*keys).orderBy(F.col(LSN_COLUMN).desc(), F.col(SEQ_COLUMN).desc())
    reduced = events.select(
        *out,
        F.col(OP_COLUMN),
        left_out.cast("string").alias(UNCHANGED_COLUMN),
        F.row_number().over(latest).alias("_hakiri_cdc_rank"),
    )
    return reduced.where(F.col("_hakiri_cdc_rank") == 1).drop("_hakiri_cdc_rank")


@dataclass(frozen=True)
class _RangeRead:
    """The engine task that reads one table's changes in one range (`read_changes`)."""

    url: str
    slot: str
    publication: str
    table: tuple[str, str]
    lsn_range: tuple[int, int]
    names: list[str]
    key: list[str]

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        for _ in batches:  # the one input row says only that this task runs
            pass
        with carried():
            yield from self._events()

    def _events(self) -> Iterator[Any]:
        from hakiri.errors import HakiriError
        from hakiri.sources.cdc.ranges import events_of

        start, end = self.lsn_range
        tables = {self.table: (self.names, self.key)}
        try:
            for _, batch in events_of(
                self.url, self.slot, self.publication, end, tables, start=start
            ):
                if isinstance(batch, HakiriError):
                    raise batch
                yield batch
        except SourceUnreachable as exc:  # named with the table whose read it was
            table = f"{self.table[0]}.{self.table[1]}"
            raise SourceUnreachable(
                exc.reason.replace("reading the changes", f"reading the changes of {table}", 1),
                exc.hint,
            ) from None
