"""Spark DataFrames over the context store's Delta tables, read by delta-spark.

A table is read at the version delta-rs opened in the driver (`versionAsOf`), so what the
driver checked (columns, ledger) and what Spark reads are the same version.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hakiri.destinations.context.commit import delta_errors, delta_uri, open_table
from hakiri.destinations.context.staging import check_table_name
from hakiri.errors import LoadError, SparkSetupError

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["frame_of", "require_delta", "table_frame"]


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
    """An open Delta table's rows, at the version it was opened at, as a Spark DataFrame."""
    from hakiri.spark.errors import spark_errors

    require_delta(spark)
    with delta_errors(location, "read", reading=True):
        version = table.version()
    with spark_errors(f"reading the Delta table at {location}", fallback=LoadError):
        return spark.read.format("delta").option("versionAsOf", version).load(delta_uri(location))


def require_delta(spark: SparkSession) -> SparkSession:
    """The session, if it was started with delta-spark; else a SparkSetupError naming the fix."""
    from hakiri.spark.delta import has_delta

    if not has_delta(spark):
        raise SparkSetupError(
            "this SparkSession was started without delta-spark, which the context store needs",
            "let hakiri start Spark (`hakiri apply`), or start the session with delta-spark's "
            "jar and `spark.sql.extensions = io.delta.sql.DeltaSparkSessionExtension`",
        )
    return spark
