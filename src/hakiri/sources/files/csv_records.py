"""CSV records split in the engine's tasks, for an engine whose CSV reader stops at a record
with the wrong number of fields (Sail) when on_malformed = "drop" asks to set it aside.

A one-row-per-file frame goes through `mapInArrow`: each task streams its files line by line
and splits each line into fields with Python's csv module as the source config says
(`inspect.csv_dialect`: delimiter, quote, escape; comment lines left out). A line is a record, as Apache Spark's
reader takes it (its `multiLine` is off): a quoted field does not go on past the end of its
line, so a newline inside quotes ends the record there and the rest of the field is a line of
its own (Spark reads the same). A record of the expected width gives its fields as text (an
empty field is NULL; with `null_value` set a quoted empty field is an empty string, as Spark
reads it); any other width gives a row whose BAD holds the line, which the malformed-record
check counts and leaves out. The result has the columns `with_bad` gives (text, BAD, FILE):
hakiri's conversion to the declared or inferred types then runs on it as on the engine's
own read.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from hakiri.sources.files.inspect import BOM, csv_dialect
from hakiri.sources.files.part import BAD, FILE, with_bad
from hakiri.sources.files.stand_ins import Located
from hakiri.spec.pipeline import FilesConfig

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, DataFrameReader, SparkSession
    from pyspark.sql.types import StructType

_LOCAL = "_hakiri_local"
_BATCH = 4096


def csv_text(
    spark: SparkSession,
    config: FilesConfig,
    charset: str,
    reader: DataFrameReader,
    schema: StructType,
    observed: bool,
    locs: Sequence[Located],
) -> DataFrame:
    """The files' records as text columns (`schema`) with BAD and FILE: the engine's reader
    (`with_bad`), or, on an engine that cannot set a record of the wrong width aside and
    on_malformed = "drop", hakiri's tasks."""
    if observed or config.on_malformed != "drop":
        return with_bad(reader, schema, observed, locs)
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    width = len(schema.fields)
    files = spark.createDataFrame(
        [(loc.path.as_uri(), str(loc.path)) for loc in locs], f"{FILE} string, {_LOCAL} string"
    )
    out = StructType(
        [
            *[StructField(f"_t{i}", StringType()) for i in range(width)],
            StructField(BAD, StringType()),
            StructField(FILE, StringType()),
        ]
    )
    records = files.mapInArrow(_splitter(config, charset or config.encoding, width), out)
    return records.select(
        *[F.col(f"_t{i}").alias(field.name) for i, field in enumerate(schema.fields)], BAD, FILE
    )


def _splitter(config: FilesConfig, encoding: str, width: int) -> Any:
    def split(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        names = [*[f"_t{i}" for i in range(width)], BAD, FILE]
        for batch in batches:
            for uri, local in zip(
                batch.column(FILE).to_pylist(), batch.column(_LOCAL).to_pylist(), strict=True
            ):
                rows: list[tuple[Any, ...]] = []
                for row in _records(config, local, encoding, width):
                    rows.append((*row, uri))
                    if len(rows) == _BATCH:
                        yield _batch(pa, names, rows)
                        rows = []
                if rows:
                    yield _batch(pa, names, rows)

    return split


def _batch(pa: Any, names: list[str], rows: list[tuple[Any, ...]]) -> Any:
    columns = zip(*rows, strict=True)
    return pa.RecordBatch.from_arrays([pa.array(c, pa.string()) for c in columns], names=names)


def _records(
    config: FilesConfig, local: str, encoding: str, width: int
) -> Iterator[tuple[str | None, ...]]:
    """(field texts…, BAD) of each record of a file, one per line that is not blank or a
    comment; the header line left out."""
    header = config.header
    null = config.null_value
    with open(local, encoding=encoding, errors="replace") as stream:  # \n, \r\n and \r end lines
        for fields, line in _split_lines(config, stream):
            if not fields:
                continue  # blank
            if header:
                header = False
                continue
            if len(fields) != width:
                yield (*([None] * width), line.rstrip("\r\n"))
                continue
            if null is None or "" not in fields or not config.quote:
                yield (*[None if v in ("", null) else v for v in fields], None)
                continue
            quoted = _quoted(line, config)
            yield (
                *[
                    None if v == null or (v == "" and not (i < len(quoted) and quoted[i])) else v
                    for i, v in enumerate(fields)
                ],
                None,
            )


def _split_lines(config: FilesConfig, stream: Any) -> Iterator[tuple[list[str], str]]:
    """(fields, line) of each line that is not a comment, each line split on its own: one csv
    reader goes over the file (it asks for a line only when it needs one), and the lines of a
    record it took across line ends are split again one by one."""
    taken: list[str] = []

    def lines() -> Iterator[str]:
        for number, raw in enumerate(stream, 1):
            line = raw.removeprefix(BOM) if number == 1 else raw
            if config.comment is not None and line.startswith(config.comment):
                continue
            taken.append(line)
            yield line

    reader = csv.reader(lines(), **csv_dialect(config))
    while True:
        try:
            fields = next(reader, None)
        except csv.Error:
            fields = []  # split again below, line by line
        if not taken:
            return
        if len(taken) == 1 and fields is not None:
            yield fields, taken[0]
        else:
            for line in taken:
                yield _one_line(config, line), line
        taken.clear()
        if fields is None:
            return


def _one_line(config: FilesConfig, line: str) -> list[str]:
    """The fields of one line on its own (an open quote ends with the line, as in Spark)."""
    try:
        return next(csv.reader([line.rstrip("\r\n")], **csv_dialect(config)), [])
    except csv.Error:
        return [""] * 2**16  # cannot be split: a record of no expected width


def _quoted(line: str, config: FilesConfig) -> list[bool]:
    """Which fields of a line are quoted: with `null_value` set Spark reads a quoted empty
    field as an empty string and an unquoted one as NULL (Python's csv module tells no
    difference)."""
    quote, escape, delimiter = config.quote, config.escape, config.delimiter
    found: list[bool] = []
    position, end = 0, len(line)
    while True:
        found.append(position < end and line[position] == quote)
        if found[-1]:
            position += 1
            while position < end:
                char = line[position]
                if char == escape and escape != quote:
                    position += 2
                    continue
                if char == quote:
                    if escape == quote and line[position + 1 : position + 2] == quote:
                        position += 2
                        continue
                    position += 1
                    break
                position += 1
        following = line.find(delimiter, position)
        if following < 0:
            return found
        position = following + len(delimiter)
