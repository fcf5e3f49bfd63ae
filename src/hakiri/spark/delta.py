"""Delta Lake on Spark (delta-spark): the jars that match this PySpark, and the session settings.

The Python package `delta-spark` pins the release; its jar, `io.delta:delta-spark_<spark
major.minor>_2.13`, comes from Maven Central through hakiri's jar cache
(`hakiri.spark.packages`): resolved once, then read from disk. A delta-spark jar the user
lists in `[spark] jars` or HAKIRI_SPARK_JARS wins: then nothing is resolved.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from importlib.metadata import version
from pathlib import Path

__all__ = [
    "DELTA_EXTENSION",
    "DELTA_SESSION_CONF",
    "delta_coordinates",
    "delta_jars",
    "has_delta",
    "with_delta_conf",
]

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
# What a SparkSession needs for Delta's SQL (MERGE INTO, time travel, OPTIMIZE, VACUUM).
DELTA_SESSION_CONF = {
    "spark.sql.extensions": DELTA_EXTENSION,
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


def delta_coordinates() -> tuple[str, ...]:
    """The Maven coordinates of the Delta jar for the installed PySpark and delta-spark."""
    import pyspark

    spark = ".".join(pyspark.__version__.split(".")[:2])
    return (f"io.delta:delta-spark_{spark}_2.13:{version('delta-spark')}",)


def delta_jars(given: Iterable[str], env: Mapping[str, str] = os.environ) -> list[str]:
    """The jars to add for Delta: none when the user's own jars (`given`) include delta-spark,
    else the cached (or now resolved) jars of `delta_coordinates()`."""
    from hakiri.spark.packages import resolve_packages

    if any(Path(j.strip()).name.startswith("delta-spark") for j in given if j.strip()):
        return []
    return list(resolve_packages(delta_coordinates(), env))


def with_delta_conf(
    conf: Mapping[str, str | int | float | bool],
) -> dict[str, str | int | float | bool]:
    """`conf` plus Delta's session settings; extensions the user listed are kept, Delta's added."""
    merged = dict(conf)
    extensions = [e.strip() for e in str(merged.get("spark.sql.extensions", "")).split(",")]
    extensions = [e for e in extensions if e]
    if DELTA_EXTENSION not in extensions:
        extensions.append(DELTA_EXTENSION)
    merged["spark.sql.extensions"] = ",".join(extensions)
    merged.setdefault(
        "spark.sql.catalog.spark_catalog", DELTA_SESSION_CONF["spark.sql.catalog.spark_catalog"]
    )
    # Delta rebuilds a table's state from its log in this many tasks (default 50): the context
    # store's logs are small (a checkpoint every 10 commits), and every extra task costs more
    # than the work. And after each commit Delta writes a checksum file of the table's state,
    # which costs another job; nothing hakiri or delta-rs reads needs it. A 2-row append took
    # 4.6 s and now 0.9 s, a MERGE 3.8 s and now 1.1 s (docs/performance.md). A user's
    # settings win.
    merged.setdefault("spark.databricks.delta.snapshotPartitions", "1")
    merged.setdefault("spark.databricks.delta.writeChecksumFile.enabled", "false")
    return merged


def has_delta(spark: object) -> bool:
    """Can this session read and write Delta tables: Sail always can (Delta is built in); an
    Apache Spark session when it was started with Delta's SQL extension."""
    from hakiri.spark.engines import SAIL, engine_of_session

    if engine_of_session(spark) == SAIL:
        return True
    extensions = spark.conf.get("spark.sql.extensions", "")  # type: ignore[attr-defined]
    return DELTA_EXTENSION in (extensions or "")
