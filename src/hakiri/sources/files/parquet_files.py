"""Parquet batches: read as written, declared `columns` selected and cast.

Nanosecond timestamps (pandas' and pyarrow's default) become microsecond ones: read as
longs by Spark, or, on an engine that refuses them (Sail), read by pyarrow in engine tasks
(mapInArrow). A value that does not convert to its declared type is a malformed record.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from hakiri.errors import SourceDataError
from hakiri.guards.spark_types import quoted_name
from hakiri.sources.files.inspect import first_line
from hakiri.sources.files.part import BAD, FILE, Part, quoted_col, spark_schema
from hakiri.sources.files.stand_ins import Located
from hakiri.spark.engines import engine_of_session, support
from hakiri.spec.pipeline import FilesConfig

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


def read_parquet(
    spark: SparkSession,
    config: FilesConfig,
    located: list[Located],
    observed: bool = True,
    per_file: bool = False,
) -> tuple[DataFrame, Part | None]:
    """The files' rows, and with declared `columns` the part whose malformed records (a value
    that does not convert to its declared type) `Check` judges; None without declared ones.
    `per_file`: each file is read on its own and its rows carry its name in FILE (for each
    row's file's hash on an engine without input_file_name(), Sail), the frames united by
    name in the order of the files' merged footers (Spark's mergeSchema)."""
    from pyspark.sql import functions as F

    nanos: dict[str, bool] = {}
    for loc in located:
        nanos.update(_nanosecond_columns(loc))
    in_tasks = (
        bool(nanos) and support(engine_of_session(spark), "parquet_nanoseconds").status != "works"
    )
    if in_tasks:
        nanos = {}  # read as microsecond timestamps already
    elif nanos:
        # Spark refuses TIMESTAMP(NANOS) (pandas' and pyarrow's default) unless it may
        # read them as longs; they become microsecond timestamps below.
        spark.conf.set("spark.sql.legacy.parquet.nanosAsLong", "true")

    def read(locs: list[Located]) -> DataFrame:
        if in_tasks:
            return _parquet_in_tasks(spark, locs)
        reader = spark.read.option("mergeSchema", len(locs) > 1)
        return reader.parquet(*[loc.spark_path for loc in locs])

    frame = _read_one_by_one(located, read) if per_file else read(located)
    carried = [F.col(FILE)] if per_file else []
    data = [c for c in frame.columns if c != FILE]

    def column(name: str) -> Column:
        if name not in nanos:
            return quoted_col(name)
        q = quoted_name(name)
        micros = f"({q} DIV 1000 - IF({q} % 1000 < 0, 1, 0))"  # floor, also before 1970
        epoch = "TIMESTAMP'1970-01-01 00:00:00 UTC'" if nanos[name] else "TIMESTAMP_NTZ'1970-01-01'"
        return F.expr(f"timestampadd(MICROSECOND, {micros}, {epoch})").alias(name)

    if config.columns is None:
        return (frame.select(*[column(name) for name in data], *carried) if nanos else frame), None
    missing = [name for name in config.columns if name not in data]
    if missing:
        shown = located[0].shown if len(located) == 1 else f"{len(located)} parquet files"
        raise SourceDataError(
            f"{shown}: declared column {missing[0]!r} is not in the file",
            f"the file has {', '.join(repr(c) for c in data[:12])}; "
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
        return frame.select(*converted, *carried), None
    raw = frame.select(
        *converted,
        F.coalesce(*problems).alias(BAD),
        (F.col(FILE) if per_file else _file_name(located, observed)).alias(FILE),
    )
    columns = tuple(f.name for f in declared.fields)
    part = Part(raw, columns, columns, tuple(located), "parquet", has_bad=True)
    return raw, part


def _read_one_by_one(located: list[Located], read: Any) -> DataFrame:
    """Each file read on its own with its name in FILE, united by name; the columns in the
    order of the files' footers merged (as one read with mergeSchema has them)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    merged = pa.unify_schemas([pq.read_schema(loc.path) for loc in located])
    frames = [read([loc]) for loc in located]
    types: dict[str, Any] = {}
    for frame in frames:
        for found in frame.schema.fields:
            types.setdefault(found.name, found.dataType)
    # A column a file lacks is NULL of the batch's type there (a union that fills it for us
    # may type the NULLs as text, and the column with them: Sail does).
    united = None
    for loc, frame in zip(located, frames, strict=True):
        columns = [
            quoted_col(name) if name in frame.columns else F.lit(None).cast(types[name]).alias(name)
            for name in merged.names
        ]
        one = frame.select(*columns, F.lit(loc.path.as_uri()).alias(FILE))
        united = one if united is None else united.unionByName(one)
    assert united is not None
    return united


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
