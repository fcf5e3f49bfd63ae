"""COPY staging: every Spark partition streams its rows into the staging table with COPY.

Spark hands each partition to a Python worker as Arrow record batches
(`DataFrame.mapInArrow`). Into a staging table hakiri created from the rows' own
Spark types, `pgpq` encodes them in PostgreSQL's binary COPY format (Rust, no text
in between) and psycopg streams that into `COPY <staging> (…) FROM STDIN (FORMAT
binary)`: PostgreSQL reads each value as its bytes, without parsing text. The
binary format carries no type names, so it is used only where the staging
column's type is the one the encoder writes for the Arrow type (`spark_to_postgres`
made the column from the same Spark type), or where a staging table made like the
target (blue_green) has exactly those types; otherwise CSV text, which PostgreSQL
casts into the target's types. No row passes through Python one at a time, and the
driver receives one count per partition.

In CSV, pyarrow encodes the batches in C++, keeping every value the JDBC writer
would: NULL is an unquoted empty field
and an empty string a quoted one (`""`), which COPY tells apart; quotes are
doubled, delimiters, newlines and backslashes stay inside quotes as data;
numbers are written in their shortest exact form; timestamps with a zone are
written as UTC wall times into a session whose time zone is UTC (pyarrow formats
zoned ones 30 times slower); dates are proleptic Gregorian as in Spark and PostgreSQL. Binary
columns become `\\x…` hex text first, which bytea reads as bytes.

With row rules (`write_tagged`), the same pass also sorts each batch: rows a skip
rule dropped stay out of the staging table, and the quarantine records (one per
row and warn/skip rule broken) are spooled by the task and copied into a second
staging table after the rows, in the same transaction.

One connection and one transaction per partition, opened on the first row: a task
that fails leaves no row behind (its transaction rolls back) and Spark runs it
again. On a cluster the executors import this module (hakiri, psycopg and pyarrow
installed on the workers) and must reach the database.
"""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import sql

__all__ = ["CopyCounts", "CopyStageWriter", "QuarantineSplit"]

_COUNTS_SCHEMA = "rows long, quarantined long, rows_in long, broke array<long>"
_SPOOL_IN_MEMORY = 64 * 1024 * 1024  # quarantine records a task keeps in memory before a temp file


@dataclass(frozen=True)
class QuarantineSplit:
    """How a task sorts tagged rows (`hakiri.quality.rules.TaggedRows`, by column position):
    the first `width` columns are the data and `broke` the bits of the rules each row broke.
    A row with a bit of `skip_bits` is left out; each bit of `aside_bits` is one record
    (rule_id, on_fail, dropped, row, the JSON in column `row`) that `statement` copies into
    the quarantine staging table."""

    width: int
    broke: int
    row: int | None
    skip_bits: int
    aside_bits: int
    rule_ids: tuple[str, ...]
    on_fails: tuple[str, ...]
    statement: str | None  # COPY … FROM STDIN into the quarantine staging table


@dataclass(frozen=True)
class CopyCounts:
    """What the tasks of one COPY pass counted, summed."""

    rows: int  # rows written into the staging table
    quarantined: int = 0  # quarantine records written
    rows_in: int = 0  # rows the pass received (tagged rows: kept or dropped)
    broke: tuple[int, ...] = ()  # tagged rows: per rule, the rows that broke it


