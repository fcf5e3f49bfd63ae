"""Spark DataFrames over the context store's Delta tables: the current version's files, read by Spark.

Spark has no Delta reader here (delta-spark's jars are not available), so a table is
read as the Parquet files delta-rs lists for its current version, with the table's
own schema. That is exact for tables hakiri writes; a table that needs a real Delta
reader (deletion vectors, column mapping: written by other engines) is refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from hakiri.destinations.context.commit import delta_errors, live_files, open_table
from hakiri.destinations.context.staging import check_table_name, read_parquet
from hakiri.errors import LoadError

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = ["frame_of", "spark_schema_of", "table_frame"]

# Reader features that change which rows or columns a Parquet file holds.
_UNREADABLE = frozenset({"deletionVectors", "columnMapping"})


def spark_schema_of(table: DeltaTable, location: Path) -> StructType:
    """The table's schema as a Spark StructType (Delta's schema JSON is Spark's)."""
    from pyspark.sql.types import StructType

    with delta_errors(location, "read", reading=True):
        return StructType.fromJson(json.loads(table.schema().to_json()))


def table_frame(spark: SparkSession, store: Path, name: str) -> DataFrame:
    """The current rows of the context table `name`, as a Spark DataFrame (nothing is read yet)."""
    check_table_name(name, "table")
    location = store / name
    table = open_table(location)
    if table is None:
        raise LoadError(
            f"there is no table {name!r} in the context store at {store}",
            "load that table first (another pipeline, or an earlier table of this one)",
        )
    return frame_of(spark, table, location)


def frame_of(spark: SparkSession, table: DeltaTable, location: Path) -> DataFrame:
    """An open Delta table's current rows as a Spark DataFrame."""
    with delta_errors(location, "read", reading=True):
        features = set(table.protocol().reader_features or ())
    unreadable = sorted(features & _UNREADABLE)
    if unreadable:
        raise LoadError(
            f"the Delta table at {location} uses {', '.join(unreadable)}, which hakiri cannot read",
            "rewrite the table without that feature, or load into a new table",
        )
    return read_parquet(spark, live_files(table, location), spark_schema_of(table, location))
