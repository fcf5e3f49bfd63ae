"""Spark plumbing: SparkSession factory, Java check, JDBC driver resolution, JDBC URLs, errors.

Nothing here imports pyspark at module import time: `hakiri --help` and
`hakiri plan` import this package without paying for a JVM.
"""

from hakiri.spark.errors import spark_errors, translate
from hakiri.spark.session import (
    JarResolution,
    build_spark_session,
    jdbc_url_from_postgres_url,
    resolve_jdbc_jars,
    session_for,
)

__all__ = [
    "JarResolution",
    "build_spark_session",
    "jdbc_url_from_postgres_url",
    "resolve_jdbc_jars",
    "session_for",
    "spark_errors",
    "translate",
]