class CopyStageWriter:
    """A `StageWriter` that loads each partition with COPY; `write` returns the rows written."""

    def __init__(self, url: str) -> None:
        self.url = url

    def write(self, frame: Any, schema: str, table: str) -> int:
        """Every row of `frame` into `table`, made from the frame's Spark types (binary COPY)."""
        return self._run(frame, copy_statement(schema, table, frame.columns, binary=True)).rows

    def write_into(
        self, frame: Any, schema: str, table: str, columns: Sequence[str], *, binary: bool = False
    ) -> int:
        """Every row of `frame` into the columns `columns` of `table` (in the frame's order), a
        table of another's making: CSV, which PostgreSQL casts into its column types, or
        `binary` when the caller knows those types are exactly the frame's."""
        return self._run(frame, copy_statement(schema, table, columns, binary=binary)).rows

    def write_tagged(
        self,
        frame: Any,
        schema: str,
        table: str,
        columns: Sequence[str],
        split: QuarantineSplit,
        *,
        binary: bool,
    ) -> CopyCounts:
        """Rows not dropped into `table` (its columns `columns`, the frame's first ones), and the
        quarantine records as `split` says, from one pass; what the pass counted. `binary` when
        `table` was made from the frame's Spark types."""
        return self._run(frame, copy_statement(schema, table, columns, binary=binary), split)

    def _run(self, frame: Any, statement: str, split: QuarantineSplit | None = None) -> CopyCounts:
        binary = statement.endswith(_BINARY)
        tasks = (frame if binary else _copyable(frame)).mapInArrow(
            copy_partition(self.url, statement, split), _COUNTS_SCHEMA
        )
        # One small row per task (counts only) reaches the driver.
        width = len(split.rule_ids) if split is not None else 0
        rows = quarantined = rows_in = 0
        broke = [0] * width
        for task in tasks.collect():
            rows += task["rows"]
            quarantined += task["quarantined"]
            rows_in += task["rows_in"]
            for i, count in enumerate(task["broke"] or ()):
                broke[i] += count
        return CopyCounts(rows, quarantined, rows_in, tuple(broke))


_BINARY = "(FORMAT binary)"


def copy_statement(schema: str, table: str, columns: Sequence[str], *, binary: bool = False) -> str:
    """COPY … FROM STDIN in PostgreSQL's binary format, or CSV."""
    names = sql.SQL(", ").join(sql.Identifier(name) for name in columns)
    return (
        sql.SQL("COPY {} ({}) FROM STDIN " + (_BINARY if binary else "(FORMAT csv)"))
        .format(sql.Identifier(schema, table), names)
        .as_string()
    )


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


