"""Staging in the context store: a batch's rows written by Spark as Parquet under `<store>/_staging/`.

One staging area per staged batch, `<store>/_staging/<16 hex>/`:

    rows/         the rows, as the engine wrote them (*.parquet, plus _SUCCESS and .crc files)
    quarantine/   rule violations, already in the quarantine table's columns (when any)
    batch.json    what the commit needs besides the rows (incremental_watermark's new mark)

The staging area sits in the store, so the commit can move (rename) the part
files into the table directory instead of copying them. Only visible `*.parquet`
files are data; row counts come from their Parquet footers, no data is read.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hakiri.destinations.base import LoadRequest, TargetColumn
from hakiri.destinations.context.types import spark_to_delta
from hakiri.errors import LoadError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType

__all__ = [
    "STAGING_DIR",
    "StagingArea",
    "check_table_name",
    "delta_type_name",
    "new_staging_area",
    "parquet_uri",
    "plain_schema",
    "read_parquet",
    "sql_type",
    "staged_columns",
    "staging_area",
    "writable_frame",
    "write_parquet",
]

STAGING_DIR = "_staging"
_MANIFEST = "batch.json"


def check_table_name(name: str, what: str) -> None:
    """A table of the context store is one directory directly under the store."""
    if (
        not name
        or name in (".", "..")
        or name.startswith(("_", "."))
        or any(c in name for c in "/\\\0")
    ):
        raise LoadError(
            f"{what} {name!r} cannot be a table of the context store",
            "a context table name is one directory name: no '/', '\\', and not starting with "
            "'_' or '.' (those are the store's own)",
        )


@dataclass(frozen=True)
class StagingArea:
    """One staged batch's directory: `<store>/_staging/<name>/`."""

    root: Path

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def rows_dir(self) -> Path:
        return self.root / "rows"

    @property
    def quarantine_dir(self) -> Path:
        return self.root / "quarantine"

    def exists(self) -> bool:
        return self.rows_dir.is_dir()

    @staticmethod
    def part_files(directory: Path) -> list[Path]:
        """The data files the engine wrote into `directory`, in name order (Apache Spark names
        them part-*.parquet, Sail <id>_<n>.<codec>.parquet; hidden and _ files are not data)."""
        if not directory.is_dir():
            return []
        return sorted(f for f in directory.glob("*.parquet") if not f.name.startswith((".", "_")))

    @staticmethod
    def count_rows(files: Sequence[Path]) -> int:
        """Rows in the files, from their Parquet footers (no data is read)."""
        import pyarrow.parquet as pq

        return sum(pq.read_metadata(f).num_rows for f in files)

    def write_manifest(self, document: dict[str, Any]) -> None:
        (self.root / _MANIFEST).write_text(json.dumps(document, sort_keys=True))

    def manifest(self) -> dict[str, Any]:
        path = self.root / _MANIFEST
        return json.loads(path.read_text()) if path.is_file() else {}

    def remove(self) -> None:
        """Delete the staging area; no error when it is gone already."""
        shutil.rmtree(self.root, ignore_errors=True)


def new_staging_area(store: Path, request: LoadRequest) -> StagingArea:
    """A fresh, unique staging directory name (16 hex digits), even for concurrent runs of one batch."""
    seed = "\x1f".join(
        (request.pipeline_id, request.target_table, request.batch_id, request.run_id)
    )
    digest = hashlib.sha256(f"{seed}\x1f{uuid.uuid4().hex}".encode()).hexdigest()[:16]
    return StagingArea(store / STAGING_DIR / digest)


def staging_area(store: Path, name: str) -> StagingArea:
    if not name or any(c in name for c in "/\\\0") or name in (".", ".."):
        raise LoadError(
            f"{name!r} is not a staging area of the context store", "report this as a bug"
        )
    return StagingArea(store / STAGING_DIR / name)


# ------------------------------------------------------------------ Spark side


