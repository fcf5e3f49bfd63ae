"""A range of a table's changes, reduced in the engine.

The range's events (`ranges.events_of`: the row after each change, or the key that went
away, with the change's commit LSN and order) come either from the hakiri process, which
peeked and decoded the range once for every table of the pipeline (`ranges.RangeEvents`,
handed to the engine as a local relation: `changes_frame`), or, for a range too large to
hold there, from an engine task of this table that peeks and decodes it (`read_changes`).
Peeking leaves the slot where it was: it moves only after the target committed
(`slot.advance_slot`), so a crash reads the range again.

The events reduce to the net effect on each key by the rules of `net.net_of` (the last
event wins; a large value the WAL left out of an update, unchanged TOAST, is taken from the
key's earlier event in the range that had it, or else left to the target): in the hakiri
process for a range held there, so the engine receives one row per key, or in engine
tasks for the others (`net_changes`, also the Debezium reader's). The values, PostgreSQL's
text until then, are cast to the columns' types last.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hakiri.errors import SourceUnreachable
from hakiri.guards.spark_types import quoted_name
from hakiri.sources.cdc.net import NetOf, net_of, variable_width
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
    return _typed(net_changes(events, columns, key), columns)


def changes_frame(
    spark: Any, events: Any, columns: Sequence[tuple[str, str]], key: Sequence[str]
) -> DataFrame:
    """The net changes of a table's `events` (an Arrow table of `ranges.event_columns`, all
    text, decoded in the hakiri process), as `read_changes` makes them: reduced here
    (`net.net_of`), then handed to the engine as a local relation, one row per key."""
    names = [name for name, _ in columns]
    reduced = net_of(events, names, key, variable_width(columns, key))
    schema = ", ".join(f"{quoted_name(n)} string" for n in [*names, OP_COLUMN, UNCHANGED_COLUMN])
    return _typed(spark.createDataFrame(reduced, schema=schema), columns)


def _typed(rows: DataFrame, columns: Sequence[tuple[str, str]]) -> DataFrame:
    """The net changes' values (PostgreSQL's text) cast to the columns' Spark types."""
    from pyspark.sql import functions as F

    return rows.select(
        *[F.col(quoted_name(n)).cast(kind).alias(n) for n, kind in columns],
        F.col(OP_COLUMN),
        F.col(UNCHANGED_COLUMN),
    )


def net_changes(
    events: DataFrame, columns: Sequence[tuple[str, str]], key: Sequence[str]
) -> DataFrame:
    """One row per key: `net.net_of` in engine tasks, each key's events gathered into one
    partition first."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    names = [name for name, _ in columns]
    fields = [events.schema[n] for n in names]
    fields += [StructField(OP_COLUMN, StringType()), StructField(UNCHANGED_COLUMN, StringType())]
    task = NetOf(names, list(key), variable_width(columns, key))
    gathered = events.repartition(*[F.col(quoted_name(k)) for k in key])
    return gathered.mapInArrow(task, StructType(fields))


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
