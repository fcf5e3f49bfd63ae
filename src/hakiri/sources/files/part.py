"""One Spark read of a batch's files (`Part`), and the helpers every format's read shares.

A part's raw frame holds the data columns and hakiri's own (`BAD`, `FILE`, `POS`, …,
named so no real column clashes); `Part.frame` delivers its good records in the batch's
columns, and `metrics` are the counts the malformed-record checks judge. Also: a quoted
column reference, a schema from declared types, and the read with a corrupt-record column
that CSV and JSON Lines share. pyspark is imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hakiri.errors import SourceDataError
from hakiri.guards.spark_types import quoted_name
from hakiri.sources.files.stand_ins import Located
from hakiri.spark.tally import Tally

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, DataFrameReader, SparkSession
    from pyspark.sql.types import StructType


BAD = "_hakiri_malformed"  # Spark's corrupt-record column, named so no real column clashes
FILE = "_hakiri_file"
POS = "_hakiri_position"
BROKEN = "_hakiri_broken"
TEXT = "_hakiri_text"  # a converted CSV record's fields as read, for naming its line
MISTYPED = "_hakiri_mistyped"  # true: a value of the record did not convert to its type
_REPLACEMENT = "\ufffd"  # what Spark's CSV reader makes of bytes the charset cannot decode

PROVENANCE_COLUMNS = ("_source_file_hash", "_hakiri_batch_id")


@dataclass(frozen=True)
class Part:
    """One Spark read of files that share a layout: one CSV header, or JSON Lines, or JSON arrays."""

    raw: DataFrame  # data columns, BAD if present; JSON arrays add FILE, POS and BROKEN
    parsed: tuple[str, ...]  # every data column the files hold: all are parsed when counting
    columns: tuple[str, ...]  # the columns the batch delivers, in order
    files: tuple[Located, ...]
    kind: str  # "csv" | "jsonl" | "json-array" | "parquet"
    has_bad: bool
    # CSV is read as text and converted to the declared or inferred types by hakiri's
    # projection: a record with a value that does not convert has MISTYPED true (BAD holds
    # a record only when Spark's parser refused it, e.g. a field short).
    has_mistyped: bool = False
    # A part whose reader typed some columns itself (`csv_files.parser_typed`): the same
    # files read as text and converted, which names a malformed record's line and value.
    spelled: Part | None = None

    def frame(
        self,
        observation: Any = None,
        tally: Tally | None = None,
        hashes: Mapping[Path, str] | None = None,
    ) -> DataFrame:
        """The part's good records in the batch's columns; with `observation` or `tally`, the
        counts `Check` judges are taken as the records pass (no pass of their own); with
        `hashes` (file -> content hash), each row's file's hash as `_source_file_hash`."""
        from pyspark.sql import functions as F

        if not self.columns:
            # Every record was malformed (nothing else to infer columns from): no rows.
            return self.raw.sparkSession.range(0).select()
        columns = [quoted_col(name) for name in self.columns]
        if hashes is not None:
            columns.append(_file_hash(self, hashes).alias(PROVENANCE_COLUMNS[0]))
        if tally is not None:
            # Bit 0: malformed (left out); bit 1: text with U+FFFD; bit 2: a JSON file that is
            # not one valid array (left out; judged by `malformed._verdict`).
            flags = F.when(_malformed(self), 1).otherwise(0) + F.when(_replaced(self), 2).otherwise(
                0
            )
            if self.kind == "json-array":
                flags = flags + F.when(F.col(BROKEN), 4).otherwise(0)
            return tally.sift(self.raw, columns, flags, 1 | 4)
        rows = self.raw
        if observation is not None:
            rows = rows.observe(observation, *metrics(self))
        if self.kind == "json-array":
            rows = rows.where(~F.col(BROKEN) & F.col(POS).isNotNull())
        if self.has_bad:
            rows = rows.where(F.col(BAD).isNull())
        if self.has_mistyped:
            rows = rows.where(~F.col(MISTYPED))
        return rows.select(*columns)


def _file_hash(part: Part, hashes: Mapping[Path, str]) -> Column:
    """The content hash of each row's file, from the file name the part's read carries as a
    literal (an engine without input_file_name: each file is read on its own there)."""

    if FILE not in part.raw.columns:
        raise ValueError(f"a {part.kind} part does not carry its rows' file names")
    return file_hash(part.files, hashes)


def file_hash(files: Sequence[Located], hashes: Mapping[Path, str]) -> Column:
    """The content hash of the file named in each row's FILE."""
    from pyspark.sql import functions as F

    pairs = [x for loc in files for x in (F.lit(loc.path.as_uri()), F.lit(hashes[loc.path]))]
    return F.element_at(F.create_map(*pairs), F.col(FILE))