def delta_type_name(data_type: DataType) -> str | None:
    """A Spark type as the context store records it: Delta's names, nested ones written like
    Spark's (array<long>, map<string,double>, struct<a:long>); None when Delta has no such type."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(data_type, ArrayType):
        element = delta_type_name(data_type.elementType)
        return None if element is None else f"array<{element}>"
    if isinstance(data_type, MapType):
        key, value = delta_type_name(data_type.keyType), delta_type_name(data_type.valueType)
        return None if key is None or value is None else f"map<{key},{value}>"
    if isinstance(data_type, StructType):
        fields = [(f.name, delta_type_name(f.dataType)) for f in data_type.fields]
        if not fields or any(t is None for _, t in fields):
            return None
        return "struct<" + ",".join(f"{n}:{t}" for n, t in fields) + ">"
    return spark_to_delta(data_type.simpleString())


# Characters Delta refuses in a column name unless the table uses column mapping, which
# delta-rs (plan, `context show`) does not read correctly: such names are refused when staged.
_DELTA_FORBIDDEN = " ,;{}()\n\t="


def _unwritable_name(name: str, data_type: DataType) -> str | None:
    """The first name, this column's or a nested field's, that Delta cannot write as it is."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if any(c in _DELTA_FORBIDDEN for c in name):
        return name
    if isinstance(data_type, StructType):
        for field in data_type.fields:
            found = _unwritable_name(field.name, field.dataType)
            if found is not None:
                return found
    elif isinstance(data_type, ArrayType):
        return _unwritable_name("", data_type.elementType)
    elif isinstance(data_type, MapType):
        return _unwritable_name("", data_type.keyType) or _unwritable_name("", data_type.valueType)
    return None


def staged_columns(spark_schema: Any) -> tuple[TargetColumn, ...]:
    """The staged columns of a Spark schema (a StructType, void columns already cast), with Delta types.

    Every column of a context table is nullable: Spark reads Parquet as nullable anyway,
    and a batch whose column happens to have no NULL must not differ from one that has."""
    columns: list[TargetColumn] = []
    seen: set[str] = set()
    for field in spark_schema.fields:
        delta_type = delta_type_name(field.dataType)
        if delta_type is None:
            raise LoadError(
                f"column {field.name!r} has Spark type {field.dataType.simpleString()}, which the "
                "context store (Delta Lake) cannot hold",
                "convert it in a transform (a cast, or to_json(...)); see docs/types.md",
            )
        bad = _unwritable_name(field.name, field.dataType)
        if bad is not None:
            raise LoadError(
                f"column name {bad!r} has a character Delta Lake does not allow without column "
                f"mapping (one of {_DELTA_FORBIDDEN!r})",
                'rename the column in a transform (op = "rename"); column-mapped tables '
                "cannot be read back by `hakiri plan` and `hakiri context show`",
            )
        # Delta column names are unique regardless of case.
        if field.name.lower() in seen:
            raise LoadError(
                f"the rows have two columns named {field.name!r} (ignoring case)",
                "rename one of them in a transform; a Delta table's column names differ in more than case",
            )
        seen.add(field.name.lower())
        columns.append(TargetColumn(field.name, delta_type, True))
    if not columns:
        raise LoadError("the rows to load have no columns", "select at least one column")
    return tuple(columns)


def writable_frame(frame: DataFrame) -> DataFrame:
    """The frame with all-NULL (void) columns cast to string: Delta has no void type."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import NullType

    void = [f.name for f in frame.schema.fields if isinstance(f.dataType, NullType)]
    for name in void:
        frame = frame.withColumn(name, F.col(name).cast("string"))
    return frame


def parquet_uri(path: Path) -> str:
    """A local path for Spark: explicitly file:, whatever the cluster's default filesystem is."""
    return "file://" + str(path.resolve())


def write_parquet(frame: DataFrame, directory: Path, context: str) -> None:
    """Spark writes the frame's rows as Parquet files into a new `directory`."""
    from hakiri.spark.errors import spark_errors

    _check_timestamp_encoding(frame)
    with spark_errors(context, fallback=LoadError):
        frame.write.mode("error").parquet(parquet_uri(directory))
    if not StagingArea.part_files(directory):
        # No rows: Apache Spark still writes one file with the columns, Sail writes none. The
        # columns are evidence (a new table's schema), so the file is written here: no rows.
        _write_empty(frame, directory)