def copy_partition(
    url: str, statement: str, split: QuarantineSplit | None = None
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The function each Spark task runs over its partition's Arrow batches: COPY them (sorted
    by `split` when given), then yield one batch with the rows and records written."""

    def copy(batches: Iterator[Any]) -> Iterator[Any]:
        import psycopg
        import pyarrow as pa
        import pyarrow.csv as pacsv

        options = pacsv.WriteOptions(include_header=False)
        binary = _BinaryStream() if statement.endswith(_BINARY) else None
        filled = (batch for batch in batches if batch.num_rows)
        first = next(filled, None)
        rows = records = rows_in = 0
        broke = [0] * (len(split.rule_ids) if split is not None else 0)
        if first is not None:  # an empty partition opens no connection
            # Leaving the connection's block commits; an error on the way rolls back.
            with (
                tempfile.SpooledTemporaryFile(max_size=_SPOOL_IN_MEMORY) as spool,
                psycopg.connect(url) as conn,
                conn.cursor() as cursor,
            ):
                # Timestamps with a zone are written as UTC wall times without one (pyarrow
                # formats those 30x faster), which this session then reads as UTC.
                cursor.execute("SET TIME ZONE 'UTC'")
                with cursor.copy(statement) as copying:
                    for batch in itertools.chain((first,), filled):
                        if split is not None:
                            rows_in += batch.num_rows
                            _count_bits(batch.column(split.broke), broke)
                            aside = _quarantine_records(batch, split)
                            if aside is not None:
                                sink = pa.BufferOutputStream()
                                pacsv.write_csv(aside, sink, options)
                                spool.write(memoryview(sink.getvalue()))
                                records += aside.num_rows
                            batch = _kept(batch, split)
                        if binary is not None:
                            copying.write(binary.batch(batch))
                        else:
                            sink = pa.BufferOutputStream()
                            pacsv.write_csv(_zone_free(batch), sink, options)
                            copying.write(memoryview(sink.getvalue()))
                        rows += batch.num_rows
                    if binary is not None:
                        copying.write(binary.end())
                if records and split is not None and split.statement is not None:
                    spool.seek(0)
                    with cursor.copy(split.statement) as copying:
                        while chunk := spool.read(1024 * 1024):
                            copying.write(chunk)
        counts = {"rows": [rows], "quarantined": [records], "rows_in": [rows_in], "broke": [broke]}
        yield pa.RecordBatch.from_pydict(counts, _counts_arrow_schema())

    return copy


class _BinaryStream:
    """One task's Arrow batches as PostgreSQL binary COPY: the format's header before the first
    batch (whose schema the encoder takes), its trailer at the end."""

    def __init__(self) -> None:
        self._encoder: Any = None

    def batch(self, batch: Any) -> Any:
        if self._encoder is None:
            from pgpq import ArrowToPostgresBinaryEncoder

            self._encoder = ArrowToPostgresBinaryEncoder(batch.schema)
            return self._encoder.write_header() + self._encoder.write_batch(batch)
        return self._encoder.write_batch(batch)

    def end(self) -> Any:
        return self._encoder.finish()


def _counts_arrow_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            ("rows", pa.int64()),
            ("quarantined", pa.int64()),
            ("rows_in", pa.int64()),
            ("broke", pa.list_(pa.int64())),
        ]
    )


def _count_bits(broke: Any, counts: list[int]) -> None:
    """Add to counts[i] the rows of the batch with bit i of `broke` set (few rows have any)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    flagged = broke.filter(pc.not_equal(broke, 0))
    if not len(flagged):
        return
    for i in range(len(counts)):
        hits = pc.not_equal(pc.bit_wise_and(flagged, pa.scalar(1 << i, pa.int64())), 0)
        counts[i] += pc.sum(hits.cast(pa.int64())).as_py() or 0


def _kept(batch: Any, split: QuarantineSplit) -> Any:
    """The data columns of the rows no skip rule dropped."""
    import pyarrow.compute as pc

    data = batch.select(list(range(split.width)))
    if not split.skip_bits:
        return data
    dropped = _any_bit(batch.column(split.broke), split.skip_bits)
    return data.filter(pc.invert(dropped)) if pc.any(dropped).as_py() else data


def _quarantine_records(batch: Any, split: QuarantineSplit) -> Any:
    """One record (rule_id, on_fail, dropped, row) per warn/skip rule each row broke; None if none."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not split.aside_bits or split.row is None:
        return None
    broke = batch.column(split.broke)
    which = _any_bit(broke, split.aside_bits)
    if not pc.any(which).as_py():
        return None
    broke, rows = broke.filter(which), batch.column(split.row).filter(which)
    dropped = _any_bit(broke, split.skip_bits)
    parts = []
    for i in range(len(split.rule_ids)):
        if not split.aside_bits & (1 << i):
            continue
        hit = _any_bit(broke, 1 << i)
        count = pc.sum(hit.cast(pa.int64())).as_py() or 0
        if not count:
            continue
        parts.append(
            pa.RecordBatch.from_arrays(
                [
                    pa.array([split.rule_ids[i]] * count, pa.string()),
                    pa.array([split.on_fails[i]] * count, pa.string()),
                    dropped.filter(hit),
                    rows.filter(hit),
                ],
                names=["rule_id", "on_fail", "dropped", "row"],
            )
        )
    return pa.Table.from_batches(parts)  # write_csv takes a table as it takes a batch


def _any_bit(broke: Any, bits: int) -> Any:
    """Per row: does `broke` have any of `bits`?"""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.not_equal(pc.bit_wise_and(broke, pa.scalar(bits, pa.int64())), 0)


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
