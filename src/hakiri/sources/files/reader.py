"""Read file batches with Spark: csv, json/jsonl and parquet, with the malformed-record policy.

The JVM-free half (matching, hashing, header and key sniffing for `plan`) is
`hakiri.sources.files.inspect`; the parsing helpers both halves need live there.
pyspark is imported inside the functions that read.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hakiri.errors import SourceDataError, SourceUnreachable
from hakiri.guards.spark_types import quoted_name
from hakiri.sources.base import SourceFile
from hakiri.sources.files.csv_files import csv_parts
from hakiri.sources.files.inspect import first_line, has_records
from hakiri.sources.files.json_files import in_file_order, json_parts
from hakiri.sources.files.malformed import (
    PARSER_STOPPED,
    Check,
    engine_stopped,
    misshapen_records,
    raise_if_undecodable,
)
from hakiri.sources.files.part import BAD, FILE, PROVENANCE_COLUMNS, Part, quoted_col, spark_schema
from hakiri.sources.files.stand_ins import (
    GLOB_CHARS,
    Located,
    locate,
    plainly_named,
    reads_encoding,
    remove_copy,
    spark_charset,
    utf8_copy,
)
from hakiri.spark.engines import engine_of_session, support
from hakiri.spark.tally import tallies_in_process
from hakiri.spec.pipeline import FilesConfig

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "PROVENANCE_COLUMNS",
    "FileRead",
    "read_files",
    "with_provenance",
]

# ---------------------------------------------------------------- reading with Spark
#
# hakiri.sources takes nothing from hakiri.spark but its engine table (which engine can count
# malformed records as they pass), and imports pyspark inside functions only:
# the caller passes the SparkSession in, and wraps the call in
# hakiri.spark.errors.spark_errors for the Spark failures this code does not
# foresee (I/O errors, a JVM that died).


@dataclass(frozen=True)
class FileRead:
    """One batch of files as a lazy DataFrame, and how to judge what reading it left out.

    The malformed-record accounting rides along the one pass that consumes the frame
    (Spark's observed metrics, or hakiri's tally): call `verify()` after that pass (the
    staging write). Keep the FileRead while its frame (or one made from it) is used: the
    UTF-8 copies an engine may read instead of the files go with it.
    """

    frame: DataFrame
    # No file of the batch holds a data record (a header-only CSV, `[]`, a 0-row Parquet file):
    # the frame has no rows, and its columns are the declared ones or none at all.
    empty: bool = False
    checks: tuple[Check, ...] = ()  # one per Spark read of the batch

    def verify(self) -> int:
        """The records left out under on_malformed = "drop" (0 under "fail"), once the frame was
        consumed. Raises SourceDataError for malformed records under "fail" (naming the file and
        line of the first), for bytes the encoding cannot decode and for a broken JSON array."""
        return sum(check.judge() for check in self.checks)

    def explain(self, exc: BaseException) -> SourceDataError | None:
        """For a pass over the frame that failed: the record an engine's parser stopped at
        (Sail's, at a CSV record of the wrong width or a line that is not JSON), by file and
        line, when that is why; else None."""
        if not any(PARSER_STOPPED.search(str(e)) for e in _chain(exc)):
            return None
        tallied = [check for check in self.checks if check.tally is not None]
        for check in tallied:
            found = misshapen_records(check.config, check.part)
            if found is not None:
                return found
        return engine_stopped(tallied[0].config, tallied[0].part, exc) if tallied else None


def read_files(
    spark: SparkSession,
    project_root: Path,
    config: FilesConfig,
    files: Sequence[SourceFile],
    *,
    file_hashes: bool = False,
) -> FileRead:
    """Read exactly `files` (one batch) with Spark, as the source config declares.

    csv: `header`, `delimiter`, `encoding`, RFC 4180 quoting; the declared
    `columns` (every one must be in each file's header; other header columns are
    left out), else types inferred from all rows. json/jsonl: JSON Lines, except
    that a file starting with '[' is read as one array of records. parquet: as
    written, nanosecond timestamps included; declared `columns` are selected and cast.
    Column names are kept exactly as the files spell them.

    Malformed records (wrong number of CSV fields, a value that does not parse as
    its column's type, a line that is not a JSON object) fail the read under
    `on_malformed = "fail"`, with the file and line of the first one; under
    "drop" they are left out and counted. Both happen in the one pass that
    consumes the frame (an inferred CSV schema costs one more pass): the counts are
    Spark's observed metrics, judged by `FileRead.verify()` after that pass. Nothing
    is collected but counts.

    `file_hashes`: each row also gets its file's content hash as `_source_file_hash`, for
    an engine without input_file_name() (`with_provenance` uses that one); CSV and JSON
    Lines with declared columns only (their files are read one per read on such an engine).

    Raises SourceDataError for a missing file, an unknown encoding, a declared
    column the file lacks and a declared type Spark does not know; `verify()`
    raises for malformed records under "fail" and bytes the encoding cannot decode.
    """
    if not files:
        raise ValueError("read_files needs at least one file")
    observed = _observes(spark)
    tallied = not observed and tallies_in_process(spark)
    root = Path(os.path.abspath(project_root))
    located = [locate(root, file) for file in files]
    hashes = (
        {loc.path: f.content_hash for loc, f in zip(located, files, strict=True)}
        if file_hashes
        else None
    )
    if support(engine_of_session(spark), "glob_file_names").status != "works":
        located = [
            plainly_named(loc, root) if GLOB_CHARS.search(loc.path.as_posix()) else loc
            for loc in located
        ]
    transcoded = config.format != "parquet" and not reads_encoding(spark, config)
    if transcoded or config.format == "parquet":
        charset = "UTF-8" if transcoded else ""
    else:
        charset = spark_charset(spark, config)
    # A file without a data record adds no row, and its header or footer is no evidence of the
    # columns' types (inferred, a header-only CSV is all strings): it is left out of the read.
    located = [loc for loc in located if _has_records(config, loc)]
    if not located:
        return FileRead(_empty_frame(spark, config), empty=True)
    copies: list[Path] = []
    if transcoded:
        located = [utf8_copy(loc, config.encoding, copies, root) for loc in located]
    if config.format == "parquet":
        frame, part = _read_parquet(spark, config, located, observed)
        if part is None:
            return FileRead(frame)
        check = Check(config, part, observed, tallied)
        return _judged_ahead(FileRead(check.frame(), checks=(check,)), observed)

    if config.format == "csv":
        parts = csv_parts(spark, config, charset, located, observed)
    else:
        parts = json_parts(spark, config, charset, located, observed)
    checks = tuple(Check(config, part, observed, tallied) for part in parts)
    frames = [check.frame(hashes) for check in checks]
    frame = frames[0]
    for more in frames[1:]:
        frame = frame.unionByName(more, allowMissingColumns=True)
    if config.format != "csv" and config.columns is None:
        frame = in_file_order(config, located, frame)
    read = _judged_ahead(FileRead(frame, checks=checks), observed)
    for copy in copies:  # the engine reads them until the batch is done with its read
        weakref.finalize(read, remove_copy, copy)
    return read


def _observes(spark: SparkSession) -> bool:
    """Does the engine count malformed records as they pass (observed metrics, a corrupt-record
    column)? Apache Spark does; on Sail hakiri counts them itself (`Check`)."""
    return support(engine_of_session(spark), "malformed_fail").status == "works"


def _judged_ahead(read: FileRead, observed: bool) -> FileRead:
    """On an engine that can neither observe nor tally a part's counts as its rows pass: the
    verdict now, before any row is written (an aggregate of its own over the files), so a
    batch that must fail moves no data."""
    if not observed:
        for check in read.checks:
            if check.tally is None:
                check.judge()
    return read


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and the exceptions it was raised from."""
    seen: BaseException | None = exc
    while seen is not None:
        yield seen
        seen = seen.__cause__ or seen.__context__


def with_provenance(
    frame: DataFrame, project_root: Path, files: Sequence[SourceFile], batch_id: str
) -> DataFrame:
    """The frame plus `_source_file_hash` (the content hash of the file each row came from)
    and `_hakiri_batch_id`; call it on the frame `read_files` returned, before any shuffle.

    One file: the hash is a literal. Several (a snapshot batch): each row's file is
    looked up by Spark's `input_file_name()` in a small path -> hash map.
    """
    from pyspark.sql import functions as F

    if PROVENANCE_COLUMNS[0] in frame.columns:  # the read named each row's file already
        return frame.withColumn(PROVENANCE_COLUMNS[1], F.lit(batch_id))
    if len(files) == 1:
        source_hash = F.lit(files[0].content_hash)
    else:
        root = Path(os.path.abspath(project_root))
        pairs = []
        for file in files:
            uri = locate(root, file).path.as_uri()
            pairs += [F.lit(uri), F.lit(file.content_hash)]
        source_hash = F.element_at(F.create_map(*pairs), F.input_file_name())
    return frame.withColumn(PROVENANCE_COLUMNS[0], source_hash).withColumn(
        PROVENANCE_COLUMNS[1], F.lit(batch_id)
    )


def _empty_frame(spark: SparkSession, config: FilesConfig) -> DataFrame:
    if config.columns is None:
        return spark.range(0).select()
    return spark.createDataFrame([], spark_schema(spark, list(config.columns.items())))


def _has_records(config: FilesConfig, loc: Located) -> bool:
    try:
        return has_records(config, loc.path, loc.shown)
    except SourceUnreachable as exc:
        # The bytes may not decode: name the line that has them, as a read would.
        if config.format != "parquet":
            raise_if_undecodable(config, [loc])
        raise SourceDataError(exc.reason, exc.hint) from None


def _read_parquet(
    spark: SparkSession, config: FilesConfig, located: list[Located], observed: bool = True
) -> tuple[DataFrame, Part | None]:
    """The files' rows, and with declared `columns` the part whose malformed records (a value
    that does not convert to its declared type) `Check` judges; None without declared ones."""
    from pyspark.sql import functions as F

    nanos: dict[str, bool] = {}
    for loc in located:
        nanos.update(_nanosecond_columns(loc))
    if nanos and support(engine_of_session(spark), "parquet_nanoseconds").status != "works":
        frame = _parquet_in_tasks(spark, located)
        nanos = {}  # read as microsecond timestamps already
    else:
        if nanos:
            # Spark refuses TIMESTAMP(NANOS) (pandas' and pyarrow's default) unless it may
            # read them as longs; they become microsecond timestamps below.
            spark.conf.set("spark.sql.legacy.parquet.nanosAsLong", "true")
        reader = spark.read.option("mergeSchema", len(located) > 1)
        frame = reader.parquet(*[loc.spark_path for loc in located])

    def column(name: str) -> Column:
        if name not in nanos:
            return quoted_col(name)
        q = quoted_name(name)
        micros = f"({q} DIV 1000 - IF({q} % 1000 < 0, 1, 0))"  # floor, also before 1970
        epoch = "TIMESTAMP'1970-01-01 00:00:00 UTC'" if nanos[name] else "TIMESTAMP_NTZ'1970-01-01'"
        return F.expr(f"timestampadd(MICROSECOND, {micros}, {epoch})").alias(name)

    if config.columns is None:
        return (frame.select(*[column(name) for name in frame.columns]) if nanos else frame), None
    missing = [name for name in config.columns if name not in frame.columns]
    if missing:
        shown = located[0].shown if len(located) == 1 else f"{len(located)} parquet files"
        raise SourceDataError(
            f"{shown}: declared column {missing[0]!r} is not in the file",
            f"the file has {', '.join(repr(c) for c in frame.columns[:12])}; "
            "fix `columns` in the source config",
        )
    declared = spark_schema(spark, list(config.columns.items()))
    found = {f.name: f.dataType for f in frame.schema.fields}
    # A value that does not convert is a malformed record (on_malformed), named in BAD as
    # "amount: 'x4.50' is not decimal(10,2)"; columns already of their type need no check.
    problems = [
        F.when(
            column(f.name).isNotNull() & column(f.name).try_cast(f.dataType).isNull(),
            F.concat(
                F.lit(f"{f.name}: '"),
                column(f.name).cast("string"),
                F.lit(f"' is not {f.dataType.simpleString()}"),
            ),
        )
        for f in declared.fields
        if found[f.name] != f.dataType and f.name not in nanos
    ]
    converted = [
        (
            column(f.name).try_cast(f.dataType) if problems else column(f.name).cast(f.dataType)
        ).alias(f.name)
        for f in declared.fields
    ]
    if not problems:
        return frame.select(*converted), None
    raw = frame.select(
        *converted,
        F.coalesce(*problems).alias(BAD),
        _file_name(located, observed).alias(FILE),
    )
    columns = tuple(f.name for f in declared.fields)
    part = Part(raw, columns, columns, tuple(located), "parquet", has_bad=True)
    return raw, part


def _file_name(located: list[Located], observed: bool) -> Column:
    """Each row's file, for naming the first malformed one: Spark's file metadata; on an engine
    without it (Sail), the one file's name, or NULL for several (the message then names none)."""
    from pyspark.sql import functions as F

    if observed:
        return F.col("_metadata.file_path")
    return F.lit(located[0].path.as_uri() if len(located) == 1 else None).cast("string")


def _parquet_in_tasks(spark: SparkSession, located: list[Located]) -> DataFrame:
    """The files' rows read by pyarrow in an engine task (for an engine whose Parquet reader
    refuses nanosecond timestamps: Sail), their columns merged by name as Spark's mergeSchema
    does, nanosecond timestamps floored to microseconds as on Spark. The driver reads the
    footers only."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    merged = pa.unify_schemas([pq.read_schema(loc.path) for loc in located])
    wanted = pa.schema(
        [
            pa.field(f.name, pa.timestamp("us", f.type.tz))
            if pa.types.is_timestamp(f.type) and f.type.unit == "ns"
            else f
            for f in merged
        ]
    )
    # Positional names through the Python step (Sail cannot resolve a dotted name there).
    inner = pa.schema([pa.field(f"_c{i}", f.type) for i, f in enumerate(wanted)])
    try:
        schema = from_arrow_schema(inner)
    except (TypeError, NotImplementedError) as exc:  # an Arrow type Spark has no name for
        shown = located[0].shown if len(located) == 1 else f"{len(located)} parquet files"
        raise SourceDataError(
            f"{shown}: a column's type cannot be read by this engine: {first_line(exc)}",
            'write the column with a type Spark knows, or use engine = "spark"',
        ) from None
    paths = spark.createDataFrame([(str(loc.path),) for loc in located], "path string")
    rows = paths.mapInArrow(_parquet_reader(wanted, inner), schema)
    return rows.select(*[F.col(f"_c{i}").alias(f.name) for i, f in enumerate(wanted)])


def _parquet_reader(wanted: Any, inner: Any) -> Any:
    """The function each task runs: every row group of every file it is given, as `wanted`."""

    def read(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        for batch in batches:
            for path in batch.column(0).to_pylist():  # file names, not rows
                for part in pq.ParquetFile(path).iter_batches():
                    columns = []
                    for field in wanted:
                        if field.name not in part.schema.names:
                            columns.append(pa.nulls(part.num_rows, field.type))
                            continue
                        column = part.column(field.name)
                        if pa.types.is_timestamp(column.type) and column.type.unit == "ns":
                            column = pc.floor_temporal(column, unit="microsecond")
                        columns.append(column.cast(field.type))
                    yield pa.RecordBatch.from_arrays(columns, schema=inner)

    return read


def _nanosecond_columns(loc: Located) -> dict[str, bool]:
    """Top-level nanosecond timestamp columns, each with whether it is UTC-adjusted."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(loc.path)
    except (OSError, pa.ArrowException) as exc:
        raise SourceDataError(
            f"cannot read {loc.shown}: {first_line(exc)}",
            "check that the file is a complete Parquet file",
        ) from None
    return {
        f.name: f.type.tz is not None
        for f in schema
        if pa.types.is_timestamp(f.type) and f.type.unit == "ns"
    }