def _write_empty(frame: DataFrame, directory: Path) -> None:
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import to_arrow_schema

    directory.mkdir(parents=True, exist_ok=True)
    schema = to_arrow_schema(frame.schema, timezone="UTC")
    pq.write_table(schema.empty_table(), directory / "part-00000-empty.parquet")


def _check_timestamp_encoding(frame: DataFrame) -> None:
    """Delta stores timestamps as microseconds: Spark's INT96 (its default) and millis will not do."""
    if "timestamp" not in frame.schema.simpleString():
        return
    setting = "spark.sql.parquet.outputTimestampType"
    value = frame.sparkSession.conf.get(setting, "INT96") or "INT96"
    if value.upper() != "TIMESTAMP_MICROS":
        raise LoadError(
            f"the context store needs Spark to write timestamps as TIMESTAMP_MICROS, and {setting} is {value}",
            f"remove {setting} from [spark.conf] in hakiri.toml (hakiri sets it to TIMESTAMP_MICROS)",
        )


def read_parquet(spark: SparkSession, files: Sequence[Path], schema: Any = None) -> DataFrame:
    """A DataFrame over Parquet files (an empty one with `schema` when there are none). Without
    `schema`, staged files written by Apache Spark are read with the schema their footers
    record, spelt in SQL (`plain_schema`), so that no collated string reaches a Delta log."""
    if not files:
        if schema is None:  # pragma: no cover - callers always pass a schema for the empty case
            raise LoadError("no Parquet files to read", "report this as a bug")
        return spark.createDataFrame([], schema)
    if schema is None:
        schema = plain_schema(files[0])
    reader = spark.read if schema is None else spark.read.schema(schema)
    return reader.parquet(*(parquet_uri(f) for f in files))


_SPARK_SCHEMA_KEY = b"org.apache.spark.sql.parquet.row.metadata"


def plain_schema(file: Path) -> str | None:
    """The Spark schema a Parquet file's footer records, as a DDL string whose strings are
    plain `string`; None for a file Apache Spark did not write (Sail's, pyarrow's).

    Why: a PySpark client names a `StringType()`'s collation (UTF8_BINARY) when it sends a
    type to a Spark Connect server (a mapInArrow schema: how PostgreSQL, CDC and REST sources
    read), and Spark 4 then types the column as an explicitly collated string. A cast to
    `string` does not undo it in the files Spark writes (the optimizer drops the cast as a
    no-op), so the staged files' footers say `string collate UTF8_BINARY`, and a Delta table
    written from them records that in its log, where delta-rs (plan, `context show`, any other
    reader) cannot read it. Read back with the schema spelt in SQL, parsed by the engine, the
    same columns are plain strings. (`repair` mends tables written before this.)"""
    import json

    import pyarrow.parquet as pq
    from pyspark.sql.types import StructType

    recorded = (pq.read_metadata(file).metadata or {}).get(_SPARK_SCHEMA_KEY)
    if recorded is None:
        return None
    schema = StructType.fromJson(json.loads(recorded))
    return ", ".join(f"{_quoted(f.name)} {sql_type(f.dataType)}" for f in schema.fields)


def sql_type(data_type: DataType) -> str:
    """A Spark type spelt in SQL (`struct<`a b`:string,n:array<bigint>>`), strings uncollated."""
    from pyspark.sql.types import ArrayType, MapType, StringType, StructType

    if isinstance(data_type, StringType):
        return "string"
    if isinstance(data_type, ArrayType):
        return f"array<{sql_type(data_type.elementType)}>"
    if isinstance(data_type, MapType):
        return f"map<{sql_type(data_type.keyType)},{sql_type(data_type.valueType)}>"
    if isinstance(data_type, StructType):
        fields = ",".join(f"{_quoted(f.name)}:{sql_type(f.dataType)}" for f in data_type.fields)
        return f"struct<{fields}>"
    return data_type.simpleString()


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