def quoted_col(name: str) -> Column:
    from pyspark.sql import functions as F

    return F.col(quoted_name(name))


def spark_schema(spark: SparkSession, fields: Sequence[tuple[str, str]]) -> StructType:
    """A StructType from (name, Spark SQL type) pairs; a type Spark does not know is a SourceDataError."""
    from pyspark.errors import PySparkException
    from pyspark.sql.types import StructType

    from hakiri.spark.session import parse_type

    try:
        schema = parse_type(spark, ", ".join(f"{quoted_name(n)} {t}" for n, t in fields))
    except PySparkException:
        for name, type_ in fields:
            try:
                parse_type(spark, type_)
            except PySparkException:
                raise SourceDataError(
                    f"column {name!r} is declared as {type_!r}, which is not a Spark SQL type",
                    "use a Spark SQL type in `columns`: string, bigint, int, double, "
                    "decimal(12,2), boolean, date, timestamp, …",
                ) from None
        raise
    assert isinstance(schema, StructType)
    return schema


def with_bad(
    reader: DataFrameReader,
    schema: StructType,
    observed: bool,
    locs: Sequence[Located],
    kind: str = "csv",
) -> DataFrame:
    """The files read with `schema`, plus the corrupt-record column BAD: filled by the parser
    where the engine has one (Apache Spark), else NULL (an engine whose parser stops at such a
    record: `Check` then names it). Without the engine's file metadata (Sail) each file is
    read on its own and carries its name in FILE, for naming the file of a malformed record."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    if observed:
        full = StructType([*schema.fields, StructField(BAD, StringType())])
        return getattr(reader.schema(full), kind)([loc.spark_path for loc in locs])
    frames = [
        getattr(reader.schema(schema), kind)(loc.spark_path).select(
            "*", F.lit(None).cast("string").alias(BAD), F.lit(loc.path.as_uri()).alias(FILE)
        )
        for loc in locs
    ]
    return union(frames)


def union(frames: Sequence[DataFrame]) -> DataFrame:
    united = frames[0]
    for more in frames[1:]:
        united = united.unionByName(more)
    return united


def _malformed(part: Part) -> Column:
    """Per record of a part with BAD: was it malformed (or, converted, mistyped)?"""
    from pyspark.sql import functions as F

    bad = F.col(BAD).isNotNull()
    return bad | F.col(MISTYPED) if part.has_mistyped else bad


def _replaced(part: Part) -> Column:
    """Per record: does a text field hold U+FFFD (bytes the encoding could not decode)?"""
    from pyspark.sql import functions as F

    replaced = F.lit(False)
    for name, type_ in part.raw.dtypes if part.kind != "parquet" else ():  # text formats only
        if type_ == "string":
            replaced = replaced | (F.instr(quoted_col(name), _REPLACEMENT) > 0)
    return replaced


def metrics(part: Part) -> list[Column]:
    """What `Check` judges: malformed records, strings with U+FFFD, broken arrays."""
    from pyspark.sql import functions as F

    return [
        F.count(F.when(_malformed(part), 1)).alias("malformed"),  # parts that have BAD
        F.count(F.when(_replaced(part), 1)).alias("replaced"),
        F.count(F.when(F.col(BROKEN), 1)).alias("broken")
        if part.kind == "json-array"
        else F.lit(0).alias("broken"),
        # Referencing every column makes Spark parse every column of every record.
        *[F.count(quoted_col(name)).alias(f"_c{i}") for i, name in enumerate(part.parsed)],
    ]
