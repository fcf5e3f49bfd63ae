"""Spark plumbing: SparkSession factory, JDBC driver resolution, JDBC URLs.

Nothing here imports pyspark at module import time: `hakiri --help` and
`hakiri plan` import this package without paying for a JVM.
"""

from hakiri.spark.session import (
    JarResolution,
    build_spark_session,
    jdbc_url_from_postgres_url,
    resolve_jdbc_jars,
)

__all__ = [
    "JarResolution",
    "build_spark_session",
    "jdbc_url_from_postgres_url",
    "resolve_jdbc_jars",
]
