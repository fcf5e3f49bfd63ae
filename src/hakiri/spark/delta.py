"""Delta Lake on Spark (delta-spark): the jars that match this PySpark, and the session settings.

The Python package `delta-spark` pins the release; its jar, `io.delta:delta-spark_<spark
major.minor>_2.13`, comes from Maven Central through hakiri's jar cache
(`hakiri.spark.packages`): resolved once, then read from disk.
"""

from __future__ import annotations

from importlib.metadata import version

__all__ = ["DELTA_SESSION_CONF", "delta_coordinates"]

# What a SparkSession needs for Delta's SQL (MERGE INTO, time travel, OPTIMIZE, VACUUM).
DELTA_SESSION_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


def delta_coordinates() -> tuple[str, ...]:
    """The Maven coordinates of the Delta jar for the installed PySpark and delta-spark."""
    import pyspark

    spark = ".".join(pyspark.__version__.split(".")[:2])
    return (f"io.delta:delta-spark_{spark}_2.13:{version('delta-spark')}",)
