"""COPY staging: every Spark partition streams its rows into the staging table with COPY.

Spark hands each partition to a Python worker as Arrow record batches
(`DataFrame.mapInArrow`); pyarrow encodes them as CSV in C++ and psycopg streams
that into `COPY <staging> (…) FROM STDIN (FORMAT csv)`. No row passes through
Python one at a time, and the driver receives one count per partition.

The CSV keeps every value the JDBC writer would: NULL is an unquoted empty field
and an empty string a quoted one (`""`), which COPY tells apart; quotes are
doubled, delimiters, newlines and backslashes stay inside quotes as data;
numbers are written in their shortest exact form; timestamps with a zone are
written as UTC wall times into a session whose time zone is UTC (pyarrow formats
zoned ones 30 times slower); dates are proleptic Gregorian as in Spark and PostgreSQL. Binary
columns become `\\x…` hex text first, which bytea reads as bytes.

One connection and one transaction per partition, opened on the first row: a task
that fails leaves no row behind (its transaction rolls back) and Spark runs it
again. On a cluster the executors import this module (hakiri, psycopg and pyarrow
installed on the workers) and must reach the database.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

from psycopg import sql

__all__ = ["CopyStageWriter"]

_ROWS_SCHEMA = "rows long"


class CopyStageWriter:
    """A `StageWriter` that loads each partition with COPY; `write` returns the rows written."""

    def __init__(self, url: str) -> None:
        self.url = url

    def write(self, frame: Any, schema: str, table: str) -> int:
        from pyspark.sql import functions as F

        columns = sql.SQL(", ").join(sql.Identifier(name) for name in frame.columns)
        statement = (
            sql.SQL("COPY {} ({}) FROM STDIN (FORMAT csv)")
            .format(sql.Identifier(schema, table), columns)
            .as_string()
        )
        counts = _copyable(frame).mapInArrow(copy_partition(self.url, statement), _ROWS_SCHEMA)
        total = counts.agg(F.sum("rows")).first()
        return int(total[0] or 0) if total is not None else 0


def _copyable(frame: Any) -> Any:
    """Binary columns as bytea's hex text; everything else as Spark holds it."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType

    binary = [f.name for f in frame.schema.fields if isinstance(f.dataType, BinaryType)]
    if not binary:
        return frame
    return frame.withColumns(
        {name: F.concat(F.lit("\\x"), F.lower(F.hex(F.col(name)))) for name in binary}
    )


def copy_partition(url: str, statement: str) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The function each Spark task runs over its partition's Arrow batches: COPY them, then
    yield one batch holding the number of rows written."""

    def copy(batches: Iterator[Any]) -> Iterator[Any]:
        import psycopg
        import pyarrow as pa
        import pyarrow.csv as pacsv

        options = pacsv.WriteOptions(include_header=False)
        filled = (batch for batch in batches if batch.num_rows)
        first = next(filled, None)
        rows = 0
        if first is not None:  # an empty partition opens no connection
            # Leaving the connection's block commits; an error on the way rolls back.
            with psycopg.connect(url) as conn, conn.cursor() as cursor:
                # Timestamps with a zone are written as UTC wall times without one (pyarrow
                # formats those 30x faster), which this session then reads as UTC.
                cursor.execute("SET TIME ZONE 'UTC'")
                with cursor.copy(statement) as copying:
                    for batch in itertools.chain((first,), filled):
                        sink = pa.BufferOutputStream()
                        pacsv.write_csv(_zone_free(batch), sink, options)
                        copying.write(memoryview(sink.getvalue()))
                        rows += batch.num_rows
        yield pa.RecordBatch.from_pydict({"rows": [rows]}, pa.schema([("rows", pa.int64())]))

    return copy


def _zone_free(batch: Any) -> Any:
    """The batch with every zoned timestamp column as the same instants in UTC, unzoned."""
    import pyarrow as pa

    zoned = [
        i
        for i, field in enumerate(batch.schema)
        if pa.types.is_timestamp(field.type) and field.type.tz
    ]
    if not zoned:
        return batch
    columns = list(batch.columns)
    for i in zoned:
        columns[i] = columns[i].cast(pa.timestamp(columns[i].type.unit))
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)
