"""A range of a table's changes, read and reduced in the engine.

One engine task peeks the slot's changes (`pg_logical_slot_peek_binary_changes`, pgoutput,
the pipeline's publication) up to the range's end, decodes them (`pgoutput.Decoder`) and
keeps this table's, committed inside the range, as events: the row after the change (op
'u') or the key that went away (op 'd'; a primary-key update is both), with the change's
commit LSN and order. Peeking leaves the slot where it was: it moves only after the target
committed (`slot.advance_slot`), so a crash reads the range again.

The engine then reduces the events to the net effect on each key (`net_changes`): the last
event wins, and a large value the WAL left out of an update (unchanged TOAST) is taken
from the key's earlier event in the range that had it, or else left to the target.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hakiri.errors import SourceDataError, SourceUnreachable
from hakiri.guards.spark_types import quoted_name
from hakiri.sources.task_errors import carried
from hakiri.spec.modes.cdc_mirror import OP_COLUMN, UNCHANGED_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "LSN_COLUMN",
    "SEQ_COLUMN",
    "net_changes",
    "read_changes",
]

LSN_COLUMN = "_hakiri_cdc_lsn"  # an event's place: its commit's WAL position
SEQ_COLUMN = "_hakiri_cdc_seq"  # and its order within it
_ROWS_PER_BATCH = 20_000
# Spark types of PostgreSQL's fixed-width types: their values are never left out of the WAL.
_FIXED_WIDTH = frozenset(
    {"boolean", "tinyint", "smallint", "int", "bigint", "float", "double", "date", "timestamp"}
)
# PostgreSQL writes a UTC offset as +00; Spark's cast wants +00:00.
_SHORT_OFFSET = re.compile(r"([+-]\d\d)$")


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
    `columns` (name, Spark type) with the op and unchanged control columns."""
    from pyspark.sql import functions as F

    names = [name for name, _ in columns]
    wide = [OP_COLUMN, LSN_COLUMN, SEQ_COLUMN, UNCHANGED_COLUMN, *names]
    text = ", ".join(f"{quoted_name(n)} string" for n in wide)
    task = _RangeRead(url, slot, publication, table, lsn_range, names, list(key))
    events = spark.range(0, 1, 1, 1).mapInArrow(task, text)
    typed = events.select(
        F.col(OP_COLUMN),
        F.col(LSN_COLUMN).cast("bigint").alias(LSN_COLUMN),
        F.col(SEQ_COLUMN).cast("bigint").alias(SEQ_COLUMN),
        F.col(UNCHANGED_COLUMN),
        *[F.col(quoted_name(n)).cast(kind).alias(n) for n, kind in columns],
    )
    return net_changes(typed, columns, key)


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
        import psycopg

        from hakiri.sources.cdc.pgoutput import Decoder

        try:
            yield from _decoded(self, Decoder())
        except psycopg.OperationalError as exc:  # the source went away: its error, not the target's
            table = f"{self.table[0]}.{self.table[1]}"
            raise SourceUnreachable(
                f"reading the changes of {table} from replication slot {self.slot}: "
                f"{str(exc).strip().splitlines()[0]}",
                "check that the source server is up and reachable; the next apply reads the "
                "range again",
            ) from None


def _decoded(
    read: _RangeRead,
    decoder: Any,
) -> Iterator[Any]:
    import psycopg
    import pyarrow as pa

    from hakiri.sources.cdc.pgoutput import UNCHANGED, lsn_text

    url, slot, publication, table = read.url, read.slot, read.publication, read.table
    names, key = read.names, read.key
    start, end = read.lsn_range
    wide = [OP_COLUMN, LSN_COLUMN, SEQ_COLUMN, UNCHANGED_COLUMN, *names]
    schema = pa.schema([(n, pa.string()) for n in wide])
    found: dict[str, list[Any]] = {n: [] for n in wide}

    def add(op: str, lsn: int, seq: int, values: dict[str, Any]) -> None:
        left_out = [n for n in names if values.get(n) is UNCHANGED]
        found[OP_COLUMN].append(op)
        found[LSN_COLUMN].append(str(lsn))
        found[SEQ_COLUMN].append(str(seq))
        found[UNCHANGED_COLUMN].append(json.dumps(left_out) if left_out else None)
        for n in names:
            value = values.get(n)
            found[n].append(None if value is None or value is UNCHANGED else _spark_text(value))

    with psycopg.connect(url) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        conn.execute("SET DateStyle = 'ISO'")
        conn.execute("SET extra_float_digits = 3")
        with conn.cursor(name="hakiri_cdc_peek") as cursor:
            cursor.itersize = 5_000
            cursor.execute(
                "SELECT data FROM pg_logical_slot_peek_binary_changes(%s, %s::pg_lsn, NULL, "
                "'proto_version', '1', 'publication_names', %s)",
                (slot, lsn_text(end), publication),
            )
            for (data,) in cursor:
                for change in decoder.feed(bytes(data)):
                    relation = change.relation
                    if (relation.schema, relation.name) != table:
                        continue
                    if not start <= change.commit_lsn < end:
                        continue
                    where = f"{table[0]}.{table[1]} at {lsn_text(change.commit_lsn)}"
                    if change.op == "truncate":
                        raise SourceDataError(
                            f"{where}: TRUNCATE is not mirrored yet",
                            "drop the pipeline's replication slot and apply again: a new "
                            "snapshot of the table is taken",
                        )
                    seq = change.seq * 2
                    new, old = change.new or {}, change.old or {}
                    # A large value an update kept is left out of the new row; under REPLICA
                    # IDENTITY FULL the old row carries it whole: the new row takes it from there.
                    new = {
                        n: old[n]
                        if v is UNCHANGED and old.get(n, UNCHANGED) is not UNCHANGED
                        else v
                        for n, v in new.items()
                    }
                    if change.op == "delete":
                        add("d", change.commit_lsn, seq, old)
                    elif (
                        change.op == "update" and old and any(old.get(k) != new.get(k) for k in key)
                    ):
                        if any(v is UNCHANGED for v in new.values()):
                            raise SourceDataError(
                                f"{where}: a primary-key update left a large value out of the "
                                "WAL, and the old row it belongs to is deleted by the update",
                                f"ALTER TABLE {table[0]}.{table[1]} REPLICA IDENTITY FULL "
                                "(the old row is then in the WAL whole), drop the slot and apply "
                                "again (a new snapshot)",
                            )
                        add("d", change.commit_lsn, seq, old)
                        add("u", change.commit_lsn, seq + 1, new)
                    else:
                        add("u", change.commit_lsn, seq, new)
                    if len(found[OP_COLUMN]) >= _ROWS_PER_BATCH:
                        yield pa.RecordBatch.from_pydict(found, schema=schema)
                        found = {n: [] for n in wide}
    if found[OP_COLUMN]:
        yield pa.RecordBatch.from_pydict(found, schema=schema)


def _spark_text(value: str) -> str:
    """PostgreSQL's text of a value as Spark's cast reads it (UTC offsets written whole)."""
    if len(value) > 19 and value[10] == " " and _SHORT_OFFSET.search(value):
        return value + ":00"
    return value
